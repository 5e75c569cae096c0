"""Peak memory of a conformance run (resident set size), as a benchmark: true peaks.

Runs ``conformance run`` in a child process and reads the kernel's own high-water marks
of resident memory; nothing is inferred from samples of the current size.

- **largest process, exact**: the kernel's maximum resident set size (``ru_maxrss``) of
  every process of the tree, from ``os.wait4``: the rusage of a reaped child carries the
  largest of it and of every descendant it reaped (Linux ``getrusage(2)``), and this
  process is made the tree's child subreaper (``PR_SET_CHILD_SUBREAPER``), so that an
  orphaned descendant comes here to be reaped; no process of the tree escapes it,
  however short it lives.
- **per process**: each process's ``VmHWM`` (the kernel's high-water mark of its
  resident set, in ``/proc/PID/status``), read every 0.1 s while it lives: exact up to
  what it grows in the last 0.1 s before it exits (a process living under 0.1 s may be
  missing from the list; it is in the exact figure above). The largest figure of the list
  below the exact maximum says so.
- **the whole tree at once** (what a CI machine must hold): bounded from both sides, there
  is no exact figure without a cgroup of its own: at least the largest sum of the
  processes' proportional set sizes (``Pss``: a page shared by k processes counts 1/k in
  each) seen at one reading (once a second: a lower bound); at most, over the readings,
  the sum of the peaks of the processes alive at that reading (their peaks at any time,
  and a forked copy's pages, shared with its parent, counted in both: an upper bound, but
  for a process that lived between two readings, under 0.1 s; never below the exact
  largest process).

Targets (issue 11, issue 31): the default and the quick run (jax, CPU) <= 1 GB, the
three-backend run (jax, xla, interpreter) <= 1.5 GB, flat in the number of ops (``--flat``
also runs the first quarter of the ops alone). Linux only (``/proc``, ``prctl``).

    python bench/bench_memory.py                                  # default run
    python bench/bench_memory.py --depth quick                    # quick run
    python bench/bench_memory.py --backend jax,xla,interpreter --depth quick   # 3 backends
    python bench/bench_memory.py --depth quick --flat             # growth with ops
    python bench/bench_memory.py --depth quick --family convolution
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

PAGE = os.sysconf("SC_PAGE_SIZE")
#: targets in MiB, by (backend, depth)
TARGETS_MB = {("jax", "default"): 1024, ("jax", "quick"): 1024,
              ("jax,xla,interpreter", "default"): 1536,
              ("jax,xla,interpreter", "quick"): 1536}
PR_SET_CHILD_SUBREAPER = 36
#: how often the per-process high-water marks are read (seconds)
INTERVAL = 0.1
#: how often the tree's sum of proportional set sizes is read (seconds)
PSS_INTERVAL = 1.0


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux >= 3.4): an
    orphaned descendant is reparented here and reaped by :func:`peak_of`, so that its
    maximum resident size is counted. False where the call is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def memory_cgroup() -> tuple[Path, str] | None:
    """A new, empty memory cgroup under this process's own, and the name of its peak file
    (cgroup v1 ``memory.max_usage_in_bytes``, v2 ``memory.peak``); None where none can be
    made (not root, no memory controller, a read-only cgroup tree). Its peak is the most
    memory charged to the tree at once, exactly: what a container's memory limit counts
    (anonymous memory, and page cache the tree brought in; pages already cached by other
    processes are charged to them)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:
        _, controllers, where = line.split(":", 2)
        if "memory" in controllers.split(","):
            found = (Path("/sys/fs/cgroup/memory") / where.lstrip("/"),
                     "memory.max_usage_in_bytes")
            break
    else:
        unified = [line[3:] for line in lines if line.startswith("0::")]
        if unified:
            found = (Path("/sys/fs/cgroup") / unified[0].lstrip("/"), "memory.peak")
    if found is None:
        return None
    group = found[0] / f"bench-memory-{os.getpid()}"
    try:
        group.mkdir()
    except OSError:
        return None
    if not (group / found[1]).exists():
        group.rmdir()
        return None
    return group, found[1]


def _join_cgroup(group: Path) -> None:
    """(In the measured child, before exec) move this process into ``group``."""
    (group / "cgroup.procs").write_text(str(os.getpid()))


def _parents() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(entry)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    """Every process below ``root`` now (``root`` excluded)."""
    kids: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _kib(value: str) -> int:
    return int(value.split()[0]) if value and value.split() else 0


def _pss_kib(pid: int, status: dict[str, str]) -> int:
    """The process's proportional set size (a page shared by k processes counts 1/k in
    each: a forked copy's pages are not counted twice); its resident size where
    ``smaps_rollup`` cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return _kib(line.split(":", 1)[1])
    except OSError:
        pass
    return _kib(status.get("VmRSS", ""))


def _start_time(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(a.decode(errors="replace") for a in raw.split(b"\0") if a) or "?"


@dataclasses.dataclass
class Process:
    """One process of the tree: its kernel high-water mark of resident memory (KiB) as
    last read, and the kernel's exact maximum where it was reaped here."""

    pid: int
    ppid: int
    command: str
    hwm_kib: int = 0
    first: int = -1                  # the first and last reading that saw it alive
    last: int = -1
    exact_kib: int | None = None     # ru_maxrss from wait4 (it and what it reaped)


@dataclasses.dataclass
class Peak:
    """What :func:`peak_of` measured (sizes in KiB)."""

    exit: int
    seconds: float
    largest_kib: int                 # exact: max ru_maxrss over the tree
    processes: list[Process]         # by the high-water marks read, largest first
    tree_low_kib: int                # largest sum of Pss seen at once (lower bound)
    tree_high_kib: int               # at the readings: sum of the peaks of those alive
    output: str = ""
    subreaper: bool = True
    cgroup_kib: int | None = None    # exact: the tree's own memory cgroup's peak, if made

    @property
    def listed_kib(self) -> int:
        return max((p.hwm_kib for p in self.processes), default=0)


def _reap(cmd: Sequence[str], interval: float, leftover_grace: float, output: str,
          cwd: str | None, env: dict | None) -> dict:
    """In the reaper process (whose only children are the tree's): run ``cmd``, read its
    processes' high-water marks every ``interval`` seconds, reap it and every orphan
    reparented here with ``wait4`` (their exact ``ru_maxrss``)."""
    subreaper = become_subreaper()
    me = os.getpid()
    seen: dict[tuple[int, int], Process] = {}
    tree_low = 0
    readings = 0
    stop = threading.Event()

    def sample(with_pss: bool) -> None:
        nonlocal tree_low, readings
        current = 0
        for pid in descendants(me):
            st = _status(pid)
            if "VmHWM" not in st:           # a zombie: nothing mapped any more
                continue
            key = (pid, _start_time(pid))
            p = seen.get(key)
            if p is None:
                p = seen[key] = Process(pid, int(st.get("PPid", "0").strip() or 0),
                                        _command(pid), first=readings)
            p.hwm_kib = max(p.hwm_kib, _kib(st["VmHWM"]))
            p.last = readings
            if with_pss:
                current += _pss_kib(pid, st)
        tree_low = max(tree_low, current)
        readings += 1

    def sampler() -> None:
        # (Pss walks the page tables: 10 ms for a process of 400 MB; read once a second)
        every = max(1, round(PSS_INTERVAL / interval))
        count = 0
        while not stop.is_set():
            sample(count % every == 0)
            count += 1
            stop.wait(interval)

    cgroup = memory_cgroup()
    with open(output, "w") as out:
        started = time.time()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd, env=env,
                                preexec_fn=None if cgroup is None else
                                (lambda: _join_cgroup(cgroup[0])))
    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    exact: dict[int, int] = {}
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    exact[proc.pid] = usage.ru_maxrss
    seconds = time.time() - started
    # orphans reparented here: wait for them, then end what is left (the tree's own)
    deadline = time.time() + leftover_grace
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            exact[pid] = usage.ru_maxrss
            continue
        if time.time() > deadline:
            for pid in descendants(me):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            deadline = time.time() + leftover_grace
        time.sleep(0.05)
    stop.set()
    thread.join()
    cgroup_kib = None
    if cgroup is not None:
        cgroup_kib = int((cgroup[0] / cgroup[1]).read_text()) // 1024
        try:
            cgroup[0].rmdir()
        except OSError:
            pass
    processes = sorted(seen.values(), key=lambda p: -p.hwm_kib)
    # the upper bound: at each reading, the sum of the (eventual) peaks of the processes
    # alive then; never below the exact largest process
    events = sorted([(p.first, p.hwm_kib) for p in processes] +
                    [(p.last + 1, -p.hwm_kib) for p in processes])
    high = now = 0
    for _, change in events:        # (at one reading, the ends come before the starts)
        now += change
        high = max(high, now)
    for p in processes:
        if p.pid in exact:
            p.exact_kib = exact[p.pid]
    return {"exit": code, "seconds": seconds,
            "largest_kib": max(exact.values(), default=0),
            "processes": [dataclasses.asdict(p) for p in processes],
            "tree_low_kib": tree_low,
            "tree_high_kib": max(high, max(exact.values(), default=0)),
            "subreaper": subreaper, "cgroup_kib": cgroup_kib}


def peak_of(cmd: Sequence[str], interval: float = INTERVAL, cwd: str | None = None,
            env: dict | None = None, leftover_grace: float = 30.0) -> Peak:
    """Run ``cmd`` and measure the peak resident memory of it and all its descendants:
    exact for the largest process (wait4's ``ru_maxrss``), each process's ``VmHWM`` read
    every ``interval`` seconds while it lives, the tree's sum bounded from both sides.

    The measuring is done by a small reaper process of its own (this file run with
    ``--reaper``), the tree's child subreaper, so that the caller's other children (a
    test runner's) are never waited for. Descendants still alive ``leftover_grace``
    seconds after ``cmd`` exits are sent SIGTERM (they are the measured tree's own) and
    reaped."""
    with tempfile.TemporaryDirectory(prefix="bench-memory-reaper-") as tmp:
        output = str(Path(tmp) / "output")
        job = {"cmd": list(cmd), "interval": interval, "leftover_grace": leftover_grace,
               "output": output, "cwd": cwd, "env": env}
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--reaper",
                               json.dumps(job)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"the reaper failed: {done.stderr.strip()[-2000:]}")
        r = json.loads(done.stdout)
        text = Path(output).read_text(errors="replace") if Path(output).exists() else ""
    return Peak(r["exit"], r["seconds"], r["largest_kib"],
                [Process(**p) for p in r["processes"]], r["tree_low_kib"],
                r["tree_high_kib"], text, r["subreaper"], r["cgroup_kib"])


def _mib(kib: int) -> int:
    return round(kib / 1024)


def measure(args: list[str]) -> dict:
    """One ``conformance run`` with ``args``, measured (sizes in MiB)."""
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        cmd = [sys.executable, "-m", "conformance", "run", "--no-progress",
               "--out", str(Path(tmp) / "out"), *args]
        peak = peak_of(cmd)
    lines = peak.output.strip().splitlines()
    summary = next((line for line in lines if line.startswith("checked")),
                   lines[-1] if lines else "")
    return {"args": " ".join(args), "exit": peak.exit, "seconds": round(peak.seconds, 1),
            "largest_process_mb": _mib(peak.largest_kib),
            "listed_process_mb": _mib(peak.listed_kib),
            "tree_low_mb": _mib(peak.tree_low_kib), "tree_high_mb": _mib(peak.tree_high_kib),
            "processes": [{"pid": p.pid, "ppid": p.ppid, "peak_mb": _mib(p.hwm_kib),
                           "exact_mb": None if p.exact_kib is None else _mib(p.exact_kib),
                           "command": p.command[:120]} for p in peak.processes],
            "subreaper": peak.subreaper, "summary": summary,
            "cgroup_mb": None if peak.cgroup_kib is None else _mib(peak.cgroup_kib)}


def report(r: dict) -> str:
    lines = [f"{r['args']}: largest process {r['largest_process_mb']} MiB (exact, the "
             f"kernel's maximum resident size over the tree); process tree at once between "
             f"{r['tree_low_mb']} and {r['tree_high_mb']} MiB; {r['seconds']} s; exit "
             f"{r['exit']}; {r['summary']}"]
    if r.get("cgroup_mb") is not None:
        lines.append(f"  the tree's memory cgroup: peak {r['cgroup_mb']} MiB charged at once "
                     "(exact: anonymous memory and the page cache the tree brought in)")
    if not r["subreaper"]:
        lines.append("  (not a child subreaper here: an orphaned descendant is not counted)")
    for p in r["processes"]:
        exact = "" if p["exact_mb"] is None else f", {p['exact_mb']} MiB with what it reaped"
        lines.append(f"  pid {p['pid']} (parent {p['ppid']}): {p['peak_mb']} MiB{exact}  "
                     f"{p['command']}")
    if r["largest_process_mb"] > r["listed_process_mb"]:
        lines.append(f"  (a process that lived under {INTERVAL * 1000:.0f} ms, or grew in its "
                     f"last {INTERVAL * 1000:.0f} ms, reached {r['largest_process_mb']} MiB)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--reaper"]:                 # peak_of's measuring process
        job = json.loads(argv[1])
        print(json.dumps(_reap(job["cmd"], job["interval"], job["leftover_grace"],
                               job["output"], job["cwd"], job["env"])))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="jax")
    p.add_argument("--depth", default="default")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--ops", help="comma list of ops (default: all)")
    p.add_argument("--family", help="comma list of op families (default: all)")
    p.add_argument("--flat", action="store_true",
                   help="also run the first quarter of the ops alone and compare peaks")
    a = p.parse_args(argv)
    base = ["--backend", a.backend, "--depth", a.depth, "--jobs", str(a.jobs)]
    only = (["--ops", a.ops] if a.ops else []) + (["--family", a.family] if a.family else [])
    runs = []
    if a.flat:
        from conformance.specs import op_names
        names = op_names()
        runs.append(measure(base + ["--ops", ",".join(names[:max(1, len(names) // 4)])]))
    runs.append(measure(base + only))
    for r in runs:
        print(report(r))
    target = TARGETS_MB.get((a.backend, a.depth))
    if target and not only:
        r = runs[-1]
        one = r["largest_process_mb"] <= target
        tree = ("MET" if r["tree_high_mb"] <= target else
                "NOT MET" if r["tree_low_mb"] > target else "not decided (between bounds)")
        if r.get("cgroup_mb") is not None:
            tree = (f"{'MET' if r['cgroup_mb'] <= target else 'NOT MET'} by its cgroup's peak "
                    f"({r['cgroup_mb']} MiB; resident bounds: {tree})")
        print(f"target <= {target} MiB for the {a.depth} run of {a.backend}: largest process "
              f"{'MET' if one else 'NOT MET'}; process tree {tree}")
    if a.flat:
        print(f"largest process with all ops / with a quarter of them: "
              f"{runs[-1]['largest_process_mb'] / max(1, runs[0]['largest_process_mb']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
