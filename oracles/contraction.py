"""dot_general (and the contraction every convolution reduces to), written from the spec:
"transposed, reshaped" slices of ``lhs`` and ``rhs`` whose element-wise products are
reduced with ``add`` (003 "### dot_general").

The spec's formulas, read as one batched matrix product: ``lhs`` transposed to
``batching + result + contracting`` dimensions and reshaped to ``[B, M, K]``, ``rhs``
transposed to ``batching + contracting + result`` and reshaped to ``[B, K, N]``; then
``[B, M, N]`` reshaped to ``dims(batching) + dims(lhs result) + dims(rhs result)`` (C12).
One ``numpy.matmul`` (BLAS) does every result element at once; no Python loop runs over
result elements.

How exact the reference is, by element type (:func:`contract`):

- floats up to f32 (f32, f16, bf16, the fp8 types) and complex<f32>: every product is
  exact in float64 (at most 2·24 significant bits), the sum is BLAS's float64 (complex128)
  sum, within γ₆₄(K)·Σ|a·b| of the exact value: 2^29 times tighter than an f32 backend's
  bound, and exact wherever every partial sum is representable in float64 (the
  exact-value inputs: small integers times powers of two).
- f64 and complex<f64>: an error-free transformation (Ozaki et al., "Error-free
  transformations of matrix multiplication by using fast routines of matrix
  multiplication and its applications", Numer. Algorithms 59, 2012): each row of A and
  column of B is split into slices on a grid shared by the row (column), so that every
  product of slices is exact in float64 with BLAS; the few slice products are then summed
  with a compensated (TwoSum) accumulation, so that the result is within about one ulp
  of the exact dot product, whatever K: more accurate than any f64 backend.
- integers: exact, with two's-complement wraparound (the products and sums are taken
  modulo 2^64 in uint64 and then reduced to the result's width, which is what any
  evaluation order at that width gives); through float64 BLAS where every partial sum
  is below 2^53, an integer matmul otherwise.
- booleans: ``multiply`` is ``and``, ``add`` is ``or``: any product true.

**Reuse (convolution).** :func:`contract` is the whole numeric kernel and knows nothing
of dot_general's attributes beyond four dimension lists::

    wide = contract(lhs, rhs, lhs_batching, rhs_batching, lhs_contracting, rhs_contracting)
    out = to_result(wide, result_type)

A convolution oracle builds its im2col view (patches ``[N, out spatial..., window...,
C]`` against a kernel ``[window..., C, O]``), passes the window and feature axes as the
contracting dimensions (and the group axis as a batching dimension for
``feature_group_count``), and transposes the result into its output layout.
:func:`magnitudes` (Σ|a|·|b| per result element) and :func:`term_count` (K) are what the
``contraction`` bound (conformance/checking/verdicts/contraction.py) takes; conditions for the
spec's implementation-defined cases are registered below on dot_general's attributes, and
:func:`out_of_range_mask` and :func:`all_zero_terms` are their generic parts.
"""
from __future__ import annotations

from typing import Sequence

import ml_dtypes
import numpy as np

from conformance.core.numerics import precision_type, round_to
from conformance.core.types import ElementType, TensorType, element_type
from conformance.specs.expressions import alternative, condition

from ._kernels import as_u64, wrap
from .registry import OracleError, register

__all__ = ["Layout", "layout", "contract", "magnitudes", "term_count", "to_result",
           "exact_f64_matmul", "out_of_range_mask", "all_zero_terms", "dot_general"]

_U64 = np.uint64


# ---------------------------------------------------------------------------
# The layout: dot_general's transposes and reshapes, as one batched matmul
# ---------------------------------------------------------------------------

class Layout:
    """How ``lhs`` and ``rhs`` become ``[B, M, K]`` and ``[B, K, N]``, and the result
    ``[B, M, N]`` becomes the spec's result shape (C12)."""

    def __init__(self, lhs_shape, rhs_shape, lb, rb, lc, rc, lead: int = 0):
        lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
        self.lead = lead             # leading axes (a batch of cases) carried through
        lr, rr = len(lhs_shape) - lead, len(rhs_shape) - lead
        lb, rb, lc, rc = (list(map(int, d)) for d in (lb, rb, lc, rc))
        for dims, rank, what in ((lb, lr, "lhs batching"), (lc, lr, "lhs contracting"),
                                 (rb, rr, "rhs batching"), (rc, rr, "rhs contracting")):
            if any(not 0 <= d < rank for d in dims):
                raise OracleError(f"dot_general: {what} dimensions {dims} out of range for "
                                  f"rank {rank}")
        if len(lb) != len(rb) or len(lc) != len(rc) or len(set(lb + lc)) != len(lb + lc) \
                or len(set(rb + rc)) != len(rb + rc):
            raise OracleError("dot_general: dimension numbers break C2-C5")
        lfree = [d for d in range(lr) if d not in lb and d not in lc]
        rfree = [d for d in range(rr) if d not in rb and d not in rc]
        ls, rs = lhs_shape[lead:], rhs_shape[lead:]
        if [ls[d] for d in lb] != [rs[d] for d in rb] or \
                [ls[d] for d in lc] != [rs[d] for d in rc]:
            raise OracleError("dot_general: batching or contracting sizes differ (C9, C10)")
        pre = list(range(lead))
        self.lhs_perm = pre + [lead + d for d in lb + lfree + lc]
        self.rhs_perm = pre + [lead + d for d in rb + rc + rfree]
        self.lead_shape = lhs_shape[:lead]
        self.batch_dims = [ls[d] for d in lb]
        self.m_dims = [ls[d] for d in lfree]
        self.n_dims = [rs[d] for d in rfree]
        self.k_dims = [ls[d] for d in lc]
        prod = lambda xs: int(np.prod(xs, dtype=np.int64))   # noqa: E731
        self.B, self.M, self.N, self.K = (prod(self.batch_dims), prod(self.m_dims),
                                          prod(self.n_dims), prod(self.k_dims))
        self.result_shape = tuple(self.lead_shape) + tuple(self.batch_dims + self.m_dims +
                                                           self.n_dims)

    def operands(self, lhs: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``lhs`` as [lead..., B, M, K] and ``rhs`` as [lead..., B, K, N]."""
        a = np.transpose(lhs, self.lhs_perm).reshape(
            tuple(self.lead_shape) + (self.B, self.M, self.K))
        b = np.transpose(rhs, self.rhs_perm).reshape(
            tuple(self.lead_shape) + (self.B, self.K, self.N))
        return a, b

    def result(self, c: np.ndarray) -> np.ndarray:
        return c.reshape(self.result_shape)


def layout(lhs_shape, rhs_shape, lb, rb, lc, rc, lead: int = 0) -> Layout:
    return Layout(lhs_shape, rhs_shape, lb, rb, lc, rc, lead)


# ---------------------------------------------------------------------------
# Exact f64 matmul (Ozaki's error-free transformation) and the float64 one
# ---------------------------------------------------------------------------

def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _slices(x: np.ndarray, axis: int, k: int, max_slices: int = 96) -> list[np.ndarray]:
    """``x`` (finite) as a sum of slices: within a slice, each row (``axis`` -1) or column
    (``axis`` -2) is a multiple of one power of two and at most ``2^beta`` times it, with
    ``2·beta + log2(k) <= 52``, so that a product of two slices, summed over ``k`` terms,
    is exact in float64 (up to products below the smallest subnormal).

    A slice is the rest truncated to a multiple of ``2^(e - beta)`` (``2^e`` above the
    row's largest magnitude in the rest) by scaling with a power of two, truncating to
    an integer and scaling back: exact at every exponent and never above the rest (so
    never overflowing, where rounding 1.8e308 up would), so no row is ever scaled as a
    whole (scaling a row of 1e299 down to keep a rounding constant finite flushed its
    1e-300 elements, whose products with a column's 1e300 are not negligible). Each row
    needs about 53/beta slices per magnitude cluster of its elements: rows spanning
    f64's whole range take many; beyond ``max_slices`` the remainder is one more slice
    (its products rounded once each: within the bound's own γ₆₄ term)."""
    beta = max(1, (52 - int(np.ceil(np.log2(max(k, 1))))) // 2)
    out = []
    rest = x.copy()
    with np.errstate(all="ignore"):
        for _ in range(max_slices):
            if not rest.size:
                break
            mx = np.max(np.abs(rest), axis=axis, keepdims=True)
            if not np.any(mx):
                break
            e = np.frexp(np.where(mx > 0, mx, 1.0))[1]          # mx < 2^e
            shift = (beta - e).astype(np.float64)
            # scaling by 2^shift in two powers of two per row (each finite, every product
            # exact or, below the subnormal range, a multiple of 2^-1074 anyway): a
            # broadcast multiply, much cheaper than ldexp
            h = np.floor(shift / 2)
            up1, up2, dn1, dn2 = np.exp2(h), np.exp2(shift - h), np.exp2(-h), np.exp2(h - shift)
            hi = np.where(mx > 0, np.trunc(rest * up1 * up2) * dn1 * dn2, 0.0)
            out.append(hi)
            rest = rest - hi
    if rest.size and np.any(rest):
        out.append(rest)      # (a remainder beyond max_slices: not exact, but tiny)
    return out


def exact_f64_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for finite float64 ``[..., M, K] @ [..., K, N]``, within about one ulp
    of the exact product (every slice product is exact; the slice products are summed
    with TwoSum and the errors added back: a compensated sum of exact terms)."""
    k = a.shape[-1]
    if a.size == 0 or b.size == 0 or k == 0:
        return np.matmul(a, b) + 0.0
    sa = _slices(a, -1, k)
    sb = _slices(b, -2, k)
    with np.errstate(all="ignore"):
        terms = [np.matmul(x, y) for x in sa for y in sb]
    if not terms:
        return np.zeros(a.shape[:-1] + (b.shape[-1],))
    # large terms first (slice i holds the bits below slice i-1's)
    terms.sort(key=lambda t: -float(np.max(np.abs(t))))
    s = terms[0]
    err = np.zeros_like(s)
    with np.errstate(all="ignore"):
        for t in terms[1:]:
            s, e = _two_sum(s, t)
            err = err + e
        return s + err


def _finite_matmul(a: np.ndarray, b: np.ndarray, exact: bool) -> np.ndarray:
    """float64 ``a @ b`` where non-finite values take IEEE semantics: the exact method
    runs on the finite part, and rows/columns holding a NaN or an infinity are redone
    with plain float64 matmul (whose infinities and NaNs every order shares)."""
    if not exact:
        return np.matmul(a, b)
    fa, fb = np.isfinite(a), np.isfinite(b)
    if fa.all() and fb.all():
        return exact_f64_matmul(a, b)
    out = exact_f64_matmul(np.where(fa, a, 0.0), np.where(fb, b, 0.0))
    bad_rows = ~fa.all(axis=-1, keepdims=True)          # [..., M, 1]
    bad_cols = ~fb.all(axis=-2, keepdims=True)          # [..., 1, N]
    with np.errstate(all="ignore"):
        plain = np.matmul(a, b)
    return np.where(bad_rows | bad_cols, plain, out)


def _complex_matmul(a: np.ndarray, b: np.ndarray, exact: bool) -> np.ndarray:
    ar, ai, br, bi = a.real.copy(), a.imag.copy(), b.real.copy(), b.imag.copy()
    if not exact:
        return np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    # re = ar·br − ai·bi, im = ar·bi + ai·br: each part the compensated sum of two exact
    # dot products (concatenated along K, so that one error-free product does both)
    re = _finite_matmul(np.concatenate([ar, -ai], -1), np.concatenate([br, bi], -2), True)
    im = _finite_matmul(np.concatenate([ar, ai], -1), np.concatenate([bi, br], -2), True)
    return re + 1j * im


# ---------------------------------------------------------------------------
# contract: the numeric kernel (reused by convolution)
# ---------------------------------------------------------------------------

def _is_wide(et: ElementType) -> bool:
    return et.component.name == "f64" if (et.is_float or et.is_complex) else False


def contract(lhs: np.ndarray, rhs: np.ndarray, lhs_batching: Sequence[int] = (),
             rhs_batching: Sequence[int] = (), lhs_contracting: Sequence[int] = (),
             rhs_contracting: Sequence[int] = (), *, lead: int = 0,
             exact: bool | None = None) -> np.ndarray:
    """The dot products of dot_general's semantics, unrounded: shape
    ``lead + dims(batching) + dims(lhs result) + dims(rhs result)``.

    Floats come back as float64, complex as complex128 (f64 / complex<f64> operands
    through the error-free product, others through float64 BLAS: see the module text;
    ``exact`` forces either), integers as uint64 holding the sum modulo 2^64 (two's
    complement), booleans as bool. ``lead`` leading axes (a batch of cases) are carried
    through unchanged. Round with :func:`to_result`."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    lay = Layout(lhs.shape, rhs.shape, lhs_batching, rhs_batching, lhs_contracting,
                 rhs_contracting, lead)
    et = element_type(lhs.dtype)
    a, b = lay.operands(lhs, rhs)
    with np.errstate(all="ignore"):
        if et.is_boolean:
            c = np.matmul(a.astype(np.float64), b.astype(np.float64)) > 0
        elif et.is_integer:
            c = _integer_matmul(a, b, element_type(rhs.dtype))
        elif et.is_complex:
            c = _complex_matmul(a, b, _is_wide(et) if exact is None else exact)
            c = c + 0.0     # (-0 + 0 = +0: the spec's init value 0)
        else:
            c = _finite_matmul(a.astype(np.float64), b.astype(np.float64),
                               _is_wide(et) if exact is None else exact)
            c = c + 0.0
    return lay.result(c)


def _integer_matmul(a: np.ndarray, b: np.ndarray, bet: ElementType) -> np.ndarray:
    """Σ a·b modulo 2^64 as uint64 (exact, wrapped): float64 BLAS where every partial
    sum stays below 2^53, uint64 matmul (wrapping) otherwise."""
    k = a.shape[-1]
    if a.size and b.size and k:
        ma = float(np.max(np.abs(a.astype(np.float64))))
        mb = float(np.max(np.abs(b.astype(np.float64))))
        if ma * mb * k < 2.0 ** 53:
            c = np.matmul(a.astype(np.float64), b.astype(np.float64))
            return c.astype(np.int64).view(_U64)
    ua, ub = as_u64(a), as_u64(b)
    return np.matmul(ua, ub)


def to_result(wide: np.ndarray, t: "TensorType | ElementType | str") -> np.ndarray:
    """Round (floats, to nearest even) or wrap (integers) :func:`contract`'s values to
    the result's element type. Across kinds, as ``convert`` converts (003 "### convert"):
    integer operands with a float or complex result give the exact integer dot product
    rounded once (the imaginary part +0; exact only while |sum| < 2^63: the drawn types
    stay far below), real operands with a complex result the real dot product rounded
    (imaginary part +0). The other kinds (a float or complex dot with an integer result,
    complex with a real one, booleans with anything but a boolean) are not drawn and have
    no reading here: OracleError."""
    et = t.element_type if isinstance(t, TensorType) else element_type(t)
    src = wide.dtype
    if src == np.bool_:
        if not et.is_boolean:
            raise OracleError(f"dot_general: boolean operands with a {et.name} result")
        return wide
    if src == _U64:
        if et.is_float or et.is_complex:
            return round_to(wide.view(np.int64).astype(np.float64), et)
        if not et.is_integer:
            raise OracleError(f"dot_general: integer operands with a {et.name} result: the "
                              "spec does not say how the dot product converts")
        return wrap(wide, et, wide.shape)
    if np.iscomplexobj(wide):
        if not et.is_complex:
            raise OracleError(f"dot_general: complex operands with a {et.name} result")
        return round_to(wide, et)
    if not (et.is_float or et.is_complex):
        raise OracleError(f"dot_general: float operands with a {et.name} result: the spec "
                          "does not say how the dot product converts")
    return round_to(wide, et)


def magnitudes(lhs: np.ndarray, rhs: np.ndarray, lb=(), rb=(), lc=(), rc=(), *,
               lead: int = 0) -> np.ndarray:
    """Σ|a|·|b| per result element at float64 (complex: moduli), non-finite values
    counted as 0: the S of the error bound γ(K)·S (plain float64 BLAS; S is a bound's
    scale, a relative error of γ₆₄(K) in it does not matter)."""
    def mag(x):
        x = np.asarray(x)
        et = element_type(x.dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            if et.is_complex:
                w = x.astype(np.complex128)
                finite = np.isfinite(w.real) & np.isfinite(w.imag)
                # a modulus that overflows (max + max·i) counts as the largest finite
                m = np.minimum(np.abs(w), np.finfo(np.float64).max)
            else:
                m = np.abs(x.astype(np.float64))
                finite = np.isfinite(m)
        return np.where(finite, m, 0.0)
    return contract(mag(lhs), mag(rhs), lb, rb, lc, rc, lead=lead, exact=False)


def term_count(lhs_shape, lhs_contracting: Sequence[int], lead: int = 0) -> int:
    """K: the number of products in every dot product."""
    return int(np.prod([lhs_shape[lead + d] for d in lhs_contracting], dtype=np.int64))


# ---------------------------------------------------------------------------
# The op
# ---------------------------------------------------------------------------

def _dims(attrs):
    return (list(attrs["lhs_batching_dimensions"]), list(attrs["rhs_batching_dimensions"]),
            list(attrs["lhs_contracting_dimensions"]), list(attrs["rhs_contracting_dimensions"]))


@register("dot_general")
def dot_general(inputs, attrs, types):
    lhs, rhs = (np.asarray(x) for x in inputs)
    if lhs.dtype != rhs.dtype:
        raise OracleError(f"dot_general: lhs is {element_type(lhs.dtype).name}, rhs "
                          f"{element_type(rhs.dtype).name} (C13)")
    wide = contract(lhs, rhs, *_dims(attrs))
    (t,) = types
    if tuple(wide.shape) != tuple(t.shape):
        raise OracleError(f"dot_general: the result shape is {list(wide.shape)}, the "
                          f"signature says {list(t.shape)} (C12)")
    return to_result(wide, t)


# ---------------------------------------------------------------------------
# Conditions of the spec's implementation-defined cases (inputs with a batch axis)
# ---------------------------------------------------------------------------

def out_of_range_mask(lhs, rhs, lb, rb, lc, rc, et: ElementType, lead: int = 1
                      ) -> np.ndarray:
    """Per (batched) result element: could some evaluation order overflow at ``et``
    (Σ|a·b| over the finite terms reaches the type's largest finite value, so that a
    partial sum may be infinite in one order and finite in another), may an intermediate
    of a complex product overflow (the products' components summed, below), or does
    complex arithmetic meet a non-finite part (exceptions of complex arithmetic are
    implementation-defined, 003 "Errors"; a real dot with a complex result too: the
    operands may be converted first)? Integers: never (they wrap)."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    src = element_type(lhs.dtype)
    if not (src.is_float or src.is_complex):
        return np.zeros(Layout(lhs.shape, rhs.shape, lb, rb, lc, rc, lead).result_shape, bool)
    big_src = float(ml_dtypes.finfo(src.component.dtype).max)
    big = min(big_src, float(ml_dtypes.finfo(et.component.dtype).max)) \
        if (et.is_float or et.is_complex) else big_src
    with np.errstate(all="ignore"):
        s = magnitudes(lhs, rhs, lb, rb, lc, rc, lead=lead)
        out = s >= big * (1 - 2.0 ** -20)
        if big < big_src:
            # a narrower result type: operands converted to it first may overflow
            def over(x):
                x = np.asarray(x)
                parts = [x.real, x.imag] if np.iscomplexobj(x) else [x]
                o = np.zeros(x.shape, bool)
                for q in parts:
                    q = np.abs(q.astype(np.float64))
                    o |= np.isfinite(q) & (q > big * (1 - 2.0 ** -20))
                return o.astype(np.float64)
            out |= contract(over(lhs), np.ones(rhs.shape), lb, rb, lc, rc, lead=lead,
                            exact=False) > 0
            out |= contract(np.ones(lhs.shape), over(rhs), lb, rb, lc, rc, lead=lead,
                            exact=False) > 0
        if src.is_complex:
            # A complex product's intermediates (the four real products, or Gauss's
            # (re a + im a)(re b + im b)) reach (|re a| + |im a|)(|re b| + |im b|), up to
            # 2|a||b|: (-8.8e68 - 5.4e307i)(-1.5 - 2i) is finite, XLA's evaluation -inf.
            def l1(x):
                x = np.asarray(x)
                return np.where(np.isfinite(x.real) & np.isfinite(x.imag),
                                np.abs(x.real.astype(np.float64))
                                + np.abs(x.imag.astype(np.float64)), 0.0)
            out |= contract(l1(lhs), l1(rhs), lb, rb, lc, rc, lead=lead,
                            exact=False) >= big * (1 - 2.0 ** -20)
        if src.is_complex or et.is_complex:
            # (real operands with a complex result: where the operands are converted
            # first, as XLA does, inf·(-919.5 + 0i) has a NaN imaginary part)
            nf = lambda x: (~np.isfinite(x.real) | ~np.isfinite(x.imag)).astype(np.float64)  # noqa
            out |= contract(nf(lhs), np.ones(rhs.shape), lb, rb, lc, rc, lead=lead,
                            exact=False) > 0
            out |= contract(np.ones(lhs.shape), nf(rhs), lb, rb, lc, rc, lead=lead,
                            exact=False) > 0
    return out


def all_zero_terms(lhs, rhs, lb, rb, lc, rc, lead: int = 1) -> "list[np.ndarray]":
    """Per (batched) result element and per part (one array for real types; real and
    imaginary part for complex): at least one term, and every real term of that part
    (``a·b``; complex: ``ar·br``, ``ai·bi`` for the real part, ``ar·bi``, ``ai·br`` for
    the imaginary part) a zero of either sign. Where every term is -0, a tree without
    the init value (reduce's "implementation-defined amount of init_values": none at
    all) gives -0; with it, +0."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)

    def nz(x):
        with np.errstate(invalid="ignore"):
            return (np.asarray(x) != 0).astype(np.float64)
    k = term_count(lhs.shape, lc, lead)
    c = lambda a, b: contract(a, b, lb, rb, lc, rc, lead=lead, exact=False)  # noqa: E731
    if np.iscomplexobj(lhs):
        ar, ai, br, bi = nz(lhs.real), nz(lhs.imag), nz(rhs.real), nz(rhs.imag)
        counts = [c(ar, br) + c(ai, bi), c(ar, bi) + c(ai, br)]
    else:
        counts = [c(nz(lhs), nz(rhs))]
    return [(n == 0) & (k > 0) for n in counts]


def underflowing_parts(lhs, rhs, lb, rb, lc, rc, lead: int = 1, et: "ElementType | None" = None
                       ) -> "list[np.ndarray]":
    """Per (batched) result element and per part (one array for real types; real and
    imaginary part for complex): every real product of that part (``a·b``; complex:
    ``ar·br``, ``ai·bi`` for the real part, ``ar·bi``, ``ai·br`` for the imaginary part)
    rounds to a zero at the operands' type, as the sum of their magnitudes is at most half
    the smallest subnormal. The signs of those rounded zeros (and, where the products are
    fused into the sum, the sign of the unrounded sum) decide the zero's sign: either is
    legal. A complex part is judged on its own real products: (6.7e-282 - 8.3e-131i) ·
    (2.5e-220 - 6.1e-63i) has an imaginary part of -4e-344 (a zero) beside a real part
    of 5e-193, so the moduli (Σ|a|·|b|, :func:`magnitudes`) do not show it. ``et``: the
    operands' element type where ``lhs`` and ``rhs`` are already widened."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    src = et or element_type(lhs.dtype)
    if not (src.is_float or src.is_complex):        # integer products never underflow
        return [np.zeros(Layout(lhs.shape, rhs.shape, lb, rb, lc, rc, lead).result_shape,
                         bool)]
    eta = float(ml_dtypes.finfo(src.component.dtype).smallest_subnormal)

    def mag(x):
        with np.errstate(invalid="ignore"):
            m = np.abs(np.asarray(x).astype(np.float64))
        return np.where(np.isfinite(m), m, 0.0)
    c = lambda a, b: contract(a, b, lb, rb, lc, rc, lead=lead, exact=False)  # noqa: E731
    with np.errstate(all="ignore"):
        if np.iscomplexobj(lhs):
            ar, ai, br, bi = mag(lhs.real), mag(lhs.imag), mag(rhs.real), mag(rhs.imag)
            sums = [c(ar, br) + c(ai, bi), c(ar, bi) + c(ai, br)]
        else:
            sums = [c(mag(lhs), mag(rhs))]
    return [s <= eta / 2 for s in sums]


@condition("contraction_out_of_range")
def _out_of_range(lhs, rhs, lb, rb, lc, rc, result):
    return out_of_range_mask(lhs, rhs, lb, rb, lc, rc,
                             element_type(np.asarray(result).dtype))


@condition("contraction_algorithm_out_of_range")
def _algorithm_out_of_range(lhs, rhs, lb, rb, lc, rc, result, lhs_precision_type,
                            rhs_precision_type, accumulation_type):
    """dot_general with an algorithm (stablehlo-spec-2026-08.md): the result elements an
    operand rounded to its precision type may make infinite (an element beyond the
    type's largest finite value, where rounding may give an infinity), or whose sums may
    overflow at accumulation_type (Σ|a·b| reaches its largest finite value). None for
    the empty algorithm."""
    r = np.asarray(result)
    if lhs_precision_type is None or accumulation_type is None:
        return np.zeros(r.shape, bool)
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)

    def beyond(x, name):
        big = precision_type(name)[2]
        with np.errstate(all="ignore"):
            q = np.abs(x.astype(np.float64))
            return (np.isfinite(q) & (q > big * (1 - 2.0 ** -20))).astype(np.float64)
    with np.errstate(all="ignore"):
        out = contract(beyond(lhs, lhs_precision_type), np.ones(rhs.shape), lb, rb, lc, rc,
                       lead=1, exact=False) > 0
        out |= contract(np.ones(lhs.shape), beyond(rhs, rhs_precision_type), lb, rb, lc, rc,
                        lead=1, exact=False) > 0
        s = magnitudes(lhs, rhs, lb, rb, lc, rc, lead=1)
        out |= s >= precision_type(accumulation_type)[2] * (1 - 2.0 ** -20)
        # a nonzero that rounds to zero at its precision type, times an infinity: NaN
        # where the exact product is infinite
        def to_zero(x, name):
            q = np.abs(x.astype(np.float64))
            return ((q > 0) & (q <= precision_type(name)[1] / 2)).astype(np.float64)

        def non_finite(x):
            return (~np.isfinite(x.astype(np.float64))).astype(np.float64)
        out |= contract(to_zero(lhs, lhs_precision_type), non_finite(rhs), lb, rb, lc, rc,
                        lead=1, exact=False) > 0
        out |= contract(non_finite(lhs), to_zero(rhs, rhs_precision_type), lb, rb, lc, rc,
                        lead=1, exact=False) > 0
    return out.reshape(r.shape)


def _zero_parts(lhs, rhs, lb, rb, lc, rc, result) -> "list[np.ndarray]":
    """Per part of the (batched) result: a zero whose sign the order decides. That is
    where every term is a zero (a tree without the init value over -0 terms gives -0),
    where every term underflows to zero at the operands' type (Σ|a·b| at most half its
    smallest subnormal: the signs of the rounded products decide), and where the exact
    sum is a nonzero that rounds to zero (a partial sum may cancel to +0 or underflow
    with either sign)."""
    r = np.asarray(result)
    parts = [r.real, r.imag] if np.iscomplexobj(r) else [r]
    zero = all_zero_terms(lhs, rhs, lb, rb, lc, rc)
    if len(zero) != len(parts):
        # a real dot product with a complex result: the real part's zero as for a real
        # result; the imaginary part is the conversion's +0 (003 "### convert"), or, with
        # the operands converted first (XLA), a sum of zero products a·0 + 0·b of either
        # sign (-2.7·0 + 0·-1.3 = -0): open wherever there is a term
        k = term_count(np.shape(lhs), lc, lead=1)
        return _zero_parts(lhs, rhs, lb, rb, lc, rc, r.real) + \
            [(r.imag == 0) & (k > 0)]
    src = element_type(np.asarray(lhs).dtype)
    eta = float(ml_dtypes.finfo(src.component.dtype).smallest_subnormal) \
        if (src.is_float or src.is_complex) else 0.0
    with np.errstate(all="ignore"):
        s = magnitudes(lhs, rhs, lb, rb, lc, rc, lead=1)
        wide = contract(np.asarray(lhs), np.asarray(rhs), lb, rb, lc, rc, lead=1)
    wparts = [wide.real, wide.imag] if np.iscomplexobj(wide) else [wide]
    under = underflowing_parts(lhs, rhs, lb, rb, lc, rc)
    return [(q == 0) & (z | (s <= eta / 2) | u | (w != 0))
            for z, q, w, u in zip(zero, parts, wparts, under)]


@condition("contraction_zero_terms")
def _zero_terms(lhs, rhs, lb, rb, lc, rc, result):
    r = np.asarray(result)
    et = element_type(r.dtype)
    if not (et.is_float or et.is_complex) or r.size == 0:
        return np.zeros(r.shape, bool)
    out = np.zeros(r.shape, bool)
    for z in _zero_parts(lhs, rhs, lb, rb, lc, rc, result):
        out |= z
    return out


@alternative("contraction_negative_zero")
def _negative_zero(lhs, rhs, lb, rb, lc, rc, result):
    """The oracle's result with the other zero in each part whose zero's sign the order
    decides (:func:`_zero_parts`); for complex, each such part alone and both."""
    r = np.asarray(result)
    et = element_type(r.dtype)
    if not (et.is_float or et.is_complex) or r.size == 0:
        return r
    return other_zeros(r, _zero_parts(lhs, rhs, lb, rb, lc, rc, result))


def other_zeros(r: np.ndarray, zero_parts: "list[np.ndarray]"):
    """``r`` with the other zero where ``zero_parts`` (one mask per part) say the order
    decides the sign: one alternative for a real result; for complex, the real part
    alone, the imaginary part alone and both (convolution's alternative too)."""
    if not np.iscomplexobj(r):
        if not element_type(r.dtype).is_float:
            return r
        return np.where(zero_parts[0], -r.astype(np.float64),
                        r.astype(np.float64)).astype(r.dtype)
    re, im = np.array(r.real), np.array(r.imag)
    nre = np.where(zero_parts[0], -re, re).astype(re.dtype)
    nim = np.where(zero_parts[1], -im, im).astype(im.dtype)
    out = []
    for x, y in ((nre, im), (re, nim), (nre, nim)):
        v = np.empty(r.shape, r.dtype)
        v.real, v.imag = x, y
        out.append(v)
    return out


@condition("contraction_widened_integer_sum")
def _widened(lhs, rhs, lb, rb, lc, rc, result):
    """Integer operands with a wider integer result where the sum at the operands' type
    (wrapped at its width, then converted) differs from the sum at the result's type."""
    r = np.asarray(result)
    src, et = element_type(np.asarray(lhs).dtype), element_type(r.dtype)
    if not src.is_integer or r.size == 0 or (et.is_integer and et.bits <= src.bits) or \
            not (et.is_integer or et.is_float or et.is_complex):
        return np.zeros(r.shape, bool)
    return _at_operand_type(lhs, rhs, lb, rb, lc, rc, result) != r


@alternative("contraction_at_operand_type")
def _at_operand_type(lhs, rhs, lb, rb, lc, rc, result):
    """The dot product taken at the operands' integer type (wrapping at its width, the
    spec's reduce of the element-wise multiply read literally) and then converted to the
    result's wider integer type, or rounded to its float or complex type (003
    "### convert")."""
    r = np.asarray(result)
    src, et = element_type(np.asarray(lhs).dtype), element_type(r.dtype)
    if not src.is_integer or not (et.is_integer or et.is_float or et.is_complex):
        return r
    wide = contract(np.asarray(lhs), np.asarray(rhs), lb, rb, lc, rc, lead=1)
    narrow = wrap(wide, src, wide.shape)
    if not et.is_integer:
        return round_to(narrow.astype(np.float64), et)
    return narrow.astype(np.int64).astype(et.dtype) if src.is_signed \
        else narrow.astype(np.uint64).astype(et.dtype)
