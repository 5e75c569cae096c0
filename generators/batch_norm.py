"""Values for the batch_norm ops (generators/values.py ``SIGNATURE_DISTRIBUTIONS``: they see
the signature): features of chosen means and spreads, zero-variance features, and the
statistics inputs (``mean``, ``variance``) of batch_norm_inference and batch_norm_grad
close to the operand's own.

Each case (row of a batch) is of one kind, by ``row % 8``, the same for every input:

- 0-2: per feature a centre μ_f = N(0, 1)·2^U(-2, 2) and a spread σ_f = 2^U(-3, 2);
- 3: half the features of zero variance (every element the centre, an exact value);
- 4: a centre far from zero relative to the spread: |μ_f| = 2^U(5, 9)·σ_f (cancellation
  in x − μ; where a one-pass variance E[x²] − E[x]² loses its digits);
- 5: spreads over a wide range, σ_f = 2^U(-10, 10);
- 6: exact values: small integers times a power of two (partial sums all representable);
- 7: one NaN or infinity in the operand (training), or in ``grad_output`` (grad), or a
  negative variance (inference).

Every magnitude is capped so that a feature's sum of squares stays below the largest
finite value over 16 (f16 and the f8 types have small ranges). The centres of row ``r``
are a function of the signature and ``r`` (so that the ``mean`` input of inference and
grad, drawn separately, is the operand's centre up to a small error); the spreads and
noise come from the batch's generator. ``scale`` is ±2^U(-2, 2) with some zeros and ones,
``offset`` N(0, 1)·2^U(-2, 2), ``variance`` σ_f²·U(1/2, 2) (zero in the zero-variance
features), ``grad_output`` N(0, 1)·2^U(-3, 3).

An invalid signature (a negative test) gets the default values.
"""
from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np

from conformance.core.case import Signature
from conformance.core.numerics import round_to
from conformance.core.types import ElementType
from conformance.specs import OpSpec

from .values import draw_array

__all__ = ["feature_values"]


def _centres(sig: Signature, batch: int, C: int, cap: float):
    """Per row and feature: (kind, centre, spread) from a generator seeded by the
    signature (the same for every input of a case)."""
    rng = np.random.default_rng([zlib.crc32(sig.key().encode()), batch, C])
    kind = np.arange(batch) % 8
    centre = rng.standard_normal((batch, C)) * np.exp2(rng.uniform(-2, 2, (batch, C)))
    spread = np.exp2(rng.uniform(-3, 2, (batch, C)))
    wide = np.exp2(rng.uniform(-10, 10, (batch, C)))
    spread = np.where((kind == 5)[:, None], wide, spread)
    far = np.exp2(rng.uniform(5, 9, (batch, C))) * spread * np.sign(centre + 0.5)
    centre = np.where((kind == 4)[:, None], far, centre)
    zero_var = (kind == 3)[:, None] & (np.arange(C) % 2 == 0)[None, :]
    exact = (kind == 6)[:, None]
    centre = np.where(exact, rng.integers(-8, 9, (batch, C)) * 0.25, centre)
    spread = np.where(exact, 0.5, spread)
    # keep the feature's sum of squares in range
    scale_down = np.minimum(1.0, cap / np.maximum(np.abs(centre) + 4 * spread, 1e-300))
    return kind, centre * scale_down, spread * scale_down, zero_var


def feature_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                   shape, rng: np.random.Generator, param: str) -> np.ndarray:
    """The batch_norm ops' inputs: see the module's docstring."""
    from conformance.specs.validity import violations
    shape = tuple(shape)
    if not et.is_float or violations(sig, spec):
        return draw_array(et, shape, rng)
    if 0 in shape:
        return np.zeros(shape, et.dtype)
    name = spec.inputs[index].name
    op_shape = sig.input_types[0].shape
    fi = int(sig.attributes["feature_index"])
    C = op_shape[fi]
    batch = shape[0]
    m = max(1, int(np.prod(op_shape)) // max(C, 1))
    fmax = float(ml_dtypes.finfo(et.dtype).max)
    cap = np.sqrt(fmax / (16.0 * m))
    kind, centre, spread, zero_var = _centres(sig, batch, C, cap)

    def per_feature(v):              # (batch, C) -> the operand's shape, batch first
        s = [batch] + [1] * len(op_shape)
        s[1 + fi] = C
        return v.reshape(s)

    if name in ("operand", "grad_output") and shape[1:] == tuple(op_shape):
        if name == "grad_output":
            x = rng.standard_normal(shape) * np.exp2(rng.uniform(-3, 3, (batch,) + (1,) * (
                len(shape) - 1)))
            x = np.clip(x, -cap, cap)
        else:
            noise = rng.standard_normal(shape)
            exact_noise = rng.integers(-4, 5, shape) * 0.5
            noise = np.where((kind == 6).reshape((batch,) + (1,) * len(op_shape)),
                             exact_noise, noise)
            x = per_feature(centre) + per_feature(spread) * noise
            x = np.where(per_feature(zero_var), per_feature(centre), x)
        poison = "operand" if spec.name == "batch_norm_training" else (
            "grad_output" if spec.name == "batch_norm_grad" else None)
        rows = np.nonzero(kind == 7)[0]
        if name == poison and rows.size:
            flat = x.reshape(batch, -1)
            pool = np.array([np.nan, np.inf, -np.inf])
            flat[rows, rng.integers(0, flat.shape[1], rows.size)] = \
                pool[rng.integers(0, 3, rows.size)]
            x = flat.reshape(shape)
        return round_to(x, et)
    if shape[1:] != (C,):
        return draw_array(et, shape, rng)
    if name == "scale":
        v = np.exp2(rng.uniform(-2, 2, shape)) * rng.choice([-1.0, 1.0], shape)
        pick = rng.random(shape)
        v = np.where(pick < 0.1, 0.0, np.where(pick < 0.25, 1.0, v))
    elif name == "offset":
        v = rng.standard_normal(shape) * np.exp2(rng.uniform(-2, 2, shape))
    elif name == "mean":
        v = centre + spread * rng.uniform(-0.25, 0.25, shape)
        v = np.where(zero_var | (kind == 6)[:, None], centre, v)
    elif name == "variance":
        v = spread ** 2 * rng.uniform(0.5, 2.0, shape)
        v = np.where(zero_var, 0.0, v)
        v = np.where((kind == 6)[:, None], 0.25, v)
        if spec.name == "batch_norm_inference":
            rows = np.nonzero(kind == 7)[0]
            v[rows, rng.integers(0, C, rows.size)] = -1.0
        v = np.minimum(v, cap * cap)
    else:
        return draw_array(et, shape, rng)
    return round_to(v, et)
