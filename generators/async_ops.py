"""Bodies of async_start / async_done (stablehlo-spec-2026-08, "### async_start").

``draw('async_body', seed, E, S, op, I)`` (specs/ops/async_start.yaml, async_done.yaml):
the one region of async_start, a region program (conformance/core/region_program.py)
whose arguments are block arguments (C3) and whose one op (C1) is ``op``, one of C2's
slices, returned as is (C4):

- ``slice``: of the one argument ``tensor<S x E>``;
- ``dynamic_slice``: of ``tensor<S x E>`` at ``rank(S)`` start indices ``tensor<I>``;
- ``dynamic_update_slice``: ``tensor<S x E>`` updated with a ``tensor<U x E>`` (U no
  larger than S) at ``rank(S)`` start indices ``tensor<I>``.

So the operands are the body's block arguments: the data operands of element type E and
the start indices of the integer type I (which the spec's ``operands`` row leaves open;
the spec files type the operands by the body, ``otypes``). The collectives of C2 need a
process grid, which the oracle of a body does not simulate. Attributes and sizes come
from the seed, so the same seed gives the same body in any process.
"""
from __future__ import annotations

import functools

import numpy as np

from conformance.core import region_program
from conformance.core.case import Signature
from conformance.core.program import Operation
from conformance.core.types import TensorType, element_type
from conformance.specs.expressions import draw

__all__ = ["async_body", "BODY_OPS"]

#: The body ops drawn, of C2's list (the slices; the collectives need a process grid).
BODY_OPS = ("slice", "dynamic_slice", "dynamic_update_slice")


@draw("async_body")
def async_body(seed, E, S, op="slice", I="si32") -> str:
    """A body over a block argument ``tensor<S x E>`` (and, for the dynamic slices, its
    update and start indices of type ``I``): one ``op`` of it."""
    t = TensorType(tuple(int(d) for d in S), element_type(str(E)))
    if str(op) not in BODY_OPS:
        raise ValueError(f"async_body: op {op!r} is not one of {', '.join(BODY_OPS)}")
    index = element_type(str(I))
    if not index.is_integer:
        raise ValueError(f"async_body: start index type {I} is not an integer type")
    return _async_body(int(seed), t, str(op), index.name)


@functools.lru_cache(maxsize=1024)
def _async_body(seed, t, op, index) -> str:
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 30])
    if op == "slice":
        return _slice(rng, t)
    # sizes from 1 to the dimension (0 where the dimension is): non-empty where t is
    sizes = [int(rng.integers(1, d + 1)) if d else 0 for d in t.shape]
    idx = TensorType((), element_type(index))
    starts = [(f"i{k}", idx) for k in range(len(t.shape))]
    if op == "dynamic_slice":
        args = [("p0", t)] + starts
        result = TensorType(tuple(sizes), t.element_type)
        sig = Signature.make("dynamic_slice", [t] + [idx] * len(starts), [result],
                             {"slice_sizes": sizes})
    else:
        update = TensorType(tuple(sizes), t.element_type)
        args = [("p0", t), ("p1", update)] + starts
        sig = Signature.make("dynamic_update_slice", [t, update] + [idx] * len(starts),
                             [t], {})
    return region_program.make(args, [Operation(sig, tuple(n for n, _ in args), "v0")],
                               ["v0"])


def _slice(rng, t) -> str:
    starts, limits, strides = [], [], []
    for d in t.shape:
        start = int(rng.integers(0, d)) if d else 0       # non-empty where the
        limit = int(rng.integers(start + 1, d + 1)) if d else 0   # operand is
        starts.append(start)
        limits.append(limit)
        strides.append(int(rng.integers(1, 3)))
    shape = tuple(-(-(lim - s) // k) for s, lim, k in zip(starts, limits, strides))
    result = TensorType(shape, t.element_type)
    sig = Signature.make("slice", [t], [result], {"start_indices": starts,
                                                  "limit_indices": limits,
                                                  "strides": strides})
    return region_program.make([("p0", t)], [Operation(sig, ("p0",), "v0")], ["v0"])
