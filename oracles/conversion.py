"""convert, bitcast_convert, reduce_precision.

convert: where the spec defines the result (exactly representable values, booleans,
truncation toward zero for floats to integers) it is computed exactly. Where it is
implementation-defined or TBD, the conventional value returned (and masked by the
YAML) is: integer overflow wraps; inexact values round to nearest even;
out-of-range floats saturate to the integer type's bounds and NaN becomes 0 (XLA's
choice); complex to boolean reads the real part only.

bitcast_convert: elements' bits are laid out little-endian when widths differ (the
spec's example: 1.0f32 -> [0, 0, -128, 63] as si8), complex values as real part
then imaginary part.

reduce_precision: XLA's bit-level algorithm, which is the spec's description: round the
value's mantissa to ``mantissa_bits`` with ties to even, then overflow to infinity or
underflow to zero (sign kept) outside the normal range of an ``exponent_bits``
exponent; where ``exponent_bits`` is wider than the operand type's, on float64's encoding,
so that the mantissa rounded is the value's (a subnormal of the operand's type is a normal
number of the other type) and not a subnormal's stored bits. NaN, read to the letter of the spec
("conversion of operand to another floating-point type that uses exponent_bits and
mantissa_bits and back", then the three steps, then the example):

- ``mantissa_bits >= 1``: the NaN itself, payload and sign unchanged, even where the
  payload lies entirely in bits that step 2 truncates. The other type has NaNs, and
  the spec's example keeps ``0x7FFFFFFF`` at ``mantissa_bits = 2`` bit for bit, which
  the steps read on a NaN's bits cannot give (step 2 would truncate the payload and
  step 3 would overflow the all-ones exponent to infinity): the steps are about
  numbers.
- ``mantissa_bits = 0``: infinity with the NaN's sign. A type without mantissa bits
  has no NaN (an all-ones exponent with no mantissa is infinity), so the conversion
  cannot keep one, and the steps say what becomes of it: step 2 truncates every
  mantissa bit, leaving the encoding of infinity, and step 3 "overflows to infinity
  using the original sign". (XLA on CPU keeps the NaN; XLA's LLVM emitter and the
  StableHLO interpreter give +infinity whatever the sign.)
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.literals import bit_patterns, from_bit_patterns
from conformance.core.numerics import round_to, to_wide
from conformance.core.types import ElementType, element_type

from conformance.specs.expressions import alternative

from .registry import register
from ._kernels import U64, as_u64, wrap


def _to_integer(x: np.ndarray, src: ElementType, dst: ElementType) -> np.ndarray:
    if src.is_complex:
        return _to_integer(x.real.astype(src.component.dtype), src.component, dst)
    if src.is_boolean:
        return x.astype(dst.dtype)
    if src.is_integer:
        return wrap(as_u64(x), dst)
    f = np.trunc(x.astype(np.float64))
    lo, hi = float(dst.int_min), float(dst.int_max)
    in_range = (f >= lo) & (f < hi + 1.0)
    safe = np.where(in_range, f, 0.0)
    exact = safe.astype(np.uint64 if dst.name == "ui64" else np.int64)
    if dst.name == "ui64":
        big = np.full(f.shape, dst.int_max, np.uint64)
        small = np.zeros(f.shape, np.uint64)
    else:
        big = np.full(f.shape, dst.int_max, np.int64)
        small = np.full(f.shape, dst.int_min, np.int64)
    r = np.where(in_range, exact, np.where(np.isnan(f), 0, np.where(f > 0, big, small)))
    return r.astype(dst.dtype)


def _int64_to_f64_round_to_odd(x: np.ndarray, src: ElementType) -> np.ndarray:
    """si64/ui64 to float64 rounded to odd (float64 may be inexact above 2**53): a
    later round-to-nearest-even to a type of at most 51 bits of precision is then
    correct, where rounding to nearest twice would not be."""
    wide = x.astype(np.uint64 if src.name == "ui64" else np.int64)
    f = wide.astype(np.float64)
    top = f >= (2.0 ** 64 if src.name == "ui64" else 2.0 ** 63)   # not an integer of wide's type
    back = np.where(top, 0, f).astype(wide.dtype)
    below = top | (wide < back)          # the exact value lies below f
    above = ~top & (wide > back)
    even = (f.view(np.uint64) & np.uint64(1)) == 0
    step = (below | above) & even        # inexact with an even last bit: take the odd neighbour
    return np.where(step, np.nextafter(f, np.where(below, -np.inf, np.inf)), f)


def _to_float(x: np.ndarray, src: ElementType, dst: ElementType) -> np.ndarray:
    if src.is_complex:
        return _to_float(x.real.astype(src.component.dtype), src.component, dst)
    if src.is_integer and dst.name in ("f32", "f64"):
        return x.astype(np.uint64 if src.name == "ui64" else np.int64).astype(dst.dtype)
    if src.is_integer and src.bits == 64:
        return round_to(_int64_to_f64_round_to_odd(x, src), dst)
    return round_to(to_wide(x).astype(np.float64), dst)


@register("convert")
def convert(inputs, attrs, types):
    (x,), out = inputs, types[0]
    src, dst = element_type(x.dtype), out.element_type
    if dst.is_boolean:
        if src.is_complex:
            # "The source imaginary value is ignored" (complex-to-X); where that and
            # "any non-zero value is true" disagree the spec YAML masks the element.
            r = x.real != 0
        else:
            r = to_wide(x) != 0
    elif dst.is_integer:
        r = _to_integer(x, src, dst)
    elif dst.is_float:
        r = _to_float(x, src, dst)
    else:
        comp = dst.component
        r = np.empty(x.shape, dst.dtype)
        if src.is_complex:
            r.real = round_to(x.real.astype(np.float64), comp)
            r.imag = round_to(x.imag.astype(np.float64), comp)
        else:
            r.real = _to_float(x, src, comp)
            r.imag = 0
    return np.asarray(r).astype(dst.dtype).reshape(out.shape)


# ---------------------------------------------------------------------------
# convert: what an inexact conversion to a float type may give (specs/ops/convert.yaml)
# ---------------------------------------------------------------------------

def _exact_order(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per element: sign(r - x) of the exact values (x: an integer or float array, r: a
    float array of the same shape; 0 where either is NaN)."""
    et = element_type(x.dtype)
    rw = r.astype(np.float64)
    if et.is_integer and et.bits == 64:
        # Python compares an int with a float exactly.
        cmp = np.frompyfunc(lambda a, b: 0 if b != b else int(b > a) - int(b < a), 2, 1)
        return cmp(x.astype(object), rw.astype(object)).astype(np.int64).reshape(r.shape)
    xw = to_wide(x).astype(np.float64)       # exact: at most 32-bit integers, floats
    with np.errstate(invalid="ignore"):
        return (rw > xw).astype(np.int64) - (rw < xw).astype(np.int64)


def _step(r: np.ndarray, up: bool) -> np.ndarray:
    """The next value of ``r``'s (sign-magnitude) float type above (``up``) or below
    each element (across zero: the smallest subnormal of the other sign)."""
    et = element_type(r.dtype)
    bits = r.view(et.bits_dtype).astype(np.uint64)
    one = np.uint64(1)
    if not et.sign_bit:          # f8E8M0FNU: the encoding is the order (0x00 .. 0xFE)
        with np.errstate(over="ignore"):
            stepped = np.where(up, np.minimum(bits + one, np.uint64(0xFE)),
                               np.where(bits == 0, bits, bits - one))
        return np.where(bits == 0xFF, bits, stepped).astype(et.bits_dtype).view(r.dtype)
    sign_bit = np.uint64(et.sign_bit)
    negative = (bits & sign_bit) != 0
    zero = (bits & (sign_bit - one)) == 0
    # (np.where evaluates both sides: a zero's bits - 1 wraps, and is not taken)
    with np.errstate(over="ignore"):
        if up:
            stepped = np.where(negative, np.where(zero, one, bits - one), bits + one)
        else:
            stepped = np.where(negative, bits + one, np.where(zero, sign_bit | one, bits - one))
    if not et.has_negative_zero:     # FNUZ: -smallest steps to the one zero, not to NaN
        stepped = np.where(stepped == sign_bit, np.uint64(0), stepped)
    if not et.has_inf and not et.has_nan:
        # f4E2M1FN, the f6 formats: nothing lies beyond the largest magnitude, whose
        # step away from zero would wrap into the other sign
        top = (bits & (sign_bit - one)) == sign_bit - one
        stepped = np.where(top & ((negative & ~np.bool_(up)) | (~negative & np.bool_(up))),
                           bits, stepped)
    return stepped.astype(et.bits_dtype).view(r.dtype)


def _directed(x: np.ndarray, r: np.ndarray, mode: str) -> np.ndarray:
    """``x`` (real) rounded toward -inf (``down``) or +inf (``up``) to ``r``'s type, from
    its rounding to nearest ``r``: ``r`` itself where it lies on that side of ``x``, else
    its neighbour on the other side. A type without infinities whose nearest rounding
    overflowed to NaN has its largest finite value as the other neighbour."""
    r = np.array(r, order="C")
    cmp = _exact_order(x, r)
    rw = r.astype(np.float64)
    xw = to_wide(x).astype(np.float64) if element_type(x.dtype).is_float else None
    want_up = mode == "up"
    move = (cmp < 0) if want_up else (cmp > 0)
    out = np.where(move, _step(r, want_up), r)
    x_nan = np.isnan(xw) if xw is not None else np.zeros(r.shape, bool)
    if not element_type(r.dtype).has_sign:
        # f8E8M0FNU holds no zero and no negative value: the smallest value (2**-127)
        # lies above them, NaN (the oracle's for zero) stands below, for a positive value
        # under 2**-127 too (what would be a flush to zero: XLA CPU gives NaN there)
        xv = xw if xw is not None else x.astype(np.float64)
        low = ~x_nan & (xv <= 0)
        tiny = ~x_nan & (xv > 0) & (xv < 2.0 ** -127)
        high = ~x_nan & (xv > 0) & np.isnan(rw)        # past 2**127: its largest value
        smallest = np.zeros(r.shape, np.uint8).view(r.dtype)
        largest = np.full(r.shape, 0xFE, np.uint8).view(r.dtype)
        nan = np.full(r.shape, 0xFF, np.uint8).view(r.dtype)
        out = np.where(low & want_up, smallest, out)
        out = np.where(tiny & ~want_up, nan, out)
        return np.where(high & ~want_up, largest, out).astype(r.dtype)
    overflow_nan = np.isnan(rw) & ~x_nan
    if overflow_nan.any():
        big = float(ml_dtypes.finfo(r.dtype).max)
        positive = (xw > 0) if xw is not None else (x.astype(object) > 0).astype(bool)
        finite = np.where(positive, big, -big).astype(r.dtype)
        keep = positive if mode == "down" else ~positive
        out = np.where(overflow_nan & keep, finite, out)
    return out.astype(r.dtype)


@alternative("convert_directed")
def convert_directed(operand, result, real_mode: str, imag_mode: str = "down"):
    """``operand`` converted to ``result``'s element type rounding toward -inf
    (``'down'``) or +inf (``'up'``), from the oracle's round-to-nearest ``result``: one
    of the two neighbouring values of an inexact conversion. Complex results round each
    part its own way (``real_mode``, ``imag_mode``); a complex operand converted to a
    real type uses its real part."""
    operand, result = np.asarray(operand), np.asarray(result)
    src, dst = element_type(operand.dtype), element_type(result.dtype)
    comp = src.component.dtype if src.is_complex else None
    re = np.array(operand.real, comp) if src.is_complex else operand
    re = np.broadcast_to(re, result.shape)
    if not dst.is_complex:
        return _directed(np.ascontiguousarray(re), result, real_mode)
    rc = dst.component.dtype
    out = np.empty(result.shape, result.dtype)
    out.real = _directed(np.ascontiguousarray(re), np.array(result.real, rc), real_mode)
    if src.is_complex:
        im = np.ascontiguousarray(np.broadcast_to(np.array(operand.imag, comp), result.shape))
        out.imag = _directed(im, np.array(result.imag, rc), imag_mode)
    else:
        out.imag = result.imag
    return out


# ---------------------------------------------------------------------------
# bitcast_convert
# ---------------------------------------------------------------------------

def _element_bits(x: np.ndarray, et: ElementType) -> np.ndarray:
    """[..., num_bits] array of 0/1, least significant bit first (complex: re then im)."""
    patterns = bit_patterns(x)
    width = et.component.bits
    bits = ((patterns[..., None] >> np.arange(width, dtype=U64)) & U64(1)).astype(np.uint8)
    if et.is_complex:
        bits = bits.reshape(bits.shape[:-2] + (2 * width,))
    return bits


def _from_element_bits(bits: np.ndarray, et: ElementType) -> np.ndarray:
    width = et.component.bits
    if et.is_complex:
        bits = bits.reshape(bits.shape[:-1] + (2, width))
    weights = U64(1) << np.arange(width, dtype=U64)
    patterns = (bits.astype(U64) * weights).sum(axis=-1, dtype=U64)
    return from_bit_patterns(patterns, et)


@register("bitcast_convert")
def bitcast_convert(inputs, attrs, types):
    (x,), out = inputs, types[0]
    src, dst = element_type(x.dtype), out.element_type
    bits = _element_bits(x, src)
    if dst.bits < src.bits:
        bits = bits.reshape(bits.shape[:-1] + (src.bits // dst.bits, dst.bits))
    elif dst.bits > src.bits:
        bits = bits.reshape(bits.shape[:-2] + (dst.bits,))
    return _from_element_bits(bits, dst).reshape(out.shape)


@alternative("bitcast_parts_reversed")
def bitcast_parts_reversed(operand, result):
    """bitcast_convert between widths with the parts of each wider element in the other
    order (big-endian: the most significant part first): ``bits(result[i, :]) =
    bits(operand[i])`` still holds element by element, the layout within is the other
    one an implementation may choose."""
    operand, result = np.asarray(operand), np.asarray(result)
    src, dst = element_type(operand.dtype), element_type(result.dtype)
    if dst.bits < src.bits:
        return np.ascontiguousarray(result[..., ::-1])
    if dst.bits > src.bits:
        from conformance.core.types import TensorType
        flipped = np.ascontiguousarray(operand[..., ::-1])
        return bitcast_convert([flipped], {}, [TensorType(result.shape, dst)])
    return result


# ---------------------------------------------------------------------------
# reduce_precision
# ---------------------------------------------------------------------------

def _float_layout(et: ElementType) -> tuple[int, int]:
    """(exponent bits, stored mantissa bits) of a float type."""
    fi = ml_dtypes.finfo(et.dtype)
    return et.bits - 1 - int(fi.nmant), int(fi.nmant)


def _ieee_layout(et: ElementType) -> bool:
    """Does the format encode like IEEE-754 (a sign bit, -0, a bias of 2**(e-1) - 1,
    the all-ones exponent for infinity and NaN, or f8E4M3FN's finite top binade)?"""
    return et.has_sign and et.has_negative_zero and et.bits >= 8


@register("reduce_precision")
def reduce_precision(inputs, attrs, types):
    (x,), out = inputs, types[0]
    et = out.element_type
    if not _ieee_layout(et):
        # FNUZ (bias 2**(e-1), no -0, the -0 pattern is NaN), f8E8M0FNU (no sign),
        # f4E2M1FN / f6 (no infinity, no NaN): the spec's own reading, "conversion to
        # another floating-point type that uses exponent_bits and mantissa_bits and
        # back", on the exact values: the steps on float64, then back to the format
        # (infinity and NaN become what the format makes of them: NaN, or its largest
        # value where it has no NaN; a zero that keeps the sign is +0 without -0).
        from conformance.core.types import TensorType
        wide = np.asarray(x).astype(np.float64)
        f64 = element_type("f64")
        r = reduce_precision([wide], attrs, [TensorType(wide.shape, f64)])
        return round_to(r, et).reshape(out.shape)
    e_bits, m_bits = int(attrs["exponent_bits"]), int(attrs["mantissa_bits"])
    if et.bits < 64 and e_bits > _float_layout(et)[0]:
        # An exponent wider than the operand's: the other type holds every subnormal of
        # the operand's as a normal number, so the steps round its *value* to
        # mantissa_bits: on float64, where it is normal too. A subnormal the other type
        # holds exactly (f8E4M3FN 0x03 = 1.5 * 2^-8 with exponent_bits 11, mantissa_bits
        # 1) stays itself, where rounding its stored mantissa bits gives 0x04 (issue 32
        # item 7). With the operand's own exponent width the other type's subnormals lie
        # on the operand's subnormal grid, and rounding the stored bits (below) is the
        # conversion. No value of the operand's leaves the exponent range here.
        from conformance.core.types import TensorType
        wide = np.asarray(x).astype(np.float64)
        step = {"exponent_bits": 11, "mantissa_bits": m_bits}
        r = reduce_precision([wide], step, [TensorType(wide.shape, element_type("f64"))])
        r = round_to(r, et)
        keep = _nan_kept(x, et, m_bits)
        return np.where(np.isnan(wide), keep, r).astype(et.dtype).reshape(out.shape)
    e_src, m_src = _float_layout(et)
    bits = bit_patterns(x)
    width = et.bits
    sign = bits & U64(1 << (width - 1))
    inf_bits = bit_patterns(round_to(np.array(np.inf), et).reshape(1))[0] \
        & ~U64(1 << (width - 1))
    if m_bits < m_src:
        shift = m_src - m_bits
        last = (bits >> U64(shift)) & U64(1)
        bits = bits + U64((1 << (shift - 1)) - 1) + last
        bits = bits & ~U64((1 << shift) - 1) & U64((1 << width) - 1)
        # A carry out of the exponent field (f8E4M3FN's top binade is finite) overflows.
        carried = (bits & U64(1 << (width - 1))) != sign
        bits = np.where(carried, sign | inf_bits, bits)
    if e_bits < e_src:
        src_bias = (1 << (e_src - 1)) - 1
        max_exp = (1 << (e_bits - 1)) - 1
        exp_field = (bits >> U64(m_src)) & U64((1 << e_src) - 1)
        overflow = exp_field > U64(src_bias + max_exp)
        underflow = exp_field <= U64(src_bias - max_exp)
        bits = np.where(overflow, sign | inf_bits, bits)
        bits = np.where(underflow, sign, bits)
    r = from_bit_patterns(bits, et)
    nan = np.isnan(x.astype(np.float64))
    return np.where(nan, _nan_kept(x, et, m_bits), r).astype(et.dtype).reshape(out.shape)


def _nan_kept(x: np.ndarray, et: ElementType, m_bits: int) -> np.ndarray:
    """What a NaN operand becomes: itself (payload and sign) while the other type has
    mantissa bits; with none, no NaN is left: steps 2 and 3 give infinity with the
    original sign (the module's docstring)."""
    if m_bits != 0:
        return x
    width = et.bits
    inf_bits = bit_patterns(round_to(np.array(np.inf), et).reshape(1))[0] \
        & ~U64(1 << (width - 1))
    return from_bit_patterns(bit_patterns(x) & U64(1 << (width - 1)) | inf_bits, et)
