"""Callees of call and decompositions of composite (issue 21), drawn from the op specs.

``draw('call_body', seed, args, m)`` (specs/ops/call.yaml, composite.yaml): one function
body, a region program (conformance/core/region_program.py) whose arguments are all
parameters (``block`` = their number: a function reads nothing from the caller but its
arguments, 001 "Call": "The arity and types of the args must match the parameters of
the computation") and that returns ``m`` results. Drawn like an if's branch
(generators/control_flow.py: 1 to 4 exact element-wise and data-movement ops), so a
result has exactly one right answer; the same seed gives the same body in any process.
"""
from __future__ import annotations

import functools

from conformance.core import region_program
from conformance.specs.expressions import draw

from .control_flow import branch_bodies, tensor_types

__all__ = ["call_body"]


@draw("call_body")
def call_body(seed, args, m) -> str:
    """A function body over parameters of the types ``args`` returning ``m`` results."""
    return _call_body(int(seed), tensor_types(args), int(m))


@functools.lru_cache(maxsize=1024)
def _call_body(seed, args, m) -> str:
    (branch,) = branch_bodies(seed, 1, args, m)
    program = region_program.parse(branch).program
    return region_program.text(region_program.Body(program, len(program.arguments)))
