"""convolution's terms for the ``contraction`` bound (conformance/checking/verdicts/contraction.py).

Every result element of a convolution is a dot product of K = prod(kernel spatial sizes)
· kernel input features products (003 "### convolution": a dot_general per window), so
the ``contraction`` bound applies unchanged once it knows, per batched result element:

- S = Σ|a|·|b| over the element's window and kernel slice (padding and dilation holes
  count as zeros), a BLAS product of the magnitudes' im2col views
  (oracles/convolution.py :func:`bound_parts`);
- K, the same for every element;
- G, a lower bound of the granularity of its nonzero terms (the smallest power of two
  dividing one): the smallest granularity among the window's lhs elements times the
  smallest among the kernel slice's rhs elements, so that the bound is 0 (bit-exact)
  where every partial sum of every order is representable (the exact-value inputs).

This module only registers those terms (``TERMS["convolution"]``) and the op's
contraction of indicator arrays (``PAIRS["convolution"]``, with which the flush allowance
counts an element's own subnormal operands and fine products); the verdicts package
imports every module of its folder together when a spec names a bound not yet
registered, so both are there whenever the ``contraction`` bound is.
"""
from __future__ import annotations

import numpy as np

from conformance.oracles import convolution as conv
from conformance.oracles.reduction import granularity
from conformance.checking.verdicts import Judgement
from conformance.checking.verdicts.contraction import PAIRS, TERMS, granularity_floor

__all__ = ["convolution_terms", "convolution_pairs"]


def _gran(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if np.iscomplexobj(x):
        return np.minimum(granularity(x.real.astype(np.float64)),
                          granularity(x.imag.astype(np.float64)))
    return granularity(x.astype(np.float64))


def convolution_terms(j: Judgement):
    """(S, K, G) per batched result element (see the module text)."""
    lhs, rhs = (np.asarray(x) for x in j.inputs[:2])
    attrs = j.sig.attributes
    s, k = conv.bound_parts(lhs, rhs, attrs)
    g = conv.geometry(lhs.shape, rhs.shape, attrs, lead=1)
    if g.empty:
        return s, k, None
    # the granularity of padding and holes (zeros) is inf: they never limit exactness
    v, w, lb, rb, lc, rc = conv.operands(_gran(lhs), _gran(rhs), g)
    floor = granularity_floor(np.ascontiguousarray(v), np.ascontiguousarray(w), lb, rb, lc,
                              rc, lead=1)
    return s, k, conv.from_groups(floor, g)


def convolution_pairs(j: Judgement, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Σ L·R per batched result element over its window and kernel slice, for two
    nonnegative arrays shaped like the (batched) operands: what the contraction flush
    allowance counts an element's own subnormal operands and fine products with."""
    s, _ = conv.bound_parts(left, right, j.sig.attributes)
    return s


TERMS["convolution"] = convolution_terms
PAIRS["convolution"] = convolution_pairs
