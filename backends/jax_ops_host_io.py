"""jax.lax mappings of the token and host-transfer ops (registered into jax_ops.BUILDERS).

- ``after_all`` is ``jax.lax.after_all`` of tokens made with ``jax.lax.create_token``;
  a token carries no data and jax returns none from a jitted function, so the case's
  (empty) results come back and what is checked is that jax stages it and runs it.
- ``infeed``, ``outfeed``, ``send`` and ``recv`` have no host-transfer path in jax.lax
  that fits: jax 0.10.2's lax has no infeed or outfeed, its devices no
  ``transfer_to_infeed``/``transfer_from_outfeed``, and send/recv exist only inside
  jax's own host callbacks. They are Unsupported at compile time, with that reason,
  so that nothing ever waits on a queue nobody fills.
"""
from __future__ import annotations

from .base import Unsupported
from .jax_ops import builder


@builder("after_all")
def _after_all(sig):
    from jax import lax
    from conformance.core.types import TokenType
    if not all(isinstance(t, TokenType) for t in sig.input_types + sig.result_types):
        raise Unsupported("jax.lax.after_all takes and gives tokens only; it cannot express "
                          f"{sig.key()}")
    n = len(sig.input_types)

    def fn():
        lax.after_all(*[lax.create_token() for _ in range(n)])
        return ()
    return fn


def _no_host_transfer(what: str):
    def build(sig):
        import jax
        feeds = [n for n in ("infeed", "outfeed") if hasattr(jax.lax, n)]
        raise Unsupported(
            f"jax {jax.__version__}: no host-transfer path in jax.lax for {sig.op} ({what}); "
            f"jax.lax has {'only ' + ', '.join(feeds) if feeds else 'no infeed/outfeed'}, and "
            "jax devices have no transfer_to_infeed/transfer_from_outfeed to fill or drain "
            "the host's queue, so the case is declined at compile time instead of waiting")
    return build


for _op, _what in (("infeed", "reads the host's infeed queue"),
                   ("outfeed", "writes the host's outfeed queue"),
                   ("send", "writes a channel to the host or another device"),
                   ("recv", "reads a channel from the host or another device")):
    builder(_op)(_no_host_transfer(_what))
