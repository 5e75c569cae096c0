"""Input values, drawn vectorised with numpy: special values mixed with ordinary ones.

Hypothesis chooses structure (signatures, seeds); numpy fills the arrays, a whole
batch of cases at a time. Every element independently comes from one of a few
sources: the type's special values (±0, ±inf, NaN, subnormals, min/max finite,
integer extremes), random bit patterns, moderate values, log-uniform magnitudes.
Op-specific distributions (shift amounts, exponents, small multiplicands) are
named in the spec YAML (``values:`` on an input) and defined here.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Sequence

import ml_dtypes
import numpy as np

from conformance.core.case import Signature
from conformance.core.literals import from_bit_patterns
from conformance.core.numerics import round_to
from conformance.specs import OpSpec, load_spec
from conformance.core.types import ElementType, TensorType, element_type

SPECIAL_SHARE = 0.25


@functools.lru_cache(maxsize=None)
def special_values(et: ElementType) -> np.ndarray:
    """The values of ``et`` that most often expose bugs, as a 1-D array of ``et``."""
    if et.is_boolean:
        return np.array([False, True])
    if et.is_quantized:
        # the storage range's ends, the zero points and their neighbours
        st = getattr(et, "storage", et)
        lo, hi = sorted((et.int_min, et.int_max))
        lo, hi = max(lo, st.int_min), min(hi, st.int_max)
        vals = {lo, hi, lo + 1, hi - 1, 0}
        for z in getattr(et, "zero_points", ()):
            vals |= {z - 1, z, z + 1}
        vals = sorted(v for v in vals if lo <= v <= hi)
        return np.array(vals, np.int64).astype(et.dtype)
    if et.is_integer:
        lo, hi = et.int_min, et.int_max
        vals = {0, 1, lo, hi, lo + 1, hi - 1, 2, et.bits - 1, et.bits, 1 << (et.bits // 2)}
        if et.is_signed:
            vals |= {-1, -2, -(et.bits - 1)}
        vals = sorted(v for v in vals if lo <= v <= hi)
        return np.array(vals, dtype=object).astype(
            np.uint64 if et.name == "ui64" else np.int64).astype(et.dtype)
    if et.is_complex:
        comp = special_values(et.component)
        re, im = np.meshgrid(comp, comp)
        out = np.empty(re.size, et.dtype)
        out.real, out.imag = re.reshape(-1), im.reshape(-1)
        return out
    fi = ml_dtypes.finfo(et.dtype)
    tiny, big = float(fi.smallest_normal), float(fi.max)
    sub = float(fi.smallest_subnormal)
    base = [0.0, 1.0, 0.5, 2.0, 3.0, sub, tiny - sub, tiny, big, 1.0 + float(fi.eps),
            1.0 - float(fi.epsneg), np.pi, np.log(big), 0.49999999999999994, 1.5, 2.5]
    vals = base + [-v for v in base] + [np.inf, -np.inf, np.nan, -np.nan]
    out = round_to(np.array(vals, np.float64), et)
    # A quiet NaN with a payload, and (where the format has room) a signalling NaN.
    if et.bits >= 16:
        exp_mask = (1 << (et.bits - 1)) - (1 << (fi.nmant))
        payloads = [exp_mask | 1, exp_mask | (1 << (fi.nmant - 1)) | 5]
        out = np.concatenate([out, from_bit_patterns(np.array(payloads, np.uint64), et)])
    return out


# ---------------------------------------------------------------------------
# Sources: each fills n elements of a type.
# ---------------------------------------------------------------------------

def _random_bits(et: ElementType, n: int, rng: np.random.Generator) -> np.ndarray:
    if et.is_boolean:
        return rng.integers(0, 2, n).astype(bool)
    if et.is_complex:
        out = np.empty(n, et.dtype)
        out.real = _random_bits(et.component, n, rng)
        out.imag = _random_bits(et.component, n, rng)
        return out
    bits = rng.integers(0, 1 << min(et.bits, 63), n, dtype=np.uint64, endpoint=False)
    if et.bits == 64:
        bits |= rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63)
    return from_bit_patterns(bits, et)


def _small(et: ElementType, n: int, rng: np.random.Generator, limit: int = 16) -> np.ndarray:
    if et.is_boolean:
        return rng.integers(0, 2, n).astype(bool)
    if et.is_integer:
        lo, hi = max(et.int_min, -limit), min(et.int_max, limit)
        return rng.integers(lo, hi, n, endpoint=True).astype(et.dtype)
    if et.is_complex:
        out = np.empty(n, et.dtype)
        out.real = _small(et.component, n, rng, limit)
        out.imag = _small(et.component, n, rng, limit)
        return out
    return round_to(_signed_as(et, rng.uniform(-8.0, 8.0, n)), et)


def _signed_as(et: ElementType, x: np.ndarray) -> np.ndarray:
    """``x``, made non-negative for a format without a sign (f8E8M0FNU), whose negative
    values would all be its NaN."""
    return x if et.has_sign else np.abs(x)


def _log_uniform(et: ElementType, n: int, rng: np.random.Generator) -> np.ndarray:
    """Finite floats of every magnitude the type has, random sign."""
    if not et.is_float:
        return _random_bits(et, n, rng)
    lo, hi, top = _log_range(et)
    mag = np.exp2(rng.uniform(lo, hi, n))
    sign = np.where(rng.integers(0, 2, n) == 1, -1.0, 1.0)
    return round_to(_signed_as(et, np.minimum(mag, top) * sign), et)


@functools.lru_cache(maxsize=None)
def _log_range(et: ElementType) -> tuple[float, float, float]:
    """log2 of the smallest subnormal and of the largest finite value of a float type,
    and that largest value (the same numbers on every call: computed once)."""
    fi = ml_dtypes.finfo(et.dtype)
    return (np.log2(float(fi.smallest_subnormal)), np.log2(float(fi.max)), float(fi.max))


def _specials(et: ElementType, n: int, rng: np.random.Generator) -> np.ndarray:
    pool = special_values(et)
    return pool[rng.integers(0, len(pool), n)]


def _ints_in(lo: int, hi: int) -> Callable:
    def source(et: ElementType, n: int, rng: np.random.Generator) -> np.ndarray:
        a, b = max(et.int_min, lo), min(et.int_max, hi)
        return rng.integers(a, b, n, endpoint=True).astype(et.dtype)
    return source


Source = Callable[[ElementType, int, np.random.Generator], np.ndarray]


def _storage(et: ElementType, n: int, rng: np.random.Generator) -> np.ndarray:
    """Storage values of a quantized type, uniform in [storage_min, storage_max]."""
    # (an invalid type's range may be empty or inverted: its storage type's range then)
    lo, hi = sorted((et.int_min, et.int_max))
    st = getattr(et, "storage", et)
    lo, hi = max(lo, st.int_min), min(hi, st.int_max)
    return rng.integers(lo, hi, n, endpoint=True).astype(et.dtype)


def _default_sources(et: ElementType) -> list[tuple[float, Source]]:
    if et.is_quantized:
        return [(SPECIAL_SHARE, _specials), (1.0 - SPECIAL_SHARE, _storage)]
    if et.is_float or et.is_complex:
        return [(SPECIAL_SHARE, _specials), (0.30, _small), (0.25, _random_bits),
                (0.20, _log_uniform)]
    return [(SPECIAL_SHARE, _specials), (0.40, _small), (0.35, _random_bits)]


def _shift_amount(et: ElementType) -> list[tuple[float, Source]]:
    if not et.is_integer:
        return _default_sources(et)
    return [(0.6, _ints_in(0, et.bits - 1)), (0.15, _ints_in(et.bits, et.bits + 2)),
            (0.25, _random_bits)]


def _exponent(et: ElementType) -> list[tuple[float, Source]]:
    if et.is_integer:
        return [(0.6, _ints_in(-2, et.bits + 1)), (0.15, _specials), (0.25, _random_bits)]
    return [(0.35, lambda e, n, r: _small(e, n, r, 4)), *_default_sources(et)]


def _multiplicand(et: ElementType) -> list[tuple[float, Source]]:
    if not et.is_integer:
        return _default_sources(et)
    half = 1 << max(1, et.bits // 2 - 1)
    return [(0.5, _ints_in(-half, half)), *_default_sources(et)]


def _index(et: ElementType) -> list[tuple[float, Source]]:
    """Start indices (dynamic_slice, dynamic_update_slice): mostly within the small
    dimensions generated shapes have, and on purpose out of range on both sides
    (negative, past the end) and at the type's extremes, so that clamping is exercised."""
    if not et.is_integer:
        return _default_sources(et)
    if et.is_unsigned:      # never negative; the extremes are past the end
        return [(0.55, _ints_in(0, 4)), (0.2, _ints_in(5, 20)), (0.25, _specials)]
    return [(0.45, _ints_in(0, 4)), (0.15, _ints_in(-4, -1)), (0.2, _ints_in(5, 20)),
            (0.2, _specials)]


def _repeated(et: ElementType) -> list[tuple[float, Source]]:
    """Sort keys: equal elements are common (half the elements come from a pool of three
    values, itself drawn from the default sources: ±0, NaNs with payloads, extremes...),
    so that ties, stability and tie-breaking keys are exercised on every type."""
    defaults = _default_sources(et)

    def pooled(e: ElementType, n: int, rng: np.random.Generator) -> np.ndarray:
        pool = draw_array(e, (3,), rng)
        return pool[rng.integers(0, 3, n)]
    return [(0.5, pooled), *[(w * 0.5, f) for w, f in defaults]]


DISTRIBUTIONS: dict[str, Callable[[ElementType], list[tuple[float, Source]]]] = {
    "default": _default_sources,
    "shift_amount": _shift_amount,
    "exponent": _exponent,
    "multiplicand": _multiplicand,
    "index": _index,
    "repeated": _repeated,
    # Drawn with the signature in view by batch_inputs (SIGNATURE_DISTRIBUTIONS); by
    # element type alone (draw_array) as the default.
    "identity": _default_sources,
    "exact_sums": _default_sources,
    "linalg_hermitian": _default_sources,
    "linalg_triangular": _default_sources,
    "fft_signal": _default_sources,
    "batch_norm": _default_sources,
    "rng_state": _default_sources,
    "rng_shape": _default_sources,
    "rng_params": _default_sources,
    "rng_mean": _default_sources,
    "dynamic_size": _default_sources,
    "contraction": _default_sources,
    "while_state": _default_sources,
    "dynamic_shape": _default_sources,
    "dynamic_pad": _default_sources,
    "dynamic_conv": _default_sources,
    "dynamic_root": _default_sources,
    "quantize_operand": _default_sources,
}

#: Distributions whose values depend on the rest of the signature, as
#: ``module:function`` of this package (loaded when a spec names one): ``function(sig,
#: spec, index, k, et, shape, rng, param) -> array`` draws input ``index`` (position
#: ``k`` in its variadic group) of shape [batch] + its shape. A spec names one as
#: ``name`` or ``name:param`` (``identity:body``: a reduction's init values, the
#: identity of its body ``body``). Inputs drawn together (rng's ``a`` and ``b``, a pair
#: per row) come back at once as ``{input index: array}``, this input's and later
#: ones' (single-leaf inputs): :func:`batch_inputs` takes the later ones from there,
#: within the one call (no state outlives it).
SIGNATURE_DISTRIBUTIONS: dict[str, str] = {
    "identity": "reduction:identity_values",
    "exact_sums": "reduction:exact_values",
    # matrices of a chosen condition number (generators/linalg.py)
    "linalg_hermitian": "linalg:hermitian_values",
    "linalg_triangular": "linalg:triangular_values",
    # signals by kind, Hermitian half spectra for IRFFT (generators/fft.py)
    "fft_signal": "fft:signal_values",
    # features with chosen means and spreads, zero variance (generators/batch_norm.py)
    "batch_norm": "batch_norm:feature_values",
    # states, rng's shape operand and (a, b) pairs (generators/rng.py)
    "rng_state": "rng:state_values",
    "rng_shape": "rng:shape_values",
    "rng_params": "rng:param_values",
    # rng_bernoulli's mean: certain, usual and extreme probabilities, and none (generators/rng.py)
    "rng_mean": "rng:mean_values",
    # SetDimensionSize's size within [0, bound] (generators/xla_forms.py)
    "dynamic_size": "xla_forms:dynamic_size_values",
    # exact values, accumulation probes, Gaussian and special values per case
    # (generators/contraction.py: dot_general, convolution)
    "contraction": "contraction:contraction_values",
    # a while loop's counter and bound: trip counts 0, 1 and many (generators/control_flow.py)
    "while_state": "control_flow:while_state_values",
    # the dynamic-shape ops' shape operands, agreeing with the static result type
    # (generators/dynamic_shapes.py)
    "dynamic_shape": "dynamic_shapes:shape_values",
    "dynamic_pad": "dynamic_shapes:pad_values",
    "dynamic_conv": "dynamic_shapes:conv_padding_values",
    # collective_broadcast's and collective_reduce's root operand within the group
    # (generators/collectives.py)
    "dynamic_root": "collectives:root_values",
    # uniform_quantize's float operand: ties and grid points of the result's parameters
    # (generators/quantization.py)
    "quantize_operand": "quantization:operand_values",
}


def _signature_distribution(name: str):
    import importlib
    module, _, function = SIGNATURE_DISTRIBUTIONS[name].partition(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), function)


@functools.lru_cache(maxsize=None)
def _mixture(et: ElementType, name: str) -> tuple[list[tuple[float, Source]], np.ndarray]:
    """A distribution's sources for ``et`` and the cumulative weights ``rng.choice``
    draws a source index from."""
    try:
        sources = DISTRIBUTIONS[name](et)
    except KeyError:
        raise ValueError(f"unknown value distribution {name!r}; known: "
                         f"{', '.join(DISTRIBUTIONS)}") from None
    weights = np.array([w for w, _ in sources], np.float64)
    cdf = (weights / weights.sum()).cumsum()
    cdf /= cdf[-1]
    cdf.flags.writeable = False
    return sources, cdf


def draw_array(et: "ElementType | str", shape: Sequence[int], rng: np.random.Generator,
               distribution: str = "default") -> np.ndarray:
    """An array of ``shape`` whose elements mix the distribution's sources."""
    et = element_type(et)
    sources, cdf = _mixture(et, distribution.partition(":")[0])
    n = math.prod(shape)
    # rng.choice(len(sources), n, p=weights / weights.sum()) draws exactly this (its
    # checks of p cost more than the draw; tests/test_values_draws.py holds the equality)
    which = cdf.searchsorted(rng.random(n), side="right")
    out = np.empty(n, et.dtype)
    # the positions of each source in increasing order, as np.nonzero(which == i) gives
    # them: one stable sort instead of a comparison and a nonzero per source
    order = which.argsort(kind="stable")
    start = 0
    for (_, source), count in zip(sources, np.bincount(which, minlength=len(sources)).tolist()):
        if count:
            out[order[start:start + count]] = source(et, count, rng)
            start += count
    return out.reshape(tuple(shape))


BOUNDARY_SHARE = 0.2
BOUNDARY_ULPS = 4


def boundary_points(sig: Signature, spec: OpSpec, name: str) -> list[float]:
    """The points an input's ``boundaries:`` name for this signature (finite numbers),
    evaluated with every input and output named by its type (an invalid signature, whose
    types the expressions may not fit, gets the points that evaluate). A function of
    the signature alone: held per signature (every batch asks again)."""
    key = (id(spec), sig, name)
    try:
        held = _BOUNDARY_POINTS.get(key)
    except TypeError:                               # (a signature that is not hashable)
        return _boundary_points(sig, spec, name)
    if held is None or held[0] is not spec:        # (specs hold dicts: keyed by id)
        held = _BOUNDARY_POINTS[key] = (spec, tuple(_boundary_points(sig, spec, name)))
        if len(_BOUNDARY_POINTS) > BOUNDARY_POINTS_HELD:
            _BOUNDARY_POINTS.pop(next(iter(_BOUNDARY_POINTS)))
    return list(held[1])


#: (spec id, signature, input name) -> (spec, points), oldest dropped first
_BOUNDARY_POINTS: dict[tuple, tuple] = {}
BOUNDARY_POINTS_HELD = 4096


def _boundary_points(sig: Signature, spec: OpSpec, name: str) -> list[float]:
    from conformance.specs import expressions as ex
    t = next(t for t in spec.inputs if t.name == name)
    env: dict = {}
    for ts, idx in zip(spec.inputs, spec.split_inputs(list(sig.input_types))):
        env[ts.name] = idx
    for ts, idx in zip(spec.outputs, spec.split_outputs(list(sig.result_types))):
        env[ts.name] = idx
    points: list[float] = []
    for text in t.boundaries:
        try:
            value = ex.evaluate(text, env)
        except ex.ExpressionError:
            from conformance.specs.validity import violations
            if violations(sig):
                continue        # an invalid case (a negative test): its own types
            raise
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            v = float(v)
            if np.isfinite(v):
                points.append(v)
    return points


def near_points(et: ElementType, points: Sequence[float], n: int,
                rng: np.random.Generator) -> np.ndarray:
    """``n`` values of ``et`` each within ``BOUNDARY_ULPS`` steps (ULPs; 1 for integers)
    of one of ``points`` rounded to ``et``, never past its finite range."""
    if et.is_complex:
        out = np.empty(n, et.dtype)
        out.real = near_points(et.component, points, n, rng)
        out.imag = _small(et.component, n, rng)
        return out
    p = np.asarray(points, np.float64)[rng.integers(0, len(points), n)]
    step = rng.integers(-BOUNDARY_ULPS, BOUNDARY_ULPS, n, endpoint=True)
    if et.is_integer:
        v = np.clip(np.round(p), et.int_min, et.int_max).astype(object) + step.astype(object)
        v = np.array([min(max(x, et.int_min), et.int_max) for x in v], dtype=object)
        return v.astype(np.uint64 if et.name == "ui64" else np.int64).astype(et.dtype)
    if et.is_boolean:
        return (p != 0)
    from conformance.core.literals import bit_patterns
    fi = ml_dtypes.finfo(et.dtype)
    base = round_to(np.clip(p, -float(fi.max), float(fi.max)), et)
    bits = bit_patterns(base).astype(np.int64) + step
    # (a step past the top of a 4- or 6-bit format's encoding is no value of it)
    inside = (bits >= 0) & (bits < (1 << et.bits))
    bits = np.where(inside, bits, 0)
    moved = from_bit_patterns(bits.astype(np.uint64), et).reshape(n)
    with np.errstate(invalid="ignore"):
        wide = moved.astype(np.float64)
    ok = inside & np.isfinite(wide) & \
        (np.signbit(wide) == np.signbit(base.astype(np.float64)))
    return np.where(ok, moved, base).astype(et.dtype)


def _with_boundaries(x: np.ndarray, et: ElementType, points: Sequence[float],
                     rng: np.random.Generator) -> np.ndarray:
    """``x`` with a share of its elements moved next to the boundary points."""
    if not points or x.size == 0:
        return x
    flat = x.reshape(-1).copy()
    pick = np.nonzero(rng.random(flat.size) < BOUNDARY_SHARE)[0]
    if pick.size:
        flat[pick] = near_points(et, points, pick.size, rng)
    return flat.reshape(x.shape)


def batch_inputs(sig: Signature, rng: np.random.Generator, batch: int,
                 spec: OpSpec | None = None) -> tuple[np.ndarray, ...]:
    """Values for ``batch`` cases of ``sig``: one array per input tensor (a tuple-typed
    input's leaves), shape [batch] + its shape; an input whose spec names
    ``boundaries:`` gets a share of its elements next to them."""
    spec = spec or load_spec(sig.op)
    n = sig.num_replicas * sig.num_partitions
    if n > 1:
        # A grid of n processes (collectives): one value per process, [batch, n] + shape,
        # drawn as batch * n cases of the single-process signature.
        import dataclasses
        flat = batch_inputs(dataclasses.replace(sig, num_replicas=1, num_partitions=1), rng,
                            batch * n, spec)
        return tuple(x.reshape((batch, n) + x.shape[1:]) for x in flat)
    out = _batch_inputs(sig, rng, batch, spec)
    if not any(t.boundaries for t in spec.inputs) or len(out) != len(sig.input_types):
        return out      # (tuple-typed inputs have no boundaries)
    out = list(out)
    groups = spec.split_inputs(list(range(len(sig.input_types))))
    for t, idx in zip(spec.inputs, groups):
        if not t.boundaries:
            continue
        points = boundary_points(sig, spec, t.name)
        for i in (idx if t.variadic else [idx]):
            out[i] = _with_boundaries(out[i], sig.input_types[i].element_type, points, rng)
    return tuple(out)


def _batch_inputs(sig: Signature, rng: np.random.Generator, batch: int,
                  spec: OpSpec) -> tuple[np.ndarray, ...]:
    groups = spec.split_inputs(list(range(len(sig.input_types))))
    dists = ["default"] * len(sig.input_types)
    within = [0] * len(sig.input_types)
    for t, idx in zip(spec.inputs, groups):
        for k, i in enumerate(idx if t.variadic else [idx]):
            dists[i] = t.values or "default"
            within[i] = k
    if not any(d.partition(":")[0] in SIGNATURE_DISTRIBUTIONS for d in dists):
        # A tuple-typed input gets one array per leaf (the case holds the leaves).
        return _drawn_together([(leaf.element_type, (batch, *leaf.shape), d)
                                for t, d in zip(sig.input_types, dists)
                                for leaf in t.leaves()], rng)
    out = []
    drawn: dict[int, np.ndarray] = {}       # later inputs a joint draw already made
    for i, (t, d) in enumerate(zip(sig.input_types, dists)):
        name, _, param = d.partition(":")
        for leaf in t.leaves():
            shape = (batch, *leaf.shape)
            if i in drawn:
                out.append(drawn.pop(i))
            elif name in SIGNATURE_DISTRIBUTIONS:
                x = _signature_distribution(name)(sig, spec, i, within[i],
                                                  leaf.element_type, shape, rng, param)
                if isinstance(x, dict):     # drawn together with later inputs
                    drawn.update((j, v) for j, v in x.items() if j > i and dists[j] == d)
                    x = x[i]
                out.append(x)
            else:
                out.append(draw_array(leaf.element_type, shape, rng, d))
    return tuple(out)


def _drawn_together(leaves: Sequence[tuple[ElementType, tuple[int, ...], str]],
                    rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """One array per (element type, shape, distribution), the leaves of one element type
    and distribution drawn by one :func:`draw_array` call (in the order of their first
    leaf) and split in order: each element still mixes the sources independently, and a
    binary op's batch costs one draw instead of two (draws cost per call, not per
    element, at a batch's sizes)."""
    groups: dict[tuple[ElementType, str], list[int]] = {}
    for k, (et, _, d) in enumerate(leaves):
        groups.setdefault((et, d), []).append(k)
    out: list = [None] * len(leaves)
    for (et, d), ks in groups.items():
        if len(ks) == 1:
            _, shape, _ = leaves[ks[0]]
            out[ks[0]] = draw_array(et, shape, rng, d)
            continue
        sizes = [math.prod(leaves[k][1]) for k in ks]
        flat = draw_array(et, (sum(sizes),), rng, d)
        start = 0
        for k, n in zip(ks, sizes):
            # (disjoint views of one contiguous array: contiguous and writeable, as the
            # overlay needs them)
            out[k] = flat[start:start + n].reshape(leaves[k][1])
            start += n
    return tuple(out)


def case_inputs(sig: Signature, rng: np.random.Generator,
                spec: OpSpec | None = None) -> tuple[np.ndarray, ...]:
    """Values for one case of ``sig``."""
    return tuple(x[0] for x in batch_inputs(sig, rng, 1, spec))


def tensor_of(t: TensorType, rng: np.random.Generator, distribution: str = "default"):
    return draw_array(t.element_type, t.shape, rng, distribution)
