"""jax mappings of the quantization family (uniform_quantize, uniform_dequantize, add on
quantized tensors, the quantized forms of specs/quantized_forms.yaml): none, with the
reason measured on jax 0.10.2."""
from __future__ import annotations

from conformance.core.case import Signature
from conformance.specs import quantized_forms

from .base import Unsupported
from .jax_ops import builder

_REASON = ("jax has no quantized element types: jax 0.10.2's jax.lax, jax.numpy and "
           "jax.dtypes name no !quant.uniform type, so no jax.lax program takes or gives "
           "one (stablehlo.{op} on quantized tensors is tested through xla, interpreter "
           "and iree)")


def unsupported_builder(op: str):
    def build(sig: Signature):
        raise Unsupported(_REASON.format(op=op.replace("_quantized", "")))
    return build


for _op in ("uniform_quantize", "uniform_dequantize", "add_quantized", *quantized_forms()):
    builder(_op)(unsupported_builder(_op))


def _own_computation_ops() -> list[str]:
    """The quantized ops whose spec file gives its own computation
    (specs/ops/*_quantized.yaml with quantized_semantics: clamp, select, compare, ...)."""
    from conformance.specs import SPEC_DIR, load_spec
    return [p.stem for p in sorted(SPEC_DIR.glob("*_quantized.yaml"))
            if load_spec(p.stem).data.get("quantized_semantics")]


for _op in _own_computation_ops():
    builder(_op)(unsupported_builder(_op))
