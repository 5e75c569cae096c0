"""and, or, xor, not, shift_left, shift_right_arithmetic, shift_right_logical,
count_leading_zeros, popcnt: on booleans logically, on integers on the bit pattern.

Shifts by an amount at least the bit width — the amount read as an unsigned bit
pattern, so negative amounts count as huge — give 0 for shift_left and
shift_right_logical and the sign fill for shift_right_arithmetic (the convention of
XLA and of the StableHLO reference interpreter; the spec's sections are silent).
shift_right_arithmetic on unsigned types treats the top bit as the sign.
"""
from __future__ import annotations

import numpy as np

from .registry import register
from ._kernels import U64, sign_extend, unsigned_bits, wrap


def _logical_or_bitwise(bool_fn, int_fn):
    def fn(inputs, attrs, types):
        et = types[0].element_type
        xs = np.broadcast_arrays(*inputs)
        if et.is_boolean:
            return bool_fn(*xs).reshape(types[0].shape)
        return wrap(int_fn(*(unsigned_bits(x) for x in xs)), et, types[0].shape)
    return fn


register("and")(_logical_or_bitwise(np.logical_and, np.bitwise_and))
register("or")(_logical_or_bitwise(np.logical_or, np.bitwise_or))
register("xor")(_logical_or_bitwise(np.logical_xor, np.bitwise_xor))
register("not")(_logical_or_bitwise(np.logical_not, np.invert))


def _shift_operands(inputs, types):
    a, b = np.broadcast_arrays(*inputs)
    et = types[0].element_type
    amount = unsigned_bits(b)
    in_range = amount < U64(et.bits)
    return unsigned_bits(a), np.where(in_range, amount, U64(0)), in_range, et


@register("shift_left")
def shift_left(inputs, attrs, types):
    bits, amount, in_range, et = _shift_operands(inputs, types)
    return wrap(np.where(in_range, bits << amount, U64(0)), et, types[0].shape)


@register("shift_right_logical")
def shift_right_logical(inputs, attrs, types):
    bits, amount, in_range, et = _shift_operands(inputs, types)
    return wrap(np.where(in_range, bits >> amount, U64(0)), et, types[0].shape)


@register("shift_right_arithmetic")
def shift_right_arithmetic(inputs, attrs, types):
    bits, amount, in_range, et = _shift_operands(inputs, types)
    signed = sign_extend(bits, et.bits)
    amount = np.where(in_range, amount, U64(et.bits - 1)).astype(np.int64)
    return wrap((signed >> amount).view(U64), et, types[0].shape)


def _bit_length(u: np.ndarray) -> np.ndarray:
    n = np.zeros(u.shape, np.int64)
    x = u.copy()
    for s in (32, 16, 8, 4, 2, 1):
        high = x >> U64(s)
        has = high != 0
        n += np.where(has, s, 0)
        x = np.where(has, high, x)
    return n + (x != 0)


@register("count_leading_zeros")
def count_leading_zeros(inputs, attrs, types):
    et = types[0].element_type
    bits = unsigned_bits(inputs[0])
    return wrap((et.bits - _bit_length(bits)).astype(U64), et, types[0].shape)


@register("popcnt")
def popcnt(inputs, attrs, types):
    et = types[0].element_type
    return wrap(np.bitwise_count(unsigned_bits(inputs[0])).astype(U64), et, types[0].shape)
