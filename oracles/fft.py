"""Oracle of ``fft`` (spec family ``fft``): the discrete Fourier transforms at float64.

:func:`transform` evaluates the spec's semantics with numpy.fft (pocketfft) in complex128 /
float64 over the ``L = size(fft_length)`` innermost axes: ``fftn``, ``ifftn``, ``rfftn`` and
``irfftn`` apply the 1-D transforms the spec composes (rfft on the innermost axis first,
irfft on it last; the other axes' transforms commute with it). Leading axes are batch
axes, so the same call serves one case and a stacked batch (the verdict,
conformance/checking/verdicts/fft.py, calls it on a batch). The op's result is that value rounded
once to the result type.

For FFT and IFFT the spec's semantics do not read ``fft_length``: the transform has the
dimension's length. irfftn reads elements ``0 .. n//2`` of the innermost axis and drops the
imaginary parts of element 0 and (even ``n``) ``n/2``: the conventional value where the
operand is outside rfft's image (the rule ``irfft_not_hermitian`` masks those transforms).

Conditions (implementation_defined rules of specs/ops/fft.yaml): ``fft_not_hermitian`` and
``fft_non_finite`` give masks of the result's shape, constant over each transform.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.types import element_type
from conformance.specs.expressions import condition

from .registry import register

__all__ = ["transform", "fft", "transform_sizes", "not_hermitian", "non_finite"]


def transform(x: np.ndarray, fft_type: str, fft_length) -> np.ndarray:
    """The exact (float64) transform of ``x`` over its ``len(fft_length)`` innermost axes:
    complex128 for FFT, IFFT and RFFT, float64 for IRFFT."""
    lengths = [int(n) for n in fft_length]
    L = len(lengths)
    axes = tuple(range(-L, 0))
    x = np.asarray(x)
    if fft_type in ("FFT", "IFFT"):
        out_shape = x.shape
    elif fft_type == "RFFT":
        out_shape = x.shape[:-1] + ((lengths[-1] // 2 + 1) if lengths[-1] else 0,)
    else:
        out_shape = x.shape[:-1] + (lengths[-1],)
    real_out = fft_type == "IRFFT"
    if int(np.prod(out_shape, dtype=np.int64)) == 0 or 0 in x.shape[len(x.shape) - L:]:
        return np.zeros(out_shape, np.float64 if real_out else np.complex128)
    with np.errstate(all="ignore"):
        if fft_type == "FFT":
            return np.fft.fftn(x.astype(np.complex128), axes=axes)
        if fft_type == "IFFT":
            return np.fft.ifftn(x.astype(np.complex128), axes=axes)
        if fft_type == "RFFT":
            return np.fft.rfftn(x.astype(np.float64), s=lengths, axes=axes)
        return np.fft.irfftn(x.astype(np.complex128), s=lengths, axes=axes)


def _round(y: np.ndarray, et) -> np.ndarray:
    et = element_type(et)
    if et.is_complex:
        comp = et.component.dtype
        out = np.empty(y.shape, et.dtype)
        out.real = np.real(y).astype(comp)
        out.imag = np.imag(y).astype(comp)
        return out
    return np.real(y).astype(et.dtype)


@register("fft")
def fft(inputs, attrs, types):
    (x,) = inputs
    (t,) = types
    y = transform(x, attrs["fft_type"], attrs["fft_length"])
    return _round(y, t.element_type).reshape(t.shape)


def transform_sizes(fft_type: str, fft_length, operand_shape) -> list[int]:
    """The lengths of the 1-D transforms: fft_length for RFFT and IRFFT, the operand's
    innermost dimensions for FFT and IFFT (whose semantics do not read fft_length)."""
    L = len(fft_length)
    if fft_type in ("FFT", "IFFT"):
        return [int(d) for d in tuple(operand_shape)[len(operand_shape) - L:]]
    return [int(n) for n in fft_length]


def _unit_roundoff(dtype) -> float:
    et = element_type(np.dtype(dtype))
    return float(ml_dtypes.finfo(et.component.dtype).eps) / 2


def _per_transform(mask_lead: np.ndarray, result: np.ndarray, L: int) -> np.ndarray:
    """A mask over the leading (non-transformed) axes spread to the result's shape."""
    result = np.asarray(result)
    return np.broadcast_to(mask_lead.reshape(mask_lead.shape + (1,) * L), result.shape).copy()


@condition("fft_not_hermitian")
def not_hermitian(operand, fft_type, fft_length, result) -> np.ndarray:
    """IRFFT transforms (leading axes) whose innermost rows after the outer ifft have a
    non-real element 0 or (even n) n/2 beyond 4·u·‖x‖₂: outside rfft's image."""
    x = np.asarray(operand)
    L = len(fft_length)
    lead = x.shape[:x.ndim - L]
    if fft_type != "IRFFT" or x.size == 0 or np.asarray(result).size == 0:
        return np.zeros(np.shape(result), bool)
    n = int(fft_length[-1])
    with np.errstate(all="ignore"):
        w = x.astype(np.complex128)
        if L > 1:
            w = np.fft.ifftn(w, axes=tuple(range(-L, -1)))
        bad = np.abs(w[..., 0].imag)
        if n % 2 == 0 and n > 0:
            bad = np.maximum(bad, np.abs(w[..., n // 2].imag))
        bad = bad.max(axis=tuple(range(len(lead), bad.ndim))) if bad.ndim > len(lead) \
            else bad
        norm = np.sqrt((np.abs(x) ** 2).sum(axis=tuple(range(len(lead), x.ndim))))
        u = _unit_roundoff(x.dtype)
        off = bad > 4 * u * norm
    off &= np.isfinite(norm)
    return _per_transform(np.asarray(off), result, L)


@condition("fft_non_finite")
def non_finite(operand, fft_type, fft_length, result) -> np.ndarray:
    """Transforms with a NaN or infinity in the operand, or whose partial sums may
    overflow: 4·Σ|x| beyond the largest finite value of the element type."""
    x = np.asarray(operand)
    L = len(fft_length)
    lead_rank = x.ndim - L
    if x.size == 0 or np.asarray(result).size == 0:
        return np.zeros(np.shape(result), bool)
    axes = tuple(range(lead_rank, x.ndim))
    with np.errstate(all="ignore"):
        w = x.astype(np.complex128)
        bad = ~np.isfinite(w).all(axis=axes)
        big = float(ml_dtypes.finfo(element_type(x.dtype).component.dtype).max)
        total = (np.abs(w.real) + np.abs(w.imag)).sum(axis=axes)
        bad |= ~(4 * total <= big)
    return _per_transform(np.asarray(bad), result, L)
