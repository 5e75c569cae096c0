"""The warm path's draws are the values they replaced, bit for bit (issue 33): a batch's
generator built without ``default_rng`` and the coverage overlay's pool members drawn in
one call give what the plan drew before. The inputs of one element type and distribution
are one draw split in order (a change of what each case id names: the golden verdict file
was regenerated for it)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.checking import plan
from conformance.generators import batch_inputs, coverage
from conformance.specs import binding_key, load_spec


@pytest.mark.parametrize("args", [(0, "add", "f32", 0, 0), (7, "convert", "si8->f32", 3, 2),
                                  (2 ** 31 + 5, "sort", "bf16", 15, 7),
                                  (2 ** 40 + 3, "sort", "f32", 2 ** 33, 2 ** 32 + 1)])
def test_batch_rng_is_default_rng_of_the_case_id_parts(args):
    seed, op, key, index, batch = args
    want = np.random.default_rng([seed, plan.stable_hash(op, key), index, batch])
    got = plan.batch_rng(seed, op, key, index, batch)
    assert got.bit_generator.state == want.bit_generator.state
    assert (got.random(5) == want.random(5)).all()


def _overlay_per_input(spec, sig, binding, arrays, rng, batch_no, seed):
    """The overlay as it was written before: one rng.integers call per input."""
    groups = coverage._groups(spec, sig, binding)
    for g in groups:
        positions = arrays[g.inputs[0][0]].size
        if not positions:
            continue
        cap = max(1, int(positions * coverage.SYSTEMATIC_SHARE))
        count = cap if g.cycle else min(len(g.rows), cap)
        picked = g.rows[(batch_no * count + np.arange(count)) % len(g.rows)]
        for col, (index, o) in enumerate(g.inputs):
            pool = coverage.class_pool(o.et, o.scheme, o.distribution, seed)
            flat = arrays[index].reshape(-1)
            codes = picked[:, col]
            member = rng.integers(0, coverage.POOL, count)
            if g.free[col]:
                at = np.nonzero(codes >= 0)[0]
                flat[at] = pool[codes[at], member[at]]
            else:
                flat[:count] = pool[codes, member]


@pytest.mark.parametrize("op,key", [("add", "f32"), ("clamp", "si64"), ("select", "f32"),
                                    ("compare", "f16"), ("sort", "bf16"), ("convert", "si8->f32"),
                                    ("atan2", "f64"), ("dot_general", None),
                                    ("clamp", None)])
def test_overlay_draws_what_one_call_per_input_drew(op, key):
    spec = load_spec(op)
    binding = next(b for b in spec.type_bindings() if key in (None, binding_key(b)))
    sigs = plan.plan_binding(spec, binding, 0, "quick")
    for i, sig in enumerate(sigs[:2]):
        for batch_no in range(3):
            base = np.random.default_rng([1, i, batch_no])
            arrays = [np.ascontiguousarray(x) for x in batch_inputs(sig, base, 16, spec)]
            copies = [x.copy() for x in arrays]
            rng_a, rng_b = np.random.default_rng([9, batch_no]), np.random.default_rng([9, batch_no])
            coverage.overlay(spec, sig, binding, arrays, rng_a, batch_no, 0)
            _overlay_per_input(spec, sig, binding, copies, rng_b, batch_no, 0)
            for a, b in zip(arrays, copies):
                assert a.tobytes() == b.tobytes()
            assert rng_a.bit_generator.state == rng_b.bit_generator.state


def _sig(op, key, shapes=None):
    spec = load_spec(op)
    binding = next(b for b in spec.type_bindings() if binding_key(b) == key)
    sigs = plan.plan_binding(spec, binding, 0, "quick")
    return spec, next(s for s in sigs if all(t.size > 1 for t in s.input_types))


@pytest.mark.parametrize("op,key", [("add", "f32"), ("multiply", "bf16"), ("clamp", "si64")])
def test_inputs_of_one_type_come_from_one_draw(op, key):
    """A binary op's operands are one draw_array call split in input order (one draw per
    batch instead of one per input), each its own shape, contiguous and writeable (the
    overlay writes into them)."""
    from conformance.generators.values import draw_array
    spec, sig = _sig(op, key)
    got = batch_inputs(sig, np.random.default_rng(3), 16, spec)
    leaves = [(t.element_type, (16, *t.shape)) for t in sig.input_types]
    et = leaves[0][0]
    assert all(e == et for e, _ in leaves)
    flat = draw_array(et, (sum(int(np.prod(s)) for _, s in leaves),), np.random.default_rng(3))
    start = 0
    for x, (_, shape) in zip(got, leaves):
        n = int(np.prod(shape))
        assert x.shape == shape and x.flags.c_contiguous and x.flags.writeable
        assert x.tobytes() == flat[start:start + n].tobytes()
        start += n


def test_inputs_of_other_types_are_drawn_apart():
    """select's predicate (i1) and its branches (one float type): two draws, the i1 one
    first, in input order."""
    from conformance.generators.values import draw_array
    spec, sig = _sig("select", "f32")
    got = batch_inputs(sig, np.random.default_rng(5), 8, spec)
    rng = np.random.default_rng(5)
    pred = draw_array(sig.input_types[0].element_type, (8, *sig.input_types[0].shape), rng)
    sizes = [8 * t.size for t in sig.input_types[1:]]
    branches = draw_array(sig.input_types[1].element_type, (sum(sizes),), rng)
    assert got[0].tobytes() == pred.tobytes()
    assert got[1].tobytes() + got[2].tobytes() == branches.tobytes()


def test_jax_backend_runs_cpu_computations_inline():
    """A JaxBackend made before jax's CPU client turns asynchronous dispatch off (the suite
    reads each batch's results at once: the hand-off to a worker thread only costs)."""
    import subprocess
    import sys
    code = ("from conformance.backends import get_backend; get_backend('jax');"
            "from jax._src import xla_bridge as xb; print(xb._CPU_ENABLE_ASYNC_DISPATCH.value)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"}, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
