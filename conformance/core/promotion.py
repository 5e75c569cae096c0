"""The spec's promotion of a reduction's computation type (stablehlo-spec-2026-08.md,
"is_promotable" and "to_destination_type" of "Functions on types" / "Functions on
values").

The newer spec lets the body of reduce, reduce_window, scatter, all_reduce and
reduce_scatter compute in a type ``E`` wider than its inputs: ``is_promotable(x, E)``
(the same kind, bool / integer / float / complex / quantized with the same expressed
type, and ``bitwidth(x) <= bitwidth(E)``); the inputs and init values are converted to
``E`` (``to_destination_type``: ``convert``) before the body applies.

:func:`widenings` is the part of that the generators draw: the types that hold every
value of the input type exactly (``f16 -> f32``, ``si8 -> si32``, ``ui8 -> si16``), so
that the conversion itself decides nothing and what is checked is the reduction in E.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from .types import ALL_ELEMENT_TYPES, ElementType, element_type

__all__ = ["is_promotable", "widenings", "to_destination_type"]


def _bitwidth(t: ElementType) -> int:
    if t.is_quantized:
        return t.storage.bits
    if t.is_complex:
        return t.component.bits
    return t.bits


def is_promotable(x, y) -> bool:
    """The spec's ``is_promotable(x, y)``: same kind, ``bitwidth(x) <= bitwidth(y)``
    (booleans: any two; complex: by the part's width; quantized: by the storage type's,
    with the same expressed type)."""
    x, y = element_type(x), element_type(y)
    if x.is_quantized or y.is_quantized:
        if not (x.is_quantized and y.is_quantized):
            return False
        if getattr(x, "expressed", None) != getattr(y, "expressed", None):
            return False
        return _bitwidth(x) <= _bitwidth(y)
    if x.is_boolean or y.is_boolean:
        return x.is_boolean and y.is_boolean
    for kind in ("is_integer", "is_float", "is_complex"):
        if getattr(x, kind) or getattr(y, kind):
            return bool(getattr(x, kind) and getattr(y, kind)) and _bitwidth(x) <= _bitwidth(y)
    return False


def _holds(x: ElementType, y: ElementType) -> bool:
    """Does ``y`` hold every value of ``x`` exactly (the same kind)?"""
    if x.is_integer and y.is_integer:
        if x.is_unsigned:
            return y.bits >= x.bits + (0 if y.is_unsigned else 1)
        return y.is_signed and y.bits >= x.bits
    if (x.is_float and y.is_float) or (x.is_complex and y.is_complex):
        fx, fy = ml_dtypes.finfo(x.component.dtype), ml_dtypes.finfo(y.component.dtype)
        return (int(fy.nmant) >= int(fx.nmant) and float(fy.max) >= float(fx.max)
                and float(fy.smallest_subnormal) <= float(fx.smallest_subnormal)
                and (y.has_sign or not x.has_sign)
                and (y.has_inf or not x.has_inf) and (y.has_nan or not x.has_nan))
    return False


@functools.lru_cache(maxsize=None)
def widenings(t) -> tuple[str, ...]:
    """The element types (of the suite's) other than ``t`` that ``t`` is promotable to
    and that hold each of its values exactly, narrowest first."""
    t = element_type(t)
    if t.is_quantized or t.is_boolean:
        return ()
    out = [y for y in ALL_ELEMENT_TYPES
           if y != t and not y.is_quantized and is_promotable(t, y) and _holds(t, y)]
    return tuple(y.name for y in sorted(out, key=_bitwidth))


def to_destination_type(x, destination) -> np.ndarray:
    """``x`` converted to the element type ``destination`` (the spec's
    ``to_destination_type`` on tensors that are not quantized: ``convert``). Exact for
    :func:`widenings`; a narrowing float conversion rounds to nearest even, an integer
    one wraps (two's complement)."""
    x = np.asarray(x)
    dst = element_type(destination)
    if element_type(x.dtype) == dst:
        return x
    return x.astype(dst.dtype)
