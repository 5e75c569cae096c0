"""map: the oracle is the region applied element-wise; results are judged as the called
op's own spec judges them (verdict kind ``region``): a planted backend within sine's ULP
bound passes, one ulp off an IEEE-exact add fails, and a fused multiply-add (one rounding
where the spec's two ops round twice, what XLA's CPU backend does) fails."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.checking.plan import batch_for
from conformance.specs import Accuracy, load_spec
from conformance.specs.validity import violations
from conformance.checking.verdicts.region import region_accuracy


def _sig(body, types, shape=(4, 8), out=None):
    t = [f"tensor<{'x'.join(map(str, shape))}x{e}>" for e in types]
    r = f"tensor<{'x'.join(map(str, shape))}x{out or types[0]}>"
    return Signature.make("map", t, [r], {"dimensions": list(range(len(shape)))},
                          regions=(f"({', '.join(types)}) -> {body}",))


class Planted(Backend):
    """The oracle with ``change(result, inputs)`` applied."""

    isolate = False

    def __init__(self, change, name="planted"):
        self.change, self.name = change, name
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")

        def run(inputs):
            (out,) = oracles.evaluate(sig.op, inputs, sig.attributes,
                                      result_types=sig.result_types, regions=sig.regions)
            with np.errstate(all="ignore"):
                return [np.asarray(self.change(out, inputs)).astype(out.dtype)]
        return run


def classes(backend, sig, batches=3):
    spec = load_spec("map")
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    counts: dict[str, int] = {}
    for b in range(batches):
        v = check.run_batch(b, batch_for(0, "default", spec, sig.input_types[0].element_type.name,
                                         0, b, sig)).results[backend.name].verdict
        for cls, n in v.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


def _ulps(k):
    def change(out, inputs):
        fin = np.isfinite(out) & (np.abs(out) > np.finfo(out.dtype).tiny) & \
            (np.abs(out) < np.finfo(out.dtype).max / 2)
        bumped = out.copy()
        for _ in range(k):
            bumped = np.where(fin, np.nextafter(bumped, np.float32(np.inf)), bumped)
        return bumped
    return change


def test_region_accuracy_is_the_called_ops():
    assert region_accuracy("(f32) -> sine(arg0)") == load_spec("sine").accuracy("f32")
    assert region_accuracy("(f32, f32) -> add(arg0, arg1)").kind == "exact"
    assert region_accuracy("(f32, f32) -> add(multiply(arg0, arg1), arg0)").kind == "exact"
    assert region_accuracy("(f32) -> arg0") == Accuracy("bits")
    mixed = region_accuracy("(f32, f32) -> add(sine(arg0), exponential(arg1))")
    assert mixed.kind == "ulp" and mixed.bound == (load_spec("sine").accuracy("f32").bound +
                                                  load_spec("exponential").accuracy("f32").bound)


def test_sine_within_its_ulp_bound_passes_and_beyond_it_fails():
    sig = _sig("sine(arg0)", ["f32"])
    bound = int(load_spec("sine").accuracy("f32").bound)
    assert set(classes(Planted(_ulps(bound)), sig)) <= {"pass"}
    assert classes(Planted(_ulps(bound + 3)), sig).get("accuracy", 0) > 0


def test_one_ulp_off_an_exact_add_fails():
    sig = _sig("add(arg0, arg1)", ["f32", "f32"])
    assert classes(Planted(_ulps(1)), sig).get("value", 0) > 0


def test_a_fused_multiply_add_fails():
    """The spec's multiply then add round twice; one rounding (an FMA) differs."""
    sig = _sig("add(multiply(arg0, arg1), arg0)", ["f32", "f32"])

    def fma(out, inputs):
        a, b = (np.asarray(x, np.float64) for x in inputs)
        return (a * b + a).astype(np.float32)          # exact product: one rounding
    assert classes(Planted(fma), sig).get("value", 0) > 0
    assert set(classes(Planted(lambda out, inputs: out), sig)) <= {"pass"}


def test_identity_region_is_judged_bit_for_bit():
    sig = _sig("arg0", ["f32"])
    def quiet(out, inputs):        # sets the quiet bit of every NaN: another NaN payload
        bits = out.view(np.uint32).copy()
        nan = np.isnan(out)
        bits[nan] |= np.uint32(0x00400000)
        bits[nan] &= np.uint32(0xFFFFFFFE)
        return bits.view(np.float32)
    counts = classes(Planted(quiet), sig)
    assert counts.get("nan", 0) + counts.get("value", 0) > 0, counts


def test_oracle_applies_the_region_to_every_element():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    (r,) = oracles.evaluate("map", [x, x + 1], {"dimensions": [0, 1]},
                            result_types=["tensor<2x3xi1>"],
                            regions=("(si32, si32) -> compare(arg0, arg1, 'LT', 'SIGNED')",))
    assert r.all()
