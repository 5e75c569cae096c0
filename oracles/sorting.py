"""sort: written from the spec's "More formally", with the comparator as data.

The comparator (a region text, specs/regions.py) is evaluated through the
oracles of the ops it calls on every pair of elements of a slice along the sort
dimension at once: ``less[..., i, j] = comparator(e_i, e_j)``, where ``e_i`` is the
tuple ``(inputs[0][..i..], inputs[1][..i..], ...)``. For a comparator that is a strict
weak order the stable result puts element ``i`` at position

    rank(i) = #{j : less(j, i)} + #{j < i : not less(i, j) and not less(j, i)}

(everything that must come before it, and the equal elements that came before it),
which satisfies the spec's condition and keeps equal elements in their order. So the
oracle is exact for every element type: it only moves elements, never computes them,
and the order is whatever the comparator's own ops say (TOTALORDER, NaN payloads, -0,
int4, fp8, ...).

Where the spec says nothing, the oracle still returns a conventional result and the
conditions registered here tell the comparator what to do with it:

- ``is_stable = false``: the relative order of equal elements is the implementation's;
  the oracle gives the stable order, and ``sort_tie_groups`` labels each run of equal
  elements in it, so that the comparator checks those positions as a permutation of
  the oracle's values (all results permuted alike), not value by value.
- a comparator that is not a strict weak order on a slice (``compare FLOAT`` with a NaN
  among other values: NaN is "equal" to 1 and to 2, which are not equal to each
  other): no order satisfies the spec's condition, or several do; the oracle orders
  by the ranks above (ties broken by position) and ``sort_not_strict_weak_order``
  masks the slice.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance.specs.expressions import condition

from . import regions
from .registry import register


def _axis(dimension: int, rank: int) -> int:
    """The spec's ``d``: ``dimension >= 0 ? dimension : rank + dimension``."""
    return dimension if dimension >= 0 else rank + dimension


def pairwise(comparator: str, operands: Sequence[np.ndarray]) -> np.ndarray:
    """``less[..., i, j] = comparator(operands[0][..., i], operands[0][..., j],
    operands[1][..., i], ...)``: the comparator on every pair along the last axis."""
    n = operands[0].shape[-1]
    shape = operands[0].shape + (n,)
    args = []
    for x in operands:
        args.append(np.array(np.broadcast_to(x[..., :, None], shape), order="C"))
        args.append(np.array(np.broadcast_to(x[..., None, :], shape), order="C"))
    (less,) = regions.evaluate(comparator, args)
    return np.asarray(less, bool).reshape(shape)


def strict_weak(less: np.ndarray) -> np.ndarray:
    """Per slice (all but the last two axes): is ``less`` a strict weak order on it?
    Irreflexive, transitive, and with transitive incomparability (asymmetry follows)."""
    n = less.shape[-1]
    if n == 0:
        return np.ones(less.shape[:-2], bool)
    irreflexive = ~np.diagonal(less, axis1=-2, axis2=-1).any(-1)
    lt = less.astype(np.int32)
    transitive = ~((lt @ lt > 0) & ~less).any((-2, -1))
    eq = ~less & ~np.swapaxes(less, -2, -1)
    e = eq.astype(np.int32)
    eq_transitive = ~((e @ e > 0) & ~eq).any((-2, -1))
    return irreflexive & transitive & eq_transitive


def stable_order(less: np.ndarray) -> np.ndarray:
    """``perm[..., p]``: the index of the element that goes to position ``p``."""
    n = less.shape[-1]
    before = less.sum(axis=-2)                                   # #{j : less(j, i)}
    eq = ~less & ~np.swapaxes(less, -2, -1)
    earlier = np.tril(np.ones((n, n), bool), -1)                 # [i, j]: j < i
    rank = before + (eq & earlier).sum(axis=-1)
    # For a strict weak order the ranks are a permutation and this is its inverse; for
    # any other comparator, ties are broken by position (masked by the spec's rule).
    return np.argsort(rank, axis=-1, kind="stable")


@register("sort")
def sort(inputs, attrs, types):
    comparator = attrs["comparator"]
    d = _axis(attrs["dimension"], inputs[0].ndim)
    moved = [np.moveaxis(x, d, -1) for x in inputs]
    perm = stable_order(pairwise(comparator, moved))
    return tuple(np.array(np.moveaxis(np.take_along_axis(x, perm, axis=-1), -1, d),
                          order="C").reshape(t.shape)
                 for x, t in zip(moved, types))


# ---------------------------------------------------------------------------
# Conditions of the implementation-defined rules (see specs/ops/sort.yaml). They see
# the batched results (leading batch axis) of the oracle, already sorted.
# ---------------------------------------------------------------------------

def _batched_axis(dimension: int, results: Sequence[np.ndarray]) -> int:
    return _axis(dimension, results[0].ndim - 1) + 1


@condition("sort_not_strict_weak_order")
def not_strict_weak_order(comparator: str, results: Sequence[np.ndarray],
                          dimension: int) -> np.ndarray:
    """Every element of a slice on which the comparator is not a strict weak order."""
    axis = _batched_axis(dimension, results)
    moved = [np.moveaxis(x, axis, -1) for x in results]
    bad = ~strict_weak(pairwise(comparator, moved))
    mask = np.broadcast_to(bad[..., None], moved[0].shape)
    return np.array(np.moveaxis(mask, -1, axis), order="C")


@condition("sort_not_strict_weak_order_groups")
def not_strict_weak_order_groups(comparator: str, results: Sequence[np.ndarray],
                                 dimension: int) -> np.ndarray:
    """Permutation-group labels of the slices on which the comparator is not a strict
    weak order: 1 + the flat index of the slice's first element (unique in the batch)
    for every element of such a slice, 0 elsewhere."""
    bad = not_strict_weak_order(comparator, results, dimension)
    axis = _batched_axis(dimension, results)
    shape = bad.shape
    if not bad.any():
        return np.zeros(shape, np.int64)
    first = np.indices(shape)
    first[axis] = 0
    flat_first = np.ravel_multi_index(tuple(first), shape)
    return np.where(bad, 1 + flat_first, 0).astype(np.int64)


@condition("sort_tie_groups")
def tie_groups(comparator: str, results: Sequence[np.ndarray], dimension: int) -> np.ndarray:
    """Group labels of the runs of equal elements (size >= 2) in sorted results: for a
    strict weak order, equal elements are adjacent after sorting. 0 outside a run;
    otherwise 1 + the flat index of the run's first element (unique in the batch)."""
    axis = _batched_axis(dimension, results)
    moved = [np.moveaxis(x, axis, -1) for x in results]
    shape = moved[0].shape
    n = shape[-1]
    labels = np.zeros(shape, np.int64)
    if n >= 2 and moved[0].size:
        a = [x[..., :-1] for x in moved]
        b = [x[..., 1:] for x in moved]
        args_ab = [y for pair in zip(a, b) for y in pair]
        args_ba = [y for pair in zip(b, a) for y in pair]
        (ab,) = regions.evaluate(comparator, [np.array(x, order="C") for x in args_ab])
        (ba,) = regions.evaluate(comparator, [np.array(x, order="C") for x in args_ba])
        same_as_next = ~np.asarray(ab, bool) & ~np.asarray(ba, bool)       # [..., p]: p ~ p+1
        # Slices where the comparator is no strict weak order are masked whole instead.
        ok = strict_weak(pairwise(comparator, moved))[..., None]
        same_as_next &= ok
        pos = np.arange(n)
        start = np.ones(shape, bool)
        start[..., 1:] = ~same_as_next
        first = np.maximum.accumulate(np.where(start, pos, 0), axis=-1)   # run's first position
        in_run = np.zeros(shape, bool)
        in_run[..., 1:] |= same_as_next
        in_run[..., :-1] |= same_as_next
        flat_first = np.ravel_multi_index(
            tuple(np.indices(shape)[:-1]) + (first,), shape) if shape else first
        labels = np.where(in_run, 1 + flat_first, 0)
    return np.array(np.moveaxis(labels, -1, axis), order="C")
