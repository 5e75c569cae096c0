"""jax.lax mapping of map (registered into jax_ops.BUILDERS): jax.lax has no map op of
StableHLO's kind (``lax.map`` is a loop), but the computation's ops are element-wise, so
the region composed from the per-op builders (jax_ops.jax_function) applied to whole
arrays is the same function. jax lowers it to the ops themselves, not to a
stablehlo.map; the xla and interpreter backends run the stablehlo.map."""
from __future__ import annotations

from conformance.core.case import Signature
from conformance.specs import regions

from .base import Unsupported
from .jax_ops import builder, jax_function


@builder("map")
def _map(sig: Signature):
    (text,) = sig.regions
    region = regions.parse(text)
    types = [t.element_type for t in sig.input_types]
    if list(region.arg_types) != types:
        raise Unsupported(f"map: jax applies the computation to the operands, so it cannot "
                          f"express the region {text!r} for "
                          f"{', '.join(t.name for t in types)}")
    if len(region.results) != 1:
        raise Unsupported(f"map: the computation returns {len(region.results)} values")
    shapes = {t.shape for t in sig.input_types} | {t.shape for t in sig.result_types}
    if len(shapes) > 1:
        raise Unsupported("map: jax.lax's element-wise ops broadcast operands of other "
                          f"shapes, so they cannot express a map over {sorted(shapes)}")
    dims = list(sig.attributes.get("dimensions", []))
    rank = sig.input_types[0].rank if sig.input_types else 0
    if dims != list(range(rank)):
        raise Unsupported(f"map: jax applies the computation to whole arrays; it cannot "
                          f"express dimensions {dims} (only all of them, in order)")
    fn = jax_function(text)
    return lambda *xs: fn(*xs)[0]
