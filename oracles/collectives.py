"""Collective ops and the execution model (issue 18): the processes of a StableHLO process
grid simulated in numpy, from 003 "## Execution" / "### Collective ops" and each op's
section.

A case on a grid of ``num_replicas`` x ``num_partitions`` processes holds each input as
``[processes] + shape`` and gets each result the same way; process ``(r, p)`` sits at
index ``r * num_partitions + p`` (its flattened id, the order of XLA's device
assignment). The grid reaches the oracle in the attributes (``num_replicas``,
``num_partitions``; conformance.oracles.evaluate_batch adds them); without them the grid
is 1x1 and the values carry no process axis.

Process groups (:func:`process_groups`) follow the spec's four strategies
(``cross_replica``, ``cross_partition``, ``cross_replica_and_partition``,
``flattened_ids``); which one an op uses is read off its attributes (:func:`strategy`):
ops with ``use_global_device_ids`` (all_gather, all_reduce, reduce_scatter) pick among
three by ``channel_id`` and that flag, the others (all_to_all, collective_permute) between
cross_replica and cross_partition by ``channel_id``.

all_reduce and reduce_scatter reduce the group's values in group order with the body
(conformance.oracles.reduction: float add/multiply at float64 rounded once, integers
wrapping, other bodies as a balanced tree); the ``reduction`` bound
(conformance/checking/verdicts/reduction.py) allows any other order, reading the leaves from
:data:`LEAVES` entries registered here.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

import ml_dtypes

from conformance.core.promotion import to_destination_type
from conformance.core.types import element_type
from conformance.specs.expressions import condition
from conformance.specs.regions import parse as parse_region

from . import reduction
from .registry import register

__all__ = ["grid", "strategy", "process_groups", "group_of", "members"]


def grid(attrs: Mapping[str, Any]) -> tuple[int, int]:
    """(num_replicas, num_partitions) of a case: 1x1 where the attributes do not say."""
    return int(attrs.get("num_replicas", 1)), int(attrs.get("num_partitions", 1))


def strategy(attrs: Mapping[str, Any]) -> str:
    """The spec's process grouping strategy for an op with these attributes."""
    channel = int(attrs.get("channel_id", 0))
    if "use_global_device_ids" in attrs:
        if channel <= 0:
            return "cross_replica"
        return "flattened_ids" if attrs["use_global_device_ids"] else \
            "cross_replica_and_partition"
    return "cross_replica" if channel <= 0 else "cross_partition"


def process_groups(kind: str, groups: Sequence[Sequence[int]], num_replicas: int,
                   num_partitions: int) -> list[list[tuple[int, int]]]:
    """The spec's ``cross_replica`` ... ``flattened_ids``: lists of (replica, partition)."""
    out: list[list[tuple[int, int]]] = []
    groups = [[int(i) for i in g] for g in groups]
    if kind == "cross_replica":
        for g in groups:
            for p in range(num_partitions):
                out.append([(r, p) for r in g])
    elif kind == "cross_partition":
        for g in groups:
            for r in range(num_replicas):
                out.append([(r, p) for p in g])
    elif kind == "cross_replica_and_partition":
        for g in groups:
            out.append([(r, p) for p in range(num_partitions) for r in g])
    elif kind == "flattened_ids":
        for g in groups:
            out.append([(f // num_partitions, f % num_partitions) for f in g])
    else:
        raise ValueError(f"unknown process grouping strategy {kind!r}")
    return out


def _flat(process: tuple[int, int], num_partitions: int) -> int:
    return process[0] * num_partitions + process[1]


def group_of(attrs: Mapping[str, Any]) -> list[list[int]]:
    """Per process (by flattened id): the flattened ids of its process group, in the
    group's order. Every process must be in exactly one group (the constraints); the
    empty ``replica_groups`` (invalid by the size constraint; XLA reads it as one group of
    everyone) stands for one group of all replicas (all partitions)."""
    nr, npart = grid(attrs)
    kind = strategy(attrs)
    groups = [list(g) for g in attrs.get("replica_groups", [])]
    if not groups or not any(groups):
        size = nr * npart if kind == "flattened_ids" else (
            npart if kind == "cross_partition" else nr)
        groups = [list(range(size))]
    out: list[list[int] | None] = [None] * (nr * npart)
    for g in process_groups(kind, groups, nr, npart):
        flat = [_flat(p, npart) for p in g]
        for q in flat:
            out[q] = flat
    missing = [q for q, g in enumerate(out) if g is None]
    if missing:
        raise ValueError(f"processes {missing} are in no process group of {groups}")
    return out          # type: ignore[return-value]


def members(attrs: Mapping[str, Any]) -> np.ndarray:
    """[processes, group size]: each process's group (flattened ids, group order)."""
    return np.array(group_of(attrs), dtype=np.int64)


def _per_process(fn):
    """Run ``fn(inputs with a process axis, attrs, grid)``; a 1x1 grid adds and drops it."""
    def oracle(inputs, attrs, types):
        single = "num_replicas" not in attrs
        xs = [np.asarray(x)[None] if single else np.asarray(x) for x in inputs]
        out = fn(xs, attrs, types)
        out = out if isinstance(out, tuple) else (out,)
        out = tuple(np.asarray(o)[0] if single else np.asarray(o) for o in out)
        return out if len(out) > 1 else out[0]
    return oracle


# ---------------------------------------------------------------------------
# replica_id, partition_id
# ---------------------------------------------------------------------------

@register("replica_id")
@_per_process
def replica_id(inputs, attrs, types):
    """``replica_id`` of each process, as ui32."""
    nr, npart = grid(attrs)
    return np.repeat(np.arange(nr, dtype=np.uint32), npart)


@register("partition_id")
@_per_process
def partition_id(inputs, attrs, types):
    """``partition_id`` of each process, as ui32."""
    nr, npart = grid(attrs)
    return np.tile(np.arange(npart, dtype=np.uint32), nr)


# ---------------------------------------------------------------------------
# all_gather, all_to_all, collective_permute
# ---------------------------------------------------------------------------

@register("all_gather")
@_per_process
def all_gather(inputs, attrs, types):
    """``results...@process = concatenate(operands...@process, all_gather_dim)``, the
    operands of the process's group in group order; each operand on its own
    (stablehlo-spec-2026-08.md: the operands are variadic)."""
    dim = int(attrs["all_gather_dim"])
    groups = group_of(attrs)
    return tuple(np.stack([np.concatenate([x[s] for s in g], axis=dim)
                           for g in groups]).astype(x.dtype, copy=False) for x in inputs)


def _split(x: np.ndarray, count: int, axis: int) -> list[np.ndarray]:
    n = x.shape[axis] // count
    return [np.take(x, range(i * n, (i + 1) * n), axis=axis) for i in range(count)]


@register("all_to_all")
@_per_process
def all_to_all(inputs, attrs, types):
    """Each sender splits its operand into ``split_count`` parts along
    ``split_dimension``; receiver ``j`` of a group concatenates part ``j`` of every
    sender, in group order, along ``concat_dimension``; each operand on its own
    (stablehlo-spec-2026-08.md: the operands are variadic)."""
    count = int(attrs["split_count"])
    sd, cd = int(attrs["split_dimension"]), int(attrs["concat_dimension"])
    groups = group_of(attrs)
    outs = []
    for x in inputs:
        out = []
        for q, g in enumerate(groups):
            j = g.index(q)
            out.append(np.concatenate([_split(x[s], count, sd)[j] for s in g], axis=cd))
        outs.append(np.stack(out).astype(x.dtype, copy=False))
    return tuple(outs)


def _zeros_like(x: np.ndarray) -> np.ndarray:
    """``broadcast_in_dim(constant(0, element_type(result)), ...)``: 0 in the element type,
    which is its NaN in f8E8M0FNU (no zero; docs/float-formats.md, as XLA's), else 0."""
    return np.full_like(x, np.asarray(0.0).astype(x.dtype))


@register("collective_permute")
@_per_process
def collective_permute(inputs, attrs, types):
    """``result@process`` is ``operand@source`` for the pair ``[source, process]``
    (mapped through cross_replica or cross_partition), and zeros where no pair targets
    the process."""
    x = inputs[0]
    nr, npart = grid(attrs)
    pairs = [list(p) for p in attrs["source_target_pairs"]]
    out = _zeros_like(x)
    for s, t in process_groups(strategy(attrs), pairs, nr, npart):
        out[_flat(t, npart)] = x[_flat(s, npart)]
    return out


def _sources(attrs, roots, n: int) -> list[list[int | None]]:
    """Per process (flattened id) and data operand ``j < n``: the flattened id of the
    process it receives from (collective_broadcast, collective_reduce), or None for a
    process in no group. The source is the group's first process, or with
    ``has_dynamic_root`` the group's member at the process's own ``roots[process][j]``."""
    nr, npart = grid(attrs)
    out: list[list[int | None]] = [[None] * n for _ in range(nr * npart)]
    for g in process_groups(strategy(attrs), attrs["replica_groups"], nr, npart):
        flat = [_flat(p, npart) for p in g]
        for q in flat:
            out[q] = [flat[int(roots[q][j])] if roots is not None else flat[0]
                      for j in range(n)]
    return out


def _data_and_roots(inputs, attrs) -> tuple[list[np.ndarray], np.ndarray | None]:
    """The data operands and, with ``has_dynamic_root``, the root operand (the last)."""
    if attrs.get("has_dynamic_root"):
        return list(inputs[:-1]), np.asarray(inputs[-1])
    return list(inputs), None


@register("collective_broadcast")
@_per_process
def collective_broadcast(inputs, attrs, types):
    """``results[j]@process = operands[j]@source`` (the group's first process, or the
    member the root operand names); zeros for a process in no group."""
    data, roots = _data_and_roots(inputs, attrs)
    src = _sources(attrs, roots, len(data))
    outs = []
    for j, x in enumerate(data):
        out = _zeros_like(x)
        for q, s in enumerate(src):
            if s[j] is not None:
                out[q] = x[s[j]]
        outs.append(out)
    return tuple(outs)


# ---------------------------------------------------------------------------
# all_reduce, reduce_scatter: the body over the group's values
# ---------------------------------------------------------------------------

def _leaves(x: np.ndarray, attrs, lead: int) -> np.ndarray:
    """[lead axes..., processes, shape..., group size]: the group's values of every result
    element, in group order."""
    m = members(attrs)                                   # [P, g]
    picked = np.take(x, m, axis=lead)                    # lead + [P, g] + shape
    return np.moveaxis(picked, lead + 1, -1)


def _reduce_leaves(body: str, leaves: np.ndarray) -> np.ndarray:
    """``reduce_without_init`` over the last axis (at least one leaf)."""
    g = reduction.ReduceGeometry(leaves.shape, (leaves.ndim - 1,))
    init = np.zeros(leaves.shape[:-1], leaves.dtype)
    return reduction.evaluate_tree(body, g, [leaves], [init], with_init=False)[0]


def _scatter(reduced: np.ndarray, attrs, lead: int) -> np.ndarray:
    """Process ``q`` keeps part ``index_of(q, group)`` of its group's reduced value, split
    along ``scatter_dimension`` into as many parts as the group has processes."""
    m = members(attrs)
    count = m.shape[1]
    axis = lead + 1 + int(attrs["scatter_dimension"])
    parts = [np.take(np.take(reduced, [q], axis=lead),
                     range(list(m[q]).index(q) * (reduced.shape[axis] // count),
                           (list(m[q]).index(q) + 1) * (reduced.shape[axis] // count)),
                     axis=axis)
             for q in range(m.shape[0])]
    return np.concatenate(parts, axis=lead)


@register("all_reduce")
@_per_process
def all_reduce(inputs, attrs, types):
    """Each operand's group values reduced with ``computation`` (stablehlo-spec-2026-08.md:
    ``results...@process[result_index]``, one schedule per operand and element)."""
    xs = _promoted(attrs["computation"], inputs)
    return tuple(_reduce_leaves(attrs["computation"], _leaves(x, attrs, 0)).astype(
        t.element_type.dtype, copy=False) for x, t in zip(xs, types))


@register("reduce_scatter")
@_per_process
def reduce_scatter(inputs, attrs, types):
    (x,) = _promoted(attrs["computation"], inputs[:1])
    reduced = _reduce_leaves(attrs["computation"], _leaves(x, attrs, 0))
    return _scatter(reduced.astype(types[0].element_type.dtype, copy=False), attrs, 0)


def _batched(x: np.ndarray, attrs) -> tuple[np.ndarray, dict]:
    """Stacked inputs ([batch, P] + shape, or [batch] + shape on a 1x1 grid) with a
    process axis, and the attributes with the grid."""
    if "num_replicas" not in attrs:
        return np.asarray(x)[:, None], {**attrs, "num_replicas": 1, "num_partitions": 1}
    return np.asarray(x), attrs


def _promoted(computation: str, xs) -> list:
    """The operands converted to the computation's type (stablehlo-spec-2026-08.md
    "### all_reduce": ``to_destination_type(operands..., type(func_inputs(computation)[0]))``);
    as they are where it is theirs."""
    e = parse_region(computation).arg_types[0]
    return [to_destination_type(x, e) for x in xs]


def _all_reduce_leaves(inputs, attrs, n: int, k: int) -> np.ndarray:
    """The group's values of result ``k`` (operand ``k``'s, converted to the computation's
    type)."""
    x = inputs[k]
    if "computation" in attrs:
        (x,) = _promoted(attrs["computation"], [x])
    x, a = _batched(x, attrs)
    leaves = _leaves(x, a, 1)
    return leaves if "num_replicas" in attrs else leaves[:, 0]


def _reduce_scatter_leaves(inputs, attrs, n: int, k: int) -> np.ndarray:
    x = inputs[0]
    if "computation" in attrs:
        (x,) = _promoted(attrs["computation"], [x])
    x, a = _batched(x, attrs)
    leaves = _leaves(x, a, 1)                                  # [B, P] + shape + [g]
    m = members(a)
    count = m.shape[1]
    axis = 2 + int(a["scatter_dimension"])
    size = leaves.shape[axis] // count
    parts = [np.take(leaves[:, q:q + 1], range(list(m[q]).index(q) * size,
                                               (list(m[q]).index(q) + 1) * size), axis=axis)
             for q in range(m.shape[0])]
    out = np.concatenate(parts, axis=1)
    return out if "num_replicas" in attrs else out[:, 0]


# the leaves the ``reduction`` bound reads (conformance/checking/verdicts/reduction.py)
reduction.LEAVES["all_reduce"] = _all_reduce_leaves
reduction.LEAVES["reduce_scatter"] = _reduce_scatter_leaves


# ---------------------------------------------------------------------------
# collective_reduce (stablehlo-spec-2026-08): the body over the group's values, kept at
# the group's source
# ---------------------------------------------------------------------------

def _rooted_leaves(x: np.ndarray, attrs, roots, j: int, lead: int):
    """collective_reduce's data operand ``j``: (leaves, keep). ``leaves`` is [lead axes...,
    processes, shape..., group size], the group's values in group order at every process
    of a group (zeros at a process in none); ``keep`` (broadcastable to the result) says
    which processes keep the reduced value: the group's source (its first process, or
    with a root operand the one the process's own root names). ``roots``: [lead axes...,
    processes, n] or None."""
    nr, npart = grid(attrs)
    groups = [[_flat(p, npart) for p in g] for g in
              process_groups(strategy(attrs), attrs["replica_groups"], nr, npart)]
    size = len(groups[0]) if groups and groups[0] else 1
    leaves = np.zeros(x.shape + (size,), x.dtype)
    keep = np.zeros(x.shape[:lead + 1] + (1,) * (x.ndim - lead - 1), bool)
    index = (slice(None),) * lead
    for ids in groups:
        values = np.moveaxis(np.take(x, ids, axis=lead), lead, -1)   # lead + shape + [g]
        for q in ids:
            leaves[index + (q,)] = values
            if roots is None:
                mine = np.full(x.shape[:lead], q == ids[0])
            else:
                mine = np.asarray(roots)[index + (q, j)] == ids.index(q)
            keep[index + (q,)] = np.reshape(mine, np.shape(mine) + (1,) * (x.ndim - lead - 1))
    return leaves, keep


@register("collective_reduce")
@_per_process
def collective_reduce(inputs, attrs, types):
    """Each data operand reduced over the group (``computation``, in group order as
    all_reduce's), kept at the group's source process; zeros at every other process."""
    data, roots = _data_and_roots(inputs, attrs)
    outs = []
    for j, x in enumerate(data):
        et = types[j].element_type.dtype
        leaves, keep = _rooted_leaves(x.astype(et, copy=False), attrs, roots, j, 0)
        reduced = _reduce_leaves(attrs["computation"], leaves).astype(et, copy=False)
        outs.append(np.where(keep, reduced, _zeros_like(np.zeros((), et))))
    return tuple(outs)


def _collective_reduce_leaves(inputs, attrs, n: int, k: int) -> np.ndarray:
    """The ``reduction`` bound's leaves of result ``k``: the group's values where the
    process keeps the result, zeros (an exact result) elsewhere."""
    single = "num_replicas" not in attrs
    xs = [_batched(x, attrs)[0] for x in inputs]
    a = _batched(inputs[0], attrs)[1]
    roots = xs[-1] if attrs.get("has_dynamic_root") else None
    leaves, keep = _rooted_leaves(xs[k], a, roots, k, 1)
    leaves = np.where(keep[..., None], leaves, np.zeros((), leaves.dtype))
    return leaves[:, 0] if single else leaves


reduction.LEAVES["collective_reduce"] = _collective_reduce_leaves


@condition("collective_reduce_sums_may_overflow")
def reduce_sums_may_overflow(operands, computation, replica_groups, channel_id,
                             has_dynamic_root, num_replicas, num_partitions):
    """Per result of collective_reduce: the elements where a float sum's finite magnitudes
    add up past the largest finite value (one order overflows, another may not).
    ``operands`` stacked as all_reduce's ``operand``."""
    attrs = {"replica_groups": replica_groups, "channel_id": channel_id,
             "has_dynamic_root": has_dynamic_root}
    if num_replicas * num_partitions > 1:
        attrs.update(num_replicas=num_replicas, num_partitions=num_partitions)
    xs = [np.asarray(x) for x in operands]
    out = []
    for k in range(len(xs) - (1 if has_dynamic_root else 0)):
        leaves = _collective_reduce_leaves(xs, attrs, 1, k)
        out.append(_overflows(leaves, element_type(leaves.dtype), computation))
    return out


def _overflows(leaves: np.ndarray, et, computation: str) -> np.ndarray:
    """Elements whose float leaves' finite magnitudes add up past the largest finite value
    (per part for complex); none for other bodies or types."""
    if not (et.is_float or et.is_complex) or "add" not in computation:
        return np.zeros(leaves.shape[:-1], bool)
    big = float(ml_dtypes.finfo(et.component.dtype).max)
    w = leaves.astype(np.complex128 if et.is_complex else np.float64)
    out = np.zeros(leaves.shape[:-1], bool)
    for part in ([w.real, w.imag] if et.is_complex else [w]):
        a = np.where(np.isfinite(part), np.abs(part), 0.0)
        out |= a.sum(axis=-1) > big
    return out


@condition("collective_sum_may_overflow")
def sum_may_overflow(operand, computation, replica_groups, channel_id, use_global_device_ids,
                     num_replicas, num_partitions, scatter_dimension):
    """Result elements of a float sum (all_reduce, reduce_scatter) whose finite values'
    magnitudes add up past the largest finite value: one order overflows, another may not
    (per part for complex). ``operand`` is stacked ([batch, processes] + shape, or [batch] +
    shape on a 1x1 grid); ``scatter_dimension`` < 0 for all_reduce."""
    x = np.asarray(operand)
    et = element_type(x.dtype)
    attrs = {"replica_groups": replica_groups, "channel_id": channel_id,
             "use_global_device_ids": use_global_device_ids}
    if num_replicas * num_partitions > 1:
        attrs.update(num_replicas=num_replicas, num_partitions=num_partitions)
    if scatter_dimension >= 0:
        attrs["scatter_dimension"] = scatter_dimension
        leaves = _reduce_scatter_leaves([x], attrs, 1, 0)
    else:
        leaves = _all_reduce_leaves([x], attrs, 1, 0)
    return _overflows(leaves, et, computation)


@condition("collective_sums_may_overflow")
def sums_may_overflow(operands, computation, replica_groups, channel_id, use_global_device_ids,
                      num_replicas, num_partitions):
    """Per result of a variadic all_reduce (stablehlo-spec-2026-08.md): the elements of
    :func:`sum_may_overflow`, each operand on its own."""
    return [sum_may_overflow(x, computation, replica_groups, channel_id,
                             use_global_device_ids, num_replicas, num_partitions, -1)
            for x in operands]
