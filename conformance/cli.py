"""The ``conformance`` command: run the suite, render reports, browse the specs.

    conformance run [--backend jax] [--ops add,sine] [--family arithmetic]
                    [--types f32,bf16] [--depth quick|default|deep] [--seed N] [--out DIR]
                    [--jobs N] [--resume] [--no-replay]
    conformance repro CASE_ID [--backend jax] [--save DIR]
    conformance report RESULTS.jsonl [--out DIR] [--expectations FILE]
    conformance expectations check RESULTS.jsonl FILE | update RESULTS.jsonl FILE
    conformance list [ops|families|types|backends]
    conformance show OP
    conformance specs validate [FILE ...]

Exit codes: 0 no divergence (with --expectations: none the file does not expect);
1 divergences found (unexpected ones); 2 usage or input error (unknown op, element
type, backend, malformed spec or expectations file); 3 internal error of the suite.
Inputs are all checked before anything is written, so a bad option never
truncates an existing results file.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Sequence

EXIT_OK, EXIT_DIVERGENCES, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A bad option or input: reported in one line, exit code 2."""


def _csv(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="conformance",
                                description="StableHLO / XLA op-semantics conformance suite")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run the suite on one or more backends and write the report")
    r.add_argument("--backend", default="jax",
                   help="comma list of backends: jax, jax-gpu (jax.lax), xla, xla-gpu (the "
                        "case's StableHLO compiled by XLA through PJRT), interpreter (the "
                        "StableHLO reference interpreter), numpy (the oracle), module:Class, "
                        "or an entry point name (default: jax, on CPU)")
    r.add_argument("--ops", help="comma list of ops, StableHLO or XLA names (default: all)")
    r.add_argument("--family", help="comma list of op families (see `conformance list families`)")
    r.add_argument("--types", help="comma list of element types, e.g. f32,bf16,si8")
    r.add_argument("--depth", choices=["quick", "default", "deep"], default="default")
    r.add_argument("--seed", type=int, default=0, help="same seed, same cases (default 0)")
    r.add_argument("--out", default="conformance-report", help="output folder")
    r.add_argument("--max-repros", type=int, default=2,
                   help="reproducers saved per backend, op, element type and class")
    r.add_argument("--tolerances", metavar="FILE",
                   help="tolerance profile (YAML): per op and element type, accuracy bounds "
                        "that override the spec's, e.g. 'sine: {f32: {ulp: 8}}'")
    r.add_argument("--expectations", metavar="FILE",
                   help="known divergences (YAML): the run fails only on divergences the file "
                        "does not list; entries that matched nothing are reported stale")
    r.add_argument("--fail-on-stale", action="store_true",
                   help="with --expectations: also fail when an entry is stale")
    r.add_argument("--no-invalid", action="store_true", help="skip the invalid-program cases")
    r.add_argument("--no-examples", action="store_true", help="skip the spec examples")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    iso = r.add_mutually_exclusive_group()
    iso.add_argument("--isolate", dest="isolate", action="store_true", default=None,
                     help="run every backend in a child process: a crash or hang costs one "
                          "case (default: only backends that ask for it: xla, interpreter)")
    iso.add_argument("--no-isolate", dest="isolate", action="store_false")
    r.add_argument("--timeout", type=float, default=60.0,
                   help="seconds an isolated backend may take per compile or batch (default 60)")
    r.add_argument("--jobs", type=int, default=1,
                   help="worker processes (ops are spread over them; same cases and verdicts)")
    r.add_argument("--resume", action="store_true",
                   help="continue the interrupted run whose results.jsonl is in --out (same "
                        "options): keep the ops it finished, run the others")
    r.add_argument("--no-replay", action="store_true",
                   help="do not re-run the reproducers already in --out before new cases")

    rp = sub.add_parser("repro", help="re-create one case from its id and run it on a backend")
    rp.add_argument("case_id", help="SEED:DEPTH:OP:TYPE_KEY:SIGNATURE_INDEX:BATCH:CASE_INDEX, "
                                    "as a run's results and reports name it")
    rp.add_argument("--backend", default="jax",
                    help="jax, xla, interpreter, numpy, module:Class, ... (default: jax)")
    rp.add_argument("--save", metavar="DIR",
                    help="also save the case as a reproducer folder (case.json, repro.py)")
    rp.add_argument("--no-isolate", dest="isolate", action="store_false", default=True,
                    help="run the backend in this process (default: in a child process, so "
                         "that a crash or hang is reported as one)")
    rp.add_argument("--timeout", type=float, default=60.0,
                    help="seconds an isolated backend may take (default 60)")

    rep = sub.add_parser("report", help="render the HTML/JSON/JUnit report of a results file")
    rep.add_argument("results", help="a results.jsonl written by `conformance run`")
    rep.add_argument("--out", help="output folder (default: the results file's folder)")
    rep.add_argument("--expectations", metavar="FILE",
                     help="known divergences (YAML): show the CI gate in the report (the exit "
                          "code stays 0; `conformance expectations check` gates)")

    ls = sub.add_parser("list", help="list ops, families, element types or backends")
    ls.add_argument("what", nargs="?", default="ops",
                    choices=["ops", "families", "types", "backends"])

    sh = sub.add_parser("show", help="show one op's spec")
    sh.add_argument("op")

    ex = sub.add_parser("expectations", help="check a results file against known divergences, "
                                             "or write the file from a run")
    ex_sub = ex.add_subparsers(dest="expectations_command", required=True)
    chk = ex_sub.add_parser("check", help="gate a results file: exit 1 on unexpected divergences")
    chk.add_argument("results")
    chk.add_argument("expectations")
    chk.add_argument("--fail-on-stale", action="store_true")
    upd = ex_sub.add_parser("update", help="write the expectations file from a run's results, "
                                           "keeping the reasons already there")
    upd.add_argument("results")
    upd.add_argument("expectations", help="the file to write (read first if it exists)")
    upd.add_argument("--backend", help="only this backend's divergences")

    sp = sub.add_parser("specs", help="work with the spec files")
    sp_sub = sp.add_subparsers(dest="specs_command", required=True)
    v = sp_sub.add_parser("validate", help="validate spec files (default: all shipped specs)")
    v.add_argument("files", nargs="*")
    return p


# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------

def _check_filters(ops, families, types) -> None:
    from conformance.specs import all_specs, load_spec
    from conformance.core.types import element_type
    for op in ops or []:
        load_spec(op)
    if families:
        known = sorted({s.family for s in all_specs()})
        for f in families:
            if f not in known:
                raise UsageError(f"unknown family {f!r}; known: {', '.join(known)}")
    for t in types or []:
        element_type(t)


def cmd_run(args) -> int:
    from conformance import reports
    from conformance.backends import get_backend
    from conformance.compare import DIVERGENCES
    from conformance.runner import RunConfig, run, select_ops

    from conformance.specs import resolve_op
    ops = [resolve_op(o) for o in _csv(args.ops)] if args.ops else _csv(args.ops)
    config = RunConfig(backends=_csv(args.backend) or ["jax"], ops=ops,
                       families=_csv(args.family), element_types=_csv(args.types),
                       depth=args.depth, seed=args.seed, out=Path(args.out),
                       max_repros=args.max_repros, invalid=not args.no_invalid,
                       examples=not args.no_examples, progress=not args.no_progress,
                       isolate=args.isolate, timeout=args.timeout,
                       replay=not args.no_replay)
    if args.tolerances:
        from conformance.tolerances import load_tolerances
        config.tolerances = load_tolerances(args.tolerances)
    _check_filters(config.ops, config.families, config.element_types)
    expectations = None
    if args.expectations:
        from conformance.expectations import load_expectations
        expectations = load_expectations(args.expectations)
    specs = select_ops(config)
    if not specs:
        raise UsageError("the filters select no op")
    backends = [get_backend(b) for b in config.backends]
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise UsageError(f"backend names must differ, got {names}")

    out = Path(args.out)
    results = out / "results.jsonl"
    resume = None
    if args.resume:
        from conformance.runner import ResumeError, load_resume
        try:
            resume = load_resume(config, backends, results)
        except ResumeError as e:
            raise UsageError(str(e)) from None
        if resume is not None:
            print(f"resuming {results}: {len(resume.done)} op(s) done", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    bar = None
    if config.progress:
        from tqdm import tqdm
        bar = tqdm(total=len(specs), unit="op", dynamic_ncols=True, disable=None,
                   initial=len(resume.done) if resume else 0)
    done: set[str] = set()

    def progress(label: str) -> None:
        if bar is None:
            return
        op = label.split(" ", 1)[0]
        if op not in done:
            if done:
                bar.update(1)
            done.add(op)
        bar.set_postfix_str(label[:40], refresh=False)

    try:
        if args.jobs < 1:
            raise UsageError("--jobs must be at least 1")
        summary = run(config, backends, results, progress, jobs=args.jobs, resume=resume)
    finally:
        if bar is not None:
            bar.update(bar.total - bar.n)
            bar.close()
    replay_diverging = _print_replays(summary.get("replays", []))
    index = reports.render(results, out, expectations=expectations)
    if expectations is not None:
        print(f"results: {results}\nreport:  {index}")
        return _gate(results, expectations, args.fail_on_stale)
    divergent = {cls: n for cell in summary["cells"].values()
                 for cls, n in cell.cases.items() if cls in DIVERGENCES and n}
    totals: dict[str, int] = {}
    for cell in summary["cells"].values():
        for cls, n in cell.cases.items():
            totals[cls] = totals.get(cls, 0) + n
    print(f"checked {sum(totals.values())} cases on {', '.join(names)} in "
          f"{summary['elapsed']:.1f} s: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    print(f"results: {results}\nreport:  {index}")
    return EXIT_DIVERGENCES if divergent or replay_diverging else EXIT_OK


def _print_replays(replays) -> int:
    """One line per replayed reproducer that still diverges, and a total; returns how
    many still diverge."""
    if not replays:
        return 0
    still = [r for r in replays if r["class"] not in ("pass", "unsupported")]
    for r in still:
        print(f"REPLAY      {r['backend']}: {r['case_id']} {r['class']} "
              f"(saved as {r['class_before']} on {r['found_on']}: {r['repro']})")
    fixed = sum(1 for r in replays if r["class"] == "pass" and r.get("same_backend"))
    print(f"replayed {len(replays)} saved case run(s) first: {len(still)} still diverge, "
          f"{fixed} fixed (pass on the backend that diverged)")
    return len(still)


def cmd_repro(args) -> int:
    from conformance.replay import CaseIdError, repro
    try:
        return repro(args.case_id, args.backend, save=args.save, isolate=args.isolate,
                     timeout=args.timeout)
    except CaseIdError as e:
        raise UsageError(str(e)) from None


def _gate(results: Path, expectations, fail_on_stale: bool) -> int:
    """Print the gate's verdict; exit 1 on unexpected divergences (or stale entries)."""
    from conformance.expectations import gate
    from conformance.core.results import read_results
    g = gate(read_results(results), expectations)

    def where(item):
        return item["rule"] or item["element_type"]
    for item in g.unexpected:
        print(f"UNEXPECTED  {item['backend']}: {item['op']} {where(item)} {item['class']} "
              f"({item['cases']} cases)")
    for e in g.stale:
        print(f"STALE       {expectations.path}: expectations[{e.index}] {e.op} "
              f"{e.rule or e.element_type} {e.cls}: matched nothing in this run")
    print(f"gate: {len(g.unexpected)} unexpected, {len(g.expected)} expected, "
          f"{len(g.stale)} stale, {len(g.not_exercised)} not exercised by this run")
    if g.unexpected or (fail_on_stale and g.stale):
        return EXIT_DIVERGENCES
    return EXIT_OK


def cmd_expectations(args) -> int:
    from conformance.expectations import dump, load_expectations, update
    from conformance.core.results import read_results
    results = Path(args.results)
    if not results.is_file():
        raise UsageError(f"{results}: no such results file")
    if args.expectations_command == "check":
        return _gate(results, load_expectations(args.expectations), args.fail_on_stale)
    path = Path(args.expectations)
    old = load_expectations(path) if path.exists() else None
    entries = update(read_results(results), old, args.backend)
    path.write_text(dump(entries, args.backend or (old.backend if old else None)))
    todo = sum(1 for e in entries if e.reason.startswith("TODO"))
    print(f"{path}: {len(entries)} expectation(s), {todo} with a TODO reason to fill in")
    return EXIT_OK


def cmd_report(args) -> int:
    from conformance import reports
    results = Path(args.results)
    if not results.is_file():
        raise UsageError(f"{results}: no such results file")
    out = Path(args.out) if args.out else results.parent
    expectations = None
    if args.expectations:
        from conformance.expectations import load_expectations
        expectations = load_expectations(args.expectations)
    print(reports.render(results, out, expectations=expectations))
    return EXIT_OK


def cmd_list(args) -> int:
    from conformance.specs import all_specs
    if args.what == "ops":
        for s in all_specs():
            print(f"{s.name:24} {s.family:15} {s.summary}")
    elif args.what == "families":
        fams: dict[str, list[str]] = {}
        for s in all_specs():
            fams.setdefault(s.family, []).append(s.name)
        for f, ops in sorted(fams.items()):
            print(f"{f:15} {', '.join(ops)}")
    elif args.what == "types":
        from conformance.core.types import ALL_ELEMENT_TYPES
        for t in ALL_ELEMENT_TYPES:
            print(f"{t.name:14} {t.kind:9} {t.bits:4} bits  numpy: {t.dtype.name}")
    else:
        from conformance.backends import available
        print("\n".join(available()))
    return EXIT_OK


def cmd_show(args) -> int:
    from conformance.generators import breakable, unbreakable
    from conformance.specs import binding_key, load_spec, resolve_op
    s = load_spec(resolve_op(args.op))
    w = textwrap.TextWrapper(width=96, initial_indent="    ", subsequent_indent="    ")
    print(f"{s.name}  ({s.family}; XLA: {', '.join(s.xla_names) or '-'})")
    print(f"  spec: {s.data['spec_section']}")
    print(w.fill(s.summary))
    print("  semantics:")
    for k, v in s.data["semantics"].items():
        print(w.fill(f"{k}: {v}"))
    print("  inputs:")
    for t in s.inputs:
        how = (f"type {t.type}" if t.type else
               f"element type {t.element_type}, shape {' | '.join(t.shape)}")
        print(f"    {t.label or '':4} {t.name}: {t.type_text}  [{how}]")
    for a in s.attributes:
        vals = ", ".join(map(str, a.values)) if a.values else f"range {a.range}"
        if a.kind == "tensor":
            vals = f"element type {a.element_type}, shape {a.shape}"
        print(f"    {a.label or '':4} {a.name}: {a.kind} ({vals})")
    print("  outputs:")
    for t in s.outputs:
        how = f"type {t.type}" if t.type else f"element type {t.element_type}"
        print(f"         {t.name}: {t.type_text}  [{how}]")
    print("  constraints:")
    for c in s.constraints:
        print(w.fill(f"{c.id}: {c.text}"))
        print(f"          check: {c.check}")
    bindings = [binding_key(b) for b in s.type_bindings()]
    print(f"  element types ({len(bindings)}): {', '.join(bindings[:40])}"
          + (" ..." if len(bindings) > 40 else ""))
    print("  accuracy: " + ", ".join(f"{k}: {v}" for k, v in s.data["accuracy"].items()))
    for d in s.implementation_defined:
        print(w.fill(f"implementation-defined {d.id}: {d.text}  [when {d.when}]"))
    print(f"  invalid cases: breaks {', '.join(breakable(s)) or '-'}; not breakable alone: "
          + (", ".join(f"{k} ({v})" for k, v in unbreakable(s.name).items()) or "-"))
    print(f"  examples: {len(s.examples)}")
    return EXIT_OK


def cmd_specs(args) -> int:
    from conformance.specs import validate_all
    errors = validate_all(args.files or None)
    for e in errors:
        print(e, file=sys.stderr)
    if not errors:
        from conformance.specs import op_names
        n = len(args.files) if args.files else len(op_names())
        print(f"{n} spec file(s) valid")
    return EXIT_USAGE if errors else EXIT_OK


COMMANDS = {"run": cmd_run, "report": cmd_report, "list": cmd_list, "show": cmd_show,
            "specs": cmd_specs, "expectations": cmd_expectations, "repro": cmd_repro}


def main(argv: Sequence[str] | None = None) -> int:
    from conformance.backends import BackendLoadError
    from conformance.expectations import ExpectationsError
    from conformance.specs import SpecError, UnknownOp
    from conformance.core.types import UnknownElementType

    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (UsageError, UnknownOp, UnknownElementType, BackendLoadError, SpecError,
            ExpectationsError) as e:
        print(f"conformance: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("conformance: interrupted; the results written so far are kept", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - report our own bugs in one line, then the trace
        import traceback
        traceback.print_exc()
        print(f"conformance: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
