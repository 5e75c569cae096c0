"""Data movement ops: results are operand elements, moved, copied or dropped — never
computed — so the oracle is numpy indexing written from each op's "More formally"."""
from __future__ import annotations

import numpy as np

from . import register


@register("slice")
def slice_(inputs, attrs, types):
    (x,) = inputs
    index = tuple(slice(s, l, st) for s, l, st in
                  zip(attrs["start_indices"], attrs["limit_indices"], attrs["strides"]))
    return np.array(x[index], order="C").reshape(types[0].shape)
