"""Indexing ops: gather and scatter, written from the spec's "More formally".

Both map an index of one tensor (gather: the result; scatter: the updates) to an
index of another through the same arithmetic: a batch (scatter) index picks a start
index vector out of the indices tensor at ``index_vector_dim``, ``start_index_map``
(``scatter_dims_to_operand_dims``) spreads it over the operand's axes, and the
window (offset) index, with zeros inserted at the collapsed (inserted) dimensions,
is added to it. Batching dimensions (``operand_batching_dims`` /
``start_indices_batching_dims``, scatter's ``input_batching_dims`` /
``scatter_indices_batching_dims``; the 2026-08 text of the spec) add
``full_batching_index``: the operand is indexed along each batching dimension by the
position of the batch index along the paired batching dimension of the indices, and
the window has no extent there (0 is inserted, as at a collapsed dimension). Start
indices are exact integers of their own type (an unsigned index is never negative).

Out-of-bounds indices are implementation-defined in this revision of the spec; the
oracle returns XLA's behaviour as the conventional result (gather clamps the start
index so that the slice is in bounds; scatter skips an update window that is not
entirely in bounds) and the conditions registered here tell the comparator which
result elements to mask (see the ``implementation_defined`` entries of the specs).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance.core.types import element_type, type_of
from conformance.specs.expressions import alternative, condition

from . import regions
from .regions import converted
from .registry import register

# Start indices are clipped to this before they become int64: far outside every
# generated dimension, so that clamping and out-of-bounds tests see the same answer.
_FAR = 1 << 40


def exact_indices(x: np.ndarray) -> np.ndarray:
    """An integer array of any integer type as int64 (values beyond +-2**40 clipped,
    which keeps every comparison with a dimension size the same)."""
    x = np.asarray(x)
    et = element_type(x.dtype)
    if et.is_unsigned:
        return np.minimum(x.astype(np.uint64), np.uint64(_FAR)).astype(np.int64)
    return np.clip(x.astype(np.int64), -_FAR, _FAR)


def index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """``start_index`` for every batch index: ``indices[bi0, ..., :, ..., biN]`` with
    ``:`` at ``index_vector_dim``, or ``[indices[batch_index]]`` when
    ``index_vector_dim == rank(indices)``. Shape: batch shape + [vector size], int64."""
    x = exact_indices(indices)
    if index_vector_dim == x.ndim:
        return x[..., None]
    return np.moveaxis(x, index_vector_dim, -1)


def full_start_indices(indices: np.ndarray, index_vector_dim: int,
                       index_map: Sequence[int], rank: int) -> np.ndarray:
    """``full_start_index`` per batch index: the start index vector spread over the
    operand's ``rank`` axes by ``index_map`` (0 elsewhere). Shape: batch shape + [rank]."""
    vec = index_vectors(indices, index_vector_dim)
    full = np.zeros(vec.shape[:-1] + (rank,), np.int64)
    for ds, do in enumerate(index_map):
        full[..., do] = vec[..., ds]
    return full


def full_batching_indices(batch_shape: Sequence[int], rank: int, index_vector_dim: int,
                          operand_dims: Sequence[int], indices_dims: Sequence[int]
                          ) -> np.ndarray:
    """``full_batching_index`` per batch index (batch shape + [rank]): at operand
    dimension ``operand_dims[i]`` the batch index's entry for indices dimension
    ``indices_dims[i]`` (``d - (d < index_vector_dim ? 0 : 1)``: the batch index has no
    entry for the index vector dimension), 0 elsewhere."""
    out = np.zeros(tuple(batch_shape) + (rank,), np.int64)
    if len(operand_dims):
        grid = np.indices(tuple(batch_shape), dtype=np.int64)
        for do, ds in zip(operand_dims, indices_dims):
            out[..., do] = grid[ds - (0 if ds < index_vector_dim else 1)]
    return out


def window_in_bounds(full: np.ndarray, dims: Sequence[int], extent: Sequence[int]) -> np.ndarray:
    """Per batch index: does the window of ``extent`` at ``full`` lie within ``dims``?"""
    dims = np.asarray(dims, np.int64)
    extent = np.asarray(extent, np.int64)
    return np.all((full >= 0) & (full + extent <= dims), axis=-1)


def _place(batch_values: np.ndarray, shape: Sequence[int], offset_dims: Sequence[int]
           ) -> np.ndarray:
    """A per-batch-index array (batch shape + trailing axes) read at every index of a
    tensor of ``shape`` whose axes not in ``offset_dims`` are the batch axes, in order."""
    grid = np.indices(tuple(shape), dtype=np.int64)
    batch_axes = [d for d in range(len(shape)) if d not in offset_dims]
    out = batch_values[tuple(grid[d] for d in batch_axes)]
    nb = len(batch_axes)
    return np.broadcast_to(out, tuple(shape) + batch_values.shape[nb:])


def _full_offsets(shape: Sequence[int], offset_dims: Sequence[int], collapsed: Sequence[int],
                  rank: int) -> np.ndarray:
    """``full_window_index`` (``full_offset_index``) at every index of a tensor of
    ``shape``: its entries at ``offset_dims``, 0 inserted at ``collapsed``. Shape:
    ``shape`` + [rank]."""
    grid = np.indices(tuple(shape), dtype=np.int64)
    out = np.zeros(tuple(shape) + (rank,), np.int64)
    window_axes = [d for d in range(rank) if d not in collapsed]
    for d_operand, d_tensor in zip(window_axes, offset_dims):
        out[..., d_operand] = grid[d_tensor]
    return out


def _read(operand: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``operand`` at every index vector of ``index`` (... + [rank]); out-of-bounds
    ones read as 0. Returns (values, in_bounds)."""
    dims = np.asarray(operand.shape, np.int64)
    inb = np.all((index >= 0) & (index < dims), axis=-1)
    if operand.size == 0:
        return np.zeros(index.shape[:-1], operand.dtype), inb
    safe = np.clip(index, 0, np.maximum(dims - 1, 0))
    values = operand[tuple(safe[..., d] for d in range(operand.ndim))]
    return np.where(inb, values, np.zeros((), operand.dtype)).astype(operand.dtype), inb


# ---------------------------------------------------------------------------
# gather
# ---------------------------------------------------------------------------

def _gather_attrs(offset_dims, collapsed, index_map, ivd, sizes, obd=(), sibd=()) -> dict:
    return {"offset_dims": offset_dims, "collapsed_slice_dims": collapsed,
            "start_index_map": index_map, "index_vector_dim": ivd, "slice_sizes": sizes,
            "operand_batching_dims": list(obd), "start_indices_batching_dims": list(sibd)}


def _no_window(attrs) -> list[int]:
    """The operand dimensions without a result (offset) axis: collapsed and batching."""
    return sorted(list(attrs["collapsed_slice_dims"])
                  + list(attrs.get("operand_batching_dims", ())))


def _gather_parts(operand_shape, indices, attrs):
    """(full_start_index, full_batching_index, slice sizes, extent) per batch index."""
    rank = len(operand_shape)
    full = full_start_indices(indices, attrs["index_vector_dim"], attrs["start_index_map"],
                              rank)
    batching = full_batching_indices(full.shape[:-1], rank, attrs["index_vector_dim"],
                                     attrs.get("operand_batching_dims", ()),
                                     attrs.get("start_indices_batching_dims", ()))
    sizes = np.asarray(attrs["slice_sizes"], np.int64)
    # Every dimension is read at least at offset 0 (a collapsed dimension of slice size 0
    # still is); an uncollapsed dimension of size 0 leaves the result empty.
    extent = np.maximum(sizes, 1)
    return full, batching, sizes, extent


@register("gather")
def gather(inputs, attrs, types):
    """``operand[full_start_index + full_batching_index + full_offset_index]`` with the
    start index clamped to [0, dim - slice_size] (the 2026-08 text's formula, and XLA's
    rule; where the seed's operand_index is out of bounds the value is masked as
    implementation-defined)."""
    operand, indices = inputs
    shape = types[0].shape
    full, batching, sizes, _ = _gather_parts(operand.shape, indices, attrs)
    dims = np.asarray(operand.shape, np.int64)
    clamped = np.clip(full, 0, np.maximum(dims - sizes, 0)) + batching
    start = _place(clamped, shape, attrs["offset_dims"])
    index = start + _full_offsets(shape, attrs["offset_dims"], _no_window(attrs),
                                  operand.ndim)
    values, _ = _read(operand, index)
    return np.array(values, order="C").reshape(shape)


def _per_case(fn, operand, indices, *rest):
    """Apply a per-case mask function over the leading batch axis of the inputs."""
    return np.stack([fn(operand[b], indices[b], *rest) for b in range(indices.shape[0])]) \
        if indices.shape[0] else np.zeros((0,), bool)


def _gather_result_shape(operand, indices, offset_dims, collapsed, ivd, sizes, obd=()):
    batch = [d for i, d in enumerate(indices.shape) if i != ivd]
    offsets = [s for i, s in enumerate(sizes) if i not in collapsed and i not in obd]
    out, rest = [], iter(batch)
    placed = dict(zip(offset_dims, offsets))
    for d in range(len(batch) + len(offsets)):
        out.append(placed[d] if d in placed else next(rest))
    return out


@condition("gather_out_of_bounds")
def gather_out_of_bounds(operand, indices, offset_dims, collapsed, index_map, ivd, sizes,
                         obd=(), sibd=()):
    """Result elements whose batch position's slice (at the unclamped start index) is
    not within the operand. (The batching dimensions are always in bounds: C17.)"""
    def one(x, idx):
        attrs = _gather_attrs(offset_dims, collapsed, index_map, ivd, sizes, obd, sibd)
        full, batching, _, extent = _gather_parts(x.shape, idx, attrs)
        shape = _gather_result_shape(x, idx, offset_dims, collapsed, ivd, sizes, obd)
        return ~_place(window_in_bounds(full + batching, x.shape, extent), shape,
                       offset_dims)
    return _per_case(one, operand, indices)


#: at most this many in-range starts are tried per case (beyond: the element is unbounded)
MAX_STARTS = 256


def _gather_at(x, full, shape, attrs):
    """The gather of one case with ``full`` (batch shape + [rank]: start plus batching
    index) as its start indices."""
    index = _place(full, shape, attrs["offset_dims"]) + _full_offsets(
        shape, attrs["offset_dims"], _no_window(attrs), x.ndim)
    return _read(x, index)[0]


def _gather_starts(operand, indices, offset_dims, collapsed, index_map, ivd, sizes,
                   obd=(), sibd=()):
    """Per case: (x, full start indices, full batching indices, result shape, attrs, the
    largest in-range start per dimension: dim - slice_size, the range XLA's clamp keeps
    starts in)."""
    attrs = _gather_attrs(offset_dims, collapsed, index_map, ivd, sizes, obd, sibd)
    for b in range(indices.shape[0]):
        x, idx = operand[b], indices[b]
        full, batching, size, _ = _gather_parts(x.shape, idx, attrs)
        shape = _gather_result_shape(x, idx, offset_dims, collapsed, ivd, sizes, obd)
        yield x, full, batching, shape, attrs, np.asarray(x.shape, np.int64) - size


@alternative("gather_in_range_starts")
def gather_in_range_starts(operand, indices, offset_dims, collapsed, index_map, ivd, sizes,
                           obd=(), sibd=()):
    """The windows an implementation may read for a slice that leaves the operand: at any
    start that lies in range, ``full_start_index[d]`` kept along the dimensions where it
    is in range and replaced by any in-range start along the others (XLA's clamp is one
    of them, a start taken modulo the number of valid starts another). A list of
    alternatives of the batched result's shape, one per combination of starts (at most
    :data:`MAX_STARTS`; the elements a case cannot bound so are
    :func:`gather_unbounded`)."""
    per_case = []
    for x, full, batching, shape, attrs, bound in _gather_starts(
            operand, indices, offset_dims, collapsed, index_map, ivd, sizes, obd, sibd):
        dims = list(index_map)
        counts = [int(bound[d]) + 1 for d in dims]
        total = int(np.prod(counts, dtype=np.int64)) if counts else 1
        if x.size == 0 or min(counts, default=1) <= 0 or total > MAX_STARTS:
            per_case.append([])
            continue
        outside = (full < 0) | (full > bound)
        alts = []
        for combo in np.ndindex(*counts):
            start = full.copy()
            for d, v in zip(dims, combo):
                start[..., d] = np.where(outside[..., d], v, full[..., d])
            alts.append(_gather_at(x, start + batching, shape, attrs))
        per_case.append(alts)
    n = max((len(a) for a in per_case), default=0)
    out_shape = (len(per_case),) + tuple(
        _gather_result_shape(operand[0], indices[0], offset_dims, collapsed, ivd, sizes,
                             obd)) \
        if len(per_case) else (0,)
    out = []
    for k in range(n):
        alt = np.zeros(out_shape, operand.dtype)
        for b, alts in enumerate(per_case):
            alt[b] = alts[k] if k < len(alts) else alts[0] if alts else 0
        out.append(alt)
    return out


@alternative("gather_per_element")
def gather_per_element(operand, indices, offset_dims, collapsed, index_map, ivd, sizes,
                       result, obd=(), sibd=()):
    """The spec's formula read element by element: ``operand[operand_index]`` at the
    unclamped start, wherever that ``operand_index`` is in bounds (a slice that leaves
    the operand keeps its elements that do not); elsewhere the oracle's value ``result``
    (no alternative there)."""
    out = []
    for b, (x, full, batching, shape, attrs, _) in enumerate(_gather_starts(
            operand, indices, offset_dims, collapsed, index_map, ivd, sizes, obd, sibd)):
        offsets = _full_offsets(shape, attrs["offset_dims"], _no_window(attrs), x.ndim)
        literal, inb = _read(x, _place(full + batching, shape, attrs["offset_dims"])
                             + offsets)
        out.append(np.where(inb, literal, result[b]).astype(x.dtype))
    return np.stack(out) if out else np.zeros((0,), operand.dtype)


@condition("gather_unbounded")
def gather_unbounded(operand, indices, offset_dims, collapsed, index_map, ivd, sizes,
                     obd=(), sibd=()):
    """Result elements of an out-of-bounds slice for which no start lies in range (an
    empty operand) or too many do (more than :data:`MAX_STARTS`)."""
    def one(x, idx):
        attrs = _gather_attrs(offset_dims, collapsed, index_map, ivd, sizes, obd, sibd)
        _, _, size, _ = _gather_parts(x.shape, idx, attrs)
        bound = np.asarray(x.shape, np.int64) - size
        counts = [int(bound[d]) + 1 for d in index_map]
        total = int(np.prod(counts, dtype=np.int64)) if counts else 1
        shape = _gather_result_shape(x, idx, offset_dims, collapsed, ivd, sizes, obd)
        unbounded = x.size == 0 or min(counts, default=1) <= 0 or total > MAX_STARTS \
            or bool((bound < 0).any())
        return np.full(shape, unbounded)
    return _per_case(one, operand, indices)


def lexicographically_sorted(rows: np.ndarray) -> bool:
    """Are the index vectors (last axis), in row-major order, non-decreasing?"""
    rows = rows.reshape(-1, rows.shape[-1]) if rows.size else rows.reshape(0, 1)
    if len(rows) < 2 or rows.shape[1] == 0:
        return True
    d = rows[1:] - rows[:-1]
    nonzero = d != 0
    first = d[np.arange(len(d)), np.argmax(nonzero, axis=1)]
    return bool(np.all(~nonzero.any(axis=1) | (first > 0)))


@condition("gather_indices_unsorted")
def gather_indices_unsorted(operand, indices, offset_dims, collapsed, index_map, ivd, sizes,
                            obd=(), sibd=()):
    """The whole result, where "for all id < jd from indices(result), full_start_index(id)
    <= full_start_index(jd)" fails: the start index vectors read at the result's indices
    in row-major order, compared lexicographically, are not non-decreasing."""
    def one(x, idx):
        full = full_start_indices(idx, ivd, index_map, x.ndim)
        shape = _gather_result_shape(x, idx, offset_dims, collapsed, ivd, sizes, obd)
        return np.full(shape, not lexicographically_sorted(_place(full, shape, offset_dims)))
    return _per_case(one, operand, indices)


# ---------------------------------------------------------------------------
# scatter
# ---------------------------------------------------------------------------

def scatter_geometry(operand_shape, indices, updates_shape, update_window_dims,
                     inserted_window_dims, index_map, index_vector_dim,
                     input_batching_dims=(), indices_batching_dims=()):
    """Per update element: ``result_index`` (updates shape + [rank]), whether it is in
    bounds, and whether its whole window (the updates of its scatter index: the update
    window sizes, 1 along inserted and batching dimensions) is in bounds. Also the full
    start index per update element (without the batching index: what
    ``indices_are_sorted`` speaks of)."""
    rank = len(operand_shape)
    full = full_start_indices(indices, index_vector_dim, index_map, rank)
    batching = full_batching_indices(full.shape[:-1], rank, index_vector_dim,
                                     input_batching_dims, indices_batching_dims)
    start = _place(full, updates_shape, update_window_dims)
    no_window = sorted(list(inserted_window_dims) + list(input_batching_dims))
    index = _place(full + batching, updates_shape, update_window_dims) + _full_offsets(
        updates_shape, update_window_dims, no_window, rank)
    extent = [1] * rank
    window_axes = [d for d in range(rank) if d not in no_window]
    for d_operand, d_update in zip(window_axes, update_window_dims):
        extent[d_operand] = updates_shape[d_update]
    dims = np.asarray(operand_shape, np.int64)
    element_in = np.all((index >= 0) & (index < dims), axis=-1) if rank else \
        np.ones(tuple(updates_shape), bool)
    window_in = _place(window_in_bounds(full + batching, operand_shape, extent),
                       updates_shape, update_window_dims)
    return index, element_in, window_in, start


def _batching(attrs) -> tuple:
    """A scatter's batching dimensions from its attributes (empty: the dialect's default)."""
    return (tuple(attrs.get("input_batching_dims", ())),
            tuple(attrs.get("scatter_indices_batching_dims", ())))


def _flat(index: np.ndarray, shape) -> np.ndarray:
    if not len(shape):
        return np.zeros(index.shape[:-1], np.int64)
    return np.ravel_multi_index(tuple(index[..., d] for d in range(len(shape))), tuple(shape))


def occurrence(targets: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions have the same target."""
    order = np.argsort(targets, kind="stable")
    sorted_t = targets[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_t))[0] + 1] if len(targets) else np.zeros(0, int)
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(targets)]))
    occ = np.empty(len(targets), np.int64)
    occ[order] = np.arange(len(targets)) - group_start
    return occ


def _scatter_run(inputs, attrs, types, judge_region: bool = False, per_element: bool = False):
    """The scatter oracle's work: (results, mask of result elements where an application
    of the region met an implementation-defined rule of its ops; only if judge_region).
    ``per_element``: apply every update element whose ``result_index`` is in bounds (the
    spec's formula element by element), not only the windows entirely in bounds. The
    updates are applied in the computation's types (:func:`regions.converted`)."""
    n = len(types)
    region = attrs["update_computation"]
    xs, ups = converted(region, inputs[:n], inputs[n + 1:])   # (scatter C23: to Ei)
    indices = inputs[n]
    results = [np.array(x, order="C", copy=True) for x in xs]
    shape = results[0].shape
    impl = np.zeros(shape, bool)
    index, element_in, window_in, _ = scatter_geometry(
        shape, indices, ups[0].shape, attrs["update_window_dims"],
        attrs["inserted_window_dims"], attrs["scatter_dims_to_operand_dims"],
        attrs["index_vector_dim"], *_batching(attrs))
    if per_element:
        window_in = element_in
    if not window_in.any():
        return results, impl
    targets = _flat(index[window_in], shape)
    values = [np.asarray(u)[window_in] for u in ups]
    occ = occurrence(targets)
    flat = [r.reshape(-1) for r in results]
    flat_impl = impl.reshape(-1)
    for wave in range(int(occ.max()) + 1):
        sel = occ == wave
        t = targets[sel]
        args = [f[t] for f in flat] + [v[sel] for v in values]
        if judge_region:
            flat_impl[t] |= regions.implementation_defined(region, args)
        new = regions.evaluate(region, args)
        for f, v in zip(flat, new):
            f[t] = np.asarray(v).astype(f.dtype, copy=False)
    return results, impl


@register("scatter")
def scatter(inputs, attrs, types):
    """``exec`` with the updates in row-major order of the update index space; a window
    not entirely in bounds is skipped (XLA's rule: where the spec's result_index is out
    of bounds the behaviour is implementation-defined and masked). Updates that hit one
    element are applied one after another: all first hits at once, then all second
    hits, ... (the region is evaluated element-wise, vectorised over each round)."""
    results, _ = _scatter_run(inputs, attrs, types)
    return tuple(r.reshape(t.shape) for r, t in zip(results, types))


def _scatter_per_case(fn, inputs, indices, updates, uwd, iwd, smap, ivd, ibd=(), sibd=()):
    """A per-case result mask from ``fn(operand_shape, geometry...)`` over the batch."""
    out = []
    for b in range(indices.shape[0]):
        shape = inputs[0].shape[1:]
        geometry = scatter_geometry(shape, indices[b], updates[0].shape[1:], uwd, iwd, smap,
                                    ivd, ibd, sibd)
        out.append(fn(shape, *geometry))
    return np.stack(out) if out else np.zeros((0,) + inputs[0].shape[1:], bool)


def _hits(shape, index, where) -> np.ndarray:
    """How many of the update elements selected by ``where`` reach each result element."""
    counts = np.zeros(int(np.prod(shape, dtype=np.int64)), np.int64)
    np.add.at(counts, _flat(index[where], shape), 1)
    return counts.reshape(shape)


@condition("scatter_out_of_bounds")
def scatter_out_of_bounds(inputs, indices, updates, uwd, iwd, smap, ivd, ibd=(),
                          sibd=()):
    """Result elements reached by the in-bounds part of a window that is not entirely in
    bounds (the spec updates them; XLA skips the whole window)."""
    def one(shape, index, element_in, window_in, _):
        return _hits(shape, index, element_in & ~window_in) > 0
    return _scatter_per_case(one, inputs, indices, updates, uwd, iwd, smap, ivd, ibd,
                             sibd)


@alternative("scatter_per_element")
def scatter_per_element(inputs, indices, updates, uwd, iwd, smap, ivd, region, ibd=(),
                        sibd=()):
    """The spec's formula element by element: every update element whose
    ``result_index`` is in bounds is applied (in the oracle's order), those out of
    bounds are skipped, where XLA skips the whole window. One array per result."""
    attrs = {"update_window_dims": uwd, "inserted_window_dims": iwd,
             "scatter_dims_to_operand_dims": smap, "index_vector_dim": ivd,
             "update_computation": region, "input_batching_dims": list(ibd),
             "scatter_indices_batching_dims": list(sibd)}
    per_case = []
    for b in range(indices.shape[0]):
        case = [x[b] for x in inputs] + [indices[b]] + [u[b] for u in updates]
        types = [type_of(x[b]) for x in inputs]
        per_case.append(_scatter_run(case, attrs, types, per_element=True)[0])
    if not per_case:
        return [np.asarray(x) for x in inputs]
    return [np.stack([c[k] for c in per_case]) for k in range(len(inputs))]


#: elements that receive more updates than this are not enumerated (every order of up to
#: 5 updates is 120 results per element); the rule leaves them unbounded
MAX_ORDERED_UPDATES = 5


def _update_groups(inputs, indices, updates, uwd, iwd, smap, ivd, b, ibd=(), sibd=()):
    """Case ``b``'s applied updates (whole windows in bounds, as the oracle applies them)
    grouped by the result element they reach: flat target -> update positions."""
    shape = inputs[0].shape[1:]
    index, _, window_in, _ = scatter_geometry(shape, indices[b], updates[0].shape[1:], uwd,
                                              iwd, smap, ivd, ibd, sibd)
    targets = _flat(index[window_in], shape)
    groups: dict[int, list[int]] = {}
    for pos, t in enumerate(targets.tolist()):
        groups.setdefault(t, []).append(pos)
    return groups, [np.asarray(u[b])[window_in] for u in updates]


@alternative("scatter_update_orders")
def scatter_update_orders(inputs, indices, updates, uwd, iwd, smap, ivd, region, results,
                          ibd=(), sibd=()):
    """What every ``schedule`` gives at the result elements that receive several updates:
    the updates folded into the input value through ``update_computation`` in each order
    (all results alike). Alternative ``p`` holds each element's ``p``-th order (the
    oracle's value where an element has fewer); elements with more than
    :data:`MAX_ORDERED_UPDATES` updates are :func:`scatter_order_unbounded`."""
    import itertools
    n = len(inputs)
    inputs, updates = converted(region, inputs, updates)
    per_case = []
    most = 0
    for b in range(indices.shape[0]):
        groups, values = _update_groups(inputs, indices, updates, uwd, iwd, smap, ivd, b,
                                        ibd, sibd)
        orders = {}
        for t, pos in groups.items():
            k = len(pos)
            if k < 2 or k > MAX_ORDERED_UPDATES:
                continue
            perms = np.array(list(itertools.permutations(range(k))), np.int64)
            pos = np.asarray(pos)
            cur = [np.full(len(perms), np.asarray(x[b]).reshape(-1)[t]) for x in inputs]
            for j in range(k):
                args = cur + [v[pos[perms[:, j]]] for v in values]
                cur = [np.asarray(r).astype(x.dtype) for r, x in
                       zip(regions.evaluate(region, args), inputs)]
            orders[t] = cur
            most = max(most, len(perms))
        per_case.append(orders)
    out = []
    for p in range(most):
        alt = [np.array(r, copy=True) for r in results]
        for b, orders in enumerate(per_case):
            for t, cur in orders.items():
                if p < len(cur[0]):
                    for r in range(n):
                        alt[r][b].reshape(-1)[t] = cur[r][p]
        out.append(alt)
    return out


@condition("scatter_order_unbounded")
def scatter_order_unbounded(inputs, indices, updates, uwd, iwd, smap, ivd, ibd=(),
                            sibd=()):
    """Result elements that receive more than :data:`MAX_ORDERED_UPDATES` updates."""
    out = []
    for b in range(indices.shape[0]):
        groups, _ = _update_groups(inputs, indices, updates, uwd, iwd, smap, ivd, b,
                                        ibd, sibd)
        m = np.zeros(int(np.prod(inputs[0].shape[1:], dtype=np.int64)), bool)
        for t, pos in groups.items():
            m[t] = len(pos) > MAX_ORDERED_UPDATES
        out.append(m.reshape(inputs[0].shape[1:]))
    return np.stack(out) if out else np.zeros((0,) + inputs[0].shape[1:], bool)


@condition("scatter_repeated_updates")
def scatter_repeated_updates(inputs, indices, updates, uwd, iwd, smap, ivd, ibd=(),
                             sibd=()):
    """Result elements that more than one in-bounds update element reaches."""
    def one(shape, index, element_in, window_in, _):
        return _hits(shape, index, element_in) > 1
    return _scatter_per_case(one, inputs, indices, updates, uwd, iwd, smap, ivd, ibd,
                             sibd)


@condition("scatter_indices_not_unique")
def scatter_indices_not_unique(inputs, indices, updates, uwd, iwd, smap, ivd, ibd=(),
                               sibd=()):
    """The whole result, where two update elements have the same ``result_index`` (in
    bounds or not)."""
    def one(shape, index, element_in, window_in, _):
        rows = index.reshape(-1, index.shape[-1]) if index.size else np.zeros((0, 1))
        repeated = len(np.unique(rows, axis=0)) < len(rows)
        return np.full(shape, repeated)
    return _scatter_per_case(one, inputs, indices, updates, uwd, iwd, smap, ivd, ibd,
                             sibd)


@condition("scatter_indices_unsorted")
def scatter_indices_unsorted(inputs, indices, updates, uwd, iwd, smap, ivd, ibd=(),
                             sibd=()):
    """The whole result, where ``full_start_index`` read at the update indices in
    row-major order is not non-decreasing (lexicographically)."""
    def one(shape, index, element_in, window_in, start):
        return np.full(shape, not lexicographically_sorted(start))
    return _scatter_per_case(one, inputs, indices, updates, uwd, iwd, smap, ivd, ibd,
                             sibd)


@condition("scatter_region_implementation_defined")
def scatter_region_implementation_defined(inputs, indices, updates, uwd, iwd, smap, ivd,
                                          region, ibd=(), sibd=()):
    """Result elements where an update computation met an implementation-defined rule of
    an op it calls (applied as the oracle applies them)."""
    attrs = {"update_window_dims": uwd, "inserted_window_dims": iwd,
             "scatter_dims_to_operand_dims": smap, "index_vector_dim": ivd,
             "update_computation": region, "input_batching_dims": list(ibd),
             "scatter_indices_batching_dims": list(sibd)}
    out = []
    for b in range(indices.shape[0]):
        case = [x[b] for x in inputs] + [indices[b]] + [u[b] for u in updates]
        types = [type_of(x[b]) for x in inputs]
        out.append(_scatter_run(case, attrs, types, judge_region=True)[1])
    return np.stack(out) if out else np.zeros((0,) + inputs[0].shape[1:], bool)
