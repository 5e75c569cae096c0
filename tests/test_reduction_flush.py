"""subnormal_flush for the reductions (reduce, reduce_window, all_reduce, reduce_scatter,
select_and_scatter: the ``reduction`` bound's flush allowance) only on each element's own
evidence: an FTZ room counted from the element's own leaves, a DAZ rerun of the oracle
only where its own leaves hold a subnormal (conformance/checking/verdicts/reduction.py).

Planted backends: one off by one ulp on exact-value sums of normal leaves that are all
multiples of the smallest normal (no flush can touch them: must be ``value``, as it was
not while a flat ``(2n - 1)·tiny`` excused it), ones that flush as XLA on CPU does (DAZ,
FTZ, both: ``pass`` or ``subnormal_flush``, never ``value``), other legal trees without
flushing on subnormal-heavy leaves (``pass``), and bugs beside subnormals (``value``).
The allowance itself: its edge cases, and a brute force over every tree of small leaf
sets that it is never exceeded."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.checking.compare import BOUND, SUBNORMAL_FLUSH, VALUE
from conformance.core.numerics import flush_subnormals, is_subnormal, round_to
from conformance.core.types import element_type
from conformance.oracles import collectives as co
from conformance.oracles import reduction
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations
from conformance.checking.verdicts.reduction import ftz_flushes, ftz_room

from planted import one_ulp_up
from test_collectives import SUM_BF16, _sig
from test_reduction import (BF16_SUM, F8_SUM, F32_SUM, W_BF16_SUM, W_F32_SUM, TreeBackend,
                            classes)


def _tiny(et) -> float:
    return float(ml_dtypes.finfo(element_type(et).component.dtype).smallest_normal)


def _bump(out, leaves):
    return [one_ulp_up(out[0])] + list(out[1:])


def _judge(backend, sig, inputs):
    """Element classes of result 0 for explicit batched inputs."""
    check = SignatureCheck(load_spec(sig.op), sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    return check.run_batch(0, inputs).results[backend.name].verdict.element_classes[0]


def _count(cls) -> dict[str, int]:
    from conformance.checking.compare import ELEMENT_CLASSES
    values, counts = np.unique(cls, return_counts=True)
    return {ELEMENT_CLASSES[v]: int(c) for v, c in zip(values, counts)}


class Flushing(Backend):
    """A float sum as XLA on CPU computes it: ``daz``, subnormal inputs and init values
    read as zero; ``ftz``, every partial sum rounded to the element type and flushed to
    zero when subnormal; in the tree ``order`` (``left``: init first; ``pairwise``);
    ``bump``: then one ulp off (a value bug beside the flushes)."""

    isolate = False

    def __init__(self, daz=True, ftz=True, order="left", bump=False, name="flushing"):
        self.daz, self.ftz, self.order, self.bump, self.name = daz, ftz, order, bump, name
        super().__init__()

    def _sum(self, columns: list[np.ndarray], et) -> np.ndarray:
        wide = np.complex128 if et.is_complex else np.float64

        def fl(v):
            v = round_to(v, et)
            return (flush_subnormals(v) if self.ftz else v).astype(wide)

        cols = [c.astype(wide) for c in columns]
        with np.errstate(all="ignore"):
            if self.order == "left":
                acc = cols[0]
                for c in cols[1:]:
                    acc = fl(acc + c)
                return acc
            while len(cols) > 1:
                nxt = [fl(a + b) for a, b in zip(cols[0::2], cols[1::2])]
                cols = nxt + (cols[-1:] if len(cols) % 2 else [])
            return cols[0]

    def _finish(self, out: np.ndarray, et) -> np.ndarray:
        out = round_to(out, et)
        out = flush_subnormals(out) if self.ftz else out
        return one_ulp_up(out) if self.bump else out

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        (rt,) = sig.result_types
        et = rt.element_type
        daz = flush_subnormals if self.daz else (lambda v: v)
        if sig.op in ("all_reduce",):
            attrs = {**sig.attributes, "num_replicas": sig.num_replicas,
                     "num_partitions": sig.num_partitions}
            members = co.members(attrs)

            def run_grid(inputs):
                x = daz(np.asarray(inputs[0]))
                out = np.empty_like(x)
                for q, g in enumerate(members):
                    out[q] = self._finish(self._sum([x[s] for s in g], et), et)
                return [out]
            return run_grid

        def run(inputs):
            x, init = (daz(np.asarray(v)) for v in inputs)
            g = reduction.geometry(sig.op, x.shape, sig.attributes)
            leaves = g.leaves(x, init)
            cols = [np.broadcast_to(init, leaves.shape[:-1])] + \
                [leaves[..., i] for i in range(leaves.shape[-1])]
            return [self._finish(self._sum(cols, et), et).reshape(rt.shape)]
        return run


# ---------------------------------------------------------------------------
# (a) one ulp off where no flush can reach: value
# ---------------------------------------------------------------------------

def _coarse_exact(sig, scale_log2: int, kmax: int, batch: int = 8, seed: int = 0):
    """Batched inputs whose leaves are small integers times 2^scale_log2 (at least the
    smallest normal: no leaf finer than it, none subnormal), few enough that every
    partial sum of every tree is exact (the bound is 0); init -0."""
    rng = np.random.default_rng(seed)
    t, i = sig.input_types[0], sig.input_types[1]
    k = rng.integers(-kmax, kmax + 1, (batch,) + tuple(t.shape))
    x = np.ldexp(k.astype(np.float64), scale_log2).astype(t.element_type.dtype)
    init = np.full((batch,) + tuple(i.shape), -0.0).astype(i.element_type.dtype)
    assert not is_subnormal(x).any()
    return [x, init]


# (signature, leaf scale, |k| at most): results whose ulp the old flat (2n - 1)·tiny covered
COARSE = [(F32_SUM, -118, 15), (BF16_SUM, -124, 15), (F8_SUM, -6, 2),
          (W_F32_SUM, -118, 15), (W_BF16_SUM, -124, 8)]
COARSE_IDS = ["f32", "bf16", "f8", "window-f32", "window-bf16"]


@pytest.mark.parametrize("sig,scale,kmax", COARSE, ids=COARSE_IDS)
def test_one_ulp_off_on_leaves_no_flush_reaches_is_value(sig, scale, kmax):
    inputs = _coarse_exact(sig, scale, kmax)
    expected = np.asarray(oracles.evaluate_batch(sig, inputs, load_spec(sig.op))[0],
                          np.float64)
    # the old flat allowance covered one ulp of these results (what this test is about)
    n = 1 + int(np.prod(sig.input_types[0].shape)) // int(np.prod(
        sig.result_types[0].shape) or 1)
    assert (np.abs(expected) * 2.0 ** -6 < (2 * n - 1) * _tiny(sig.input_types[0].element_type)
            ).any()
    cls = _judge(TreeBackend("pairwise", wrong=_bump, name="ulp"), sig, inputs)
    counts = _count(cls)
    assert counts.get("value", 0) > 0 and "subnormal_flush" not in counts, counts
    # every element one ulp off (nonzero normal result) is a value error
    moved = np.abs(expected) >= _tiny(sig.input_types[0].element_type)
    assert (cls[moved] == VALUE).all(), counts


def test_default_plan_one_ulp_off_is_flush_only_where_the_elements_own_leaves_are_fine():
    """On the default plan's fp8 sums (41 elements were subnormal_flush under the flat
    allowance), an element one ulp off may be subnormal_flush only where one of its own
    leaves is finer than the smallest normal, and where no flush of those could move it
    as far it is value."""
    spec = load_spec("reduce")
    backend = TreeBackend("left", wrong=_bump, name="ulp")
    check = SignatureCheck(spec, F8_SUM, [backend])
    check.compile()
    tiny = _tiny("f8E4M3FN")
    flushed = values = 0
    for b in range(4):
        inputs = batch_for(0, "default", spec, "f8E4M3FN", 0, b, F8_SUM)
        (cls,) = check.run_batch(b, inputs).results["ulp"].verdict.element_classes
        leaves = reduction.LEAVES["reduce"](inputs, dict(F8_SUM.attributes), 1, 0)
        fine = (reduction.granularity(leaves.astype(np.float64)) < tiny).any(axis=-1)
        assert not (cls[~fine] == SUBNORMAL_FLUSH).any()
        flushed += int((cls == SUBNORMAL_FLUSH).sum())
        values += int((cls == VALUE).sum())
    assert values > 90 and flushed <= 5, (values, flushed)


def test_a_subnormal_in_another_case_lends_no_flush():
    """Case 1 holds subnormal leaves; case 0, exact coarse leaves one ulp off, is value
    wherever case 1 is."""
    inputs = _coarse_exact(F32_SUM, -118, 15, batch=2)
    x = inputs[0].copy()
    x[1, :, ::2] = np.float32(2.0 ** -130)
    cls = _judge(TreeBackend("left", wrong=_bump, name="ulp"), F32_SUM, [x, inputs[1]])
    assert (cls[0] == VALUE).all(), cls


# ---------------------------------------------------------------------------
# (b) a backend that flushes: pass or subnormal_flush, and bugs beside it are not
# ---------------------------------------------------------------------------

def _subnormal_heavy(sig, seed: int = 0, batch: int = 4):
    """Every other leaf subnormal, and reading those as zero moves each sum far beyond
    its bound: f32, normal leaves near 2^-118 (finer than the smallest normal, both signs)
    and subnormals near 2^-129 (bound about 2^-135); bf16 (whose bound over 13 leaves is
    5% of Σ|leaf|), positive leaves: normal ones 4 to 8 times the smallest normal, and
    subnormals of 3/4 of it or more."""
    t = sig.input_types[0]
    et = t.element_type
    rng = np.random.default_rng(seed)
    shape = (batch,) + tuple(t.shape)
    if et.name == "bf16":
        tiny = _tiny(et)
        normal = rng.integers(4, 9, shape) * tiny
        sub = rng.integers(96, 128, shape) * 2.0 ** -133
    else:
        normal = rng.standard_normal(shape) * 2.0 ** -118
        sub = rng.integers(1, 64, shape) * 2.0 ** -134 * rng.choice([-1, 1], shape)
    pick = (np.arange(t.shape[-1]) % 2 == 0)
    x = round_to(np.where(pick, sub, normal), et)
    init = np.full((batch,) + tuple(sig.input_types[1].shape), -0.0).astype(et.dtype)
    assert is_subnormal(x).any()
    return [x, init]


MODES = {"daz-ftz": dict(daz=True, ftz=True), "daz": dict(daz=True, ftz=False),
         "ftz": dict(daz=False, ftz=True)}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("sig", [F32_SUM, BF16_SUM, F8_SUM, W_F32_SUM, W_BF16_SUM],
                         ids=["f32", "bf16", "f8", "window-f32", "window-bf16"])
def test_flushing_backends_pass_or_are_subnormal_flush_on_the_default_plan(sig, mode):
    """Never value. (FTZ without DAZ may also give a zero of the other sign where
    flushed subnormal partial sums of opposite signs cancel: -0 + s + -s -> -0 where the
    oracle's exact sum is +0. The comparator's sign-of-zero test, not this allowance,
    judges that: signed_zero, on zero results only.)"""
    spec = load_spec(sig.op)
    backend = Flushing(**MODES[mode])
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    counts: dict[str, int] = {}
    for b in range(3):
        inputs = batch_for(0, "default", spec, sig.input_types[0].element_type.name, 0, b,
                           sig)
        (cls,) = check.run_batch(b, inputs).results[backend.name].verdict.element_classes
        (e,) = oracles.evaluate_batch(sig, inputs, spec)
        from conformance.checking.compare import SIGNED_ZERO
        assert (np.asarray(e, np.float64)[cls == SIGNED_ZERO] == 0).all()
        assert mode == "ftz" or not (cls == SIGNED_ZERO).any()
        for k, n in _count(cls).items():
            counts[k] = counts.get(k, 0) + n
    assert set(counts) <= {"pass", "subnormal_flush", "signed_zero"}, counts


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("order", ["left", "pairwise"])
@pytest.mark.parametrize("sig", [F32_SUM, BF16_SUM, W_F32_SUM], ids=["f32", "bf16", "window"])
def test_flushing_beyond_the_bound_is_subnormal_flush(sig, order, mode):
    inputs = _subnormal_heavy(sig)
    counts = _count(_judge(Flushing(order=order, **MODES[mode]), sig, inputs))
    assert set(counts) <= {"pass", "subnormal_flush"}, counts
    if MODES[mode]["daz"] or sig.input_types[0].element_type.name == "f32":
        # the subnormal leaves read as zero (or, FTZ alone, a subnormal leaf added to
        # the zero init) move the sums far beyond the bound
        assert counts.get("subnormal_flush", 0) > 0, counts


@pytest.mark.parametrize("order", ["left", "pairwise"])
def test_ftz_alone_on_normal_leaves_cancelling_below_tiny_is_subnormal_flush(order):
    """No subnormal input (DAZ changes nothing, the comparator's DAZ test has nothing to
    go on) and normal results: only the FTZ room, from the element's own leaves finer
    than tiny whose partial sums cancel below it, explains the difference."""
    tiny = TINY32
    rng = np.random.default_rng(4)
    x = np.tile(np.array([1.5, -1.25, 1.75, -1.5], np.float64) * tiny, (8, 4, 4))
    x = x * rng.choice([-1, 1], (8, 4, 1))
    x = x.astype(np.float32)
    init = np.full((8,), -0.0, np.float32)
    assert not is_subnormal(x).any()
    backend = Flushing(daz=False, ftz=True, order=order)
    e = np.asarray(oracles.evaluate_batch(F32_SUM, [x, init], load_spec("reduce"))[0])
    a = backend.batch_executable(F32_SUM)([x, init])[0]
    moved = np.asarray(a) != e
    assert moved.any() and (np.abs(e[moved]) >= tiny).all()
    cls = _judge(backend, F32_SUM, [x, init])
    assert (cls[moved] == SUBNORMAL_FLUSH).all(), _count(cls)
    # ... and a value beyond what those flushes can lose (8 flushes below tiny: the sums
    # are 2 tiny) is not
    cls = _judge(TreeBackend("left", wrong=lambda out, leaves: [out[0] * 8], name="x8"),
                 F32_SUM, [x, init])
    assert "subnormal_flush" not in _count(cls), _count(cls)


def _dropped(sig):
    def wrong(out, leaves):
        return [round_to(out[0].astype(np.float64) - leaves[0][..., 1].astype(np.float64),
                         sig.result_types[0].element_type)]
    return wrong


@pytest.mark.parametrize("sig", [F32_SUM, BF16_SUM], ids=["f32", "bf16"])
def test_bugs_beside_flushed_subnormals_are_not_flushes(sig):
    """Beside subnormal leaves, a sum of zero, a sign error, or (f32, whose bound is
    tight) a dropped normal leaf is ``bound`` (beyond a bound above 0), not a flush.
    (On bf16 dropping a normal leaf of 4 to 8 tiny lies within the bound of the DAZ
    value: no evidence tells it apart from reading the subnormals as zero.)"""
    inputs = _subnormal_heavy(sig)
    expected = np.asarray(oracles.evaluate_batch(sig, inputs, load_spec("reduce"))[0],
                          np.float64)
    bugs = [("zero", lambda out, leaves: [np.zeros_like(out[0])]),
            ("negated", lambda out, leaves: [-out[0]])]
    if sig is F32_SUM:
        bugs.append(("dropped", _dropped(sig)))
    for name, wrong in bugs:
        cls = _judge(TreeBackend("left", wrong=wrong, name=name), sig, inputs)
        counts = _count(cls)
        assert "subnormal_flush" not in counts, (name, counts)
        big = cls[np.abs(expected) > 32 * _tiny(sig.input_types[0].element_type)]
        assert np.isin(big, [BOUND, VALUE]).all(), (name, counts)
    assert (np.abs(expected) > 32 * _tiny(sig.input_types[0].element_type)).mean() > 0.5


def test_all_reduce_flushing_is_subnormal_flush_and_one_ulp_off_is_value():
    """all_reduce reuses the reduction bound: the group's values read under DAZ/FTZ pass
    or are subnormal_flush; exact coarse values one ulp off are value."""
    counts = classes(Flushing(name="flushing"), SUM_BF16, batches=2)
    assert set(counts) <= {"pass", "subnormal_flush"}, counts
    sig = _sig("all_reduce", (4, 1), "tensor<6xf32>", "tensor<6xf32>",
               ["(f32, f32) -> add(arg0, arg1)"], replica_groups=[[3, 0, 2, 1]],
               channel_id=0, use_global_device_ids=False)
    rng = np.random.default_rng(1)
    coarse = np.ldexp(rng.integers(-15, 16, (3, 4, 6)).astype(np.float64), -120
                      ).astype(np.float32)
    heavy = coarse.copy()
    heavy[:, ::2] = rng.integers(1, 64, (3, 2, 6)) * np.float32(2.0 ** -134)
    # subnormals of processes 0 and 2, normal values near 2^-115 of 1 and 3
    heavy[:, 1::2] = (rng.standard_normal((3, 2, 6)) * 2.0 ** -115).astype(np.float32)
    cls = _judge(Flushing(name="flushing"), sig, [heavy])
    counts = _count(cls)
    assert set(counts) <= {"pass", "subnormal_flush"} and counts.get("subnormal_flush"), counts
    cls = _judge(Flushing(daz=False, ftz=False, bump=True, name="ulp"), sig, [coarse])
    expected = np.asarray(oracles.evaluate_batch(sig, [coarse], load_spec("all_reduce"))[0])
    counts = _count(cls)
    assert "subnormal_flush" not in counts, counts
    assert (cls[np.abs(expected) >= _tiny("f32")] == VALUE).all(), counts


# ---------------------------------------------------------------------------
# (c) another legal tree, no flushing, on subnormal-heavy leaves: pass
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("order", ["left", "right", "reversed", "pairwise"])
@pytest.mark.parametrize("sig", [F32_SUM, BF16_SUM, W_F32_SUM], ids=["f32", "bf16", "window"])
def test_other_trees_without_flushing_pass_on_subnormal_leaves(sig, order):
    counts = _count(_judge(TreeBackend(order), sig, _subnormal_heavy(sig)))
    assert set(counts) <= {"pass"}, counts


# ---------------------------------------------------------------------------
# (d) the allowance itself
# ---------------------------------------------------------------------------

TINY32 = _tiny("f32")


def test_no_leaves_and_zero_leaves_allow_nothing():
    assert ftz_flushes(np.zeros((3, 0)), TINY32).tolist() == [0, 0, 0]
    assert ftz_room(np.zeros((2, 0), np.float32), "f32").tolist() == [0.0, 0.0]
    zeros = np.array([[0.0, -0.0, 0.0], [-0.0, -0.0, -0.0]], np.float32)
    assert ftz_room(zeros, "f32").tolist() == [0.0, 0.0]


def test_leaves_that_are_multiples_of_tiny_allow_nothing():
    leaves = np.array([[1.0, -3.0, 2.0 ** -100, TINY32, -TINY32 * 3]], np.float32)
    assert ftz_room(leaves, "f32").tolist() == [0.0]
    # NaN and infinities are no leaves a flush can take
    special = np.array([[np.nan, np.inf, -np.inf, 1.0]], np.float32)
    assert ftz_room(special, "f32").tolist() == [0.0]


def test_all_subnormal_window():
    sub = np.array([[2.0 ** -130, 2.0 ** -131, 3 * 2.0 ** -140, 2.0 ** -149]], np.float32)
    # one sign: each flush takes a subnormal leaf (x + 0, with init values between them)
    assert ftz_flushes(sub.astype(np.float64), TINY32).tolist() == [4]
    # ... and loses exactly them (a subnormal sum is exact): no more than their sum
    assert ftz_room(sub, "f32").tolist() == [sub.astype(np.float64).sum()]
    # both signs: a flushed partial sum may hold normal leaves too, each flush < tiny
    mixed = sub * np.array([1, -1, 1, -1], np.float32)
    assert ftz_room(mixed, "f32").tolist() == [4 * TINY32]
    # one subnormal among coarse leaves of one sign: only it can go
    one = np.array([[2.0 ** -130, 1.0, 2.0, 2.0 ** -100]], np.float32)
    assert ftz_flushes(one.astype(np.float64), TINY32).tolist() == [1]


def test_normal_leaves_finer_than_tiny_flush_only_by_cancelling():
    fine = np.array([[1.5 * TINY32, 1.25 * TINY32]])
    # one sign: every partial sum is at least tiny, nothing to flush
    assert ftz_flushes(fine, TINY32).tolist() == [0]
    # opposite signs: 1.5 tiny - 1.25 tiny = tiny/4 is flushed, once
    assert ftz_flushes(fine * [[1, -1]], TINY32).tolist() == [1]
    # four such leaves, no subnormal: each flush of two nonzero values removes both
    assert ftz_flushes(np.array([[1.5, -1.25, 1.75, -1.5]]) * TINY32, TINY32).tolist() == [2]


def test_zero_results():
    """±0 results: the room is what the leaves allow, whatever the sum (a cancellation to
    zero of fine leaves may still have flushed on the way); coarse ones allow nothing."""
    s = 2.0 ** -130
    assert ftz_flushes(np.array([[-0.0, s, -s]]), TINY32).tolist() == [2]
    assert ftz_flushes(np.array([[0.0, 3.0, -3.0], [-0.0, -0.0, -0.0]]), TINY32).tolist() \
        == [0, 0]


def test_complex_parts_are_counted_apart_and_combined_as_a_modulus():
    s = 2.0 ** -130
    leaves = np.array([[s + 1j, 2.0 + 1j * s, 1.0 + 0j]], np.complex64)
    # one flushable subnormal per part: tiny each, a modulus of sqrt(2) tiny
    assert np.allclose(ftz_room(leaves, "complex<f32>"), [np.sqrt(2) * TINY32])
    coarse = np.array([[1.0 + 2j, -3.0 - 0.5j]], np.complex64)
    assert ftz_room(coarse, "complex<f32>").tolist() == [0.0]


def _trees(values: tuple[float, ...], et, tiny: float):
    """Every (value, flushes) any full binary tree of these leaves gives, each addition
    rounded to ``et`` and flushed to zero when subnormal (FTZ)."""
    memo: dict[frozenset, set] = {}

    def of(idx: frozenset) -> set:
        if idx in memo:
            return memo[idx]
        if len(idx) == 1:
            (i,) = idx
            out = {(values[i], 0)}
        else:
            out = set()
            items = sorted(idx)
            first, rest = items[0], items[1:]
            for r in range(len(rest)):
                for left_rest in itertools.combinations(rest, r):
                    left = frozenset((first,) + left_rest)
                    right = idx - left
                    for (a, fa), (b, fb) in itertools.product(of(left), of(right)):
                        v = float(round_to(np.array(a + b), et).astype(np.float64))
                        flushed = v != 0 and abs(v) < tiny
                        out.add((0.0 if flushed else v, fa + fb + flushed))
        memo[idx] = out
        return out
    return of(frozenset(range(len(values))))


@pytest.mark.parametrize("seed", range(6))
def test_no_tree_flushes_more_than_the_allowance(seed):
    """Brute force over every tree of six fp8 leaves (two zeros among them: init values)
    drawn from values near the smallest normal 2^-6, both signs, subnormals included: no
    tree flushes more partial sums than :func:`ftz_flushes`, nor moves its sum further
    than the reordering bound plus :func:`ftz_room`; and the count is reached."""
    et = element_type("f8E4M3FN")
    tiny = _tiny(et)
    rng = np.random.default_rng(seed)
    pool = np.array([k * 2.0 ** -9 for k in range(1, 24)] + [0.75, 1.5])
    reached = 0
    for _ in range(12):
        vals = rng.choice(pool, 4) * rng.choice([-1, 1], 4)
        leaves = np.concatenate([[0.0, -0.0], vals]).astype(et.dtype).astype(np.float64)
        allowed = int(ftz_flushes(leaves[None], tiny)[0])
        room = float(ftz_room(leaves[None].astype(et.dtype), et)[0])
        exact = leaves.sum()
        u = 2.0 ** -4
        gamma = 5 * u / (1 - 5 * u)
        results = _trees(tuple(leaves), et, tiny)
        worst = max(f for _, f in results)
        assert worst <= allowed, (leaves, worst, allowed)
        reached += worst == allowed
        for v, f in results:
            assert abs(v - exact) <= gamma * np.abs(leaves).sum() + room + 1e-12, \
                (leaves, v, f)
    assert reached > 0


# ---------------------------------------------------------------------------
# select_and_scatter's scatter is judged by the same bound and allowance
# ---------------------------------------------------------------------------

class SelectAndScatter(Backend):
    """select_and_scatter as the oracle, ``daz``: on inputs with their subnormals read as
    zero (the selection included) and the result flushed; ``bump``: one ulp off."""

    isolate = False

    def __init__(self, daz=False, bump=False, name="sas"):
        self.daz, self.bump, self.name = daz, bump, name
        super().__init__()

    def compile(self, sig):
        def run(inputs):
            xs = [flush_subnormals(np.asarray(x)) if self.daz else np.asarray(x)
                  for x in inputs]
            (out,) = oracles.evaluate(sig.op, xs, sig.attributes,
                                      result_types=sig.result_types, regions=sig.regions)
            out = flush_subnormals(out) if self.daz else out
            return [one_ulp_up(out) if self.bump else out]
        return run


def test_select_and_scatter_one_ulp_off_is_value_and_daz_is_subnormal_flush():
    from test_select_and_scatter import F32_GE_ADD
    operand_t, source_t, _ = F32_GE_ADD.input_types
    rng = np.random.default_rng(2)
    operand = rng.standard_normal((4,) + tuple(operand_t.shape)).astype(np.float32)
    source = np.ldexp(rng.integers(-15, 16, (4,) + tuple(source_t.shape)).astype(np.float64),
                      -118).astype(np.float32)
    init = np.full((4,), -0.0, np.float32)
    expected = np.asarray(oracles.evaluate_batch(F32_GE_ADD, [operand, source, init],
                                                 load_spec("select_and_scatter"))[0])
    cls = _judge(SelectAndScatter(bump=True), F32_GE_ADD, [operand, source, init])
    counts = _count(cls)
    assert "subnormal_flush" not in counts and counts.get("value", 0) > 0, counts
    assert (cls[np.abs(expected) >= _tiny("f32")] == VALUE).all(), counts
    # subnormal sources beside normal ones near 2^-118 (and subnormal operand elements,
    # which read as zero change the selection): the DAZ backend is never value
    heavy = source.copy()
    heavy[..., ::2] = rng.integers(1, 64, heavy[..., ::2].shape) * np.float32(2.0 ** -134)
    operand[:, ::3] = np.float32(2.0 ** -140)
    counts = _count(_judge(SelectAndScatter(daz=True), F32_GE_ADD, [operand, heavy, init]))
    assert set(counts) <= {"pass", "subnormal_flush"} and counts.get("subnormal_flush"), counts


def test_complex_sum_with_an_infinite_part_judges_the_finite_part_within_the_bound():
    """A complex sum with an infinite real leaf (+inf in every tree): the imaginary part
    is still a float sum whose tree is open, so another legal order passes there (it was
    `value`: |actual - oracle| was NaN once one part was infinite, found by xla's
    reduce_scatter complex<f32>), a wrong imaginary part fails, and so does a finite
    real part."""
    from test_reduction import reduce_sig
    sig = reduce_sig((1, 6), "complex<f32>", "add(arg0, arg1)", [1])
    re = np.float32([np.inf, 1, 1, 1, 1, 1])
    im = np.float32([1, 1e-7, 1e-7, 1e-7, 1e-7, 1e-7])
    x = (re + 1j * im).astype(np.complex64).reshape(1, 1, 6)
    init = np.zeros((1,), np.complex64)
    inputs = [x, init]
    want = oracles.evaluate_batch(sig, [x, init], load_spec("reduce"))[0]
    assert np.isinf(want.real).all() and want.imag[0, 0] != np.float32(1)
    left = TreeBackend("left", name="left")
    got = left.compile(sig)([x[0], init[0]])[0]
    assert np.isinf(got.real).all() and got.imag != want.imag[0]   # another legal order
    assert _count(_judge(left, sig, inputs)) == {"pass": 1}

    def off(value):
        return lambda out, leaves: [out[0] + np.complex64(1j * value)] + list(out[1:])
    assert _count(_judge(TreeBackend("left", wrong=off(0.01), name="off"), sig, inputs)) \
        == {"bound": 1}

    def finite(out, leaves):
        return [np.complex64(np.float32(5) + 1j * np.imag(out[0]))] + list(out[1:])
    assert _count(_judge(TreeBackend("left", wrong=finite, name="finite"), sig, inputs)) \
        == {"value": 1}
