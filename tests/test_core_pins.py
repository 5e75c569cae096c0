"""The core every verdict rests on, pinned behaviour by behaviour (issue 32, item 6):
the ULP scale, the element classes, the bound, the constraint checker and its
expression evaluator, expectations matching and the gate's exit code, resume and merge.

These are the tests bench/bench_core_mutation.py's survivors asked for: each fails on a
one-line slip of its function (the four bugs the issue names among them), and each runs
in milliseconds so that the bench can run them once per mutant.
"""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from conformance.apps import merge, runner
from conformance.apps.cli import EXIT_DIVERGENCES, EXIT_INTERNAL, EXIT_OK, _gate
from conformance.apps.expectations import Expectation, Expectations, gate
from conformance.checking import verdicts
from conformance.checking.compare import (ACCURACY, BOUND, NAN, PASS, SIGNED_ZERO, VALUE,
                                          classify, worst)
from conformance.core.case import Signature
from conformance.core.numerics import ordinal, total_order_key
from conformance.core.types import element_type
from conformance.specs import Accuracy, load_spec
from conformance.specs import expressions as ex
from conformance.specs.validity import violations

FLOATS = ["f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E3M4", "f8E4M3", "f8E4M3FN", "f8E4M3FNUZ",
          "f8E4M3B11FNUZ", "f8E5M2", "f8E5M2FNUZ", "bf16", "f16", "f32", "f64"]


def arr(et, *values):
    return np.array(values, np.float64).astype(element_type(et).dtype)


def tiny(et):
    """The smallest positive value of a type (its smallest subnormal, or normal)."""
    return float(ml_dtypes.finfo(element_type(et).dtype).smallest_subnormal)


# -- the ULP scale ---------------------------------------------------------------------

@pytest.mark.parametrize("et", FLOATS)
def test_both_zeros_are_ordinal_zero_and_neighbours_one_apart(et):
    zeros = arr(et, 0.0, -0.0)          # FNUZ: -0.0 converts to its one zero
    assert ordinal(zeros).tolist() == [0, 0]
    t = tiny(et)
    assert ordinal(arr(et, t, -t)).tolist() == [1, -1]
    # the ULP distance across zero: -tiny to +tiny is two steps, each zero to either one
    d = ordinal(arr(et, t)) - ordinal(arr(et, -t))
    assert d.tolist() == [2]
    one = arr(et, 1.0)
    up = np.nextafter(1.0, 2.0, dtype=np.float64) if et == "f64" else None
    nxt = one.view(element_type(et).bits_dtype) + 1
    assert (ordinal(nxt.view(one.dtype)) - ordinal(one)).tolist() == [1]
    assert ordinal(-one).tolist() == (-ordinal(one)).tolist()
    if up is not None:
        assert (ordinal(np.array([up])) - ordinal(np.array([1.0]))).tolist() == [1]


def test_e8m0_ordinal_is_its_encoding():
    x = np.array([0.5, 1.0, 2.0], ml_dtypes.float8_e8m0fnu)
    assert ordinal(x).tolist() == x.view(np.uint8).astype(np.int64).tolist()


@pytest.mark.parametrize("et", ["f8E5M2", "bf16", "f16", "f32", "f64"])
def test_total_order_puts_negative_zero_before_positive_zero(et):
    v = arr(et, float("-inf"), -1.0, -tiny(et), -0.0, 0.0, tiny(et), 1.0, float("inf"),
            float("nan"))
    neg_nan = (-arr(et, float("nan")))
    keys = total_order_key(np.concatenate([neg_nan, v])).tolist()
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert total_order_key(arr(et, -0.0, 0.0)).tolist() == [-1, 0]


@pytest.mark.parametrize("et", ["f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ"])
def test_fnuz_nan_comes_first_in_total_order(et):
    top = float(ml_dtypes.finfo(element_type(et).dtype).max)
    v = arr(et, float("nan"), -top, -1.0, 0.0, 1.0, top)
    keys = total_order_key(v).tolist()
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert keys[3] == 0


def test_e8m0_total_order_is_its_encoding():
    x = np.array([0.5, 1.0, float("nan")], ml_dtypes.float8_e8m0fnu)
    assert total_order_key(x).tolist() == [126, 127, 255]


# -- element classes -------------------------------------------------------------------

def classes(actual, expected, acc):
    c, err = classify(np.asarray(actual), np.asarray(expected), acc)
    return c.tolist(), None if err is None else err.tolist()


def test_ulp_error_across_zero_is_two_and_zeros_differ_by_sign_only():
    t = np.float32(tiny("f32"))
    e = np.array([t, 0.0, -0.0, 1.0], np.float32)
    a = np.array([-t, -0.0, -0.0, 1.0], np.float32)
    c, err = classes(a, e, Accuracy("ulp", 2.0))
    assert c == [PASS, SIGNED_ZERO, PASS, PASS]
    assert err == [2.0, 0.0, 0.0, 0.0]
    # beyond the bound, a sign flip is not a matter of accuracy
    c, _ = classes(a, e, Accuracy("ulp", 1.0))
    assert c == [VALUE, SIGNED_ZERO, PASS, PASS]


def test_ulp_classes_at_and_beyond_the_bound():
    one = np.float32(1.0)
    ulp = np.spacing(one)
    e = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 3.0], np.float32)
    a = np.array([1.0 + ulp, 1.0 + 2 * ulp, -1.0, 3.0, np.inf, np.nan, 3.0], np.float32)
    c, err = classes(a, e, Accuracy("ulp", 1.0))
    assert c == [PASS, ACCURACY, VALUE, VALUE, VALUE, NAN, PASS]
    assert err[:2] == [1.0, 2.0] and err[4] == np.inf and err[5] == np.inf and err[6] == 0.0
    assert classes(np.float32([np.nan]), np.float32([np.nan]), Accuracy("ulp", 0.0)) \
        == ([PASS], [0.0])


def test_not_close_is_value_even_within_a_loose_bound():
    # half of the expected value off: accuracy; more than all of it off: value
    e = np.array([4.0, 4.0, 4.0], np.float32)
    a = np.array([6.0, 8.0, 8.5], np.float32)
    c, _ = classes(a, e, Accuracy("ulp", 1.0))
    assert c == [ACCURACY, ACCURACY, VALUE]
    # a tiny value of the other sign: |a - e| rounds to |e| in float64, only the sign
    # says it is not one bit right
    c, _ = classes(np.float32([-1e-30, 1e-30]), np.float32([1.0, 1.0]), Accuracy("ulp", 1.0))
    assert c == [VALUE, ACCURACY]


def test_two_different_nans_are_error_zero_and_a_negative_bound_is_refused():
    # another NaN (sign or payload) beside an element that differs: not the fast path
    e = np.float32([np.nan, 1.0])
    a = np.float32([-np.nan, 1.0 + 2 ** -23])
    assert classes(a, e, Accuracy("ulp", 1.0)) == ([PASS, PASS], [0.0, 1.0])
    with pytest.raises(ValueError, match="bound must be >= 0"):
        Accuracy("ulp", -1.0)


def test_bits_compares_encodings_with_zero_error_where_they_agree():
    e = np.array([1.0, np.nan, 0.0, 2.0], np.float32)
    a = np.array([1.0, -np.nan, 0.0, 2.5], np.float32)
    c, err = classes(a, e, Accuracy("bits"))
    assert c == [PASS, NAN, PASS, VALUE]
    assert err[0] == 0.0 and err[2] == 0.0 and np.isnan(err[1]) and np.isnan(err[3])


def test_a_zero_for_a_nonzero_is_accuracy_not_value():
    # an error equal to the value itself (zero for a tiny nonzero, as flushing gives) is
    # the border of "not one bit right": accuracy; only beyond it, or a sign flip, is value
    t = np.float32(tiny("f32"))
    c, err = classes(np.float32([0.0, -0.0]), np.float32([4 * t, 4 * t]), Accuracy("ulp", 1.0))
    assert c == [ACCURACY, ACCURACY] and err == [4.0, 4.0]


def test_exact_sees_one_ulp_and_integers_compare_by_value():
    e = np.array([1.0, 2.0], np.float32)
    a = np.array([np.nextafter(np.float32(1.0), np.float32(2.0)), 2.0], np.float32)
    assert classes(a, e, Accuracy("exact"))[0] == [VALUE, PASS]
    c, err = classes(np.array([3, 4], np.int32), np.array([3, 5], np.int32), Accuracy("exact"))
    assert c == [PASS, VALUE] and err is None


def test_worst_class_is_the_most_severe():
    assert worst(["pass", "value", "accuracy"]) == "value"
    # a name without a severity ranks as pass (of equals, the first is kept)
    assert worst(["pass", "mystery"]) == "pass" and worst(["mystery", "pass"]) == "mystery"
    assert worst(["signed_zero", "nan"]) == "nan"
    assert worst([]) == "pass"


# -- the bound (accumulation) ----------------------------------------------------------

def test_unit_roundoff_and_gamma():
    assert verdicts.unit_roundoff("f32") == 2.0 ** -24
    assert verdicts.unit_roundoff("bf16") == 2.0 ** -8
    assert verdicts.unit_roundoff("complex<f64>") == 2.0 ** -53
    u = 2.0 ** -24
    np.testing.assert_allclose(verdicts.gamma(np.array([3.0]), u), [3 * u / (1 - 3 * u)],
                               rtol=1e-15)
    assert verdicts.gamma(np.array([0.0]), u).tolist() == [0.0]


ACCUMULATION = Accuracy("bound", 0.0, (("bound", "accumulation"),))
ADD2 = Signature.make("add", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xf32>"])


def _bound_case(scale):
    """An add whose result is off by ``scale`` times its accumulation bound."""
    spec = load_spec("add")
    a = np.array([[1.0e6, 3.0e5]], np.float32)
    b = np.array([[-999999.0, -2.0e5]], np.float32)
    e = a + b
    j0 = verdicts.Judgement(ADD2, spec, ACCUMULATION, [a, b], [e], [e], {})
    (limit,) = verdicts.BOUNDS["accumulation"](j0)
    # γ(2)·(|a| + |b|) + 2·η/2: two terms per element (Higham §3.1)
    u, eta = 2.0 ** -24, float(ml_dtypes.finfo(np.float32).smallest_subnormal)
    s = np.abs(a.astype(np.float64)) + np.abs(b.astype(np.float64))
    np.testing.assert_allclose(limit, 2 * u / (1 - 2 * u) * s + eta, rtol=1e-12)
    actual = (e.astype(np.float64) + scale * limit).astype(np.float32)
    frac = np.abs(actual.astype(np.float64) - e) / limit
    return verdicts.Judgement(ADD2, spec, ACCUMULATION, [a, b], [e], [actual], {}), frac


def test_the_bound_of_a_sum_of_zeros_is_the_underflow_allowance():
    # S = 0: all that is left is n·η/2 (two terms: one smallest subnormal)
    z = np.zeros((1, 2), np.float32)
    j = verdicts.Judgement(ADD2, load_spec("add"), ACCUMULATION, [z, z], [z], [z], {})
    (limit,) = verdicts.BOUNDS["accumulation"](j)
    assert limit.tolist() == [[tiny("f32")] * 2]


def test_each_result_of_a_variadic_reduce_has_its_own_bound():
    # an integer result (bound 0: exact) before a float one does not end the list
    sig = Signature.make("reduce", ["tensor<2x3xsi32>", "tensor<2x3xf32>", "tensor<si32>",
                                    "tensor<f32>"], ["tensor<2xsi32>", "tensor<2xf32>"],
                         {"dimensions": [1]},
                         regions=("(si32, f32, si32, f32) -> (add(arg0, arg2), add(arg1, arg3))",))
    ins = [np.ones((1, 2, 3), np.int32), np.ones((1, 2, 3), np.float32),
           np.zeros((1,), np.int32), np.zeros((1,), np.float32)]
    e = [np.full((1, 2), 3, np.int32), np.full((1, 2), 3, np.float32)]
    j = verdicts.Judgement(sig, load_spec("reduce"), ACCUMULATION, ins, e, e, {})
    ints, floats = verdicts.BOUNDS["accumulation"](j)
    assert ints.tolist() == [[0.0, 0.0]]
    u = 2.0 ** -24            # n = 4 terms (3 elements and the init value), S = 3
    np.testing.assert_allclose(floats, [[4 * u / (1 - 4 * u) * 3 + 2 * tiny("f32")] * 2],
                               rtol=1e-12)


def test_an_error_of_one_and_a_half_bounds_is_class_bound_and_half_a_bound_passes():
    # a bound doubled (or halved) anywhere on its way (u, γ, the magnitudes) flips one
    j, frac = _bound_case(1.5)
    assert ((frac > 1.2) & (frac < 1.8)).all(), frac
    assert verdicts.judge(j).element_classes[0].tolist() == [[BOUND, BOUND]]
    j, frac = _bound_case(0.6)
    assert ((frac > 0.4) & (frac < 0.8)).all(), frac
    assert verdicts.judge(j).element_classes[0].tolist() == [[PASS, PASS]]


def test_difference_of_complex_parts_ignores_a_shared_infinity():
    a = np.array([complex(np.inf, 1.0), 3 + 4j])
    e = np.array([complex(np.inf, 1.5), 0j])
    assert verdicts._difference(a, e).tolist() == [0.5, 5.0]
    assert verdicts._difference(np.float32([1.0, -2.0]), np.float32([1.5, 2.0])).tolist() \
        == [0.5, 4.0]


# -- constraints and expressions -------------------------------------------------------

ADD = Signature.make("add", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xf32>"])


def test_a_valid_signature_breaks_nothing_and_a_mismatch_breaks_its_constraint():
    assert violations(ADD) == []
    bad = Signature.make("add", ["tensor<2xf32>", "tensor<3xf32>"], ["tensor<2xf32>"])
    assert violations(bad) == ["C1"]
    # a type the table does not list breaks the input's and the output's rows
    assert violations(Signature.make("popcnt", ["tensor<2xf32>"], ["tensor<2xf32>"])) \
        == ["I1", "O1"]
    assert violations(Signature.make("add", ["tensor<2xf32>"], ["tensor<2xf32>"])) == ["arity"]
    # an input row without a label is named by its position (not's operand: I1)
    assert not load_spec("not").inputs[0].label
    assert violations(Signature.make("not", ["tensor<2xf32>"], ["tensor<2xf32>"]))[0] == "I1"


def test_a_constraint_whose_expression_raises_counts_as_broken(monkeypatch):
    spec = load_spec("add")
    assert spec.constraints, "add has constraints"

    def raising(text, env):
        raise ex.ExpressionError(f"cannot evaluate {text!r}")
    monkeypatch.setattr(ex, "evaluate", raising)
    assert violations(ADD, spec) == [c.id for c in spec.constraints]


def test_attribute_rows_are_checked():
    spec = load_spec("compare")
    direction = next(a for a in spec.attributes if a.name == "comparison_direction")
    label = direction.label or direction.name
    good = Signature.make("compare", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xi1>"],
                          {"comparison_direction": "LT", "compare_type": "FLOAT"})
    assert label not in violations(good)
    assert label in violations(Signature.make(
        "compare", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xi1>"],
        {"comparison_direction": "LESS", "compare_type": "FLOAT"}))
    assert label in violations(Signature.make(
        "compare", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xi1>"],
        {"compare_type": "FLOAT"}))


CUSTOM = {"call_target_name": "foo", "has_side_effect": False, "backend_config": "",
          "api_version": 1, "called_computations": []}


def test_string_and_string_list_attributes_are_checked():
    def mk(**kw):
        return violations(Signature.make("custom_call", ["tensor<2xf32>"], ["tensor<2xf32>"],
                                         {**CUSTOM, **kw}))
    # I2 call_target_name (string), I3 bool, I5 integer, I6 called_computations (strings)
    assert mk() == [] and mk(called_computations=["a", "b"]) == []
    assert mk(call_target_name=3) == ["I2"]
    assert mk(called_computations="a") == ["I6"]
    assert mk(called_computations=["a", 1]) == ["I6"]


def test_tensor_and_enum_list_attributes_are_checked():
    const = Signature.make("constant", [], ["tensor<i32>"], {"value": "dense<1> : tensor<i32>"})
    assert violations(const) == []
    assert "I1" in violations(Signature.make("constant", [], ["tensor<i32>"],
                                             {"value": "nonsense"}))
    base = {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
            "lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}

    def dot(pc):
        return violations(Signature.make("dot_general", ["tensor<2x3xf32>", "tensor<3x4xf32>"],
                                         ["tensor<2x4xf32>"], {**base, "precision_config": pc}))
    assert dot(["HIGH", "HIGHEST"]) == [] and dot(("DEFAULT", "HIGH")) == []
    assert "I7" in dot(["HIGH", "BOGUS"])
    assert "I7" in dot("HIGH")


@pytest.mark.parametrize("text, value", [
    ("true and false", False), ("True or False", True), ("not true", False),
    ("0 or 3", 3), ("2 and 0", 0), ("1 and 2", 2), ("1 and 2 and 3", 3), ("0 or [] or 0", 0), ("-(3)", -3), ("+(3)", 3),
    ("1 < 2 < 3", True), ("1 < 3 < 2", False), ("2 == 2", True),
    ("[x * 2 for x in [1, 2, 3] if x != 2]", [2, 6]),
    ("[(b, a) for a, b in [[1, 2], [3, 4]]]", [[2, 1], [4, 3]]),
    ("[a + b for a in [1, 2] for b in [10, 20]]", [11, 21, 12, 22]),
])
def test_scalar_expressions(text, value):
    assert ex.evaluate(text, {}) == value


def test_array_expressions_combine_elementwise():
    env = {"x": np.array([1, 0, 1], bool), "y": np.array([1, 1, 0], bool)}
    assert ex.evaluate("x and y", env).tolist() == [True, False, False]
    assert ex.evaluate("x or y", env).tolist() == [True, True, True]
    assert ex.evaluate("not x", env).tolist() == [False, True, False]
    assert ex.evaluate("true and x", env).tolist() == [True, False, True]
    assert ex.evaluate("0 < v < 3", {"v": np.array([1, 3])}).tolist() == [True, False]
    assert ex.evaluate("v < 3 < 4", {"v": np.array([1, 5])}).tolist() == [True, False]


def test_names_and_failures():
    assert ex.evaluate("n", {"n": element_type("f32")}) == "f32"
    assert ex.evaluate("false", {}) is False
    with pytest.raises(ex.ExpressionError, match="unknown name 'm'"):
        ex.evaluate("m", {})
    with pytest.raises(ex.ExpressionError, match="ZeroDivisionError"):
        ex.evaluate("1 // 0", {})
    with pytest.raises(ex.ExpressionError):
        ex.evaluate("[a for a, b in [[1, 2, 3]]]", {})


# -- expectations and the gate ---------------------------------------------------------

RUN = {"kind": "run", "depth": "quick", "backends": [{"name": "jax", "platform": "cpu"}]}


def sig(op, key, counts):
    outcome = worst(list(counts))
    return {"kind": "signature", "backend": "jax", "op": op, "type_key": key,
            "counts": counts, "outcome": outcome}


def exp(*entries, backend=None):
    return Expectations([Expectation(index=i, **e) for i, e in enumerate(entries)],
                        backend=backend)


def test_an_entry_waives_only_its_op_type_and_class():
    records = [RUN, sig("add", "f32", {"pass": 3, "value": 1}),
               sig("add", "f64", {"value": 2}), sig("tanh", "f32", {"accuracy": 1})]
    e = exp({"op": "add", "cls": "value", "reason": "r", "element_types": ("f32",)},
            {"op": "sine", "cls": "value", "reason": "s"})
    g = gate(records, e)
    assert [(i["op"], i["element_type"], i["class"]) for i in g.unexpected] == \
        [("add", "f64", "value"), ("tanh", "f32", "accuracy")]
    assert [(i["op"], i["entry"], i["cases"]) for i in g.expected] == [("add", 0, 1)]
    assert not g.passed
    assert [s.index for s in g.not_exercised] == [1]
    ok = gate([RUN, sig("add", "f32", {"value": 1})], e)
    assert ok.passed and ok.unexpected == [] and ok.stale == []


def test_class_patterns_and_the_first_matching_entry():
    e = exp({"op": "add", "cls": "acc*", "reason": "a"}, {"op": "*", "cls": "*", "reason": "b"})
    assert e.match("jax", {}, "add", "accuracy", "f32").reason == "a"
    assert e.match("jax", {}, "add", "value", "f32").reason == "b"
    only = exp({"op": "add", "cls": "value", "reason": "a"})
    assert only.match("jax", {}, "add", "nan", "f32") is None
    assert only.match("jax", {}, "sub", "value", "f32") is None
    other = exp({"op": "add", "cls": "value", "reason": "a"}, backend="iree*")
    assert other.match("jax", {}, "add", "value", "f32") is None


def test_an_unused_entry_the_run_exercised_is_stale():
    e = exp({"op": "add", "cls": "value", "reason": "r"})
    g = gate([RUN, sig("add", "f32", {"pass": 4})], e)
    assert [s.index for s in g.stale] == [0] and g.not_exercised == [] and g.passed


def test_the_gate_exit_code(capsys):
    clean = [RUN, sig("add", "f32", {"pass": 4})]
    bad = [RUN, sig("add", "f32", {"value": 1})]
    waived = exp({"op": "add", "cls": "value", "reason": "r"})
    assert _gate(clean, None, False) == EXIT_OK
    assert _gate(bad, None, False) == EXIT_DIVERGENCES
    assert _gate(bad, waived, True) == EXIT_OK
    # an accepted invalid program alone fails the gate
    invalid = [RUN, {"kind": "invalid", "backend": "jax", "op": "add", "rule": "C1",
                     "outcome": "accepted_invalid"}]
    assert _gate(invalid, None, False) == EXIT_DIVERGENCES
    # a stale entry fails only with fail_on_stale
    assert _gate(clean, waived, False) == EXIT_OK
    assert _gate(clean, waived, True) == EXIT_DIVERGENCES
    # no divergence but an internal error of the suite: 3
    internal = clean + [{"kind": "internal_error", "op": "add", "what": "oracle",
                         "error": "boom"}]
    capsys.readouterr()
    assert _gate(internal, None, False) == EXIT_INTERNAL
    assert "internal errors of the suite: 1 " in capsys.readouterr().err
    assert _gate(internal + bad[1:], None, False) == EXIT_DIVERGENCES
    # strict: a broad entry fails the gate even when it waives what it should
    broad = exp({"op": "*", "cls": "value", "reason": "r"})
    assert _gate(bad, broad, False) == EXIT_OK
    assert _gate(bad, broad, False, strict=True) == EXIT_DIVERGENCES
    assert EXIT_OK == 0 and EXIT_DIVERGENCES == 1 and EXIT_INTERNAL == 3


def test_strict_fails_on_each_of_its_three_reasons_alone(capsys):
    """--strict: a broad entry, an entry of a broad class without looks_like, and a reason
    its records or its own looks_like refute each fail the gate on their own."""
    bad = [RUN, dict(sig("add", "f32", {"value": 1}),
                     class_errors={"value": {"cases": 1, "nonfinite": 0, "unit": "ulp",
                                             "worst": 9.0}})]
    narrow = {"op": "add", "cls": "value", "element_types": ("f32",)}
    shaped = exp(dict(narrow, reason="r", looks_like=(("nonfinite", False),)))
    unshaped = exp(dict(narrow, reason="r"))
    refuted = exp(dict(narrow, reason="gives NaN for 1", looks_like=(("nonfinite", False),)))
    for e in (shaped, unshaped, refuted):
        assert _gate(bad, e, False, entries=True) == EXIT_OK
    assert _gate(bad, shaped, False, entries=True, strict=True) == EXIT_OK
    assert _gate(bad, unshaped, False, entries=True, strict=True) == EXIT_DIVERGENCES
    assert _gate(bad, refuted, False, entries=True, strict=True) == EXIT_DIVERGENCES
    capsys.readouterr()


# -- resume and merge ------------------------------------------------------------------

class _B:
    def __init__(self, locator):
        self.locator = self.name = locator


def _results(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _header(**kw):
    h = {"kind": "run", "seed": 0, "depth": "quick", "locators": ["jax"], "ops": ["add"],
         "families": None, "element_types": None, "invalid": True, "examples": True,
         "max_repros": 2, "tolerances": None, "shard": None}
    h.update(kw)
    return h


def test_resume_keeps_every_record_of_finished_units_the_last_included(tmp_path):
    recs = [_header(),
            {"kind": "signature", "backend": "jax", "op": "add", "type_key": "f32",
             "outcome": "pass"},
            {"kind": "unit_done", "op": "add"},
            {"kind": "signature", "backend": "jax", "op": "sub", "type_key": "f32",
             "outcome": "pass"},
            {"kind": "replay", "backend": "jax", "case_id": "c", "class": "value"},
            {"kind": "signature", "backend": "jax", "op": "mul", "type_key": "f32",
             "outcome": "pass"},
            {"kind": "unit_done", "op": "mul"}]
    config = runner.RunConfig(ops=["add"], depth="quick")
    st = runner.load_resume(config, [_B("jax")], _results(tmp_path / "r.jsonl", recs))
    assert st.done == {"add", "mul"}
    assert st.kept == [recs[0], recs[1], recs[2], recs[4], recs[5], recs[6]]
    assert runner.load_resume(config, [_B("jax")], tmp_path / "none.jsonl") is None


def test_resume_refuses_other_options_and_a_file_without_header(tmp_path):
    config = runner.RunConfig(ops=["add"], depth="quick")
    for bad in (_header(seed=1), _header(depth="default"), _header(locators=["numpy"])):
        with pytest.raises(runner.ResumeError, match="different options"):
            runner.load_resume(config, [_B("jax")], _results(tmp_path / "r.jsonl", [bad]))
    with pytest.raises(runner.ResumeError, match="no run header"):
        runner.load_resume(config, [_B("jax")], _results(
            tmp_path / "r.jsonl", [{"kind": "unit_done", "op": "add"}]))
    with pytest.raises(runner.ResumeError, match="cannot resume"):
        runner.load_resume(config, [_B("jax")], _results(tmp_path / "r.jsonl", [
            _header(), {"kind": "no_such_kind"}]))
    # records are read strictly (kept records are written again, and the writer refuses
    # a field its record class does not declare)
    with pytest.raises(runner.ResumeError, match="cannot resume"):
        runner.load_resume(config, [_B("jax")], _results(tmp_path / "r.jsonl", [
            _header(), {"kind": "unit_done", "op": "add", "undeclared": 1}]))
    # the filters' order does not matter
    config2 = runner.RunConfig(ops=["sub", "add"], depth="quick")
    assert runner.load_resume(config2, [_B("jax")], _results(
        tmp_path / "r.jsonl", [_header(ops=["add", "sub"])])) is not None
    assert runner.resume_value("ops", []) is None
    assert runner.resume_value("seed", 3) == 3


def test_record_keys_tell_records_of_each_kind_apart():
    base = {"backend": "jax", "op": "add", "type_key": "f32", "index": 0, "signature": "s",
            "case_id": "c", "class": "value", "rule": "C1", "example": 0, "repro": "r",
            "what": "w", "error": "e"}
    kinds = ["signature", "divergence", "invalid", "example", "validity", "cross", "replay",
             "unit_done", "internal_error", "end"]
    keys = [merge.record_key({**base, "kind": k}) for k in kinds]
    assert len(set(keys)) == len(keys) and [k[0] for k in keys] == kinds
    fields = {"signature": ["backend", "op", "type_key", "index", "signature"],
              "divergence": ["backend", "op", "type_key", "case_id", "class"],
              "invalid": ["backend", "op", "rule", "signature"],
              "example": ["backend", "op", "index", "example"],
              "validity": ["op", "type_key"], "cross": ["op", "type_key", "signature"],
              "replay": ["backend", "case_id", "repro"], "unit_done": ["op"],
              "internal_error": ["op", "type_key", "what", "error"]}
    for k, names in fields.items():
        r = {**base, "kind": k}
        for f in names:
            assert merge.record_key(r) != merge.record_key({**r, f: "other"}), (k, f)
        # ... and only those: the same record with more fields is the same record
        assert merge.record_key(r) == merge.record_key({**r, "extra": 1}), k
    # a record of another kind is keyed by all its fields, timing aside, in any order
    end = {"kind": "end", "a": 1, "b": 2}
    assert merge.record_key(end) != merge.record_key({**end, "b": 3})
    assert merge.record_key(end) == merge.record_key({"b": 2, "kind": "end", "a": 1})


def test_merge_refuses_runs_that_differ_but_in_filters_and_shard():
    a = ("a", _header())
    merge.check_headers([a, ("b", _header(ops=["sub"], shard="2/2"))])
    with pytest.raises(merge.MergeError, match="b: cannot merge.*seed"):
        merge.check_headers([a, ("b", _header(seed=3))])
    with pytest.raises(merge.MergeError, match="c: cannot merge.*depth"):
        merge.check_headers([a, ("b", _header()), ("c", _header(depth="default"))])
    # an option one header has and the other lacks differs too
    lacking = _header()
    del lacking["depth"]
    with pytest.raises(merge.MergeError, match="b: cannot merge.*depth"):
        merge.check_headers([a, ("b", lacking)])
    assert merge._union([["add"], ["sub", "add"]]) == ["add", "sub"]
    assert merge._union([["add"], None]) is None
