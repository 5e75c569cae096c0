"""Verdict kinds (conformance.checking.verdicts): each kind passes a backend that differs only
in a way its rule allows and fails a backend with a realistic bug, with its class."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.checking import verdicts
from conformance.checking.checker import SignatureCheck
from conformance.checking.compare import BOUND, NAN, PASS, PROPERTY, SIGNED_ZERO, VALUE
from conformance.core.case import Signature
from conformance.checking.plan import batch_for
from conformance.specs import Accuracy, SpecError, load_spec, parse_accuracy
from conformance.core.types import element_type

import planted

F32_ADD = Signature.make("add", ["tensor<3x4xf32>", "tensor<3x4xf32>"], ["tensor<3x4xf32>"])


def _classes(backend, accuracy: Accuracy, sig=F32_ADD, batches=3) -> dict[str, int]:
    """Counts of case classes over a few batches of ``sig`` judged by ``accuracy``."""
    spec = load_spec(sig.op)
    check = SignatureCheck(spec, sig, [backend], accuracy)
    check.compile()
    counts: dict[str, int] = {}
    for b in range(batches):
        batch = check.run_batch(b, batch_for(0, "quick", spec, "f32", 0, b, sig))
        for cls, n in batch.results[backend.name].verdict.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


# -- bound ---------------------------------------------------------------------------

ACCUMULATION = Accuracy("bound", 0.0, (("bound", "accumulation"),))


def test_bound_passes_another_rounding_within_gamma_n():
    # One ulp off is what another summation order could give: within γ(n)·Σ|x|.
    counts = _classes(planted.OneUlpTowardZeroAddF32(), ACCUMULATION)
    assert set(counts) == {"pass"}, counts
    # ... while the exact verdict sees it.
    assert "value" in _classes(planted.OneUlpTowardZeroAddF32(), Accuracy("exact"))


def test_bound_does_not_excuse_an_overflow_to_infinity():
    # One ulp up from FLT_MAX is inf: no summation order of a finite sum gives that.
    assert "value" in _classes(planted.PlantedAddF32(), ACCUMULATION)


def test_bound_fails_a_wrong_value_with_class_bound():
    counts = _classes(planted.TenPercentAddF32(), ACCUMULATION)
    assert counts.get("bound", 0) > 0, counts


def test_accumulation_bound_is_gamma_n_times_the_sum_of_magnitudes():
    spec = load_spec("add")
    a = np.array([[1.0, -3.0]], np.float32)
    b = np.array([[2.0, 1.0]], np.float32)
    sig = Signature.make("add", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xf32>"])
    j = verdicts.Judgement(sig, spec, ACCUMULATION, [a, b], [a + b], [a + b], {})
    (limit,) = verdicts.BOUNDS["accumulation"](j)
    u = 2.0 ** -24
    g2 = 2 * u / (1 - 2 * u)
    eta = float(np.finfo(np.float32).smallest_subnormal)
    np.testing.assert_allclose(limit, [[3 * g2 + eta, 4 * g2 + eta]], rtol=1e-12)


def test_gamma_is_infinite_once_nu_reaches_one():
    assert verdicts.gamma(np.array([2.0 ** 24, 1.0]), 2.0 ** -24)[0] == np.inf
    assert verdicts.gamma(np.array([2.0]), 0.5)[0] == np.inf
    assert verdicts.gamma(np.array([1.0]), 0.25)[0] == pytest.approx(1 / 3)


def test_bound_keeps_nan_and_signed_zero_exact():
    spec = load_spec("add")
    sig = Signature.make("add", ["tensor<3xf32>", "tensor<3xf32>"], ["tensor<3xf32>"])
    a = np.array([[np.nan, -0.0, 1.0]], np.float32)
    b = np.array([[1.0, -0.0, 1.0]], np.float32)
    expected = [np.array([[np.nan, -0.0, 2.0]], np.float32)]
    actual = [np.array([[1.0, 0.0, 2.0]], np.float32)]
    v = verdicts.judge(verdicts.Judgement(sig, spec, ACCUMULATION, [a, b], expected, actual, {}))
    assert v.element_classes[0].tolist() == [[NAN, SIGNED_ZERO, PASS]]


# -- residual ------------------------------------------------------------------------

@pytest.fixture
def divide_residual():
    """A residual for divide, registered for the test: |q·b − a| ≤ 2u·|a| + tiny."""
    def fn(j):
        a, b = (np.asarray(x, np.float64) for x in j.inputs)
        q = np.asarray(j.actual[0], np.float64)
        with np.errstate(all="ignore"):
            r = np.abs(q * b - a).reshape(j.batch, -1).max(axis=1)
        allowed = 4 * 2.0 ** -24 * np.abs(a).reshape(j.batch, -1).max(axis=1) + 1e-30
        return r, allowed
    verdicts.RESIDUALS["test_divide"] = fn
    yield Accuracy("residual", 0.0, (("residual", "test_divide"),))
    del verdicts.RESIDUALS["test_divide"]


def _divide_case(q_change):
    spec = load_spec("divide")
    sig = Signature.make("divide", ["tensor<4xf32>", "tensor<4xf32>"], ["tensor<4xf32>"])
    a = np.array([[1.0, 2.0, 3.0, 7.0]], np.float32)
    b = np.array([[3.0, 7.0, 11.0, 13.0]], np.float32)
    q = (a / b).astype(np.float32)
    return spec, sig, [a, b], [q], [q_change(q)]


def test_residual_passes_a_backward_stable_answer(divide_residual):
    spec, sig, inputs, expected, actual = _divide_case(
        lambda q: np.nextafter(q, np.float32(np.inf)))
    v = verdicts.judge(verdicts.Judgement(sig, spec, divide_residual, inputs, expected, actual, {}))
    assert v.case_classes.tolist() == [PASS]


def test_residual_fails_a_wrong_answer_with_class_bound(divide_residual):
    spec, sig, inputs, expected, actual = _divide_case(lambda q: q * np.float32(1.001))
    v = verdicts.judge(verdicts.Judgement(sig, spec, divide_residual, inputs, expected, actual, {}))
    assert v.case_classes.tolist() == [BOUND]
    assert v.case_class_names() == ["bound"]


# -- property ------------------------------------------------------------------------

def test_property_deterministic_fails_a_backend_that_differs_from_itself():
    acc = Accuracy("property", 0.0, (("property", ("deterministic",)),))
    counts = _classes(planted.NondeterministicAddF32(), acc)
    assert counts.get("property", 0) > 0, counts


def test_property_deterministic_passes_a_stable_backend_whatever_its_values():
    # The spec fixes no value under a property verdict: doubling is allowed there.
    acc = Accuracy("property", 0.0, (("property", ("deterministic",)),))
    assert set(_classes(planted.DoublesAddF32(), acc)) == {"pass"}


def test_property_same_multiset_allows_another_order_only():
    spec = load_spec("add")
    sig = Signature.make("add", ["tensor<3xf32>", "tensor<3xf32>"], ["tensor<3xf32>"])
    acc = Accuracy("property", 0.0, (("property", "same_multiset"),))
    x = np.zeros((2, 3), np.float32)
    expected = [np.array([[1, 2, 3], [4, 5, 6]], np.float32)]
    shuffled = [np.array([[3, 1, 2], [6, 5, 4]], np.float32)]
    wrong = [np.array([[3, 1, 2], [6, 5, 5]], np.float32)]
    ok = verdicts.judge(verdicts.Judgement(sig, spec, acc, [x, x], expected, shuffled, {}))
    bad = verdicts.judge(verdicts.Judgement(sig, spec, acc, [x, x], expected, wrong, {}))
    assert ok.case_classes.tolist() == [PASS, PASS]
    assert bad.case_classes.tolist() == [PASS, PROPERTY]


# -- every kind ------------------------------------------------------------------------

@pytest.mark.parametrize("acc", [Accuracy("exact"), ACCUMULATION,
                                 Accuracy("property", 0.0, (("property", "deterministic"),))])
def test_results_of_the_wrong_type_are_class_type_for_every_kind(acc):
    spec = load_spec("add")
    x = np.zeros((1, 3, 4), np.float32)
    j = verdicts.Judgement(F32_ADD, spec, acc, [x, x], [x], [x.astype(np.float64)], {})
    v = verdicts.judge(j)
    assert v.case_class_names() == ["type"] and "expected (tensor<1x3x4xf32>)" in v.type_message


def test_unknown_kind_names_the_spec_file_and_the_known_kinds():
    spec = load_spec("add")
    x = np.zeros((1, 3, 4), np.float32)
    j = verdicts.Judgement(F32_ADD, spec, Accuracy("nosuch"), [x, x], [x], [x], {})
    with pytest.raises(verdicts.UnknownVerdict, match=r"add.yaml: accuracy: unknown verdict "
                                                      r"kind 'nosuch'; known: .*exact"):
        verdicts.judge(j)
    with pytest.raises(verdicts.UnknownVerdict, match="unknown bound function 'nope'"):
        verdicts.check_known(Accuracy("bound", 0, (("bound", "nope"),)), "x")
    with pytest.raises(verdicts.UnknownVerdict, match="unknown property 'nope'"):
        verdicts.check_known(Accuracy("property", 0, (("property", ("nope",)),)), "x")


def test_every_shipped_spec_names_registered_verdicts():
    from conformance.specs import op_names
    from conformance.core.types import ALL_ELEMENT_TYPES
    for name in op_names():
        spec = load_spec(name)
        for et in ALL_ELEMENT_TYPES:
            try:
                acc = spec.accuracy(et)
            except SpecError:
                continue
            verdicts.check_known(acc, f"{spec.path}: accuracy")


def test_spec_entries_of_other_kinds_parse_with_their_parameters():
    f32 = element_type("f32")
    acc = parse_accuracy({"bound": "accumulation"}, f32, "w")
    assert (acc.kind, acc.options) == ("bound", {"bound": "accumulation"})
    acc = parse_accuracy({"property": ["deterministic", "same_multiset"]}, f32, "w")
    assert acc.options["property"] == ("deterministic", "same_multiset")
    acc = parse_accuracy({"residual": "cholesky", "max": 16}, f32, "w")
    assert acc.options == {"residual": "cholesky", "max": 16}
    assert verdicts.from_record(verdicts.describe(acc)) == acc
    with pytest.raises(SpecError, match="w: expected exact"):
        parse_accuracy(3, f32, "w")
