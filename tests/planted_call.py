"""Backends with planted call/composite bugs (tests/test_call.py; loaded as
planted_call:Class by isolated runs, tests/ being on PYTHONPATH).

Each computes call/composite from the oracle's own pieces (oracles/call.py) and one
realistic bug, or one change the XLA text allows; every other op is the oracle."""
import json

import numpy as np

from conformance.core import region_program
from conformance.oracles.control_flow import run_body
from planted import OracleBackend as _Oracle, first_case


class ReturnsOperands(_Oracle):
    """A composite it does not know is passed through: its results are its operands
    (a backend that drops the call instead of inlining the decomposition)."""

    name = "composite-passthrough"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "composite":
            return inner
        return lambda inputs: [np.asarray(x).astype(t.element_type.dtype)
                               for x, t in zip(inputs, sig.result_types)]


class AddAsSubtract(_Oracle):
    """A wrong decomposition: every add of the body lowered as subtract (a backend's
    pattern for a composite it recognises by name, wrong)."""

    name = "composite-wrong-decomposition"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op not in ("composite", "call"):
            return inner
        d = json.loads(sig.regions[0][len(region_program.PREFIX):])
        for o in d["operations"]:
            if o["signature"]["op"] == "add":
                o["signature"]["op"] = "subtract"
        wrong = region_program.PREFIX + json.dumps(d, sort_keys=True, separators=(",", ":"))
        return lambda inputs: first_case(run_body(wrong, [np.asarray(x)[None] for x in inputs])[0],
                                   sig.result_types)


class DoublesByMultiplying(_Oracle):
    """The decomposition add(p0, p0) computed as p0 * 2 in the element type: another
    computation, the same values (exact in binary floating point, -0, inf and NaN
    included), as the XLA text allows ("can be replaced with its decomposition")."""

    name = "composite-equivalent"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "composite":
            return inner
        ops = region_program.parse(sig.regions[0]).program.operations
        assert [o.signature.op for o in ops] == ["add"] and ops[0].operands[0] == \
            ops[0].operands[1], "this planted backend knows add(p0, p0) only"
        t = sig.result_types[0]

        def run(inputs):
            x = np.asarray(inputs[0])
            with np.errstate(all="ignore"):
                return [(x * x.dtype.type(2)).astype(t.element_type.dtype)]
        return run


class RefusesComposites(_Oracle):
    """Says Unsupported for every composite (a backend without composite support), while
    it compiles every op of the decomposition."""

    name = "no-composites"

    def compile(self, sig):
        if sig.op == "composite":
            from conformance.backends import Unsupported
            raise Unsupported("composite: not implemented")
        return super().compile(sig)


class RefusesCompositesAndAdd(RefusesComposites):
    """Says Unsupported for composites and for add: it could not run an add
    decomposition either, so its refusal stands."""

    name = "no-composites-no-add"

    def compile(self, sig):
        if sig.op == "add":
            from conformance.backends import Unsupported
            raise Unsupported("add: not implemented")
        return super().compile(sig)
