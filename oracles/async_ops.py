"""async_start and async_done (stablehlo-spec-2026-08): the pair async_start -> async_done
that the suite draws (docs/async-ops.md) is the body's op on the operands ("The asynchrony
is not guaranteed": scheduling changes no value), its program evaluated at the spec's
semantics (oracles/control_flow.run_body, the op by its own oracle)."""
from __future__ import annotations

import numpy as np

from .call import evaluate_batched
from .registry import register, register_batched

__all__: list[str] = []


@register("async_start", "async_done")
def _pair(inputs, attrs, types):
    values, _ = evaluate_batched([np.asarray(x)[None] for x in inputs], [attrs["body"]])
    return tuple(np.asarray(v[0]).astype(t.element_type.dtype).reshape(t.shape)
                 for v, t in zip(values, types))


@register_batched("async_start", "async_done")
def _batch(sig, stacked):
    """A whole batch at once: the body evaluated once."""
    values, _ = evaluate_batched(stacked, list(sig.regions))
    batch = stacked[0].shape[0] if stacked else 1
    return [np.broadcast_to(np.asarray(v), (batch,) + t.shape).astype(t.element_type.dtype)
            for v, t in zip(values, sig.result_types)]
