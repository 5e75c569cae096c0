"""Mutation testing of the suite's own core (issue 32, item 6): do its tests pin it?

Every verdict rests on a few functions: the ULP scale (ordinals), the constraint
checker and its expression evaluator, the element classes and the bound verdict,
expectations matching and the gate's exit code, resume and merge. This bench mutates
those functions with cosmic-ray (one mutation at a time, in place, reverted after) and
runs, per mutant, only the fast test files that cover its module, with a timeout. A
mutant the tests fail on (or time out on) is killed; one they pass on survived: either
a test is missing or the mutant is equivalent (bench/README.md lists those, with the
reason).

    python bench/bench_core_mutation.py                  # every module, ~310 mutants
    python bench/bench_core_mutation.py --module numerics --module merge
    python bench/bench_core_mutation.py --list           # count the mutants, run nothing
    python bench/bench_core_mutation.py --json out.json  # every mutant, its outcome, diff

Needs the ``mutation`` extra (``pip install -e '.[mutation]'``). It edits the files of
this checkout while it runs (an editable install is what the tests import), and puts
every file back on exit, Ctrl-C included; do not edit the tree meanwhile.
"""
from __future__ import annotations

import argparse
import ast
import json
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = (f"{sys.executable} -m pytest -x -q -p no:cacheprovider -p no:xdist "
          "-p no:randomly -o addopts=")
PINS = "tests/test_core_pins.py"


@dataclass(frozen=True)
class Target:
    """One core module: its file, the functions (top-level names or Class.method) whose
    mutants count, and the fast test files that cover them."""

    path: str
    functions: tuple[str, ...]
    tests: tuple[str, ...]


TARGETS: dict[str, Target] = {
    "numerics": Target("conformance/core/numerics.py", ("ordinal", "total_order_key"),
                       (PINS, "tests/test_compare.py")),
    "validity": Target("specs/validity.py", ("violations",),
                       (PINS, "tests/test_expressions.py")),
    "expressions": Target("specs/expressions.py",
                          ("_Evaluator.v_Name", "_Evaluator.v_BoolOp", "_Evaluator.v_UnaryOp",
                           "_Evaluator.v_Compare", "_Evaluator._comprehension", "evaluate"),
                          (PINS, "tests/test_expressions.py")),
    "compare": Target("conformance/checking/compare.py",
                      ("worst", "_not_close", "_float_classes", "classify"),
                      (PINS, "tests/test_compare.py")),
    "verdicts": Target("conformance/checking/verdicts/__init__.py",
                       ("unit_roundoff", "gamma", "accumulation", "_difference"),
                       (PINS, "tests/test_verdicts.py")),
    "expectations": Target("conformance/apps/expectations.py",
                           ("Expectation.matches", "Expectations.match", "Gate.passed",
                            "_split", "gate"),
                           (PINS, "tests/test_expectations.py")),
    # the exit code only (the lines above it print)
    "gate": Target("conformance/apps/cli.py", ("_gate>if g.unexpected or (fail_on_stale",),
                   (PINS,)),
    "resume": Target("conformance/apps/runner.py", ("load_resume", "resume_value"), (PINS,)),
    "merge": Target("conformance/apps/merge.py", ("record_key", "check_headers", "_union"),
                    (PINS,)),
}

#: cosmic-ray's operators, cut to one plausible slip per construct (as mutmut makes
#: them): an off-by-one bound (< for <=), a negated test, + for -, a literal ±1, a
#: dropped unary minus, an emptied loop, a caught exception that is no longer caught.
#: Its full cross product of operators (every comparison for every other, ``is``
#: included) gives about 5 times the mutants, most of them duplicates in effect.
OPERATORS = {
    "core/NumberReplacer", "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd", "core/AddNot",
    "core/ExceptionReplacer", "core/ZeroIterationForLoop", "core/ReplaceBreakWithContinue",
    "core/ReplaceContinueWithBreak",
    *(f"core/ReplaceBinaryOperator_{a}_{b}" for a, b in (
        ("Add", "Sub"), ("Sub", "Add"), ("Mul", "Div"), ("Div", "Mul"), ("FloorDiv", "Div"),
        ("Mod", "FloorDiv"), ("Pow", "Mul"), ("LShift", "RShift"), ("RShift", "LShift"),
        ("BitAnd", "BitOr"), ("BitOr", "BitAnd"), ("BitXor", "BitOr"))),
    *(f"core/ReplaceComparisonOperator_{a}_{b}" for a, b in (
        ("Eq", "NotEq"), ("NotEq", "Eq"), ("Lt", "LtE"), ("LtE", "Lt"), ("Gt", "GtE"),
        ("GtE", "Gt"), ("Is", "IsNot"), ("IsNot", "Is"), ("In", "NotIn"), ("NotIn", "In"))),
    *(f"core/ReplaceUnaryOperator_{a}_{b}" for a, b in (
        ("USub", "UAdd"), ("Delete", "USub"), ("Delete", "Not"), ("Delete", "Invert"))),
}


def line_ranges(path: Path, functions: tuple[str, ...]) -> list[tuple[int, int]]:
    """The (first, last) lines of each named function (``Class.method`` for a method;
    ``name>text``: from its line holding ``text`` on); a name not found is an error
    (the module changed: update TARGETS)."""
    tree = ast.parse(path.read_text())
    found: dict[str, tuple[int, int]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = (node.lineno, node.end_lineno)
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"{node.name}.{sub.name}"] = (sub.lineno, sub.end_lineno)
    lines = path.read_text().splitlines()
    out = []
    for f in functions:
        name, _, marker = f.partition(">")
        if name not in found:
            sys.exit(f"bench_core_mutation: {path}: no function {name}")
        lo, hi = found[name]
        if marker:
            at = [i + 1 for i in range(lo - 1, hi) if marker in lines[i]]
            if not at:
                sys.exit(f"bench_core_mutation: {path}: {name} has no line with {marker!r}")
            lo = at[0]
        out.append((lo, hi))
    return out


def annotations(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions, (line, column), of every annotation in the module: the
    modules say ``from __future__ import annotations``, so a mutant there (``str | None``
    made ``str & None``) changes nothing that runs, and is not counted."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        found = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
            found.append(node.returns)
        elif isinstance(node, ast.arg) and node.annotation:
            found.append(node.annotation)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        out += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in found]
    return out


def mutants(name: str, target: Target) -> list:
    """cosmic-ray's mutation specs for the target's functions, with our operators, less
    those inside annotations."""
    from cosmic_ray.commands.init import _all_work_items
    path = ROOT / target.path
    ranges = line_ranges(path, target.functions)
    skip = annotations(path)
    out = []
    for item in _all_work_items([path], {}):
        for m in item.mutations:
            if m.operator_name not in OPERATORS:
                continue
            at = tuple(m.start_pos)
            if any(lo <= at <= hi for lo, hi in skip):
                continue
            if any(lo <= m.start_pos[0] <= hi for lo, hi in ranges):
                out.append(m)
    return out


def _key(module: str, m) -> tuple:
    return (TARGETS[module].path, m.operator_name, m.occurrence)


def _again(row: dict | None) -> bool:
    """Run this mutant again (--rerun)? Yes unless the earlier run killed it."""
    return row is None or row["outcome"] not in ("killed", "timeout")


def first_change(diff: str) -> str:
    """The mutated line of a unified diff (what the mutation did, for the listing)."""
    minus = [ln[1:].strip() for ln in diff.splitlines()
             if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:].strip() for ln in diff.splitlines()
            if ln.startswith("+") and not ln.startswith("+++")]
    return f"{minus[0] if minus else ''}  ->  {plus[0] if plus else ''}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", choices=sorted(TARGETS),
                    help="only this module (repeatable; default: all)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds per mutant's test run (a timeout counts as killed)")
    ap.add_argument("--list", action="store_true", help="count the mutants, run nothing")
    ap.add_argument("--json", metavar="PATH", help="write every mutant and its outcome")
    ap.add_argument("--rerun", metavar="JSON",
                    help="run again only the mutants that survived in this earlier --json "
                         "(same sources: after writing the tests they asked for); the "
                         "figures count the others as that run classed them")
    args = ap.parse_args(argv)
    try:
        from cosmic_ray.mutating import mutate_and_test
        from cosmic_ray.work_item import TestOutcome, WorkerOutcome
    except ImportError:
        sys.exit("bench_core_mutation: needs cosmic-ray: pip install -e '.[mutation]'")
    names = args.module or list(TARGETS)
    plan = {n: mutants(n, TARGETS[n]) for n in names}
    earlier: dict[tuple, dict] = {}
    if args.rerun:
        for r in json.loads(Path(args.rerun).read_text())["mutants"]:
            earlier[(r["file"], r["operator"], r["occurrence"])] = r
        planned = {_key(n, m) for n in names for m in plan[n]}
        earlier = {k: r for k, r in earlier.items() if k in planned}   # annotations: out
        for n in names:
            plan[n] = [m for m in plan[n] if _again(earlier.get(_key(n, m)))]
    for n in names:
        print(f"{n:13s} {len(plan[n]):4d} mutants  {TARGETS[n].path}", flush=True)
    if args.list:
        return 0
    saved = {ROOT / TARGETS[n].path: (ROOT / TARGETS[n].path).read_text() for n in names}

    def restore(*_):
        for p, text in saved.items():
            if p.read_text() != text:
                p.write_text(text)
        if _:
            sys.exit(130)
    signal.signal(signal.SIGTERM, restore)
    rows: list[dict] = []
    started = time.monotonic()
    try:
        import os
        os.chdir(ROOT)
        for n in names:
            cmd = f"{PYTEST} {' '.join(TARGETS[n].tests)}"
            for i, m in enumerate(plan[n]):
                r = mutate_and_test([m], cmd, args.timeout)
                if r.worker_outcome == WorkerOutcome.NO_TEST:
                    continue
                if r.worker_outcome != WorkerOutcome.NORMAL:
                    outcome = "error"
                elif r.test_outcome == TestOutcome.KILLED:
                    outcome = "timeout" if r.output == "timeout" else "killed"
                else:
                    outcome = "survived" if r.test_outcome == TestOutcome.SURVIVED else "error"
                row = {"module": n, "file": TARGETS[n].path, "line": m.start_pos[0],
                       "function": m.definition_name, "operator": m.operator_name,
                       "occurrence": m.occurrence, "outcome": outcome,
                       "change": first_change(r.diff or ""), "diff": r.diff}
                if outcome == "error":
                    row["output"] = (r.output or "")[-2000:]
                rows.append(row)
                if args.json:            # as it goes: a run cut short keeps what it did
                    Path(args.json).write_text(json.dumps({"partial": True, "mutants": rows}))
                print(f"  [{n} {i + 1}/{len(plan[n])}] {outcome:8s} {row['file']}:{row['line']}"
                      f" {row['change']}", flush=True)
    finally:
        restore()
    elapsed = time.monotonic() - started
    if args.rerun:                       # the mutants killed before count as killed
        ran = {(r["file"], r["operator"], r["occurrence"]) for r in rows}
        rows = [r for k, r in earlier.items() if k not in ran and r["module"] in names] + rows
    print("\nmodule         killed/total")
    summary = {}
    for n in names:
        mine = [r for r in rows if r["module"] == n]
        k = sum(r["outcome"] in ("killed", "timeout") for r in mine)
        summary[n] = {"killed": k, "total": len(mine)}
        print(f"{n:13s} {k:4d}/{len(mine):<4d}")
    k = sum(s["killed"] for s in summary.values())
    t = sum(s["total"] for s in summary.values())
    print(f"{'all':13s} {k:4d}/{t:<4d} ({100 * k / max(t, 1):.1f}% killed) in {elapsed:.0f} s")
    survivors = [r for r in rows if r["outcome"] not in ("killed", "timeout")]
    if survivors:
        print("\nsurvivors:")
        for r in survivors:
            print(f"  {r['outcome']:8s} {r['file']}:{r['line']} ({r['function']}) "
                  f"{r['operator'].removeprefix('core/')}: {r['change']}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"summary": summary, "killed": k, "total": t, "seconds": elapsed,
             "mutants": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
