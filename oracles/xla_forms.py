"""XLA's own forms that are not single StableHLO ops (issue 21): the binary element-wise
ops with ``broadcast_dimensions``.

The oracle broadcasts explicitly, as XLA's broadcasting page defines it (rank expansion
of the lower-rank operand onto ``broadcast_dimensions``, then degenerate dimensions of
either side), and applies the StableHLO op's own oracle to the broadcast operands.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance.core.case import Signature
from conformance.core.types import TensorType, element_type
from conformance.specs.expressions import condition

from .registry import oracle_for, register


def broadcast_operands(lhs: np.ndarray, rhs: np.ndarray, dims: Sequence[int],
                       lead: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Both operands at the result's shape. ``lead`` leading axes (a batch) are carried
    through on both; ``dims`` maps the lower-rank operand's dimensions (lhs where the
    ranks are equal) onto the higher-rank one's, in increasing order."""
    lo_is_lhs = lhs.ndim <= rhs.ndim
    low, high = (lhs, rhs) if lo_is_lhs else (rhs, lhs)
    rank = high.ndim - lead
    expanded = [1] * rank
    for j, d in enumerate(dims):
        expanded[d] = low.shape[lead + j]
    low = low.reshape(low.shape[:lead] + tuple(expanded))
    shape = np.broadcast_shapes(low.shape, high.shape)
    low, high = np.broadcast_to(low, shape), np.broadcast_to(high, shape)
    return (low, high) if lo_is_lhs else (high, low)


def operation_attributes(attrs) -> dict:
    """The attributes of the broadcast operation itself (compare's direction and type):
    all but ``operation`` and ``broadcast_dimensions``."""
    return {k: v for k, v in attrs.items() if k not in ("operation", "broadcast_dimensions")}


# One oracle for every form: the spec's `operation` names the StableHLO op (a spec of its
# own where the verdict or result type differs: pow and atan2 by ULP bounds, compare's i1
# and complex's complex result).
@register("binary_with_broadcast_dimensions", "power_with_broadcast_dimensions",
          "atan2_with_broadcast_dimensions", "compare_with_broadcast_dimensions",
          "complex_with_broadcast_dimensions")
def binary_with_broadcast_dimensions(inputs, attrs, types):
    lhs, rhs = (np.asarray(x) for x in inputs)
    a, b = broadcast_operands(lhs, rhs, attrs["broadcast_dimensions"])
    op = attrs["operation"]
    out = oracle_for(op)([np.ascontiguousarray(a), np.ascontiguousarray(b)],
                         operation_attributes(attrs), list(types))
    return out


@condition("broadcast_operation_rules")
def operation_rules(operation: str, lhs, rhs, dims, result) -> np.ndarray:
    """The StableHLO op's implementation-defined elements (any of its rules) on the
    broadcast operands; the inputs carry a leading batch axis."""
    from conformance import oracles
    a, b = broadcast_operands(np.asarray(lhs), np.asarray(rhs), list(dims), lead=1)
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    r = np.asarray(result)
    et = element_type(a.dtype)
    sig = Signature.make(operation, [TensorType(a.shape[1:], et)] * 2,
                         [TensorType(r.shape[1:], element_type(r.dtype))])
    hit = np.zeros(r.shape, bool)
    for mask in oracles.implementation_defined(sig, [a, b], expected=[r]).values():
        hit |= np.broadcast_to(np.asarray(mask) > 0, r.shape)
    return hit


# ---------------------------------------------------------------------------
# SetDimensionSize: the operand passed through; past `size` along `dimension` is padding
# ---------------------------------------------------------------------------

@register("set_dimension_size")
def set_dimension_size(inputs, attrs, types):
    return np.array(np.asarray(inputs[0]), copy=True)


def _along(result, size, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """(index along ``dimension`` of every result element, the case's size there), with
    the batch axis leading."""
    r = np.asarray(result)
    d = int(dimension) + 1
    index = np.arange(r.shape[d]).reshape((1,) * d + (-1,) + (1,) * (r.ndim - d - 1))
    size = np.asarray(size, np.int64).reshape((-1,) + (1,) * (r.ndim - 1))
    return np.broadcast_to(index, r.shape), np.broadcast_to(size, r.shape)


@condition("dynamic_padding")
def dynamic_padding(operand, size, dimension, result) -> np.ndarray:
    """Elements at index >= size along ``dimension`` (for a size within [0, bound])."""
    r = np.asarray(result)
    if not 0 <= int(dimension) < r.ndim - 1:
        return np.zeros(r.shape, bool)
    index, s = _along(r, size, dimension)
    return (index >= s) & (s >= 0) & (s <= r.shape[int(dimension) + 1])


@condition("dynamic_size_out_of_range")
def dynamic_size_out_of_range(operand, size, dimension, result) -> np.ndarray:
    """Every element of a case whose size is below 0 or above the bound."""
    r = np.asarray(result)
    if not 0 <= int(dimension) < r.ndim - 1:
        return np.zeros(r.shape, bool)
    _, s = _along(r, size, dimension)
    return (s < 0) | (s > r.shape[int(dimension) + 1])


@register("get_dimension_size_dynamic")
def get_dimension_size_dynamic(inputs, attrs, types):
    """size where query == dimension, else the static size of dimension query."""
    operand, size = np.asarray(inputs[0]), np.asarray(inputs[1])
    if attrs["query"] == attrs["dimension"]:
        return np.asarray(size, np.int32).reshape(())
    return np.asarray(operand.shape[attrs["query"]], np.int32)


@condition("dynamic_size_out_of_range_scalar")
def dynamic_size_out_of_range_scalar(operand, size, dimension, result) -> np.ndarray:
    """A case (scalar result) whose size is below 0 or above the bound."""
    x = np.asarray(operand)
    if not 0 <= int(dimension) < x.ndim - 1:
        return np.zeros(np.shape(result), bool)
    s = np.asarray(size, np.int64).reshape(np.shape(result))
    return (s < 0) | (s > x.shape[int(dimension) + 1])
