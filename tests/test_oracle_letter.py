"""Bit-level rules of the oracle, pinned to the letter of the spec (shared/seeds/
003_5ae4585f266cf299.txt), where a convenient reading was possible.

reduce_precision, "### reduce_precision":

    Performs element-wise conversion of `operand` to another floating-point type that
    uses `exponent_bits` and `mantissa_bits` and back to the original floating-point
    type [...] More formally:
    * The mantissa bits of the original value are updated to round the original value
      to the nearest value representable with `mantissa_bits` using
      `roundToIntegralTiesToEven` semantics.
    * Then, if `mantissa_bits` are smaller than the number of mantissa bits of the
      original value, the mantissa bits are truncated to `mantissa_bits`.
    * Then, if the exponent bits of the intermediate result don't fit into the range
      provided by `exponent_bits`, the intermediate result overflows to infinity using
      the original sign or underflows to zero using the original sign.
    Example: exponent_bits = 5, mantissa_bits = 2: 0x7FFFFFFF -> 0x7FFFFFFF.

A NaN whose payload lies entirely in the bits step 2 truncates would become the
encoding of infinity if the steps were read on a NaN's bits, and step 3 would overflow
*every* NaN (its exponent field is all ones) to infinity; the example refutes both: the
NaN 0x7FFFFFFF comes back bit for bit. With mantissa_bits >= 1 the other type has NaNs,
so the conversion keeps the NaN: the result is the operand's NaN, payload and sign
unchanged (what XLA and the StableHLO interpreter do). With mantissa_bits = 0 the other
type has no NaN (an all-ones exponent with no mantissa bit is infinity): nothing in the
text lets a NaN survive, and steps 2 and 3 say what it becomes, infinity with the
original sign (XLA on CPU keeps the NaN, recorded in expectations/jax-cpu.yaml; the
interpreter gives +inf whatever the sign).
"""
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from conformance import oracles
from conformance.core.literals import bit_patterns, from_bit_patterns
from conformance.core.types import element_type


def reduce_precision(et: str, bits: list[int], e: int, m: int) -> list[int]:
    t = element_type(et)
    x = from_bit_patterns(np.array(bits, np.uint64), t)
    (out,) = oracles.evaluate("reduce_precision", [x], {"exponent_bits": e, "mantissa_bits": m},
                              result_types=[f"tensor<{len(bits)}x{t.name}>"])
    assert out.dtype == t.dtype
    return [int(b) for b in bit_patterns(np.asarray(out))]


# NaNs whose payload is entirely in bits that mantissa_bits truncates (signalling and
# quiet, both signs), and NaNs whose payload would carry into the exponent and sign when
# rounded: each comes back bit for bit.
KEPT = [
    ("f32", [0x7F800001, 0xFF800001, 0x7F80FFFF, 0x7F9FFFFF], 5, 2),
    ("f32", [0x7F800001, 0x7FA00000, 0xFFA00000], 8, 1),       # 0x7FA00000: 2nd bit only
    ("f32", [0x7FFFFFFF, 0xFFFFFFFF, 0x7FC00001], 5, 2),      # the spec's example NaN
    ("f32", [0x7F800001, 0x7FC00000], 8, 22),
    ("f64", [0x7FF0000000000001, 0xFFF0000000000001, 0x7FF00000FFFFFFFF], 11, 10),
    ("f64", [0x7FFFFFFFFFFFFFFF], 5, 2),
    ("bf16", [0x7F81, 0xFF81, 0x7F83, 0x7FFF], 8, 2),
    ("f16", [0x7C01, 0xFC01, 0x7C3F, 0x7FFF], 5, 3),
    ("f8E5M2", [0x7D, 0xFD, 0x7F], 5, 1),
    ("f8E4M3FN", [0x7F, 0xFF], 4, 1),
]


@pytest.mark.parametrize("et, bits, e, m", KEPT)
def test_a_nan_truncated_to_a_zero_payload_stays_the_same_nan(et, bits, e, m):
    assert reduce_precision(et, bits, e, m) == bits


# mantissa_bits = 0: infinity with the NaN's sign (types with an infinity).
TO_INF = [
    ("f32", [0x7FC00000, 0x7F800001, 0xFF800001, 0xFFFFFFFF], 8,
     [0x7F800000, 0x7F800000, 0xFF800000, 0xFF800000]),
    ("f32", [0x7FC00000, 0xFFC00000], 1, [0x7F800000, 0xFF800000]),
    ("f64", [0x7FF8000000000000, 0xFFF0000000000001], 11,
     [0x7FF0000000000000, 0xFFF0000000000000]),
    ("bf16", [0x7FC0, 0xFF81], 3, [0x7F80, 0xFF80]),
    ("f16", [0x7E00, 0xFC01], 5, [0x7C00, 0xFC00]),
    ("f8E5M2", [0x7D, 0xFE], 2, [0x7C, 0xFC]),
]


@pytest.mark.parametrize("et, bits, e, want", TO_INF)
def test_with_no_mantissa_bits_a_nan_overflows_to_infinity_with_its_sign(et, bits, e, want):
    assert reduce_precision(et, bits, e, 0) == want


def test_with_no_mantissa_bits_a_type_without_infinity_keeps_nan():
    # f8E4M3FN has no infinity: step 3's "overflows to infinity" gives its NaN, as it
    # does for an overflowing number (oracles/conversion.py).
    out = reduce_precision("f8E4M3FN", [0x7F, 0xFF, 0x7E], 2, 0)
    assert out[:2] == [0x7F, 0xFF] and out[2] in (0x7F, 0xFF)


def test_the_spec_example_bit_for_bit():
    bits = [0xFF800000, 0x7F800000, 0x7FFFFFFF, 0x00000000, 0x447A0000, 0x49742400]
    assert reduce_precision("f32", bits, 5, 2) == [0xFF800000, 0x7F800000, 0x7FFFFFFF,
                                                   0x00000000, 0x44800000, 0x7F800000]


def _round_value(v: Fraction, m: int) -> Fraction:
    """v rounded to m mantissa bits (m + 1 significant bits), ties to even, on the exact
    value: the spec's first step where the exponent is unbounded."""
    if v == 0:
        return v
    e = math.floor(math.log2(abs(v)))
    while Fraction(2) ** e > abs(v):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(v):
        e += 1
    unit = Fraction(2) ** (e - m)
    if m == 0 and abs(v) / unit == Fraction(3, 2):
        # a tie between 2^e and 2^(e+1): "even" is the encoding's last bit, the biased
        # exponent's (every bias 2^(k-1) - 1 is odd, so the even one has an odd e)
        return (1 if v > 0 else -1) * unit * (1 if e % 2 else 2)
    return round(v / unit) * unit              # Fraction's round: ties to even


@pytest.mark.parametrize("et", ["f8E4M3FN", "f8E5M2"])
@pytest.mark.parametrize("m", [0, 1, 2])
def test_the_value_is_rounded_not_a_subnormal_s_stored_bits(et, m):
    # Issue 32 item 7: with an exponent at least as wide as the operand's, the steps keep
    # every value the other type holds: f8E4M3FN 0x03 = 1.5 * 2^-8 with one mantissa bit
    # stays 0x03 (the oracle had rounded the subnormal's stored bits 011 to 100: 0x04).
    # Every finite bit pattern against the exact value rounded to m mantissa bits.
    t = element_type(et)
    patterns = [b for b in range(256)
                if np.isfinite(float(from_bit_patterns(np.array([b], np.uint64), t)[0]))]
    got = reduce_precision(et, patterns, 11, m)
    largest = float(ml_dtypes.finfo(t.dtype).max)
    for b, out in zip(patterns, got):
        v = Fraction(float(from_bit_patterns(np.array([b], np.uint64), t)[0]))
        want = _round_value(v, m)
        result = float(from_bit_patterns(np.array([out], np.uint64), t)[0])
        if abs(want) > largest:                # past the type's range: its overflow
            assert not np.isfinite(result), (et, hex(b), m, result)
        else:
            assert Fraction(result) == want and (b >> 7) == (out >> 7), (et, hex(b), m,
                                                                         result, want)
    if et == "f8E4M3FN" and m == 1:
        assert reduce_precision(et, [0x03, 0x05, 0x07], 11, 1) == [0x03, 0x04, 0x08]
