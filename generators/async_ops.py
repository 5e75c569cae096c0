"""Bodies of async_start / async_done (stablehlo-spec-2026-08, "### async_start").

``draw('async_body', seed, E, S)`` (specs/ops/async_start.yaml, async_done.yaml): the one
region of async_start, a region program (conformance/core/region_program.py) whose
one argument, a block argument of the operand's type ``tensor<S x E>`` (C3), and whose one op is a
``slice`` of the first argument (C1, C2: a collective or a slice), returned as is (C4).
A slice is the one op of C2's list that every process grid runs (the collectives need a
grid, and the oracle of a body evaluates it on one process); its attributes are drawn
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

__all__ = ["async_body"]


@draw("async_body")
def async_body(seed, E, S) -> str:
    """A body over one block argument ``tensor<S x E>``: one slice of it."""
    t = TensorType(tuple(int(d) for d in S), element_type(str(E)))
    return _async_body(int(seed), (t,))


@functools.lru_cache(maxsize=1024)
def _async_body(seed, args) -> str:
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 30])
    t = args[0]
    starts, limits, strides = [], [], []
    for d in t.shape:
        start = int(rng.integers(0, d)) if d else 0       # non-empty where the
        limit = int(rng.integers(start + 1, d + 1)) if d else 0   # operand is
        starts.append(start)
        limits.append(limit)
        strides.append(int(rng.integers(1, 3)))
    shape = tuple(-(-(lim - s) // k) for s, lim, k in zip(starts, limits, strides))
    result = TensorType(shape, t.element_type)
    names = [f"p{i}" for i in range(len(args))]
    sig = Signature.make("slice", [t], [result], {"start_indices": starts,
                                                  "limit_indices": limits,
                                                  "strides": strides})
    return region_program.make(list(zip(names, args)), [Operation(sig, (names[0],), "v0")],
                               ["v0"])
