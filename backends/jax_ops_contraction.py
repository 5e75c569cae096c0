"""jax.lax mappings of the contraction ops (registered into jax_ops.BUILDERS).

dot_general is ``lax.dot_general`` with the dimension numbers as
``((lhs_contracting, rhs_contracting), (lhs_batching, rhs_batching))``, the
precision_config as a pair of ``lax.Precision`` (one per operand, as StableHLO has it),
and the result element type as ``preferred_element_type`` (jax lowers it to the
stablehlo.dot_general result type; without it jax would give the operands' type).
jax's own shape rule puts the result in the spec's order (batching, lhs result, rhs
result), so nothing is transposed here.

dot_general's algorithm (stablehlo-spec-2026-08.md) goes as ``precision=`` a
``lax.DotAlgorithm`` of the three precision types, the counts and the flag (a
``lax.DotAlgorithmPreset`` for tf32, which has no numpy type); jax prints it as the
op's ``algorithm`` attribute with precision_config DEFAULT. jax refuses at lowering the
algorithms the platform lacks ("The precision 'TF32_TF32_F32' is not supported by
dot_general on CPU"): JaxBackend's lowering probe makes that Unsupported, as the spec's
"an error should be raised" asks.
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder

_PRECISION = {"DEFAULT": lax.Precision.DEFAULT, "HIGH": lax.Precision.HIGH,
              "HIGHEST": lax.Precision.HIGHEST}

#: the algorithm fields, in lax.DotAlgorithm's order
ALGORITHM = ("lhs_precision_type", "rhs_precision_type", "accumulation_type",
             "lhs_component_count", "rhs_component_count", "num_primitive_operations",
             "allow_imprecise_accumulation")


#: (lhs, rhs, accumulation, counts..., imprecise) -> jax's lax.DotAlgorithmPreset name
_PRESETS = {
    ("f32", "f32", "f32", 1, 1, 1, False): "F32_F32_F32",
    ("f64", "f64", "f64", 1, 1, 1, False): "F64_F64_F64",
    ("bf16", "bf16", "f32", 1, 1, 1, False): "BF16_BF16_F32",
    ("bf16", "bf16", "f32", 1, 1, 3, False): "BF16_BF16_F32_X3",
    ("bf16", "bf16", "f32", 1, 1, 6, False): "BF16_BF16_F32_X6",
    ("bf16", "bf16", "f32", 1, 1, 9, False): "BF16_BF16_F32_X9",
    ("bf16", "bf16", "bf16", 1, 1, 1, False): "BF16_BF16_BF16",
    ("f16", "f16", "f16", 1, 1, 1, False): "F16_F16_F16",
    ("f16", "f16", "f32", 1, 1, 1, False): "F16_F16_F32",
    ("tf32", "tf32", "f32", 1, 1, 1, False): "TF32_TF32_F32",
    ("tf32", "tf32", "f32", 1, 1, 3, False): "TF32_TF32_F32_X3",
}


def _algorithm(a: dict):
    """The signature's algorithm as jax's ``precision=`` (None: the empty algorithm)."""
    fields = [a.get(n) for n in ALGORITHM]
    if all(f is None for f in fields):
        return None
    if any(f is None for f in fields):
        raise Unsupported(f"dot_general: a partly set algorithm {dict(zip(ALGORITHM, fields))} "
                          "has no lax.DotAlgorithm")
    lt, rt, acc, lc, rc, n, imprecise = fields
    # jax's presets where one is the algorithm (jax on CPU knows some presets only as
    # presets: DotAlgorithm(bf16, bf16, f32) is refused where BF16_BF16_F32 runs)
    preset = _PRESETS.get((lt, rt, acc, lc, rc, n, imprecise))
    if preset is not None:
        return getattr(lax.DotAlgorithmPreset, preset)
    if "tf32" in (lt, rt, acc):
        raise Unsupported(f"dot_general: jax names tf32 only in its presets "
                          f"(TF32_TF32_F32, _X3), not {dict(zip(ALGORITHM, fields))}")
    from conformance.core.types import element_type
    return lax.DotAlgorithm(element_type(lt).dtype, element_type(rt).dtype,
                            element_type(acc).dtype, int(lc), int(rc), int(n), bool(imprecise))


@builder("dot_general")
def _dot_general(sig: Signature):
    a = sig.attributes
    pc = list(a.get("precision_config") or [])
    if len(pc) != 2 or any(p not in _PRECISION for p in pc):
        raise Unsupported(f"jax.lax.dot_general takes one precision per operand; it cannot "
                          f"express precision_config {pc}")
    algorithm = _algorithm(a)
    if algorithm is not None and pc != ["DEFAULT", "DEFAULT"]:
        raise Unsupported(f"jax.lax.dot_general takes an algorithm or a precision, not both "
                          f"(precision_config {pc}; C21 asks DEFAULT)")
    precision = algorithm if algorithm is not None else (_PRECISION[pc[0]], _PRECISION[pc[1]])
    dims = ((tuple(a["lhs_contracting_dimensions"]), tuple(a["rhs_contracting_dimensions"])),
            (tuple(a["lhs_batching_dimensions"]), tuple(a["rhs_batching_dimensions"])))
    lt, rt = sig.input_types
    if lt.element_type != rt.element_type:
        raise Unsupported(f"jax.lax.dot_general promotes operands of different types "
                          f"({lt.element_type.name}, {rt.element_type.name}) instead of "
                          "passing them as they are")
    out = sig.result_types[0].element_type.dtype

    def fn(x, y):
        return lax.dot_general(x, y, dims, precision=precision, preferred_element_type=out)
    if algorithm is not None:
        _lowers(fn, sig)
    return fn


def _lowers(fn, sig: Signature) -> None:
    """Unsupported where jax refuses the algorithm on its default platform (a check at
    lowering, after tracing: "The precision ... is not supported by dot_general on CPU")."""
    import jax
    specs = [jax.ShapeDtypeStruct(t.shape, t.element_type.dtype) for t in sig.input_types]
    try:
        jax.jit(fn).lower(*specs)
    except ValueError as e:
        first = (str(e).splitlines() or [""])[0]
        if "is not supported by dot_general" not in first:
            raise
        raise Unsupported(f"jax on {jax.default_backend()} refuses the algorithm "
                          f"({sig.attributes.get('lhs_precision_type')}, "
                          f"{sig.attributes.get('rhs_precision_type')}, "
                          f"{sig.attributes.get('accumulation_type')}): {first[:200]}") from None
