"""Values for the quantized ops: uniform_quantize's float operand near its result's ties.

quantize rounds ``x / scale + zero_point`` half to even; the values where that matters
are the ties ``(k + 0.5 - zero_point) * scale`` and, where an implementation keeps a
different precision, their neighbours. A share of the elements sits on them (per slice
of a per-axis result: that slice's parameters), a share on the grid points ``(k -
zero_point) * scale``, each nudged by a few units in the last place of the expressed
type, and the rest comes from the default sources (±0, ±inf, NaN, extremes...).
"""
from __future__ import annotations

import numpy as np

from conformance.core.case import Signature
from conformance.core.numerics import round_to
from conformance.core.types import QuantizedElementType, quantized_type
from conformance.core.types import ELEMENT_TYPES, ElementType, TensorType
from conformance.specs import OpSpec

from .values import draw_array

TIE_SHARE = 0.4
GRID_SHARE = 0.2


def operand_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                   shape, rng: np.random.Generator, param: str) -> np.ndarray:
    shape = tuple(shape)
    out = draw_array(et, shape, rng)
    qt = sig.result_types[0].element_type if sig.result_types else None
    if not et.is_float or not getattr(qt, "scales", None) or 0 in shape or \
            len(shape) - 1 != sig.input_types[0].rank:
        return out
    s = qt.scales_as_expressed().astype(np.float64)
    z = np.array(qt.zero_points, np.int64)
    if qt.quantization_dimension is not None and len(s) == shape[1 + qt.quantization_dimension]:
        idx = np.indices(shape)[1 + qt.quantization_dimension]
    else:
        idx = np.zeros(shape, np.int64)
    s, z = s[np.minimum(idx, len(s) - 1)], z[np.minimum(idx, len(z) - 1)]
    kk = rng.integers(qt.storage_min - 2, qt.storage_max + 2, shape, endpoint=True)
    which = rng.uniform(0, 1, shape)
    half = np.where(which < TIE_SHARE, 0.5, 0.0)
    points = round_to((kk + half - z) * s, et)
    nudge = rng.integers(-2, 3, shape)
    bits = points.view(et.bits_dtype).astype(np.int64)
    nudged = np.where(points.astype(np.float64) != 0, bits + nudge, bits)
    nudged = nudged.astype(et.bits_dtype).view(et.dtype)
    near = np.where(rng.uniform(0, 1, shape) < 0.5, points, nudged)
    return np.where(which < TIE_SHARE + GRID_SHARE, near, out).astype(et.dtype)


# ---------------------------------------------------------------------------
# Invalid signatures: single changes of a quantized tensor type (generators/invalid.py)
# ---------------------------------------------------------------------------

def type_variants(t: TensorType):
    """One-change variants of a quantized tensor type, for the invalid-case generator:
    another expressed type (add C4, uniform_quantize C2), another storage type (add C3),
    per tensor <-> per axis (add C5), another quantization dimension (add C6/C7), and
    the type's own rules broken ("Types": a negative scale, C5; an empty storage range,
    C3; a zero point outside it, C7; one scale too many per axis, C13), the scales or zero
    points alone changed, and per axis the dimension moved to one of the same size."""
    qt = t.element_type
    if not isinstance(qt, QuantizedElementType):
        return
    qd, scales, zps = qt.quantization_dimension, list(qt.scales), list(qt.zero_points)

    def make(**kw):
        args = dict(storage=qt.storage.name, expressed=qt.expressed.name, scales=scales,
                    zero_points=zps, quantization_dimension=qd, storage_min=qt.storage_min,
                    storage_max=qt.storage_max)
        args.update(kw)
        return TensorType(t.shape, quantized_type(**args))

    yield make(expressed="bf16" if qt.expressed.name == "f32" else "f32")
    other = ELEMENT_TYPES["ui8" if qt.storage.name == "si8" else "si8"]
    yield make(storage=other.name, storage_min=None, storage_max=None,
               zero_points=[min(max(z, other.int_min), other.int_max) for z in zps])
    if qd is None and t.rank:
        n = t.shape[0]
        yield make(quantization_dimension=0, scales=scales * n, zero_points=zps * n)
    if qd is not None:
        yield make(quantization_dimension=None, scales=scales[:1], zero_points=zps[:1])
        for d in range(t.rank):
            if d != qd:
                n = t.shape[d]
                yield make(quantization_dimension=d, scales=scales[:1] * n,
                           zero_points=zps[:1] * n)
        yield make(scales=scales + scales[:1], zero_points=zps + zps[:1])
    yield make(scales=[-s for s in scales])
    yield make(storage_min=qt.storage_max, storage_max=qt.storage_min)
    if qt.storage_max > qt.storage_min + 1:
        yield make(storage_min=qt.storage_min + 1,
                   zero_points=[qt.storage_min] * len(zps))
    # the parameters alone changed (a valid type of the same family): what an op whose rule
    # is "equal element types" (the data-movement forms) must refuse; and per axis, the
    # quantization dimension moved to another of the same size, parameters kept (transpose
    # C4, broadcast_in_dim C6 broken alone)
    yield make(scales=[s * 2 for s in scales])
    yield make(zero_points=[z - 1 if z > qt.storage_min else z + 1 for z in zps])
    if qd is not None:
        for d in range(t.rank):
            if d != qd and t.shape[d] == len(scales):
                yield make(quantization_dimension=d)
