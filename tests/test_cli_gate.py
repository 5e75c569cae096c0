"""The exit code is never greener than the report: every divergence class decides
`conformance run`'s exit code, with and without --expectations, and `conformance
expectations check`, the report, summary.json and junit.xml count the same findings."""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from conformance.apps.cli import main
from conformance.checking.compare import DIVERGENCES

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}   # for planted:Class backends
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300)


def junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    return {k: int(root.get(k)) for k in ("tests", "failures", "errors", "skipped")}


def test_accepting_an_invalid_program_fails_the_run(tmp_path):
    """planted:AcceptsEverything is the oracle, except that it runs programs breaking a
    rule instead of rejecting them: class accepted_invalid, and nothing else."""
    out = tmp_path / "out"
    p = cli("run", "--backend", "planted:AcceptsEverything", "--ops", "add", "--depth", "quick",
            "--out", str(out), "--no-progress")
    assert p.returncode == 1, p.stdout + p.stderr
    summary = json.loads((out / "summary.json").read_text())
    invalid = summary["invalid"]["lenient"]["add"]
    assert invalid["accepted_invalid"] >= 1
    assert not summary["totals"]["diverging_signatures"]        # valid cases all pass
    # The exit code's count, the report's and junit's agree.
    m = re.search(r"^divergences: (\d+) .*accepted_invalid (\d+)", p.stdout, re.M)
    assert m, p.stdout
    findings = int(m.group(1))
    assert findings == int(m.group(2)) == invalid["accepted_invalid"]
    junit = junit_counts(out / "junit.xml")
    assert junit["failures"] + junit["errors"] == findings

    # The same class listed for the op in an expectations file: the gate passes.
    exp = tmp_path / "lenient.yaml"
    exp.write_text(yaml.safe_dump({"expectations": [
        {"op": "add", "rule": "*", "class": "accepted_invalid",
         "reason": "this backend has no verifier"}]}))
    p = cli("run", "--backend", "planted:AcceptsEverything", "--ops", "add", "--depth", "quick",
            "--out", str(out), "--no-progress", "--expectations", str(exp))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "gate: 0 unexpected" in p.stdout
    junit = junit_counts(out / "junit.xml")
    assert junit["failures"] + junit["errors"] == 0 and junit["skipped"] >= findings
    # ... and `conformance expectations check` agrees with both.
    results = str(out / "results.jsonl")
    assert main(["expectations", "check", results, str(exp)]) == 0
    (tmp_path / "none.yaml").write_text("expectations: []\n")
    assert main(["expectations", "check", results, str(tmp_path / "none.yaml")]) == 1


def _records(cls: str, where: str) -> list[dict]:
    """A results file with one divergence of ``cls``, recorded where the runner records
    that class: value counts of a signature, a signature that failed to compile, an
    invalid program, a spec example."""
    header = {"kind": "run", "seed": 0, "depth": "quick", "backends": [{"name": "b"}],
              "locators": ["b"], "ops": ["add"], "families": None, "element_types": None,
              "invalid": True, "examples": True, "max_repros": 2, "tolerances": None}
    base = {"op": "add", "family": "arithmetic", "backend": "b"}
    sig = {**base, "kind": "signature", "type_key": "f32", "index": 0,
           "signature": "add(tensor<f32>, tensor<f32>) -> (tensor<f32>)"}
    body = {
        "counts": [{**sig, "outcome": cls, "cases": 4, "counts": {"pass": 3, cls: 1}}],
        "compile": [{**sig, "outcome": cls, "reason": "boom", "cases": 0, "counts": {}}],
        "invalid": [{**sig, "kind": "invalid", "rule": "C1", "outcome": cls}],
        "example": [{**base, "kind": "example", "example": "spec example", "index": 0,
                     "outcome": cls, "message": "differs", "signature": sig["signature"]}],
    }[where]
    return [header, *body, {"kind": "unit_done", "op": "add"},
            {"kind": "end", "elapsed": 1.0, "ops": ["add"]}]


#: Where each class can be recorded (a class of value comparison in counts; a failure
#: of the backend where it compiles or runs; a program breaking a rule; an example).
PLACES = [(cls, "counts") for cls in DIVERGENCES if cls not in ("accepted_invalid",)] + \
    [(cls, "compile") for cls in ("backend_error", "crash", "timeout")] + \
    [(cls, "invalid") for cls in ("accepted_invalid", "crash", "timeout")] + \
    [(cls, "example") for cls in ("fail", "backend_error", "crash", "timeout")]


@pytest.mark.parametrize("cls, where", PLACES)
def test_every_divergence_class_decides_the_gate(tmp_path, cls, where):
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in _records(cls, where)))
    empty = tmp_path / "empty.yaml"
    empty.write_text("expectations: []\n")
    assert main(["expectations", "check", str(results), str(empty)]) == 1
    assert main(["report", str(results)]) == 0
    junit = junit_counts(tmp_path / "junit.xml")
    assert junit["failures"] + junit["errors"] == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["gate"] is None

    entry = {"op": "add", "class": cls, "reason": "known"}
    if where in ("invalid", "example"):
        entry["rule"] = "C1" if where == "invalid" else "example-0"
    else:
        entry["element_type"] = "f32"
    known = tmp_path / "known.yaml"
    known.write_text(yaml.safe_dump({"expectations": [entry]}))
    assert main(["expectations", "check", str(results), str(known)]) == 0
    assert main(["report", str(results), "--expectations", str(known)]) == 0
    junit = junit_counts(tmp_path / "junit.xml")
    assert junit["failures"] + junit["errors"] == 0 and junit["skipped"] == 1
    assert json.loads((tmp_path / "summary.json").read_text())["gate"]["passed"] is True


def test_the_readme_lists_every_divergence_class():
    text = (ROOT / "README.md").read_text()
    listed = re.search(r"every divergence\s+class \(([^)]*)\)", text)
    assert listed, "README: the exit code paragraph lists the divergence classes"
    assert set(re.findall(r"`(\w+)`", listed.group(1))) == set(DIVERGENCES)


def test_internal_errors_are_never_a_pass(tmp_path, capsys):
    records = _records("value", "counts")
    records[1]["counts"] = {"pass": 4}
    records[1]["outcome"] = "pass"
    records.insert(2, {"kind": "internal_error", "op": "add", "type_key": "f32",
                       "what": "generating signatures", "error": "ValueError: x",
                       "traceback": ""})
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "empty.yaml").write_text("expectations: []\n")
    assert main(["expectations", "check", str(results), str(tmp_path / "empty.yaml")]) == 3
    assert "internal errors of the suite: 1" in capsys.readouterr().err
