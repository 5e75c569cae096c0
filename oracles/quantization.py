"""Quantized ops: uniform_quantize, uniform_dequantize, add on quantized tensors, and the
quantized forms of specs/quantized_forms.yaml (``<op>_quantized``: dequantize, ``<op>``'s
own oracle in the expressed type, quantize; near_tie generalised to an interval).

Written from "Quantization computations" of the current spec (stablehlo-spec-2026-08.md):

- ``dequantize(x)``: ``convert(x - zero_point, expressed) * scale``, the product rounded
  to the expressed type (IEEE-754 multiplication). The spec subtracts in the storage
  type; the difference is taken exactly here (the prose's ``f = (i - zero_point) *
  scale``: in ui8 storage the storage-type subtraction would wrap below the zero point),
  and is exact in every drawn family's expressed type.
- ``quantize(x, type)``: ``x / scale``, ``+ zero_point``, each rounded to the expressed
  type; ``clamp(storage_min, ., storage_max)``; ``round_nearest_even``; convert.
- ``dequantize_op_quantize(add, lhs, rhs, type)``: dequantize both, add in the expressed
  type, quantize.

A scale is ``constant(scale, expressed_type)`` (compute_scales): rounded to the
expressed type first. Per-axis types use each slice's parameters (the quantization
dimension counted in the signature's shape; arrays may carry leading batch axes).

The spec fixes every rounding of those steps, but an implementation that folds the scales
into one multiplier (``(lhs_scale / result_scale) * (x - zp)``) or keeps more precision
differs from the spec's order of operations only where the exact value lies within the
expressed type's rounding of a .5 tie: ``near_tie`` allows both storage neighbours of
the exact value there, besides the spec's own value (:func:`near_tie_mask`,
:func:`exact_neighbour`).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.numerics import round_to
from conformance.core.types import QuantizedElementType
from conformance.specs.expressions import alternative, condition

from .quantized_values import (  # noqa: F401 - the computations, for this module's users
    NEAR_TIE_EPS, dequantize, quantization_params, quantize,
    quantize_steps, to_storage)
from .registry import register_typed


def _lead(x: np.ndarray, t) -> int:
    return x.ndim - t.rank


def _quantized(t, op: str) -> QuantizedElementType:
    et = t.element_type
    if not isinstance(et, QuantizedElementType):
        raise ValueError(f"{op}: {t} is not a quantized tensor")
    return et


@register_typed("uniform_dequantize")
def uniform_dequantize(inputs, attrs, types, input_types):
    (x,), (t,) = inputs, input_types
    return dequantize(np.asarray(x), _quantized(t, "uniform_dequantize"), _lead(np.asarray(x), t))


def _float_operand(x: np.ndarray, t) -> np.ndarray:
    """uniform_quantize's operand in its expressed type: a float operand as it is, a
    quantized one dequantized."""
    if t.element_type.is_quantized:
        return dequantize(x, t.element_type, _lead(x, t))
    return x


@register_typed("uniform_quantize")
def uniform_quantize(inputs, attrs, types, input_types):
    (x,), (t,) = inputs, input_types
    x = np.asarray(x)
    return quantize(_float_operand(x, t), _quantized(types[0], "uniform_quantize"), _lead(x, t))


def _sum(lhs, rhs, tl, tr):
    a = dequantize(np.asarray(lhs), _quantized(tl, "add"), _lead(np.asarray(lhs), tl))
    b = dequantize(np.asarray(rhs), _quantized(tr, "add"), _lead(np.asarray(rhs), tr))
    return a, b


@register_typed("add_quantized")
def add_quantized(inputs, attrs, types, input_types):
    lhs, rhs = (np.asarray(x) for x in inputs)
    a, b = _sum(lhs, rhs, *input_types)
    qt = _quantized(types[0], "add")
    e = qt.expressed
    total = round_to(a.astype(np.float64) + b.astype(np.float64), e)    # add, IEEE-754
    return quantize(total, qt, _lead(lhs, input_types[0]))


# ---------------------------------------------------------------------------
# near_tie: the exact value within the expressed type's rounding of a .5 tie
# ---------------------------------------------------------------------------



def _exact(sig, values):
    """(exact value of ``x / scale + zero_point`` in the result's storage, the band
    within which the expressed type's roundings move it), float64, for the op's operand
    values. The dequantized operands are exact in float64 for the drawn families (a
    product of an integer below 2**17 and a scale of at most 11 significant bits)."""
    out_t = sig.result_types[0]
    qt = _quantized(out_t, sig.op)
    e = qt.expressed
    lead = values[0].ndim - sig.input_types[0].rank
    terms = []
    for x, t in zip(values, sig.input_types):
        x = np.asarray(x)
        if t.element_type.is_quantized:
            s, z = quantization_params(t.element_type, x.ndim, lead)
            terms.append((x.astype(np.int64) - z).astype(np.float64) * s)
        else:
            terms.append(x.astype(np.float64))
    s, z = quantization_params(qt, terms[0].ndim, lead)
    total = np.sum(np.broadcast_arrays(*terms), axis=0) if len(terms) > 1 else terms[0]
    v = total / s + z
    size = sum(np.abs(t) for t in terms) / s + np.abs(z) + np.abs(v)
    eps = float(ml_dtypes.finfo(e.dtype).eps)
    return v, NEAR_TIE_EPS * eps * size, qt


def _neighbours(v, qt):
    lo = np.clip(np.floor(v), qt.storage_min, qt.storage_max)
    hi = np.clip(np.floor(v) + 1, qt.storage_min, qt.storage_max)
    return lo, hi


def _spec_unrounded(sig, values) -> np.ndarray:
    """The spec's ``x_scaled_add_zp`` (before clamp and rounding), float64: the value
    the expressed type's arithmetic gives for the exact one."""
    ins = [np.asarray(x) for x in values]
    lead = ins[0].ndim - sig.input_types[0].rank
    floats = [dequantize(x, t.element_type, lead) if t.element_type.is_quantized else x
              for x, t in zip(ins, sig.input_types)]
    qt = _quantized(sig.result_types[0], sig.op)
    e = qt.expressed
    total = floats[0] if len(floats) == 1 else \
        round_to(floats[0].astype(np.float64) + floats[1].astype(np.float64), e)
    s, z = quantization_params(qt, np.ndim(total), lead)
    scaled = round_to(np.asarray(total, np.float64) / s, e)
    return round_to(scaled.astype(np.float64) + round_to(z, e).astype(np.float64),
                    e).astype(np.float64)


@condition("quantized_near_tie")
def near_tie_mask(sig, *values):
    """Elements whose exact value lies within the band of a .5 tie (and in range), where
    the spec's evaluation rounded on the way (where it is exact, its round half to even
    of that exact value is the one answer)."""
    values = values[:len(sig.input_types)]
    with np.errstate(all="ignore"):
        v, band, qt = _exact(sig, values)
        near = np.abs(v - np.floor(v) - 0.5) <= band
        inside = (v > qt.storage_min - 1) & (v < qt.storage_max + 1)
        rounded = _spec_unrounded(sig, values) != v
    return np.isfinite(v) & near & inside & rounded


@alternative("quantized_exact_neighbour")
def exact_neighbour(sig, *values):
    """The storage neighbour of the exact value on one side (the last argument:
    ``'down'`` or ``'up'``), clamped to the storage range. With a low-precision
    expressed type (bf16) the spec's own evaluation may land on neither (its roundings
    add up to more than one storage step); the oracle's value stays allowed besides."""
    *values, side = values
    expected = np.asarray(values[-1])
    with np.errstate(all="ignore"):
        v, _, qt = _exact(sig, values[:len(sig.input_types)])
        lo, hi = _neighbours(np.where(np.isfinite(v), v, 0.0), qt)
    pick = lo if side == "down" else hi
    return np.broadcast_to(pick, expected.shape).astype(np.int64).astype(expected.dtype)


@condition("quantized_per_axis")
def per_axis_mask(sig, lhs):
    """Every element, where an operand or the result is per-axis quantized."""
    per_axis = any(getattr(t.element_type, "is_per_axis", False)
                   for t in tuple(sig.input_types) + tuple(sig.result_types))
    return np.full(np.shape(lhs), per_axis)


# ---------------------------------------------------------------------------
# The quantized forms of quantized_forms.yaml: dequantize_op_quantize(op, ...)
# ---------------------------------------------------------------------------

def _base_op(name: str) -> str:
    from conformance.specs import quantized_forms
    return quantized_forms()[name]


def _apply(base: str, floats, result_t, et) -> np.ndarray:
    """``base``'s own oracle on float arrays of element type ``et`` (its result of the
    operands' shape, batch axes included, in ``et``)."""
    from conformance.core.types import TensorType
    from .registry import oracle_for
    shape = np.broadcast_shapes(*(np.shape(f) for f in floats))
    with np.errstate(all="ignore"):
        out = oracle_for(base)(list(floats), {}, [TensorType(shape, et)])
    return np.asarray(out[0] if isinstance(out, tuple) else out)


def _spec_floats(name, xs, input_types, qt, lead):
    """The operands dequantized as the spec's ``dequantize`` does (in the expressed type)."""
    return [dequantize(x, _quantized(t, name), lead) for x, t in zip(xs, input_types)]


def _make_form_oracle(name: str):
    base = _base_op(name)

    def oracle(inputs, attrs, types, input_types):
        """``dequantize_op_quantize(base, ..., type(result))``: dequantize every operand,
        ``base``'s own oracle in the expressed type, quantize."""
        xs = [np.asarray(x) for x in inputs]
        qt = _quantized(types[0], name)
        lead = _lead(xs[0], input_types[0])
        value = _apply(base, _spec_floats(name, xs, input_types, qt, lead), types[0],
                       qt.expressed)
        return quantize(value, qt, lead)
    oracle.__name__ = oracle.__qualname__ = name
    return oracle


def _register_forms() -> None:
    from conformance.specs import quantized_forms
    for name in quantized_forms():
        register_typed(name)(_make_form_oracle(name))


_register_forms()


def _op_bound(base: str, et) -> float:
    """``base``'s accuracy in ULPs of ``et`` (0 for an exact op)."""
    from conformance.specs import load_spec
    acc = load_spec(base).accuracy(et)
    return acc.bound if acc.kind == "ulp" else 0.0


def form_interval(sig, values):
    """For a quantized form's operand values: ``(kmin, kmax, spec_v, exact_v, f_spec,
    f_exact)``. ``spec_v`` is the spec's ``x_scaled_add_zp`` (each step rounded to the
    expressed type), ``exact_v`` the same from the exact dequantized operands and the
    op in float64; the storage values between the roundings of ``min(spec_v, exact_v) -
    band`` and ``max(...) + band`` (clamped) are what a faithful implementation gives:
    ``band`` covers the expressed type's roundings of the quantize steps
    (:data:`NEAR_TIE_EPS`) and the op's own ULP bound in the expressed type."""
    name = sig.op
    base = _base_op(name)
    n = len(sig.input_types)
    xs = [np.asarray(x) for x in values[:n]]
    out_t = sig.result_types[0]
    qt = _quantized(out_t, name)
    e = qt.expressed
    lead = xs[0].ndim - sig.input_types[0].rank
    from conformance.core.types import element_type
    with np.errstate(all="ignore"):
        f_spec = _apply(base, _spec_floats(name, xs, sig.input_types, qt, lead), out_t,
                        e).astype(np.float64)
        s, z = quantization_params(qt, f_spec.ndim, lead)
        scaled = round_to(f_spec / s, e).astype(np.float64)
        spec_v = round_to(scaled + round_to(z, e).astype(np.float64), e).astype(np.float64)
        exact_in = []
        for x, t in zip(xs, sig.input_types):
            si, zi = quantization_params(_quantized(t, name), x.ndim, lead)
            exact_in.append((x.astype(np.int64) - zi).astype(np.float64) * si)
        f_exact = _apply(base, exact_in, out_t, element_type("f64")).astype(np.float64)
        exact_v = f_exact / s + z
        eps = float(ml_dtypes.finfo(e.dtype).eps)
        band = NEAR_TIE_EPS * eps * (np.abs(f_exact) / s + np.abs(z) + np.abs(exact_v)) \
            + _op_bound(base, e) * eps * np.abs(f_exact) / s
        band = np.where(np.isfinite(band), band, 0.0)
        lo = np.minimum(spec_v, exact_v) - band
        hi = np.maximum(spec_v, exact_v) + band
        kmin = np.clip(np.ceil(lo - 0.5), qt.storage_min, qt.storage_max)
        kmax = np.clip(np.floor(hi + 0.5), qt.storage_min, qt.storage_max)
    return kmin, kmax, spec_v, exact_v, f_spec, f_exact


@condition("quantized_op_near_tie")
def form_near_tie_mask(sig, *values):
    """Elements where more than one storage value is faithful (:func:`form_interval`):
    where the spec's evaluation rounded on the way (it differs from the exact value) or
    the op itself has an accuracy bound; an exact tie computed without rounding has
    round half to even as its one answer."""
    kmin, kmax, spec_v, exact_v, f_spec, f_exact = form_interval(sig, values)
    inexact = (spec_v != exact_v) | (_op_bound(_base_op(sig.op),
                                               sig.result_types[0].element_type.expressed) > 0)
    return (kmin != kmax) & inexact & ~np.isnan(f_spec) & ~np.isnan(f_exact)


@alternative("quantized_op_interval")
def form_interval_member(sig, *values):
    """The storage values between the two faithful bounds (:func:`form_interval`), as a
    test of the backend's values."""
    from .registry import Membership
    kmin, kmax, *_ = form_interval(sig, values)

    def test(actual):
        a = np.asarray(actual[0]).astype(np.float64)
        return [(a >= kmin) & (a <= kmax)]
    return Membership(test)


@condition("quantized_op_nan")
def form_nan_mask(sig, *values):
    """Elements where the op's value in the expressed type (or exactly) is NaN."""
    *_, f_spec, f_exact = form_interval(sig, values)
    return np.isnan(f_spec) | np.isnan(f_exact)


# The quantized ops with a computation of their own (clamp, select, compare, is_finite,
# reduce_precision; specs/ops/*_quantized.yaml's quantized_semantics) register there.
from . import quantized_own  # noqa: E402,F401 - registers the ops of its own wording
