"""The stage clock behind bench/bench_breakdown.py: exclusive time, nothing missed, off by
default."""
import time

import pytest

from conformance.checking import stage_clock
from conformance.checking.stage_clock import measuring, run_stage, stage


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_off_by_default_stage_is_a_shared_null_context():
    assert stage_clock._ACTIVE is None
    assert stage("oracle") is stage("verdict") is run_stage(object())


def test_time_is_exclusive_and_the_stages_add_up_to_the_whole():
    start = time.perf_counter()
    with measuring() as clock:
        _busy(0.02)                                 # other
        with stage("verdict"):
            _busy(0.02)
            with stage("oracle"):                   # inside verdict: not verdict's
                _busy(0.05)
            _busy(0.02)
        totals = clock.totals()
    whole = time.perf_counter() - start
    assert totals["oracle"]["wall"] >= 0.05
    assert 0.04 <= totals["verdict"]["wall"] < 0.05 + 0.04     # 0.04 of its own
    assert totals["oracle"]["calls"] == totals["verdict"]["calls"] == 1
    assert sum(t["wall"] for t in totals.values()) == pytest.approx(whole, abs=0.01)


def test_an_executables_first_call_is_its_own_stage():
    def exe():
        return None
    with measuring() as clock:
        for _ in range(3):
            with run_stage(exe):
                exe()
        totals = clock.totals()
    assert totals["first_call"]["calls"] == 1 and totals["run"]["calls"] == 2


def test_one_clock_at_a_time_and_a_raising_stage_is_still_closed():
    with measuring() as clock:
        with pytest.raises(RuntimeError):
            with measuring():
                pass
        with pytest.raises(ValueError):
            with stage("minimise"):
                raise ValueError
        assert clock._stack == [stage_clock.OTHER]
    assert stage_clock._ACTIVE is None
