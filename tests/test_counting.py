"""Counting and attribution with several backends (issue 22): the CLI's totals in
summary.json's units, oracle suspects and pair comparisons from backends that produced
a result only, a child that reports heap corruption restarted and its answer not
trusted (the stderr log linked), and the one NaN rule (any NaN equals any NaN where the
spec computes a value; bit-exact where it moves one)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend, Unsupported
from conformance.checking.checker import SignatureCheck
from conformance.checking.compare import PASS, classify
from conformance.core.case import Case, Signature
from conformance.checking.isolation import BackendCrash, IsolatedBackend
from conformance.specs import load_spec
from conformance.reports.aggregate import CrossCell

ROOT = Path(__file__).resolve().parents[1]


class Oracle(Backend):
    name = "oracle"

    def compile(self, sig):
        return lambda xs: oracles.evaluate(sig.op, xs, sig.attributes,
                                           result_types=sig.result_types)


class OffByOne(Oracle):
    """A realistic shared bug: integer add one too high (two backends share it)."""
    name = "off-a"

    def compile(self, sig):
        inner = super().compile(sig)
        return lambda xs: [np.asarray(r) + np.asarray(1, np.asarray(r).dtype)
                           for r in inner(xs)]


class OffByOneToo(OffByOne):
    name = "off-b"


class Declines(Oracle):
    name = "declines"

    def compile(self, sig):
        raise Unsupported("not here")


class FailsToRun(Oracle):
    name = "fails"

    def compile(self, sig):
        def run(xs):
            raise RuntimeError("device lost")
        return run


class CompileFailsOnSi32(Oracle):
    name = "compile-fails"

    def compile(self, sig):
        if sig.input_leaves and sig.input_leaves[0].element_type.name == "si32":
            raise RuntimeError("cannot compile si32")
        return super().compile(sig)


class CorruptsHeapOnSeven(Oracle):
    """Answers, but says (as glibc does) that its heap is corrupt when an input holds 7."""
    name = "corrupts"

    def compile(self, sig):
        inner = super().compile(sig)

        def run(xs):
            if any(np.any(np.asarray(x) == 7) for x in xs):
                os.write(2, b"malloc(): corrupted top size\n")
            return inner(xs)
        return run


ADD = Signature.make("add", ["tensor<4xi32>"] * 2, ["tensor<4xi32>"])


def test_suspects_and_pairs_count_only_backends_that_produced_results():
    check = SignatureCheck(load_spec("add"), ADD,
                           [OffByOne(), OffByOneToo(), Declines(), FailsToRun()])
    check.compile()
    stacked = [np.arange(12, dtype=np.int32).reshape(3, 4)] * 2
    batch = check.run_batch(0, stacked)
    assert batch.suspects is not None and batch.suspects.all()   # the two agree, wrongly
    rec = check.cross_record()
    assert rec["produced"] == ["off-a", "off-b"]
    assert rec["compared"] == {"off-a~off-b": 3} and rec["oracle_suspects"] == 3
    cell = CrossCell()
    cell.add(rec)
    assert dict(cell.compared) == {"off-a~off-b": 3}             # no pair with "declines"


def test_no_suspect_when_only_one_backend_produced_a_result():
    check = SignatureCheck(load_spec("add"), ADD, [OffByOne(), Declines(), FailsToRun()])
    check.compile()
    batch = check.run_batch(0, [np.zeros((2, 4), np.int32)] * 2)
    assert batch.suspects is None and check.cross_record()["oracle_suspects"] == 0


def test_cli_totals_are_summary_totals(tmp_path):
    """A compile failure (one signature, no case) and a run-time failure (a batch of
    cases) are counted in summary.json's units on the CLI too."""
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    p = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend",
                        "tests.test_counting:CompileFailsOnSi32,tests.test_counting:Oracle",
                        "--ops", "add", "--types", "si32,si8", "--depth", "quick",
                        "--no-isolate", "--out", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert p.returncode in (0, 1), p.stderr
    summary = json.loads((out / "summary.json").read_text())["totals"]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("checked "))
    assert int(line.split()[1]) == summary["cases"]
    failed = next(ln for ln in p.stdout.splitlines() if ln.startswith("signatures a backend"))
    n = int(failed.split("backend_error ")[1].split(",")[0])
    assert n == summary["diverging_signatures"]["backend_error"] > 0


def test_heap_corruption_restarts_the_child_and_distrusts_its_answer(tmp_path, monkeypatch):
    log = tmp_path / "corrupts.stderr.log"
    # the (spawned) child imports this module by its locator with the parent's sys.path,
    # from any working directory
    monkeypatch.syspath_prepend(str(ROOT))
    b = IsolatedBackend("tests.test_counting:CorruptsHeapOnSeven", log_path=str(log))
    try:
        ok = [np.array([1, 2, 3, 4], np.int32)] * 2
        assert list(b.run(Case(ADD, tuple(ok)))[0]) == [2, 4, 6, 8]
        first = b._proc.pid
        with pytest.raises(BackendCrash) as e:
            b.run(Case(ADD, (np.array([7, 0, 0, 0], np.int32), ok[1])))
        assert "heap corruption" in str(e.value) and str(log) in str(e.value)
        assert b._proc is None                                  # killed, not reused
        assert list(b.run(Case(ADD, tuple(ok)))[0]) == [2, 4, 6, 8]
        assert b._proc.pid != first                             # a fresh child
    finally:
        b.close()


def test_a_crash_links_the_stderr_log(tmp_path):
    log = tmp_path / "crash.stderr.log"
    b = IsolatedBackend("planted:CrashesOnNegativeZero", log_path=str(log))
    sig = Signature.make("negate", ["tensor<2xf32>"], ["tensor<2xf32>"])
    try:
        with pytest.raises(BackendCrash) as e:
            b.run(Case(sig, (np.array([-0.0, 1], np.float32),)))
        assert f"stderr log: {log}" in str(e.value)
    finally:
        b.close()


def test_one_nan_rule():
    """Computed values: any NaN equals any NaN (the spec fixes no payload). Moved values
    (kind ``bits``: data movement, sort's permutation): every bit, payloads included."""
    quiet, payload = np.array([np.nan], np.float32), \
        np.array([0x7FC00001], np.uint32).view(np.float32)
    add, sort = load_spec("add"), load_spec("sort")
    assert add.accuracy("f32").kind == "exact" and sort.accuracy("f32").kind == "bits"
    cls, _ = classify(payload, quiet, add.accuracy("f32"))
    assert (cls == PASS).all()                                    # add: another NaN passes
    cls, _ = classify(payload, quiet, sort.accuracy("f32"))
    assert not (cls == PASS).any()                                # sort moved a NaN: bits
