"""A reduction whose body computes in a wider type than its inputs
(stablehlo-spec-2026-08.md "### reduce" C2, C6, C8 and "is_promotable"; likewise
"### reduce_window" C3, C13, C16): the rules, the generators, the oracle (inputs and
init values converted to the body's type Ei, the tree in Ei, results of type Ei) and the
verdicts, against a backend that computes in Ei with another legal tree (must pass) and
one that reduces in the input type and converts only the result (must fail)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.promotion import is_promotable, to_destination_type, widenings
from conformance.generators import signatures
from conformance.generators.invalid import breakable, candidates
from conformance.generators.reduction import identity_values
from conformance.core.types import element_type
from conformance.oracles import reduction
from conformance.specs import load_spec
from conformance.specs.regions import parse as parse_region, retyped
from conformance.specs.validity import violations

from test_reduction import fold


def _t(shape, et):
    return f"tensor<{'x'.join(map(str, shape))}x{et}>" if shape else f"tensor<{et}>"


def promoted_reduce(shape, ets, bts, body, dims):
    """A reduce of inputs of types ``ets`` whose body computes in ``bts``."""
    out = [d for i, d in enumerate(shape) if i not in dims]
    return Signature.make(
        "reduce", [_t(shape, t) for t in ets] + [_t((), t) for t in ets],
        [_t(out, t) for t in bts], {"dimensions": list(dims)},
        regions=(f"({', '.join(list(bts) * 2)}) -> {body}",))


def promoted_window(shape, et, bt, body, wd, ws, pad=None, out_type=None):
    r = len(shape)
    pad = pad or [[0, 0]] * r
    out = [(s + lo + hi - w) // st + 1 for s, w, st, (lo, hi) in zip(shape, wd, ws, pad)]
    return Signature.make(
        "reduce_window", [_t(shape, et), _t((), et)], [_t(out, out_type or bt)],
        {"window_dimensions": list(wd), "window_strides": list(ws),
         "base_dilations": [1] * r, "window_dilations": [1] * r,
         "padding": f"dense<{pad}> : tensor<{r}x2xi64>"},
        regions=(f"({bt}, {bt}) -> {body}",))


F16_IN_F32 = promoted_reduce((4, 6), ["f16"], ["f32"], "add(arg0, arg1)", [1])
SI8_IN_SI32 = promoted_reduce((3, 4), ["si8"], ["si32"], "add(arg1, arg0)", [1])
TWO_PROMOTED = promoted_reduce((2, 5), ["bf16", "ui8"], ["f32", "si16"],
                               "(add(arg0, arg2), add(arg1, arg3))", [1])

#: f16 rows whose sum needs more than f16's 11 bits (2048 + 1 rounds back to 2048 in f16)
#: and si8 rows whose sum leaves si8: the input type gives another value than Ei
F16_ROWS = np.array([[[2048, 1, 1, 1, 1, 1], [1024, 0.5, 0.25, 0.25, 3, -7],
                      [-2048, -1, -1, 3, 0, 5], [60000, 60000, -60000, 1, 1, 1]]], np.float16)
SI8_ROWS = np.array([[[100, 100, 100, -5], [-128, -128, 1, 2], [7, 8, 9, 10]]], np.int8)


# ---------------------------------------------------------------------------
# is_promotable and the rules
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("x, y, ok", [
    ("f16", "f32", True), ("f16", "bf16", True), ("f32", "f16", False), ("si8", "si32", True),
    ("si8", "ui8", True), ("si32", "si8", False), ("i1", "i1", True), ("i1", "si8", False),
    ("si8", "f32", False), ("f32", "complex<f32>", False),
    ("complex<f32>", "complex<f64>", True), ("complex<f64>", "complex<f32>", False)])
def test_is_promotable_is_the_spec_function(x, y, ok):
    # same kind (bool, integer, float, complex) and bitwidth(x) <= bitwidth(y); a
    # complex type by its parts' width
    assert is_promotable(x, y) is ok


def test_widenings_hold_every_value_of_the_input_type():
    assert widenings("f16") == ("f32", "f64")
    assert "f16" not in widenings("bf16") and "bf16" not in widenings("f16")
    assert widenings("ui8")[0] == "si16" and "si8" not in widenings("ui8")
    assert widenings("i1") == () and widenings("f64") == ()
    for t in ("f8E4M3FN", "f8E5M2", "bf16", "f16", "si4", "ui4", "si8"):
        et = element_type(t)
        if et.bits <= 8:
            from conformance.core.literals import from_bit_patterns
            xs = from_bit_patterns(np.arange(2 ** et.bits, dtype=np.uint64), et)
        else:
            xs = np.linspace(-60000 if et.is_float else et.int_min, 60000 if et.is_float
                             else et.int_max, 997).astype(et.dtype)
        for w in widenings(t):
            back = to_destination_type(to_destination_type(xs, w), t)
            same = (back == xs) | (np.isnan(back.astype(np.float64))
                                   & np.isnan(xs.astype(np.float64)))
            assert same.all(), (t, w)


def test_a_promoted_body_is_valid():
    assert violations(F16_IN_F32) == []
    assert violations(SI8_IN_SI32) == []
    assert violations(TWO_PROMOTED) == []


@pytest.mark.parametrize("sig, rule", [
    # a narrower body (its results of its own type, so only C6 breaks)
    (promoted_reduce((4, 6), ["f32"], ["f16"], "add(arg0, arg1)", [1]), "C6"),
    # a body of another kind
    (promoted_reduce((4, 6), ["f16"], ["si32"], "add(arg0, arg1)", [1]), "C6"),
    (promoted_reduce((4, 6), ["i1"], ["si8"], "add(arg0, arg1)", [1]), "C6"),
    (promoted_reduce((4, 6), ["si8"], ["f32"], "add(arg0, arg1)", [1]), "C6"),
])
def test_a_body_narrower_or_of_another_kind_breaks_c6(sig, rule):
    assert violations(sig) == [rule]


def test_results_of_another_type_than_the_body_break_c8():
    sig = Signature.make("reduce", ["tensor<4x6xf16>", "tensor<f16>"], ["tensor<4xf16>"],
                         {"dimensions": [1]}, regions=("(f32, f32) -> add(arg0, arg1)",))
    assert violations(sig) == ["C8"]


def test_init_values_of_the_body_type_break_c2():
    sig = Signature.make("reduce", ["tensor<4x6xf16>", "tensor<f32>"], ["tensor<4xf32>"],
                         {"dimensions": [1]}, regions=("(f32, f32) -> add(arg0, arg1)",))
    assert violations(sig) == ["C2"]


def test_the_new_rules_are_breakable_alone():
    spec = load_spec("reduce")
    assert {"C2", "C6", "C8"} <= set(breakable(spec))
    narrowed = candidates(spec, F16_IN_F32, "C6")
    assert narrowed and all(violations(s) == ["C6"] for s in narrowed)
    bodies = {s.regions[0].split(")")[0] for s in narrowed}
    # among them a body narrower than the input and one of another kind
    assert any("f8E" in b for b in bodies) and any("si32" in b for b in bodies)
    assert candidates(spec, F16_IN_F32, "C8")


def test_reduce_window_follows_the_same_rules():
    sig = promoted_window((2, 6), "f16", "f32", "add(arg0, arg1)", (1, 3), (1, 1))
    assert violations(sig) == []
    assert violations(promoted_window((2, 6), "f32", "f16", "add(arg0, arg1)", (1, 3),
                                      (1, 1))) == ["C13"]
    assert violations(promoted_window((2, 6), "f16", "si32", "add(arg0, arg1)", (1, 3),
                                      (1, 1))) == ["C13"]
    assert violations(promoted_window((2, 6), "f16", "f32", "add(arg0, arg1)", (1, 3),
                                      (1, 1), out_type="f16")) == ["C16"]
    spec = load_spec("reduce_window")
    assert {"C3", "C13", "C16"} <= set(breakable(spec))
    assert candidates(spec, sig, "C13") and candidates(spec, sig, "C16")


@pytest.mark.parametrize("op", ["reduce", "reduce_window"])
def test_the_generators_draw_promoted_bodies_and_the_plan_asks_for_one(op):
    from conformance.checking.plan import draw_plan
    spec = load_spec(op)
    for et in ("f16", "bf16", "si8"):
        plan = draw_plan(spec, {"E": et}, 0, "quick")
        promoted = []
        for s in plan:
            n = len(s.result_types)
            body = parse_region(s.regions[0]).arg_types[:n]
            if [t.element_type for t in s.input_types[:n]] != list(body):
                promoted.append(s)
                assert violations(s) == []
                assert [t.element_type for t in s.result_types] == list(body)
        assert promoted, et


# ---------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------

def test_oracle_reduces_the_converted_values_in_the_body_type():
    # 2048 + 1 is 2048 in f16 but 2049 in f32: the spec converts first
    (r,) = oracles.evaluate("reduce", [F16_ROWS[0], np.float16(0)], F16_IN_F32.attributes,
                            result_types=F16_IN_F32.result_types, regions=F16_IN_F32.regions)
    assert r.dtype == np.float32
    assert r.tolist() == [2053.0, 1021.0, -2042.0, 60003.0]
    (s,) = oracles.evaluate("reduce", [SI8_ROWS[0], np.int8(0)], SI8_IN_SI32.attributes,
                            result_types=SI8_IN_SI32.result_types, regions=SI8_IN_SI32.regions)
    assert s.dtype == np.int32 and s.tolist() == [295, -253, 34]


def test_init_values_drawn_as_the_identity_of_the_promoted_body():
    # maximum in si32 has the identity -2^31, which si8 lacks: its least value -128 is
    # the identity on every value converted from si8
    sig = promoted_reduce((3, 4), ["si8"], ["si32"], "maximum(arg0, arg1)", [1])
    e = identity_values(sig, load_spec("reduce"), 1, 0, element_type("si8"), (8,),
                        np.random.default_rng(0), "body")
    assert e.dtype == np.int8 and (e[:3] == -128).all()
    sig = promoted_reduce((3, 4), ["f16"], ["f32"], "maximum(arg0, arg1)", [1])
    e = identity_values(sig, load_spec("reduce"), 1, 0, element_type("f16"), (8,),
                        np.random.default_rng(0), "body")
    assert e.dtype == np.float16 and np.isneginf(e[:3]).all()


# ---------------------------------------------------------------------------
# Planted backends
# ---------------------------------------------------------------------------

class PromotedTree(Backend):
    """A reduction folded with the tree ``order``. ``narrow``: the realistic bug, the
    body run at the inputs' types (every partial result rounded or wrapped to them) and
    only the result converted to Ei; otherwise the spec's reading, the values converted
    to Ei first."""

    isolate = False

    def __init__(self, order="left", narrow=False, name="promoted"):
        self.order, self.narrow, self.name = order, narrow, name
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        n = len(sig.result_types)
        (body,) = sig.regions
        types = parse_region(body).arg_types
        if self.narrow:
            inputs = [t.element_type.name for t in sig.input_types[:n]]
            body = retyped(body, positions={**{k: t for k, t in enumerate(inputs)},
                                            **{n + k: t for k, t in enumerate(inputs)}})

        def run(args):
            xs, es = [np.asarray(x) for x in args[:n]], [np.asarray(e) for e in args[n:]]
            if not self.narrow:
                xs = [to_destination_type(x, t) for x, t in zip(xs, types[:n])]
                es = [to_destination_type(e, t) for e, t in zip(es, types[n:])]
            g = reduction.geometry(sig.op, xs[0].shape, sig.attributes)
            leaves = [g.leaves(x, e) for x, e in zip(xs, es)]
            with np.errstate(all="ignore"):
                out = fold(body, leaves, es, self.order)
            return [np.asarray(o).astype(t.element_type.dtype).reshape(t.shape)
                    for o, t in zip(out, sig.result_types)]
        return run


def verdict_counts(backend, sig, stacked):
    check = SignatureCheck(load_spec(sig.op), sig, [backend])
    check.compile()
    assert not check.failed and not check.unsupported, (check.failed, check.unsupported)
    return check.run_batch(0, stacked).results[backend.name].verdict.counts()


CASES = [
    (F16_IN_F32, [F16_ROWS, np.zeros(1, np.float16)]),
    (SI8_IN_SI32, [SI8_ROWS, np.zeros(1, np.int8)]),
    (TWO_PROMOTED, [np.array([[[256, 1, 1, 1, 0.5], [3, 4, 5, 6, 7]]], "bfloat16"),
                    np.array([[[200, 200, 200, 1, 0], [9, 9, 9, 9, 9]]], np.uint8),
                    np.zeros(1, "bfloat16"), np.zeros(1, np.uint8)]),
    (promoted_window((2, 6), "f16", "f32", "add(arg0, arg1)", (1, 3), (1, 1)),
     [F16_ROWS[:, :2], np.zeros(1, np.float16)]),
    # padding with the init value (2047 in f16), converted with the window: 2047 + 2048 +
    # 1 is 4096 in f16 and 4096 in f32 too, but 2047 + 1 + 1 is 2049 only in f32
    (promoted_window((2, 6), "f16", "f32", "add(arg0, arg1)", (1, 3), (1, 2),
                     pad=[[0, 0], [2, 1]]),
     [F16_ROWS[:, :2], np.full(1, 2047, np.float16)]),
    (promoted_window((3, 4), "si8", "si32", "add(arg0, arg1)", (2, 2), (1, 2)),
     [SI8_ROWS, np.zeros(1, np.int8)]),
]


def _stacked(sig, arrays):
    import ml_dtypes  # noqa: F401  (the "bfloat16" dtype name)
    return [np.asarray(a).astype(t.element_type.dtype) for a, t in zip(arrays, sig.input_types)]


@pytest.mark.parametrize("sig, arrays", CASES, ids=lambda x: getattr(x, "op", None))
@pytest.mark.parametrize("order", ["left", "right", "reversed", "pairwise"])
def test_another_legal_tree_in_the_body_type_passes(sig, arrays, order):
    stacked = _stacked(sig, arrays)
    counts = verdict_counts(PromotedTree(order), sig, stacked)
    assert set(counts) == {"pass"}, counts


@pytest.mark.parametrize("sig, arrays", CASES, ids=lambda x: getattr(x, "op", None))
def test_reducing_in_the_input_type_fails(sig, arrays):
    stacked = _stacked(sig, arrays)
    counts = verdict_counts(PromotedTree("left", narrow=True), sig, stacked)
    assert counts.get("pass", 0) < sum(counts.values()), counts
    assert set(counts) - {"pass"} <= {"value", "bound"}, counts


def test_reducing_in_the_input_type_fails_on_generated_values_too():
    """The plan's own value batches (exact-value sums and the default draws) catch a
    backend that ignores the promotion, on a promoted f16 sum over 16 leaves."""
    from conformance.checking.plan import batch_for
    spec = load_spec("reduce")
    sig = promoted_reduce((8, 16), ["f16"], ["f32"], "add(arg0, arg1)", [1])
    stacked = batch_for(0, "default", spec, "f16", 0, 0, sig)
    good = verdict_counts(PromotedTree("pairwise"), sig, stacked)
    bad = verdict_counts(PromotedTree("left", narrow=True), sig, stacked)
    assert set(good) <= {"pass"}, good
    assert bad.get("pass", 0) < sum(bad.values()), bad


# ---------------------------------------------------------------------------
# all_reduce (stablehlo-spec-2026-08.md "### all_reduce" C5, C7): the group's values
# converted to the computation's type E
# ---------------------------------------------------------------------------

def promoted_all_reduce(et, bt, out=None, body="add(arg0, arg1)", groups=((0, 1, 2),)):
    return Signature.make(
        "all_reduce", [f"tensor<4x{et}>"], [f"tensor<4x{out or bt}>"],
        {"replica_groups": [list(g) for g in groups], "channel_id": 0,
         "use_global_device_ids": False},
        regions=(f"({bt}, {bt}) -> {body}",), num_replicas=3, num_partitions=1)


AR_F16 = promoted_all_reduce("f16", "f32")
#: per process: 2048 + 1 + 1 is 2050 in f32, 2048 or 2050 in f16 by the order; 60000 * 3
#: overflows f16 but not f32
AR_F16_VALUES = [np.array([[[2048, 1, 60000, 0.5], [1, 1, 60000, 0.25], [1, 1, 60000, 3]]],
                          np.float16)]


def test_all_reduce_follows_the_newer_rules():
    assert violations(AR_F16) == []
    assert violations(promoted_all_reduce("f32", "f16")) == ["C5"]
    assert violations(promoted_all_reduce("si8", "f32")) == ["C5"]
    assert violations(promoted_all_reduce("f16", "f32", out="f16")) == ["C7"]
    spec = load_spec("all_reduce")
    assert {"C5", "C7"} <= set(breakable(spec))
    assert candidates(spec, AR_F16, "C5") and candidates(spec, AR_F16, "C7")


def test_all_reduce_oracle_reduces_the_converted_values():
    (r,) = oracles.evaluate_batch(AR_F16, AR_F16_VALUES)
    assert r.dtype == np.float32
    assert r[0].tolist() == [[2050.0, 3.0, 180000.0, 3.75]] * 3


class _GroupOrder(Backend):
    """all_reduce through the oracle with each replica group's order reversed (the sum in
    another order, within the same bound); ``wide``, with the computation run at f64 and
    the results rounded once to E (more precision than E, within the bound: reduce_scatter,
    whose group order also says which part each process keeps); or, ``narrow``, with the
    computation run at the operands' type and only the results converted to E (the bug)."""

    isolate = False

    def __init__(self, narrow=False, wide=False):
        self.narrow, self.wide = narrow, wide
        self.name = "narrow" if narrow else ("wide" if wide else "reversed-groups")
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        if self.narrow:
            t = sig.input_types[0].element_type.name
            narrow_results = [f"tensor<{'x'.join(map(str, r.shape))}x{t}>"
                              for r in sig.result_types]
            run_sig = Signature.make(sig.op, sig.input_types, narrow_results, sig.attributes,
                                     regions=(retyped(sig.regions[0], positions={0: t, 1: t}),),
                                     num_replicas=sig.num_replicas,
                                     num_partitions=sig.num_partitions)
        elif self.wide:
            wide = [f"tensor<{'x'.join(map(str, r.shape))}xf64>" for r in sig.result_types]
            run_sig = Signature.make(sig.op, sig.input_types, wide, sig.attributes,
                                     regions=(retyped(sig.regions[0],
                                                      positions={0: "f64", 1: "f64"}),),
                                     num_replicas=sig.num_replicas,
                                     num_partitions=sig.num_partitions)
        else:
            groups = [list(reversed(g)) for g in sig.attributes["replica_groups"]]
            run_sig = Signature.make(sig.op, sig.input_types, sig.result_types,
                                     {**sig.attributes, "replica_groups": groups},
                                     regions=sig.regions, num_replicas=sig.num_replicas,
                                     num_partitions=sig.num_partitions)

        def run(inputs):
            out = oracles.evaluate_batch(run_sig, [np.asarray(x)[None] for x in inputs])
            return [np.asarray(o[0]).astype(t.element_type.dtype)
                    for o, t in zip(out, sig.result_types)]
        return run


def test_all_reduce_in_another_group_order_in_e_passes_and_in_the_operand_type_fails():
    good = verdict_counts(_GroupOrder(), AR_F16, AR_F16_VALUES)
    assert set(good) == {"pass"}, good
    bad = verdict_counts(_GroupOrder(narrow=True), AR_F16, AR_F16_VALUES)
    assert bad.get("pass", 0) < sum(bad.values()), bad


# ---------------------------------------------------------------------------
# reduce_scatter (stablehlo-spec-2026-08.md "### reduce_scatter" C7, C8, C9)
# ---------------------------------------------------------------------------

def promoted_reduce_scatter(et, bt, out=None):
    return Signature.make(
        "reduce_scatter", [f"tensor<6x{et}>"], [f"tensor<2x{out or bt}>"],
        {"scatter_dimension": 0, "replica_groups": [[0, 1, 2]], "channel_id": 0,
         "use_global_device_ids": False},
        regions=(f"({bt}, {bt}) -> add(arg0, arg1)",), num_replicas=3, num_partitions=1)


RS_F16 = promoted_reduce_scatter("f16", "f32")
RS_F16_VALUES = [np.array([[[2048, 1, 60000, 0.5, 7, 8], [1, 1, 60000, 0.25, 7, 8],
                            [1, 1, 60000, 3, 7, 8]]], np.float16)]


def test_reduce_scatter_follows_the_newer_rules():
    assert violations(RS_F16) == []
    assert violations(promoted_reduce_scatter("f32", "f16")) == ["C7"]
    assert violations(promoted_reduce_scatter("ui8", "f32")) == ["C7"]
    assert violations(promoted_reduce_scatter("f16", "f32", out="f16")) == ["C9"]
    spec = load_spec("reduce_scatter")
    assert {"C7", "C9"} <= set(breakable(spec))
    assert candidates(spec, RS_F16, "C7") and candidates(spec, RS_F16, "C9")


def test_reduce_scatter_oracle_reduces_the_converted_values():
    (r,) = oracles.evaluate_batch(RS_F16, RS_F16_VALUES)
    assert r.dtype == np.float32
    assert r[0].tolist() == [[2050.0, 3.0], [180000.0, 3.75], [21.0, 24.0]]


def test_reduce_scatter_in_more_precision_passes_and_in_the_operand_type_fails():
    good = verdict_counts(_GroupOrder(wide=True), RS_F16, RS_F16_VALUES)
    assert set(good) == {"pass"}, good
    bad = verdict_counts(_GroupOrder(narrow=True), RS_F16, RS_F16_VALUES)
    assert bad.get("pass", 0) < sum(bad.values()), bad
