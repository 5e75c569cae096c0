"""if, case and while (issue 16): region programs as data, the oracle's branch and loop
semantics, the jax/xla/interpreter paths, and the verdicts with planted backends (a
realistic bug fails, a difference the spec allows passes)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from conformance import oracles
from conformance.core import region_program as rp
from conformance.core.case import Case, Signature
from conformance.core.program import Operation
from conformance.core.types import tensor_type
from conformance.mlir.emitter import module_text, parse
from conformance.generators import canonical
from conformance.oracles import control_flow as cf
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations

import planted_control_flow as planted
from planted import verdict_counts

ROOT = Path(__file__).resolve().parents[1]


def _t(text):
    return tensor_type(text)


def _unary(op, t, name="c0"):
    return Operation(Signature.make(op, [_t(t)], [_t(t)]), (name,), "v0")


def _branch(t, ops=(), results=("c0",), ncap=1):
    return rp.make([(f"c{i}", t) for i in range(ncap)], list(ops), list(results), block=0)


def _case_sig(branches, t="tensor<8xf32>", ncap=1):
    return Signature.make("case", ["tensor<si32>"] + [t] * ncap,
                          [_t(x) for x in rp.parse(branches[0]).result_types],
                          regions=tuple(branches))


def _counts(backend, sig, batches=4):
    return verdict_counts(backend, sig, sig.input_types[-1].element_type.name, batches)


# -- region programs as data --------------------------------------------------------------

def test_a_region_program_round_trips_and_reads_well():
    spec = load_spec("while")
    sig = canonical(spec, {"E": "f32"})
    for text in sig.regions:
        body = rp.parse(text)
        assert rp.text(body) == text
        assert body.block == len(sig.input_types) and body.capture_types == ()
        assert rp.parse(rp.text(rp.Body(body.program, body.block))) == body
    cond, body = (rp.parse(t) for t in sig.regions)
    assert [str(t) for t in cond.result_types] == ["tensor<i1>"]
    assert list(body.result_types) == list(sig.input_types)
    shown = body.describe()
    assert shown.startswith("(arg0: tensor<i32>, arg1: tensor<i32>") and "return" in shown


def test_a_malformed_region_program_is_one_line_error():
    with pytest.raises(rp.RegionProgramError) as e:
        rp.parse('program {"arguments":[],"block":0,"operations":[],"results":["x"]}')
    assert "\n" not in str(e.value) and "x" in str(e.value)
    with pytest.raises(rp.RegionProgramError):
        rp.parse("program {not json")


def test_generated_bodies_have_several_ops_results_and_shapes():
    ops, results, shapes = set(), set(), set()
    spec = load_spec("if")
    from conformance.generators.control_flow import branches, exact
    for seed in range(30):
        for text in branches(seed, 2, [_t("tensor<2x3xf32>"), _t("tensor<si32>")], 2):
            b = rp.parse(text)
            ops |= set(b.program.ops())
            results.add(len(b.program.results))
            shapes |= {t.shape for t in b.result_types}
            for o in b.program.operations:
                assert not violations(o.signature), o.signature.key()
                assert exact(o.signature), o.signature.key()
    assert len(ops) >= 6 and results == {2} and len(shapes) >= 2, (ops, shapes)
    assert spec.name == "if"


def test_a_reduce_in_a_body_starts_from_its_body_identity():
    """A body's reduce gets its body's identity as init value, and a body without one
    is not drawn: any other init (an integer sum's 3) makes the number of init values in
    the tree (implementation-defined, 003 "### reduce") change the result, and every
    element is masked: 12 of 110 quick if/case/call/composite signatures checked
    nothing that way."""
    from conformance.generators import control_flow as cf
    from conformance.generators.programs import InvalidStep
    from conformance.generators.reduction import identity
    from conformance.oracles import evaluate
    seen = 0
    for seed in range(40):
        builder = cf._start(np.random.default_rng(seed), [
            _t("tensor<2x3xsi32>"), _t("tensor<f32>"), _t("tensor<3xui8>")])
        for anchor in ("arg0", "arg1", "arg2"):
            try:
                builder.spec_step("reduce", anchor, tries=4)
            except InvalidStep:
                pass
        made = {r: o for o in builder.operations for r in o.results}
        for o in builder.operations:
            if o.op != "reduce":
                continue
            n = len(o.operands) // 2
            ident = identity(o.signature.regions[0])
            assert ident is not None, (seed, o.signature.key())
            for k, v in enumerate(o.operands[n:]):
                c = made.get(v)
                assert c is not None and c.op == "constant", (seed, o.signature.key())
                value = evaluate("constant", [], c.signature.attributes,
                                 result_types=c.signature.result_types)[0]
                assert np.array_equal(value, np.full(value.shape, ident[k]), equal_nan=True) \
                    and np.all(np.signbit(value) == np.signbit(ident[k])), (seed, value)
                seen += 1
    assert seen >= 20, seen


# -- the oracle -------------------------------------------------------------------------

def test_case_sends_negative_and_past_the_end_indices_to_the_last_branch():
    t = "tensor<2xf32>"
    brs = [_branch(t, [_unary("negate", t)], ["v0"]), _branch(t, [_unary("abs", t)], ["v0"]),
           _branch(t)]
    x = np.array([-1.5, 2.0], np.float32)
    sig = _case_sig(brs, t)
    for index, want in [(0, -x), (1, np.abs(x)), (2, x), (-1, x), (3, x),
                        (np.iinfo(np.int32).min, x), (np.iinfo(np.int32).max, x)]:
        (got,) = oracles.evaluate("case", [np.int32(index), x], result_types=sig.result_types,
                                  regions=sig.regions)
        np.testing.assert_array_equal(got, want, err_msg=str(index))
    one = _case_sig([_branch(t, [_unary("negate", t)], ["v0"])], t)
    for index in (-5, 0, 7):
        (got,) = oracles.evaluate("case", [np.int32(index), x], result_types=one.result_types,
                                  regions=one.regions)
        np.testing.assert_array_equal(got, -x)


def test_while_trip_counts_zero_one_and_many_by_construction():
    spec = load_spec("while")
    sig = canonical(spec, {"E": "si32"})
    stacked = batch_for(0, "default", spec, "si32", 0, 0, sig)
    starts, bounds = (np.asarray(x).astype(np.int64) for x in stacked[:2])
    trips = np.maximum(bounds - starts, 0)
    assert {0, 1} <= set(trips.tolist()) and trips.max() >= 5
    assert (bounds < starts).any()                  # a bound below the counter: 0 trips
    for b in range(12):
        out = oracles.evaluate_case(Case(sig, tuple(x[b] for x in stacked)))
        assert int(out[0]) == starts[b] + trips[b]     # the counter counted the trips
        assert int(out[1]) == bounds[b]


def test_an_endless_loop_stops_the_oracle_with_an_error(monkeypatch):
    s = "tensor<si32>"
    cond = rp.make([("a", s)], [Operation(Signature.make(
        "compare", [_t(s), _t(s)], [_t("tensor<i1>")],
        {"comparison_direction": "EQ", "compare_type": "SIGNED"}), ("a", "a"), "v0")], ["v0"])
    body = rp.make([("a", s)], [], ["a"])
    monkeypatch.setattr(cf, "MAX_TRIPS", 50)
    with pytest.raises(oracles.OracleError, match="did not end"):
        oracles.evaluate("while", [np.int32(0)], result_types=[s], regions=(cond, body))


def test_masks_follow_overflow_through_iterations():
    s = "tensor<si32>"
    spec = load_spec("while")
    ex = next(e for e in __import__("conformance.checking.golden", fromlist=["x"]).examples(spec)
              if e.name == "spec example")
    cond, body = ex.case.signature.regions
    # x doubles each trip: overflows at some trip; masked from there on
    double = rp.make([("arg0", s), ("arg1", s), ("arg2", s)], [
        Operation(Signature.make("constant", [], [_t(s)], {"value": "dense<1> : tensor<i32>"}),
                  (), "v0"),
        Operation(Signature.make("add", [_t(s), _t(s)], [_t(s)]), ("arg0", "v0"), "v1"),
        Operation(Signature.make("add", [_t(s), _t(s)], [_t(s)]), ("arg2", "arg2"), "v2")],
        ["v1", "arg1", "v2"])
    cond3 = rp.make([("arg0", s), ("arg1", s), ("arg2", s)],
                    rp.parse(cond).program.operations, ["v0"])
    ins = [np.array([0, 0]), np.array([3, 40]), np.array([5, 5])]
    _, masks = cf.evaluate_batched("while", [x.astype(np.int32) for x in ins], [cond3, double])
    assert masks[2].tolist() == [False, True] and not masks[0].any()


# -- the backends run the emitted text ------------------------------------------------------

@pytest.mark.parametrize("backend", ["jax", "xla", "interpreter"])
@pytest.mark.parametrize("op", ["if", "case", "while"])
def test_backends_run_generated_control_flow(backend, op):
    from conformance.backends import Unsupported, get_backend
    try:
        b = get_backend(backend)
    except Unsupported as e:
        pytest.skip(str(e))
    spec = load_spec(op)
    sig = canonical(spec, {"E": "f32"})
    parse(module_text(sig))
    counts = _counts(b, sig, batches=1)
    assert set(counts) <= {"pass", "subnormal_flush"}, counts


# -- verdicts: a realistic bug fails, an allowed difference passes -------------------------

def test_case_that_clamps_a_negative_index_to_branch_0_fails():
    t = "tensor<8xf32>"
    sig = _case_sig([_branch(t, [_unary("negate", t)], ["v0"]), _branch(t)], t)
    assert not violations(sig)
    assert _counts(planted.CaseClampsNegativeIndex(), sig).get("value", 0) > 0
    assert set(_counts(planted._Oracle(), sig)) == {"pass"}


def test_while_one_iteration_too_many_fails():
    spec = load_spec("while")
    for et in ("si32", "f32"):
        sig = canonical(spec, {"E": et})
        assert _counts(planted.WhileOneIterationTooMany(), sig).get("value", 0) > 0


def test_another_nan_payload_and_other_values_where_the_spec_leaves_them_open_pass():
    t = "tensor<16xsi32>"
    add = Operation(Signature.make("add", [_t(t), _t(t)], [_t(t)]), ("c0", "c0"), "v0")
    sig = _case_sig([_branch(t, [add], ["v0"]), _branch(t)], t)
    backend = planted.ChangesAllowed()
    # the change is real: some element differs from the oracle's (an overflow of add)
    spec = load_spec("case")
    stacked = batch_for(0, "default", spec, "si32", 0, 0, sig)
    exe = backend.compile(sig)
    cases = [Case(sig, tuple(x[b] for x in stacked)) for b in range(len(stacked[0]))]
    assert any((exe(list(c.inputs))[0] != oracles.evaluate_case(c)[0]).any() for c in cases)
    assert set(_counts(backend, sig)) == {"pass"}
    f = "tensor<8xf32>"
    nan_sig = _case_sig([_branch(f, [_unary("negate", f)], ["v0"]), _branch(f)], f)
    assert set(_counts(backend, nan_sig)) == {"pass"}
    wsig = canonical(load_spec("while"), {"E": "f32"})
    assert set(_counts(backend, wsig)) <= {"pass"}


def test_a_while_that_never_ends_costs_one_timeout_and_the_run_goes_on(tmp_path,
                                                                        monkeypatch):
    from conformance.apps.cli import main
    from conformance.core.results import read_results
    from conformance.checking.stream import MAX_HANGS_PER_OP
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    main(["run", "--backend", "planted_control_flow:WhileUntilEqual", "--ops", "while,if",
          "--types", "si32", "--depth", "quick", "--timeout", "1", "--no-invalid",
          "--no-examples", "--no-probes", "--no-replay", "--no-progress", "--out",
          str(tmp_path)])
    recs = list(read_results(tmp_path / "results.jsonl"))
    assert recs[-1]["kind"] == "end"
    sigs = [r for r in recs if r["kind"] == "signature"]
    assert all(r["outcome"] == "pass" for r in sigs if r["op"] == "if")
    hung = [r for r in sigs if r["op"] == "while" and r["outcome"] == "timeout"]
    assert 0 < len(hung) <= MAX_HANGS_PER_OP
    saved = [r for r in recs if r["kind"] == "divergence" and r["class"] == "timeout"]
    assert len(saved) == 1                       # the one case that hangs, bisected
    counter, bound = (int(np.asarray(x["literal"]).reshape(-1)[0])
                      for x in saved[0]["case"]["inputs"][:2])
    assert bound < counter                       # counter != bound never becomes false


def test_the_report_shows_region_programs_readably():
    from conformance.reports.html import fmt_region
    sig = canonical(load_spec("case"), {"E": "si32"})
    shown = fmt_region(sig.regions[0])
    assert shown.startswith("(captured: ") and "return" in shown and '"operations"' not in shown
    assert fmt_region("(f32, f32) -> add(arg0, arg1)") == "(f32, f32) -> add(arg0, arg1)"


class _UlpsOff(planted._Oracle):
    """The oracle with every finite normal f32 result ``k`` ULPs up."""

    def __init__(self, k):
        self.k, self.name = k, f"ulps-{k}"
        super().__init__()

    def compile(self, sig):
        inner = super().compile(sig)

        def run(inputs):
            out = []
            for x in inner(inputs):
                x = np.asarray(x)
                if x.dtype == np.float32:
                    ok = np.isfinite(x) & (np.abs(x) >= np.finfo(np.float32).tiny) & \
                        (np.abs(x) < np.finfo(np.float32).max / 2)
                    for _ in range(self.k):
                        x = np.where(ok, np.nextafter(x, np.float32(np.inf)), x)
                out.append(x)
            return out
        return run


def test_branches_of_inexact_ops_are_judged_within_their_ulp_bounds():
    from conformance.checking.verdicts.control_flow import bodies_accuracy
    t = "tensor<8xf32>"
    sig = _case_sig([_branch(t, [_unary("sine", t)], ["v0"]), _branch(t)], t)
    bound = load_spec("sine").accuracy("f32").bound
    assert bodies_accuracy(sig).kind == "ulp" and bodies_accuracy(sig).bound == bound
    assert set(_counts(_UlpsOff(int(bound)), sig)) == {"pass"}
    assert _counts(_UlpsOff(int(bound) + 3), sig).get("accuracy", 0) > 0
    exact_sig = _case_sig([_branch(t, [_unary("negate", t)], ["v0"]), _branch(t)], t)
    assert bodies_accuracy(exact_sig).kind == "exact"
    assert _counts(_UlpsOff(1), exact_sig).get("value", 0) > 0


def test_a_loop_body_of_inexact_ops_is_refused_in_one_line():
    from conformance.checking.verdicts.control_flow import bodies_accuracy
    s, f = "tensor<si32>", "tensor<2xf32>"
    spec = load_spec("while")
    ex = next(e for e in __import__("conformance.checking.golden", fromlist=["x"]).examples(spec)
              if e.name.startswith("a state of mixed types"))
    cond, _ = ex.case.signature.regions
    body = rp.make([("arg0", s), ("arg1", s), ("arg2", f)],
                   [Operation(Signature.make("sine", [_t(f)], [_t(f)]), ("arg2",), "v0")],
                   ["arg0", "arg1", "v0"])
    sig = Signature.make("while", [s, s, f], [s, s, f], regions=(cond, body))
    with pytest.raises(ValueError, match="compound") as e:
        bodies_accuracy(sig, "exact")
    assert "\n" not in str(e.value)
    assert bodies_accuracy(ex.case.signature, "exact").kind == "exact"


def test_every_invalid_program_prints_as_another_module_than_the_valid_one():
    """A value a region captures but no op reads is not in the module (MLIR captures by
    use): such a change is no invalid program (XLA ran one, reported as accepting an
    invalid while). Neither the region mutations nor any candidate may be one."""
    from conformance.core import region_program
    from conformance.mlir.emitter import module_text
    from conformance.generators.invalid import _same_program, candidates
    from conformance.specs import load_spec
    for op in ("if", "case", "while"):
        spec = load_spec(op)
        for binding in spec.type_bindings()[:3]:
            from conformance.generators.signatures import canonical
            valid = canonical(spec, binding)
            for rule in [c.id for c in spec.constraints]:
                for bad in candidates(spec, valid, rule):
                    assert module_text(bad) != module_text(valid), (op, rule)
    # the change the mutations no longer make: one more captured value, never read
    spec = load_spec("while")
    valid = canonical(spec, spec.type_bindings()[0])
    body = region_program.parse(valid.regions[1])
    p = body.program
    unread = region_program.Body(region_program.Program.make(
        list(p.arguments) + [("xu", p.result_types[0])], p.operations, p.results), body.block)
    import dataclasses
    same = dataclasses.replace(valid, regions=(valid.regions[0], region_program.text(unread)))
    assert _same_program(valid, same)
    assert not _same_program(valid, dataclasses.replace(
        valid, regions=(valid.regions[0], region_program.mutations(valid.regions[1])[0])))


def test_a_quick_run_checks_an_element_of_every_control_flow_signature(tmp_path):
    """No if/case/call/composite signature of a quick jax run has every element masked
    (12 of 110 had, while bodies drew reductions from random init values)."""
    import json
    import math
    import re
    from conformance.apps.cli import main
    out = tmp_path / "q"
    main(["run", "--ops", "if,case,call,composite", "--depth", "quick", "--out", str(out),
          "--no-progress", "--no-replay"])
    checked = 0
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") != "signature" or not r.get("cases"):
            continue
        results = r["signature"].split(" regions[", 1)[0].split(" -> ", 1)[1]
        per_case = sum(math.prod(int(d) for d in m.group(1).split("x") if d)
                       for m in re.finditer(r"tensor<((?:\d+x)*)", results))
        masked = sum(v.get("elements", 0) for v in (r.get("impl_defined") or {}).values())
        assert masked < r["cases"] * per_case, (r["op"], r["type_key"], r["index"])
        checked += 1
    assert checked >= 60, checked


def _self_maximum_sig():
    t = "tensor<8xcomplex<f32>>"
    top = Operation(Signature.make("maximum", [_t(t), _t(t)], [_t(t)]), ("c0", "c0"), "v0")
    return _case_sig([_branch(t, [top], ["v0"]), _branch(t, [top], ["v0"])], t)


def test_a_branch_s_maximum_of_a_value_with_itself_is_judged_not_masked():
    """The complex tie rule allows lhs or rhs; of an operand with itself both are one
    value, so a branch that loses its zero signs there fails (it was masked as open)."""
    sig = _self_maximum_sig()
    assert not violations(sig)
    bad = _counts(planted.CaseMaximumOfItselfLosesZeroSigns(), sig)
    assert set(bad) - {"pass"}, bad
    assert set(_counts(planted.CaseMaximumPicksRhsOnTies(), sig)) == {"pass"}
