"""compare (every comparison_direction and compare_type), is_finite."""
from __future__ import annotations

import operator

import numpy as np

from conformance.core.numerics import to_wide, total_order_key

from .registry import register

_DIRECTIONS = {"EQ": operator.eq, "NE": operator.ne, "GE": operator.ge, "GT": operator.gt,
               "LE": operator.le, "LT": operator.lt}


def _lexicographic(direction: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(real, imag) pairs compared lexicographically with IEEE quiet comparisons."""
    if direction == "EQ":
        return (a.real == b.real) & (a.imag == b.imag)
    if direction == "NE":
        return (a.real != b.real) | (a.imag != b.imag)
    strict = {"GE": operator.gt, "GT": operator.gt, "LE": operator.lt, "LT": operator.lt}[direction]
    last = _DIRECTIONS[direction]
    return strict(a.real, b.real) | ((a.real == b.real) & last(a.imag, b.imag))


@register("compare")
def compare(inputs, attrs, types):
    a, b = np.broadcast_arrays(*inputs)
    direction = attrs["comparison_direction"]
    ctype = attrs.get("compare_type")
    if ctype == "TOTALORDER":
        # totalOrder decides the order; compareQuietEqual on the ordering keys means
        # EQ is "same position in the total order" (-0 != +0, NaNs by payload).
        r = _DIRECTIONS[direction](total_order_key(a), total_order_key(b))
    elif np.iscomplexobj(a):
        r = _lexicographic(direction, to_wide(a), to_wide(b))
    else:
        # Integers by value (exact in int64/uint64), floats by IEEE quiet comparisons.
        r = _DIRECTIONS[direction](to_wide(a), to_wide(b))
    return np.asarray(r, bool).reshape(types[0].shape)


@register("is_finite")
def is_finite(inputs, attrs, types):
    return np.isfinite(to_wide(inputs[0])).reshape(types[0].shape)
