"""Reading and judging op by op a module of about 1,000 ops (issue 29).

    python bench/bench_modules.py                  # 1,000 ops, 4 cases (about a minute)
    python bench/bench_modules.py --layers 20      # a smaller module
    python bench/bench_modules.py --json out.json

The module is a deep jax function exported with jax.export (nothing kept on disk but a
temporary file): ``--layers`` residual layers of ``x + 0.5 * tanh(x @ w_i + b_i)`` on an
8x8 f32 activation, each with its own weights (arguments), about 7 StableHLO ops a layer
after jax's broadcasts. Measured, in one process after a warm-up of the jax backend:

- **read**: conformance.mlir.reader.read_file (parse, verify, every op mapped to its
  spec and printed again), after a warm-up read of a one-layer module (the specs loaded);
- **check 1**: conformance.checking.modules.op_by_op_findings on the jax backend, every
  op alone on the backend's own operand values and judged by its verdict, twice: cold
  (``jax.clear_caches()`` first: every distinct op signature compiled) and warm (the
  same backend again: compiled executables cached); its process CPU time is split,
  exclusively (a nested call counts for the innermost), into the backend (``executable``: compile or cache, and running it), the oracle
  (conformance.oracles.evaluate_batch and implementation_defined) and the rest (the
  verdicts' comparisons, bookkeeping);
- **checks 2 and 3** (``--whole``): the rest of check_module, timed as a whole.

Target (issue 29): the oracle's share of check 1's CPU time below the backend's, cold
and warm (warm is the strict one: no compile time on the backend's side).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")


class Split:
    """Exclusive CPU and wall time per category (the innermost running one counts)."""

    def __init__(self):
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.stack: list[list] = []

    def _charge(self, now_cpu, now_wall):
        if self.stack:
            name, c0, w0 = self.stack[-1]
            self.cpu[name] = self.cpu.get(name, 0.0) + now_cpu - c0
            self.wall[name] = self.wall.get(name, 0.0) + now_wall - w0

    def wrap(self, name, fn):
        def timed(*args, **kwargs):
            c, w = time.process_time(), time.perf_counter()
            self._charge(c, w)
            self.stack.append([name, c, w])
            self.calls[name] = self.calls.get(name, 0) + 1
            try:
                return fn(*args, **kwargs)
            finally:
                c, w = time.process_time(), time.perf_counter()
                self._charge(c, w)
                self.stack.pop()
                if self.stack:
                    self.stack[-1][1:] = [c, w]
        return timed


def deep(x, *params):
    import jax.numpy as jnp
    for w, b in zip(params[0::2], params[1::2]):
        x = x + 0.5 * jnp.tanh(x @ w + b)
    return x


def export_deep(layers: int, folder: Path) -> Path:
    import jax
    import jax.numpy as jnp
    from jax import export
    f32 = jnp.float32
    specs = [jax.ShapeDtypeStruct((8, 8), f32)]
    for _ in range(layers):
        specs += [jax.ShapeDtypeStruct((8, 8), f32), jax.ShapeDtypeStruct((8,), f32)]
    exp = export.export(jax.jit(deep))(*specs)
    path = folder / f"deep-{layers}.mlirbc"
    path.write_bytes(exp.mlir_module_serialized)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=143, help="residual layers (143: ~1,000 ops)")
    p.add_argument("--batch", type=int, default=4, help="value cases")
    p.add_argument("--whole", action="store_true", help="also time checks 2 and 3")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)

    import numpy as np
    from conformance import oracles
    from conformance.apps.check import inputs_for
    from conformance.backends import get_backend
    from conformance.checking import modules
    from conformance.mlir.reader import read_file

    with tempfile.TemporaryDirectory() as tmp:
        read_file(export_deep(1, Path(tmp)))     # warm-up: specs loaded, MLIR context made
        path = export_deep(args.layers, Path(tmp))
        c, w = time.process_time(), time.perf_counter()
        read = read_file(path)
        read_cpu, read_wall = time.process_time() - c, time.perf_counter() - w
    ops = len(read.program.operations)
    inputs, n = inputs_for(read.program, 0, "deep", args.batch, None)
    # draws with special values make every layer NaN after the first; ordinary values
    # keep the module's numbers finite, as a model's are
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, x.shape).astype(x.dtype) for x in inputs]

    def check1(backend):
        """check 1 timed, its CPU split by part (module docstring)."""
        split = Split()
        real_executable = backend.executable

        def executable(sig):
            return split.wrap("backend", real_executable(sig))
        backend.executable = split.wrap("backend", executable)
        saved = (oracles.evaluate_batch, oracles.implementation_defined)
        oracles.evaluate_batch = split.wrap("oracle", oracles.evaluate_batch)
        oracles.implementation_defined = split.wrap("oracle", oracles.implementation_defined)
        try:
            run = split.wrap("rest", modules.op_by_op_findings)
            c, w = time.process_time(), time.perf_counter()
            found = run(backend, read, inputs, n)
            cpu, wall = time.process_time() - c, time.perf_counter() - w
        finally:
            oracles.evaluate_batch, oracles.implementation_defined = saved
            del backend.executable
        share = {k: split.cpu.get(k, 0.0) / cpu for k in ("backend", "oracle", "rest")}
        return found, {"cpu_s": cpu, "wall_s": wall, "ms_per_op": 1e3 * wall / ops,
                       "cpu_s_by_part": split.cpu, "wall_s_by_part": split.wall,
                       "cpu_share": share, "calls": split.calls}

    import jax
    jax.clear_caches()
    backend = get_backend("jax")
    _, cold = check1(backend)                  # every distinct op compiled: cold
    (findings, judged, unsupported), warm = check1(backend)     # compiled: warm
    whole = None
    if args.whole:
        c, w = time.process_time(), time.perf_counter()
        v = modules.check_module(get_backend("jax"), read, inputs, n)
        whole = {"outcome": v.outcome, "cpu_s": time.process_time() - c,
                 "wall_s": time.perf_counter() - w}

    result = {
        "ops": ops, "batch": n, "judged": judged, "findings": len(findings),
        "unsupported": len(unsupported),
        "read": {"cpu_s": read_cpu, "wall_s": read_wall, "ms_per_op": 1e3 * read_wall / ops},
        "check1_cold": cold, "check1_warm": warm, "whole": whole,
        "target": {"oracle_share_below_backend_share":
                   all(c["cpu_share"]["oracle"] < c["cpu_share"]["backend"]
                       for c in (cold, warm))},
        "python": sys.version.split()[0], "cpus": os.cpu_count(),
    }
    print(f"module: {ops} ops ({args.layers} layers), {n} cases; {judged} judged, "
          f"{len(findings)} findings")
    print(f"read:    {read_wall:7.2f} s wall, {read_cpu:7.2f} s CPU "
          f"({1e3 * read_wall / ops:.2f} ms per op)")
    for label, c in (("cold", cold), ("warm", warm)):
        print(f"check 1, {label} (compiles {'included' if label == 'cold' else 'cached'}): "
              f"{c['wall_s']:7.2f} s wall, {c['cpu_s']:7.2f} s CPU "
              f"({c['ms_per_op']:.2f} ms per op)")
        for k in ("backend", "oracle", "rest"):
            print(f"  {k:8s} {c['cpu_s_by_part'].get(k, 0.0):7.2f} s CPU  "
                  f"{100 * c['cpu_share'][k]:5.1f}%  ({c['calls'].get(k, 0)} calls)")
    if whole:
        print(f"checks 2+3: {whole['wall_s']:7.2f} s wall, {whole['cpu_s']:7.2f} s CPU "
              f"(whole check_module, {whole['outcome']})")
    ok = result["target"]["oracle_share_below_backend_share"]
    print(f"target: oracle share < backend share, cold and warm: {'met' if ok else 'MISSED'}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
