"""The quantized forms of the data-movement ops (specs/quantized_movement.yaml, issue 30):
the table against the current text's Type columns, the worked examples as golden vectors,
drawn signatures valid, each op's quantized rules broken by hand (a per-axis quantization
dimension that does not follow transpose's permutation, reshape's products, broadcast's
dimension-of-1 rule; scales or zero points that differ where the types must be equal), and
per op a planted backend with a realistic bug that fails and a legal variant that passes.
Fast: no compiles except the backends' refusals at the end."""
import dataclasses
import re

import numpy as np
import pytest

from conformance import oracles
from conformance.checking import golden
from conformance.core.case import Signature
from conformance.specs import load_spec, op_names, quantized_movement
from conformance.specs.validity import violations

from test_allowed_sets import judge

I8, I16 = np.int8, np.int16
OPS = sorted(quantized_movement())


def _sig(op, ins, outs, attrs=None):
    return Signature.make(op, ins, outs, attrs or {})


# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------

def test_the_table_makes_ops_whose_type_column_takes_quantized_tensors():
    """Each form's plain op takes "quantized tensor" (per axis) or "per-tensor quantized
    tensor" in the current text's Inputs table, and the form's operand row says which."""
    from test_spec_versions import CURRENT, _shared
    assert len(OPS) == 9 and set(OPS) <= set(op_names())
    shared = _shared()
    if shared is None:
        pytest.skip("the current spec text is not here (../shared or $CONFORMANCE_SHARED)")
    text = (shared / "spec" / CURRENT).read_text()
    for name, base in quantized_movement().items():
        section = text.split(f"\n### {base}\n", 1)[1].split("\n### ", 1)[0]
        row = re.search(r"\| \(I1\)\s*\| `\w+`\s*\|([^|]+)\|", section).group(1)
        spec = load_spec(name)
        per_axis = any(f.startswith("quant_axis") for f in
                       spec.data["type_variables"]["E"]["types"])
        assert "quantized tensor" in row, name
        assert ("per-tensor" not in row) == per_axis, (name, row)
        assert spec.spec_version == "stablehlo-2026-08" and spec.family == "quantized_movement"
        assert spec.data["mlir"]["op"] == f"stablehlo.{base}" and spec.xla_names == ()


@pytest.mark.parametrize("op", OPS)
def test_worked_examples_are_golden(op):
    examples = golden.examples(load_spec(op))
    assert examples
    for ex in examples:
        assert violations(ex.case.signature) == [], ex.name
        got = oracles.evaluate_batch(ex.case.signature, [np.asarray(x)[None] for x in ex.case.inputs])
        assert golden.mismatch(ex, [g[0] for g in got]) is None, ex.name


@pytest.mark.parametrize("op", OPS)
def test_drawn_signatures_are_valid_and_follow_the_quantization_dimension(op):
    """Canonical signatures of every binding, and a few drawn ones: no rule broken; per
    axis the result's quantization dimension is the one the op's rule names."""
    from hypothesis import HealthCheck, given, settings
    from conformance.generators.signatures import canonical, signatures
    spec = load_spec(op)
    seen = []
    for b in spec.type_bindings():
        for shape in ((2,), (3,)):
            seen.append(canonical(spec, b, shape))

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(signatures(spec))
    def draw(sig):
        seen.append(sig)
    draw()
    per_axis = 0
    for sig in seen:
        assert violations(sig) == [], sig
        ot = sig.input_types[0].element_type
        rt = sig.result_types[0].element_type
        if ot.is_per_axis:
            per_axis += 1
            qd, rd = ot.quantization_dimension, rt.quantization_dimension
            if "permutation" in sig.attributes:
                assert sig.attributes["permutation"][rd] == qd
            if "broadcast_dimensions" in sig.attributes:
                assert sig.attributes["broadcast_dimensions"][qd] == rd
            assert sig.result_types[0].shape[rd] == len(rt.scales)
    assert per_axis or "per-tensor" in spec.inputs[0].type_text


# ---------------------------------------------------------------------------
# the quantized rules, broken by hand
# ---------------------------------------------------------------------------

AX = "!quant.uniform<i8:f32:{d}, {{0.5:1,0.25:-2,2.0:3}}>"


def test_transpose_quantization_dimension_must_follow_the_permutation():
    ok = _sig("transpose_quantized", [f"tensor<3x3x{AX.format(d=1)}>"],
              [f"tensor<3x3x{AX.format(d=0)}>"], {"permutation": [1, 0]})
    assert violations(ok) == []
    kept = dataclasses.replace(ok, result_types=(
        Signature.make("x", [], [f"tensor<3x3x{AX.format(d=1)}>"]).result_types[0],))
    assert violations(kept) == ["C4"]        # the dimension not moved with its data
    scaled = _sig("transpose_quantized", [f"tensor<3x3x{AX.format(d=1)}>"],
                  ["tensor<3x3x!quant.uniform<i8:f32:0, {0.5:1,0.25:-2,4.0:3}>>"],
                  {"permutation": [1, 0]})
    assert violations(scaled) == ["C1"]      # per axis only the dimension may differ
    pt = "!quant.uniform<i8:f32, 0.5:1>"
    requantised = _sig("transpose_quantized", [f"tensor<2x3x{pt}>"],
                       ["tensor<3x2x!quant.uniform<i8:f32, 0.25:1>>"], {"permutation": [1, 0]})
    assert violations(requantised) == ["C1"]


def test_reshape_keeps_the_quantized_dimension_whole():
    two = "!quant.uniform<i8:f32:{d}, {{0.5:1,0.25:-2}}>"
    ok = _sig("reshape_quantized", [f"tensor<3x2x2x{two.format(d=2)}>"],
              [f"tensor<6x2x{two.format(d=1)}>"])
    assert violations(ok) == []
    # the quantized dimension merged with one before it: its slices are not the result's
    merged = _sig("reshape_quantized", [f"tensor<2x3x2x{two.format(d=0)}>"],
                  [f"tensor<2x6x{two.format(d=0)}>"])
    assert violations(merged) == []
    moved = _sig("reshape_quantized", [f"tensor<2x2x{two.format(d=0)}>"],
                 [f"tensor<2x2x{two.format(d=1)}>"])
    assert violations(moved) == ["C3"]


def test_broadcast_quantization_dimension_and_a_dimension_of_one():
    one = "!quant.uniform<i8:f32:0, {0.5:1}>"
    ok = _sig("broadcast_in_dim_quantized", [f"tensor<1x{one}>"],
              ["tensor<2x3x!quant.uniform<i8:f32:1, {0.5:1,0.5:1,0.5:1}>>"],
              {"broadcast_dimensions": [1]})
    assert violations(ok) == []
    other = _sig("broadcast_in_dim_quantized", [f"tensor<1x{one}>"],
                 ["tensor<2x3x!quant.uniform<i8:f32:1, {0.5:1,0.25:1,0.5:1}>>"],
                 {"broadcast_dimensions": [1]})
    assert violations(other) == ["C6"]       # a slice that is not the operand's one scale
    wrong_dim = _sig("broadcast_in_dim_quantized", [f"tensor<1x{one}>"],
                     ["tensor<3x3x!quant.uniform<i8:f32:0, {0.5:1,0.5:1,0.5:1}>>"],
                     {"broadcast_dimensions": [1]})
    assert violations(wrong_dim) == ["C6"]


def test_per_tensor_forms_require_equal_parameters_and_refuse_per_axis():
    from conformance.backends.numpy_backend import InvalidProgram, NumpyBackend
    pt = "!quant.uniform<u8:f32, 0.5:128>"
    cases = {
        "C1": _sig("pad_quantized", [f"tensor<2x{pt}>", "tensor<!quant.uniform<u8:f32, 0.5:0>>"],
                   [f"tensor<4x{pt}>"], {"edge_padding_low": [1], "edge_padding_high": [1],
                                         "interior_padding": [0]}),
        "I1": _sig("slice_quantized", [f"tensor<3x{AX.format(d=0)}>"],
                   [f"tensor<3x{AX.format(d=0)}>"],
                   {"start_indices": [0], "limit_indices": [3], "strides": [1]}),
    }
    scaled = _sig("concatenate_quantized", [f"tensor<2x{pt}>", "tensor<1x!quant.uniform<u8:f32, 1.0:128>>"],
                  [f"tensor<3x{pt}>"], {"dimension": 0})
    assert violations(cases["C1"]) == ["C1"]
    assert "I1" in violations(cases["I1"])
    assert violations(scaled) == ["C1"]
    for rule, sig in cases.items():
        with pytest.raises(InvalidProgram, match="breaks"):
            NumpyBackend().compile(dataclasses.replace(sig, invalid=rule))


def test_every_rule_breaks_alone():
    from conformance.generators import breakable
    for op in OPS:
        spec = load_spec(op)
        assert set(breakable(spec)) >= {c.id for c in spec.constraints}, op


def test_invalid_candidates_move_the_dimension_or_change_one_parameter():
    """From a drawn signature whose scales differ per slice, one change of a type breaks
    transpose C4 alone (the result's dimension moved to the other of the same size, the
    parameters kept) and pad C1 alone (the padding value's scale or zero point changed)."""
    from conformance.generators import candidates
    moved = candidates(load_spec("transpose_quantized"), TRANSPOSE, "C4")
    assert moved and all(violations(s) == ["C4"] for s in moved)
    changed = candidates(load_spec("pad_quantized"), PAD, "C1")
    params = {str(s.input_types[1]) for s in changed}
    assert "tensor<!quant.uniform<i8:f32, 1.0:5>>" in params          # the scale alone
    assert "tensor<!quant.uniform<i8:f32, 0.5:4>>" in params          # the zero point alone


# ---------------------------------------------------------------------------
# planted backends: a realistic bug fails, a legal variant passes
# ---------------------------------------------------------------------------

def _params(qt, shape, dim):
    """Scales and zero points broadcast along ``dim`` of ``shape`` (per tensor: scalars)."""
    s, z = np.array(qt.scales), np.array(qt.zero_points)
    if qt.quantization_dimension is None:
        return s[0], z[0]
    view = [1] * len(shape)
    view[dim] = len(s)
    return s.reshape(view), z.reshape(view)


def _through_floats(move, float_dtype=np.float64, result_dim=None):
    """A backend that dequantizes the operand, moves the real values, and quantizes them
    again with the result's parameters along ``result_dim`` (default: the result's own
    quantization dimension), in ``float_dtype``."""
    def run(sig, ins, out):
        ot, rt = sig.input_types[0], sig.result_types[0]
        s, z = _params(ot.element_type, ins[0].shape, ot.element_type.quantization_dimension)
        real = ((ins[0].astype(np.int64) - z) * s).astype(float_dtype)
        moved = move(sig, real)
        dim = rt.element_type.quantization_dimension if result_dim is None else result_dim
        rs, rz = _params(rt.element_type, moved.shape, dim)
        q = np.rint((moved / rs.astype(float_dtype)).astype(np.float64) + rz)
        et = rt.element_type
        return [np.clip(q, et.storage_min, et.storage_max).astype(out[0].dtype)]
    return run


def _transpose(sig, x):
    return np.transpose(x, sig.attributes["permutation"])


TRANSPOSE = _sig("transpose_quantized",
                 ["tensor<3x3x!quant.uniform<i8:f32:1, {0.5:1,0.25:-2,2.0:3}>>"],
                 ["tensor<3x3x!quant.uniform<i8:f32:0, {0.5:1,0.25:-2,2.0:3}>>"],
                 {"permutation": [1, 0]})
TX = np.random.default_rng(1).integers(-20, 20, (4, 3, 3)).astype(I8)


def test_transpose_that_does_not_move_the_quantization_dimension_fails():
    """Requantising along the operand's dimension index (1) instead of the result's (0):
    each element takes another slice's scale."""
    classes, _ = judge(TRANSPOSE, _through_floats(_transpose, result_dim=1), TX)
    assert classes == ["value"] * 4


def test_transpose_through_the_real_values_passes():
    """Dequantize, transpose, quantize with the result's own dimension: the same storage
    values (the scales are equal, the round trip is exact)."""
    assert judge(TRANSPOSE, _through_floats(_transpose), TX)[0] == ["pass"] * 4


RESHAPE = _sig("reshape_quantized", ["tensor<4x8x!quant.uniform<i16:f32, 0.0625:-100>>"],
               ["tensor<32x!quant.uniform<i16:f32, 0.0625:-100>>"])
RX = np.random.default_rng(2).integers(-32768, 32768, (3, 4, 8)).astype(I16)


def _reshape(sig, x):
    return x.reshape(sig.result_types[0].shape)


def test_reshape_that_requantises_in_half_precision_fails():
    """A reshape lowered as dequantize / reshape / quantize in f16: si16 storage does not
    survive f16's 11 significant bits."""
    classes, _ = judge(RESHAPE, _through_floats(_reshape, np.float16), RX)
    assert classes == ["value"] * 3


def test_reshape_that_requantises_exactly_passes():
    assert judge(RESHAPE, _through_floats(_reshape, np.float64), RX)[0] == ["pass"] * 3


PAD = _sig("pad_quantized", ["tensor<2x3x!quant.uniform<i8:f32, 0.5:5>>",
                             "tensor<!quant.uniform<i8:f32, 0.5:5>>"],
           ["tensor<4x7x!quant.uniform<i8:f32, 0.5:5>>"],
           {"edge_padding_low": [1, 0], "edge_padding_high": [1, 2], "interior_padding": [0, 1]})
PX = np.random.default_rng(3).integers(-128, 128, (2, 2, 3)).astype(I8)
PV = np.array([5, -7], I8)          # the real zero (storage 5), and another value


def _pad_with(value_of):
    def run(sig, ins, out):
        a = sig.attributes
        pads = [(lo, hi, it) for lo, hi, it in zip(a["edge_padding_low"], a["edge_padding_high"],
                                                   a["interior_padding"])]
        res = np.full(out[0].shape, value_of(sig, ins), out[0].dtype)
        idx = tuple(slice(lo, lo + (n - 1) * (it + 1) + 1, it + 1)
                    for (lo, hi, it), n in zip(pads, ins[0].shape))
        res[idx] = ins[0]
        return [res]
    return run


def test_pad_that_writes_storage_zero_fails():
    """Storage 0 is not the padding value (its storage 5 is the real 0.0 here; -7 is -6.0)."""
    classes, _ = judge(PAD, _pad_with(lambda sig, ins: 0), PX, PV)
    assert classes == ["value", "value"]


def test_pad_with_the_padding_values_storage_passes():
    """The same pad filling with the padding value's storage (a fill, then the operand
    written in place: not the oracle's code path)."""
    classes, _ = judge(PAD, _pad_with(lambda sig, ins: ins[1]), PX, PV)
    assert classes == ["pass", "pass"]


CONCAT = _sig("concatenate_quantized", ["tensor<2x2x!quant.uniform<u8:f32, 0.5:128>>",
                                        "tensor<1x2x!quant.uniform<u8:f32, 0.5:128>>"],
              ["tensor<3x2x!quant.uniform<u8:f32, 0.5:128>>"], {"dimension": 0})
CA = np.array([[[0, 127], [128, 255]]], np.uint8)
CB = np.array([[[200, 1]]], np.uint8)


def test_concatenate_that_reads_u8_storage_as_signed_fails():
    """IREE reads u8 storage as signed in its quantized arithmetic (docs/quantized-types.md):
    a data movement that goes through a signed dequantize clamps 128..255 to the range."""
    def signed(sig, ins, out):
        joined = np.concatenate([x.view(I8) for x in ins], axis=0).astype(np.int64)
        return [np.clip(joined, 0, 255).astype(np.uint8)]
    assert judge(CONCAT, signed, CA, CB)[0] == ["value"]


def test_concatenate_in_another_order_of_copies_passes():
    def copies(sig, ins, out):
        res = np.empty(out[0].shape, out[0].dtype)
        res[2:] = ins[1]
        res[:2] = ins[0]
        return [res]
    assert judge(CONCAT, copies, CA, CB)[0] == ["pass"]


# ---------------------------------------------------------------------------
# the backends that decline
# ---------------------------------------------------------------------------

def test_jax_and_the_interpreter_decline_with_their_reasons():
    from conformance.backends import Unsupported
    from conformance.backends.interpreter_backend import InterpreterBackend
    from conformance.backends.jax_backend import JaxBackend
    for sig in (TRANSPOSE, PAD):
        with pytest.raises(Unsupported, match="no quantized element types"):
            JaxBackend().compile(sig)
        with pytest.raises(Unsupported, match="register no quant dialect"):
            InterpreterBackend().compile(sig)


def test_xla_refusing_a_zero_sized_quantized_result_is_unsupported():
    """XLA folds a slice to an empty result into a constant of the quantized type, which
    its translation refuses ("result #0 type is not supported"): the refusal of a type,
    as for the other quantized forms, not a failure of a valid program."""
    from conformance.backends import get_backend
    from conformance.backends.base import Unsupported
    q = "!quant.uniform<i8:f32, 0.46875:113>"
    sig = Signature.make("slice_quantized", [f"tensor<2x0x2x{q}>"], [f"tensor<1x0x0x{q}>"],
                         {"start_indices": [1, 0, 0], "limit_indices": [2, 0, 0],
                          "strides": [2, 1, 3]})
    with pytest.raises(Unsupported, match="result #0 type is not supported"):
        get_backend("xla").compile(sig)
