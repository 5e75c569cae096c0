"""Values for the collectives of stablehlo-spec-2026-08 (collective_broadcast,
collective_reduce): the root operand of ``has_dynamic_root`` within its rule (C6:
``0 <= root < shape(replica_groups)[1]``), which no type or attribute can express."""
from __future__ import annotations

import numpy as np


def root_values(sig, spec, index, k, et, shape, rng, param) -> np.ndarray:
    """The operands of a collective with an optional root operand (the last, with
    ``has_dynamic_root``): the root drawn uniformly over the group's positions, each
    process's and each data operand's on its own; the data operands get the default
    values. (On a grid the batch axis holds every process's case: values.batch_inputs.)"""
    from .values import draw_array
    if sig.attributes.get("has_dynamic_root") and index == len(sig.input_types) - 1:
        groups = sig.attributes["replica_groups"]
        size = len(groups[0]) if groups and groups[0] else 1
        return rng.integers(0, size, shape).astype(et.dtype)
    return draw_array(et, shape, rng)
