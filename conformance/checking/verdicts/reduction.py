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

Beyond the bound, a float sum may be ``subnormal_flush`` only on its own leaves'
evidence (:func:`reduction_flush`): FTZ room from how many of its partial sums can be
subnormal in any tree (:func:`ftz_flushes`: none unless a leaf is finer than the
smallest normal), DAZ only where its own leaves hold a subnormal and the backend lies
within the bound of the oracle on the flushed inputs. all_reduce, reduce_scatter and
select_and_scatter get both through their ``LEAVES``.
"""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from conformance.core.numerics import flush_subnormals, is_subnormal, same_bits_or_nan
from conformance.core.types import element_type
from conformance.oracles import reduction
from conformance.checking.verdicts import (Judgement, bound_function, flush_allowance, gamma,
                                           unit_roundoff)

__all__ = ["reduction_bound", "reduction_flush", "ftz_flushes", "ftz_room", "MODELS"]

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


# the bound of the judgement the last call computed, so that the flush allowance does not
# compute it again for the same judgement (the ``bound`` verdict asks for both in a row)
_LAST_BOUND: list = [None, None]


def _body_ops(j: Judgement) -> tuple:
    """Per result: the op of the body that computes it (reduction.components). With the
    option ``each_result`` one binary body computes every result (a collective's
    variadic operands, each reduced alone: collective_reduce)."""
    options = j.accuracy.options
    names = [r.name for r in j.spec.regions]
    ops = reduction.components(j.sig.regions[names.index(options.get("region", names[0]))])
    if options.get("each_result") and ops:
        return ops[:1] * len(j.expected)
    return ops


@bound_function("reduction")
def reduction_bound(j: Judgement) -> list[np.ndarray]:
    """Per result: the error bound of its body op's model, 0 for every other result."""
    options = j.accuracy.options
    ops = _body_ops(j)
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
    _LAST_BOUND[:] = [j, out]
    return out


def _bound_of(j: Judgement) -> list[np.ndarray]:
    if _LAST_BOUND[0] is j:
        return _LAST_BOUND[1]
    return reduction_bound(j)


def ftz_flushes(leaves: np.ndarray, tiny: float) -> np.ndarray:
    """Per result element (real leaves, last axis): the most partial sums that flushing
    subnormal results to zero (FTZ) can flush in any tree of these leaves, each moving the
    sum by less than ``tiny``: ``min(F, ⌊(N + S)/2⌋)``.

    - A flushed partial sum is a nonzero value below ``tiny``, and every partial sum is a
      multiple of the smallest granularity among the leaves it still holds (a flushed
      subtree holds none): each flush takes at least one *fine* leaf (granularity below
      ``tiny``) that no earlier flush took, so at most ``F`` (the fine leaves; 0 where
      every leaf is a multiple of ``tiny``, whatever the tree). Where the nonzero leaves
      share one sign, a partial sum is at least each leaf it holds (rounding is
      monotone), so a flushed one holds only subnormal leaves: ``F`` is then ``S``.
    - Count the nonzero values among the tree's current roots: ``N`` (the nonzero finite
      leaves) at first, never more (extra init values, where the rules do not mask them,
      are the identity ±0). A flush of ``x + 0`` removes one, and needs ``x`` a subnormal
      leaf (a subnormal result was flushed when computed): at most ``S`` (the subnormal
      leaves) of them; a flush of a sum of two nonzero values removes two. So at most
      ``(N + S)/2`` flushes.
    """
    part = np.asarray(leaves, np.float64)
    with np.errstate(invalid="ignore"):
        nonzero = np.isfinite(part) & (part != 0)
        fine = nonzero & (reduction.granularity(part) < tiny)
        sub = nonzero & (np.abs(part) < tiny)
    f, s, n = (m.sum(axis=-1) for m in (fine, sub, nonzero))
    one_sign = ~(nonzero & (part > 0)).any(axis=-1) | ~(nonzero & (part < 0)).any(axis=-1)
    return np.minimum(np.where(one_sign, s, f), (n + s) // 2)


def ftz_room(leaves: np.ndarray, et) -> np.ndarray:
    """Per result element of a float or complex sum: how far FTZ can move it beyond the
    bound, on its own leaves only: ``tiny`` times :func:`ftz_flushes` (complex: per part,
    combined as a modulus, as the bound is). 0 where no leaf is finer than ``tiny``.
    Where the nonzero leaves share one sign, no more than the sum of the subnormal ones:
    a flushed partial sum then holds only subnormal leaves, and an addition whose result
    is subnormal is exact, so it loses exactly their sum."""
    et = element_type(et)
    tiny = float(ml_dtypes.finfo(et.component.dtype).smallest_normal)
    total = np.zeros(np.shape(leaves)[:-1])
    for part in _parts(np.asarray(leaves)):
        room = ftz_flushes(part, tiny) * tiny
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(part)
            a = np.where(finite, np.abs(part), 0.0)
            sub = np.where((a > 0) & (a < tiny), a, 0.0).sum(axis=-1)
            one_sign = ~(finite & (part > 0)).any(axis=-1) | ~(finite & (part < 0)).any(axis=-1)
        room = np.where(one_sign, np.minimum(room, sub), room)
        total = total + room ** 2
    return np.sqrt(total)


def _oracle_on(j: Judgement, inputs) -> list[np.ndarray]:
    if j.reevaluate is not None:
        return list(j.reevaluate(inputs))
    from conformance import oracles
    return list(oracles.evaluate_batch(j.sig, inputs, j.spec))


def _summed(j: Judgement) -> list[bool]:
    """Per result: is it a float or complex sum (the body's op for it judged as ``sum``)?"""
    options = j.accuracy.options
    ops = _body_ops(j)
    out = []
    for k, e in enumerate(j.expected):
        et = element_type(np.asarray(e).dtype)
        out.append(k < len(ops) and options.get(ops[k]) == "sum"
                   and (et.is_float or et.is_complex))
    return out


@flush_allowance("reduction")
def reduction_flush(j: Judgement) -> list[np.ndarray]:
    """Per result element, beyond the bound and only on the element's own evidence (the
    developers' guide: reclassify an element only on evidence from its own inputs), how
    far flushing subnormals to zero can have moved a float sum:

    - FTZ (subnormal partial sums flushed): :func:`ftz_room` of the element's own leaves,
      0 unless one of them is finer than the smallest normal ``tiny``;
    - DAZ (subnormal inputs read as zero, FTZ on top): only where the element's own leaves
      hold a subnormal (or the flushed inputs change its value: select_and_scatter's
      selection), the oracle is run again on the inputs with their subnormals flushed and
      the backend's value must lie within the bound and FTZ room of *that* value; then
      the allowance is the distance between the two oracle values plus that bound.

    A one-ulp error on leaves that are all multiples of ``tiny`` gets nothing and stays
    ``bound``/``value``, whatever other cases of the batch hold. 0 for every other result
    (a flushed product leaves the normal range, which the spec's rules mask; maximum and
    minimum move values, which the comparator's own flush test explains)."""
    summed = _summed(j)
    if not any(summed):
        return [np.zeros(np.shape(e)) for e in j.expected]
    limits = _bound_of(j)
    leaves_of = reduction.LEAVES[j.sig.op]
    attrs = _attributes(j)
    n = len(j.expected)
    out: list[np.ndarray] = []
    daz = None
    for k, (e, a) in enumerate(zip(j.expected, j.actual)):
        e, a = np.asarray(e), np.asarray(a)
        zero = np.zeros(e.shape)
        if not summed[k] or a.shape != e.shape:
            out.append(zero)
            continue
        et = element_type(e.dtype)
        wide = np.complex128 if et.is_complex else np.float64
        lim = np.broadcast_to(np.asarray(limits[k], np.float64), e.shape)
        with np.errstate(all="ignore"):
            diff = np.abs(a.astype(wide) - e.astype(wide))
        need = np.isfinite(diff) & (diff > lim)
        if not need.any():
            out.append(zero)
            continue
        with np.errstate(all="ignore"):
            leaves = leaves_of(list(j.inputs), attrs, n, k)
            room = np.where(need, ftz_room(leaves, et), 0.0)
        if any(is_subnormal(np.asarray(x)).any() for x in j.inputs):
            if daz is None:
                flushed = [flush_subnormals(np.asarray(x)) for x in j.inputs]
                with np.errstate(all="ignore"):
                    yd = _oracle_on(j, flushed)
                    fj = dataclasses.replace(j, inputs=flushed, expected=yd)
                    daz = (fj, yd, reduction_bound(fj))
                _LAST_BOUND[0] = None
            fj, yd, limd = daz
            d = np.asarray(yd[k])
            with np.errstate(all="ignore"):
                own = is_subnormal(leaves).any(axis=-1) | ~same_bits_or_nan(d, e)
                rd = (np.broadcast_to(np.asarray(limd[k], np.float64), e.shape)
                      + ftz_room(leaves_of(list(fj.inputs), attrs, n, k), et))
                d2 = np.abs(a.astype(wide) - d.astype(wide))
                move = np.abs(d.astype(wide) - e.astype(wide)) + rd - lim
            ok = need & own & np.isfinite(d2) & (d2 <= rd) & np.isfinite(move)
            room = np.where(ok, np.maximum(room, move), room)
        out.append(room)
    return out
