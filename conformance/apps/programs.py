"""``conformance programs``: generated multi-op programs checked on backends (issue 19).

    conformance programs --depth default --seed 0 --backend jax,xla --out DIR
    conformance programs ... --expectations jax-cpu      # exit 1 only on unlisted ones
    conformance programs ... --resume                    # after a kill: the rest only

``--depth`` sets how many programs, how large and how many value cases each
(:data:`DEPTHS`; ``--count``, ``--max-ops`` and ``--batch`` override it). Program ``i``
of seed ``S`` (generators/programs.py) gets ``batch`` value cases; every backend runs it
(conformance.checking.programs: exact against the program oracle, metamorphic where
inexact ops are involved); a divergence is minimised and saved as a reproducer under
``DIR/programs/BACKEND/S-i/`` (``program.mlir``: the StableHLO text; ``inputs.npz``: the
arguments, one case; ``expected.npz``: the oracle's results; ``actual.npz``: the
backend's; ``program.json``; ``repro.py``).

``DIR/results.jsonl`` starts with a ``run`` header (``command: programs``, the options
and the results ``format``), then holds one record of kind ``program`` per program and
backend, written as it happens, and an ``end`` record (their classes:
conformance.core.results ProgramsRunHeader, Program, ProgramsEnd); the report (index.html with its programs section,
summary.json, junit.xml) is rendered from it at the end. ``--resume`` keeps the records
of a killed run with the same options and checks only the programs it had not finished.

A backend that cannot map one op of a program (Unsupported from its program path, or
from an op's own executable in the metamorphic check) makes that program ``unsupported``
with the reason, which names the op: the program is not checked, and the run does not
fail for it. The generator does not avoid the op: the count of unsupported programs per
op is what the report shows of the backend's coverage.

Backends that ask for isolation (xla, interpreter) run in a child process that is
restarted after a crash (XLA CPU segfaults compiling some valid programs): that program
is a ``crash`` record and the run goes on.

Exit status: 0 when nothing diverged (classes named in ``--accept`` and divergences the
``--expectations`` file lists aside), 1 otherwise.

An ``--out`` folder with the results of another run (a ``run``'s, a merge's, a programs
run with other options) is refused unless ``--force`` (conformance.apps.cli); where
stderr is not a terminal, a progress line is printed every 30 s
(conformance.apps.heartbeat).
"""
from __future__ import annotations

import collections
import json
import multiprocessing
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from conformance.backends import get_backend
from conformance.checking.programs import check_program, minimize
from conformance.core.literals import to_literal
from conformance.core.program import Program
from conformance.core.results import ResultsWriter, read_results
from conformance.generators.programs import (Config, Drawn, draw_inputs, generate, rng_for,
                                             type_key)
from conformance.oracles.programs import evaluate_program

EXIT_OK, EXIT_DIVERGED = 0, 1

#: depth -> programs, operations per program at most, value cases per program
DEPTHS: dict[str, dict[str, int]] = {
    "quick": {"count": 30, "max_ops": 6, "batch": 4},
    "default": {"count": 300, "max_ops": 8, "batch": 8},
    "deep": {"count": 3000, "max_ops": 12, "batch": 16},
}

#: header keys that must be equal for ``--resume``
RESUME_KEYS = ("command", "seed", "depth", "count", "start", "max_ops", "batch", "ops",
               "types", "locators")

#: the most elements of one value a record's op-by-op trace keeps
TRACE_ELEMENTS = 64


class ResumeError(ValueError):
    """A results file that ``--resume`` cannot continue (one line, naming the file)."""


def _csv(text: str | None) -> tuple[str, ...] | None:
    items = tuple(x.strip() for x in (text or "").split(",") if x.strip())
    return items or None


def settings_of(args) -> dict[str, Any]:
    """count, max_ops and batch: the depth's, overridden by the options given."""
    depth = getattr(args, "depth", None) or "default"
    out = dict(DEPTHS[depth])
    for k in out:
        v = getattr(args, k, None)
        if v is not None:
            out[k] = int(v)
    out["max_ops"] = max(2, out["max_ops"])
    return {"depth": depth, **out}


def config_of(args) -> Config:
    return Config(max_ops=settings_of(args)["max_ops"], ops=_csv(args.ops),
                  types=_csv(args.types))


def exercised(program: Program) -> list[list[str]]:
    """The distinct (op, type key) pairs of a program's operations (constants aside)."""
    out: list[list[str]] = []
    for o in program.operations:
        if o.signature.input_types:
            k = [o.op, type_key(o.signature)]
            if k not in out:
                out.append(k)
    return out


def _annotate(findings: list[dict], program: Program, drawn: Drawn | None) -> None:
    """Each finding's type key and the generator patterns its operation belongs to."""
    producer = program.producer()
    for f in findings:
        at = f.get("at") or f["value"]
        o = program.operations[producer[at][0]] if at in producer else None
        f["type_key"] = type_key(o.signature) if o is not None else None
        f["patterns"] = list(drawn.patterns_of(at)) if drawn is not None else []


def trace(program: Program, inputs: Sequence[np.ndarray], actual=None) -> list[dict]:
    """The oracle's values op by op for the first case (the reproducer's story): every
    argument and operation with its type and value (at most :data:`TRACE_ELEMENTS`
    elements), and the backend's value of each result where given."""
    with np.errstate(all="ignore"):
        ov = evaluate_program(program, [x[:1] for x in inputs], batch=1)
    got = dict(zip(program.results, actual)) if actual is not None else {}
    out = []

    def lit(x):
        x = np.asarray(x)
        flat = x.reshape(-1)
        v = to_literal(flat[:TRACE_ELEMENTS].reshape(-1) if x.size > TRACE_ELEMENTS else x)
        return v

    for n, t in program.arguments:
        out.append({"name": n, "op": "argument", "type": t.mlir(), "oracle": lit(ov.values[n][0])})
    for o in program.operations:
        for r, t in zip(o.results, o.signature.result_types):
            row = {"name": r, "op": o.op, "operands": list(o.operands), "type": t.mlir(),
                   "oracle": lit(ov.values[r][0]),
                   "masked": bool(ov.masked[r].any()), "inexact": bool(ov.inexact[r].any())}
            if r in got:
                row["actual"] = lit(np.asarray(got[r])[0])
            out.append(row)
    return out


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
        "exercised": exercised(program), "size": len(program.operations), **verdict.to_json(),
        "seconds": round(time.perf_counter() - started, 4)}
    _annotate(rec["findings"], program, drawn)
    if verdict.diverges and verdict.findings and do_minimize:
        m = minimize(backend, program, inputs, verdict)
        small = [f.to_json() for f in m.verdict.findings]
        _annotate(small, m.program, None)
        rec["minimized"] = {"size": len(m.program.operations), "ops": m.program.ops(),
                            "outcome": m.verdict.outcome, "fusion": m.verdict.fusion,
                            "findings": small, "program": m.program.to_json(),
                            "text": m.program.describe(), "shrunk": m.shrunk}
        rec["trace"] = _trace_of(backend, m.program, m.inputs)
        if out is not None:
            rec["repro"] = str(save_reproducer(out, backend, seed, index, m.program, m.inputs))
    elif verdict.diverges and verdict.findings:
        rec["program"] = program.to_json()
        rec["text"] = program.describe()
        rec["trace"] = _trace_of(backend, program, [x[:1] for x in inputs])
        if out is not None:
            rec["repro"] = str(save_reproducer(out, backend, seed, index, program,
                                               [x[:1] for x in inputs]))
    elif verdict.outcome == "unsupported":
        rec["reason"] = verdict.message
    return rec


def _trace_of(backend, program: Program, inputs) -> list[dict]:
    from conformance.backends.programs import compile_program, run_batch
    actual = None
    try:
        with np.errstate(all="ignore"):
            actual = run_batch(compile_program(backend, program), [x[:1] for x in inputs], 1)
    except Exception:  # noqa: BLE001 - the trace holds what could be computed
        pass
    try:
        return trace(program, inputs, actual)
    except Exception:  # noqa: BLE001
        return []


REPRO_SCRIPT = '''"""Re-run this reproducer: python repro.py [BACKEND]"""
import json, sys
from pathlib import Path
import numpy as np
from conformance.apps.check import as_argument_dtype
from conformance.backends import get_backend
from conformance.checking.programs import check_program
from conformance.core.program import Program

here = Path(__file__).parent
program = Program.from_json(json.loads((here / "program.json").read_text()))
data = np.load(here / "inputs.npz")
inputs = [as_argument_dtype(data[n], t) for n, t in program.arguments]
backend = get_backend(sys.argv[1] if len(sys.argv) > 1 else {backend!r})
verdict = check_program(backend, program, inputs)
print(json.dumps(verdict.to_json(), indent=1))
sys.exit(0 if verdict.outcome == "pass" else 1)
'''


def save_reproducer(out: Path, backend, seed: int, index: int, program: Program,
                    inputs: Sequence[np.ndarray]) -> Path:
    """program.mlir, program.json, inputs.npz (batched, 1 case), expected.npz, actual.npz
    (where the backend ran), repro.py."""
    d = out / "programs" / backend.name / f"{seed}-{index}"
    write_program_files(d, backend, program, inputs, "program.mlir")
    (d / "repro.py").write_text(REPRO_SCRIPT.replace("{backend!r}", repr(backend.locator)))
    return d


def write_program_files(d: Path, backend, program: Program, inputs: Sequence[np.ndarray],
                        text_name: str) -> None:
    """A reproducer's files in ``d``: the StableHLO text (``text_name``), program.json,
    inputs.npz, and the oracle's and the backend's results (expected.npz, actual.npz)
    where they can be computed."""
    from conformance.mlir.program_emit import program_text
    d.mkdir(parents=True, exist_ok=True)
    try:
        (d / text_name).write_text(program_text(program))
    except Exception as e:  # noqa: BLE001 - a program without text still has its JSON
        (d / text_name).write_text(f"// no StableHLO text: {e}\n")
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


def attribute_crash(locator: str, drawn: Drawn, seed: int, index: int, timeout: float,
                    outcome: str) -> list[dict]:
    """The ops of a program that crashed (or hung) the backend which crash (hang) it
    alone: each operation's single-op executable compiled and run in a child process on
    the oracle's values of its operands (first case); ``fusion: False`` findings for
    those, else one finding without an op, ``fusion: True`` (only the whole program
    crashes)."""
    from conformance.checking.programs import Finding
    from conformance.checking.isolation import BackendCrash, BackendTimeout, IsolatedBackend
    program = drawn.program
    out: list[dict] = []
    iso = None
    try:
        with np.errstate(all="ignore"):
            ov = evaluate_program(program, draw_inputs(drawn, rng_for(seed, index), 1),
                                  batch=1)
        iso = IsolatedBackend(locator, timeout=min(timeout, 60.0))
        seen = set()
        for o in program.operations:
            if not o.signature.input_types or o.signature in seen:
                continue
            seen.add(o.signature)
            try:
                exe = iso.executable(o.signature)
                exe([ov.values[v][0] for v in o.operands])
            except (BackendCrash, BackendTimeout) as e:
                cls = "timeout" if isinstance(e, BackendTimeout) else "crash"
                out.append(Finding(o.results[0], o.op, "alone", cls, 0, 0, (), None,
                                   str(e)[:300], fusion=False, at=o.results[0]).to_json())
            except Exception:  # noqa: BLE001 - another failure is not this crash
                continue
    except Exception:  # noqa: BLE001 - not attributed
        pass
    finally:
        if iso is not None:
            iso.close()
    return out or [Finding("", "", "alone", outcome, 0, 0, (), fusion=True).to_json()]


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

    def check(self, index: int, drawn: Drawn) -> dict[str, Any]:
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
        program = drawn.program
        findings = attribute_crash(self.args[0], drawn, self.seed, index, self.timeout,
                                   outcome)
        _annotate(findings, program, drawn)
        return {"kind": "program", "id": f"{self.seed}:program:{index}", "backend": self.name,
                "seed": self.seed, "index": index, "ops": program.ops(),
                "patterns": list(drawn.patterns), "exercised": exercised(program),
                "size": len(program.operations), "outcome": outcome, "message": message,
                "fusion": all(f["fusion"] for f in findings), "findings": findings,
                "program": program.to_json(), "text": program.describe()}

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
# The results file: header, resume, gate
# ---------------------------------------------------------------------------------------

def header(args, backends) -> dict[str, Any]:
    s = settings_of(args)
    return {"kind": "run", "command": "programs", "seed": args.seed, "depth": s["depth"],
            "count": s["count"], "start": args.start, "max_ops": s["max_ops"],
            "batch": s["batch"], "ops": list(_csv(args.ops) or []) or None,
            "types": list(_csv(args.types) or []) or None,
            "backends": [b.describe() for b in backends],
            "locators": [b.locator for b in backends], "out": str(args.out),
            "minimize": not args.no_minimize, "started": time.time()}


def load_resume(path: Path, mine: dict[str, Any]) -> tuple[list[dict], set[tuple[str, int]]]:
    """The program records of an interrupted run and the (backend, index) pairs done;
    ResumeError when the file is another run's. No file: nothing to keep."""
    if not path.exists():
        return [], set()
    records = list(read_results(path, strict=True))   # (kept records are written again)
    head = next((r for r in records if r.get("kind") == "run"), None)
    if head is None or head.get("command") != "programs":
        raise ResumeError(f"{path}: cannot resume: not the results of `conformance programs` "
                          "(no programs run header)")
    diff = [k for k in RESUME_KEYS if head.get(k) != mine.get(k)]
    if diff:
        raise ResumeError(f"{path}: cannot resume a run with different options: " + ", ".join(
            f"{k} {head.get(k)!r} (now {mine.get(k)!r})" for k in diff))
    kept = [r for r in records if r.get("kind") == "program"]
    return kept, {(r.get("backend"), r.get("index")) for r in kept}


def failing(records: Sequence[dict], accept: set[str], expectations=None):
    """(failed, gate): a record whose outcome is not pass/unsupported and not accepted
    fails the run; with expectations, only findings the file does not list do."""
    from conformance.apps.expectations import program_gate
    recs = [r for r in records if r.get("kind") == "program"
            and r.get("outcome") not in accept]
    if expectations is None:
        return any(r.get("outcome") not in ("pass", "unsupported") for r in recs), None
    g = program_gate(records, expectations, accept)
    return not g.passed, g


# ---------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------

def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = config_of(args)
    s = settings_of(args)
    accept = set(_csv(args.accept) or ())
    locators = list(_csv(args.backend) or ("jax",))
    backends = [get_backend(loc) for loc in locators]
    results = out / "results.jsonl"
    head = header(args, backends)
    kept, done = (load_resume(results, head) if getattr(args, "resume", False)
                  else ([], set()))
    expectations = getattr(args, "expectations_loaded", None)
    counts: dict[str, collections.Counter] = {b.name: collections.Counter() for b in backends}
    for r in kept:
        if r.get("backend") in counts:
            counts[r["backend"]][_label(r)] += 1
    started = time.time()
    from conformance.apps.heartbeat import Heartbeat
    total = s["count"] * len(backends)
    where = {"done": len(kept), "diverged": 0, "now": None}

    def status() -> str:        # a line now and then where stderr is not a terminal
        return (f"{where['done']}/{total} programs checked, {where['diverged']} diverged"
                + (f"; now: {where['now']}" if where["now"] else ""))
    with ResultsWriter(results) as writer, Heartbeat("conformance programs", status):
        writer.write({**head, "resumed": len(kept)} if kept else head)
        for r in kept:
            writer.write(r)
        for locator, backend in zip(locators, backends):
            isolate = backend.isolate if args.isolate is None else args.isolate
            isolate = bool(isolate) if isolate is not None else True
            checker = (IsolatedChecker(locator, backend.name, args.seed, config, s["batch"],
                                       out, not args.no_minimize, args.timeout)
                       if isolate else None)
            tally = counts[backend.name]
            try:
                for index in range(args.start, args.start + s["count"]):
                    if (backend.name, index) in done:
                        continue
                    where["now"] = f"{backend.name} program {index}"
                    if checker is not None:
                        rec = checker.check(index, generate(args.seed, index, config))
                    else:
                        rec = check_one(backend, args.seed, index, config, s["batch"], out,
                                        not args.no_minimize)
                    writer.write(rec)
                    tally[_label(rec)] += 1
                    where["done"] += 1
                    if rec["outcome"] not in ("pass", "unsupported"):
                        where["diverged"] += 1
                    if rec["outcome"] not in ("pass", "unsupported") and \
                            rec["outcome"] not in accept and not args.quiet:
                        small = rec.get("minimized", {})
                        print(f"{backend.name} {rec['id']}: {_label(rec)}"
                              f"{' -> ' + str(small.get('size')) + ' ops ' + str(small.get('ops')) if small else ''}"
                              f"{' ' + rec['repro'] if rec.get('repro') else ''}")
            finally:
                if checker is not None:
                    checker.close()
        writer.write({"kind": "end", "command": "programs",
                      "elapsed": round(time.time() - started, 3),
                      "validity": validity(args.seed, range(args.start,
                                                            args.start + s["count"]), config)})
    records = list(read_results(results))
    failed, g = failing(records, accept, expectations)
    summary = {name: dict(c) for name, c in counts.items()}
    (out / "programs-summary.json").write_text(json.dumps(summary, indent=1))
    from conformance.reports import render
    index = render(results, out, program_expectations=expectations)
    for name, c in counts.items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if g is not None:
        print_gate(g, getattr(expectations, "path", ""))
    print(f"results: {results}")
    print(f"report: {index}")
    return EXIT_DIVERGED if failed else EXIT_OK


def validity(seed: int, indices, config: Config) -> dict[str, int]:
    """Validity measured: the programs generated, their operations (every signature
    checked against its spec's rules as it was added), the steps dropped because one
    broke a rule, and the programs whose StableHLO text the MLIR verifier refuses."""
    from conformance.generators.programs import Stats
    from conformance.mlir.program_emit import parse_program
    stats = Stats()
    programs = refused = 0
    for i in indices:
        program = generate(seed, i, config, stats=stats).program
        programs += 1
        try:
            parse_program(program)
        except Exception:  # noqa: BLE001 - counted: a program the verifier refuses
            refused += 1
    return {"programs": programs, "operations": stats.added, "rejected_steps": stats.rejected,
            "verifier_refused": refused}


def print_gate(g, path: str) -> None:
    print(f"expectations {path}: {len(g.unexpected)} unexpected, {len(g.expected)} "
          f"expected, {len(g.stale)} stale")
    for item in g.unexpected:
        print(f"  UNEXPECTED {item['backend']} {item['op'] or '(no op)'} "
              f"{item['element_type'] or ''} {item['class']}"
              f"{' (fusion)' if item.get('fusion') else ''} "
              f"[{', '.join(item.get('patterns') or []) or 'no pattern'}] e.g. {item['ids'][0]}")
    for e in g.stale:
        print(f"  stale: expectations[{e.index}] {e.flow()}")


def check_results(records: Sequence[dict], expectations, fail_on_stale: bool = False) -> int:
    """``conformance expectations check`` of a programs results file: exit 1 on findings
    the file does not list (and with ``fail_on_stale`` on stale program entries)."""
    from conformance.apps.expectations import program_gate
    g = program_gate(records, expectations)
    print_gate(g, getattr(expectations, "path", ""))
    return EXIT_DIVERGED if g.unexpected or (fail_on_stale and g.stale) else EXIT_OK


def _label(rec: dict) -> str:
    return str(rec.get("outcome")) + (" (fusion)" if rec.get("fusion") else "")
