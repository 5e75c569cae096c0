"""conformance.core.numerics.round_to against an exact integer rounding written here.

round_to is what makes every float result of the oracle correctly rounded, so it is
checked at the places where rounding is hard: every midpoint between neighbouring
values of bf16, f16 and both fp8 formats, values a hair (down to float64's last
bit) either side of each midpoint, the overflow threshold, the subnormal range and
signed zeros; for f32 a large sample of midpoints. The reference
(tests/oracle_reference.py) rounds on integers from each format's parameters and
never uses ml_dtypes' or numpy's float conversions.
"""
from __future__ import annotations

import math
import os
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.core.numerics import round_to

# tests/ may or may not be a package: find the helper module either way
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_reference import (  # noqa: E402
    FORMATS, SMALL_FLOATS, all_values, assert_same_float, round_f64_array, round_rational,
)

# NaN, infinity and overflow casts of special values are intended here.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

RNG_SEED = 20240613


def _positive_finite_sorted(fmt) -> np.ndarray:
    v = all_values(fmt).astype(np.float64)
    v = v[np.isfinite(v) & (v >= 0) & ~np.signbit(v)]
    return np.unique(v)


def _offsets_around(points: np.ndarray, ulps: np.ndarray) -> np.ndarray:
    """points, and points nudged by fractions of the local ulp down to float64's
    last bit, each way."""
    out = [points, np.nextafter(points, np.inf), np.nextafter(points, -np.inf),
           np.nextafter(np.nextafter(points, np.inf), np.inf)]
    for k in (2, 3, 5, 9, 13, 17, 20, 24, 25, 26, 29, 30, 31, 35, 40, 45):
        step = ulps * 2.0 ** -k
        out.append(points + step)
        out.append(points - step)
    return np.concatenate(out)


def _check(x: np.ndarray, name: str):
    fmt = FORMATS[name]
    x = np.concatenate([x, -x])
    got = round_to(x, name)
    assert got.dtype == fmt.dtype
    want = round_f64_array(x, fmt)
    assert_same_float(got, want, (x,), f"round_to(., {name})")


# ---------------------------------------------------------------------------
# The reference checks itself: vectorised rounding == scalar rational rounding.
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(FORMATS))
def test_reference_vectorised_matches_scalar_rounding(name):
    fmt = FORMATS[name]
    rng = np.random.default_rng(RNG_SEED)
    bits = rng.integers(0, 2 ** 63, size=3000, dtype=np.uint64)
    x = bits.view(np.float64)
    x = x[np.isfinite(x)]
    # and values within the format's range, where rounding is not trivial
    e = rng.integers(max(fmt.emin - fmt.p - 2, -1074), min(fmt.max_exp + 2, 1023), size=3000)
    y = np.ldexp(rng.uniform(1, 2, size=3000), e)
    x = np.concatenate([x, y, -y])
    vec = round_f64_array(x, fmt)
    scalar = np.array([round_rational(v < 0, *map(abs, Fraction(v).as_integer_ratio()), fmt)
                       for v in x.tolist()])
    assert_same_float(vec, scalar, (x,), "reference self-check")


def test_reference_known_values():
    bf16, e4, e5 = FORMATS["bf16"], FORMATS["f8E4M3FN"], FORMATS["f8E5M2"]
    r = lambda v, f: round_f64_array(np.array([v]), f)[0]  # noqa: E731
    assert r(1 + 2 ** -8 + 2 ** -40, bf16) == 1 + 2 ** -7
    assert r(1 + 2 ** -8, bf16) == 1.0
    assert r(464.0, e4) == 448.0 and math.isnan(r(464.00000000000006, e4))
    assert r(61440.0, e5) == math.inf and r(61439.99999999999, e5) == 57344.0


# ---------------------------------------------------------------------------
# round_to
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", SMALL_FLOATS)
def test_round_to_is_identity_on_every_value(name):
    fmt = FORMATS[name]
    vals = all_values(fmt)
    got = round_to(vals.astype(np.float64), name)
    nan = np.isnan(vals.astype(np.float64))
    assert np.isnan(got[nan].astype(np.float64)).all()
    # Bitwise identity for everything but NaN (signed zeros included).
    assert (got[~nan].view(np.uint8 if fmt.bits == 8 else np.uint16)
            == vals[~nan].view(np.uint8 if fmt.bits == 8 else np.uint16)).all()


@pytest.mark.parametrize("name", SMALL_FLOATS)
def test_round_to_every_midpoint_and_near_midpoint(name):
    fmt = FORMATS[name]
    v = _positive_finite_sorted(fmt)
    mids = (v[:-1] + v[1:]) / 2                          # exact in float64
    ulps = v[1:] - v[:-1]
    gaps = ulps
    # The overflow threshold: half an ulp above the largest finite value.
    top_ulp = fmt.ulp(fmt.max_finite)
    mids = np.append(mids, fmt.max_finite + top_ulp / 2)
    ulps = np.append(ulps, top_ulp)
    _check(_offsets_around(mids, ulps), name)
    # the representable values themselves, nudged
    _check(_offsets_around(v[1:], gaps), name)


@pytest.mark.parametrize("name", SMALL_FLOATS + ("f32",))
def test_round_to_random_float64(name):
    fmt = FORMATS[name]
    rng = np.random.default_rng(RNG_SEED)
    bits = rng.integers(0, 2 ** 63, size=200_000, dtype=np.uint64)
    x = bits.view(np.float64)                    # every exponent, incl. inf and NaN
    # and concentrated on the format's own range
    e = rng.integers(fmt.emin - fmt.p - 3, min(fmt.max_exp + 3, 1023), size=200_000)
    y = np.ldexp(rng.uniform(1, 2, size=200_000), e)
    _check(np.concatenate([x, y]), name)


def test_round_to_f32_midpoints_sample():
    fmt = FORMATS["f32"]
    rng = np.random.default_rng(RNG_SEED)
    bits = rng.integers(0, 0x7F800000, size=100_000, dtype=np.uint64).astype(np.uint32)
    # the whole subnormal range boundary and the overflow threshold, too
    bits = np.concatenate([bits, np.arange(0, 4096, dtype=np.uint32),
                           np.arange(0x00800000 - 2048, 0x00800000 + 2048, dtype=np.uint32),
                           np.arange(0x7F7FF000, 0x7F800000, dtype=np.uint32)])
    v = bits.view(np.float32).astype(np.float64)
    nxt = np.nextafter(bits.view(np.float32), np.float32(np.inf)).astype(np.float64)
    nxt = np.where(np.isinf(nxt), fmt.max_finite + fmt.ulp(fmt.max_finite), nxt)
    mids = (v + nxt) / 2
    _check(_offsets_around(mids, nxt - v), "f32")


def test_round_to_f64_is_identity():
    rng = np.random.default_rng(RNG_SEED)
    x = rng.integers(0, 2 ** 64 - 1, size=10_000, dtype=np.uint64).view(np.float64)
    got = round_to(x, "f64")
    assert_same_float(got, x, (x,), "round_to(., f64)")


@pytest.mark.parametrize("name", SMALL_FLOATS + ("f32",))
def test_round_to_subnormals_zero_and_specials(name):
    fmt = FORMATS[name]
    s = fmt.min_subnormal
    x = np.array([0.0, s / 2, s / 2 * (1 + 2 ** -40), s / 4, s * 1.5, s * 2.5, s * 3.5,
                  fmt.min_normal - s / 2, fmt.min_normal - s / 4, 1e-300, 5e-324,
                  np.inf, np.nan, 1e300, fmt.max_finite * 4])
    _check(x, name)
    got = round_to(np.array([-0.0, -s / 2, -5e-324, -s / 4]), name).astype(np.float64)
    assert (got == 0).all() and np.signbit(got).all(), "tiny negatives round to -0"
    got = round_to(np.array([np.inf, -np.inf, np.nan, 1e300, -1e300]), name).astype(np.float64)
    if fmt.has_inf:
        assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
        assert got[3] == np.inf and got[4] == -np.inf
    else:
        assert np.isnan(got).all(), "f8E4M3FN has no infinity: overflow gives NaN"


def test_round_to_double_rounding_cases():
    # Values that double-round through f32 (1 + 2**-8 + 2**-40 must go UP in bf16).
    cases = {
        "bf16": [(1 + 2 ** -8 + 2 ** -40, 1 + 2 ** -7), (1 + 2 ** -8 - 2 ** -40, 1.0),
                 (1 + 2 ** -8, 1.0), (1 + 3 * 2 ** -8, 1 + 2 ** -6)],
        "f8E4M3FN": [(464.0, 448.0), (1 + 2 ** -4 + 2 ** -50, 1 + 2 ** -3),
                     (2 ** -10, 0.0), (2 ** -10 + 2 ** -60, 2 ** -9)],
        "f8E5M2": [(61439.99999999999, 57344.0), (61440.0, np.inf),
                   (1 + 2 ** -3 + 2 ** -45, 1.25), (2 ** -17, 0.0),
                   (2 ** -17 * (1 + 2 ** -45), 2 ** -16)],
        "f16": [(1 + 2 ** -11 + 2 ** -50, 1 + 2 ** -10), (65520.0, np.inf),
                (65519.99999999999, 65504.0), (2 ** -25, 0.0),
                (2 ** -25 * (1 + 2 ** -52), 2 ** -24)],
    }
    for name, pairs in cases.items():
        x = np.array([p[0] for p in pairs])
        want = np.array([p[1] for p in pairs])
        assert_same_float(round_to(x, name), want, (x,), f"round_to(., {name})")
        assert_same_float(round_to(-x, name), -want, (-x,), f"round_to(., {name})")
    got = round_to(np.array([464.00000000000006]), "f8E4M3FN").astype(np.float64)
    assert np.isnan(got).all()


def test_round_to_complex_rounds_parts_independently():
    rng = np.random.default_rng(RNG_SEED)
    re = rng.integers(0, 2 ** 63, size=5000, dtype=np.uint64).view(np.float64)
    im = np.ldexp(rng.uniform(1, 2, 5000), rng.integers(-160, 140, 5000))
    z = re + 1j * im
    got = round_to(z, "complex<f32>")
    assert got.dtype == np.complex64
    assert_same_float(got.real, round_f64_array(re, FORMATS["f32"]), (re,), "real part")
    assert_same_float(got.imag, round_f64_array(im, FORMATS["f32"]), (im,), "imag part")
    got = round_to(z, "complex<f64>")
    assert_same_float(got.real, re, (re,), "real part f64")
    assert_same_float(got.imag, im, (im,), "imag part f64")


@settings(max_examples=300, deadline=None)
@given(x=st.floats(allow_nan=True, allow_infinity=True, width=64),
       name=st.sampled_from(list(FORMATS)))
def test_round_to_hypothesis_floats(x, name):
    # hypothesis' float strategy favours boundaries, subnormals and signed zeros
    a = np.array([x, -x, x * (1 + 2.0 ** -30), x / 3])
    got = round_to(a, name)
    assert_same_float(got, round_f64_array(a, FORMATS[name]), (a,), f"round_to(., {name})")
