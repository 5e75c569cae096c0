"""jax.lax mappings of the contraction ops (registered into jax_ops.BUILDERS).

dot_general is ``lax.dot_general`` with the dimension numbers as
``((lhs_contracting, rhs_contracting), (lhs_batching, rhs_batching))``, the
precision_config as a pair of ``lax.Precision`` (one per operand, as StableHLO has it),
and the result element type as ``preferred_element_type`` (jax lowers it to the
stablehlo.dot_general result type; without it jax would give the operands' type).
jax's own shape rule puts the result in the spec's order (batching, lhs result, rhs
result), so nothing is transposed here.
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder

_PRECISION = {"DEFAULT": lax.Precision.DEFAULT, "HIGH": lax.Precision.HIGH,
              "HIGHEST": lax.Precision.HIGHEST}


@builder("dot_general")
def _dot_general(sig: Signature):
    a = sig.attributes
    pc = list(a.get("precision_config") or [])
    if len(pc) != 2 or any(p not in _PRECISION for p in pc):
        raise Unsupported(f"jax.lax.dot_general takes one precision per operand; it cannot "
                          f"express precision_config {pc}")
    precision = (_PRECISION[pc[0]], _PRECISION[pc[1]])
    dims = ((tuple(a["lhs_contracting_dimensions"]), tuple(a["rhs_contracting_dimensions"])),
            (tuple(a["lhs_batching_dimensions"]), tuple(a["rhs_batching_dimensions"])))
    lt, rt = sig.input_types
    if lt.element_type != rt.element_type:
        raise Unsupported(f"jax.lax.dot_general promotes operands of different types "
                          f"({lt.element_type.name}, {rt.element_type.name}) instead of "
                          "passing them as they are")
    out = sig.result_types[0].element_type.dtype
    return lambda x, y: lax.dot_general(x, y, dims, precision=precision,
                                        preferred_element_type=out)
