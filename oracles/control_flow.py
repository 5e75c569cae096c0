"""if, case and while, written from the spec's semantics (003 "### if", "### case",
"### while"): their regions are region programs (conformance/core/region_program.py),
each evaluated op by op at the spec's semantics by the programs oracle
(oracles/programs.py), so a branch or loop body means what its ops mean.

Everything is vectorised over a batch of cases (a leading axis): a branch is evaluated
once on the rows that take it; a loop runs its cond and body on the rows still looping.
Beside the values, every result carries the programs oracle's ``masked`` mask: elements
an implementation-defined rule of an op in the region leaves open (integer overflow,
...), propagated through the ops after it and, for while, through the iterations. A row
whose loop condition reads such an element has an undetermined trip count: every element
of its results is masked (the spec fixes nothing there).

The behaviour of an infinite loop is TBD in the spec (#383); the oracle stops with an
OracleError after :data:`MAX_TRIPS` iterations (generated loops end by construction).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance.core import region_program
from conformance.specs.expressions import condition

from .programs import evaluate_program
from .registry import OracleError, register, register_batched

__all__ = ["MAX_TRIPS", "branch_index", "evaluate_batched", "run_body"]

#: iterations after which the oracle gives up on a while loop (generated loops end sooner)
MAX_TRIPS = 100_000


def run_body(text: str, inputs: Sequence[np.ndarray], masks=None
             ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A region program on batched ``inputs`` (its block arguments, then the captured
    values): its results and their masks."""
    body = region_program.parse(text)
    batch = inputs[0].shape[0] if len(inputs) else 1
    values = evaluate_program(body.program, list(inputs), batch=batch, masks=masks)
    program = body.program
    return ([values.values[r] for r in program.results],
            [values.masked[r] for r in program.results])


def branch_index(index: np.ndarray, n: int) -> np.ndarray:
    """case: branch ``index`` where 0 <= index < n, else the last branch (003 "### case":
    negative and past-the-end indices take branches[N-1])."""
    index = np.asarray(index).astype(np.int64)
    return np.where((index >= 0) & (index < n), index, n - 1)


def _branches(choice: np.ndarray, texts: Sequence[str], captured: Sequence[np.ndarray]):
    """Results and masks of the branch ``choice[b]`` of each row ``b``."""
    types = region_program.parse(texts[0]).result_types
    batch = choice.shape[0]
    out = [np.zeros((batch,) + t.shape, t.element_type.dtype) for t in types]
    masks = [np.zeros((batch,) + t.shape, bool) for t in types]
    for k, text in enumerate(texts):
        rows = np.nonzero(choice == k)[0]
        if rows.size == 0:
            continue
        values, masked = run_body(text, [np.asarray(c)[rows] for c in captured])
        for o, m, v, vm in zip(out, masks, values, masked):
            o[rows] = np.broadcast_to(v, (rows.size,) + o.shape[1:])
            m[rows] = np.broadcast_to(vm, (rows.size,) + m.shape[1:])
    return out, masks


def _while(cond: str, body: str, operands: Sequence[np.ndarray]):
    state = [np.array(x, copy=True) for x in operands]
    masks = [np.zeros(x.shape, bool) for x in state]
    batch = state[0].shape[0] if state else 1
    active = np.arange(batch)
    for _ in range(MAX_TRIPS + 1):
        if active.size == 0:
            return state, masks
        here = [s[active] for s in state]
        here_m = [m[active] for m in masks]
        (go,), (go_m,) = run_body(cond, here, here_m)
        go = np.asarray(go).reshape(active.size).astype(bool)
        open_ = np.asarray(go_m).reshape(active.size)
        for m in masks:                     # an undetermined trip count: nothing fixed
            m[active[open_]] = True
        go &= ~open_
        active = active[go]
        if active.size == 0:
            return state, masks
        new, new_m = run_body(body, [s[active] for s in state], [m[active] for m in masks])
        for s, m, v, vm in zip(state, masks, new, new_m):
            s[active] = v
            m[active] = vm
    raise OracleError(f"while: the loop did not end after {MAX_TRIPS} iterations (the "
                      "behaviour of an infinite loop is TBD in the spec, #383)")


def _if(inputs, regions):
    pred = np.asarray(inputs[0]).reshape(-1).astype(bool)
    return _branches(np.where(pred, 0, 1), list(regions), list(inputs[1:]))  # true first


def _case(inputs, regions):
    if not regions:
        raise OracleError("case: no branches (C1)")
    index = np.asarray(inputs[0]).reshape(-1)
    return _branches(branch_index(index, len(regions)), list(regions), list(inputs[1:]))


def _while_op(inputs, regions):
    cond, body = regions
    return _while(cond, body, inputs)


_BATCHED = {"if": _if, "case": _case, "while": _while_op}


def evaluate_batched(op: str, inputs: Sequence[np.ndarray], regions: Sequence[str]
                     ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``op``'s results and masks for batched ``inputs`` (the case's inputs with a leading
    batch axis) and its region texts in spec order."""
    return _BATCHED[op]([np.asarray(x) for x in inputs], list(regions))


def _one_case(op: str):
    def fn(inputs, attrs, types):
        from conformance.specs import load_spec
        spec = load_spec(op)
        regions = []
        for r in spec.regions:
            v = attrs[r.name]
            regions += list(v) if r.variadic else [v]
        values, _ = evaluate_batched(op, [np.asarray(x)[None] for x in inputs], regions)
        return tuple(np.asarray(v[0]).astype(t.element_type.dtype).reshape(t.shape)
                     for v, t in zip(values, types))
    return fn


for _op in ("if", "case", "while"):
    register(_op)(_one_case(_op))


@register_batched("if", "case", "while")
def _batch(sig, stacked):
    """A whole batch at once (oracles.evaluate_batch): each branch evaluated once."""
    values, _ = evaluate_batched(sig.op, stacked, list(sig.regions))
    batch = stacked[0].shape[0] if stacked else 1
    return [np.asarray(v).astype(t.element_type.dtype).reshape((batch,) + t.shape)
            for v, t in zip(values, sig.result_types)]


@condition("control_flow_masks")
def control_flow_masks(op, inputs, regions) -> list[np.ndarray]:
    """Per result: elements an implementation-defined rule of a region's op leaves open
    (module docstring); ``inputs`` batched, as the op takes them."""
    _, masks = evaluate_batched(op, [np.asarray(x) for x in inputs], list(regions))
    return masks
