"""map, written from the spec's "More formally": the computation (a region text,
specs/regions.py) evaluated element-wise over the inputs through the oracles of the ops
it calls (oracles/regions.py), over every element at once; and the condition that says
where the computation meets an implementation-defined rule of one of its ops."""
from __future__ import annotations

import numpy as np

from conformance.specs.expressions import condition

from . import regions
from .registry import register


@register("map")
def map_(inputs, attrs, types):
    (t,) = types
    if not inputs:
        raise ValueError("map: no inputs")
    (out,) = regions.evaluate(attrs["computation"], [np.asarray(x) for x in inputs])
    return np.asarray(out).astype(t.element_type.dtype, copy=False).reshape(t.shape)


@condition("map_region_implementation_defined")
def region_implementation_defined(inputs, computation) -> np.ndarray:
    """Result elements (inputs with a leading batch axis, all of one shape) where an op
    the computation calls meets one of its own implementation-defined rules on the values
    it receives there."""
    xs = [np.asarray(x) for x in inputs]
    return regions.implementation_defined(computation, xs)
