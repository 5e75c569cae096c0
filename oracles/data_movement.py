"""Data movement ops: results are operand elements, moved, copied or dropped — never
computed — so the oracle is numpy indexing written from each op's "More formally".

Variadic inputs arrive flat (``concatenate``'s inputs, ``dynamic_slice``'s operand then
its start indices); the spec's input order is kept. Start indices are read as exact
integers of their own type (an unsigned index is never negative) and clamped as the
spec says: ``clamp(0, start, dim - size)``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance.core.types import element_type

from .registry import register
# iota's zero_in_format_without_zero reads id 0 in f8E8M0FNU as convert does (either
# neighbour): its allowed set is conversion's alternative('convert_directed', ...)
from . import conversion  # noqa: F401,E402


def _c(x: np.ndarray) -> np.ndarray:
    """A fresh C-contiguous copy (results never alias the inputs)."""
    return np.array(x, order="C", copy=True)


def _index_value(x: np.ndarray) -> int:
    """The exact integer a 0-d start index tensor holds, per its own element type."""
    et = element_type(x.dtype)
    return int(np.asarray(x).astype(np.uint64 if et.is_unsigned else np.int64))


def adjusted_start_indices(starts: Sequence[np.ndarray], dims: Sequence[int],
                           sizes: Sequence[int]) -> list[int]:
    """``clamp(0, start_indices, shape(operand) - sizes)``, per dimension."""
    return [min(max(_index_value(s), 0), d - n) for s, d, n in zip(starts, dims, sizes)]


@register("slice")
def slice_(inputs, attrs, types):
    (x,) = inputs
    index = tuple(slice(s, l, st) for s, l, st in
                  zip(attrs["start_indices"], attrs["limit_indices"], attrs["strides"]))
    return np.array(x[index], order="C").reshape(types[0].shape)


@register("broadcast_in_dim")
def broadcast_in_dim(inputs, attrs, types):
    """``result[i] = operand[j]`` with ``j[k] = 0`` where ``dim(operand, k) == 1`` and
    ``i[broadcast_dimensions[k]]`` otherwise: move the operand's axes to their result
    positions (in increasing order), give the other result axes size 1, and broadcast."""
    (x,) = inputs
    dims = list(attrs["broadcast_dimensions"])
    shape = types[0].shape
    order = sorted(range(len(dims)), key=lambda k: dims[k])
    moved = np.transpose(x, order) if dims else x
    placed = [1] * len(shape)
    for k in order:
        placed[dims[k]] = x.shape[k]
    return _c(np.broadcast_to(moved.reshape(placed), shape))


@register("concatenate")
def concatenate(inputs, attrs, types):
    return _c(np.concatenate(list(inputs), axis=attrs["dimension"]))


@register("pad")
def pad(inputs, attrs, types):
    """Interior padding first, then edge padding (negative edges cut): build the operand
    interior-padded and with the positive edges in a buffer full of the padding value,
    then cut the negative edges off."""
    x, value = inputs
    lows, highs = attrs["edge_padding_low"], attrs["edge_padding_high"]
    interiors = attrs["interior_padding"]
    full = [d + max(d - 1, 0) * it + max(lo, 0) + max(hi, 0)
            for d, lo, hi, it in zip(x.shape, lows, highs, interiors)]
    buf = np.full(full, value, dtype=x.dtype)
    buf[tuple(slice(max(lo, 0), max(lo, 0) + max(d - 1, 0) * (it + 1) + 1, it + 1) if d else
              slice(0, 0)
              for d, lo, it in zip(x.shape, lows, interiors))] = x
    cut = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, lo, hi in zip(full, lows, highs))
    return _c(buf[cut]).reshape(types[0].shape)


@register("reverse")
def reverse(inputs, attrs, types):
    (x,) = inputs
    index = tuple(slice(None, None, -1) if d in attrs["dimensions"] else slice(None)
                  for d in range(x.ndim))
    return _c(x[index])


@register("reshape")
def reshape(inputs, attrs, types):
    (x,) = inputs
    return _c(x).reshape(types[0].shape)


@register("transpose")
def transpose(inputs, attrs, types):
    """``i[d] = j[permutation[d]]``: numpy's transpose (result axis d is operand axis
    permutation[d])."""
    (x,) = inputs
    return _c(np.transpose(x, attrs["permutation"]))


@register("iota")
def iota(inputs, attrs, types):
    """``output[..., id, ...] = id``; exact for every generated case (the generator keeps
    ids within the type's exact range). Floats and complex: the index converted
    (round to nearest even, which ml_dtypes' casts do)."""
    (t,) = types
    d = attrs["iota_dimension"]
    ids = np.arange(t.shape[d], dtype=np.int64)
    along = ids.reshape([-1 if i == d else 1 for i in range(len(t.shape))])
    et = t.element_type
    values = along if et.is_integer else along.astype(np.float64)
    return _c(np.broadcast_to(values, t.shape).astype(et.dtype))


@register("get_dimension_size")
def get_dimension_size(inputs, attrs, types):
    (x,) = inputs
    return np.array(x.shape[attrs["dimension"]], dtype=np.int32)


@register("optimization_barrier")
def optimization_barrier(inputs, attrs, types):
    return tuple(_c(x) for x in inputs)


@register("dynamic_slice")
def dynamic_slice(inputs, attrs, types):
    x, starts = inputs[0], inputs[1:]
    sizes = attrs["slice_sizes"]
    begin = adjusted_start_indices(starts, x.shape, sizes)
    return _c(x[tuple(slice(b, b + n) for b, n in zip(begin, sizes))])


@register("dynamic_update_slice")
def dynamic_update_slice(inputs, attrs, types):
    x, update, starts = inputs[0], inputs[1], inputs[2:]
    begin = adjusted_start_indices(starts, x.shape, update.shape)
    out = _c(x)
    out[tuple(slice(b, b + n) for b, n in zip(begin, update.shape))] = update
    return out
