"""jax.lax mappings of if, case and while (registered into jax_ops.BUILDERS): each region
program (conformance/core/region_program.py) becomes a jax function composed of its ops'
own builders (backends/programs.jax_function), so a branch or loop body means what its
ops mean; the op itself is ``lax.cond``, ``lax.switch`` and ``lax.while_loop``.

``lax.switch`` clamps its index into [0, N-1]; StableHLO's case sends every index outside
[0, N) to the last branch (003 "### case"), so the index is mapped first (a negative
index to N-1), which is what StableHLO's case means, not a workaround.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from conformance.core import region_program
from conformance.core.case import Signature

from .jax_ops import builder
from .programs import jax_function


def region_function(text: str):
    """The body as a jax function of exactly its program's arguments (a call with other
    arguments raises TypeError while jax traces it, as a Python function would)."""
    program = region_program.parse(text).program
    fn = jax_function(program)
    n = len(program.arguments)

    def call(*args):
        if len(args) != n:
            raise TypeError(f"the region takes {n} values, the op gives it {len(args)}")
        return fn(*args)
    return call


def _branch(text: str):
    fn = region_function(text)
    return lambda captured: tuple(fn(*captured))


def one_or_tuple(out):
    """A jax op's results as a builder returns them: one array alone, several as a tuple."""
    return out if len(out) != 1 else out[0]


@builder("if")
def _if(sig: Signature):
    true_fn, false_fn = (_branch(t) for t in sig.regions)
    return lambda pred, *captured: one_or_tuple(lax.cond(pred, true_fn, false_fn, captured))


@builder("case")
def _case(sig: Signature):
    branches = [_branch(t) for t in sig.regions]
    n = len(branches)

    def run(index, *captured):
        index = jnp.where((index >= 0) & (index < n), index, n - 1)
        return one_or_tuple(lax.switch(index, branches, captured))
    return run


@builder("while")
def _while(sig: Signature):
    cond_text, body_text = sig.regions
    cond, body = region_function(cond_text), region_function(body_text)

    def cond_fn(state):
        out = cond(*state)
        if len(out) != 1:       # lax.while_loop's cond_fun returns one boolean scalar
            raise TypeError(f"the cond region returns {len(out)} values")
        return out[0]
    return lambda *operand: one_or_tuple(lax.while_loop(cond_fn, lambda s: tuple(body(*s)),
                                                  tuple(operand)))
