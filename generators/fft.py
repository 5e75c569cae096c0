"""Values for ``fft`` (generators/values.py ``SIGNATURE_DISTRIBUTIONS``: they see the
signature): signals whose transform the normwise residual can judge, and on purpose the
inputs the spec leaves open.

Each case (row of a batch) is of one kind, by ``row % 12``:

- 0-4: Gaussian signals (both parts for complex), times ``2^s``, ``s`` in [-6, 6];
- 5: a wide dynamic range: Gaussian times ``2^U(-20, 20)`` per element;
- 6: an impulse (one non-zero element, at index 0 in even rows of this kind);
- 7: a constant;
- 8: tiny: Gaussian times the smallest normal number times 2^U(0, 8) (near underflow);
- 9: zeros;
- 10: huge: Gaussian (clipped to ±8) times 1/16 of the largest finite value (partial
  sums may overflow; the rule ``non_finite_or_out_of_range`` masks these);
- 11: Gaussian with a NaN or an infinity at one element (masked by the same rule).

IRFFT operands are the RFFT (at float64, rounded) of such real signals of length
``fft_length[-1]``: half spectra in rfft's image. In rows ``r % 12 == 3`` (odd positions
among those) the innermost half spectrum is instead that of a signal one element longer
read with an even ``fft_length[-1]`` (a non-real element n/2: outside the image), or
random complex values (``r % 24 == 15``); the rule ``irfft_not_hermitian`` masks them.

An invalid signature (a negative test) gets the default values.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.case import Signature
from conformance.core.numerics import round_to
from conformance.core.types import ElementType
from conformance.specs import OpSpec

from .values import draw_array

__all__ = ["signal_values"]


def _finfo(et: ElementType):
    return ml_dtypes.finfo(et.component.dtype)


def _gauss(shape, rng, cplx: bool) -> np.ndarray:
    g = rng.standard_normal(shape)
    if cplx:
        g = g + 1j * rng.standard_normal(shape)
    return g


def _signals(shape, rng, cplx: bool, et: ElementType, L: int) -> np.ndarray:
    """float64 / complex128 signals of ``shape`` ([batch] + ...), one kind per row."""
    batch = shape[0]
    inner = tuple(shape[1:])
    fi = _finfo(et)
    kind = (np.arange(batch) % 12).reshape((batch,) + (1,) * len(inner))
    x = _gauss(shape, rng, cplx)
    x = x * np.exp2(rng.integers(-6, 7, (batch,) + (1,) * len(inner)))
    wide = _gauss(shape, rng, cplx) * np.exp2(rng.uniform(-20, 20, shape))
    x = np.where(kind == 5, wide, x)
    n_inner = int(np.prod(inner, dtype=np.int64))
    if n_inner:
        flat_shape = (batch, n_inner)
        imp = np.zeros(flat_shape, x.dtype)
        pos = rng.integers(0, n_inner, batch)
        pos = np.where(np.arange(batch) // 12 % 2 == 0, 0, pos)
        imp[np.arange(batch), pos] = _gauss((batch,), rng, cplx) * 4
        x = np.where(kind == 6, imp.reshape(shape), x)
        const = np.broadcast_to(_gauss((batch,) + (1,) * len(inner), rng, cplx), shape)
        x = np.where(kind == 7, const, x)
    tiny = _gauss(shape, rng, cplx) * float(fi.smallest_normal) * np.exp2(
        rng.uniform(0, 8, shape))
    x = np.where(kind == 8, tiny, x)
    x = np.where(kind == 9, 0, x)
    g = _gauss(shape, rng, cplx)
    g = np.clip(g.real, -8, 8) + (1j * np.clip(g.imag, -8, 8) if cplx else 0)
    huge = g * (float(fi.max) / 16)
    x = np.where(kind == 10, huge, x)
    rows = np.nonzero(np.arange(batch) % 12 == 11)[0]
    if n_inner and rows.size:
        flat = x.reshape(batch, n_inner)
        pool = np.array([np.nan, np.inf, -np.inf])
        flat[rows, rng.integers(0, n_inner, rows.size)] = pool[rng.integers(0, 3, rows.size)]
        x = flat.reshape(shape)
    return x


def signal_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                  shape, rng: np.random.Generator, param: str) -> np.ndarray:
    """fft's ``operand``: see the module's docstring."""
    from conformance.specs.validity import violations
    shape = tuple(shape)
    if not (et.is_float or et.is_complex) or violations(sig, spec):
        return draw_array(et, shape, rng)
    if 0 in shape:
        return np.zeros(shape, et.dtype)
    attrs = sig.attributes
    fft_type, lengths = attrs["fft_type"], [int(n) for n in attrs["fft_length"]]
    L = len(lengths)
    if fft_type != "IRFFT":
        x = _signals(shape, rng, et.is_complex, et, L)
        return _cast(x, et)
    # IRFFT: half spectra of real signals of fft_length[-1] (or one longer, on purpose)
    batch = shape[0]
    n = lengths[-1]
    real_shape = shape[:-1] + (n,)
    longer = shape[:-1] + (n + 1,)
    axes = tuple(range(-L, 0))
    with np.errstate(all="ignore"):
        spec_n = np.fft.rfftn(_signals(real_shape, rng, False, et.component, L),
                              s=lengths, axes=axes)
        x = spec_n
        if n % 2 == 0:
            spec_longer = np.fft.rfftn(_signals(longer, rng, False, et.component, L),
                                       s=lengths[:-1] + [n + 1], axes=axes)
            rows = (np.arange(batch) % 24 == 3).reshape((batch,) + (1,) * (len(shape) - 1))
            x = np.where(rows, spec_longer[..., :shape[-1]], x)
        rand = _gauss(shape, rng, True) * np.exp2(rng.integers(-3, 4, shape[:1] + (1,) * (
            len(shape) - 1)))
        rows = (np.arange(batch) % 24 == 15).reshape((batch,) + (1,) * (len(shape) - 1))
        x = np.where(rows, rand, x)
    return _cast(x, et)


def _cast(x: np.ndarray, et: ElementType) -> np.ndarray:
    if et.is_complex:
        out = np.empty(x.shape, et.dtype)
        out.real = round_to(np.real(x).astype(np.float64), et.component)
        out.imag = round_to(np.imag(x).astype(np.float64), et.component)
        return out
    return round_to(np.real(x).astype(np.float64), et)
