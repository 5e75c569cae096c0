"""jax.lax mapping of the fft family (registered into jax_ops.BUILDERS).

``lax.fft(x, fft_type, fft_lengths)`` is the public jax API of stablehlo.fft: jax lowers
it to that op with the same fft_type and fft_length. jax's own shape rule checks what XLA
checks; a valid case it refuses is "unsupported" (JaxBackend._check_types), an invalid one
a rejection.
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder


@builder("fft")
def _fft(sig: Signature):
    a = sig.attributes
    fft_type = a["fft_type"]
    lengths = tuple(int(n) for n in a["fft_length"])
    try:
        kind = getattr(lax.FftType, fft_type)
    except AttributeError:
        raise Unsupported(f"fft: jax.lax has no FftType {fft_type!r}") from None
    return lambda x: lax.fft(x, kind, lengths)
