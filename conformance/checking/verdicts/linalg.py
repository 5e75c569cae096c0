"""Residual checks of the linear-algebra ops (the ``residual`` verdict kind,
conformance/checking/verdicts/__init__.py): cholesky and triangular_solve have no exact result, and the
question the spec can ask is whether the backend's answer is as good as a backward-stable
algorithm's. Both are normwise, per matrix of the batch, with ``u`` the unit roundoff of
the element type (2^-24 for f32 and complex<f32>, 2^-53 for f64) and the constant ``c``
of the spec's ``accuracy:`` entry.

The residuals are computed from the inputs and the backend's own result, never from the
oracle's (so another backend's result can stand in for the oracle in the cross-backend
view), at float64 for types of up to 32 bits and at the x87 extended precision
(``numpy.longdouble``, u = 2^-64) for f64 and complex<f64>: the residual's own rounding,
about ``(n+1)`` units of the precision it is computed in, is then at most 1/2^10 of the
bound it is compared with (where ``longdouble`` is only float64, as on some platforms, it is
of the bound's own size: the constant c = 4 leaves room for it).

Only the triangle the spec says is read (and, for a unit diagonal, not the diagonal) enters
a residual, so garbage there is never read by the judge either. Matrices that an
implementation-defined rule covers entirely (not positive definite: undefined behaviour)
are left out of their case's residual; the verdict masks a case all of whose matrices are
covered and records what the backend gave there.
"""
from __future__ import annotations

import numpy as np

from conformance.checking.compare import NAN, PASS, VALUE
from conformance.core.types import element_type
from conformance.oracles.linalg import (op_matrix, read_triangle, hermitian_from,
                                        solve_reads_non_finite, unit_roundoff)
from conformance.checking.verdicts import Judgement, residual_function

__all__ = ["cholesky_residual", "triangular_solve_residual", "wide_dtype"]


def wide_dtype(et) -> np.dtype:
    """What a residual is computed in: float64 (complex128) for types of up to 32 bits,
    longdouble (clongdouble) for f64 and complex<f64>."""
    et = element_type(et)
    if et.component.bits >= 64:
        return np.dtype(np.clongdouble if et.is_complex else np.longdouble)
    return np.dtype(np.complex128 if et.is_complex else np.float64)


def _adjoint(x: np.ndarray) -> np.ndarray:
    x = np.swapaxes(x, -1, -2)
    return np.conj(x) if np.iscomplexobj(x) else x


def _covered_matrices(j: Judgement, shape) -> np.ndarray:
    """Per matrix (shape[:-2]): every element of result 0 lies under one rule (a matrix
    the spec leaves undefined). Empty matrices are never covered."""
    out = np.zeros(shape[:-2], bool)
    if not shape[-1] * shape[-2]:
        return out
    for rule, m in j.masks.items():
        m = np.asarray(m)
        if m.dtype.kind != "b":
            continue
        out |= np.broadcast_to(m, shape).all(axis=(-2, -1))
    return out


def _per_case(x: np.ndarray, batch: int, reduce) -> np.ndarray:
    x = np.asarray(x).reshape(batch, -1)
    return reduce(x, axis=1) if x.shape[1] else np.zeros(batch, x.dtype)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with 0/0 = 0 (an exact result of size zero) and x/0 = inf."""
    with np.errstate(all="ignore"):
        r = num / den
    r = np.where((num == 0) & (den == 0), 0.0, r)
    return np.where((num != 0) & (den == 0) & ~np.isnan(num), np.inf, r)


@residual_function("cholesky")
def cholesky_residual(j: Judgement) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """‖F·Fᴴ − A‖_F / ‖A‖_F in units of (n+1)·u·trace(A)/‖A‖_F, at most ``c`` (YAML).

    F is the read triangle of the backend's result (``lower``: its lower triangle, with
    A = F·Fᴴ; else its upper one, A = Fᴴ·F), A the Hermitian input. Justification (Higham,
    Accuracy and Stability of Numerical Algorithms, 2nd ed., Thm 10.3): every ordering of
    Cholesky's inner products (left- or right-looking, blocked, recursive) computes F with
    F·Fᴴ = A + ΔA, |ΔA| ≤ γ(n+1)·|F|·|Fᴴ|; hence ‖ΔA‖_F ≤ γ(n+1)·‖F‖_F² and ‖F‖_F² =
    trace(F·Fᴴ) = trace(A) + O(u), so ‖ΔA‖_F / ‖A‖_F ≤ (n+1)·u·trace(A)/‖A‖_F to first order
    (trace(A)/‖A‖_F lies in [1, √n]). c = 4 covers γ's second-order term, blocked
    variants whose inner products are split into (and rounded at) several partial sums
    (at most doubling the count of roundings per element), the rounding of a result
    computed at a wider precision (u·‖A‖ more), and the residual's own evaluation. It is
    normwise: it holds for every condition number (near-singular matrices included).

    Structure, checked on its own (class ``value``): the diagonal of F must be real and
    positive ("a Cholesky decomposition" is the factor with a positive diagonal; −F has the
    same product): real part > 0, and an imaginary part within what the rounding of
    a_ii − Σ|f_ij|² (at most (n+1)·u·a_ii, Thm 10.3) leaves after the square root:
    |Im f_ii|·Re f_ii ≤ c·(n+1)·u·a_ii (complex arithmetic that forms f·conj(f) with a
    fused multiply-add leaves such a part; F·Fᴴ's diagonal, Σ|f_ij|², cannot show it).
    The opposite triangle is never read (implementation-defined). A NaN in F gives a NaN residual
    (``value`` where the oracle's result is finite)."""
    (a,), (f,) = j.inputs, j.actual
    a, f = np.asarray(a), np.asarray(f)
    et = element_type(a.dtype)
    lower = bool(j.sig.attributes["lower"])
    c = float(j.accuracy.options.get("c", 4))
    n = a.shape[-1]
    batch = j.batch
    if a.size == 0:
        return np.zeros(batch), np.full(batch, c), np.zeros(batch, np.int8)
    wd = wide_dtype(et)
    u = unit_roundoff(et)
    with np.errstate(all="ignore"):
        aw = hermitian_from(a.astype(wd), lower)
        fw = read_triangle(f.astype(wd), lower)
        prod = fw @ _adjoint(fw) if lower else _adjoint(fw) @ fw
        diff = np.sqrt((np.abs(prod - aw) ** 2).sum(axis=(-2, -1)))
        norm_a = np.sqrt((np.abs(aw) ** 2).sum(axis=(-2, -1)))
        trace = np.abs(np.diagonal(aw, axis1=-2, axis2=-1).real.sum(axis=-1))
        rel = _ratio(diff, norm_a).astype(np.float64)
        unit = ((n + 1) * u * _ratio(trace, norm_a)).astype(np.float64)
        ratio = _ratio(rel, unit)
        d = np.diagonal(fw, axis1=-2, axis2=-1)
        re, im = d.real.astype(np.float64), np.imag(d).astype(np.float64)
        a_ii = np.abs(np.diagonal(aw, axis1=-2, axis2=-1).real).astype(np.float64)
        bad_diag = ~((re > 0) & (np.abs(im) * re <= c * (n + 1) * u * a_ii)) & \
            ~np.isnan(re) & ~np.isnan(im)
    covered = _covered_matrices(j, a.shape)
    ratio = np.where(covered, 0.0, ratio)
    bad = bad_diag.any(axis=-1) & ~covered
    res = _per_case(ratio, batch, np.max)
    # a NaN anywhere in an uncovered matrix's residual makes the case's residual NaN
    nan = _per_case(np.isnan(ratio), batch, np.any)
    res = np.where(nan, np.nan, res)
    cls = np.where(_per_case(bad, batch, np.any), VALUE, PASS).astype(np.int8)
    return res, np.full(batch, c), cls


@residual_function("triangular_solve")
def triangular_solve_residual(j: Judgement) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """max over right-hand sides k of ‖T·x_k − b_k‖∞ / (‖T‖∞·‖x_k‖∞), in units of m·u, at
    most ``c`` (YAML).

    T = op(a) built from the read triangle only (a unit diagonal under ``unit_diagonal``;
    transposed or conjugate-transposed per ``transpose_a``); a right-side system x·T = b is
    judged as the left-side Tᵀ·xᵀ = bᵀ (its right-hand sides are the rows of x).
    Justification (Higham, Thm 8.5): substitution in any order computes x̂ with
    (T + ΔT)·x̂ = b, |ΔT| ≤ γ(m)·|T|, so ‖T·x̂ − b‖∞ ≤ γ(m)·‖T‖∞·‖x̂‖∞ per right-hand side,
    whatever T's condition number. c = 4 covers γ's second-order term, blocked solvers
    (Level-3 BLAS TRSM, XLA's TriangularSolveExpander) whose inverted diagonal blocks add a
    term of the blocks' condition numbers (≤ 6·2^9 by construction of the generated
    matrices, within the constant only for the well-conditioned blocks they are: Higham
    §13.2), the rounding of a result computed wider (‖T·δx‖ ≤ u·‖T‖·‖x‖) and the residual's
    own evaluation. A solve at a narrower precision (f32 done in bf16: u = 2^-8) or a
    transposed op(a) misses it by orders of magnitude.

    NaN and infinity: in a system with a non-finite element among those read (of a, or in
    b), the backend's result must be non-finite wherever the oracle's substitution is
    (class ``nan`` where it is finite there); its other elements are the rule
    non_finite_input's (masked). Elsewhere a NaN in the result gives a NaN residual
    (``value``)."""
    (a, b), (x,) = j.inputs, j.actual
    a, b, x = np.asarray(a), np.asarray(b), np.asarray(x)
    et = element_type(a.dtype)
    attrs = j.sig.attributes
    lower, unit = bool(attrs["lower"]), bool(attrs["unit_diagonal"])
    left = bool(attrs["left_side"])
    c = float(j.accuracy.options.get("c", 4))
    batch = j.batch
    m = a.shape[-1]
    if x.size == 0:
        return np.zeros(batch), np.full(batch, c), np.zeros(batch, np.int8)
    wd = wide_dtype(et)
    u = unit_roundoff(et)
    with np.errstate(all="ignore"):
        t, _ = op_matrix(a.astype(wd), lower, unit, str(attrs["transpose_a"]))
        xw, bw = x.astype(wd), b.astype(wd)
        if not left:
            t, xw, bw = np.swapaxes(t, -1, -2), np.swapaxes(xw, -1, -2), np.swapaxes(bw, -1, -2)
        r = t @ xw - bw
        r_norm = np.abs(r).max(axis=-2)                       # per right-hand side
        x_norm = np.abs(xw).max(axis=-2)
        t_norm = np.abs(t).sum(axis=-1).max(axis=-1)          # ‖T‖∞ per matrix
        ratio = _ratio(r_norm.astype(np.float64),
                       (m * u * t_norm[..., None] * x_norm).astype(np.float64))
        ratio = ratio.max(axis=-1) if ratio.shape[-1] else np.zeros(ratio.shape[:-1])
    # systems with a non-finite element read: non-finite wherever the oracle's is
    nonfinite = solve_reads_non_finite(a, b, lower, unit)
    e = np.asarray(j.expected[0])
    with np.errstate(all="ignore"):
        e_bad = ~np.isfinite(e.astype(np.complex128 if np.iscomplexobj(e) else np.float64))
        x_bad = ~np.isfinite(x.astype(np.complex128 if np.iscomplexobj(x) else np.float64))
    dropped = (e_bad & ~x_bad).any(axis=(-2, -1)) & nonfinite
    ratio = np.where(nonfinite, 0.0, ratio)
    res = _per_case(ratio, batch, np.max)
    nan = _per_case(np.isnan(ratio), batch, np.any)
    res = np.where(nan, np.nan, res)
    cls = np.where(_per_case(dropped, batch, np.any), NAN, PASS).astype(np.int8)
    return res, np.full(batch, c), cls
