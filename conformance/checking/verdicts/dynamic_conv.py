"""dynamic_conv's terms for the ``contraction`` bound: convolution's
(conformance/checking/verdicts/convolution.py), with the padding read from the case's
``padding`` operand rather than an attribute. Cases that hold the same padding are judged
together; the generators draw several paddings per batch, so the terms are computed per
group of equal paddings and put back in case order."""
from __future__ import annotations

import dataclasses

import numpy as np

from conformance.checking.verdicts import Judgement
from conformance.core.case import Signature
from conformance.checking.verdicts.contraction import PAIRS, TERMS
from conformance.checking.verdicts.convolution import convolution_pairs, convolution_terms

__all__ = ["dynamic_conv_terms", "dynamic_conv_pairs"]


def _groups(j: Judgement):
    """(case indices, the judgement of those cases as a convolution with that padding)."""
    padding = np.asarray(j.inputs[2]).astype(np.int64)
    rows = padding.reshape(padding.shape[0], -1)
    keys = [tuple(r) for r in rows]
    for key in dict.fromkeys(keys):
        idx = np.array([b for b, k in enumerate(keys) if k == key], np.intp)
        attrs = dict(j.sig.attributes,
                     padding=np.asarray(key, np.int64).reshape(-1, 2).tolist())
        sig = Signature.make("convolution", j.sig.input_types[:2], j.sig.result_types, attrs)
        yield idx, sig


def _sub(j: Judgement, idx: np.ndarray, sig, inputs) -> Judgement:
    return dataclasses.replace(j, sig=sig, inputs=[np.asarray(x)[idx] for x in inputs[:2]])


def _scatter(parts, n: int):
    """Per-group arrays (leading axis: the group's cases) back in case order."""
    first = next(p for _, p in parts if p is not None)
    out = np.empty((n,) + np.shape(first)[1:], np.asarray(first).dtype)
    for idx, p in parts:
        out[idx] = p
    return out


def dynamic_conv_terms(j: Judgement):
    """(S, K, G) per batched result element, convolution's per padding."""
    n = np.asarray(j.inputs[0]).shape[0]
    s_parts, g_parts, k = [], [], 0
    for idx, sig in _groups(j):
        s, k, g = convolution_terms(_sub(j, idx, sig, j.inputs))
        s_parts.append((idx, s))
        g_parts.append((idx, g))
    if not s_parts:
        return convolution_terms(dataclasses.replace(j, inputs=list(j.inputs[:2])))
    g_none = any(g is None for _, g in g_parts)
    return _scatter(s_parts, n), k, None if g_none else _scatter(g_parts, n)


def dynamic_conv_pairs(j: Judgement, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    n = np.asarray(left).shape[0]
    parts = [(idx, convolution_pairs(_sub(j, idx, sig, j.inputs), left[idx], right[idx]))
             for idx, sig in _groups(j)]
    return _scatter(parts, n)


TERMS["dynamic_conv"] = dynamic_conv_terms
PAIRS["dynamic_conv"] = dynamic_conv_pairs
