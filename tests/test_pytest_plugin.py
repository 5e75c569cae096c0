"""The pytest plugin, as a backend vendor uses it: ``pytest --pyargs conformance.suite``.

Every run is a subprocess (``runpytest_subprocess``): the plugin is picked up through
the package's ``pytest11`` entry point exactly as in a vendor's environment, and jax /
hypothesis state of this process stays out of it. The numpy backend (the oracle as a
backend) keeps the runs fast; planted-bug backends are written into the temp dir.
"""
from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

BACKENDS = '''
import numpy as np
from conformance.backends import Unsupported
from conformance.backends.numpy_backend import NumpyBackend


def _is_add_f32(sig):
    return sig.op == "add" and sig.result_types[0].element_type.name == "f32"


class BuggyAdd(NumpyBackend):
    """add on f32 is off by one; everything else is the oracle."""
    name = "buggy-add"

    def compile(self, signature):
        fn = super().compile(signature)
        if not _is_add_f32(signature):
            return fn
        return lambda inputs: [np.asarray(r) + np.float32(1) for r in fn(inputs)]

    def compile_batch(self, signature):
        fn = super().compile_batch(signature)
        if not _is_add_f32(signature):
            return fn
        return lambda stacked: [np.asarray(r) + np.float32(1) for r in fn(stacked)]


class NoSine(NumpyBackend):
    """Declines sine."""
    name = "no-sine"

    def compile(self, signature):
        if signature.op == "sine":
            raise Unsupported("sine is not implemented on this accelerator")
        return super().compile(signature)

    def compile_batch(self, signature):
        if signature.op == "sine":
            raise Unsupported("sine is not implemented on this accelerator")
        return super().compile_batch(signature)
'''


@pytest.fixture
def vendor(pytester: pytest.Pytester) -> pytest.Pytester:
    """A temp dir with the planted-bug backends importable as ``vendor_backends``."""
    pytester.makepyfile(vendor_backends=BACKENDS)
    pytester.syspathinsert()
    return pytester


def _run(pytester: pytest.Pytester, *args: str):
    # PYTHONPATH (syspathinsert) makes vendor_backends importable in the subprocess.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_suite_passes_on_the_oracle_backend(pytester: pytest.Pytester):
    # No -p option: the plugin is loaded through the pytest11 entry point.
    result = _run(pytester, "--pyargs", "conformance.suite", "--conformance-backend=numpy",
                  "--conformance-ops=add,compare", "-v")
    # add: 19 bindings + 1 example + C1; compare: 19 bindings + 1 example + C1,C2,C3,O1.
    result.assert_outcomes(passed=19 + 1 + 1 + 19 + 1 + 4)
    result.stdout.fnmatch_lines(["conformance: backend=numpy depth=quick seed=0 ops=add,compare",
                                 "*test_op?add-f32? PASSED*",
                                 "*test_op?compare-si8? PASSED*",
                                 "*test_example?add-0? PASSED*",
                                 "*test_invalid?compare-C1? PASSED*",
                                 "conformance backend: name=numpy*"])


def test_filters_select_the_parameters(pytester: pytest.Pytester):
    result = _run(pytester, "--pyargs", "conformance.suite", "--conformance-backend=numpy",
                  "--conformance-ops=add,convert", "--conformance-types=si8",
                  "--collect-only", "-q")
    ids = re.findall(r"::(test_\w+\[[^\]]+\])", result.stdout.str())
    ops = sorted(i for i in ids if i.startswith("test_op"))
    assert "test_op[add-si8]" in ops and "test_op[add-f32]" not in ops
    assert "test_op[convert-si8->f32]" in ops and "test_op[convert-f32->si8]" in ops
    assert all("si8" in i for i in ops)
    # Examples only where they use a selected type (add's is si32); invalid rules per op.
    assert "test_example[add-0]" not in ids
    assert "test_invalid[add-C1]" in ids and "test_invalid[convert-C1]" in ids

    result = _run(pytester, "--pyargs", "conformance.suite", "--conformance-backend=numpy",
                  "--conformance-families=bitwise", "--conformance-types=i1",
                  "--collect-only", "-q")
    ids = re.findall(r"::(test_\w+\[[^\]]+\])", result.stdout.str())
    assert "test_op[and-i1]" in ids and "test_op[not-i1]" in ids
    assert not any(i.startswith(("test_op[add", "test_op[popcnt")) for i in ids)


def test_planted_bug_fails_exactly_its_cell(vendor: pytest.Pytester):
    result = _run(vendor, "--pyargs", "conformance.suite",
                  "--conformance-backend=vendor_backends:BuggyAdd",
                  "--conformance-ops=add,subtract", "--conformance-repro-dir=repros", "-rf")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED *test_op?add-f32?*"])
    out = result.stdout.str()
    assert re.search(r"add \[f32\] on buggy-add: value divergence", out), out
    # The minimised case: a scalar add with its inputs, expected and actual values.
    assert "signature: add(tensor<f32>, tensor<f32>) -> (tensor<f32>)" in out, out
    for label in ("class:     value", "input 0:", "input 1:", "expected 0:", "actual 0:",
                  "reproducer: python"):
        assert label in out, label
    assert "Traceback" not in out
    saved = list((vendor.path / "repros").rglob("case.json"))
    assert len(saved) == 1 and saved[0].with_name("repro.py").exists()


def test_unsupported_op_is_skipped_with_the_reason(vendor: pytest.Pytester):
    result = _run(vendor, "--pyargs", "conformance.suite",
                  "--conformance-backend=vendor_backends:NoSine",
                  "--conformance-ops=sine,negate", "--conformance-types=f32,f64", "-rs")
    # sine: f32, f64 bindings + its (f32) example + I1, C1 -> 5 skips; negate: 2 bindings
    # + I1, C1 pass (its examples are si32 and complex, filtered out by the types).
    result.assert_outcomes(passed=4, skipped=5)
    result.stdout.fnmatch_lines(
        ["SKIPPED *unsupported by no-sine: sine is not implemented on this accelerator*"])


@pytest.mark.parametrize("args, named", [
    (["--conformance-backend=nosuchmod:X"], "nosuchmod"),
    (["--conformance-backend=numpy", "--conformance-ops=add,nosuchop"], "nosuchop"),
    (["--conformance-backend=numpy", "--conformance-types=f32,f33"], "f33"),
    (["--conformance-backend=numpy", "--conformance-families=arith"], "arith"),
])
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, args, named):
    result = _run(pytester, "--pyargs", "conformance.suite", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "ERROR:" in err and named in err, err
    assert "Traceback" not in err + result.stdout.str()


def test_default_backend_not_loaded_by_unrelated_tests(pytester: pytest.Pytester):
    # The plugin is active in every pytest run of an environment that has the package:
    # a run that uses none of its fixtures must not load the default (jax) backend.
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    pytester.makeconftest("import sys\n"
                          "def pytest_terminal_summary(terminalreporter):\n"
                          "    terminalreporter.write_line(f'JAX_LOADED={\"jax\" in sys.modules}')\n")
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "JAX_LOADED=False" in out
    assert "conformance:" not in out and "conformance backend:" not in out


USER_TESTS = '''
import numpy as np
import pytest
from conformance.case import Case


def _case():
    return Case.make("add", [np.array([1.5, -0.0], np.float32), np.array([2.0, 0.0], np.float32)],
                     ["tensor<2xf32>"])


def test_fixtures(conformance_backend, conformance_oracle, conformance_spec,
                  conformance_strategies, conformance_check):
    assert conformance_backend.name == BACKEND
    result = conformance_check(_case())
    assert result.cls == "pass"
    (expected,) = conformance_oracle("add", _case().inputs)
    assert expected.tolist() == [3.5, 0.0]
    assert conformance_spec("add").family == "arithmetic"
    for name in ("signatures", "cases", "invalid_signatures", "batch_inputs"):
        assert callable(getattr(conformance_strategies, name))
    sig = conformance_strategies.signatures("add", {"E": "f32"}, "quick").example()
    assert sig.op == "add"


def test_check_sine_is_unsupported_or_passes(conformance_check):
    conformance_check(Case.make("sine", [np.array([0.5], np.float32)], ["tensor<1xf32>"]))


def test_suite_params(conformance_op_binding):
    assert conformance_op_binding.op == "abs"
'''


def test_fixtures_in_a_users_own_tests(vendor: pytest.Pytester):
    vendor.makepyfile(test_mine=USER_TESTS.replace("BACKEND", repr("numpy")))
    result = _run(vendor, "test_mine.py", "--conformance-backend=numpy",
                  "--conformance-ops=abs", "--conformance-types=f32,f64", "-W",
                  "ignore::hypothesis.errors.NonInteractiveExampleWarning")
    result.assert_outcomes(passed=1 + 1 + 2)

    vendor.makepyfile(test_mine=USER_TESTS.replace("BACKEND", repr("buggy-add")))
    result = _run(vendor, "test_mine.py", "--conformance-backend=vendor_backends:BuggyAdd",
                  "-k", "test_fixtures", "-W",
                  "ignore::hypothesis.errors.NonInteractiveExampleWarning")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    for text in ("add on buggy-add: value divergence", "class:     value",
                 "signature: add(tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>)",
                 "input 0:   tensor<2xf32> [1.5, \"-0.0\"]  (bits 3fc00000 80000000)", "expected 0: tensor<2xf32> [3.5, 0.0]",
                 "actual 0:   tensor<2xf32> [4.5, 1.0]"):
        assert text in out, text

    vendor.makepyfile(test_mine=USER_TESTS.replace("BACKEND", repr("no-sine")))
    result = _run(vendor, "test_mine.py", "--conformance-backend=vendor_backends:NoSine",
                  "-k", "test_check_sine", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *sine is not implemented on this accelerator*"])
