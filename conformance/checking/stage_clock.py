"""Where a run's time goes, stage by stage (issue 33, "the sweep").

The runner and the checker mark their stages (``with stage("oracle"): ...``); a clock
charges the wall and CPU time between two marks to the innermost open stage, so a stage's
time is exclusive (the backend runs a verdict starts are not the verdict's) and the
stages plus ``other`` (time under no stage) add up to the whole, by construction: nothing
is sampled, nothing can be missed. Off unless :func:`measuring` turned it on, and then
:func:`stage` is one global lookup and a shared null context.

bench/bench_breakdown.py reports it per family.
"""
from __future__ import annotations

import contextlib
import time
import weakref
from collections import defaultdict
from typing import Iterator

#: the stages the suite marks, in the order a report lists them
STAGES = ("generate", "validity", "compile", "first_call", "run", "pack", "oracle", "verdict",
          "cross", "minimise", "invalid", "examples", "probes", "coverage", "write", "report")
OTHER = "other"
_NULL = contextlib.nullcontext()


class Clock:
    """Exclusive wall and CPU seconds per stage, and the number of times each opened."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[str] = [OTHER]
        self._since = (time.perf_counter(), time.process_time())
        self._called: weakref.WeakSet = weakref.WeakSet()
        self._called_ids: set[int] = set()     # executables that take no weak reference

    def _charge(self) -> None:
        now = (time.perf_counter(), time.process_time())
        top = self._stack[-1]
        self.wall[top] += now[0] - self._since[0]
        self.cpu[top] += now[1] - self._since[1]
        self._since = now

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[None]:
        self._charge()
        self._stack.append(name)
        self.calls[name] += 1
        try:
            yield
        finally:
            self._charge()
            self._stack.pop()

    def first_call(self, executable: object) -> bool:
        """Whether this is ``executable``'s first call (a jit backend compiles then)."""
        try:
            if executable in self._called:
                return False
            self._called.add(executable)
        except TypeError:
            if id(executable) in self._called_ids:
                return False
            self._called_ids.add(id(executable))
        return True

    def totals(self) -> dict[str, dict[str, float]]:
        """{stage: {wall, cpu, calls}} so far, ``other`` included."""
        self._charge()
        return {s: {"wall": self.wall[s], "cpu": self.cpu[s], "calls": self.calls[s]}
                for s in (*STAGES, OTHER) if s in self.wall or s in self.calls}


_ACTIVE: Clock | None = None


def stage(name: str):
    """A context that charges its time to ``name`` while a clock is measuring."""
    clock = _ACTIVE
    return _NULL if clock is None else clock.open(name)


def run_stage(executable: object):
    """The stage of calling a compiled executable: ``first_call`` the first time (jax's
    jit traces and compiles then), ``run`` after."""
    clock = _ACTIVE
    if clock is None:
        return _NULL
    return clock.open("first_call" if clock.first_call(executable) else "run")


@contextlib.contextmanager
def measuring() -> Iterator[Clock]:
    """Turn a fresh clock on for the block (not reentrant: one clock at a time)."""
    global _ACTIVE
    if _ACTIVE is not None:
        raise RuntimeError("a stage clock is already measuring")
    _ACTIVE = Clock()
    try:
        yield _ACTIVE
    finally:
        _ACTIVE = None
