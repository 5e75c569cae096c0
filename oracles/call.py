"""call and composite (001 "Call", "CompositeCall"): the result is the callee's (the
decomposition's) results on the operands, its program evaluated op by op at the spec's
semantics (oracles/control_flow.run_body, each op by its own oracle: oracles/programs.py).
001 "CompositeCall": "The composite op can be replaced with its decomposition without
changing program semantics", so the decomposition alone fixes a composite's result.

Beside the values, every result carries the programs oracle's mask of the elements an
implementation-defined rule of an op of the body leaves open (integer overflow, ...).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance.specs.expressions import condition

from .control_flow import run_body
from .registry import OracleError, register, register_batched

__all__ = ["evaluate_batched", "one_case", "whole_batch"]


def evaluate_batched(inputs: Sequence[np.ndarray], regions: Sequence[str]
                     ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The callee's results and masks for batched ``inputs`` (a leading batch axis)."""
    if len(regions) != 1:
        raise OracleError(f"a call has one callee, not {len(regions)}")
    return run_body(regions[0], [np.asarray(x) for x in inputs])


def one_case(inputs, attrs, types, regions):
    """One case of an op whose result is its one region's on the operands."""
    values, _ = evaluate_batched([np.asarray(x)[None] for x in inputs], regions)
    return tuple(np.asarray(v[0]).astype(t.element_type.dtype).reshape(t.shape)
                 for v, t in zip(values, types))


@register("call")
def _call(inputs, attrs, types):
    return one_case(inputs, attrs, types, [attrs["callee"]])


@register("composite")
def _composite(inputs, attrs, types):
    return one_case(inputs, attrs, types, [attrs["decomposition"]])


@register_batched("call", "composite")
def whole_batch(sig, stacked):
    """A whole batch at once (oracles.evaluate_batch): the body evaluated once."""
    values, _ = evaluate_batched(stacked, list(sig.regions))
    batch = stacked[0].shape[0] if stacked else 1
    return [np.broadcast_to(np.asarray(v), (batch,) + t.shape).astype(t.element_type.dtype)
            for v, t in zip(values, sig.result_types)]


@condition("call_masks")
def call_masks(inputs, regions) -> list[np.ndarray]:
    """Per result: elements an implementation-defined rule of an op of the body leaves
    open (module docstring); ``inputs`` batched, as the op takes them."""
    _, masks = evaluate_batched([np.asarray(x) for x in inputs], list(regions))
    return masks
