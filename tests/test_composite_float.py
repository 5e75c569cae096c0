"""A float composite that decomposes to a real computation (issue 32 item 1): the quick
plan of every float binding of composite holds an erf-like decomposition (x·(1.125 −
0.375·x²) clamped to [−1, 1]), so a backend that evaluates a composite's float
decomposition wrongly (XLA on CPU fuses its multiply and add into an FMA) is caught at
quick depth, and one that evaluates it op by op at another precision that rounds the
same passes."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.checking.checker import SignatureCheck
from conformance.checking.plan import batch_for, plan_binding
from conformance.core import region_program
from conformance.specs import binding_key, load_spec
from planted import OracleBackend

ERF_OPS = ["constant"] * 4 + ["multiply", "multiply", "add", "multiply", "clamp"]


def erf_like(sig) -> bool:
    ops = [o.signature.op for o in region_program.parse(sig.regions[0]).program.operations]
    return ops == ERF_OPS


def quick_plan(key):
    spec = load_spec("composite")
    (b,) = [b for b in spec.type_bindings() if binding_key(b) == key]
    return spec, plan_binding(spec, b, 0, "quick")


@pytest.mark.parametrize("key", ["bf16", "f16", "f32", "f64"])
def test_the_quick_plan_of_every_float_binding_holds_an_erf_like_decomposition(key):
    _, sigs = quick_plan(key)
    found = [s for s in sigs if erf_like(s)]
    assert found and all(s.input_types[0].element_type.name == key for s in found), \
        [s.regions[0][:120] for s in sigs]


class ErfPoly(OracleBackend):
    """The erf-like composite computed in numpy: each op rounded to the element type
    (``fused`` False: what the spec says, through float64 and one rounding per op, which
    for a multiply or an add of f32 is the same value), or its multiply and add fused
    into one multiply-add rounded once (``fused``: XLA CPU's contraction)."""

    name = "planted"

    def __init__(self, fused: bool) -> None:
        super().__init__()
        self.fused = fused

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "composite" or not erf_like(sig):
            return inner
        t = sig.result_types[0].element_type.dtype

        def run(inputs):
            x = np.asarray(inputs[0]).astype(t)
            with np.errstate(all="ignore"):
                x2 = (x.astype(np.float64) * x.astype(np.float64)).astype(t)
                if self.fused:
                    t2 = (x2.astype(np.float64) * -0.375 + 1.125).astype(t)
                else:
                    t1 = (x2.astype(np.float64) * -0.375).astype(t)
                    t2 = (t1.astype(np.float64) + 1.125).astype(t)
                t3 = (x.astype(np.float64) * t2.astype(np.float64)).astype(t)
                r = np.where(np.isnan(t3), t3, np.clip(t3, -1.0, 1.0)).astype(t)
            return [r.reshape(sig.result_types[0].shape)]
        return run


def counts(backend, key="f32", batches=2):
    spec, sigs = quick_plan(key)
    out: dict[str, int] = {}
    for i, sig in enumerate(sigs):
        if not erf_like(sig):
            continue
        chk = SignatureCheck(spec, sig, [backend])
        chk.compile()
        assert not chk.failed, chk.failed
        for b in range(batches):
            v = chk.run_batch(b, batch_for(0, "quick", spec, key, i, b, sig)
                              ).results[backend.name].verdict
            for cls, n in v.counts().items():
                out[cls] = out.get(cls, 0) + n
    return out


def test_a_fused_multiply_add_in_the_decomposition_fails_at_quick_depth():
    got = counts(ErfPoly(fused=True))
    assert got.get("value", 0) > 0, got


def test_the_decomposition_computed_op_by_op_at_another_precision_passes():
    got = counts(ErfPoly(fused=False))
    assert set(got) == {"pass"}, got
