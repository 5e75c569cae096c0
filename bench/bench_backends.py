"""Every backend side by side on the same element-wise signature set (issue 22).

For each backend (jax, xla, interpreter, iree, pjrt: whichever load here) and the fixed
signature set of bench_throughput.py (22 (op, type) pairs over the families):

- **compile time per signature**: ``backend.batch_executable(sig)`` on an empty cache
  plus its first call on one batch, minus a second call on the same batch (jax compiles
  on first call; the others when asked) -- the cost a fresh signature adds;
- **checked cases per second**: the suite's own path (``Runner.run_signature``: values,
  oracle, masks, backend, verdict, record) timed on cached signatures, so no compile
  is in it;
- each backend's compile cost per signature as a **ratio to xla's** (the same XLA
  compiler straight from the canonical text), on the signatures both compiled.

Each backend runs as a run runs it: in a child process where it isolates by default
(xla, interpreter, iree, pjrt: the interpreter aborts its process on some inputs), so
a pipe round trip per request (~0.1 ms) is in those numbers; jax runs in process. A
signature a backend declines (``Unsupported``) or fails (a crash included) is left out
of its numbers and counted. Medians over ``--reps``; the machine is shared, so
ratios are what to read, not absolute times.

    python bench/bench_backends.py [--quick] [--backends jax,xla,...] [--json OUT.json]

``pjrt`` is ``pjrt:xla_cpu_pjrt`` when OpenXLA's CPU plugin is installed (extra
``[pjrt-cpu]``), else ``CONFORMANCE_PJRT_PLUGIN``, else ``pjrt:jaxlib-cpu``.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_throughput as bt  # noqa: E402  (the signature set, jax set up as it likes)

import numpy as np  # noqa: E402

from conformance.backends import BackendLoadError, Unsupported, get_backend  # noqa: E402
from conformance.core.results import ResultsWriter  # noqa: E402
from conformance.apps.runner import RunConfig, Runner  # noqa: E402

MODES = {"quick": {"per_pair": 1, "reps": 2, "batches": 3},
         "default": {"per_pair": 2, "reps": 3, "batches": 6}}


def pjrt_locator() -> str:
    from conformance.backends.pjrt_backend import JAXLIB_CPU, locate
    if os.environ.get("CONFORMANCE_PJRT_PLUGIN"):
        return "pjrt:" + os.environ["CONFORMANCE_PJRT_PLUGIN"]
    try:
        locate("xla_cpu_pjrt")
        return "pjrt:xla_cpu_pjrt"
    except BackendLoadError:
        return f"pjrt:{JAXLIB_CPU}"


@dataclasses.dataclass
class Result:
    locator: str
    name: str = ""
    error: str | None = None
    compile_s: dict[str, float] = dataclasses.field(default_factory=dict)   # sig -> median
    declined: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)
    cases: int = 0
    seconds: list[float] = dataclasses.field(default_factory=list)
    isolated: bool = False

    @property
    def cases_per_s(self) -> float | None:
        return self.cases / statistics.median(self.seconds) if self.seconds else None


def compile_cost(backend, item: bt.Item, seed: int, batch_size: int) -> float:
    """Seconds a fresh signature adds: compile + first call - a warm call."""
    stacked = list(bt.inputs_for(item, seed, 0, batch_size))
    backend.clear_cache()
    bt.jax.clear_caches()              # jax's own jit cache would make a re-compile free
    gc.collect()
    t0 = time.perf_counter()
    exe = backend.batch_executable(item.sig)
    exe(stacked)
    t1 = time.perf_counter()
    exe(stacked)
    t2 = time.perf_counter()
    return max((t1 - t0) - (t2 - t1), 0.0)


def measure(locator: str, items: list[bt.Item], seed: int, reps: int, batches: int,
            tmp: Path) -> Result:
    r = Result(locator)
    try:
        backend = get_backend(locator)
        if backend.isolate is not False:               # as a run runs it (xla, iree...)
            from conformance.checking.isolation import isolated
            name, backend = backend.name, isolated(backend, timeout=120.0,
                                                   log_path=str(tmp / f"{backend.name}.log"))
            backend.name = name
    except BackendLoadError as e:
        r.error = str(e)
        return r
    r.name = backend.name
    r.isolated = backend.isolate is not False and hasattr(backend, "close")
    depth = bt.DEPTHS["quick"]
    ok: list[bt.Item] = []
    for it in items:
        times = []
        try:
            for _ in range(reps):
                times.append(compile_cost(backend, it, seed, depth.batch_size))
        except Unsupported:
            r.declined.append(it.sig.key())
            continue
        except Exception as e:  # noqa: BLE001 - a failure is counted, not timed
            r.failed.append(f"{it.sig.key()}: {type(e).__name__}: {str(e)[:120]}")
            continue
        r.compile_s[it.sig.key()] = statistics.median(times)
        ok.append(it)
    out = Path(tempfile.mkdtemp(prefix=f"bench-{r.name}-", dir=tmp))
    writer = ResultsWriter(out / "results.jsonl")
    runner = Runner(RunConfig(backends=(backend.name,), depth="quick", seed=seed, out=out,
                              max_repros=0, progress=False), [backend], writer)
    runner.depth = dataclasses.replace(runner.depth, batches=batches)
    with np.errstate(all="ignore"):
        for it in ok:                                  # warm-up: compile every signature
            runner.run_signature(it.spec, it.key, it.index, it.sig)
        for _ in range(reps):
            gc.collect()
            t = time.perf_counter()
            for it in ok:
                runner.run_signature(it.spec, it.key, it.index, it.sig)
            r.seconds.append(time.perf_counter() - t)
    writer.close()
    r.cases = len(ok) * batches * depth.batch_size
    backend.clear_cache()
    if hasattr(backend, "close"):
        backend.close()
    return r


def ratios(results: list[Result], base: str = "xla") -> dict[str, dict[str, Any]]:
    """Per backend: median compile seconds per signature, and the median over the
    signatures both compiled of (its compile time / xla's)."""
    ref = next((r for r in results if r.name == base and not r.error), None)
    out = {}
    for r in results:
        if r.error:
            continue
        row: dict[str, Any] = {
            "compile_ms_median": round(1e3 * statistics.median(r.compile_s.values()), 2)
            if r.compile_s else None}
        if ref is not None:
            shared = [k for k in r.compile_s if ref.compile_s.get(k)]
            if shared:
                row["compile_vs_xla"] = round(statistics.median(
                    r.compile_s[k] / ref.compile_s[k] for k in shared), 2)
                row["compile_vs_xla_total"] = round(
                    sum(r.compile_s[k] for k in shared) / sum(ref.compile_s[k] for k in shared), 2)
                row["shared_signatures"] = len(shared)
        out[r.name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 signature per pair, 2 reps")
    ap.add_argument("--backends", default=None,
                    help="comma-separated locators (default: jax,xla,interpreter,iree,pjrt)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    mode = MODES["quick" if args.quick else "default"]
    locators = (args.backends.split(",") if args.backends else
                ["jax", "xla", "interpreter", "iree", pjrt_locator()])
    items, dropped = bt.plan(mode["per_pair"], args.seed, bt.DEPTHS["quick"].shape_profile)
    load0 = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for loc in locators:
            print(f"... {loc}", file=sys.stderr, flush=True)
            results.append(measure(loc, items, args.seed, mode["reps"], mode["batches"],
                                   Path(tmp)))
    table = ratios(results)
    print(f"{len(items)} element-wise signatures ({len(dropped)} dropped), "
          f"{mode['batches']} batches of {bt.DEPTHS['quick'].batch_size} cases each, "
          f"median of {mode['reps']}; load average {load0[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"{'backend':24} {'cases/s':>9} {'compile ms/sig':>15} {'vs xla (median)':>16} "
          f"{'vs xla (sum)':>13} {'declined':>9} {'failed':>7}")
    for r in results:
        if r.error:
            print(f"{r.locator:24} not loaded: {r.error}")
            continue
        row = table[r.name]
        cps = f"{r.cases_per_s:9.0f}" if r.cases_per_s else f"{'-':>9}"
        ms = row["compile_ms_median"]
        print(f"{r.name:24} {cps} {ms if ms is not None else '-':>15} "
              f"{row.get('compile_vs_xla', '-'):>16} {row.get('compile_vs_xla_total', '-'):>13} "
              f"{len(r.declined):>9} {len(r.failed):>7}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "mode": mode, "signatures": len(items), "dropped": dropped,
            "loadavg": [load0[0], os.getloadavg()[0]], "ratios": table,
            "backends": [dataclasses.asdict(r) | {"cases_per_s": r.cases_per_s}
                         for r in results]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
