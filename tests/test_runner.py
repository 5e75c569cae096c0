"""The differential runner end to end: results stream, determinism, classification,
reproducers, unsupported and invalid cases."""
import json
import os
import subprocess
import sys
from pathlib import Path

from conformance.backends import get_backend
from conformance.core.results import read_results
from conformance.apps.runner import RunConfig, run

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, backends, **kw):
    cfg = RunConfig(backends=backends, depth="quick", out=tmp_path, **kw)
    run(cfg, [get_backend(b) for b in backends], tmp_path / "results.jsonl")
    return list(read_results(tmp_path / "results.jsonl"))


def _kinds(records, kind):
    return [r for r in records if r["kind"] == kind]


def test_numpy_backend_agrees_with_the_oracle(tmp_path):
    recs = _run(tmp_path, ["numpy"], ops=["add", "convert", "compare", "shift_left"],
                element_types=["si4", "bf16", "f8E4M3FN", "ui64", "complex<f64>"])
    assert recs[0]["kind"] == "run" and recs[-1]["kind"] == "end"
    sigs = _kinds(recs, "signature")
    assert sigs and all(r["outcome"] == "pass" for r in sigs)
    assert sum(r["cases"] for r in sigs) > 1000
    assert all(r["outcome"] in ("rejected", "not_generated") for r in _kinds(recs, "invalid"))
    assert all(r["outcome"] == "pass" for r in _kinds(recs, "example"))
    validity = _kinds(recs, "validity")
    assert validity and all(v["valid"] == v["generated"] for v in validity)


def test_same_seed_same_cases(tmp_path):
    a = _run(tmp_path / "a", ["numpy"], ops=["divide"], seed=5)
    b = _run(tmp_path / "b", ["numpy"], ops=["divide"], seed=5)
    c = _run(tmp_path / "c", ["numpy"], ops=["divide"], seed=6)
    key = lambda recs: [(r["signature"], r["cases"], r.get("impl_defined"))
                        for r in _kinds(recs, "signature")]
    assert key(a) == key(b)
    assert key(a) != key(c)


def test_planted_divergence_is_found_classified_minimised_and_reproducible(tmp_path):
    recs = _run(tmp_path, ["planted:PlantedAddF32"], ops=["add"],
                element_types=["f32", "si8"], invalid=False)
    sigs = _kinds(recs, "signature")
    f32 = [r for r in sigs if r["type_key"] == "f32"]
    assert any(r["outcome"] == "value" for r in f32)
    assert all(r["outcome"] == "pass" for r in sigs if r["type_key"] == "si8")
    divs = _kinds(recs, "divergence")
    assert divs and all(d["class"] == "value" and d["type_key"] == "f32" for d in divs)
    d = divs[0]
    # Minimised to one element (rank 0), and the reproducer fails on the divergence.
    assert d["minimised_signature"] == "add(tensor<f32>, tensor<f32>) -> (tensor<f32>)"
    repro = tmp_path / d["repro"] / "repro.py"
    case = json.loads((repro.parent / "case.json").read_text())
    assert case["backend"] == "planted:PlantedAddF32"
    # A vendor's backend module is importable where its reproducers run; ours is tests/.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    proc = subprocess.run([sys.executable, str(repro)], cwd=ROOT, capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict:  value" in proc.stdout
    # Against the oracle itself (the fix), the same reproducer passes.
    proc = subprocess.run([sys.executable, str(repro), "numpy"], cwd=ROOT, capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_unsupported_is_reported_with_the_reason(tmp_path):
    recs = _run(tmp_path, ["planted:NoSine"], ops=["sine"], element_types=["f32"])
    sigs = _kinds(recs, "signature")
    assert sigs and all(r["outcome"] == "unsupported" for r in sigs)
    assert "sine is not implemented" in sigs[0]["reason"]


def test_accepted_invalid_programs_are_divergences(tmp_path):
    recs = _run(tmp_path, ["planted:AcceptsEverything"], ops=["compare"])
    inv = _kinds(recs, "invalid")
    assert {r["rule"] for r in inv if r["outcome"] == "accepted_invalid"} >= {"C1", "C2", "C3"}


def test_jax_flushes_subnormals_and_says_so(tmp_path):
    """XLA on CPU runs with FTZ/DAZ: f32 multiply by a subnormal is classified
    subnormal_flush, not value."""
    recs = _run(tmp_path, ["jax"], ops=["multiply"], element_types=["f32"], invalid=False,
                examples=False)
    divs = _kinds(recs, "divergence")
    assert divs and {d["class"] for d in divs} <= {"subnormal_flush"}


def test_results_of_a_killed_run_are_readable(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"kind": "run", "seed": 0}\n{"kind": "signature", "op": "add", '
                    '"type_key": "f32", "backend": "numpy", "outcome": "pass"}\n{"kind": "sig')
    recs = list(read_results(path))
    assert [r["kind"] for r in recs] == ["run", "signature"]


def test_tolerance_profile_overrides_the_spec_bound(tmp_path):
    """A planted 1-ulp error in f32 add (toward zero: never an overflow, which no ulp
    bound excuses; the batches meet the largest finite value) is a value divergence under
    the spec's exact rule, and passes under a profile that allows 1 ulp."""
    from conformance.checking.tolerances import load_tolerances
    prof = tmp_path / "tol.yaml"
    prof.write_text("add:\n  f32: {ulp: 1}\n")
    backend = ["planted:OneUlpTowardZeroAddF32"]
    recs = _run(tmp_path / "run", backend, ops=["add"], element_types=["f32"],
                invalid=False, examples=False, tolerances=load_tolerances(prof))
    assert all(r["outcome"] == "pass" for r in _kinds(recs, "signature"))
    recs = _run(tmp_path / "exact", backend, ops=["add"], element_types=["f32"],
                invalid=False, examples=False)
    assert any(r["outcome"] == "value" for r in _kinds(recs, "signature"))


def test_bad_tolerance_profile_names_file_and_key(tmp_path):
    import pytest
    from conformance.specs import SpecError
    from conformance.checking.tolerances import load_tolerances
    prof = tmp_path / "tol.yaml"
    prof.write_text("add:\n  f33: {ulp: 1}\n")
    with pytest.raises(SpecError, match=r"tol.yaml: add.f33: unknown element type"):
        load_tolerances(prof)
    prof.write_text("nosuch:\n  f32: {ulp: 1}\n")
    with pytest.raises(SpecError, match=r"tol.yaml: nosuch: unknown op"):
        load_tolerances(prof)
    prof.write_text("add:\n  f32: {ulps: 1}\n")
    with pytest.raises(SpecError, match=r"add.f32: unknown verdict kind .ulps.; known: .*ulp"):
        load_tolerances(prof)


def test_a_backend_error_keeps_its_whole_message(tmp_path):
    from conformance.backends import get_backend
    from conformance.core.results import read_results
    cfg = RunConfig(backends=["planted:MultiLineError"], ops=["add"], element_types=["f32"],
                    depth="quick", out=tmp_path, invalid=False, examples=False)
    run(cfg, [get_backend("planted:MultiLineError")], tmp_path / "results.jsonl")
    reasons = [r["reason"] for r in read_results(tmp_path / "results.jsonl")
               if r["kind"] == "signature" and r["outcome"] == "backend_error"]
    assert reasons and all("Invoked with: <bfloat16 scalar>" in r for r in reasons), reasons
    assert all(r.startswith("TypeError: make_buffer()") for r in reasons)
