"""The conformance command: runs, reports, lists, and one-line errors with exit code 2."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}   # for planted:Class backends
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


def test_run_writes_results_and_report(tmp_path):
    out = tmp_path / "out"
    p = cli("run", "--ops", "add,not", "--types", "si8,i1", "--depth", "quick",
            "--backend", "numpy", "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    assert (out / "results.jsonl").is_file() and (out / "index.html").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary
    assert "checked" in p.stdout


def test_divergences_exit_1(tmp_path):
    p = cli("run", "--ops", "add", "--types", "f32", "--depth", "quick", "--no-invalid",
            "--backend", "planted:PlantedAddF32", "--out", str(tmp_path), "--no-progress")
    assert p.returncode == 1, p.stderr
    assert "value" in p.stdout


@pytest.mark.parametrize("args, text", [
    (["run", "--ops", "nosuch"], "unknown op 'nosuch'"),
    (["run", "--types", "f33"], "unknown element type 'f33'"),
    (["run", "--backend", "nosuchmod:X"], "cannot import 'nosuchmod'"),
    (["run", "--family", "nosuch"], "unknown family 'nosuch'"),
    (["show", "nosuch"], "unknown op 'nosuch'"),
    (["report", "missing.jsonl"], "no such results file"),
])
def test_bad_input_is_one_line_with_exit_2(tmp_path, args, text):
    p = cli(*args, "--out", str(tmp_path)) if args[0] == "run" else cli(*args)
    assert p.returncode == 2
    assert text in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_bad_input_does_not_touch_existing_results(tmp_path):
    (tmp_path / "results.jsonl").write_text("precious\n")
    p = cli("run", "--ops", "nosuch", "--out", str(tmp_path))
    assert p.returncode == 2
    assert (tmp_path / "results.jsonl").read_text() == "precious\n"


def test_specs_validate_names_the_bad_file(tmp_path):
    bad = tmp_path / "add.yaml"
    bad.write_text("op: add\n")
    p = cli("specs", "validate", str(bad))
    assert p.returncode == 2 and str(bad) in p.stderr
    assert cli("specs", "validate").returncode == 0


def test_list_and_show():
    p = cli("list", "ops")
    assert p.returncode == 0 and "count_leading_zeros" in p.stdout and "tan" in p.stdout
    p = cli("show", "compare")
    assert p.returncode == 0 and "C3" in p.stdout and "TOTALORDER" in p.stdout


def test_xla_names_map_onto_the_stablehlo_specs(tmp_path):
    from conformance.specs import UnknownOp, resolve_op
    assert resolve_op("Rev") == "reverse" and resolve_op("collapse") == "reshape"
    assert resolve_op("Broadcast") == "broadcast_in_dim" and resolve_op("slice") == "slice"
    with pytest.raises(UnknownOp, match="neither a StableHLO op nor an XLA name"):
        resolve_op("Frobnicate")
    p = cli("show", "Rev")
    assert p.returncode == 0 and p.stdout.startswith("reverse")
    p = cli("run", "--ops", "Rev", "--depth", "quick", "--backend", "numpy", "--out",
            str(tmp_path), "--no-progress")
    assert p.returncode == 0, p.stderr
    ops = {json.loads(line).get("op") for line in (tmp_path / "results.jsonl").open()}
    assert "reverse" in ops and "Rev" not in ops


def test_report_rerenders_a_results_file(tmp_path):
    cli("run", "--ops", "not", "--depth", "quick", "--backend", "numpy", "--out", str(tmp_path),
        "--no-progress")
    (tmp_path / "index.html").unlink()
    p = cli("report", str(tmp_path / "results.jsonl"))
    assert p.returncode == 0 and (tmp_path / "index.html").is_file()
