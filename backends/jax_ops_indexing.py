"""jax.lax mappings of the indexing ops (registered into jax_ops.BUILDERS).

jax.lax.gather and the lax.scatter family always read the index vector from the last
dimension of the indices (jax lowers them with index_vector_dim = rank - 1); any other
``index_vector_dim`` is expressed by moving that axis last first (the batch axes keep
their order), and the implicit one (``index_vector_dim == rank``) by a trailing axis of
size 1. Both are exact rewrites of the same op.
"""
from __future__ import annotations

from jax import lax

from conformance.case import Signature

from .base import Unsupported
from .jax_ops import builder


def _index_vector_last(rank: int, index_vector_dim: int):
    """A function moving the indices' index vector dimension last, as jax.lax wants it."""
    if not 0 <= index_vector_dim <= rank:
        raise Unsupported(f"index_vector_dim {index_vector_dim} is outside [0, {rank}]: "
                          "jax.lax always uses the last dimension of the indices")
    if index_vector_dim == rank:
        return lambda idx: lax.expand_dims(idx, (rank,))
    if index_vector_dim == rank - 1:
        return lambda idx: idx
    perm = tuple(d for d in range(rank) if d != index_vector_dim) + (index_vector_dim,)
    return lambda idx: lax.transpose(idx, perm)


@builder("gather")
def _gather(sig: Signature):
    a = sig.attributes
    sizes = tuple(a["slice_sizes"])
    collapsed = tuple(a["collapsed_slice_dims"])
    small = [d for d in collapsed if 0 <= d < len(sizes) and sizes[d] != 1]
    if small:
        raise Unsupported("jax.lax.gather collapses only slice dimensions of size 1; the spec "
                          f"allows 0 (slice_sizes {list(sizes)}, collapsed_slice_dims "
                          f"{list(collapsed)})")
    dnums = lax.GatherDimensionNumbers(offset_dims=tuple(a["offset_dims"]),
                                       collapsed_slice_dims=collapsed,
                                       start_index_map=tuple(a["start_index_map"]))
    last = _index_vector_last(sig.input_types[1].rank, a["index_vector_dim"])
    sorted_ = bool(a.get("indices_are_sorted", False))
    # CLIP and PROMISE_IN_BOUNDS lower to the same stablehlo.gather (jax leaves clamping
    # to XLA's gather, which clamps the start index so that the slice is in bounds).
    return lambda operand, idx: lax.gather(operand, last(idx), dnums, sizes,
                                           indices_are_sorted=sorted_,
                                           mode=lax.GatherScatterMode.CLIP)
