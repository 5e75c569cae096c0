"""Backends with planted bugs in the tuple and token ops of a module (issue 29), loaded
as planted_tuples:Class (tests/ is on sys.path under pytest).

Each is planted_programs.OracleProgram (right everywhere, single ops and whole modules
op by op) with one op changed, alone and inside whole modules alike. A module's tuple
values are their leaves (conformance.core.program), so each op gets and returns leaves,
as in a single-op case.
"""
import numpy as np

from conformance.core.types import TupleType
from planted_programs import OracleProgram


def _element_leaves(t: TupleType) -> list[tuple[int, int]]:
    """(first leaf, leaf count) of each element of a tuple type, depth-first."""
    out, at = [], 0
    for e in t.elements:
        n = len(e.leaves())
        out.append((at, n))
        at += n
    return out


class WrongTupleElement(OracleProgram):
    """get_tuple_element picks the element after ``index`` where that one has the same
    type (an off-by-one in a lowering's tuple index: the types still check)."""

    name = "wrong-tuple-element"

    def compile(self, signature):
        right = super().compile(signature)
        if signature.op != "get_tuple_element":
            return right
        (t,) = signature.input_types
        k = signature.attributes["index"]
        same = [j for j in range(k + 1, len(t.elements)) if t.elements[j] == t.elements[k]]
        if not same:
            return right
        first, n = _element_leaves(t)[same[0]]
        return lambda leaves: [np.array(x, copy=True) for x in leaves[first:first + n]]


class TupleLosesNegativeZero(OracleProgram):
    """tuple copies its float leaves with an add of +0.0 (a copy loop that computes):
    -0.0 comes out +0.0."""

    name = "tuple-plus-zero"

    def compile(self, signature):
        right = super().compile(signature)
        if signature.op != "tuple":
            return right

        def run(leaves):
            return [x + x.dtype.type(0) if x.dtype.kind == "f" else x
                    for x in (np.asarray(r) for r in right(leaves))]
        return run


class TupleQuietsNaN(OracleProgram):
    """tuple gives every NaN leaf element the canonical quiet NaN (a copy through a
    float unit): where the spec moves values every bit must arrive (kind ``bits``), so
    a signalling NaN's lost payload is a ``nan`` divergence."""

    name = "tuple-quiets-nan"

    def compile(self, signature):
        right = super().compile(signature)
        if signature.op != "tuple":
            return right

        def run(leaves):
            out = []
            for x in (np.asarray(r) for r in right(leaves)):
                if x.dtype.kind == "f":
                    x = np.where(np.isnan(x), x.dtype.type(np.nan), x).astype(x.dtype)
                out.append(x)
            return out
        return run


class FailsOnTokenJoin(OracleProgram):
    """after_all of two or more tokens fails (a runtime without a token join)."""

    name = "no-token-join"

    def compile(self, signature):
        if signature.op == "after_all" and len(signature.input_types) > 1:
            raise RuntimeError("UNIMPLEMENTED: after_all of 2 tokens")
        return super().compile(signature)


class BarrierSwapsResults(OracleProgram):
    """optimization_barrier returns its first two results swapped where their types
    match (a lowering that pairs results with operands in the wrong order)."""

    name = "barrier-swaps"

    def compile(self, signature):
        right = super().compile(signature)
        if signature.op != "optimization_barrier" or len(signature.input_types) < 2 or \
                signature.input_types[0] != signature.input_types[1]:
            return right

        def run(leaves):
            out = list(right(leaves))
            out[0], out[1] = out[1], out[0]
            return out
        return run
