"""Transcendental ops of the oracle against mpmath at 200 bits.

Real: exponential, exponential_minus_one, log, log_plus_one, sine, cosine, tan, tanh,
logistic, cbrt, rsqrt, atan2, power. The oracle evaluates in float64 and rounds once,
so for fp8, bf16, f16 and f32 its result must be the correctly rounded value except
where the exact value lies within 2**-20 ulp of a rounding boundary (float64's own
error can tip those); for f64 it must be within 2 ulp. Special operands (zeros,
infinities, NaN, domain errors, overflow, underflow) follow IEEE-754's
recommended-operation rules (9.2), written out here as tables (C99 Annex F for pow and
atan2).

Complex (complex<f32>, complex<f64>): the same functions and power, atan2, abs, sign
checked against mpmath's principal branches within a normwise relative error
|got - exact| / |exact| of a few eps of the part type, on finite operands whose
results are finite (non-finite ones are implementation-defined in the spec YAML).
"""
from __future__ import annotations

import math
import os
import sys

import mpmath
import numpy as np
import pytest

# tests/ may or may not be a package: find the helper module either way
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_reference import (  # noqa: E402
    FORMATS, INF, NAN, all_values, ev, random_values, round_mpf, special_values,
)

# NaN, infinity and overflow casts of special values are intended here.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

mp = mpmath.mp
PREC = 200
SEED = 23
UNARY = ["exponential", "exponential_minus_one", "log", "log_plus_one", "sine", "cosine",
         "tan", "tanh", "logistic", "cbrt", "rsqrt"]
FLOATS = ["f8E4M3FN", "f8E5M2", "bf16", "f16", "f32", "f64"]


def M(v: float):
    return mpmath.mpf(v)


def _real_cbrt(x):
    return mpmath.cbrt(x) if x >= 0 else -mpmath.cbrt(-x)


# Exact (mpmath) functions for finite operands inside the domain, and the IEEE-754
# results for the special operands: a float (exact result) or None (use mpmath).
def unary_reference(op: str, v: float):
    """A Python float for special cases, else an mpf (the exact value to 200 bits)."""
    neg = math.copysign(1.0, v) < 0
    if math.isnan(v):
        return NAN
    if op == "exponential":
        if math.isinf(v):
            return 0.0 if neg else INF
        if v > 1000:
            return INF
        if v < -1000:
            return 0.0
        return mpmath.exp(M(v))
    if op == "exponential_minus_one":
        if math.isinf(v):
            return -1.0 if neg else INF
        if v == 0:
            return v
        if v > 1000:
            return INF
        if v < -1000:
            return -1.0
        return mpmath.expm1(M(v))
    if op == "log":
        if v == 0:
            return -INF
        if v < 0:
            return NAN
        if math.isinf(v):
            return INF
        return mpmath.log(M(v))
    if op == "log_plus_one":
        if v == 0:
            return v
        if v == -1:
            return -INF
        if v < -1:
            return NAN
        if math.isinf(v):
            return INF
        return mpmath.log1p(M(v))
    if op in ("sine", "tan"):
        if math.isinf(v):
            return NAN
        if v == 0:
            return v
        return (mpmath.sin if op == "sine" else mpmath.tan)(M(v))
    if op == "cosine":
        if math.isinf(v):
            return NAN
        return mpmath.cos(M(v))
    if op == "tanh":
        if math.isinf(v) or abs(v) > 1000:
            return -1.0 if neg else 1.0
        if v == 0:
            return v
        return mpmath.tanh(M(v))
    if op == "logistic":
        if math.isinf(v) or v > 1000:
            return 0.0 if neg else 1.0
        if v < -1000:
            return 0.0
        return 1 / (1 + mpmath.exp(-M(v)))
    if op == "cbrt":
        if math.isinf(v) or v == 0:
            return v
        return _real_cbrt(M(v))
    if op == "rsqrt":
        if v == 0:
            return -INF if neg else INF
        if v < 0:
            return NAN
        if math.isinf(v):
            return 0.0
        return 1 / mpmath.sqrt(M(v))
    raise KeyError(op)


def atan2_reference(y: float, x: float):
    if math.isnan(y) or math.isnan(x):
        return NAN
    sy = -1 if math.copysign(1.0, y) < 0 else 1
    pi = mpmath.pi
    x_neg = math.copysign(1.0, x) < 0
    if y == 0:
        return sy * pi if x_neg else math.copysign(0.0, y)
    if x == 0:
        return sy * pi / 2
    if math.isinf(y):
        if math.isinf(x):
            return sy * (3 * pi / 4 if x < 0 else pi / 4)
        return sy * pi / 2
    if math.isinf(x):
        return sy * pi if x < 0 else math.copysign(0.0, y)
    return mpmath.atan2(M(y), M(x))


def _is_odd_integer(y: float) -> bool:
    return math.isfinite(y) and y == math.floor(y) and abs(y) < 2 ** 53 and int(y) % 2 == 1


def pow_reference(x: float, y: float):
    """IEEE-754 pow (9.2.1) / C99 F.9.4.4."""
    if y == 0:
        return 1.0
    if x == 1:
        return 1.0
    if math.isnan(x) or math.isnan(y):
        return NAN
    x_neg = math.copysign(1.0, x) < 0
    odd = _is_odd_integer(y)
    if x == 0:
        if y < 0:
            return -INF if (x_neg and odd) else INF
        return -0.0 if (x_neg and odd) else 0.0
    if math.isinf(y):
        if x == -1:
            return 1.0
        if (abs(x) < 1) == (y < 0):
            return INF
        return 0.0
    if math.isinf(x):
        if x < 0:
            if y < 0:
                return -0.0 if odd else 0.0
            return -INF if odd else INF
        return 0.0 if y < 0 else INF
    if x < 0 and y != math.floor(y):
        return NAN
    sign = -1 if (x < 0 and odd) else 1
    t = y * math.log2(abs(x))
    if t > 5000:
        return sign * INF
    if t < -5000:
        return math.copysign(0.0, sign)
    return sign * mpmath.power(M(abs(x)), M(y))


def _ext(v: float, fmt) -> float:
    """A rounded value on the extended line: overflow (inf, or NaN for f8E4M3FN)
    as the value one ulp beyond the largest finite value."""
    if math.isinf(v) or math.isnan(v):
        top = fmt.max_finite + fmt.ulp(fmt.max_finite)
        return -top if v < 0 else top
    return v


def check_against_exact(op, name, operands, got, refs):
    fmt = FORMATS[name]
    bad = []
    worst = 0.0
    g_all = got.astype(np.float64).tolist()
    for i, (g, ref) in enumerate(zip(g_all, refs)):
        if isinstance(ref, float):                                   # special: exact
            if not ((math.isnan(g) and math.isnan(ref)) or
                    (g == ref and math.copysign(1, g) == math.copysign(1, ref))):
                want = round_mpf(M(ref), fmt) if math.isfinite(ref) else \
                    (ref if fmt.has_inf else NAN)               # f8E4M3FN: no infinity
                if not ((math.isnan(g) and math.isnan(want)) or
                        (g == want and math.copysign(1, g) == math.copysign(1, want))):
                    bad.append((i, g, ref))
            continue
        cr = round_mpf(ref, fmt)
        if (g == cr and math.copysign(1, g) == math.copysign(1, cr)) or \
                (math.isnan(g) and math.isnan(cr)):
            continue
        if math.isnan(g) and fmt.has_inf:
            bad.append((i, g, float(ref)))
            continue
        ge, ce = _ext(g, fmt), _ext(cr, fmt)
        if cr == 0 and g == 0:
            bad.append((i, g, float(ref)))                          # wrong sign of zero
            continue
        ulp = fmt.ulp(min(abs(ce), fmt.max_finite)) if ce != 0 else fmt.min_subnormal
        if name == "f64":
            err = float(abs(M(ge) - ref) / M(ulp))
            worst = max(worst, err)
            if err > 2.0:
                bad.append((i, g, float(ref)))
        else:
            # one ulp off, and only because the exact value is within 2**-20 ulp of the
            # boundary between the two
            mid = (M(ge) + M(ce)) / 2
            if abs(ge - ce) > ulp * 1.0000001 or abs(ref - mid) > M(ulp) * 2.0 ** -20:
                bad.append((i, g, float(ref)))
    if bad:
        rows = []
        for i, g, r in bad[:12]:
            args = ", ".join(repr(float(x[i])) for x in operands)
            rows.append(f"  {op}({args}) = {g!r}; exact {r!r}")
        raise AssertionError(f"{op} on {name}: {len(bad)} of {len(refs)} wrong:\n"
                             + "\n".join(rows))
    return worst


def unary_operands(op, name, rng):
    fmt = FORMATS[name]
    if fmt.bits == 8:
        return all_values(fmt)
    n = {16: 700, 32: 600, 64: 600}[fmt.bits]
    parts = [random_values(fmt, n, rng), special_values(fmt)]
    moderate = np.ldexp(rng.uniform(1, 2, n), rng.integers(-12, 8, n)) * \
        rng.choice([-1.0, 1.0], n)
    parts.append(moderate.astype(fmt.dtype))
    extra = {"exponential": [rng.uniform(-760, 720, 200)],
             "exponential_minus_one": [rng.uniform(-40, 720, 100), rng.uniform(-1e-3, 1e-3, 100)],
             "log": [1 + rng.uniform(-1e-3, 1e-3, 200)],
             "log_plus_one": [rng.uniform(-1e-4, 1e-4, 100), -1 + rng.uniform(0, 1e-3, 100)],
             "sine": [rng.uniform(-1e6, 1e6, 100), np.round(rng.uniform(-1e4, 1e4, 100)) * np.pi],
             "cosine": [rng.uniform(-1e6, 1e6, 100),
                        (np.round(rng.uniform(-1e4, 1e4, 100)) + 0.5) * np.pi],
             "tan": [rng.uniform(-1e6, 1e6, 100),
                     (np.round(rng.uniform(-1e4, 1e4, 100)) + 0.5) * np.pi],
             "tanh": [rng.uniform(-25, 25, 200), rng.uniform(-1e-4, 1e-4, 50)],
             "logistic": [rng.uniform(-760, 40, 200)],
             "cbrt": [rng.uniform(-1e3, 1e3, 100) ** 3],
             "rsqrt": [np.ldexp(1.0, rng.integers(-1000, 1000, 100))]}[op]
    with np.errstate(all="ignore"):
        parts += [np.asarray(e, np.float64).astype(fmt.dtype) for e in extra]
    return np.concatenate(parts)


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("op", UNARY)
def test_unary_transcendental_real(op, name):
    mp.prec = PREC
    x = unary_operands(op, name, np.random.default_rng(SEED))
    got = ev(op, [x], name)
    assert got.dtype == FORMATS[name].dtype
    refs = [unary_reference(op, v) for v in x.astype(np.float64).tolist()]
    check_against_exact(op, name, [x], got, refs)


def binary_operands(name, rng, domain):
    fmt = FORMATS[name]
    n = {8: 3000, 16: 1500, 32: 1000, 64: 1000}[fmt.bits]
    sp = special_values(fmt)
    a, b = np.repeat(sp, len(sp)), np.tile(sp, len(sp))
    r1, r2 = random_values(fmt, n, rng), random_values(fmt, n, rng)
    m1 = np.ldexp(rng.uniform(1, 2, n), rng.integers(-8, 8, n)) * rng.choice([-1.0, 1.0], n)
    if domain == "power":
        m2 = np.concatenate([rng.uniform(-12, 12, n // 2), np.round(rng.uniform(-20, 20, n // 2))])
    else:
        m2 = np.ldexp(rng.uniform(1, 2, n), rng.integers(-8, 8, n)) * rng.choice([-1.0, 1.0], n)
    m1, m2 = m1.astype(fmt.dtype), m2.astype(fmt.dtype)
    return np.concatenate([a, r1, m1, m1]), np.concatenate([b, r2, m2, r2])


@pytest.mark.parametrize("name", FLOATS)
def test_atan2_real(name):
    mp.prec = PREC
    y, x = binary_operands(name, np.random.default_rng(SEED), "atan2")
    got = ev("atan2", [y, x], name)
    refs = [atan2_reference(a, b) for a, b in zip(y.astype(np.float64).tolist(),
                                                  x.astype(np.float64).tolist())]
    refs = [r if isinstance(r, float) else r for r in refs]
    check_against_exact("atan2", name, [y, x], got, refs)


@pytest.mark.parametrize("name", FLOATS)
def test_power_real(name):
    mp.prec = PREC
    x, y = binary_operands(name, np.random.default_rng(SEED), "power")
    got = ev("power", [x, y], name)
    refs = [pow_reference(a, b) for a, b in zip(x.astype(np.float64).tolist(),
                                                y.astype(np.float64).tolist())]
    check_against_exact("power", name, [x, y], got, refs)


def test_spec_examples_transcendental():
    got = ev("atan2", [np.array([0.0, 1.0, -1.0], np.float32), np.zeros(3, np.float32)], "f32")
    assert got.tolist() == [0.0, np.float32(np.pi / 2), -np.float32(np.pi / 2)]
    got = ev("cbrt", [np.array([0.0, 1.0, 8.0, 27.0], np.float32)], "f32")
    assert got.tolist() == [0.0, 1.0, 2.0, 3.0]
    x = np.array([-2.0, -0.0, -36.0, 5.0, 3.0, 10000.0])
    y = np.array([2.0, 2.0, 1.1, 2.0, -1.0, 10.0])
    got = ev("power", [x, y], "f64")
    assert got[0] == 4.0 and got[1] == 0.0 and not np.signbit(got[1]) and np.isnan(got[2])
    assert got[3] == 25.0 and got[4] == 1 / 3 and got[5] == 1e40
    got = ev("power", [x.astype(np.float32), y.astype(np.float32)], "f32")
    assert got[4] == np.float32(1 / 3) and got[5] == np.inf


# ---------------------------------------------------------------------------
# Complex
# ---------------------------------------------------------------------------

def _c_atan2(y, x):
    return -1j * mpmath.log((x + 1j * y) / mpmath.sqrt(x * x + y * y))


COMPLEX_UNARY = {
    "exponential": mpmath.exp, "exponential_minus_one": mpmath.expm1, "log": mpmath.log,
    "log_plus_one": mpmath.log1p, "sine": mpmath.sin, "cosine": mpmath.cos,
    "tan": mpmath.tan, "tanh": mpmath.tanh, "sqrt": mpmath.sqrt,
    "rsqrt": lambda z: 1 / mpmath.sqrt(z), "cbrt": lambda z: mpmath.exp(mpmath.log(z) / 3),
    "logistic": lambda z: 1 / (1 + mpmath.exp(-z)),
}
# normwise relative error bound, in eps of the part type
COMPLEX_BOUND = {"complex<f32>": 2.0, "complex<f64>": 8.0}


def complex_operands(name, rng, n=500, small=False):
    part = np.float32 if name == "complex<f32>" else np.float64
    out = []
    for scale in ((-3, 3), (-12, 2)) if not small else ((-3, 2),):
        re = np.ldexp(rng.uniform(1, 2, n), rng.integers(*scale, n)) * rng.choice([-1, 1], n)
        im = np.ldexp(rng.uniform(1, 2, n), rng.integers(*scale, n)) * rng.choice([-1, 1], n)
        out.append((re + 1j * im))
    # on the axes, near 1 and near -1
    t = rng.uniform(-2, 2, 50)
    out += [t + 0j, 1j * t, 1 + 1e-3 * (t + 1j * t[::-1]), -1 + 1e-3 * (t + 1j * t[::-1])]
    z = np.concatenate(out)
    c = np.empty(z.shape, np.complex64 if part is np.float32 else np.complex128)
    c.real, c.imag = z.real.astype(part), z.imag.astype(part)
    return c


def check_complex(op, name, operands, got, refs, condition=None):
    """``condition``: per element, the extra error (in eps) that the function's own
    sensitivity to a rounding of its operands allows (power: |w| (1 + |log z|))."""
    eps = FORMATS["f32" if name == "complex<f32>" else "f64"].ulp(1.0)
    bad = []
    for i, (g, r) in enumerate(zip(got.tolist(), refs)):
        if r is None:
            continue
        bound = (COMPLEX_BOUND[name] + (condition[i] if condition is not None else 0)) * eps
        if not (math.isfinite(g.real) and math.isfinite(g.imag)):
            bad.append((i, g, complex(r), float("inf")))
            continue
        err = abs(mpmath.mpc(g) - r) / abs(r) if r != 0 else abs(mpmath.mpc(g))
        if err > bound:
            bad.append((i, g, complex(r), float(err / eps)))
    if bad:
        rows = []
        for i, g, r, e in bad[:12]:
            args = ", ".join(repr(complex(x[i])) for x in operands)
            rows.append(f"  {op}({args}) = {g!r}; exact {r!r} ({e:.3g} eps)")
        raise AssertionError(f"{op} on {name}: {len(bad)} of {len(refs)} beyond "
                             f"{COMPLEX_BOUND[name]} eps (+ condition):\n" + "\n".join(rows))


def _finite_ref(fn, *args):
    try:
        r = fn(*args)
    except (ZeroDivisionError, ValueError):
        return None
    r = mpmath.mpc(r)
    big = mpmath.mpf(2) ** 120
    if not (mpmath.isfinite(r.real) and mpmath.isfinite(r.imag)) or abs(r) > big:
        return None                                            # out of range: not checked
    return r


@pytest.mark.parametrize("name", ["complex<f32>", "complex<f64>"])
@pytest.mark.parametrize("op", list(COMPLEX_UNARY))
def test_unary_transcendental_complex(op, name):
    mp.prec = PREC
    z = complex_operands(name, np.random.default_rng(SEED))
    got = ev(op, [z], name)
    assert got.dtype == z.dtype
    refs = [_finite_ref(COMPLEX_UNARY[op], mpmath.mpc(c)) for c in z.tolist()]
    check_complex(op, name, [z], got, refs)


@pytest.mark.parametrize("name", ["complex<f32>", "complex<f64>"])
def test_power_and_atan2_complex(name):
    mp.prec = PREC
    rng = np.random.default_rng(SEED)
    a = complex_operands(name, rng, n=300, small=True)
    b = complex_operands(name, rng, n=300, small=True)
    got = ev("power", [a, b], name)
    refs = [_finite_ref(mpmath.power, mpmath.mpc(x), mpmath.mpc(y))
            if x != 0 else None for x, y in zip(a.tolist(), b.tolist())]
    # z**w = exp(w log z) is as sensitive to the last bit of w as |w log z| and to the
    # last bit of z as |w|: a float64 evaluation cannot do better than that.
    cond = [abs(y) * (1 + abs(np.log(x))) if x != 0 else 0 for x, y in
            zip(a.astype(np.complex128).tolist(), b.astype(np.complex128).tolist())]
    check_complex("power", name, [a, b], got, refs, cond if name == "complex<f64>" else None)
    got = ev("atan2", [a, b], name)
    refs = [_finite_ref(_c_atan2, mpmath.mpc(y), mpmath.mpc(x))
            for y, x in zip(a.tolist(), b.tolist())]
    check_complex("atan2", name, [a, b], got, refs)


@pytest.mark.parametrize("name", ["complex<f32>", "complex<f64>"])
def test_abs_and_sign_complex(name):
    mp.prec = PREC
    part = "f32" if name == "complex<f32>" else "f64"
    fmt = FORMATS[part]
    z = complex_operands(name, np.random.default_rng(SEED))
    # extreme magnitudes too: |z| must neither overflow nor underflow on the way
    big, tiny = fmt.max_finite / 2, fmt.min_subnormal * 8
    z = np.concatenate([z, np.array([complex(big, big), complex(-big, big / 3),
                                     complex(tiny, tiny), complex(tiny, -3 * tiny)], z.dtype)])
    got = ev("abs", [z], part)
    assert got.dtype == fmt.dtype
    refs = [mpmath.sqrt(mpmath.mpf(c.real) ** 2 + mpmath.mpf(c.imag) ** 2) for c in z.tolist()]
    check_against_exact("abs", part, [z], got, refs)
    got = ev("sign", [z], name)
    refs = [mpmath.mpc(c) / abs(mpmath.mpc(c)) for c in z.tolist()]
    check_complex("sign", name, [z], got, refs)
    # NaN parts give NaN
    nz = np.array([complex(np.nan, 1), complex(1, np.nan)], z.dtype)
    s = ev("sign", [nz], name)
    assert np.isnan(s.real).all() and np.isnan(s.imag).all()


def _c(re, im, dtype=np.complex128):
    out = np.empty(np.shape(re), dtype)
    out.real, out.imag = re, im
    return out


def test_complex_cbrt_far_from_unit_modulus():
    # exp(log(z) / 3) loses ~|log|z|| / 3 eps; the cube root must not.
    mp.prec = PREC
    rng = np.random.default_rng(SEED)
    n = 300
    e = rng.integers(-1070, 1020, n)
    re = np.ldexp(rng.uniform(1, 2, n), e) * rng.choice([-1, 1], n)
    im = np.ldexp(rng.uniform(1, 2, n), e + rng.integers(-30, 30, n)) * rng.choice([-1, 1], n)
    z = _c(re, im)
    # (mpmath has no -0: keep off the branch cut, where the sign of a zero imaginary
    # part picks the side; signed zeros are checked below)
    z = z[np.isfinite(z.real) & np.isfinite(z.imag) & (z.imag != 0)]
    got = ev("cbrt", [z], "complex<f64>")
    refs = [_finite_ref(COMPLEX_UNARY["cbrt"], mpmath.mpc(c)) for c in z.tolist()]
    check_complex("cbrt", "complex<f64>", [z], got, refs)
    # signed zeros: the principal root of -0 - 0i is +0 - 0i (exp(log(z) / 3))
    got = ev("cbrt", [_c(np.array([-0.0, 0.0, -8.0]), np.array([-0.0, 0.0, -0.0]))],
             "complex<f64>")
    assert np.signbit(got.imag).tolist() == [True, False, True]
    assert not np.signbit(got.real[:2]).any()


def test_complex_atan2_small_ratio_and_scaling():
    # atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)) is homogeneous of degree 0 in
    # (x, y), and is about y / x when |y| << |x|: log near 1 must not cancel.
    mp.prec = PREC
    rng = np.random.default_rng(SEED)
    n = 300
    x = _c(rng.uniform(-4, 4, n), rng.uniform(-4, 4, n))
    ratio = np.ldexp(1.0, rng.integers(-40, -3, n))
    y = _c(rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)) * ratio
    got = ev("atan2", [y, x], "complex<f64>")
    refs = [_finite_ref(_c_atan2, mpmath.mpc(a), mpmath.mpc(b))
            for a, b in zip(y.tolist(), x.tolist())]
    check_complex("atan2", "complex<f64>", [y, x], got, refs)
    for k in (-900, -500, 500, 900):              # scaled by 2**k: the same result, bit for bit
        ys = _c(np.ldexp(y.real, k), np.ldexp(y.imag, k))
        xs = _c(np.ldexp(x.real, k), np.ldexp(x.imag, k))
        normal = (np.abs(np.concatenate([ys.real, ys.imag, xs.real, xs.imag]))
                  >= 2.0 ** -1022).reshape(4, n).all(axis=0)
        scaled = ev("atan2", [ys, xs], "complex<f64>")
        assert np.array_equal(scaled[normal], got[normal]), k
