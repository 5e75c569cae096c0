"""Values for ``rng_bit_generator`` and ``rng`` (generators/values.py
``SIGNATURE_DISTRIBUTIONS``: they see the signature).

- ``rng_state``: initial states, one kind per row (``row % 8``): 0-3 random words, 4 all
  zero, 5 all ones, 6 a small counter (``[row, row + 1, ...]``), 7 the spec example's
  ``[1, 2(, 3)]``; rows ``row % 8 == 2`` are the row before with one word's lowest bit
  flipped (word ``(row // 8) % n``: states that differ in one word only, for
  ``rng_distinct_states_distinct_outputs``); and every fourth row (``row % 4 == 3``, from row 3 on) repeats the state
  of row ``row // 2``, so that ``rng_state_determines_output`` sees the same state twice
  in a batch.
- ``rng_shape``: ``rng``'s ``shape`` operand, equal to shape(result) (C3 by construction).
- ``rng_params``: ``rng``'s ``a`` and ``b``, drawn as a pair per row (``a``'s draw makes
  both and hands ``b`` over): intervals of every width for UNIFORM, means and deviations for
  NORMAL, and on purpose the undefined ones (a >= b, b < 0) in rows ``row % 12 == 11``
  (and ``a == b`` in rows ``row % 12 == 10`` for UNIFORM).

An invalid signature (a negative test) whose types do not fit gets the default values.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.case import Signature
from conformance.core.types import ElementType
from conformance.specs import OpSpec

from .values import draw_array

__all__ = ["state_values", "shape_values", "param_values"]


def state_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                 shape, rng: np.random.Generator, param: str) -> np.ndarray:
    if et.name != "ui64" or len(shape) != 2:
        return draw_array(et, shape, rng)
    batch, n = shape
    out = rng.integers(0, 2**64, size=shape, dtype=np.uint64, endpoint=False)
    for r in range(batch):
        kind = r % 8
        if kind == 4:
            out[r] = 0
        elif kind == 5:
            out[r] = np.uint64(2**64 - 1)
        elif kind == 6:
            out[r] = np.arange(r, r + n, dtype=np.uint64)
        elif kind == 7:
            out[r] = np.arange(1, n + 1, dtype=np.uint64)
    for r in range(1, batch):
        if r % 8 == 2:              # the row before with one word changed: the first
            out[r] = out[r - 1]
            out[r, (r // 8) % n] ^= np.uint64(1)
    for r in range(3, batch, 4):
        out[r] = out[r // 2]
    return out


def shape_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                 shape, rng: np.random.Generator, param: str) -> np.ndarray:
    dims = sig.result_types[0].shape if sig.result_types else ()
    if et.name != "si64" or len(shape) != 2 or shape[1] != len(dims):
        return draw_array(et, shape, rng)
    return np.broadcast_to(np.asarray(dims, np.int64), shape).copy()


def param_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                 shape, rng: np.random.Generator,
                 param: str) -> "np.ndarray | dict[int, np.ndarray]":
    """rng's ``a`` and ``b``: drawn as a pair per row when ``a`` is drawn, both returned
    (``{0: a, 1: b}``: generators/values.py hands ``b`` over within the same call); ``b``
    drawn alone is a fresh pair's ``b``. A function of its arguments only."""
    if len(shape) != 1 or len(sig.input_types) < 2 or \
            sig.input_types[0].element_type != sig.input_types[1].element_type or \
            sig.input_types[index].element_type != et:
        return draw_array(et, shape, rng)
    a, b = _pairs(et, shape[0], rng, sig.attributes.get("rng_distribution", "UNIFORM"))
    if index == 0:
        return {0: a, 1: b}
    return b


def _pairs(et: ElementType, batch: int, rng: np.random.Generator,
           distribution: str) -> tuple[np.ndarray, np.ndarray]:
    a = np.zeros(batch, et.dtype)
    b = np.zeros(batch, et.dtype)
    for r in range(batch):
        x, y = (_bool_pair if et.is_boolean else _int_pair if et.is_integer
                else _normal_pair if distribution == "NORMAL" else _float_pair)(et, r % 12, rng)
        a[r], b[r] = x, y
    return a, b


def _bool_pair(et, kind, rng):
    return (False, True) if kind < 10 else (True, True) if kind == 10 else (True, False)


def _int_pair(et, kind, rng):
    lo, hi = int(et.int_min), int(et.int_max)

    def clip(v):
        return min(max(int(v), lo), hi)
    if kind == 10:
        v = clip(rng.integers(-5, 6))
        return v, v
    if kind == 11:
        x = clip(rng.integers(0, 8))
        return x, clip(x - 1 - rng.integers(0, 4)) if x - 1 >= lo else lo
    pairs = [(0, 2), (0, 10), (-5, 5), (lo, hi), (0, hi), (lo, 0), (7, 8), (-100, 100),
             (0, 256), (lo // 2, hi // 2)]
    x, y = pairs[kind]
    x, y = clip(x), clip(y)
    return (x, y) if x < y else (0, 1)


def _float_pair(et, kind, rng):
    fi = ml_dtypes.finfo(et.dtype)
    big = float(fi.max)
    if kind == 10:
        v = float(rng.uniform(-4, 4))
        return _round(v, et), _round(v, et)
    if kind == 11:
        return _round(1.0, et), _round(-1.0, et)
    pairs = [(0.0, 1.0), (-1.0, 1.0), (5.0, 5.0625), (-1000.0, 1000.0), (1e-3, 2e-3),
             (-big / 2, big / 2), (0.0, 1.0), (-3.0, 7.5), (100.0, 164.0), (-big, big)]
    x, y = pairs[kind]
    x, y = _round(x, et), _round(min(y, big), et)
    if not x < y:
        x, y = _round(0.0, et), _round(1.0, et)
    if kind == 4 and rng.integers(0, 2):
        # one representable value: [x, the next value up) (x > 0); by the bit pattern in
        # the storage unit (a byte for the 4- and 6-bit formats: bits // 8 would be 0)
        y = (np.asarray(x, et.dtype).view(f"u{et.dtype.itemsize}") + 1).view(et.dtype)
    return x, y


def _normal_pair(et, kind, rng):
    if kind == 11:
        return _round(0.0, et), _round(-1.0, et)
    pairs = [(0.0, 1.0), (5.0, 2.0), (-3.0, 0.5), (100.0, 10.0), (0.0, 1e-3), (2.0, 0.0),
             (0.0, 1.0), (-50.0, 4.0), (1.0, 0.25), (0.0, 16.0), (0.0, 1.0)]
    x, y = pairs[kind]
    return _round(x, et), _round(y, et)


def _round(v: float, et: ElementType):
    fi = ml_dtypes.finfo(et.dtype)
    return np.asarray(np.clip(v, -float(fi.max), float(fi.max))).astype(et.dtype)


#: rng_bernoulli's means by row (row % 12): the certain ones (0, 1), the usual ones, the
#: extremes of f32 in (0, 1), a random one; row 11 is no probability (undefined, masked)
_MEANS = [0.0, 1.0, 0.5, 0.1, 0.9, 1e-3, 0.999, 2.0 ** -24, 1.0 - 2.0 ** -24, None, 0.25]
_NOT_PROBABILITIES = [-0.5, 1.5, float("nan"), -0.0, float("inf")]


def mean_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                shape, rng: np.random.Generator, param: str) -> np.ndarray:
    """rng_bernoulli's ``mean``, one per row (see :data:`_MEANS`); -0.0 is a probability
    (= 0) but is drawn among the odd ones to see that a backend reads it as 0."""
    if len(shape) != 1 or et.name != "f32":
        return draw_array(et, shape, rng)
    out = np.zeros(shape, np.float32)
    for r in range(shape[0]):
        kind = r % 12
        if kind == 11:
            v = _NOT_PROBABILITIES[(r // 12) % len(_NOT_PROBABILITIES)]
        else:
            v = _MEANS[kind]
            if v is None:
                v = float(rng.uniform(0, 1))
        out[r] = np.float32(v)
    return out
