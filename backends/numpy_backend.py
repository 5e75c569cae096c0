"""The oracle as a backend: the suite's self-check, and a reference for vendors.

It rejects invalid programs the way a conforming implementation must, by checking
the signature against the spec's constraints.
"""
from __future__ import annotations

from typing import Any

from conformance import oracles
from conformance.core.case import Case, Signature
from conformance.specs.validity import violations

from .base import Backend


class InvalidProgram(ValueError):
    """The signature breaks a rule of the spec."""


class NumpyBackend(Backend):
    name = "numpy"
    isolate = False     # in-process: the oracle aborts on nothing the suite sends
    no_pack = ("the oracle itself compiles nothing (each batch is evaluated from the "
               "signature): a pack would share nothing")

    def describe(self) -> dict[str, Any]:
        import ml_dtypes
        import numpy
        return {"name": self.name, "numpy": numpy.__version__, "ml_dtypes": ml_dtypes.__version__}

    def _check(self, sig: Signature) -> None:
        broken = violations(sig)
        if broken:
            raise InvalidProgram(f"{sig.op}: breaks {', '.join(broken)}")

    def compile(self, signature: Signature):
        self._check(signature)
        if signature.num_replicas * signature.num_partitions > 1:
            # per-process values on a grid (collectives): the oracle's case path
            return lambda inputs: oracles.evaluate_case(Case(signature, tuple(inputs)))
        return lambda inputs: oracles.evaluate(signature.op, inputs, signature.attributes,
                                               result_types=signature.result_types,
                                               input_types=signature.input_types,
                                               regions=signature.regions)

    def compile_batch(self, signature: Signature):
        self._check(signature)
        return lambda stacked: oracles.evaluate_batch(signature, stacked)
