"""The oracle of a program (conformance.core.program): every operation evaluated at the
spec's semantics, one after the other, each result rounded to its type (the per-op
oracle, ``evaluate_batch``), so a program of exact ops has exactly one answer.

Beside the values, three element masks travel with every value (all with the batch axis):

- ``masked``: elements the spec leaves open. Each op's implementation-defined rules
  (``implementation_defined``) mark elements of its results; every mask propagates,
  conservatively, to the elements of later results that read a marked element:
  element-wise ops OR their operands' masks, data movement ops (reshape, transpose,
  slice, concatenate, broadcast_in_dim, reverse) move the mask as they move values,
  reduce marks a result element where any element it reduces (or an init value) is
  marked, any other op marks every result element if any operand element is marked.
- ``inexact``: elements that depend on an op whose verdict is not bit-exact (``ulp``,
  ``rel_eps``, ``bound``...): these are judged metamorphically, not against this oracle
  (conformance.checking.programs). Propagated the same way.
- with ``flush=True`` the program is evaluated as FTZ/DAZ hardware would: every
  operand's and result's subnormals flushed to zero of the same sign. The checker uses
  it to tell a subnormal flush from a wrong value, per element of the program's own
  computation.

Inputs and values carry a leading batch axis (one row per case).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from conformance.core.case import Signature
from conformance.core.numerics import element_bits, flush_subnormals
from conformance.core.program import Program
from conformance.core.types import TensorType, element_type
from conformance.specs import load_spec

from . import evaluate_batch, implementation_defined

#: ops that move elements without computing: masks move the same way
MOVEMENT = frozenset({"reshape", "transpose", "slice", "concatenate", "broadcast_in_dim",
                      "reverse"})
#: ops that hand whole values (tuple leaves) through unchanged: each result leaf's mask
#: is the mask of the operand leaf it is
LEAF_MOVEMENT = frozenset({"tuple", "get_tuple_element", "optimization_barrier"})


@dataclasses.dataclass
class ProgramValues:
    """Every value of a program for a batch of cases, with its masks (module docstring)."""

    values: dict[str, np.ndarray]
    masked: dict[str, np.ndarray]
    inexact: dict[str, np.ndarray]

    def results(self, program: Program) -> list[np.ndarray]:
        return [self.values[r] for r in program.results]


def exact_op(sig: Signature) -> bool:
    """Is the op's verdict bit-exact for this signature (``exact`` or ``bits``)?"""
    return load_spec(sig.op).signature_accuracy(sig).kind in ("exact", "bits")


def _flush(x: np.ndarray) -> np.ndarray:
    return flush_subnormals(x)


def _batched(masks: Sequence[np.ndarray], sig: Signature, shapes) -> list[np.ndarray]:
    rank = max([len(s) - 1 for s in shapes] + [t.rank for t in sig.input_leaves])
    out = []
    for m, t in zip(masks, sig.input_leaves):
        if t.rank < rank:
            m = m.reshape((m.shape[0],) + (1,) * (rank - t.rank) + t.shape)
        out.append(m)
    return out


def propagate(sig: Signature, masks: Sequence[np.ndarray], batch: int) -> list[np.ndarray]:
    """Result masks of one op from its operands' masks (module docstring)."""
    shapes = [(batch,) + t.shape for t in sig.result_leaves]
    if not masks or not any(m.any() for m in masks):
        return [np.zeros(s, bool) for s in shapes]
    spec = load_spec(sig.op)
    if sig.op in LEAF_MOVEMENT:      # the op's own oracle moves the masks (as 0/1 values)
        moved = evaluate_batch(sig, [np.asarray(m).astype(t.element_type.dtype)
                                     for m, t in zip(masks, sig.input_leaves)])
        return [np.asarray(r) != 0 for r in moved]
    if spec.elementwise:
        m = np.logical_or.reduce(np.broadcast_arrays(*_batched(masks, sig, shapes)))
        return [np.broadcast_to(m, s).copy() for s in shapes]
    if sig.op in MOVEMENT:
        as_i1 = Signature.make(sig.op, [TensorType(t.shape, element_type("i1"))
                                        for t in sig.input_types],
                               [TensorType(t.shape, element_type("i1"))
                                for t in sig.result_types], sig.attributes)
        return [np.asarray(r, bool) for r in evaluate_batch(as_i1, list(masks))]
    if sig.op == "reduce":
        n = len(sig.result_types)
        dims = tuple(d + 1 for d in sig.attributes["dimensions"])
        any_in = np.logical_or.reduce([m.any(axis=dims) for m in masks[:n]])
        inits = np.logical_or.reduce([m.reshape(batch) for m in masks[n:]])
        m = any_in | inits.reshape((batch,) + (1,) * (any_in.ndim - 1))
        return [np.broadcast_to(m, s).copy() for s in shapes]
    anything = np.logical_or.reduce([m.reshape(batch, -1).any(axis=1) for m in masks])
    return [np.broadcast_to(anything.reshape((batch,) + (1,) * len(s[1:])), s).copy()
            for s in shapes]


def _rule_masks(sig: Signature, stacked, expected, batch) -> list[np.ndarray]:
    """Each result's elements that an implementation-defined rule of the op covers (any
    rule: masked, allowed set or permutation group alike)."""
    spec = load_spec(sig.op)
    out = [np.zeros((batch,) + t.shape, bool) for t in sig.result_leaves]
    if not spec.implementation_defined:
        return out
    rules = implementation_defined(sig, stacked, spec, expected)
    for rule in list(rules):
        for i, o in enumerate(out):
            m = np.asarray(rules.for_result(rule, i))
            m = m > 0 if m.dtype.kind in "iu" else m.astype(bool)
            if m.shape != o.shape:
                try:
                    m = np.broadcast_to(m, o.shape)
                except ValueError:
                    m = np.full(o.shape, bool(m.any()))
            o |= m & ~_settled(rules, rule, i, expected[i], o.shape)
    return out


def _settled(rules, rule: str, i: int, result: np.ndarray, shape) -> np.ndarray:
    """Elements of result ``i`` where every value ``rule`` allows is the oracle's, bit
    for bit (the complex maximum of an operand with itself: both "operands that compare
    equal" are one value): nothing is open there, so nothing is masked."""
    alts = rules.alternatives(rule)
    if not alts or rules.tests(rule):
        return np.zeros(shape, bool)
    anywhere = rules.anywhere(rule, i)
    want = np.asarray(result)
    if want.shape != tuple(shape):
        return np.zeros(shape, bool)
    settled = np.ones(shape, bool) if anywhere is None else \
        ~np.broadcast_to(np.asarray(anywhere, bool), shape)
    for cands in alts.values():
        for c in cands:
            got = np.broadcast_to(c[i], shape).astype(want.dtype)
            settled &= (element_bits(got) == element_bits(want)).all(axis=-1)
    return settled


def evaluate_program(program: Program, inputs: Sequence[np.ndarray],
                     flush: bool = False, batch: int | None = None,
                     masks: Sequence[np.ndarray] | None = None) -> ProgramValues:
    """Every value of ``program`` for the batched ``inputs`` (one array per argument;
    ``batch`` says how many cases a program without arguments has). ``masks``: the
    arguments' ``masked`` masks (default none; a loop body's state carries them)."""
    if batch is None:
        batch = inputs[0].shape[0] if inputs else 1
    values: dict[str, np.ndarray] = {}
    masked: dict[str, np.ndarray] = {}
    inexact: dict[str, np.ndarray] = {}
    for i, ((name, t), x) in enumerate(zip(program.arguments, inputs)):
        x = np.asarray(x)
        values[name] = _flush(x) if flush else x
        masked[name] = (np.asarray(masks[i], bool) if masks is not None
                        else np.zeros(x.shape, bool))
        inexact[name] = np.zeros(x.shape, bool)
    for o in program.operations:
        sig = o.signature
        xs = [values[v] for v in o.operands]
        if not sig.input_types:
            # constants (no inputs): one value for every case
            from . import evaluate
            res = [np.broadcast_to(r, (batch,) + r.shape).copy()
                   for r in evaluate(sig.op, [], sig.attributes, result_types=sig.result_types)]
        else:
            res = list(evaluate_batch(sig, xs))
        if flush:
            res = [_flush(r) for r in res]
        rule = _rule_masks(sig, xs, res, batch) if sig.input_types else \
            [np.zeros(r.shape, bool) for r in res]
        moved = propagate(sig, [masked[v] for v in o.operands], batch)
        taint = propagate(sig, [inexact[v] for v in o.operands], batch)
        if not exact_op(sig):
            taint = [np.ones(r.shape, bool) for r in res]
        for r, x, m1, m2, tt in zip(o.results, res, rule, moved, taint):
            values[r] = x
            masked[r] = m1 | m2
            inexact[r] = tt
    return ProgramValues(values, masked, inexact)


__all__ = ["ProgramValues", "evaluate_program", "propagate", "exact_op", "MOVEMENT",
           "LEAF_MOVEMENT"]
