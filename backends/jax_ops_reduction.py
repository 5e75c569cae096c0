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
