"""Oracle of custom_call: the registered target's own oracle function.

003 "### custom_call" leaves a call's values to the implementation; a vendor says what
they are by registering the target with an oracle (conformance.specs.custom_calls: the
Python hook ``register_target`` or the entry point group ``conformance.custom_calls``).
This calls it and checks that it returned the declared result types, so that a wrong
registration is named as such rather than blamed on the backend. A target nobody
registered has no values to check: its results are zeros of the declared types, which the
spec's implementation-defined rule ``unregistered_target`` masks everywhere, so a backend
that runs such a call is checked for its result types only (the built-in backends
decline to run them).
"""
from __future__ import annotations

import numpy as np

from conformance.core.types import TOKEN, TensorType, Token, TokenType, type_of
from conformance.specs import custom_calls

from .registry import OracleError, register


@register("custom_call")
def _custom_call(args, attrs, types):
    name = attrs.get("call_target_name")
    target = custom_calls.target(name)
    if target is None:          # no reference: placeholders, masked (unregistered_target)
        out = tuple(TOKEN if isinstance(t, TokenType) else
                    np.zeros(t.shape, t.element_type.dtype) for t in types)
        return out if len(out) != 1 else out[0]
    inputs = [a for a in args if not isinstance(a, Token)]
    try:
        out = list(target.oracle([np.asarray(x) for x in inputs], dict(attrs)))
    except Exception as e:  # noqa: BLE001 - the vendor's oracle, named
        raise OracleError(f"custom_call: the oracle of target {name!r} failed: "
                          f"{type(e).__name__}: {e}") from e
    tensors = [t for t in types if isinstance(t, TensorType)]
    if len(out) != len(tensors):
        raise OracleError(f"custom_call: the oracle of target {name!r} returned {len(out)} "
                          f"results for {len(tensors)} declared tensor results")
    results = iter(np.asarray(x) for x in out)
    values = []
    for t in types:
        if isinstance(t, TokenType):
            values.append(TOKEN)
            continue
        x = next(results)
        if type_of(x) != t:
            raise OracleError(f"custom_call: the oracle of target {name!r} returned "
                              f"{type_of(x)} where the call declares {t}")
        values.append(x)
    return tuple(values) if len(values) != 1 else values[0]
