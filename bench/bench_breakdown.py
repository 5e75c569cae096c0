"""Where a conformance run's time goes, per family (issue 33, "the sweep").

Runs ``conformance run`` in this process (one job, the backends not isolated, so that
every stage runs here) family by family under the stage clock
(conformance/checking/stage_clock.py): exclusive wall and CPU seconds per stage, with
``other`` the time under no marked stage, so each family's stages add up to its whole
run. ``first_call`` is an executable's first call: jax's jit traces and compiles there,
so for the jax backend compile = compile + first_call.

    python bench/bench_breakdown.py --depth quick                  # every family, jax
    python bench/bench_breakdown.py --depth default --family arithmetic,reduction
    python bench/bench_breakdown.py --depth quick --backend xla --json out.json

Issue 33's rule, checked per family and printed: the oracle and the verdicts together
stay below the backend's share (compile, first call, run and packs).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from conformance.apps import cli  # noqa: E402
from conformance.checking import stage_clock  # noqa: E402
from conformance.specs import load_spec, op_names  # noqa: E402

BACKEND_STAGES = ("compile", "first_call", "run", "pack")
SUITE_STAGES = ("oracle", "verdict", "cross")


def families() -> list[str]:
    return sorted({load_spec(op).family for op in op_names()})


def measure(family: str, args: argparse.Namespace, tmp: Path) -> dict:
    out = tmp / family
    argv = ["run", "--family", family, "--depth", args.depth, "--seed", str(args.seed),
            "--backend", args.backend, "--no-isolate", "--no-progress", "--out", str(out)]
    start = time.perf_counter()
    with stage_clock.measuring() as clock:
        code = cli.main(argv)
        stages = clock.totals()
    wall = time.perf_counter() - start
    backend = sum(stages.get(s, {}).get("cpu", 0.0) for s in BACKEND_STAGES)
    suite = sum(stages.get(s, {}).get("cpu", 0.0) for s in SUITE_STAGES)
    return {"family": family, "exit": code, "wall": wall, "stages": stages,
            "backend_cpu": backend, "oracle_verdict_cpu": suite,
            "oracle_verdict_below_backend": suite < backend}


def print_table(rows: list[dict]) -> None:
    names = [s for s in (*stage_clock.STAGES, stage_clock.OTHER)
             if any(s in r["stages"] for r in rows)]
    print(f"{'family':<16}{'wall s':>8}" + "".join(f"{n[:9]:>10}" for n in names)
          + "  oracle+verdict < backend")
    total = {n: 0.0 for n in names}
    for r in rows:
        w = sum(v["wall"] for v in r["stages"].values()) or 1.0
        cells = []
        for n in names:
            t = r["stages"].get(n, {}).get("wall", 0.0)
            total[n] += t
            cells.append(f"{100 * t / w:>9.1f}%")
        print(f"{r['family']:<16}{r['wall']:>8.1f}" + "".join(cells)
              + f"  {'yes' if r['oracle_verdict_below_backend'] else 'NO'}")
    w = sum(total.values()) or 1.0
    print(f"{'all':<16}{sum(r['wall'] for r in rows):>8.1f}"
          + "".join(f"{100 * total[n] / w:>9.1f}%" for n in names))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", choices=["quick", "default", "deep"], default="quick")
    ap.add_argument("--family", help="comma list of families (default: every family)")
    ap.add_argument("--backend", default="jax", help="backend(s), as `conformance run` takes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE", help="write every figure here")
    args = ap.parse_args(argv)
    known = families()
    chosen = args.family.split(",") if args.family else known
    unknown = [f for f in chosen if f not in known]
    if unknown:
        ap.error(f"--family: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    with tempfile.TemporaryDirectory(prefix="bench-breakdown-") as tmp:
        rows = [measure(f, args, Path(tmp)) for f in chosen]
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"depth": args.depth, "backend": args.backend,
                                               "seed": args.seed, "families": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
