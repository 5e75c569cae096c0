"""select."""
from __future__ import annotations

import numpy as np

from .registry import register


@register("select")
def select(inputs, attrs, types):
    pred, on_true, on_false = inputs
    return np.where(pred, on_true, on_false).astype(types[0].element_type.dtype) \
        .reshape(types[0].shape)
