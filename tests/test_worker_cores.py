"""Cores per worker (conformance.apps.worker_cores): distinct workers take distinct cores, a
worker keeps its cores, fewer free cores than its share gives what is free, every core
taken means unpinned, the share is cores // workers, and pinning can be turned off.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conformance.apps import worker_cores

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity")
                                or len(os.sched_getaffinity(0)) < 2,
                                reason="needs sched_setaffinity and two cores")

CLAIM = textwrap.dedent("""
    import os, sys, time
    from conformance.apps import worker_cores
    got = worker_cores.claim_cores(1, sys.argv[1])
    print(got[0] if got else None, sorted(os.sched_getaffinity(0)), flush=True)
    if len(sys.argv) > 2:
        time.sleep(float(sys.argv[2]))
""")


def _claim_in_child(lock_dir, hold: float | None = None, env=None) -> subprocess.Popen:
    args = [sys.executable, "-c", CLAIM, str(lock_dir)] + ([str(hold)] if hold else [])
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _first_line(proc: subprocess.Popen) -> tuple[str, str]:
    core, _, affinity = proc.stdout.readline().strip().partition(" ")
    return core, affinity


@pytest.fixture
def restore():
    before = os.sched_getaffinity(0)
    yield
    worker_cores.release()
    os.sched_setaffinity(0, before)


def test_a_worker_is_pinned_to_one_core_and_keeps_it(tmp_path, restore, monkeypatch):
    monkeypatch.delenv(worker_cores.ENV, raising=False)
    cores = sorted(os.sched_getaffinity(0))
    assert worker_cores.claim_cores(1, tmp_path) == [cores[0]]
    assert os.sched_getaffinity(0) == {cores[0]}
    assert worker_cores.claim_cores(2, tmp_path) == [cores[0]]   # idempotent
    worker_cores.release()
    assert os.sched_getaffinity(0) == set(cores)             # release gives them all back
    assert worker_cores.claim_cores(0, tmp_path) is None     # a share of 0: unpinned
    assert os.sched_getaffinity(0) == set(cores)
    assert worker_cores.claim_cores(2, tmp_path) == cores[:2]
    assert os.sched_getaffinity(0) == set(cores[:2])


def test_the_share_is_cores_over_workers(monkeypatch):
    monkeypatch.delenv(worker_cores.ENV, raising=False)
    n = len(os.sched_getaffinity(0))
    assert worker_cores.share(1) == n
    assert worker_cores.share(n) == 1
    assert worker_cores.share(2 * n) == 1                    # never below one core
    assert worker_cores.share(n - 1) == n // (n - 1)
    from conformance.apps.executors import ProcessExecutor
    assert ProcessExecutor(n).pin == 1
    assert ProcessExecutor(n).describe()["pin_cores"] == 1


def test_concurrent_workers_take_distinct_cores(tmp_path, restore, monkeypatch):
    monkeypatch.delenv(worker_cores.ENV, raising=False)
    child = _claim_in_child(tmp_path, hold=20)
    try:
        core, affinity = _first_line(child)
        mine = worker_cores.claim_cores(len(os.sched_getaffinity(0)), tmp_path)
    finally:
        child.kill()
        child.wait()
    assert core != "None" and mine and int(core) not in mine   # it gets what is free
    assert affinity == f"[{core}]" and os.sched_getaffinity(0) == set(mine)


def test_a_worker_that_finds_every_core_taken_runs_unpinned(tmp_path, restore,
                                                            monkeypatch):
    monkeypatch.delenv(worker_cores.ENV, raising=False)
    cores = sorted(os.sched_getaffinity(0))
    holders = [_claim_in_child(tmp_path, hold=20) for _ in cores]
    try:
        taken = sorted(int(_first_line(h)[0]) for h in holders)
        assert taken == cores
        assert worker_cores.claim_cores(1, tmp_path) is None
        assert os.sched_getaffinity(0) == set(cores)
    finally:
        for h in holders:
            h.kill()
            h.wait()
    # a dead holder's lock is gone with it
    assert worker_cores.claim_cores(1, tmp_path) == [cores[0]]


def test_pinning_can_be_turned_off(tmp_path, restore, monkeypatch):
    monkeypatch.setenv(worker_cores.ENV, "0")
    assert worker_cores.claim_cores(1, tmp_path) is None
    assert len(os.sched_getaffinity(0)) >= 2
    assert worker_cores.share(1) == 0
    from conformance.apps.executors import ProcessExecutor
    assert ProcessExecutor(2).pin == 0
    assert ProcessExecutor(2, pin=1).pin == 1


def test_a_backend_process_started_by_a_pinned_worker_inherits_its_core(tmp_path, restore,
                                                                        monkeypatch):
    """An isolated backend's child runs on its worker's core (affinity is inherited)."""
    monkeypatch.delenv(worker_cores.ENV, raising=False)
    core, = worker_cores.claim_cores(1, tmp_path)
    out = subprocess.run([sys.executable, "-c",
                          "import os; print(sorted(os.sched_getaffinity(0)))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == f"[{core}]"
