"""reduce (and the other reductions): the oracle against a naive fold, the verdicts
against backends that evaluate another legal tree (must pass) or a wrong result that no
tree gives (must fail), the exact-value inputs, the identity search, and the masks.

The planted backends run the body element by element through the region evaluator,
over every result element at once, with the tree they are told: a left fold with the
init value first, a right fold (``body(x0, body(x1, ... body(x_last, init)))``), the init
value twice or not at all, a pairwise tree at the result type, and the leaves reversed
(no tree of the spec's, but the same values for a commutative body, and within the same
rounding bound for a float sum)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.checking.compare import PASS
from conformance.core.case import Case, Signature
from conformance.core.types import element_type
from conformance.generators.reduction import exact_values, identity
from conformance.oracles import reduction
from conformance.oracles import regions as region_eval
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations
from conformance.checking.verdicts import BOUNDS, Judgement


# ---------------------------------------------------------------------------
# Planted backends: another tree, or a wrong result
# ---------------------------------------------------------------------------

def fold(body: str, leaves: list[np.ndarray], inits: list[np.ndarray], order: str,
         init_count: int = 1) -> list[np.ndarray]:
    """``body`` over the last axis of ``leaves`` (one array per result) in the tree
    ``order`` names, vectorised over the result elements; at the body's own types."""
    m = leaves[0].shape[-1]
    shape = leaves[0].shape[:-1]
    acc = [np.broadcast_to(e, shape).astype(x.dtype) for e, x in zip(inits, leaves)]
    idx = list(range(m))
    if order == "pairwise":
        cols = [np.concatenate([a[..., None], x], axis=-1) for a, x in zip(acc, leaves)]
        while cols[0].shape[-1] > 1:
            h = cols[0].shape[-1] // 2
            left = [np.ascontiguousarray(c[..., 0:2 * h:2]) for c in cols]
            right = [np.ascontiguousarray(c[..., 1:2 * h:2]) for c in cols]
            new = [np.asarray(r).astype(c.dtype).reshape(l.shape) for r, c, l in
                   zip(region_eval.evaluate(body, left + right), cols, left)]
            if cols[0].shape[-1] % 2:
                new = [np.concatenate([n, c[..., -1:]], axis=-1) for n, c in zip(new, cols)]
            cols = new
        out = [c[..., 0] for c in cols]
        for _ in range(init_count - 1):
            out = list(region_eval.evaluate(body, [np.broadcast_to(e, shape).astype(o.dtype)
                                                   for e, o in zip(inits, out)] + out))
        return [np.asarray(o) for o in out]
    if order in ("reversed", "right"):
        idx = idx[::-1]
    if init_count == 0 and m:       # no init value: the first leaf starts the fold
        first = idx[0]
        acc = [np.ascontiguousarray(x[..., first]) for x in leaves]
        idx = [i for i in idx if i != first]
    for _ in range(init_count - 1):
        acc = region_eval.evaluate(body, acc + [np.broadcast_to(e, shape).astype(x.dtype)
                                                for e, x in zip(inits, leaves)])
    for i in idx:
        col = [np.ascontiguousarray(x[..., i]) for x in leaves]
        if order == "right":
            acc = region_eval.evaluate(body, col + list(acc))
        else:
            acc = region_eval.evaluate(body, list(acc) + col)
    return [np.asarray(a).astype(x.dtype).reshape(shape) for a, x in zip(acc, leaves)]


class TreeBackend(Backend):
    """A reduction evaluated with the tree ``order``, ``init_count`` init values; ``wrong``
    (a function of (results, leaves) -> results) plants a bug."""

    isolate = False

    def __init__(self, order="left", init_count=1, wrong=None, name="tree"):
        self.order, self.init_count, self.wrong, self.name = order, init_count, wrong, name
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        n = len(sig.result_types)
        (body,) = sig.regions

        def run(inputs):
            xs, es = [np.asarray(x) for x in inputs[:n]], [np.asarray(e) for e in inputs[n:]]
            g = reduction.geometry(sig.op, xs[0].shape, sig.attributes)
            leaves = [g.leaves(x, e) for x, e in zip(xs, es)]
            with np.errstate(all="ignore"):
                out = fold(body, leaves, es, self.order, self.init_count)
                if self.wrong is not None:
                    out = self.wrong(out, leaves)
            return [np.asarray(o).astype(t.element_type.dtype).reshape(t.shape)
                    for o, t in zip(out, sig.result_types)]
        return run


def classes(backend, sig, batches=3, key=None) -> dict[str, int]:
    spec = load_spec(sig.op)
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    assert not check.failed and not check.unsupported, (check.failed, check.unsupported)
    counts: dict[str, int] = {}
    for b in range(batches):
        batch = check.run_batch(b, batch_for(0, "default", spec, key or
                                             sig.input_types[0].element_type.name, 0, b, sig))
        for cls, n in batch.results[backend.name].verdict.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


def reduce_sig(shape, et, body, dims, n=1):
    types = [f"tensor<{'x'.join(map(str, shape))}x{et}>" if shape else f"tensor<{et}>"] * n
    out_shape = [d for i, d in enumerate(shape) if i not in dims]
    out = [f"tensor<{'x'.join(map(str, out_shape))}x{et}>" if out_shape else f"tensor<{et}>"] * n
    return Signature.make("reduce", types + [f"tensor<{et}>"] * n, out,
                          {"dimensions": list(dims)}, regions=(f"({', '.join([et] * 2 * n)}) "
                                                               f"-> {body}",))


F32_SUM = reduce_sig((4, 16), "f32", "add(arg0, arg1)", [1])
BF16_SUM = reduce_sig((3, 12), "bf16", "add(arg0, arg1)", [1])
F8_SUM = reduce_sig((3, 6), "f8E4M3FN", "add(arg1, arg0)", [1])
F32_PRODUCT = reduce_sig((4, 6), "f32", "multiply(arg0, arg1)", [1])
F32_MAX = reduce_sig((4, 3, 5), "f32", "maximum(arg0, arg1)", [2, 0])
SI8_SUM = reduce_sig((5, 7), "si8", "add(arg0, arg1)", [0])
SI32_XOR = reduce_sig((2, 3, 4), "si32", "xor(arg0, arg1)", [0, 2])
F32_SUBTRACT = reduce_sig((3, 5), "f32", "subtract(arg0, arg1)", [1])

ARGMAX = Signature.make(
    "reduce", ["tensor<4x6xf32>", "tensor<4x6xsi32>", "tensor<f32>", "tensor<si32>"],
    ["tensor<4xf32>", "tensor<4xsi32>"], {"dimensions": [1]},
    regions=("(f32, si32, f32, si32) -> (select(or(compare(arg0, arg2, 'GT', 'TOTALORDER'), "
             "and(compare(arg0, arg2, 'EQ', 'TOTALORDER'), compare(arg1, arg3, 'LT', 'SIGNED'))"
             "), arg0, arg2), select(or(compare(arg0, arg2, 'GT', 'TOTALORDER'), and(compare("
             "arg0, arg2, 'EQ', 'TOTALORDER'), compare(arg1, arg3, 'LT', 'SIGNED'))), arg1, "
             "arg3))",))

LEGAL_ORDERS = ["left", "right", "reversed", "pairwise"]


def _one_ulp_up(out, leaves):
    """The first result one unit in the last place away from zero (integers: plus one)."""
    from conformance.core.literals import bit_patterns, from_bit_patterns
    o = out[0]
    et = element_type(o.dtype)
    if not et.is_float:
        return [(o.astype(np.int64) + 1).astype(o.dtype)] + out[1:]
    w = o.astype(np.float64)
    bumped = from_bit_patterns(bit_patterns(o) + np.uint64(1), et).reshape(o.shape)
    ok = np.isfinite(w) & (w != 0) & np.isfinite(bumped.astype(np.float64))
    return [np.where(ok, bumped, o).astype(o.dtype)] + out[1:]


class DropLastLeaf(TreeBackend):
    """Forgets the last leaf of every slice (a loop bound off by one)."""

    def compile(self, sig):
        super().compile(sig)        # refuses invalid programs
        n = len(sig.result_types)
        (body,) = sig.regions

        def dropped(inputs):
            xs, es = [np.asarray(x) for x in inputs[:n]], [np.asarray(e) for e in inputs[n:]]
            g = reduction.geometry(sig.op, xs[0].shape, sig.attributes)
            leaves = [g.leaves(x, e)[..., :-1] for x, e in zip(xs, es)]
            with np.errstate(all="ignore"):
                out = fold(body, leaves, es, "left")
            return [np.asarray(o).astype(t.element_type.dtype).reshape(t.shape)
                    for o, t in zip(out, sig.result_types)]
        return dropped


# ---------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [F32_MAX, SI8_SUM, SI32_XOR, ARGMAX,
                                 reduce_sig((2, 3), "si64", "minimum(arg0, arg1)", [1]),
                                 reduce_sig((0, 3), "ui4", "multiply(arg0, arg1)", [0]),
                                 reduce_sig((2, 3, 2), "i1", "xor(arg0, arg1)", [2, 1])],
                         ids=lambda s: s.regions[0][:40])
def test_oracle_equals_a_left_fold_where_every_tree_agrees(sig):
    spec = load_spec("reduce")
    stacked = batch_for(0, "default", spec, sig.input_types[0].element_type.name, 0, 0, sig)
    expected = oracles.evaluate_batch(sig, stacked, spec)
    backend = TreeBackend("left")
    got = backend.batch_executable(sig)(stacked)
    for e, a in zip(expected, got):
        ew = e.astype(np.complex128 if np.iscomplexobj(e) else np.float64)
        aw = np.asarray(a).astype(ew.dtype)
        same = (e.view(np.uint8) == np.asarray(a).view(np.uint8)).reshape(e.shape + (-1,)).all(-1) \
            | (np.isnan(ew) & np.isnan(aw))
        assert same.all()


def test_oracle_float_sum_is_the_rounded_exact_sum_of_exact_values():
    spec = load_spec("reduce")
    x = np.array([[1.0, 2.0 ** -8, -1.0, 2.0 ** -8, 3.0]], np.float32)
    (r,) = oracles.evaluate("reduce", [x[0], np.array(-0.0, np.float32)], {"dimensions": [0]},
                            result_types=["tensor<f32>"],
                            regions=("(f32, f32) -> add(arg0, arg1)",))
    assert r == np.float32(3.0 + 2 ** -7)
    assert spec.name == "reduce"


def test_oracle_keeps_minus_zero_sums_and_ieee_maximum():
    z = np.array([-0.0, -0.0], np.float32)
    (s,) = oracles.evaluate("reduce", [z, np.array(-0.0, np.float32)], {"dimensions": [0]},
                            result_types=["tensor<f32>"], regions=("(f32, f32) -> add(arg0, arg1)",))
    assert np.signbit(s)
    m = np.array([-0.0, np.nan, 3.0], np.float32)
    (mx,) = oracles.evaluate("reduce", [m, np.array(-np.inf, np.float32)], {"dimensions": [0]},
                             result_types=["tensor<f32>"],
                             regions=("(f32, f32) -> maximum(arg0, arg1)",))
    assert np.isnan(mx)
    (mz,) = oracles.evaluate("reduce", [np.array([-0.0, 0.0], np.float32),
                                        np.array(-np.inf, np.float32)], {"dimensions": [0]},
                             result_types=["tensor<f32>"],
                             regions=("(f32, f32) -> maximum(arg0, arg1)",))
    assert mz == 0 and not np.signbit(mz)


def test_oracle_is_vectorised_over_result_elements():
    """A large reduce runs in one numpy reduction (no per-element Python loop): 2^20
    elements in well under a second."""
    import time
    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    start = time.perf_counter()
    (r,) = oracles.evaluate("reduce", [x, np.array(-0.0, np.float32)], {"dimensions": [1]},
                            result_types=["tensor<1024xf32>"],
                            regions=("(f32, f32) -> add(arg0, arg1)",))
    assert time.perf_counter() - start < 1.0
    np.testing.assert_allclose(r, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-3)


# ---------------------------------------------------------------------------
# Verdicts: each passes another legal tree and fails a wrong result
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("order", LEGAL_ORDERS)
@pytest.mark.parametrize("sig", [F32_SUM, F32_PRODUCT, BF16_SUM, F8_SUM],
                         ids=lambda s: s.input_types[0].element_type.name + "-" +
                         s.regions[0].split("-> ")[1][:3])
def test_bound_passes_every_legal_tree_of_a_float_sum_or_product(sig, order):
    counts = classes(TreeBackend(order), sig)
    assert set(counts) <= {"pass"}, counts


@pytest.mark.parametrize("sig", [F32_SUM, F32_PRODUCT], ids=["sum", "product"])
def test_bound_passes_the_init_value_twice_when_it_is_the_identity(sig):
    assert set(classes(TreeBackend("left", init_count=2), sig)) <= {"pass"}


@pytest.mark.parametrize("sig", [F32_SUM, F32_PRODUCT, BF16_SUM, F8_SUM],
                         ids=lambda s: s.input_types[0].element_type.name + "-" +
                         s.regions[0].split("-> ")[1][:3])
def test_bound_fails_a_dropped_leaf(sig):
    counts = classes(DropLastLeaf(), sig)
    assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts


@pytest.mark.parametrize("sig", [BF16_SUM, F8_SUM, F32_SUM],
                         ids=lambda s: s.input_types[0].element_type.name)
def test_exact_value_inputs_are_checked_bit_for_bit_even_where_the_bound_is_vacuous(sig):
    """One ulp off a sum that every tree gives exactly is wrong: on bf16 and fp8 too,
    whose rounding bound over 12 leaves allows almost anything."""
    counts = classes(TreeBackend("pairwise", wrong=_one_ulp_up), sig)
    assert counts.get("value", 0) > 0, counts
    # ... and the exact cases are there: the reduction bound is 0 for them
    spec = load_spec("reduce")
    stacked = batch_for(0, "default", spec, sig.input_types[0].element_type.name, 0, 0, sig)
    expected = oracles.evaluate_batch(sig, stacked, spec)
    acc = spec.signature_accuracy(sig)
    from conformance.checking.verdicts import check_known
    check_known(acc, "test")
    (limit,) = BOUNDS["reduction"](Judgement(sig, spec, acc, stacked, expected, expected, {}))
    assert (limit == 0).mean() > 0.3


def test_exact_value_rows_make_every_partial_sum_representable():
    spec = load_spec("reduce")
    sig = BF16_SUM
    rng = np.random.default_rng(3)
    x = exact_values(sig, spec, 0, 0, element_type("bf16"), (16, 3, 12), rng, "")
    exact_rows = (np.arange(16) // 2) % 2 == 0
    w = x.astype(np.float64)
    for row in np.nonzero(exact_rows)[0]:
        for r in range(3):
            leaves = w[row, r]
            s = np.abs(leaves).sum()
            g = reduction.granularity(leaves).min()
            if s and s <= 2.0 ** 8 * g:
                # every prefix sum, in bf16, is exact
                assert (np.cumsum(leaves).astype(np.float32).astype(x.dtype).astype(np.float64)
                        == np.cumsum(leaves)).all()


@pytest.mark.parametrize("sig", [F32_MAX, SI8_SUM, SI32_XOR, ARGMAX],
                         ids=["max", "int-sum", "xor", "argmax"])
@pytest.mark.parametrize("order", LEGAL_ORDERS)
def test_exact_bodies_pass_every_legal_tree(sig, order):
    assert set(classes(TreeBackend(order), sig)) <= {"pass"}, order


@pytest.mark.parametrize("sig", [F32_MAX, SI8_SUM, SI32_XOR, ARGMAX],
                         ids=["max", "int-sum", "xor", "argmax"])
def test_exact_bodies_fail_a_wrong_result(sig):
    counts = classes(DropLastLeaf(), sig)
    assert counts.get("value", 0) + counts.get("nan", 0) + counts.get("signed_zero", 0) > 0, \
        counts
    counts = classes(TreeBackend("left", wrong=_one_ulp_up), sig)
    assert counts.get("value", 0) > 0, counts


def test_order_dependent_body_is_masked_but_nan_leaves_are_checked():
    sig = F32_SUBTRACT
    # any tree passes: a right fold of subtract is another value entirely
    assert set(classes(TreeBackend("right"), sig)) <= {"pass"}
    # where a NaN is among the leaves every tree gives NaN: a backend that loses it fails
    def lose_nan(out, leaves):
        return [np.where(np.isnan(out[0]), np.float32(0), out[0])]
    counts = classes(TreeBackend("left", wrong=lose_nan), sig)
    assert counts.get("nan", 0) > 0, counts


def test_init_value_count_is_masked_only_where_it_matters():
    """maximum with init 5 (not its identity): masked where the leaves stay below 5 (no
    init value gives their maximum, one or more give 5), checked where one exceeds it."""
    spec = load_spec("reduce")
    sig = reduce_sig((3, 5), "f32", "maximum(arg0, arg1)", [1])
    x = np.array([[1.0, 9.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0, 4.5],
                  [7.0, 2.0, 3.0, 4.0, 4.5]], np.float32)
    stacked = [x[None], np.array([5.0], np.float32)]
    expected = oracles.evaluate_batch(sig, stacked, spec)
    masks = oracles.implementation_defined(sig, stacked, spec, expected)
    assert masks["init_value_count"].tolist() == [[False, True, False]]
    # a backend that leaves the init value out passes; one wrong where it matters fails
    assert classes_of_one(TreeBackend("left", init_count=0), sig, stacked) == {"pass": 1}
    wrong = TreeBackend("left", init_count=0, wrong=_one_ulp_up, name="wrong")
    assert classes_of_one(wrong, sig, stacked) == {"value": 1}


def test_overflowing_partial_sums_are_masked():
    spec = load_spec("reduce")
    sig = reduce_sig((3,), "f32", "add(arg0, arg1)", [0])
    big = np.finfo(np.float32).max
    stacked = [np.array([[big, big, -big]], np.float32), np.array([-0.0], np.float32)]
    expected = oracles.evaluate_batch(sig, stacked, spec)
    masks = oracles.implementation_defined(sig, stacked, spec, expected)
    assert masks["sum_out_of_range"].all()
    # a left fold overflows to inf, the oracle (float64) gives max: both allowed
    assert set(classes_of_one(TreeBackend("left"), sig, stacked)) == {"pass"}


def classes_of_one(backend, sig, stacked):
    spec = load_spec(sig.op)
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    batch = check.run_batch(0, stacked)
    return batch.results[backend.name].verdict.counts()


MAX_BESIDE_SUBTRACT = Signature.make(
    "reduce", ["tensor<2x4xf32>", "tensor<2x4xf32>", "tensor<f32>", "tensor<f32>"],
    ["tensor<2xf32>", "tensor<2xf32>"], {"dimensions": [1]},
    regions=("(f32, f32, f32, f32) -> (maximum(arg0, arg2), subtract(arg1, arg3))",))


def _max_beside_subtract_inputs(init0=-np.inf):
    x0 = np.array([[1.0, np.nan, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]], np.float32)
    x1 = np.array([[1.0, 2.0, 3.0, 4.0], [0.5, 1.5, 2.5, 3.5]], np.float32)
    return [x0[None], x1[None], np.array([init0], np.float32), np.array([0.0], np.float32)]


def test_per_result_masks_leave_an_independent_result_checked():
    """A variadic reduce whose results never meet in the body (issue 12): the subtract
    result is order-dependent and masked, the maximum beside it is judged on its own,
    so that a maximum that drops NaN operands fails (it was masked with the subtract)."""
    spec = load_spec("reduce")
    sig, stacked = MAX_BESIDE_SUBTRACT, _max_beside_subtract_inputs()
    expected = oracles.evaluate_batch(sig, stacked, spec)
    masks = oracles.implementation_defined(sig, stacked, spec, expected)
    assert masks.for_result("order_dependent_body", 0).tolist() == [[False, False]]
    assert masks.for_result("order_dependent_body", 1).tolist() == [[True, True]]

    def drop_nan(out, leaves):                  # maxps: a NaN operand does not win
        clean = np.where(np.isnan(leaves[0]), np.float32(-np.inf), leaves[0])
        return [clean.max(axis=-1).astype(np.float32), out[1]]
    assert classes_of_one(TreeBackend("left", wrong=drop_nan, name="maxps"), sig,
                          stacked) == {"nan": 1}
    # another tree of the subtract (legal) passes
    assert classes_of_one(TreeBackend("right"), sig, stacked) == {"pass": 1}


def test_per_result_init_value_count_masks_only_its_own_result():
    """maximum with init 5 beside a subtract: result 0 is open where its leaves stay
    below 5; a backend that leaves the init value out there passes, one that changes a
    value the rule does not cover (result 0 of the other row) fails."""
    spec = load_spec("reduce")
    sig = MAX_BESIDE_SUBTRACT
    stacked = _max_beside_subtract_inputs(init0=5.0)
    stacked[0] = np.array([[[1.0, 2.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]], np.float32)
    expected = oracles.evaluate_batch(sig, stacked, spec)
    masks = oracles.implementation_defined(sig, stacked, spec, expected)
    assert masks.for_result("init_value_count", 0).tolist() == [[True, False]]
    assert not masks.for_result("init_value_count", 1).any()
    assert classes_of_one(TreeBackend("left", init_count=0), sig, stacked) == {"pass": 1}
    wrong = TreeBackend("left", init_count=0, wrong=_one_ulp_up, name="wrong")
    assert classes_of_one(wrong, sig, stacked) == {"value": 1}


def test_an_idempotent_init_value_allows_exactly_r_or_r_with_it():
    """maximum with init 5 and leaves below 5: the spec allows R (no init value in the
    tree) or R ⊕ 5 = 5 (any number of them), nothing else: a backend that gives the
    leaves' maximum passes (and is recorded as 'without_init'); one that gives another
    value there (a pooling kernel that starts from -inf and then clamps at 4) fails."""
    sig = reduce_sig((2, 3), "f32", "maximum(arg0, arg1)", [1])
    stacked = [np.array([[[1.0, 2.0, 3.0], [6.0, 1.0, 2.0]]], np.float32),
               np.array([5.0], np.float32)]
    spec = load_spec("reduce")
    check = SignatureCheck(spec, sig, [TreeBackend("left", init_count=0)])
    check.compile()
    batch = check.run_batch(0, stacked)
    verdict = batch.results["tree"].verdict
    assert verdict.counts() == {"pass": 1}
    assert verdict.impl_defined["init_value_count"]["alternatives"] == {"without_init": 1}

    def clamp_at_4(out, leaves):
        return [np.where(out[0] < 5, np.float32(4.0), out[0])]
    wrong = TreeBackend("left", init_count=0, wrong=clamp_at_4, name="clamped")
    assert classes_of_one(wrong, sig, stacked) == {"value": 1}


def test_a_non_idempotent_init_value_leaves_the_result_open():
    """An integer sum with init 3: R + 3k for any k >= 0 (modulo 2^32, where 3k meets
    every residue): two init values, or none, pass."""
    sig = reduce_sig((2, 3), "si32", "add(arg0, arg1)", [1])
    stacked = [np.array([[[1, 2, 3], [4, 5, 6]]], np.int32), np.array([3], np.int32)]
    assert classes_of_one(TreeBackend("left", init_count=2), sig, stacked) == {"pass": 1}
    assert classes_of_one(TreeBackend("left", init_count=0), sig, stacked) == {"pass": 1}


# ---------------------------------------------------------------------------
# Sums with an init value that is not the identity (issue 32 item 2): judged over every
# number of init values, not masked
# ---------------------------------------------------------------------------

F32_SUM_INIT = reduce_sig((3, 5), "f32", "add(arg0, arg1)", [1])
F32_SUM_INIT_INPUTS = [np.array([[[1.1, 2.3, -0.7, 5.9, 0.25], [3.5, -1.25, 7.0, 2.2, -4.4],
                                  [0.1, 0.2, 0.3, 0.4, 9.5]]], np.float32),
                       np.array([0.3], np.float32)]


def _impl(backend, sig, stacked):
    check = SignatureCheck(load_spec(sig.op), sig, [backend])
    check.compile()
    v = check.run_batch(0, stacked).results[backend.name].verdict
    return v.counts(), v.impl_defined.get("init_value_count", {})


@pytest.mark.parametrize("order", LEGAL_ORDERS)
@pytest.mark.parametrize("count", [0, 1, 2, 5])
def test_a_float_sum_with_any_number_of_init_values_passes(order, count):
    counts, st = _impl(TreeBackend(order, init_count=count), F32_SUM_INIT,
                       F32_SUM_INIT_INPUTS)
    assert counts == {"pass": 1}, (order, count, counts, st)
    assert st.get("outside", 0) == 0 and "any" not in st.get("alternatives", {}), st


def test_a_float_sum_with_a_dropped_leaf_or_a_subtracted_init_value_fails():
    # (these passed while the rows were masked: the init value 0.3 is no identity)
    counts, st = _impl(DropLastLeaf(), F32_SUM_INIT, F32_SUM_INIT_INPUTS)
    assert counts.get("bound", 0) + counts.get("value", 0) == 1, (counts, st)
    assert st["outside"] > 0, st

    def minus_init(out, leaves):        # R - e: a negative number of init values
        return [(out[0].astype(np.float64) - 0.6).astype(np.float32)]
    counts, _ = _impl(TreeBackend("left", wrong=minus_init, name="minus"), F32_SUM_INIT,
                      F32_SUM_INIT_INPUTS)
    assert counts.get("bound", 0) + counts.get("value", 0) == 1, counts


def test_a_complex_sum_takes_one_init_count_for_both_parts():
    sig = reduce_sig((2, 3), "complex<f64>", "add(arg0, arg1)", [1])
    x = np.array([[[1.5 - 2j, 0.25 + 1j, -3 + 0.5j], [2 + 2j, -1 - 1j, 0.125j]]])
    stacked = [x, np.array([1 + 2j])]
    for count in (0, 1, 3):
        assert _impl(TreeBackend("pairwise", init_count=count), sig, stacked)[0] == \
            {"pass": 1}, count

    def half_init(out, leaves):         # the real part with one init value more than the
        return [out[0] + 1.0]           # imaginary part: no single count gives both
    counts, _ = _impl(TreeBackend("left", wrong=half_init, name="half"), sig, stacked)
    assert counts.get("value", 0) + counts.get("bound", 0) == 1, counts


def test_an_integer_sum_is_r_plus_a_multiple_of_the_init_value_modulo_2_to_the_bits():
    sig = reduce_sig((2, 3), "si8", "add(arg0, arg1)", [1])
    stacked = [np.array([[[10, 20, 3], [-100, 5, 6]]], np.int8), np.array([4], np.int8)]
    for count in (0, 2, 30):            # 30 init values: 153 wraps around to -103
        assert _impl(TreeBackend("left", init_count=count), sig, stacked)[0] == \
            {"pass": 1}, count
    counts, _ = _impl(TreeBackend("left", wrong=_one_ulp_up, name="plus1"), sig, stacked)
    assert counts == {"value": 1}, counts


def test_an_xor_with_any_number_of_init_values_is_r_or_r_xor_e():
    sig = reduce_sig((2, 3), "ui16", "xor(arg0, arg1)", [1])
    stacked = [np.array([[[1, 2, 3], [40000, 5, 6]]], np.uint16), np.array([9], np.uint16)]
    for count in (0, 1, 2, 3):
        counts, st = _impl(TreeBackend("left", init_count=count), sig, stacked)
        assert counts == {"pass": 1}, (count, counts)
    counts, _ = _impl(TreeBackend("left", wrong=_one_ulp_up, name="plus1"), sig, stacked)
    assert counts == {"value": 1}, counts


def test_a_product_with_another_init_value_stays_masked():
    sig = reduce_sig((2, 3), "f32", "multiply(arg0, arg1)", [1])
    stacked = [np.array([[[1.5, 2, 3], [4, 0.5, 6]]], np.float32), np.array([2], np.float32)]
    counts, st = _impl(TreeBackend("left", init_count=3), sig, stacked)
    assert counts == {"pass": 1} and st["alternatives"].get("any", 0) > 0, (counts, st)




def test_a_per_result_rule_must_give_one_mask_per_result():
    from conformance.oracles import _per_result
    from conformance.oracles.registry import OracleError
    assert [m.tolist() for m in _per_result([True, [False]], 2, "w")] == [True, [False]]
    with pytest.raises(OracleError, match="w: a per_result rule gives one mask per result"):
        _per_result(np.zeros(3, bool), 2, "w")


# ---------------------------------------------------------------------------
# Identities, the spec's examples on the region forms
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("body,expected", [
    ("(f32, f32) -> add(arg0, arg1)", [-0.0]),
    ("(f32, f32) -> maximum(arg0, arg1)", [-np.inf]),
    ("(f32, f32) -> multiply(arg0, arg1)", [1.0]),
    ("(si8, si8) -> minimum(arg0, arg1)", [127]),
    ("(ui16, ui16) -> and(arg0, arg1)", [65535]),
    ("(i1, i1) -> or(arg0, arg1)", [False]),
    ("(f32, si32, f32, si32) -> (add(arg0, arg2), maximum(arg3, arg1))", [-0.0, -2 ** 31]),
])
def test_identity_search(body, expected):
    found = identity(body)
    assert found is not None
    for f, e in zip(found, expected):
        assert np.asarray(f).astype(np.float64) == e
        if e == 0 and isinstance(e, float):
            assert np.signbit(np.asarray(f).astype(np.float64)) == np.signbit(e)


def test_identity_of_arg_max_is_the_lowest_value_with_the_largest_index():
    found = identity(ARGMAX.regions[0])
    assert found is not None
    value, index = found
    assert np.asarray(value).view(np.uint32) == 0xFFFFFFFF      # -NaN: the total order's least
    assert index == 2 ** 31 - 1


def test_no_identity_for_subtract():
    assert identity("(f32, f32) -> subtract(arg0, arg1)") is None


def test_components_read_the_body():
    assert reduction.components("(f32, si8, f32, si8) -> (add(arg2, arg0), xor(arg1, arg3))") \
        == ("add", "xor")
    assert reduction.components(ARGMAX.regions[0]) == (None, None)
    assert reduction.components("(f32, f32) -> add(arg0, arg0)") == (None,)


# ---------------------------------------------------------------------------
# reduce_window: the window geometry against a naive loop, verdicts as for reduce
# ---------------------------------------------------------------------------

def _naive_windows(x, init, wd, ws, bd, wdl, pad):
    """Per result index, the window's elements (padding = init), by explicit loops over
    the spec's formulas."""
    import itertools
    dilated = [0 if s == 0 else (s - 1) * b + 1 for s, b in zip(x.shape, bd)]
    padded_shape = [lo + d + hi for (lo, hi), d in zip(pad, dilated)]
    extent = [(w - 1) * dl + 1 for w, dl in zip(wd, wdl)]
    out_shape = [0 if (p <= 0 or e > p) else (p - e) // s + 1
                 for p, e, s in zip(padded_shape, extent, ws)]

    def padded_at(idx):
        src = []
        for i, (lo, _), b, n in zip(idx, pad, bd, x.shape):
            j = i - lo
            if j < 0 or j % b or j // b >= n:
                return init
            src.append(j // b)
        return x[tuple(src)]

    out = {}
    for r in itertools.product(*(range(o) for o in out_shape)):
        vals = []
        for w in itertools.product(*(range(k) for k in wd)):
            vals.append(padded_at([ri * s + wi * dl for ri, s, wi, dl in zip(r, ws, w, wdl)]))
        out[r] = vals
    return out_shape, out


@pytest.mark.parametrize("seed", range(12))
def test_window_leaves_are_the_spec_windows(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(v) for v in rng.integers(0, 5, rank))
    wd = [int(v) for v in rng.integers(1, 4, rank)]
    ws = [int(v) for v in rng.integers(1, 3, rank)]
    bd = [int(v) for v in rng.integers(1, 3, rank)]
    wdl = [int(v) for v in rng.integers(1, 3, rank)]
    dil = [0 if s == 0 else (s - 1) * b + 1 for s, b in zip(shape, bd)]
    pad = []
    for d in dil:
        lo = int(rng.integers(max(-2, -d), 3))
        pad.append((lo, int(rng.integers(max(-2, -d - lo), 3))))
    x = rng.integers(0, 100, shape).astype(np.int32)
    g = reduction.geometry("reduce_window", shape, {
        "window_dimensions": wd, "window_strides": ws, "base_dilations": bd,
        "window_dilations": wdl, "padding": np.array(pad, np.int64).reshape(-1, 2)})
    out_shape, naive = _naive_windows(x, -1, wd, ws, bd, wdl, pad)
    assert list(g.out_shape) == out_shape
    leaves = g.leaves(x, np.int32(-1))
    for r, vals in naive.items():
        assert leaves[r].tolist() == vals, (r, shape, wd, ws, bd, wdl, pad)


def window_sig(shape, et, body, wd, ws, bd, wdl, pad):
    g = reduction.geometry("reduce_window", shape, {
        "window_dimensions": wd, "window_strides": ws, "base_dilations": bd,
        "window_dilations": wdl, "padding": np.array(pad, np.int64).reshape(-1, 2)})
    from conformance.core.dense import dense_text
    t = f"tensor<{'x'.join(map(str, shape))}x{et}>"
    o = f"tensor<{'x'.join(map(str, g.out_shape))}x{et}>"
    return Signature.make("reduce_window", [t, f"tensor<{et}>"], [o], {
        "window_dimensions": wd, "window_strides": ws, "base_dilations": bd,
        "window_dilations": wdl, "padding": dense_text(np.array(pad, np.int64))},
        regions=(f"({et}, {et}) -> {body}",))


W_F32_SUM = window_sig((6, 7), "f32", "add(arg0, arg1)", [3, 2], [1, 2], [2, 1], [1, 2],
                       [(1, -1), (2, 0)])
W_BF16_SUM = window_sig((5, 4), "bf16", "add(arg1, arg0)", [2, 3], [2, 1], [1, 1], [2, 1],
                        [(0, 2), (-1, 1)])
W_SI8_MAX = window_sig((4, 5), "si8", "maximum(arg0, arg1)", [2, 2], [1, 1], [1, 2], [1, 1],
                       [(1, 1), (0, 0)])
W_F8_SUM = window_sig((3, 5), "f8E5M2", "add(arg0, arg1)", [2, 2], [1, 2], [2, 1], [1, 1],
                      [(0, 1), (1, -1)])


@pytest.mark.parametrize("sig", [W_F32_SUM, W_BF16_SUM, W_SI8_MAX, W_F8_SUM],
                         ids=["f32", "bf16", "si8", "f8"])
@pytest.mark.parametrize("order", LEGAL_ORDERS)
def test_reduce_window_passes_every_legal_tree(sig, order):
    assert set(classes(TreeBackend(order), sig)) <= {"pass"}, order


@pytest.mark.parametrize("sig", [W_F32_SUM, W_BF16_SUM, W_SI8_MAX, W_F8_SUM],
                         ids=["f32", "bf16", "si8", "f8"])
def test_reduce_window_fails_a_dropped_window_element(sig):
    counts = classes(DropLastLeaf(), sig)
    assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts


class SkipPadding(Backend):
    """reduce_window as XLA computes it: each window's operand elements summed in index
    order after the init value once; the padding and the holes of the base dilation
    are skipped (they hold init values, whose number the spec leaves open); ``drop``:
    the last operand element of each window forgotten too (a bug)."""

    isolate = False

    def __init__(self, drop=False):
        self.drop, self.name = drop, "skip-padding" + ("-drop" if drop else "")
        super().__init__()

    def compile(self, sig):
        def run(inputs):
            x, e = (np.asarray(v) for v in inputs)
            g = reduction.geometry(sig.op, x.shape, sig.attributes)
            leaves = g.leaves(x.astype(np.float64), np.float64(e)).copy()
            real = g.leaves(np.ones(x.shape, bool), False)
            if self.drop:
                last = real.shape[-1] - 1 - np.argmax(real[..., ::-1], axis=-1)
                hit = real.any(axis=-1)
                np.put_along_axis(real, last[..., None],
                                  np.where(hit, False, np.take_along_axis(
                                      real, last[..., None], axis=-1)[..., 0])[..., None],
                                  axis=-1)
            acc = np.full(leaves.shape[:-1], np.float64(e), np.float64)
            for i in range(leaves.shape[-1]):
                acc = np.where(real[..., i], (acc + leaves[..., i]).astype(x.dtype), acc)
            (t,) = sig.result_types
            return [acc.astype(t.element_type.dtype).reshape(t.shape)]
        return run


#: windows on padding only (the first row and column) beside windows holding 1 or 2
#: operand elements and holes of the base dilation
W_F64_PADDED = window_sig((5, 4), "f64", "add(arg1, arg0)", [2, 2], [2, 1], [2, 1], [1, 1],
                          [(3, 0), (2, 1)])


def test_reduce_window_padding_may_be_skipped_but_not_an_operand_element():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1,) + W_F64_PADDED.input_types[0].shape)
    stacked = [x, np.array([4.237462736005334])]
    counts, st = _impl(SkipPadding(), W_F64_PADDED, stacked)
    assert counts == {"pass": 1}, (counts, st)
    assert st["alternatives"].get("init_multiples", 0) > 0, st
    counts, st = _impl(SkipPadding(drop=True), W_F64_PADDED, stacked)
    assert counts.get("bound", 0) + counts.get("value", 0) == 1, (counts, st)


class _Daz(Backend):
    """A float sum that reads subnormal leaves as zero (DAZ), the init value once; ``plus``
    added to every result (a bug beside the flush)."""

    isolate = False

    def __init__(self, plus=0.0):
        self.plus, self.name = plus, f"daz{plus}"
        super().__init__()

    def compile(self, sig):
        def run(inputs):
            x, e = (np.asarray(v) for v in inputs)
            from conformance.core.numerics import flush_subnormals
            s = flush_subnormals(x).astype(np.float64).sum(axis=-1) + np.float64(e)
            return [(s + self.plus).astype(np.float32)]
        return run


def test_a_sum_with_another_init_value_flushed_on_its_own_subnormal_leaf_is_subnormal_flush():
    sig = reduce_sig((2, 3), "f32", "add(arg0, arg1)", [1])
    tiny = np.finfo(np.float32).smallest_normal
    stacked = [np.array([[[1e-40, 0, 0], [0.5, 0.25, 0]]], np.float32),
               np.array([-tiny], np.float32)]
    # row 0: e + 1e-40 is exact (the oracle's); DAZ gives e: outside the set, explained
    # by the row's own subnormal leaf; row 1 is in the set (k = 1)
    counts, st = _impl(_Daz(), sig, stacked)
    assert counts == {"subnormal_flush": 1}, (counts, st)
    # a wrong row 1 beside it is a divergence of its own class
    check = SignatureCheck(load_spec("reduce"), sig, [_Daz(plus=0.5)])
    check.compile()
    cls = check.run_batch(0, stacked).results["daz0.5"].verdict.element_classes[0]
    from conformance.checking.compare import SUBNORMAL_FLUSH
    assert cls[0, 1] not in (PASS, SUBNORMAL_FLUSH), cls


def test_a_body_returning_fewer_results_than_its_pairs_has_no_identity():
    """An invalid program's body (two argument pairs, one result) is searched without an
    IndexError: it has no identity (the invalid generator asked, for its init values)."""
    from generators.reduction import identity
    assert identity("(f8E4M3FNUZ, f8E4M3FNUZ, f8E4M3FNUZ, f8E4M3FNUZ) -> "
                    "add(arg0, arg2)") is None
    assert identity("(f32, f32, f32, f32) -> select(compare(arg0, arg2, 'GT', 'TOTALORDER'), "
                    "arg0, arg2)") is None
