"""XLA's RngBernoulli (issue 17; 000 "RngBernoulli"), a property spec: planted
generators that differ only in what the text allows (another stream, u <= p for u < p,
new values per run) pass; constant, inverted, mask-valued (0xFFFFFFFF for true) and
biased ones fail. The canonical program (rng UNIFORM + compare + convert) is printed and
verified; the jax mapping is that program in lax ops."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from conformance.mlir import emitter

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.checking.verdicts.rng import BERNOULLI_GRID

OP = "rng_bernoulli"


def sig_of(shape=(1024,), out="ui32"):
    dims = "x".join(map(str, shape))
    return Signature.make(OP, ["tensor<f32>"],
                          [f"tensor<{dims}x{out}>" if shape else f"tensor<{out}>"])


class Bernoulli(Backend):
    """B(1, mean) from numpy's PCG64, a new seed per run (legal: nothing fixes the values
    or says they repeat); ``bug`` plants a realistic defect."""

    isolate = False
    name = "planted"
    runs = itertools.count()

    def __init__(self, bug=None):
        self.bug = bug
        super().__init__()

    def compile(self, sig):
        t = sig.result_types[0]

        def run(inputs):
            p = float(np.asarray(inputs[0]).reshape(()))
            u = np.random.default_rng(next(self.runs)).random(t.shape)
            with np.errstate(invalid="ignore"):
                if self.bug is None:
                    x = u < p
                elif self.bug == "le":          # u <= p: P = p + (a grid step): allowed
                    x = u.astype(np.float32) <= np.float32(p)
                elif self.bug == "constant":    # the mean rounded: 0 or 1 everywhere
                    x = np.full(t.shape, p >= 0.5)
                elif self.bug == "inverted":    # u > p: B(1, 1 - p)
                    x = u > p
                elif self.bug == "squared":     # two draws and-ed: B(1, p^2)
                    x = (u < p) & (np.random.default_rng(next(self.runs)).random(t.shape) < p)
                elif self.bug == "mask":        # a SIMD mask for true: 0xFFFFFFFF
                    return [np.where(u < p, np.uint32(0xFFFFFFFF), np.uint32(0))]
            return [np.asarray(x).astype(t.element_type.dtype)]
        return run


def check(backend, sig, batches=2, depth="default"):
    spec = load_spec(OP)
    chk = SignatureCheck(spec, sig, [backend])
    chk.compile()
    assert not chk.failed and not chk.unsupported, (chk.failed, chk.unsupported)
    counts: dict[str, int] = {}
    impl: dict = {}
    for b in range(batches):
        stacked = batch_for(0, depth, spec, "f32", 0, b, sig)
        v = chk.run_batch(b, stacked).results[backend.name].verdict
        for cls, k in v.counts().items():
            counts[cls] = counts.get(cls, 0) + k
        impl.update(v.impl_defined)
    return counts, impl


@pytest.mark.parametrize("bug", [None, "le"], ids=["another-stream", "u-le-p"])
@pytest.mark.parametrize("shape", [(1024,), (8192,), (4, 4), ()], ids=str)
def test_legal_bernoulli_generators_pass(bug, shape):
    counts, impl = check(Bernoulli(bug), sig_of(shape))
    assert set(counts) == {"pass"}, counts


@pytest.mark.parametrize("bug", ["constant", "inverted", "squared", "mask"])
def test_planted_bernoulli_bugs_fail(bug):
    counts, _ = check(Bernoulli(bug), sig_of((1024,)))
    assert counts.get("property", 0) > 0, counts


def test_the_certain_means_are_checked_on_small_outputs_too():
    """mean 0 gives 0 and mean 1 gives 1 whatever the size: an inverted generator fails
    on a 4x4 output, where the statistics have too few elements."""
    counts, _ = check(Bernoulli("inverted"), sig_of((4, 4)))
    assert counts.get("property", 0) > 0, counts


def test_means_outside_the_unit_interval_are_masked_and_recorded():
    spec = load_spec(OP)
    sig = sig_of((64,))
    chk = SignatureCheck(spec, sig, [Bernoulli("mask")])
    chk.compile()
    stacked = [np.float32([1.5, np.nan, 0.5])]
    v = chk.run_batch(0, stacked).results["planted"].verdict
    # cases 0 and 1 are no probability (masked, recorded); case 2's mask values fail
    assert v.case_class_names() == ["pass", "pass", "property"]
    rec = v.impl_defined["mean_outside_unit_interval"]
    assert rec["elements"] == 128 and rec["alternatives"] == {"other": 64, "all_zero": 64}


def test_the_mean_check_has_its_false_alarm_rate_and_power():
    """At alpha = 0.05 (the bound is the same at 1e-6), of 400 good B(1024, 0.3) samples
    at most 35 fail (5% + 3.4 sd); a mean off by 0.12 (8 sd) fails nearly always at 1e-6."""
    from types import SimpleNamespace

    from conformance.checking.verdicts.rng import bernoulli_mean
    g = np.random.default_rng(3)

    def fails(p_true, alpha, n=400):
        x = (g.random((n, 1024)) < p_true).astype(np.uint32)
        j = SimpleNamespace(actual=[x], inputs=[np.full(n, 0.3, np.float32)], batch=n,
                            masks={}, accuracy=SimpleNamespace(options={"alpha": alpha}))
        ok, _ = bernoulli_mean(j)
        return int((~ok).sum())
    assert fails(0.3, 0.05) <= 35
    assert fails(0.3, 1e-6) == 0
    assert fails(0.42, 1e-6) >= 395


def test_oracle_is_a_bernoulli_sample_and_exact_at_the_certain_means():
    t = "tensor<100000xui32>"
    x = oracles.evaluate(OP, [np.float32(0.25)], {}, result_types=[t])[0]
    assert x.dtype == np.uint32 and set(np.unique(x)) <= {0, 1}
    assert abs(x.mean() - 0.25) < 0.01
    assert not oracles.evaluate(OP, [np.float32(0)], {}, result_types=[t])[0].any()
    assert oracles.evaluate(OP, [np.float32(1)], {}, result_types=[t])[0].all()
    assert BERNOULLI_GRID == 2.0 ** -23


def test_the_canonical_program_is_rng_uniform_compare_convert():
    text = emitter.module_text(sig_of((2, 3)))
    for op in ('"stablehlo.rng"', "rng_distribution UNIFORM", '"stablehlo.compare"',
               "comparison_direction LT", '"stablehlo.convert"', "tensor<2x3xui32>"):
        assert op in text, op
    emitter.parse(text)


def test_an_output_other_than_u32_has_no_canonical_program():
    from conformance.backends.vendor import module_text
    from conformance.backends.base import Unsupported
    with pytest.raises(emitter.EmitError, match="output is U32"):
        emitter.module_text(sig_of((4,), "si32"))
    with pytest.raises(Unsupported, match="no StableHLO text for rng_bernoulli"):
        module_text(sig_of((4,), "si32"))


def test_jax_maps_it_as_the_canonical_program():
    pytest.importorskip("jax")
    from conformance.backends.jax_backend import JaxBackend
    counts, impl = check(JaxBackend(), sig_of((8192,)), batches=1)
    assert set(counts) == {"pass"}, counts
    assert "mean_outside_unit_interval" in impl
