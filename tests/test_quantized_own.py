"""The quantized ops whose quantized text is a computation of their own (issue 30):
clamp (`dequantize_op_quantize(clamp, min, operand, max, ...)`), select
(`dequantize_select_quantize`), compare (`dequantize_compare`), is_finite ("always
true") and reduce_precision (`dequantize_op_quantize(lambda ...)`), specs/ops/
*_quantized.yaml with `quantized_semantics`, oracles/quantized_own.py.

Per op: its worked example as a golden vector, a planted backend with a realistic bug
that fails (storage integers handled as values, a step left out, f16 overflow), a legal
variant that passes (the exact value in float64, the scales folded); the constraints
broken one at a time; what jax, XLA, the interpreter and IREE do. Fast: no run."""
import numpy as np
import pytest

from conformance import oracles
from conformance.checking import golden
from conformance.core.case import Signature
from conformance.specs import load_spec
from conformance.specs.validity import violations

from test_allowed_sets import judge

OWN = ["clamp_quantized", "select_quantized", "compare_quantized", "is_finite_quantized",
       "reduce_precision_quantized"]
I8 = np.int8
_RNG = np.random.default_rng(7)


def qt(scale, zp=0, storage="i8", expressed="f32", shape="64x"):
    return f"tensor<{shape}!quant.uniform<{storage}:{expressed}, {scale}:{zp}>>"


def _params(t):
    e = t.element_type
    return float(e.scales[0]), int(e.zero_points[0])


def _deq(x, t, dtype=np.float64):
    s, z = _params(t)
    return ((x.astype(np.int64) - z) * s).astype(dtype)


def _requant(v, t):
    """Round half to even once, from float64: the exact value's storage value."""
    s, z = _params(t)
    e = t.element_type
    return np.clip(np.rint(np.asarray(v, np.float64) / s + z), e.storage_min, e.storage_max)


def _out(sig, r, out):
    return [np.asarray(r).astype(np.int64).astype(out[0].dtype)]


# ---------------------------------------------------------------------------
# the specs and their worked examples
# ---------------------------------------------------------------------------

def test_each_op_names_its_computation_and_prints_the_stablehlo_op():
    for op in OWN:
        spec = load_spec(op)
        sem = spec.data["quantized_semantics"]
        assert spec.family == "quantization" and spec.spec_version == "stablehlo-2026-08"
        assert spec.data["mlir"]["op"] == "stablehlo." + op.removesuffix("_quantized")
        assert sem["function"] in ("dequantize_op_quantize", "dequantize_select_quantize",
                                   "dequantize_compare", "always_true")
    assert load_spec("compare_quantized").data["quantized_semantics"]["attributes"] == \
        {"compare_type": "FLOAT"}


@pytest.mark.parametrize("op", OWN)
def test_worked_examples_are_golden(op):
    examples = golden.examples(load_spec(op))
    assert examples
    for ex in examples:
        got = oracles.evaluate_batch(ex.case.signature, [np.asarray(x)[None] for x in ex.case.inputs])
        assert golden.mismatch(ex, [g[0] for g in got]) is None, ex.name


# ---------------------------------------------------------------------------
# clamp: dequantize min, operand and max, clamp, quantize
# ---------------------------------------------------------------------------

CLAMP = Signature.make("clamp_quantized",
                       [qt(0.0390625, -3, shape=""), qt(0.0204010009765625, 3),
                        qt(0.0625, 5, shape="")],
                       [qt(0.00426483154296875, -5)])
CMIN = _RNG.integers(-128, 0, (4,)).astype(I8)
CX = _RNG.integers(-128, 128, (4, 64)).astype(I8)
CMAX = _RNG.integers(0, 128, (4,)).astype(I8)


def _clamp_in_storage(sig, ins, out):
    """The bug: min, operand and max clamped as storage integers and kept as they are
    (no dequantize, no requantising to the result's parameters)."""
    lo, x, hi = ins
    return _out(sig, np.minimum(np.maximum(x, lo), hi), out)


def _clamp_exact(sig, ins, out):
    """Legal: the clamp of the exact values in float64, requantised once."""
    lo, x, hi = (_deq(a, t) for a, t in zip(ins, sig.input_types))
    lo, hi = (b.reshape(b.shape + (1,) * (x.ndim - b.ndim)) for b in (lo, hi))
    v = np.minimum(np.maximum(x, lo), hi)
    return _out(sig, _requant(v, sig.result_types[0]), out)


def test_clamp_in_storage_without_requantising_fails():
    classes, _ = judge(CLAMP, _clamp_in_storage, CMIN, CX, CMAX)
    assert classes == ["value"] * 4


def test_clamp_of_the_exact_values_passes():
    assert judge(CLAMP, _clamp_exact, CMIN, CX, CMAX)[0] == ["pass"] * 4
    bf = _bf16(CLAMP)
    (want,) = oracles.evaluate_batch(bf, [CMIN, CX, CMAX])
    differs = (_clamp_exact(bf, [CMIN, CX, CMAX], [want])[0] != want).sum()
    classes, impl = judge(bf, _clamp_exact, CMIN, CX, CMAX)
    assert differs > 0 and classes == ["pass"] * 4
    assert impl["near_tie"]["alternatives"] == {"exact_or_spec": int(differs)}


# ---------------------------------------------------------------------------
# select: dequantize on_true and on_false, select, quantize
# ---------------------------------------------------------------------------

SELECT = Signature.make("select_quantized",
                        ["tensor<64xi1>", qt(0.0204010009765625, 3), qt(0.0312652587890625, -7)],
                        [qt(0.02426483154296875, -5)])
PRED = _RNG.integers(0, 2, (4, 64)).astype(bool)
ST, SF = (_RNG.integers(-128, 128, (4, 64)).astype(I8) for _ in range(2))


def _select_storage(sig, ins, out):
    """The bug: the selected storage integer kept as it is (right only where on_true,
    on_false and result have one scale and zero point)."""
    return _out(sig, np.where(ins[0], ins[1], ins[2]), out)


def _select_folded(sig, ins, out):
    """Legal: each branch requantised with one float64 multiplier (scale / result
    scale), rounded once."""
    ro = sig.result_types[0]
    so, zo = _params(ro)
    def rq(x, t):
        s, z = _params(t)
        return np.rint((x.astype(np.int64) - z) * (s / so) + zo)
    r = np.where(ins[0], rq(ins[1], sig.input_types[1]), rq(ins[2], sig.input_types[2]))
    return _out(sig, np.clip(r, ro.element_type.storage_min, ro.element_type.storage_max), out)


def test_select_of_storage_integers_fails():
    assert judge(SELECT, _select_storage, PRED, ST, SF)[0] == ["value"] * 4


def _bf16(sig):
    def swap(t):
        return str(t).replace(":f32,", ":bf16,")
    return Signature.make(sig.op, [swap(t) for t in sig.input_types],
                          [swap(t) for t in sig.result_types], sig.attributes)


def test_select_with_folded_scales_passes():
    """In f32 the folded multiplier agrees with the spec everywhere here; in bf16 the
    spec's roundings move 40 elements across a tie: allowed and recorded."""
    assert judge(SELECT, _select_folded, PRED, ST, SF)[0] == ["pass"] * 4
    classes, impl = judge(_bf16(SELECT), _select_folded, PRED, ST, SF)
    assert classes == ["pass"] * 4 and impl["near_tie"]["alternatives"] == {"exact_or_spec": 40}


def test_select_with_a_rank0_pred_and_the_result_of_on_true_params():
    """pred of rank 0 picks one branch for every element; with the result's parameters
    equal to on_true's, the on_true branch is its storage values unchanged."""
    t = qt(0.25, 3, shape="3x")
    sig = Signature.make("select_quantized", ["tensor<i1>", t, qt(0.5, -1, shape="3x")], [t])
    x, y = np.array([[5, -7, 100], [5, -7, 100]], I8), np.array([[1, 2, 3], [1, 2, 3]], I8)
    (got,) = oracles.evaluate_batch(sig, [np.array([True, False]), x, y])
    assert got.tolist() == [[5, -7, 100], [7, 9, 11]]          # (1+1)*0.5/0.25 + 3 = 7, ...


# ---------------------------------------------------------------------------
# compare: dequantize both, compare as FLOAT
# ---------------------------------------------------------------------------

GRID = np.arange(-128, 128).astype(I8)
CL, CR = np.repeat(GRID, 256)[None], np.tile(GRID, 256)[None]     # every pair, one case


def _compare_sig(direction, expressed="f32", compare_type="SIGNED"):
    return Signature.make("compare_quantized",
                          [qt(0.0204010009765625, 3, expressed=expressed, shape="65536x"),
                           qt(0.0312652587890625, -7, expressed=expressed, shape="65536x")],
                          ["tensor<65536xi1>"],
                          {"comparison_direction": direction, "compare_type": compare_type})


def _compare_storage(sig, ins, out):
    """The bug: the storage integers compared (compare_type SIGNED read literally),
    ignoring the two sides' scales and zero points."""
    op = {"LT": np.less, "EQ": np.equal, "GE": np.greater_equal}[sig.attributes["comparison_direction"]]
    return [op(ins[0], ins[1])]


def _compare_exact(sig, ins, out):
    """Legal: the exact values (float64) compared."""
    op = {"LT": np.less, "EQ": np.equal, "GE": np.greater_equal}[sig.attributes["comparison_direction"]]
    a, b = (_deq(x, t) for x, t in zip(ins, sig.input_types))
    return [op(a, b)]


@pytest.mark.parametrize("direction", ["LT", "GE"])
def test_compare_of_storage_integers_fails(direction):
    assert judge(_compare_sig(direction), _compare_storage, CL, CR)[0] == ["value"]


def test_compare_of_exact_values_passes_and_bf16_roundings_are_recorded():
    """In f32 the dequantized si8 values are exact (the oracle and the exact comparison
    agree); in bf16 the roundings of the dequantize make some pairs equal (or reorder
    them) that are not: either answer there (rule rounded_compare)."""
    for direction in ("LT", "EQ", "GE"):
        assert judge(_compare_sig(direction), _compare_exact, CL, CR)[0] == ["pass"]
    sig = _compare_sig("EQ", "bf16", "FLOAT")
    (want,) = oracles.evaluate_batch(sig, [CL, CR])
    differs = int((_compare_exact(sig, [CL, CR], [want])[0] != want).sum())
    classes, impl = judge(sig, _compare_exact, CL, CR)
    assert differs > 0 and classes == ["pass"] and impl["rounded_compare"]["elements"] == differs


def test_compare_reads_compare_type_as_float_whatever_it_says():
    sigs = [_compare_sig("LT", compare_type=c) for c in ("SIGNED", "UNSIGNED", "FLOAT", "TOTALORDER")]
    got = [oracles.evaluate_batch(s, [CL, CR])[0] for s in sigs]
    assert all((g == got[0]).all() for g in got) and violations(sigs[1]) == []


# ---------------------------------------------------------------------------
# is_finite: always true
# ---------------------------------------------------------------------------

ISF = Signature.make("is_finite_quantized", [qt(511.75, -128, expressed="f16", shape="256x")],
                     ["tensor<256xi1>"])
IX = GRID[None]


def _is_finite_dequantized(sig, ins, out):
    """The bug: is_finite of the dequantized value in the expressed type: (k + 128) *
    511.75 overflows f16 from k = 0 up."""
    with np.errstate(over="ignore"):
        return [np.isfinite(_deq(ins[0], sig.input_types[0], np.float16))]


def _is_finite_wide(sig, ins, out):
    """Legal (and the same answer): is_finite of the float64 dequantized value."""
    return [np.isfinite(_deq(ins[0], sig.input_types[0]))]


def test_is_finite_of_the_f16_dequantized_value_fails_and_the_float64_one_passes():
    assert _is_finite_dequantized(ISF, [IX], None)[0].sum() < 256
    assert judge(ISF, _is_finite_dequantized, IX)[0] == ["value"]
    assert judge(ISF, _is_finite_wide, IX)[0] == ["pass"]


# ---------------------------------------------------------------------------
# reduce_precision: dequantize, reduce_precision in the expressed type, quantize
# ---------------------------------------------------------------------------

RP = Signature.make("reduce_precision_quantized", [qt(0.0204010009765625, 3, shape="256x")],
                    [qt(0.00426483154296875, -5, shape="256x")],
                    {"exponent_bits": 5, "mantissa_bits": 2})


def _requantise_only(sig, ins, out):
    """The bug: the operand requantised to the result's parameters, reduce_precision
    left out (a quantized reduce_precision taken for a no-op)."""
    return _out(sig, _requant(_deq(ins[0], sig.input_types[0]), sig.result_types[0]), out)


def _reduce_wide(sig, ins, out):
    """Legal: reduce_precision of the exact value in float64 (the same bits), rounded once."""
    from conformance.core.types import TensorType, element_type
    x = _deq(ins[0], sig.input_types[0])
    r = oracles.evaluate("reduce_precision", [x], sig.attributes,
                         result_types=[TensorType(x.shape, element_type("f64"))])[0]
    return _out(sig, _requant(r, sig.result_types[0]), out)


def test_reduce_precision_left_out_fails():
    assert judge(RP, _requantise_only, IX)[0] == ["value"]


def test_reduce_precision_in_float64_passes():
    """si16 storage: the spec's f32 dequantize rounds a 28-bit product, and
    reduce_precision to 10 bits of the rounded value ties where the exact one does not
    (a double rounding, up to 24 storage steps here): the exact value's result is allowed
    (near_tie, between the spec's value and the exact one) and recorded."""
    assert judge(RP, _reduce_wide, IX)[0] == ["pass"]
    wide = Signature.make(RP.op, [qt(0.0204010009765625, 3, "i16", shape="65536x")],
                          [qt(0.0204010009765625, -5, "i16", shape="65536x")],
                          {"exponent_bits": 8, "mantissa_bits": 10})
    x = np.arange(-32768, 32768).astype(np.int16)[None]
    (want,) = oracles.evaluate_batch(wide, [x])
    assert (_reduce_wide(wide, [x[0]], [want[0]])[0] != want[0]).sum() == 38
    classes, impl = judge(wide, _reduce_wide, x)
    assert classes == ["pass"] and impl["near_tie"]["alternatives"] == {"exact_or_spec": 38}
    few = Signature.make(RP.op, RP.input_types, RP.result_types, {"exponent_bits": 2, "mantissa_bits": 0})
    assert judge(few, _reduce_wide, IX)[0] == ["pass"]       # overflow to inf: storage max


# ---------------------------------------------------------------------------
# invalid programs
# ---------------------------------------------------------------------------

Q = qt(0.5, 0, shape="2x")


def test_each_constraint_breaks_alone():
    from conformance.generators import breakable
    q0 = qt(0.5, 0, shape="")
    cases = {
        "C1": Signature.make("clamp_quantized", [qt(0.5, 0, shape="3x"), Q, q0], [Q]),
        "C2": Signature.make("clamp_quantized", [q0, Q, qt(0.5, 0, shape="3x")], [Q]),
        "C3": Signature.make("clamp_quantized", [qt(0.5, 0, "u8", shape=""), Q, q0], [Q]),
        "C4": Signature.make("clamp_quantized", [q0, Q, q0], [qt(0.5, 0, expressed="bf16", shape="2x")]),
    }
    for rule, sig in cases.items():
        assert violations(sig) == [rule], (rule, violations(sig))
    assert violations(Signature.make("clamp_quantized", [q0, Q, q0], [qt(0.25, 7, shape="2x")])) == []
    assert violations(Signature.make("select_quantized", ["tensor<3xi1>", Q, Q], [Q])) == ["C1"]
    assert violations(Signature.make("select_quantized", ["tensor<2xi1>", Q, qt(0.5, 0, "i16", shape="2x")],
                                     [Q])) == ["C2"]
    cmp = {"comparison_direction": "LT", "compare_type": "FLOAT"}
    assert violations(Signature.make("compare_quantized", [Q, qt(0.5, 0, "u8", shape="2x")],
                                     ["tensor<2xi1>"], cmp)) == ["C1"]
    assert violations(Signature.make("compare_quantized", [Q, Q], ["tensor<3xi1>"], cmp)) == ["C2"]
    assert violations(Signature.make("is_finite_quantized", [Q], ["tensor<3xi1>"])) == ["C1"]
    assert "I1" in violations(Signature.make("is_finite_quantized",
                                             ["tensor<2x!quant.uniform<i8:f32:0, {0.5,0.5}>>"],
                                             ["tensor<2xi1>"]))          # per tensor only
    rp = Signature.make("reduce_precision_quantized", [Q], [Q], {"exponent_bits": 0, "mantissa_bits": 1})
    assert violations(rp) == ["C2"]
    expected = {"clamp_quantized": {"C1", "C2", "C3", "C4"}, "select_quantized": {"C1", "C2"},
                "compare_quantized": {"C1", "C2"}, "is_finite_quantized": {"C1"},
                "reduce_precision_quantized": {"C1", "C2", "C3"}}
    for op, rules in expected.items():
        assert set(breakable(load_spec(op))) >= rules | {"I1"}, op


# ---------------------------------------------------------------------------
# the backends (reasons measured on jaxlib 0.10.2 and IREE 3.13)
# ---------------------------------------------------------------------------

def test_jax_xla_and_the_interpreter_decline_and_xla_rejects_select_of_differing_branches():
    from conformance.backends import Unsupported
    from conformance.backends.interpreter_backend import InterpreterBackend
    from conformance.backends.jax_backend import JaxBackend
    from conformance.backends.xla_backend import XlaBackend
    for sig in (CLAMP, SELECT, _compare_sig("LT"), ISF, RP):
        with pytest.raises(Unsupported, match="no quantized element types"):
            JaxBackend().compile(sig)
        with pytest.raises(Unsupported, match="register no quant dialect"):
            InterpreterBackend().compile(sig)
    with pytest.raises(Unsupported, match="Expected array argument for clamp min"):
        XlaBackend().compile(CLAMP)
    with pytest.raises(Unsupported, match="floating point for ReducePrecision"):
        XlaBackend().compile(RP)
    # the StableHLO verifier wants on_true and on_false of one quantized type (xla-cpu entry)
    with pytest.raises(Exception, match="requires compatible types for non-predicate operands"):
        XlaBackend().compile(SELECT)


def test_iree_select_copies_storage_u8_read_as_signed_is_finite_refused():
    """What the iree-cpu entries say, by hand (IREE 3.13): si8 clamp, compare and
    reduce_precision are right; a select of branches of one type copies the storage
    integer without requantising it; u8 storage is read as signed (the
    model: zero points kept, the result clamped to 0..255); is_finite and a select whose
    branches differ in parameters are refused. Skipped without IREE."""
    pytest.importorskip("iree.compiler")
    pytest.importorskip("iree.runtime")
    from conformance.backends.iree_backend import IreeBackend
    backend = IreeBackend()
    same = Signature.make("select_quantized", ["tensor<64xi1>", SELECT.input_types[1],
                                               SELECT.input_types[1]], SELECT.result_types)
    try:
        for sig, ins in ((CLAMP, [CMIN, CX, CMAX]), (_compare_sig("LT"), [CL, CR]),
                         (RP, [IX.repeat(4, 0)])):
            got = np.asarray(backend.compile(sig)([x[0] for x in ins])[0])
            (want,) = oracles.evaluate_batch(sig, [x[:1] for x in ins])
            assert (got == want[0]).all(), sig.op
        # branches of one type, a result of others: the storage integer copied as it is
        got = np.asarray(backend.compile(same)([PRED[0], ST[0], SF[0]])[0])
        (want,) = oracles.evaluate_batch(same, [PRED[:1], ST[:1], SF[:1]])
        assert (got == np.where(PRED[0], ST[0], SF[0])).all() and (got != want[0]).sum() > 60
        u8 = Signature.make("clamp_quantized", [qt(0.25, 0, "u8", shape="3x")] * 3,
                            [qt(0.25, 0, "u8", shape="3x")])
        xs = [np.array(v, np.uint8) for v in ([212, 0, 10], [254, 200, 20], [1, 255, 30])]
        got = np.asarray(backend.compile(u8)(xs)[0]).tolist()
        (want,) = oracles.evaluate_batch(u8, [x[None] for x in xs])
        assert want[0].tolist() == [1, 200, 20] and got == [0, 0, 20]   # 254 -> -2, 200 -> -56
        for sig in (ISF, SELECT):
            with pytest.raises(Exception, match="is_finite|compatible types"):
                backend.compile(sig)
    finally:
        backend.close()
