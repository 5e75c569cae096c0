"""docs/vendor-guide.md runs as written (issue 22): its first block (the vendor helpers)
always; the adapter (IREE as the stand-in compiler) imported, loaded and run through
``conformance run`` where the [iree] extra is installed."""
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "vendor-guide.md"
HAS_IREE = importlib.util.find_spec("iree") is not None and \
    importlib.util.find_spec("iree.compiler") is not None


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)


def test_the_guide_has_its_three_blocks():
    assert len(blocks()) == 3
    assert "class AcmeBackend(Backend)" in blocks()[1]


def test_the_helpers_block_runs():
    exec(compile(blocks()[0], str(GUIDE), "exec"), {})


@pytest.fixture
def acme(tmp_path, monkeypatch):
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "__init__.py").write_text("")
    (tmp_path / "acme" / "backend.py").write_text(blocks()[1])
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.skipif(not HAS_IREE, reason="the guide's adapter uses IREE (pip install "
                    "-e '.[iree]')")
def test_the_adapter_runs_and_finds_ireees_i1_add(acme):
    g: dict = {}
    exec(compile(blocks()[0], str(GUIDE), "exec"), g)
    exec(compile(blocks()[2], str(GUIDE), "exec"), g)
    assert g["out"][0].shape == () and bool(g["out"][0]) is False   # IREE's i1 add


@pytest.mark.skipif(not HAS_IREE, reason="the guide's adapter uses IREE")
def test_conformance_run_with_the_adapter(acme):
    out = acme / "out"
    p = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend",
                        "acme.backend:AcmeBackend", "--ops", "add,reshape", "--types",
                        "i1,si4,si32,bf16,f8E5M2,complex<f32>", "--depth", "quick",
                        "--out", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=600, cwd=acme)
    assert p.returncode in (0, 1), p.stderr
    assert "NeverCompiledWarning" not in p.stderr
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    sigs = [r for r in recs if r.get("kind") == "signature"]
    assert sigs and not [r for r in sigs if r["outcome"] in ("backend_error", "crash")], \
        [(r["signature"], r.get("reason")) for r in sigs if r["outcome"] != "pass"][:3]
    add_i1 = [r for r in sigs if r["op"] == "add" and r["type_key"] == "i1"]
    assert add_i1 and all(r["outcome"] == "value" for r in add_i1)
    assert any(r["outcome"] == "pass" and r["op"] == "reshape" and "i4" in r["signature"]
               for r in sigs)                   # int4 crosses packed two per byte
    invalid = [r for r in recs if r.get("kind") == "invalid" and r.get("outcome")]
    assert invalid and all(r["outcome"] != "unsupported" for r in invalid
                           if r["outcome"] != "not_generated")
