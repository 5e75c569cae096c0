"""Values for XLA's own forms (generators/values.py ``SIGNATURE_DISTRIBUTIONS``).

- ``dynamic_size``: SetDimensionSize's ``size``, within [0, bound] (the static size of
  the signature's ``dimension``): 0, the bound, and sizes between. Sizes outside are no
  size of that dimension (the spec's rule size_out_of_range) and are not drawn: XLA CPU
  (jaxlib 0.10.2) writes size x (the other dimensions) elements into the bound's buffer,
  so a size past the bound corrupts the heap ("free(): invalid next size", SIGSEGV) and a
  negative one kills the process too; one such case would cost its whole batch.
"""
from __future__ import annotations

import numpy as np

from conformance.core.case import Signature
from conformance.core.types import ElementType
from conformance.specs import OpSpec

from .values import draw_array

__all__ = ["dynamic_size_values"]


def dynamic_size_values(sig: Signature, spec: OpSpec, index: int, k: int, et: ElementType,
                        shape, rng: np.random.Generator, param: str) -> np.ndarray:
    d = sig.attributes.get("dimension")
    operand = sig.input_types[0] if sig.input_types else None
    if et.name != "si32" or len(shape) != 1 or operand is None or \
            not isinstance(d, int) or not 0 <= d < operand.rank:
        return draw_array(et, shape, rng)
    bound = operand.shape[d]
    out = rng.integers(0, bound + 1, size=shape, endpoint=False).astype(np.int32)
    out[0::4] = bound           # (a quarter: the whole dimension valid)
    out[1::4] = 0               # (a quarter: none)
    return out
