"""call and composite (issue 21: XLA's Call and CompositeCall): the callee / decomposition
printed as a private func.func of the module, every constraint breakable alone and
rejected by the verifier, the oracle = the body op by op, jax lowering to
stablehlo.composite, the backends running the emitted text, and the verdicts: a backend
that drops the composite or computes a wrong decomposition fails, one that computes the
decomposition another, equivalent way passes."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import oracles
from conformance.core import region_program as rp
from conformance.core.case import Signature
from conformance.core.program import Operation
from conformance.core.types import tensor_type
from conformance.mlir.emitter import module_text, parse, verifier_rejects
from conformance.generators import canonical, invalid
from conformance.oracles.control_flow import run_body
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations

import planted_call as planted
from planted import verdict_counts


def _t(text):
    return tensor_type(text)


def _double(t="tensor<8xf32>"):
    """A body add(p0, p0) over one parameter of type ``t``."""
    add = Operation(Signature.make("add", [_t(t), _t(t)], [_t(t)]), ("p0", "p0"), "v0")
    return rp.make([("p0", t)], [add], ["v0"])


def _sig(op, body, attrs=None):
    b = rp.parse(body)
    if op == "composite":
        attrs = {"name": "foo.bar", "composite_attributes": "{n = 1 : i32}", "version": 1,
                 **(attrs or {})}
    return Signature.make(op, list(b.block_types), list(b.result_types), attrs or {},
                          regions=(body,))


def _counts(backend, sig, batches=4):
    return verdict_counts(backend, sig, sig.input_types[0].element_type.name, batches)


# -- the canonical module -------------------------------------------------------------------

def test_the_callee_is_a_private_function_called_by_symbol():
    text = module_text(_sig("call", _double()))
    assert '"func.call"(%arg0) {callee = @callee} : (tensor<8xf32>) -> tensor<8xf32>' in text
    assert "func.func private @callee(%f_p0: tensor<8xf32>) -> (tensor<8xf32>)" in text
    assert "func.return %f_v0 : tensor<8xf32>" in text
    parse(text)


def test_the_composite_carries_name_attributes_version_and_decomposition():
    text = module_text(_sig("composite", _double()))
    line = next(x for x in text.splitlines() if "stablehlo.composite" in x)
    for part in ('name = "foo.bar"', "composite_attributes = {n = 1 : i32}",
                 "version = 1 : i32", "decomposition = @decomposition"):
        assert part in line, line
    assert "func.func private @decomposition(" in text
    printed = str(parse(text))
    assert 'stablehlo.composite "foo.bar"' in printed


@pytest.mark.parametrize("op", ["call", "composite"])
def test_generated_signatures_are_valid_functions_of_their_arguments(op):
    spec = load_spec(op)
    for et in ("f32", "si32", "i1", "complex<f32>"):
        for shape in ((2,), (), (3, 2)):
            sig = canonical(spec, {"E": et}, shape)
            assert not violations(sig), (sig.key(), violations(sig))
            body = rp.parse(sig.regions[0])
            assert body.block == len(body.program.arguments) == len(sig.input_types)
            parse(module_text(sig))


@pytest.mark.parametrize("op,rule", [("call", "C1"), ("call", "C2"), ("composite", "C1"),
                                     ("composite", "C2"), ("composite", "C3"),
                                     ("composite", "C4")])
def test_every_constraint_breaks_alone_and_the_verifier_rejects_it(op, rule):
    spec = load_spec(op)
    found = []
    for et in ("f32", "si32", "ui8"):
        found += invalid.candidates(spec, canonical(spec, {"E": et}), rule)
    assert found, rule
    for sig in found[:6]:
        assert violations(sig, spec) == [rule], (sig.key(), violations(sig, spec))
        assert verifier_rejects(sig), sig.key()


# -- the oracle: the body op by op ----------------------------------------------------------

def test_a_composite_means_its_decomposition_whatever_its_name():
    spec = load_spec("composite")
    sig = canonical(spec, {"E": "si32"}, (3,))
    stacked = batch_for(0, "default", spec, "si32", 0, 0, sig)
    x = [np.asarray(s)[0] for s in stacked]
    want, _ = run_body(sig.regions[0], [np.asarray(v)[None] for v in x])
    for attrs in ({"name": "chlo.erf"}, {"version": 3}, {"composite_attributes": "{}"}):
        other = Signature.make("composite", sig.input_types, sig.result_types,
                               {**sig.attributes, **attrs}, regions=sig.regions)
        got = oracles.evaluate("composite", x, other.attributes,
                               result_types=other.result_types, regions=other.regions)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w)[0])
    as_call = oracles.evaluate("call", x, {}, result_types=sig.result_types,
                               regions=sig.regions)
    for g, w in zip(as_call, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w)[0])


# -- jax ------------------------------------------------------------------------------------

def test_jax_lowers_a_composite_to_stablehlo_composite_with_its_attributes():
    import jax
    from conformance.backends.jax_ops import build
    sig = _sig("composite", _double("tensor<2xf32>"),
               {"composite_attributes": '{n = 1 : i32, s = "x"}', "version": 2})
    text = jax.jit(build(sig)).lower(np.ones(2, np.float32)).as_text()
    assert 'stablehlo.composite "foo.bar"' in text
    assert 'composite_attributes = {n = 1 : i32, s = "x"}' in text and "version = 2" in text


def test_composite_attributes_read_back_as_lax_composite_arguments():
    from conformance.backends.jax_ops_call import composite_kwargs
    got = composite_kwargs('{n = 1 : i32, m = 7 : i64, f = 1.5 : f32, s = "x", '
                           't = dense<[1, 2]> : tensor<2xi32>}')
    assert got["n"] == 1 and got["n"].dtype == np.int32 and got["m"].dtype == np.int64
    assert got["f"] == np.float32(1.5) and got["s"] == "x"
    assert got["t"].tolist() == [1, 2]
    with pytest.raises(ValueError, match="composite_attributes entry"):
        composite_kwargs("{u = unit}")


# -- the backends run the emitted text ------------------------------------------------------

@pytest.mark.parametrize("backend", ["jax", "xla", "interpreter"])
@pytest.mark.parametrize("op", ["call", "composite"])
def test_backends_run_generated_calls(backend, op):
    from conformance.backends import Unsupported, get_backend
    try:
        b = get_backend(backend)
    except Unsupported as e:
        pytest.skip(str(e))
    sig = canonical(load_spec(op), {"E": "f32"})
    counts = _counts(b, sig, batches=1)
    assert set(counts) <= {"pass", "subnormal_flush"}, counts


# -- verdicts: a realistic bug fails, an allowed difference passes --------------------------

def test_a_backend_that_passes_the_composite_through_fails():
    t = "tensor<8xf32>"
    neg = Operation(Signature.make("negate", [_t(t)], [_t(t)]), ("p0",), "v0")
    sig = _sig("composite", rp.make([("p0", t)], [neg], ["v0"]))
    assert not violations(sig)
    assert _counts(planted.ReturnsOperands(), sig).get("value", 0) > 0
    assert set(_counts(planted._Oracle(), sig)) == {"pass"}


@pytest.mark.parametrize("op", ["call", "composite"])
def test_a_wrong_decomposition_fails(op):
    sig = _sig(op, _double("tensor<8xsi32>"))
    assert _counts(planted.AddAsSubtract(), sig).get("value", 0) > 0


@pytest.mark.parametrize("t", ["tensor<8xf32>", "tensor<8xsi32>", "tensor<4xbf16>"])
def test_an_equivalent_computation_of_the_decomposition_passes(t):
    sig = _sig("composite", _double(t))
    backend = planted.DoublesByMultiplying()
    exe = backend.compile(sig)
    x = np.asarray(batch_for(0, "default", load_spec("composite"),
                             sig.input_types[0].element_type.name, 0, 0, sig)[0])[0]
    assert exe([x])[0].shape == sig.result_types[0].shape
    assert set(_counts(backend, sig)) == {"pass"}


# -- no excuse: a composite whose decomposition the backend runs ----------------------------

def test_refusing_a_composite_whose_decomposition_compiles_is_a_backend_error():
    from conformance.checking.checker import SignatureCheck
    sig = _sig("composite", _double())
    check = SignatureCheck(load_spec("composite"), sig, [planted.RefusesComposites()])
    check.compile()
    (cls, text), = check.failed.values()
    assert cls == "backend_error" and "compiles every op of the decomposition" in text
    assert not check.unsupported


def test_refusing_a_composite_is_an_excuse_where_an_op_of_it_is_unsupported_too():
    from conformance.checking.checker import SignatureCheck
    sig = _sig("composite", _double())
    check = SignatureCheck(load_spec("composite"), sig, [planted.RefusesCompositesAndAdd()])
    check.compile()
    assert not check.failed and "not implemented" in next(iter(check.unsupported.values()))
    # a call is not decomposable by its spec: an Unsupported stays one
    from conformance.backends import Unsupported
    from conformance.checking.decomposable import no_excuse
    csig = _sig("call", _double())
    refusal = Unsupported("call: not implemented")
    assert no_excuse(load_spec("call"), csig, planted.RefusesComposites(), refusal) is None
    assert no_excuse(load_spec("composite"), sig, planted.RefusesComposites(), refusal)
