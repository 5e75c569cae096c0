"""jax.lax mappings of the indexing ops (registered into jax_ops.BUILDERS).

jax.lax.gather and the lax.scatter family always read the index vector from the last
dimension of the indices (jax lowers them with index_vector_dim = rank - 1); any other
``index_vector_dim`` is expressed by moving that axis last first (the batch axes keep
their order), and the implicit one (``index_vector_dim == rank``) by a trailing axis of
size 1. Both are exact rewrites of the same op; the indices' batching dimensions
(``start_indices_batching_dims``, ``scatter_indices_batching_dims``) are renumbered with
the move (jax.lax's ``operand_batching_dims`` / ``start_indices_batching_dims``;
scatter's ``operand_batching_dims`` is the spec's ``input_batching_dims``).
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature
from conformance.core.promotion import is_promotable
from conformance.specs import regions

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


def _moved(dims, rank: int, index_vector_dim: int) -> tuple[int, ...]:
    """Axes of the indices renumbered as :func:`_index_vector_last` moves them."""
    if index_vector_dim >= rank:
        return tuple(dims)
    return tuple(d - 1 if d > index_vector_dim else d for d in dims)


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
    rank = sig.input_types[1].rank
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(a["offset_dims"]), collapsed_slice_dims=collapsed,
        start_index_map=tuple(a["start_index_map"]),
        operand_batching_dims=tuple(a.get("operand_batching_dims", ())),
        start_indices_batching_dims=_moved(a.get("start_indices_batching_dims", ()), rank,
                                           a["index_vector_dim"]))
    last = _index_vector_last(rank, a["index_vector_dim"])
    sorted_ = bool(a.get("indices_are_sorted", False))
    # CLIP and PROMISE_IN_BOUNDS lower to the same stablehlo.gather (jax leaves clamping
    # to XLA's gather, which clamps the start index so that the slice is in bounds).
    return lambda operand, idx: lax.gather(operand, last(idx), dnums, sizes,
                                           indices_are_sorted=sorted_,
                                           mode=lax.GatherScatterMode.CLIP)


# The update computations jax.lax has a scatter for: (current, update) -> value.
_SCATTERS = {"add": lax.scatter_add, "multiply": lax.scatter_mul,
             "maximum": lax.scatter_max, "minimum": lax.scatter_min}


def _component(region, k: int, n: int):
    """The lax scatter function for result ``k`` of a scatter region with ``n`` inputs:
    ``arg N+k`` (replace) or one op of (arg k, arg N+k); None for anything else."""
    node = region.results[k]
    if isinstance(node, regions.Arg):
        return lax.scatter if node.index == n + k else None
    if node.op in _SCATTERS and not dict(node.attributes) and \
            [getattr(o, "index", None) for o in node.operands] == [k, n + k]:
        return _SCATTERS[node.op]
    return None


@builder("scatter")
def _scatter(sig: Signature):
    """lax.scatter (replace), scatter_add, scatter_mul, scatter_max, scatter_min, one per
    input. jax.lax scatters one operand at a time, so a variadic scatter maps onto N of
    them when result k of the region reads only arguments k and N+k (then the inputs
    do not interact; only the order of repeated updates could differ between them, and
    that order is implementation-defined anyway). Any other region is unsupported."""
    a = sig.attributes
    n = (len(sig.input_types) - 1) // 2
    (text,) = sig.regions
    region = regions.parse(text)
    if len(region.results) != n:
        raise Unsupported(f"scatter: the region returns {len(region.results)} values for "
                          f"{n} inputs")
    types = [t.element_type for t in sig.input_types[:n]]
    body = list(region.arg_types[:n])
    if (list(region.arg_types) == body + body and body != types
            and all(is_promotable(t, e) for t, e in zip(types, body))):
        # measured (jax 0.10.2, lax.scatter_add of an f16 operand with f32 updates):
        # "lax.scatter requires arguments to have the same dtypes, got float16, float32"
        raise Unsupported(f"jax.lax scatters at the operand's type ({', '.join(t.name for t in types)}); "
                          f"an update computation promoted to {', '.join(t.name for t in body)} "
                          f"(the newer spec's C23) has no jax.lax form: 'lax.scatter requires "
                          f"arguments to have the same dtypes'")
    if list(region.arg_types) != types + types or list(region.result_types) != types:
        raise Unsupported(f"jax.lax builds the update computation from the operands' types; "
                          f"it cannot express the region {text!r} for "
                          f"{', '.join(t.name for t in types)}")
    fns = [_component(region, k, n) for k in range(n)]
    if None in fns:
        raise Unsupported(f"jax.lax has no scatter for the update computation {text!r} "
                          "(only arg N+k, add, multiply, maximum and minimum of "
                          "(arg k, arg N+k))")
    rank = sig.input_types[n].rank
    dnums = lax.ScatterDimensionNumbers(
        update_window_dims=tuple(a["update_window_dims"]),
        inserted_window_dims=tuple(a["inserted_window_dims"]),
        scatter_dims_to_operand_dims=tuple(a["scatter_dims_to_operand_dims"]),
        operand_batching_dims=tuple(a.get("input_batching_dims", ())),
        scatter_indices_batching_dims=_moved(a.get("scatter_indices_batching_dims", ()), rank,
                                             a["index_vector_dim"]))
    last = _index_vector_last(rank, a["index_vector_dim"])
    flags = {"indices_are_sorted": bool(a.get("indices_are_sorted", False)),
             "unique_indices": bool(a.get("unique_indices", False))}

    # FILL_OR_DROP: a window not entirely in bounds is dropped (XLA's own rule; jax lowers
    # it, like PROMISE_IN_BOUNDS, to a plain stablehlo.scatter). CLIP would clamp.
    def run(*xs):
        operands, idx, updates = xs[:n], last(xs[n]), xs[n + 1:]
        out = tuple(fn(x, idx, u, dnums, mode=lax.GatherScatterMode.FILL_OR_DROP, **flags)
                    for fn, x, u in zip(fns, operands, updates))
        return out if n > 1 else out[0]
    return run
