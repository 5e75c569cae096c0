"""jax mappings of the quantized data-movement forms (specs/quantized_movement.yaml): none,
for the reason of the quantization family (jax has no quantized element type)."""
from __future__ import annotations

from conformance.specs import quantized_movement

from .jax_ops import builder
from .jax_ops_quantization import _unsupported

for _op in quantized_movement():
    builder(_op)(_unsupported(_op))
