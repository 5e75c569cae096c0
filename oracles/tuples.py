"""Tuple ops and constant: values moved, never computed.

``constant``: the ``value`` attribute is a tensor constant's MLIR text
(conformance/core/dense.py); the result is the array it denotes, bit for bit (NaN payloads,
signed zeros, subnormals, fp8, int4, complex).

``tuple`` and ``get_tuple_element``: conformance.oracles.evaluate hands a tuple-typed
input over as a Python tuple of its elements' values (nested; given the signature's
``input_types``) and flattens a tuple-typed result back into leaves, so the oracle is
the spec's definition itself: ``result = (val...)``, ``result = operand[index]``.
"""
from __future__ import annotations

import numpy as np

from conformance.core.dense import parse_dense
from conformance.core.types import TupleType

from .registry import OracleError, register


def _copy(value):
    """A fresh copy of a value: arrays copied, tuples copied element by element."""
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return np.array(value, order="C", copy=True)


@register("constant")
def constant(inputs, attrs, types):
    return parse_dense(attrs["value"])


@register("tuple")
def tuple_(inputs, attrs, types):
    (t,) = types
    if len(inputs) != len(t):
        raise OracleError(f"tuple: {len(inputs)} values for a result of {len(t)} elements "
                          "(pass input_types when an input is itself a tuple)")
    return (tuple(_copy(v) for v in inputs),)


@register("get_tuple_element")
def get_tuple_element(inputs, attrs, types):
    if len(inputs) != 1 or not isinstance(inputs[0], tuple):
        raise OracleError("get_tuple_element: the operand arrived as leaves; pass the "
                          "signature's input_types so that it arrives as a tuple")
    operand = inputs[0]
    value = _copy(operand[attrs["index"]])
    return (value,) if isinstance(types[0], TupleType) else value
