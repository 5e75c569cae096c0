"""async_start's bodies beyond slice (stablehlo-spec-2026-08 "### async_start" C2: a
collective or one of slice, dynamic_slice, dynamic_update_slice): the dynamic slices,
whose start indices are integer operands while E types the data (the spec files type
the operands by the body: ``otypes``; generators/async_ops.py). docs/async-ops.md.

Planted: a body that reads unsigned start indices as signed, and a dynamic_update_slice
that clamps its starts to the last element instead of ``dim - update size``, fail; a
backend that really runs the body asynchronously (on another thread, awaited) passes:
"the asynchrony is not guaranteed" either way."""
from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.checking.plan import plan_signatures
from conformance.core import region_program
from conformance.core.case import Signature
from conformance.core.types import element_type, tensor_type
from conformance.generators.async_ops import BODY_OPS, async_body
from conformance.mlir.emitter import module_text, verifier_rejects
from conformance.specs import load_spec
from conformance.specs.validity import violations

from test_collectives import classes, failing  # noqa: E402  (the checker's verdict counts)

OPS = ("async_start", "async_done")


def _body_op(sig):
    (o,) = region_program.parse(sig.regions[0]).program.operations
    return o.signature.op


def _sig(op, t, body_op, itype, seed=1):
    body = async_body(seed, t.element_type.name, list(t.shape), body_op, itype)
    b = region_program.parse(body)
    return Signature.make(op, list(b.block_types), list(b.result_types), {}, regions=(body,))


class Oracle(Backend):
    """The oracle on the pair (the body's op on the operands)."""
    name = "async-oracle"
    isolate = False

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        return lambda inputs: [x[0] for x in oracles.evaluate_batch(
            sig, [np.asarray(x)[None] for x in inputs])]


class Threaded(Oracle):
    """Runs the body on a worker thread and awaits its future: asynchrony the spec
    allows and does not require. Must pass."""
    name = "async-threaded"

    def compile(self, sig):
        inner = super().compile(sig)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        return lambda inputs: pool.submit(inner, inputs).result()


def _index_positions(sig):
    return {"dynamic_slice": 1, "dynamic_update_slice": 2}.get(_body_op(sig), len(sig.input_types))


class SignedStartIndices(Oracle):
    """Reads unsigned start indices as signed (a ui8 200 as -56, clamped to 0 where the
    spec clamps 200 to dim - size): must fail."""
    name = "async-signed-indices"

    def compile(self, sig):
        inner = super().compile(sig)
        first = _index_positions(sig)

        def run(inputs):
            xs = list(inputs)
            for k in range(first, len(xs)):
                et = sig.input_types[k].element_type
                if et.is_unsigned:
                    wide = np.asarray(xs[k]).astype(np.int64)
                    xs[k] = np.where(wide >= 2 ** (et.bits - 1), 0, wide).astype(et.dtype)
            return inner(xs)
        return run


class UpdateClampedToLastElement(Oracle):
    """dynamic_update_slice clamping each start to dim - 1 (not dim - size) and writing
    what fits: must fail where a start is past dim - size."""
    name = "async-dus-clamp-last"

    def compile(self, sig):
        inner = super().compile(sig)
        if _body_op(sig) != "dynamic_update_slice":
            return inner

        def run(inputs):
            operand, update = np.array(inputs[0], copy=True), np.asarray(inputs[1])
            starts = [int(np.clip(np.asarray(i).astype(np.int64), 0, max(d - 1, 0)))
                      for i, d in zip(inputs[2:], operand.shape)]
            window = tuple(slice(s, s + n) for s, n in zip(starts, update.shape))
            fits = tuple(slice(0, len(range(*w.indices(d))))
                         for w, d in zip(window, operand.shape))
            operand[window] = update[fits]
            return [operand]
        return run


T = tensor_type("tensor<8x3xf32>")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("body_op", BODY_OPS)
def test_each_body_op_verifies_and_the_oracle_and_a_threaded_backend_pass(op, body_op):
    sig = _sig(op, T, body_op, "si32")
    assert _body_op(sig) == body_op
    assert not violations(sig) and verifier_rejects(sig) is None
    text = module_text(sig)
    assert f'"stablehlo.{body_op}"' in text
    assert set(classes(Oracle(), sig)) == {"pass"}
    assert set(classes(Threaded(), sig)) == {"pass"}


def test_a_dynamic_slice_body_reads_its_indices_clamped():
    """dynamic_slice of tensor<8xf32> by a ui8 start of 200: clamped to 8 - size."""
    t = tensor_type("tensor<8xf32>")
    body = async_body(5, "f32", [8], "dynamic_slice", "ui8")
    b = region_program.parse(body)
    size = b.result_types[0].shape[0]
    assert size < 8                                        # so that clamping shows
    sig = Signature.make("async_start", [t, tensor_type("tensor<ui8>")],
                         list(b.result_types), {}, regions=(body,))
    x = np.arange(8, dtype=np.float32)
    (r,) = Oracle().compile(sig)([x, np.array(200, np.uint8)])
    assert r.tolist() == x[8 - size:].tolist()
    (r,) = SignedStartIndices().compile(sig)([x, np.array(200, np.uint8)])
    assert r.tolist() == x[:size].tolist()                 # the planted bug, by hand


@pytest.mark.parametrize("itype", ["ui8", "ui32"])
def test_signed_reading_of_unsigned_start_indices_fails(itype):
    for body_op in ("dynamic_slice", "dynamic_update_slice"):
        sig = _sig("async_start", T, body_op, itype, seed=5)
        assert failing(classes(SignedStartIndices(), sig)) > 0, body_op
        assert set(classes(Threaded(), sig)) == {"pass"}


def test_an_update_clamped_to_the_last_element_fails():
    sig = _sig("async_start", T, "dynamic_update_slice", "si64", seed=5)
    assert failing(classes(UpdateClampedToLastElement(), sig)) > 0
    assert set(classes(Oracle(), sig)) == {"pass"}


def test_the_start_index_type_is_the_bodys_not_e():
    """E types the data operands; the start indices are of the drawn integer type (in the
    spec data: operands typed ``otypes[k]``, the body's block argument types)."""
    spec = load_spec("async_start")
    assert [i.type for i in spec.inputs] == ["otypes[k]"]
    sig = _sig("async_start", T, "dynamic_update_slice", "si16")
    assert [t.element_type.name for t in sig.input_types] == ["f32", "f32", "si16", "si16"]
    with pytest.raises(ValueError, match="not an integer type"):
        async_body(1, "f32", [8, 3], "dynamic_slice", "f32")
    with pytest.raises(ValueError, match="is not one of"):
        async_body(1, "f32", [8, 3], "add", "si32")


@pytest.mark.parametrize("op", OPS)
def test_quick_plans_draw_every_body_op(op):
    spec = load_spec(op)
    seen = set()
    for e in ("f32", "f16", "bf16"):
        for sig in plan_signatures(spec, {"E": e}, 8, seed=0, profile="quick"):
            assert not violations(sig), sig.key()
            seen.add(_body_op(sig))
    assert seen == set(BODY_OPS)


def test_the_slice_bodies_are_those_of_before():
    """The slice body of a seed is what it was before the dynamic slices came (the same
    draw): the ids of slice bodies rebuild the same program."""
    body = async_body(7, "f32", [4, 5], "slice", "si32")
    (o,) = region_program.parse(body).program.operations
    rng = np.random.default_rng([7, 30])
    starts = []
    for d in (4, 5):
        s = int(rng.integers(0, d))
        rng.integers(s + 1, d + 1)
        rng.integers(1, 3)
        starts.append(s)
    assert list(o.signature.attributes["start_indices"]) == starts
    assert element_type("si32").is_integer
