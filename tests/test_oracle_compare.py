"""compare (FLOAT and TOTALORDER on floats, complex lexicographic), is_finite, select.

FLOAT: IEEE-754 quiet comparisons, checked exhaustively on all pairs of both fp8
formats and on bf16/f16/f32/f64 samples with every pair of special values: an
unordered pair (a NaN) makes every direction false except NE; -0 == +0.
TOTALORDER: IEEE-754 totalOrder, -NaN < -inf < -finite < -0 < +0 < +finite < +inf <
+NaN (NaNs by payload, reversed for negative ones). The reference ranks the values by
that classification, written here independently of any bit trick, and every direction
is checked on the ranks; EQ is "the same position in the total order" (the oracle's
documented reading: -0 != +0, a NaN equals only itself).
"""
from __future__ import annotations

import math
import operator
import os
import sys
from fractions import Fraction

import numpy as np
import pytest

# tests/ may or may not be a package: find the helper module either way
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_reference import (  # noqa: E402
    FORMATS, all_values, ev, pairs, random_values, special_values,
)

# NaN, infinity and overflow casts of special values are intended here.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DIRS = {"EQ": operator.eq, "NE": operator.ne, "GE": operator.ge, "GT": operator.gt,
        "LE": operator.le, "LT": operator.lt}
SEED = 3


def quiet_compare(direction, x, y):
    if math.isnan(x) or math.isnan(y):
        return direction == "NE"
    return DIRS[direction](x, y)


def _float_operands(name, rng):
    fmt = FORMATS[name]
    if fmt.bits == 8:
        return pairs(all_values(fmt))
    a, b = random_values(fmt, 20_000, rng), random_values(fmt, 20_000, rng)
    s1, s2 = pairs(special_values(fmt))
    # equal values and neighbours
    u = np.dtype(f"u{fmt.bits // 8}")
    near = (a.view(u) + rng.integers(-1, 2, size=a.size).astype(u)).view(fmt.dtype)
    return np.concatenate([a, a, s1]), np.concatenate([b, near, s2])


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"])
@pytest.mark.parametrize("direction", list(DIRS))
def test_compare_float_quiet(name, direction):
    a, b = _float_operands(name, np.random.default_rng(SEED))
    got = ev("compare", [a, b], "i1", {"comparison_direction": direction,
                                       "compare_type": "FLOAT"})
    want = [quiet_compare(direction, x, y) for x, y in
            zip(a.astype(np.float64).tolist(), b.astype(np.float64).tolist())]
    bad = np.flatnonzero(got != np.array(want))
    assert bad.size == 0, [(a[i], b[i], got[i]) for i in bad[:10]]


def total_order_rank_key(v: float, magnitude_bits: int):
    """A sort key for IEEE-754 totalOrder, from the value's class."""
    neg = math.copysign(1.0, v) < 0
    if math.isnan(v):
        # payload (quiet bit included) orders NaNs: greater payload is greater for
        # +NaN and lesser for -NaN
        return (0, -magnitude_bits) if neg else (8, magnitude_bits)
    if math.isinf(v):
        return (1, 0) if neg else (7, 0)
    if v == 0:
        return (3, 0) if neg else (4, 0)
    return (2, Fraction(v)) if neg else (5, Fraction(v))


def _ranks(x: np.ndarray, fmt) -> np.ndarray:
    u = np.dtype(f"u{fmt.bits // 8}")
    mags = (x.view(u).astype(np.uint64) & np.uint64((1 << (fmt.bits - 1)) - 1)).tolist()
    keys = [total_order_rank_key(v, m) for v, m in zip(x.astype(np.float64).tolist(), mags)]
    order = sorted(set(keys))
    index = {k: i for i, k in enumerate(order)}
    return np.array([index[k] for k in keys])


def _with_nans(fmt, x):
    u = np.dtype(f"u{fmt.bits // 8}")
    sign = 1 << (fmt.bits - 1)
    if fmt.name == "f8E4M3FN":
        nans = [0x7F, 0xFF]
    else:
        exp_all = ((1 << (fmt.bits - fmt.p)) - 1) << (fmt.p - 1)   # exponent field all ones
        mant = (1 << (fmt.p - 1)) - 1
        nans = [exp_all | 1, exp_all | (1 << (fmt.p - 2)), exp_all | mant, exp_all | 2]
        nans += [n | sign for n in nans]
    allv = np.concatenate([x.view(u), np.array(nans, dtype=np.uint64).astype(u)])
    return np.unique(allv).view(fmt.dtype)                  # distinct bit patterns


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"])
def test_compare_totalorder(name):
    fmt = FORMATS[name]
    rng = np.random.default_rng(SEED)
    if fmt.bits == 8:
        vals = all_values(fmt)
    else:
        vals = _with_nans(fmt, np.concatenate([random_values(fmt, 150, rng),
                                               special_values(fmt)]))
    ranks = _ranks(vals, fmt)
    a, b = pairs(vals)
    ra, rb = pairs(ranks)
    for direction, fn in DIRS.items():
        got = ev("compare", [a, b], "i1", {"comparison_direction": direction,
                                           "compare_type": "TOTALORDER"})
        want = fn(ra, rb)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (direction, [(a[i], b[i], got[i]) for i in bad[:10]])


@pytest.mark.parametrize("name", ["bf16", "f32"])
def test_totalorder_sorts_like_the_reference(name):
    """Sorting by "LT under TOTALORDER" (as a comparison function) gives the
    reference's order: -NaN < -inf < -finite < -0 < +0 < +finite < +inf < +NaN."""
    fmt = FORMATS[name]
    vals = _with_nans(fmt, special_values(fmt))
    a, b = pairs(vals)
    lt = ev("compare", [a, b], "i1", {"comparison_direction": "LT",
                                      "compare_type": "TOTALORDER"}).reshape(len(vals), -1)
    # the number of elements each one is greater than = its position in sorted order
    position = lt.sum(axis=0)
    assert sorted(position.tolist()) == list(range(len(vals))), "not a strict total order"
    expect = _ranks(vals, fmt)
    assert (position == expect).all()
    ordered = vals[np.argsort(position)].astype(np.float64)
    assert np.isnan(ordered[0]) and np.signbit(ordered[0])
    assert np.isnan(ordered[-1]) and not np.signbit(ordered[-1])
    finite = ordered[~np.isnan(ordered)]
    assert finite[0] == -np.inf and finite[-1] == np.inf
    zeros = np.flatnonzero(finite == 0)
    assert np.signbit(finite[zeros[0]]) and not np.signbit(finite[zeros[1]])


@pytest.mark.parametrize("name", ["complex<f32>", "complex<f64>"])
@pytest.mark.parametrize("direction", list(DIRS))
def test_compare_complex_lexicographic(name, direction):
    parts = [-np.inf, -1.5, -1.0, -0.0, 0.0, 1.0, 1.5, np.inf, np.nan]
    re, im = pairs(np.array(parts))
    z = (re + 0j).astype(np.complex128)
    z.imag = im
    z = z.astype(np.complex64 if name == "complex<f32>" else np.complex128)
    a, b = pairs(z)
    got = ev("compare", [a, b], "i1", {"comparison_direction": direction,
                                       "compare_type": "FLOAT"})

    def lex(x, y):
        if direction == "EQ":
            return x.real == y.real and x.imag == y.imag
        if direction == "NE":
            return not (x.real == y.real and x.imag == y.imag)
        strict = DIRS[{"GE": "GT", "LE": "LT"}.get(direction, direction)]
        return strict(x.real, y.real) or (x.real == y.real and DIRS[direction](x.imag, y.imag))
    want = [lex(complex(x), complex(y)) for x, y in zip(a.tolist(), b.tolist())]
    bad = np.flatnonzero(got != np.array(want))
    assert bad.size == 0, [(a[i], b[i], got[i]) for i in bad[:10]]


def test_compare_spec_example():
    got = ev("compare", [np.array([1.0, 3.0], np.float32), np.array([1.1, 2.9], np.float32)],
             "i1", {"comparison_direction": "LT", "compare_type": "FLOAT"})
    assert got.tolist() == [True, False]


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"])
def test_is_finite(name):
    fmt = FORMATS[name]
    x = all_values(fmt) if fmt.bits <= 16 else _with_nans(
        fmt, np.concatenate([random_values(fmt, 20_000, np.random.default_rng(SEED)),
                             special_values(fmt)]))
    got = ev("is_finite", [x], "i1")
    assert got.dtype == np.bool_
    assert got.tolist() == [math.isfinite(v) for v in x.astype(np.float64).tolist()]


def test_select():
    pred = np.array([True, False, True, False])
    on_t = np.array([1.0, -0.0, np.nan, 2.0], np.float32)
    on_f = np.array([-1.0, 0.0, 3.0, np.nan], np.float32)
    got = ev("select", [pred, on_t, on_f], "f32")
    assert np.signbit(got[1]) is np.False_ and got[0] == 1.0 and np.isnan(got[2])
    assert np.isnan(got[3])
    got = ev("select", [np.array(False), on_t, on_f], "f32")
    assert np.array_equal(got, on_f, equal_nan=True)
