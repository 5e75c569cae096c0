"""complex, real, imag."""
from __future__ import annotations

import numpy as np

from conformance.core.numerics import round_to

from .registry import register
# imag's zero_in_format_without_zero reads constant(0) in f8E8M0FNU as convert does: its
# allowed set is conversion's alternative('convert_directed', ...)
from . import conversion  # noqa: F401,E402


@register("complex")
def complex_(inputs, attrs, types):
    re, im = np.broadcast_arrays(*inputs)
    out = np.empty(types[0].shape, types[0].element_type.dtype)
    out.real, out.imag = re, im
    return out


@register("real")
def real(inputs, attrs, types):
    return np.real(inputs[0]).astype(types[0].element_type.dtype).reshape(types[0].shape)


@register("imag")
def imag(inputs, attrs, types):
    x = inputs[0]
    if np.iscomplexobj(x):
        return np.imag(x).astype(types[0].element_type.dtype).reshape(types[0].shape)
    # imag(x) = constant(0, element_type(result)) for floats: 0 rounded into the type, which
    # in f8E8M0FNU (no zero) is its NaN as in iota and the collectives' fills, not the bit
    # pattern 0x00 (2^-127; the rule zero_in_format_without_zero allows that neighbour too)
    return round_to(np.zeros(types[0].shape, np.float64), types[0].element_type)
