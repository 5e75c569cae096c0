"""cholesky and triangular_solve, written from the spec's semantics, vectorised over the
batch dimensions; and the conditions that say which of their results the spec leaves open.

Both ops work on stacks of matrices (the two minor dimensions), computed at float64
(complex128) and rounded once to the element type:

- ``cholesky``: the Hermitian matrix that the read triangle gives (``lower``: the lower
  one) factored by ``numpy.linalg.cholesky`` on the whole stack at once (LAPACK potrf per
  matrix); ``lower=false`` returns ``U = Lᴴ`` (``Uᴴ·U = A``). The strict opposite triangle
  is zero (the spec leaves it implementation-defined). A matrix numpy cannot factor (not
  positive definite: the spec's undefined behaviour, masked) gives NaNs, found by factoring
  the stack matrix by matrix only when the whole stack fails.
- ``triangular_solve``: ``op(a)`` built from the read triangle only (a unit diagonal under
  ``unit_diagonal``; transposed or conjugate-transposed per ``transpose_a``), a right-side
  system ``x·op(a) = b`` turned into the left-side ``op(a)ᵀ·xᵀ = bᵀ``, and forward
  substitution (an upper matrix solved as the lower one with rows and columns reversed),
  one step per row, each step vectorised over the batch and the right-hand sides. Products
  are summed with numpy's own loops (not BLAS, which may skip a zero multiplier), so a NaN
  or an infinity spreads to exactly the elements the substitution makes depend on it.

For f64 inputs float64 is no wider than the type; both computations are backward stable
there (and the verdict, conformance/checking/verdicts/linalg.py, judges the backend's own residual,
not its distance to this oracle), so the oracle's results are the conventional values the
reports and golden examples compare with.

Conditions (the specs' ``implementation_defined`` rules call them with a leading batch axis):

- ``linalg_opposite_triangle(a, lower)``: the strict triangle of cholesky's result that
  the spec leaves implementation-defined;
- ``linalg_not_hpd(a, lower)``: every element of a matrix that is not Hermitian positive
  definite (undefined behaviour): non-finite elements, not exactly Hermitian in its type,
  a diagonal element that is not positive, or (scaled to a unit diagonal, ``H = D⁻¹·A·D⁻¹``)
  a smallest eigenvalue of at most ``HPD_MARGIN·(n+1)·u·‖H‖₂``;
- ``linalg_solve_non_finite(a, b, left_side, lower, unit_diagonal, result)``: in a system
  with a NaN or infinity among the elements read, the result elements where the oracle's
  substitution is finite (another algorithm may spread the NaN further).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.numerics import round_to, to_wide
from conformance.core.types import element_type
from conformance.specs.expressions import condition

from .registry import register

__all__ = ["hermitian_from", "read_triangle", "op_matrix", "solve_lower", "solve",
           "factor", "read_mask", "HPD_MARGIN", "unit_roundoff"]

#: a matrix whose smallest eigenvalue is at most HPD_MARGIN·(n+1)·u·‖A‖₂ is treated as not
#: positive definite (within rounding of singular: a backward-stable factorisation of a
#: matrix perturbed by (n+1)·u·‖A‖ may break down there).
HPD_MARGIN = 8.0


def unit_roundoff(et) -> float:
    et = element_type(et)
    return float(ml_dtypes.finfo(et.component.dtype).eps) / 2


def _swap(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def _adjoint(x: np.ndarray) -> np.ndarray:
    return np.conj(_swap(x)) if np.iscomplexobj(x) else _swap(x)


def read_mask(n: int, lower: bool, unit_diagonal: bool = False) -> np.ndarray:
    """The elements of an n×n matrix that are read: the triangle, without the diagonal
    under ``unit_diagonal``."""
    k = -1 if unit_diagonal else 0
    ones = np.ones((n, n), bool)
    return np.tril(ones, k) if lower else np.triu(ones, -k)


def read_triangle(a: np.ndarray, lower: bool, unit_diagonal: bool = False) -> np.ndarray:
    """The matrix the read triangle gives: the other triangle zero (garbage there, NaN
    included, never reaches a result), the diagonal one under ``unit_diagonal``."""
    n = a.shape[-1]
    out = np.where(read_mask(n, lower, unit_diagonal), a, 0).astype(a.dtype)
    if unit_diagonal and n:
        idx = np.arange(n)
        out[..., idx, idx] = 1
    return out


def hermitian_from(a: np.ndarray, lower: bool) -> np.ndarray:
    """The Hermitian matrix whose ``lower`` (or upper) triangle is ``a``'s."""
    t = read_triangle(a, lower)
    strict = read_triangle(a, lower, unit_diagonal=True)
    n = a.shape[-1]
    if n:
        idx = np.arange(n)
        strict[..., idx, idx] = 0
    return t + _adjoint(strict)


def op_matrix(a: np.ndarray, lower: bool, unit_diagonal: bool,
              transpose_a: str) -> tuple[np.ndarray, bool]:
    """``op(a)`` from the read triangle, and whether it is lower triangular."""
    t = read_triangle(a, lower, unit_diagonal)
    if transpose_a == "TRANSPOSE":
        return _swap(t), not lower
    if transpose_a == "ADJOINT":
        return _adjoint(t), not lower
    return t, lower


def solve_lower(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Forward substitution ``t·x = b`` for lower-triangular ``t`` ([..., m, m]) and ``b``
    ([..., m, k]), vectorised over the batch and the right-hand sides; products summed by
    numpy (every product formed: NaN·0 is NaN)."""
    dtype = np.result_type(t.dtype, b.dtype)
    x = np.zeros(np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype)
    with np.errstate(all="ignore"):
        for i in range(t.shape[-1]):
            s = (t[..., i, :i, None] * x[..., :i, :]).sum(axis=-2)
            x[..., i, :] = (b[..., i, :] - s) / t[..., i, i, None]
    return x


def solve(t: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """``t·x = b`` for triangular ``t`` (upper: the lower system with rows and columns
    reversed)."""
    if lower:
        return solve_lower(t, b)
    return solve_lower(t[..., ::-1, ::-1], b[..., ::-1, :])[..., ::-1, :]


def factor(h: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors of a stack of Hermitian matrices (wide); NaN for those numpy
    cannot factor."""
    if h.size == 0:
        return np.zeros(h.shape, h.dtype)
    with np.errstate(all="ignore"):
        try:
            return np.linalg.cholesky(h)
        except np.linalg.LinAlgError:
            pass
        flat = h.reshape((-1,) + h.shape[-2:])
        out = np.full(flat.shape, np.nan, h.dtype)
        for i, m in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                pass
        return out.reshape(h.shape)


@register("cholesky")
def cholesky(inputs, attrs, types):
    (a,) = inputs
    et = types[0].element_type
    lower = bool(attrs["lower"])
    l_ = factor(hermitian_from(to_wide(a), lower))
    r = l_ if lower else _adjoint(l_)
    return round_to(r, et)


@register("triangular_solve")
def triangular_solve(inputs, attrs, types):
    a, b = inputs
    et = types[0].element_type
    t, low = op_matrix(to_wide(a), bool(attrs["lower"]), bool(attrs["unit_diagonal"]),
                       str(attrs["transpose_a"]))
    bw = to_wide(b)
    if bool(attrs["left_side"]):
        x = solve(t, bw, low)
    else:       # x·T = b  <=>  Tᵀ·xᵀ = bᵀ
        x = _swap(solve(_swap(t), _swap(bw), not low))
    return round_to(x, et)


# ---------------------------------------------------------------------------
# Conditions
# ---------------------------------------------------------------------------

def _per_matrix(flags: np.ndarray, shape) -> np.ndarray:
    return np.broadcast_to(np.asarray(flags, bool)[..., None, None], shape)


@condition("linalg_opposite_triangle")
def opposite_triangle(a, lower) -> np.ndarray:
    a = np.asarray(a)
    n = a.shape[-1]
    strict = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    return np.broadcast_to(strict, a.shape)


def not_hpd(a: np.ndarray, lower: bool) -> np.ndarray:
    """Per matrix (shape a.shape[:-2]): not Hermitian positive definite, numerically."""
    a = np.asarray(a)
    et = element_type(a.dtype)
    n = a.shape[-1]
    if n == 0 or a.size == 0:
        return np.zeros(a.shape[:-2], bool)
    w = to_wide(a)
    with np.errstate(all="ignore"):
        finite = np.isfinite(w).all(axis=(-2, -1))
        hermitian = (w == _adjoint(w)).all(axis=(-2, -1))
        h = np.where(_per_matrix(finite & hermitian, w.shape), hermitian_from(w, lower),
                     np.eye(n, dtype=w.dtype))
        diag = np.diagonal(h, axis1=-2, axis2=-1).real
        positive = (diag > 0).all(axis=-1)
        # scaled to a unit diagonal (H = D^-1 A D^-1): what decides whether Cholesky
        # runs to completion, whatever the rows' scales (Higham, Thm 10.7)
        d = 1 / np.sqrt(np.where(positive[..., None], diag, 1.0))
        lam = np.linalg.eigvalsh(d[..., :, None] * h * d[..., None, :])
        norm = np.abs(lam).max(axis=-1)
        small = lam.min(axis=-1) <= HPD_MARGIN * (n + 1) * unit_roundoff(et) * norm
    return ~finite | ~hermitian | ~positive | small


@condition("linalg_not_hpd")
def not_hpd_mask(a, lower) -> np.ndarray:
    a = np.asarray(a)
    return _per_matrix(not_hpd(a, bool(lower)), a.shape)


def solve_reads_non_finite(a, b, lower, unit_diagonal) -> np.ndarray:
    """Per system: a NaN or infinity among the elements of ``a`` read, or in ``b``."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(all="ignore"):
        bad_a = ~np.isfinite(to_wide(a)) & read_mask(a.shape[-1], bool(lower),
                                                     bool(unit_diagonal))
        bad_b = ~np.isfinite(to_wide(b))
        return bad_a.any(axis=(-2, -1)) | bad_b.any(axis=(-2, -1))


@condition("linalg_solve_non_finite")
def solve_non_finite(a, b, left_side, lower, unit_diagonal, result) -> np.ndarray:
    result = np.asarray(result)
    with np.errstate(all="ignore"):
        finite = np.isfinite(to_wide(result))
    return _per_matrix(solve_reads_non_finite(a, b, lower, unit_diagonal),
                       result.shape) & finite
