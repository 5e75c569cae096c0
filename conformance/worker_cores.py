"""One core per worker (issue 20): a worker of ``--jobs`` or a Ray task pins itself,
and the backend processes it starts, to a core no other worker on the machine holds.

Why: a scheduler gives each worker one CPU (Ray's ``num_cpus=1`` per task, ``--jobs N``
on N cores), but XLA sizes its compile and run thread pools from the cores the process
may use: unpinned, every worker's XLA takes every core, so N workers oversubscribe N
cores and a single worker already spreads over all of them (bench/bench_scale.py
measured 1.53x for 2 workers on 2 cores that way). Pinning changes where threads run,
never what they compute: the compiled code and the records are the same.

A core is claimed with an exclusive ``flock`` on ``<tmp>/conformance-core-<N>.lock``,
held for the process's life (the kernel drops it when the process dies), so workers of
one run, of several runs and of several Ray tasks on one node take distinct cores. A
worker that finds every core taken (more workers than cores) runs unpinned.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO

#: Environment variable that turns pinning off (``0``) in every worker it reaches.
ENV = "CONFORMANCE_PIN_CORES"

_claimed: tuple[int, IO, set[int]] | None = None


def enabled() -> bool:
    return os.environ.get(ENV, "1") not in ("0", "false", "no", "off")


def claim_core(lock_dir: str | os.PathLike | None = None) -> int | None:
    """Pin this process to a free core of its affinity set; the core, or None (pinning
    off, one core only, no platform support, or every core held by another worker).
    Idempotent: a process keeps the core it claimed first."""
    global _claimed
    if _claimed is not None:
        return _claimed[0]
    if not enabled() or not hasattr(os, "sched_setaffinity"):
        return None
    try:
        import fcntl
    except ImportError:         # not POSIX
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    folder = Path(lock_dir or tempfile.gettempdir())
    for core in cores:
        fh = open(folder / f"conformance-core-{core}.lock", "a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            continue
        os.sched_setaffinity(0, {core})
        _claimed = (core, fh, set(cores))
        return core
    return None


def release() -> None:
    """Give the core back (tests; a worker keeps its core until it exits)."""
    global _claimed
    if _claimed is not None:
        _, fh, cores = _claimed
        _claimed = None
        os.sched_setaffinity(0, cores)
        fh.close()


__all__ = ["ENV", "claim_core", "enabled", "release"]
