"""`conformance repro CASE_ID`: a case re-created from its id alone is the run's case,
bit for bit; exit 1 while it diverges, 0 on a backend that agrees, 2 on a bad id.
And replay: reproducers already in the output folder are re-run first."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance.apps import cli
from conformance.backends import get_backend
from conformance.core.literals import decode
from conformance.apps.replay import CaseId, rebuild
from conformance.core.results import read_results
from conformance.apps.runner import RunConfig, plan_binding, run, select_bindings
from conformance.specs import binding_key, load_spec

ROOT = Path(__file__).resolve().parents[1]


def _run(out, backends, depth="quick", **kw):
    cfg = RunConfig(backends=backends, depth=depth, out=out, **kw)
    run(cfg, [get_backend(b) for b in backends], out / "results.jsonl")
    return list(read_results(out / "results.jsonl"))


def conformance(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env)


def _bits(encoded):
    return [np.ascontiguousarray(decode(x)).view(np.uint8).tobytes() for x in encoded]


def test_every_divergence_id_rebuilds_its_case_and_reproduces(tmp_path):
    recs = _run(tmp_path, ["planted:PlantedAddF32"], ops=["add"], element_types=["f32"],
                invalid=False, examples=False, max_repros=4, depth="default", seed=2)
    divs = [r for r in recs if r["kind"] == "divergence"]
    assert len(divs) == 4 and any(not d["case_id"].endswith(":0:0") for d in divs)
    for d in divs:
        case_json = json.loads((tmp_path / d["repro"] / "case.json").read_text())
        case, _ = rebuild(d["case_id"])
        assert case.signature.key() == d["signature"]
        assert _bits([x for x in map(_enc, case.inputs)]) == _bits(case_json["original_inputs"])
        assert str(CaseId.parse(d["case_id"])) == d["case_id"]
    # Through the command: the same bits (saved with --save), exit 1; on the oracle, 0.
    for d in divs[:2]:
        case_json = json.loads((tmp_path / d["repro"] / "case.json").read_text())
        p = conformance("repro", d["case_id"], "--backend", "planted:PlantedAddF32",
                        "--save", str(tmp_path / "again"))
        assert p.returncode == 1, p.stdout + p.stderr
        assert "verdict:  value" in p.stdout and "stablehlo.add" in p.stdout
        again = json.loads((tmp_path / "again" / "case.json").read_text())
        assert _bits(again["inputs"]) == _bits(case_json["original_inputs"])
        assert again["case_id"] == d["case_id"]
        p = conformance("repro", d["case_id"], "--backend", "numpy")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "verdict:  pass" in p.stdout


def test_crash_ids_name_the_crashing_case(tmp_path):
    recs = _run(tmp_path, ["planted:CrashesOnNegativeZero"], ops=["negate"],
                element_types=["f32"], invalid=False, examples=False, isolate=True)
    divs = [r for r in recs if r["kind"] == "divergence"]
    assert divs and all(d["class"] == "crash" for d in divs)
    for d in divs:
        assert not d["case_id"].endswith(":?")
        case, _ = rebuild(d["case_id"])
        x = case.inputs[0]
        assert ((x == 0) & np.signbit(x)).any()            # the -0.0 that kills it
        assert _bits(map(_enc, case.inputs)) == _bits(d["case"]["inputs"])
    p = conformance("repro", divs[0]["case_id"], "--backend", "planted:CrashesOnNegativeZero")
    assert p.returncode == 1 and "verdict:  crash" in p.stdout, p.stdout + p.stderr


def test_the_plan_does_not_depend_on_the_filters():
    """An id names the same case in a filtered run and in the full run: the signatures
    per binding depend on the op and depth only (convert has 784 bindings; the 361 of
    the seed's types set its signatures per binding)."""
    spec = load_spec("convert")
    full = RunConfig(depth="quick", seed=3)
    some = RunConfig(depth="quick", seed=3, element_types=["f32"])
    for b in select_bindings(spec, ["f32"])[:3]:
        assert plan_binding(spec, b, some) == plan_binding(spec, b, full)
    assert {binding_key(b) for b in select_bindings(spec, ["f32"])} < \
        {binding_key(b) for b in spec.type_bindings()}


@pytest.mark.parametrize("case_id, text", [
    ("0:quick:nosuch:f32:0:0:0", "unknown op 'nosuch'"),
    ("0:quick:add:f33:0:0:0", "no type key 'f33'"),
    ("0:quick:add:f32:0:0", "expected SEED:DEPTH:OP"),
    ("0:quick:add:f32:99:0:0", "signature index 99 out of range"),
    ("0:quick:add:f32:0:5:0", "batch 5 out of range"),
    ("0:quick:add:f32:0:0:999", "case index 999 out of range"),
    ("0:fast:add:f32:0:0:0", "unknown depth 'fast'"),
    ("0:quick:add:f32:0:0:?", "must be integers"),
])
def test_bad_ids_are_one_line_errors_with_exit_2(capsys, case_id, text):
    assert cli.main(["repro", case_id, "--backend", "numpy"]) == 2
    err = capsys.readouterr().err
    assert text in err and case_id in err and len(err.strip().splitlines()) == 1


def test_saved_reproducers_are_replayed_first(tmp_path):
    first = _run(tmp_path, ["planted:PlantedAddF32"], ops=["add"], element_types=["f32"],
                 invalid=False, examples=False)
    saved = {d["case_id"] for d in first if d["kind"] == "divergence"}
    assert saved
    # Next time, on the planted backend and the oracle, with another seed.
    again = _run(tmp_path, ["planted:PlantedAddF32", "numpy"], ops=["not"], seed=9,
                 invalid=False, examples=False)
    replays = [r for r in again if r["kind"] == "replay"]
    kinds = [r["kind"] for r in again]
    assert kinds.index("replay") == 1 and max(i for i, k in enumerate(kinds) if k == "replay") \
        < kinds.index("validity")                                       # before new cases
    assert {r["case_id"] for r in replays} == saved
    assert {(r["backend"], r["class"], r["class_before"]) for r in replays} == \
        {("planted", "value", "value"), ("numpy", "pass", "value")}
    # ... and not when told so.
    third = _run(tmp_path / "x", ["numpy"], ops=["not"], invalid=False, examples=False)
    assert not any(r["kind"] == "replay" for r in third)
    (tmp_path / "x" / "repros").symlink_to(tmp_path / "repros")
    fourth = _run(tmp_path / "x", ["numpy"], ops=["not"], invalid=False, examples=False,
                  replay=False)
    assert not any(r["kind"] == "replay" for r in fourth)


def test_cli_prints_replays_and_fails_on_those_that_still_diverge(tmp_path):
    def run_(ops, backend, *extra):
        types = "f32,si8" if ops == "add" else "si8"     # (each type allowed by the op)
        return conformance("run", "--ops", ops, "--types", types, "--depth", "quick",
                           "--no-invalid", "--no-examples", "--no-progress", "--force",
                           "--out", str(tmp_path), "--backend", backend, *extra)
    assert run_("add", "planted:PlantedAddF32").returncode == 1
    p = run_("not", "planted:PlantedAddF32")
    assert p.returncode == 1 and "REPLAY" in p.stdout and "2 still diverge" in p.stdout, p.stdout
    p = run_("not", "numpy")
    assert p.returncode == 0 and "0 still diverge" in p.stdout, p.stdout
    p = run_("not", "planted:PlantedAddF32", "--no-replay")
    assert p.returncode == 0 and "REPLAY" not in p.stdout, p.stdout


def _enc(x):
    from conformance.core.literals import encode
    return encode(np.asarray(x))
