"""The spec expression language: spec notation evaluates, anything unsafe is refused."""
import numpy as np
import pytest

from conformance.specs.expressions import ExpressionError, evaluate, names
from conformance.core.types import tensor_type


def env(**kw):
    return {k: tensor_type(v) if isinstance(v, str) and v.startswith("tensor") else v
            for k, v in kw.items()}


def test_type_functions_follow_spec_notation():
    e = env(lhs="tensor<2x3xsi32>", rhs="tensor<2x3xsi32>", result="tensor<2x3xsi32>")
    assert evaluate("same_type(lhs, rhs, result)", e) is True
    assert evaluate("rank(lhs) == 2 and dim(lhs, 1) == 3", e) is True
    assert evaluate("element_type(lhs)", e) == "si32"
    assert evaluate("num_bits(lhs) // 8", e) == 4
    assert evaluate("real_type('complex<f64>')", e) == "f64"
    assert evaluate("complex_type(element_type(x))", env(x="tensor<f32>")) == "complex<f32>"
    assert evaluate("shape(lhs)[:1] == [2]", e) is True
    assert evaluate("'f32' if is_integer(lhs) else 'si8'", e) == "f32"


@pytest.mark.parametrize("text", [
    "__import__('os')", "lhs.__class__", "(lambda: 1)()", "[x.real for x in range(3)]",
    "open('f')", "f(x=1)", "{x: 1 for x in range(3)}"])
def test_unsafe_or_unknown_constructs_are_refused(text):
    with pytest.raises(ExpressionError):
        evaluate(text, env(lhs="tensor<f32>", x=1, f=len))


def test_unknown_name_is_an_error():
    with pytest.raises(ExpressionError, match="unknown name 'nope'"):
        evaluate("nope + 1", {})


def test_elementwise_boolean_logic_on_arrays():
    a = np.array([0, 1, -128], np.int8)
    b = np.array([0, -1, -1], np.int8)
    m = evaluate("value(b) == 0 or (value(a) == min_value(a) and value(b) == -1)",
                 {"a": a, "b": b})
    assert m.tolist() == [True, False, True]


def test_exact_overflow_detection_on_64_bit():
    a = np.array([2 ** 62, 1], np.int64)
    m = evaluate("value(a) + value(a) > max_value(a)", {"a": a})
    assert np.asarray(m, bool).tolist() == [True, False]


def test_fits_per_conversion_rules():
    x = np.array([1.5, 2.0, np.nan, 300.0], np.float32)
    si8 = tensor_type("tensor<4xsi8>")
    assert evaluate("fits(x, r)", {"x": x, "r": si8}).tolist() == [True, True, False, False]
    bf16 = tensor_type("tensor<4xbf16>")
    y = np.array([1.0, 1.00390625, np.nan, 3e38], np.float32)
    assert evaluate("fits(y, r)", {"y": y, "r": bf16}).tolist() == [True, False, True, False]


def test_names_lists_free_names_only():
    assert names("same_type(lhs, rhs) and rank(x) == 0") == {"lhs", "rhs", "x"}


def test_comprehensions_for_per_dimension_rules():
    env = {"s": [0, 1], "l": [4, 5], "st": [1, 2]}
    assert evaluate("[(b - a + c - 1) // c for a, b, c in zip(s, l, st)]", env) == [4, 2]
    assert evaluate("all(0 <= d < 3 for d in s) and unique(s)", env) is True
    assert names("[x + y for x in a if x > k]") == {"a", "y", "k"}
    with pytest.raises(ExpressionError, match="unknown name 'x'"):
        evaluate("[i for i in s] + [x]", env)     # the loop variable does not leak
