"""``conformance check``: StableHLO modules written elsewhere, judged op by op (issue 29).

    conformance check model.mlir exported.mlirbc dumps/ --backend jax,xla --out DIR
    conformance check model.mlirbc --inputs args.npz     # the model's own arguments

Every module file (``.mlir`` text, ``.mlirbc`` bytecode or a VHLO portable artifact as
``jax.export`` serialises it; a folder stands for the module files under it, a glob for
its matches) is read into the suite's program (conformance.mlir.reader: every op mapped
to its spec, attributes read through the spec's ``mlir:`` section, ``func.call``
followed, what cannot be judged named in one line each) and judged on every backend by
the three checks of conformance.checking.modules: each op alone on the backend's own
values by its own verdict (the first diverging op named by its location and text), the
whole module against the oracle, and the whole module against its own ops. A backend
that asks for it (xla, interpreter, a vendor class) runs in a child process
(``--isolate``/``--no-isolate``, ``--timeout``): a crash or a hang in an op is a
``crash``/``timeout`` finding of that op, and the run goes on.

Arguments: ``--inputs FILE.npz`` (arrays ``arg0``, ``arg1``, ... or in order, each of
the argument's shape for one case or with a leading batch axis), else drawn by the
generators for each argument's type (special values, ``--batch`` cases; same
``--seed``, same values); an integer argument a while loop's operands depend on is
drawn from -2 to 12 (trip counts 0, 1 and a few), so that the loop ends. Arguments on
which the oracle cannot evaluate the module (a loop still running after 100,000 trips)
leave it ``unjudged``, and the backend is not run on them.

``DIR/results.jsonl``: a ``run`` header (``command: check``), one ``module`` record per
module and backend, an ``end`` record (conformance.core.results CheckRunHeader,
ModuleRecord, CheckEnd); the report from it (reports/modules.py): ``DIR/index.html``
with a table of the modules, ``DIR/modules/module-N-NAME.html`` per module (its ops in
order with location, text and each backend's outcome, the first diverging op
highlighted, what could not be judged), ``summary.json`` and ``junit.xml`` (a
``modules.BACKEND`` suite, a test case per module). A diverging module leaves a
minimal reproducer under ``DIR/modules/BACKEND/N-NAME/`` (the diverging op alone on the
backend's own operand values, or the whole module minimised around a finding only the
whole module shows: ``module.mlir``, ``inputs.npz``, ``expected.npz``, ``actual.npz``,
``repro.py``, exit 1 while it diverges). ``--resume`` continues a killed check with
the same options: the (module, backend) pairs it recorded are kept, the rest checked. Exit status: 0 when no module diverges (classes named in
``--accept`` aside), 1 otherwise, 2 for a bad option or a file that is not a module
(one line naming it, before anything is written).
"""
from __future__ import annotations

import collections
import glob
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

EXIT_OK, EXIT_DIVERGED = 0, 1

#: depth -> value cases per module
DEPTH_BATCH = {"quick": 4, "default": 8, "deep": 16}

MODULE_SUFFIXES = (".mlir", ".mlirbc")


class CheckError(ValueError):
    """A path or input file that cannot be used (one line naming it)."""


def module_paths(items: Sequence[str]) -> list[Path]:
    """The module files named: files as given, folders by their ``*.mlir`` and
    ``*.mlirbc`` files (recursively, sorted), globs by their matches."""
    out: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in MODULE_SUFFIXES
                           and p.is_file())
            if not found:
                raise CheckError(f"{item}: a folder without .mlir or .mlirbc files")
            out += found
        elif path.is_file():
            out.append(path)
        elif any(c in item for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(item, recursive=True)
                           if Path(p).is_file())
            if not found:
                raise CheckError(f"{item}: no file matches")
            out += found
        else:
            raise CheckError(f"{item}: no such file or folder")
    return list(dict.fromkeys(out))


def inputs_for(program, seed: int, key: str, batch: int, npz: Path | None
               ) -> tuple[list[np.ndarray], int]:
    """The program's argument values, stacked (one array per argument, [batch, ...]),
    and the batch: from ``npz`` if given, else drawn."""
    if npz is not None:
        return _npz_inputs(program, npz)
    from conformance.checking.plan import stable_hash
    from conformance.generators import draw_array
    rng = np.random.default_rng([seed, stable_hash("check", key)])
    bounds = loop_arguments(program)
    out = []
    for name, t in program.arguments:
        if name in bounds and t.element_type.is_integer:
            # a loop's counter or bound: trip counts 0, 1 and a few, so the loop ends
            # (drawn from the whole integer range, most loops would run 2^31 times)
            out.append(rng.integers(-2, 13, (batch, *t.shape)).astype(t.element_type.dtype))
        else:
            out.append(draw_array(t.element_type, (batch, *t.shape), rng))
    return out, batch


def loop_arguments(program) -> set[str]:
    """The arguments a while loop's operands depend on (through any ops)."""
    return {n for o in program.operations if o.op == "while"
            for n in program.with_results(o.operands).pruned().argument_names}


def _npz_inputs(program, npz: Path) -> tuple[list[np.ndarray], int]:
    try:
        data = np.load(npz, allow_pickle=False)
        if not hasattr(data, "files"):          # one .npy array, not an archive
            raise ValueError("a .npy array, not an .npz archive of named arrays")
        with data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except Exception as e:  # noqa: BLE001 - numpy raises EOFError, BadZipFile, ...
        raise CheckError(f"--inputs {npz}: cannot read it as .npz: "
                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    names = program.argument_names
    ordered = [arrays[n] if n in arrays else arrays.get(f"arr_{i}")
               for i, n in enumerate(names)]
    if any(a is None for a in ordered):
        missing = [n for n, a in zip(names, ordered) if a is None]
        raise CheckError(f"--inputs {npz}: no array for argument {missing[0]} (name them "
                         f"{', '.join(names)}, or save them in order)")
    out, batches = [], set()
    for n, a, (_, t) in zip(names, ordered, program.arguments):
        a = as_argument_dtype(a, t)
        if a.dtype != np.dtype(t.element_type.dtype):
            raise CheckError(f"--inputs {npz}: {n} is {a.dtype}, the module's argument is "
                             f"{t.mlir()}")
        if a.shape == t.shape:
            a = a[None]
        elif a.shape[1:] != t.shape:
            raise CheckError(f"--inputs {npz}: {n} has shape {list(a.shape)}, the module's "
                             f"argument is {t.mlir()} (with or without a batch axis)")
        batches.add(a.shape[0])
        out.append(a)
    if len(batches) > 1:
        raise CheckError(f"--inputs {npz}: the arrays have different batch sizes "
                         f"{sorted(batches)}")
    return out, batches.pop() if batches else 1


def as_argument_dtype(a: np.ndarray, t) -> np.ndarray:
    """``a`` as argument type ``t``'s dtype where numpy saved it as raw bytes: an .npz
    cannot name ml_dtypes' types (bf16, the fp8 types, int4), ``np.savez`` writes them as
    void arrays of the same width (``|V2``), and ``np.load`` reads them back so."""
    et = getattr(t, "element_type", None)     # (a tuple-typed argument has none)
    if et is None or a.dtype.kind != "V":
        return a
    want = np.dtype(et.dtype)
    return a.view(want) if a.dtype.itemsize == want.itemsize and a.dtype != want else a


def read_modules(paths: Sequence[Path]):
    """Every module read (ReadError names the file at fault: nothing is checked then)."""
    from conformance.mlir.reader import read_file
    return [read_file(p) for p in paths]


class Corpus:
    """Corpus models exported and read (their sources already name the files' place
    under ``--out``); :meth:`keep` writes the files there once every check passed."""

    def __init__(self, folder: Path, files: dict[str, bytes], reads: list):
        self.folder, self.files, self.reads = folder, files, reads

    def keep(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (self.folder / name).write_bytes(data)


def read_corpus(names: Sequence[str], folder: Path, models: Sequence[str] | None = None
                ) -> Corpus:
    """The models of the named corpora (conformance.apps.corpus) exported with
    jax.export into a temporary folder and read; each read's source is its file's
    place in ``folder`` (where :meth:`Corpus.keep` writes it)."""
    import tempfile
    from conformance.apps.corpus import export_corpus
    from conformance.mlir.reader import read_file
    files: dict[str, bytes] = {}
    reads = []
    with tempfile.TemporaryDirectory(prefix="conformance-corpus-") as staging:
        for name in dict.fromkeys(names):
            for p in export_corpus(name, Path(staging), models):
                if p.name in files:
                    continue
                files[p.name] = p.read_bytes()
                r = read_file(p)
                r.source = str(Path(folder) / p.name)
                reads.append(r)
    return Corpus(Path(folder), files, reads)


def _with_type_keys(findings: list[dict], program) -> list[dict]:
    """Each finding with its op's type key (what expectations entries name)."""
    from conformance.checking.modules import region_operations
    from conformance.generators.programs import type_key
    producer = program.producer()
    inside = region_operations(program)     # ops inside loops, judged trip by trip
    by_name = {o.name: o for o in program.operations}   # an op of no result value
    for f in findings:
        at = f.get("at") or f.get("value")
        if at in producer:
            f["type_key"] = type_key(program.operations[producer[at][0]].signature)
        elif at in by_name:
            f["type_key"] = type_key(by_name[at].signature)
        elif at in inside:
            f["type_key"] = type_key(inside[at][0].signature)
    return findings


def record(read, backend, verdict, seconds: float) -> dict[str, Any]:
    from conformance.checking.modules import loop_operations
    whole = dict(verdict.whole)
    if whole.get("findings"):
        whole["findings"] = _with_type_keys([dict(f) for f in whole["findings"]],
                                            read.program)
    rec: dict[str, Any] = {
        "kind": "module", "id": read.source, "backend": backend.name,
        "outcome": verdict.outcome, "message": verdict.message,
        "judged_ops": verdict.judged_ops, "ops": len(read.program.operations),
        "unjudged": [u.to_json() for u in read.unjudged],
        "dropped_results": list(read.dropped_results), "first": verdict.first,
        "op_by_op": _with_type_keys([f.to_json() for f in verdict.op_by_op], read.program),
        "whole": whole,
        "op_outcomes": verdict.op_outcomes, "seconds": round(seconds, 4),
        # every op's place in the module (texts cut: a weight constant can be large)
        "origins": {k: {**o.to_json(), "text": _cut(o.text)} for k, o in read.origins.items()},
        "operations": [[o.name, o.op] for o in read.program.operations],
        "loop_operations": [[o.name, o.op, top, depth, part] for o, top, depth, part
                            in loop_operations(read.program)]}
    if verdict.diverges:
        rec["program"] = read.program.to_json()
    return rec


def _cut(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text)} characters)"


def summary_line(rec: dict[str, Any]) -> str:
    """One line per module and backend; the first diverging op on the next."""
    head = (f"{rec['id']} on {rec['backend']}: {rec['outcome']} ({rec['judged_ops']} of "
            f"{rec['ops']} ops judged"
            + (f", {len(rec['unjudged'])} not judged" if rec["unjudged"] else "") + ")")
    if rec.get("message"):
        head += f": {rec['message']}"
    first = rec.get("first")
    if rec.get("repro"):
        head += f"\n  reproducer: python {rec['repro']}/repro.py"
    if first:
        head += (f"\n  first diverging op: {first['op']} at {first['location']} "
                 f"[{first['check']}, {first['class']}]: expected {first['expected']}, "
                 f"got {_line(first['actual'])} (case {first['case']}, element "
                 f"{first['index']})")
    return head


REPRO_SCRIPT = '''"""Re-run this reproducer: python repro.py [BACKEND]

The module (module.mlir; program.json is the same program as data) judged by
`conformance check`'s three checks on inputs.npz; exit 1 while it diverges."""
import json, sys
from pathlib import Path
import numpy as np
from conformance.apps.check import as_argument_dtype
from conformance.backends import get_backend
from conformance.checking.modules import check_module
from conformance.mlir.reader import read_file

here = Path(__file__).parent
read = read_file(here / "module.mlir")
data = np.load(here / "inputs.npz")
inputs = [as_argument_dtype(data[n], t) for n, t in read.program.arguments]
backend = get_backend(sys.argv[1] if len(sys.argv) > 1 else {backend!r})
verdict = check_module(backend, read, inputs, inputs[0].shape[0] if inputs else 1)
print(json.dumps(verdict.to_json(), indent=1, default=str))
sys.exit(0 if not verdict.diverges else 1)
'''


def minimal_program(backend, read, inputs, verdict):
    """The smallest program that shows the module's first divergence, with its inputs
    (one case): the diverging op alone on the backend's own operand values (check 1),
    else the whole module minimised around its finding (conformance.checking.programs
    .minimize: ops dropped or cut to arguments, shapes and values shrunk)."""
    from conformance.core.program import single
    first = verdict.first or {}
    if first.get("check") == "op_by_op" and verdict.first_operands is not None:
        o, operands = verdict.first_operands
        return single(o.signature), operands, "the op alone, on the backend's own operands"
    whole = verdict.whole_verdict
    if whole is not None and whole.diverges and whole.findings:
        from conformance.checking.programs import minimize
        m = minimize(backend, read.program, inputs, whole)
        return m.program, m.inputs, "the module minimised: " + (
            "; ".join(m.shrunk) or f"{len(m.program.operations)} of "
            f"{len(read.program.operations)} ops")
    return None


def reader_named(program):
    """``program`` with its arguments named as reading its text back names them (arg0,
    arg1, ... by position: conformance.mlir.reader), so that the reproducer's inputs.npz,
    keyed by argument name, fits module.mlir read again (repro.py, ``--inputs``): a
    minimised module's arguments include values the minimiser cut (``v43``)."""
    import dataclasses
    from conformance.core.program import Program
    rename = {n: f"arg{i}" for i, n in enumerate(program.argument_names)}
    taken = {r for o in program.operations for r in (o.name, *o.results)}
    if all(k == v for k, v in rename.items()) or taken & set(rename.values()):
        return program
    ops = tuple(dataclasses.replace(o, operands=tuple(rename.get(v, v) for v in o.operands))
                for o in program.operations)
    return Program(tuple((rename[n], t) for n, t in program.arguments), ops,
                   tuple(rename.get(r, r) for r in program.results))


def save_module_reproducer(out: Path, backend, read, index: int, inputs, verdict
                           ) -> Path | None:
    """``out/modules/BACKEND/N-NAME/``: module.mlir (the minimal program's StableHLO),
    program.json, inputs.npz (one case), expected.npz (the oracle's), actual.npz (the
    backend's), what.txt (what it is) and repro.py (exit 1 while it diverges)."""
    import re
    from conformance.apps.programs import write_program_files
    found = minimal_program(backend, read, inputs, verdict)
    if found is None:
        return None
    program, xs, what = found
    program = reader_named(program)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(read.source).name)
    d = out / "modules" / re.sub(r"[^A-Za-z0-9_.-]+", "_", backend.name) / f"{index}-{name}"
    write_program_files(d, backend, program, xs, "module.mlir")
    first = verdict.first or {}
    (d / "what.txt").write_text(
        f"{read.source} on {backend.name}: {verdict.outcome}\n{what}\nfirst diverging op: "
        f"{first.get('op')} at {first.get('location')} [{first.get('check')}, "
        f"{first.get('class')}]\n{first.get('text') or ''}\n")
    (d / "repro.py").write_text(REPRO_SCRIPT.replace("{backend!r}", repr(backend.locator)))
    return d


#: header keys that must be equal for ``--resume``
RESUME_KEYS = ("command", "modules", "seed", "depth", "batch", "inputs", "locators")


def header(args, batch: int) -> dict[str, Any]:
    """The header's fields that say which checks a results file holds."""
    return {"kind": "run", "command": "check", "modules": [r.source for r in args.reads],
            "seed": args.seed, "depth": args.depth, "batch": batch, "inputs": args.inputs,
            "locators": list(args.backend_list)}


def load_resume(path: Path, mine: dict[str, Any]) -> dict[tuple[str, str], dict]:
    """The module records of an interrupted check with the same options, by (module,
    backend); CheckError (one line) for a file of another run."""
    from conformance.core.results import ResultsFormatError, read_results
    try:
        records = list(read_results(path))
    except (OSError, ResultsFormatError, UnicodeDecodeError) as e:
        raise CheckError(f"--resume: {path} cannot be read ({e})") from None
    head = records[0] if records else {}
    differ = [k for k in RESUME_KEYS if head.get(k) != mine.get(k)]
    if differ:
        raise CheckError(f"--resume: {path} holds another run (its {', '.join(differ)} "
                         f"differ{'s' if len(differ) == 1 else ''}); use the same options, "
                         f"or --force to start again")
    return {(r["id"], r["backend"]): r for r in records if r.get("kind") == "module"}


def _line(value: Any) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else text


def run(args) -> int:
    """Check every module on every backend (the options are checked by the CLI)."""
    from conformance.backends import get_backend
    from conformance.checking.modules import NOT_DIVERGING, check_module
    from conformance.core.results import ResultsWriter
    from conformance.checking.isolation import prepare_backends
    reads = args.reads
    out = Path(args.out)
    # a backend that crashes or hangs costs a finding, never the run: as `run` does, it
    # runs in a child process unless it says otherwise (conformance.checking.isolation)
    backends = prepare_backends([get_backend(b) for b in args.backend_list], out,
                                getattr(args, "isolate", None),
                                getattr(args, "timeout", 120.0))
    batch = args.batch or DEPTH_BATCH[args.depth]
    npz = Path(args.inputs) if args.inputs else None
    accept = set(args.accept_list)
    expectations = getattr(args, "expectations_loaded", None)
    started = time.time()
    outcomes: collections.Counter = collections.Counter()
    failed = False
    kept = getattr(args, "kept", None) or {}
    with ResultsWriter(out / "results.jsonl") as w:
        w.write({**header(args, batch), "backends": [b.describe() for b in backends],
                 "out": str(out), "started": started, "resumed": len(kept)})
        for read in reads:
            for u in read.unjudged:
                print(f"{read.source}: not judged: {u}")
            inputs, n = inputs_for(read.program, args.seed, Path(read.source).name, batch,
                                   npz)
            for backend in backends:
                if (read.source, backend.name) in kept:     # checked before the kill
                    rec = kept[(read.source, backend.name)]
                    w.write(rec)
                    outcomes[rec["outcome"]] += 1
                    print(summary_line(rec))
                    failed |= rec["outcome"] not in NOT_DIVERGING and \
                        rec["outcome"] not in accept
                    continue
                t0 = time.perf_counter()
                verdict = check_module(backend, read, inputs, n)
                rec = record(read, backend, verdict, time.perf_counter() - t0)
                if verdict.diverges and not getattr(args, "no_minimize", False):
                    try:
                        where = save_module_reproducer(out, backend, read,
                                                       reads.index(read), inputs, verdict)
                    except Exception as e:  # noqa: BLE001 - the record says why
                        rec["message"] = (rec.get("message") or "") + \
                            f" (no reproducer: {type(e).__name__}: {e})"
                        where = None
                    if where is not None:
                        rec["repro"] = str(where)
                w.write(rec)
                outcomes[rec["outcome"]] += 1
                print(summary_line(rec))
                if verdict.diverges and rec["outcome"] not in accept:
                    failed = True
        w.write({"kind": "end", "command": "check", "elapsed": round(time.time() - started, 3),
                 "outcomes": dict(outcomes)})
    for b in backends:
        close = getattr(b, "close", None)
        if close is not None:
            close()
    from conformance.reports import render
    index = render(out / "results.jsonl", out, program_expectations=expectations,
                   program_accept=tuple(accept))
    if expectations is not None:
        from conformance.apps.expectations import module_gate
        from conformance.core.results import read_results
        g = module_gate(list(read_results(out / "results.jsonl")), expectations, accept)
        print(f"expectations {args.expectations}: {len(g.unexpected)} unexpected, "
              f"{len(g.expected)} expected")
        for item in g.unexpected:
            print(f"  UNEXPECTED {item['backend']} {item['op'] or '(no op)'} "
                  f"{item['element_type'] or ''} {item['class']}"
                  f"{' (whole module)' if item.get('fusion') else ''} e.g. {item['ids'][0]}")
        failed = not g.passed
    print(f"{sum(outcomes.values())} module checks: "
          + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
          + f"; results in {out / 'results.jsonl'}; report: {index}")
    return EXIT_DIVERGED if failed else EXIT_OK
