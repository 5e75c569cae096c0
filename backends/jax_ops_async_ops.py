"""jax.lax and async_start / async_done (registered into jax_ops.BUILDERS): Unsupported.

jax 0.10.2 has no asynchronous op of its own: jax.lax has no name with "async" or
"future" in it, and jax never writes stablehlo.async_start (XLA's asynchronous
collectives are made by its scheduler after jax has lowered). A jax mapping of the body's
op alone would judge the slice, not the pair, so the pair is declined with the reason.
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder


def _unsupported(sig: Signature):
    names = sorted(n for n in dir(lax) if "async" in n.lower() or "future" in n.lower())
    raise Unsupported(f"{sig.op}: jax has no asynchronous op (jax.lax names with 'async' or "
                      f"'future': {names or 'none'}) and never emits stablehlo.async_start")


for _op in ("async_start", "async_done"):
    builder(_op)(_unsupported)
