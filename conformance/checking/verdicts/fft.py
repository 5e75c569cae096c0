"""The ``fft`` residual: a discrete Fourier transform judged normwise, per transform.

specs/ops/fft.yaml names it with its constant::

    accuracy:
      default: {residual: fft, c: 8}

The spec fixes the transform's exact value but no algorithm, and StableHLO gives no
accuracy guarantee ("### Accuracy"); what a conforming backend can be asked for is the
accuracy of a stable FFT. For one transform of an operand ``x`` (the L innermost axes of
one position of the leading ones) with exact result ``y`` (oracles/fft.py at float64 on
the same, already rounded, operand) and backend result ``ŷ``:

    ‖ŷ − y‖₂ ≤ c · K · u · s · ‖x‖₂  +  K · √M · tiny

- Higham, Accuracy and Stability of Numerical Algorithms (2nd ed.), §24.1, Thm 24.2: the
  radix-2 Cooley–Tukey FFT of length n = 2^t computed in floating point satisfies
  ‖ŷ − y‖₂ / ‖y‖₂ ≤ t·η / (1 − t·η), η = μ + γ₄(√2 + μ), μ the error of the computed
  twiddle factors; with accurate twiddles (μ ≈ u) η ≈ 6.7u. Other radices and split-radix
  have the same form with similar η; ``c = 8`` covers η with a margin for t·η ≪ 1.
- ``K = Σ (⌈log2 n_i⌉ + 1)`` over the transformed axes of length ``n_i > 1``: the
  transforms of the axes compose, their relative errors add (each axis's transform has
  norm √n_i times a unitary map); the ``+ 1`` per axis covers a non-power-of-two
  algorithm (Bluestein pads to a power of two ≥ 2n − 1, one more level, and multiplies
  by chirps; Rader and mixed radices are no worse) and the final 1/n of an inverse.
  A length-1 transform is the identity (K = 0: exact), as is any transform of zeros.
- ``s`` turns ‖x‖ into ‖y‖: ‖y‖ = √N·‖x‖ for FFT (Parseval, N = the product of the
  transformed lengths), ‖x‖/√N for IFFT; for RFFT the kept half has at most the full
  transform's norm √N·‖x‖; for IRFFT the half spectrum stands for a full Hermitian one of
  norm at most √2·‖x‖, so s = √2/√N.
- ``u``: the unit roundoff of the result's (component) type; the oracle's own error
  (float64, ~1e-16 relative) is far below it for f32 and adds 2^-50·K·s·‖x‖ for f64.
- ``K·√M·tiny`` (M: the transform's number of result elements, tiny: the smallest normal
  number): gradual underflow, or flushing subnormal intermediate results (FTZ), moves each
  by less than tiny; irrelevant unless the signal itself is tiny.

What each case reports is the worst of its transforms, in units of that bound (so a case
passes when its residual ≤ 1). Transforms an implementation-defined rule covers (a NaN or
infinity in the operand, partial sums that may overflow, an IRFFT operand outside rfft's
image) are left out; a case whose every transform is covered passes (masked) with what the
backend gave recorded. A non-finite backend result where the exact one is finite is class
``value``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.checking.compare import PASS, VALUE
from conformance.core.types import element_type
from conformance.oracles import fft as fft_oracle
from conformance.checking.verdicts import Judgement, residual_function

__all__ = ["fft_residual", "allowed_error"]

_U64 = 2.0 ** -53


def _steps(sizes) -> int:
    return int(sum(int(np.ceil(np.log2(n))) + 1 for n in sizes if n > 1))


def allowed_error(fft_type: str, sizes, xnorm: np.ndarray, out_elements: int, et,
                  c: float) -> np.ndarray:
    """The bound on ‖ŷ − y‖₂ per transform (see the module's docstring)."""
    et = element_type(et)
    fi = ml_dtypes.finfo(et.component.dtype)
    u = float(fi.eps) / 2
    K = _steps(sizes)
    N = float(np.prod(sizes)) if len(sizes) else 1.0
    s = {"FFT": np.sqrt(N), "RFFT": np.sqrt(N), "IFFT": 1 / np.sqrt(N),
         "IRFFT": np.sqrt(2.0 / N)}[fft_type] if N > 0 else 0.0
    rel = c * K * (u + _U64)
    return rel * s * xnorm + K * np.sqrt(out_elements) * float(fi.smallest_normal)


@residual_function("fft")
def fft_residual(j: Judgement):
    """Per case: the largest ‖ŷ − y‖₂ / bound over its transforms (see the module)."""
    attrs = j.sig.attributes
    fft_type, lengths = attrs["fft_type"], [int(n) for n in attrs["fft_length"]]
    c = float(j.accuracy.options.get("c", 8))
    L = len(lengths)
    x = np.asarray(j.inputs[0])
    a = np.asarray(j.actual[0])
    B = j.batch
    res = np.zeros(B)
    override = np.full(B, PASS, np.int8)
    if a.size == 0:
        return res, np.ones(B), override
    exact = fft_oracle.transform(x, fft_type, lengths)
    sizes = fft_oracle.transform_sizes(fft_type, lengths, x.shape[1:])
    axes = tuple(range(a.ndim - L, a.ndim))
    with np.errstate(all="ignore"):
        aw = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
        diff = np.sqrt((np.abs(aw - exact) ** 2).sum(axis=axes))
        xw = x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)
        xnorm = np.sqrt((np.abs(xw) ** 2).sum(axis=tuple(range(x.ndim - L, x.ndim))))
        out_elements = int(np.prod(a.shape[a.ndim - L:]))
        allowed = allowed_error(fft_type, sizes, xnorm, out_elements, a.dtype, c)
        ratio = np.where(allowed > 0, diff / np.where(allowed > 0, allowed, 1.0),
                         np.where(diff == 0, 0.0, np.inf))
        exact_finite = np.isfinite(exact).all(axis=axes)
        actual_finite = np.isfinite(aw).all(axis=axes)
    covered = np.zeros(ratio.shape, bool)
    for rule, m in j.masks.items():
        m = np.asarray(m)
        if m.dtype.kind != "b":
            continue
        covered |= np.broadcast_to(m, a.shape).any(axis=axes)
    wrong_kind = exact_finite & ~actual_finite & ~covered
    ratio = np.where(covered, 0.0, np.where(np.isnan(ratio), np.inf, ratio))
    per_case = ratio.reshape(B, -1)
    res = per_case.max(axis=1) if per_case.shape[1] else np.zeros(B)
    override[wrong_kind.reshape(B, -1).any(axis=1)] = VALUE
    return res, np.ones(B), override
