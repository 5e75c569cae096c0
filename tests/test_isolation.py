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


def _not_run(text) -> bool:
    return text is not None and "not run: the backend hung" in text


@pytest.mark.parametrize("planted", ["TimesOutOnReduce", "TimesOutCompilingReduce",
                                     "TimesOutPackingReduce"])
def test_invalid_programs_examples_and_probes_of_a_hung_op_are_not_run(tmp_path, planted):
    """Issue 31: once a backend hung MAX_HANGS_PER_OP times in an op, nothing else of the
    op runs on it: not its other signatures, nor its invalid programs, spec examples and
    probes, which are recorded as not run (timeout, the budget's reason). Counted in
    timeouts (the planted backend times out at once, as an isolated one that hangs)."""
    import math
    import planted as planted_module
    from conformance.checking.plan import DEPTHS
    from conformance.checking.stream import MAX_HANGS_PER_OP
    cls = getattr(planted_module, planted)
    cls.timeouts = 0
    cfg = RunConfig(backends=[f"planted:{planted}"], depth="quick", out=tmp_path,
                    ops=["reduce"], element_types=["f32"])
    run(cfg, [get_backend(f"planted:{planted}")], tmp_path / "results.jsonl")
    recs = list(read_results(tmp_path / "results.jsonl"))
    assert recs[-1]["kind"] == "end"
    bisection = int(math.log2(DEPTHS["quick"].batch_size)) + 1     # the first hang's culprit
    assert 0 < cls.timeouts <= MAX_HANGS_PER_OP + bisection
    invalid = [r for r in recs if r["kind"] == "invalid" and "signature" in r]
    examples = [r for r in recs if r["kind"] == "example"]
    probes = [r for r in recs if r["kind"] == "probe"]
    assert invalid and examples and probes
    assert all(r["outcome"] == "timeout" and _not_run(r["reason"]) for r in invalid)
    assert all(r["outcome"] == "timeout" and _not_run(r["message"]) for r in examples)
    assert all(r["accumulation"] == "undetermined" and _not_run(r["detail"]) for r in probes)


def test_a_timeout_of_an_invalid_program_or_example_counts_in_the_budget():
    """An op whose signatures pass but whose invalid programs hang: after the budget's
    timeouts its other invalid programs, examples and probes are not run."""
    from conformance.checking.stream import MAX_HANGS_PER_OP
    from conformance.apps.runner import Runner
    from conformance.specs import load_spec

    class Writer:
        def __init__(self):
            self.records = []

        def write(self, rec):
            self.records.append(rec)

    import planted as planted_module
    backend = get_backend("planted:TimesOutOnReduce")
    planted_module.TimesOutOnReduce.timeouts = 0
    runner = Runner(RunConfig(depth="quick"), [backend], Writer())
    spec = load_spec("reduce")
    runner.run_invalid(spec, [])
    runner.run_examples(spec)
    runner.run_probes(spec)
    assert planted_module.TimesOutOnReduce.timeouts == MAX_HANGS_PER_OP
    ran = [r for r in runner.writer.records if r.get("outcome") == "timeout"
           and not _not_run(r.get("reason") or r.get("message"))]
    assert len(ran) == MAX_HANGS_PER_OP
    assert [r for r in runner.writer.records if r["kind"] == "probe"]
    assert all(_not_run(r["detail"]) for r in runner.writer.records if r["kind"] == "probe")


def test_a_hanging_backend_costs_at_most_the_budget_and_one_bisection_per_op(
        tmp_path, monkeypatch):
    """The README's bound, in timeouts of a real isolated backend (each one a line the
    hanging child wrote): MAX_HANGS_PER_OP + log2(batch size) + 1 per op, invalid
    programs and spec examples included."""
    import math
    from conformance.checking.plan import DEPTHS
    from conformance.checking.stream import MAX_HANGS_PER_OP
    log = tmp_path / "hangs.log"
    monkeypatch.setenv("PLANTED_HANG_LOG", str(log))
    cfg = RunConfig(backends=["planted:HangsOnAbs"], depth="quick", out=tmp_path,
                    isolate=True, timeout=1.0, ops=["abs"], element_types=["f32"])
    run(cfg, [get_backend("planted:HangsOnAbs")], tmp_path / "results.jsonl")
    recs = list(read_results(tmp_path / "results.jsonl"))
    assert recs[-1]["kind"] == "end"
    hangs = log.read_text().splitlines()
    bisection = int(math.log2(DEPTHS["quick"].batch_size)) + 1
    assert 0 < len(hangs) <= MAX_HANGS_PER_OP + bisection, hangs
    later = [r for r in recs if r["kind"] in ("invalid", "example") and r.get("signature")]
    assert later and all(r["outcome"] == "timeout"
                         and _not_run(r.get("reason") or r.get("message")) for r in later)


def test_the_plugin_s_examples_and_invalid_rules_spend_the_session_s_hang_budget():
    """The pytest plugin's test_example and test_invalid count their timeouts in the
    session's budget and do not run an op the backend hung in too often (hypothesis's
    shrinking of a failing hang included)."""
    import planted as planted_module
    from conformance.apps.pytest_suite import (ExampleRef, InvalidRule, Options,
                                               run_example, run_invalid_rule)
    from conformance.checking.stream import MAX_HANGS_PER_OP, HangBudget
    backend = get_backend("planted:TimesOutOnReduce")
    planted_module.TimesOutOnReduce.timeouts = 0
    budget = HangBudget()
    options = Options(backend="planted:TimesOutOnReduce", backend_explicit=True,
                      depth_name="quick", ops=("reduce",), families=None,
                      element_types=None, seed=0, repro_dir=None)
    failures = []
    for index in range(4):
        with pytest.raises(AssertionError) as e:
            run_example(backend, ExampleRef("reduce", index), options, budget)
        failures.append(str(e.value))
    for rule in ("C1", "C2"):
        with pytest.raises(AssertionError) as e:
            run_invalid_rule(backend, InvalidRule("reduce", rule), options, budget)
        failures.append(str(e.value))
    assert planted_module.TimesOutOnReduce.timeouts == MAX_HANGS_PER_OP
    assert all("timeout" in f for f in failures)
    assert all("not run: the backend hung" in f for f in failures[MAX_HANGS_PER_OP:])
