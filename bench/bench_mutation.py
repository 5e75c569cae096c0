"""The suite's own mutation score (issue 12, point 5).

Runs ``conformance run`` on every planted backend of ``bench/mutants.py`` (the oracle
with one realistic bug), on the ops that mutant changes, per depth, and counts the
mutant *killed* when the gate fails: the CLI's exit code is 1. Each run is gated twice,
from the same results file:

- without expectations: ``conformance run`` itself (exit 1 on any divergence);
- with the shipped ``jax-cpu`` expectations: ``conformance expectations check
  RESULTS jax-cpu`` (exit 1 on a divergence no entry of the file expects). The
  mutants are named ``jax`` and describe themselves as jax on CPU, so that the file's
  entries match them as they would match the jax backend: a broad entry hides a
  mutant here.

Equivalent mutants (the spec allows what they do) are run too, but left out of the
score; one that is killed is a false alarm of the suite and is listed as such.

    python bench/bench_mutation.py                          # quick and default, every mutant
    python bench/bench_mutation.py --depth quick            # one depth
    python bench/bench_mutation.py --mutants RoundEvenHalfAway,IsFiniteNaN
    python bench/bench_mutation.py --json mutation.json     # every figure and record summary
    python bench/bench_mutation.py --workers 2              # mutants spread over 2 processes
    python bench/bench_mutation.py --family "NaN propagation,rounding"   # some families

Each depth's report gives, per family, the fraction of planted bugs caught without
expectations and gated with the shipped jax-cpu expectations (``by_family`` in --json).

Exit code: 0 when every requested depth meets its target without expectations
(quick >= 95%, default and deep 100%), 1 otherwise, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGETS = {"quick": 0.95, "default": 1.0, "deep": 1.0}
EXPECTATIONS = "jax-cpu"


def _first_line(doc: str | None) -> str:
    return " ".join((doc or "").split("\n\n")[0].split())


def _summarise(records: list[dict]) -> dict:
    """What a mutant's run found: divergences by (op, type or rule, class), examples that
    failed, cases checked, implementation-defined elements masked."""
    from conformance.apps.expectations import findings
    items, _, _ = findings(records)
    cases = 0
    impl: Counter = Counter()
    examples_failed = []
    for r in records:
        if r.get("kind") == "signature":
            cases += r.get("cases") or 0
            for rule, v in (r.get("impl_defined") or {}).items():
                impl[rule] += v.get("elements", 0) if isinstance(v, dict) else int(v or 0)
        elif r.get("kind") == "example" and r.get("outcome") not in ("pass", "unsupported"):
            examples_failed.append(f"{r.get('op')} example-{r.get('index', 0)}")
    divergences = [{"op": i["op"], "where": i["element_type"] or i["rule"], "class": i["class"],
                    "cases": i["cases"]} for i in items]
    return {"cases": cases, "divergences": divergences, "examples_failed": examples_failed,
            "impl_defined_elements": dict(impl)}


def run_one(name: str, depth: str, seed: int, workdir: str, types: str | None = None) -> dict:
    """Run the suite on one mutant at one depth; gate without and with expectations.
    ``types`` (a comma list of element types, as ``conformance run --types``) narrows
    the run (the tests' quick kill checks)."""
    from bench import mutants
    from conformance.apps.cli import main
    from conformance.apps.expectations import gate, load_expectations, resolve_expectations

    cls = mutants.by_name(name)
    out = os.path.join(workdir, f"{name}-{depth}")
    mutants.STATS.pop(name, None)
    argv = ["run", "--backend", f"bench.mutants:{name}", "--ops", ",".join(cls.ops),
            "--depth", depth, "--seed", str(seed), "--out", out, "--force",
            "--no-progress", "--max-repros", "0", "--no-replay"]
    if types:
        argv += ["--types", types]
    buf = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        rc = main(argv)
        rc_exp = main(["expectations", "check", os.path.join(out, "results.jsonl"),
                       EXPECTATIONS]) if rc in (0, 1) else rc
    elapsed = time.perf_counter() - t0
    stats = dict(mutants.STATS.get(name, {"calls": 0, "changed_calls": 0,
                                           "changed_elements": 0}))
    records = []
    results = os.path.join(out, "results.jsonl")
    if os.path.exists(results):
        with open(results) as fh:
            records = [json.loads(line) for line in fh if line.strip()]
    summary = _summarise(records)
    changed_in = stats.pop("signatures", {})
    hit = [r for r in records if r.get("kind") == "signature" and r.get("signature") in changed_in]
    masked: Counter = Counter()
    for r in hit:
        for rule, v in (r.get("impl_defined") or {}).items():
            masked[rule] += v.get("elements", 0) if isinstance(v, dict) else int(v or 0)
    summary["triggered_in"] = {
        "signatures": len(changed_in),
        "type_keys": sorted({r.get("type_key") for r in hit}),
        "impl_defined_elements": dict(masked),
        "examples": [k for k in changed_in if k not in {r.get("signature") for r in hit}][:5],
    }
    waived = []
    if records:
        g = gate(records, load_expectations(resolve_expectations(EXPECTATIONS)))
        waived = [{"op": e["op"], "where": e["element_type"] or e["rule"], "class": e["class"],
                   "cases": e["cases"], "reason": " ".join((e.get("reason") or "").split())}
                  for e in g.expected]
    return {"mutant": name, "depth": depth, "ops": list(cls.ops), "family": cls.family,
            "equivalent": cls.equivalent, "exit_code": rc, "exit_code_expectations": rc_exp,
            "killed": rc == 1, "killed_expectations": rc_exp == 1,
            "killed_by_generated_cases": any(d["where"] is None or
                                             not str(d["where"]).startswith("example-")
                                             for d in summary["divergences"]),
            "seconds": round(elapsed, 2), "stats": stats, **summary, "waived": waived,
            "log_tail": buf.getvalue()[-2000:] if rc not in (0, 1) else None}


def _task(args):
    return run_one(*args)


def why_survived(r: dict, with_expectations: bool) -> str:
    """One sentence: why a mutant survived, from its run's records and its own counts."""
    changed = r["stats"]["changed_elements"]
    if with_expectations and r["killed"]:
        by_reason: dict[str, list] = defaultdict(list)
        for w in r["waived"]:
            by_reason[w["reason"]].append(w)
        parts = []
        for reason, ws in by_reason.items():
            classes = sorted({w["class"] for w in ws})
            where = sorted({str(w["where"]) for w in ws})
            short = reason if len(reason) <= 90 else reason[:87] + "..."
            parts.append(f"{'/'.join(classes)} on {', '.join(where)} "
                         f"({sum(w['cases'] for w in ws)} cases) by the entry '{short}'")
        return "every divergence expected by jax-cpu: " + "; ".join(parts)
    if r["exit_code"] not in (0, 1):
        return f"run failed with exit code {r['exit_code']}"
    if changed == 0:
        return (f"never triggered: the bug changed no result bit in the {r['cases']} cases "
                f"the suite ran on {', '.join(r['ops'])} (its trigger was not drawn)")
    t = r["triggered_in"]
    head = (f"triggered ({changed} result elements changed, in {t['signatures']} "
            f"signatures of {', '.join(t['type_keys']) or 'the examples'}) but judged allowed")
    if t["impl_defined_elements"]:
        return (f"{head}: those signatures' implementation-defined elements (masked, or "
                f"checked against an allowed set): " + ", ".join(
                    f"{k} {v}" for k, v in sorted(t["impl_defined_elements"].items())))
    return f"{head} (within the verdict's tolerance, or equal under it)"


def _listed_in(name: str) -> str | None:
    from bench import mutants
    try:
        return mutants.by_name(name).listed_in
    except KeyError:
        return None


def score(results: list[dict], depth: str) -> dict:
    rows = [r for r in results if r["depth"] == depth]
    real = [r for r in rows if not r["equivalent"]]
    out = {"depth": depth, "mutants": len(rows), "non_equivalent": len(real),
           "equivalent": len(rows) - len(real), "target": TARGETS.get(depth)}
    listed = [r for r in real if _listed_in(r["mutant"]) == EXPECTATIONS]
    for key, flag, with_exp in (("no_expectations", "killed", False),
                                ("jax_cpu_expectations", "killed_expectations", True)):
        scored = [r for r in real if not (with_exp and r in listed)]
        killed = [r for r in scored if r[flag]]
        out[key] = {
            "killed": len(killed), "total": len(scored),
            "score": round(len(killed) / len(scored), 4) if scored else None,
            "survivors": [{"mutant": r["mutant"], "ops": r["ops"], "family": r["family"],
                           "why": why_survived(r, with_exp)}
                          for r in scored if not r[flag]],
        }
        if with_exp:
            out[key]["listed_bugs"] = [
                {"mutant": r["mutant"], "ops": r["ops"], "passed": not r[flag],
                 "why": why_survived(r, True) if not r[flag] else "killed"}
                for r in listed]
    out["by_family"] = by_family(real, listed)
    gen = [r for r in real if r["killed_by_generated_cases"]]
    out["killed_by_generated_cases"] = {"killed": len(gen), "total": len(real),
                                        "score": round(len(gen) / len(real), 4) if real else None}
    out["equivalent_mutants"] = [
        {"mutant": r["mutant"], "ops": r["ops"], "reason": r["equivalent"],
         "flagged_by_suite": r["killed"],
         "divergences": r["divergences"] if r["killed"] else []}
        for r in rows if r["equivalent"]]
    out["killed_as"] = {r["mutant"]: sorted({d["class"] for d in r["divergences"]})
                        for r in real if r["killed"]}
    out["killed_only_by_examples"] = [r["mutant"] for r in real
                                      if r["killed"] and not r["killed_by_generated_cases"]]
    out["suspect_kills"] = [
        {"mutant": r["mutant"], "classes": sorted({d["class"] for d in r["divergences"]})}
        for r in real if r["killed"] and {d["class"] for d in r["divergences"]}
        <= {"backend_error", "crash", "timeout"}]
    return out


def by_family(real: list[dict], listed: list[dict]) -> dict:
    """Per mutant family (``family`` of bench/mutants.py): the planted bugs caught without
    expectations and gated with jax-cpu (a mutant reproducing a bug jax-cpu lists is left
    out of the latter, as in the overall score): killed, total, fraction."""
    out: dict[str, dict] = {}
    for fam in sorted({r["family"] for r in real}):
        rows = [r for r in real if r["family"] == fam]
        gated = [r for r in rows if r not in listed]
        k0 = sum(1 for r in rows if r["killed"])
        k1 = sum(1 for r in gated if r["killed_expectations"])
        out[fam] = {"no_expectations": {"killed": k0, "total": len(rows),
                                        "score": round(k0 / len(rows), 4)},
                    "jax_cpu_expectations": {"killed": k1, "total": len(gated),
                                             "score": round(k1 / len(gated), 4)
                                             if gated else None}}
    return out


def _print_depth(s: dict) -> None:
    ne = s["no_expectations"]
    je = s["jax_cpu_expectations"]
    ge = s["killed_by_generated_cases"]
    target = s["target"]
    print(f"\n== depth {s['depth']}: {s['mutants']} mutants, {s['non_equivalent']} "
          f"non-equivalent, {s['equivalent']} equivalent")

    def pct(x):  # no score where the selection holds no mutant of that kind
        return "-" if x is None else f"{100 * x:.1f}%"

    print(f"  score, no expectations:        {ne['killed']}/{ne['total']} = "
          f"{pct(ne['score'])}  (target {100 * target:.0f}%)")
    print(f"  score, jax-cpu expectations:   {je['killed']}/{je['total']} = "
          f"{pct(je['score'])}")
    print(f"  killed by generated cases:     {ge['killed']}/{ge['total']} = "
          f"{pct(ge['score'])}  (spec examples left out)")
    fams = s.get("by_family") or {}
    if fams:
        print("  per family (killed/total: no expectations | jax-cpu expectations):")
        for fam, f in fams.items():
            a, b = f["no_expectations"], f["jax_cpu_expectations"]
            pb = f"{100 * b['score']:5.1f}%" if b["score"] is not None else "    -"
            print(f"    {fam:28s} {a['killed']:3d}/{a['total']:<3d} {100 * a['score']:5.1f}%  |  "
                  f"{b['killed']:3d}/{b['total']:<3d} {pb}")
    for title, part in (("survivors (no expectations)", ne),
                        ("survivors (jax-cpu expectations)", je)):
        if part["survivors"]:
            print(f"  {title}:")
            for sv in part["survivors"]:
                print(f"    {sv['mutant']} [{', '.join(sv['ops'])}]: {sv['why']}")
    for lb in je.get("listed_bugs", []):
        print(f"  not scored with jax-cpu: {lb['mutant']} reproduces a bug the file lists for "
              f"jax ({'passes, as it should' if lb['passed'] else 'KILLED'})")
    print("  equivalent (not scored):")
    for e in s["equivalent_mutants"]:
        flag = "  FLAGGED by the suite (a false alarm)" if e["flagged_by_suite"] else ""
        print(f"    {e['mutant']} [{', '.join(e['ops'])}]: {e['reason']}{flag}")
    flushed = [m for m, c in s["killed_as"].items() if c == ["subnormal_flush"]]
    if flushed:
        print(f"  killed only as subnormal_flush: {', '.join(flushed)}")
    if s["killed_only_by_examples"]:
        print(f"  killed only by spec examples: {', '.join(s['killed_only_by_examples'])}")
    for sk in s["suspect_kills"]:
        print(f"  suspect kill (only {sk['classes']}): {sk['mutant']}")


def main(argv=None) -> int:
    from bench import mutants
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--depth", default="quick,default",
                   help="comma list of depths (quick, default, deep)")
    p.add_argument("--mutants", help="comma list of mutant class names (default: all)")
    p.add_argument("--family", help="comma list of mutant families (see --list): only "
                                    "their mutants")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    p.add_argument("--json", metavar="OUT", help="write every figure here")
    p.add_argument("--keep", metavar="DIR", help="keep the runs' output folders here")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--rescore", metavar="JSON",
                   help="score the runs of an earlier --json again (no run)")
    args = p.parse_args(argv)

    every = mutants.all_mutants()
    if args.list:
        for c in every:
            eq = "  [equivalent]" if c.equivalent else ""
            print(f"{c.__name__:36s} {c.family:22s} {','.join(c.ops)}{eq}\n"
                  f"    {_first_line(c.__doc__)}")
        return 0
    if args.rescore:
        doc = json.loads(Path(args.rescore).read_text())
        runs = doc["runs"]
        depths = list(dict.fromkeys(r["depth"] for r in runs))
        doc["scores"] = [score(runs, d) for d in depths]
        for s in doc["scores"]:
            _print_depth(s)
        if args.json:
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
            print(f"\nwritten: {args.json}")
        return 0
    depths = [d.strip() for d in args.depth.split(",") if d.strip()]
    if not depths or any(d not in TARGETS for d in depths):
        p.error(f"--depth: expected a comma list of {', '.join(TARGETS)}")
    names = [c.__name__ for c in every]
    if args.mutants:
        wanted = [m.strip() for m in args.mutants.split(",") if m.strip()]
        unknown = [m for m in wanted if m not in names]
        if unknown:
            p.error(f"--mutants: unknown {', '.join(unknown)}")
        names = wanted
    if args.family:
        fams = [f.strip() for f in args.family.split(",") if f.strip()]
        known = {c.family for c in every}
        unknown = [f for f in fams if f not in known]
        if unknown:
            p.error(f"--family: unknown {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        names = [n for n in names if mutants.by_name(n).family in fams]

    workdir = args.keep or tempfile.mkdtemp(prefix="mutation-")
    os.makedirs(workdir, exist_ok=True)
    tasks = [(n, d, args.seed, workdir) for d in depths for n in names]
    t0 = time.perf_counter()
    if args.workers > 1:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(args.workers, maxtasksperchild=8) as pool:
            results = list(pool.imap(_task, tasks))
    else:
        results = [_task(t) for t in tasks]
    elapsed = time.perf_counter() - t0
    if not args.keep:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)

    scores = [score(results, d) for d in depths]
    print(f"{len(names)} mutants x {len(depths)} depths in {elapsed:.0f} s")
    for s in scores:
        _print_depth(s)
    if args.json:
        import numpy
        doc = {"command": " ".join(["python", "bench/bench_mutation.py"] + list(argv or
                                                                              sys.argv[1:])),
               "seed": args.seed, "expectations": EXPECTATIONS, "seconds": round(elapsed, 1),
               "environment": {"python": platform.python_version(), "numpy": numpy.__version__,
                               "cpus": os.cpu_count()},
               "mutants": [{"name": c.__name__, "ops": list(c.ops), "family": c.family,
                            "equivalent": c.equivalent, "bug": _first_line(c.__doc__)}
                           for c in every if c.__name__ in names],
               "scores": scores, "runs": results}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"\nwritten: {args.json}")
    ok = all(s["no_expectations"]["score"] is None
             or s["no_expectations"]["score"] >= s["target"] for s in scores)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
