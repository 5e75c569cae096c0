"""ceil, floor, round_nearest_even, round_nearest_afz against exact rationals.

Exhaustive over every value of f8E4M3FN, f8E5M2, bf16 and f16; sampled for f32 and
f64 with extra weight on ties (k + 1/2), near-ties and large values. The reference
uses Python's exact Fraction rounding (floor/ceil, round() ties to even, and
ties away from zero written as sign * floor(|x| + 1/2)); a zero result keeps the
operand's sign (IEEE-754 roundToIntegral*), infinities and NaN pass through.
"""
from __future__ import annotations

import math
import os
import sys
from fractions import Fraction

import numpy as np
import pytest

# tests/ may or may not be a package: find the helper module either way
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_reference import (  # noqa: E402
    FORMATS, NAN, all_values, assert_same_float, ev, random_values, special_values,
)

# NaN, infinity and overflow casts of special values are intended here.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

HALF = Fraction(1, 2)


def _afz(f: Fraction) -> int:
    m = math.floor(abs(f) + HALF)
    return m if f >= 0 else -m


RULES = {"ceil": math.ceil, "floor": math.floor, "round_nearest_even": round,
         "round_nearest_afz": _afz}


def reference(op, v: float) -> float:
    if math.isnan(v) or math.isinf(v):
        return v
    r = float(RULES[op](Fraction(v)))
    return math.copysign(0.0, v) if r == 0 else r


def _operands(name):
    fmt = FORMATS[name]
    if fmt.bits <= 16:
        return all_values(fmt)
    rng = np.random.default_rng(5)
    k = rng.integers(-(1 << 20), 1 << 20, size=5000).astype(np.float64)
    ties = k + 0.5
    near = np.concatenate([np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
    big = np.ldexp(rng.uniform(1, 2, 2000), rng.integers(fmt.p - 3, fmt.p + 3, 2000))
    x = np.concatenate([ties, near, big, -big, rng.uniform(-3, 3, 5000)]).astype(fmt.dtype)
    return np.concatenate([x, random_values(fmt, 10_000, rng), special_values(fmt)])


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"])
@pytest.mark.parametrize("op", list(RULES))
def test_round_to_integral(op, name):
    x = _operands(name)
    got = ev(op, [x], name)
    assert got.dtype == FORMATS[name].dtype
    want = np.array([reference(op, v) for v in x.astype(np.float64).tolist()])
    assert_same_float(got, want, (x,), f"{op} on {name}")


def test_spec_examples_rounding():
    f = np.float32
    got = ev("ceil", [np.array([-0.8166, -0.2530, 0.2530, 0.8166, 2.0], f)], "f32")
    assert_same_float(got, [-0.0, -0.0, 1.0, 1.0, 2.0])
    got = ev("round_nearest_afz", [np.array([-2.5, 0.4, 0.5, 0.6, 2.5], f)], "f32")
    assert_same_float(got, [-3.0, 0.0, 1.0, 1.0, 3.0])
    got = ev("round_nearest_even", [np.array([-2.5, 0.4, 0.5, 0.6, 2.5], f)], "f32")
    assert_same_float(got, [-2.0, 0.0, 0.0, 1.0, 2.0])
    got = ev("floor", [np.array([-0.8166, -0.2530, 0.2530, 0.8166, 2.0, -0.0], f)], "f32")
    assert_same_float(got, [-1.0, -1.0, 0.0, 0.0, 2.0, -0.0])
    # signed zeros from negative values
    got = ev("round_nearest_afz", [np.array([-0.4, -0.0, -0.5], f)], "f32")
    assert_same_float(got, [-0.0, -0.0, -1.0])
    got = ev("round_nearest_even", [np.array([-0.5, -0.4, 0.5, NAN], f)], "f32")
    assert_same_float(got, [-0.0, -0.0, 0.0, NAN])
