"""ceil, floor, round_nearest_afz, round_nearest_even: IEEE-754 roundToIntegral*.

Evaluated in float64 and converted back exactly (an integral value of a float
type's range is representable wherever the type has a fractional part). The sign
of zero is kept: ceil(-0.5) = -0.0, round_nearest_afz(-0.4) = -0.0.
"""
from __future__ import annotations

import numpy as np

from .registry import register
from ._kernels import float_map


def _round_afz(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    r = np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)
    return np.copysign(r, x)


for _op, _fn in (("ceil", np.ceil), ("floor", np.floor), ("round_nearest_even", np.rint),
                 ("round_nearest_afz", _round_afz)):
    register(_op)(lambda inputs, attrs, types, _fn=_fn: float_map(_fn, types[0], inputs[0]))
