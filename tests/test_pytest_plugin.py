"""The pytest plugin, as a backend vendor uses it: ``pytest --pyargs conformance.apps.suite``.

Every run is a subprocess (``runpytest_subprocess``): the plugin is picked up through
the package's ``pytest11`` entry point exactly as in a vendor's environment, and jax /
hypothesis state of this process stays out of it. The numpy backend (the oracle as a
backend) keeps the runs fast; planted-bug backends are written into the temp dir.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS_DIR = Path(__file__).resolve().parent

BACKENDS = '''
import zlib

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


class TwoClasses(NumpyBackend):
    """add on f32 is off by one, and gives 0 where the result should be NaN: two
    divergence classes (value, nan) in one test."""
    name = "two-classes"

    @staticmethod
    def _bug(r):
        r = np.asarray(r)
        return np.where(np.isnan(r), np.float32(0), r + np.float32(1)).astype(r.dtype)

    def compile(self, signature):
        fn = super().compile(signature)
        return (lambda xs: [self._bug(r) for r in fn(xs)]) if _is_add_f32(signature) else fn

    def compile_batch(self, signature):
        fn = super().compile_batch(signature)
        return (lambda xs: [self._bug(r) for r in fn(xs)]) if _is_add_f32(signature) else fn


class Logged(NumpyBackend):
    """The oracle, writing to compiles.log every signature it compiles (batch: the
    suite's path; single: the minimiser's) and a checksum of every input batch."""
    name = "logged"

    def _buggy(self, signature):
        return False

    @staticmethod
    def _log(line):
        with open("compiles.log", "a") as f:
            f.write(line + "\\n")

    def _wrap(self, signature, fn):
        def run(xs):
            crc = zlib.crc32(b"".join(np.ascontiguousarray(x).tobytes() for x in xs))
            self._log(f"run {signature.key()} {crc}")
            out = fn(xs)
            if self._buggy(signature):
                out = [np.asarray(r) + np.float32(1) for r in out]
            return out
        return run

    def compile(self, signature):
        self._log(f"single {signature.key()}")
        return self._wrap(signature, super().compile(signature))

    def compile_batch(self, signature):
        self._log(f"batch {signature.key()}")
        return self._wrap(signature, super().compile_batch(signature))


class RankBug(Logged):
    """add on f32 is off by one, but only for non-empty tensors of rank >= 1: the first
    example hypothesis tries (the simplest: a scalar) passes."""
    name = "rank-bug"

    def _buggy(self, signature):
        t = signature.input_types[0]
        return _is_add_f32(signature) and len(t.shape) >= 1 and 0 not in t.shape


class Lenient(NumpyBackend):
    """Runs invalid programs instead of rejecting them, and gets si32 add wrong (which
    breaks add's spec example)."""
    name = "lenient"

    def compile(self, signature):
        if signature.invalid:
            return lambda xs: [np.zeros(t.shape, t.element_type.dtype)
                               for t in signature.result_types]
        fn = super().compile(signature)
        if signature.op == "add" and signature.result_types[0].element_type.name == "si32":
            return lambda xs: [np.asarray(r) + np.int32(1) for r in fn(xs)]
        return fn


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
    result = _run(pytester, "--pyargs", "conformance.apps.suite", "--conformance-backend=numpy",
                  "--conformance-ops=add,compare", "-v")
    # add: one test per binding the quick depth draws (19 of the seed's types, and those
    # of the newer float formats in its turn of the family's rotation) + 1 example + C1;
    # compare: its quick bindings + 1 example + C1,C2,C3,O1.
    from conformance.checking.plan import select_bindings
    from conformance.specs import load_spec
    n_add, n_compare = (len(select_bindings(load_spec(op), None, "quick"))
                        for op in ("add", "compare"))
    assert 19 < n_add < len(load_spec("add").type_bindings())     # a rotation, not all
    result.assert_outcomes(passed=n_add + 1 + 1 + n_compare + 1 + 4)
    result.stdout.fnmatch_lines(["conformance: backend=numpy depth=quick profile=conformance-*"
                                 " seed=* ops=add,compare",
                                 "*test_op?add-f32? PASSED*",
                                 "*test_op?compare-si8? PASSED*",
                                 "*test_example?add-0? PASSED*",
                                 "*test_invalid?compare-C1? PASSED*",
                                 "conformance backend: name=numpy*"])


def test_filters_select_the_parameters(pytester: pytest.Pytester):
    result = _run(pytester, "--pyargs", "conformance.apps.suite", "--conformance-backend=numpy",
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

    result = _run(pytester, "--pyargs", "conformance.apps.suite", "--conformance-backend=numpy",
                  "--conformance-families=bitwise", "--conformance-types=i1",
                  "--collect-only", "-q")
    ids = re.findall(r"::(test_\w+\[[^\]]+\])", result.stdout.str())
    assert "test_op[and-i1]" in ids and "test_op[not-i1]" in ids
    assert not any(i.startswith(("test_op[add", "test_op[popcnt")) for i in ids)


def test_planted_bug_fails_exactly_its_cell(vendor: pytest.Pytester):
    result = _run(vendor, "--pyargs", "conformance.apps.suite",
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
    result = _run(vendor, "--pyargs", "conformance.apps.suite",
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
    result = _run(pytester, "--pyargs", "conformance.apps.suite", *args)
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
from conformance.core.case import Case


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


# ---------------------------------------------------------------------------
# Expectations through the plugin: the same file and the same gate as the CLI's
# ---------------------------------------------------------------------------

EXPECTATIONS = """\
backend: "*"
expectations:
  - op: add
    element_type: f32
    class: value
    reason: one ulp high where lhs > 1 (planted)
    link: https://example.com/issues/1
  - op: add
    element_type: si8
    class: value
    reason: not selected by --conformance-types, so never stale here
  - op: multiply
    element_type: "*"
    class: "*"
    reason: op not selected
"""


@pytest.fixture
def planted(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    """A temp dir whose subprocess runs can load tests/planted.py (planted:Class), with
    the expectations file above as exp.yaml."""
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), path])))
    pytester.makefile(".yaml", exp=EXPECTATIONS)
    return pytester


ADD_F32 = ("--pyargs", "conformance.apps.suite", "--conformance-ops=add", "--conformance-types=f32")


def _lines(result, *patterns: str) -> None:
    """fnmatch_lines with '[' and ']' taken literally (test ids, expectations[0])."""
    def literal(p: str) -> str:
        return "".join({"[": "[[]", "]": "[]]"}.get(c, c) for c in p)
    result.stdout.fnmatch_lines([literal(p) for p in patterns])


def test_expectations_xfail_a_planted_divergence_and_report_it_stale_once_gone(
        planted: pytest.Pytester):
    # Without expectations: the planted divergence fails its cell.
    result = _run(planted, *ADD_F32, "--conformance-backend=planted:PlantedAddF32")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1, passed=1, skipped=1)   # add's example is si32
    _lines(result, "FAILED *test_op[add-f32] - add [f32] on planted: value di*")

    # With a file that names it: an xfail with the entry's reason; the run passes.
    result = _run(planted, *ADD_F32, "--conformance-backend=planted:PlantedAddF32",
                  "--conformance-expectations=exp.yaml", "-rx")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(xfailed=1, passed=1, skipped=1)
    _lines(result,
           "conformance: expectations exp.yaml (3 entries)",
           "*conformance expectations*",
           "EXPECTED  exp.yaml: expectations[0] add f32 value: one ulp high where lhs > 1 "
           "(planted) (https://example.com/issues/1) [1 test: test_op[add-f32]]",
           "exp.yaml: 1 matched, 0 stale, 2 not exercised by this session",
           "XFAIL *test_op[add-f32] - expected value divergence (* cases): one ulp high "
           "where lhs > 1 (planted) (https://example.com/issues/1) [exp.yaml: "
           "expectations[0]]")
    assert "STALE" not in result.stdout.str()

    # The plant removed (the oracle itself): the entry is stale, which is reported and
    # fails the session only with --conformance-fail-on-stale. The si8 entry (type not
    # selected) and the multiply entry (op not selected) are not stale.
    for extra, code in (((), pytest.ExitCode.OK),
                        (("--conformance-fail-on-stale",), pytest.ExitCode.TESTS_FAILED)):
        result = _run(planted, *ADD_F32, "--conformance-backend=planted:OracleBackend",
                      "--conformance-expectations=exp.yaml", *extra)
        assert result.ret == code, result.stdout.str()
        result.assert_outcomes(passed=2, skipped=1)
        _lines(result,
               "STALE     exp.yaml: expectations[0] add f32 value: matched nothing in this "
               "session (reason was: one ulp high where lhs > 1 (planted))",
               "exp.yaml: 0 matched, 1 stale, 2 not exercised by this session")
        assert "expectations[1]" not in result.stdout.str()
    _lines(result, "conformance: 1 stale expectation with --conformance-fail-on-stale: "
                   "the session fails")


def test_an_unexpected_class_fails_even_when_another_is_expected(vendor: pytest.Pytester):
    # TwoClasses diverges in value (expected) and nan (not listed) in add f32.
    vendor.makefile(".yaml", exp="expectations:\n"
                                 "  - {op: add, element_type: f32, class: value, "
                                 "reason: off by one}\n")
    result = _run(vendor, *ADD_F32, "--conformance-backend=vendor_backends:TwoClasses",
                  "--conformance-expectations=exp.yaml", "--conformance-depth=deep",
                  "--conformance-seed=0", "-k", "test_op")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    _lines(result,
           "add [f32] on two-classes: nan divergence*",
           "  class:     nan*",
           "  expected:  value divergence, also seen: off by one [exp.yaml: expectations[0]]",
           "FAILED *test_op[add-f32] - add [f32] on two-classes: nan *")
    # The value entry did match: it is not stale.
    assert "STALE" not in result.stdout.str()


def test_expectations_under_xdist(planted: pytest.Pytester):
    pytest.importorskip("xdist")
    # Matches happen in the workers; the controller must see them (else: stale) ...
    result = _run(planted, *ADD_F32, "--conformance-backend=planted:PlantedAddF32",
                  "--conformance-expectations=exp.yaml", "--conformance-fail-on-stale",
                  "-n", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(xfailed=1, passed=1, skipped=1)
    _lines(result, "EXPECTED  exp.yaml: expectations[0] add f32 value: *",
           "exp.yaml: 1 matched, 0 stale, 2 not exercised*")
    # ... and what they covered (else: not exercised, never stale).
    result = _run(planted, *ADD_F32, "--conformance-backend=planted:OracleBackend",
                  "--conformance-expectations=exp.yaml", "--conformance-fail-on-stale",
                  "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.assert_outcomes(passed=2, skipped=1)
    _lines(result, "STALE     exp.yaml: expectations[0] add f32 value: *",
           "exp.yaml: 0 matched, 1 stale, 2 not exercised*")


def test_expectations_for_invalid_rules_and_spec_examples(vendor: pytest.Pytester):
    args = ("--pyargs", "conformance.apps.suite", "--conformance-ops=add",
            "--conformance-backend=vendor_backends:Lenient", "-k", "test_example or test_invalid",
            "-rfx")
    result = _run(vendor, *args)
    result.assert_outcomes(failed=2)
    _lines(result, "FAILED *test_example[add-0]*", "FAILED *test_invalid[add-C1]*")

    vendor.makefile(".yaml", exp="expectations:\n"
                                 "  - {op: add, rule: C1, class: accepted_invalid, "
                                 "reason: lenient verifier}\n"
                                 "  - {op: add, rule: example-0, class: fail, "
                                 "reason: si32 add is off by one}\n")
    result = _run(vendor, *args, "--conformance-expectations=exp.yaml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(xfailed=2)
    _lines(result,
           "XFAIL *test_example[add-0] - expected fail divergence (1 case): si32 add is off "
           "by one [exp.yaml: expectations[1]]",
           "XFAIL *test_invalid[add-C1] - expected accepted_invalid divergence (* case*): "
           "lenient verifier [exp.yaml: expectations[0]]")


@pytest.mark.parametrize("text, named", [
    ("expectations:\n  - {op: add, class: valu, reason: typo}\n", "'valu'"),
    ("expectations:\n  - {op: add, class: value}\n", "'reason' is required"),
    ("expectations: [\n", "not valid YAML"),
])
def test_malformed_expectations_file_is_a_usage_error(pytester: pytest.Pytester, text, named):
    pytester.makefile(".yaml", bad=text)
    result = _run(pytester, *ADD_F32, "--conformance-backend=numpy",
                  "--conformance-expectations=bad.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "ERROR: --conformance-expectations: bad.yaml" in err and named in err, err
    assert "Traceback" not in err + result.stdout.str()


# ---------------------------------------------------------------------------
# Hypothesis profiles: a persistent example database locally, derandomized in CI
# ---------------------------------------------------------------------------

def _log(pytester: pytest.Pytester) -> list[str]:
    path = pytester.path / "compiles.log"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return lines


def test_example_database_replays_a_failing_case_first(vendor: pytest.Pytester):
    args = ("--pyargs", "conformance.apps.suite", "--conformance-ops=add",
            "--conformance-types=f32", "-k", "test_op", "--conformance-profile=local",
            "--conformance-depth=deep", "--conformance-backend=vendor_backends:RankBug",
            "--conformance-database=db")
    first = _run(vendor, *args)
    first.assert_outcomes(failed=1)
    log = [line.split(" ", 1)[1] for line in _log(vendor) if line.startswith("batch ")]
    # Hypothesis tries the simplest example (a scalar) first: it passes; the run fails
    # on a later example, which goes into the database.
    assert log[0] == "add(tensor<f32>, tensor<f32>) -> (tensor<f32>)", log

    def buggy(sig: str) -> bool:   # as RankBug: rank >= 1 and no zero dimension
        dims = re.match(r"add\(tensor<((?:\d+x)*)f32>", sig).group(1).split("x")[:-1]
        return bool(dims) and "0" not in dims
    failing = next(sig for sig in log if buggy(sig))
    assert log.index(failing) > 0
    assert any((vendor.path / "db").iterdir())
    case_id = re.search(r"case id: +(\S+)", first.stdout.str()).group(1)

    # The next run replays it before generating anything: it fails on its first example.
    second = _run(vendor, *args)
    second.assert_outcomes(failed=1)
    log = [line.split(" ", 1)[1] for line in _log(vendor) if line.startswith("batch ")]
    assert log[0] == failing, (failing, log)
    assert re.search(r"case id: +(\S+)", second.stdout.str()).group(1) == case_id
    second.stdout.fnmatch_lines(["  rerun:     the example database (*db) replays this case "
                                 "first on the next run"])


def test_ci_profile_is_derandomized(vendor: pytest.Pytester, monkeypatch):
    args = ("--pyargs", "conformance.apps.suite", "--conformance-ops=add,abs",
            "--conformance-types=f32,si8", "--conformance-backend=vendor_backends:RankBug")
    monkeypatch.delenv("CI", raising=False)
    runs = []
    for env_ci, extra in ((None, ("--conformance-profile=ci",)),
                          (None, ("--conformance-profile=ci",)),
                          ("true", ())):                       # auto: CI is set
        if env_ci:
            monkeypatch.setenv("CI", env_ci)
        result = _run(vendor, *args, *extra, "-v")
        outcomes = re.findall(r"(test_\w+\[[^\]]+\]) (PASSED|FAILED|SKIPPED|XFAIL)",
                              result.stdout.str())
        runs.append((outcomes, _log(vendor)))
        _lines(result, "conformance: * profile=conformance-ci seed=0 *")
    assert runs[0][0] and ("test_op[add-f32]", "FAILED") in runs[0][0]
    assert any(line.startswith("run ") for line in runs[0][1])
    assert runs[0] == runs[1] == runs[2]
    # Nothing is read or written between CI runs.
    assert not (vendor.path / ".hypothesis").exists()
