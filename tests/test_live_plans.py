"""No degenerate plans (issue 32 item 1): every (op, type binding) plan holds a signature
whose results depend on its inputs through the op's main computation.

Measured on the signatures alone (no backend runs): every tensor of the signature holds
elements and the spec's ``coverage: live:`` expression holds (reduce_window: a window holds
at least two operand elements; all_to_all: processes exchange something), and each of the
op's signature-level coverage targets that the plan has room for (the first
signatures-per-binding of them, in the spec's order) is met by such a signature (fft's
inverse transform, triangular_solve's ADJOINT for complex types).
"""
from __future__ import annotations

import pytest

from conformance.checking import plan
from conformance.core.case import Signature
from conformance.generators import coverage
from conformance.specs import expressions as ex
from conformance.specs import load_spec, op_names
from type_sampling import sampled  # noqa: E402  (CI time: the newer float formats once)


def _degenerate(depth: str, ops) -> list:
    bad = []
    for op in ops:
        spec = load_spec(op)
        n = plan.signatures_per_binding(spec, plan.DEPTHS[depth])
        for b in sampled(spec.type_bindings()):
            sigs = plan.plan_binding(spec, b, 0, depth)
            if not any(coverage.live(spec, s, b) for s in sigs):
                bad.append((op, plan.binding_key(b), "no live signature"))
            for t in coverage.model(spec, b).signature_targets[:n]:
                if not any(coverage.meets_where(spec, s, b, t.where)
                           and coverage.live(spec, s, b) for s in sigs):
                    bad.append((op, plan.binding_key(b), t.name))
    return bad


def test_every_binding_of_every_op_plans_a_live_signature_at_quick():
    assert _degenerate("quick", op_names()) == []


@pytest.mark.parametrize("op", ["fft", "triangular_solve", "all_to_all", "reduce_window"])
def test_the_ops_that_had_degenerate_plans_have_none_at_default(op):
    assert _degenerate("default", [op]) == []


def test_the_ops_that_had_degenerate_plans_meet_their_targets():
    """What the issue found: the only quick IFFT was zero-sized, complex ADJOINT
    triangular_solve was zero-sized, all_to_all exchanged nothing, the only f64 add
    reduce_window put every window on padding."""
    for op, key, want in [("fft", "complex<f32>", "IFFT"), ("fft", "complex<f64>", "IFFT")]:
        spec = load_spec(op)
        b = plan.binding_for(spec, key)
        assert any(s.attributes["fft_type"] == want and coverage.live(spec, s, b)
                   for s in plan.plan_binding(spec, b, 0, "quick")), (op, key)
    spec = load_spec("triangular_solve")
    for key in ("complex<f32>", "complex<f64>"):
        b = plan.binding_for(spec, key)
        assert any(s.attributes["transpose_a"] == "ADJOINT" and coverage.live(spec, s, b)
                   for s in plan.plan_binding(spec, b, 0, "quick")), key
    spec = load_spec("reduce_window")
    for depth in ("quick", "default"):
        b = plan.binding_for(spec, "f64")
        assert any(coverage.live(spec, s, b) and "add(" in s.regions[0]
                   for s in plan.plan_binding(spec, b, 0, depth)), depth


def test_windows_on_padding_only_are_not_live():
    # the f64 reduce_window the quick plan held: base dilation 3 and padding put every
    # window on padding and holes
    dead = Signature.make(
        "reduce_window", ["tensor<4x1x4xf64>", "tensor<f64>"], ["tensor<1x2x10xf64>"],
        {"window_dimensions": [4, 2, 1], "window_strides": [3, 2, 1],
         "base_dilations": [3, 3, 3], "window_dilations": [3, 2, 1],
         "padding": "dense<[[2, 0], [3, 1], [2, -2]]> : tensor<3x2xi64>"},
        regions=("(f64, f64) -> add(arg1, arg0)",))
    spec = load_spec("reduce_window")
    assert coverage.nonempty(dead) and not coverage.live(spec, dead, {"E": "f64"})
    reach = ex.FUNCTIONS["window_reaches"]
    assert reach([5], [2], [1], [1], [1], [[0, 0]], 2)           # plain windows
    assert not reach([5], [2], [1], [1], [1], [[0, 0]], 3)       # two elements at most
    assert not reach([3], [1], [3], [1], [3], [[2, -2]])          # the window on padding
    assert reach([3], [2], [2], [2], [2], [[-2, 0]], 2)           # a hole skipped
    assert not reach([0], [1], [1], [1], [1], [[0, 0]])           # no elements
    assert reach([2, 3], [2, 2], [1, 1], [1, 1], [1, 1], [[0, 0], [0, 0]], 4)


def test_all_to_all_with_one_process_per_group_is_not_live():
    spec = load_spec("all_to_all")
    b = plan.binding_for(spec, "f32")
    sigs = plan.plan_binding(spec, b, 0, "quick")
    assert any(s.attributes["split_count"] >= 2 and coverage.nonempty(s) for s in sigs)
    one = [s for s in plan.plan_signatures(spec, b, 40, 0, plan.DEPTHS["quick"].shape_profile)
           if s.attributes["split_count"] == 1 and coverage.nonempty(s)]
    assert one and not any(coverage.live(spec, s, b) for s in one)
