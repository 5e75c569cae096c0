"""Backends with planted control-flow bugs (tests/test_control_flow.py; loaded as
planted_control_flow:Class by isolated runs, tests/ being on PYTHONPATH).

Each computes if/case/while with the oracle's own pieces (oracles/control_flow.py) and
one realistic bug; every other op is the oracle."""
import numpy as np

from conformance.oracles import control_flow as cf
from planted import OracleBackend as _Oracle, first_case


class CaseClampsNegativeIndex(_Oracle):
    """case with lax.switch's clamping: a negative index takes branch 0 (the spec sends it
    to the last branch)."""

    name = "case-clamps"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "case":
            return inner
        return lambda inputs: inner([np.maximum(np.asarray(inputs[0]), 0)] + list(inputs[1:]))


class WhileOneIterationTooMany(_Oracle):
    """while that runs the body once more than the cond allows (a do-while)."""

    name = "while-plus-one"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "while":
            return inner
        body = sig.regions[1]

        def run(inputs):
            out = inner(inputs)
            values, _ = cf.run_body(body, [np.asarray(x)[None] for x in out])
            return first_case(values, sig.result_types)
        return run


class WhileUntilEqual(_Oracle):
    """while whose loop test is ``counter != bound`` (the first two state tensors) instead
    of its cond region: a bound below the counter never ends (a hang)."""

    name = "while-until-equal"
    isolate = True

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "while":
            return inner
        body = sig.regions[1]

        def run(inputs):
            state = [np.asarray(x)[None] for x in inputs]
            while int(state[0].reshape(-1)[0]) != int(state[1].reshape(-1)[0]):
                state, _ = cf.run_body(body, state)
            return first_case(state, sig.result_types)
        return run


class ChangesAllowed(_Oracle):
    """The oracle, with every float NaN given another payload and every element the spec
    leaves open (the oracle's implementation-defined masks) given another value."""

    name = "allowed-changes"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op not in ("if", "case", "while"):
            return inner

        def run(inputs):
            out = inner(inputs)
            regions = sig.regions
            _, masks = cf.evaluate_batched(sig.op, [np.asarray(x)[None] for x in inputs],
                                           list(regions))
            changed = []
            for x, m in zip(out, masks):
                x = np.array(x, copy=True)
                m = np.asarray(m[0]).reshape(x.shape)
                if x.dtype.kind in "iu":
                    x[m] = x[m] ^ 1
                elif x.dtype == np.float32:
                    bits = x.view(np.uint32)
                    nan = np.isnan(x)
                    bits[nan] = (bits[nan] | np.uint32(0x00400001)) ^ np.uint32(0x80000000)
                changed.append(x)
            return changed
        return run


class CaseMaximumOfItselfLosesZeroSigns(_Oracle):
    """case whose branch computes the complex maximum of a value with itself as that value
    with its zero parts made +0 (a folding that drops the sign of zero)."""

    name = "case-self-maximum"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "case":
            return inner

        def run(inputs):
            return [np.asarray(x) + np.zeros((), np.asarray(x).dtype) for x in inner(inputs)]
        return run


class CaseMaximumPicksRhsOnTies(_Oracle):
    """case whose branch's complex maximum returns rhs of two operands that compare equal
    (the spec allows either): of an operand with itself, that is the same bits."""

    name = "case-maximum-rhs"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "case":
            return inner
        return lambda inputs: [np.array(x, copy=True) for x in inner(inputs)]
