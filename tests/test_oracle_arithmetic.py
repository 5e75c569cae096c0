"""The IEEE-exact float ops of the oracle against exact rational arithmetic.

add, subtract, multiply, divide, sqrt (IEEE-754 operations, correctly rounded),
remainder (lhs - trunc(lhs/rhs) * rhs, exact, sign of the dividend), maximum /
minimum (IEEE-754 2019 maximum/minimum: NaN propagates, -0 < +0), clamp, negate,
abs, sign. The fp8 formats are checked exhaustively over all 256 x 256 operand
pairs (one vectorised oracle call per op); bf16 and f16 on a large random sample
plus all pairs of special values; f32 and f64 on a sample. The expected values
come from tests/oracle_reference.py: Python integers, rounded to nearest even
from the format's parameters. Any NaN equals any NaN; +0 and -0 differ.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

# tests/ may or may not be a package: find the helper module either way
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_reference import (  # noqa: E402
    FORMATS, NAN, all_values, assert_same_float, c_fmod, ev, ieee_add, ieee_div, ieee_mul,
    ieee_sqrt, ieee_sub, pairs, random_values, special_values,
)

# NaN, infinity and overflow casts of special values are intended here.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SEED = 7

REFS = {"add": ieee_add, "subtract": ieee_sub, "multiply": ieee_mul, "divide": ieee_div,
        "remainder": lambda x, y, fmt: c_fmod(x, y)}


def ieee_maximum(x, y, fmt=None):
    if math.isnan(x) or math.isnan(y):
        return NAN
    if x == 0 and y == 0:
        return 0.0 if (math.copysign(1, x) > 0 or math.copysign(1, y) > 0) else -0.0
    return x if x > y else y


def ieee_minimum(x, y, fmt=None):
    if math.isnan(x) or math.isnan(y):
        return NAN
    if x == 0 and y == 0:
        return -0.0 if (math.copysign(1, x) < 0 or math.copysign(1, y) < 0) else 0.0
    return x if x < y else y


REFS["maximum"] = ieee_maximum
REFS["minimum"] = ieee_minimum
BINARY = list(REFS)


def _operands(name: str, rng) -> tuple[np.ndarray, np.ndarray]:
    fmt = FORMATS[name]
    if fmt.bits == 8:
        return pairs(all_values(fmt))
    n = {16: 30_000, 32: 15_000, 64: 8_000}[fmt.bits]
    a = random_values(fmt, n, rng)
    b = random_values(fmt, n, rng)
    # close magnitudes (cancellation, ties in add/subtract): b = a's bits +- a little
    ubits = np.dtype(f"u{fmt.bits // 8}")
    close = a.view(ubits) + rng.integers(-40, 40, size=n).astype(ubits)
    c = close.view(fmt.dtype)
    # mid-range values whose products/quotients stay in range
    e = rng.integers(-20, 20, size=n)
    m = np.ldexp(rng.uniform(1, 2, n), e).astype(fmt.dtype)
    m2 = np.ldexp(rng.uniform(1, 2, n), -e + rng.integers(-3, 3, n)).astype(fmt.dtype)
    s1, s2 = pairs(special_values(fmt))
    return np.concatenate([a, a, m, s1]), np.concatenate([b, c, m2, s2])


def _reference(op, name, a, b):
    fmt = FORMATS[name]
    ref = REFS[op]
    return np.array([ref(x, y, fmt) for x, y in zip(a.astype(np.float64).tolist(),
                                                     b.astype(np.float64).tolist())])


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"])
@pytest.mark.parametrize("op", BINARY)
def test_binary_float_op_is_exactly_rounded(op, name):
    rng = np.random.default_rng(SEED)
    a, b = _operands(name, rng)
    assert a.shape == b.shape
    got = ev(op, [a, b], name)
    assert got.dtype == FORMATS[name].dtype
    assert_same_float(got, _reference(op, name, a, b), (a, b), f"{op} on {name}")


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"])
def test_sqrt_is_exactly_rounded(name):
    fmt = FORMATS[name]
    rng = np.random.default_rng(SEED)
    x = all_values(fmt) if fmt.bits <= 16 else np.concatenate(
        [random_values(fmt, 30_000, rng), special_values(fmt)])
    got = ev("sqrt", [x], name)
    want = np.array([ieee_sqrt(v, fmt) for v in x.astype(np.float64).tolist()])
    assert_same_float(got, want, (x,), f"sqrt on {name}")


def test_reference_sqrt_squares_back():
    # The reference's sqrt, at f64, on perfect squares and on 2.
    fmt = FORMATS["f64"]
    for v in (4.0, 2.25, 2.0 ** -1074, 2.0 ** -1000, 1e300 * 1e8):
        r = ieee_sqrt(v, fmt)
        assert r == math.sqrt(v)
    assert ieee_sqrt(2.0, fmt) == math.sqrt(2.0)


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"])
def test_negate_abs_sign(name):
    fmt = FORMATS[name]
    rng = np.random.default_rng(SEED)
    x = all_values(fmt) if fmt.bits <= 16 else np.concatenate(
        [random_values(fmt, 20_000, rng), special_values(fmt)])
    xs = x.astype(np.float64).tolist()
    assert_same_float(ev("negate", [x], name), np.array([-v for v in xs]), (x,), "negate")
    assert_same_float(ev("abs", [x], name), np.array([math.fabs(v) for v in xs]), (x,), "abs")

    def sign(v):
        if math.isnan(v):
            return NAN
        if v == 0:
            return v                     # -0.0 -> -0.0, +0.0 -> +0.0
        return 1.0 if v > 0 else -1.0
    assert_same_float(ev("sign", [x], name), np.array([sign(v) for v in xs]), (x,), "sign")
    # IEEE negate/abs are sign-bit operations: on every non-NaN value the result's bit
    # pattern is the operand's with the sign bit flipped / cleared, and on NaN the sign
    # bit still flips / clears (the NaN payload is not required to survive).
    u = f"u{fmt.bits // 8}"
    sign_bit = 1 << (fmt.bits - 1)
    bits = x.view(u)
    nan = np.isnan(x.astype(np.float64))
    neg = ev("negate", [x], name).view(u)
    ab = ev("abs", [x], name).view(u)
    assert ((bits ^ neg)[~nan] == sign_bit).all(), "negate is not a sign-bit flip"
    assert (ab[~nan] == (bits & (sign_bit - 1))[~nan]).all(), "abs does not clear the sign bit"
    assert (((bits ^ neg) & sign_bit)[nan] == sign_bit).all(), "negate(NaN) keeps the sign"
    assert ((ab & sign_bit)[nan] == 0).all(), "abs(NaN) keeps a negative sign"


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32"])
def test_clamp_float(name):
    fmt = FORMATS[name]
    rng = np.random.default_rng(SEED)
    n = 30_000
    sp = special_values(fmt)
    lo = np.concatenate([random_values(fmt, n, rng), rng.choice(sp, n)])
    x = np.concatenate([random_values(fmt, n, rng), rng.choice(sp, n)])
    hi = np.concatenate([random_values(fmt, n, rng), rng.choice(sp, n)])
    got = ev("clamp", [lo, x, hi], name)
    want = np.array([ieee_minimum(ieee_maximum(v, a), b) for a, v, b in zip(
        lo.astype(np.float64).tolist(), x.astype(np.float64).tolist(),
        hi.astype(np.float64).tolist())])
    assert_same_float(got, want, (lo, x, hi), f"clamp on {name}")
    # scalar min/max broadcast against a tensor operand
    got = ev("clamp", [np.array(-1.0, fmt.dtype), x, np.array(2.0, fmt.dtype)], name)
    want = np.array([ieee_minimum(ieee_maximum(v, -1.0), 2.0)
                     for v in x.astype(np.float64).tolist()])
    assert_same_float(got, want, (x,), f"clamp(scalar) on {name}")


def test_spec_examples_of_float_ops():
    f = np.float32
    got = ev("divide", [np.array([17.1, -17.1, 17.1, -17.1], f), np.array([3, 3, -3, -3], f)],
             "f32")
    assert got.tolist() == [np.float32(17.1) / f(3), -(np.float32(17.1) / f(3)),
                            -(np.float32(17.1) / f(3)), np.float32(17.1) / f(3)]
    got = ev("maximum", [np.array([1.0, -0.0, np.nan, 0.0], f), np.array([2.0, 0.0, 1.0, -0.0], f)],
             "f32")
    assert_same_float(got, [2.0, 0.0, np.nan, 0.0])
    got = ev("minimum", [np.array([1.0, -0.0, 1.0, 0.0], f), np.array([2.0, 0.0, np.nan, -0.0], f)],
             "f32")
    assert_same_float(got, [1.0, -0.0, np.nan, -0.0])
    got = ev("sign", [np.array([-np.inf, np.inf, np.nan, -10.0, -0.0, 0.0, 10.0], f)], "f32")
    assert_same_float(got, [-1.0, 1.0, np.nan, -1.0, -0.0, 0.0, 1.0])
    got = ev("remainder", [np.array([17.0, -17.0, 17.0, -17.0, -4.0, 5.5], f),
                           np.array([3.0, 3.0, -3.0, -3.0, 2.0, -2.0], f)], "f32")
    assert_same_float(got, [2.0, -2.0, 2.0, -2.0, -0.0, 1.5])


def test_bool_add_multiply_maximum_minimum():
    a, b = pairs(np.array([False, True]))
    assert ev("add", [a, b], "i1").tolist() == [x or y for x, y in zip(a, b)]
    assert ev("multiply", [a, b], "i1").tolist() == [x and y for x, y in zip(a, b)]
    assert ev("maximum", [a, b], "i1").tolist() == [x or y for x, y in zip(a, b)]
    assert ev("minimum", [a, b], "i1").tolist() == [x and y for x, y in zip(a, b)]


# ---------------------------------------------------------------------------
# Complex element types
# ---------------------------------------------------------------------------

def _complex_operands(name, rng, n=4000):
    part = FORMATS["f32" if name == "complex<f32>" else "f64"]
    sp = special_values(part)
    sp = sp[np.isfinite(sp.astype(np.float64))]
    re1 = np.concatenate([random_values(part, n, rng), rng.choice(sp, n)])
    im1 = np.concatenate([random_values(part, n, rng), rng.choice(sp, n)])
    re2 = np.concatenate([random_values(part, n, rng), rng.choice(sp, n)])
    im2 = np.concatenate([rng.choice(sp, n), random_values(part, n, rng)])
    dt = np.complex64 if name == "complex<f32>" else np.complex128
    a, b = np.empty(2 * n, dt), np.empty(2 * n, dt)
    a.real, a.imag, b.real, b.imag = re1, im1, re2, im2
    return part, a, b


@pytest.mark.parametrize("name", ["complex<f32>", "complex<f64>"])
def test_complex_add_subtract_negate_are_exact_per_part(name):
    part, a, b = _complex_operands(name, np.random.default_rng(SEED))
    for op, ref in (("add", ieee_add), ("subtract", ieee_sub)):
        got = ev(op, [a, b], name)
        assert got.dtype == a.dtype
        for p in ("real", "imag"):
            x = getattr(a, p).astype(np.float64).tolist()
            y = getattr(b, p).astype(np.float64).tolist()
            want = np.array([ref(u, v, part) for u, v in zip(x, y)])
            assert_same_float(getattr(got, p), want, (getattr(a, p), getattr(b, p)),
                              f"{op} on {name} ({p})")
    got = ev("negate", [a], name)
    assert_same_float(got.real, -a.real.astype(np.float64))
    assert_same_float(got.imag, -a.imag.astype(np.float64))


@pytest.mark.parametrize("name", ["complex<f32>", "complex<f64>"])
def test_complex_multiply_divide_normwise(name):
    from fractions import Fraction
    rng = np.random.default_rng(SEED)
    dt = np.complex64 if name == "complex<f32>" else np.complex128
    n = 3000
    parts = [np.ldexp(rng.uniform(-2, 2, n), rng.integers(-30, 30, n)) for _ in range(4)]
    a, b = np.empty(n, dt), np.empty(n, dt)
    a.real, a.imag, b.real, b.imag = parts
    eps = 2.0 ** (-23 if name == "complex<f32>" else -52)
    for op in ("multiply", "divide"):
        got = ev(op, [a, b], name)
        for g, x, y in zip(got.tolist(), a.tolist(), b.tolist()):
            xr, xi, yr, yi = (Fraction(v) for v in (x.real, x.imag, y.real, y.imag))
            if op == "multiply":
                er, ei = xr * yr - xi * yi, xr * yi + xi * yr
            else:
                d = yr * yr + yi * yi
                er, ei = (xr * yr + xi * yi) / d, (xi * yr - xr * yi) / d
            err2 = (Fraction(g.real) - er) ** 2 + (Fraction(g.imag) - ei) ** 2
            norm2 = er * er + ei * ei
            assert err2 <= (4 * eps) ** 2 * norm2, (op, x, y, g, complex(er, ei))


@pytest.mark.parametrize("name", ["complex<f32>", "complex<f64>"])
def test_complex_maximum_minimum_lexicographic(name):
    vals = [-np.inf, -2.0, -1.0, 0.0, 1.0, 2.0, np.inf]
    re, im = np.repeat(vals, len(vals)), np.tile(vals, len(vals))
    dt = np.complex64 if name == "complex<f32>" else np.complex128
    z = np.empty(re.size, dt)
    z.real, z.imag = re, im
    a, b = pairs(z)
    key = lambda c: (c.real, c.imag)  # noqa: E731
    mx = ev("maximum", [a, b], name).tolist()
    mn = ev("minimum", [a, b], name).tolist()
    assert mx == [max(x, y, key=key) for x, y in zip(a.tolist(), b.tolist())]
    assert mn == [min(x, y, key=key) for x, y in zip(a.tolist(), b.tolist())]
