"""The warm path's draws are the values they replaced, bit for bit (issue 33): a batch's
generator built without ``default_rng`` and the coverage overlay's pool members drawn in
one call give what the plan drew before, so case ids and golden verdicts stay."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.checking import plan
from conformance.generators import batch_inputs, coverage
from conformance.specs import binding_key, load_spec


@pytest.mark.parametrize("args", [(0, "add", "f32", 0, 0), (7, "convert", "si8->f32", 3, 2),
                                  (2 ** 31 + 5, "sort", "bf16", 15, 7)])
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
