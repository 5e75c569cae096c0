"""Floating-point helpers shared by the oracle and the comparators.

The one subtle piece is :func:`round_to`: ml_dtypes converts float64 to bf16 and
fp8 through float32, which double-rounds (1 + 2**-8 + 2**-40 becomes 1.0 in bf16
instead of 1 + 2**-7). We round float64 to float32 *to odd* first; a p-bit result
rounded from an odd-rounded value with at least p+2 bits is correctly rounded, so
the final float32 -> target step of ml_dtypes then gives round-to-nearest-even.
"""
from __future__ import annotations

from typing import Sequence

import ml_dtypes
import numpy as np

from conformance.core.types import ElementType, element_type


def to_wide(x: np.ndarray) -> np.ndarray:
    """Exact widening: floats to float64, complex to complex128, ints to int64/uint64."""
    x = np.asarray(x)
    et = element_type(x.dtype)
    if et.is_complex:
        return x.astype(np.complex128)
    if et.is_float:
        return x.astype(np.float64)
    if et.is_boolean:
        return x.astype(bool)
    return x.astype(np.uint64 if et.name == "ui64" else np.int64)


def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd (truncate, then set the last bit if inexact)."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        rd = r.astype(np.float64)
        finite = np.isfinite(x)
        # Truncate toward zero: step back where rounding went away from zero.
        away = finite & (np.abs(rd) > np.abs(x))
        r = np.where(away, np.nextafter(r, np.float32(0)), r)
        inexact = finite & (r.astype(np.float64) != x)
        bits = r.view(np.uint32) | np.where(inexact, np.uint32(1), np.uint32(0))
    return bits.view(np.float32)


def round_to(x: np.ndarray, et: "ElementType | str") -> np.ndarray:
    """Round float64 (or complex128) values to ``et`` with round-to-nearest-even."""
    et = element_type(et)
    if et.name in _DIRECT and type(x) is np.ndarray and x.dtype == np.float64:
        with np.errstate(over="ignore"):
            return x.astype(et.dtype)       # (the path below, without its copies)
    x = np.asarray(x)
    if et.is_complex:
        out = np.empty(x.shape, et.dtype)
        out.real = round_to(np.real(x).astype(np.float64), et.component)
        out.imag = round_to(np.imag(x).astype(np.float64), et.component)
        return out
    x = x.astype(np.float64)
    if et.name in ("f64", "f32", "f16"):
        with np.errstate(over="ignore"):
            return x.astype(et.dtype)   # numpy rounds these directly, correctly
    if not et.has_sign:
        return _round_e8m0(x, et)
    with np.errstate(over="ignore", invalid="ignore"):
        return _round_to_odd_f32(x).astype(et.dtype)


_DIRECT = frozenset(("f64", "f32", "f16"))


def _round_e8m0(x: np.ndarray, et: ElementType) -> np.ndarray:
    """float64 to f8E8M0FNU (powers of two 2**-127 ... 2**127, NaN 0xFF; no zero, no
    sign), to nearest, computed here: ml_dtypes rounds float32 subnormals up a binade
    (1.2 * 2**-127 becomes 2**-126). A tie (1.5 * 2**k) rounds up: with no stored
    mantissa bit both neighbours' significands are 1, odd, and LLVM's APFloat (MLIR,
    the interpreter), XLA and ml_dtypes all take the upper one.
    Positive values below 2**-127 round to 2**-127, the nearest value; zeros, negative
    values, NaN and values past the midpoint of 2**127 and 2**128 are NaN (the format has
    no zero and no sign: ml_dtypes' choice too)."""
    mant, exp = np.frexp(x)                  # x = mant * 2**exp, 0.5 <= |mant| < 1
    with np.errstate(invalid="ignore"):
        e = exp.astype(np.int64) - 1         # x = (2 * mant) * 2**e, 1 <= 2*mant < 2
        m2 = 2 * mant
        up = m2 >= 1.5
        biased = e + 127 + up.astype(np.int64)
        biased = np.where(biased < 0, 0, biased)
        nan = ~(x > 0) | ~np.isfinite(x) | (biased > 254)
        biased = np.where(nan, 255, biased)
    return biased.astype(np.uint8).view(et.dtype)


def is_subnormal(x: np.ndarray) -> np.ndarray:
    """Non-zero values below the smallest normal of their own type (complex: either part)."""
    x = np.asarray(x)
    et = element_type(x.dtype)
    if et.is_complex:
        comp = et.component.dtype
        return is_subnormal(x.real.astype(comp)) | is_subnormal(x.imag.astype(comp))
    if not et.is_float:
        return np.zeros(x.shape, bool)
    tiny = float(ml_dtypes.finfo(et.dtype).smallest_normal)
    with np.errstate(invalid="ignore"):
        w = np.abs(x.astype(np.float64))
    return (w > 0) & (w < tiny)


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """Replace subnormals by zeros of the same sign (what FTZ/DAZ hardware does)."""
    x = np.asarray(x)
    et = element_type(x.dtype)
    if et.is_complex:
        out = x.copy()
        out.real = flush_subnormals(x.real.astype(et.component.dtype))
        out.imag = flush_subnormals(x.imag.astype(et.component.dtype))
        return out
    if not et.is_float:
        return x
    sub = is_subnormal(x)
    if not sub.any():
        return x
    with np.errstate(invalid="ignore"):
        zeros = np.where(np.signbit(x.astype(np.float64)), -0.0, 0.0).astype(x.dtype)
    return np.where(sub, zeros, x)


def ordinal(x: np.ndarray) -> np.ndarray:
    """Map floats to int64 so that adjacent representable values differ by one.

    -0.0 and +0.0 both map to 0; NaN maps to a value the callers must mask out.
    This is the ULP distance scale used by the comparators.
    """
    x = np.asarray(x)
    et = element_type(x.dtype)
    bits = x.view(et.bits_dtype).astype(np.uint64)
    if not et.sign_bit:                    # f8E8M0FNU: the encoding is the order
        return bits.astype(np.int64)
    sign_bit = np.uint64(et.sign_bit)
    mag = (bits & (sign_bit - np.uint64(1))).astype(np.int64)
    # (FNUZ: the one -0 pattern is the NaN, which callers mask; -x and +x are 2*x apart
    # across the one zero, as they are across IEEE's two)
    return np.where((bits & sign_bit) != 0, -mag, mag)


def total_order_key(x: np.ndarray) -> np.ndarray:
    """int64 keys ordering floats as IEEE-754 totalOrder:
    -NaN < -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN (NaNs by payload).

    A NaN goes to the end its sign bit names: the FNUZ formats' one NaN is the -0 bit
    pattern, a NaN with its sign bit set, so it comes first (not where -0 would be);
    f8E8M0FNU has no sign bit, its encoding is the order and its NaN (0xFF) comes last.
    """
    x = np.asarray(x)
    et = element_type(x.dtype)
    bits = x.view(et.bits_dtype).astype(np.uint64)
    if not et.sign_bit:
        return bits.astype(np.int64)
    sign_bit = np.uint64(et.sign_bit)
    mag = (bits & (sign_bit - np.uint64(1))).astype(np.int64)
    key = np.where((bits & sign_bit) != 0, -mag - 1, mag)
    if et.is_float and not et.has_negative_zero and et.has_nan:
        key = np.where(bits == sign_bit, -np.int64(sign_bit) - 1, key)   # FNUZ NaN first
    return key


def eps(et: "ElementType | str") -> float:
    et = element_type(et).component
    return float(ml_dtypes.finfo(et.dtype).eps)


def element_bits(x: np.ndarray) -> np.ndarray:
    """Each element's bytes along a new last axis."""
    x = np.ascontiguousarray(x)
    return x.view(np.uint8).reshape(x.shape + (x.dtype.itemsize,))


def same_bits_or_nan(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per element: the same bits, or both NaN (any NaN equals any NaN); False everywhere
    where the arrays differ in shape or type."""
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype:
        return np.zeros(np.broadcast_shapes(x.shape, y.shape), bool)
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    with np.errstate(invalid="ignore"):
        both_nan = np.isnan(x.astype(wide)) & np.isnan(y.astype(wide)) \
            if (element_type(x.dtype).is_float or element_type(x.dtype).is_complex) \
            else np.zeros(x.shape, bool)
    return (element_bits(x) == element_bits(y)).all(axis=-1) | both_nan


def permuted_within_groups(arrays: Sequence[np.ndarray], labels: np.ndarray
                           ) -> list[np.ndarray]:
    """``arrays`` (of one shape) with the elements of each group (same label > 0) put
    in one canonical order: sorted by their bytes in all the arrays together, and placed
    back at the group's positions in index order. Two sets of results that hold the same
    tuples of values in a group, in any order, become equal."""
    arrays = [np.asarray(a) for a in arrays]
    shape = arrays[0].shape
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return arrays
    flat_labels = np.broadcast_to(np.asarray(labels), shape).reshape(-1)
    group = np.where(flat_labels > 0, flat_labels, -1 - np.arange(n))  # others: alone
    flats = [np.ascontiguousarray(a.reshape(-1)) for a in arrays]
    keys = [col for f in flats for col in f.view(np.uint8).reshape(n, -1).T]
    by_value = np.lexsort(keys + [group])            # grouped, then by bytes
    by_position = np.argsort(group, kind="stable")   # grouped, then by index
    out = []
    for f in flats:
        g = f.copy()
        g[by_position] = f[by_value]
        out.append(g.reshape(shape))
    return out


def precision_type(name: str) -> tuple[int, float, float]:
    """(precision p in bits, smallest subnormal, largest finite) of a precision type name:
    an element type's, or tf32's (TensorFloat32: f32's exponent range, 10 stored
    mantissa bits)."""
    if name == "tf32":
        return 11, 2.0 ** -136, float(np.finfo(np.float32).max)
    info = ml_dtypes.finfo(element_type(name).component.dtype)
    return int(info.nmant) + 1, float(info.smallest_subnormal), float(info.max)
