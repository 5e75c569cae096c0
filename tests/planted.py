"""Backends with planted divergences, for the tests (loaded as planted:Class; tests/
is on sys.path under pytest, and subprocesses get it through PYTHONPATH).

Each implements only ``compile`` (the vendor path) on top of the oracle, so the base
class supplies run() and the batched path.
"""
import numpy as np

from conformance import oracles
from conformance.backends import Backend, Unsupported
from conformance.specs.validity import violations


class OracleBackend(Backend):
    name = "oracle-copy"

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        return lambda inputs: oracles.evaluate(sig.op, inputs, sig.attributes,
                                               result_types=sig.result_types)


class PlantedAddF32(OracleBackend):
    """The oracle, except that f32 add results are one ulp high where lhs > 1."""

    name = "planted"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "add" or sig.input_types[0].element_type.name != "f32":
            return inner

        def run(inputs):
            (out,) = inner(inputs)
            bump = (np.asarray(inputs[0]) > 1) & np.isfinite(out)
            return [np.where(bump, np.nextafter(out, np.float32(np.inf)), out)
                    .astype(np.float32)]
        return run


class NoSine(OracleBackend):
    name = "nosine"

    def compile(self, sig):
        if sig.op == "sine":
            raise Unsupported("sine is not implemented by this backend")
        return super().compile(sig)


class AcceptsEverything(OracleBackend):
    """Runs invalid programs instead of rejecting them."""

    name = "lenient"

    def compile(self, sig):
        if sig.invalid:
            return lambda inputs: [np.zeros(t.shape, t.element_type.dtype)
                                   for t in sig.result_types]
        return super().compile(sig)


class CrashesOnNegativeZero(OracleBackend):
    """Kills its own process when an f32 negate sees -0.0 (a stand-in for a segfault)."""

    name = "crashy"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "negate" or sig.input_types[0].element_type.name != "f32":
            return inner

        def run(inputs):
            x = np.asarray(inputs[0])
            if ((x == 0) & np.signbit(x)).any():
                import os
                os.abort()
            return inner(inputs)
        return run


class HangsOnNaN(OracleBackend):
    """Never returns when an f32 abs sees a NaN."""

    name = "hangs"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "abs" or sig.input_types[0].element_type.name != "f32":
            return inner

        def run(inputs):
            if np.isnan(np.asarray(inputs[0])).any():
                import time
                time.sleep(3600)
            return inner(inputs)
        return run
