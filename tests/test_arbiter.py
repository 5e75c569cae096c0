"""The mpmath arbiter (conformance/checking/arbiter.py): which side of a transcendental
disagreement is wrong, recorded with the divergence; the worst case is the one shown."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conformance.checking import arbiter
from conformance.apps.cli import main
from conformance.specs import load_spec


def test_the_backend_is_wrong_when_it_is_far_from_the_true_value():
    x = np.float32(100.0)
    true = np.float32(np.sin(np.float64(100.0)))
    off = (np.array([true]).view(np.int32) + 50).view(np.float32)[0]
    v = arbiter.arbitrate("sin(operand)", ["operand"], [x], true, off, 4)
    assert v["wrong"] == "backend" and v["oracle"] == 0 and v["backend"] == 50


def test_the_oracle_is_wrong_when_the_backend_is_right():
    x = np.float32(100.0)
    true = np.float32(np.sin(np.float64(100.0)))
    off = (np.array([true]).view(np.int32) + 3).view(np.float32)[0]
    v = arbiter.arbitrate("sin(operand)", ["operand"], [x], off, true, 4)
    assert v["wrong"] == "oracle", v
    assert "the ORACLE is wrong" in arbiter.describe(v)


def test_a_negative_zero_input_leaves_the_arbiter_undecided():
    """mpmath has no -0: atan2(-0, -1) is -pi by IEEE and +pi in mpmath, so it must not
    blame the side that kept the sign (an IREE run had it call the oracle wrong)."""
    y, x = np.float32(-0.0), np.float32(-1.0)
    right, wrong = np.float32(-np.pi), np.float32(np.pi)
    v = arbiter.arbitrate("atan2(lhs, rhs)", ["lhs", "rhs"], [y, x], right, wrong, 4)
    assert v["wrong"] == "undecided" and "undecided" in arbiter.describe(v)
    # +0 is fine for mpmath: +pi is right and -pi is the backend's error
    v = arbiter.arbitrate("atan2(lhs, rhs)", ["lhs", "rhs"], [np.float32(0.0), x], wrong,
                          right, 4)
    assert v["wrong"] == "backend"


def test_within_the_bound_neither_is_wrong_and_nan_matches_an_undefined_value():
    x = np.float32(2.0)
    true = np.float32(np.log(np.float64(2.0)))
    near = (np.array([true]).view(np.int32) + 2).view(np.float32)[0]
    assert arbiter.arbitrate("log(operand)", ["operand"], [x], true, near, 4)["wrong"] \
        == "neither"
    # log(-1) is not a real number: NaN is right, a number is wrong.
    v = arbiter.arbitrate("log(operand)", ["operand"], [np.float32(-1)], np.float32(np.nan),
                          np.float32(0.5), 4)
    assert v["wrong"] == "backend" and v["oracle"] == 0 and v["backend"] is None


def test_division_by_zero_gives_ieee_infinity():
    t = arbiter.true_value("1 / sqrt(operand)", ["operand"], [np.float32(0)])
    assert arbiter.rounded(t, np.dtype(np.float32)) == np.inf


def test_complex_distance_is_relative_to_the_true_value_in_eps():
    z = np.complex64(1 + 1j)
    true = np.complex64(np.exp(np.complex128(1 + 1j)))
    d = arbiter.distance(true * np.float32(1 + 1e-5), arbiter.true_value(
        "exp(operand)", ["operand"], [z]), np.dtype(np.complex64))
    assert 50 < d < 100      # 1e-5 / eps(f32) ~ 84


@pytest.mark.parametrize("text", ["__import__('os')", "operand.real", "lambda: 1",
                                  "sin(operand, k=1)", "'x'"])
def test_reference_expressions_are_whitelisted(text):
    with pytest.raises(arbiter.ReferenceError, match="reference"):
        arbiter.parse(text)


def test_every_shipped_reference_parses_and_names_the_op_inputs():
    from conformance.specs import op_names
    for name in op_names():
        spec = load_spec(name)
        ref = spec.data.get("reference")
        if ref:
            arbiter.parse(ref)
            args = [np.float32(0.5)] * len(spec.inputs)
            arbiter.true_value(ref, [t.name for t in spec.inputs], args)


def test_a_run_records_the_arbiter_and_shows_the_worst_case(tmp_path):
    code = main(["run", "--backend", "planted:SineUlpsOff", "--ops", "sine", "--types", "f32",
                 "--depth", "quick", "--no-invalid", "--no-examples", "--no-progress",
                 "--out", str(tmp_path / "out")])
    assert code == 1
    records = [json.loads(line) for line in
               (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    found = [r for r in records if r.get("kind") == "divergence"
             and r["class"] in ("accuracy", "value")]
    assert found
    for r in found:
        assert r["arbiter"]["wrong"] == "backend", r["arbiter"]
        assert r["arbiter"]["oracle"] == 0
    # The worst case of the batch is the one shown: the largest |x| among the diverging.
    acc = [r for r in found if r["class"] == "accuracy"]
    if acc:
        from conformance.core.literals import decode
        shown = abs(float(np.asarray(decode(acc[0]["case"]["inputs"][0])).reshape(-1)[0]))
        assert shown >= 1000 or acc[0]["arbiter"]["backend"] >= max(
            r["arbiter"]["backend"] for r in acc)
