"""atan2, cbrt, cosine, sine, tan, tanh, exponential, exponential_minus_one, log,
log_plus_one, logistic, rsqrt, sqrt.

Float results are computed in float64 and rounded to the result type: correctly
rounded for sqrt (IEEE squareRoot is exact, and float64 is wide enough for every
narrower type) and within about an ulp of float64 elsewhere; the spec YAML's ULP
bounds hold the backends to those. Complex results use complex128 with the forms
below where the textbook formula loses accuracy near zero:

- expm1(x+iy) = (expm1(x) cos y - 2 sin^2(y/2)) + i e^x sin y
- log1p(z) = log|1+z| + i arg(1+z), with log|1+z| = log1p(2x + x^2 + y^2) / 2
- complex atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)) (principal branches)
- complex cbrt: the principal cube root exp(log(z) / 3)
"""
from __future__ import annotations

import numpy as np

from . import register
from ._kernels import float_map


def _expm1(z: np.ndarray) -> np.ndarray:
    if not np.iscomplexobj(z):
        return np.expm1(z)
    x, y = z.real, z.imag
    re = np.expm1(x) * np.cos(y) - 2.0 * np.sin(y / 2.0) ** 2
    im = np.exp(x) * np.sin(y)
    # y == 0 keeps the real-axis value exact and the imaginary part a signed zero.
    re = np.where(y == 0, np.expm1(x), re)
    return re + 1j * im


def _log1p(z: np.ndarray) -> np.ndarray:
    if not np.iscomplexobj(z):
        return np.log1p(z)
    x, y = z.real, z.imag
    re = 0.5 * np.log1p(2.0 * x + x * x + y * y)
    big = np.abs(x) + np.abs(y) > 0.5
    re = np.where(big, np.log(np.abs(1.0 + z)), re)
    return re + 1j * np.arctan2(y, 1.0 + x)


def _logistic(x: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(x):
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


def _cbrt(z: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(z):
        return np.exp(np.log(z) / 3.0)
    return np.cbrt(z)


def _atan2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(y):
        return -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))
    return np.arctan2(y, x)


_UNARY = {
    "cbrt": _cbrt, "cosine": np.cos, "sine": np.sin, "tan": np.tan, "tanh": np.tanh,
    "exponential": np.exp, "exponential_minus_one": _expm1, "log": np.log,
    "log_plus_one": _log1p, "logistic": _logistic, "rsqrt": _rsqrt, "sqrt": np.sqrt,
}

for _op, _fn in _UNARY.items():
    register(_op)(lambda inputs, attrs, types, _fn=_fn: float_map(_fn, types[0], inputs[0]))


@register("atan2")
def atan2(inputs, attrs, types):
    y, x = np.broadcast_arrays(*inputs)
    return float_map(_atan2, types[0], y, x)
