"""Peak memory of a conformance run (resident set size), as a benchmark.

Runs ``conformance run`` in a child process and samples the resident memory of it and
all its descendants (--jobs workers, isolated backends' children) every 0.2 s from
/proc. Reports the peak of the whole process tree (what a CI machine must hold) and
of the largest single process, with the targets of issue 11: the default run (jax, CPU)
<= 1 GB, the three-backend run (jax, xla, interpreter) <= 1.5 GB. ``--flat`` also runs
the first quarter of the ops alone, to show that the peak does not grow with the
number of ops.

    python bench/bench_memory.py                                  # default run
    python bench/bench_memory.py --backend jax,xla,interpreter    # 3 backends
    python bench/bench_memory.py --depth quick --flat             # growth with ops
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
TARGETS_MB = {"jax": 1024, "jax,xla,interpreter": 1536}


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _rss_mb(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2 ** 20
    except OSError:
        return 0.0


def tree_rss(root: int) -> tuple[float, float]:
    """(sum over the process tree, largest single process) in MiB."""
    kids = _children()
    todo, seen = [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(kids.get(pid, []))
    sizes = [_rss_mb(p) for p in seen]
    return sum(sizes), max(sizes, default=0.0)


def measure(args: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        cmd = [sys.executable, "-m", "conformance", "run", "--no-progress",
               "--out", str(Path(tmp) / "out"), *args]
        started = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        peak_tree = peak_one = 0.0
        while proc.poll() is None:
            tree, one = tree_rss(proc.pid)
            peak_tree, peak_one = max(peak_tree, tree), max(peak_one, one)
            time.sleep(0.2)
        output = proc.stdout.read()
        summary = next((line for line in output.splitlines() if line.startswith("checked")),
                       output.strip().splitlines()[-1] if output.strip() else "")
        return {"args": " ".join(args), "exit": proc.returncode,
                "seconds": round(time.time() - started, 1), "peak_tree_mb": round(peak_tree),
                "peak_process_mb": round(peak_one), "summary": summary}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="jax")
    p.add_argument("--depth", default="default")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--ops", help="comma list of ops (default: all)")
    p.add_argument("--flat", action="store_true",
                   help="also run the first quarter of the ops alone and compare peaks")
    a = p.parse_args(argv)
    base = ["--backend", a.backend, "--depth", a.depth, "--jobs", str(a.jobs)]
    runs = []
    if a.flat:
        from conformance.specs import op_names
        names = op_names()
        runs.append(measure(base + ["--ops", ",".join(names[:max(1, len(names) // 4)])]))
    runs.append(measure(base + (["--ops", a.ops] if a.ops else [])))
    for r in runs:
        print(f"{r['args']}: peak RSS {r['peak_tree_mb']} MiB (process tree), "
              f"{r['peak_process_mb']} MiB (largest process); {r['seconds']} s; "
              f"exit {r['exit']}; {r['summary']}")
    target = TARGETS_MB.get(a.backend)
    if target and not a.ops and a.depth == "default":
        met = runs[-1]["peak_tree_mb"] <= target
        print(f"target <= {target} MiB for the {a.depth} run of {a.backend}: "
              f"{'MET' if met else 'NOT MET'}")
    if a.flat:
        print(f"peak with all ops / with a quarter of them: "
              f"{runs[-1]['peak_tree_mb'] / max(1, runs[0]['peak_tree_mb']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
