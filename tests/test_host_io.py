"""Tokens and host I/O: the token type, after_all/infeed/outfeed/send/recv's programs, the
oracle's host queues and token ordering, backends that decline at compile time with the
reason, a host-capable backend (right and with a bug), and one that hangs."""
import os
from pathlib import Path

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Unsupported, get_backend
from conformance.core.case import Case
from conformance.core.results import read_results
from conformance.core.types import TOKEN, TokenType, flatten, leaves, unflatten, value_type
from conformance.mlir.emitter import module_text, verifier_rejects, verify
from conformance.generators.signatures import canonical
from conformance.oracles.host_io import (HostQueues, HostStep, OrderError, run_token_program,
                                         token_order)
from conformance.oracles.registry import OracleError
from conformance.apps.runner import RunConfig, run
from conformance.specs import load_spec
from conformance.specs.host import host_split

ROOT = Path(__file__).resolve().parents[1]
HOST_OPS = ["infeed", "outfeed", "send", "recv"]


def _canonical(op, et="f32", shape=(2, 3)):
    spec = load_spec(op)
    return canonical(spec, {"E": et} if spec.type_variables else {}, shape)


def _case(sig, rng=np.random.default_rng(0)):
    return Case(sig, tuple(rng.standard_normal(t.shape).astype(t.element_type.dtype)
                           for t in sig.input_leaves))


# -- the token type ------------------------------------------------------------------------

def test_token_type_has_no_leaves_and_prints_as_mlir():
    t = value_type("token")
    assert t == value_type("!stablehlo.token") == TokenType()
    assert t.leaves() == () and t.mlir() == "!stablehlo.token" and str(t) == "token"
    types = [value_type("tensor<2xf32>"), t,
             value_type("tuple<token, tensor<si32>>")]
    assert [str(x) for x in leaves(types)] == ["tensor<2xf32>", "tensor<si32>"]
    a, b = np.zeros(2, np.float32), np.int32(3)
    grouped = unflatten([a, b], types)
    assert grouped[1] is TOKEN and grouped[2][0] is TOKEN
    assert len(flatten(grouped)) == 2


def test_signature_json_round_trip_keeps_tokens():
    from conformance.core.case import Signature
    sig = _canonical("infeed")
    assert Signature.from_json(sig.to_json()) == sig
    assert "token" in sig.key()


# -- programs ----------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["after_all"] + HOST_OPS)
def test_program_has_the_op_alone_with_tokens_made_inside(op):
    sig = _canonical(op)
    text = module_text(sig)
    verify(sig)
    dev = host_split(sig).device
    # tokens are made with after_all of nothing, never @main's arguments or results
    assert "%token0 = stablehlo.after_all : !stablehlo.token" in text
    assert "!stablehlo.token" not in text.split("{")[1].split("\n")[0]      # @main's line
    # the host's queue is not in the program: @main takes the op's own tensor operands
    assert len(dev.input_leaves) == text.split("\n")[1].count("%arg")
    assert f'"stablehlo.{op}"(' in text and text.count('"stablehlo.') == 1


@pytest.mark.parametrize("op", HOST_OPS + ["custom_call"])
def test_host_transfers_and_custom_calls_never_share_a_packed_program(op):
    from conformance.checking.packing import packable
    sig = _canonical(op)
    assert not packable(sig, load_spec(op))


def test_host_split_names_the_queue_values():
    sig = _canonical("infeed")
    s = host_split(sig)
    assert s.host_inputs == tuple(range(len(sig.input_leaves))) and s.device_inputs == ()
    assert s.device_outputs == tuple(range(len(sig.result_leaves))) and s.host_outputs == ()
    out = host_split(_canonical("outfeed"))
    assert out.host_outputs and not out.device_outputs and not out.host_inputs


@pytest.mark.parametrize("op,rule,says", [
    ("infeed", "C1", "at least of size 1"), ("infeed", "C2", "token type"),
    ("recv", "C1", "HOST_TO_DEVICE"), ("send", "C1", "DEVICE_TO_HOST"),
    ("recv", "C3", "token type"), ("after_all", "C1", "must be variadic of token"),
    ("outfeed", "I2", "must be token"), ("outfeed", "C1", "must be variadic of ranked tensor"),
    ("after_all", "O1", "result #0 must be token"), ("send", "I1", "must be variadic of ranked")])
def test_every_breakable_rule_has_an_invalid_case_the_verifier_rejects(op, rule, says):
    from conformance.generators.invalid import candidates
    found = candidates(load_spec(op), _canonical(op), rule)
    assert found
    assert says in verifier_rejects(found[0])


def test_rules_of_host_ops_are_breakable_or_say_why():
    from conformance.generators.invalid import breakable, unbreakable
    assert set(breakable(load_spec("infeed"))) == {"I1", "C1", "C2"}
    assert set(breakable(load_spec("recv"))) == {"I1", "C1", "C2", "C3"}
    assert set(breakable(load_spec("send"))) >= {"I1", "I2", "C1", "O1"}
    assert set(breakable(load_spec("after_all"))) == {"C1", "O1"}
    assert set(breakable(load_spec("outfeed"))) == {"I2", "C1", "O1"}
    # the I1 rows of after_all and outfeed are left open: C1 carries them
    assert "I1" in unbreakable("after_all") and "I1" in unbreakable("outfeed")


# -- the oracle's queues -------------------------------------------------------------------

def test_infeed_reads_the_queue_and_outfeed_writes_it():
    sig = _canonical("infeed")
    case = _case(sig)
    out = oracles.evaluate_case(case)
    assert len(out) == len(case.inputs)
    for x, y in zip(out, case.inputs):
        assert x.tobytes() == y.tobytes()
    sig = _canonical("outfeed")
    case = _case(sig)
    assert [x.tobytes() for x in oracles.evaluate_case(case)] == \
        [x.tobytes() for x in case.inputs]
    assert oracles.evaluate_case(_case(_canonical("after_all"))) == ()


def test_a_queue_item_of_another_type_is_an_oracle_error():
    from conformance.oracles.host_io import _infeed
    with pytest.raises(OracleError, match="queue's item"):
        _infeed([TOKEN, np.zeros(3, np.int32)], {}, [value_type("tensor<3xf32>"), TokenType()])


def _steps():
    a = HostStep("infeed", "a", after=("t0",), types=(value_type("tensor<si32>"),))
    b = HostStep("infeed", "b", after=("a",), types=(value_type("tensor<si32>"),))
    return [HostStep("after_all", "t0"), b, a]          # listed out of order


def test_token_order_decides_which_infeed_reads_first():
    q = HostQueues()
    q.infeed.extend([(np.int32(1),), (np.int32(2),)])
    read = run_token_program(_steps(), q)
    assert int(read["a"][0]) == 1 and int(read["b"][0]) == 2      # a precedes b by token
    assert [s.token for s in token_order(_steps())] == ["t0", "a", "b"]


def test_infeeds_no_token_orders_are_an_order_error():
    a = HostStep("infeed", "a", after=("t0",), types=(value_type("tensor<si32>"),))
    b = HostStep("infeed", "b", after=("t0",), types=(value_type("tensor<si32>"),))
    with pytest.raises(OrderError, match="no token orders them"):
        token_order([HostStep("after_all", "t0"), a, b])
    # joined by after_all they are ordered
    c = HostStep("infeed", "c", after=("j",), types=(value_type("tensor<si32>"),))
    order = token_order([HostStep("after_all", "t0"), a, HostStep("after_all", "j", ("a",)), c])
    assert [s.token for s in order].index("a") < [s.token for s in order].index("c")


def test_send_then_recv_on_a_channel_and_errors():
    x = np.arange(3, dtype=np.float32)
    steps = [HostStep("recv", "r", after=("s",), types=(value_type("tensor<3xf32>"),),
                      attributes={"channel_id": 5}),
             HostStep("send", "s", values=(x,), attributes={"channel_id": 5})]
    read = run_token_program(steps, HostQueues())
    assert read["r"][0].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(OracleError, match="queue is empty"):
        run_token_program([HostStep("infeed", "a", types=(value_type("tensor<si32>"),))],
                          HostQueues())
    with pytest.raises(OracleError, match="cycle"):
        token_order([HostStep("after_all", "a", ("b",)), HostStep("after_all", "b", ("a",))])


# -- backends that cannot: declined at compile time, with the reason --------------------------

@pytest.mark.parametrize("op", HOST_OPS)
@pytest.mark.parametrize("backend,says", [
    ("jax", "no host-transfer path in jax.lax"),
    ("xla", "exchanges data with the host|UNIMPLEMENTED"),
    ("interpreter", "eval_module has no host queues")])
def test_backends_decline_host_transfers_at_compile_time(op, backend, says):
    sig = _canonical(op)
    with pytest.raises(Unsupported, match=says):
        get_backend(backend).compile(sig)


def test_after_all_has_one_matrix_column_token_in_the_report(tmp_path):
    from conformance.specs import binding_key
    assert [binding_key(b) for b in load_spec("after_all").type_bindings()] == ["token"]
    cfg = RunConfig(backends=["jax"], ops=["after_all"], depth="quick", out=tmp_path,
                    probes=False, replay=False)
    run(cfg, [get_backend("jax")], tmp_path / "results.jsonl")
    from conformance.reports import render
    index = render(tmp_path / "results.jsonl", tmp_path / "report").read_text()
    assert 'data-op="after_all" data-type="token" data-outcome="pass"' in index


@pytest.mark.parametrize("backend", ["jax", "xla", "interpreter"])
def test_after_all_runs_everywhere(backend):
    for n in (0, 1, 3):
        sig = _canonical("after_all")
        import dataclasses
        sig = dataclasses.replace(sig, input_types=(TokenType(),) * n)
        assert list(get_backend(backend).run(Case(sig, ()))) == []


def test_report_shows_which_backend_declined_and_why(tmp_path):
    cfg = RunConfig(backends=["jax", "xla", "interpreter"], ops=["infeed", "send"],
                    element_types=["f32"], depth="quick", out=tmp_path, isolate=False,
                    probes=False, replay=False)
    run(cfg, [get_backend(b) for b in cfg.backends], tmp_path / "results.jsonl")
    recs = list(read_results(tmp_path / "results.jsonl"))
    sigs = [r for r in recs if r["kind"] == "signature"]
    assert sigs and all(r["outcome"] == "unsupported" and r["reason"] for r in sigs)
    assert {r["backend"] for r in sigs} == {"jax", "xla", "interpreter"}
    from conformance.reports import render
    render(tmp_path / "results.jsonl", tmp_path / "report")
    page = (tmp_path / "report" / "ops" / "infeed.html").read_text()
    for said in ("no host-transfer path in jax.lax", "PJRT client has no host-transfer API",
                 "eval_module has no host queues"):
        assert said in page


# -- a backend with host queues: right, with a bug, and one that hangs ---------------------------

def _run(tmp_path, backend, **kw):
    cfg = RunConfig(backends=[backend], depth="quick", out=tmp_path, probes=False,
                    replay=False, **kw)
    run(cfg, [get_backend(backend)], tmp_path / "results.jsonl")
    return list(read_results(tmp_path / "results.jsonl"))


def test_backend_with_host_queues_passes(tmp_path):
    # (after_all has no element types: a --types filter leaves it out)
    recs = _run(tmp_path, "planted_host_io:HostQueues", ops=HOST_OPS,
                element_types=["f32", "si8"], isolate=False)
    sigs = [r for r in recs if r["kind"] == "signature"]
    assert {r["op"] for r in sigs} == set(HOST_OPS)
    assert all(r["outcome"] == "pass" for r in sigs), [r for r in sigs if r["outcome"] != "pass"]
    assert sum(r["cases"] for r in sigs if r["op"] == "infeed") > 0
    invalid = [r for r in recs if r["kind"] == "invalid" and r["outcome"] != "not_generated"]
    assert invalid and all(r["outcome"] == "rejected" for r in invalid)
    examples = [r for r in recs if r["kind"] == "example"]
    assert examples and all(r["outcome"] == "pass" for r in examples)


def test_backend_reading_stale_infeed_data_fails(tmp_path):
    recs = _run(tmp_path, "planted_host_io:StaleInfeed", ops=["infeed", "outfeed"],
                element_types=["f32"], isolate=False, invalid=False)
    sigs = [r for r in recs if r["kind"] == "signature"]
    assert any(r["outcome"] == "value" for r in sigs if r["op"] == "infeed")
    assert all(r["outcome"] == "pass" for r in sigs if r["op"] == "outfeed")
    assert [r for r in recs if r["kind"] == "divergence" and r["op"] == "infeed"]


@pytest.fixture
def _children_find_planted(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))


def test_a_backend_that_hangs_on_infeed_costs_timeouts_and_the_run_goes_on(
        tmp_path, _children_find_planted):
    from conformance.checking.stream import MAX_HANGS_PER_OP
    recs = _run(tmp_path, "planted_host_io:HangingInfeed", ops=["infeed", "outfeed"],
                element_types=["f32"], isolate=True, timeout=1.0, invalid=False,
                examples=False)
    assert recs[-1]["kind"] == "end"
    sigs = [r for r in recs if r["kind"] == "signature"]
    infeed = [r for r in sigs if r["op"] == "infeed"]
    hung = [r for r in infeed if r["outcome"] == "timeout" and r["cases"] != 0]
    assert 1 <= len(hung) <= MAX_HANGS_PER_OP
    assert all(r["outcome"] == "timeout" for r in infeed)           # the rest not run
    assert all(r["outcome"] == "pass" for r in sigs if r["op"] == "outfeed")
