"""jax.lax mappings of the reduction ops (registered into jax_ops.BUILDERS).

``lax.reduce`` and ``lax.reduce_window`` take the body as a Python function of scalars,
which is the region composed from the per-op builders (jax_ops.jax_function), so jax
traces exactly the region into the op's body. jax lowers them to stablehlo.reduce and
stablehlo.reduce_window with that body (a body it recognises as a monoid with a constant
identity init value would become reduce_sum & co.; the init values here are inputs, so it
never does). jax.vmap cannot batch init values (NotImplementedError), so these ops run
once per case (JaxBackend.compile_batch's fallback).
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature
from conformance.core.promotion import is_promotable
from conformance.core.dense import parse_dense
from conformance.specs import regions

from .base import Unsupported
from .jax_ops import builder, jax_function


def _body(sig: Signature, n: int):
    """The body as jax.lax wants it. jax.lax builds the body's types from the operands',
    so a region of other types (an invalid program) cannot be expressed."""
    (text,) = sig.regions
    region = regions.parse(text)
    types = [t.element_type for t in sig.input_types[:n]]
    n_args = len(region.arg_types)
    if (n_args == 2 * n and list(region.arg_types[:n]) == list(region.arg_types[n:])
            and list(region.arg_types[:n]) != types
            and all(is_promotable(t, e) for t, e in zip(types, region.arg_types[:n]))):
        # measured (jax 0.10.2, lax.reduce of f16 with a body returning f32): "Cannot lower
        # jaxpr with verifier errors: The type of reduction-region's parameter at index 0
        # is different than the corresponding result type: 'tensor<f16>' vs 'tensor<f32>'"
        raise Unsupported(f"jax.lax traces the body at the operands' types "
                          f"({', '.join(t.name for t in types)}); a body promoted to "
                          f"{', '.join(t.name for t in region.arg_types[:n])} (the newer "
                          f"spec's C6) fails jax's lowering: 'the type of reduction-region's "
                          f"parameter is different than the corresponding result type'")
    if list(region.arg_types) != types + types or list(region.result_types) != types:
        raise Unsupported(f"jax.lax builds the body from the operands' types; it cannot "
                          f"express the region {text!r} for "
                          f"{', '.join(t.name for t in types)}")
    fn = jax_function(text)
    if n == 1:
        return lambda a, b: fn(a, b)[0]
    return lambda a, b: tuple(fn(*a, *b))


@builder("reduce")
def _reduce(sig: Signature):
    n = len(sig.result_types)
    if len(sig.input_types) != 2 * n:
        raise Unsupported(f"reduce: {len(sig.input_types)} operands for {n} results; jax.lax "
                          "takes one init value per input")
    body = _body(sig, n)
    dims = tuple(sig.attributes["dimensions"])

    def run(*xs):
        if n == 1:
            return lax.reduce(xs[0], xs[1], body, dims)
        return tuple(lax.reduce(tuple(xs[:n]), tuple(xs[n:]), body, dims))
    return run


@builder("reduce_window")
def _reduce_window(sig: Signature):
    n = len(sig.result_types)
    if len(sig.input_types) != 2 * n:
        raise Unsupported(f"reduce_window: {len(sig.input_types)} operands for {n} results; "
                          "jax.lax takes one init value per input")
    a = sig.attributes
    try:
        padding = [tuple(int(v) for v in row) for row in parse_dense(a["padding"]).reshape(-1, 2)]
    except (ValueError, TypeError) as e:
        raise Unsupported(f"reduce_window: jax.lax takes padding as (low, high) pairs; "
                          f"{a['padding']!r} is not a N x 2 tensor ({e})") from None
    body = _body(sig, n)
    args = (tuple(a["window_dimensions"]), tuple(a["window_strides"]), padding,
            tuple(a["base_dilations"]), tuple(a["window_dilations"]))

    def run(*xs):
        if n == 1:
            return lax.reduce_window(xs[0], xs[1], body, *args)
        return tuple(lax.reduce_window(tuple(xs[:n]), tuple(xs[n:]), body, *args))
    return run


@builder("select_and_scatter")
def _select_and_scatter(sig: Signature):
    """jax's internal ``select_and_scatter_p`` (jax._src.lax.windowed_reductions
    ``_select_and_scatter``, jax 0.10.2; the public API has only its add form), which
    lowers to stablehlo.select_and_scatter with the regions jax traces from the
    functions. PRIVATE API: where it is missing the op is unsupported."""
    try:
        from jax._src.lax.windowed_reductions import _select_and_scatter as prim
    except ImportError:
        raise Unsupported("select_and_scatter: this jax has no select_and_scatter "
                          "primitive (jax._src.lax.windowed_reductions._select_and_scatter)")
    a = sig.attributes
    select_text, scatter_text = sig.regions
    et = sig.input_types[0].element_type
    if sig.input_types[0].rank == 0:
        # jaxlib 0.10.2: XLA aborts the process compiling it (hlo_computation.cc:191 "Check
        # failed: param_instructions_[param_no] == nullptr ... parameter number 1 already
        # allocated"); jax runs in-process, so the xla backend (isolated) records it.
        raise Unsupported("select_and_scatter of a rank-0 operand: XLA aborts the process "
                          "compiling it (CHECK failure), and jax runs in this process")
    promoted = regions.parse(scatter_text).arg_types
    if len(promoted) == 2 and promoted[0] != et and is_promotable(et, promoted[0]):
        # measured (jax 0.10.2, the primitive with a scatter returning f32 for f16): "Cannot
        # lower jaxpr with verifier errors: The type of reduction-region's parameter at
        # index 0 is different than the corresponding result type: 'tensor<f16>' vs
        # 'tensor<f32>'"
        raise Unsupported(f"select_and_scatter: jax traces the scatter at the operand's type "
                          f"({et.name}); a scatter promoted to {promoted[0].name} (the newer "
                          f"spec's C10) fails jax's lowering: 'the type of reduction-region's "
                          f"parameter is different than the corresponding result type'")
    for text, result in ((select_text, "i1"), (scatter_text, et.name)):
        region = regions.parse(text)
        if [t.name for t in region.arg_types] != [et.name, et.name] or \
                [t.name for t in region.result_types] != [result]:
            raise Unsupported(f"select_and_scatter: jax traces the regions from the "
                              f"operand's type; it cannot express {text!r} for {et.name}")
    try:
        padding = [tuple(int(v) for v in row) for row in parse_dense(a["padding"]).reshape(-1, 2)]
    except (ValueError, TypeError) as e:
        raise Unsupported(f"select_and_scatter: jax takes padding as (low, high) pairs; "
                          f"{a['padding']!r} is not a N x 2 tensor ({e})") from None
    select, scatter = jax_function(select_text), jax_function(scatter_text)
    wd, ws = tuple(a["window_dimensions"]), tuple(a["window_strides"])

    def run(operand, source, init):
        return prim(operand, lambda x, y: select(x, y)[0], wd, ws, padding, source, init,
                    lambda x, y: scatter(x, y)[0])
    return run
