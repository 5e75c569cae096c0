"""Implementation-defined results checked against the set the spec still allows (issue 12,
point 2), each rule both ways: a planted backend with a realistic bug fails, one that
differs from the oracle only in what the spec allows passes and the record says which
member it chose. Judged on the one check path (conformance.checking.checker)."""
import numpy as np
import pytest

from conformance.checking import golden

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck, check_case
from conformance.core.case import Case, Signature
from conformance.specs import load_spec

U64 = np.uint64


class Planted(Backend):
    """The oracle with its results changed by ``change(sig, inputs, outputs)``."""

    name = "planted"

    def __init__(self, change):
        super().__init__()
        self.change = change

    def compile(self, sig):
        def run(inputs):
            out = list(oracles.evaluate(sig.op, inputs, sig.attributes,
                                        result_types=sig.result_types, regions=sig.regions,
                                        input_types=sig.input_types))
            return self.change(sig, [np.asarray(x) for x in inputs], out)
        return run


def judge(sig, change, *stacked):
    """(case classes, impl_defined record) of a batch (leading axis = case)."""
    backend = Planted(change)
    check = SignatureCheck(load_spec(sig.op), sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    v = check.run_batch(0, [np.asarray(x) for x in stacked]).results[backend.name].verdict
    return v.case_class_names(), v.impl_defined


def convert_sig(src, dst, n=1):
    return Signature.make("convert", [f"tensor<{n}x{src}>"], [f"tensor<{n}x{dst}>"])


# ---------------------------------------------------------------------------
# convert: an inexact conversion to a float type gives one of the two neighbours
# ---------------------------------------------------------------------------

BIG = [[2 ** 63 + 2 ** 40 + 1], [2 ** 64 - 1], [12345]]   # inexact in f32, but the last


def test_ui64_to_float_read_as_signed_fails():
    """The issue's example: cvtsi2ss on a 64-bit unsigned (the bits read as si64)."""
    def as_signed(sig, ins, out):
        return [oracles.evaluate("convert", [ins[0].view(np.int64)],
                                 result_types=sig.result_types)[0]]
    classes, impl = judge(convert_sig("ui64", "f32"), as_signed, np.array(BIG, U64))
    assert classes == ["value", "value", "pass"]
    assert impl["inexact_to_float"]["outside"] == 2


def test_ui64_to_float_rounded_toward_zero_passes_and_is_recorded():
    def truncates(sig, ins, out):
        (r,) = out
        x = ins[0]
        over = np.array([float(v) > int(u) for v, u in zip(r.reshape(-1), x.reshape(-1))])
        down = np.nextafter(r.reshape(-1), np.float32(-np.inf)).astype(np.float32)
        return [np.where(over, down, r.reshape(-1)).reshape(r.shape).astype(np.float32)]
    classes, impl = judge(convert_sig("ui64", "f32"), truncates, np.array(BIG, U64))
    assert classes == ["pass", "pass", "pass"]
    st = impl["inexact_to_float"]
    assert st["elements"] == 2 and st["outside"] == 0
    assert st["conventional"] + sum(st["alternatives"].values()) == 2
    # 2^64 - 1 rounds up to nearest (2^64), 2^63 + 2^40 + 1 down (to 2^63 + 2^40)
    assert st["alternatives"] == {"toward_negative": 1} and st["conventional"] == 1


def test_float_narrowing_two_ulps_off_fails_one_neighbour_passes():
    x = np.array([[1 + 2 ** -8 + 2 ** -9], [-(1 + 2 ** -8 + 2 ** -9)], [1e39]], np.float64)

    def steps(k):
        def change(sig, ins, out):
            (r,) = out
            away = np.abs(ins[0]) > np.abs(r.astype(np.float64))   # nearest rounded down
            bits = r.view(np.uint16).astype(np.int64)
            return [np.where(np.isfinite(r.astype(np.float64)),
                             (bits - k * np.where(away, 0, 1)).astype(np.uint16)
                             .view(r.dtype), np.asarray(3.0, r.dtype)).astype(r.dtype)]
        return change
    sig = convert_sig("f64", "bf16")
    classes, impl = judge(sig, steps(1), x)               # toward zero: a neighbour
    assert classes[:2] == ["pass", "pass"]
    classes, _ = judge(sig, steps(2), x)                   # two below: not a neighbour
    assert classes[:2] == ["value", "value"]
    # 1e39 overflows f32 (and bf16's range is f32's): inf or the largest finite value
    f32 = convert_sig("f64", "f32")
    biggest = np.float32(np.finfo(np.float32).max)
    assert judge(f32, lambda s, i, o: [np.full_like(o[0], biggest)], np.array([[1e39]]))[0] \
        == ["pass"]
    assert judge(f32, lambda s, i, o: [np.full_like(o[0], np.nan)], np.array([[1e39]]))[0] \
        == ["nan"]


def test_complex_parts_round_each_their_own_way():
    sig = convert_sig("complex<f64>", "complex<f32>")
    x = np.array([[complex(1 + 2 ** -30, 1 + 2 ** -30)]], np.complex128)   # both round down

    def part_up(real, imag):
        def change(sig, ins, out):
            (r,) = out
            re, im = r.real.copy(), r.imag.copy()
            if real:
                re = np.nextafter(re, np.float32(np.inf))
            if imag:
                im = np.nextafter(im, np.float32(np.inf))
            return [(re + 1j * im).astype(np.complex64)]
        return change
    classes, impl = judge(sig, part_up(False, True), x)
    assert classes == ["pass"] and impl["inexact_to_float"]["alternatives"] == \
        {"parts_apart": 1}
    assert judge(sig, part_up(True, True), x)[0] == ["pass"]
    classes, _ = judge(sig, lambda s, i, o: [(o[0].imag + 1j * o[0].real).astype(o[0].dtype)],
                       np.array([[complex(1 + 2 ** -30, 2 + 2 ** -29)]]))
    assert classes == ["value"]                              # parts swapped


# ---------------------------------------------------------------------------
# convert: integer overflow wraps around or saturates ("one of the following")
# ---------------------------------------------------------------------------

def test_integer_narrowing_that_saturates_passes_and_is_recorded():
    def saturates(sig, ins, out):
        return [np.clip(ins[0], -128, 127).astype(np.int8)]
    x = np.array([[300], [-300], [5]], np.int32)
    classes, impl = judge(convert_sig("si32", "si8"), saturates, x)
    assert classes == ["pass", "pass", "pass"]
    assert impl["integer_overflow"] == {"elements": 2, "conventional": 0,
                                        "alternatives": {"saturation": 2}, "outside": 0}
    classes, impl = judge(convert_sig("si32", "si8"), lambda s, i, o: o, x)
    assert impl["integer_overflow"]["conventional"] == 2


def test_integer_narrowing_to_neither_outcome_fails():
    def off_by_one(sig, ins, out):      # saturates to max - 1 (a wrong bound)
        return [np.clip(ins[0], -127, 126).astype(np.int8)]
    classes, impl = judge(convert_sig("si32", "si8"), off_by_one,
                          np.array([[300], [-300]], np.int32))
    assert classes == ["value", "value"] and impl["integer_overflow"]["outside"] == 2
    # unsigned: saturation of a negative value is 0
    classes, _ = judge(convert_sig("si32", "ui8"),
                       lambda s, i, o: [np.clip(i[0], 0, 255).astype(np.uint8)],
                       np.array([[-5], [256]], np.int32))
    assert classes == ["pass", "pass"]
    classes, _ = judge(convert_sig("si32", "ui8"),
                       lambda s, i, o: [np.abs(i[0]).clip(0, 255).astype(np.uint8)],
                       np.array([[-5]], np.int32))
    assert classes == ["value"]


# ---------------------------------------------------------------------------
# minimum / maximum / clamp of complex values that compare equal: one of the operands
# ---------------------------------------------------------------------------

def _cplx(*pairs):
    out = np.zeros((1, len(pairs)), np.complex64)
    out.real = [p[0] for p in pairs]
    out.imag = [p[1] for p in pairs]
    return out


def test_complex_minimum_of_equal_values_returns_one_of_them():
    sig = Signature.make("minimum", ["tensor<1xcomplex<f32>>"] * 2, ["tensor<1xcomplex<f32>>"])
    lhs, rhs = _cplx((0.0, -0.0)), _cplx((-0.0, 0.0))
    classes, impl = judge(sig, lambda s, i, o: [i[1].copy()], lhs, rhs)
    assert classes == ["pass"] and impl["complex_tie"]["outside"] == 0
    assert sum(impl["complex_tie"]["alternatives"].values()) + \
        impl["complex_tie"]["conventional"] == 1

    def per_part(sig, ins, out):     # the minimum of each part: (-0, -0), neither operand
        r = np.zeros_like(out[0])
        r.real, r.imag = -0.0, -0.0
        return [r]
    classes, impl = judge(sig, per_part, lhs, rhs)
    assert classes == ["signed_zero"] and impl["complex_tie"]["outside"] == 1


def test_complex_clamp_tie_returns_one_of_its_operands():
    sig = Signature.make("clamp", ["tensor<1xcomplex<f32>>"] * 3, ["tensor<1xcomplex<f32>>"])
    lo, x, hi = _cplx((1.0, -0.0)), _cplx((1.0, 0.0)), _cplx((5.0, 0.0))
    assert judge(sig, lambda s, i, o: [i[1].copy()], lo, x, hi)[0] == ["pass"]
    assert judge(sig, lambda s, i, o: [i[0].copy()], lo, x, hi)[0] == ["pass"]
    assert judge(sig, lambda s, i, o: [i[2].copy()], lo, x, hi)[0] == ["value"]


def test_a_flushed_subnormal_that_makes_a_complex_tie_is_a_subnormal_flush():
    """XLA on CPU: minimum((0, -0), (0, SUB)) compares SUB as 0, finds a tie and moves
    (0, SUB) unchanged: allowed on the flushed inputs, where the values tie."""
    sig = Signature.make("minimum", ["tensor<1xcomplex<f32>>"] * 2, ["tensor<1xcomplex<f32>>"])
    sub = 7.2855805e-39
    classes, _ = judge(sig, lambda s, i, o: [i[1].copy()], _cplx((0.0, -0.0)), _cplx((0.0, sub)))
    assert classes == ["subnormal_flush"]
    # and the same move without a subnormal behind it is a value (no tie: -0 < 1e-3)
    classes, _ = judge(sig, lambda s, i, o: [i[1].copy()], _cplx((0.0, -0.0)),
                       _cplx((0.0, 1e-3)))
    assert classes == ["value"]


# ---------------------------------------------------------------------------
# bitcast_convert between widths: each element's bits in its own parts, either order
# ---------------------------------------------------------------------------

def test_bitcast_split_big_endian_passes_element_mixup_fails():
    sig = Signature.make("bitcast_convert", ["tensor<2xf32>"], ["tensor<2x4xsi8>"])
    x = np.array([[1.0, -2.5]], np.float32)
    classes, impl = judge(sig, lambda s, i, o: [np.ascontiguousarray(o[0][..., ::-1])], x)
    assert classes == ["pass"] and impl["bit_layout"]["alternatives"] == {"parts_reversed": 8}
    classes, _ = judge(sig, lambda s, i, o: [np.ascontiguousarray(o[0][::-1])], x)
    assert classes == ["value"]         # element 0's bits in element 1's parts


def test_bitcast_example_is_checked_against_the_allowed_layouts():
    (ex,) = golden.examples(load_spec("bitcast_convert"))
    e = ex.expected[0]
    assert golden.mismatch(ex, [np.ascontiguousarray(e[:, ::-1])]) is None   # big-endian
    assert golden.mismatch(ex, [np.ascontiguousarray(e[::-1])]) is not None  # elements moved


# ---------------------------------------------------------------------------
# gather: an out-of-bounds slice reads a window at some in-range start
# ---------------------------------------------------------------------------

def gather_case(start):
    return Signature.make("gather", ["tensor<4xsi32>", "tensor<1xsi32>"], ["tensor<2xsi32>"],
                          {"offset_dims": [0], "collapsed_slice_dims": [],
                           "operand_batching_dims": [], "start_indices_batching_dims": [],
                           "start_index_map": [0],
                           "index_vector_dim": 0, "slice_sizes": [2],
                           "indices_are_sorted": False}), \
        np.array([[10, 11, 12, 13]] * len(start), np.int32), \
        np.array([[s] for s in start], np.int32)


def test_gather_out_of_bounds_start_wrapped_into_range_passes():
    sig, x, idx = gather_case([4, 5, -1, 1])

    def wraps(sig, ins, out):
        operand, (s,) = ins
        s = int(s) if 0 <= int(s) <= 2 else int(s) % 3
        return [operand[s:s + 2].copy()]
    classes, impl = judge(sig, wraps, x, idx)
    assert classes == ["pass"] * 4
    st = impl["out_of_bounds"]
    assert st["outside"] == 0 and st["alternatives"].get("in_range_start", 0) > 0


def test_gather_clamped_per_element_or_filled_fails():
    sig, x, idx = gather_case([4, 5])

    def per_element_clamp(sig, ins, out):      # each index clamped to dim - 1: [13, 13]
        # (a window at an in-range start holds 13 only at its end)
        operand, (s,) = ins
        return [operand[np.minimum(np.arange(int(s), int(s) + 2), 3)].copy()]
    classes, impl = judge(sig, per_element_clamp, x, idx)
    assert classes == ["value", "value"] and impl["out_of_bounds"]["outside"] == 2

    def fills(sig, ins, out):                  # an out-of-bounds slice reads as 0
        return [np.zeros_like(out[0])]
    assert judge(sig, fills, x, idx)[0] == ["value", "value"]
    # start 3: the spec's own formula keeps operand[3] where operand_index is in bounds
    sig, x, idx = gather_case([3])
    assert judge(sig, lambda s, i, o: [np.array([13, 13], np.int32)], x, idx)[0] == ["pass"]


# ---------------------------------------------------------------------------
# scatter: the in-bounds updates of a partly out-of-bounds window, and update orders
# ---------------------------------------------------------------------------

ADD = "(si32, si32) -> add(arg0, arg1)"
REPLACE = "(si32, si32) -> arg1"


def scatter_sig(region, n_idx=1, window=2):
    return Signature.make(
        "scatter", ["tensor<4xsi32>", f"tensor<{n_idx}x1xsi32>", f"tensor<{n_idx}x{window}xsi32>"],
        ["tensor<4xsi32>"],
        {"update_window_dims": [1], "inserted_window_dims": [],
         "input_batching_dims": [], "scatter_indices_batching_dims": [],
         "scatter_dims_to_operand_dims": [0],
         "index_vector_dim": 1, "indices_are_sorted": False, "unique_indices": False},
        regions=(region,))


def test_scatter_applying_the_in_bounds_part_of_a_window_passes():
    sig = scatter_sig(ADD)
    x, idx, upd = np.array([[0, 1, 2, 3]]), np.array([[[3]]]), np.array([[[100, 200]]])

    def per_element(sig, ins, out):
        r = ins[0].copy()
        r[3] += ins[2][0, 0]
        return [r.astype(np.int32)]
    classes, impl = judge(sig, per_element, x.astype(np.int32), idx.astype(np.int32),
                          upd.astype(np.int32))
    assert classes == ["pass"] and impl["out_of_bounds"]["alternatives"] == {"per_element": 1}


def test_scatter_writing_an_out_of_bounds_window_without_the_region_fails():
    sig = scatter_sig(ADD)

    def replaces(sig, ins, out):       # the in-bounds update stored, not added
        r = ins[0].copy()
        r[3] = ins[2][0, 0]
        return [r.astype(np.int32)]
    classes, impl = judge(sig, replaces, np.array([[0, 1, 2, 3]], np.int32),
                          np.array([[[3]]], np.int32), np.array([[[100, 200]]], np.int32))
    assert classes == ["value"] and impl["out_of_bounds"]["outside"] == 1


def test_scatter_repeated_updates_in_another_order_pass_dropped_ones_fail():
    sig = scatter_sig(REPLACE, n_idx=3, window=1)
    x = np.array([[0, 1, 2, 3]], np.int32)
    idx = np.array([[[1], [1], [1]]], np.int32)
    upd = np.array([[[10], [20], [30]]], np.int32)       # the oracle: last wins, 30

    def first_wins(sig, ins, out):
        r = out[0].copy()
        r[1] = 10
        return [r]
    classes, impl = judge(sig, first_wins, x, idx, upd)
    assert classes == ["pass"] and impl["update_order"]["alternatives"] == {"another_order": 1}

    def keeps_operand(sig, ins, out):   # repeated updates dropped altogether
        r = out[0].copy()
        r[1] = 1
        return [r]
    classes, impl = judge(sig, keeps_operand, x, idx, upd)
    assert classes == ["value"] and impl["update_order"]["outside"] == 1


def test_every_rule_says_what_the_spec_still_allows():
    """Each implementation_defined rule of the shipped specs names its allowed set, and
    a pure mask (``allowed: any``) says why the spec bounds nothing there."""
    from conformance.specs import all_specs
    missing = [(s.name, r["id"]) for s in all_specs()
               for r in s.data.get("implementation_defined", []) if "allowed" not in r
               or (r["allowed"] == "any" and not r.get("says"))]
    assert not missing, missing


@pytest.mark.parametrize("op,rule,kind", [
    ("convert", "inexact_to_float", "set"), ("convert", "integer_overflow", "set"),
    ("convert", "float_to_integer_out_of_range", "any"), ("add", "integer_overflow", "any"),
    ("gather", "out_of_bounds", "set"), ("scatter", "update_order", "set"),
    ("sort", "order_of_equal_elements", "permutation"),
    ("sort", "comparator_not_a_strict_weak_order", "permutation")])
def test_rules_say_what_they_allow(op, rule, kind):
    (r,) = [r for r in load_spec(op).implementation_defined if r.id == rule]
    assert ("set" if not isinstance(r.allowed, str) else r.allowed) == kind


def test_a_single_case_is_judged_by_the_same_sets():
    case = Case.make("convert", [np.array([2 ** 63 + 2 ** 40 + 1], U64)], ["tensor<1xf32>"])

    def as_signed(sig, ins, out):
        return [oracles.evaluate("convert", [ins[0].view(np.int64)],
                                 result_types=sig.result_types)[0]]
    assert check_case(Planted(as_signed), case).cls == "value"
    assert check_case(Planted(lambda s, i, o: o), case).cls == "pass"


# ---------------------------------------------------------------------------
# End to end: the CLI's records say which member a backend chose
# ---------------------------------------------------------------------------

class ConvertTowardZero(Backend):
    """The oracle, except that inexact conversions to float types truncate (round
    toward zero, each complex part on its own): allowed, and recorded."""

    name = "toward-zero"

    def compile(self, sig):
        from conformance.oracles.conversion import convert_directed

        def run(inputs):
            out = list(oracles.evaluate(sig.op, inputs, sig.attributes,
                                        result_types=sig.result_types))
            (r,) = out
            if sig.op != "convert" or r.dtype.kind not in "fc" and r.dtype.name not in (
                    "bfloat16", "float8_e4m3fn", "float8_e5m2"):
                return out
            (x,) = inputs
            if np.asarray(x).dtype == bool:
                return out
            parts = [np.real(r), np.imag(r)] if r.dtype.kind == "c" else [r]
            modes = [np.where(np.signbit(np.asarray(p, np.float64)), "up", "down")
                     for p in parts]
            best = r.copy()
            for re_mode in ("down", "up"):
                for im_mode in (("down", "up") if r.dtype.kind == "c" else ("down",)):
                    alt = convert_directed(np.asarray(x), r, re_mode, im_mode)
                    sel = modes[0] == re_mode
                    if r.dtype.kind == "c":
                        sel &= modes[1] == im_mode
                    best = np.where(sel, alt, best)
            return [best.astype(r.dtype)]
        return run


class ConvertU64AsSigned(Backend):
    name = "u64-as-signed"

    def compile(self, sig):
        def run(inputs):
            (x,) = inputs
            if x.dtype == np.uint64 and sig.result_types[0].element_type.is_float:
                x = x.view(np.int64)
            return list(oracles.evaluate(sig.op, [x], sig.attributes,
                                         result_types=sig.result_types))
        return run


def _signature_records(out):
    import json
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()
            if json.loads(line).get("kind") == "signature"]


def test_the_cli_records_the_alternatives_chosen_and_fails_outside_the_set(tmp_path):
    from conformance.apps.cli import main
    args = ["run", "--ops", "convert", "--types", "ui64", "--depth", "quick", "--no-progress",
            "--no-isolate", "--no-replay"]
    assert main(args + ["--backend", "test_allowed_sets:ConvertTowardZero",
                        "--out", str(tmp_path / "z")]) == 0
    totals: dict = {}
    from conformance.checking.compare import merge_impl_stats
    for r in _signature_records(tmp_path / "z"):
        merge_impl_stats(totals, r["impl_defined"])
    st = totals["inexact_to_float"]
    assert st["outside"] == 0 and sum(st["alternatives"].values()) > 0
    assert st["conventional"] + sum(st["alternatives"].values()) == st["elements"]
    assert main(args + ["--backend", "test_allowed_sets:ConvertU64AsSigned",
                        "--out", str(tmp_path / "s")]) == 1
    bad = [r for r in _signature_records(tmp_path / "s") if r["outcome"] == "value"]
    assert bad and all(r["type_key"].startswith("ui64->") for r in bad)
    assert any(r["impl_defined"].get("inexact_to_float", {}).get("outside") for r in bad)


@pytest.mark.parametrize("src", ["si64", "ui64", "si32", "f64", "f32"])
@pytest.mark.parametrize("dst", ["f64", "f32", "f16", "bf16", "f8E5M2", "f8E4M3FN"])
def test_convert_directed_gives_the_two_neighbours(src, dst):
    """down <= exact value <= up, adjacent in the result type, one of them the nearest."""
    from fractions import Fraction
    from conformance.core.numerics import ordinal
    from conformance.core.types import element_type
    from conformance.oracles.conversion import convert_directed
    et = element_type(src)
    rng = np.random.default_rng(5)
    if et.is_integer:
        lo, hi = et.int_min, et.int_max
        vals = [lo, hi, 0, 1, -1 if lo < 0 else 2, 2 ** 24 + 1, 2 ** 53 + 1] + \
            [int(v) for v in rng.integers(lo, hi, 40, dtype=np.int64 if lo < 0 else np.uint64)]
        x = np.array([v for v in vals if lo <= v <= hi], et.dtype)
    else:
        with np.errstate(over="ignore"):
            x = np.concatenate([rng.standard_normal(30) * 10.0 ** rng.integers(-45, 45, 30),
                                [1e39, -1e39, 1e-46, -1e-46, 0.0, -0.0, 70000.0, 449.0]]
                               ).astype(et.dtype)
    r = oracles.evaluate("convert", [x], result_types=[f"tensor<{x.size}x{dst}>"])[0]
    down, up = convert_directed(x, r, "down"), convert_directed(x, r, "up")
    for xi, ri, di, ui in zip(x.tolist(), r.astype(np.float64).tolist(),
                             down.astype(np.float64).tolist(), up.astype(np.float64).tolist()):
        if any(np.isnan([di, ui])) or np.isinf(xi):
            continue
        exact = Fraction(xi)
        assert ri in (di, ui)
        assert (np.isinf(di) and di < 0) or Fraction(di) <= exact
        assert (np.isinf(ui) and ui > 0) or Fraction(ui) >= exact
    finite = np.isfinite(down.astype(np.float64)) & np.isfinite(up.astype(np.float64))
    gap = ordinal(up[finite]) - ordinal(down[finite])
    assert set(gap.tolist()) <= {0, 1}
