"""The ``reduction`` bound: what a reduction's implementation-defined tree allows, per
result, as data.

A reduction's spec (reduce, reduce_window) names it with the body's ops and the error
model each stands for::

    accuracy:
      default: {bound: reduction, region: body, add: sum, multiply: product}

For result ``k``, the op of the body's result ``k`` (``add`` in ``add(arg k, arg
N+k)``, conformance.oracles.reduction.components) picks the model; a result whose op the
entry does not name, and every integer and boolean result, is judged exactly (bound 0):
maximum, minimum, the bitwise ops, an arg-max give the same value in every tree (the
implementation_defined rules mask what they do not). The leaves of every result element
come from the op's geometry (``conformance.oracles.reduction.LEAVES``), init value
included once.

- ``sum`` (float and complex addition): any tree of ``n`` leaves is within
  ``γ(n−1)·Σ|leaf|`` of the exact sum at the result's unit roundoff ``u`` (Higham §4.2),
  the oracle's float64 sum rounded once within ``(u + γ₆₄(n))·Σ|leaf|`` of it; the bound
  is their sum (complex: per part, combined as a modulus). It is 0 where every partial
  sum of every tree is representable: every leaf a multiple of the smallest power of two
  ``G`` dividing one of them and ``Σ|leaf| <= 2^p·G`` (``p``: the precision), so that
  every addition is exact and all trees agree bit for bit (the exact-value inputs of
  generators/reduction.py make this common, on bf16 and fp8 too).
- ``product`` (float and complex multiplication): relative to the product, ``γ(n−1)``
  for any tree plus the oracle's ``u + γ₆₄(n)`` (complex: eight times ``u`` per step,
  multiply's own ``rel_eps: 4``), as long as no partial product leaves the normal range
  (the spec's rules mask those elements); 0 where the product of the leaves' odd parts
  stays below ``2^p``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.types import element_type
from conformance.oracles import reduction
from conformance.verdicts import (Judgement, bound_function, flush_allowance, gamma,
                                  unit_roundoff)

__all__ = ["reduction_bound", "reduction_flush", "MODELS"]

_U64 = 2.0 ** -53


def _precision(et) -> int:
    return int(ml_dtypes.finfo(et.component.dtype).nmant) + 1


def _parts(x: np.ndarray) -> list[np.ndarray]:
    return [x.real.astype(np.float64), x.imag.astype(np.float64)] if np.iscomplexobj(x) \
        else [x.astype(np.float64)]


def _sum_bound(leaves: np.ndarray, expected: np.ndarray, et) -> np.ndarray:
    """Per result element: the largest |actual − oracle| a tree of these leaves allows."""
    n = leaves.shape[-1]
    u = unit_roundoff(et)
    rel = gamma(max(n - 1, 0), u) + u + gamma(n + 1, _U64)
    p = _precision(et)
    big = float(ml_dtypes.finfo(et.component.dtype).max)
    total = np.zeros(leaves.shape[:-1])
    exact = np.ones(leaves.shape[:-1], bool)
    for part in _parts(np.asarray(leaves)):
        finite = np.isfinite(part)
        a = np.where(finite, np.abs(part), 0.0)
        s = a.sum(axis=-1)
        g = np.where(finite, reduction.granularity(part), np.inf)
        smallest = g.min(axis=-1) if n else np.full(s.shape, np.inf)
        exact &= (s <= np.ldexp(1.0, p) * smallest) & (s < big) | (s == 0)
        total = total + (rel * s) ** 2
    return np.where(exact, 0.0, np.sqrt(total))


def _product_bound(leaves: np.ndarray, expected: np.ndarray, et) -> np.ndarray:
    n = leaves.shape[-1]
    u = unit_roundoff(et) * (8 if et.is_complex else 1)
    rel = gamma(max(n - 1, 0), u) + u + gamma(n + 1, _U64)
    magnitude = np.abs(np.asarray(expected).astype(
        np.complex128 if et.is_complex else np.float64))
    bound = rel * magnitude * (1 + 2 * rel)
    if et.is_complex:
        return bound
    part = np.asarray(leaves).astype(np.float64)
    finite = np.isfinite(part) & (part != 0)
    a = np.where(finite, np.abs(part), 1.0)
    odd = a / np.where(finite, reduction.granularity(part), 1.0)
    bits = np.log2(odd).sum(axis=-1)
    exact = bits <= _precision(et) - 1e-6
    return np.where(exact, 0.0, bound)


#: error model name (the value of an op's key in the accuracy entry) -> bound function of
#: (leaves [batch, result..., n], oracle result [batch, result...], element type)
MODELS = {"sum": _sum_bound, "product": _product_bound}


def _attributes(j: Judgement) -> dict:
    """The attributes the leaves are read with: regions by name, and a collective's
    process grid where it has several processes (conformance/oracles/collectives.py)."""
    attrs = dict(j.sig.attributes)
    attrs.update(zip((r.name for r in j.spec.regions), j.sig.regions))
    if j.sig.num_replicas * j.sig.num_partitions > 1:
        attrs.update(num_replicas=j.sig.num_replicas, num_partitions=j.sig.num_partitions)
    return attrs


@bound_function("reduction")
def reduction_bound(j: Judgement) -> list[np.ndarray]:
    """Per result: the error bound of its body op's model, 0 for every other result."""
    options = j.accuracy.options
    names = [r.name for r in j.spec.regions]
    text = j.sig.regions[names.index(options.get("region", names[0]))]
    ops = reduction.components(text)
    leaves_of = reduction.LEAVES[j.sig.op]
    attrs = _attributes(j)
    n = len(j.expected)
    out = []
    for k, e in enumerate(j.expected):
        et = element_type(np.asarray(e).dtype)
        model = MODELS.get(options.get(ops[k])) if k < len(ops) and ops[k] else None
        if model is None or not (et.is_float or et.is_complex):
            out.append(np.zeros(np.shape(e)))
            continue
        with np.errstate(all="ignore"):
            leaves = leaves_of(list(j.inputs), attrs, n, k)
            out.append(model(leaves, np.asarray(e), et))
    return out


@flush_allowance("reduction")
def reduction_flush(j: Judgement) -> list[np.ndarray]:
    """Per result: how far flushing subnormal leaves and partial sums to zero (FTZ/DAZ)
    can move a float sum beyond the bound: less than the smallest normal number per leaf
    and per addition, ``(2n − 1)·tiny``; 0 for every other result (a flushed product
    leaves the normal range, which the spec's rules mask; maximum and minimum move
    values, which the comparator's own flush test explains)."""
    options = j.accuracy.options
    names = [r.name for r in j.spec.regions]
    text = j.sig.regions[names.index(options.get("region", names[0]))]
    ops = reduction.components(text)
    attrs = _attributes(j)
    out = []
    for k, e in enumerate(j.expected):
        et = element_type(np.asarray(e).dtype)
        if not (k < len(ops) and options.get(ops[k]) == "sum" and (et.is_float or
                                                                     et.is_complex)):
            out.append(np.zeros(np.shape(e)))
            continue
        leaves = reduction.LEAVES[j.sig.op](list(j.inputs), attrs, len(j.expected), k)
        tiny = float(ml_dtypes.finfo(et.component.dtype).smallest_normal)
        n = leaves.shape[-1]
        out.append(np.full(np.shape(e), (2 * n - 1) * tiny * (2 if et.is_complex else 1)))
    return out
