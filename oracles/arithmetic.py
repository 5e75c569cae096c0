"""abs, add, subtract, multiply, divide, remainder, negate, power, maximum, minimum,
sign, clamp — each as its section of the StableHLO spec says, per element type.

Integer results wrap modulo 2^bits (two's complement). Where the spec makes an
integer result implementation-defined (overflow, division by zero, INT_MIN / -1,
negative exponents), the value returned here is the conventional one XLA uses and
the spec YAML's ``implementation_defined`` rules mask it: x / 0 = -1 (all bits
set), x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0, and for a negative
exponent 1**n = 1, (-1)**n = ±1, otherwise 0.
"""
from __future__ import annotations

import numpy as np

from conformance.core.types import TensorType

from .registry import register
from ._kernels import (U64, as_u64, etype, float_map, int_values, maximum, minimum, wrap)


def _bin(inputs, out: TensorType):
    a, b = np.broadcast_arrays(*inputs)
    return a, b, out.element_type


@register("add")
def add(inputs, attrs, types):
    a, b, et = _bin(inputs, types[0])
    if et.is_boolean:
        return (a | b).reshape(types[0].shape)
    if et.is_integer:
        return wrap(as_u64(a) + as_u64(b), et, types[0].shape)
    return float_map(np.add, types[0], a, b)


@register("subtract")
def subtract(inputs, attrs, types):
    a, b, et = _bin(inputs, types[0])
    if et.is_integer:
        return wrap(as_u64(a) - as_u64(b), et, types[0].shape)
    return float_map(np.subtract, types[0], a, b)


@register("multiply")
def multiply(inputs, attrs, types):
    a, b, et = _bin(inputs, types[0])
    if et.is_boolean:
        return (a & b).reshape(types[0].shape)
    if et.is_integer:
        return wrap(as_u64(a) * as_u64(b), et, types[0].shape)
    return float_map(np.multiply, types[0], a, b)


def _int_divmod(a: np.ndarray, b: np.ndarray, et) -> tuple[np.ndarray, np.ndarray]:
    """Truncating division and its remainder, with the conventional values where the
    spec leaves them implementation-defined."""
    x, y = int_values(a), int_values(b)
    zero = y == 0
    safe_y = np.where(zero, 1, y).astype(x.dtype)
    if et.is_signed:
        overflow = (x == et.int_min) & (y == -1)
        safe_y = np.where(overflow, 1, safe_y)
        q = np.floor_divide(x, safe_y)
        r = x - q * safe_y
        fix = (r != 0) & ((x < 0) != (safe_y < 0))
        q = q + fix
        r = x - q * safe_y
        q = np.where(overflow, et.int_min, q)
        r = np.where(overflow, 0, r)
    else:
        q = x // safe_y
        r = x - q * safe_y
    q = np.where(zero, -1 if et.is_signed else et.int_max, q)
    r = np.where(zero, x, r)
    return q, r


@register("divide")
def divide(inputs, attrs, types):
    a, b, et = _bin(inputs, types[0])
    if et.is_integer:
        q, _ = _int_divmod(a, b, et)
        return wrap(q.astype(np.int64).view(U64) if et.is_signed else q.astype(U64), et,
                    types[0].shape)
    return float_map(np.divide, types[0], a, b)


@register("remainder")
def remainder(inputs, attrs, types):
    a, b, et = _bin(inputs, types[0])
    if et.is_integer:
        _, r = _int_divmod(a, b, et)
        return wrap(r.astype(np.int64).view(U64) if et.is_signed else r.astype(U64), et,
                    types[0].shape)
    if et.is_complex:
        # TBD in the spec (#997); masked by the spec YAML. Conventional: NaN.
        return np.full(types[0].shape, complex(np.nan, np.nan), et.dtype)
    # lhs - trunc(lhs / rhs) * rhs, computed exactly: C fmod.
    return float_map(np.fmod, types[0], a, b)


@register("negate")
def negate(inputs, attrs, types):
    (x,), et = inputs, types[0].element_type
    if et.is_integer:
        return wrap(U64(0) - as_u64(x), et, types[0].shape)
    return float_map(np.negative, types[0], x)


@register("abs")
def abs_(inputs, attrs, types):
    (x,), et = inputs, etype(inputs[0])
    if et.is_integer:
        u = as_u64(x)
        return wrap(np.where(int_values(x) < 0, U64(0) - u, u), et, types[0].shape)
    return float_map(np.abs, types[0], x)


def _int_power(a: np.ndarray, b: np.ndarray, et) -> np.ndarray:
    """a ** b by squaring, wrapping modulo 2^64 (then 2^bits); conventional values
    for negative exponents."""
    base = as_u64(a).copy()
    e = int_values(b)
    neg = (e < 0) if et.is_signed else np.zeros(e.shape, bool)
    e = np.where(neg, 0, e).astype(U64)
    result = np.ones(base.shape, U64)
    while np.any(e):
        odd = (e & U64(1)) == U64(1)
        result = np.where(odd, result * base, result)
        base = base * base
        e = e >> U64(1)
    if et.is_signed:
        x = int_values(a)
        odd_exp = (int_values(b) % 2) != 0
        conventional = np.where(x == 1, 1, np.where(x == -1, np.where(odd_exp, -1, 1), 0))
        result = np.where(neg, conventional.astype(np.int64).view(U64), result)
    return result


@register("power")
def power(inputs, attrs, types):
    a, b, et = _bin(inputs, types[0])
    if et.is_integer:
        return wrap(_int_power(a, b, et), et, types[0].shape)
    return float_map(np.power, types[0], a, b)


@register("maximum")
def maximum_(inputs, attrs, types):
    return maximum(inputs[0], inputs[1], types[0])


@register("minimum")
def minimum_(inputs, attrs, types):
    return minimum(inputs[0], inputs[1], types[0])


@register("clamp")
def clamp(inputs, attrs, types):
    lo, x, hi = inputs
    lo, x, hi = np.broadcast_arrays(lo, x, hi)
    return minimum(maximum(x, lo, types[0]), hi, types[0])


def _float_sign(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, x))   # ±0 and NaN pass through


def _complex_sign(z: np.ndarray) -> np.ndarray:
    """z / |z|, scaled first so that subnormal z does not overflow; NaN stays NaN.
    sign(0) is masked by the spec YAML (0 / 0); the conventional value is 0."""
    nan = np.isnan(z.real) | np.isnan(z.imag)
    scale = np.maximum(np.abs(z.real), np.abs(z.imag))
    safe = np.where(scale > 0, scale, 1.0)
    # Part by part: numpy's complex / complex division overflows for a subnormal
    # divisor (and is not correctly rounded); a real divisor divides each part once.
    re, im = z.real / safe, z.imag / safe
    a = np.hypot(re, im)
    r = np.empty(np.shape(z), np.complex128)
    r.real, r.imag = re / a, im / a
    r = np.where(scale == 0, z, r)
    return np.where(nan, complex(np.nan, np.nan), r)


@register("sign")
def sign(inputs, attrs, types):
    (x,), et = inputs, types[0].element_type
    if et.is_integer:
        return np.sign(int_values(x)).astype(et.dtype).reshape(types[0].shape)
    if et.is_complex:
        return float_map(_complex_sign, types[0], x)
    return float_map(_float_sign, types[0], x)
