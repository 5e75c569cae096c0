"""Formats without NaN (f4E2M1FN, f6E2M3FN, f6E3M2FN; issue 30): an element-wise result
whose exact value is not a real number (an IEEE NaN: rsqrt(-2), 0/0, remainder(-0, 0),
power(-6, -1.5)) has no value in them. The spec leaves it open as it leaves a NaN
converted to them (convert's nan_to_format_without_nan, TBD #180): specs/shared_rules.yaml
``no_real_value_without_nan``, which the ops that can meet it name (``- shared:``).
Any value passes there and is recorded; every other element is judged as before."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import oracles
from conformance.checking.compare import ACCURACY, PASS, VALUE
from conformance.core.case import Signature
from conformance.core.types import element_type
from conformance.specs import SpecError, load_spec, parse_spec, read_yaml

import planted
from element_batches import exact_results_over_every_value, judge, stacked_batch

RULE = "no_real_value_without_nan"

# (op, per case: the input values; the first element of each case has no real value,
# the second one has)
CASES = {
    "rsqrt": [[[-2.0, 1.0]], [[-1.5, 1.5]]],
    "sqrt": [[[-1.0, 4.0]], [[-6.0, 6.0]]],
    "log": [[[-1.0, 1.0]], [[-3.0, 2.0]]],
    "log_plus_one": [[[-2.0, 0.0]], [[-6.0, 1.0]]],
    "divide": [[[0.0, 3.0], [0.0, 1.5]], [[-0.0, -4.0], [0.0, 2.0]]],
    "remainder": [[[-0.0, 3.0], [0.0, 2.0]], [[4.0, -6.0], [0.0, 4.0]]],
    "power": [[[-6.0, 2.0], [-1.5, 2.0]], [[-2.0, 0.5], [0.5, 3.0]]],
}


@pytest.mark.parametrize("name", planted.NO_NAN_FORMATS)
@pytest.mark.parametrize("op", sorted(CASES))
def test_any_value_where_the_exact_result_is_no_real_number_passes(op, name):
    """-largest for the NaN (the oracle: a zero) passes, recorded as the backend's choice."""
    sig, stacked = stacked_batch(op, name, CASES[op])
    v, elements = judge(planted.NoNanFormatsLargestForNaN(), sig, stacked)
    assert v.case_class_names() == ["pass", "pass"], (elements, v.impl_defined)
    st = v.impl_defined[RULE]
    assert st["elements"] == 2 and st["conventional"] == 0   # both NaNs, neither the oracle's


@pytest.mark.parametrize("op", sorted(CASES))
def test_the_rule_covers_exactly_the_elements_without_a_real_value(op):
    sig, stacked = stacked_batch(op, "f4E2M1FN", CASES[op])
    masks = oracles.implementation_defined(sig, stacked)
    assert np.asarray(masks[RULE]).tolist() == [[True, False], [True, False]]
    # f32 has NaN: the rule does not apply
    f32 = Signature.make(op, ["tensor<2xf32>"] * len(stacked), ["tensor<2xf32>"])
    assert RULE not in oracles.implementation_defined(f32, [x.astype(np.float32)
                                                            for x in stacked])


def test_a_packed_neighbour_overwritten_with_the_nan_stand_in_fails():
    """sqrt(-1) may be anything; sqrt(4) = 2, zeroed with it, is a wrong value."""
    sig, stacked = stacked_batch("sqrt", "f4E2M1FN", CASES["sqrt"])
    v, elements = judge(planted.NoNanFormatsPackedNeighbour(), sig, stacked)
    assert v.case_class_names() == ["value", "value"]
    assert elements.tolist() == [[PASS, VALUE]] * 2       # open; judged beside it


def test_power_of_a_negative_base_with_an_integral_exponent_is_still_judged():
    """exp(y log x): power(-6, -1.5) may be anything, power(-2, 2) = 4 is fixed."""
    et = element_type("f4E2M1FN")
    a = np.array([[-6.0, -2.0], [-1.5, 0.5]]).astype(et.dtype)
    b = np.array([[-1.5, 2.0], [0.5, 2.0]]).astype(et.dtype)
    sig = Signature.make("power", ["tensor<2xf4E2M1FN>"] * 2, ["tensor<2xf4E2M1FN>"])
    v, elements = judge(planted.NoNanFormatsPowerByExpLog(), sig, [a, b])
    assert v.case_class_names() == ["accuracy", "pass"]   # (0 for 4: beyond 1 ulp)
    assert elements[0].tolist() == [PASS, ACCURACY]       # -6^-1.5 open, (-2)^2 = 4 wrong
    assert v.impl_defined[RULE]["elements"] == 2      # (-6)^-1.5, (-1.5)^0.5


def test_every_op_that_can_meet_no_real_value_in_these_formats_names_the_rule():
    """Enumerates every (pair of) f4E2M1FN / f6 values of every element-wise op whose
    binding is one of these formats throughout: where the exact result can be NaN, the
    op's spec must take the shared rule (else a backend is failed for what the spec
    leaves open); elsewhere the rule would never apply. (Ops with attributes are left
    out: compare's result is i1, reduce_precision keeps a finite value finite.)"""
    found = {op for op, _, r in exact_results_over_every_value(planted.NO_NAN_FORMATS)
             if np.isnan(r).any()}
    assert set(found) == {"divide", "log", "log_plus_one", "power", "remainder", "rsqrt",
                          "sqrt"}
    for op in sorted(set(found) | {"power_with_broadcast_dimensions"}):
        spec = load_spec(op)
        ids = [r.id for r in spec.implementation_defined]
        if op == "power_with_broadcast_dimensions":     # power's rules, broadcast
            assert "operation_rules" in ids
        else:
            assert RULE in ids, op


def test_a_shared_rule_reference_is_checked():
    data = read_yaml((load_spec("rsqrt").data and
                      (__import__("conformance.specs", fromlist=["SPEC_DIR"]).SPEC_DIR
                       / "rsqrt.yaml").read_text()))
    bad = dict(data, implementation_defined=[{"shared": "no_such_rule"}])
    with pytest.raises(SpecError, match="unknown shared rule 'no_such_rule'"):
        parse_spec(bad, "rsqrt.yaml")
    extra = dict(data, implementation_defined=[{"shared": RULE, "when": "true"}])
    with pytest.raises(SpecError, match="named alone"):
        parse_spec(extra, "rsqrt.yaml")
