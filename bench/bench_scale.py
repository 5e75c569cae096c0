"""Scale benchmark (issue 20): the same quick plan run by 1 and 2 workers, and the
driver's cost per record.

A. speed-up: ``conformance.apps.runner.run`` over the plan with an executor of 1 worker,
   then 2 (``--executor ray``: a local Ray instance started for each, its start-up
   timed apart; ``--executor processes``: ``--jobs``'s spawned processes). Each
   worker builds its backends once (the first unit it runs pays the import and
   backend start-up), so the plan is the expensive ops first; speed-up = the 1-worker
   wall time / the 2-worker wall time, per repetition, median reported.
B. driver overhead per record: the driver's part of a run (conformance.apps.executors.drive:
   identity, dedupe, JSON line written and flushed, reproducer files, cell totals)
   timed over the records the plan produced, replayed from memory by an executor
   whose units are already done; divided by the records written.
C. balance: the speed-up 2 dedicated cores would give, from each unit's CPU time in
   B's inline run (units handed out biggest first), for the units (ops split into
   parts, op#k/m) and for whole ops: what finer units gain, independent of the load.

    python bench/bench_scale.py [--executor ray|processes] [--pin one|share|off]
                                [--ops add,sine,...]
                                [--backend jax] [--repeat 2] [--json OUT.json]

``--pin one`` (the default) gives each worker one core (conformance.apps.worker_cores), so
that the speed-up is the executor's over workers of one core each; ``--pin share`` is
a run's default (cores // workers: one worker takes both cores, its XLA compiling on
both), ``--pin off`` leaves them unpinned (``CONFORMANCE_PIN_CORES=0`` too).

Targets (issue 20): speed-up with 2 workers >= 1.7 on a 2-core machine. The driver's
cost per record decides where one driver stops keeping up (bench/README.md, sizing).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

DEFAULT_OPS = ("add,subtract,multiply,divide,maximum,negate,abs,sine,cosine,exponential,"
               "log,tanh,sqrt,compare,select,clamp,convert,not,and,popcnt")


def _config(args, out: Path):
    from conformance.apps.runner import RunConfig
    return RunConfig(backends=[args.backend], ops=args.ops.split(","), depth=args.depth,
                     seed=args.seed, out=out, progress=False, replay=False,
                     element_types=args.types.split(",") if args.types else None)


def _pin(mode: str, workers: int) -> int:
    """Cores per worker: ``one`` (each worker one core, the speed-up is the executor's
    over workers), ``share`` (a run's default: cores // workers, so 1 worker takes
    both), ``off``."""
    from conformance.apps.worker_cores import enabled, share
    if mode == "off" or not enabled():
        return 0
    return share(workers) if mode == "share" else 1


def _executor(kind: str, workers: int, pin: str):
    from conformance.apps.executors import ProcessExecutor, RayExecutor
    if kind == "ray":
        t0 = time.perf_counter()
        ex = RayExecutor(None, num_cpus=workers, pin=_pin(pin, workers))
        return ex, time.perf_counter() - t0
    return ProcessExecutor(workers, pin=_pin(pin, workers)), 0.0


def run_once(args, workers: int) -> dict:
    from conformance.backends import get_backend
    from conformance.apps.runner import run
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        ex, startup = _executor(args.executor, workers, args.pin)
        try:
            t0 = time.perf_counter()
            run(_config(args, out), [get_backend(args.backend)], out / "results.jsonl",
                executor=ex)
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        n = sum(1 for _ in open(out / "results.jsonl"))
    return {"workers": workers, "wall_s": wall, "startup_s": startup, "records": n}


def driver_overhead(args) -> dict:
    """B: the driver's work per record, with the units' results already in memory."""
    from conformance.core.results import ResultsWriter
    from conformance.apps.executors import Executor, InlineExecutor, drive, units_of
    from conformance.apps.runner import Runner, select_ops
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(args, Path(tmp))
        specs = select_ops(config)
        results, unit_s = [], {}
        t0 = time.process_time()
        for res in InlineExecutor().map_units(config, [args.backend], units_of(config, specs)):
            t1 = time.process_time()
            results.append(res)
            unit_s[res.unit or res.op] = t1 - t0
            t0 = t1

        class Replay(Executor):
            def map_units(self, config, locators, ops):
                yield from results

        times, n = [], 0
        for i in range(5):
            with ResultsWriter(Path(tmp) / f"r{i}.jsonl") as w:
                runner = Runner(config, [], w)
                t0 = time.perf_counter()
                drive(Replay(), config, [args.backend], specs, w, runner)
                times.append(time.perf_counter() - t0)
            n = sum(1 for _ in open(Path(tmp) / f"r{i}.jsonl"))
    per = statistics.median(times) / max(1, n)
    return {"records": n, "median_s": statistics.median(times), "per_record_us": per * 1e6,
            "records_per_s": 1 / per if per else None, "unit_cpu_s": unit_s}


def balance(unit_s: dict[str, float], workers: int = 2) -> dict:
    """C. How evenly the units share ``workers`` dedicated cores: each unit's CPU time
    (one worker, measured in B's inline run), handed out biggest first to the worker
    that frees first; bound = total / the last worker's finish. For the parts as units
    and for whole ops (an op's parts summed), so the gain of finer units shows without
    the machine's load."""
    def bound(times):
        free = [0.0] * workers
        for t in sorted(times, reverse=True):
            i = free.index(min(free))
            free[i] += t
        return sum(times) / max(free) if max(free) else 1.0
    ops: dict[str, float] = {}
    for u, t in unit_s.items():
        op = u.partition("#")[0]
        ops[op] = ops.get(op, 0.0) + t
    return {"units": len(unit_s), "ops": len(ops), "total_cpu_s": sum(unit_s.values()),
            "bound_parts": bound(list(unit_s.values())), "bound_ops": bound(list(ops.values())),
            "longest_unit_s": max(unit_s.values()), "longest_op_s": max(ops.values())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--executor", choices=["ray", "processes"], default=None,
                   help="default: ray when installed, else processes")
    p.add_argument("--pin", choices=["one", "share", "off"], default="one",
                   help="cores per worker (see the module doc)")
    p.add_argument("--ops", default=DEFAULT_OPS)
    p.add_argument("--types", default=None)
    p.add_argument("--backend", default="jax")
    p.add_argument("--depth", default="quick")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.executor is None:
        import importlib.util
        args.executor = "ray" if importlib.util.find_spec("ray") else "processes"
    print(f"executor {args.executor}, backend {args.backend}, depth {args.depth}, "
          f"{len(args.ops.split(','))} ops, {os.cpu_count()} cpus, cores per worker: "
          f"{args.pin} (1 worker: {_pin(args.pin, 1) or 'unpinned'}, 2 workers: "
          f"{_pin(args.pin, 2) or 'unpinned'})", flush=True)
    reps = []
    for r in range(args.repeat):
        order = (1, 2) if r % 2 == 0 else (2, 1)         # alternate: the machine drifts
        got = {w: run_once(args, w) for w in order}
        got["loadavg"] = os.getloadavg()[0]
        reps.append(got)
        print(f"  rep {r}: 1 worker {got[1]['wall_s']:.1f} s, 2 workers "
              f"{got[2]['wall_s']:.1f} s (start-up {got[1]['startup_s']:.1f} / "
              f"{got[2]['startup_s']:.1f} s), {got[1]['records']} records, load average "
              f"{got['loadavg']:.1f}", flush=True)
    speedups = [g[1]["wall_s"] / g[2]["wall_s"] for g in reps]
    b = driver_overhead(args)
    c = balance(b.pop("unit_cpu_s"))
    result = {"executor": args.executor, "backend": args.backend, "depth": args.depth,
              "ops": args.ops.split(","), "cpus": os.cpu_count(),
              "python": platform.python_version(), "repetitions": reps,
              "speedup_median": statistics.median(speedups), "speedups": speedups,
              "driver": b, "balance": c, "target_speedup": 1.7}
    print(f"A. speed-up with 2 workers: median {result['speedup_median']:.2f}x "
          f"({', '.join(f'{s:.2f}' for s in speedups)}); target >= 1.7")
    print(f"B. driver: {b['per_record_us']:.0f} us per record ({b['records']} records in "
          f"{b['median_s'] * 1e3:.0f} ms; {b['records_per_s']:.0f} records/s)")
    print(f"C. balance on 2 dedicated cores (units' CPU time, biggest first): "
          f"{c['units']} units: {c['bound_parts']:.2f}x; as {c['ops']} whole ops: "
          f"{c['bound_ops']:.2f}x (longest unit {c['longest_unit_s']:.1f} s, longest op "
          f"{c['longest_op_s']:.1f} s of {c['total_cpu_s']:.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
