"""atan2, cbrt, cosine, sine, tan, tanh, exponential, exponential_minus_one, log,
log_plus_one, logistic, rsqrt, sqrt, and XLA's erf.

Float results are computed in float64 and rounded to the result type: correctly
rounded for sqrt (IEEE squareRoot is exact, and float64 is wide enough for every
narrower type) and within about an ulp of float64 elsewhere; the spec YAML's ULP
bounds hold the backends to those. Complex results use complex128 with the forms
below where the textbook formula loses accuracy near zero:

- expm1(x+iy) = (expm1(x) cos y - 2 sin^2(y/2)) + i e^x sin y
- log1p(z) = log|1+z| + i arg(1+z), with log|1+z| = log1p(2x + x^2 + y^2) / 2
- complex atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)) (principal branches)
- complex cbrt: the principal cube root exp(log(z) / 3) = cbrt(|z|) e^(i arg(z) / 3)
"""
from __future__ import annotations

import numpy as np

from .registry import register
from ._kernels import float_map


def _expm1(z: np.ndarray) -> np.ndarray:
    if not np.iscomplexobj(z):
        return np.expm1(z)
    x, y = z.real, z.imag
    re = np.expm1(x) * np.cos(y) - 2.0 * np.sin(y / 2.0) ** 2
    im = np.exp(x) * np.sin(y)
    # y == 0 keeps the real-axis value exact and the imaginary part a signed zero.
    re = np.where(y == 0, np.expm1(x), re)
    return re + 1j * im


def _log1p(z: np.ndarray) -> np.ndarray:
    if not np.iscomplexobj(z):
        return np.log1p(z)
    x, y = z.real, z.imag
    re = 0.5 * np.log1p(2.0 * x + x * x + y * y)
    big = np.abs(x) + np.abs(y) > 0.5
    re = np.where(big, np.log(np.abs(1.0 + z)), re)
    return re + 1j * np.arctan2(y, 1.0 + x)


def _logistic(x: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(x):
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a * b = p + e exactly (Dekker; operands of moderate magnitude)."""
    def split(v):
        c = 134217729.0 * v
        hi = c - (c - v)
        return hi, v - hi
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _real_cbrt(x: np.ndarray) -> np.ndarray:
    """cbrt to within about half an ulp of float64: libm's cbrt is up to 3 ulp off
    (glibc documents 3), so one Newton step with the residual y^3 - m computed in
    double-double follows it, on m in [0.5, 4) with x = m * 2**(3k)."""
    y0 = np.cbrt(x)
    ok = np.isfinite(x) & (x != 0)
    f, e = np.frexp(np.where(ok, np.abs(x), 1.0))
    k, r = np.divmod(e, 3)
    m = np.ldexp(f, r)                                   # |x| = m * 2**(3k), m in [0.5, 4)
    y = np.cbrt(m)
    p1, e1 = _two_product(y, y)
    p2, e2 = _two_product(y, p1)
    residual = (p2 - m) + (e2 + y * e1)                  # p2 - m is exact (Sterbenz)
    y = y - residual / (3.0 * p1)
    return np.where(ok, np.copysign(np.ldexp(y, k), x), y0)


def _cbrt(z: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(z):
        # exp(log(z) / 3) in polar form: exp(log|z| / 3) loses ~|log|z|| / 3 eps far
        # from |z| = 1, cbrt(|z|) does not. z is scaled by 2**(-3k) first so that |z|
        # is not rounded to a subnormal (or overflows).
        s = np.maximum(np.abs(z.real), np.abs(z.imag))
        _, e = np.frexp(np.where(np.isfinite(s) & (s > 0), s, 1.0))
        k = e // 3
        r = _real_cbrt(np.hypot(np.ldexp(z.real, -3 * k), np.ldexp(z.imag, -3 * k)))
        theta = np.arctan2(z.imag, z.real) / 3.0
        r, sin = np.ldexp(r, k), np.sin(theta)
        # part by part, so that zeros keep their signs (and inf * 0 does not make NaN)
        out = np.empty(np.shape(z), np.complex128)
        out.real = r * np.cos(theta)
        out.imag = np.where(sin == 0, sin, r * sin)
        return out
    return _real_cbrt(z)


def _atan2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(y):
        # The formula is homogeneous of degree 0 in (x, y): scale both by one power of
        # two first, so that x*x + y*y neither overflows nor underflows.
        s = np.maximum(np.maximum(np.abs(x.real), np.abs(x.imag)),
                       np.maximum(np.abs(y.real), np.abs(y.imag)))
        _, e = np.frexp(np.where(np.isfinite(s) & (s > 0), s, 1.0))

        def scaled(v):
            out = np.empty(np.shape(v), np.complex128)
            out.real, out.imag = np.ldexp(v.real, -e), np.ldexp(v.imag, -e)
            return out
        x, y = scaled(x), scaled(y)
        t = x + 1j * y
        r = np.sqrt(x * x + y * y)
        w = t / r
        # Near w = 1 (|y| << |x|) log(w) cancels: there use log1p(w - 1), with
        # w - 1 = (t - r) / r = 2iy t / ((t + r) r) free of cancellation.
        u = 2j * y * t / ((t + r) * r)
        near_one = np.abs(w - 1.0) < 0.5
        return -1j * np.where(near_one, _log1p(np.where(near_one, u, 0)), np.log(w))
    return np.arctan2(y, x)


_UNARY = {
    "cbrt": _cbrt, "cosine": np.cos, "sine": np.sin, "tan": np.tan, "tanh": np.tanh,
    "exponential": np.exp, "exponential_minus_one": _expm1, "log": np.log,
    "log_plus_one": _log1p, "logistic": _logistic, "rsqrt": _rsqrt, "sqrt": np.sqrt,
}

for _op, _fn in _UNARY.items():
    register(_op)(lambda inputs, attrs, types, _fn=_fn: float_map(_fn, types[0], inputs[0]))


def _erf_f64(x: np.ndarray) -> np.ndarray:
    """erf at 80 bits (mpmath), for f64 results: float64's own erf is not more accurate
    than the backend under test. Element by element, but only f64 cases come here."""
    import mpmath

    def one(v: float) -> float:
        if v == 0 or np.isnan(v):
            return v                        # +-0 and NaN unchanged
        if np.isinf(v):
            return float(np.sign(v))
        return float(mpmath.erf(mpmath.mpf(float(v))))
    with mpmath.workprec(80):
        return np.asarray(np.frompyfunc(one, 1, 1)(x), np.float64)


@register("erf")
def erf(inputs, attrs, types):
    """float64 erf rounded once for types up to f32 (its error is far below their half
    ULP); 80-bit mpmath for f64. erf is odd, so erf(-0) = -0 (kept by both)."""
    from scipy.special import erf as erf64
    fn = _erf_f64 if types[0].element_type.name == "f64" else erf64
    return float_map(fn, types[0], inputs[0])


@register("atan2")
def atan2(inputs, attrs, types):
    y, x = np.broadcast_arrays(*inputs)
    return float_map(_atan2, types[0], y, x)
