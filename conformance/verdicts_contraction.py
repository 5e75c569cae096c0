"""The ``contraction`` bound: what a dot product's implementation-defined order allows,
and the ``precision`` class for a precision_config below HIGHEST.

dot_general's dot product is a ``reduce`` of the element-wise ``multiply`` with ``add``
(003 "### dot_general"), so every legal result is some tree of K rounded products and
K - 1 rounded additions at the operands' element type E: within ``γ_E(K)·Σ|a·b|`` of the
exact dot product (Higham, Accuracy and Stability of Numerical Algorithms, §3.1; complex:
``γ_E(K+2)`` with moduli, §3.6), then converted to the result type R. The oracle's value
is the exact dot product (to a few float64 ulps, oracles/contraction.py) rounded once to
R. Per result element::

    |ŷ − y| <= γ_E(K)·S + c·u_R·|y| + γ₆₄(K)·S + K·η_E/2

with ``S = |A|·|B|`` (Σ|a|·|b| over the contraction, a BLAS product of the magnitudes),
``c`` 1 where R = E (the last addition's rounding is in γ already) and 2 otherwise (the
conversion), ``γ₆₄(K)·S`` the oracle's own float64 error (zero for the error-free f64
product, kept anyway), ``η_E`` the smallest subnormal (products that underflow). A backend
that accumulates more precisely (f32 or f64 accumulators for bf16 operands) is well
inside it. The bound is **0** (bit-exact) where every product and partial sum of every
order is representable at E: every term a multiple of ``G`` (the smallest granularity of
the row's lhs elements times that of the column's rhs elements), ``S <= 2^p·G`` and
``G`` at least E's smallest subnormal, ``S`` below E's largest finite value: the
exact-value inputs of generators/contraction.py, which so check bf16 and fp8 bit for bit.
Integers and booleans: bound 0 (exact, wrapping).

precision_config (#755: underspecified): with HIGHEST on both operands the bound above
holds, and a difference beyond it is class ``bound`` (``value`` beyond a bound of 0).
With DEFAULT or HIGH on either operand, a finite difference beyond the bound but within
the *looser* bound — the same formula at ``u = max(u_E, 2^-8)`` (bf16's precision: the
lowest XLA's DEFAULT uses for f32, on TPU) with K + 2 terms (operands rounded first), no
exactness zeroing, times 2 — is class ``precision`` (conformance.compare): a reduced
precision the backend chose, which an expectations file can accept. A wrong transposition,
a dropped term or a sign error lies far beyond either bound and stays ``bound``/``value``.

**Reuse (convolution).** The bound is generic in (S, K, G): register a function of the
judgement for the op in :data:`TERMS`, returning ``(S, K, G)`` per batched result
element (``S`` = Σ|a|·|b| at float64, ``K`` the number of products (an int or an array),
``G`` a lower bound of the terms' granularity, or None for no exactness check), e.g.
from im2col patches with ``oracles.contraction.magnitudes`` and :func:`granularity_floor`::

    from conformance.verdicts_contraction import TERMS
    TERMS["convolution"] = my_terms

and name ``{bound: contraction}`` under ``accuracy:``; :func:`limits` is the formula itself.
An op's precision_config attribute, if it has one, is read by name.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

from conformance.compare import PRECISION
from conformance.core.types import ElementType, element_type
from conformance.oracles import contraction
from conformance.oracles.reduction import granularity
from conformance.verdicts import (Judgement, bound_function, flush_allowance, gamma,
                                  looser_bound, unit_roundoff)

__all__ = ["TERMS", "limits", "granularity_floor", "contraction_bound", "contraction_flush",
           "contraction_looser", "reduced_precision", "LOWEST_PRECISION_U"]

_U64 = 2.0 ** -53
#: the unit roundoff of the lowest precision a precision_config below HIGHEST may use (bf16)
LOWEST_PRECISION_U = 2.0 ** -8


def _precision(et: ElementType) -> int:
    return int(ml_dtypes.finfo(et.component.dtype).nmant) + 1


def limits(s: np.ndarray, k: "int | np.ndarray", y: np.ndarray, operand: ElementType,
           result: ElementType, g: np.ndarray | None = None, u: float | None = None
           ) -> np.ndarray:
    """The largest |ŷ − y| any legal order allows per element: ``s`` = Σ|a|·|b|, ``k``
    the number of products, ``y`` the oracle's result (type R), ``operand`` the type E
    the products and sums are taken at; ``g`` a lower bound of the terms' granularity
    (0 where exact; None: no exactness check); ``u`` overrides E's unit roundoff (the
    looser bound of a reduced precision_config)."""
    acc = operand if (operand.is_float or operand.is_complex) else result
    if not (result.is_float or result.is_complex) or not (acc.is_float or acc.is_complex):
        return np.zeros(np.shape(y))
    if _precision(result) < _precision(acc):
        # a narrower result: the spec does not say where the conversion happens, so the
        # products and sums may be taken at R (the reference interpreter converts first)
        acc = result
    ue = unit_roundoff(acc) if u is None else max(u, unit_roundoff(acc))
    ur = unit_roundoff(result)
    k = np.asarray(k, np.float64)
    kk = k + 2 if acc.is_complex else k
    same = acc.component.name == result.component.name and u is None
    eta = float(ml_dtypes.finfo(acc.component.dtype).smallest_subnormal)
    with np.errstate(all="ignore"):
        ya = np.abs(np.asarray(y).astype(np.complex128 if np.iscomplexobj(y) else np.float64))
        ya = np.where(np.isfinite(ya), ya, 0.0)
        s = np.asarray(s, np.float64)
        out = (gamma(kk, ue) * s + (1 if same else 2) * ur * ya * (1 + 4 * ur)
               + gamma(kk, _U64) * s + kk * eta / 2)
        if g is not None:
            p = _precision(acc)
            big = float(ml_dtypes.finfo(acc.component.dtype).max)
            g = np.asarray(g, np.float64)
            exact = ((s <= np.ldexp(g, p)) & (g >= eta) & (s < big)) | (s == 0)
            out = np.where(exact, 0.0, out)
    return out


def granularity_floor(lhs: np.ndarray, rhs: np.ndarray, lb, rb, lc, rc, lead: int = 1
                      ) -> np.ndarray:
    """Per (batched) result element of a dot_general-shaped contraction: a lower bound of
    the granularity of its nonzero finite terms (the smallest power of two dividing a
    term): the smallest granularity among the row's lhs elements times the smallest
    among the column's rhs elements (inf where there is none)."""
    def gran(x):
        x = np.asarray(x)
        if np.iscomplexobj(x):
            return np.minimum(granularity(x.real.astype(np.float64)),
                              granularity(x.imag.astype(np.float64)))
        return granularity(x.astype(np.float64))
    lay = contraction.Layout(np.shape(lhs), np.shape(rhs), lb, rb, lc, rc, lead)
    ga, gb = lay.operands(gran(lhs), gran(rhs))          # [..., B, M, K], [..., B, K, N]
    ma = ga.min(axis=-1) if ga.shape[-1] else np.full(ga.shape[:-1], np.inf)
    mb = gb.min(axis=-2) if gb.shape[-2] else np.full(gb.shape[:-2] + gb.shape[-1:], np.inf)
    with np.errstate(all="ignore"):
        g = ma[..., :, None] * mb[..., None, :]
    return lay.result(g)


def _dot_terms(j: Judgement):
    a = j.sig.attributes
    dims = (a["lhs_batching_dimensions"], a["rhs_batching_dimensions"],
            a["lhs_contracting_dimensions"], a["rhs_contracting_dimensions"])
    lhs, rhs = (np.asarray(x) for x in j.inputs[:2])
    s = contraction.magnitudes(lhs, rhs, *dims, lead=1)
    k = contraction.term_count(lhs.shape, dims[2], lead=1)
    g = granularity_floor(lhs, rhs, *dims, lead=1)
    return s, k, g


#: op -> function(judgement) -> (S, K, G) per batched result element (see the module
#: text): how the ``contraction`` bound reads an op's terms
TERMS: dict[str, Callable[[Judgement], tuple]] = {"dot_general": _dot_terms}


def _terms(j: Judgement):
    fn = TERMS.get(j.sig.op)
    if fn is None:
        raise KeyError(f"the contraction bound has no terms for op {j.sig.op!r}; register "
                       "them in conformance.verdicts_contraction.TERMS")
    return fn(j)


def _operand_type(j: Judgement) -> ElementType:
    return element_type(np.asarray(j.inputs[0]).dtype)


@bound_function("contraction")
def contraction_bound(j: Judgement) -> list[np.ndarray]:
    """Per result element: :func:`limits` at the operands' precision (0 where exact)."""
    s, k, g = _terms(j)
    et = _operand_type(j)
    return [limits(s, k, np.asarray(e), et, element_type(np.asarray(e).dtype), g)
            for e in j.expected]


@flush_allowance("contraction")
def contraction_flush(j: Judgement) -> list[np.ndarray]:
    """How far flushing subnormals (inputs, products, partial sums) can move a dot
    product beyond the bound: each flushed operand element moves its terms by less than
    ``tiny·|other operand|``, and each flushed product or partial sum by less than
    ``tiny``: ``tiny·(Σ|a| + Σ|b|) + 2K·tiny`` (tiny: E's smallest normal; Σ over the
    contraction). dot_general only (another op's TERMS give no operand sums)."""
    et = _operand_type(j)
    out = []
    for e in j.expected:
        rt = element_type(np.asarray(e).dtype)
        if not (et.is_float or et.is_complex) or not (rt.is_float or rt.is_complex) \
                or j.sig.op != "dot_general":
            out.append(np.zeros(np.shape(e)))
            continue
        a = j.sig.attributes
        dims = (a["lhs_batching_dimensions"], a["rhs_batching_dimensions"],
                a["lhs_contracting_dimensions"], a["rhs_contracting_dimensions"])
        lhs, rhs = (np.asarray(x) for x in j.inputs[:2])
        tiny = max(float(ml_dtypes.finfo(et.component.dtype).smallest_normal),
                   float(ml_dtypes.finfo(rt.component.dtype).smallest_normal))
        ones_l, ones_r = np.ones(lhs.shape), np.ones(rhs.shape)
        sb = contraction.magnitudes(ones_l, rhs, *dims, lead=1)
        sa = contraction.magnitudes(lhs, ones_r, *dims, lead=1)
        k = contraction.term_count(lhs.shape, dims[2], lead=1)
        out.append(tiny * (sa + sb) * (2 if et.is_complex else 1) + 2 * k * tiny)
    return out


def reduced_precision(attributes: dict[str, Any]) -> bool:
    """A precision_config below HIGHEST on some operand (an op without one: False)."""
    pc = attributes.get("precision_config")
    return bool(pc) and any(p != "HIGHEST" for p in pc)


@looser_bound("contraction")
def contraction_looser(j: Judgement):
    """With a precision_config below HIGHEST: (``precision``, the bound at bf16's
    precision, K + 2 terms, no exactness, times 2); None with HIGHEST on both."""
    if not reduced_precision(j.sig.attributes):
        return None
    s, k, _ = _terms(j)
    et = _operand_type(j)
    wide = []
    for e in j.expected:
        rt = element_type(np.asarray(e).dtype)
        wide.append(2 * limits(s, np.asarray(k) + 2, np.asarray(e), et, rt, None,
                               u=LOWEST_PRECISION_U))
    return PRECISION, wide
