"""Judging a planted backend on a few hand-picked elements: one signature of an
element-wise op over ``tensor<2xE>``, the two cases stacked per input, one batch through
the suite's own check (tests of formats without NaN, infinity or zero)."""
from __future__ import annotations

import numpy as np

from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.types import element_type
from conformance.specs import load_spec


def stacked_batch(op: str, name: str, cases) -> tuple[Signature, list[np.ndarray]]:
    """``cases``: per case, one value per input (two cases: the tensors' two elements)."""
    dtype = element_type(name).dtype
    per_input = list(zip(*cases))
    stacked = [np.array(v, np.float64).astype(dtype) for v in per_input]
    sig = Signature.make(op, [f"tensor<2x{name}>"] * len(stacked), [f"tensor<2x{name}>"])
    return sig, stacked


def judge(backend, sig: Signature, stacked):
    """The backend's verdict on the batch and its per-element classes."""
    check = SignatureCheck(load_spec(sig.op), sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    v = check.run_batch(0, stacked).results[backend.name].verdict
    return v, v.element_classes[0]
