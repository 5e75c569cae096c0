"""The batch_norm family on the jax backend: unsupported, with the reason.

jax has no batch-norm primitive: neither ``jax.lax`` nor any internal jax primitive lowers
to stablehlo.batch_norm_inference, batch_norm_training or batch_norm_grad (jax 0.10.2;
flax and jax.nn build batch normalisation from reductions and element-wise ops). Writing
the spec's decomposition with jax.lax ops here would test those ops (already covered one
by one), not XLA's BatchNorm* ops, and would pass by construction; the xla and
interpreter backends run the ops themselves from their StableHLO text.
"""
from __future__ import annotations

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder

_REASON = ("jax has no batch-norm primitive (no jax.lax op lowers to stablehlo.{op}); the "
           "op is tested through the xla and interpreter backends")


def _unsupported(op: str):
    def build(sig: Signature):
        raise Unsupported(_REASON.format(op=op))
    return build


for _op in ("batch_norm_inference", "batch_norm_training", "batch_norm_grad"):
    builder(_op)(_unsupported(_op))
