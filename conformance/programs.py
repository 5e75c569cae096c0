"""``conformance programs``: generated multi-op programs checked on backends (issue 19).

    conformance programs --count 200 --seed 0 --backend jax,xla --out DIR

Program ``i`` of seed ``S`` (generators/programs.py) gets ``--batch`` value cases; every
backend runs it (conformance.checker_programs: exact against the program oracle,
metamorphic where inexact ops are involved); a divergence is minimised and saved as a
reproducer under ``DIR/programs/BACKEND/S-i/`` (``program.mlir``: the StableHLO text;
``inputs.npz``: the arguments, one case; ``expected.npz``: the oracle's results;
``actual.npz``: the backend's; ``program.json``; ``repro.py``). Each program and backend
is one record of kind ``program`` in ``DIR/results.jsonl``, written as it happens.
Backends that ask for isolation (xla, interpreter) run in a child process that is
restarted after a crash (XLA CPU segfaults compiling some valid programs): that program
is a ``crash`` record and the run goes on.

Exit status: 0 when nothing diverged (classes named in ``--accept`` aside), 1 otherwise.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from conformance.backends import get_backend
from conformance.backends.base import Unsupported
from conformance.checker_programs import check_program, minimize
from conformance.core.program import Program
from conformance.generators.programs import Config, draw_inputs, generate, rng_for
from conformance.oracles.programs import evaluate_program

EXIT_OK, EXIT_DIVERGED = 0, 1


def _csv(text: str | None) -> tuple[str, ...] | None:
    items = tuple(x.strip() for x in (text or "").split(",") if x.strip())
    return items or None


def config_of(args) -> Config:
    return Config(max_ops=max(2, args.max_ops), ops=_csv(args.ops), types=_csv(args.types))


# ---------------------------------------------------------------------------------------
# One program on one backend
# ---------------------------------------------------------------------------------------

def check_one(backend, seed: int, index: int, config: Config, batch: int,
              out: Path | None, do_minimize: bool = True) -> dict[str, Any]:
    """The record of program ``index`` on ``backend`` (and its reproducer, if it diverged)."""
    drawn = generate(seed, index, config)
    program = drawn.program
    inputs = draw_inputs(drawn, rng_for(seed, index), batch)
    started = time.perf_counter()
    verdict = check_program(backend, program, inputs, batch=batch)
    rec: dict[str, Any] = {
        "kind": "program", "id": f"{seed}:program:{index}", "backend": backend.name,
        "seed": seed, "index": index, "ops": program.ops(), "patterns": list(drawn.patterns),
        "size": len(program.operations), **verdict.to_json(),
        "seconds": round(time.perf_counter() - started, 4)}
    if verdict.diverges and verdict.findings and do_minimize:
        m = minimize(backend, program, inputs, verdict)
        rec["minimized"] = {"size": len(m.program.operations), "ops": m.program.ops(),
                            "outcome": m.verdict.outcome, "fusion": m.verdict.fusion,
                            "findings": [f.to_json() for f in m.verdict.findings],
                            "program": m.program.to_json()}
        if out is not None:
            rec["repro"] = str(save_reproducer(out, backend, seed, index, m.program, m.inputs))
    elif verdict.diverges and out is not None:
        rec["repro"] = str(save_reproducer(out, backend, seed, index, program,
                                           [x[:1] for x in inputs]))
    return rec


REPRO_SCRIPT = '''"""Re-run this reproducer: python repro.py [BACKEND]"""
import json, sys
from pathlib import Path
import numpy as np
from conformance.backends import get_backend
from conformance.checker_programs import check_program
from conformance.core.program import Program

here = Path(__file__).parent
program = Program.from_json(json.loads((here / "program.json").read_text()))
data = np.load(here / "inputs.npz")
inputs = [data[n] for n in program.argument_names]
backend = get_backend(sys.argv[1] if len(sys.argv) > 1 else {backend!r})
verdict = check_program(backend, program, inputs)
print(json.dumps(verdict.to_json(), indent=1))
sys.exit(0 if verdict.outcome == "pass" else 1)
'''


def save_reproducer(out: Path, backend, seed: int, index: int, program: Program,
                    inputs: Sequence[np.ndarray]) -> Path:
    """program.mlir, program.json, inputs.npz (batched, 1 case), expected.npz, actual.npz
    (where the backend ran), repro.py."""
    from conformance.program_emit import program_text
    d = out / "programs" / backend.name / f"{seed}-{index}"
    d.mkdir(parents=True, exist_ok=True)
    try:
        (d / "program.mlir").write_text(program_text(program))
    except Exception as e:  # noqa: BLE001 - a program without text still has its JSON
        (d / "program.mlir").write_text(f"// no StableHLO text: {e}\n")
    (d / "program.json").write_text(json.dumps(program.to_json(), indent=1))
    np.savez(d / "inputs.npz", **{n: np.asarray(x) for n, x in
                                  zip(program.argument_names, inputs)})
    batch = inputs[0].shape[0] if inputs else 1
    with np.errstate(all="ignore"):
        try:
            ov = evaluate_program(program, inputs, batch=batch)
            np.savez(d / "expected.npz", **{r: ov.values[r] for r in program.results})
            from conformance.backends.programs import compile_program, run_batch
            actual = run_batch(compile_program(backend, program), inputs, batch)
            np.savez(d / "actual.npz", **{f"{r}": a for r, a in zip(program.results, actual)})
        except Exception:  # noqa: BLE001 - the reproducer holds what could be computed
            pass
    (d / "repro.py").write_text(REPRO_SCRIPT.replace("{backend!r}", repr(backend.locator)))
    return d


# ---------------------------------------------------------------------------------------
# Isolation: a child process checking programs one after the other
# ---------------------------------------------------------------------------------------

def _serve(conn, locator: str, seed: int, config: Config, batch: int, out: str | None,
           do_minimize: bool) -> None:
    backend = get_backend(locator)
    while True:
        index = conn.recv()
        if index is None:
            return
        try:
            rec = check_one(backend, seed, index, config, batch,
                            Path(out) if out else None, do_minimize)
        except Exception as e:  # noqa: BLE001 - reported as the program's record
            rec = {"kind": "program", "id": f"{seed}:program:{index}", "backend": backend.name,
                   "seed": seed, "index": index, "outcome": "backend_error",
                   "message": f"{type(e).__name__}: {e}"}
        conn.send(rec)


class IsolatedChecker:
    def __init__(self, locator: str, name: str, seed: int, config: Config, batch: int,
                 out: Path | None, do_minimize: bool, timeout: float) -> None:
        self.args = (locator, seed, config, batch, str(out) if out else None, do_minimize)
        self.name, self.seed, self.timeout = name, seed, timeout
        self.ctx = multiprocessing.get_context("spawn")     # jax is not fork-safe
        self.proc = None
        self.conn = None

    def _start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_serve, args=(child,) + self.args, daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def check(self, index: int, program: Program) -> dict[str, Any]:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send(index)
        outcome, message = None, None
        try:
            if self.conn.poll(self.timeout):
                return self.conn.recv()
            outcome, message = "timeout", f"no answer within {self.timeout:g} s"
        except (EOFError, OSError):
            pass
        if outcome is None:
            self.proc.join(5)
            outcome = "crash"
            message = f"the backend's process died (exit code {self.proc.exitcode})"
        self.close()
        return {"kind": "program", "id": f"{self.seed}:program:{index}", "backend": self.name,
                "seed": self.seed, "index": index, "ops": program.ops(),
                "size": len(program.operations), "outcome": outcome, "message": message,
                "program": program.to_json()}

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                try:
                    self.conn.send(None)
                    self.proc.join(2)
                except (OSError, BrokenPipeError):
                    pass
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(2)
        self.proc = self.conn = None


# ---------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------

def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = config_of(args)
    accept = set(_csv(args.accept) or ())
    locators = list(_csv(args.backend) or ("jax",))
    results = out / "results.jsonl"
    counts: dict[str, collections.Counter] = {}
    failed = False
    with results.open("w") as stream:
        for locator in locators:
            backend = get_backend(locator)
            isolate = backend.isolate if args.isolate is None else args.isolate
            isolate = bool(isolate) if isolate is not None else True
            checker = (IsolatedChecker(locator, backend.name, args.seed, config, args.batch,
                                       out, not args.no_minimize, args.timeout)
                       if isolate else None)
            tally = counts.setdefault(backend.name, collections.Counter())
            try:
                for index in range(args.start, args.start + args.count):
                    if checker is not None:
                        rec = checker.check(index, generate(args.seed, index, config).program)
                    else:
                        rec = check_one(backend, args.seed, index, config, args.batch, out,
                                        not args.no_minimize)
                    stream.write(json.dumps(rec) + "\n")
                    stream.flush()
                    label = rec["outcome"] + (" (fusion)" if rec.get("fusion") else "")
                    tally[label] += 1
                    if rec["outcome"] not in ("pass", "unsupported") and \
                            rec["outcome"] not in accept:
                        failed = True
                        if not args.quiet:
                            small = rec.get("minimized", {})
                            print(f"{backend.name} {rec['id']}: {label}"
                                  f"{' -> ' + str(small.get('size')) + ' ops ' + str(small.get('ops')) if small else ''}"
                                  f"{' ' + rec['repro'] if rec.get('repro') else ''}")
            finally:
                if checker is not None:
                    checker.close()
    summary = {name: dict(c) for name, c in counts.items()}
    (out / "programs-summary.json").write_text(json.dumps(summary, indent=1))
    for name, c in counts.items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print(f"results: {results}")
    return EXIT_DIVERGED if failed else EXIT_OK
