"""Cores per worker (issue 20): a worker of ``--jobs`` or a Ray task pins itself, and
the backend processes it starts, to cores no other worker on the machine holds: its
share of the machine (cores // workers, at least one).

Why: a scheduler gives each worker its share of the CPUs (Ray's ``num_cpus=1`` per
task, ``--jobs N``), but XLA sizes its compile and run thread pools from the cores the
process may use: unpinned, every worker's XLA takes every core, so N workers on N
cores oversubscribe them, and one worker alone already spreads over all of them
(bench/bench_scale.py measured 1.53x for 2 workers on 2 cores that way, 1.80x pinned).
Pinning changes where threads run, never what they compute: the compiled code and the
records are the same.

A core is claimed with an exclusive ``flock`` on ``<tmp>/conformance-core-<N>.lock``,
held for the process's life (the kernel drops it when the process dies), so workers of
one run, of several runs and of several Ray tasks on one node take distinct cores. A
worker that finds fewer free cores than its share takes those; none free (more workers
than cores), it runs unpinned.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO

#: Environment variable that turns pinning off (``0``) in every worker it reaches.
ENV = "CONFORMANCE_PIN_CORES"

_claimed: tuple[list[int], list[IO], set[int]] | None = None


def enabled() -> bool:
    return os.environ.get(ENV, "1") not in ("0", "false", "no", "off")


def share(workers: int) -> int:
    """Cores each of ``workers`` workers on this machine gets (0: pinning off)."""
    if not enabled() or not hasattr(os, "sched_getaffinity"):
        return 0
    return max(1, len(os.sched_getaffinity(0)) // max(1, workers))


def claim_cores(count: int = 1, lock_dir: str | os.PathLike | None = None
                ) -> list[int] | None:
    """Pin this process to up to ``count`` free cores of its affinity set; the cores, or
    None (count 0, pinning off, one core only, no platform support, or every core held
    by another worker). Idempotent: a process keeps the cores it claimed first."""
    global _claimed
    if _claimed is not None:
        return list(_claimed[0])
    if count < 1 or not enabled() or not hasattr(os, "sched_setaffinity"):
        return None
    try:
        import fcntl
    except ImportError:         # not POSIX
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    folder = Path(lock_dir or tempfile.gettempdir())
    got: list[int] = []
    handles: list[IO] = []
    for core in cores:
        if len(got) == count:
            break
        fh = open(folder / f"conformance-core-{core}.lock", "a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            continue
        got.append(core)
        handles.append(fh)
    if not got:
        return None
    os.sched_setaffinity(0, set(got))
    _claimed = (got, handles, set(cores))
    return list(got)


def release() -> None:
    """Give the cores back (tests; a worker keeps its cores until it exits)."""
    global _claimed
    if _claimed is not None:
        _, handles, cores = _claimed
        _claimed = None
        os.sched_setaffinity(0, cores)
        for fh in handles:
            fh.close()


__all__ = ["ENV", "claim_cores", "enabled", "release", "share"]
