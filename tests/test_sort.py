"""sort: the oracle against independent formulations (Python's stable sorted() with the
comparator as a cmp function; numpy's stable sort for "NaN last"; the spec's total order
written out), stability and its absence (equal keys checked as a permutation), a
comparator that is no strict weak order (masked), the jax mapping recognising exactly
jax's comparators, keyword-named ops in regions, and negative cases."""
import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conformance.checking import golden

from conformance import oracles
from conformance.oracles import regions as oracle_regions
from conformance.specs import regions
from conformance.backends import Unsupported, get_backend
from conformance.backends.jax_ops import jax_function
from conformance.backends.jax_ops_sorting import jax_keys
from conformance.backends.numpy_backend import InvalidProgram
from conformance.core.case import Case, Signature
from conformance.checking.compare import PASS, compare_batch, permuted_within_groups
from conformance.mlir.emitter import block_text, verify
from conformance.generators import (batch_inputs, breakable, candidates, canonical, cases,
                                    signatures)
from conformance.core.literals import from_literal
from conformance.specs import Accuracy, load_spec
from conformance.specs.validity import violations

SPEC = load_spec("sort")
SETTINGS = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))
LT_TOTAL = "(f32, f32) -> compare(arg0, arg1, 'LT', 'TOTALORDER')"
NANLAST = ("(f32, f32) -> or(compare(arg0, arg1, 'LT', 'FLOAT'), and(compare(arg1, arg1, "
           "'NE', 'FLOAT'), compare(arg0, arg0, 'EQ', 'FLOAT')))")


def _bytes(x):
    x = np.asarray(x, order="C")
    return x.reshape(-1).view(np.uint8).reshape(x.shape + (x.dtype.itemsize,))


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(_bytes(a), _bytes(b))


def sig_of(types, shape, comparator, dimension=0, stable=True):
    ts = [f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{t}>" for t in types]
    return Signature.make("sort", ts, ts, {"dimension": dimension, "is_stable": stable},
                          regions=(comparator,))


def run_oracle(sig, inputs):
    return oracles.evaluate(sig.op, inputs, sig.attributes, result_types=sig.result_types,
                            regions=sig.regions)


# ---------------------------------------------------------------------------
# An independent reference: Python's stable sort with the comparator as cmp
# ---------------------------------------------------------------------------

def ref_sort(comparator, inputs, dimension):
    """Slice by slice, sorted() (stable) over element tuples, comparing two elements by
    evaluating the comparator on them as scalars. Valid for strict weak orders only."""
    d = dimension % inputs[0].ndim
    moved = [np.moveaxis(x, d, -1) for x in inputs]
    out = [np.empty_like(x) for x in moved]

    def less(a, b):
        args = [np.asarray(v) for pair in zip(a, b) for v in pair]
        return bool(oracle_regions.evaluate(comparator, args)[0])

    def cmp(i, j):
        return -1 if less(i[1], j[1]) else (1 if less(j[1], i[1]) else 0)

    for idx in np.ndindex(*moved[0].shape[:-1]):
        elems = list(enumerate(zip(*(x[idx] for x in moved))))
        order = [i for i, _ in sorted(elems, key=functools.cmp_to_key(cmp))]
        for x, o in zip(moved, out):
            o[idx] = x[idx][order]
    return [np.moveaxis(o, -1, d) for o in out]


def _strict_weak_everywhere(case):
    stacked = [x[None] for x in case.inputs]
    masks = oracles.implementation_defined(case.signature, stacked, SPEC)
    return "comparator_not_a_strict_weak_order" not in masks


@SETTINGS
@given(cases("sort", profile="quick"))
def test_oracle_matches_a_stable_python_sort(case):
    sig = case.signature
    got = run_oracle(sig, case.inputs)
    if not _strict_weak_everywhere(case):
        return
    want = ref_sort(sig.regions[0], case.inputs, sig.attributes["dimension"])
    for g, w in zip(got, want):
        assert _same_bits(g, w), sig.key()


def test_nan_last_is_numpys_order():
    """The "NaN last" comparator (compare FLOAT, and, or) sorts as numpy's stable sort:
    ±0 equal, every NaN after every number, equal elements in their order."""
    rng = np.random.default_rng(0)
    from conformance.generators import draw_array
    for et, dtype in (("f32", np.float32), ("f64", np.float64), ("f16", np.float16)):
        x = draw_array(et, (50, 9), rng, "repeated")
        sig = sig_of([et], [50, 9], NANLAST.replace("f32", et), dimension=1)
        (got,) = run_oracle(sig, [x])
        assert _same_bits(got, np.sort(x, axis=1, kind="stable"))


def test_total_order_of_the_spec():
    """-NaN < -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN, NaNs by payload."""
    order = ["0xFFC00001", "0xFFC00000", "0xFF800000", "-1.0", "-1e-45", "-0.0", "0.0",
             "1e-45", "1.0", "0x7F800000", "0x7F800001", "0x7FC00000"]
    want = from_literal(order, "tensor<12xf32>")
    x = want[np.random.default_rng(1).permutation(12)]
    (got,) = run_oracle(sig_of(["f32"], [12], LT_TOTAL), [x])
    assert _same_bits(got, want)
    gt = LT_TOTAL.replace("'LT'", "'GT'")
    (got,) = run_oracle(sig_of(["f32"], [12], gt), [x])
    assert _same_bits(got, want[::-1])


def test_stable_sort_keeps_equal_keys_in_order_on_any_dimension():
    keys = np.array([[2, 1, 2, 1], [1, 1, 1, 1]], np.int8)
    vals = np.arange(8, dtype=np.int8).reshape(2, 4)
    cmp = "(si8, si8, si8, si8) -> compare(arg0, arg1, 'LT', 'SIGNED')"
    for dimension in (1, -1):
        k, v = run_oracle(sig_of(["si8", "si8"], [2, 4], cmp, dimension), [keys, vals])
        assert k.tolist() == [[1, 1, 2, 2], [1, 1, 1, 1]]
        assert v.tolist() == [[1, 3, 0, 2], [4, 5, 6, 7]]
    k, v = run_oracle(sig_of(["si8", "si8"], [2, 4], cmp, -2), [keys, vals])
    assert k.tolist() == [[1, 1, 1, 1], [2, 1, 2, 1]] and v.tolist() == [[4, 1, 6, 3],
                                                                         [0, 5, 2, 7]]


def test_multi_key_lexicographic_and_zero_sized():
    cmp = ("(ui8, ui8, f32, f32) -> or(compare(arg0, arg1, 'GT', 'UNSIGNED'), "
           "and(compare(arg0, arg1, 'EQ', 'UNSIGNED'), compare(arg2, arg3, 'LT', 'TOTALORDER')))")
    a = np.array([1, 2, 1, 2, 1], np.uint8)
    b = np.array([0.0, 3.0, -0.0, 1.0, np.nan], np.float32)
    x, y = run_oracle(sig_of(["ui8", "f32"], [5], cmp), [a, b])
    assert x.tolist() == [2, 2, 1, 1, 1]
    assert _same_bits(y, np.array([1.0, 3.0, -0.0, 0.0, np.nan], np.float32))
    for shape in ([0], [3, 0], [0, 2]):
        z = [np.zeros(shape, np.uint8), np.zeros(shape, np.float32)]
        out = run_oracle(sig_of(["ui8", "f32"], shape, cmp, -1), z)
        assert [o.shape for o in out] == [tuple(shape)] * 2


# ---------------------------------------------------------------------------
# Implementation-defined: unstable order of equal keys, no strict weak order
# ---------------------------------------------------------------------------

def _verdict(sig, inputs, actual):
    stacked = [x[None] for x in inputs]
    expected = oracles.evaluate_batch(sig, stacked, SPEC)
    masks = oracles.implementation_defined(sig, stacked, SPEC, expected)
    return compare_batch(expected, [a[None] for a in actual], SPEC.signature_accuracy(sig),
                         masks), masks


def test_unstable_sort_checks_equal_keys_as_a_permutation():
    cmp = "(si8, si8, f32, f32) -> compare(arg0, arg1, 'LT', 'SIGNED')"
    keys = np.array([3, 1, 3, 1, 2], np.int8)
    vals = np.array([0.0, 1.0, 2.0, -0.0, 4.0], np.float32)
    sig = sig_of(["si8", "f32"], [5], cmp, stable=False)
    swapped = [np.array([1, 1, 2, 3, 3], np.int8),
               np.array([-0.0, 1.0, 4.0, 2.0, 0.0], np.float32)]     # ties reversed
    verdict, masks = _verdict(sig, [keys, vals], swapped)
    assert masks["order_of_equal_elements"].tolist() == [[1, 1, 0, 4, 4]]
    assert verdict.counts() == {"pass": 1}
    assert verdict.impl_defined["order_of_equal_elements"] == {"elements": 8, "conventional": 4}
    # A value that is not among the tied ones is caught (the multiset differs) ...
    wrong = [swapped[0], np.array([-0.0, 1.0, 4.0, 2.0, 2.0], np.float32)]
    assert _verdict(sig, [keys, vals], wrong)[0].counts() == {"value": 1}
    # ... and so is a stable sort's reordering when it was asked for.
    stable = sig_of(["si8", "f32"], [5], cmp, stable=True)
    verdict, masks = _verdict(stable, [keys, vals], swapped)
    assert masks == {} and verdict.counts() == {"value": 1}


def test_permuted_within_groups_moves_whole_tuples():
    a = np.array([[1, 2, 3, 4]], np.int8)
    b = np.array([[10, 20, 30, 40]], np.int16)
    labels = np.array([[0, 7, 0, 7]])
    x, y = permuted_within_groups([a[:, [0, 3, 2, 1]], b[:, [0, 3, 2, 1]]], labels)
    assert x.tolist() == a.tolist() and y.tolist() == b.tolist()


def test_a_comparator_that_is_no_strict_weak_order_allows_any_permutation_of_the_slice():
    cmp = "(f32, f32) -> compare(arg0, arg1, 'LT', 'FLOAT')"
    x = np.array([[2.0, np.nan, 1.0], [2.0, 0.0, 1.0]], np.float32)
    sig = sig_of(["f32"], [2, 3], cmp, dimension=1)
    verdict, masks = _verdict(sig, [x], [x])
    labels = masks["comparator_not_a_strict_weak_order"]
    assert len(set(labels[0, 0].tolist())) == 1 and (labels[0, 0] > 0).all()
    assert (labels[0, 1] == 0).all()            # a strict weak order on the second row
    assert verdict.counts() == {"value": 1}     # the second row is unsorted: still caught
    (sorted_rows,) = run_oracle(sig, [x])
    assert _verdict(sig, [x], [np.array([x[0], sorted_rows[1]])])[0].counts() == {"pass": 1}
    # any order of the first row's values passes; other values do not (sort only moves)
    shuffled = np.array([[[np.nan, 1.0, 2.0], sorted_rows[1]]], np.float32)[0]
    assert _verdict(sig, [x], [shuffled])[0].counts() == {"pass": 1}
    lost_nan = np.array([[2.0, 2.0, 1.0], sorted_rows[1]], np.float32)
    assert _verdict(sig, [x], [lost_nan])[0].counts() == {"value": 1}


# ---------------------------------------------------------------------------
# Spec plumbing: generated signatures, negative cases, examples
# ---------------------------------------------------------------------------

def test_generated_signatures_cover_the_spec():
    seen = {"ranks": set(), "n": set(), "stable": set(), "kinds": set(), "negative_dim": False,
            "zero_sized": False, "mixed_types": False}

    @SETTINGS
    @given(signatures("sort", profile="quick"))
    def check(sig):
        assert violations(sig, SPEC) == [], sig.key()
        t0 = sig.input_types[0]
        seen["ranks"].add(t0.rank)
        seen["n"].add(len(sig.input_types))
        seen["stable"].add(sig.attributes["is_stable"])
        seen["negative_dim"] |= sig.attributes["dimension"] < 0
        seen["zero_sized"] |= 0 in t0.shape
        seen["mixed_types"] |= len({t.element_type for t in sig.input_types}) > 1
        for kind in ("TOTALORDER", "FLOAT", "SIGNED", "UNSIGNED", "'GT'", "'LT'"):
            if kind in sig.regions[0]:
                seen["kinds"].add(kind)

    check()
    assert seen["ranks"] >= {1, 2, 3} and seen["n"] == {1, 2, 3}
    assert seen["stable"] == {False, True} and seen["negative_dim"] and seen["mixed_types"]
    assert seen["kinds"] >= {"TOTALORDER", "FLOAT", "'GT'", "'LT'"}


def test_rank_0_is_not_sortable_and_rank_4_is():
    for binding in ({"E": "f32"}, {"E": "si4"}):
        assert violations(canonical(SPEC, binding, (2, 1, 2, 3))) == []
        sig = canonical(SPEC, binding, ())
        assert sig.input_types[0].rank == 1
    rank0 = Signature.make("sort", ["tensor<f32>"], ["tensor<f32>"],
                           {"dimension": 0, "is_stable": True}, regions=(LT_TOTAL,))
    assert violations(rank0) == ["C4"]


@pytest.mark.parametrize("rule", ["C1", "C2", "C3", "C4", "C5"])
def test_every_constraint_breaks_alone_and_the_oracle_backend_rejects_it(rule):
    assert rule in breakable(SPEC)
    numpy = get_backend("numpy")
    found = candidates(SPEC, canonical(SPEC, {"E": "bf16"}, (3,)), rule)
    assert found
    for bad in found[:10]:
        assert violations(bad, SPEC) == [rule], bad.key()
        with pytest.raises(InvalidProgram):
            numpy.compile(bad)


def test_spec_examples_pass_on_the_oracle_and_print():
    for ex in golden.examples(SPEC):
        assert golden.mismatch(ex, oracles.evaluate_case(ex.case)) is None, ex.name
        verify(ex.case.signature)


# ---------------------------------------------------------------------------
# Regions: ops named like Python keywords
# ---------------------------------------------------------------------------

def test_keyword_named_ops_parse_evaluate_print_and_run_on_jax():
    text = "(i1, i1) -> or(and(arg0, arg1), not(arg0))"
    r = regions.parse(text)
    assert [n.op for n in r.results] == ["or"] and r.results[0].operands[1].op == "not"
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert oracle_regions.evaluate(text, [a, b])[0].tolist() == [True, False, True, True]
    block = block_text(text, "r0_")
    assert '"stablehlo.not"' in block and '"stablehlo.and"' in block
    import jax
    f = jax.jit(jax_function(text))
    assert [bool(f(x, y)[0]) for x, y in zip(a, b)] == [True, False, True, True]


# ---------------------------------------------------------------------------
# jax: exactly jax's comparators are mapped
# ---------------------------------------------------------------------------

def test_jax_recognises_its_own_comparators_and_refuses_others():
    nanlast_gt = NANLAST.replace("'LT'", "'GT'")
    assert jax_keys(sig_of(["f32"], [3], NANLAST)) == [(0, "nanlast", False)]
    assert jax_keys(sig_of(["f32"], [3], nanlast_gt)) == [(0, "nanlast", True)]
    assert jax_keys(sig_of(["f32"], [3], LT_TOTAL)) == [(0, "total", False)]
    spec_example = "(si32, si32, si32, si32) -> compare(arg0, arg1, 'GT')"
    assert jax_keys(sig_of(["si32", "si32"], [3], spec_example)) == [(0, "int", True)]
    two = ("(si8, si8, f32, f32) -> or(compare(arg2, arg3, 'LT', 'TOTALORDER'), "
           "and(compare(arg2, arg3, 'EQ', 'TOTALORDER'), compare(arg0, arg1, 'GT', 'SIGNED')))")
    assert jax_keys(sig_of(["si8", "f32"], [3], two)) == [(1, "total", False), (0, "int", True)]
    for text in ("(f32, f32) -> compare(arg0, arg1, 'LT', 'FLOAT')",
                 "(f32, f32) -> compare(arg0, arg1, 'LE', 'TOTALORDER')",
                 "(f32, f32) -> compare(arg1, arg0, 'LT', 'TOTALORDER')",
                 "(complex<f32>, complex<f32>) -> compare(arg0, arg1, 'LT', 'FLOAT')"):
        types = [regions.parse(text).arg_types[0].name]
        with pytest.raises(Unsupported):
            jax_keys(sig_of(types, [3], text))


@pytest.mark.parametrize("et", ["i1", "si8", "ui4", "f8E5M2", "bf16", "f64", "complex<f32>"])
def test_jax_agrees_with_the_oracle(et):
    jax = get_backend("jax")
    checked = 0
    rng = np.random.default_rng(3)

    @settings(max_examples=12, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(signatures("sort", {"E": et}, "quick"))
    def check(sig):
        nonlocal checked
        try:
            run = jax.batch_executable(sig)
        except Unsupported:
            return
        stacked = batch_inputs(sig, rng, 8, SPEC)
        expected = oracles.evaluate_batch(sig, stacked, SPEC)
        masks = oracles.implementation_defined(sig, stacked, SPEC, expected)
        # NaN payloads aside (XLA on CPU quiets or canonicalises some of the NaNs that
        # sort moves: a divergence the conformance run reports), jax orders as the oracle.
        verdict = compare_batch(expected, run(stacked), Accuracy("exact"), masks)
        assert (verdict.case_classes == PASS).all(), (sig.key(), verdict.counts())
        checked += 1

    check()
    assert checked

