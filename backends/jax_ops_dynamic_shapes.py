"""jax.lax and the dynamic-shape ops (registered into jax_ops.BUILDERS): all Unsupported.

jax's arrays have static shapes: jax.lax (jax 0.10.2) has no dynamic_iota, dynamic_reshape,
dynamic_broadcast_in_dim, dynamic_pad, dynamic_gather or dynamic_conv (its only
``dynamic_*`` functions are dynamic_slice and dynamic_update_slice, whose sizes are
static), and no lax function takes a shape, a padding or a slice size as an array. jax
emits these StableHLO ops only when it exports a function with symbolic (shape-polymorphic)
dimensions, where the shape operand is computed from the symbolic sizes rather than passed
in; the result type is then dynamic, not the signature's static one.
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder


def _unsupported(sig: Signature):
    lax_names = sorted(n for n in dir(lax) if n.startswith("dynamic_") and not n.endswith("_p"))
    raise Unsupported(f"{sig.op}: jax.lax has no {sig.op} (its dynamic_* functions are "
                      f"{', '.join(lax_names)}): jax arrays have static shapes, and jax emits "
                      f"stablehlo.{sig.op} only under shape-polymorphic export, never with a "
                      "shape operand passed in")


for _op in ("dynamic_iota", "dynamic_reshape", "dynamic_broadcast_in_dim", "dynamic_pad",
            "dynamic_gather", "dynamic_conv"):
    builder(_op)(_unsupported)
