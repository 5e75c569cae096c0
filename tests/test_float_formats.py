"""The float formats of the current spec (f4E2M1FN ... f8E8M0FNU): their traits, the
rounding of the oracle into them, the ULP scale and the total order on their odd
encodings (FNUZ: no -0, one NaN at the -0 bit pattern; f8E8M0FNU: no zero, no sign).

The reference here enumerates every bit pattern of a format (at most 256) and rounds
by searching the nearest value, ties to the even encoding: it shares nothing with the
oracle's rounding (ml_dtypes only decodes bit patterns, which is exact).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conformance.core.numerics import ordinal, round_to, total_order_key
from conformance.core.types import NEWER_FLOAT_TYPES, SPEC_ELEMENT_TYPES, element_type

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SPEC = Path("/work/shared/spec/stablehlo-spec-2026-08.md")

# name: (bits, exponent bits, mantissa bits, inf, nan, -0, zero, sign, max, min normal)
TRAITS = {
    "f4E2M1FN": (4, 2, 1, False, False, True, True, True, 6.0, 1.0),
    "f6E2M3FN": (6, 2, 3, False, False, True, True, True, 7.5, 1.0),
    "f6E3M2FN": (6, 3, 2, False, False, True, True, True, 28.0, 0.25),
    "f8E3M4": (8, 3, 4, True, True, True, True, True, 15.5, 0.25),
    "f8E4M3": (8, 4, 3, True, True, True, True, True, 240.0, 2.0 ** -6),
    "f8E4M3FNUZ": (8, 4, 3, False, True, False, True, True, 240.0, 2.0 ** -7),
    "f8E4M3B11FNUZ": (8, 4, 3, False, True, False, True, True, 30.0, 2.0 ** -10),
    "f8E5M2FNUZ": (8, 5, 2, False, True, False, True, True, 57344.0, 2.0 ** -15),
    "f8E8M0FNU": (8, 8, 0, False, True, False, False, False, 2.0 ** 127, 2.0 ** -127),
}


def test_every_float_type_of_the_current_grammar_is_registered():
    names = {t.name for t in SPEC_ELEMENT_TYPES}
    assert set(TRAITS) == set(NEWER_FLOAT_TYPES) <= names
    if SPEC.exists():                       # the grammar's FloatType production
        text = SPEC.read_text()
        rule = re.search(r"FloatType ::=(.*?)\n(?!\s+\|)", text, re.S).group(1)
        assert set(re.findall(r"'(\w+)'", rule)) <= names


@pytest.mark.parametrize("name", list(TRAITS))
def test_traits_read_from_the_format(name):
    et = element_type(name)
    bits, e, m, inf, nan, negzero, zero, sign, big, tiny = TRAITS[name]
    got = (et.bits, et.exponent_bits, et.mantissa_bits, et.has_inf, et.has_nan,
           et.has_negative_zero, et.has_zero, et.has_sign)
    assert got == (bits, e, m, inf, nan, negzero, zero, sign)
    import ml_dtypes
    fi = ml_dtypes.finfo(et.dtype)
    assert float(fi.max) == big and float(fi.smallest_normal) == tiny
    assert element_type(et.dtype) is et and element_type(et.dtype.name) is et


def test_list_types_names_them():
    from conformance.apps.cli import main
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["list", "types"]) == 0
    listed = {line.split()[0] for line in out.getvalue().splitlines() if line.strip()}
    assert set(NEWER_FLOAT_TYPES) <= listed


# ---------------------------------------------------------------------------
# Rounding into the formats
# ---------------------------------------------------------------------------

def _patterns(et):
    pats = np.arange(1 << et.bits, dtype=np.uint8)
    return pats, pats.view(et.dtype).astype(np.float64)


def _reference_round(x: np.ndarray, et) -> np.ndarray:
    """Nearest value of the format, ties to the even encoding (float64 results, NaN for
    what the format cannot hold: past the overflow threshold without infinity, a
    negative value of a signless format, a zero of a format without one)."""
    pats, vals = _patterns(et)
    fin = np.isfinite(vals) & ~((vals == 0) & np.signbit(vals))     # one zero: +0
    v, p = vals[fin], pats[fin]
    order = np.argsort(v)
    v, p = v[order], p[order]
    i = np.clip(np.searchsorted(v, x), 1, len(v) - 1)
    lo, hi = v[i - 1], v[i]
    d_lo, d_hi = np.abs(x - lo), np.abs(hi - x)
    # (f8E8M0FNU: no stored mantissa bit, both significands odd: a tie rounds up)
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & ((p[i] % 2 == 0) | (not et.has_sign)))
    r = np.where(x <= v[0], v[0], np.where(x >= v[-1], v[-1], np.where(take_hi, hi, lo)))
    big = v[-1]
    ulp_top = big - v[-2]
    over = np.abs(x) >= big + ulp_top / 2 if et.mantissa_bits else np.abs(x) >= 1.5 * big
    if et.has_inf:
        r = np.where(over, np.copysign(np.inf, x), r)
    elif et.has_nan:
        r = np.where(over, np.nan, r)
    # (no inf, no NaN: saturation to the largest finite value, ml_dtypes' choice)
    if not et.has_sign:
        r = np.where(x <= 0, np.nan, r)
    if et.has_negative_zero:
        r = np.where((r == 0) & np.signbit(x), -0.0, r)
    return r


def _hard_values(et) -> np.ndarray:
    _, vals = _patterns(et)
    v = np.unique(vals[np.isfinite(vals)])
    mids = (v[1:] + v[:-1]) / 2
    near = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
    rng = np.random.default_rng(7)
    big = float(v[-1])
    wide = np.exp2(rng.uniform(np.log2(float(v[v > 0][0])) - 4, np.log2(big) + 2, 3000))
    x = np.concatenate([v, near, wide, -wide, [big * 1.75, big * 4]])
    if not et.has_sign:
        x = x[x > 0]
    return x


@pytest.mark.parametrize("name", list(TRAITS))
def test_round_to_is_correctly_rounded(name):
    et = element_type(name)
    x = _hard_values(et)
    got = round_to(x, et).astype(np.float64)
    want = _reference_round(x, et)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (name, x[~same][:5], got[~same][:5], want[~same][:5])


def test_e8m0_rounding_is_the_oracles_own():
    """ml_dtypes rounds float32 subnormals up a binade into f8E8M0FNU (1.2 * 2**-127 ->
    2**-126); the oracle rounds to nearest, a tie up (as APFloat, XLA and ml_dtypes)."""
    import ml_dtypes
    et = element_type("f8E8M0FNU")
    x = np.array([1.2 * 2.0 ** -127, 1.5 * 2.0 ** -127, 1.5, 3.0, 6.0, 2.0 ** -130])
    assert np.array(x[0], np.float32).astype(ml_dtypes.float8_e8m0fnu).astype(float) \
        == 2.0 ** -126, "ml_dtypes no longer rounds f32 subnormals up: revisit _round_e8m0"
    got = round_to(x, et).astype(np.float64)
    assert got.tolist() == [2.0 ** -127, 2.0 ** -126, 2.0, 4.0, 8.0, 2.0 ** -127]
    assert np.isnan(round_to(np.array([0.0, -0.0, -1.0, np.inf, np.nan]), et)
                    .astype(np.float64)).all()


@pytest.mark.parametrize("name", ["f8E4M3FNUZ", "f8E4M3B11FNUZ", "f8E5M2FNUZ"])
def test_fnuz_never_rounds_to_minus_zero(name):
    et = element_type(name)
    tiny = float(np.array(1, np.uint8).view(et.dtype).astype(np.float64))   # smallest subnormal
    r = round_to(np.array([-0.0, -tiny / 4, -tiny / 2, np.inf, -np.inf]), et)
    assert r.view(np.uint8).tolist()[:3] == [0, 0, 0]
    assert r.view(np.uint8).tolist()[3:] == [0x80, 0x80]       # the one NaN


# ---------------------------------------------------------------------------
# ULP scale and total order
# ---------------------------------------------------------------------------

def _bits(name, *patterns):
    et = element_type(name)
    return np.array(patterns, np.uint8).view(et.dtype)


@pytest.mark.parametrize("name", ["f8E4M3FNUZ", "f8E4M3B11FNUZ", "f8E5M2FNUZ"])
def test_fnuz_ulp_across_the_one_zero(name):
    o = ordinal(_bits(name, 0x81, 0x00, 0x01, 0x02, 0xFF, 0x7F))
    assert o.tolist() == [-1, 0, 1, 2, -127, 127]
    # -smallest to +smallest: two steps (through the one zero)
    assert o[2] - o[0] == 2


def test_ulp_of_formats_with_two_zeros_and_no_sign():
    o = ordinal(_bits("f4E2M1FN", 0x9, 0x8, 0x0, 0x1, 0x7, 0xF))   # -0.5 -0 +0 0.5 6 -6
    assert o.tolist() == [-1, 0, 0, 1, 7, -7]
    e = ordinal(_bits("f8E8M0FNU", 0x00, 0x01, 0x7F, 0x80, 0xFE))  # 2**-127 ... 2**127
    assert e.tolist() == [0, 1, 127, 128, 254]
    assert e[1] - e[0] == 1 and e[-1] - e[0] == 254


def _sorted_values(name):
    et = element_type(name)
    pats = np.arange(1 << et.bits, dtype=np.uint8).view(et.dtype)
    return pats[np.argsort(total_order_key(pats), kind="stable")]


def test_total_order_fnuz_nan_first_no_minus_zero():
    s = _sorted_values("f8E4M3FNUZ")
    w = s.astype(np.float64)
    assert np.isnan(w[0]) and not np.isnan(w[1:]).any()
    assert w[1] == -240.0 and w[-1] == 240.0 and (np.diff(w[1:]) > 0).all()
    assert (w == 0).sum() == 1 and not np.signbit(w[w == 0]).any()


def test_total_order_e8m0_is_the_encoding_nan_last():
    s = _sorted_values("f8E8M0FNU")
    assert s.view(np.uint8).tolist() == list(range(256))
    w = s.astype(np.float64)
    assert np.isnan(w[-1]) and (np.diff(w[:-1]) > 0).all()


@pytest.mark.parametrize("name", ["f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E3M4", "f8E4M3"])
def test_total_order_sign_magnitude_formats(name):
    w = _sorted_values(name).astype(np.float64)
    real = w[~np.isnan(w)]
    assert (np.diff(real) >= 0).all()
    zeros = np.nonzero(real == 0)[0]
    assert np.signbit(real[zeros[0]]) and not np.signbit(real[zeros[1]])   # -0 < +0
    if element_type(name).has_nan:       # -NaNs first, +NaNs last
        assert np.isnan(w[0]) and np.isnan(w[-1])


# ---------------------------------------------------------------------------
# convert and reduce_precision judged: planted bugs fail, legal variants pass
# ---------------------------------------------------------------------------

from conformance import oracles                                    # noqa: E402
from conformance.core.case import Signature                        # noqa: E402

import test_allowed_sets                                           # noqa: E402


def judge(sig, change, *stacked):
    """The class of each case (leading axis) and the impl_defined record, on the oracle
    with its results changed by ``change(inputs, outputs)`` (test_allowed_sets.judge),
    cast back to the result type."""
    def changed(_sig, inputs, out):
        return [np.asarray(o).astype(out[0].dtype) for o in change(inputs, out)]
    return test_allowed_sets.judge(sig, changed, *stacked)


def convert_sig(src, dst):
    return Signature.make("convert", [f"tensor<1x{src}>"], [f"tensor<1x{dst}>"])


def _with_bits(r, where, bits):
    b = r.view(np.uint8).copy()
    b[where] = bits
    return b.view(r.dtype)


def test_fnuz_convert_that_makes_minus_zero_bits_fails():
    """A conversion that keeps the sign of a zero writes 0x80: FNUZ's NaN."""
    x = np.array([[-0.0], [-1e-9], [0.0], [-1.0]], np.float32)
    sig = convert_sig("f32", "f8E4M3FNUZ")

    def keeps_sign(ins, out):
        (r,) = out
        return [_with_bits(r, (r.astype(np.float64) == 0) & np.signbit(ins[0]), 0x80)]
    classes, _ = judge(sig, keeps_sign, x)
    assert classes[0] != "pass" and classes[1] != "pass" and classes[2:] == ["pass", "pass"]


def test_fnuz_convert_other_neighbour_passes():
    """-1e-9 lies between -smallest and the one zero: either is a legal rounding."""
    x = np.array([[-1e-9], [1e-9]], np.float32)
    sig = convert_sig("f32", "f8E4M3FNUZ")

    def away(ins, out):
        (r,) = out
        return [_with_bits(r, np.ones(r.shape, bool), np.where(ins[0] < 0, 0x81, 0x01))]
    classes, impl = judge(sig, away, x)
    assert classes == ["pass", "pass"]
    assert sum(impl["inexact_to_float"]["alternatives"].values()) == 2


def test_e8m0_that_keeps_a_sign_fails():
    """f8E8M0FNU has no sign bit: -2.0 has no value but NaN (abs is a bug), and 0x80 is
    2.0 (reading its top bit as a sign is a bug)."""
    to = convert_sig("f32", "f8E8M0FNU")
    x = np.array([[-2.0], [2.0], [0.5]], np.float32)
    classes, _ = judge(to, lambda ins, out: [np.abs(ins[0]).astype(out[0].dtype)], x)
    assert classes[0] != "pass" and classes[1:] == ["pass", "pass"]

    back = convert_sig("f8E8M0FNU", "f32")
    e = np.array([[0x80], [0x7F], [0x81]], np.uint8).view(element_type("f8E8M0FNU").dtype)

    def signed(ins, out):
        (r,) = out
        top = ins[0].view(np.uint8) >= 0x80
        return [np.where(top, -r, r).astype(np.float32)]
    classes, _ = judge(back, signed, e)
    assert classes == [classes[0], "pass", classes[2]] and "pass" not in (classes[0], classes[2])


def test_e8m0_ties_and_f32_subnormals_either_neighbour_passes():
    """ml_dtypes' rounding (f32 subnormals a binade up; 2.5 and 5 to the nearest) gives
    the nearest or the other neighbour: legal for convert, whose inexact results are TBD."""
    import ml_dtypes
    x = np.array([[2.5], [1.2 * 2.0 ** -127], [5.0]], np.float32)
    sig = convert_sig("f32", "f8E8M0FNU")
    mld = lambda ins, out: [ins[0].astype(ml_dtypes.float8_e8m0fnu)]  # noqa: E731
    classes, impl = judge(sig, mld, x)
    assert classes == ["pass", "pass", "pass"]
    assert impl["inexact_to_float"]["outside"] == 0
    two_off = lambda ins, out: [(ins[0] * 4).astype(ml_dtypes.float8_e8m0fnu)]  # noqa: E731
    assert "pass" not in judge(sig, two_off, x)[0]


def test_nan_into_a_format_without_nan_is_implementation_defined():
    x = np.array([[np.nan], [1.0]], np.float32)
    sig = convert_sig("f32", "f4E2M1FN")
    classes, _ = judge(sig, lambda ins, out: [np.full_like(out[0], 6.0)], x)
    assert classes == ["pass", "value"]        # any value for NaN; 1.0 is exact


def test_fnuz_reduce_precision_underflow_keeps_no_sign():
    sig = Signature.make("reduce_precision", ["tensor<1xf8E4M3FNUZ>"],
                         ["tensor<1xf8E4M3FNUZ>"],
                         {"exponent_bits": 2, "mantissa_bits": 1})
    et = element_type("f8E4M3FNUZ")
    x = np.array([[-0.25], [0.25], [1.5]], np.float64).astype(et.dtype)
    want = oracles.evaluate("reduce_precision", [x[0]], sig.attributes,
                            result_types=sig.result_types)[0]
    assert want.view(np.uint8).tolist() == [0]          # underflow: +0, never 0x80

    def signed_zero(ins, out):
        (r,) = out
        return [_with_bits(r, (r.astype(np.float64) == 0) & (ins[0].astype(np.float64) < 0),
                           0x80)]
    classes, _ = judge(sig, signed_zero, x)
    assert classes[0] != "pass" and classes[1:] == ["pass", "pass"]


def test_e8m0_underflow_may_be_nan_but_not_the_largest():
    """Below 2**-127 the nearest value is 2**-127; what lies below it, zero, the format
    lacks (the oracle's zero is its NaN): XLA CPU's NaN passes, a wrapped 2**127 fails."""
    x = np.array([[1e-300], [2.0 ** -130]], np.float64)
    sig = convert_sig("f64", "f8E8M0FNU")
    nan = lambda ins, out: [np.full_like(out[0], np.nan)]  # noqa: E731
    assert judge(sig, nan, x)[0] == ["pass", "pass"]
    top = lambda ins, out: [_with_bits(out[0], np.ones(out[0].shape, bool), 0xFE)]  # noqa: E731
    assert "pass" not in judge(sig, top, x)[0]


def test_collective_permute_fills_with_zero_in_the_format_which_is_e8m0_s_nan():
    """collective_permute gives ``constant(0, element_type(result))`` to a process that
    receives nothing: 0 rounded into f8E8M0FNU is its NaN (0xFF, no zero; XLA CPU's too),
    never the bit pattern 0x00 (2^-127); the FNUZ formats' zero is 0x00."""
    from conformance import oracles
    attrs = {"source_target_pairs": [[1, 1]], "channel_id": 0, "num_replicas": 2,
             "num_partitions": 1}
    for name, fill in (("f8E8M0FNU", 0xFF), ("f8E4M3FNUZ", 0x00), ("f4E2M1FN", 0x00)):
        et = element_type(name)
        x = np.full((2, 3), 2.0).astype(et.dtype)
        (out,) = oracles.evaluate("collective_permute", [x], attrs,
                                  result_types=[f"tensor<2x3x{name}>"])
        bits = np.asarray(out).view(np.uint8)
        assert bits[0].tolist() == [fill] * 3, name          # process 0 receives nothing
        assert np.asarray(out)[1].astype(np.float64).tolist() == [2.0] * 3


def _iota_with_id0(bits):
    """A planted iota whose id 0 in f8E8M0FNU (the oracle's NaN, 0xFF) is ``bits``."""
    from planted import OracleBackend

    class Iota(OracleBackend):
        name = f"iota-id0-{bits:02x}"

        def compile(self, sig):
            run = super().compile(sig)

            def changed(inputs):
                out = run(inputs)
                b = out[0].view(np.uint8).copy()
                b[b == 0xFF] = bits
                return [b.view(out[0].dtype)]
            return changed
    return Iota()


def test_iota_id_0_in_e8m0_is_either_neighbour_of_zero():
    """constant(0, f8E8M0FNU) converts a value the format lacks (TBD #180, as convert):
    XLA CPU's 2^-127 (0x00) passes as the oracle's NaN does; an iota counting from 1
    (1.0, 0x7F, at id 0) fails."""
    from planted import OracleBackend, verdict_counts
    sig = Signature.make("iota", [], ["tensor<3x2xf8E8M0FNU>"], {"iota_dimension": 0})
    assert verdict_counts(OracleBackend(), sig, "f8E8M0FNU", 1) == {"pass": 1}
    assert verdict_counts(_iota_with_id0(0x00), sig, "f8E8M0FNU", 1) == {"pass": 1}
    assert verdict_counts(_iota_with_id0(0x7F), sig, "f8E8M0FNU", 1) == {"nan": 1}


def test_imag_and_dynamic_iota_zero_in_e8m0_is_either_neighbour():
    """imag of a real f8E8M0FNU and dynamic_iota's id 0 are constant(0, E) too: 2^-127
    (XLA CPU's) passes as the oracle's NaN does; 1.0 (0x7F) fails."""
    from planted import verdict_counts
    imag = Signature.make("imag", ["tensor<4xf8E8M0FNU>"], ["tensor<4xf8E8M0FNU>"])
    assert verdict_counts(_iota_with_id0(0x00), imag, "f8E8M0FNU", 1).keys() == {"pass"}
    assert verdict_counts(_iota_with_id0(0x7F), imag, "f8E8M0FNU", 1).keys() == {"nan"}
    dyn = Signature.make("dynamic_iota", ["tensor<2xsi32>"], ["tensor<3x2xf8E8M0FNU>"],
                         {"iota_dimension": 0})
    assert verdict_counts(_iota_with_id0(0x00), dyn, "f8E8M0FNU", 1).keys() == {"pass"}
    assert verdict_counts(_iota_with_id0(0x7F), dyn, "f8E8M0FNU", 1).keys() == {"nan"}


def _batch_norm_dividing_by(divisor):
    """A planted batch_norm_training that divides the sums by ``divisor``."""
    from planted import OracleBackend
    from conformance.oracles.batch_norm import _rounded, constants, training

    class DividesBy(OracleBackend):
        name = f"batch-norm-divides-by-{divisor}"

        def compile(self, sig):
            fi, eps = sig.attributes["feature_index"], sig.attributes["epsilon"]

            def run(inputs):
                x, scale, offset = inputs
                _, _, eps_e = constants(x.dtype, x.shape, fi, eps)
                with np.errstate(all="ignore"):
                    return list(_rounded(training(x, scale, offset, eps_e, divisor, fi),
                                         sig.result_types))
            return run
    return DividesBy()


def test_batch_norm_count_past_the_format_is_either_neighbour():
    """100 elements per feature in f8E3M4 (largest 15.5): constant(100, f8E3M4) is TBD
    (#180), the oracle's infinity or 15.5 (XLA CPU's mean of -inf among zeros is -inf, not
    -inf / inf); a batch norm that forgets to divide (the sums) fails."""
    from planted import verdict_counts
    sig = Signature.make("batch_norm_training",
                         ["tensor<5x5x4x3xf8E3M4>", "tensor<3xf8E3M4>", "tensor<3xf8E3M4>"],
                         ["tensor<5x5x4x3xf8E3M4>", "tensor<3xf8E3M4>", "tensor<3xf8E3M4>"],
                         {"epsilon": 0.1, "feature_index": 3})
    assert verdict_counts(_batch_norm_dividing_by(np.inf), sig, "f8E3M4", 2).keys() == {"pass"}
    assert verdict_counts(_batch_norm_dividing_by(15.5), sig, "f8E3M4", 2).keys() == {"pass"}
    assert set(verdict_counts(_batch_norm_dividing_by(1.0), sig, "f8E3M4", 2)) - {"pass"}
