"""jax mappings of call and composite (registered into jax_ops.BUILDERS).

call: the callee's region program as a jax function composed of its ops' own builders
(backends/programs.jax_function, as if's branches are), traced inline: jax has no call
of its own (a jitted function is inlined into the caller).

composite: ``lax.composite`` (jax 0.10.2) of the decomposition composed the same way,
with the composite's name, version and attributes, so jax lowers it to
``stablehlo.composite`` with a ``func.func`` decomposition, as the canonical module
says; the attributes' MLIR dictionary text is read with the MLIR bindings and each
entry given to lax.composite as the Python value it prints back from (an integer of its
width, a float, a string, a dense tensor as an array).
"""
from __future__ import annotations

import numpy as np
from jax import lax

from conformance.core.case import Signature

from conformance.core import region_program

from .jax_ops import builder
from .jax_ops_control_flow import one_or_tuple, region_function


def _function(text: str):
    """The body as a jax function of exactly its parameters' types: called with other
    arguments (an invalid call's) it raises TypeError while jax traces it, as a typed
    function would (jax itself traces a callee on its arguments, so never meets one)."""
    params = region_program.parse(text).program.argument_types
    fn = region_function(text)

    def call(*args):
        for k, (a, t) in enumerate(zip(args, params)):
            if tuple(a.shape) != tuple(t.shape) or a.dtype != t.element_type.dtype:
                raise TypeError(f"parameter {k} of the function is {t}, the call gives "
                                f"{a.dtype}{list(a.shape)}")
        return fn(*args)
    return call


@builder("call")
def _call(sig: Signature):
    (text,) = sig.regions
    fn = _function(text)
    return lambda *args: one_or_tuple(tuple(fn(*args)))


def composite_kwargs(text: str) -> dict:
    """The entries of an MLIR dictionary attribute's text as lax.composite's keyword
    arguments (module docstring); ValueError, one line, for an entry of another kind."""
    from jaxlib.mlir import ir
    from conformance.mlir.emitter import context
    out = {}
    with context():
        d = ir.DictAttr(ir.Attribute.parse(text))
        for i in range(len(d)):
            named = d[i]
            a, name = named.attr, named.name
            a = a.maybe_downcast()
            if isinstance(a, ir.IntegerAttr):
                out[name] = np.dtype(f"int{ir.IntegerType(a.type).width}").type(a.value)
            elif isinstance(a, ir.FloatAttr):
                out[name] = np.float32(a.value) if isinstance(
                    a.type.maybe_downcast(), ir.F32Type) else a.value
            elif isinstance(a, ir.StringAttr):
                out[name] = a.value
            elif isinstance(a, ir.DenseElementsAttr):
                out[name] = np.array(a)
            else:
                raise ValueError(f"composite_attributes entry {name} = {a}: no Python value "
                                 "lax.composite prints back as it")
    return out


@builder("composite")
def _composite(sig: Signature):
    (text,) = sig.regions
    fn = _function(text)
    a = sig.attributes
    kwargs = composite_kwargs(str(a.get("composite_attributes", "{}")))
    composite = lax.composite(lambda *args, **_: tuple(fn(*args)), name=str(a["name"]),
                              version=int(a.get("version", 0)))
    return lambda *args: one_or_tuple(tuple(composite(*args, **kwargs)))
