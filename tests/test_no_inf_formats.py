"""Formats without infinity or NaN (f4E2M1FN, f6E2M3FN, f6E3M2FN; issue 30): what an
infinite exact result may be there.

The spec (stablehlo-spec-2026-08.md): "Floating-point exceptions" give IEEE-754's default
results, and division by zero's (1/0, log(0), rsqrt(0)) is the infinity itself, which
these types lack; convert leaves a value it cannot represent exactly TBD (#180), and an
infinity has no finite neighbour. So any value passes there and is recorded (shared rule
``no_infinity_without_inf``, convert's ``infinity_to_format_without_inf``), as for their
NaN (tests/test_no_nan_formats.py). A *finite* result beyond the largest value (exp(3),
4 * 4, convert(100.0)) is an inexact value whose only neighbour is the largest one: the
oracle's saturation, still required."""
from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

from conformance import oracles
from conformance.checking.compare import PASS
from conformance.core.case import Signature
from conformance.core.types import TensorType, element_type
from conformance.specs import load_spec

import planted
from element_batches import exact_results_over_every_value, judge, stacked_batch

RULE = "no_infinity_without_inf"
CONVERT_RULE = "infinity_to_format_without_inf"

# (op, per case: the input values; the first element of each case is a pole, the
# second a finite value)
POLES = {
    "divide": [[[1.0, 3.0], [0.0, 1.5]], [[-1.5, -4.0], [0.0, 2.0]]],
    "log": [[[0.0, 1.0]], [[-0.0, 4.0]]],
    "log_plus_one": [[[-1.0, 0.0]], [[-1.0, 1.0]]],
    "rsqrt": [[[0.0, 4.0]], [[-0.0, 1.0]]],
    "power": [[[0.0, 2.0], [-1.0, 2.0]], [[-0.0, 0.5], [-3.0, 2.0]]],
}


def _convert(src, dst, values):
    x = np.array([values], np.float64).astype(element_type(src).dtype)
    n = len(values)
    return Signature.make("convert", [f"tensor<{n}x{src}>"], [f"tensor<{n}x{dst}>"]), [x]


@pytest.mark.parametrize("name", planted.NO_NAN_FORMATS)
@pytest.mark.parametrize("op", sorted(POLES))
def test_zero_for_an_infinite_result_passes_and_is_recorded(op, name):
    """The interpreter's 0 for 1/0 (the oracle: the largest value) passes; recorded as
    not the oracle's value."""
    sig, stacked = stacked_batch(op, name, POLES[op])
    v, elements = judge(planted.NoInfFormatsZeroForInfinity(), sig, stacked)
    assert v.case_class_names() == ["pass", "pass"], (elements, v.impl_defined)
    assert v.impl_defined[RULE] == {"elements": 2, "conventional": 0}


@pytest.mark.parametrize("name", planted.NO_NAN_FORMATS)
@pytest.mark.parametrize("src", ["f32", "f64", "bf16", "f16", "f8E4M3"])
def test_an_infinity_converted_to_zero_passes(src, name):
    sig, xs = _convert(src, name, [np.inf, -np.inf, 1.0])
    v, elements = judge(planted.NoInfFormatsZeroForInfinity(), sig, xs)
    assert v.case_class_names() == ["pass"], (elements, v.impl_defined)
    assert v.impl_defined[CONVERT_RULE] == {"elements": 2, "conventional": 0}


@pytest.mark.parametrize("op,cases", [
    ("divide", [[[1.0, 4.0], [0.0, 0.5]]]),          # 1/0 open; 4/0.5 = 8 -> 6
    ("log", [[[0.0, 6.0]]]),                           # (log 6 in range: passes)
    ("power", [[[0.0, 4.0], [-1.0, 2.0]]]),          # 0^-1 open; 4^2 = 16 -> 6
])
def test_a_finite_overflow_sent_to_zero_fails_beside_an_open_pole(op, cases):
    sig, stacked = stacked_batch(op, "f4E2M1FN", cases)
    v, elements = judge(planted.NoInfFormatsOverflowToZero(), sig, stacked)
    finite_overflows = op != "log"
    assert elements[0][0] == PASS                  # the pole: open
    assert (elements[0][1] != PASS) == finite_overflows   # 8 or 16 -> 0: wrong
    assert v.impl_defined[RULE]["elements"] == 1


@pytest.mark.parametrize("name", planted.NO_NAN_FORMATS)
@pytest.mark.parametrize("op,values", [
    ("exponential", [[4.0, 6.0]]),                  # e^4 = 54.6: beyond every format's max
    ("multiply", [[6.0, -6.0], [6.0, 6.0]]),        # 36, -36
])
def test_a_finite_overflow_must_saturate(op, values, name):
    """No rule masks a finite overflow: the largest value passes, 0 fails."""
    sig, stacked = stacked_batch(op, name, [values])
    assert not any(np.asarray(m).any()
                   for m in oracles.implementation_defined(sig, stacked).values())
    (expected,) = oracles.evaluate(op, [x[0] for x in stacked],
                                   result_types=[TensorType((2,), element_type(name))])
    big = float(ml_dtypes.finfo(element_type(name).dtype).max)
    signs = [1, 1] if op == "exponential" else [1, -1]
    assert expected.astype(np.float64).tolist() == [big * s for s in signs]
    v, elements = judge(planted.NoInfFormatsOverflowToZero(), sig, stacked)
    assert (elements != PASS).all() and v.case_class_names() != ["pass"]
    v, _ = judge(planted.NoInfFormatsZeroForInfinity(), sig, stacked)
    assert v.case_class_names() == ["pass"]


@pytest.mark.parametrize("name", planted.NO_NAN_FORMATS)
def test_convert_of_a_large_finite_value_must_saturate(name):
    """convert(100.0) is inexact_to_float's: the largest value its only neighbour."""
    sig, xs = _convert("f32", name, [np.inf, 100.0, -1e30])
    v, elements = judge(planted.NoInfFormatsOverflowToZero(), sig, xs)
    assert elements[0][0] == PASS and (elements[0][1:] != PASS).all()
    assert v.impl_defined[CONVERT_RULE]["elements"] == 1


def test_the_rules_cover_exactly_the_infinities():
    sig, stacked = stacked_batch("divide", "f4E2M1FN", POLES["divide"])
    masks = oracles.implementation_defined(sig, stacked)
    assert np.asarray(masks[RULE]).tolist() == [[True, False], [True, False]]
    # formats that have an infinity (f32) or a NaN to put there (f8E4M3FN): not this rule
    for other in ("f32", "f8E4M3FN"):
        s = Signature.make("divide", [f"tensor<2x{other}>"] * 2, [f"tensor<2x{other}>"])
        xs = [x.astype(element_type(other).dtype) for x in stacked]
        assert RULE not in oracles.implementation_defined(s, xs)
    sig, xs = _convert("f32", "f4E2M1FN", [np.inf, -np.inf, 100.0, np.nan])
    assert np.asarray(oracles.implementation_defined(sig, xs)[CONVERT_RULE]).tolist() == \
        [[True, True, False, False]]
    sig, xs = _convert("f32", "f8E4M3FN", [np.inf, 1.0])
    assert CONVERT_RULE not in oracles.implementation_defined(sig, xs)


def test_every_op_that_can_meet_an_infinite_result_names_the_rule():
    """Every (pair of) f4E2M1FN / f6 values of every element-wise op of these formats:
    where the exact result can be infinite, the op's spec must take the shared rule."""
    found = {op for op, _, r in exact_results_over_every_value(planted.NO_NAN_FORMATS)
             if np.isinf(r).any()}
    assert found == set(POLES)
    for op in sorted(found):
        assert RULE in [r.id for r in load_spec(op).implementation_defined], op
    assert "operation_rules" in [r.id for r in
                                 load_spec("power_with_broadcast_dimensions").implementation_defined]
