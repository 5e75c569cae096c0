"""The quantized ops whose quantized text is the spec's own computation, not a plain
``dequantize_op_quantize`` of an element-wise op (specs/ops/*_quantized.yaml with a
``quantized_semantics`` key: clamp, select, compare, is_finite, reduce_precision).

Each spec file names the function of "Quantization computations" it follows, the op
applied in the expressed type and attributes fixed for it; nothing here names an op:

- ``dequantize_op_quantize(op, ..., type(result))``: every quantized operand
  dequantized (in the expressed type), ``op``'s own oracle there, quantized to the
  result's type (clamp, reduce_precision: the op's attributes pass through).
- ``dequantize_select_quantize(pred, on_true, on_false, type(result))``: the same with
  ``pred`` (not quantized) passed as it is.
- ``dequantize_compare(lhs, rhs, comparison_direction)``: both dequantized, compared as
  ``FLOAT`` (the spec file fixes ``compare_type``); the boolean result is not quantized.
- ``always_true`` (is_finite: "For quantized types, the result is always true").

``near_tie`` as in quantized_forms.yaml (oracles/quantization.py, ``form_interval``):
between the spec's own unrounded storage value and the exact one (operands dequantized
exactly, the op in float64), widened by the expressed type's roundings, every storage
value is faithful. ``rounded_compare``: where the expressed type's dequantize decides a
comparison the exact values decide the other way, either answer.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from conformance.core.numerics import round_to
from conformance.core.types import TensorType, element_type
from conformance.specs import SpecError, load_spec
from conformance.specs import SPEC_DIR
from conformance.specs.expressions import alternative, condition

from .quantized_values import NEAR_TIE_EPS, quantization_params, dequantize, quantize
from .registry import oracle_for, register_typed


@functools.lru_cache(maxsize=None)
def own_ops() -> dict[str, dict]:
    """``<op>_quantized`` -> its ``quantized_semantics`` (the spec files that have one)."""
    out = {}
    for path in sorted(SPEC_DIR.glob("*_quantized.yaml")):
        try:
            sem = load_spec(path.stem).data.get("quantized_semantics")
        except SpecError:
            continue
        if sem:
            out[path.stem] = dict(sem)
    return out


def _base_attrs(sem: dict, attrs) -> dict:
    return {**dict(attrs or {}), **dict(sem.get("attributes") or {})}


def _ready(input_types, values):
    """The operands with rank-0 ones given unit axes after the batch axes (as
    ``broadcast_ready``), and the number of batch axes (counted on the operand of the
    greatest rank)."""
    xs = [np.asarray(x) for x in values]
    rank = max(t.rank for t in input_types)
    top = [t.rank for t in input_types].index(rank)
    lead = xs[top].ndim - rank
    out = []
    for x, t in zip(xs, input_types):
        if t.rank < rank and x.ndim == lead + t.rank:
            x = x.reshape(x.shape[:lead] + (1,) * (rank - t.rank) + tuple(t.shape))
        out.append(x)
    return out, lead


def _floats(xs, input_types, lead, exact: bool):
    """Quantized operands dequantized (as the spec does, in the expressed type; or
    exactly, in float64); the others (select's pred) as they are."""
    out = []
    for x, t in zip(xs, input_types):
        qt = t.element_type
        if not qt.is_quantized:
            out.append(x)
        elif exact:
            s, z = quantization_params(qt, x.ndim, lead)
            out.append((x.astype(np.int64) - z).astype(np.float64) * s)
        else:
            out.append(dequantize(x, qt, lead))
    return out


def _apply(sem, floats, attrs, out_et, shape) -> np.ndarray:
    """The op's own oracle on the floats, its result of ``shape`` in ``out_et``."""
    with np.errstate(all="ignore"):
        out = oracle_for(sem["op"])(list(floats), _base_attrs(sem, attrs),
                                    [TensorType(tuple(shape), out_et)])
    return np.asarray(out[0] if isinstance(out, tuple) else out)


def _result_et(result_t, exact: bool):
    """Where the op's value lives: the result's expressed type (float64 for the exact
    value) for a quantized result, the result's own type (compare's i1) otherwise."""
    et = result_t.element_type
    if not et.is_quantized:
        return et
    return element_type("f64") if exact else et.expressed


def evaluate(name: str, xs, attrs, result_t, input_types, exact=False) -> np.ndarray:
    """The op's value before quantizing (``exact``: from the exact operands, in float64);
    ``result_t`` without the batch axes the operands carry."""
    sem = own_ops()[name]
    xs, lead = _ready(input_types, xs)
    top = max(xs, key=np.ndim)
    shape = top.shape[:lead] + tuple(result_t.shape)
    if sem["function"] == "always_true":
        return np.ones(shape, bool)
    return _apply(sem, _floats(xs, input_types, lead, exact), attrs,
                  _result_et(result_t, exact), shape)


def _make_oracle(name: str):
    def oracle(inputs, attrs, types, input_types):
        """The spec's quantized computation of the op (module docstring)."""
        result_t = TensorType(tuple(types[0].shape)[len(types[0].shape) - _rank(input_types):],
                              types[0].element_type)
        value = evaluate(name, inputs, attrs, result_t, input_types).reshape(types[0].shape)
        et = types[0].element_type
        return quantize(value, et, 0) if et.is_quantized else value.astype(bool)
    oracle.__name__ = oracle.__qualname__ = name
    return oracle


def _rank(input_types) -> int:
    """The result's rank: every op here is element-wise over its operand of greatest rank."""
    return max(t.rank for t in input_types)


for _name in own_ops():
    register_typed(_name)(_make_oracle(_name))


# ---------------------------------------------------------------------------
# What else the spec allows
# ---------------------------------------------------------------------------

def own_interval(sig, values):
    """``(kmin, kmax, spec_v, exact_v)`` for a quantized result (as ``form_interval``):
    the storage values between the roundings of the spec's unrounded storage value and
    the exact one, each widened by :data:`NEAR_TIE_EPS` expressed-type epsilons per unit
    of the terms' magnitudes."""
    n = len(sig.input_types)
    out_t = sig.result_types[0]
    qt = out_t.element_type
    e = qt.expressed
    attrs = sig.attributes
    with np.errstate(all="ignore"):
        f_spec = evaluate(sig.op, values[:n], attrs, out_t, sig.input_types).astype(np.float64)
        f_exact = evaluate(sig.op, values[:n], attrs, out_t, sig.input_types,
                           exact=True).astype(np.float64)
        s, z = quantization_params(qt, f_spec.ndim, 0)
        scaled = round_to(f_spec / s, e).astype(np.float64)
        spec_v = round_to(scaled + round_to(z, e).astype(np.float64), e).astype(np.float64)
        exact_v = f_exact / s + z
        eps = float(ml_dtypes.finfo(e.dtype).eps)
        band = NEAR_TIE_EPS * eps * (np.abs(f_exact) / s + np.abs(z) + np.abs(exact_v))
        band = np.where(np.isfinite(band), band, 0.0)
        lo = np.minimum(spec_v, exact_v) - band
        hi = np.maximum(spec_v, exact_v) + band
        kmin = np.clip(np.ceil(lo - 0.5), qt.storage_min, qt.storage_max)
        kmax = np.clip(np.floor(hi + 0.5), qt.storage_min, qt.storage_max)
    return kmin, kmax, spec_v, exact_v


@condition("quantized_own_near_tie")
def own_near_tie_mask(sig, *values):
    """Elements where more than one storage value is faithful and the spec's evaluation
    rounded on the way (an exact tie computed exactly keeps round half to even)."""
    kmin, kmax, spec_v, exact_v = own_interval(sig, values)
    return (kmin != kmax) & (spec_v != exact_v) & ~np.isnan(spec_v) & ~np.isnan(exact_v)


@alternative("quantized_own_interval")
def own_interval_member(sig, *values):
    """The storage values between the two faithful bounds, as a test of the backend's."""
    from .registry import Membership
    kmin, kmax, *_ = own_interval(sig, values)

    def test(actual):
        a = np.asarray(actual[0]).astype(np.float64)
        return [(a >= kmin) & (a <= kmax)]
    return Membership(test)


@condition("quantized_compare_rounded")
def compare_rounded_mask(sig, *values):
    """Elements whose comparison of the dequantized values (rounded to the expressed
    type) differs from that of the exact values: a backend that compares exactly, or
    in more precision, gives the other answer."""
    n = len(sig.input_types)
    out_t = sig.result_types[0]
    spec = evaluate(sig.op, values[:n], sig.attributes, out_t, sig.input_types)
    exact = evaluate(sig.op, values[:n], sig.attributes, out_t, sig.input_types, exact=True)
    return np.asarray(spec) != np.asarray(exact)
