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
exact-value inputs of generators/contraction.py, which so check bf16 and fp8 bit for bit
(complex: ``2S``, as a three-multiplication complex product's intermediates reach 2|a||b|).
Integers and booleans: bound 0 (exact, wrapping).

precision_config (#755: underspecified): with HIGHEST on both operands the bound above
holds, and a difference beyond it is class ``bound`` (``value`` beyond a bound of 0).
With DEFAULT or HIGH on either operand, a finite difference beyond the bound but within
the *looser* bound — the same formula at ``u = max(u_E, 2^-8)`` (bf16's precision: the
lowest XLA's DEFAULT uses for f32, on TPU) with K + 2 terms (operands rounded first), no
exactness zeroing, times 2 — is class ``precision`` (conformance.checking.compare): a reduced
precision the backend chose, which an expectations file can accept. A wrong transposition,
a dropped term or a sign error lies far beyond either bound and stays ``bound``/``value``.

**Reuse (convolution).** The bound is generic in (S, K, G): register a function of the
judgement for the op in :data:`TERMS`, returning ``(S, K, G)`` per batched result
element (``S`` = Σ|a|·|b| at float64, ``K`` the number of products (an int or an array),
``G`` a lower bound of the terms' granularity, or None for no exactness check), e.g.
from im2col patches with ``oracles.contraction.magnitudes`` and :func:`granularity_floor`::

    from conformance.checking.verdicts.contraction import TERMS
    TERMS["convolution"] = my_terms

and name ``{bound: contraction}`` under ``accuracy:``; :func:`limits` is the formula itself.
**dot_general's algorithm** (stablehlo-spec-2026-08.md): the operands "rounded to"
``lhs_precision_type`` / ``rhs_precision_type``, the accumulation at ``accumulation_type``
(:func:`algorithm_bound`). Per element::

    |ŷ − y| <= u_in·S + (η_l/2)·Σ|b| + (η_r/2)·Σ|a| + limits(S', K, y) at accumulation_type

with ``u_in = u_l + u_r + u_l·u_r`` where rounding an operand to its precision type loses
bits (0 where the type holds every value of E: bf16 operands with an f32 precision type),
``η`` the precision type's smallest subnormal (an operand rounded below its normal range),
``S' = (1 + u_in)·S`` the rounded operands' magnitudes, and :func:`limits` taken at the
accumulation type (not at a narrower result: the algorithm names where the sums are
taken), exact (0) only where no operand is rounded. A backend that accumulates f32-named
sums in bf16 is far outside it; one that computes more precisely is inside. With an
algorithm the precision_config (DEFAULT, C21) names no reduced precision: no
``precision`` class.

An op's precision_config attribute, if it has one, is read by name. Register the op's
contraction of two nonnegative operand-shaped arrays in :data:`PAIRS` too, and its
subnormal flushes are judged on each element's own evidence (:func:`contraction_flush`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

from conformance.checking.compare import PRECISION
from conformance.core.numerics import flush_subnormals, is_subnormal, precision_type
from conformance.core.types import ElementType, element_type
from conformance.oracles import contraction
from conformance.oracles.reduction import granularity
from conformance.checking.verdicts import (Judgement, bound_function, flush_allowance, gamma,
                                           looser_bound, unit_roundoff)

__all__ = ["TERMS", "PAIRS", "pair_count", "limits", "granularity_floor", "contraction_bound", "contraction_flush",
           "contraction_looser", "reduced_precision", "LOWEST_PRECISION_U", "bf16_operands",
           "ALGORITHM", "algorithm_of", "algorithm_bound", "precision_type"]

_U64 = 2.0 ** -53
#: the unit roundoff of the lowest precision a precision_config below HIGHEST may use (bf16)
LOWEST_PRECISION_U = 2.0 ** -8


def _precision(et: ElementType) -> int:
    return int(ml_dtypes.finfo(et.component.dtype).nmant) + 1


def limits(s: np.ndarray, k: "int | np.ndarray", y: np.ndarray, operand: ElementType,
           result: ElementType, g: np.ndarray | None = None, u: float | None = None,
           fixed: bool = False) -> np.ndarray:
    """The largest |ŷ − y| any legal order allows per element: ``s`` = Σ|a|·|b|, ``k``
    the number of products, ``y`` the oracle's result (type R), ``operand`` the type E
    the products and sums are taken at; ``g`` a lower bound of the terms' granularity
    (0 where exact; None: no exactness check); ``u`` overrides E's unit roundoff (the
    looser bound of a reduced precision_config); ``fixed``: the sums are taken at
    ``operand`` even where R is narrower (an algorithm's accumulation_type)."""
    acc = operand if (operand.is_float or operand.is_complex) else result
    if not (result.is_float or result.is_complex) or not (acc.is_float or acc.is_complex):
        return np.zeros(np.shape(y))
    if _precision(result) < _precision(acc) and not fixed:
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
            # complex: the product's parts may be taken in a three-multiplication form
            # (Gauss's; XLA on CPU gives such a result), whose intermediates reach
            # (|re a| + |im a|)(|re b| + |im b|) <= 2|a||b|
            sx = 2 * s if acc.is_complex else s
            exact = ((sx <= np.ldexp(g, p)) & (g >= eta) & (sx < big)) | (s == 0)
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
        # The op's own module of this package registers its terms (convolution.py,
        # dynamic_conv.py): import it here, whatever imported this module first (the
        # package loads its modules only while a bound name is unknown, and this one
        # registers the bound's name).
        import importlib
        try:
            importlib.import_module(f"{__package__}.{j.sig.op}")
        except ModuleNotFoundError:
            pass
        fn = TERMS.get(j.sig.op)
    if fn is None:
        raise KeyError(f"the contraction bound has no terms for op {j.sig.op!r}; register "
                       "them in conformance.checking.verdicts.contraction.TERMS")
    return fn(j)


def _operand_type(j: Judgement) -> ElementType:
    return element_type(np.asarray(j.inputs[0]).dtype)


#: dot_general's algorithm fields (stablehlo-spec-2026-08.md), in the spec's order
ALGORITHM = ("lhs_precision_type", "rhs_precision_type", "accumulation_type",
             "lhs_component_count", "rhs_component_count", "num_primitive_operations",
             "allow_imprecise_accumulation")


def algorithm_of(attributes: dict[str, Any]) -> tuple | None:
    """The algorithm's (lhs, rhs, accumulation) precision type names, or None for the
    empty algorithm (every field None or absent: an op without one too)."""
    fields = [attributes.get(n) for n in ALGORITHM]
    if all(f is None for f in fields):
        return None
    return tuple(fields[:3])


def _rounding(et: ElementType, name: str) -> tuple[float, float]:
    """(relative, absolute) error of rounding an ``et`` value to precision type ``name``:
    (0, 0) where the type holds every value of ``et`` (at least its precision and its
    exponent range, subnormals included)."""
    p, eta, big = precision_type(name)
    mine = ml_dtypes.finfo(et.component.dtype)
    if p >= int(mine.nmant) + 1 and eta <= float(mine.smallest_subnormal) and \
            big >= float(mine.max):
        return 0.0, 0.0
    return 2.0 ** -p, eta / 2


def algorithm_bound(j: Judgement, algorithm: tuple) -> list[np.ndarray]:
    """Per result element: the bound of the module text's algorithm paragraph."""
    s, k, g = _terms(j)
    et = _operand_type(j)
    lp, rp, acc = algorithm
    ul, el = _rounding(et, lp)
    ur, er = _rounding(et, rp)
    u_in = ul + ur + ul * ur
    extra = 0.0
    if el or er:
        lhs, rhs = (np.abs(np.asarray(x).astype(np.float64)) for x in j.inputs[:2])
        with np.errstate(all="ignore"):
            # (el, er: the absolute error of rounding one operand element)
            extra = (el * _pairs(j, np.ones_like(lhs), rhs) * (1 + ur) +
                     er * _pairs(j, lhs, np.ones_like(rhs)) * (1 + ul) +
                     el * er * np.asarray(k, np.float64))
    at = element_type(acc)
    out = []
    with np.errstate(all="ignore"):
        for e in j.expected:
            rt = element_type(np.asarray(e).dtype)
            lim = limits(s * (1 + u_in) + extra, k, np.asarray(e), at, rt,
                         g if u_in == 0 and not (el or er) else None, fixed=True)
            out.append(u_in * s + extra + lim)
    return out


def _pairs(j: Judgement, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    fn = PAIRS.get(j.sig.op)
    if fn is None:
        raise KeyError(f"the contraction bound has no pairs for op {j.sig.op!r}")
    return fn(j, left, right)


@bound_function("contraction")
def contraction_bound(j: Judgement) -> list[np.ndarray]:
    """Per result element: :func:`limits` at the operands' precision (0 where exact), or
    with an algorithm (dot_general, stablehlo-spec-2026-08.md) :func:`algorithm_bound`."""
    algorithm = algorithm_of(j.sig.attributes)
    if algorithm is not None:
        out = algorithm_bound(j, algorithm)
        _LAST_BOUND[:] = [j, out]
        return out
    s, k, g = _terms(j)
    et = _operand_type(j)
    out = [limits(s, k, np.asarray(e), et, element_type(np.asarray(e).dtype), g)
           for e in j.expected]
    _LAST_BOUND[:] = [j, out]
    return out


#: op -> function(judgement, L, R) -> float64 per batched result element: the op's own
#: contraction of two nonnegative float64 arrays shaped like its (batched) operands,
#: Σ L·R over each element's terms (padding and holes as zeros). The flush allowance
#: counts an element's own subnormal operands and fine products with it.
PAIRS: dict[str, Callable[[Judgement, np.ndarray, np.ndarray], np.ndarray]] = {}


def _dot_pairs(j: Judgement, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    a = j.sig.attributes
    return contraction.magnitudes(left, right, a["lhs_batching_dimensions"],
                                  a["rhs_batching_dimensions"],
                                  a["lhs_contracting_dimensions"],
                                  a["rhs_contracting_dimensions"], lead=1)


PAIRS["dot_general"] = _dot_pairs

# the bound of the judgement the last call computed, so that the flush allowance does not
# compute it again for the same judgement (the ``bound`` verdict asks for both in a row)
_LAST_BOUND: list = [None, None]


def _bound_of(j: Judgement) -> list[np.ndarray]:
    if _LAST_BOUND[0] is j:
        return _LAST_BOUND[1]
    return contraction_bound(j)


def _exponents(x: np.ndarray, kind: str) -> np.ndarray:
    """Per element, +inf for zeros and non-finite values: ``granularity``, log2 of the
    largest power of two dividing it (complex: the finer part); ``magnitude``,
    floor(log2 |x|) (complex: of the smaller nonzero part, so that a small product of
    parts is never missed)."""
    x = np.asarray(x)
    parts = [x.real.astype(np.float64), x.imag.astype(np.float64)] if np.iscomplexobj(x) \
        else [x.astype(np.float64)]
    out = np.full(x.shape, np.inf)
    with np.errstate(all="ignore"):
        for q in parts:
            ok = np.isfinite(q) & (q != 0)
            if kind == "granularity":
                e = np.log2(granularity(q))
            else:
                e = np.frexp(np.where(ok, np.abs(q), 1.0))[1] - 1.0
            out = np.minimum(out, np.where(ok, e, np.inf))
    if np.iscomplexobj(x):
        bad = ~(np.isfinite(x.real) & np.isfinite(x.imag))
        out = np.where(bad, np.inf, out)
    return out


def pair_count(j: Judgement, ea: np.ndarray, eb: np.ndarray, t: float,
               max_groups: int = 12) -> np.ndarray:
    """Per batched result element: how many of its terms pair an lhs element and an rhs
    element whose exponents (``ea``, ``eb``, +inf: never) sum below ``t``. One
    contraction of indicator arrays (:data:`PAIRS`) per group of lhs exponents (at most
    ``max_groups``; a group counts pairs against its smallest member: an over-count)."""
    out = PAIRS[j.sig.op](j, np.zeros(np.shape(ea)), np.zeros(np.shape(eb)))
    finite_b = eb[np.isfinite(eb)]
    if not finite_b.size:
        return out
    levels = np.unique(ea[np.isfinite(ea) & (ea + finite_b.min() < t)])
    if not levels.size:
        return out
    for chunk in np.array_split(levels, min(max_groups, levels.size)):
        left = np.isin(ea, chunk).astype(np.float64)
        right = (eb < t - chunk.min()).astype(np.float64)
        out = out + PAIRS[j.sig.op](j, left, right)
    return out


def _ftz_room(j: Judgement, lhs, rhs, et: ElementType, tiny: float) -> np.ndarray:
    """Per batched result element: what flushing its own subnormal products and partial
    sums (FTZ) can move it by, each flush by less than ``tiny``. A flush needs a term of
    its own finer than ``tiny`` (every partial sum of every order is a multiple of the
    smallest granularity among its terms, and a flushed product or partial sum takes its
    fine terms with it): at most ``F`` flushes, F the terms whose operands' granularities
    multiply below ``tiny``. And each is a product below ``tiny`` (at most ``P``, the
    terms whose operands' magnitudes may multiply below it) or a partial sum of nonzero
    terms (at most ``N − 1``): at most ``min(F, P + N − 1)`` flushes (complex: times two,
    each pair giving two real products to each part). 0 where F is 0."""
    t = float(np.log2(tiny))
    fine = pair_count(j, _exponents(lhs, "granularity"), _exponents(rhs, "granularity"), t)
    if not fine.any():
        return fine
    small = pair_count(j, _exponents(lhs, "magnitude"), _exponents(rhs, "magnitude"), t)
    nz = lambda x: np.isfinite(_exponents(x, "magnitude")).astype(np.float64)  # noqa: E731
    nonzero = PAIRS[j.sig.op](j, nz(lhs), nz(rhs))
    flushes = np.minimum(fine, small + np.maximum(nonzero - 1, 0))
    return flushes * tiny * (2 if et.is_complex else 1)


def _subnormal_count(j: Judgement, lhs, rhs) -> np.ndarray:
    """Per batched result element: how many subnormal operand elements its terms hold."""
    sl, sr = is_subnormal(lhs).astype(np.float64), is_subnormal(rhs).astype(np.float64)
    return (PAIRS[j.sig.op](j, sl, np.ones(sr.shape)) +
            PAIRS[j.sig.op](j, np.ones(sl.shape), sr))


def _oracle_on(j: Judgement, inputs) -> list[np.ndarray]:
    if j.reevaluate is not None:
        return list(j.reevaluate(inputs))
    from conformance import oracles
    return list(oracles.evaluate_batch(j.sig, inputs, j.spec))


@flush_allowance("contraction")
def contraction_flush(j: Judgement) -> list[np.ndarray]:
    """Beyond the bound, per element and only on the element's own evidence, how far
    flushing subnormals can have moved it (issue 12: no batch-wide leniency):

    - FTZ (subnormal products and partial sums flushed): :func:`_ftz_room`, which is 0
      unless some product of the element's own operands is finer than the smallest
      normal ``tiny`` (of E, or of R where that is larger);
    - DAZ (subnormal operands read as zero, and FTZ on top): only where the element's
      own terms hold a subnormal operand, the oracle is run again on the inputs with
      their subnormals flushed, and the backend's value must lie within the bound (and
      the FTZ room) of *that* value; then the allowance is the distance between the two
      oracle values plus that bound.

    A one-ulp error beside no subnormal operand and no fine product (e.g. fp8 values of
    a coarse granularity, where ``tiny`` is 2^-6) gets no allowance and stays ``bound``
    / ``value``. Elements within the bound, and ops without :data:`PAIRS`, get 0.
    """
    et = _operand_type(j)
    limits_ = _bound_of(j)
    lhs, rhs = (np.asarray(x) for x in j.inputs[:2])
    out: list[np.ndarray] = []
    daz = None
    for i, (e, a) in enumerate(zip(j.expected, j.actual)):
        e, a = np.asarray(e), np.asarray(a)
        rt = element_type(e.dtype)
        zero = np.zeros(e.shape)
        if not (et.is_float or et.is_complex) or not (rt.is_float or rt.is_complex) \
                or j.sig.op not in PAIRS or a.shape != e.shape:
            out.append(zero)
            continue
        lim = np.broadcast_to(np.asarray(limits_[i], np.float64), e.shape)
        with np.errstate(all="ignore"):
            wide = np.complex128 if rt.is_complex else np.float64
            diff = np.abs(a.astype(wide) - e.astype(wide))
        need = np.isfinite(diff) & (diff > lim)
        if not need.any():
            out.append(zero)
            continue
        tiny = max(float(ml_dtypes.finfo(et.component.dtype).smallest_normal),
                   float(ml_dtypes.finfo(rt.component.dtype).smallest_normal))
        room = np.where(need, _ftz_room(j, lhs, rhs, et, tiny), 0.0)
        if is_subnormal(lhs).any() or is_subnormal(rhs).any():
            if daz is None:
                flushed = [flush_subnormals(x) for x in (lhs, rhs)] + list(j.inputs[2:])
                fj = dataclasses.replace(j, inputs=flushed)
                with np.errstate(all="ignore"):
                    daz = (fj, _oracle_on(j, flushed), contraction_bound(fj),
                           _subnormal_count(j, lhs, rhs) > 0)
                _LAST_BOUND[0] = None
            fj, yd, limd, own = daz
            yd = np.asarray(yd[i])
            limd = np.broadcast_to(np.asarray(limd[i], np.float64), e.shape)
            with np.errstate(all="ignore"):
                rd = limd + _ftz_room(fj, *fj.inputs[:2], et, tiny)
                d2 = np.abs(a.astype(wide) - yd.astype(wide))
                move = np.abs(yd.astype(wide) - e.astype(wide)) + rd - lim
            ok = need & own & np.isfinite(d2) & (d2 <= rd) & np.isfinite(move)
            room = np.where(ok, np.maximum(room, move), room)
        out.append(room)
    return out


def reduced_precision(attributes: dict[str, Any]) -> bool:
    """A precision_config below HIGHEST on some operand (an op without one: False); with
    an algorithm (stablehlo-spec-2026-08.md: precision_config then DEFAULT, C21) the
    algorithm names the precision: False."""
    if algorithm_of(attributes) is not None:
        return False
    pc = attributes.get("precision_config")
    return bool(pc) and any(p != "HIGHEST" for p in pc)


def bf16_operands(x: np.ndarray) -> np.ndarray:
    """``x`` with every f32 (complex<f32>: every part) rounded to bf16 and back, as a
    bf16 pass for DEFAULT f32 reads its operands: beyond bf16's largest finite value
    (above 3.3961e38, up to f32's max) a value becomes an infinity. Other types
    unchanged: a bf16 pass stands in for f32 (TPU's DEFAULT); f64 beyond 3.4e38 read as
    an infinity is no reduced precision any backend uses, and would hide real NaN bugs
    (XLA's batch-group NaN spreading on f64 convolutions)."""
    x = np.asarray(x)
    et = element_type(x.dtype)
    if not (et.is_float or et.is_complex) or et.component.name != "f32":
        return x
    comp = et.component.dtype
    with np.errstate(all="ignore"):
        def rnd(v):
            return np.asarray(v).astype(ml_dtypes.bfloat16).astype(comp)
        if et.is_complex:
            out = np.empty(x.shape, x.dtype)
            out.real, out.imag = rnd(x.real), rnd(x.imag)
            return out
        return rnd(x)


@looser_bound("contraction")
def contraction_looser(j: Judgement):
    """With a precision_config below HIGHEST: (``precision``, the bound at bf16's
    precision, K + 2 terms, no exactness, times 2, and what a bf16 pass gives at the top
    of the range); None with HIGHEST on both.

    The third item: the oracle on the operands rounded to bf16 (:func:`bf16_operands`)
    and that same looser bound around it. Near the largest finite value a bf16 pass turns
    an operand into an infinity (or rounds a sum past the largest finite value, or back
    below it), so its result is an infinity or NaN where the exact one is finite (or
    finite where the exact one overflows): an element whose value lies within the looser
    bound of that result (the same infinity, NaN for NaN) where it or the oracle's is
    not finite is ``precision`` too; its own operands decide (the rounded operands are
    its own)."""
    if not reduced_precision(j.sig.attributes):
        return None
    s, k, _ = _terms(j)
    et = _operand_type(j)
    wide = []
    for e in j.expected:
        rt = element_type(np.asarray(e).dtype)
        wide.append(2 * limits(s, np.asarray(k) + 2, np.asarray(e), et, rt, None,
                               u=LOWEST_PRECISION_U))
    pass_ = None
    rounded = [bf16_operands(x) for x in j.inputs]
    if j.reevaluate is not None and any(not np.array_equal(r, np.asarray(x), equal_nan=True)
                                        for r, x in zip(rounded, j.inputs)):
        with np.errstate(all="ignore"):
            ya = [np.asarray(y) for y in j.reevaluate(rounded)]
            ja = dataclasses.replace(j, inputs=rounded, expected=ya, memo={})
            sa, ka, _ = _terms(ja)
            wa = [2 * limits(sa, np.asarray(ka) + 2, y, et, element_type(y.dtype), None,
                             u=LOWEST_PRECISION_U) for y in ya]
        pass_ = (ya, wa)
    return PRECISION, wide, pass_
