"""jax.lax mapping of the collective ops (issue 18), registered into jax_ops.BUILDERS.

A collective runs under ``jax.shard_map`` over a mesh of ``num_replicas`` x
``num_partitions`` CPU devices with the axes ``replicas`` and ``partitions``: each input
``[processes] + shape`` is split on its leading axis (process ``(r, p)`` at flattened id
``r * num_partitions + p``), each process runs the builder's function on its own value, and
the results are stacked back. What jax.lax expresses there:

- replica_id, partition_id: ``lax.axis_index`` of the mesh axis;
- all_reduce: ``psum`` / ``pmax`` / ``pmin`` (bodies add, maximum, minimum) of the tuple
  of operands (stablehlo-spec-2026-08.md: variadic; jax lowers a tuple to one variadic
  ``stablehlo.all_reduce``);
- all_gather: ``all_gather(tiled=True)``; all_to_all: ``all_to_all(tiled=True)``, of the
  tuple of operands (jax maps them over the pytree: one op per operand);
  reduce_scatter: ``psum_scatter(tiled=True)`` (body add);
- collective_permute: ``ppermute`` with the source_target_pairs (a partial permutation:
  jax gives zeros where nothing arrives, as the spec does);
- collective_broadcast (stablehlo-spec-2026-08): ``pbroadcast`` from the group's first
  id (lowered on GPU only in jax 0.10.2: Unsupported on CPU, measured);
- collective_reduce (stablehlo-spec-2026-08; jax has none): ``psum`` / ``pmax`` /
  ``pmin`` kept at the group's first id (``axis_index``), zeros elsewhere.

jax's collectives under shard_map take no replica groups (``axis_index_groups`` is
pmap-only), so a case whose groups are not one group of every process of the axis, in
axis order, is Unsupported with that reason; so is a body jax has no collective for. The
backend (JaxBackend) needs as many devices as processes: the CPU platform has one unless
XLA_FLAGS holds ``--xla_force_host_platform_device_count`` before jax starts (the CLI sets
it when collectives are selected).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from jax import lax

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder

AXES = ("replicas", "partitions")


def per_process(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a builder's function as one process's program (JaxBackend runs it on a grid)."""
    fn.per_process = True
    return fn


def _strategy(a: dict) -> str:
    channel = int(a.get("channel_id", 0))
    if "use_global_device_ids" in a:
        if channel <= 0:
            return "cross_replica"
        return "flattened_ids" if a["use_global_device_ids"] else "cross_replica_and_partition"
    return "cross_replica" if channel <= 0 else "cross_partition"


def _axis(sig: Signature, groups_attr: str = "replica_groups"):
    """The mesh axis (or axes, in the spec's process order) a one-group collective spans;
    Unsupported for any other grouping."""
    a = sig.attributes
    kind = _strategy(a)
    nr, npart = sig.num_replicas, sig.num_partitions
    axis, domain = {"cross_replica": ("replicas", nr),
                    "cross_partition": ("partitions", npart),
                    "flattened_ids": (AXES, nr * npart),
                    # the group's processes partition-major (003 "#### cross_replica_and_
                    # partition": for each partition, the group's replicas)
                    "cross_replica_and_partition": (("partitions", "replicas"), nr)}[kind]
    if groups_attr and [list(g) for g in a[groups_attr]] != [list(range(domain))]:
        raise Unsupported(f"{sig.op}: jax.lax collectives under shard_map take no replica "
                          f"groups (axis_index_groups is pmap-only); {groups_attr} = "
                          f"{a[groups_attr]} is not one group of all {domain} in order")
    return axis


def _body(sig: Signature) -> str:
    from conformance.specs.regions import Call, parse as parse_region
    node = parse_region(sig.regions[0]).results[0]
    return node.op if isinstance(node, Call) else "?"


@builder("replica_id")
def _replica_id(sig: Signature):
    return per_process(lambda: lax.axis_index("replicas").astype(np.uint32))


@builder("partition_id")
def _partition_id(sig: Signature):
    return per_process(lambda: lax.axis_index("partitions").astype(np.uint32))


_REDUCERS = {"add": lax.psum, "maximum": lax.pmax, "minimum": lax.pmin}


@builder("all_reduce")
def _all_reduce(sig: Signature):
    axis = _axis(sig)
    op = _body(sig)
    if op not in _REDUCERS:
        raise Unsupported(f"all_reduce: jax.lax has no collective for the body {op!r} "
                          "(psum, pmax, pmin only)")
    return per_process(lambda *xs: tuple(_REDUCERS[op](tuple(xs), axis)))


@builder("all_gather")
def _all_gather(sig: Signature):
    axis = _axis(sig)
    dim = int(sig.attributes["all_gather_dim"])
    return per_process(lambda *xs: tuple(lax.all_gather(tuple(xs), axis, axis=dim,
                                                        tiled=True)))


@builder("all_to_all")
def _all_to_all(sig: Signature):
    axis = _axis(sig)
    a = sig.attributes
    sd, cd = int(a["split_dimension"]), int(a["concat_dimension"])
    return per_process(lambda *xs: tuple(lax.all_to_all(tuple(xs), axis, sd, cd,
                                                        tiled=True)))


@builder("reduce_scatter")
def _reduce_scatter(sig: Signature):
    axis = _axis(sig)
    if _body(sig) != "add":
        raise Unsupported(f"reduce_scatter: jax.lax has psum_scatter only (the body is "
                          f"{_body(sig)!r})")
    dim = int(sig.attributes["scatter_dimension"])
    return per_process(lambda x: lax.psum_scatter(x, axis, scatter_dimension=dim, tiled=True))


@builder("collective_permute")
def _collective_permute(sig: Signature):
    axis = _axis(sig, groups_attr="")
    perm = [(int(s), int(t)) for s, t in sig.attributes["source_target_pairs"]]
    return per_process(lambda x: lax.ppermute(x, axis, perm))


def _source_first(sig: Signature):
    """The mesh axis and the source's axis index of a one-group collective whose group is
    ``[source] + the axis's other ids in order`` (how jax's pbroadcast lowers its source);
    Unsupported for any other grouping or a dynamic root."""
    a = sig.attributes
    if a.get("has_dynamic_root"):
        raise Unsupported(f"{sig.op}: jax.lax takes the source as a static axis index "
                          "(no dynamic root operand)")
    axis, domain = {"cross_replica": ("replicas", sig.num_replicas),
                    "cross_partition": ("partitions", sig.num_partitions)}[_strategy(a)]
    groups = [list(g) for g in a["replica_groups"]]
    if len(groups) != 1 or sorted(groups[0]) != list(range(domain)) or \
            groups[0][1:] != sorted(groups[0][1:]):
        raise Unsupported(f"{sig.op}: jax.lax collectives under shard_map take no replica "
                          f"groups; replica_groups = {a['replica_groups']} is not one group of "
                          f"all {domain} ids, the source first and the others in order")
    return (axis,), int(groups[0][0])


@builder("collective_broadcast")
def _collective_broadcast(sig: Signature):
    # jax's CollectiveBroadcast analog. The axis goes as a tuple: jax 0.10.2 reads a bare
    # string's characters as axis names ("Found an unbound axis name: r"). jax 0.10.2
    # registers its lowering for GPU only: on CPU, lowering fails ("MLIR translation rule
    # for primitive 'pbroadcast' not found for platform cpu"), which JaxBackend's
    # lowering probe turns into Unsupported.
    axis, source = _source_first(sig)
    return per_process(lambda *xs: tuple(lax.pbroadcast(list(xs), axis, source)))


@builder("collective_reduce")
def _collective_reduce(sig: Signature):
    # jax has no collective_reduce: psum / pmax / pmin over the axis, kept where the
    # process is the group's source (axis_index), zeros elsewhere, as the spec's prose
    a = sig.attributes
    if a.get("has_dynamic_root"):
        raise Unsupported(f"{sig.op}: jax.lax takes no dynamic root operand")
    axis, domain = {"cross_replica": ("replicas", sig.num_replicas),
                    "cross_partition": ("partitions", sig.num_partitions)}[_strategy(a)]
    groups = [list(g) for g in a["replica_groups"]]
    if len(groups) != 1 or sorted(groups[0]) != list(range(domain)):
        raise Unsupported(f"{sig.op}: jax.lax collectives under shard_map take no replica "
                          f"groups; replica_groups = {a['replica_groups']} is not one group "
                          f"of all {domain} ids")
    op = _body(sig)
    if op not in _REDUCERS:
        raise Unsupported(f"{sig.op}: jax.lax has no collective for the body {op!r} "
                          "(psum, pmax, pmin only)")
    source = int(groups[0][0])

    def run(*xs):
        here = lax.axis_index(axis) == source
        return tuple(lax.select(lax.broadcast(here, x.shape), _REDUCERS[op](x, axis),
                                lax.full_like(x, 0)) for x in xs)
    return per_process(run)


def on_grid(sig: Signature, fn: Callable[..., Any], devices: Sequence[Any]):
    """``fn`` (one process's program) under shard_map over the signature's grid: a function
    of ``[processes] + shape`` inputs giving ``[processes] + shape`` results."""
    from jax import shard_map
    from jax.sharding import Mesh, PartitionSpec
    nr, npart = sig.num_replicas, sig.num_partitions
    if len(devices) < nr * npart:
        raise Unsupported(f"{sig.op} needs {nr}x{npart} processes; jax has {len(devices)} "
                          "devices in this process (XLA_FLAGS=--xla_force_host_platform_"
                          "device_count=8 before jax starts; the CLI sets it when collectives "
                          "are selected)")
    mesh = Mesh(np.array(list(devices[:nr * npart])).reshape(nr, npart), AXES)
    spec = PartitionSpec(AXES)
    n_in, n_out = len(sig.input_leaves), len(sig.result_leaves)

    def local(*xs):
        out = fn(*[x[0] for x in xs])
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(o[None] for o in outs)

    mapped = shard_map(local, mesh=mesh, in_specs=(spec,) * n_in, out_specs=(spec,) * n_out,
                       check_vma=False)
    if nr * npart > 1:
        return mapped
    # a 1x1 grid: the values carry no process axis
    return lambda *xs: tuple(o[0] for o in mapped(*[x[None] for x in xs]))
