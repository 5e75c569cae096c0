"""Reading StableHLO modules written elsewhere (issue 29, conformance/mlir/reader.py):
every op of the suite's specs reads back from its canonical text as the same signature,
jax exports read in text and bytecode, the dialect's defaults fill what a text omits,
and what cannot be judged is one line naming the op and its location."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import export

from conformance.checking import plan
from conformance.core.region_program import is_program
from conformance.mlir.emitter import (MLIR_LOCK, context, jaxlib_lacks, module_text, op_syntax,
                                      parse)
from conformance.mlir.reader import ReadError, read_file, read_text
from conformance.specs import load_spec, op_names


def _canonical(sig) -> str:
    """The op as MLIR prints the signature's module (value names renumbered), from
    the op on: what a region program's value names cannot change."""
    module = parse(module_text(sig))
    with MLIR_LOCK, context():
        text = module.operation.get_asm(enable_debug_info=False, print_generic_op_form=True)
    return text[text.index(f'"{op_syntax(sig.op).name}"'):]


def _readable_ops() -> list[str]:
    """Every op a module holds as one op (not call, which is followed; not a
    decomposition; not a host transfer, whose queue is no operand; not an op whose
    signatures all hold quantized types, which jaxlib's bindings cannot parse:
    tests/test_quantized.py; not a pair such as async_start -> async_done, whose future
    the reader names not judged: tests/test_async_ops.py)."""
    out = []
    for op in op_names():
        syntax, spec = op_syntax(op), load_spec(op)
        whole_op_lacking = syntax.jaxlib_lacks and syntax.jaxlib_lacks[0].strip() == "True"
        if not (syntax.decomposition or syntax.function == "callee" or spec.host_transfer
                or whole_op_lacking or spec.quantized or syntax.async_pair):   # (no module holds collective_reduce;
            # jaxlib's bindings cannot parse quantized types)
            out.append(op)
    return out


@pytest.mark.parametrize("op", _readable_ops())
def test_every_op_reads_back_from_its_canonical_text_as_the_same_signature(op):
    spec = load_spec(op)
    for binding in plan.select_bindings(spec, None)[:2]:
        for sig in plan.plan_binding(spec, binding, 0, "quick")[:2]:
            if jaxlib_lacks(sig):           # a newer spec's form: no module holds it
                continue
            read = read_text(module_text(sig), op)
            # (token and tuple values too: a tuple is read as its leaves, a token as none)
            assert not read.unjudged, (sig, read.unjudged)
            got = [o.signature for o in read.program.operations if o.signature.op == op]
            if any(is_program(r) for r in sig.regions):
                # a region program's value names are the reader's own; a captured value no
                # region reads is not in the module at all
                assert got and got[-1].attributes == sig.attributes
                assert _canonical(got[-1]).split("}) :")[0].count("stablehlo.") == \
                    _canonical(sig).split("}) :")[0].count("stablehlo."), sig
            else:
                assert sig in got, (sig, got)


# ---------------------------------------------------------------------------------------
# Modules jax writes
# ---------------------------------------------------------------------------------------

def _mlp(x, w1, b1, w2):
    return jax.nn.softmax(jnp.tanh(x @ w1 + b1) @ w2, axis=-1)


def _misc(x, i):
    return (jnp.sort(x, axis=-1), jnp.argmax(x, axis=-1), jnp.cumsum(x, axis=0), x[i],
            x.at[i].add(1.0), jax.lax.erf(x))


def _ctrl(x, n):
    y = jax.lax.fori_loop(0, n, lambda k, v: v * 1.5 + k, x)
    return jax.lax.cond(n > 2, lambda v: v + 1, lambda v: v - 1, y)


f32 = jnp.float32
EXPORTS = {
    "mlp": (_mlp, [((4, 8), f32), ((8, 16), f32), ((16,), f32), ((16, 3), f32)]),
    "misc": (_misc, [((5, 6), f32), ((2,), jnp.int32)]),
    "ctrl": (_ctrl, [((3,), f32), ((), jnp.int32)]),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each function exported by jax: NAME.mlir (text) and NAME.mlirbc (the VHLO portable
    artifact jax.export serialises)."""
    folder = tmp_path_factory.mktemp("exports")
    for name, (fn, args) in EXPORTS.items():
        e = export.export(jax.jit(fn))(*[jax.ShapeDtypeStruct(s, d) for s, d in args])
        (folder / f"{name}.mlir").write_text(e.mlir_module())
        (folder / f"{name}.mlirbc").write_bytes(e.mlir_module_serialized)
    return folder


@pytest.mark.parametrize("suffix", [".mlir", ".mlirbc"])
def test_a_jax_mlp_reads_whole_with_jax_source_locations(exported, suffix):
    read = read_file(exported / f"mlp{suffix}")
    assert not read.unjudged and not read.dropped_results
    ops = read.program.ops()
    assert ops.count("dot_general") == 2 and "tanh" in ops and "exponential" in ops
    assert ops.count("reduce") == 2 and "divide" in ops
    assert [t.mlir() for t in read.program.argument_types] == [
        "tensor<4x8xf32>", "tensor<8x16xf32>", "tensor<16xf32>", "tensor<16x3xf32>"]
    dots = [o for o in read.program.operations if o.op == "dot_general"]
    # the dialect's default where jax's text has no precision_config
    assert dots[0].signature.attributes["precision_config"] == ["DEFAULT", "DEFAULT"]
    where = read.origins[dots[0].name]
    assert where.op == "stablehlo.dot_general" and "dot_general" in where.location
    assert "test_module_reader.py" in where.location       # jax's source location
    assert where.text.startswith('%') and "stablehlo.dot_general" in where.text
    assert not read.program.problems()


@pytest.mark.parametrize("suffix", [".mlir", ".mlirbc"])
def test_calls_are_followed_composites_keep_their_decomposition_and_comparators_keep_constants(
        exported, suffix):
    read = read_file(exported / f"misc{suffix}")
    ops = read.program.ops()
    # argmax and cumsum are func.call of private functions: their ops read in place
    assert "call" not in ops and "iota" in ops and "reduce" in ops and "reduce_window" in ops
    assert "gather" in ops and "scatter" in ops
    (comp,) = [o for o in read.program.operations if o.op == "composite"]
    assert comp.signature.attributes["name"] == "chlo.erf"
    assert is_program(comp.signature.regions[0]) and "clamp" in comp.signature.regions[0]
    # jax's float comparator reads constants from outside its region (a canonical NaN,
    # +0): they become constant(...) calls of the region expression
    assert not read.unjudged and not read.dropped_results
    (sort,) = [o for o in read.program.operations if o.op == "sort"]
    comparator = sort.signature.regions[0]
    assert "constant('dense<0x7FC00000> : tensor<f32>')" in comparator
    assert "'TOTALORDER'" in comparator


def test_while_and_case_regions_read_with_cloned_constants_and_captured_values(exported):
    read = read_file(exported / "ctrl.mlir")
    assert not read.unjudged
    (loop,) = [o for o in read.program.operations if o.op == "while"]
    body = loop.signature.regions[1]
    assert is_program(body) and '"op":"constant"' in body    # %c_1, %cst_0 cloned in
    (case,) = [o for o in read.program.operations if o.op == "case"]
    # both branches read the while's result from outside: one captured operand
    assert len(case.operands) == 2 and case.operands[1] == f"{loop.name}#2"


# ---------------------------------------------------------------------------------------
# Texts with defaults left out, values the bindings cannot cast, what is not judged
# ---------------------------------------------------------------------------------------

def _module(body: str, args: str = "%a: tensor<2xf32>", results: str = "tensor<2xf32>"):
    return f"func.func @main({args}) -> {results} {{\n{body}\n}}\n"


def test_attributes_the_text_leaves_out_take_the_dialects_defaults():
    text = _module("""
  %0 = stablehlo.compare LT, %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  %1 = stablehlo.compare LT, %i, %i : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
  %2 = stablehlo.compare LT, %u, %u : (tensor<2xui8>, tensor<2xui8>) -> tensor<2xi1>
  %3 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f],
       window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
       : (tensor<1x5x2xf32>, tensor<3x2x4xf32>) -> tensor<1x3x4xf32>
  return %0, %3 : tensor<2xi1>, tensor<1x3x4xf32>""",
                   "%a: tensor<2xf32>, %i: tensor<2xi32>, %u: tensor<2xui8>, "
                   "%x: tensor<1x5x2xf32>, %k: tensor<3x2x4xf32>",
                   "(tensor<2xi1>, tensor<1x3x4xf32>)")
    read = read_text(text)
    assert not read.unjudged
    compares = [o.signature.attributes["compare_type"] for o in read.program.operations
                if o.op == "compare"]
    assert compares == ["FLOAT", "SIGNED", "UNSIGNED"]
    (conv,) = [o.signature.attributes for o in read.program.operations
               if o.op == "convolution"]
    assert conv["window_strides"] == [1] and conv["lhs_dilation"] == [1]
    assert conv["rhs_dilation"] == [1] and conv["window_reversal"] == ["false"]
    assert conv["padding"] == "dense<[[0, 0]]> : tensor<1x2xi64>"
    assert conv["precision_config"] == ["DEFAULT", "DEFAULT"]
    assert conv["input_feature_dimension"] == 2 and conv["kernel_output_feature_dimension"] == 2


def test_a_complex_constant_and_a_hex_constant_read_exactly():
    text = _module("""
  %0 = stablehlo.constant dense<(1.5,-2.0)> : tensor<complex<f32>>
  %1 = stablehlo.constant dense<"0x0000803F000000400000C0FF"> : tensor<3xf32>
  return %0, %1 : tensor<complex<f32>>, tensor<3xf32>""", "",
                   "(tensor<complex<f32>>, tensor<3xf32>)")
    read = read_text(text)
    values = [o.signature.attributes["value"] for o in read.program.operations]
    assert values[0] == "dense<(1.5, -2.0)> : tensor<complex<f32>>"
    assert values[1] == "dense<[1.0, 2.0, 0xFFC00000]> : tensor<3xf32>"


def test_what_cannot_be_judged_is_named_and_the_rest_is_still_read():
    text = _module("""
  %0 = stablehlo.abs %a : tensor<2xf32>
  %1 = stablehlo.real_dynamic_slice %a, %s, %s, %s : (tensor<2xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xf32>
  %2 = stablehlo.negate %1 : tensor<2xf32>
  %3 = stablehlo.exponential %0 : tensor<2xf32>
  return %3, %2 : tensor<2xf32>, tensor<2xf32>""", "%a: tensor<2xf32>, %s: tensor<1xi64>",
                   "(tensor<2xf32>, tensor<2xf32>)")
    read = read_text(text, "m.mlir")
    assert read.program.ops() == ["abs", "exponential"]
    first, second = read.unjudged
    assert first.op == "stablehlo.real_dynamic_slice" and first.location == "m.mlir:4:8" \
        and "no spec" in first.reason
    assert second.op == "stablehlo.negate" and "not judged" in second.reason
    assert read.dropped_results == (1,) and read.program.results == ("v1",)


def test_gather_with_batching_dimensions_reads_back_its_attributes():
    # gather with batching dimensions (the 2026-08 text, which the spec follows): both
    # lists read through the bindings' accessors, the printed-again check agrees
    text = _module("""
  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [], collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 1>, slice_sizes = array<i64: 1, 1>} : (tensor<2x3xf32>, tensor<2x1xi32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>""", "%a: tensor<2x3xf32>, %i: tensor<2x1xi32>")
    read = read_text(text)
    assert not read.unjudged and read.program.ops() == ["gather"]
    (op,) = read.program.operations
    attrs = op.signature.attributes if hasattr(op, "signature") else op.attributes
    assert attrs["operand_batching_dims"] == [0] and attrs["start_indices_batching_dims"] == [0]
    assert attrs["collapsed_slice_dims"] == [1] and attrs["start_index_map"] == [1]


def test_plain_mlir_bytecode_reads_like_its_text(tmp_path):
    text = _module("  %0 = stablehlo.sine %a : tensor<2xf32>\n  return %0 : tensor<2xf32>")
    module = parse(text)
    path = tmp_path / "m.mlirbc"
    with MLIR_LOCK, context():
        with open(path, "wb") as f:
            module.operation.write_bytecode(f)
    assert read_file(path).program.ops() == ["sine"]


@pytest.mark.parametrize("content", [b"", b"module {", b"\x00\x01\x02", b"ML\xefR\x00junk"])
def test_a_file_that_is_not_a_module_is_one_line_naming_it(tmp_path, content):
    path = tmp_path / "bad.mlir"
    path.write_bytes(content)
    with pytest.raises(ReadError) as e:
        read_file(path)
    assert str(e.value).startswith(str(path)) and "\n" not in str(e.value)


def test_the_hex_form_of_a_constant_holds_the_elements_bytes():
    from conformance.core.dense import parse_dense
    a = parse_dense('dense<"0x0000803F00000040"> : tensor<2xf32>')
    assert a.dtype == np.float32 and a.tolist() == [1.0, 2.0]
    assert parse_dense('dense<"0x0100"> : tensor<2xi1>').tolist() == [True, False]
    assert parse_dense('dense<"0x0000C03F"> : tensor<3xf32>').tolist() == [1.5] * 3
    with pytest.raises(ValueError):
        parse_dense('dense<"0x0000803F00"> : tensor<2xf32>')


def test_a_region_constant_is_typed_by_its_value_and_evaluated_for_every_element():
    from conformance.oracles.regions import evaluate
    from conformance.specs.regions import RegionError, parse as parse_region
    text = "(f32, f32) -> compare(arg0, constant('dense<0.5> : tensor<f32>'), 'LT', 'FLOAT')"
    assert parse_region(text).result_types[0].name == "i1"
    (out,) = evaluate(text, [np.array([0.25, 0.5, 1.0], np.float32)] * 2)
    assert out.tolist() == [True, False, False]
    with pytest.raises(RegionError):        # a region's values are rank 0
        parse_region("(f32) -> add(arg0, constant('dense<[1.0, 2.0]> : tensor<2xf32>'))")


def test_a_host_transfer_is_named_not_judged_and_a_module_of_nothing_judged_is_unjudged(
        tmp_path):
    """infeed's data comes from the host's queue, which a module does not hold: it is
    named, with why, and so is the abs that reads its data (not the users of its
    token, which carries no data: tests/test_module_tuples.py); a module with nothing
    left to judge is ``unjudged``, no divergence."""
    from conformance.checking.modules import check_module
    from planted_programs import OracleProgram
    text = """func.func @main(%a: tensor<2xf32>, %t: !stablehlo.token) -> (tensor<2xf32>, !stablehlo.token) {
  %0:2 = "stablehlo.infeed"(%t) {infeed_config = ""} : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
  %1 = stablehlo.abs %0#0 : tensor<2xf32>
  return %1, %0#1 : tensor<2xf32>, !stablehlo.token
}
"""
    read = read_text(text, "tok.mlir")
    assert [u.op for u in read.unjudged] == ["stablehlo.infeed", "stablehlo.abs"]
    assert "a host transfer" in read.unjudged[0].reason
    assert "reads %0#0" in read.unjudged[1].reason
    assert read.program.argument_names == ("arg0",) and not read.program.operations
    assert read.dropped_results == (0,)         # abs's; the token carries no data
    v = check_module(OracleProgram(), read, [np.zeros((2, 2), np.float32)], 2)
    assert v.outcome == "unjudged" and not v.diverges and "2 not judged" in v.message


def test_a_composite_its_spec_cannot_hold_is_read_as_its_decomposition():
    """jax's top_k: a composite named chlo.top_k with {k = 2}, which composite's spec
    (its listed names and attributes) cannot hold: its decomposition's ops are read in
    place, each judged, and nothing is left unjudged."""
    text = """func.func @main(%a: tensor<4xf32>) -> (tensor<2xf32>, tensor<4xf32>) {
  %0 = stablehlo.composite "chlo.top_k" %a {composite_attributes = {k = 2 : i64}, decomposition = @top_k_impl, version = 1 : i32} : (tensor<4xf32>) -> tensor<2xf32>
  %1 = stablehlo.abs %a : tensor<4xf32>
  return %0, %1 : tensor<2xf32>, tensor<4xf32>
}
func.func private @top_k_impl(%x: tensor<4xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %c = stablehlo.compare GT, %p, %q, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.slice %0 [0:2] : (tensor<4xf32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}
"""
    read = read_text(text, "topk.mlir")
    assert not read.unjudged and read.program.ops() == ["sort", "slice", "abs"]
    assert read.origins[read.program.operations[0].name].location == "topk.mlir:7:8"
    (top, _), = [oracle_run(read, [np.array([[1.0, -3.0, 7.0, 2.0]], np.float32)])]
    assert top.tolist() == [[7.0, 2.0]]


def oracle_run(read, inputs):
    from conformance.oracles.programs import evaluate_program
    values = evaluate_program(read.program, inputs, batch=1)
    return [values.values[r] for r in read.program.results]


def test_dynamic_broadcast_in_dim_without_its_optional_hints_reads_with_the_dialect_s_empty_ones():
    text = _module("""
  %0 = stablehlo.dynamic_broadcast_in_dim %a, %s, dims = [0] : (tensor<2xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>""", "%a: tensor<2xf32>, %s: tensor<2xi64>", "tensor<2x3xf32>")
    read = read_text(text, "m.mlir")
    assert read.unjudged == () or list(read.unjudged) == []
    (op,) = read.program.operations
    assert op.signature.op == "dynamic_broadcast_in_dim"
    assert list(op.signature.attributes["known_expanding_dimensions"]) == []
    assert list(op.signature.attributes["known_nonexpanding_dimensions"]) == []
