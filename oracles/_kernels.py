"""Building blocks the oracle families share: wide evaluation with correct rounding,
two's-complement integer arithmetic on bit patterns, IEEE maximum/minimum."""
from __future__ import annotations

from typing import Callable

import numpy as np

from conformance.core.literals import bit_patterns, from_bit_patterns
from conformance.core.numerics import round_to, to_wide
from conformance.core.types import ElementType, TensorType, element_type

U64 = np.uint64


def etype(x: np.ndarray) -> ElementType:
    return element_type(x.dtype)


def float_map(fn: Callable[..., np.ndarray], out: TensorType, *xs: np.ndarray) -> np.ndarray:
    """Evaluate ``fn`` on float64/complex128 widenings of ``xs``, correctly rounded to ``out``."""
    wide = [to_wide(x) for x in xs]
    with np.errstate(all="ignore"):
        r = fn(*wide)
    return round_to(np.asarray(r), out.element_type).reshape(out.shape)


# ---------------------------------------------------------------------------
# Integers as two's-complement bit patterns in uint64.
# ---------------------------------------------------------------------------

def mask_of(et: ElementType) -> np.uint64:
    return U64((1 << et.bits) - 1) if et.bits < 64 else U64(0xFFFFFFFFFFFFFFFF)


def as_u64(x: np.ndarray) -> np.ndarray:
    """Integers (or booleans) as uint64 holding their value mod 2^64 (sign-extended)."""
    et = etype(x)
    if et.is_signed:
        return x.astype(np.int64).view(U64)
    return x.astype(U64)


def wrap(u: np.ndarray, et: ElementType, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """uint64 values reduced modulo 2^bits and reinterpreted as ``et``."""
    r = from_bit_patterns(np.asarray(u, U64) & mask_of(et), et)
    return r.reshape(shape) if shape is not None else r


def unsigned_bits(x: np.ndarray) -> np.ndarray:
    """The element's own bit pattern (not sign-extended), as uint64."""
    return bit_patterns(x)


def sign_extend(bits: np.ndarray, nbits: int) -> np.ndarray:
    """Bit patterns of width ``nbits`` read as signed integers (int64)."""
    bits = np.asarray(bits, U64)
    if nbits == 64:
        return bits.view(np.int64)
    sign = U64(1 << (nbits - 1))
    return (bits ^ sign).astype(np.int64) - np.int64(1 << (nbits - 1))


def int_values(x: np.ndarray) -> np.ndarray:
    """Exact integer values: int64, or uint64 for ui64."""
    return to_wide(x)


# ---------------------------------------------------------------------------
# IEEE-754 maximum / minimum (NaN-propagating, -0 < +0) and lexicographic complex.
# ---------------------------------------------------------------------------

def _pick_nan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(a), a, b)


def ieee_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.where(a > b, a, b)
    zeros = (a == b) & (a == 0)
    r = np.where(zeros, np.where(np.signbit(a), b, a), r)
    return np.where(np.isnan(a) | np.isnan(b), _pick_nan(a, b), r)


def ieee_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.where(a < b, a, b)
    zeros = (a == b) & (a == 0)
    r = np.where(zeros, np.where(np.signbit(a), a, b), r)
    return np.where(np.isnan(a) | np.isnan(b), _pick_nan(a, b), r)


def lex_greater(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(re, im) lexicographic a > b for complex arrays."""
    return (a.real > b.real) | ((a.real == b.real) & (a.imag > b.imag))


def maximum(a: np.ndarray, b: np.ndarray, out: TensorType) -> np.ndarray:
    """The spec's maximum on any element type (booleans: OR)."""
    et = out.element_type
    a, b = np.broadcast_arrays(a, b)
    if et.is_boolean:
        return (a | b).reshape(out.shape)
    if et.is_integer:
        return np.maximum(int_values(a), int_values(b)).astype(et.dtype).reshape(out.shape)
    if et.is_complex:
        return np.where(lex_greater(b, a), b, a).astype(et.dtype).reshape(out.shape)
    return float_map(ieee_max, out, a, b)


def minimum(a: np.ndarray, b: np.ndarray, out: TensorType) -> np.ndarray:
    """The spec's minimum on any element type (booleans: AND)."""
    et = out.element_type
    a, b = np.broadcast_arrays(a, b)
    if et.is_boolean:
        return (a & b).reshape(out.shape)
    if et.is_integer:
        return np.minimum(int_values(a), int_values(b)).astype(et.dtype).reshape(out.shape)
    if et.is_complex:
        return np.where(lex_greater(a, b), b, a).astype(et.dtype).reshape(out.shape)
    return float_map(ieee_min, out, a, b)
