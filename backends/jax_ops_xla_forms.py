"""jax.lax mappings of XLA's own forms (registered into jax_ops.BUILDERS).

A binary op with ``broadcast_dimensions`` is written the way jax writes it: both
operands broadcast explicitly to the result's shape (``lax.broadcast_in_dim``; a size-1
dimension broadcasts), then the StableHLO op's own mapping. The canonical program is
CHLO's implicit-broadcast op instead, so the xla backend runs the other path.
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature, TensorType

from .base import Unsupported
from .jax_ops import build, builder


@builder("power_with_broadcast_dimensions")
@builder("atan2_with_broadcast_dimensions")
@builder("compare_with_broadcast_dimensions")
@builder("complex_with_broadcast_dimensions")
@builder("binary_with_broadcast_dimensions")
def _binary_with_broadcast_dimensions(sig: Signature):
    a = sig.attributes
    lhs, rhs = sig.input_types
    out = sig.result_types[0]
    low_is_lhs = lhs.rank <= rhs.rank
    low, high = (lhs, rhs) if low_is_lhs else (rhs, lhs)
    dims = tuple(a["broadcast_dimensions"])
    if len(dims) != low.rank or any(not 0 <= d < high.rank for d in dims) \
            or high.rank != out.rank:
        raise Unsupported(f"lax.broadcast_in_dim cannot express broadcast_dimensions "
                          f"{list(dims)} for ranks {lhs.rank} and {rhs.rank}")
    own = {k: v for k, v in a.items() if k not in ("operation", "broadcast_dimensions")}
    op = build(Signature.make(a["operation"], [TensorType(out.shape, lhs.element_type)] * 2,
                              [out], own))
    shape = out.shape

    def run(x, y):
        lo, hi = (x, y) if low_is_lhs else (y, x)
        lo = lax.broadcast_in_dim(lo, shape, dims)
        hi = lax.broadcast_in_dim(hi, shape, tuple(range(high.rank)))
        return op(lo, hi) if low_is_lhs else op(hi, lo)
    return run


@builder("set_dimension_size")
@builder("get_dimension_size_dynamic")
def _dynamic(sig: Signature):
    raise Unsupported(f"{sig.op}: jax.lax has no SetDimensionSize: jax's arrays have static "
                      "shapes (no bounded dynamic dimension), so no jax program carries a "
                      "runtime size")
