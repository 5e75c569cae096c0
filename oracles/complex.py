"""complex, real, imag."""
from __future__ import annotations

import numpy as np

from .registry import register


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
    # imag(x) = 0.0 for floats (spec: `is_complex(x) ? x.imag : 0.0`).
    return np.zeros(types[0].shape, types[0].element_type.dtype)
