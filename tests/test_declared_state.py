"""Verdicts are declared types, masks one type, and no process-wide state decides an
outcome (issue 28).

- A verdict (conformance.checking.compare.BatchVerdict) and what a verdict function sees
  (conformance.checking.verdicts.Judgement) refuse undeclared attributes (slots): what a kind says
  beyond the classes (``bound_hist``, ``notes``) is a declared field, read directly.
- The implementation-defined masks are a :class:`conformance.oracles.RuleMasks`
  everywhere: a plain ``{rule: mask}`` given to the public entry points becomes one.
- Whether a backend compiled a valid program of an op (which makes declining an invalid
  one untried a gap: backends.vendor) is the backend instance's record, not the
  process's; rng's ``a`` and ``b`` are drawn as a pair within one call, not handed over
  through a module dict keyed by ``id()``.
"""
from __future__ import annotations

import dataclasses
import importlib
import warnings

import numpy as np
import pytest

from conformance import oracles

from conformance.checking import verdicts
from conformance.backends import Backend, Unsupported
from conformance.backends import vendor
from conformance.checking.checker import SignatureCheck, check_invalid
from conformance.checking.compare import BatchVerdict, compare_batch
from conformance.core.case import Case, Signature
from conformance.oracles import RuleMasks
from conformance.specs import Accuracy, load_spec

from test_layers import discover_modules

F32_ADD = Signature.make("add", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xf32>"])
ACCUMULATION = Accuracy("bound", 0.0, (("bound", "accumulation"),))


def _judgement(accuracy: Accuracy, actual=None, masks=None) -> verdicts.Judgement:
    a = np.array([[1.0, -3.0], [2.0, 0.5]], np.float32)
    b = np.array([[2.0, 1.0], [1.0, 4.0]], np.float32)
    expected = [a + b]
    return verdicts.Judgement(F32_ADD, load_spec("add"), accuracy, [a, b], expected,
                              expected if actual is None else actual, masks)


# ---------------------------------------------------------------------------
# Declared verdict fields
# ---------------------------------------------------------------------------

def _dataclasses_of(module_name: str):
    module = importlib.import_module(module_name)
    for value in vars(module).values():
        if isinstance(value, type) and dataclasses.is_dataclass(value) and \
                value.__module__ == module_name:
            yield value


def test_the_verdict_dataclasses_refuse_undeclared_attributes():
    names = [n for n in discover_modules()
             if n in ("conformance.checking.compare", "conformance.checking.verdicts")
             or n.startswith("conformance.checking.verdicts.")]
    found = {cls.__qualname__: cls for n in names for cls in _dataclasses_of(n)}
    assert {"BatchVerdict", "Judgement"} <= set(found)
    for name, cls in found.items():
        assert "__slots__" in vars(cls), f"{name}: a verdict dataclass without slots"
    v = BatchVerdict(np.zeros(1, np.int8), [], [], {})
    with pytest.raises(AttributeError):
        v.bound_histogram = {}                         # a misspelt field fails loudly
    j = _judgement(Accuracy("exact"))
    with pytest.raises(AttributeError):
        j.cache = {}


def test_bound_hist_and_notes_are_declared_fields_with_empty_defaults():
    fields = {f.name: f for f in dataclasses.fields(BatchVerdict)}
    assert {"bound_hist", "notes"} <= set(fields)
    v = BatchVerdict(np.zeros(2, np.int8), [], [], {})
    assert v.bound_hist == {} and v.notes == []
    # the bound kind fills bound_hist, the property kind notes (one per case)
    bound = verdicts.judge(_judgement(ACCUMULATION))
    assert set(bound.bound_hist) == {"f32"} and bound.notes == []
    j = _judgement(Accuracy("property", 0.0, (("property", ("same_multiset",)),)),
                   actual=[np.array([[3.0, -2.0], [3.0, 5.0]], np.float32)[:, ::-1].copy()])
    prop = verdicts.judge(j)
    assert prop.notes == ["", "property failed: same_multiset"]
    assert prop.bound_hist == {}


# ---------------------------------------------------------------------------
# Masks: one type
# ---------------------------------------------------------------------------

def test_masks_are_rule_masks_everywhere():
    sig = Signature.make("divide", ["tensor<3xsi8>", "tensor<3xsi8>"], ["tensor<3xsi8>"])
    lhs, rhs = np.array([[7, -128, 5]], np.int8), np.array([[0, -1, 2]], np.int8)
    expected = oracles.evaluate_batch(sig, [lhs, rhs])
    masks = oracles.implementation_defined(sig, [lhs, rhs], expected=expected)
    assert type(masks) is RuleMasks
    assert type(oracles.implementation_defined(F32_ADD, [np.zeros((1, 2), np.float32)] * 2)) \
        is RuleMasks                                    # no rules: still the type
    # a Judgement holds a RuleMasks whatever it was given
    for given in (None, {}, {"r": np.zeros((2, 2), bool)}, masks):
        assert type(_judgement(Accuracy("exact"), masks=given).masks) is RuleMasks
    assert _judgement(Accuracy("exact"), masks=masks).masks is masks
    with pytest.raises(TypeError, match="RuleMasks"):
        _judgement(Accuracy("exact"), masks=[np.zeros(2, bool)])
    # a plain {rule: mask} means rules that allow any value there, as RuleMasks.of says
    plain = {"integer_division_overflow": np.asarray(masks["integer_division_overflow"])}
    assert RuleMasks.of(plain).allowed("integer_division_overflow") == "any"
    actual = [np.array([[0, -128, 2]], np.int8)]
    exact = Accuracy("exact")
    for m in (masks, plain, RuleMasks.of(plain)):
        v = compare_batch(expected, actual, exact, m)
        assert v.case_class_names() == ["pass"]
        assert v.impl_defined["integer_division_overflow"] == {"elements": 2,
                                                              "conventional": 1}


def test_the_comparator_and_verdict_kinds_never_ask_what_a_mask_is():
    """No ``hasattr(masks, ...)`` / ``masks or {}`` left: one type, read directly."""
    import inspect
    import conformance.checking.compare as compare
    sources = {"conformance.checking.compare": inspect.getsource(compare)}
    for n in discover_modules():
        if n == "conformance.checking.verdicts" or n.startswith("conformance.checking.verdicts."):
            sources[n] = inspect.getsource(importlib.import_module(n))
    for name, src in sources.items():
        for bad in ('"allowed")', '"for_result")', "masks or {}", "rules or {}"):
            assert bad not in src, f"{name}: {bad}"


# ---------------------------------------------------------------------------
# No process-wide state decides an outcome
# ---------------------------------------------------------------------------

INVALID = Signature.make("add", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xf32>"],
                         invalid="C1")


class DeclinesF32(Backend):
    name = "declines-f32"

    def compile(self, sig):
        if sig.input_leaves[0].element_type.name == "f32":
            raise Unsupported("f32 is not supported")
        return lambda xs: [np.add(*xs)]


def _invalid_outcome() -> tuple[str, str | None]:
    case = Case(INVALID, (np.zeros(2, np.float32), np.zeros(2, np.float32)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vendor.NeverCompiledWarning)
        return check_invalid(DeclinesF32(), case)


def test_an_invalid_programs_outcome_does_not_depend_on_what_ran_before():
    before = _invalid_outcome()
    # another backend instance of the same name compiles a valid add in this process
    si32 = Signature.make("add", ["tensor<2xi32>"] * 2, ["tensor<2xi32>"])
    other = DeclinesF32()
    SignatureCheck(load_spec("add"), si32, [other]).compile()
    assert "add" in other.compiled_ops
    assert _invalid_outcome() == before == ("unsupported", "f32 is not supported")
    assert not any(isinstance(v, (set, dict)) and v and
                   any(isinstance(k, tuple) for k in v) for v in vars(vendor).values()), \
        "backends.vendor keeps (backend, op) state of the process"


def test_rng_parameters_are_a_function_of_the_signature_and_the_generator():
    from conformance.generators import batch_inputs
    from conformance.generators import rng as rng_values
    spec = load_spec("rng")
    sig = Signature.make("rng", ["tensor<f32>", "tensor<f32>", "tensor<2xsi64>"],
                         ["tensor<3x4xf32>"], {"rng_distribution": "UNIFORM"})
    first = batch_inputs(sig, np.random.default_rng(5), 24, spec)
    # a draw of a alone, left unfinished, with a generator that then goes away (its id
    # free for the next one): nothing of it may reach the next draw
    et = sig.input_types[0].element_type
    for seed in range(4):
        rng_values.param_values(sig, spec, 0, 0, et, (24,), np.random.default_rng(seed), "")
    again = batch_inputs(sig, np.random.default_rng(5), 24, spec)
    for x, y in zip(first, again):
        assert np.array_equal(x, y)
    # b alone is the same function of the generator whatever ran before (here: an a
    # drawn from another generator, whose id the next one is likely to get)
    b1 = rng_values.param_values(sig, spec, 1, 0, et, (24,), np.random.default_rng(9), "")
    for seed in range(4):
        rng_values.param_values(sig, spec, 0, 0, et, (24,), np.random.default_rng(seed), "")
        b2 = rng_values.param_values(sig, spec, 1, 0, et, (24,), np.random.default_rng(9), "")
        assert np.array_equal(b1, b2)
    # a and b come from one pair draw (a <= b in most rows of a UNIFORM interval)
    a, b = first[0], first[1]
    assert (a <= b).mean() > 0.5
    assert not any(isinstance(v, dict) for k, v in vars(rng_values).items()
                   if k.startswith("_") and not k.startswith("__")), \
        "generators.rng keeps a module dict"
