"""A scatter whose update computation, and a select_and_scatter whose scatter, computes in
a wider type than the operands (stablehlo-spec-2026-08.md "### scatter" C23, C25:
``updates_converted = to_destination_type(updates..., ...)`` combined with results of
type Ei; "### select_and_scatter" C10, C12: ``reduce([source_values], [init_value], [0],
scatter)`` with a promoted body, so the source values and the init value converted to E;
``select`` stays at the operand's type, C9): the rules, the generators, the oracle and the
verdicts against a backend that applies the computation in the operands' type (must
fail) and one that applies it in another legal order in Ei (must pass)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import oracles
from conformance.core.case import Signature
from conformance.core.promotion import to_destination_type
from conformance.generators.invalid import breakable, candidates
from conformance.oracles import reduction
from conformance.specs import load_spec
from conformance.specs.regions import parse as parse_region
from conformance.specs.validity import violations

from planted import AccumulatesInOperandType, OracleBackend, ScatterReversedSchedule
from test_reduction import fold


def promoted_scatter(et, bt, out=None, body="add(arg0, arg1)", size=4, updates=3):
    """A 1-D scatter of ``updates`` single elements (indices ``updates`` x 1)."""
    return Signature.make(
        "scatter", [f"tensor<{size}x{et}>", f"tensor<{updates}x1xsi32>",
                    f"tensor<{updates}x{et}>"], [f"tensor<{size}x{out or bt}>"],
        {"update_window_dims": [], "inserted_window_dims": [0], "input_batching_dims": [],
         "scatter_indices_batching_dims": [], "scatter_dims_to_operand_dims": [0],
         "index_vector_dim": 1, "indices_are_sorted": False, "unique_indices": False},
        regions=(f"({bt}, {bt}) -> {body}",))


def promoted_sas(et, bt, out=None, select_type=None, size=4, window=2, stride=2):
    st = select_type or et
    ctype = "FLOAT" if st.startswith(("f", "bf")) else "SIGNED"
    windows = (size - window) // stride + 1
    return Signature.make(
        "select_and_scatter", [f"tensor<{size}x{et}>", f"tensor<{windows}x{et}>",
                               f"tensor<{et}>"], [f"tensor<{size}x{out or bt}>"],
        {"window_dimensions": [window], "window_strides": [stride],
         "padding": "dense<[[0, 0]]> : tensor<1x2xi64>"},
        regions=(f"({st}, {st}) -> compare(arg0, arg1, 'GE', '{ctype}')",
                 f"({bt}, {bt}) -> add(arg0, arg1)"))


SC_F16 = promoted_scatter("f16", "f32")
SC_SI8 = promoted_scatter("si8", "si32")
SAS_F16 = promoted_sas("f16", "f32", window=3, stride=1)
SAS_SI8 = promoted_sas("si8", "si32", window=3, stride=1)

#: operand [2048, 0, 1, 2] (f16), three updates at 0, 0, 3: 2048 + 1 + 1 is 2050 in f32
#: and 2048 in f16 (each + 1 rounds back to even); si8 100 + 100 + 100 is 300 in si32 and
#: wraps in si8
SC_F16_VALUES = [np.array([[2048, 0, 1, 2]], np.float16), np.array([[[0], [0], [3]]], np.int32),
                 np.array([[1, 1, 5]], np.float16)]
SC_SI8_VALUES = [np.array([[100, 0, 1, 2]], np.int8), np.array([[[0], [0], [3]]], np.int32),
                 np.array([[100, 100, 5]], np.int8)]
#: two overlapping windows of three elements that both select element 2: 2048 + 1 is 2049
#: in f32, 2048 in f16; 100 + 100 is 200 in si32 and wraps in si8. (The init value 0, the
#: sum's identity: with another one, an integer sum is judged modulo 2^bits over every
#: count of init values, which a wrapped si8 sum can meet.)
SAS_F16_VALUES = [np.array([[1, 2, 9, 0]], np.float16), np.array([[2048, 1]], np.float16),
                  np.array([0], np.float16)]
SAS_SI8_VALUES = [np.array([[1, 2, 9, 0]], np.int8), np.array([[100, 100]], np.int8),
                  np.array([0], np.int8)]


# ---------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------

def test_scatter_follows_the_newer_rules():
    assert violations(SC_F16) == [] and violations(SC_SI8) == []
    assert violations(promoted_scatter("ui8", "si16")) == []
    # a narrower computation, one of another kind (C23)
    assert violations(promoted_scatter("f32", "f16")) == ["C23"]
    assert violations(promoted_scatter("si8", "f32")) == ["C23"]
    assert violations(promoted_scatter("i1", "si8")) == ["C23"]
    # results of the operands' type, not Ei (C25)
    assert violations(promoted_scatter("f16", "f32", out="f16")) == ["C25"]
    # updates of Ei, not the inputs' type (C6 still ties them)
    sig = Signature.make("scatter", ["tensor<4xf16>", "tensor<3x1xsi32>", "tensor<3xf32>"],
                         ["tensor<4xf32>"], SC_F16.attributes,
                         regions=("(f32, f32) -> add(arg0, arg1)",))
    assert violations(sig) == ["C6"]
    spec = load_spec("scatter")
    assert {"C23", "C25"} <= set(breakable(spec))
    for rule in ("C23", "C25"):
        found = candidates(spec, SC_F16, rule)
        assert found and all(violations(s) == [rule] for s in found), rule


def test_select_and_scatter_follows_the_newer_rules():
    assert violations(SAS_F16) == [] and violations(SAS_SI8) == []
    assert violations(promoted_sas("f32", "f16")) == ["C10"]
    assert violations(promoted_sas("f16", "si32")) == ["C10"]
    assert violations(promoted_sas("f16", "f32", out="f16")) == ["C12"]
    # only the scatter may be promoted: select compares at the operand's type (C9)
    assert violations(promoted_sas("f16", "f32", select_type="f32")) == ["C9"]
    spec = load_spec("select_and_scatter")
    # the newer text's numbering: C1 .. C12, each breakable alone
    assert set(breakable(spec)) == {f"C{i}" for i in range(1, 13)}
    for rule in ("C4", "C6", "C8", "C10", "C11", "C12"):
        found = candidates(spec, SAS_F16, rule)
        assert found and all(violations(s) == [rule] for s in found), rule


@pytest.mark.parametrize("op, depth", [("scatter", "default"), ("select_and_scatter", "quick")])
def test_the_generators_draw_promoted_computations_valid_by_construction(op, depth):
    """The coverage target asks for one in every plan of f16, bf16 and si8 that has room
    for it (scatter's quick plans of floats hold two signatures, for its two other
    targets: its si8 plan has room, its float plans have it at default depth)."""
    from conformance.checking.plan import draw_plan
    spec = load_spec(op)
    for et, d in [("f16", depth), ("bf16", depth), ("si8", depth), ("si8", "quick")]:
        promoted = []
        for s in draw_plan(spec, {"E": et}, 0, d):
            n = len(s.result_types)
            body = parse_region(s.regions[-1]).arg_types[:n]
            if [t.element_type for t in s.input_types[:n]] != list(body):
                promoted.append(s)
                assert violations(s) == [], s.key()
                assert [t.element_type for t in s.result_types] == list(body)
        assert promoted, (op, et, d)


# ---------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------

def test_scatter_oracle_applies_the_updates_in_the_computation_type():
    (r,) = oracles.evaluate_batch(SC_F16, SC_F16_VALUES)
    assert r.dtype == np.float32 and r[0].tolist() == [2050.0, 0.0, 1.0, 7.0]
    (s,) = oracles.evaluate_batch(SC_SI8, SC_SI8_VALUES)
    assert s.dtype == np.int32 and s[0].tolist() == [300, 0, 1, 7]


def test_select_and_scatter_oracle_scatters_the_converted_source_values():
    (r,) = oracles.evaluate_batch(SAS_F16, SAS_F16_VALUES)
    assert r.dtype == np.float32 and r[0].tolist() == [0, 0, 2049.0, 0]
    (s,) = oracles.evaluate_batch(SAS_SI8, SAS_SI8_VALUES)
    assert s.dtype == np.int32 and s[0].tolist() == [0, 0, 200, 0]
    # a non-identity init value is converted too: 100 + 100 + 100 in si32
    (s,) = oracles.evaluate_batch(SAS_SI8, SAS_SI8_VALUES[:2] + [np.array([100], np.int8)])
    assert s[0].tolist() == [100, 100, 300, 100]


# ---------------------------------------------------------------------------
# Planted backends
# ---------------------------------------------------------------------------

class SasTree(OracleBackend):
    """select_and_scatter with the oracle's selection and each element's source values
    folded in the tree ``order`` in the scatter's type E (the values converted first, as
    the spec's reduce does): another tree the spec allows."""

    def __init__(self, order):
        self.order, self.name = order, f"sas-{order}"
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        select, scatter = sig.regions
        (t,) = parse_region(scatter).arg_types[:1]

        def run(inputs):
            operand, source, init = (np.asarray(x) for x in inputs)
            source, init = to_destination_type(source, t), to_destination_type(init, t)
            g = reduction.geometry("select_and_scatter", operand.shape,
                                   {**sig.attributes, "operand": operand, "select": select})
            with np.errstate(all="ignore"):
                (out,) = fold(scatter, [g.leaves(source, init)], [init], self.order)
            return [np.asarray(out).astype(sig.result_types[0].element_type.dtype)]
        return run


from test_reduction_promotion import verdict_counts as counts  # noqa: E402


@pytest.mark.parametrize("sig, values", [(SC_F16, SC_F16_VALUES), (SC_SI8, SC_SI8_VALUES),
                                         (SAS_F16, SAS_F16_VALUES), (SAS_SI8, SAS_SI8_VALUES)],
                         ids=["scatter-f16", "scatter-si8", "sas-f16", "sas-si8"])
def test_accumulating_in_the_operand_type_fails(sig, values):
    got = counts(AccumulatesInOperandType(), sig, values)
    assert got.get("pass", 0) < sum(got.values()), got
    assert set(got) - {"pass"} <= {"value", "bound"}, got


#: f16 updates whose sum in f32 depends on their order: 60000 + 2^-9 is a tie that
#: rounds back to 60000 (even), 60000 + 2^-8 is exact and odd, so the next 2^-9 ties up
SC_ORDER_VALUES = [np.array([[60000, 0, 0, 0]], np.float16),
                   np.array([[[0], [0], [0]]], np.int32),
                   np.array([[2 ** -9, 2 ** -9, 2 ** -8]], np.float16)]


def test_scatter_updates_in_another_order_in_ei_pass():
    # the reversed schedule gives another value than the oracle's here, one the spec allows
    (want,) = oracles.evaluate_batch(SC_F16, SC_ORDER_VALUES)
    got = ScatterReversedSchedule().compile(SC_F16)([v[0] for v in SC_ORDER_VALUES])
    assert want[0, 0] != got[0][0]
    for values in (SC_F16_VALUES, SC_ORDER_VALUES):
        assert set(counts(ScatterReversedSchedule(), SC_F16, values)) == {"pass"}
    assert set(counts(ScatterReversedSchedule(), SC_SI8, SC_SI8_VALUES)) == {"pass"}


@pytest.mark.parametrize("order", ["left", "right", "reversed", "pairwise"])
def test_select_and_scatter_in_another_tree_in_e_passes(order):
    for sig, values in ((SAS_F16, SAS_F16_VALUES), (SAS_SI8, SAS_SI8_VALUES)):
        assert set(counts(SasTree(order), sig, values)) == {"pass"}, sig.key()


@pytest.mark.parametrize("op, depth", [("scatter", "quick"), ("select_and_scatter", "default")])
def test_the_plans_catch_accumulating_in_the_operand_type(op, depth):
    """On the plans' own promoted signatures and value batches: the bug fails somewhere,
    the legal variant passes everywhere. (select_and_scatter's quick plans scatter one
    source value per element, where the two agree: its default plans tell.)"""
    from conformance.checking.plan import batch_for, draw_plan
    spec = load_spec(op)
    legal = ScatterReversedSchedule() if op == "scatter" else SasTree("reversed")
    caught = 0
    for et in ("f16", "bf16", "si8"):
        for s in draw_plan(spec, {"E": et}, 0, depth):
            n = len(s.result_types)
            if [t.element_type for t in s.input_types[:n]] == \
                    list(parse_region(s.regions[-1]).arg_types[:n]):
                continue
            stacked = batch_for(0, depth, spec, et, 0, 0, s)
            good = counts(legal, s, stacked)
            assert set(good) <= {"pass"}, (s.key(), good)
            bad = counts(AccumulatesInOperandType(), s, stacked)
            caught += bad.get("pass", 0) < sum(bad.values())
    assert caught, op
