"""Values for the linear-algebra ops (generators/values.py ``SIGNATURE_DISTRIBUTIONS``: they
see the signature): matrices whose conditioning is chosen by construction, and, on purpose,
the inputs the spec leaves undefined or says are not read.

Each case (row of a batch) is of one kind, chosen by its position in the batch (the same
for every input of a case, so that ``a`` and ``b`` of a triangular_solve agree):

``linalg_hermitian`` (cholesky's ``a``), by ``row % 8``:

- 0-3: Hermitian positive definite ``Q·diag(λ)·Qᴴ`` (``Q`` unitary, from the QR of a
  Gaussian matrix; complex for complex types), ``λ`` log-spaced from 1 down to ``1/κ``
  with ``κ = 10^U(0, 2)`` (at most ``1/(128·(n+1)·u)``, so that the matrix stays safely
  positive definite after rounding to the element type), times ``2^s``, ``s`` in [-3, 3];
- 4: near-singular: ``κ = 1/(128·(n+1)·u)`` (f32: about 10^5 at n = 8);
- 5: not positive definite on purpose: one eigenvalue -1/2, or 0 (singular);
- 6: graded: ``D·A·D`` with a well-conditioned ``A`` and ``D = diag(2^U(-6, 6))`` (a huge
  condition number that the factorisation does not see);
- 7: well-conditioned with a NaN or an infinity at one element (and its mirror).

Every matrix is made exactly Hermitian in its element type after rounding (the lower
triangle is rounded, the upper one is its adjoint, the diagonal's imaginary parts zero),
since the spec leaves a non-Hermitian input undefined.

``linalg_triangular`` (triangular_solve's ``a`` and ``b``):

- ``a``'s read triangle is ``2^s·D·(I + N)``: ``N`` strictly triangular with elements of
  modulus at most ``1/(2m)`` (so ``‖N‖∞ ≤ 1/2`` and ``κ∞(I + N) ≤ 6``), ``D`` diagonal with
  moduli in [1, 2] and random signs (phases), or, in rows 2 and 6 of 8, spread down to
  ``2^-8`` (a chosen condition number of at most ``6·2^9``); ``s`` in [-4, 4];
- the triangle not read holds, by ``row % 4``: zeros, NaNs, garbage (NaN, ±inf, the
  largest finite values, random), or the mirror image (a plausible full matrix);
- under ``unit_diagonal`` the diagonal holds garbage (NaN, ±inf, 0, huge, -7.5, tiny) in
  two rows of three and exact ones in the third;
- ``b``: elements in [-1, 1] (both parts for complex) times ``2^t``, ``t`` in [-4, 4];
- row 7 of 8: a NaN or infinity in one read off-diagonal element of ``a`` (rows 7, 23, ...)
  or in ``b`` (rows 15, 31, ...).

An invalid signature (a negative test: not square, wrong rank) gets the default values.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.case import Signature
from conformance.core.numerics import round_to
from conformance.core.types import ElementType
from conformance.specs import OpSpec

from .values import draw_array

__all__ = ["hermitian_values", "triangular_values", "unitary", "hermitian_pd"]


def _u(et: ElementType) -> float:
    return float(ml_dtypes.finfo(et.component.dtype).eps) / 2


def _gauss(shape, rng, complex_: bool) -> np.ndarray:
    g = rng.standard_normal(shape)
    if complex_:
        g = g + 1j * rng.standard_normal(shape)
    return g


def unitary(lead, n: int, rng: np.random.Generator, complex_: bool) -> np.ndarray:
    """Random unitary (orthogonal) matrices of shape lead + (n, n)."""
    q, r = np.linalg.qr(_gauss(tuple(lead) + (n, n), rng, complex_))
    d = np.diagonal(r, axis1=-2, axis2=-1)
    phase = np.where(d == 0, 1, d / np.where(d == 0, 1, np.abs(d)))
    return q * phase[..., None, :]


def hermitian_pd(lead, n: int, lam: np.ndarray, rng: np.random.Generator,
                 complex_: bool) -> np.ndarray:
    """``Q·diag(lam)·Qᴴ`` per matrix; ``lam`` of shape lead + (n,)."""
    q = unitary(lead, n, rng, complex_)
    return (q * lam[..., None, :]) @ np.conj(np.swapaxes(q, -1, -2))


def _spectrum(lead, n: int, kappa: np.ndarray, rng) -> np.ndarray:
    """Eigenvalues from 1 down to 1/kappa (kappa of shape lead), log-spaced at random."""
    t = rng.uniform(0, 1, tuple(lead) + (n,))
    if n:
        t[..., 0], t[..., -1] = 0.0, 1.0
    return np.exp(-t * np.log(kappa)[..., None])


def _exactly_hermitian(x: np.ndarray, et: ElementType) -> np.ndarray:
    r = round_to(x, et)
    n = r.shape[-1]
    low = np.tril(r)
    strict = np.tril(r, -1)
    adj = np.swapaxes(np.conj(strict) if et.is_complex else strict, -1, -2)
    out = (low + adj).astype(et.dtype)
    if et.is_complex and n:
        idx = np.arange(n)
        out[..., idx, idx] = out[..., idx, idx].real
    return out


def _valid_square(shape) -> bool:
    return len(shape) >= 3 and shape[-1] == shape[-2]


def hermitian_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                     shape, rng: np.random.Generator, param: str) -> np.ndarray:
    """cholesky's ``a``: see the module's docstring."""
    shape = tuple(shape)
    if not (et.is_float or et.is_complex) or not _valid_square(shape):
        return draw_array(et, shape, rng)
    if 0 in shape:
        return np.zeros(shape, et.dtype)
    batch, n = shape[0], shape[-1]
    inner = shape[1:-2]
    lead = (batch,) + inner
    cplx = et.is_complex
    u = _u(et)
    kmax = max(1.0, 1.0 / (128 * (n + 1) * u))
    kind = (np.arange(batch) % 8).reshape((batch,) + (1,) * len(inner))
    kind = np.broadcast_to(kind, lead)
    kappa = np.minimum(10.0 ** rng.uniform(0, 2, lead), kmax)
    kappa = np.where(kind == 4, kmax, kappa)
    lam = _spectrum(lead, n, kappa, rng)
    # not positive definite: the smallest eigenvalue -1/2 or 0
    neg = np.where((np.arange(batch) // 8 % 2 == 0).reshape(kind.shape[:1] + (1,) * len(inner)),
                   -0.5, 0.0)
    lam[..., -1] = np.where(kind == 5, np.broadcast_to(neg, lead), lam[..., -1])
    x = hermitian_pd(lead, n, lam, rng, cplx)
    d = np.exp2(rng.uniform(-6, 6, lead + (n,)))
    graded = d[..., :, None] * x * d[..., None, :]
    x = np.where((kind == 6)[..., None, None], graded, x)
    x = x * np.exp2(rng.integers(-3, 4, lead))[..., None, None]
    out = _exactly_hermitian(x, et)
    # one NaN or infinity (and its mirror) in the rows of kind 7
    rows = np.argwhere(kind == 7)
    if rows.size:
        pool = np.array([np.nan, np.inf, -np.inf])
        for idx in rows:
            i, j = sorted(rng.integers(0, n, 2))[::-1]
            v = pool[rng.integers(0, 3)]
            out[tuple(idx) + (i, j)] = v
            out[tuple(idx) + (j, i)] = v
    return out


def _phases(shape, rng, cplx: bool) -> np.ndarray:
    if cplx:
        return np.exp(1j * rng.uniform(0, 2 * np.pi, shape))
    return np.where(rng.integers(0, 2, shape) == 1, -1.0, 1.0)


def _garbage(et: ElementType, shape, rng) -> np.ndarray:
    big = float(ml_dtypes.finfo(et.component.dtype).max)
    pool = np.array([np.nan, np.inf, -np.inf, big, -big, 0.0, -7.5,
                     float(ml_dtypes.finfo(et.component.dtype).smallest_normal)])
    g = pool[rng.integers(0, len(pool), shape)]
    return g.astype(np.complex128) if et.is_complex else g


def triangular_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                      shape, rng: np.random.Generator, param: str) -> np.ndarray:
    """triangular_solve's ``a`` (index 0) and ``b`` (index 1): see the module's docstring."""
    shape = tuple(shape)
    ta = sig.input_types[0]
    if not (et.is_float or et.is_complex) or not _valid_square((1,) + tuple(ta.shape)):
        return draw_array(et, shape, rng)
    if 0 in shape:
        return np.zeros(shape, et.dtype)
    attrs = sig.attributes
    lower, unit = bool(attrs.get("lower")), bool(attrs.get("unit_diagonal"))
    batch = shape[0]
    m = ta.shape[-1]
    lead = shape[:-2]
    rows = np.arange(batch).reshape((batch,) + (1,) * (len(shape) - 3))
    cplx = et.is_complex
    nonfinite = np.array([np.nan, np.inf, -np.inf])
    if index == 1:
        x = rng.uniform(-1, 1, shape)
        if cplx:
            x = x + 1j * rng.uniform(-1, 1, shape)
        x = x * np.exp2(rng.integers(-4, 5, lead))[..., None, None]
        out = round_to(x, et)
        into_b = (rows % 8 == 7) & ((rows // 8 % 2 == 1) | (m < 2))
        for idx in np.argwhere(np.broadcast_to(into_b, lead)):
            pos = tuple(rng.integers(0, s) for s in shape[-2:])
            out[tuple(idx) + pos] = nonfinite[rng.integers(0, 3)]
        return out
    # a
    off = rng.uniform(-1, 1, shape)
    if cplx:
        off = off + 1j * rng.uniform(-1, 1, shape)
    off = off / (2 * max(m, 1) * (np.sqrt(2) if cplx else 1.0))
    strict = np.tril(np.ones((m, m), bool), -1) if lower else np.triu(np.ones((m, m), bool), 1)
    eye = np.eye(m, dtype=bool)
    spread = np.where(np.broadcast_to((rows % 8 == 2) | (rows % 8 == 6), lead),
                      rng.uniform(0, 8, lead), 0.0)
    mags = np.exp2(-rng.uniform(0, 1, lead + (m,)) * spread[..., None]) * \
        rng.uniform(1, 2, lead + (m,))
    dvals = mags * _phases(lead + (m,), rng, cplx)
    t = np.where(eye, 1.0, np.where(strict, off, 0.0))
    t = dvals[..., :, None] * t
    t = t * np.exp2(rng.integers(-4, 5, lead))[..., None, None]
    other = strict.T
    # the triangle not read
    fill = rows % 4
    garbage = _garbage(et, shape, rng)
    mirror = np.swapaxes(t, -1, -2)
    zeros = np.zeros(shape, t.dtype)
    nans = np.full(shape, np.nan, t.dtype)
    filler = np.where((fill == 0)[..., None, None], zeros,
                      np.where((fill == 1)[..., None, None], nans,
                               np.where((fill == 2)[..., None, None], garbage, mirror)))
    t = np.where(other, filler, t)
    if unit:
        diag_garbage = _garbage(et, lead + (m,), rng)
        keep_one = np.broadcast_to((rows % 3 == 2), lead)[..., None]
        dg = np.where(keep_one, 1.0, diag_garbage)
        idx = np.arange(m)
        t[..., idx, idx] = dg
    with np.errstate(all="ignore"):
        out = round_to(t, et)
    into_a = (rows % 8 == 7) & (rows // 8 % 2 == 0) & (m >= 2)
    read = np.argwhere(strict)
    for idx in np.argwhere(np.broadcast_to(into_a, lead)):
        pos = tuple(read[rng.integers(0, len(read))])
        out[tuple(idx) + pos] = nonfinite[rng.integers(0, 3)]
    return out
