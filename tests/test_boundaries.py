"""Values at the points where an op's result changes regime (issue 12, point 3): an
input's ``boundaries:`` in the spec names them (exp's overflow threshold, where tanh
rounds to 1, a conversion's destination range), and the generators draw a share of the
input's elements within a few ULPs of them, so that a kernel whose cut-off constant is
a little off is caught at quick depth, while one that is right to the ULP bound passes.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.literals import bit_patterns
from conformance.core.types import element_type
from conformance.generators.values import BOUNDARY_ULPS, boundary_points, near_points
from conformance.checking.plan import batch_for, binding_for, plan_binding
from conformance.specs import SpecError, load_file, load_spec
from planted import OracleBackend
from test_specs import _write


@pytest.mark.parametrize("et", ["f32", "bf16", "f8E4M3FN", "f64", "f16"])
def test_near_points_are_within_a_few_ulps_and_finite(et):
    t = element_type(et)
    top = float(ml_dtypes.finfo(t.dtype).max)
    points = [1.0, -3.0, top, np.log(top)]
    v = near_points(t, points, 4000, np.random.default_rng(1))
    assert v.dtype == t.dtype and np.isfinite(v.astype(np.float64)).all()
    base = np.array(points, np.float64).astype(t.dtype)
    vb = bit_patterns(v).astype(np.int64)[:, None]
    bb = bit_patterns(base).astype(np.int64)[None, :]
    nearest = np.abs(vb - bb).min(axis=1)
    assert nearest.max() <= BOUNDARY_ULPS
    assert len(np.unique(v)) > 8        # not the points alone: their neighbourhoods


def test_near_points_of_integers_are_clipped_to_the_range():
    t = element_type("ui8")
    v = near_points(t, [256.0, -1.0, 128.0], 1000, np.random.default_rng(2))
    assert v.dtype == np.uint8
    ints = v.astype(np.int64)
    assert ints.min() >= 0 and ints.max() == 255 and ((ints >= 124) & (ints <= 132)).any()


def test_complex_inputs_get_the_points_in_their_real_part():
    t = element_type("complex<f32>")
    v = near_points(t, [88.72], 200, np.random.default_rng(3))
    assert np.allclose(v.real, 88.72, rtol=1e-5)


def _sig(op, it, rt):
    return Signature.make(op, [f"tensor<4x{it}>"], [f"tensor<4x{rt}>"])


def test_boundary_points_read_the_spec():
    spec = load_spec("exponential")
    assert boundary_points(_sig("exponential", "f32", "f32"), spec, "operand")[0] == \
        pytest.approx(88.7228, abs=1e-4)
    tanh = boundary_points(_sig("tanh", "f64", "f64"), load_spec("tanh"), "operand")
    assert 19.0 < max(tanh) < 19.1 and any(9.0 < p < 9.1 for p in tanh)
    conv = boundary_points(_sig("convert", "f32", "ui32"), load_spec("convert"), "operand")
    assert {2.0 ** 31, 2.0 ** 32, 2.0 ** 32 - 1} <= set(conv)
    # a float destination: its overflow threshold
    assert 65504.0 in boundary_points(_sig("convert", "f64", "f16"), load_spec("convert"),
                                      "operand")


def _quick_values(op, key):
    spec = load_spec(op)
    sigs = plan_binding(spec, binding_for(spec, key), 0, "quick")
    return spec, [(i, s, batch_for(0, "quick", spec, key, i, 0, s)) for i, s in enumerate(sigs)]


@pytest.mark.parametrize("op,key,lo,hi", [
    ("exponential", "f32", 88.70, 88.7229),      # finite exp just below the overflow
    ("tanh", "f64", 9.0, 9.02),                  # tanh < 1 in f64 where f32's saturates
    ("convert", "f32->ui32", 2.0 ** 31, 2.0 ** 32 - 1),  # in range, above 2^31
])
def test_quick_depth_draws_values_next_to_each_boundary(op, key, lo, hi):
    _, planned = _quick_values(op, key)
    values = np.concatenate([np.asarray(x[0], np.float64).reshape(-1) for _, _, x in planned])
    assert ((np.abs(values) >= lo) & (np.abs(values) <= hi)).any()


class ExpCutOffLow(OracleBackend):
    """f32 exp returning inf above 88.7 (the cut-off constant rounded down)."""
    name = "exp-cutoff"

    def compile(self, sig):
        inner = super().compile(sig)

        def run(inputs):
            (out,) = inner(inputs)
            return [np.where(np.asarray(inputs[0]) > np.float32(88.7), np.float32(np.inf),
                             out).astype(np.float32)]
        return run


class ExpOneUlpLow(OracleBackend):
    """f32 exp one ULP toward zero on every finite nonzero result: within exp's ULP
    bound of the spec's accuracy table (4 for f32), so it must pass."""
    name = "exp-ulp"

    def compile(self, sig):
        inner = super().compile(sig)

        def run(inputs):
            (out,) = inner(inputs)
            out = np.asarray(out, np.float32)
            ok = np.isfinite(out) & (out > np.finfo(np.float32).tiny)
            return [np.where(ok, np.nextafter(out, np.float32(0)), out).astype(np.float32)]
        return run


def _verdicts(backend, op, key):
    spec, planned = _quick_values(op, key)
    counts: dict[str, int] = {}
    for i, sig, stacked in planned:
        check = SignatureCheck(spec, sig, [backend])
        check.compile()
        for cls, n in check.run_batch(0, stacked).results[backend.name].verdict.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


def test_an_early_overflow_cut_off_fails_at_quick_depth():
    counts = _verdicts(ExpCutOffLow(), "exponential", "f32")
    assert counts.get("accuracy", 0) + counts.get("value", 0) > 0, counts


def test_exp_within_its_ulp_bound_next_to_the_boundary_passes():
    assert set(_verdicts(ExpOneUlpLow(), "exponential", "f32")) == {"pass"}


def test_a_boundary_with_an_unknown_function_is_a_spec_error(tmp_path):
    import yaml
    data = yaml.safe_load(open(load_spec("exponential").path).read())
    data["inputs"][0]["boundaries"] = ["[ln(nosuch(operand))]"]
    p = _write(tmp_path, "exponential", data)
    with pytest.raises(SpecError, match=r"inputs\[0\]\.boundaries\[0\].*nosuch"):
        load_file(p)
