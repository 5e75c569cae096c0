"""Generators: valid by construction (measured), invalid ones break exactly one rule,
values mix in the special values, and everything is deterministic for a seed."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conformance.generators import (batch_inputs, breakable, candidates, canonical,
                                    invalid_signatures, signatures, special_values, unbreakable)
from conformance.apps.runner import plan_signatures
from conformance.specs import load_spec, op_names
from conformance.specs.validity import violations
from conformance.core.types import ALL_ELEMENT_TYPES, element_type
from type_sampling import sampled  # noqa: E402  (CI time: the newer float formats once)

SETTINGS = settings(max_examples=15, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("op", op_names())
def test_generated_signatures_are_valid(op):
    """Validity is measured against the spec's own constraint expressions: 100%."""
    seen = []

    @SETTINGS
    @given(signatures(op, profile="quick"))
    def check(sig):
        seen.append(sig)
        assert violations(sig) == [], sig.key()

    check()
    assert seen


@pytest.mark.parametrize("op", op_names())
def test_every_type_binding_has_a_valid_canonical_signature(op):
    spec = load_spec(op)
    for binding in sampled(spec.type_bindings()):
        for shape in ((), (3,), (2, 0)):
            sig = canonical(spec, binding, shape)
            assert violations(sig, spec) == [], sig.key()


@pytest.mark.parametrize("op", op_names())
def test_invalid_candidates_break_exactly_their_rule(op):
    spec = load_spec(op)
    binding = spec.type_bindings()[0]
    valid = canonical(spec, binding, (2, 3))
    for rule in breakable(spec):
        for bad in candidates(spec, valid, rule)[:20]:
            broken = violations(bad, spec)
            assert rule in broken, (rule, bad.key())
            assert bad.invalid == rule


# Rules no program text can break, declared so in their spec with the reason: a rule on
# the run-time values of an operand (the verifier cannot see them), or of quantized
# tensors an op is not drawn with. Pinned here, so that a new one is a decision.
DECLARED_UNBREAKABLE = {
    ("collective_broadcast", "C6"),                         # the root operand's values
    ("dynamic_gather", "C8"), ("dynamic_gather", "C12"),    # slice_sizes' values
    ("dynamic_pad", "C3"),                                  # the padding's values
    ("dynamic_broadcast_in_dim", "C6"), ("dynamic_reshape", "C3"),   # per-axis quantized
    *(("dynamic_conv", f"C{i}") for i in range(28, 35)),    # quantized convolution
    ("async_start", "C1"), ("async_start", "C2"),           # the body's op count and name
}


def test_every_labelled_constraint_is_breakable():
    """The negative-conformance coverage of the spine: every C-constraint has a generator,
    but those their spec declares unbreakable with a reason (and this test pins)."""
    declared = set()
    for op in op_names():
        spec = load_spec(op)
        for c in spec.constraints:
            if c.unbreakable:
                declared.add((op, c.id))
                assert c.unbreakable.strip() and c.id not in breakable(spec), (op, c.id)
                continue
            assert c.id in breakable(spec), (op, c.id, unbreakable(op).get(c.id))
    assert declared == DECLARED_UNBREAKABLE


def test_invalid_strategy_draws_signatures_breaking_the_target():
    @SETTINGS
    @given(invalid_signatures("compare", "C3", "quick"))
    def check(sig):
        assert "C3" in violations(sig)

    check()


def test_type_binding_is_respected():
    @SETTINGS
    @given(signatures("convert", {"E": "bf16", "R": "si4"}, "quick"))
    def check(sig):
        assert str(sig.input_types[0].element_type) == "bf16"
        assert str(sig.result_types[0].element_type) == "si4"

    check()


def test_zero_sized_and_rank_0_shapes_occur():
    plan = plan_signatures(load_spec("add"), {"E": "f32"}, 60, seed=1, profile="default")
    shapes = [s.input_types[0].shape for s in plan]
    assert any(len(s) == 0 for s in shapes)
    assert any(0 in s for s in shapes)
    assert max(len(s) for s in shapes) >= 3


def test_plans_are_deterministic_for_a_seed():
    spec = load_spec("clamp")
    a = plan_signatures(spec, {"E": "si8"}, 8, seed=7, profile="default")
    b = plan_signatures(spec, {"E": "si8"}, 8, seed=7, profile="default")
    c = plan_signatures(spec, {"E": "si8"}, 8, seed=8, profile="default")
    assert a == b
    assert a != c


@pytest.mark.parametrize("et", ALL_ELEMENT_TYPES, ids=lambda t: t.name)
def test_values_mix_in_special_values(et):
    sig = canonical(load_spec("convert"), {"E": et.name, "R": "f32"}, (64,))
    (x,) = batch_inputs(sig, np.random.default_rng(0), 32)
    assert x.shape == (32, 64) and x.dtype == et.dtype
    specials = special_values(et)
    if et.is_float:
        wide = x.astype(np.float64)     # what the format has (docs/float-formats.md)
        assert np.isnan(wide).any() == et.has_nan and np.isinf(wide).any() == et.has_inf
        assert (wide == 0).any() == et.has_zero
        tiny = float(np.abs(wide[(wide != 0) & np.isfinite(wide)]).min())
        import ml_dtypes
        if et.has_zero:                 # subnormals appear
            assert tiny < float(ml_dtypes.finfo(et.dtype).smallest_normal)
        else:                           # f8E8M0FNU: its smallest value, 2^-127
            assert tiny == float(ml_dtypes.finfo(et.dtype).smallest_normal)
    elif et.is_integer:
        vals = set(x.astype(np.int64 if et.is_signed else np.uint64).reshape(-1).tolist())
        assert et.int_min in vals and et.int_max in vals
    assert len(specials) > 1


def test_values_are_deterministic_for_a_seed():
    sig = canonical(load_spec("add"), {"E": "bf16"}, (5,))
    a = batch_inputs(sig, np.random.default_rng(3), 4)
    b = batch_inputs(sig, np.random.default_rng(3), 4)
    assert all((x.view(np.uint16) == y.view(np.uint16)).all() for x, y in zip(a, b))


def test_shift_amounts_cluster_around_the_bit_width():
    sig = canonical(load_spec("shift_left"), {"E": "si8"}, (256,))
    _, amount = batch_inputs(sig, np.random.default_rng(0), 4)
    a = amount.astype(np.int64)
    assert ((a >= 0) & (a < 8)).mean() > 0.4
    assert (a == 8).any() or (a == 9).any()


def test_draw_array_picks_sources_as_rng_choice_does():
    """draw_array draws each element's source with the cumulative weights and
    ``rng.random`` (issue 33: ``rng.choice``'s checks of ``p`` cost more than the draw);
    that is exactly what ``rng.choice(k, n, p=...)`` draws, and leaves the generator in
    the same state, so the values stay those of ``rng.choice``."""
    from conformance.generators.values import DISTRIBUTIONS, _mixture
    for et in ("f32", "bf16", "si8", "ui64", "i1", "complex<f32>"):
        for name in ("default", "shift_amount", "exponent", "multiplicand", "index",
                     "repeated"):
            sources, cdf = _mixture(element_type(et), name)
            w = np.array([w for w, _ in DISTRIBUTIONS[name](element_type(et))])
            for n in (0, 1, 77, 768):
                a, b = np.random.default_rng(n), np.random.default_rng(n)
                want = a.choice(len(sources), size=n, p=w / w.sum())
                got = cdf.searchsorted(b.random(n), side="right")
                assert np.array_equal(want, got) and want.dtype == got.dtype, (et, name, n)
                assert a.random() == b.random()
