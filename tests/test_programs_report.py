"""The report's programs section (issue 19): index.html, summary.json and junit.xml of a
programs run agree, per backend, per pattern and per op at fault, and show every
diverging program's (minimised) text with the oracle's values op by op."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from conformance.apps.cli import main
from conformance.reports import render


@pytest.fixture(scope="module")
def fma_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fma")
    code = main(["programs", "--backend", "planted_programs:FusesMultiplyAdd,"
                 "planted_programs:RefusesMultiply", "--depth", "default", "--count", "120",
                 "--out", str(out),
                 "--quiet", "--no-isolate"])
    assert code == 1
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return out, recs


def test_summary_counts_per_backend_pattern_and_op_at_fault(fma_run):
    out, recs = fma_run
    s = json.loads((out / "summary.json").read_text())["programs"]
    progs = [r for r in recs if r["kind"] == "program" and r["backend"] == "fma"]
    bad = [r for r in progs if r["outcome"] not in ("pass", "unsupported")]
    t = s["backends"]["fma"]["totals"]
    assert t["programs"] == len(progs) == 120
    assert t["diverging"] == len(bad) and t["fusion"] == len(bad)
    fma = s["backends"]["fma"]["patterns"]["a*b+c"]
    assert fma["programs"] == sum("a*b+c" in r["patterns"] for r in progs)
    assert fma["diverging"] == sum(any("a*b+c" in f["patterns"] for f in r["findings"])
                                   for r in bad) > 0
    ops = s["backends"]["fma"]["ops_at_fault"]
    assert set(k.split()[0] for k in ops) == {"add"}
    assert sum(g["diverging"] for g in ops.values()) >= len(bad)
    # every reproducer: the minimised program's text and the oracle's values op by op
    for d in s["divergences"]:
        assert "multiply" in d["program"] and "add" in d["program"]
        names = [row["name"] for row in d["trace"]]
        assert any(row["op"] == "add" and "actual" in row for row in d["trace"]), names
    assert s["validity"]["programs"] == 120 and s["validity"]["verifier_refused"] == 0
    assert s["validity"]["operations"] >= 240 and s["validity"]["rejected_steps"] == 0
    assert s["backends"]["no-multiply"]["totals"]["outcomes"].get("unsupported", 0) > 0
    assert s["backends"]["no-multiply"]["totals"]["diverging"] == 0


def test_html_section_shows_patterns_ops_and_reproducers(fma_run):
    out, recs = fma_run
    html = (out / "index.html").read_text()
    assert 'id="programs"' in html and 'id="programs-fma"' in html
    assert 'id="programs-validity"' in html
    bad = [r for r in recs if r["kind"] == "program" and r.get("fusion")]
    for r in bad:
        assert f'id="prog-fma-{r["id"]}"' in html
    assert '<table class="program-trace">' in html
    assert "a*b+c" in html and "multiply is not implemented" in html
    assert "<script" not in html.split('id="programs"')[1]


def test_junit_has_one_case_per_program_and_backend(fma_run):
    out, recs = fma_run
    root = ET.parse(out / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    fma, nomul = suites["programs.fma"], suites["programs.no-multiply"]
    assert int(fma.get("tests")) == 120 and int(nomul.get("tests")) == 120
    bad = [r for r in recs if r["kind"] == "program" and r["backend"] == "fma"
           and r["outcome"] not in ("pass", "unsupported")]
    assert int(fma.get("failures")) == len(bad)
    text = "".join(f.text or "" for f in fma.iter("failure"))
    assert "program:" in text and "oracle" in text and "repro: python" in text
    assert int(nomul.get("skipped")) > 0 and int(nomul.get("failures")) == 0
    run = [s for n, s in suites.items() if n == "conformance-run"]
    assert not run                           # the run has its end record: complete


def test_a_results_file_without_programs_has_no_section(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"kind": "run", "seed": 0, "depth": "quick",
                                "backends": [{"name": "x"}]}) + "\n"
                    + json.dumps({"kind": "end", "elapsed": 1}) + "\n")
    index = render(path, tmp_path / "r")
    assert 'id="programs"' not in index.read_text()
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["programs"] is None


def test_malformed_program_records_still_render(tmp_path):
    path = tmp_path / "results.jsonl"
    lines = [{"kind": "run", "command": "programs", "backends": [{"name": "b"}]},
             {"kind": "program", "backend": "b", "id": "0:program:0", "outcome": "value"},
             {"kind": "program", "backend": "b", "id": "0:program:1", "outcome": "crash",
              "patterns": None, "findings": None, "trace": None},
             {"kind": "end"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    index = render(path, tmp_path / "r")
    assert 'id="prog-b-0:program:1"' in index.read_text()
    s = json.loads((tmp_path / "r" / "summary.json").read_text())["programs"]
    assert s["backends"]["b"]["totals"]["diverging"] == 2
