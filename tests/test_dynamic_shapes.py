"""The dynamic-shape ops of the 2026-08 spec (dynamic_iota, dynamic_reshape,
dynamic_broadcast_in_dim, dynamic_pad, dynamic_gather, dynamic_conv): the spec examples
as golden vectors, generated signatures that jaxlib's verifier accepts with shape
operands whose values agree with the result type, invalid ones it rejects, a planted
backend that misreads a shape operand failing and one that takes a liberty the spec
allows passing (judged on the one check path), and the jax backend's measured refusal."""
import numpy as np
import pytest

from conformance import oracles
from conformance.backends import get_backend
from conformance.backends.base import Unsupported
from conformance.backends.numpy_backend import InvalidProgram
from conformance.checking import golden
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Case, Signature
from conformance.generators import breakable, candidates, canonical, case_inputs
from conformance.generators.values import batch_inputs
from conformance.mlir.emitter import module_text, parse, verifier_rejects
from conformance.specs import load_spec, op_names
from conformance.specs.validity import violations

from test_allowed_sets import Planted

OPS = ["dynamic_iota", "dynamic_reshape", "dynamic_broadcast_in_dim", "dynamic_pad",
       "dynamic_gather", "dynamic_conv"]
OPS = [op for op in OPS if op in op_names()]

#: the shape operands: op -> input names whose values the result type fixes
SHAPE_OPERANDS = {"dynamic_iota": ["output_shape"], "dynamic_reshape": ["output_shape"],
                  "dynamic_broadcast_in_dim": ["output_dimensions"],
                  "dynamic_pad": ["edge_padding_low", "edge_padding_high", "interior_padding"],
                  "dynamic_gather": ["slice_sizes"], "dynamic_conv": ["padding"]}


def _pool(op):
    """A few canonical signatures per op (every fourth type binding, three shapes)."""
    spec = load_spec(op)
    bindings = spec.type_bindings()
    return spec, [canonical(spec, b, s) for b in bindings[::max(1, len(bindings) // 3)]
                  for s in ((2,), (3, 2))]


@pytest.mark.parametrize("op", OPS)
def test_spec_examples_are_golden_and_verify(op):
    spec = load_spec(op)
    assert spec.spec_version == "stablehlo-2026-08"
    examples = list(golden.examples(spec))
    assert examples
    for ex in examples:
        parse(module_text(ex.case.signature))
        assert golden.mismatch(ex, oracles.evaluate_case(ex.case)) is None, ex.name


@pytest.mark.parametrize("op", OPS)
def test_valid_draws_verify_and_their_shape_operands_agree(op):
    """Every drawn signature is valid, jaxlib's StableHLO verifier accepts its module, and
    the oracle (which refuses shape operands that disagree with the result type) runs on
    a batch of its drawn values."""
    spec, pool = _pool(op)
    rng = np.random.default_rng(0)
    for sig in pool:
        assert violations(sig, spec) == [], sig.key()
        assert verifier_rejects(sig) is None, sig.key()
        stacked = batch_inputs(sig, rng, 4, spec)
        for b in range(4):
            oracles.evaluate(op, [x[b] for x in stacked], sig.attributes,
                             result_types=sig.result_types)


def test_dynamic_pad_draws_several_paddings_per_signature():
    """One compiled program meets several paddings (negative edges and interior ones)."""
    spec = load_spec("dynamic_pad")
    sig = Signature.make("dynamic_pad", ["tensor<3x2xf32>", "tensor<f32>"] +
                         ["tensor<2xsi32>"] * 3, ["tensor<6x2xf32>"])
    lo, hi, it = batch_inputs(sig, np.random.default_rng(1), 64, spec)[2:]
    assert len({tuple(r) for r in np.concatenate([lo, hi, it], 1)}) > 5
    assert (lo < 0).any() and (it > 0).any()
    assert ((3 + 2 * it[:, 0] + lo[:, 0] + hi[:, 0]) == 6).all()


@pytest.mark.parametrize("op", OPS)
def test_invalid_cases_are_rejected(op):
    """A valid signature with one constraint broken: the numpy backend and jaxlib's
    verifier reject it."""
    spec, pool = _pool(op)
    numpy_backend = get_backend("numpy")
    rng = np.random.default_rng(0)
    covered = set()
    for rule in breakable(spec):
        for valid in pool[:2]:          # (the canonical signatures of one binding)
            for bad in candidates(spec, valid, rule)[:1]:
                assert rule in violations(bad, spec)
                with pytest.raises(InvalidProgram, match=rule):
                    numpy_backend.run(Case(bad, case_inputs(bad, rng, spec)))
                covered.add(rule)
                if verifier_rejects(bad) is not None:
                    covered.add(("verifier", rule))
    rules = {r for r in covered if isinstance(r, str)}
    assert rules and rules <= set(breakable(spec))
    # jaxlib's verifier rejects most of them too (not every rule: see the report)
    assert len(covered - rules) >= len(rules) // 2, sorted(map(str, covered))


def _judge(sig, change, stacked):
    backend = Planted(change)
    check = SignatureCheck(load_spec(sig.op), sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    v = check.run_batch(0, [np.asarray(x) for x in stacked]).results[backend.name].verdict
    return v.case_class_names()


def test_dynamic_pad_with_low_and_high_swapped_fails():
    """A realistic bug: the edge paddings' operands read in the wrong order."""
    sig = Signature.make("dynamic_pad", ["tensor<4xsi32>", "tensor<si32>"] +
                         ["tensor<1xsi64>"] * 3, ["tensor<7xsi32>"])

    def swapped(sig, ins, out):
        x, v, lo, hi, it = ins
        return list(oracles.evaluate("dynamic_pad", [x, v, hi, lo, it],
                                     result_types=sig.result_types))
    stacked = [np.array([[1, 2, 3, 4]] * 2, np.int32), np.array([0, 0], np.int32),
               np.array([[3], [0]]), np.array([[0], [3]]), np.array([[0], [0]])]
    assert _judge(sig, swapped, stacked) == ["value", "value"]
    symmetric = [stacked[0], stacked[1], np.array([[1], [2]]), np.array([[2], [1]]),
                 np.array([[0], [0]])]
    assert _judge(sig, lambda s, i, o: o, symmetric) == ["pass", "pass"]


def test_dynamic_reshape_in_column_major_order_fails():
    sig = Signature.make("dynamic_reshape", ["tensor<2x3xf32>", "tensor<2xsi64>"],
                         ["tensor<3x2xf32>"])

    def fortran(sig, ins, out):
        return [np.reshape(ins[0], (3, 2), order="F")]
    stacked = [np.arange(12, dtype=np.float32).reshape(2, 2, 3), np.array([[3, 2]] * 2)]
    assert _judge(sig, fortran, stacked) == ["value", "value"]


def test_dynamic_gather_out_of_bounds_start_wrapped_passes_and_garbage_fails():
    """Out of bounds the spec leaves the window open among in-range starts (gather's rule,
    read with the operand's slice sizes): a backend that wraps the start instead of
    clamping it passes; one that reads past the slice (window off by one) fails."""
    sig = Signature.make("dynamic_gather", ["tensor<5xf32>", "tensor<3x1xsi32>",
                                            "tensor<1xsi64>"], ["tensor<3x2xf32>"],
                         {"offset_dims": [1], "collapsed_slice_dims": [],
                          "start_index_map": [0], "index_vector_dim": 1,
                          "indices_are_sorted": False})
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    idx = np.array([[[0], [7], [-2]], [[3], [1], [9]]], np.int32)
    sizes = np.array([[2], [2]])

    def wrapped(sig, ins, out):
        i = ins[1]
        w = np.where((i < 0) | (i > 3), np.mod(i, 4), i)
        return list(oracles.evaluate("dynamic_gather", [ins[0], w, ins[2]], sig.attributes,
                                     result_types=sig.result_types))
    assert _judge(sig, wrapped, [x, idx, sizes]) == ["pass", "pass"]

    def shifted(sig, ins, out):
        return [np.roll(out[0], 1, axis=-1)]
    assert "value" in _judge(sig, shifted, [x, idx, sizes])


@pytest.mark.parametrize("op", OPS)
def test_jax_backend_says_unsupported_with_its_reason(op):
    spec, pool = _pool(op)
    with pytest.raises(Unsupported, match=f"jax.lax has no {op}"):
        get_backend("jax").compile(pool[0])


def test_xla_declines_an_op_its_importer_cannot_translate():
    """Measured on jaxlib 0.10.2: XLA compiles dynamic_iota but not dynamic_pad (\"can't be
    translated to XLA HLO\"; one with an empty result it folds away and runs):
    Unsupported with XLA's message, not a backend error."""
    xla = get_backend("xla")
    sig = Signature.make("dynamic_pad", ["tensor<2x3xf32>", "tensor<f32>"] +
                         ["tensor<2xsi64>"] * 3, ["tensor<5x9xf32>"])
    with pytest.raises(Unsupported, match="can't be translated to XLA HLO"):
        xla.compile(sig)
    spec, pool = _pool("dynamic_iota")
    run = xla.compile(pool[0])
    inputs = case_inputs(pool[0], np.random.default_rng(0), spec)
    want = oracles.evaluate("dynamic_iota", inputs, pool[0].attributes,
                            result_types=pool[0].result_types)
    np.testing.assert_array_equal(np.asarray(run(list(inputs))[0]), want[0])


def test_the_interpreter_runs_every_spec_example():
    """jaxlib 0.10.2's StableHLO interpreter runs all six ops (XLA only three, jax none):
    the spec examples, shape operands passed as arguments, agree with the oracle."""
    interpreter = get_backend("interpreter")
    for op in OPS:
        for ex in golden.examples(load_spec(op)):
            run = interpreter.compile(ex.case.signature)
            got = run(list(ex.case.inputs))
            assert golden.mismatch(ex, tuple(np.asarray(g) for g in got)) is None, (op, ex.name)


def test_iree_runs_the_shape_operand_ops_it_lowers():
    """IREE 3.13 (the [iree] extra) lowers dynamic_iota and dynamic_reshape: their spec
    examples agree with the oracle; dynamic_pad it refuses (iree-cpu.yaml)."""
    pytest.importorskip("iree.compiler")
    pytest.importorskip("iree.runtime")
    iree = get_backend("iree")
    for op in ("dynamic_iota", "dynamic_reshape"):
        ex = next(iter(golden.examples(load_spec(op))))
        got = iree.compile(ex.case.signature)(list(ex.case.inputs))
        assert golden.mismatch(ex, tuple(np.asarray(g) for g in got)) is None, op
    ex = next(iter(golden.examples(load_spec("dynamic_pad"))))
    with pytest.raises(Exception, match="failed to legalize operation 'stablehlo.dynamic_pad'"):
        iree.compile(ex.case.signature)


def test_the_oracle_refuses_shape_operands_that_disagree_with_the_result_type():
    """Such a case is no program the spec defines (the result type and the operand's
    values must agree), so there is no oracle value for it."""
    from conformance.oracles.registry import OracleError
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(OracleError, match="dynamic_reshape: output_shape"):
        oracles.evaluate("dynamic_reshape", [x, np.array([2, 3])],
                         result_types=["tensor<3x2xf32>"])
    with pytest.raises(OracleError, match="dynamic_pad: interior_padding"):
        oracles.evaluate("dynamic_pad", [x, np.float32(0), np.array([0, 0]), np.array([0, 0]),
                                         np.array([-1, 0])], result_types=["tensor<2x3xf32>"])
    with pytest.raises(OracleError, match="dynamic_gather: slice_sizes"):
        oracles.evaluate("dynamic_gather", [x, np.array([0]), np.array([1, 2])],
                         {"offset_dims": [0], "collapsed_slice_dims": [0],
                          "start_index_map": [0], "index_vector_dim": 1,
                          "indices_are_sorted": False}, result_types=["tensor<3xf32>"])


CONV_1D = {"window_strides": [1], "lhs_dilation": [1], "rhs_dilation": [1],
           "window_reversal": ["false"], "input_batch_dimension": 0,
           "input_feature_dimension": 2, "input_spatial_dimensions": [1],
           "kernel_input_feature_dimension": 1, "kernel_output_feature_dimension": 2,
           "kernel_spatial_dimensions": [0], "output_batch_dimension": 0,
           "output_feature_dimension": 2, "output_spatial_dimensions": [1],
           "feature_group_count": 1, "batch_group_count": 1,
           "precision_config": ["DEFAULT", "DEFAULT"]}


@pytest.mark.skipif("dynamic_conv" not in OPS, reason="no dynamic_conv spec")
def test_dynamic_conv_with_the_padding_sides_swapped_fails_and_a_mirror_padding_passes():
    """A realistic bug: the padding operand's columns read as (high, low). The same total
    padding keeps the result type, so only the values tell; symmetric paddings pass."""
    sig = Signature.make("dynamic_conv", ["tensor<1x5x1xsi32>", "tensor<2x1x1xsi32>",
                                          "tensor<1x2xsi64>"], ["tensor<1x6x1xsi32>"], CONV_1D)

    def swapped(sig, ins, out):
        return list(oracles.evaluate("dynamic_conv", [ins[0], ins[1], ins[2][:, ::-1]],
                                     sig.attributes, result_types=sig.result_types))
    lhs = np.arange(1, 11, dtype=np.int32).reshape(2, 1, 5, 1)
    rhs = np.array([[[[1]], [[10]]]] * 2, np.int32)
    assert _judge(sig, swapped, [lhs, rhs, np.array([[[2, 0]], [[0, 2]]])]) == ["value"] * 2
    assert _judge(sig, swapped, [lhs, rhs, np.array([[[1, 1]], [[1, 1]]])]) == ["pass"] * 2


@pytest.mark.skipif("dynamic_conv" not in OPS, reason="no dynamic_conv spec")
def test_dynamic_conv_rounding_each_product_passes_the_bound_per_padding():
    """A legal variant: every product rounded to f32 before an f32 sum (one order the
    spec's reduce allows) stays within the contraction bound, which is computed per case
    from that case's own padding (three paddings in one batch); a result off by 1% fails
    (HIGHEST: beyond the bound is `bound`, not `precision`)."""
    sig = Signature.make("dynamic_conv", ["tensor<1x5x1xf32>", "tensor<2x1x1xf32>",
                                          "tensor<1x2xsi64>"], ["tensor<1x6x1xf32>"],
                         dict(CONV_1D, precision_config=["HIGHEST", "HIGHEST"]))

    def rounded(sig, ins, out):
        x, w, p = ins[0][0, :, 0], ins[1][:, 0, 0], ins[2][0]
        a = np.concatenate([np.zeros(p[0], np.float32), x, np.zeros(p[1], np.float32)])
        y = np.float32(a[:-1] * w[0]) + np.float32(a[1:] * w[1])
        return [y.astype(np.float32).reshape(1, 6, 1)]
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((3, 1, 5, 1)).astype(np.float32)
    rhs = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    pads = np.array([[[2, 0]], [[0, 2]], [[1, 1]]])
    assert _judge(sig, rounded, [lhs, rhs, pads]) == ["pass"] * 3
    off = _judge(sig, lambda s, i, o: [o[0] * np.float32(1.01)], [lhs, rhs, pads])
    assert set(off) <= {"bound", "value"} and "pass" not in off
