"""The comparator: each divergence class is told apart, bounds and masks are honoured."""
import numpy as np
import pytest

from conformance import oracles
from conformance.core.case import Signature
from conformance.checking.compare import compare_batch, classify, ulp_histogram, worst
from conformance.core.literals import from_literal
from conformance.specs import Accuracy

EXACT, BITS = Accuracy("exact"), Accuracy("bits")


def cls_names(actual, expected, acc=EXACT):
    c, _ = classify(np.asarray(actual), np.asarray(expected), acc)
    names = ["pass", "subnormal_flush", "precision", "accuracy", "bound", "signed_zero", "nan",
             "value", "property"]
    return [names[i] for i in c.reshape(-1)]


def test_element_class_codes_rise_with_severity():
    # A case's class is the largest code among its elements: the codes must order the
    # classes as SEVERITY does, or a case would be reported by a milder class.
    from conformance.checking.compare import ELEMENT_CLASSES, SEVERITY
    assert ELEMENT_CLASSES == ["pass", "subnormal_flush", "precision", "accuracy", "bound",
                               "signed_zero", "nan", "value", "property"]
    assert sorted(ELEMENT_CLASSES, key=SEVERITY.__getitem__) == ELEMENT_CLASSES


def f32(*v):
    return from_literal(list(v), f"tensor<{len(v)}xf32>")


def test_exact_floats_nan_and_signed_zero():
    e = f32(1.0, "nan", "0.0", 2.0, "-nan")
    a = f32(1.0, "-nan", "-0.0", 2.0000002, 3.0)
    assert cls_names(a, e) == ["pass", "pass", "signed_zero", "value", "nan"]


def test_bits_mode_tells_nan_payloads_apart():
    e = from_literal(["0x7FC00000", "0x7FC00001"], "tensor<2xf32>")
    a = from_literal(["0x7FC00000", "0x7FC00002"], "tensor<2xf32>")
    assert cls_names(a, e, BITS) == ["pass", "nan"]
    assert cls_names(a, e, EXACT) == ["pass", "pass"]


def test_ulp_bound():
    e = f32(1.0, 1.0, 1.0, "inf")
    one_up = np.nextafter(np.float32(1), np.float32(2))
    a = np.array([one_up, np.nextafter(one_up, np.float32(2)), 1.5, np.finfo(np.float32).max],
                 np.float32)
    assert cls_names(a, e, Accuracy("ulp", 1)) == ["pass", "accuracy", "accuracy", "value"]
    _, err = classify(a, e, Accuracy("ulp", 1))
    assert err[0] == 1 and err[1] == 2


def test_integers_and_booleans_are_exact():
    assert cls_names(np.array([1, 2], np.int8), np.array([1, 3], np.int8)) == ["pass", "value"]
    assert cls_names(np.array([True]), np.array([False])) == ["value"]


def test_complex_relative_error():
    e = np.array([1 + 1j, 1 + 1j, complex(np.nan, 0)], np.complex64)
    a = np.array([1 + 1.0000001j, 1.01 + 1j, complex(0, np.nan)], np.complex64)
    assert cls_names(a, e, Accuracy("rel_eps", 4)) == ["pass", "accuracy", "pass"]


def test_worst_orders_classes_by_severity():
    assert worst(["pass", "accuracy", "value", "subnormal_flush"]) == "value"
    assert worst(["pass", "unsupported"]) == "unsupported"


def test_subnormal_flush_is_told_from_a_wrong_value():
    sig = Signature.make("multiply", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xf32>"])
    tiny = np.float32(1e-39)                       # subnormal
    lhs = np.array([[tiny, 3.0]], np.float32)
    rhs = np.array([[1.0, 2.0]], np.float32)
    expected = oracles.evaluate_batch(sig, [lhs, rhs])
    ftz = [np.array([[0.0, 6.0]], np.float32)]     # what an FTZ/DAZ backend returns
    wrong = [np.array([[tiny, 7.0]], np.float32)]
    re = lambda xs: oracles.evaluate_batch(sig, xs)
    v = compare_batch(expected, ftz, EXACT, None, [lhs, rhs], re)
    assert v.case_class_names() == ["subnormal_flush"]
    v = compare_batch(expected, wrong, EXACT, None, [lhs, rhs], re)
    assert v.case_class_names() == ["value"]


def test_implementation_defined_elements_are_masked_and_recorded():
    sig = Signature.make("divide", ["tensor<3xsi8>", "tensor<3xsi8>"], ["tensor<3xsi8>"])
    lhs = np.array([[7, -128, 5]], np.int8)
    rhs = np.array([[0, -1, 2]], np.int8)
    expected = oracles.evaluate_batch(sig, [lhs, rhs])
    masks = oracles.implementation_defined(sig, [lhs, rhs], expected=expected)
    assert masks["integer_division_overflow"].tolist() == [[True, True, False]]
    actual = [np.array([[0, -128, 2]], np.int8)]          # 7/0 -> 0: not XLA's -1
    v = compare_batch(expected, actual, EXACT, masks)
    assert v.case_class_names() == ["pass"]
    assert v.impl_defined["integer_division_overflow"] == {"elements": 2, "conventional": 1}
    v = compare_batch(expected, [np.array([[0, -128, 3]], np.int8)], EXACT, masks)
    assert v.case_class_names() == ["value"]


def test_wrong_result_type_is_a_type_divergence():
    expected = [np.zeros((2, 3), np.float32)]
    v = compare_batch(expected, [np.zeros((2, 3), np.float64)], EXACT)
    assert v.case_class_names() == ["type", "type"]
    assert "tensor<2x3xf64>" in v.type_message


def test_ulp_histogram_buckets():
    h = ulp_histogram([np.array([0, 1, 2, 3, 5, np.inf, np.nan])])
    assert h[0] == 1 and h[1] == 1 and h[2] == 1 and h[3] == 1 and h[4] == 1 and h[-1] == 1
    assert sum(h) == 6
