"""Hypothesis strategies and numpy value generators driven by the op specs.

- :func:`signatures` — valid signatures of an op, by construction.
- :func:`invalid_signatures` — signatures that break exactly one rule of the spec.
- :func:`batch_inputs` / :func:`draw_array` — vectorised input values with special values.
- :func:`cases` — whole cases (signature + values) for pytest users.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from hypothesis import strategies as st

from conformance.core.case import Case, Signature
from conformance.specs import OpSpec, load_spec

from .invalid import breakable, candidates, invalid_signatures, mutations, unbreakable
from .signatures import SHAPE_PROFILES, ShapeProfile, binding_of, canonical, shapes, signatures
from .values import DISTRIBUTIONS, batch_inputs, case_inputs, draw_array, special_values


def cases(op: "str | OpSpec", binding: Mapping[str, str] | None = None,
          profile: "ShapeProfile | str" = "default") -> st.SearchStrategy[Case]:
    """Whole valid cases: hypothesis draws the signature and a seed, numpy the values."""
    spec = load_spec(op) if isinstance(op, str) else op

    @st.composite
    def strategy(draw):
        sig = draw(signatures(spec, binding, profile))
        seed = draw(st.integers(0, 2 ** 32 - 1))
        return Case(sig, case_inputs(sig, np.random.default_rng(seed), spec))

    return strategy()


__all__ = ["signatures", "invalid_signatures", "breakable", "mutations", "shapes",
           "candidates", "unbreakable", "SHAPE_PROFILES", "ShapeProfile", "binding_of", "batch_inputs", "case_inputs",
           "draw_array", "special_values", "DISTRIBUTIONS", "cases", "Signature"]
