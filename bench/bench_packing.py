"""Packing benchmark (issue 20): fresh signatures per second with one compile per
signature and with packs of several signatures compiled as one program, and the suite's
overhead against a bare loop measured the same way.

The signature set is bench_throughput.py's (23 element-wise (op, type binding) pairs,
4 signatures each: 92; 2 each with ``--quick``), its values the runner's own
(``conformance.checking.plan.batch_for``, drawn beforehand, untimed, the same on every side).

A. suite: ``Runner.run_signature`` for every signature on a new backend (nothing
   compiled), with ``runner.packer`` a ``conformance.checking.packing.UnitPacker`` over the set
   in plan order (``--pack 1``: none, one compile per signature): compile, the depth's
   value batches, oracle, verdicts, records; signatures/s = 92 / wall time.
B. bare: the same compiles and runs with nothing else: per signature, the backend's
   ``compile_batch`` and each batch through it (pack 1), or per pack the backend's
   ``compile_pack`` and each batch through it; signatures/s the same way.
   overhead = suite time / bare time - 1, paired per repetition.
C. compile only: every signature's ``compile_batch`` or every pack's ``compile_pack``,
   nothing run: ms per signature; and a line fitted through them, pack time = fixed +
   members x per member: the per-module cost packing shares and the per-kernel cost it
   cannot.

The speed-up is each pack size's signatures/s over pack 1's (suite, and bare), per
repetition, median reported. Backends run in this process (``--backend xla``, the
default: PJRT straight from StableHLO text; ``jax``: jax.jit; ``iree``, ``pjrt:NAME``,
``interpreter``, ``module:Class``: any backend, packed through its own pack path or the
text path every backend that compiles StableHLO text has, issue 33), not isolated, so
that compile and run are what is timed, not the child process's pipe; ``--isolate`` runs
each measurement's backend in a child process as a run does (its start is not timed).

Verdicts: every signature's counts (pass, value, ...) are compared across pack sizes
(the suite side A); "identical" means every signature's counts agree.

    python bench/bench_packing.py [--backend xla|jax|iree|pjrt:NAME|...] [--packs 1,4,8,16,32]
                                  [--depth default|quick] [--repeat 3] [--quick]
                                  [--limit N] [--sides suite,bare,compile] [--isolate]
                                  [--json OUT.json]

``--limit N``: N of the signatures, spread evenly over the set (a slow compiler: IREE
compiles a one-op module in 0.25-1.4 s here). Targets (issues 20, 33): signatures/s with
packing >= 3x that of one compile per signature, on jax and xla, and on iree and pjrt.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from bench_throughput import MODES, Item, plan  # noqa: E402
from conformance.checking import packing  # noqa: E402
from conformance.backends import get_backend  # noqa: E402
from conformance.core.results import ResultsWriter  # noqa: E402
from conformance.checking.plan import DEPTHS, batch_for  # noqa: E402
from conformance.apps.runner import RunConfig, Runner  # noqa: E402

TARGET_SPEEDUP = 3.0


def cpu_time() -> float:
    """CPU seconds of this process and of its finished children: IREE's compile_str runs
    the iree-compile tool as a child process (subprocess.run); an isolated backend's work
    is in its child, counted once that child has exited (each measurement's backend is
    closed before the CPU clock is read, so with ``--isolate`` the CPU figures include the
    child's start, the wall ones do not)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


ISOLATE = False       # --isolate: each measurement's backend in a child process


def fresh_backend(name: str):
    if name == "jax":
        import jax
        jax.clear_caches()
    if ISOLATE:
        from conformance.checking.isolation import IsolatedBackend
        return IsolatedBackend(name, timeout=600.0)
    return get_backend(name)


def close(backend) -> None:
    done = getattr(backend, "close", None)
    if done is not None:
        done()


def suite(items: list[Item], inputs, backend_name: str, pack: int, depth: str, seed: int,
          tmp: Path) -> tuple[tuple[float, float], dict]:
    backend = fresh_backend(backend_name)
    out = Path(tempfile.mkdtemp(prefix=f"pack{pack}-", dir=tmp))
    draws = {(it.sig.op, it.key, it.index): batches for it, batches in zip(items, inputs)}
    with ResultsWriter(out / "results.jsonl") as writer:
        runner = Runner(RunConfig(backends=(backend_name,), depth=depth, seed=seed, out=out,
                                  max_repros=0, progress=False, pack=pack),
                        [backend], writer)
        packer = packing.UnitPacker(
            [backend], [(it.key, it.index, it.sig) for it in items], pack,
            runner.depth.batches,
            lambda key, i, b, sig: list(draws[(sig.op, key, i)][b]))
        runner.packer = packer
        c0, t0 = cpu_time(), time.perf_counter()
        with np.errstate(all="ignore"):
            for it in items:
                packer.before(it.sig.op, it.key, it.index)
                runner.run_signature(it.spec, it.key, it.index, it.sig)
        wall = time.perf_counter() - t0
    refusal = backend.pack_refusal
    close(backend)
    elapsed = wall, cpu_time() - c0
    counts: dict[str, int] = {}
    verdicts: dict[str, dict] = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") == "signature":
            for k, v in r.get("counts", {}).items():
                counts[k] = counts.get(k, 0) + v
            verdicts[f"{r['op']} {r['type_key']} {r['index']}"] = \
                r.get("counts") or {r["outcome"]: r.get("reason")}
    return elapsed, {"counts": counts, **packer.stats, "verdicts": verdicts,
                     "refused": refusal}


def bare(items: list[Item], inputs, backend_name: str, pack: int) -> tuple[float, float]:
    backend = fresh_backend(backend_name)
    c0, t0 = cpu_time(), time.perf_counter()
    if pack < 2:
        for it, batches in zip(items, inputs):
            exe = backend.compile_batch(it.sig)
            for stacked in batches:
                exe(list(stacked))
    else:
        for start in range(0, len(items), pack):
            chunk = list(range(start, min(start + pack, len(items))))
            if len(chunk) < 2:
                for j in chunk:
                    exe = backend.compile_batch(items[j].sig)
                    for stacked in inputs[j]:
                        exe(list(stacked))
                continue
            exe = backend.compile_pack([items[j].sig for j in chunk])
            for b in range(len(inputs[0])):
                exe([list(inputs[j][b]) for j in chunk])
    wall = time.perf_counter() - t0
    close(backend)
    return wall, cpu_time() - c0


def compile_only(items: list[Item], backend_name: str, pack: int) -> tuple[float, float]:
    """C. the compiles alone: every signature's (pack 1) or every pack's."""
    backend = fresh_backend(backend_name)
    c0, t0 = cpu_time(), time.perf_counter()
    if pack < 2:
        for it in items:
            backend.compile_batch(it.sig)
    else:
        for start in range(0, len(items), pack):
            chunk = items[start:start + pack]
            if len(chunk) < 2:
                backend.compile_batch(chunk[0].sig)
            else:
                backend.compile_pack([it.sig for it in chunk])
    wall = time.perf_counter() - t0
    close(backend)
    return wall, cpu_time() - c0


def _compile_line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(fixed, per member) ms of ``pack time = fixed + members x per member``, fitted to
    (pack size, ms per signature) points: what packing shares and what it cannot."""
    xs = np.array([p for p, _ in points], float)
    ys = np.array([p * ms for p, ms in points], float)
    member, fixed = np.polyfit(xs, ys, 1)
    return float(fixed), float(member)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="xla")
    ap.add_argument("--packs", default="1,4,8,16,32")
    ap.add_argument("--depth", default="default", choices=list(DEPTHS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 signatures per pair (46)")
    ap.add_argument("--limit", type=int, default=0,
                    help="this many of the signatures, spread evenly over the set")
    ap.add_argument("--sides", default="suite,bare,compile",
                    help="which of A (suite), B (bare), C (compile) to measure")
    ap.add_argument("--isolate", action="store_true",
                    help="each measurement's backend in a child process, as a run has it")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    global ISOLATE
    ISOLATE = args.isolate
    sides = [x.strip() for x in args.sides.split(",") if x.strip()]
    if "suite" not in sides or any(x not in ("suite", "bare", "compile") for x in sides):
        ap.error(f"--sides {args.sides!r}: a comma list of suite, bare, compile, with suite")
    mode = MODES["quick" if args.quick else "default"]
    depth = DEPTHS[args.depth]
    items, dropped = plan(mode["per_pair"], args.seed, depth.shape_profile)
    if 0 < args.limit < len(items):
        step = len(items) / args.limit
        items = [items[int(k * step)] for k in range(args.limit)]
    inputs = [[batch_for(args.seed, args.depth, it.spec, it.key, it.index, b, it.sig)
               for b in range(depth.batches)] for it in items]
    packs = [int(x) for x in args.packs.split(",")]
    if 1 not in packs:
        packs = [1] + packs
    # one warm-up of everything (imports, first compiles), untimed
    with tempfile.TemporaryDirectory() as tmp:
        suite(items[:8], inputs[:8], args.backend, 4, args.depth, args.seed, Path(tmp))
        if "bare" in sides:
            bare(items[:8], inputs[:8], args.backend, 4)
        times = {p: {"suite": [], "bare": [], "suite_cpu": [], "bare_cpu": [],
                     "compile": [], "compile_cpu": []} for p in packs}
        stats = {}
        for rep in range(args.repeat):
            for p in packs:
                order = ("suite", "bare", "compile") if rep % 2 == 0 else \
                    ("compile", "bare", "suite")
                for side in (x for x in order if x in sides):
                    if side == "compile":
                        t = compile_only(items, args.backend, p)
                    elif side == "suite":
                        t, st = suite(items, inputs, args.backend, p, args.depth, args.seed,
                                      Path(tmp))
                        stats[p] = st
                    else:
                        t = bare(items, inputs, args.backend, p)
                    times[p][side].append(t[0])
                    times[p][side + "_cpu"].append(t[1])
    n = len(items)

    def med(xs) -> float:
        xs = list(xs)
        return statistics.median(xs) if xs else float("nan")
    rows = []
    for p in packs:
        s, b = times[p]["suite"], times[p]["bare"]
        sc, bc = times[p]["suite_cpu"], times[p]["bare_cpu"]
        rows.append({
            "suite_cpu_speedup": med(a / x for a, x in zip(times[1]["suite_cpu"], sc)),
            "overhead_cpu": med(x / y - 1 for x, y in zip(sc, bc)),
            "suite_cpu_s": sc, "bare_cpu_s": bc,
            "compile_ms_per_sig": 1e3 * med(times[p]["compile"]) / len(items),
            "compile_cpu_ms_per_sig": 1e3 * med(times[p]["compile_cpu"]) / len(items),
            "pack": p,
            "suite_sigs_per_s": n / med(s),
            "bare_sigs_per_s": n / med(b) if b else float("nan"),
            "suite_speedup": med(a / x for a, x in zip(times[1]["suite"], s)),
            "bare_speedup": med(a / x for a, x in zip(times[1]["bare"], b)),
            "overhead": med(x / y - 1 for x, y in zip(s, b)),
            "suite_s": s, "bare_s": b, "stats": stats.get(p)})
    print(f"{n} signatures ({args.backend}{', isolated' if args.isolate else ''}, depth "
          f"{args.depth}: {depth.batches} batches of {depth.batch_size}), median of "
          f"{args.repeat}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'pack':>5} {'suite sig/s':>12} {'x pack 1':>9} {'(CPU)':>7} {'bare sig/s':>11} "
          f"{'x pack 1':>9} {'overhead':>9} {'(CPU)':>7} {'compile ms/sig (CPU)':>21}")
    for r in rows:
        print(f"{r['pack']:>5} {r['suite_sigs_per_s']:>12.1f} {r['suite_speedup']:>8.2f}x "
              f"{r['suite_cpu_speedup']:>6.2f}x {r['bare_sigs_per_s']:>11.1f} "
              f"{r['bare_speedup']:>8.2f}x {r['overhead']:>+8.1%} {r['overhead_cpu']:>+7.1%} "
              + (f"{r['compile_ms_per_sig']:>12.1f} ({r['compile_cpu_ms_per_sig']:.1f})"
                 if args.backend != "jax" else f"{'n/a':>12}"))
    if args.backend == "jax":
        print("(jax compiles at an executable's first call, so C measures nothing there: "
              "its compiles are inside A and B)")
    if args.backend != "jax" and len(rows) > 1 and "compile" in sides:
        # C as a line: a pack of p members compiles in about fixed + p x member ms
        for key, what in (("compile_ms_per_sig", "wall"), ("compile_cpu_ms_per_sig", "CPU")):
            fixed, member = _compile_line([(r["pack"], r[key]) for r in rows])
            print(f"compile per pack ({what}): {fixed:.1f} ms per module + {member:.1f} ms "
                  f"per member (least squares over the pack sizes)")
    for r in rows:
        st = r["stats"] or {}
        print(f"pack {r['pack']}: {st.get('packs', 0)} packs of {st.get('packed', 0)} "
              f"signatures, {st.get('bisections', 0)} bisections, {st.get('alone', 0)} alone"
              + (f"; packing refused: {st['refused']}" if st.get("refused") else ""))
    same = len({json.dumps(r["stats"]["counts"], sort_keys=True) for r in rows}) == 1
    print("verdict counts identical for every pack size:", same)
    first = rows[0]["stats"]["verdicts"]
    differ = sorted({k for r in rows for k, v in r["stats"]["verdicts"].items()
                     if first.get(k) != v} | {k for r in rows for k in first
                                             if k not in r["stats"]["verdicts"]})
    print(f"every signature's verdicts identical for every pack size: {not differ}"
          + (f" (differ: {', '.join(differ[:5])})" if differ else ""))
    default = next((r for r in rows if r["pack"] == packing.DEFAULT_PACK), None)
    if default is not None:
        print(f"at the default pack size ({packing.DEFAULT_PACK}): "
              f"{default['suite_sigs_per_s']:.2f} fresh signatures/s, "
              f"{default['suite_speedup']:.2f}x one compile per signature "
              f"({rows[0]['suite_sigs_per_s']:.2f}/s)")
    best = max(r["suite_speedup"] for r in rows)
    at = default["suite_speedup"] if default is not None else best
    print(f"target: suite speed-up >= {TARGET_SPEEDUP}x"
          f"{' at the default pack size' if default is not None else ''}: "
          f"{'met' if at >= TARGET_SPEEDUP and not differ else 'NOT met'} ({at:.2f}x; best "
          f"{best:.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "backend": args.backend, "depth": args.depth, "signatures": n,
            "dropped": dropped, "rows": rows, "python": platform.python_version(),
            "cpus": os.cpu_count(), "loadavg": os.getloadavg()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
