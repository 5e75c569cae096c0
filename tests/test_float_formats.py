"""The float formats the current spec adds (stablehlo-spec-2026-08.md, "Types"): f4E2M1FN,
f6E2M3FN, f6E3M2FN, f8E3M4, f8E4M3, f8E4M3FNUZ, f8E4M3B11FNUZ, f8E5M2FNUZ, f8E8M0FNU.

Each format's traits (what it lacks: -0, infinities, NaN, zero, a sign), the ULP scale and
the neighbours of an inexact conversion where those are missing, f8E8M0FNU's rounding,
the coverage classes each format has, and planted backends on the whole check path: an
FNUZ result with the sign-bit-only pattern (its NaN) where +0 is right fails, an
f8E8M0FNU conversion that keeps a sign fails, and the legal neighbours pass.
"""
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.literals import from_bit_patterns
from conformance.core.numerics import ordinal, round_to, total_order_key
from conformance.core.types import ELEMENT_TYPES, element_type
from conformance.specs import load_spec

#: the current spec's FloatType grammar, in its order
SPEC_FLOAT_TYPES = ["f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E3M4", "f8E4M3", "f8E4M3FN",
                    "f8E4M3FNUZ", "f8E4M3B11FNUZ", "f8E5M2", "f8E5M2FNUZ", "f8E8M0FNU",
                    "bf16", "f16", "f32", "f64"]
NEW = ["f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E3M4", "f8E4M3", "f8E4M3FNUZ",
       "f8E4M3B11FNUZ", "f8E5M2FNUZ", "f8E8M0FNU"]
FNUZ = ["f8E4M3FNUZ", "f8E4M3B11FNUZ", "f8E5M2FNUZ"]


def _all_values(name):
    et = element_type(name)
    return from_bit_patterns(np.arange(1 << et.bits, dtype=np.uint64), et)


def test_every_float_type_of_the_current_grammar_is_known_in_spec_order():
    floats = [t for t, et in ELEMENT_TYPES.items() if et.is_float]
    assert floats == SPEC_FLOAT_TYPES
    for name in NEW:
        assert element_type(name).mlir == name          # MLIR spells them as the spec


@pytest.mark.parametrize("name", NEW)
def test_traits_match_every_value_of_the_format(name):
    et = element_type(name)
    w = _all_values(name).astype(np.float64)
    nans = int(np.isnan(w).sum())
    assert et.has_nan == (nans > 0) and et.has_inf == bool(np.isinf(w).any())
    assert et.has_zero == bool((w == 0).any())
    assert et.has_negative_zero == bool(((w == 0) & np.signbit(w)).any())
    assert et.has_sign == bool((w < 0).any())
    if name in FNUZ:        # no -0, no infinities, one NaN: the sign-bit-only pattern
        assert nans == 1 and np.isnan(w[0x80]) and not et.has_inf
        assert not et.has_negative_zero
    if name == "f8E8M0FNU":     # no sign, no zero, no infinities; NaN 0xFF
        assert nans == 1 and np.isnan(w[0xFF]) and not (et.has_sign or et.has_zero)
    if name.startswith(("f4", "f6")):
        assert nans == 0 and not et.has_inf


@pytest.mark.parametrize("name", NEW + ["f8E4M3FN", "f8E5M2"])
def test_ordinal_steps_by_one_between_neighbouring_values(name):
    """The ULP scale: sorted by value, each non-NaN value one step from the next (±0
    share a step), across zero too (FNUZ: -smallest to +0 is one step)."""
    x = _all_values(name)
    w = x.astype(np.float64)
    keep = ~np.isnan(w)
    order = np.argsort(w[keep], kind="stable")
    steps = np.diff(ordinal(x[keep])[order])
    same = np.diff(w[keep][order]) == 0          # -0 and +0
    assert set(steps[~same].tolist()) == {1} and set(steps[same].tolist()) <= {0}
    # total order keys ascend with the values too (NaN aside)
    by_key = np.argsort(total_order_key(x[keep]), kind="stable")
    assert (np.diff(w[keep][by_key]) >= 0).all()


def test_e8m0_rounds_to_nearest_with_ties_up_and_no_zero():
    rng = np.random.default_rng(3)
    x = np.concatenate([np.exp2(rng.uniform(-131, 129, 4000)),
                        [3.0, 1.5, 0.75, 6e-39, 5.9e-39, 2.0 ** -140, 1.5 * 2.0 ** 127]])
    r = round_to(x, "f8E8M0FNU").astype(np.float64)
    for xi, ri in zip(x.tolist(), r.tolist()):
        if xi >= 1.5 * 2.0 ** 127:
            assert np.isnan(ri)
            continue
        k = int(np.floor(np.log2(xi)))
        lo, hi = 2.0 ** max(k, -127), 2.0 ** max(k + 1, -127)
        want = lo if max(k, -127) == -127 and xi < lo else (
            hi if Fraction(xi) >= Fraction(3, 2) * Fraction(lo) else lo)
        assert ri == want, (xi, ri, want)
    assert np.isnan(round_to(np.array([0.0, -0.0, -1.0, np.nan, np.inf]), "f8E8M0FNU")
                    .astype(np.float64)).all()


@pytest.mark.parametrize("dst", NEW)
def test_convert_neighbours_of_the_new_formats(dst):
    """down <= exact <= up, adjacent (one ULP) where both are numbers; past the finite
    range the format's NaN (or, without one, the largest value); f8E8M0FNU below 2^-127
    and for zero or negatives: 2^-127 up, NaN down."""
    from conformance.oracles.conversion import convert_directed
    et = element_type(dst)
    fi = ml_dtypes.finfo(et.dtype)
    big = float(fi.max)
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 0.3, -0.3, 2.9, -2.9, big * 1.1, -big * 1.1,
                  big * 4, -big * 4, float(fi.smallest_subnormal) * 0.75, 1e6, -1e6,
                  np.inf, -np.inf], np.float64)
    r = oracles.evaluate("convert", [x], result_types=[f"tensor<{x.size}x{dst}>"])[0]
    down, up = convert_directed(x, r, "down"), convert_directed(x, r, "up")
    dw, uw = down.astype(np.float64), up.astype(np.float64)
    for xi, di, ui in zip(x.tolist(), dw.tolist(), uw.tolist()):
        if not et.has_nan and abs(xi) > big:      # f4/f6: only the largest value
            assert di == ui == np.copysign(big, xi)
            continue
        if not np.isnan(di):
            assert di <= xi
        if not np.isnan(ui):
            assert ui >= xi
        if not et.has_nan:
            assert not (np.isnan(di) or np.isnan(ui))
    both = ~np.isnan(dw) & ~np.isnan(uw)
    assert set((ordinal(up[both]) - ordinal(down[both])).tolist()) <= {0, 1}
    if not et.has_sign:
        neg = x <= 0
        assert (uw[neg] == float(fi.smallest_normal)).all() and np.isnan(dw[neg]).all()
    if not et.has_negative_zero:        # nothing steps onto the NaN of -0's pattern
        assert not np.isnan(uw[np.abs(x) < 1]).any()


@pytest.mark.parametrize("name,classes", [
    ("f4E2M1FN", ("+0", "-0", "subnormal", "extreme", "ordinary")),
    ("f8E4M3", ("+0", "-0", "+inf", "-inf", "nan", "subnormal", "extreme", "ordinary")),
    ("f8E4M3FNUZ", ("+0", "nan", "subnormal", "extreme", "ordinary")),
    ("f8E8M0FNU", ("nan", "extreme", "smallest", "ordinary")),
])
def test_coverage_classes_are_those_the_format_has(name, classes):
    from conformance.generators.coverage import classes_of, classify, sample
    assert classes_of(name) == classes
    rng = np.random.default_rng(0)
    for scheme in ("generic", "rounding"):
        for c in classes_of(name, scheme):
            v = sample(name, c, 16, rng, scheme)
            assert (classify(v, name, scheme) == classes_of(name, scheme).index(c)).all()


def test_a_coverage_target_at_a_missing_value_does_not_apply():
    """compare's TOTALORDER targets at (-0, +0) apply to f8E4M3FN, not to an FNUZ
    format, which has no -0."""
    from conformance.generators.coverage import model
    spec = load_spec("compare")
    names = {t.name for t in model(spec, {"E": "f8E4M3FN"}).targets}
    fnuz = {t.name for t in model(spec, {"E": "f8E4M3FNUZ"}).targets}
    assert fnuz < names and any("nan" in n for n in fnuz)


# ---------------------------------------------------------------------------
# Planted backends on the whole check path
# ---------------------------------------------------------------------------

class Planted(Backend):
    """The oracle with ``change(sig, inputs, outputs) -> outputs`` applied."""

    name = "planted"

    def __init__(self, change):
        super().__init__()
        self.change = change

    def compile(self, sig):
        def run(inputs):
            out = list(oracles.evaluate(sig.op, inputs, sig.attributes,
                                        result_types=sig.result_types))
            return self.change(sig, inputs, out)
        return run


def _verdict(sig, stacked, change):
    backend = Planted(change)
    check = SignatureCheck(load_spec(sig.op), sig, [backend])
    check.compile()
    return check.run_batch(0, stacked).results[backend.name].verdict.case_class_names()


def _sign_magnitude_zero(sig, inputs, out):
    """A sign-magnitude encoder: a zero keeps the operand's sign bit, which in an FNUZ
    format is the pattern 0x80, its NaN."""
    (x,), (r,) = inputs, out
    bits = r.view(np.uint8).copy()
    neg = np.signbit(np.asarray(x, np.float64)) & (r.astype(np.float64) == 0)
    bits[neg] |= 0x80
    return [bits.view(r.dtype)]


@pytest.mark.parametrize("dst", FNUZ)
def test_an_fnuz_convert_that_produces_minus_zero_fails(dst):
    sig = Signature.make("convert", ["tensor<4xf32>"], [f"tensor<4x{dst}>"])
    x = np.array([[-0.0, -1e-30, 1.0, 0.0], [2.0, -3.0, 0.0, 1.0]], np.float32)
    classes = _verdict(sig, [x], _sign_magnitude_zero)
    assert classes[0] != "pass" and classes[1] == "pass"


@pytest.mark.parametrize("dst", FNUZ)
def test_an_fnuz_negate_that_flips_the_sign_of_zero_fails(dst):
    sig = Signature.make("negate", [f"tensor<3x{dst}>"], [f"tensor<3x{dst}>"])
    x = np.array([[0.0, 1.0, -2.0], [1.0, 1.0, -2.0]]).astype(element_type(dst).dtype)

    def flip_sign_bit(sig, inputs, out):        # sign-magnitude negate: 0x00 -> 0x80
        (x,) = inputs
        return [(np.asarray(x).view(np.uint8) ^ np.uint8(0x80)).view(x.dtype)]
    classes = _verdict(sig, [x], flip_sign_bit)
    assert classes[0] != "pass" and classes[1] == "pass"


def _e8m0_keeps_sign(sig, inputs, out):
    """f8E8M0FNU written as if it had a sign bit: |x|'s exponent with the sign in bit 7."""
    (x,), (r,) = inputs, out
    w = np.asarray(x, np.float64)
    mag = round_to(np.abs(w), "f8E8M0FNU").view(np.uint8)
    bits = np.where(w < 0, mag | 0x80, r.view(np.uint8)).astype(np.uint8)
    return [bits.view(r.dtype)]


def test_an_e8m0_convert_that_keeps_a_sign_fails():
    sig = Signature.make("convert", ["tensor<3xf32>"], ["tensor<3xf8E8M0FNU>"])
    x = np.array([[-0.5, 4.0, 1.0], [0.5, 4.0, 1.0]], np.float32)
    classes = _verdict(sig, [x], _e8m0_keeps_sign)
    assert classes[0] != "pass" and classes[1] == "pass"


def _other_neighbour(sig, inputs, out):
    """Inexact conversions rounded toward zero (f8E8M0FNU: down), zero and negative
    values to f8E8M0FNU's 2^-127, values below it to NaN: each a neighbour the spec's
    TBD (#180) leaves open."""
    from conformance.oracles.conversion import convert_directed
    (x,), (r,) = inputs, out
    w = np.asarray(x, np.float64)
    down, up = convert_directed(np.asarray(x), r, "down"), convert_directed(np.asarray(x), r, "up")
    toward_zero = np.where(w < 0, up, down)
    if not element_type(r.dtype).has_sign:
        toward_zero = np.where(w <= 0, up, down)
    return [toward_zero.astype(r.dtype)]


@pytest.mark.parametrize("dst", ["f8E4M3FNUZ", "f8E5M2FNUZ", "f4E2M1FN", "f6E3M2FN",
                                 "f8E3M4", "f8E8M0FNU"])
def test_the_other_neighbour_of_an_inexact_conversion_passes(dst):
    sig = Signature.make("convert", ["tensor<8xf32>"], [f"tensor<8x{dst}>"])
    x = np.array([[0.3, -0.3, 2.9, -2.9, 1e-30, -1e-30, 1e6, -1e6],
                  [0.0, -0.0, 1.0, -1.0, 3.0, 1.5, 0.75, 5.0]], np.float32)
    classes = _verdict(sig, [x], _other_neighbour)
    assert classes == ["pass", "pass"]
    # and a value that is neither neighbour fails
    def off_by_two(sig, inputs, out):
        (r,) = out
        bits = r.view(np.uint8).copy()
        bits[..., 2] = bits[..., 2] ^ 0x2
        return [bits.view(r.dtype)]
    assert _verdict(sig, [x], off_by_two)[0] != "pass"


@pytest.mark.parametrize("dst", ["f4E2M1FN", "f6E2M3FN"])
def test_nan_into_a_format_without_nan_may_give_anything(dst):
    sig = Signature.make("convert", ["tensor<2xf32>"], [f"tensor<2x{dst}>"])
    x = np.array([[np.nan, 1.0]], np.float32)

    def arbitrary(sig, inputs, out):
        (r,) = out
        bits = r.view(np.uint8).copy()
        bits[..., 0] = 0x5
        return [bits.view(r.dtype)]
    assert _verdict(sig, [x], arbitrary) == ["pass"]


# ---------------------------------------------------------------------------
# Backends: what jaxlib cannot hold is Unsupported, with the measured reason
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("backend_name", ["jax", "xla"])
def test_a_format_the_device_cannot_hold_is_unsupported(backend_name):
    """jaxlib 0.10.2 has no transfer of the f6 formats (and compiling a constant of one
    aborts XLA): a signature with one as input or result is declined, naming op and type,
    before anything is compiled; f4E2M1FN runs."""
    from conformance.backends import Unsupported, get_backend
    from conformance.core.case import Case
    backend = get_backend(backend_name)
    held = {n: not (backend.cannot_hold(element_type(n).dtype) if backend_name == "jax"
                    else backend.pjrt.cannot_transfer(element_type(n).dtype))
            for n in ("f6E2M3FN", "f4E2M1FN")}
    assert held["f4E2M1FN"]
    out_f6 = Case.make("convert", [np.array([1.0, 2.0], np.float32)], ["tensor<2xf6E2M3FN>"])
    in_f6 = Case.make("negate", [np.array([1.0, -2.0]).astype(ml_dtypes.float6_e2m3fn)],
                      ["tensor<2xf6E2M3FN>"])
    for case in (out_f6, in_f6):
        if held["f6E2M3FN"]:
            backend.run(case)
        else:
            with pytest.raises(Unsupported, match=rf"cannot hold f6E2M3FN arrays "
                                                  rf"\({case.signature.op}\)"):
                backend.run(case)
    f4 = Case.make("add", [np.array([1.0, -6.0]).astype(ml_dtypes.float4_e2m1fn)] * 2,
                   ["tensor<2xf4E2M1FN>"])
    assert backend.run(f4)[0].astype(np.float64).tolist() == [2.0, -6.0]


def test_a_nan_valued_result_in_a_format_without_nan_may_be_anything():
    """sqrt(-1) in f4E2M1FN has no value to give (no NaN): any passes there; a wrong
    value where the result is a number still fails."""
    sig = Signature.make("sqrt", ["tensor<2xf4E2M1FN>"], ["tensor<2xf4E2M1FN>"])
    x = np.array([[-1.0, 4.0], [-4.0, 1.0]]).astype(ml_dtypes.float4_e2m1fn)

    def arbitrary_for_negatives(sig, inputs, out):
        (r,) = out
        w = np.asarray(inputs[0]).astype(np.float64)
        return [np.where(w < 0, np.float64(3.0), r.astype(np.float64)).astype(r.dtype)]
    assert _verdict(sig, [x], arbitrary_for_negatives) == ["pass", "pass"]

    def wrong_root(sig, inputs, out):
        (r,) = out
        return [np.where(np.asarray(inputs[0]).astype(np.float64) == 4.0, np.float64(3.0),
                         r.astype(np.float64)).astype(r.dtype)]
    assert _verdict(sig, [x], wrong_root) == ["value", "pass"]


def test_totalorder_puts_the_fnuz_nan_first():
    """The FNUZ NaN is the sign-bit-only pattern: a negative NaN, below -max."""
    d = ml_dtypes.float8_e4m3fnuz
    nan, low = np.array([0x80], np.uint8).view(d), np.array([0xFF], np.uint8).view(d)
    (lt,) = oracles.evaluate("compare", [nan, low], {"comparison_direction": "LT",
                                                     "compare_type": "TOTALORDER"})
    assert lt.tolist() == [True]


@pytest.mark.parametrize("exponent_bits,mantissa_bits,bits_in,bits_out", [
    (4, 3, 0x0D, 0x00),     # 2^-7 * 1.625: below an IEEE e4 type's normal range (2^-6)
    (4, 3, 0x8D, 0x00),     # and its negative: +0 (FNUZ has no -0)
    (4, 3, 0x10, 0x10),     # 2^-6: kept
    (4, 0, 0x81, 0x00),     # -smallest, mantissa rounded away: +0, not the NaN 0x80
    (2, 3, 0x7F, 0x80),     # 240 past an e2 type's range: what infinity gives, NaN
])
def test_reduce_precision_on_fnuz_reads_the_encoding_with_its_own_bias(
        exponent_bits, mantissa_bits, bits_in, bits_out):
    d = ml_dtypes.float8_e4m3fnuz
    x = np.array([bits_in], np.uint8).view(d)
    (r,) = oracles.evaluate("reduce_precision", [x], {"exponent_bits": exponent_bits,
                                                      "mantissa_bits": mantissa_bits},
                            result_types=["tensor<1xf8E4M3FNUZ>"])
    assert r.view(np.uint8).tolist() == [bits_out]


def test_printed_decimals_read_back_into_the_new_formats():
    """The interpreter's results come back printed; a decimal reads back with each
    format's own sign (f8E8M0FNU has none: 2.0 is 0x80, not a negative 2^-127 ...)."""
    from conformance.backends.jaxlib_support import _convert_float_tokens
    e8m0 = _convert_float_tokens(["2.0", "1.7014118346046923e+38", "5.877471754111438e-39",
                                  "0xFF"], element_type("f8E8M0FNU"))
    assert [int(b) for b in e8m0] == [0x80, 0xFE, 0x00, 0xFF]
    fnuz = _convert_float_tokens(["-1.0", "1.0", "-0.0009765625"], element_type("f8E4M3FNUZ"))
    assert [int(b) for b in fnuz] == [0xC0, 0x40, 0x81]
    f4 = _convert_float_tokens(["-6.0", "0.5", "-0.0"], element_type("f4E2M1FN"))
    assert [int(b) for b in f4] == [0xF, 0x1, 0x8]


def test_element_types_pickle_after_their_traits_are_read():
    """Signatures travel pickled to isolated backends: a trait read (and cached) on an
    element type must not make it unpicklable (an ml_dtypes.finfo kept on it did)."""
    import pickle
    for name in NEW:
        et = element_type(name)
        (et.has_subnormals, et.has_inf, et.has_nan, et.has_sign, et.has_zero,
         et.has_negative_zero, et.sign_bit)
        assert pickle.loads(pickle.dumps(et)) == et
    sig = Signature.make("negate", ["tensor<2xf8E8M0FNU>"], ["tensor<2xf8E8M0FNU>"])
    assert pickle.loads(pickle.dumps(sig)) == sig
