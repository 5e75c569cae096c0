"""Regions as data: one text form (conformance.specs.regions) that the oracle evaluates
(conformance.oracles.regions), the emitter prints (and MLIR verifies) and jax runs
(conformance.backends.jax_ops.jax_function), all three agreeing."""
import numpy as np
import pytest

from conformance.backends.jax_ops import jax_function
from conformance.mlir.emitter import block_text
from conformance.oracles import regions as oracle_regions
from conformance.specs import regions
from conformance.mlir.emitter import parse as parse_mlir
from conformance.specs import expressions as ex
from conformance.core.types import element_type

LT_TOTAL = "(f32, f32) -> compare(arg0, arg1, 'LT', 'TOTALORDER')"
PAIR = "(f32, si8, f32, si8) -> (add(arg0, arg2), maximum(arg1, arg3))"


def test_parse_reads_argument_types_and_infers_result_types():
    r = regions.parse(PAIR)
    assert [t.name for t in r.arg_types] == ["f32", "si8", "f32", "si8"]
    assert [t.name for t in r.result_types] == ["f32", "si8"]
    assert [t.name for t in regions.parse(LT_TOTAL).result_types] == ["i1"]
    assert [t.name for t in regions.parse("(complex<f64>, complex<f64>) -> arg1").result_types] \
        == ["complex<f64>"]


def test_evaluate_uses_the_ops_semantics_elementwise():
    a = np.array([1.0, np.nan, -0.0, 2.0], np.float32)
    b = np.array([2.0, 1.0, 0.0, np.nan], np.float32)
    (lt,) = oracle_regions.evaluate(LT_TOTAL, [a, b])
    # total order: -0 < +0, +NaN above everything
    assert lt.tolist() == [True, False, True, True]
    s, m = oracle_regions.evaluate(PAIR, [a, np.array([1, 2, 3, 4], np.int8), a,
                                   np.array([4, 3, 2, 1], np.int8)])
    assert s.dtype == np.float32 and m.tolist() == [4, 3, 3, 4]


@pytest.mark.parametrize("text, message", [
    ("f32 -> arg0", "expected '(T0, T1, ...) -> body'"),
    ("(f32) -> arg1", "unknown name 'arg1'"),
    ("(f32, f32) -> frobnicate(arg0, arg1)", "unknown op 'frobnicate'"),
    ("(f32, f32) -> add(arg0)", "takes 2 operand"),
    ("(f32, f32) -> add(arg0, 'x', arg1)", "operands come before attributes"),
    ("(f33, f32) -> arg0", "f33"),
    ("(f32, f32) -> arg0 + arg1", "expected argN, op(...) or a tuple"),
])
def test_malformed_regions_are_one_line_errors(text, message):
    with pytest.raises(regions.RegionError) as e:
        regions.parse(text)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_printed_regions_parse_and_verify_inside_an_op():
    block = block_text(LT_TOTAL, "r0_")
    assert '"stablehlo.return"' in block and "^bb0(%r0_arg0: tensor<f32>" in block
    parse_mlir("module {\n  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>) {\n"
               f'    %0 = "stablehlo.sort"(%arg0) ({block}) {{dimension = 0 : i64, '
               "is_stable = true} : (tensor<3xf32>) -> tensor<3xf32>\n"
               "    func.return %0 : tensor<3xf32>\n  }\n}\n")


def test_block_names_never_shadow_the_function_arguments():
    text = block_text(PAIR, "r1_")
    assert "%arg" not in text.replace("%r1_arg", "")


def test_jax_function_agrees_with_the_oracle():
    import jax
    f = jax.jit(jax_function(PAIR))
    got = f(np.float32(1.5), np.int8(-3), np.float32(2.25), np.int8(7))
    want = oracle_regions.evaluate(PAIR, [np.float32(1.5), np.int8(-3), np.float32(2.25),
                                          np.int8(7)])
    assert [np.asarray(g).item() for g in got] == [w.item() for w in want]


def test_simple_call_recognises_one_op_forms():
    assert regions.simple_call("(si32, si32) -> arg1") == ("arg", {}, (1,))
    assert regions.simple_call("(f32, f32) -> add(arg0, arg1)") == ("add", {}, (0, 1))
    assert regions.simple_call(LT_TOTAL) == (
        "compare", {"comparison_direction": "LT", "compare_type": "TOTALORDER"}, (0, 1))
    assert regions.simple_call(PAIR) is None


def test_retyped_changes_argument_types_only():
    assert regions.retyped(LT_TOTAL, {"f32": "bf16"}) == \
        "(bf16, bf16) -> compare(arg0, arg1, 'LT', 'TOTALORDER')"
    assert regions.retyped(LT_TOTAL, positions={1: "si8"}).startswith("(f32, si8)")


def test_spec_expressions_build_and_read_regions():
    env = {"E": "bf16"}
    text = ex.evaluate("""region([E, E], "compare(arg0, arg1, 'GT', 'FLOAT')")""", env)
    assert text == "(bf16, bf16) -> compare(arg0, arg1, 'GT', 'FLOAT')"
    assert ex.evaluate("region_arg_types(r)", {"r": text}) == ["bf16", "bf16"]
    assert ex.evaluate("region_result_types(r)", {"r": text}) == ["i1"]
    assert element_type("i1").name == "i1"
