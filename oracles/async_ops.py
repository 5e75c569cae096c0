"""async_start and async_done (stablehlo-spec-2026-08): the pair async_start -> async_done
that the suite draws (docs/async-ops.md) is the body's op on the operands ("The asynchrony
is not guaranteed": scheduling changes no value), its program evaluated at the spec's
semantics (oracles/control_flow.run_body, the op by its own oracle)."""
from __future__ import annotations


from .call import one_case, whole_batch
from .registry import register, register_batched

__all__: list[str] = []


@register("async_start", "async_done")
def _pair(inputs, attrs, types):
    return one_case(inputs, attrs, types, [attrs["body"]])


# a whole batch at once: the body evaluated once, as call's callee
register_batched("async_start", "async_done")(whole_batch)
