"""XLA's Erf (issue 21): the oracle against mpmath, the ULP verdict on backends that
approximate erf too coarsely (must fail) or within the bound (must pass), and the
interpreter's stated refusal of the CHLO op."""
from __future__ import annotations

import mpmath
import numpy as np
import pytest

from conformance import oracles
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.types import element_type
from conformance.checking.plan import batch_for, binding_for, plan_binding
from conformance.specs import load_spec
from planted import OracleBackend


def _mp_erf(x: float) -> float:
    with mpmath.workprec(120):
        return float(mpmath.erf(mpmath.mpf(x)))


@pytest.mark.parametrize("et", ["f32", "f64", "bf16", "f16"])
def test_oracle_is_correctly_rounded_against_mpmath(et):
    t = element_type(et)
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-6, 6, 300), rng.uniform(-1e-3, 1e-3, 50),
                        [0.5, 1.0, 2.0, 3.9, 5.9]]).astype(t.dtype)
    got = oracles.evaluate("erf", [x], {})[0]
    want = np.array([_mp_erf(float(v)) for v in x.astype(np.float64)])
    # the oracle is the mpmath value rounded once to the type: equal after rounding
    assert (got.astype(np.float64) == want.astype(t.dtype).astype(np.float64)).all()


def test_oracle_special_values():
    x = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1e-40], np.float32)
    r = oracles.evaluate("erf", [x], {})[0]
    assert np.signbit(r[0]) and not np.signbit(r[1])
    assert r[2] == 1 and r[3] == -1 and np.isnan(r[4])
    assert 0 < r[5] < np.finfo(np.float32).tiny       # 2x/sqrt(pi): a subnormal


class _ChangesErf(OracleBackend):
    def change(self, x, out):
        raise NotImplementedError

    def compile(self, sig):
        inner = super().compile(sig)

        def run(inputs):
            (out,) = inner(inputs)
            x = np.asarray(inputs[0])
            with np.errstate(all="ignore"):
                return [np.asarray(self.change(x, np.asarray(out)), out.dtype)]
        return run


class AbramowitzStegun(_ChangesErf):
    """erf by Abramowitz & Stegun 7.1.26 (absolute error 1.5e-7) evaluated in the
    type: good to 6 digits, which is hundreds of ULPs of f32 near zero."""
    name = "as-7.1.26"

    def change(self, x, out):
        w = x.astype(np.float64)
        t = 1.0 / (1.0 + 0.3275911 * np.abs(w))
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
            -1.453152027 + t * 1.061405429))))
        r = np.sign(w) * (1.0 - poly * np.exp(-w * w))
        return np.where(np.isfinite(w), r, out).astype(x.dtype)


class SaturatesAtF32Threshold(_ChangesErf):
    """erf returning +-1 for |x| > 3.92 in every type: f32's threshold in the f64 kernel."""
    name = "erf-f32-threshold"

    def change(self, x, out):
        return np.where(np.abs(x.astype(np.float64)) > 3.92, np.sign(x), out)


class LosesNegativeZero(_ChangesErf):
    name = "erf-abs-zero"

    def change(self, x, out):
        return np.where(out == 0, np.zeros_like(out), out)


class OneUlpHigh(_ChangesErf):
    """One ULP away from zero on every finite nonzero result below 1 in magnitude:
    within the spec YAML's bound (4 ULPs for f32 and f64)."""
    name = "erf-ulp"

    def change(self, x, out):
        ok = np.isfinite(out) & (np.abs(out) < 1) & (np.abs(out) >= np.finfo(out.dtype).tiny)
        return np.where(ok, np.nextafter(out, np.copysign(np.inf, out).astype(out.dtype)), out)


def _classes(backend, key, depth="quick"):
    spec = load_spec("erf")
    counts: dict[str, int] = {}
    for i, sig in enumerate(plan_binding(spec, binding_for(spec, key), 0, depth)):
        check = SignatureCheck(spec, sig, [backend])
        check.compile()
        batch = check.run_batch(0, batch_for(0, depth, spec, key, i, 0, sig))
        for cls, n in batch.results[backend.name].verdict.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


@pytest.mark.parametrize("backend,key,cls", [
    (AbramowitzStegun(), "f32", "accuracy"),
    (SaturatesAtF32Threshold(), "f64", "accuracy"),
    (LosesNegativeZero(), "f32", "signed_zero"),
])
def test_a_wrong_erf_fails(backend, key, cls):
    assert _classes(backend, key).get(cls, 0) > 0


@pytest.mark.parametrize("key", ["f32", "f64"])
def test_erf_within_its_ulp_bound_passes(key):
    assert set(_classes(OneUlpHigh(), key)) == {"pass"}


def test_the_interpreter_refuses_the_chlo_op_with_its_reason():
    from conformance.backends import Unsupported
    from conformance.backends.interpreter_backend import InterpreterBackend
    sig = Signature.make("erf", ["tensor<2xf32>"], ["tensor<2xf32>"])
    with pytest.raises(Unsupported, match="stablehlo ops only, not chlo.erf"):
        InterpreterBackend().compile(sig)
