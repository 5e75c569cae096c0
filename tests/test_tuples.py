"""constant, tuple and get_tuple_element: tuple types as values whose cases hold leaves,
tensor constants that keep every bit, the canonical program's tuple wrapper, and a
negative case for every labelled constraint.

- Tensor constants (conformance/core/dense.py) read back exactly: every bit pattern of the
  8- and 16-bit float types, and the special values of every element type, survive
  printing, MLIR's parser and a run through ``stablehlo.constant`` on the xla,
  interpreter and jax backends.
- Tuple types print and parse (nested, empty), flatten to leaves depth-first, and
  survive JSON; the oracle gets tuple values, the backends only leaves.
- Every module of the three ops parses and verifies; @main never takes or returns a tuple.
"""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conformance.checking import golden

from conformance import oracles
from conformance.backends import get_backend
from conformance.core.case import Case, Signature
from conformance.core.dense import DenseError, dense_text, dense_type, parse_dense
from conformance.mlir.emitter import module_text, parse, verifier_rejects
from conformance.generators import (batch_inputs, breakable, candidates, canonical,
                                    signatures, special_values)
from conformance.core.literals import bit_patterns, from_bit_patterns, from_value_literal
from conformance.oracles import OracleError
from conformance.apps.runner import plan_signatures
from conformance.specs import load_spec
from conformance.specs.validity import violations
from conformance.backends import Unsupported
from conformance.core.types import (ALL_ELEMENT_TYPES, TensorType, TupleType, element_type,
                                    flatten, leaves, unflatten, value_type)
from type_sampling import NEWER, sampled  # noqa: E402  (CI time: the newer float formats once)

OPS = ["constant", "tuple", "get_tuple_element"]
SETTINGS = settings(max_examples=30, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))
NESTED = "tuple<tensor<2xf32>, tuple<tensor<si32>, tuple<>>, tensor<0x3xbf16>>"


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.array_equal(bit_patterns(a), bit_patterns(b))


def _constant(array) -> Case:
    array = np.asarray(array)
    sig = Signature.make("constant", [], [TensorType(array.shape, element_type(array.dtype))],
                         {"value": dense_text(array)})
    return Case(sig, ())


# ---------------------------------------------------------------------------
# Tuple types
# ---------------------------------------------------------------------------

def test_tuple_types_print_parse_and_flatten():
    t = value_type(NESTED)
    assert isinstance(t, TupleType) and len(t) == 3 and str(t) == NESTED
    assert t.mlir() == "tuple<tensor<2xf32>, tuple<tensor<i32>, tuple<>>, tensor<0x3xbf16>>"
    assert value_type(t.mlir()) == t                       # MLIR spelling reads back
    assert [str(x) for x in t.leaves()] == ["tensor<2xf32>", "tensor<si32>", "tensor<0x3xbf16>"]
    assert t[1] == value_type("tuple<tensor<si32>, tuple<>>") and t[1][1] == TupleType(())
    assert leaves([t, "tensor<i1>"])[-1] == value_type("tensor<i1>")
    grouped = unflatten(["a", "b", "c", "d"], [t, "tensor<i1>"])
    assert grouped == [("a", ("b", ()), "c"), "d"]
    assert flatten(grouped) == ["a", "b", "c", "d"]
    with pytest.raises(ValueError):
        unflatten(["a"], [t])


def test_signatures_with_tuples_are_hashable_and_survive_json():
    sig = Signature.make("get_tuple_element", [NESTED], ["tuple<tensor<si32>, tuple<>>"],
                         {"index": 1})
    assert sig.key() == (f"get_tuple_element({NESTED}) {{index = 1}} -> "
                         "(tuple<tensor<si32>, tuple<>>)")
    again = Signature.from_json(json.loads(json.dumps(sig.to_json())))
    assert again == sig and hash(again) == hash(sig)
    assert [str(x) for x in sig.input_leaves] == ["tensor<2xf32>", "tensor<si32>",
                                                  "tensor<0x3xbf16>"]
    assert [str(x) for x in sig.result_leaves] == ["tensor<si32>"]
    plain = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<2xf32>"])
    assert plain.input_leaves == plain.input_types and not plain.has_tuples


def test_value_literals_of_tuples_are_their_leaves():
    xs = from_value_literal([[1.0, "-0.0"], [3, []], []], NESTED.replace("0x3", "0"))
    assert [x.dtype.name for x in xs] == ["float32", "int32", "bfloat16"]
    assert np.signbit(xs[0][1]) and xs[1] == 3 and xs[2].shape == (0,)


# ---------------------------------------------------------------------------
# Tensor constants: exact text round trips
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("et", ALL_ELEMENT_TYPES, ids=lambda t: t.name)
def test_dense_text_round_trips_every_element_type(et):
    rng = np.random.default_rng(0)
    from conformance.generators import draw_array
    for shape in [(), (7,), (2, 0), (0, 3), (2, 3, 2), (1, 1, 1, 2)]:
        a = draw_array(et, shape, rng)
        text = dense_text(a)
        assert dense_type(text) == TensorType(shape, et)
        assert _same_bits(parse_dense(text), a), text
    s = special_values(et)
    assert _same_bits(parse_dense(dense_text(s)), s)


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "bf16", "f16"])
def test_dense_text_round_trips_every_bit_pattern(name):
    et = element_type(name)
    a = from_bit_patterns(np.arange(1 << et.bits, dtype=np.uint64), et)
    assert _same_bits(parse_dense(dense_text(a)), a)


def test_dense_text_form():
    f32 = np.array([1.0, -0.0, 1e-45, 0.1], np.float32)
    f32 = np.concatenate([f32, from_bit_patterns(np.array([0x7FA00001, 0xFF800000],
                                                          np.uint64), element_type("f32"))])
    assert dense_text(f32) == ("dense<[1.0, -0.0, 1.0e-45, 0.1, 0x7FA00001, 0xFF800000]> : "
                               "tensor<6xf32>")
    assert dense_text(np.zeros((2, 0), np.int8)) == "dense<> : tensor<2x0xi8>"
    assert dense_text(np.array([True, False])) == "dense<[true, false]> : tensor<2xi1>"
    assert dense_text(np.array(-8, element_type("si4").dtype)) == "dense<-8> : tensor<i4>"
    c = np.array([complex(1.0, -0.0)], np.complex64)
    assert dense_text(c) == "dense<[(1.0, -0.0)]> : tensor<1xcomplex<f32>>"
    # the spec's own notation reads too: splats, hex integers, decimal floats
    assert parse_dense("dense<1.5> : tensor<2x2xbf16>").tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert parse_dense("dense<0xFF> : tensor<2xi8>").tolist() == [-1, -1]
    with pytest.raises(DenseError):
        parse_dense("dense<[1.0, 2.0]> : tensor<3xf32>")
    with pytest.raises(DenseError):
        parse_dense("[1.0]")


# ---------------------------------------------------------------------------
# constant: every bit through MLIR and the backends
# ---------------------------------------------------------------------------

def _bit_pattern_constants():
    """The special values of every element type, and every bit pattern of the 8- and
    16-bit floats (NaN payloads, signalling NaNs, -0.0, subnormals, int4, complex)."""
    for et in ALL_ELEMENT_TYPES:
        if et.name not in NEWER:        # (the newer float formats: every pattern only)
            yield et.name, special_values(et)
        if et.is_float and et.bits <= 16:
            yield f"{et.name}-all", from_bit_patterns(np.arange(1 << et.bits, dtype=np.uint64),
                                                      et)


@pytest.mark.parametrize("backend", ["interpreter", "xla", "jax"])
def test_constant_keeps_every_bit_pattern(backend):
    b = get_backend(backend)
    wrong = []
    for name, value in _bit_pattern_constants():
        case = _constant(value)
        try:
            (got,) = b.run(case)
        except Unsupported as e:        # jaxlib 0.10.2 CPU holds no f6 array (measured)
            assert name.startswith(("f6E2M3FN", "f6E3M2FN")) and "cannot hold" in str(e), e
            continue
        if not _same_bits(got, value):
            wrong.append(name)
        (want,) = oracles.evaluate_case(case)
        assert _same_bits(want, value)
    assert wrong == []


def test_constant_signatures_draw_values_with_special_values():
    plan = plan_signatures(load_spec("constant"), {"E": "f32"}, 30, seed=0, profile="default")
    values = np.concatenate([parse_dense(s.attributes["value"]).reshape(-1) for s in plan])
    tiny = np.abs(values[np.isfinite(values) & (values != 0)]).min()
    assert np.isnan(values).any() and (values == 0).any() and tiny < 1.2e-38
    assert {len(s.result_types[0].shape) for s in plan} >= {0, 1, 2}
    for s in plan:
        assert dense_type(s.attributes["value"]) == s.result_types[0]
        assert s.input_types == ()


def test_constant_c1_negative_cases_change_the_value_or_the_output_type():
    spec = load_spec("constant")
    valid = canonical(spec, {"E": "f32"}, (2, 3))
    found = candidates(spec, valid, "C1")
    value_changed = [c for c in found if c.result_types == valid.result_types]
    output_changed = [c for c in found if c.attributes == valid.attributes]
    assert value_changed and output_changed
    for c in found:
        assert violations(c, spec) == ["C1"]
        assert dense_type(c.attributes["value"]) != c.result_types[0]
        assert "incompatible" in verifier_rejects(c)


# ---------------------------------------------------------------------------
# tuple and get_tuple_element
# ---------------------------------------------------------------------------

def _case(sig: Signature, seed=0) -> Case:
    (values,) = [batch_inputs(sig, np.random.default_rng(seed), 1)]
    return Case(sig, tuple(x[0] for x in values))


def test_oracle_sees_tuple_values_and_returns_leaves():
    sig = Signature.make("tuple", ["tensor<2xf32>", "tuple<tensor<si32>, tuple<>>"],
                         ["tuple<tensor<2xf32>, tuple<tensor<si32>, tuple<>>>"])
    case = _case(sig)
    out = oracles.evaluate_case(case)
    assert len(out) == 2 and all(_same_bits(a, b) for a, b in zip(out, case.inputs))
    gte = Signature.make("get_tuple_element", [NESTED], ["tuple<tensor<si32>, tuple<>>"],
                         {"index": 1})
    case = _case(gte)
    (out,) = oracles.evaluate_case(case)
    assert _same_bits(out, case.inputs[1])
    with pytest.raises(OracleError, match="input_types"):
        oracles.evaluate("get_tuple_element", case.inputs, {"index": 1},
                         result_types=gte.result_types)


def test_modules_never_pass_tuples_through_main():
    sig = Signature.make("get_tuple_element", [NESTED], ["tuple<tensor<si32>, tuple<>>"],
                         {"index": 1})
    text = module_text(sig)
    main = text.splitlines()[1]
    assert "tuple" not in main
    assert main.startswith("  func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<i32>, "
                           "%arg2: tensor<0x3xbf16>) -> (tensor<i32>)")
    # the op under test is the only generic-form op
    assert text.count('"stablehlo.') == 1 and '"stablehlo.get_tuple_element"' in text
    parse(text)


@pytest.mark.parametrize("op", OPS)
def test_every_generated_module_parses_and_verifies(op):
    spec = load_spec(op)
    for binding in sampled(spec.type_bindings()):
        for shape in ((), (2,), (2, 0), (1, 2, 3, 2)):
            parse(module_text(canonical(spec, binding, shape)))

    @SETTINGS
    @given(signatures(op, profile="quick"))
    def check(sig):
        assert violations(sig) == []
        parse(module_text(sig))

    check()


@pytest.mark.parametrize("op", OPS)
def test_generated_signatures_cover_ranks_zero_sizes_and_nesting(op):
    spec = load_spec(op)
    plan = [s for b in ({"E": "f32"}, {"E": "si4"}, {"E": "complex<f64>"})
            for s in plan_signatures(spec, b, 40, seed=3, profile="default")]
    shapes = [t.shape for s in plan for t in s.input_leaves + s.result_leaves]
    assert {len(x) for x in shapes} >= {0, 1, 2, 3, 4}
    assert any(0 in x for x in shapes)
    if op != "constant":
        types = [t for s in plan for t in s.input_types + s.result_types]
        nested = [t for t in types if isinstance(t, TupleType)
                  and any(isinstance(e, TupleType) for e in t.elements)]
        assert nested
        assert any(TupleType(()) in t.elements for t in nested)
    if op == "get_tuple_element":
        assert any(isinstance(s.result_types[0], TupleType) for s in plan)
        assert {s.attributes["index"] for s in plan} >= {0, 1, 2}


@pytest.mark.parametrize("op", ["tuple", "get_tuple_element"])
@pytest.mark.parametrize("backend", ["interpreter", "xla", "jax"])
def test_backends_return_the_leaves_bit_for_bit(op, backend):
    spec = load_spec(op)
    b = get_backend(backend)
    plan = plan_signatures(spec, {"E": "bf16"}, 10, seed=5, profile="quick")
    plan += plan_signatures(spec, {"E": "si4"}, 10, seed=5, profile="quick")
    for sig in plan:
        case = _case(sig, seed=1)
        want = oracles.evaluate_case(case)
        got = b.run(case)
        assert len(got) == len(want) == len(sig.result_leaves), sig.key()
        assert all(_same_bits(g, w) for g, w in zip(got, want)), sig.key()


@pytest.mark.parametrize("backend", ["interpreter", "xla", "jax"])
def test_empty_tuple_has_no_leaves_on_any_backend(backend):
    sig = Signature.make("tuple", [], ["tuple<>"])
    assert "func.return\n" in module_text(sig)
    assert get_backend(backend).run(Case(sig, ())) in ([], ())
    assert oracles.evaluate_case(Case(sig, ())) == ()


# ---------------------------------------------------------------------------
# Negative cases
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_every_constraint_has_negative_cases_the_verifier_rejects(op):
    spec = load_spec(op)
    assert set(breakable(spec)) >= {c.id for c in spec.constraints}
    for binding in ({"E": "f32"}, {"E": "i1"}, {"E": "complex<f32>"}):
        valid = canonical(spec, binding, (2, 3))
        for c in spec.constraints:
            found = candidates(spec, valid, c.id)
            assert found, (op, c.id)
            for bad in found[:15]:
                assert c.id in violations(bad, spec)
                assert verifier_rejects(bad), bad.key()


def test_tuple_c1_is_a_size_mismatch_and_c2_a_type_mismatch():
    spec = load_spec("tuple")
    valid = canonical(spec, {"E": "f32"}, (2,))
    for bad in candidates(spec, valid, "C1"):
        assert len(spec.split_inputs(bad.input_types)[0]) != len(bad.result_types[0])
    for bad in candidates(spec, valid, "C2"):
        assert len(bad.input_types) == len(bad.result_types[0])
        assert list(bad.input_types) != list(bad.result_types[0].elements)


def test_jax_cannot_express_a_wrong_tuple_structure_with_the_same_leaves():
    """jax sees only leaves: a dropped trailing tuple<> leaves them unchanged, so the jax
    mapping says it cannot express the program rather than run it (accepted_invalid)."""
    from conformance.backends import Unsupported
    sig = Signature.make("tuple", ["tensor<2xf32>", "tuple<>"], ["tuple<tensor<2xf32>>"],
                         invalid="C1")
    assert violations(sig) == ["C1"] and sig.input_leaves == sig.result_leaves
    case = Case(sig, (np.zeros(2, np.float32),))
    with pytest.raises(Unsupported, match="no tuple types"):
        get_backend("jax").run(case)
    for backend in ("xla", "interpreter"):
        with pytest.raises(Exception, match="incompatible"):
            get_backend(backend).run(case)


def test_get_tuple_element_index_out_of_range_breaks_c1_only():
    spec = load_spec("get_tuple_element")
    operand = value_type("tuple<tensor<2xf32>, tensor<si32>>")
    for index in (-1, 2):
        sig = Signature.make("get_tuple_element", [operand], ["tensor<2xf32>"], {"index": index})
        assert violations(sig, spec) == ["C1"]
    sig = Signature.make("get_tuple_element", [operand], ["tensor<si32>"], {"index": 0})
    assert violations(sig, spec) == ["C2"]
    # the Type column says tuple: a tensor operand breaks I1 (and C2, which reads it)
    sig = Signature.make("get_tuple_element", ["tensor<2xf32>"], ["tensor<2xf32>"], {"index": 0})
    assert "I1" in violations(sig, spec)


# ---------------------------------------------------------------------------
# Golden examples (the spec's, and constant's "More Examples")
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("ex", [e for op in OPS for e in golden.examples(load_spec(op))],
                         ids=lambda e: e.id)
@pytest.mark.parametrize("backend", ["interpreter", "xla"])
def test_examples_on_the_stablehlo_backends(ex, backend):
    assert golden.mismatch(ex, get_backend(backend).run(ex.case)) is None
