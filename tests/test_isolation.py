"""Process isolation: a backend that crashes or hangs costs one case, the run goes on,
and the results file is complete."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.backends import Unsupported, get_backend
from conformance.checking.isolation import BackendCrash, BackendTimeout, IsolatedBackend
from conformance.core.results import read_results
from conformance.apps.runner import RunConfig, run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _children_find_planted(monkeypatch):
    # Child processes import planted:Class; tests/ must be on their path too.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))


def _run(tmp_path, backend, **kw):
    cfg = RunConfig(backends=[backend], depth="quick", out=tmp_path, isolate=True, timeout=1.5,
                    **kw)
    run(cfg, [get_backend(backend)], tmp_path / "results.jsonl")
    return list(read_results(tmp_path / "results.jsonl"))


def test_a_crashing_backend_costs_only_its_cases(tmp_path):
    recs = _run(tmp_path, "planted:CrashesOnNegativeZero", ops=["negate", "add"],
                element_types=["f32"], invalid=False)
    assert recs[-1]["kind"] == "end"
    sigs = [r for r in recs if r["kind"] == "signature"]
    negate = [r for r in sigs if r["op"] == "negate"]
    assert any(r["outcome"] == "crash" for r in negate)
    assert all(r["outcome"] == "pass" for r in sigs if r["op"] == "add")
    crash = [r for r in recs if r["kind"] == "divergence" and r["class"] == "crash"]
    assert crash, "the crashing case is saved"
    inputs = crash[0]["case"]["inputs"][0]["literal"]
    flat = inputs if isinstance(inputs, list) else [inputs]
    assert "-0.0" in str(flat)
    # Its reproducer reproduces the crash: the script's own process dies.
    repro = tmp_path / crash[0]["repro"] / "repro.py"
    proc = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True)
    assert proc.returncode != 0
    # The report links the child's stderr log from the crash's message.
    from conformance.reports import render
    assert "(stderr log: " in crash[0]["message"]
    render(tmp_path / "results.jsonl", tmp_path)
    page = (tmp_path / "ops" / "negate.html").read_text()
    log = Path(crash[0]["message"].split("(stderr log: ")[1].rstrip(")")).name
    assert (tmp_path / log).is_file()
    assert f'(stderr log: <a href="../{log}">{log}</a>)' in page


def test_a_stderr_log_is_linked_only_where_it_is_and_the_rest_escaped(tmp_path):
    from conformance.reports.html import link_logs
    (tmp_path / "xla.stderr.log").write_text("Fatal Python error\n")
    text = "died <b> (stderr log: /elsewhere/run/xla.stderr.log) and (stderr log: /x/y.stderr.log)"
    html = str(link_logs(text, "../", tmp_path))
    assert html == ('died &lt;b&gt; (stderr log: <a href="../xla.stderr.log">xla.stderr.log</a>)'
                    ' and (stderr log: /x/y.stderr.log)')
    assert str(link_logs(None, "", tmp_path)) == ""
    assert str(link_logs("no log <here>", "", tmp_path)) == "no log &lt;here&gt;"


def test_a_hanging_backend_times_out_and_the_run_finishes(tmp_path):
    recs = _run(tmp_path, "planted:HangsOnNaN", ops=["abs"], element_types=["f32", "si8"],
                invalid=False, examples=False)
    assert recs[-1]["kind"] == "end"
    sigs = [r for r in recs if r["kind"] == "signature"]
    assert any(r["outcome"] == "timeout" for r in sigs if r["type_key"] == "f32")
    assert all(r["outcome"] == "pass" for r in sigs if r["type_key"] == "si8")


def test_isolated_backend_passes_through_results_and_unsupported():
    b = IsolatedBackend("planted:NoSine", timeout=30)
    try:
        from conformance.core.case import Case
        import numpy as np
        out = b.run(Case.make("add", [np.array([1.0], np.float32)] * 2, ["tensor<1xf32>"]))
        assert out[0].tolist() == [2.0]
        with pytest.raises(Unsupported, match="sine is not implemented"):
            b.run(Case.make("sine", [np.array([1.0], np.float32)], ["tensor<1xf32>"]))
    finally:
        b.close()


def test_crash_and_timeout_exceptions():
    from conformance.core.case import Case
    import numpy as np
    b = IsolatedBackend("planted:CrashesOnNegativeZero", timeout=30)
    try:
        case = Case.make("negate", [np.array([-0.0], np.float32)], ["tensor<1xf32>"])
        with pytest.raises(BackendCrash, match="SIGABRT"):
            b.run(case)
        ok = Case.make("negate", [np.array([1.0], np.float32)], ["tensor<1xf32>"])
        assert b.run(ok)[0].tolist() == [-1.0]          # a fresh child took over
    finally:
        b.close()
    h = IsolatedBackend("planted:HangsOnNaN", timeout=2)
    try:
        with pytest.raises(BackendTimeout):
            h.run(Case.make("abs", [np.array([np.nan], np.float32)], ["tensor<1xf32>"]))
    finally:
        h.close()


def test_a_vendor_backend_is_isolated_by_default(tmp_path):
    # A module:Class that says nothing about isolation runs in a child process: its
    # abort costs one case and a message, and the run finishes with its records.
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend",
                           "planted:CrashesOnNegativeZero", "--ops", "negate", "--types",
                           "f32", "--depth", "quick", "--no-invalid", "--no-examples",
                           "--no-progress", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    recs = list(read_results(tmp_path / "out" / "results.jsonl"))
    assert recs[-1]["kind"] == "end"
    assert any(r.get("class") == "crash" for r in recs if r["kind"] == "divergence")
    assert get_backend("jax").isolate is False and get_backend("numpy").isolate is False


def test_a_hanging_backend_costs_a_bounded_number_of_timeouts_per_op(tmp_path):
    from conformance.checking.stream import MAX_HANGS_PER_OP
    cfg = RunConfig(backends=["planted:HangsOnNaN"], depth="default", out=tmp_path,
                    isolate=True, timeout=1.0, ops=["abs"], element_types=["f32"],
                    invalid=False, examples=False)
    run(cfg, [get_backend("planted:HangsOnNaN")], tmp_path / "results.jsonl")
    sigs = [r for r in read_results(tmp_path / "results.jsonl") if r["kind"] == "signature"]
    hung = [i for i, r in enumerate(sigs) if r["outcome"] == "timeout" and r["cases"]]
    skipped = [i for i, r in enumerate(sigs) if r["outcome"] == "timeout" and not r["cases"]]
    assert 0 < len(hung) <= MAX_HANGS_PER_OP
    # Once it hung that often, the op's later signatures are not run on it.
    if len(hung) == MAX_HANGS_PER_OP:
        later = [i for i in range(hung[-1] + 1, len(sigs))]
        assert skipped == later and all("not run" in sigs[i]["reason"] for i in later)
