"""The report renderer: HTML matrix and op pages, summary.json and junit.xml, from results files."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance.compare import ULP_BUCKET_LABELS
from conformance.reports import render
from conformance.reports.style import LOOKS
from conformance.reports.svg import ulp_chart

EVIL = "<script>alert('x')</script> & \"quoted\""


def sig(op, type_key, backend, outcome, counts, **extra):
    rec = {"kind": "signature", "op": op, "family": "arithmetic" if op != "convert" else
           "conversion", "type_key": type_key, "backend": backend,
           "signature": f"{op}(tensor<4x{type_key.split('->')[0]}>) -> (tensor<4x"
                        f"{type_key.split('->')[-1]}>)",
           "index": 0, "outcome": outcome, "cases": sum(counts.values()), "counts": counts,
           "ulp_hist": None, "max_error": None, "impl_defined": {}, "reason": None}
    rec.update(extra)
    return rec


def records(end: bool = True) -> list[dict]:
    hist = [60, 2, 0, 0, 0, 0, 0, 0, 0, 0]
    recs = [
        {"kind": "run", "seed": 7, "depth": "quick", "started": 1700000000.0,
         "backends": [{"name": "jax", "jax": "0.10.2", "jaxlib": "0.10.2"},
                      {"name": "vendor", "version": "1.2.3"}],
         "ops": ["add", "abs", "convert"], "families": None, "element_types": None},
        sig("add", "f32", "jax", "pass", {"pass": 64}, ulp_hist=hist, max_error=1.0),
        sig("add", "f32", "vendor", "value", {"pass": 30, "value": 2}, ulp_hist=hist,
            max_error="inf"),
        sig("add", "si8", "jax", "pass", {"pass": 32},
            impl_defined={"integer_overflow": {"elements": 5, "conventional": 4}}),
        sig("add", "si8", "vendor", "unsupported", {}, reason="no <si8> support & none planned"),
        sig("add", "si32", "vendor", "backend_error", {}, reason="RuntimeError: boom"),
        sig("abs", "f16", "vendor", "signed_zero", {"pass": 31, "signed_zero": 1}),
        sig("convert", "si8->f32", "vendor", "accuracy", {"pass": 15, "accuracy": 1}),
        sig("convert", "si8->f16", "vendor", "pass", {"pass": 16}),
        {"kind": "divergence", "backend": "vendor", "op": "add", "family": "arithmetic",
         "type_key": "f32", "class": "value", "minimised_class": "value",
         "case_id": "7:quick:add:f32:0:0:3", "signature": "add(tensor<4xf32>, tensor<4xf32>) -> "
         "(tensor<4xf32>)", "minimised_signature": "add(tensor<f32>, tensor<f32>) -> (tensor<f32>)",
         "reproduces_alone": True,
         "case": {"signature": {"op": "add", "input_types": ["tensor<f32>", "tensor<f32>"],
                                "result_types": ["tensor<f32>"], "attributes": {}},
                  "inputs": [{"type": "tensor<f32>", "bits": "3fc00000", "literal": 1.5},
                             {"type": "tensor<f32>", "bits": "7fc00000", "literal": "nan"}]},
         "expected": [{"type": "tensor<f32>", "bits": "7fc00000", "literal": "nan"}],
         "actual": [{"type": "tensor<f32>", "bits": "40490fdb", "literal": 3.1415927410125732}],
         "message": EVIL, "repro": "repros/vendor/add/f32-value-1", "batch_count": 2,
         "stablehlo": "func.func @main(%a: tensor<f32>) -> tensor<f32> { ... }",
         "oracle_suspect": False, "some_future_key": {"x": 1}},
        {"kind": "invalid", "op": "add", "family": "arithmetic", "backend": "jax", "rule": "I1",
         "outcome": "not_generated", "reason": "the type table allows every element type"},
        {"kind": "invalid", "op": "add", "family": "arithmetic", "backend": "vendor",
         "rule": "I1", "outcome": "not_generated",
         "reason": "the type table allows every element type"},
        {"kind": "invalid", "op": "add", "family": "arithmetic", "backend": "jax", "rule": "C1",
         "signature": "add(tensor<ui8>, tensor<f32>) -> (tensor<ui8>) !C1",
         "outcome": "rejected", "reason": "TypeError: same dtypes"},
        {"kind": "invalid", "op": "add", "family": "arithmetic", "backend": "vendor",
         "rule": "C1", "signature": "add(tensor<ui8>, tensor<f32>) -> (tensor<ui8>) !C1",
         "outcome": "accepted_invalid", "reason": "the backend ran a program that breaks this rule"},
        {"kind": "example", "op": "add", "backend": "jax", "example": "spec example", "index": 0,
         "outcome": "pass", "message": None, "signature": "add(tensor<2xsi32>, tensor<2xsi32>)"},
        {"kind": "example", "op": "add", "backend": "vendor", "example": "spec example",
         "index": 0, "outcome": "fail", "message": "expected [2, 4] <got> [2, 5]",
         "signature": "add(tensor<2xsi32>, tensor<2xsi32>)"},
        {"kind": "some_future_kind", "payload": 1},
        {"kind": "unit_done", "op": "add"},
        {"kind": "unit_done", "op": "abs"},
    ]
    if end:
        recs += [{"kind": "unit_done", "op": "convert"},
                 {"kind": "end", "elapsed": 12.5, "ops": ["add", "abs", "convert"]}]
    return recs


def write_results(path: Path, end: bool = True) -> list[dict]:
    recs = records(end)
    text = "".join(json.dumps(r) + "\n" for r in recs)
    text += '{"kind": "signature", "op": "abs", "type_key": "f3'    # torn last line
    path.write_text(text)
    return recs


@pytest.fixture
def rendered(tmp_path):
    recs = write_results(tmp_path / "results.jsonl")
    index = render(tmp_path / "results.jsonl", tmp_path / "report")
    return tmp_path / "report", recs, index


class Cells(HTMLParser):
    """Matrix cells of an index page: (backend, op, type) -> (attributes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str, str], tuple[dict, str]] = {}
        self._open: tuple | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "cell" in (a.get("class") or "").split():
            self._open = (a["data-backend"], a["data-op"], a["data-type"])
            self.cells[self._open] = (a, "")

    def handle_data(self, data):
        if self._open:
            a, t = self.cells[self._open]
            self.cells[self._open] = (a, t + data)

    def handle_endtag(self, tag):
        if tag == "td":
            self._open = None


def cells(index: Path) -> dict:
    p = Cells()
    p.feed(index.read_text())
    return p.cells


def test_files_written(rendered):
    out, _, index = rendered
    assert index == out / "index.html"
    for name in ("index.html", "summary.json", "junit.xml", "ops/add.html", "ops/abs.html",
                 "ops/convert.html"):
        assert (out / name).is_file(), name
    html = index.read_text()
    assert "<script" not in html and 'src="http' not in html and "<link" not in html


def test_matrix_cells_have_class_colour_and_label(rendered):
    _, _, index = rendered
    c = cells(index)
    html = index.read_text()
    attrs, text = c[("vendor", "add", "f32")]
    assert attrs["data-outcome"] == "value" and "o-value" in attrs["class"].split()
    assert text == "val"
    assert f".o-value{{background:{LOOKS['value'].background}" in html
    assert "pass 30, value 2" in attrs["title"]
    attrs, text = c[("jax", "add", "f32")]
    assert "o-pass" in attrs["class"].split() and text == "64"
    attrs, text = c[("vendor", "add", "si8")]
    assert "o-unsupported" in attrs["class"].split() and text == "n/s"
    attrs, _ = c[("vendor", "add", "si32")]
    assert attrs["data-outcome"] == "backend_error"
    # convert's si8 column gathers si8->f32 (accuracy) and si8->f16 (pass): worst wins.
    attrs, text = c[("vendor", "convert", "si8")]
    assert "o-accuracy" in attrs["class"].split() and text == "acc"
    assert "si8->f32" in attrs["title"] and "si8->f16" in attrs["title"]
    # add allows i1 but nothing was recorded; abs does not allow i1 at all.
    assert c[("vendor", "add", "i1")][0]["data-outcome"] == "not_run"
    assert c[("vendor", "abs", "i1")][0]["data-outcome"] == "not_applicable"
    assert c[("vendor", "abs", "i1")][1] == ""
    # 19 columns per op row, per backend.
    assert sum(1 for k in c if k[:2] == ("jax", "add")) == 19
    assert 'href="ops/add.html' in html


def test_index_header_totals_and_coverage(rendered):
    _, _, index = rendered
    html = index.read_text()
    assert "Run complete" in html and "Incomplete run" not in html
    assert "1.2.3" in html and "jaxlib 0.10.2" in html and "12.5 s" in html
    assert "5 (4 with the conventional value)" in html
    # negative coverage of add on vendor: 1 of 4 rules (I1, I2, C1, O1) generated, 1 accepted
    table = html.split('<table class="coverage" data-backend="vendor">')[1].split("</table>")[0]
    row = table.split('<tr data-op="add">')[1].split("</tr>")[0]
    assert ">1 / 4<" in row and 'o-accepted_invalid">1<' in row


def test_op_page_divergence_literals_and_repro(rendered):
    out, _, _ = rendered
    html = (out / "ops" / "add.html").read_text()
    assert "<pre>1.5</pre>" in html and "<pre>nan</pre>" in html
    assert "<pre>3.1415927410125732</pre>" in html and "bits: 40490fdb" in html
    assert 'href="../../repros/vendor/add/f32-value-1/repro.py"' in html
    assert "python repros/vendor/add/f32-value-1/repro.py" in html
    assert "add(tensor&lt;f32&gt;, tensor&lt;f32&gt;) -&gt; (tensor&lt;f32&gt;)" in html
    assert '<pre class="stablehlo">func.func @main(%a: tensor&lt;f32&gt;)' in html
    # invalid-case table with the rule text from the spec, and the failing example
    assert "accepted_invalid" in html and "have the same" in html
    assert "expected [2, 4] &lt;got&gt; [2, 5]" in html
    # ULP chart for the float cell, labelled with the comparator's buckets
    assert html.count("<svg") >= 2 and "&gt;2^20" in html
    assert "integer_overflow" in html


def test_html_special_characters_escaped(rendered):
    out, _, _ = rendered
    html = (out / "ops" / "add.html").read_text()
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#34;quoted&#34;" in html
    assert "no &lt;si8&gt; support &amp; none planned" in html


def test_summary_totals_match_records(rendered):
    out, recs, _ = rendered
    s = json.loads((out / "summary.json").read_text())
    sigs = [r for r in recs if r["kind"] == "signature"]
    assert s["totals"]["cases"] == sum(r["cases"] for r in sigs) == 192
    expected = {}
    for r in sigs:
        for k, v in r["counts"].items():
            if k != "pass":
                expected[k] = expected.get(k, 0) + v
    assert s["totals"]["diverging_cases"] == expected
    assert s["totals"]["unsupported_signatures"] == 1
    assert s["totals"]["saved_divergences"] == {"value": 1}
    assert s["totals"]["impl_defined"] == {"elements": 5, "conventional": 4}
    assert s["run"]["complete"] is True and s["run"]["seed"] == 7
    cell = s["backends"]["vendor"]["ops"]["add"]["type_keys"]["f32"]
    assert cell["outcome"] == "value" and cell["cases"] == 32
    assert cell["counts"] == {"pass": 30, "value": 2} and cell["max_error"] == "inf"
    assert s["backends"]["vendor"]["ops"]["convert"]["type_keys"]["si8->f32"]["outcome"] \
        == "accuracy"
    cov = s["invalid"]["vendor"]["add"]
    assert cov["accepted_invalid"] == 1 and cov["rejected"] == 0 and cov["generated"] == 1
    assert s["invalid"]["jax"]["add"]["rejected"] == 1
    assert sorted((e["backend"], e["outcome"]) for e in s["examples"]) == \
        [("jax", "pass"), ("vendor", "fail")]


def test_junit_counts(rendered):
    out, _, _ = rendered
    root = ET.parse(out / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"jax", "vendor"}
    v = suites["vendor"]
    # failures: add f32 value, abs f16 signed_zero, convert si8->f32 accuracy,
    # the failing example, C1 accepted_invalid; error: add si32; skipped: add si8, I1.
    assert (v.get("failures"), v.get("errors"), v.get("skipped"), v.get("tests")) == \
        ("5", "1", "2", "9")
    assert len(v.findall("testcase")) == 9
    assert len(v.findall("testcase/failure")) == 5
    assert len(v.findall("testcase/error")) == 1
    assert len(v.findall("testcase/skipped")) == 2
    tc = v.find("testcase[@classname='conformance.vendor.add'][@name='f32']")
    fail = tc.find("failure")
    assert fail.get("message") == "value"
    assert "repros/vendor/add/f32-value-1/repro.py" in fail.text
    assert "add(tensor<f32>, tensor<f32>)" in fail.text
    j = suites["jax"]
    assert (j.get("failures"), j.get("errors"), j.get("skipped")) == ("0", "0", "1")
    assert root.get("failures") == "5"


def test_incomplete_run(tmp_path):
    write_results(tmp_path / "results.jsonl", end=False)
    index = render(tmp_path / "results.jsonl", tmp_path / "out")
    html = index.read_text()
    assert "Incomplete run" in html and "2 of 3 ops finished" in html
    assert "partial" in (tmp_path / "out" / "ops" / "convert.html").read_text()
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["run"]["complete"] is False and s["run"]["elapsed"] is None
    root = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    run_suite = [s for s in root.iter("testsuite") if s.get("name") == "conformance-run"]
    assert run_suite and run_suite[0].find("testcase/error").get("message") == "incomplete"


def test_results_without_header(tmp_path):
    """Only a torn line, or records without a run header, still render."""
    (tmp_path / "r.jsonl").write_text('{"kind": "signature", "op": "add", "type_key": "f3')
    assert render(tmp_path / "r.jsonl", tmp_path / "a").is_file()
    (tmp_path / "s.jsonl").write_text(json.dumps(sig("add", "f32", "x", "nan", {"nan": 1})))
    index = render(tmp_path / "s.jsonl", tmp_path / "b")
    assert cells(index)[("x", "add", "f32")][0]["data-outcome"] == "nan"


def test_ulp_chart_is_wellformed_svg():
    svg = str(ulp_chart([1000, 3, 0, 0, 0, 0, 0, 0, 0, 1], "t <&>"))
    root = ET.fromstring(svg)
    rects = root.findall("{http://www.w3.org/2000/svg}g/{http://www.w3.org/2000/svg}rect")
    assert len(rects) == len(ULP_BUCKET_LABELS)
    heights = [float(r.get("height")) for r in rects]
    assert heights[0] > heights[1] > heights[9] > 0 and heights[2] == 0


def test_real_tiny_run(tmp_path):
    from conformance.backends import get_backend
    from conformance.runner import RunConfig, run
    cfg = RunConfig(ops=["add"], depth="quick", out=tmp_path, progress=False)
    run(cfg, [get_backend("numpy")], tmp_path / "results.jsonl")
    index = render(tmp_path / "results.jsonl", tmp_path / "report")
    assert index.is_file() and "add" in index.read_text()
    assert "Run complete" in index.read_text()
    s = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert s["totals"]["cases"] > 0 and "add" in s["backends"]["numpy"]["ops"]
    ET.parse(tmp_path / "report" / "junit.xml")
