"""Oracles of ``batch_norm_inference``, ``batch_norm_training`` and ``batch_norm_grad``
(spec family ``batch_norm``): the spec's decompositions, evaluated at float64.

The spec defines the three ops as compositions of other ops (003 "### batch_norm_*"):
``compute_mean`` is a reduce-add over every dimension but ``feature_index`` divided by the
constant ``num_elements(operand) / dim(operand, feature_index)``, the variance the mean of
the squared centred operand (two passes), the normalisation ``(x − mean) / sqrt(variance +
epsilon)`` scaled and shifted; batch_norm_grad follows XLA's batchnorm_expander (the spec
quotes it). Every op is evaluated here in float64 in the decomposition's order, and each
result rounded once to the element type ``E``. The decomposition's constants have type
``E`` (they are added to or divide tensors of ``E``): the element count per feature ``m``
and ``epsilon`` (an f32 attribute) are rounded to ``E`` first (bf16 holds 257 as 256, f16
holds 1e-5 as a subnormal); what a backend that keeps them exact can differ by is part of
the bound (conformance/checking/verdicts/batch_norm.py).

Every function takes arrays with ``lead`` leading batch axes before the operand's own
axes (0 for one case, 1 for a stacked batch), so that the verdict evaluates a whole batch
in one call; 1-dimensional inputs then have shape ``lead + (C,)``.

Conditions (implementation_defined rules of the specs): ``batch_norm_zero`` (results that
are zero: either sign, an order of operations the decomposition's rounding does not fix)
and ``batch_norm_unstable_denominator`` (features whose ``variance + epsilon`` is within
the reductions' rounding of zero or below: 0/0, x/0 or a square root of a negative number
depending on the tree).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.numerics import round_to
from conformance.core.types import element_type
from conformance.specs.expressions import alternative, condition

from .registry import register

__all__ = ["inference", "training", "grad", "constants", "feature_axes", "bcast",
           "mean_error", "variance_error", "unit_roundoff"]

_U64 = 2.0 ** -53


def unit_roundoff(dtype) -> float:
    return float(ml_dtypes.finfo(element_type(np.dtype(dtype)).dtype).eps) / 2


def gamma(n, u: float):
    n = np.asarray(n, np.float64)
    return np.where(n * u < 1, n * u / np.maximum(1 - n * u, 1e-300), np.inf)


def feature_axes(rank: int, fi: int, lead: int) -> tuple[int, ...]:
    """The axes a feature's statistics reduce over (every operand axis but fi)."""
    return tuple(lead + i for i in range(rank) if i != fi)


def bcast(v: np.ndarray, fi: int, rank: int, lead: int) -> np.ndarray:
    """A per-feature array (lead + (C,)) shaped to broadcast against the operand."""
    v = np.asarray(v)
    shape = list(v.shape[:lead]) + [1] * rank
    shape[lead + fi] = v.shape[-1]
    return v.reshape(shape)


def constants(dtype, operand_shape, fi: int, epsilon: float) -> tuple[float, float, float]:
    """(m, m rounded to E, epsilon as the f32 constant rounded to E) for an operand of
    ``operand_shape`` (its own axes, no batch axis)."""
    et = element_type(np.dtype(dtype))
    dims = list(operand_shape)
    m = float(np.prod(dims, dtype=np.float64) / dims[fi]) if dims[fi] else 0.0
    m_e = float(round_to(np.array([m]), et).astype(np.float64)[0])
    eps32 = float(np.float32(epsilon))
    eps_e = float(round_to(np.array([eps32]), et).astype(np.float64)[0])
    return m, m_e, eps_e


def _w(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _mean(x, fi, rank, lead, m_e):
    return x.sum(axis=feature_axes(rank, fi, lead)) / m_e


def inference(x, scale, offset, mean, variance, eps_e, fi, lead=0):
    """batch_norm_inference's decomposition at float64 (arrays of any float type)."""
    x = _w(x)
    rank = x.ndim - lead
    b = lambda v: bcast(_w(v), fi, rank, lead)   # noqa: E731
    centered = x - b(mean)
    stddev = np.sqrt(b(variance) + eps_e)
    return b(scale) * (centered / stddev) + b(offset)


def training(x, scale, offset, eps_e, m_e, fi, lead=0):
    """batch_norm_training's decomposition at float64: (output, batch_mean, batch_var)."""
    x = _w(x)
    rank = x.ndim - lead
    mean = _mean(x, fi, rank, lead, m_e)
    centered = x - bcast(mean, fi, rank, lead)
    var = _mean(centered * centered, fi, rank, lead, m_e)
    return inference(x, scale, offset, mean, var, eps_e, fi, lead), mean, var


def grad(x, scale, mean, variance, grad_output, eps_e, m_e, fi, lead=0):
    """batch_norm_grad's decomposition at float64: (grad_operand, grad_scale,
    grad_offset), with the spec's (batchnorm_expander's) temporaries."""
    x, g = _w(x), _w(grad_output)
    rank = x.ndim - lead
    axes = feature_axes(rank, fi, lead)
    b = lambda v: bcast(_w(v), fi, rank, lead)   # noqa: E731
    centered = x - b(mean)
    var_eps = b(variance) + eps_e
    stddev = np.sqrt(var_eps)
    normalized = centered / stddev
    i1 = g * m_e
    i2 = b(g.sum(axis=axes))
    i3 = b((g * centered).sum(axis=axes))
    i4 = i3 * centered
    i5 = i4 / var_eps
    grad_operand = ((b(scale) / stddev) / m_e) * ((i1 - i2) - i5)
    grad_scale = (g * normalized).sum(axis=axes)
    grad_offset = g.sum(axis=axes)
    return grad_operand, grad_scale, grad_offset


def _rounded(values, types):
    return tuple(round_to(np.asarray(v, np.float64), t.element_type).reshape(t.shape)
                 for v, t in zip(values, types))


@register("batch_norm_inference")
def _inference(inputs, attrs, types):
    x, scale, offset, mean, variance = inputs
    fi = int(attrs["feature_index"])
    _, _, eps_e = constants(x.dtype, x.shape, fi, attrs["epsilon"])
    return _rounded([inference(x, scale, offset, mean, variance, eps_e, fi)], types)


@register("batch_norm_training")
def _training(inputs, attrs, types):
    x, scale, offset = inputs
    fi = int(attrs["feature_index"])
    _, m_e, eps_e = constants(x.dtype, x.shape, fi, attrs["epsilon"])
    return _rounded(training(x, scale, offset, eps_e, m_e, fi), types)


@register("batch_norm_grad")
def _grad(inputs, attrs, types):
    x, scale, mean, variance, grad_output = inputs
    fi = int(attrs["feature_index"])
    _, m_e, eps_e = constants(x.dtype, x.shape, fi, attrs["epsilon"])
    return _rounded(grad(x, scale, mean, variance, grad_output, eps_e, m_e, fi), types)


# ---------------------------------------------------------------------------
# Error analysis shared by the bound (conformance/checking/verdicts/batch_norm.py) and the
# rules here
# ---------------------------------------------------------------------------

def mean_error(x, fi, lead, m, u) -> np.ndarray:
    """Per feature: how far a mean computed in E by any reduction tree (and the divisor
    rounded to E or not) can be from the exact mean: (γ(m−1) + 3u)·Σ|x|/m (Higham §4.2:
    the tree; one rounding each for the division and the divisor, and u for the result)."""
    x = _w(x)
    rank = x.ndim - lead
    with np.errstate(all="ignore"):
        a = np.where(np.isfinite(x), np.abs(x), 0.0).sum(axis=feature_axes(rank, fi, lead))
        return (gamma(max(m - 1, 0), u) + 3 * u) * a / max(m, 1)


def variance_error(x, mean, err_mean, fi, lead, m, u) -> np.ndarray:
    """Per feature: how far the two-pass variance mean((x − mean)²) computed in E by any
    trees can be from the exact one, the computed mean off by ``err_mean``: each centred
    value d̂ = (x − μ̂)(1 + δ) with |x − μ̂| ≤ |x − μ| + e, squared (u), summed (γ(m−1)),
    divided (2u): (γ(m + 3)) · mean((|x − μ| + e)²) + 2·e·mean|x − μ| + e²."""
    x = _w(x)
    rank = x.ndim - lead
    axes = feature_axes(rank, fi, lead)
    with np.errstate(all="ignore"):
        d = np.abs(x - bcast(mean, fi, rank, lead))
        e = bcast(err_mean, fi, rank, lead)
        d2 = ((d + e) ** 2).sum(axis=axes) / max(m, 1)
        d1 = d.sum(axis=axes) / max(m, 1)
        # a backward-stable variance: the inputs perturbed by u relatively
        dx = (d * (np.abs(x) + np.abs(bcast(mean, fi, rank, lead)))).sum(axis=axes) / max(m, 1)
        return gamma(m + 3, u) * d2 + 2 * err_mean * d1 + err_mean ** 2 + 2 * u * dx


def _stats(op, inputs, attrs, lead):
    """(variance + eps_E, its error) per feature for the three ops."""
    x = np.asarray(inputs[0])
    fi = int(attrs["feature_index"])
    own = x.shape[lead:]
    m, m_e, eps_e = constants(x.dtype, own, fi, attrs["epsilon"])
    u = unit_roundoff(x.dtype)
    eps32 = float(np.float32(attrs["epsilon"]))
    d_eps = abs(eps32 - eps_e) + u * eps32
    if op == "batch_norm_training":
        with np.errstate(all="ignore"):
            _, mean, var = training(x, inputs[1], inputs[2], eps_e, m_e, fi, lead)
        err_v = variance_error(x, mean, mean_error(x, fi, lead, m, u), fi, lead, m, u)
    else:
        var = _w(inputs[4] if op == "batch_norm_inference" else inputs[3])
        err_v = np.zeros(var.shape)
    return var + eps_e, err_v + d_eps + 2 * u * np.abs(var + eps_e)


@condition("batch_norm_unstable_denominator")
def unstable_denominator(op, inputs, feature_index, epsilon, results, affected) -> list:
    """Per result: the elements of features whose variance + epsilon is within the
    rounding the spec allows of zero, or below it (inputs with a leading batch axis), for
    the results ``affected`` says depend on it; no element of the others."""
    attrs = {"feature_index": feature_index, "epsilon": epsilon}
    x = np.asarray(inputs[0])
    fi = int(feature_index)
    with np.errstate(all="ignore"):
        t, err = _stats(op, list(inputs), attrs, 1)
        bad = ~(t > 2 * err)
        bad &= np.isfinite(t)           # a NaN/inf variance propagates: judged exactly
    out = []
    for r, hit in zip(results, affected):
        r = np.asarray(r)
        if not hit:
            out.append(np.zeros(r.shape, bool))
        elif r.ndim == x.ndim:          # an operand-shaped result
            out.append(np.broadcast_to(bcast(bad, fi, x.ndim - 1, 1), r.shape))
        else:
            out.append(np.broadcast_to(bad, r.shape))
    return out


@condition("batch_norm_zero")
def zero(*results) -> list[np.ndarray]:
    """Per result: the elements where the oracle's result is zero (either sign allowed)."""
    out = []
    for r in results:
        with np.errstate(invalid="ignore"):
            out.append(np.asarray(r).astype(np.float64) == 0)
    return out


# ---------------------------------------------------------------------------
# The count the decomposition divides by, where the element type cannot hold it
# ---------------------------------------------------------------------------

def _other_divisor(dtype, operand_shape, fi: int, epsilon: float) -> float | None:
    """The other neighbour in E of the count m (``constant(m, E)``, TBD #180 where E cannot
    represent m: 100 in f8E3M4 rounds to infinity, 15.5 lies below), None where m is exact."""
    m, m_e, _ = constants(dtype, operand_shape, fi, epsilon)
    if m_e == m:
        return None
    et = element_type(np.dtype(dtype))
    values = np.arange(1 << et.bits, dtype=np.uint64).astype(np.uint8 if et.bits <= 8
                                                               else np.uint16)
    finite = values.view(et.dtype).astype(np.float64) if et.bits <= 16 else None
    if finite is None:                  # f32/f64 hold every count a plan draws exactly
        return None
    finite = finite[np.isfinite(finite)]
    below, above = finite[finite < m], finite[finite > m]
    other = below.max() if m_e > m else (above.min() if above.size else np.inf)
    return float(other)


@condition("batch_norm_divisor_inexact")
def divisor_inexact(operand, feature_index, epsilon, results) -> list[np.ndarray]:
    """Per result: every element where the count is not representable in E (the whole
    result depends on the divisor), none elsewhere."""
    x = np.asarray(operand)
    hit = _other_divisor(x.dtype, x.shape[1:], int(feature_index), epsilon) is not None
    return [np.full(np.asarray(r).shape, hit) for r in results]


@alternative("batch_norm_training_other_divisor")
def training_other_divisor(operand, scale, offset, feature_index, epsilon, results):
    """batch_norm_training's results with the count rounded to its other neighbour in E
    (inputs with a leading batch axis); the oracle's where the count is exact."""
    x = np.asarray(operand)
    fi = int(feature_index)
    other = _other_divisor(x.dtype, x.shape[1:], fi, epsilon)
    if other is None:
        return list(results)
    _, _, eps_e = constants(x.dtype, x.shape[1:], fi, epsilon)
    with np.errstate(all="ignore"):
        values = training(x, scale, offset, eps_e, other, fi, lead=1)
    et = element_type(x.dtype)
    return [round_to(np.asarray(v, np.float64), et).reshape(np.asarray(r).shape)
            for v, r in zip(values, results)]
