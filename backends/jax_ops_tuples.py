"""jax.lax mappings of the tuple ops and constant (registered into jax_ops.BUILDERS).

jax has no tuple type in its programs: a jitted function takes and returns pytrees of
arrays, which jax flattens into the leaves. So the case's values, which are the leaves
of tuple-typed inputs and results (conformance.core.types.TupleType), pass straight through:

- ``tuple`` returns its inputs' leaves: the leaves of the result, in order (XLA's
  Tuple is what jax itself builds around a jitted function's results);
- ``get_tuple_element`` returns the leaves of element ``index``, picked from the
  operand's leaves by position (XLA's GetTupleElement is what jax builds to take
  apart a tuple-shaped result).

Neither involves a jax.lax op: what this checks is that jax's flattening keeps every
leaf, bit for bit. An invalid signature whose declared tuple structure is wrong is
Unsupported, even where its leaves agree (``tuple(x, tuple<>) -> tuple<x>``): jax has
no tuple structure to refuse. The ops themselves are tested by the xla and interpreter backends,
which run the spec's stablehlo.tuple and stablehlo.get_tuple_element.

``constant`` returns the value as a closed-over numpy array: jax stages it out as a
``stablehlo.constant`` with exactly those bits (checked: ``jax.jit(f).lower()`` of a
NaN payload prints it as ``0x7FA00001``). It has no inputs, so jax.vmap cannot map it
and JaxBackend.compile_batch runs it once per case.
"""
from __future__ import annotations

from conformance.core.dense import dense_type, parse_dense
from conformance.core.types import TupleType

from .base import Unsupported
from .jax_ops import builder


@builder("constant")
def _constant(sig):
    text = sig.attributes["value"]
    value = parse_dense(text)
    value.flags.writeable = False
    if sig.invalid and dense_type(text) != sig.result_types[0]:
        raise Unsupported(f"jax stages a constant out with its value's own type "
                          f"{dense_type(text)}; it cannot declare {sig.result_types[0]}")
    return lambda: value


@builder("tuple")
def _tuple(sig):
    built = TupleType(sig.input_types)
    if tuple(sig.result_types) != (built,):
        # Only an invalid signature gets here. Its leaves may even match (a trailing
        # tuple<> dropped), but jax has no tuple structure to get wrong or to refuse.
        raise Unsupported(f"jax has no tuple types: the tuple of these values is {built}; "
                          f"it cannot declare {', '.join(map(str, sig.result_types))}")
    return lambda *leaves: tuple(leaves)


@builder("get_tuple_element")
def _get_tuple_element(sig):
    (operand,) = sig.input_types
    index = sig.attributes["index"]
    if not isinstance(operand, TupleType) or not 0 <= index < len(operand):
        raise Unsupported(f"get_tuple_element: jax picks an element from the operand's leaves "
                          f"by position; index {index} of {operand} names no element")
    if tuple(sig.result_types) != (operand[index],):
        raise Unsupported(f"jax has no tuple types: element {index} of {operand} is "
                          f"{operand[index]}; it cannot declare "
                          f"{', '.join(map(str, sig.result_types))}")
    start = sum(len(e.leaves()) for e in operand.elements[:index])
    stop = start + len(operand.elements[index].leaves())
    return lambda *leaves: tuple(leaves[start:stop])
