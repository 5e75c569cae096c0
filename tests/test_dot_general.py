"""dot_general: the oracle against the spec's formulas, the exact f64 product, integer
wraparound, the ``contraction`` bound and the ``precision`` class with planted backends,
the golden examples on every backend, and an invalid case for every constraint."""
from __future__ import annotations

import itertools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from conformance.checking import golden

from conformance import oracles
from conformance.backends import Backend, get_backend
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.numerics import round_to
from conformance.core.types import element_type
from conformance.mlir.emitter import verifier_rejects
from conformance.generators import breakable, candidates, canonical, unbreakable
from conformance.oracles import contraction
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations

SPEC = load_spec("dot_general")


def dg_sig(lshape, rshape, et, lb, rb, lc, rc, precision=("HIGHEST", "HIGHEST"), rt=None):
    lay = contraction.Layout(lshape, rshape, lb, rb, lc, rc)
    t = lambda s, e: f"tensor<{'x'.join(map(str, s))}x{e}>" if s else f"tensor<{e}>"  # noqa
    return Signature.make("dot_general", [t(lshape, et), t(rshape, et)],
                          [t(lay.result_shape, rt or et)],
                          {"lhs_batching_dimensions": list(lb), "rhs_batching_dimensions": list(rb),
                           "lhs_contracting_dimensions": list(lc),
                           "rhs_contracting_dimensions": list(rc),
                           "precision_config": list(precision)})


# ---------------------------------------------------------------------------
# The oracle against the spec's "More formally", element by element
# ---------------------------------------------------------------------------

def naive(lhs, rhs, lb, rb, lc, rc):
    """The spec's formulas with explicit loops: exact (Fraction / int) dot products."""
    lfree = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    bsh = [lhs.shape[d] for d in lb]
    out_shape = bsh + [lhs.shape[d] for d in lfree] + [rhs.shape[d] for d in rfree]
    csh = [lhs.shape[d] for d in lc]
    out = {}
    for idx in itertools.product(*(range(n) for n in out_shape)):
        bi, li, ri = idx[:len(lb)], idx[len(lb):len(lb) + len(lfree)], idx[len(lb) + len(lfree):]
        total = 0
        for ci in itertools.product(*(range(n) for n in csh)):
            lidx, ridx = [0] * lhs.ndim, [0] * rhs.ndim
            for d, i in zip(lb, bi):
                lidx[d] = i
            for d, i in zip(rb, bi):
                ridx[d] = i
            for d, i in zip(lfree, li):
                lidx[d] = i
            for d, i in zip(rfree, ri):
                ridx[d] = i
            for d, i in zip(lc, ci):
                lidx[d] = i
            for d, i in zip(rc, ci):
                ridx[d] = i
            a, b = lhs[tuple(lidx)], rhs[tuple(ridx)]
            total += (Fraction(float(a)) * Fraction(float(b)) if lhs.dtype.kind == "f"
                      else int(a) * int(b))
        out[idx] = total
    return out_shape, out


def random_dims(rng):
    nb, nc, nl, nr = (int(v) for v in rng.integers(0, 3, 4))
    sizes = [int(v) for v in rng.integers(0, 4, nb + nc + nl + nr)]
    lperm, rperm = rng.permutation(nb + nc + nl), rng.permutation(nb + nc + nr)
    lb, lc, lf = list(lperm[:nb]), list(lperm[nb:nb + nc]), sorted(lperm[nb + nc:])
    rb, rc, rf = list(rperm[:nb]), list(rperm[nb:nb + nc]), sorted(rperm[nb + nc:])
    lshape = [0] * (nb + nc + nl)
    for a, s in zip(lb + lc + lf, sizes[:nb + nc + nl]):
        lshape[a] = s
    rshape = [0] * (nb + nc + nr)
    for a, s in zip(rb + rc + rf, sizes[:nb + nc] + sizes[nb + nc + nl:]):
        rshape[a] = s
    return lshape, rshape, [int(x) for x in lb], [int(x) for x in rb], \
        [int(x) for x in lc], [int(x) for x in rc]


@pytest.mark.parametrize("seed", range(10))
def test_oracle_is_the_spec_formulas_in_any_dimension_order(seed):
    rng = np.random.default_rng(seed)
    lshape, rshape, lb, rb, lc, rc = random_dims(rng)
    lhs = rng.integers(-50, 50, lshape).astype(np.int32)
    rhs = rng.integers(-50, 50, rshape).astype(np.int32)
    shape, want = naive(lhs, rhs, lb, rb, lc, rc)
    sig = dg_sig(lshape, rshape, "si32", lb, rb, lc, rc)
    assert violations(sig) == []
    (got,) = oracles.evaluate("dot_general", [lhs, rhs], sig.attributes,
                              result_types=sig.result_types)
    assert list(got.shape) == shape
    for idx, v in want.items():
        assert got[idx] == v, (idx, lshape, rshape, lb, rb, lc, rc)
    # the same on floats, every product and sum exact in f32
    (gotf,) = oracles.evaluate("dot_general", [lhs.astype(np.float32), rhs.astype(np.float32)],
                               sig.attributes, result_types=[
                                   sig.result_types[0].__class__(sig.result_types[0].shape,
                                                                 element_type("f32"))])
    assert np.array_equal(gotf, got.astype(np.float32))
    assert not np.signbit(gotf[gotf == 0]).any()      # init value +0


def test_f64_and_complex128_are_exact_to_the_last_bit():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 40)) * np.exp2(rng.integers(-40, 40, (3, 40)))
    b = rng.standard_normal((40, 4)) * np.exp2(rng.integers(-40, 40, (40, 4)))
    sig = dg_sig((3, 40), (40, 4), "f64", [], [], [1], [0])
    (got,) = oracles.evaluate("dot_general", [a, b], sig.attributes, result_types=sig.result_types)
    exact = [[float(sum(Fraction(x) * Fraction(y) for x, y in zip(a[i], b[:, j])))
              for j in range(4)] for i in range(3)]
    assert np.array_equal(got, np.array(exact))      # correctly rounded
    assert not np.array_equal(a @ b, np.array(exact))   # (plain float64 BLAS is not)
    ca = a[:, :20] + 1j * a[:, 20:]
    cb = b[:20] - 1j * b[20:]
    sig = dg_sig((3, 20), (20, 4), "complex<f64>", [], [], [1], [0])
    (gc,) = oracles.evaluate("dot_general", [ca, cb], sig.attributes,
                             result_types=sig.result_types)
    for i, j in itertools.product(range(3), range(4)):
        re = sum(Fraction(x.real) * Fraction(y.real) - Fraction(x.imag) * Fraction(y.imag)
                 for x, y in zip(ca[i], cb[:, j]))
        im = sum(Fraction(x.real) * Fraction(y.imag) + Fraction(x.imag) * Fraction(y.real)
                 for x, y in zip(ca[i], cb[:, j]))
        assert gc[i, j] == complex(float(re), float(im))


def test_integers_wrap_and_booleans_are_or_of_and():
    a = np.array([[100, 100, -128]], np.int8)
    b = np.array([[3], [2], [1]], np.int8)
    sig = dg_sig((1, 3), (3, 1), "si8", [], [], [1], [0])
    (r,) = oracles.evaluate("dot_general", [a, b], sig.attributes, result_types=sig.result_types)
    assert r.tolist() == [[((300 + 200 - 128 + 128) % 256) - 128]]
    u = np.array([[2 ** 63, 3]], np.uint64)
    v = np.array([[2 ** 62 + 1], [5]], np.uint64)
    sig = dg_sig((1, 2), (2, 1), "ui64", [], [], [1], [0])
    (r,) = oracles.evaluate("dot_general", [u, v], sig.attributes, result_types=sig.result_types)
    assert int(r[0, 0]) == (2 ** 63 * (2 ** 62 + 1) + 15) % 2 ** 64
    # a wider result: the sum at the result type, the operand-type sum allowed
    sig = dg_sig((1, 3), (3, 1), "si8", [], [], [1], [0], rt="si32")
    (r,) = oracles.evaluate("dot_general", [a, b], sig.attributes, result_types=sig.result_types)
    assert r.tolist() == [[300 + 200 - 128]]
    masks = oracles.implementation_defined(sig, [a[None], b[None]], SPEC, [r[None]])
    assert masks["integer_result_type"].all()
    assert masks.alternatives("integer_result_type")["at_operand_type"][0][0].tolist() == \
        [[[116]]]


# ---------------------------------------------------------------------------
# Planted backends: accumulation precision, order, layout bugs, precision_config
# ---------------------------------------------------------------------------

class Planted(Backend):
    """dot_general summed left to right (or right to left) with every product and partial
    sum rounded to ``acc`` (an element type name; None: the oracle), then converted to the
    result type; ``bug`` changes the operands first (a layout bug)."""

    isolate = False

    def __init__(self, acc=None, reverse=False, bug=None, name="planted"):
        self.acc, self.reverse, self.bug, self.name = acc, reverse, bug, name
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        a = sig.attributes
        dims = [a[k] for k in ("lhs_batching_dimensions", "rhs_batching_dimensions",
                               "lhs_contracting_dimensions", "rhs_contracting_dimensions")]
        (rt,) = sig.result_types

        def run(inputs):
            lhs, rhs = (np.asarray(x) for x in inputs)
            if self.bug is not None:
                lhs, rhs = self.bug(lhs, rhs, dims)
            if self.acc is None:
                return [contraction.to_result(contraction.contract(lhs, rhs, *dims), rt)]
            lay = contraction.Layout(lhs.shape, rhs.shape, *dims)
            x, y = lay.operands(lhs.astype(np.float64), rhs.astype(np.float64))
            rnd = lambda v: round_to(v, self.acc).astype(np.float64)      # noqa: E731
            acc = np.zeros(x.shape[:-1] + (y.shape[-1],))
            ks = range(x.shape[-1])
            with np.errstate(all="ignore"):
                for k in (reversed(ks) if self.reverse else ks):
                    acc = rnd(acc + rnd(x[..., :, k, None] * y[..., None, k, :]))
                out = acc + 0.0
            return [round_to(lay.result(out), rt.element_type).reshape(rt.shape)]
        return run


class _Fixed(Backend):
    """Gives one fixed result whatever the inputs."""

    isolate = False
    name = "fixed"

    def __init__(self, out):
        self.out = out
        super().__init__()

    def compile(self, sig):
        return lambda inputs: [self.out]


def classes(backend, sig, batches=2, inputs=None):
    check = SignatureCheck(SPEC, sig, [backend])
    check.compile()
    assert not check.failed and not check.unsupported, (check.failed, check.unsupported)
    counts: dict[str, int] = {}
    key = f"{sig.input_types[0].element_type.name}->{sig.result_types[0].element_type.name}"
    for b in range(batches):
        stacked = inputs if inputs is not None else batch_for(0, "default", SPEC, key, 0, b, sig)
        v = check.run_batch(b, stacked).results[backend.name].verdict
        for cls, n in v.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


F32 = dg_sig((2, 3, 32), (2, 32, 4), "f32", [0], [0], [2], [1])
F32_ODD = dg_sig((32, 3, 2), (4, 2, 32), "f32", [2], [1], [0], [2])     # out of order
BF16 = dg_sig((3, 16, 2), (16, 3, 2), "bf16", [0], [1], [1], [0])
BF16_F32 = dg_sig((3, 16, 2), (16, 3, 2), "bf16", [0], [1], [1], [0], rt="f32")
F8 = dg_sig((2, 8, 3), (8, 2), "f8E4M3FN", [], [], [1], [0])
F64 = dg_sig((3, 24), (24, 2), "f64", [], [], [1], [0])
C64 = dg_sig((2, 12), (12, 2), "complex<f32>", [], [], [1], [0])


@pytest.mark.parametrize("sig", [F32, F32_ODD, BF16, BF16_F32, F8, F64, C64],
                         ids=["f32", "f32-odd", "bf16", "bf16-f32", "f8", "f64", "c64"])
def test_other_orders_and_more_precise_accumulation_pass(sig):
    et = sig.input_types[0].element_type
    if et.is_complex:
        # (complex: the oracle's own arithmetic, in another order of the terms)
        assert set(classes(Planted(name="oracle"), sig)) <= {"pass"}
        return
    for backend in (Planted(acc=et.name, name="left"),
                    Planted(acc=et.name, reverse=True, name="right"),
                    Planted(acc="f64", name="f64-accumulate")):
        assert set(classes(backend, sig)) <= {"pass"}, backend.name


@pytest.mark.parametrize("sig, low", [(F32, "bf16"), (F32_ODD, "f16"), (BF16, "f8E5M2"),
                                      (BF16_F32, "f8E5M2"), (F64, "f32")],
                         ids=["f32-bf16", "f32odd-f16", "bf16-f8", "bf16f32-f8", "f64-f32"])
def test_accumulating_below_the_element_type_under_highest_fails(sig, low):
    counts = classes(Planted(acc=low, name="low"), sig)
    assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts
    assert "precision" not in counts


def test_default_precision_low_accumulation_is_class_precision():
    sig = dg_sig((2, 3, 32), (2, 32, 4), "f32", [0], [0], [2], [1], ("DEFAULT", "HIGH"))
    counts = classes(Planted(acc="bf16", name="low"), sig)
    assert counts.get("precision", 0) > 0, counts
    assert counts.get("bound", 0) == counts.get("value", 0) == 0, counts
    # the same backend is fine where the inputs are exact in bf16 ... and still a layout
    # bug under DEFAULT is no precision question
    bad = classes(Planted(bug=_swap_rhs_free, name="swapped"), sig)
    assert bad.get("bound", 0) + bad.get("value", 0) > 0, bad


def _swap_rhs_free(lhs, rhs, dims):
    """rhs's free dimension read in reverse: a wrong transposition."""
    return lhs, np.flip(rhs, axis=-1)


def _batch_mixed(lhs, rhs, dims):
    """lhs's batching dimension read in reverse: the wrong batch paired."""
    return np.flip(lhs, axis=dims[0][0]), rhs


def _contract_wrong_axis(lhs, rhs, dims):
    """rhs's contracting dimension read backwards (a transposed kernel)."""
    return lhs, np.flip(rhs, axis=dims[3][0])


@pytest.mark.parametrize("bug", [_swap_rhs_free, _batch_mixed, _contract_wrong_axis])
@pytest.mark.parametrize("sig", [F32, BF16], ids=["f32", "bf16"])
def test_layout_bugs_fail(bug, sig):
    counts = classes(Planted(bug=bug, name="layout-bug"), sig)
    assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts


def test_exact_value_inputs_are_checked_bit_for_bit_on_bf16_and_fp8():
    """Where every order gives the exact result the bound is 0: one ulp off fails."""
    from conformance.checking.verdicts import Judgement
    from conformance.checking.verdicts.contraction import contraction_bound
    for sig in (BF16, F8):
        lt, rt = sig.input_types
        lhs = (np.arange(lt.size).reshape((1,) + lt.shape) % 3 - 1.0).astype(lt.element_type.dtype)
        rhs = (np.arange(rt.size).reshape((1,) + rt.shape) % 2 * 0.5).astype(rt.element_type.dtype)
        expected = oracles.evaluate_batch(sig, [lhs, rhs], SPEC)
        j = Judgement(sig, SPEC, SPEC.signature_accuracy(sig), [lhs, rhs], expected,
                      expected, {})
        (lim,) = contraction_bound(j)
        assert (lim == 0).all(), sig.key()
        # one ulp off anywhere fails as a value (no bound to hide in)
        e = np.asarray(expected[0])
        off = (e.astype(np.float64) * (1 + 2.0 ** -3) + 0.5).astype(e.dtype)
        counts = classes(_Fixed(off[0]), sig, batches=1, inputs=[lhs, rhs])
        assert counts.get("value", 0) == 1, counts


# ---------------------------------------------------------------------------
# Golden examples on the oracle, jax, xla and the interpreter
# ---------------------------------------------------------------------------

EXAMPLES = golden.examples(SPEC)


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.id)
def test_examples_on_the_oracle_and_jax(ex):
    assert golden.mismatch(ex, oracles.evaluate_case(ex.case)) is None
    assert golden.mismatch(ex, get_backend("jax").run(ex.case)) is None


@pytest.mark.parametrize("backend", ["xla", "interpreter"])
def test_the_emitter_path_runs_the_spec_example(backend):
    ex = EXAMPLES[0]
    assert golden.mismatch(ex, get_backend(backend).run(ex.case)) is None


# ---------------------------------------------------------------------------
# Constraints: each breakable alone, the result type free, the verifier's errata
# ---------------------------------------------------------------------------

def test_every_constraint_has_an_invalid_case():
    rules = breakable(SPEC)
    assert {f"C{i}" for i in (*range(1, 14), *range(21, 25))} <= set(rules), \
        unbreakable("dot_general")
    # the canonical f32 signature carries an algorithm (C21-C24 break from it; a
    # precision_config item outside the enum, I7, then breaks C21 too): si32's has none
    bases = [canonical(SPEC, {"E": "f32", "R": "f32"}), canonical(SPEC, {"E": "si32", "R": "si32"})]
    assert all(violations(v) == [] for v in bases)
    for rule in rules:
        found = candidates(SPEC, bases[0], rule) or candidates(SPEC, bases[1], rule)
        assert found, rule
        for bad in found[:5]:
            assert rule in violations(bad)


@pytest.mark.parametrize("rule, change", [
    # (stablehlo-spec-2026-08.md's numbering: the seed's C1 is C13, its C2-C13 are C1-C12)
    ("C13", {"types": ["tensor<2x3xf32>", "tensor<3x4xf64>"]}),
    ("C1", {"lhs_batching_dimensions": [0]}),
    ("C2", {"lhs_contracting_dimensions": []}),
    ("C3", {"lhs_batching_dimensions": [1], "rhs_batching_dimensions": [0]}),
    ("C5", {"lhs_batching_dimensions": [2], "rhs_batching_dimensions": [1]}),
    ("C8", {"rhs_contracting_dimensions": [2]}),
    ("C7", {"lhs_batching_dimensions": [0], "rhs_batching_dimensions": [-1]}),
    ("C10", {"types": ["tensor<2x3xf32>", "tensor<2x4xf32>"]}),
    ("C11", {"precision_config": ["DEFAULT"]}),
    ("C12", {"result": "tensor<4x2xf32>"}),
    ("C21", {"precision_config": ["HIGHEST", "DEFAULT"], "lhs_precision_type": "f32",
             "rhs_precision_type": "f32", "accumulation_type": "f32",
             "lhs_component_count": 1, "rhs_component_count": 1,
             "num_primitive_operations": 1, "allow_imprecise_accumulation": False}),
    ("C24", {"lhs_precision_type": "f32", "rhs_precision_type": "f32",
             "accumulation_type": "f32", "lhs_component_count": 1,
             "rhs_component_count": 1, "num_primitive_operations": 0,
             "allow_imprecise_accumulation": False}),
])
def test_one_broken_constraint_is_named(rule, change):
    attrs = {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
             "lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0],
             "precision_config": ["DEFAULT", "DEFAULT"]}
    types = change.pop("types", ["tensor<2x3xf32>", "tensor<3x4xf32>"])
    result = change.pop("result", "tensor<2x4xf32>")
    attrs.update(change)
    sig = Signature.make("dot_general", types, [result], attrs)
    assert rule in violations(sig)


def test_the_result_element_type_is_free_and_the_verifier_agrees():
    """C12 fixes only the shape: f32 operands with an si32, bf16 or complex result are
    valid programs (of the cross-kind results the suite draws integer -> float and
    real -> complex, whose conversion 003 "### convert" says: tests below)."""
    for rt in ("si32", "bf16", "f64", "complex<f32>"):
        sig = Signature.make("dot_general", ["tensor<2x3xf32>", "tensor<3x4xf32>"],
                             [f"tensor<2x4x{rt}>"],
                             {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
                              "lhs_contracting_dimensions": [1],
                              "rhs_contracting_dimensions": [0],
                              "precision_config": ["HIGH", "HIGHEST"]})
        assert violations(sig) == []
        assert verifier_rejects(sig) is None


def test_verifier_errata_precision_config_size_and_mixed_operands():
    """jaxlib's StableHLO verifier accepts a precision_config of size 0 or 1 (C11 says
    2) and operands of different element types (C13): recorded in the YAML's C11/C13."""
    base = {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
            "lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}
    for pc in ([], ["HIGH"]):
        sig = Signature.make("dot_general", ["tensor<2x3xf32>", "tensor<3x4xf32>"],
                             ["tensor<2x4xf32>"], {**base, "precision_config": pc})
        assert violations(sig) == ["C11"] and verifier_rejects(sig) is None
    sig = Signature.make("dot_general", ["tensor<2x3xf32>", "tensor<3x4xf32>"],
                         ["tensor<2x4xf32>"], {**base, "precision_config": ["HIGH"] * 3})
    assert "precision config" in verifier_rejects(sig)
    mixed = Signature.make("dot_general", ["tensor<2x3xf32>", "tensor<3x4xf64>"],
                           ["tensor<2x4xf32>"], {**base, "precision_config": ["HIGH"] * 2})
    assert violations(mixed) == ["C13"] and verifier_rejects(mixed) is None
    # the seed's erratum ([d] for [i]) is gone from the newer text's C7
    assert "erratum" in next(c.text for c in SPEC.constraints if c.id == "C7").lower()


def test_bad_oracle_input_is_one_clear_line():
    with pytest.raises(oracles.OracleError, match="C9, C10"):
        contraction.contract(np.zeros((2, 3)), np.zeros((4, 5)), [], [], [1], [0])
    with pytest.raises(oracles.OracleError, match="out of range"):
        contraction.contract(np.zeros((2, 3)), np.zeros((3, 5)), [], [], [2], [0])


def test_f64_rows_of_huge_dynamic_range_keep_their_small_terms():
    """A row holding the largest f64 and 5e-133 against 0 and 2e291: the exact product is
    1e159 (scaling the row to 1 would flush the small element: the oracle said 0)."""
    a = np.array([[1.7976931348623157e308, 5e-133]])
    b = np.array([[0.0], [2e291]])
    sig = dg_sig((1, 2), (2, 1), "f64", [], [], [1], [0])
    (r,) = oracles.evaluate("dot_general", [a, b], sig.attributes, result_types=sig.result_types)
    assert r[0, 0] == float(Fraction(5e-133) * Fraction(2e291))


def test_a_zero_whose_sign_the_order_decides_allows_either_sign():
    """bf16 products that underflow (the exact sum is a tiny negative: -0 rounded, +0
    in a tree that adds the init value after rounding the product) allow both zeros."""
    sig = dg_sig((1, 2), (2, 1), "bf16", [], [], [1], [0], rt="f32")
    lhs = np.array([[[1e-38, 0.0]]], ml_dtypes.bfloat16)
    rhs = np.array([[[-1e-34], [0.0]]], ml_dtypes.bfloat16)
    (e,) = oracles.evaluate_batch(sig, [lhs, rhs], SPEC)
    masks = oracles.implementation_defined(sig, [lhs, rhs], SPEC, [e])
    assert e[0, 0, 0] == 0 and np.signbit(e[0, 0, 0])
    assert masks["zero_sign"].all()
    (alt,) = masks.alternatives("zero_sign")["other_zero"]
    assert not np.signbit(np.asarray(alt[0] if isinstance(alt, (list, tuple)) else alt)).any()


def test_an_intermediate_overflow_of_a_finite_complex_product_is_open():
    """(-8.8e68 - 5.4e307i)(-1.5 - 2i) is finite (real part -1.09e308), but a complex
    product's intermediates reach (|re a| + |im a|)(|re b| + |im b|) = 1.9e308: XLA gives
    -inf there. Such an element is out_of_range (exceptions of complex arithmetic are
    implementation-defined), so -inf passes; the same -inf for a product of moderate
    parts is still a divergence."""
    sig = dg_sig((1, 1), (1, 1), "complex<f64>", [], [], [1], [0])
    a = np.array([[-8.75862089005944e+68 - 5.429373388139644e+307j]])
    b = np.array([[-1.5 - 2j]])
    (r,) = oracles.evaluate("dot_general", [a, b], sig.attributes, result_types=sig.result_types)
    assert np.isfinite(r).all()
    masks = oracles.implementation_defined(sig, [a[None], b[None]], SPEC, [r[None]])
    assert masks["out_of_range"].all()
    inf = np.array([[complex(-np.inf, r[0, 0].imag)]])
    assert set(classes(_Fixed(inf), sig, batches=1, inputs=[a[None], b[None]])) == {"pass"}
    small = [a[None] * 1e-300, b[None]]
    assert set(classes(_Fixed(inf), sig, batches=1, inputs=small)) - {"pass"}


def test_f64_terms_across_the_whole_exponent_range_are_correctly_rounded():
    """Rows whose elements span 2^-1020 .. 2^1020, against columns scaled inversely (every
    product near one, cancelling): the error-free product slices each row at every
    exponent (a row of 1e299 once scaled down flushed its 1e-300 elements, whose products
    with 1e300 matter: 52 of these 240 elements were wrong)."""
    for seed in range(20):
        rng = np.random.default_rng(seed)
        k = 24
        x = rng.integers(-1000, 1000, (1, k))
        a = rng.standard_normal((3, k)) * np.exp2((x + rng.integers(-20, 20, (3, k))).astype(float))
        b = rng.standard_normal((k, 4)) * np.exp2(np.clip(
            -x[0][:, None] + rng.integers(-20, 20, (k, 4)), -1070, 1000).astype(float))
        got = contraction.contract(a, b, [], [], [1], [0])
        want = [[float(sum(Fraction(p) * Fraction(q) for p, q in zip(a[i], b[:, j])))
                 for j in range(4)] for i in range(3)]
        assert np.array_equal(got, np.array(want)), seed


# ---------------------------------------------------------------------------
# subnormal_flush only on the element's own evidence
# ---------------------------------------------------------------------------

class Flushing(Planted):
    """DAZ and FTZ, as XLA on CPU: subnormal operands read as zero, then left to right
    with every product and partial sum rounded to the element type and flushed when
    subnormal, the result flushed too (``bump``: and then one ulp off, a value bug)."""

    def __init__(self, bump=False, name="flushing"):
        super().__init__(name=name)
        self.bump = bump

    def compile(self, sig):
        from conformance.core.numerics import flush_subnormals
        from planted import one_ulp_up
        a = sig.attributes
        dims = [a[k] for k in ("lhs_batching_dimensions", "rhs_batching_dimensions",
                               "lhs_contracting_dimensions", "rhs_contracting_dimensions")]
        (rt,) = sig.result_types
        et = sig.input_types[0].element_type
        wide = np.complex128 if et.is_complex else np.float64

        def fl(v):
            return flush_subnormals(round_to(v, et)).astype(wide)

        def run(inputs):
            lhs, rhs = (flush_subnormals(np.asarray(x)) for x in inputs)
            lay = contraction.Layout(lhs.shape, rhs.shape, *dims)
            x, y = lay.operands(lhs.astype(wide), rhs.astype(wide))
            acc = np.zeros(x.shape[:-1] + (y.shape[-1],), wide)
            with np.errstate(all="ignore"):
                for k in range(x.shape[-1]):
                    acc = fl(acc + fl(x[..., :, k, None] * y[..., None, k, :]))
                out = flush_subnormals(round_to(lay.result(acc + 0.0), rt.element_type))
            out = out.reshape(rt.shape)
            return [one_ulp_up(out) if self.bump else out]
        return run


class OneUlp(Planted):
    """The oracle, every normal result one ulp further from zero."""

    def compile(self, sig):
        from planted import one_ulp_up
        inner = super().compile(sig)
        return lambda inputs: [one_ulp_up(inner(inputs)[0])]


def test_one_ulp_off_on_fp8_is_no_subnormal_flush():
    """fp8's smallest normal is 2^-6: an allowance of tiny·(Σ|a| + Σ|b|) granted without
    evidence made 34 of these elements (exact-value rows, bound 0) subnormal_flush."""
    counts = classes(OneUlp(name="ulp"), F8, batches=3)
    assert counts.get("value", 0) + counts.get("bound", 0) > 0, counts
    assert "subnormal_flush" not in counts, counts


@pytest.mark.parametrize("sig", [F8, BF16, BF16_F32, F32, F64, C64],
                         ids=["f8", "bf16", "bf16-f32", "f32", "f64", "c64"])
def test_daz_and_ftz_pass_or_are_subnormal_flush(sig):
    counts = classes(Flushing(), sig, batches=3)
    assert set(counts) <= {"pass", "subnormal_flush"}, counts


def _subnormal_heavy(et: str, seed: int = 0):
    """f32/f64 operands where every element's terms mix normal products near 2^-20 with
    products of subnormal lhs elements near 2^-35 (rhs near 2^100 / 2^900 there): flushing
    those moves each result far beyond its bound."""
    t = element_type(et)
    tiny = float(ml_dtypes.finfo(t.dtype).smallest_normal)
    rng = np.random.default_rng(seed)
    sub = np.arange(8) % 2 == 0                       # K = 8, even terms subnormal
    scale = 2.0 ** -20 / tiny
    lhs = np.where(sub[None, None, :], rng.integers(1, 100, (4, 3, 8)) * tiny / 512,
                   rng.standard_normal((4, 3, 8)) * tiny * 2)
    rhs = np.where(sub[None, :, None], rng.standard_normal((4, 8, 2)) * scale / 2 ** 15 * 512,
                   rng.standard_normal((4, 8, 2)) * scale)
    return [lhs.astype(t.dtype), rhs.astype(t.dtype)]


@pytest.mark.parametrize("et", ["f32", "f64"])
def test_daz_beyond_the_bound_is_subnormal_flush_and_bugs_beside_it_are_not(et):
    from conformance.core.numerics import is_subnormal
    sig = dg_sig((3, 8), (8, 2), et, [], [], [1], [0])
    inputs = _subnormal_heavy(et)
    assert is_subnormal(inputs[0]).any() and not is_subnormal(inputs[1]).any()
    counts = classes(Flushing(), sig, batches=1, inputs=inputs)
    assert counts.get("subnormal_flush", 0) > 0 and set(counts) <= {"pass", "subnormal_flush"}, \
        counts
    # the flushed value one ulp off is still within the bound: a value three orders of
    # magnitude off (every term dropped) is not a flush, nor is a sign error
    lhs, rhs = inputs
    (e,) = oracles.evaluate_batch(sig, inputs, SPEC)
    for wrong in (np.zeros_like(e), -e):
        counts = classes(_Fixed(wrong[0]), sig, batches=1, inputs=[lhs[:1], rhs[:1]])
        assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts
        assert "subnormal_flush" not in counts, counts


def test_a_subnormal_in_another_case_lends_no_flush():
    """Exact-value fp8 rows, one case holding subnormals: one ulp off in the other case is
    a value error; in the case with subnormals it is a value error too where they do not
    reach the element."""
    lt, rt = F8.input_types
    lhs = (np.arange(2 * lt.size).reshape((2,) + lt.shape) % 3 - 1.0)
    rhs = (np.arange(2 * rt.size).reshape((2,) + rt.shape) % 2 * 0.125)
    lhs[1, 0, :, 0] = 2.0 ** -8                      # subnormal in E4M3FN (tiny 2^-6)
    inputs = [lhs.astype(lt.element_type.dtype), rhs.astype(rt.element_type.dtype)]
    check = SignatureCheck(SPEC, F8, [OneUlp(name="ulp")])
    check.compile()
    v = check.run_batch(0, inputs).results["ulp"].verdict
    (cls,) = v.element_classes
    from conformance.checking.compare import SUBNORMAL_FLUSH
    expected = np.asarray(oracles.evaluate_batch(F8, inputs, SPEC)[0], np.float64)
    reach = np.zeros(cls.shape, bool)
    reach[1, 0, 0, :] = True                         # the row lhs[1, 0, :, 0] feeds
    assert not (cls[~reach] == SUBNORMAL_FLUSH).any()
    assert (cls[~reach & (np.abs(expected) >= 2.0 ** -6)] > SUBNORMAL_FLUSH).all()


# ---------------------------------------------------------------------------
# Results of another kind: integer operands with a float result, real with complex
# ---------------------------------------------------------------------------

SI8_F32 = dg_sig((2, 3, 32), (2, 32, 4), "si8", [0], [0], [2], [1], rt="f32")
SI8_BF16 = dg_sig((3, 16, 2), (16, 3, 2), "si8", [0], [1], [1], [0], rt="bf16")
UI16_F32 = dg_sig((3, 24), (24, 2), "ui16", [], [], [1], [0], rt="f32")
F32_C64 = dg_sig((2, 3, 32), (2, 32, 4), "f32", [0], [0], [2], [1], rt="complex<f32>")
MIXED = [SI8_F32, SI8_BF16, UI16_F32, F32_C64]
MIXED_IDS = ["si8-f32", "si8-bf16", "ui16-f32", "f32-c64"]


class WrapsAtOperandType(Planted):
    """Integer operands: the sum wrapped at the operands' width (the spec's reduce read
    literally), then converted to the float result."""

    def compile(self, sig):
        from conformance.oracles._kernels import wrap
        a = sig.attributes
        dims = [a[k] for k in ("lhs_batching_dimensions", "rhs_batching_dimensions",
                               "lhs_contracting_dimensions", "rhs_contracting_dimensions")]
        et, rt = sig.input_types[0].element_type, sig.result_types[0].element_type

        def run(inputs):
            wide = contraction.contract(*(np.asarray(x) for x in inputs), *dims)
            return [round_to(wrap(wide, et, wide.shape).astype(np.float64), rt)]
        return run


@pytest.mark.parametrize("sig", MIXED, ids=MIXED_IDS)
def test_results_of_another_kind_pass_in_any_order_and_reading(sig):
    et, rt = sig.input_types[0].element_type, sig.result_types[0].element_type
    acc = rt.component.name
    backends = [Planted(name="oracle"), Planted(acc=acc, name="at-R"),
                Planted(acc=acc, reverse=True, name="at-R-reversed"),
                Planted(acc="f64", name="f64")]
    if et.is_integer:
        backends.append(WrapsAtOperandType(name="wrapped"))
    for backend in backends:
        assert set(classes(backend, sig, batches=3)) <= {"pass"}, backend.name


def test_integer_to_float_reads_the_exact_sum_or_the_wrapped_one():
    """100·2 + 100·1 + 27·3 = 381: f32 gives 381 (XLA; no wrap at si8), bf16 380 (381
    rounded); the sum wrapped at si8 (125) is the allowed alternative."""
    a = np.array([[100, 100, 27]], np.int8)
    b = np.array([[2], [1], [3]], np.int8)
    for rt, want in (("f32", 381.0), ("bf16", 380.0)):
        sig = dg_sig((1, 3), (3, 1), "si8", [], [], [1], [0], rt=rt)
        (r,) = oracles.evaluate("dot_general", [a, b], sig.attributes,
                                result_types=sig.result_types)
        assert float(r[0, 0]) == want
        masks = oracles.implementation_defined(sig, [a[None], b[None]], SPEC, [r[None]])
        assert masks["integer_result_type"].all()
        (alt,) = masks.alternatives("integer_result_type")["at_operand_type"]
        assert float(np.asarray(alt[0]).reshape(-1)[0]) == 125.0
    sig = dg_sig((1, 2), (2, 1), "f32", [], [], [1], [0], rt="complex<f32>")
    (r,) = oracles.evaluate("dot_general", [np.array([[1.5, 2.25]], np.float32),
                                            np.array([[1.0], [1.0]], np.float32)],
                            sig.attributes, result_types=sig.result_types)
    assert r[0, 0] == 3.75 and not np.signbit(r[0, 0].imag)


@pytest.mark.parametrize("sig", MIXED, ids=MIXED_IDS)
def test_results_of_another_kind_catch_bugs(sig):
    """Accumulating in fp8 under HIGHEST, a wrong transposition, and (real -> complex)
    an imaginary part that is not zero all fail."""
    low = classes(Planted(acc="f8E5M2", name="low"), sig, batches=2)
    assert low.get("bound", 0) + low.get("value", 0) > 0, low
    bad = classes(Planted(bug=_swap_rhs_free, name="swapped"), sig, batches=2)
    assert bad.get("bound", 0) + bad.get("value", 0) > 0, bad
    if sig.result_types[0].element_type.is_complex:
        class ImagToo(Planted):
            def compile(self, s):
                inner = super().compile(s)

                def run(inputs):
                    (out,) = inner(inputs)
                    return [(out.real + 1j * out.real).astype(out.dtype)]
                return run
        wrong = classes(ImagToo(name="imag"), sig, batches=2)
        assert wrong.get("bound", 0) + wrong.get("value", 0) > 0, wrong


class Gauss(Planted):
    """Complex products in Gauss's three-multiplication form (XLA on CPU gives such
    results), each real dot product summed left to right at the component type:
    re = Σ ar·br − Σ ai·bi, im = Σ (ar + ai)(br + bi) − Σ ar·br − Σ ai·bi (``bug``:
    re = Σ ar·br + Σ ai·bi, a sign error)."""

    def __init__(self, sign_bug=False, name="gauss"):
        super().__init__(name=name)
        self.sign_bug = sign_bug

    def compile(self, sig):
        a = sig.attributes
        dims = [a[k] for k in ("lhs_batching_dimensions", "rhs_batching_dimensions",
                               "lhs_contracting_dimensions", "rhs_contracting_dimensions")]
        (rt,) = sig.result_types
        comp = sig.input_types[0].element_type.component
        rnd = lambda v: round_to(v, comp).astype(np.float64)       # noqa: E731

        def dot(x, y):
            acc = np.zeros(x.shape[:-1] + (y.shape[-1],))
            for k in range(x.shape[-1]):
                acc = rnd(acc + rnd(x[..., :, k, None] * y[..., None, k, :]))
            return acc

        def run(inputs):
            lhs, rhs = (np.asarray(x) for x in inputs)
            lay = contraction.Layout(lhs.shape, rhs.shape, *dims)
            x, y = lay.operands(lhs.astype(np.complex128), rhs.astype(np.complex128))
            with np.errstate(all="ignore"):
                p1, p2 = dot(x.real, y.real), dot(x.imag, y.imag)
                p3 = dot(rnd(x.real + x.imag), rnd(y.real + y.imag))
                re = rnd(p1 + p2) if self.sign_bug else rnd(p1 - p2)
                out = re + 1j * rnd(rnd(p3 - p1) - p2)
            return [round_to(lay.result(out), rt.element_type).reshape(rt.shape)]
        return run


def test_a_three_multiplication_complex_product_passes():
    """(2277 + 2036i)(2067 + 2014i): |a||b| is below 2^24, so the four-product form is
    exact in complex<f32>, but Gauss's (ar + ai)(br + bi) = 4313·4081 is not: its
    imaginary part comes out 8794289 for 8794290. Such elements get the bound, not 0."""
    sig = dg_sig((1, 1), (1, 1), "complex<f32>", [], [], [1], [0])
    a = np.array([[[2277 + 2036j]]], np.complex64)
    b = np.array([[[2067 + 2014j]]], np.complex64)
    (got,) = Gauss().compile(sig)([a[0], b[0]])
    assert got[0, 0] == 606055 + 8794289j
    assert set(classes(Gauss(), sig, batches=1, inputs=[a, b])) == {"pass"}
    c128 = dg_sig((3, 24), (24, 2), "complex<f64>", [], [], [1], [0])
    for s in (C64, c128):
        assert set(classes(Gauss(), s, batches=3)) <= {"pass"}
        bad = classes(Gauss(sign_bug=True, name="gauss-sign"), s, batches=2)
        assert bad.get("bound", 0) + bad.get("value", 0) > 0, bad


def test_real_operands_with_a_complex_result_allow_either_imaginary_zero_and_a_nan_beside_inf():
    """XLA converts the operands first: (-2.7 + 0i)(-1.3 + 0i) has the imaginary part
    -2.7·0 + 0·-1.3 = -0 (convert's +0 and that -0 both pass), and -inf·(-919.5 + 0i)
    has a NaN one (complex arithmetic meeting an infinity is open: out_of_range)."""
    sig = dg_sig((1, 1), (1, 1), "f32", [], [], [1], [0], rt="complex<f32>")
    a, b = np.array([[[-2.7178085]]], np.float32), np.array([[[-1.3475496]]], np.float32)
    (e,) = oracles.evaluate_batch(sig, [a, b], SPEC)
    assert not np.signbit(e[0, 0, 0].imag)
    neg = np.array([[complex(e[0, 0, 0].real, -0.0)]], np.complex64)
    assert set(classes(_Fixed(neg), sig, batches=1, inputs=[a, b])) == {"pass"}
    off = np.array([[complex(e[0, 0, 0].real, 2 ** -20)]], np.complex64)
    assert set(classes(_Fixed(off), sig, batches=1, inputs=[a, b])) - {"pass"}
    a, b = np.array([[[-np.inf]]], np.float32), np.array([[[-919.5]]], np.float32)
    nan = np.array([[complex(np.inf, np.nan)]], np.complex64)
    assert set(classes(_Fixed(nan), sig, batches=1, inputs=[a, b])) == {"pass"}


# ---------------------------------------------------------------------------
# A bf16 pass at the top of the range (issue 32 item 4): DEFAULT precision may read an
# f32 operand above bf16's largest finite value as an infinity
# ---------------------------------------------------------------------------

class _Bf16Pass(Backend):
    """DEFAULT f32 as some accelerators compute it: the operands rounded to bf16 (an
    f32 beyond 3.3961e38 becomes an infinity), products and sums in f32; ``bug``
    changes the result afterwards."""

    isolate = False

    def __init__(self, bug=None, name="bf16-pass"):
        self.bug, self.name = bug, name
        super().__init__()

    def compile(self, sig):
        from conformance.checking.verdicts.contraction import bf16_operands
        a = sig.attributes
        dims = [a[k] for k in ("lhs_batching_dimensions", "rhs_batching_dimensions",
                               "lhs_contracting_dimensions", "rhs_contracting_dimensions")]
        (rt,) = sig.result_types

        def run(inputs):
            lhs, rhs = (bf16_operands(np.asarray(x)) for x in inputs)
            with np.errstate(all="ignore"):
                out = contraction.to_result(contraction.contract(lhs, rhs, *dims), rt)
            return [self.bug(out) if self.bug else out]
        return run


def _top_of_range(precision):
    sig = dg_sig((2, 2), (2, 1), "f32", [], [], [1], [0], precision)
    big = np.float32(3.4e38)            # above bf16's largest finite value: inf in bf16
    lhs = np.array([[[big, 1.0], [big, big]]], np.float32)
    rhs = np.array([[[0.5], [-1.0]]], np.float32)
    # row 0: 1.7e38 - 1 (finite; the bf16 pass: inf); row 1: 1.7e38 - 3.4e38 = -1.7e38
    # (finite; the bf16 pass: inf - inf = NaN)
    return sig, [lhs, rhs]


def test_default_precision_through_bf16_at_the_top_of_the_range_is_precision():
    sig, stacked = _top_of_range(("DEFAULT", "DEFAULT"))
    expected = oracles.evaluate_batch(sig, stacked, SPEC)[0]
    assert np.isfinite(expected).all()
    got = _Bf16Pass().compile(sig)([x[0] for x in stacked])[0]
    assert np.isinf(got[0, 0]) and np.isnan(got[1, 0])
    counts = classes(_Bf16Pass(), sig, batches=1, inputs=stacked)
    assert counts == {"precision": 1}, counts


def test_overflow_that_no_bf16_pass_gives_stays_a_divergence():
    # HIGHEST: no reduced precision at all
    sig, stacked = _top_of_range(("HIGHEST", "HIGHEST"))
    counts = classes(_Bf16Pass(), sig, batches=1, inputs=stacked)
    assert counts.get("value", 0) + counts.get("nan", 0) == 1, counts
    # DEFAULT, but the infinity has the wrong sign
    sig, stacked = _top_of_range(("DEFAULT", "DEFAULT"))
    counts = classes(_Bf16Pass(bug=lambda o: -o, name="negated"), sig, batches=1,
                     inputs=stacked)
    assert "precision" not in counts and counts.get("value", 0) == 1, counts
    # DEFAULT, an operand that bf16 holds (3.0e38 rounds to 2.99e38): an infinity is wrong
    lhs = np.array([[[3.0e38, 1.0], [1.0, 1.0]]], np.float32)
    stacked = [lhs, stacked[1]]

    def overflow(o):
        o = o.copy()
        o[0, 0] = np.float32(np.inf)
        return o
    counts = classes(_Bf16Pass(bug=overflow, name="overflow"), sig, batches=1, inputs=stacked)
    assert "precision" not in counts and counts.get("value", 0) == 1, counts


def test_only_f32_operands_are_read_as_a_bf16_pass_reads_them():
    from conformance.checking.verdicts.contraction import bf16_operands
    assert np.isinf(bf16_operands(np.array([3.4e38], np.float32))).all()
    assert bf16_operands(np.array([3.0e38], np.float32))[0] == np.float32(
        ml_dtypes.bfloat16(3.0e38))
    c = bf16_operands(np.array([3.4e38 + 1j], np.complex64))
    assert np.isinf(c.real).all() and c.imag[0] == 1
    # f64 (and f16, integers) unchanged: no backend reads f64 DEFAULT through bf16, and an
    # f64 NaN bug beside a huge operand must stay nan
    for x in (np.array([1e300, 1 + 2 ** -40]), np.array([3.4e38 + 0j]),
              np.array([65504.0], np.float16), np.array([7], np.int32)):
        assert np.array_equal(bf16_operands(x), x)
