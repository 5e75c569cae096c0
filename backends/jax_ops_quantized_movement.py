"""jax mappings of the quantized data-movement forms (specs/quantized_movement.yaml): none,
for the reason of the quantization family (jax has no quantized element type)."""
from __future__ import annotations

from conformance.specs import quantized_movement

from .jax_ops import builder
from .jax_ops_quantization import unsupported_builder

for _op in quantized_movement():
    builder(_op)(unsupported_builder(_op))
