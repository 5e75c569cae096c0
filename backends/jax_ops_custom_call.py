"""jax.lax mapping of custom_call (registered into jax_ops.BUILDERS): none.

jax.lax has no way to call an arbitrary target: jax emits stablehlo.custom_call only for
its own FFI targets (jax.ffi.ffi_call, API version 4 with a dictionary backend_config, to
targets registered with XLA in the same process), and a vendor's target lives in the
vendor's backend. So every custom_call case is Unsupported on jax, with that reason; the
xla backend compiles the canonical program (XLA says whether it has the target).
"""
from __future__ import annotations

from .base import Unsupported
from .jax_ops import builder


@builder("custom_call")
def _custom_call(sig):
    raise Unsupported(f"jax.lax has no call of an arbitrary custom_call target "
                      f"({sig.attributes.get('call_target_name')!r}): jax emits custom_call "
                      "only for FFI targets registered with its own XLA (jax.ffi.ffi_call)")
