"""An independent, exact reference for checking the numpy oracle.

Nothing here calls the oracle, ``conformance.core.numerics`` or ml_dtypes' rounding:
float formats are described by their parameters (precision, exponent range, largest
finite value, what overflow gives), values are handled as exact rationals
(Python integers), and rounding to nearest, ties to even, is done on integers.

Values of every format travel as Python floats / float64 arrays: each of the
formats here (fp8, bf16, f16, f32, f64) is a subset of float64, so converting a
correctly rounded value to float64 and back to its own dtype is exact.
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import ml_dtypes
import numpy as np

NAN = float("nan")
INF = float("inf")


@dataclasses.dataclass(frozen=True)
class Fmt:
    name: str
    p: int              # precision in bits, hidden bit included
    emin: int           # exponent of the smallest normal: 2**emin
    max_finite: float   # the largest finite value
    has_inf: bool       # overflow gives inf (else NaN: f8E4M3FN)
    dtype: np.dtype
    bits: int

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, self.emin - self.p + 1)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def max_exp(self) -> int:
        return math.frexp(self.max_finite)[1] - 1

    def ulp(self, v: float) -> float:
        """The quantum (spacing) of the format at |v| (finite)."""
        v = abs(v)
        e = self.emin if v < self.min_normal else math.frexp(v)[1] - 1
        return math.ldexp(1.0, e - self.p + 1)


FORMATS = {
    "f8E4M3FN": Fmt("f8E4M3FN", 4, -6, 448.0, False, np.dtype(ml_dtypes.float8_e4m3fn), 8),
    "f8E5M2": Fmt("f8E5M2", 3, -14, 57344.0, True, np.dtype(ml_dtypes.float8_e5m2), 8),
    "bf16": Fmt("bf16", 8, -126, math.ldexp(2 - 2 ** -7, 127), True,
                np.dtype(ml_dtypes.bfloat16), 16),
    "f16": Fmt("f16", 11, -14, 65504.0, True, np.dtype(np.float16), 16),
    "f32": Fmt("f32", 24, -126, math.ldexp(2 - 2 ** -23, 127), True, np.dtype(np.float32), 32),
    "f64": Fmt("f64", 53, -1022, math.ldexp(2 - 2 ** -52, 1023), True, np.dtype(np.float64), 64),
}
SMALL_FLOATS = ("f8E4M3FN", "f8E5M2", "bf16", "f16")
ALL_FLOATS = SMALL_FLOATS + ("f32", "f64")
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


# ---------------------------------------------------------------------------
# Exact rounding
# ---------------------------------------------------------------------------

def _overflow(fmt: Fmt, negative: bool) -> float:
    if not fmt.has_inf:
        return NAN
    return -INF if negative else INF


def round_rational(negative: bool, n: int, d: int, fmt: Fmt) -> float:
    """(-1)^negative * n/d (n >= 0, d > 0 integers) rounded to nearest, ties to even,
    with IEEE overflow (unbounded-exponent rounding, then > max finite => overflow)
    and gradual underflow. A zero result keeps ``negative`` as its sign."""
    if n == 0:
        return -0.0 if negative else 0.0
    # e = floor(log2(n/d))
    e = n.bit_length() - d.bit_length()
    if (n << -e if e < 0 else n) < (d << e if e > 0 else d):
        e -= 1
    q = max(e, fmt.emin) - fmt.p + 1          # exponent of the quantum
    if q >= 0:
        num, den = n, d << q
    else:
        num, den = n << -q, d
    m, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and m & 1):
        m += 1
    # m * 2**q with m <= 2**p. At or above 2**(max_exp + 1) it is certainly beyond the
    # largest finite value; below that, float64 holds it exactly.
    if q + m.bit_length() - 1 > fmt.max_exp:
        return _overflow(fmt, negative)
    v = math.ldexp(float(m), q)
    if v > fmt.max_finite:
        return _overflow(fmt, negative)
    return -v if negative else v


def round_fraction(x: Fraction, fmt: Fmt, negative_zero: bool = False) -> float:
    if x == 0:
        return -0.0 if negative_zero else 0.0
    return round_rational(x < 0, abs(x.numerator), x.denominator, fmt)


def round_mpf(x, fmt: Fmt) -> float:
    """An mpmath real (mpf, exact dyadic) rounded to ``fmt``."""
    import mpmath
    if mpmath.isnan(x):
        return NAN
    if mpmath.isinf(x):
        return _overflow(fmt, x < 0) if fmt.has_inf else NAN
    if x == 0:
        return 0.0
    sign, man, exp, _ = x._mpf_
    man = int(man)
    if exp >= 0:
        return round_rational(bool(sign), man << exp, 1, fmt)
    return round_rational(bool(sign), man, 1 << -exp, fmt)


def round_f64_array(x: np.ndarray, fmt: Fmt) -> np.ndarray:
    """Vectorised exact rounding of float64 values to ``fmt``, on integers: each
    finite x is M * 2**E with a 53-bit integer M; the kept bits and the remainder
    decide the rounding. Returns float64 values of the format (NaN for NaN)."""
    x = np.asarray(x, np.float64)
    a = np.abs(x)
    finite = np.isfinite(x)
    nonzero = finite & (a != 0)
    safe = np.where(nonzero, a, 1.0)
    frac, e = np.frexp(safe)                      # safe = frac * 2**e, frac in [0.5, 1)
    M = np.ldexp(frac, 53).astype(np.int64)       # exact 53-bit integer
    E = e.astype(np.int64) - 53
    q = np.maximum(e.astype(np.int64) - 1, fmt.emin) - fmt.p + 1
    s = q - E                                     # how many low bits go
    s_pos = np.clip(s, 0, 62)
    keep = M >> s_pos
    rem = M & ((np.int64(1) << s_pos) - 1)
    half = np.where(s_pos > 0, np.int64(1) << np.maximum(s_pos - 1, 0), 0)
    up = (s_pos > 0) & ((rem > half) | ((rem == half) & ((keep & 1) == 1)))
    kept = np.where(s > 0, keep + up, M)
    expo = np.where(s > 0, q, E)
    with np.errstate(over="ignore"):
        mag = np.ldexp(kept.astype(np.float64), expo.astype(np.int32))
    over = mag > fmt.max_finite
    mag = np.where(over, np.inf if fmt.has_inf else np.nan, mag)
    mag = np.where(nonzero, mag, a)                       # zeros, inf, NaN unchanged
    if not fmt.has_inf:
        mag = np.where(np.isinf(a), np.nan, mag)
    return np.copysign(mag, x)


# ---------------------------------------------------------------------------
# Format contents
# ---------------------------------------------------------------------------

def all_values(fmt: Fmt) -> np.ndarray:
    """Every bit pattern of an 8- or 16-bit format, as an array of that dtype."""
    assert fmt.bits in (8, 16)
    return np.arange(1 << fmt.bits, dtype=np.uint64).astype(UINT[fmt.bits]).view(fmt.dtype)


def random_values(fmt: Fmt, n: int, rng: np.random.Generator) -> np.ndarray:
    bits = rng.integers(0, 1 << fmt.bits, size=n, dtype=np.uint64) if fmt.bits < 64 else \
        rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
    return bits.astype(UINT[fmt.bits]).view(fmt.dtype)


def special_values(fmt: Fmt) -> np.ndarray:
    """Signed zeros, infinities, NaN, sub/normal boundaries, +-1 and neighbours."""
    vals = [0.0, fmt.min_subnormal, 2 * fmt.min_subnormal, fmt.min_normal - fmt.min_subnormal,
            fmt.min_normal, fmt.min_normal + fmt.ulp(fmt.min_normal), 0.5, 1.0,
            1.0 + fmt.ulp(1.0), 1.0 - fmt.ulp(0.75), 1.5, 2.0, 3.0, 10.0,
            fmt.max_finite, fmt.max_finite - fmt.ulp(fmt.max_finite), NAN]
    if fmt.has_inf:
        vals.append(INF)
    vals = vals + [-v for v in vals]
    return np.array(vals, np.float64).astype(fmt.dtype)


# ---------------------------------------------------------------------------
# IEEE-754 operations, exactly, on Python floats
# ---------------------------------------------------------------------------

def _ratio(x: float) -> tuple[bool, int, int]:
    n, d = x.as_integer_ratio()
    return n < 0, abs(n), d


def ieee_add(x: float, y: float, fmt: Fmt) -> float:
    if math.isnan(x) or math.isnan(y):
        return NAN
    if math.isinf(x) or math.isinf(y):
        if math.isinf(x) and math.isinf(y) and (x > 0) != (y > 0):
            return NAN
        return x if math.isinf(x) else y
    if x == 0 and y == 0:
        both_neg = math.copysign(1, x) < 0 and math.copysign(1, y) < 0
        return -0.0 if both_neg else 0.0
    sx, nx, dx = _ratio(x)
    sy, ny, dy = _ratio(y)
    num = (-nx if sx else nx) * dy + (-ny if sy else ny) * dx
    if num == 0:
        return 0.0                               # x + (-x) = +0 in round-to-nearest
    return round_rational(num < 0, abs(num), dx * dy, fmt)


def ieee_sub(x: float, y: float, fmt: Fmt) -> float:
    return ieee_add(x, -y, fmt)


def _sign(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def ieee_mul(x: float, y: float, fmt: Fmt) -> float:
    if math.isnan(x) or math.isnan(y):
        return NAN
    neg = _sign(x) != _sign(y)
    if math.isinf(x) or math.isinf(y):
        if x == 0 or y == 0:
            return NAN
        return _overflow_inf(neg)
    if x == 0 or y == 0:
        return -0.0 if neg else 0.0
    _, nx, dx = _ratio(x)
    _, ny, dy = _ratio(y)
    return round_rational(neg, nx * ny, dx * dy, fmt)


def _overflow_inf(neg: bool) -> float:
    return -INF if neg else INF


def ieee_div(x: float, y: float, fmt: Fmt) -> float:
    if math.isnan(x) or math.isnan(y):
        return NAN
    neg = _sign(x) != _sign(y)
    if math.isinf(x):
        return NAN if math.isinf(y) else _overflow_inf(neg)
    if math.isinf(y):
        return -0.0 if neg else 0.0
    if y == 0:       # division by zero: infinity, which f8E4M3FN spells NaN
        return NAN if x == 0 else _overflow(fmt, neg)
    if x == 0:
        return -0.0 if neg else 0.0
    _, nx, dx = _ratio(x)
    _, ny, dy = _ratio(y)
    return round_rational(neg, nx * dy, dx * ny, fmt)


def ieee_sqrt(x: float, fmt: Fmt) -> float:
    if math.isnan(x) or x < 0:
        return NAN
    if x == 0 or math.isinf(x):
        return x
    _, n, d = _ratio(x)
    # sqrt(n/d) = sqrt(n * d) / d; scale by 4**k so the integer root has p + 8 bits.
    k = max(0, fmt.p + 8 - ((n * d).bit_length() // 2) + 1)
    big = (n * d) << (2 * k)
    s = math.isqrt(big)
    if s * s == big:
        return round_rational(False, s, d << k, fmt)
    # Inexact: the true root lies strictly inside (s, s+1); (2s+1)/2 stands for it
    # (no rounding boundary falls strictly inside that interval at this scale).
    return round_rational(False, 2 * s + 1, d << (k + 1), fmt)


def c_fmod(x: float, y: float) -> float:
    """x - trunc(x / y) * y, exactly: the spec's float remainder (sign of the dividend)."""
    if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0:
        return NAN
    if math.isinf(y) or x == 0:
        return x
    fx, fy = Fraction(x), Fraction(y)
    q = fx / fy
    t = math.floor(q) if q >= 0 else math.ceil(q)
    r = fx - t * fy
    return float(r) if r != 0 else math.copysign(0.0, x)


# ---------------------------------------------------------------------------
# Comparing results
# ---------------------------------------------------------------------------

def same_float(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Element-wise: equal values with equal signs, or both NaN (any payload)."""
    g = np.asarray(got).astype(np.float64)
    w = np.asarray(want, np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    return both_nan | ((g == w) & (np.signbit(g) == np.signbit(w)))


def assert_same_float(got, want, inputs=(), what=""):
    ok = same_float(got, want)
    if not ok.all():
        idx = np.flatnonzero(~np.asarray(ok).reshape(-1))
        lines = []
        g = np.asarray(got).astype(np.float64).reshape(-1)
        w = np.asarray(want, np.float64).reshape(-1)
        flat_inputs = [np.asarray(x).astype(np.float64).reshape(-1)
                       if np.asarray(x).dtype.kind not in "iub" else np.asarray(x).reshape(-1)
                       for x in inputs]
        for i in idx[:10]:
            args = ", ".join(repr(x[i].item() if hasattr(x[i], "item") else x[i])
                             for x in flat_inputs)
            lines.append(f"  ({args}) -> got {g[i]!r}, want {w[i]!r}")
        raise AssertionError(f"{what}: {len(idx)} of {ok.size} differ:\n" + "\n".join(lines))


# ---------------------------------------------------------------------------
# Calling the oracle
# ---------------------------------------------------------------------------

def ttype(shape, et: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + et + ">"


def ev(op: str, inputs, out_et: str, attrs=None, shape=None):
    """The oracle's one result of ``op`` with result element type ``out_et``."""
    from conformance import oracles
    inputs = [np.asarray(x) for x in inputs]
    if shape is None:
        shape = np.broadcast_shapes(*(x.shape for x in inputs))
    (r,) = oracles.evaluate(op, inputs, attrs or {}, result_types=[ttype(shape, out_et)])
    return r


def pairs(a: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every (a[i], b[j]) pair, flattened."""
    b = a if b is None else b
    return np.repeat(a, len(b)), np.tile(b, len(a))
