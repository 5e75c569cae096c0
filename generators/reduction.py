"""Values for reductions: init values that are the body's identity, and exact-value
inputs (generators/values.py ``SIGNATURE_DISTRIBUTIONS``: they see the signature).

- ``identity:REGION``: the init values of a reduction whose body is the region named
  REGION. In three cases of four the body's identity (found by evaluating the body:
  the candidate ``e`` with ``body(e, y) = body(y, e) = y`` for every probe value ``y``,
  jointly over the body's results, so that an arg-max's ``(lowest, largest index)`` is
  found too), random otherwise, so that an init value that is not the identity (whose
  results the tree decides) is drawn on purpose.
- ``exact_sums``: in half of the cases (rows 0, 1, 4, 5, ... of a batch) every element is
  a small integer times one power of two per case, so that every partial sum of every
  tree is representable and a float sum is the same in every order (checked bit for
  bit even on bf16 and fp8, where the rounding bound says nothing); every fourth of those
  cases holds ±1, ±2, ±1/2 and a few ±3 instead, for exact products. Integers are small
  enough that no partial sum overflows. The other cases are the default distribution.

Rows are chosen by position, the same for every input of a case, so that the identity
init values and the exact-value inputs meet in the same cases.
"""
from __future__ import annotations

import functools
import itertools
from typing import Sequence

import ml_dtypes
import numpy as np

from conformance.core.case import Signature
from conformance.core.literals import from_bit_patterns
from conformance.core.types import ElementType, element_type
from conformance.specs import OpSpec

from .values import draw_array, special_values

__all__ = ["identity", "identity_values", "exact_values", "IDENTITY_SHARE"]

#: cases (rows) of a batch whose init values are the identity: row % 4 != 3
IDENTITY_SHARE = 0.75


def _identity_rows(batch: int) -> np.ndarray:
    return np.arange(batch) % 4 != 3


def _exact_rows(batch: int) -> np.ndarray:
    return (np.arange(batch) // 2) % 2 == 0


def _candidates(et: ElementType) -> np.ndarray:
    """Values that are the identity of some common body on ``et``."""
    if et.is_boolean:
        return np.array([False, True])
    if et.is_integer:
        vals = sorted({0, 1, -1 if et.is_signed else et.int_max, et.int_min, et.int_max})
        return np.array(vals, dtype=object).astype(
            np.uint64 if et.name == "ui64" else np.int64).astype(et.dtype)
    if et.is_complex:
        comp = _candidates(et.component)
        finite = [v for v in comp if np.isfinite(np.float64(v))] + [-np.inf, np.inf]
        out = [complex(a, b) for a in comp for b in finite]
        return np.array(out, np.complex128).astype(et.dtype)
    mask = (1 << et.bits) - 1
    total_lowest = from_bit_patterns(np.array([mask], np.uint64), et)          # -NaN, largest payload
    total_highest = from_bit_patterns(np.array([mask >> 1], np.uint64), et)    # +NaN, largest payload
    vals = np.array([-0.0, 0.0, 1.0, -1.0, -np.inf, np.inf], np.float64)
    fi = ml_dtypes.finfo(et.dtype)
    base = np.concatenate([vals, [-float(fi.max), float(fi.max)]]).astype(et.dtype)
    return np.concatenate([base, total_lowest, total_highest])


def _probes(et: ElementType) -> np.ndarray:
    pool = np.concatenate([special_values(et), _candidates(et)])
    if et.is_complex:       # NaN parts: the complex maximum's result is implementation-defined
        with np.errstate(invalid="ignore"):
            w = pool.astype(np.complex128)
        pool = pool[~(np.isnan(w.real) | np.isnan(w.imag))]
    rng = np.random.default_rng(0)
    return np.concatenate([pool, draw_array(et, (16,), rng)])


@functools.lru_cache(maxsize=512)
def identity(text: str) -> tuple[np.ndarray, ...] | None:
    """The identity of a body region (a tuple of 0-d arrays, one per result), or None.

    Searched jointly over the results among a few candidates per type (zeros, one, minus
    one, the extremes, the infinities, the ends of the total order), tested on probe
    values of every type (the special values, the candidates, random ones), paired
    position by position across the results."""
    from conformance.oracles.reduction import components
    from conformance.specs.regions import parse
    region = parse(text)
    n = len(region.arg_types) // 2
    if n == 0 or len(region.arg_types) != 2 * n:
        return None
    types = list(region.arg_types[:n])
    ops = components(text)
    if n > 1 and len(ops) == n and all(op is not None for op in ops):
        # Independent results: one search each.
        found = [identity(f"({t.name}, {t.name}) -> {op}(arg0, arg1)")
                 for t, op in zip(types, ops)]
        return None if any(f is None for f in found) else tuple(f[0] for f in found)
    return _joint_identity(text, types)


def _joint_identity(text: str, types) -> tuple[np.ndarray, ...] | None:
    from conformance.oracles import regions as evaluate_regions
    from conformance.specs.regions import RegionError
    n = len(types)
    cands = [_candidates(t) for t in types]
    probes = [_probes(t) for t in types]
    m = max(len(p) for p in probes)
    probes = [np.resize(p, m) for p in probes]      # cycled to one length
    combos = list(itertools.product(*(range(len(c)) for c in cands)))
    if len(combos) > 4096:
        return None
    e = [np.repeat(c[[combo[k] for combo in combos]], m) for k, c in enumerate(cands)]
    y = [np.tile(p, len(combos)) for p in probes]
    try:
        with np.errstate(all="ignore"):
            left = evaluate_regions.evaluate(text, e + y)
            right = evaluate_regions.evaluate(text, y + e)
    except (RegionError, ValueError, TypeError):
        return None
    if len(left) != n or len(right) != n:
        return None       # a body of another result count (an invalid program's) has none
    ok = np.ones(len(combos) * m, bool)
    for k in range(n):
        for r in (left, right):
            ok &= ~_differ(np.asarray(r[k]), y[k])
    ok = ok.reshape(len(combos), m).all(axis=1)
    if not ok.any():
        return None
    best = combos[int(np.argmax(ok))]
    return tuple(np.array(cands[k][best[k]]) for k in range(n))


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b).astype(np.asarray(a).dtype)
    size = a.dtype.itemsize
    ab = np.ascontiguousarray(a).view(np.uint8).reshape(-1, size)
    bb = np.ascontiguousarray(b).view(np.uint8).reshape(-1, size)
    differ = (ab != bb).any(axis=1)
    et = element_type(a.dtype)
    if et.is_float or et.is_complex:
        with np.errstate(invalid="ignore"):
            wa = a.astype(np.complex128 if et.is_complex else np.float64)
            wb = b.astype(np.complex128 if et.is_complex else np.float64)
        differ &= ~(np.isnan(wa) & np.isnan(wb)).reshape(-1)
    return differ


def _region_text(spec: OpSpec, sig: Signature, name: str) -> str | None:
    for r, text in zip(spec.regions, sig.regions):
        if r.name == name:
            return text
    return None


def identity_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                    shape: Sequence[int], rng: np.random.Generator, param: str) -> np.ndarray:
    """Init value ``k`` of a reduction over the region ``param``: its identity in the
    cases of :func:`_identity_rows`, the default distribution otherwise."""
    out = draw_array(et, shape, rng)
    text = _region_text(spec, sig, param)
    ident = identity(text) if text else None
    if ident is None or k >= len(ident):
        return out
    ident = list(ident)
    if np.asarray(ident[k]).dtype != et.dtype:
        ident[k] = _narrowed_identity(np.asarray(ident[k]), et)
        if ident[k] is None:
            return out
    rows = _identity_rows(shape[0])
    out[rows] = ident[k]
    return out


def _narrowed_identity(e: np.ndarray, et: ElementType) -> np.ndarray | None:
    """The identity ``e`` of a body that computes in a wider type (the newer spec's
    promotable body, stablehlo-spec-2026-08.md "### reduce" C6) as an init value of the
    inputs' type ``et``: ``e`` itself where ``et`` holds it (-inf, +-0, 1), an integer one
    saturated to ``et``'s range (the extreme of ``et`` is the identity of maximum/minimum,
    and all ones that of and, on every value converted from ``et``), otherwise None."""
    src = element_type(e.dtype)
    if src.is_integer and et.is_integer:
        v = int(e)
        return np.asarray(min(max(v, et.int_min), et.int_max)).astype(et.dtype)
    if (src.is_float and et.is_float) or (src.is_complex and et.is_complex):
        with np.errstate(all="ignore"):
            narrowed = e.astype(et.dtype)
        back = narrowed.astype(e.dtype)
        if np.array_equal(back, e) and np.array_equal(np.signbit(np.real(back)),
                                                      np.signbit(np.real(e))):
            return narrowed
    return None


def _exact_floats(et: ElementType, shape, rng, per_case: int, product: np.ndarray):
    fi = ml_dtypes.finfo(et.dtype)
    p = int(fi.nmant) + 1
    batch = shape[0]
    inner = (batch, per_case)
    bound = max(1, (1 << p) // max(per_case, 1))
    m = rng.integers(-bound, bound, inner, endpoint=True).astype(np.float64)
    m[rng.random(inner) < 0.3] = 0.0
    # product-friendly cases: ±1, ±2, ±1/2, and now and then ±3
    pm = rng.choice(np.array([1.0, 1.0, 1.0, 2.0, 0.5, 3.0]), inner)
    pm *= np.where(rng.random(inner) < 0.5, -1.0, 1.0)
    m = np.where(product[:, None], pm, m)
    # one power of two per case: mostly 1, now and then anywhere in the normal range,
    # and at the subnormal quantum (multiples of the smallest subnormal stay exact)
    lo = int(fi.minexp) - (p - 1)
    hi = max(lo, int(fi.maxexp) - p - int(np.ceil(np.log2(max(per_case, 1)))) - 2)
    scale = np.where(rng.random(batch) < 0.7, 0,
                     rng.integers(lo, hi, batch, endpoint=True))
    scale = np.where(rng.random(batch) < 0.1, lo, scale)
    values = np.ldexp(m, scale[:, None].astype(np.int64))
    return values.astype(et.dtype).reshape(shape)


def exact_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                 shape: Sequence[int], rng: np.random.Generator, param: str) -> np.ndarray:
    """Inputs of a reduction: exact-value cases in :func:`_exact_rows`, the default
    distribution in the others."""
    out = draw_array(et, shape, rng)
    batch = shape[0]
    per_case = int(np.prod(shape[1:], dtype=np.int64))
    rows = _exact_rows(batch)
    if not rows.any() or per_case == 0 or et.is_boolean:
        return out
    product = (np.arange(batch) % 8) == 4
    if et.is_float:
        exact = _exact_floats(et, shape, rng, per_case, product)
    elif et.is_complex:
        exact = np.empty(shape, et.dtype)
        exact.real = _exact_floats(et.component, shape, rng, per_case, product)
        exact.imag = _exact_floats(et.component, shape, rng, per_case, product)
    else:
        bound = max(1, min(et.int_max, 1 << 62) // max(per_case, 1))
        lo = 0 if et.is_unsigned else -bound
        v = rng.integers(lo, bound, (batch, per_case), endpoint=True)
        pv = rng.choice(np.array([1, 1, 1, 2, 0] + ([] if et.is_unsigned else [-1, -1, -1])),
                        (batch, per_case))
        v = np.where(product[:, None], pv, v)
        exact = v.astype(np.int64).astype(et.dtype).reshape(shape)
    out[rows] = exact[rows]
    return out
