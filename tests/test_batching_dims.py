"""gather and scatter with batching dimensions (the 2026-08 text of the spec), judged both
ways on the one check path: a planted backend that ignores the batching dimensions (it
reads and writes batch 0 of the operand for every batch position, as a lowering that
treats them as collapsed / inserted dimensions does) fails, and one that computes the
same result by another route the spec allows (the batch unrolled into a loop of
unbatched gathers / scatters, one per batching position) passes."""
import itertools

import numpy as np
import pytest

from conformance import oracles
from conformance.apps.runner import plan_signatures
from conformance.backends import Backend, Unsupported, get_backend
from conformance.checking.checker import SignatureCheck
from conformance.generators import batch_inputs
from conformance.specs import load_spec

# (operand batching dims, indices batching dims, the dims that get no window)
NAMES = {"gather": ("operand_batching_dims", "start_indices_batching_dims",
                    "collapsed_slice_dims"),
         "scatter": ("input_batching_dims", "scatter_indices_batching_dims",
                     "inserted_window_dims")}


def _unbatched(op, attrs):
    """The attributes with the batching dimensions dropped and their operand dimensions
    made collapsed (inserted): a gather or scatter with no batching index."""
    obd, sibd, hidden = NAMES[op]
    a = dict(attrs)
    a[hidden] = sorted(list(a[hidden]) + list(a[obd]))
    a[obd], a[sibd] = [], []
    return a


def _evaluate(sig, inputs, attrs, result_types):
    return list(oracles.evaluate(sig.op, inputs, attrs, result_types=result_types,
                                 regions=sig.regions,
                                 input_types=[type(t)(x.shape, t.element_type) for t, x in
                                              zip(sig.input_types, inputs)]))


def ignoring_batching(sig, inputs):
    """The bug: every batch position indexes the operand at 0 along the batching
    dimensions (the batching index is dropped)."""
    return _evaluate(sig, inputs, _unbatched(sig.op, sig.attributes), sig.result_types)


def _batch_axis(k_indices_axis, ivd):
    """The position in the batch index of the indices' axis (the spec's d - (d < ivd ? 0 :
    1))."""
    return k_indices_axis - (0 if k_indices_axis < ivd else 1)


def unrolled(sig, inputs):
    """The allowed route: for each combination of batching positions, the operand
    (inputs), the indices and (scatter) the updates cut to that position (kept as
    dimensions of size 1), an unbatched gather / scatter, its result put back."""
    op, a = sig.op, sig.attributes
    obd_name, sibd_name, _ = NAMES[op]
    obd, sibd, ivd = a[obd_name], a[sibd_name], a["index_vector_dim"]
    flat = _unbatched(op, a)
    if op == "gather":
        operands, idx, updates = [inputs[0]], inputs[1], []
        out = [np.zeros(t.shape, t.element_type.dtype) for t in sig.result_types]
        window_dims = a["offset_dims"]
        out_axis_of = [d for d in range(len(sig.result_types[0].shape))
                       if d not in window_dims]
    else:
        n = len(sig.result_types)
        operands, idx, updates = list(inputs[:n]), inputs[n], list(inputs[n + 1:])
        # results of the update computation's types (2026-08 C25: a promoted one's)
        out = [np.array(x, copy=True).astype(t.element_type.dtype)
               for x, t in zip(operands, sig.result_types)]
        window_dims = a["update_window_dims"]
        out_axis_of = [d for d in range(updates[0].ndim) if d not in window_dims]
    sizes = [operands[0].shape[d] for d in obd]
    for pos in itertools.product(*(range(s) for s in sizes)):
        cut_op = [slice(None)] * operands[0].ndim
        cut_idx = [slice(None)] * idx.ndim
        cut_batch = {}          # axis of the result (gather) or updates (scatter) -> slice
        for do, ds, p in zip(obd, sibd, pos):
            cut_op[do] = slice(p, p + 1)
            cut_idx[ds] = slice(p, p + 1)
            cut_batch[out_axis_of[_batch_axis(ds, ivd)]] = slice(p, p + 1)
        sub_ops = [x[tuple(cut_op)] for x in operands]
        sub_idx = idx[tuple(cut_idx)]
        if op == "gather":
            cut_res = tuple(cut_batch.get(d, slice(None)) for d in range(out[0].ndim))
            res_type = type(sig.result_types[0])(out[0][cut_res].shape,
                                                 sig.result_types[0].element_type)
            out[0][cut_res] = _evaluate(sig, sub_ops + [sub_idx], flat, [res_type])[0]
        else:
            cut_up = tuple(cut_batch.get(d, slice(None)) for d in range(updates[0].ndim))
            sub_up = [u[cut_up] for u in updates]
            res_types = [type(t)(x.shape, t.element_type) for t, x in
                         zip(sig.result_types, sub_ops)]
            got = _evaluate(sig, sub_ops + [sub_idx] + sub_up, flat, res_types)
            for o, g in zip(out, got):
                o[tuple(cut_op)] = g
    return out


class Planted(Backend):
    """A backend computing ``fn(sig, inputs)`` per case."""

    def __init__(self, name, fn):
        super().__init__()
        self.name, self.fn = name, fn

    def compile(self, sig):
        return lambda inputs: self.fn(sig, [np.asarray(x) for x in inputs])


def _batched_signatures(op, n=40):
    """Drawn signatures of ``op`` with batching dimensions and a non-empty result."""
    spec = load_spec(op)
    obd = NAMES[op][0]
    out = []
    for binding in ({"E": "si32"}, {"E": "f32"}):
        for sig in plan_signatures(spec, binding, n, seed=5, profile="quick"):
            if sig.attributes[obd] and all(s for t in sig.result_types for s in t.shape) \
                    and max(sig.input_types[0].shape[d] for d in sig.attributes[obd]) > 1:
                out.append(sig)
    return out


def _classes(sig, backend, seed=0):
    spec = load_spec(sig.op)
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    stacked = batch_inputs(sig, np.random.default_rng(seed), 8, spec)
    verdict = check.run_batch(0, list(stacked)).results[backend.name].verdict
    return set(verdict.case_class_names())


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_a_backend_that_ignores_the_batching_dimensions_fails(op):
    sigs = _batched_signatures(op)
    assert len(sigs) >= 3, op
    failing = [s for s in sigs if _classes(s, Planted("batch0", ignoring_batching)) - {"pass"}]
    # (a scatter whose windows leave the operand, or whose repeated updates are masked as
    # order-dependent, may not tell; most signatures do)
    assert len(failing) >= min(3, len(sigs)), (len(failing), len(sigs))


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_the_batch_unrolled_into_unbatched_ops_passes(op):
    sigs = _batched_signatures(op)
    assert len(sigs) >= 3, op
    for sig in sigs:
        assert _classes(sig, Planted("unrolled", unrolled)) == {"pass"}, sig.key()


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_jax_runs_batching_dimensions_as_the_oracle(op):
    """jax.lax's GatherDimensionNumbers / ScatterDimensionNumbers carry the batching
    dimensions (jax 0.10): the mapping renumbers the indices' batching dimension with the
    index vector moved last."""
    backend = get_backend("jax")
    checked = 0
    for sig in _batched_signatures(op)[:6]:
        try:
            backend.compile(sig)
        except Unsupported:     # a region jax.lax has no scatter for, a collapsed size 0
            continue
        assert _classes(sig, backend) <= {"pass"}, sig.key()
        checked += 1
    assert checked >= 2
