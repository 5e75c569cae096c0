"""custom_call: what 003 fixes for every target, and a vendor's registered target checked
like a built-in op (specs/custom_calls.py, oracles/custom_call.py)."""
import dataclasses
import importlib.metadata

import numpy as np
import pytest

from conformance.backends import Backend, Unsupported, get_backend
from conformance.core.case import Case, Signature
from conformance.core.results import read_results
from conformance.mlir.emitter import module_text, verifier_rejects
from conformance.generators.invalid import breakable, candidates, unbreakable
from conformance.generators.signatures import canonical
from conformance.oracles import evaluate_case
from conformance.oracles.registry import OracleError
from conformance.apps.runner import RunConfig, run
from conformance.specs import custom_calls, load_spec
from conformance.specs.validity import violations

SPEC = load_spec("custom_call")
TARGET = "vendor.scaled_add"


def _types(et, shape):
    t = f"tensor<{''.join(f'{d}x' for d in shape)}{et}>"
    return [t, t], [t]


def _scaled_add(inputs, attributes):
    """The vendor's reference: x + 2 y, in the inputs' type."""
    x, y = inputs
    return [(x + y * x.dtype.type(2)).astype(x.dtype)]


@pytest.fixture
def vendor_target():
    """The vendor's target, registered with the Python hook for the test's duration."""
    custom_calls.register_target(custom_calls.CustomCallTarget(
        TARGET, _scaled_add, _types, element_types=("f32", "si32"), api_versions=(1, 2),
        backend_config="scale=2"))
    yield custom_calls.target(TARGET)
    custom_calls.unregister_target(TARGET)


class VendorBackend(Backend):
    """A vendor backend that implements vendor.scaled_add and checks what it is given:
    another target, another type or api version is a rejection (an exception)."""

    name = "vendor"
    isolate = False

    def compute(self, x, y):
        return x + y * x.dtype.type(2)

    def compile(self, sig):
        if sig.op != "custom_call":
            raise Unsupported("vendor: custom_call only")
        a = sig.attributes
        if a["api_version"] not in (0, 1, 2, 3):        # the dialect's, checked first
            raise ValueError(f"vendor: unknown api_version {a['api_version']}")
        if a["call_target_name"] != TARGET:
            raise Unsupported(f"vendor: no target {a['call_target_name']!r}")
        x, y = sig.input_types
        if not (x == y and sig.result_types == (x,)) or a["api_version"] not in (1, 2):
            raise ValueError(f"vendor: {TARGET} takes two equal tensors and gives one "
                             "(api_version 1 or 2)")
        return lambda inputs: [np.asarray(self.compute(*inputs), x.element_type.dtype)]


class BuggyVendorBackend(VendorBackend):
    """The same, with a realistic bug: the scale is applied to x instead of y."""

    name = "vendor-buggy"

    def compute(self, x, y):
        return x * x.dtype.type(2) + y


def _run(tmp_path, backend, **kw):
    cfg = RunConfig(backends=[backend.name], ops=["custom_call"], depth="quick", out=tmp_path,
                    probes=False, replay=False, isolate=False, **kw)
    run(cfg, [backend], tmp_path / "results.jsonl")
    return list(read_results(tmp_path / "results.jsonl"))


# -- what 003 fixes, for any target --------------------------------------------------------

def _zeros(sig):
    return tuple(np.zeros(t.shape, t.element_type.dtype) for t in sig.input_leaves)


@pytest.mark.parametrize("placeholder", list(custom_calls.PLACEHOLDERS))
def test_unregistered_targets_are_signature_level_and_declined_with_reasons(placeholder):
    sig = _placeholder_signature(placeholder)
    assert violations(sig) == [] and verifier_rejects(sig) is None
    # no reference: zeros of the declared types, every element masked (types only)
    from conformance.oracles import evaluate_batch, implementation_defined
    stacked = [x[None] for x in _zeros(sig)]
    expected = evaluate_batch(sig, stacked)
    masks = implementation_defined(sig, stacked, SPEC, expected)
    assert [m.all() for m in masks.per_result["unregistered_target"]] == [True] * len(expected)
    for name, said in (("jax", "jax.lax has no call"), ("xla", "No registered implementation"),
                       ("interpreter", "no custom call targets")):
        with pytest.raises(Unsupported, match=said):
            get_backend(name).run(Case(sig, _zeros(sig)))


def _placeholder_signature(name):
    """A valid call of a placeholder target, from the spec's own variables."""
    from hypothesis import given, settings
    from conformance.generators.signatures import signatures
    found = []

    @settings(max_examples=200, database=None, deadline=None, derandomize=True)
    @given(signatures(SPEC, {"E": "f32"}, "quick"))
    def collect(sig):
        # results with elements: a zero-sized result has no element to mask
        if sig.attributes["call_target_name"] == name and not found and all(
                int(np.prod(getattr(t, "shape", ()) or (1,))) for t in sig.result_types):
            found.append(sig)
    collect()
    return found[0]


def test_every_rule_has_invalid_cases_without_any_registered_target():
    # the placeholders' contract (the suite's declaration) makes C2 and C3 breakable
    assert set(breakable(SPEC)) == {"C1", "C2", "C3"}
    sig = canonical(SPEC, {"E": "f32"}, (2,))
    assert sig.attributes["call_target_name"] == custom_calls.UNREGISTERED_EFFECT
    assert "token" in sig.key() and sig.attributes["has_side_effect"] is True
    (c3,) = candidates(SPEC, sig, "C3")
    assert c3.attributes["has_side_effect"] is False and verifier_rejects(c3) is None


def test_api_version_outside_the_dialect_is_rejected_by_the_verifier():
    sig = canonical(SPEC, {"E": "f32"}, (2,))
    found = candidates(SPEC, sig, "C1")
    assert found and all(violations(c) == ["C1"] for c in found)
    assert all("api_version" in verifier_rejects(c) for c in found)


def test_attributes_print_as_the_spec_writes_them():
    sig = canonical(SPEC, {"E": "si8"}, (2,))
    sig = dataclasses.replace(sig, attribute_items=tuple(
        (k, ("a\"b" if k == "backend_config" else v)) for k, v in sig.attribute_items))
    text = module_text(sig)
    assert 'call_target_name = "conformance.unregistered_effect"' in text
    assert 'backend_config = "a\\"b"' in text and "api_version = 1 : i32" in text
    assert "has_side_effect = true" in text and "called_computations = []" in text
    assert verifier_rejects(sig) is None


def test_called_computations_print_as_symbols_and_the_example_has_values():
    from conformance.checking import golden
    (ex,) = golden.examples(SPEC)
    assert golden.mismatch(ex, evaluate_case(ex.case)) is None
    sig = dataclasses.replace(ex.case.signature, attribute_items=tuple(
        (k, (("foo", "bar") if k == "called_computations" else v))
        for k, v in ex.case.signature.attribute_items))
    assert "called_computations = [@foo, @bar]" in module_text(sig)


# -- a vendor's registered target ----------------------------------------------------------

def test_registered_target_is_drawn_with_its_types_and_attributes(vendor_target):
    sig = canonical(SPEC, {"E": "f32"}, (2, 3))
    a = sig.attributes
    assert a["call_target_name"] == TARGET and a["backend_config"] == "scale=2"
    assert [str(t) for t in sig.input_types] == ["tensor<2x3xf32>"] * 2
    assert canonical(SPEC, {"E": "si8"}, (2,)).attributes["call_target_name"] in \
        custom_calls.PLACEHOLDERS                       # not registered for si8
    x, y = np.float32([[1, 2, 3], [4, 5, 6]]), np.float32([[1, 1, 1], [0, -1, 2]])
    (out,) = evaluate_case(Case(sig, (x, y)))
    np.testing.assert_array_equal(out, x + 2 * y)


def test_registered_target_contract_is_breakable(vendor_target):
    assert "C2" in breakable(SPEC)
    sig = canonical(SPEC, {"E": "f32"}, (2,))
    found = candidates(SPEC, sig, "C2")
    assert found and all(violations(c) == ["C2"] for c in found)
    # the StableHLO verifier knows nothing of a target: only the vendor can reject these
    assert all(verifier_rejects(c) is None for c in found)


def test_side_effect_declared_by_the_target_is_required(vendor_target):
    custom_calls.register_target(dataclasses.replace(vendor_target, has_side_effect=True),
                                 replace=True)
    sig = canonical(SPEC, {"E": "f32"}, (2,))
    assert sig.attributes["has_side_effect"] is True
    assert "C3" in breakable(SPEC)
    (bad,) = candidates(SPEC, sig, "C3")
    assert bad.attributes["has_side_effect"] is False


def test_vendor_backend_implementing_the_target_passes(tmp_path, vendor_target):
    recs = _run(tmp_path, VendorBackend())
    sigs = [r for r in recs if r["kind"] == "signature" and r["type_key"] == "f32"]
    assert sigs and all(r["outcome"] == "pass" and r["cases"] > 0 for r in sigs)
    invalid = [r for r in recs if r["kind"] == "invalid" and r["rule"] in ("C1", "C2")]
    assert {r["rule"] for r in invalid} == {"C1", "C2"}
    assert all(r["outcome"] == "rejected" for r in invalid), invalid
    assert not [r for r in recs if r["kind"] == "internal_error"]


def test_vendor_backend_with_a_bug_in_the_target_fails(tmp_path, vendor_target):
    recs = _run(tmp_path, BuggyVendorBackend())
    bad = [r for r in recs if r["kind"] == "signature" and r["type_key"] in ("f32", "si32")]
    assert bad and all(r["outcome"] == "value" for r in bad if r["cases"])
    assert [r for r in recs if r["kind"] == "divergence"]


def test_entry_point_group_registers_a_target(monkeypatch):
    ep = importlib.metadata.EntryPoint(name="scaled", value="test_custom_call:entry_point_target",
                                       group=custom_calls.ENTRY_POINT_GROUP)
    monkeypatch.setattr(custom_calls, "_ENTRY_POINTS_LOADED", False)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == custom_calls.ENTRY_POINT_GROUP
                        else [])
    try:
        assert custom_calls.target("vendor.from_entry_point") is not None
        sig = canonical(SPEC, {"E": "f32"}, (2,))
        assert sig.attributes["call_target_name"] == "vendor.from_entry_point"
    finally:
        custom_calls.unregister_target("vendor.from_entry_point")


def entry_point_target():
    return custom_calls.CustomCallTarget("vendor.from_entry_point", _scaled_add, _types)


def test_bad_registrations_are_one_line_errors():
    with pytest.raises(custom_calls.TargetError, match="api_versions"):
        custom_calls.register_target(custom_calls.CustomCallTarget(
            "v.x", _scaled_add, _types, api_versions=(4,)))
    with pytest.raises(custom_calls.TargetError, match="not allowed"):
        custom_calls.register_target(custom_calls.CustomCallTarget(
            custom_calls.UNREGISTERED, _scaled_add, _types))


def test_a_side_effecting_target_threading_a_token(vendor_target):
    def types(et, shape):
        t = f"tensor<{''.join(f'{d}x' for d in shape)}{et}>"
        return [t, "token"], ["token"]
    custom_calls.register_target(custom_calls.CustomCallTarget(
        "vendor.log", lambda inputs, attributes: [], types, element_types=("f8E5M2",),
        has_side_effect=True))
    try:
        # the matrix holds the registered targets' element types once there are some
        assert [b["E"] for b in SPEC.type_bindings()] == ["si32", "f8E5M2", "f32"]   # spec order
        sig = canonical(SPEC, {"E": "f8E5M2"}, (2,))
        assert sig.attributes["call_target_name"] == "vendor.log"
        assert sig.attributes["has_side_effect"] is True and violations(sig) == []
        text = module_text(sig)
        assert "%token0 = stablehlo.after_all" in text and "func.return\n" in text
        assert verifier_rejects(sig) is None
        assert evaluate_case(Case(sig, (np.zeros(2, "float8_e5m2"),))) == ()
        (bad,) = candidates(SPEC, sig, "C3")
        assert bad.attributes["has_side_effect"] is False
    finally:
        custom_calls.unregister_target("vendor.log")


class RunsAnyTarget(Backend):
    """A backend that runs any custom call, unknown targets too (values of its own)."""

    name = "any-target"
    isolate = False
    wrong_type = False

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        outs = list(sig.result_leaves)
        if self.wrong_type:
            outs = [type(t)(t.shape + (1,), t.element_type) for t in outs]
        return lambda inputs: [np.full(t.shape, 7, t.element_type.dtype) for t in outs]


class RunsAnyTargetWrongShape(RunsAnyTarget):
    name = "any-target-bad"
    wrong_type = True


def test_a_backend_running_an_unregistered_call_is_checked_for_types_only(tmp_path):
    recs = _run(tmp_path, RunsAnyTarget(), element_types=["f32", "si8"], invalid=False)
    sigs = [r for r in recs if r["kind"] == "signature"]
    assert sigs and all(r["outcome"] == "pass" and r["cases"] for r in sigs)
    assert any("unregistered_target" in (r.get("impl_defined") or {}) for r in sigs)
    assert not [r for r in recs if r["kind"] == "internal_error"]
    bad = _run(tmp_path / "bad", RunsAnyTargetWrongShape(), element_types=["f32"],
               invalid=False)
    assert any(r["outcome"] == "type" for r in bad if r["kind"] == "signature")
