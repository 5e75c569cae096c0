"""Regions evaluated: a region text (specs/regions.py) run element-wise
through the oracles of the ops it calls, so that a region means what its ops mean."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance import oracles
from conformance.core.case import Signature
from conformance.core.promotion import to_destination_type
from conformance.core.types import TensorType, element_type
from conformance.specs.regions import Arg, Call, Node, Region, RegionError, parse

__all__ = ["evaluate", "implementation_defined"]


def _eval_node(region: Region, n: Node, args: Sequence[np.ndarray],
               on_call=None) -> np.ndarray:
    """``n`` evaluated on ``args`` through the oracles; ``on_call(call, operands, out)``
    sees every call on the way."""
    if isinstance(n, Arg):
        return args[n.index]
    operands = [_eval_node(region, o, args, on_call) for o in n.operands]
    shape = np.shape(operands[0]) if operands else np.shape(args[0]) if args else ()
    result = TensorType(tuple(shape) if operands else (), region.type_of(n))
    try:
        out = tuple(oracles.evaluate(n.op, operands, dict(n.attributes),
                                     result_types=[result]))[0]
    except Exception as e:  # noqa: BLE001 - any oracle refusal is a type error here
        raise RegionError(f"region call {n.op}: {str(e).splitlines()[0]}") from None
    if not operands:            # a constant: the same value for every element
        out = np.broadcast_to(np.asarray(out), shape)
    if on_call is not None:
        on_call(n, operands, out)
    return out


def evaluate(text: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The region's results, element-wise over arrays of one shape (one array per
    block argument, each of that argument's element type)."""
    region = parse(text)
    if len(args) != len(region.arg_types):
        raise RegionError(f"region {text!r} takes {len(region.arg_types)} arguments, "
                          f"got {len(args)}")
    return [_eval_node(region, n, args) for n in region.results]


def implementation_defined(text: str, args: Sequence[np.ndarray]) -> np.ndarray:
    """Per element (``args``: same-shape arrays, one per block argument): does evaluating
    the region meet an implementation-defined rule of an op it calls (integer overflow of
    add, a complex minimum with a NaN part, ...)? Each call is judged by its own op's
    spec, on the values it receives."""
    region = parse(text)
    shape = np.asarray(args[0]).shape
    hit = np.zeros(int(np.prod(shape, dtype=np.int64)), bool)

    def judge(call: Call, operands: Sequence[np.ndarray], out: np.ndarray) -> None:
        sig = Signature.make(call.op, [TensorType((), element_type(o.dtype)) for o in operands],
                             [TensorType((), element_type(out.dtype))], dict(call.attributes))
        for mask in oracles.implementation_defined(sig, operands, expected=[out]).values():
            hit[...] |= np.asarray(mask).reshape(-1) > 0

    if hit.size:
        flat = [np.asarray(a).reshape(-1) for a in args]
        for n in region.results:
            _eval_node(region, n, flat, judge)
    return hit.reshape(shape)


def converted(body: str, xs: Sequence[np.ndarray], es: Sequence[np.ndarray]):
    """The inputs and init values converted to the body's argument types, the spec's
    ``input_slices_converted`` and ``init_values_converted`` (stablehlo-spec-2026-08.md
    "### reduce": a body may compute in a type its inputs are promotable to); as they
    are where the types agree. Scatter's ``updates_converted`` and select_and_scatter's
    source too: the second half of the argument types is theirs."""
    types = parse(body).arg_types
    n = len(xs)
    if len(types) != 2 * n:
        return list(xs), list(es)
    return ([to_destination_type(x, t) for x, t in zip(xs, types[:n])],
            [to_destination_type(e, t) for e, t in zip(es, types[n:])])
