"""Values for contractions (dot_general; convolution can name the same distribution):
``contraction`` in generators/values.py's SIGNATURE_DISTRIBUTIONS.

Cases of a batch take turns by position (case index mod 4), the same for both operands,
so that the kinds meet in one case:

- 0, exact values: every element a small integer times one power of two per case and
  operand, the integers small enough (|m| <= sqrt(2^p / K), p the precision of the
  operands' and the result's types, K the number of terms), and zeros sparse enough, that
  every product and every partial sum of every order is representable: every order,
  every accumulation precision and every precision_config give the exact result, which is
  checked bit for bit (the ``contraction`` bound is 0 there) on every type, bf16 and fp8
  included. Integers: small enough that no sum overflows.
- 1, a probe: small integers times powers of two spread over ``p + 6`` binades per
  element, so that the sum needs more bits than the type has and accumulating at a lower
  precision shows beyond the bound. Integers: as case 0.
- 2, Gaussian values rounded to the type; integers: any bit pattern (products and sums
  wrap).
- 3, the default distribution (±0, ±inf, NaN, subnormals, extremes).

The number of terms comes from :data:`TERM_COUNTS` (op -> function of the signature);
another contraction op (convolution) registers its own there.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import ml_dtypes
import numpy as np

from conformance.core.case import Signature
from conformance.core.numerics import round_to
from conformance.core.types import ElementType, element_type
from conformance.specs import OpSpec

from .values import draw_array

__all__ = ["contraction_values", "TERM_COUNTS", "KINDS"]

#: the kind of each case by position: case index % 4
KINDS = ("exact", "probe", "gaussian", "default")


def _dot_terms(sig: Signature) -> int:
    a = sig.attributes
    shape = sig.input_types[0].shape
    try:
        return int(np.prod([shape[d] for d in a["lhs_contracting_dimensions"]],
                           dtype=np.int64))
    except (IndexError, KeyError, TypeError):
        return 1


#: op -> K (the number of products in one result element) of a signature
TERM_COUNTS: dict[str, Callable[[Signature], int]] = {"dot_general": _dot_terms}


def _precision(et: ElementType) -> int:
    return int(ml_dtypes.finfo(et.component.dtype).nmant) + 1


def _exact_floats(et: ElementType, shape, rng, k: int, p: int, spread: bool) -> np.ndarray:
    batch = shape[0]
    fi = ml_dtypes.finfo(et.dtype)
    n = int(np.prod(shape[1:], dtype=np.int64))
    if spread:
        m = rng.integers(1, 9, (batch, n)) * rng.choice([-1, 1], (batch, n))
        e = rng.integers(-(p + 6), 1, (batch, n))
    else:
        limit = max(1, math.isqrt(max(1, (1 << p) // max(k, 1))))
        m = rng.integers(-limit, limit, (batch, n), endpoint=True)
        # sparse enough that K·limit² terms fit too: zeros where the budget says
        density = min(1.0, (1 << p) / (max(k, 1) * limit * limit))
        m = np.where(rng.random((batch, n)) < density, m, 0)
        e = np.broadcast_to(rng.integers(-3, 4, (batch, 1)), (batch, n))
    # keep products and sums in the normal range of the type
    lo = math.ceil(math.log2(float(fi.smallest_normal)) / 2) + 1
    hi = max(lo, min(4, math.floor((math.log2(float(fi.max)) - 6) / 2)))
    e = np.clip(e, lo, hi)
    return round_to(np.ldexp(m.astype(np.float64), e), et).reshape(shape)


def _small_ints(et: ElementType, shape, rng, k: int) -> np.ndarray:
    bound = max(1, math.isqrt(max(1, min(et.int_max, 1 << 62) // max(k, 1))))
    bound = min(bound, 1 << 20)
    lo = 0 if et.is_unsigned else -bound
    return rng.integers(lo, bound, shape, endpoint=True).astype(np.int64).astype(et.dtype)


def _gaussian(et: ElementType, shape, rng) -> np.ndarray:
    if et.is_integer:
        bits = rng.integers(0, 1 << 63, shape, dtype=np.int64).view(np.uint64)
        from conformance.core.literals import from_bit_patterns
        mask = np.uint64((1 << et.bits) - 1) if et.bits < 64 else np.uint64(2 ** 64 - 1)
        return from_bit_patterns(bits & mask, et).reshape(shape)
    return round_to(rng.standard_normal(shape) * 2.0, et)


def contraction_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                       shape: Sequence[int], rng: np.random.Generator,
                       param: str) -> np.ndarray:
    """One operand of a contraction, shape [batch] + its shape (see the module text)."""
    shape = tuple(shape)
    out = draw_array(et, shape, rng)
    batch = shape[0]
    if batch == 0 or int(np.prod(shape[1:], dtype=np.int64)) == 0 or et.is_boolean:
        return out
    terms = TERM_COUNTS.get(sig.op, lambda s: 16)(sig)
    rows = np.arange(batch) % 4
    rt = sig.result_types[0].element_type if sig.result_types else et

    def part(comp: ElementType, kind: str) -> np.ndarray:
        if comp.is_integer:
            if kind == "gaussian":
                return _gaussian(comp, shape, rng)
            return _small_ints(comp, shape, rng, terms)
        if kind == "gaussian":
            return _gaussian(comp, shape, rng)
        p = _precision(comp)
        if rt.is_float or rt.is_complex:
            p = min(p, _precision(rt.component))
        return _exact_floats(comp, shape, rng, terms, p, spread=(kind == "probe"))

    for r, kind in enumerate(KINDS[:3]):
        sel = rows == r
        if not sel.any():
            continue
        if et.is_complex:
            v = np.empty(shape, et.dtype)
            v.real = part(et.component, kind)
            v.imag = part(et.component, kind)
        else:
            v = part(et, kind)
        out[sel] = v[sel]
    return out
