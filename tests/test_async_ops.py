"""async_start and async_done (stablehlo-spec-2026-08, issue 30), drawn and printed as
the pair async_start -> async_done around a slice body (docs/async-ops.md).

The examples through the oracle; the spec's own example, which jaxlib 0.10.2's verifier
rejects (its body reads a value of the enclosing function; the dialect's async_start is
isolated from above); a planted backend that computes another slice than the body's
fails, the oracle passes; generated signatures valid, every breakable rule broken alone
and rejected by the verifier, the two that no single change breaks (one op, of C2's
list) held by the verifier on hand-written bodies; what each backend says, measured on
jaxlib 0.10.2."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend, Unsupported, get_backend
from conformance.checking.golden import examples
from conformance.core import region_program
from conformance.core.case import Signature
from conformance.core.program import Operation
from conformance.core.types import TensorType, tensor_type
from conformance.generators import invalid
from conformance.generators.signatures import canonical
from conformance.mlir.emitter import module_text, parse, verifier_rejects
from conformance.specs import load_spec
from conformance.specs.validity import violations

from test_collectives import classes, failing  # noqa: E402  (the checker's verdict counts)

OPS = ("async_start", "async_done")

#: the example of "### async_start" (and of "### async_done", which awaits it), verbatim
SPEC_EXAMPLE = '''
func.func @main(%arg0: tensor<8x2xf32>) -> tensor<8x8xf32> {
%0 = "stablehlo.async_start"(%arg0) ({
  %1 = "stablehlo.all_gather"(%arg0) {
    all_gather_dim = 1 : i64,
    replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>
  } : (tensor<8x2xf32>) -> tensor<8x8xf32>
  "stablehlo.return"(%1) : (tensor<8x8xf32>) -> ()
}) : (tensor<8x2xf32>) -> !stablehlo.future<tensor<8x8xf32>>
%2 = "stablehlo.async_done"(%0) : (!stablehlo.future<tensor<8x8xf32>>) -> tensor<8x8xf32>
return %2 : tensor<8x8xf32>
}'''


def _body(t: TensorType, ops):
    """A body over one block argument ``p0`` of type ``t``: ``ops`` = [(op, operands,
    result type, attributes)], the last result returned."""
    operations, types = [], {"p0": t}
    for i, (op, operands, rt, attrs) in enumerate(ops):
        sig = Signature.make(op, [types[o] for o in operands], [rt], attrs)
        operations.append(Operation(sig, tuple(operands), f"v{i}"))
        types[f"v{i}"] = sig.result_types[0]
    return region_program.make([("p0", t)], operations, [f"v{len(ops) - 1}"])


X = tensor_type("tensor<3x4xf32>")
SLICE = ("slice", ["p0"], tensor_type("tensor<2x2xf32>"),
         {"start_indices": [1, 0], "limit_indices": [3, 4], "strides": [1, 2]})


def _sig(op, body=None, results=("tensor<2x2xf32>",)):
    sig = Signature.make(op, [X], list(results), {}, regions=(body or _body(X, [SLICE]),))
    return sig


# -- the oracle and the spec's example ---------------------------------------------------

@pytest.mark.parametrize("ex", [ex for op in OPS for ex in examples(load_spec(op))],
                         ids=lambda e: f"{e.spec.name}: {e.name}")
def test_the_examples_are_what_the_oracle_computes(ex):
    sig = ex.case.signature
    out = oracles.evaluate(sig.op, list(ex.case.inputs), dict(sig.attributes),
                           result_types=[t.mlir() for t in sig.result_types],
                           regions=sig.regions)
    out = out if isinstance(out, tuple) else (out,)
    for got, want in zip(out, ex.expected):
        np.testing.assert_array_equal(got, want)


def test_the_spec_example_is_rejected_by_jaxlibs_verifier():
    """Measured on jaxlib 0.10.2: the dialect's async_start is isolated from above, and the
    example's all_gather reads %arg0 of the enclosing function."""
    with pytest.raises(Exception, match="using value defined outside the region"):
        parse(SPEC_EXAMPLE)


def test_the_pair_is_printed_around_the_body_and_verifies():
    for op in OPS:
        text = module_text(_sig(op))
        assert '"stablehlo.async_start"(%arg0) ({' in text
        assert "^bb0(%r0_b_p0: tensor<3x4xf32>)" in text
        assert ('"stablehlo.async_done"(%future_0) : (!stablehlo.future<tensor<2x2xf32>>) '
                "-> tensor<2x2xf32>") in text
        parse(text)


# -- planted backends ----------------------------------------------------------------------

class Oracle(Backend):
    """The oracle, or (``shift``) the body's slice started one row later: the result of
    another body than the program's."""
    name = "async-oracle"
    isolate = False
    shift = False

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        run = sig
        if self.shift:
            body = region_program.parse(sig.regions[0])
            (o,) = body.program.operations
            a = dict(o.signature.attributes)
            a["start_indices"] = [a["start_indices"][0] + 1] + list(a["start_indices"][1:])
            a["limit_indices"] = [a["limit_indices"][0] + 1] + list(a["limit_indices"][1:])
            moved = Operation(Signature.make("slice", o.signature.input_types,
                                             o.signature.result_types, a), o.operands, o.name)
            program = dataclasses.replace(body.program, operations=(moved,))
            run = Signature.make(sig.op, sig.input_types, sig.result_types, {},
                                 regions=(region_program.text(
                                     region_program.Body(program, body.block)),))
        return lambda inputs: [x[0] for x in oracles.evaluate_batch(
            run, [np.asarray(x)[None] for x in inputs])]


class AnotherBody(Oracle):
    name = "another-body"
    shift = True


X4 = tensor_type("tensor<4x4xf32>")
UPPER = ("slice", ["p0"], tensor_type("tensor<2x2xf32>"),
         {"start_indices": [0, 0], "limit_indices": [2, 4], "strides": [1, 2]})


@pytest.mark.parametrize("op", OPS)
def test_a_backend_that_returns_another_bodys_result_fails(op):
    sig = Signature.make(op, [X4], ["tensor<2x2xf32>"], {}, regions=(_body(X4, [UPPER]),))
    assert not violations(sig)
    assert failing(classes(AnotherBody(), sig)) > 0
    assert set(classes(Oracle(), sig)) == {"pass"}


# -- generated and invalid signatures ------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_generated_signatures_are_valid_and_verify(op):
    from conformance.checking.plan import plan_signatures
    spec = load_spec(op)
    plan = plan_signatures(spec, {"E": "f32"}, 8, seed=3, profile="quick")
    assert plan
    for sig in plan:
        assert not violations(sig), (sig.key(), violations(sig))
        assert verifier_rejects(sig) is None, sig.key()
    assert any(np.prod(t.shape) for s in plan for t in s.result_types)   # not all empty


@pytest.mark.parametrize("op, rules", [("async_start", ["C3", "C4"]), ("async_done", ["C1"])])
def test_every_breakable_rule_breaks_alone_and_the_verifier_rejects_it(op, rules):
    spec = load_spec(op)
    assert invalid.breakable(spec) == rules
    base = canonical(spec, {"E": "f32"}, (3, 4))
    for rule in rules:
        found = invalid.candidates(spec, base, rule)
        assert found, rule
        for c in found:
            assert violations(c) == [rule], (rule, c.key())
            assert verifier_rejects(c), (rule, c.key())


def test_the_unbreakable_rules_are_the_verifiers():
    """C1 (one op and a return) and C2 (a collective or a slice): no single type, shape or
    attribute change breaks them; jaxlib's verifier holds them on hand-written bodies."""
    spec = load_spec("async_start")
    assert {c.id for c in spec.constraints if c.unbreakable} == {"C1", "C2"}
    add = ("add", ["p0", "p0"], X, {})
    again = ("slice", ["v0"], SLICE[2], {"start_indices": [0, 0], "limit_indices": [2, 2],
                                         "strides": [1, 1]})
    two = _sig("async_start", _body(X, [SLICE, again]))
    assert violations(two) == ["C1"]
    assert "exactly one operation and a return" in verifier_rejects(two)
    other = _sig("async_start", _body(X, [add]), results=("tensor<3x4xf32>",))
    assert violations(other) == ["C2"]
    assert "must contain a collective or slice operation" in verifier_rejects(other)


# -- the backends, measured on jaxlib 0.10.2 --------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_the_backends_decline_the_pair(op):
    sig = _sig(op)
    with pytest.raises(Unsupported, match="jax has no asynchronous op"):
        get_backend("jax").compile(sig)
    with pytest.raises(Unsupported, match="unsupported op in async_start: stablehlo.slice"):
        get_backend("xla").compile(sig)
    # eval_module aborts the process on it: declined before it runs
    with pytest.raises(Unsupported, match="aborts the process on stablehlo.async_start"):
        get_backend("interpreter").compile(sig)


def test_xla_compiles_an_all_gather_body():
    """What XLA CPU takes in a body (measured): a collective, here on one process."""
    text = SPEC_EXAMPLE.replace("tensor<8x8xf32>", "tensor<2x3xf32>").replace(
        "tensor<8x2xf32>", "tensor<2x3xf32>").replace(
        "dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>", "dense<[[0]]> : tensor<1x1xi64>")
    text = text.replace('({\n  %1 = "stablehlo.all_gather"(%arg0)',
                        '({\n^bb0(%a: tensor<2x3xf32>):\n  %1 = "stablehlo.all_gather"(%a)')
    xla = get_backend("xla")
    assert xla.pjrt.compile("module {" + text.replace("func.func @main", "func.func public @main")
                            .replace("\nreturn", "\nfunc.return") + "}") is not None


def test_the_reader_names_the_future_not_judged():
    from conformance.mlir.reader import read_text
    read = read_text(module_text(_sig("async_start")), "async_start")
    assert read.unjudged
    assert "future" in read.unjudged[0].reason
