"""Oracles of the ``rng`` family: ``rng_bit_generator`` and ``rng``.

The spec fixes no value of either op, so these give the result types, with values the
spec allows; the ``property`` verdicts (conformance/checking/verdicts/rng.py) judge the rest.

- ``rng_bit_generator``: the conventional values, XLA's variants computed bit for bit
  (vectorised numpy on uint32 words): THREE_FRY is Threefry-2x32 (20 rounds, Salmon et al.
  2011) keyed by ``initial_state[0]`` (low word first) on a 64-bit counter
  ``initial_state[1] + i`` (i the row-major index of an output element, or of a 64-bit pair
  of 32-bit outputs split along a dimension, as XLA's prng.cc ``SplitShapeIntoHalves``
  does); PHILOX is Philox-4x32 (10 rounds) keyed by ``initial_state[0]`` on the 128-bit
  counter ``initial_state[1]`` + 2^64·``initial_state[2]`` (for a 2-word state the key word
  doubles as the high word) plus i, four 32-bit (two 64-bit) outputs per counter; DEFAULT
  is PHILOX (what XLA CPU picks). Outputs of 8 and 16 bits are the low bits of the 32-bit
  stream of the same shape, si4/ui4 its low 4 bits; floating-point outputs are those bits. ``output_state`` advances the counter
  word by the number of counters used. A test checks these against XLA bit for bit.
- ``rng``: ``a`` everywhere (a value in [a, b) for UNIFORM when a < b, the mean for
  NORMAL).

Conditions for the spec's rules: ``rng_uniform_undefined`` (UNIFORM with a >= b or a NaN
bound) and ``rng_normal_undefined`` (NORMAL with b < 0 or a non-finite parameter).
"""
from __future__ import annotations

import numpy as np

from conformance.core.numerics import round_to

from conformance.core.types import TensorType, element_type
from conformance.specs.expressions import condition

from .registry import register

__all__ = ["threefry2x32", "philox4x32", "bits_for"]

_M32 = np.uint64(0xFFFFFFFF)


def _u32(x) -> np.ndarray:
    return np.asarray(x, np.uint64) & _M32


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


def threefry2x32(key: tuple[int, int], x0: np.ndarray, x1: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds (Random123), on uint32 words held in uint64 arrays."""
    k0, k1 = _u32(key[0]), _u32(key[1])
    k2 = _u32(np.uint64(0x1BD11BDA) ^ k0 ^ k1)
    ks = [k0, k1, k2]
    rot = [[13, 15, 26, 6], [17, 29, 16, 24]]
    x0 = _u32(_u32(x0) + ks[0])
    x1 = _u32(_u32(x1) + ks[1])
    for i in range(5):
        for r in rot[i % 2]:
            x0 = _u32(x0 + x1)
            x1 = _rotl(x1, r) ^ x0
        x0 = _u32(x0 + ks[(i + 1) % 3])
        x1 = _u32(x1 + ks[(i + 2) % 3] + np.uint64(i + 1))
    return x0, x1


def _mulhilo(a: int, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.uint64(a) * b            # < 2^64: both factors < 2^32
    return p >> np.uint64(32), p & _M32


def philox4x32(key: tuple[int, int], c: list[np.ndarray]) -> list[np.ndarray]:
    """Philox-4x32 with 10 rounds (Random123), on uint32 words held in uint64 arrays."""
    k0, k1 = _u32(key[0]), _u32(key[1])
    c = [_u32(w) for w in c]
    for i in range(10):
        if i:
            k0 = _u32(k0 + np.uint64(0x9E3779B9))
            k1 = _u32(k1 + np.uint64(0xBB67AE85))
        hi0, lo0 = _mulhilo(0xD2511F53, c[0])
        hi1, lo1 = _mulhilo(0xCD9E8D57, c[2])
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return c


def _words(v: int) -> tuple[int, int]:
    return int(v) & 0xFFFFFFFF, (int(v) >> 32) & 0xFFFFFFFF


def _halves(shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """XLA's SplitShapeIntoHalves: the half shape of 64-bit pairs and the split dimension
    (the first even one, else the largest)."""
    if not shape:
        return (1,), -1
    split = next((i for i, d in enumerate(shape) if d % 2 == 0), None)
    if split is None:
        split = max(range(len(shape)), key=lambda i: (shape[i], -i))
    half = list(shape)
    half[split] = -(-shape[split] // 2)
    return tuple(half), split


def _combine(lo: np.ndarray, hi: np.ndarray, shape: tuple[int, ...], split: int) -> np.ndarray:
    """XLA's CombineShapePair: the two halves concatenated along a new axis after
    ``split``, reshaped to the shape rounded up to even there, and sliced."""
    if split < 0:
        return lo.reshape(-1)[:1].reshape(())
    half = list(shape)
    half[split] = -(-shape[split] // 2)
    both = np.stack([lo.reshape(half), hi.reshape(half)], axis=split + 1)
    full = list(shape)
    full[split] = half[split] * 2
    out = both.reshape(full)
    return out[tuple(slice(0, d) for d in shape)]


def _threefry_bits(state: np.ndarray, shape: tuple[int, ...], bits: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    key = _words(state[0])
    counter = int(state[1])
    if bits == 64:
        n = int(np.prod(shape, dtype=np.int64))
        with np.errstate(over="ignore"):
            ctr = (np.uint64(counter) + np.arange(n, dtype=np.uint64))
        y0, y1 = threefry2x32(key, ctr & _M32, ctr >> np.uint64(32))
        out = ((y1 << np.uint64(32)) | y0).reshape(shape)
    else:
        half, split = _halves(shape)
        n = int(np.prod(half, dtype=np.int64))
        with np.errstate(over="ignore"):
            ctr = (np.uint64(counter) + np.arange(n, dtype=np.uint64))
        y0, y1 = threefry2x32(key, ctr & _M32, ctr >> np.uint64(32))
        out = _combine(y0, y1, shape, split)
    new = state.copy()
    new[1] = np.uint64((counter + n) % 2**64)
    return out, new


def _philox_bits(state: np.ndarray, shape: tuple[int, ...], bits: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    key = _words(state[0])
    lo = int(state[1])
    # XLA: a 2-word state's counter is [initial_state[1], initial_state[0]] (the key word
    # doubles as the counter's high word); a 3-word one's [initial_state[1], initial_state[2]]
    hi = int(state[2]) if state.size > 2 else int(state[0])
    n_out = int(np.prod(shape, dtype=np.int64))
    per = 2 if bits == 64 else 4
    n = -(-n_out // per)
    with np.errstate(over="ignore"):
        ctr_lo = np.uint64(lo) + np.arange(n, dtype=np.uint64)        # wraps mod 2^64
        ctr_hi = np.uint64(hi) + (ctr_lo < np.uint64(lo)).astype(np.uint64)
    y = philox4x32(key, [ctr_lo & _M32, ctr_lo >> np.uint64(32),
                         ctr_hi & _M32, ctr_hi >> np.uint64(32)])
    if bits == 64:
        a = (y[1] << np.uint64(32)) | y[0]
        b = (y[3] << np.uint64(32)) | y[2]
        flat = np.stack([a, b], axis=1).reshape(-1)
    else:
        flat = np.stack(y, axis=1).reshape(-1)
    out = flat[:n_out].reshape(shape)
    total = (hi << 64 | lo) + n
    new = state.copy()
    new[1] = np.uint64(total & (2**64 - 1))
    if state.size > 2:
        new[2] = np.uint64((total >> 64) & (2**64 - 1))
    return out, new


def bits_for(algorithm: str, state: np.ndarray, result: TensorType
             ) -> tuple[np.ndarray, np.ndarray]:
    """(output_state, output) of XLA's variant of ``algorithm`` (DEFAULT: PHILOX)."""
    state = np.asarray(state, np.uint64).reshape(-1)
    et = result.element_type
    width = 64 if et.bits == 64 else 32
    if algorithm == "THREE_FRY" and state.size == 2:
        out, new = _threefry_bits(state, result.shape, width)
    elif algorithm in ("PHILOX", "DEFAULT") and state.size in (2, 3):
        out, new = _philox_bits(state, result.shape, width)
    else:
        # no conventional value (a state size XLA has no variant for): zeros of the type
        return state.copy(), np.zeros(result.shape, et.dtype)
    unsigned = np.dtype(f"u{et.dtype.itemsize}") if et.bits >= 8 else np.dtype(np.uint8)
    out = out.astype(np.uint64)
    if et.bits < 8:
        out = out & np.uint64((1 << et.bits) - 1)
        bits = out.astype(np.uint8)
        if et.is_float:
            # f4E2M1FN, f6E2M3FN, f6E3M2FN: the bits are the value's encoding (a byte in
            # memory, the low bits), not an integer to convert (which saturated to 6)
            value = bits.view(et.dtype)
        elif et.is_signed:
            value = np.where(bits >= 1 << (et.bits - 1), bits.astype(np.int16) - (1 << et.bits),
                             bits.astype(np.int16)).astype(et.dtype)
        else:
            value = bits.astype(et.dtype)
        return new, value.reshape(result.shape)
    return new, out.astype(unsigned).view(et.dtype).reshape(result.shape)


@register("rng_bit_generator")
def _rng_bit_generator(inputs, attrs, result_types):
    (state,) = inputs
    state_type, out_type = result_types
    new, out = bits_for(attrs.get("rng_algorithm", "DEFAULT"), state, out_type)
    if new.shape != state_type.shape or new.dtype != state_type.element_type.dtype:
        new = np.zeros(state_type.shape, state_type.element_type.dtype)
    return new, out


@register("rng")
def _rng(inputs, attrs, result_types):
    """A draw from the distribution the spec names, as conventional values: the spec
    fixes no value (rng "may be nondeterministic"), so the verdict is by properties;
    but the numpy backend (the oracle itself, the suite's self-check) must meet them,
    so the values are a real sample: a numpy generator seeded by the case's own inputs
    (same inputs, same values), UNIFORM in [a, b) rounded to the type and kept below b,
    NORMAL with mean a and deviation b. Where a >= b (UNIFORM) or b < 0 (NORMAL) the
    spec says nothing (masked): a everywhere."""
    import zlib
    a = np.asarray(inputs[0]).reshape(())
    b = np.asarray(inputs[1]).reshape(()) if len(inputs) > 1 else a
    (t,) = result_types
    et = t.element_type
    seed = zlib.crc32(b"".join(np.ascontiguousarray(np.asarray(x)).tobytes() for x in inputs)
                      + repr(tuple(t.shape)).encode())
    gen = np.random.default_rng(seed)
    normal = attrs.get("rng_distribution") == "NORMAL"
    if et.is_boolean or et.is_integer:
        lo, hi = int(a), int(b)
        if normal or hi <= lo:
            return np.full(t.shape, a, et.dtype)
        # (an offset from lo in uint64: [lo, hi) may span more than int64 holds)
        off = gen.integers(0, hi - lo, size=t.shape, endpoint=False, dtype=np.uint64)
        return (np.uint64(lo % (1 << 64)) + off).astype(et.dtype)
    lo, hi = float(a.astype(np.float64)), float(b.astype(np.float64))
    if normal:
        if not (hi >= 0) or not np.isfinite(lo) or not np.isfinite(hi):
            return np.full(t.shape, a, et.dtype)
        return round_to(gen.normal(lo, hi, size=t.shape), et).astype(et.dtype)
    if not (hi > lo) or not np.isfinite(hi - lo):
        return np.full(t.shape, a, et.dtype)
    v = round_to(lo + (hi - lo) * gen.random(size=t.shape), et).astype(et.dtype)
    below = np.asarray(b, et.dtype)
    return np.where(v.astype(np.float64) < hi, v, np.asarray(a, et.dtype)).astype(et.dtype) \
        if below.size else v


def _wide(x) -> np.ndarray:
    """Integers and booleans as they are (compared in their own type), floats in float64."""
    x = np.asarray(x)
    et = element_type(x.dtype)
    if et.is_float:
        return x.astype(np.float64)
    return x.astype(np.int8) if et.bits < 8 and not et.is_boolean else x


def _to_result(mask: np.ndarray, result) -> np.ndarray:
    shape = np.shape(result)
    mask = np.asarray(mask, bool).reshape(mask.shape + (1,) * (len(shape) - np.ndim(mask)))
    return np.broadcast_to(mask, shape)


@condition("rng_uniform_undefined")
def _uniform_undefined(a, b, distribution, result):
    if distribution != "UNIFORM":
        return np.zeros(np.shape(result), bool)
    wa, wb = _wide(a), _wide(b)
    with np.errstate(invalid="ignore"):
        bad = ~np.asarray(wa < wb, bool)
    return _to_result(np.asarray(bad, bool), result)


@condition("rng_normal_undefined")
def _normal_undefined(a, b, distribution, result):
    if distribution != "NORMAL":
        return np.zeros(np.shape(result), bool)
    wa, wb = _wide(a), _wide(b)
    with np.errstate(invalid="ignore"):
        bad = ~(wb >= 0) | ~np.isfinite(wa) | ~np.isfinite(wb)
    return _to_result(bad, result)


@register("rng_bernoulli")
def _rng_bernoulli(inputs, attrs, result_types):
    """A real B(1, mean) sample as conventional values, as the canonical program draws
    it: a uniform u on [0, 1) (a numpy generator seeded by the case's inputs and shape,
    rounded down to f32) and 1 where u < mean. A mean outside [0, 1] (masked: the text
    says nothing) gives what the same comparison gives (all 0 below, all 1 above, NaN
    all 0)."""
    import zlib
    mean = np.asarray(inputs[0]).reshape(()).astype(np.float32)
    (t,) = result_types
    seed = zlib.crc32(np.ascontiguousarray(mean).tobytes() + repr(tuple(t.shape)).encode())
    u = np.random.default_rng(seed).random(size=t.shape)
    # the largest f32 not above u (so that u stays in [0, 1) at f32)
    u32 = u.astype(np.float32)
    u32 = np.where(u32.astype(np.float64) > u, np.nextafter(u32, np.float32(0)), u32)
    with np.errstate(invalid="ignore"):
        return (u32 < mean).astype(t.element_type.dtype)


def _mean_of(mean, result) -> np.ndarray:
    return np.asarray(mean, np.float64).reshape(np.shape(mean) + (1,) * (
        len(np.shape(result)) - np.ndim(mean)))


@condition("rng_bernoulli_undefined")
def _bernoulli_undefined(mean, result):
    """A mean that is no probability: outside [0, 1], or NaN (-0 is 0)."""
    with np.errstate(invalid="ignore"):
        bad = ~((_mean_of(mean, result) >= 0) & (_mean_of(mean, result) <= 1))
    return np.broadcast_to(bad, np.shape(result))


@condition("rng_bernoulli_random")
def _bernoulli_random(mean, result):
    """Elements whose value B(1, mean) leaves open: 0 < mean < 1."""
    m = _mean_of(mean, result)
    with np.errstate(invalid="ignore"):
        return np.broadcast_to((m > 0) & (m < 1), np.shape(result))
