"""Scale (issue 20): campaign mode (``conformance fuzz``), merging result streams,
sharding a run, and executors that run the plan's units elsewhere."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance import cli
from conformance.fuzz import Finding, findings_of, parse_duration, shape_class

ROOT = Path(__file__).resolve().parents[1]
PLANTED = "planted:PlantedAddF32"


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT / "tests")}


def conformance(*args, **kw):
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=ROOT,
                          capture_output=True, text=True, env=_env(), **kw)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


# ---------------------------------------------------------------------------
# Campaign mode
# ---------------------------------------------------------------------------

def test_durations_and_shapes():
    assert parse_duration("30s") == 30 and parse_duration("8h") == 8 * 3600
    assert parse_duration("1h30m") == 5400 and parse_duration("2.5") == 2.5
    assert parse_duration("250ms") == 0.25
    for bad in ("", "0", "0s", "-1s", "5x", "h1", "1h-", "inf", "nan"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert shape_class("add(tensor<f32>, tensor<f32>) -> (tensor<f32>)") == "r0,r0->r0"
    assert shape_class("add(tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<3x4xf32>)") \
        == "r2,r2->r2"
    assert shape_class("reduce(tensor<0x2xf32>, tensor<f32>) {dimensions = [0]} -> "
                       "(tensor<2xf32>)") == "r2z,r0->r1"
    assert shape_class("negate(tensor<2xf64>) -> (tensor<f64>) !C1") == "r1->r0"


def test_findings_of_each_record_kind():
    div = {"kind": "divergence", "backend": "b", "op": "add", "type_key": "f32",
           "class": "value", "case_id": "1:quick:add:f32:1:0:3", "reproduces_alone": True,
           "signature": "add(tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>)",
           "minimised_signature": "add(tensor<f32>, tensor<f32>) -> (tensor<f32>)",
           "repro": "repros/b/add/f32-value-1"}
    (f,) = findings_of(div)
    assert f.key == "b|add|f32|value|r0,r0->r0" and f.repro == "repros/b/add/f32-value-1"
    (f,) = findings_of({**div, "reproduces_alone": False})
    assert f.shape == "r1,r1->r1"           # not minimised alone: the original's shape
    assert findings_of({"kind": "signature", "backend": "b", "op": "add", "type_key": "f32",
                        "outcome": "value", "counts": {"value": 3, "pass": 1}}) == []
    (f,) = findings_of({"kind": "signature", "backend": "b", "op": "add", "type_key": "f32",
                        "outcome": "crash", "counts": {},
                        "signature": "add(tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>)"})
    assert (f.cls, f.shape) == ("crash", "r1,r1->r1")
    (f,) = findings_of({"kind": "invalid", "backend": "b", "op": "add", "rule": "C1",
                        "outcome": "accepted_invalid",
                        "signature": "add(tensor<2xf32>, tensor<2xf32>) -> (tensor<f32>) !C1"})
    assert f.where == "!C1" and f.cls == "accepted_invalid"
    assert findings_of({"kind": "invalid", "backend": "b", "op": "add", "rule": "C1",
                        "outcome": "rejected"}) == []
    assert isinstance(findings_of({"kind": "example", "backend": "b", "op": "add",
                                   "index": 2, "outcome": "value"})[0], Finding)


def _fuzz(out: Path, *extra: str) -> tuple[int, str]:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli.main(["fuzz", "--backend", PLANTED, "--ops", "add,negate", "--types", "f32",
                         "--out", str(out), *extra])
    return code, buf.getvalue()


def test_fuzz_finds_a_planted_divergence_once_and_knows_it_after_a_restart(tmp_path):
    out = tmp_path / "camp"
    code, text = _fuzz(out, "--cases", "600", "--seed", "5")
    assert code == 1, text                               # something new
    index = _lines(out / "corpus" / "index.jsonl")
    # Many draws meet f32 add's bump; the corpus keeps one entry per distinct key.
    keys = [e["key"] for e in index]
    assert len(keys) == len(set(keys)) >= 1
    assert all(k.startswith("planted|add|f32|value|") for k in keys), keys
    log = _lines(out / "log.jsonl")
    assert len(log) >= 8 and {d["op"] for d in log} == {"add", "negate"}
    met = [k for d in log for k in d["new"] + d["known"]]
    assert len(met) > len(keys)                         # met again, kept once
    assert all(not d["new"] and not d["known"] for d in log if d["op"] == "negate")
    for e in index:                                       # a reproducer folder each
        assert (out / e["repro"] / "case.json").is_file()
        assert e["case_id"].split(":")[0] == str(e["seed"])
    assert text.count("NEW ") == len(keys)
    state = json.loads((out / "campaign.json").read_text())
    assert state["next_draw"] == len(log) and state["corpus"] == len(keys)

    # Restart (same options): continues at the next draw; what it meets is known.
    code, text = _fuzz(out, "--cases", "300", "--seed", "5")
    assert code == 0, text
    assert f"at draw {len(log)}" in text and "0 new" in text
    log2 = _lines(out / "log.jsonl")
    assert log2[len(log)]["draw"] == len(log)
    assert any(d["known"] for d in log2[len(log):])
    assert _lines(out / "corpus" / "index.jsonl") == index

    # Another campaign seed in the same folder: new draws, the corpus still known.
    code, text = _fuzz(out, "--cases", "200", "--seed", "6")
    assert "the draws start again from 0" in text and code == 0, text
    assert _lines(out / "corpus" / "index.jsonl") == index


def test_the_draws_are_a_function_of_the_campaign_seed(tmp_path):
    def strip(path):
        return [{k: v for k, v in d.items() if k != "seconds"} for d in _lines(path)]
    _fuzz(tmp_path / "a", "--cases", "300", "--seed", "9")
    _fuzz(tmp_path / "b", "--cases", "300", "--seed", "9")
    _fuzz(tmp_path / "c", "--cases", "300", "--seed", "10")
    a, b, c = (strip(tmp_path / x / "log.jsonl") for x in "abc")
    assert a == b
    assert [d["seed"] for d in a] != [d["seed"] for d in c]
    ia, ib = (_lines(tmp_path / x / "corpus" / "index.jsonl") for x in "ab")
    assert [(e["key"], e["case_id"]) for e in ia] == [(e["key"], e["case_id"]) for e in ib]


def test_fuzz_stops_cleanly_on_sigterm_and_resumes(tmp_path):
    out = tmp_path / "camp"
    args = ["fuzz", "--backend", PLANTED, "--ops", "add,negate,abs", "--types", "f32",
            "--out", str(out), "--seed", "3"]
    p = subprocess.Popen([sys.executable, "-m", "conformance", *args, "--for", "10m"],
                         cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    log = out / "log.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not log.exists() or len(_lines(log)) < 3):
        time.sleep(0.2)
    assert log.exists(), p.kill() or p.communicate()
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode in (0, 1), stdout + stderr
    assert "stopped by SIGTERM" in stdout, stdout + stderr
    assert "Traceback" not in stderr, stderr
    state = json.loads((out / "campaign.json").read_text())
    done = _lines(log)
    assert state["next_draw"] == len(done) == done[-1]["draw"] + 1
    index = _lines(out / "corpus" / "index.jsonl")
    assert index and not (out / ".work").exists()
    # Resumed: the next draw, not draw 0; what the first session found stays known.
    again = conformance(*args, "--cases", "200")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"at draw {len(done)}" in again.stdout
    assert _lines(log)[len(done)]["draw"] == len(done)
    assert _lines(out / "corpus" / "index.jsonl") == index
