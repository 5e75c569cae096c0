"""The dynamic-shape ops (2026-08 spec: dynamic_iota, dynamic_reshape,
dynamic_broadcast_in_dim, dynamic_pad, dynamic_gather, dynamic_conv).

Each is "functionally identical" to its static op with a shape, padding or slice size
given as an operand's values instead of an attribute: the oracle reads those values,
checks that they agree with the result type (the spec's constraint tying them; a
disagreement is no program the spec defines, so no oracle value), and evaluates the
static op's oracle with them as attributes. The static ops' conditions
(gather's out-of-bounds rules, convolution's zero signs and overflow) are reused the same
way, one case at a time where the operand's values differ between cases.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from conformance.specs.expressions import ALTERNATIVES, CONDITIONS, alternative, condition

from .registry import OracleError, load_family, oracle_for, register


def _values(x: np.ndarray) -> list[int]:
    """An integer shape operand's values, exact for its own type (unsigned never negative)."""
    a = np.asarray(x)
    return [int(v) for v in a.reshape(-1).astype(np.uint64 if a.dtype.kind == "u" else np.int64)]


def _agree(op: str, what: str, got: Sequence[int], want: Sequence[int]) -> None:
    if list(got) != list(want):
        raise OracleError(f"{op}: {what} {list(got)} disagrees with the result type's "
                          f"{list(want)}")


@register("dynamic_iota")
def dynamic_iota(inputs, attrs, types):
    (output_shape,) = inputs
    _agree("dynamic_iota", "output_shape", _values(output_shape), types[0].shape)
    return oracle_for("iota")([], attrs, types)


@register("dynamic_reshape")
def dynamic_reshape(inputs, attrs, types):
    operand, output_shape = inputs
    _agree("dynamic_reshape", "output_shape", _values(output_shape), types[0].shape)
    return oracle_for("reshape")([operand], attrs, types)


@register("dynamic_broadcast_in_dim")
def dynamic_broadcast_in_dim(inputs, attrs, types):
    """known_(non)expanding_dimensions are hints only: the values are broadcast_in_dim's."""
    operand, output_dimensions = inputs
    _agree("dynamic_broadcast_in_dim", "output_dimensions", _values(output_dimensions),
           types[0].shape)
    own = {"broadcast_dimensions": attrs["broadcast_dimensions"]}
    return oracle_for("broadcast_in_dim")([operand], own, types)


@register("dynamic_pad")
def dynamic_pad(inputs, attrs, types):
    operand, padding_value, low, high, interior = inputs
    lo, hi, it = _values(low), _values(high), _values(interior)
    if any(v < 0 for v in it):
        raise OracleError(f"dynamic_pad: interior_padding {it} is negative (C3)")
    want = [d + max(d - 1, 0) * i + a + b for d, a, b, i in zip(operand.shape, lo, hi, it)]
    _agree("dynamic_pad", "the padded shape", want, types[0].shape)
    own = {"edge_padding_low": lo, "edge_padding_high": hi, "interior_padding": it}
    return oracle_for("pad")([operand, padding_value], own, types)


@register("dynamic_gather")
def dynamic_gather(inputs, attrs, types):
    operand, start_indices, slice_sizes = inputs
    sizes = _values(slice_sizes)
    collapsed, offsets = attrs["collapsed_slice_dims"], attrs["offset_dims"]
    _agree("dynamic_gather", "slice_sizes outside collapsed_slice_dims",
           [n for d, n in enumerate(sizes) if d not in collapsed],
           [types[0].shape[d] for d in offsets if d < len(types[0].shape)])
    own = dict(attrs, slice_sizes=sizes)
    return oracle_for("gather")([operand, start_indices], own, types)


@register("dynamic_conv")
def dynamic_conv(inputs, attrs, types):
    lhs, rhs, padding = inputs
    own = dict(attrs, padding=np.asarray(_values(padding), np.int64).reshape(-1, 2))
    return oracle_for("convolution")([lhs, rhs], own, types)


# -- the static ops' conditions, with the operand's values per case ----------------------

def _static(registry: dict, op: str, name: str) -> Callable[..., Any]:
    """The static op's condition or alternative (its family module loaded first)."""
    load_family(op)
    return registry[name]


def _per_case(fn: Callable[..., Any], batched: Sequence[np.ndarray], values: np.ndarray,
              fixed: Sequence[Any], put: Callable[[np.ndarray], Any]):
    """``fn(*batched, *fixed, put(values of a case))``: once where every case holds the same
    values (what the generators draw for gather), else once per case (``batched`` cut to
    it), the results (a mask, or a list of alternatives) joined along the case axis."""
    values = np.asarray(values)
    n = values.shape[0]
    if len({tuple(_values(values[b])) for b in range(n)}) <= 1:
        return fn(*batched, *fixed, put(values[0]) if n else put(values.reshape(0)))
    parts = [fn(*(x[b:b + 1] for x in batched), *fixed, put(values[b])) for b in range(n)]
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    if not all(parts):
        return []
    k = max(len(p) for p in parts)
    return [np.concatenate([p[j] if j < len(p) else p[0] for p in parts]) for j in range(k)]


def _gather(registry: dict, name: str):
    """gather's rule ``name`` with slice_sizes read from the operand (the sizes come last
    in gather's arguments, before the oracle's result where the rule takes it)."""
    def fn(operand, indices, offset_dims, collapsed, index_map, ivd, sizes, *result):
        static = _static(registry, "gather", name)
        if result:
            return _per_case(lambda x, i, r, *a: static(x, i, *a[:4], a[4], r),
                             [operand, indices, result[0]], sizes,
                             [offset_dims, collapsed, index_map, ivd], _values)
        return _per_case(static, [operand, indices], sizes,
                         [offset_dims, collapsed, index_map, ivd], _values)
    return fn


for _name in ("gather_out_of_bounds", "gather_unbounded", "gather_indices_unsorted"):
    condition(f"dynamic_{_name}")(_gather(CONDITIONS, _name))
for _name in ("gather_in_range_starts", "gather_per_element"):
    alternative(f"dynamic_{_name}")(_gather(ALTERNATIVES, _name))


def _conv(registry: dict, name: str):
    """convolution's rule ``name`` (attribute list in oracles/convolution.py's
    ATTRIBUTE_ORDER: padding second) with the padding read from the operand."""
    def fn(lhs, rhs, attr_values, padding, result):
        static = _static(registry, "convolution", name)
        return _per_case(
            lambda a, b, r, p: static(a, b, [attr_values[0], p, *attr_values[1:]], r),
            [lhs, rhs, result], padding, [],
            lambda row: np.asarray(_values(row), np.int64).reshape(-1, 2))
    return fn


condition("dynamic_convolution_out_of_range")(_conv(CONDITIONS, "convolution_out_of_range"))
condition("dynamic_convolution_zero_terms")(_conv(CONDITIONS, "convolution_zero_terms"))
alternative("dynamic_convolution_other_zero")(_conv(ALTERNATIVES, "convolution_other_zero"))
