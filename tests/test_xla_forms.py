"""XLA's binary ops with broadcast_dimensions (issue 21): the oracle's broadcasting
against a naive loop of XLA's rule, the canonical CHLO program, and planted backends
that broadcast the numpy way (trailing alignment: must fail) or explicitly with
broadcast_in_dim (jax's path: must pass)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from conformance import emitter, oracles
from conformance.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.oracles.xla_forms import broadcast_operands
from conformance.plan import batch_for, binding_for, plan_binding
from conformance.specs import load_spec
from conformance.specs.validity import violations
from planted import OracleBackend

OP = "binary_with_broadcast_dimensions"


def _naive(lhs, rhs, dims, fn):
    """XLA's rule read literally: the lower operand's index j is the result's index at
    dims[j]; a size-1 dimension of either operand reads index 0."""
    low_is_lhs = lhs.ndim <= rhs.ndim
    low, high = (lhs, rhs) if low_is_lhs else (rhs, lhs)
    shape = [max([h] + [low.shape[j] for j, d in enumerate(dims) if d == k])
             for k, h in enumerate(high.shape)]
    out = np.empty(shape, np.result_type(lhs, rhs))
    for idx in itertools.product(*map(range, shape)):
        hi = tuple(0 if high.shape[k] == 1 else i for k, i in enumerate(idx))
        lo = tuple(0 if low.shape[j] == 1 else idx[d] for j, d in enumerate(dims))
        a, b = (low[lo], high[hi]) if low_is_lhs else (high[hi], low[lo])
        out[idx] = fn(a, b)
    return out


@pytest.mark.parametrize("ls,hs,dims", [
    ((3,), (2, 3), [1]), ((2,), (2, 3), [0]), ((), (2, 3), []), ((2, 1), (2, 1, 4), [0, 1]),
    ((1, 4), (3, 2, 4), [0, 2]), ((2, 1), (1, 3), [0, 1]), ((5,), (5, 1, 1), [0])])
def test_oracle_broadcasts_as_xla_does(ls, hs, dims):
    rng = np.random.default_rng(0)
    low = rng.integers(-9, 9, ls).astype(np.int32)
    high = rng.integers(-9, 9, hs).astype(np.int32)
    for lhs, rhs in [(low, high), (high, low)] if len(ls) < len(hs) else [(low, high)]:
        want = _naive(lhs, rhs, dims, lambda x, y: x - y)
        got = oracles.evaluate(OP, [lhs, rhs], {"operation": "subtract",
                                                 "broadcast_dimensions": dims},
                               result_types=[f"tensor<{'x'.join(map(str, want.shape))}xsi32>"
                                             if want.ndim else "tensor<si32>"])[0]
        assert got.shape == want.shape and (got == want).all()


def test_the_canonical_program_is_chlos_broadcasting_op():
    sig = Signature.make(OP, ["tensor<2x3xf32>", "tensor<3xf32>"], ["tensor<2x3xf32>"],
                         {"operation": "add", "broadcast_dimensions": [1]})
    text = emitter.module_text(sig)
    assert '"chlo.broadcast_add"(%arg0, %arg1) {broadcast_dimensions = array<i64: 1>}' in text
    emitter.parse(text)


def test_a_verifier_crash_on_an_invalid_chlo_program_is_its_message():
    """jaxlib 0.10.2's CHLO verifier segfaults on a negative broadcast dimension: the
    invalid program is verified in a child process, so the crash is a message."""
    import dataclasses
    sig = Signature.make(OP, ["tensor<2xsi32>", "tensor<2xsi32>"], ["tensor<2xsi32>"],
                         {"operation": "add", "broadcast_dimensions": [-1]})
    sig = dataclasses.replace(sig, invalid="C3")
    message = emitter.verifier_rejects(sig)
    # this process is alive, and the verifier's verdict (a crash or an error) is text
    assert isinstance(message, str) and message


class NumpyAligned(OracleBackend):
    """Broadcasts the numpy way (the lower operand aligned with the trailing dimensions),
    ignoring broadcast_dimensions: right for a suffix, another shape or value elsewhere,
    an error where the trailing dimensions do not fit."""
    name = "numpy-aligned"

    def compile(self, sig):
        if violations(sig):
            raise ValueError("invalid program")
        op = sig.attributes["operation"]
        et = sig.result_types[0].element_type

        def run(inputs):
            x, y = (np.asarray(v) for v in inputs)
            shape = np.broadcast_shapes(x.shape, y.shape)     # raises where they do not fit
            x, y = np.broadcast_to(x, shape), np.broadcast_to(y, shape)
            t = f"tensor<{'x'.join(map(str, shape))}x{et}>" if shape else f"tensor<{et}>"
            return oracles.evaluate(op, [np.ascontiguousarray(x), np.ascontiguousarray(y)],
                                    {}, result_types=[t])
        return run


class ExplicitBroadcast(OracleBackend):
    """broadcast_in_dim of both operands to the result's shape, then the op: jax's path."""
    name = "explicit"

    def compile(self, sig):
        if violations(sig):
            raise ValueError("invalid program")
        a = sig.attributes
        shape = sig.result_types[0].shape

        def run(inputs):
            x, y = (np.asarray(v) for v in inputs)
            low_is_lhs = x.ndim <= y.ndim
            low, high = (x, y) if low_is_lhs else (y, x)
            expanded = [1] * len(shape)
            for j, d in enumerate(a["broadcast_dimensions"]):
                expanded[d] = low.shape[j]
            low = np.broadcast_to(low.reshape(expanded), shape)
            high = np.broadcast_to(high, shape)
            x, y = (low, high) if low_is_lhs else (high, low)
            t = sig.result_types[0]
            return oracles.evaluate(a["operation"], [np.ascontiguousarray(x),
                                                     np.ascontiguousarray(y)], {},
                                    result_types=[t])
        return run


def _classes(backend, key, depth="default"):
    spec = load_spec(OP)
    counts: dict[str, int] = {}
    for i, sig in enumerate(plan_binding(spec, binding_for(spec, key), 0, depth)):
        check = SignatureCheck(spec, sig, [backend])
        check.compile()
        if check.failed or check.unsupported:
            continue
        batch = check.run_batch(0, batch_for(0, depth, spec, key, i, 0, sig))
        for cls, n in batch.results[backend.name].verdict.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


def test_numpy_trailing_alignment_fails():
    counts = {}
    for key in ["si32", "f32", "ui8"]:
        for cls, n in _classes(NumpyAligned(), key).items():
            counts[cls] = counts.get(cls, 0) + n
    assert set(counts) - {"pass"}, counts


@pytest.mark.parametrize("key", ["si32", "f32", "i1", "complex<f32>"])
def test_explicit_broadcasting_passes(key):
    assert set(_classes(ExplicitBroadcast(), key)) == {"pass"}


def test_the_operation_follows_the_stablehlo_ops_type_column():
    spec = load_spec(OP)
    (attr,) = [a for a in spec.attributes if a.name == "operation"]
    from conformance.specs import expressions as ex
    assert ex.evaluate(attr.choose, {"E": "i1"}) == ["add", "multiply", "maximum", "minimum",
                                                     "and", "or", "xor"]
    assert "shift_left" not in ex.evaluate(attr.choose, {"E": "f32"})
    assert "remainder" in ex.evaluate(attr.choose, {"E": "complex<f32>"})


def _verify_invalid_chlo(_):
    import dataclasses as dc
    sig = Signature.make(OP, ["tensor<2xsi32>", "tensor<2xsi32>"], ["tensor<2xsi32>"],
                         {"operation": "add", "broadcast_dimensions": [-1]})
    return emitter.verifier_rejects.__wrapped__(dc.replace(sig, invalid="C3"))


def test_the_child_verifier_runs_inside_a_daemonic_worker():
    """bench/bench_mutation.py and pools run the suite in daemonic processes, which
    multiprocessing forbids to start children: the verifier's child is a plain fork."""
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(1) as pool:
        (message,) = pool.map(_verify_invalid_chlo, [0])
    assert isinstance(message, str) and message
