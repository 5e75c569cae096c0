"""The spec's "Quantization computations" on storage values: ``dequantize`` and
``quantize`` step by step, with every rounding in the expressed type. Below the quantized
oracles (quantization.py, quantized_own.py), which both build on them."""
from __future__ import annotations

import numpy as np

from conformance.core.numerics import round_to
from conformance.core.types import QuantizedElementType

#: how many units of the expressed type's epsilon the band spans per term: the spec's
#: steps round at most four times (product(s), sum, quotient, + zero point), each by
#: half an epsilon of its magnitude; twice that covers a folded multiplier's roundings.
NEAR_TIE_EPS = 4.0


def quantization_params(qt: QuantizedElementType, ndim: int, lead: int):
    """(scales rounded to the expressed type, zero points), as float64 / int64 arrays
    that broadcast against an array of ``ndim`` axes whose first ``lead`` are batch axes."""
    s = qt.scales_as_expressed().astype(np.float64)
    z = np.array(qt.zero_points, np.int64)
    if qt.quantization_dimension is None:
        return s.reshape(()), z.reshape(())
    shape = [1] * ndim
    shape[lead + qt.quantization_dimension] = len(s)
    return s.reshape(shape), z.reshape(shape)


def dequantize(x: np.ndarray, qt: QuantizedElementType, lead: int) -> np.ndarray:
    """The expressed-type values of storage values ``x`` (spec ``dequantize``)."""
    s, z = quantization_params(qt, x.ndim, lead)
    diff = round_to(x.astype(np.int64) - z, qt.expressed)          # convert(x - zp)
    return round_to(diff.astype(np.float64) * s, qt.expressed)      # * scale


def quantize_steps(v: np.ndarray, qt: QuantizedElementType, lead: int) -> np.ndarray:
    """``quantize``'s value before its last convert: expressed-type ``v`` scaled,
    shifted, clamped and rounded half to even, as float64."""
    e = qt.expressed
    s, z = quantization_params(qt, v.ndim, lead)
    scaled = round_to(v.astype(np.float64) / s, e)                  # x / scale
    shifted = round_to(scaled.astype(np.float64) + round_to(z, e).astype(np.float64), e)
    lo = float(round_to(np.float64(qt.storage_min), e))
    hi = float(round_to(np.float64(qt.storage_max), e))
    clamped = np.minimum(np.maximum(shifted.astype(np.float64), lo), hi)   # NaN stays NaN
    return np.rint(clamped)                                          # round_nearest_even


def to_storage(r: np.ndarray, qt: QuantizedElementType) -> np.ndarray:
    """``convert(x_rounded, result_type)``: integral and in range; a NaN's convert is TBD
    (#180), 0 here (rule nan_operand)."""
    return np.where(np.isnan(r), 0, r).astype(np.int64).astype(qt.dtype)


def quantize(v: np.ndarray, qt: QuantizedElementType, lead: int) -> np.ndarray:
    return to_storage(quantize_steps(v, qt, lead), qt)
