"""A campaign's draws as executor tasks (``conformance fuzz --jobs N`` / ``--cluster``).

A *draw stream* keeps tasks in flight on worker processes or Ray, hands each result
back as it completes (in any order), and cancels what is left when the campaign stops:
``submit(key, config, locators, unit)``, ``wait(timeout)`` -> ``[(key, result)]``,
``cancel()``. A result is what :func:`conformance.apps.executors.run_unit` gives
(:class:`~conformance.apps.executors.UnitResult`: records and reproducer files as bytes), a
:class:`~conformance.apps.executors.UnitFailure` (the unit raised: a suite bug), or
:class:`Lost` (the worker died, or the Ray task was lost after its retries): the
campaign (conformance.apps.fuzz) runs a lost draw again, a failed one it logs and counts.

Streams: :class:`ProcessStream` (``--jobs N`` spawned processes; jax is not
fork-safe), :class:`RayStream` (the tasks of a
:class:`~conformance.apps.executors.RayExecutor`), and :class:`InlineStream` (in this
process, completing in a chosen order: tests).
"""
from __future__ import annotations

import dataclasses
import signal
from typing import Any, Callable, Sequence

from conformance.apps.executors import (Executor, ProcessExecutor, RayExecutor, UnitFailure,
                                        run_unit_safely, worker_unit)


@dataclasses.dataclass
class Lost:
    """A task whose worker was lost (not an exception of the unit): run it again."""

    error: str


def _ignore_sigint() -> None:
    """Worker processes leave the terminal's Ctrl-C to the driver (which stops them); so
    do their backends' child processes, which inherit the ignored signal."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class DrawStream:
    """Tasks in flight on some workers; see the module doc."""

    name = "stream"
    workers = 1

    @property
    def window(self) -> int:
        """Tasks to keep in flight: two per worker (one running, one queued behind it)."""
        return 2 * max(1, self.workers)

    def submit(self, key: Any, config, locators: Sequence[str], unit: str) -> None:
        raise NotImplementedError

    def wait(self, timeout: float) -> list[tuple[Any, Any]]:
        """The tasks that completed (at least one unless ``timeout`` seconds passed)."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def cancel(self) -> None:
        """Drop every task in flight (they give no result) and stop their workers."""

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": self.workers}


class InlineStream(DrawStream):
    """In this process: each :meth:`wait` runs the tasks in flight and returns them in
    ``order(keys)`` (default: last submitted first), to test out-of-order arrival."""

    name = "inline"

    def __init__(self, workers: int = 2,
                 order: Callable[[list], list] | None = None) -> None:
        self.workers = workers
        self.order = order or (lambda keys: list(reversed(keys)))
        self._tasks: dict[Any, tuple] = {}

    def submit(self, key, config, locators, unit):
        self._tasks[key] = (config, list(locators), unit)

    def wait(self, timeout):
        keys = self.order(list(self._tasks))
        out = [(k, run_unit_safely(*self._tasks.pop(k))) for k in keys]
        return out

    def __len__(self):
        return len(self._tasks)

    def cancel(self):
        self._tasks.clear()


class ProcessStream(DrawStream):
    """``jobs`` spawned worker processes. A worker that dies breaks the pool (every task
    in it comes back :class:`Lost`); the next submit starts a fresh pool. :meth:`cancel`
    shuts the pool down without waiting and terminates its workers."""

    name = "processes"

    def __init__(self, jobs: int, pin: int = 0) -> None:
        self.workers = jobs
        self.pin = pin
        self._pool = None
        self._futures: dict[Any, Any] = {}

    def _new_pool(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        return ProcessPoolExecutor(max_workers=self.workers,
                                   mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_ignore_sigint)

    def submit(self, key, config, locators, unit):
        from concurrent.futures.process import BrokenProcessPool
        if self._pool is None:
            self._pool = self._new_pool()
        args = (worker_unit, config, list(locators), unit, self.pin)
        try:
            fut = self._pool.submit(*args)
        except BrokenProcessPool:           # a worker died: its tasks came back Lost
            self._stop_pool()
            self._pool = self._new_pool()
            fut = self._pool.submit(*args)
        self._futures[fut] = key

    def wait(self, timeout):
        from concurrent.futures import FIRST_COMPLETED, wait
        if not self._futures:
            return []
        done, _ = wait(list(self._futures), timeout=timeout, return_when=FIRST_COMPLETED)
        out = []
        for fut in done:
            key = self._futures.pop(fut)
            try:
                out.append((key, fut.result()))
            except Exception as e:  # noqa: BLE001 - the worker died (BrokenProcessPool)
                out.append((key, Lost(f"worker process: {type(e).__name__}: {e}")))
        return out

    def __len__(self):
        return len(self._futures)

    def _stop_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)

    def cancel(self):
        self._futures.clear()
        self._stop_pool()

    def describe(self):
        return {"executor": self.name, "workers": self.workers, "pin_cores": self.pin}


class RayStream(DrawStream):
    """The tasks of a :class:`~conformance.apps.executors.RayExecutor` (its retries for lost
    workers; none for exceptions); two per CPU of the cluster in flight. :meth:`cancel`
    force-cancels them (``ray.cancel(force=True)`` kills the workers running them)."""

    name = "ray"

    def __init__(self, executor: RayExecutor) -> None:
        self.executor = executor
        self.ray = executor.ray
        self.pin = getattr(executor, "pin", 0)
        try:
            cpus = int(self.ray.cluster_resources().get("CPU", 1))
        except Exception:  # noqa: BLE001 - a cluster that does not say: one
            cpus = 1
        self.workers = max(1, cpus)
        self._refs: dict[Any, Any] = {}

    def submit(self, key, config, locators, unit):
        ref = self.executor._remote.remote(config, list(locators), unit, self.pin)
        self._refs[ref] = key

    def wait(self, timeout):
        if not self._refs:
            return []
        done, _ = self.ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        out = []
        for ref in done:
            key = self._refs.pop(ref)
            try:
                out.append((key, self.ray.get(ref)))
            except Exception as e:  # noqa: BLE001 - lost for good after the retries
                out.append((key, Lost(f"ray task lost after {self.executor.max_retries} "
                                      f"retries: {type(e).__name__}: {e}")))
        return out

    def __len__(self):
        return len(self._refs)

    def cancel(self):
        refs, self._refs = list(self._refs), {}
        for ref in refs:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - finished meanwhile, or already gone
                pass

    def describe(self):
        return {**self.executor.describe(), "workers": self.workers}


def stream_for(executor: "Executor | DrawStream") -> DrawStream:
    """The draw stream of ``executor`` (a ProcessExecutor, a RayExecutor or a stream)."""
    if isinstance(executor, DrawStream):
        return executor
    if isinstance(executor, RayExecutor):
        return RayStream(executor)
    if isinstance(executor, ProcessExecutor):
        return ProcessStream(executor.jobs, getattr(executor, "pin", 0))
    raise TypeError(f"no draw stream for the {getattr(executor, 'name', executor)!r} "
                    f"executor")


__all__ = ["DrawStream", "InlineStream", "Lost", "ProcessStream", "RayStream", "stream_for",
           "UnitFailure"]
