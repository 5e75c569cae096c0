"""Values of the dynamic-shape ops' shape operands (generators/values.py
``SIGNATURE_DISTRIBUTIONS``): the operands that say at run time what the result type
already says statically, so their values must agree with the signature.

- ``dynamic_shape:EXPR``: every row holds the integer list ``EXPR`` evaluates to over the
  signature (attributes, and inputs and outputs as types): ``shape(result)`` for
  dynamic_iota, dynamic_reshape and dynamic_broadcast_in_dim; dynamic_gather's slice
  sizes from its result and dimension numbers.
- ``dynamic_pad``: dynamic_pad's ``edge_padding_low``, ``edge_padding_high`` and
  ``interior_padding``, drawn together (the first one's draw returns all three), a fresh
  decomposition of each result dimension per row: ``d + max(d - 1, 0) * interior + low +
  high = dim(result)`` with interior in [0, 2] and edges in [-3, ...] (as pad's
  generator: no edge cuts more than the padded size), so that one compiled program sees
  several padding values (negative edges included).
- ``dynamic_conv``: dynamic_conv's ``padding`` ([N - 2, 2]), per row a split of a total
  padding that gives each spatial result dimension its size (C25), low edges from
  ``-dilated input size`` up.

An invalid signature (a negative test) whose types do not fit gets the default values.
"""
from __future__ import annotations

import numpy as np

from conformance.core.case import Signature
from conformance.core.types import ElementType
from conformance.specs import OpSpec
from conformance.specs import expressions as ex

from .values import draw_array

__all__ = ["shape_values", "pad_values", "conv_padding_values"]


def _environment(sig: Signature, spec: OpSpec) -> dict:
    env: dict = dict(sig.attributes)
    for ts, t in zip(spec.inputs, spec.split_inputs(list(sig.input_types))):
        env[ts.name] = t
    for ts, t in zip(spec.outputs, spec.split_outputs(list(sig.result_types))):
        env[ts.name] = t
    return env


def _fits(values, et: ElementType) -> bool:
    return et.is_integer and all(et.int_min <= int(v) <= et.int_max for v in values)


def shape_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                 shape, rng: np.random.Generator, param: str) -> np.ndarray:
    """Every row: the list ``param`` (an expression) gives for this signature."""
    try:
        values = [int(v) for v in ex.evaluate(param, _environment(sig, spec))]
    except (ex.ExpressionError, TypeError, ValueError, IndexError, KeyError):
        return draw_array(et, shape, rng)
    if len(shape) != 2 or shape[1] != len(values) or not _fits(values, et):
        return draw_array(et, shape, rng)
    return np.broadcast_to(np.asarray(values, np.int64), shape).astype(et.dtype)


def _pad_choices(d: int, r: int) -> list[tuple[int, int, int]]:
    """Every (low, high, interior) with interior in [0, 2], low and high in pad's
    generated range (neither edge cuts more than 3 nor more than is there), that gives
    a dimension of size ``d`` the size ``r``."""
    out = []
    for it in range(3):
        p = d + max(d - 1, 0) * it
        for lo in range(-min(p, 3), r + 4):
            hi = r - p - lo
            if hi >= -min(p + lo, 3):
                out.append((lo, hi, it))
    return out


def pad_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
               shape, rng: np.random.Generator, param: str):
    """``{low index: lows, high index: highs, interior index: interiors}``, a fresh
    decomposition per row (see the module docstring)."""
    names = [t.name for t in spec.inputs]
    try:
        lo_i, hi_i, it_i = (names.index(n) for n in
                            ("edge_padding_low", "edge_padding_high", "interior_padding"))
        operand = sig.input_types[names.index("operand")]
        result = sig.result_types[0]
        types = [sig.input_types[i] for i in (lo_i, hi_i, it_i)]
    except (ValueError, IndexError):
        return draw_array(et, shape, rng)
    n = operand.rank
    choices = [_pad_choices(d, r) for d, r in zip(operand.shape, result.shape)]
    if index != lo_i or result.rank != n or len(shape) != 2 or \
            any(t.shape != (n,) or t.element_type != et for t in types) or \
            not all(choices) or not _fits([v for c in choices for x in c for v in x], et):
        return draw_array(et, shape, rng)
    rows = np.zeros((3, shape[0], n), np.int64)
    for b in range(shape[0]):
        for j, c in enumerate(choices):
            rows[:, b, j] = c[int(rng.integers(0, len(c)))]
    return {i: rows[m].astype(et.dtype) for m, i in enumerate((lo_i, hi_i, it_i))}


def _conv_totals(dilated: int, window: int, stride: int, windows: int) -> list[int]:
    """The padded sizes P (low + dilated + high, P >= 0) that give ``windows`` windows."""
    if windows == 0:
        return [p for p in range(0, window) if p == 0 or window > p]
    first = window + (windows - 1) * stride
    return list(range(max(first, 1), first + stride))


def conv_padding_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                        shape, rng: np.random.Generator, param: str) -> np.ndarray:
    """dynamic_conv's ``padding``: per row and spatial dimension a padded size that gives
    the result's size there, split into low (from minus the dilated input size) and high."""
    a = sig.attributes
    try:
        lhs, rhs = sig.input_types[0], sig.input_types[1]
        result = sig.result_types[0]
        sp = list(zip(a["input_spatial_dimensions"], a["kernel_spatial_dimensions"],
                      a["output_spatial_dimensions"], a["window_strides"],
                      a["lhs_dilation"], a["rhs_dilation"]))
        dims = [(lhs.shape[i], rhs.shape[kd], result.shape[o], s, ld, rd)
                for i, kd, o, s, ld, rd in sp]
    except (KeyError, IndexError, TypeError):
        return draw_array(et, shape, rng)
    if len(shape) != 3 or shape[1:] != (len(dims), 2) or not et.is_signed:
        return draw_array(et, shape, rng)
    options = []
    for x, w, n, s, ld, rd in dims:
        dil = 0 if x == 0 else (x - 1) * ld + 1
        win = 0 if w == 0 else (w - 1) * rd + 1
        splits = [(lo, p - dil - lo) for p in _conv_totals(dil, win, max(s, 1), n)
                  for lo in range(-dil, p - dil + 4) if p - dil - lo >= -dil - lo
                  and -4 <= p - dil - lo <= p + 3]
        if not splits or not _fits([v for sp_ in splits for v in sp_], et):
            return draw_array(et, shape, rng)
        options.append(splits)
    out = np.zeros(shape, np.int64)
    for b in range(shape[0]):
        for j, c in enumerate(options):
            out[b, j] = c[int(rng.integers(0, len(c)))]
    return out.astype(et.dtype)
