"""The report renderer: HTML matrix and op pages, summary.json and junit.xml, from results files."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance.checking.compare import ULP_BUCKET_LABELS
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
                      {"name": "vendor", "version": "1.2.3"}, {"name": "xla", "jaxlib": "0.10.2"}],
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
        # a third backend: passes add f32, crashes on add si32, times out on convert
        sig("add", "f32", "xla", "pass", {"pass": 32}),
        sig("add", "si32", "xla", "crash", {"crash": 32}, reason="BackendCrash: signal 11"),
        sig("convert", "si8->f16", "xla", "timeout", {"timeout": 16},
            reason="BackendTimeout: no answer in 60 s"),
        # abs(-0.0) on f16: every backend gives the same -0.0 where the oracle says +0.0
        sig("abs", "f16", "jax", "signed_zero", {"pass": 31, "signed_zero": 1}),
        sig("abs", "f16", "xla", "signed_zero", {"pass": 31, "signed_zero": 1}),
        {"kind": "cross", "op": "add", "family": "arithmetic", "type_key": "f32",
         "signature": "add(tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>)",
         "backends": ["jax", "vendor", "xla"], "cases": 32,
         "disagreements": {"jax~vendor": 2, "jax~xla": 0, "vendor~xla": 2}, "oracle_suspects": 0},
        {"kind": "cross", "op": "abs", "family": "arithmetic", "type_key": "f16",
         "signature": "abs(tensor<4xf16>) -> (tensor<4xf16>)",
         "backends": ["jax", "vendor", "xla"], "cases": 32,
         "disagreements": {"jax~vendor": 0, "jax~xla": 0, "vendor~xla": 0}, "oracle_suspects": 1},
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
        {"kind": "divergence", "backend": "xla", "op": "add", "family": "arithmetic",
         "type_key": "si32", "class": "crash", "minimised_class": "crash",
         "case_id": "7:quick:add:si32:0:0:?", "signature": "add(tensor<4xsi32>, tensor<4xsi32>) "
         "-> (tensor<4xsi32>)", "minimised_signature": "add(tensor<4xsi32>, tensor<4xsi32>) -> "
         "(tensor<4xsi32>)", "reproduces_alone": True,
         "case": {"signature": {"op": "add", "input_types": ["tensor<si32>", "tensor<si32>"],
                                "result_types": ["tensor<si32>"], "attributes": {}},
                  "inputs": [{"type": "tensor<si32>", "bits": "00000007", "literal": 7},
                             {"type": "tensor<si32>", "bits": "00000009", "literal": 9}]},
         "expected": [{"type": "tensor<si32>", "bits": "00000010", "literal": 16}],
         "actual": None, "message": "BackendCrash: the backend process died (signal 11)",
         "repro": "repros/xla/add/si32-crash-1", "batch_count": None,
         "stablehlo": "func.func @main(%a: tensor<si32>, %b: tensor<si32>) -> tensor<si32>"},
        *[{"kind": "divergence", "backend": b, "op": "abs", "family": "arithmetic",
           "type_key": "f16", "class": "signed_zero", "minimised_class": "signed_zero",
           "case_id": "7:quick:abs:f16:0:0:5", "signature": "abs(tensor<4xf16>) -> (tensor<4xf16>)",
           "minimised_signature": "abs(tensor<f16>) -> (tensor<f16>)", "reproduces_alone": True,
           "case": {"signature": {"op": "abs", "input_types": ["tensor<f16>"],
                                  "result_types": ["tensor<f16>"], "attributes": {}},
                    "inputs": [{"type": "tensor<f16>", "bits": "8000", "literal": "-0.0"}]},
           "expected": [{"type": "tensor<f16>", "bits": "0000", "literal": "0.0"}],
           "actual": [{"type": "tensor<f16>", "bits": "8000", "literal": "-0.0"}],
           "message": None, "repro": f"repros/{b}/abs/f16-signed_zero-1", "batch_count": 1,
           "oracle_suspect": True} for b in ("jax", "vendor")],
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
        # (a record of a kind this version does not know is refused: test_results_schema)
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
    """Matrix cells of an index page, per matrix: the combined one (``matrix-combined``)
    and one per backend (``backend:NAME``): (backend, op, type) -> (attributes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[tuple[str, str, str], tuple[dict, str]]] = {}
        self._table = "?"
        self._open: tuple | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "matrix" in (a.get("class") or "").split():
            self._table = a.get("id") or f"backend:{a.get('data-backend')}"
            self.tables.setdefault(self._table, {})
        if tag == "td" and "cell" in (a.get("class") or "").split():
            self._open = (a["data-backend"], a["data-op"], a["data-type"])
            assert self._open not in self.tables[self._table], self._open
            self.tables[self._table][self._open] = (a, "")

    def handle_data(self, data):
        if self._open:
            a, t = self.tables[self._table][self._open]
            self.tables[self._table][self._open] = (a, t + data)

    def handle_endtag(self, tag):
        if tag == "td":
            self._open = None


def matrices(index: Path) -> dict[str, dict]:
    p = Cells()
    p.feed(index.read_text())
    return p.tables


def cells(index: Path) -> dict:
    """The cells of the per-backend matrices, each backend's from its own matrix."""
    out = {}
    for name, table in matrices(index).items():
        if name.startswith("backend:"):
            assert all(k[0] == name[len("backend:"):] for k in table)
            out.update(table)
    return out


def divergence(html: str, i: int) -> str:
    """The section of an op page about its divergence ``i``."""
    rest = section(html, f'id="divergence-{i}"', "\uffff")
    return re.split(r'<div class="div|<h2 id="invalid"', rest)[0]


def section(html: str, start: str, end: str = "</table>") -> str:
    """The text from ``start`` to the next ``end``."""
    assert start in html, start
    return html.split(start, 1)[1].split(end, 1)[0]


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
    # 28 columns per op row, per backend (the 19 seed types and the 9 newer float formats).
    assert sum(1 for k in c if k[:2] == ("jax", "add")) == 28
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
    # add has one labelled constraint (C1), and it has a negative case
    assert row.count(">1 / 1<") == 1
    total = table.split('<tr class="total">')[1].split("</tr>")[0]
    assert "All ops" in total
    op_page = (rendered[0] / "ops" / "add.html").read_text()
    assert "Labelled constraints with a negative case: <strong>jax</strong> 1 / 1" in op_page


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
    assert s["totals"]["cases"] == sum(r["cases"] for r in sigs) == 336
    expected = {}
    for r in sigs:
        for k, v in r["counts"].items():
            if k != "pass":
                expected[k] = expected.get(k, 0) + v
    assert s["totals"]["diverging_cases"] == expected
    assert s["totals"]["unsupported_signatures"] == 1
    assert s["totals"]["saved_divergences"] == {"crash": 1, "signed_zero": 2, "value": 1}
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
    assert set(suites) == {"jax", "vendor", "xla"}
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
    # abs f16 signed_zero (the oracle suspect still fails: the oracle is the reference)
    assert (j.get("failures"), j.get("errors"), j.get("skipped")) == ("1", "0", "1")
    assert "oracle suspect" in j.find("testcase[@name='f16']/failure").text
    # crash and timeout are errors, not failures; the crash's message is in the text
    x = suites["xla"]
    assert (x.get("failures"), x.get("errors"), x.get("skipped"), x.get("tests")) == \
        ("1", "2", "0", "4")
    crash = x.find("testcase[@name='si32']/error")
    assert crash.get("message") == "crash" and "signal 11" in crash.text
    assert "repros/xla/add/si32-crash-1/repro.py" in crash.text
    assert x.find("testcase[@name='si8->f16']/error").get("message") == "timeout"
    assert root.get("failures") == "7" and root.get("errors") == "3"


def test_style_covers_every_outcome_class():
    from conformance.checking.compare import SEVERITY
    for outcome in [*SEVERITY, "crash", "timeout", "not_run", "not_generated", "fail"]:
        assert outcome in LOOKS, outcome
    backgrounds = [LOOKS[c].background for c in SEVERITY]
    assert len(set(backgrounds)) == len(backgrounds)     # one hue per class


def test_combined_matrix_has_a_cell_per_op_type_backend(rendered):
    _, _, index = rendered
    tables = matrices(index)
    assert set(tables) == {"matrix-combined", "backend:jax", "backend:vendor", "backend:xla"}
    combined = tables["matrix-combined"]
    from conformance.core.types import ALL_ELEMENT_TYPES
    types = [t.name for t in ALL_ELEMENT_TYPES]
    assert len(types) == 28
    assert set(combined) == {(b, op, t) for b in ("jax", "vendor", "xla")
                             for op in ("add", "abs", "convert") for t in types}
    # the same outcome as each backend's own matrix, with a short label
    own = cells(index)
    for key, (attrs, _) in combined.items():
        assert attrs["data-outcome"] == own[key][0]["data-outcome"], key
    assert combined[("jax", "add", "f32")][1] == "ok"
    assert combined[("vendor", "add", "f32")][1] == "val"
    assert combined[("xla", "add", "si32")][0]["data-outcome"] == "crash"
    assert "o-crash" in combined[("xla", "add", "si32")][0]["class"].split()
    assert combined[("xla", "convert", "si8")][0]["data-outcome"] == "timeout"
    # backends side by side per type: the sub-columns of f32 are adjacent, in run order
    html = index.read_text()
    row = section(html, '<tr data-op="add">', "</tr>")
    f32 = [m for m in row.split("<td")[1:] if 'data-type="f32"' in m]
    assert [m.split('data-backend="')[1].split('"')[0] for m in f32] == ["jax", "vendor", "xla"]
    assert row.index('data-type="f16"') < row.index('data-type="f32"') < \
        row.index('data-type="f64"')
    # a second header row with one short label per backend per type
    head = section(html, '<table class="matrix combined" id="matrix-combined">', "</thead>")
    assert head.count('<th class="bk') == 28 * 3
    assert '<code>j</code> = jax' in html and '<code>v</code> = vendor' in html
    # marks: backends disagree on add f32; every backend agrees against the oracle on abs f16
    assert "xd" in combined[("jax", "add", "f32")][0]["class"].split()
    assert combined[("jax", "add", "f32")][0]["data-disagreeing"] == "4"
    abs_f16 = combined[("xla", "abs", "f16")][0]
    assert "xs" in abs_f16["class"].split() and abs_f16["data-suspects"] == "1"
    assert "oracle suspects: 1" in abs_f16["title"]
    # the per-backend matrices are kept, folded
    assert html.count('<details class="matrix-alone">') == 3


def test_short_backend_labels_are_distinct():
    from conformance.reports.html import short_names
    assert short_names(["jax", "xla", "interpreter", "numpy"]) == \
        {"jax": "j", "xla": "x", "interpreter": "i", "numpy": "n"}
    assert short_names(["jax", "jaxlib", "numpy"]) == {"jax": "ja1", "jaxlib": "ja2", "numpy": "n"}
    assert short_names(["iree-cpu", "interpreter"]) == {"iree-cpu": "ir", "interpreter": "in"}


def test_single_backend_page_is_unchanged(tmp_path):
    recs = [r for r in records() if r.get("backend") in (None, "jax") and r["kind"] != "cross"]
    recs[0] = {**recs[0], "backends": recs[0]["backends"][:1]}
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    index = render(tmp_path / "r.jsonl", tmp_path / "out")
    html = index.read_text()
    assert set(matrices(index)) == {"backend:jax"}
    assert "matrix-combined" not in html and "Backends compared" not in html
    assert "Oracle suspects" not in html and "<details" not in html
    assert "Backends compared" not in (tmp_path / "out" / "ops" / "add.html").read_text()


def test_backends_compared_and_oracle_suspects_on_index(rendered):
    _, _, index = rendered
    html = index.read_text()
    # prominent in the totals
    assert re.search(r"Oracle suspects: <a href=\"#oracle-suspects\"><strong>1</strong>", html)
    row = section(html, '<tr class="hl" id="totals-oracle-suspects">', "</tr>")
    assert ">1</a>" in row and "2 saved divergence(s) flagged" in row
    # per pair: cases compared, disagreeing cases, top ops
    pairs = section(html, '<table id="pairs">')
    rows = {r.split('"')[0]: r for r in pairs.split('<tr data-pair="')[1:]}
    assert list(rows) == ["jax~vendor", "jax~xla", "vendor~xla"]
    nums = {p: re.findall(r'<td class="num[^"]*">([^<]*)</td>', r) for p, r in rows.items()}
    assert nums == {"jax~vendor": ["64", "2", "3.1%"], "jax~xla": ["64", "0", "0.0%"],
                    "vendor~xla": ["64", "2", "3.1%"]}
    assert 'href="ops/add.html#cross">add</a> 2' in rows["jax~vendor"]
    assert "abs" not in rows["jax~vendor"]
    # per op: add disagrees, abs has the suspect; convert was not compared
    per_op = section(html, '<table id="pair-ops">')
    assert '<tr data-op="add">' in per_op and '<tr data-op="abs">' in per_op
    assert "convert" not in per_op
    # suspected oracle defects: per op and type key, linking the flagged divergences
    sus = section(html, '<table id="suspects">')
    assert sus.count("<tr data-op=") == 1
    assert '<tr data-op="abs" data-type-key="f16">' in sus
    links = re.findall(r'class="suspect-link" href="([^"]+)">([^<]+)</a>', sus)
    assert links == [("ops/abs.html#divergence-0", "jax signed_zero"),
                     ("ops/abs.html#divergence-1", "vendor signed_zero")]


def test_op_page_pairwise_table_and_suspect_badge(rendered):
    out, _, _ = rendered
    html = (out / "ops" / "add.html").read_text()
    table = section(html, '<table class="cross" id="cross-table">')
    row = section(table, '<tr data-type-key="f32">', "</tr>")
    got = dict(re.findall(r'data-pair="([^"]+)">([^<]*)</td>', row))
    assert got == {"jax~vendor": "2", "jax~xla": "0", "vendor~xla": "2"}
    assert 'data-suspects="0"' in row
    assert '<tr data-type-key="si32">' not in table        # nothing compared there
    # abs: the suspect count, a link to both flagged divergences, and the badges
    html = (out / "ops" / "abs.html").read_text()
    row = section(section(html, '<table class="cross" id="cross-table">'),
                  '<tr data-type-key="f16">', "</tr>")
    assert dict(re.findall(r'data-pair="([^"]+)">([^<]*)</td>', row)) == \
        {"jax~vendor": "0", "jax~xla": "0", "vendor~xla": "0"}
    assert 'data-suspects="1">1<' in row
    assert 'href="#divergence-0">jax signed_zero' in row
    assert 'href="#divergence-1">vendor signed_zero' in row
    for i in (0, 1):
        div = divergence(html, i)
        assert 'data-oracle-suspect="true"' in div
        assert '<span class="badge suspect"' in div and "oracle suspect</span>" in div
    # the value divergence on add is not flagged
    add = (out / "ops" / "add.html").read_text()
    div = divergence(add, 0)
    assert 'data-oracle-suspect="false"' in div and "badge suspect" not in div


def test_crash_divergence_renders_without_actual_values(rendered):
    out, _, _ = rendered
    html = (out / "ops" / "add.html").read_text()
    div = divergence(html, 1)
    assert 'data-class="crash"' in div and "o-crash" in div
    assert "BackendCrash: the backend process died (signal 11)" in div
    assert 'href="../../repros/xla/add/si32-crash-1/repro.py"' in div
    assert "python repros/xla/add/si32-crash-1/repro.py" in div
    assert "No result from xla" in div and "crashed" in div
    assert '<pre class="stablehlo">func.func @main(%a: tensor&lt;si32&gt;' in div
    literals = section(div, '<table class="literals">')
    assert "Actual" not in literals and "<pre>7</pre>" in literals and "<pre>16</pre>" in literals
    # the value divergence keeps its actual values
    assert "Actual (vendor)" in divergence(html, 0)


def test_summary_cross_and_oracle_suspects(rendered):
    out, recs, _ = rendered
    s = json.loads((out / "summary.json").read_text())
    assert s["format_version"] == 5
    assert s["totals"]["oracle_suspects"] == 1
    assert s["totals"]["saved_oracle_suspects"] == 2
    assert s["totals"]["compared_cases"] == 64
    assert s["totals"]["disagreements"] == {"jax~vendor": 2, "jax~xla": 0, "vendor~xla": 2}
    x = s["cross"]
    assert x["backends"] == ["jax", "vendor", "xla"]
    assert x["cases"] == 64 and x["signatures"] == 2
    assert x["oracle_suspects"] == sum(r["oracle_suspects"] for r in recs
                                       if r["kind"] == "cross") == 1
    assert x["saved_oracle_suspects"] == 2
    assert x["pairs"]["jax~vendor"] == {"backends": ["jax", "vendor"], "cases": 64,
                                        "disagreements": 2, "ops": {"add": 2}}
    assert x["pairs"]["jax~xla"]["disagreements"] == 0 and x["pairs"]["jax~xla"]["ops"] == {}
    assert set(x["ops"]) == {"add", "abs"}
    assert x["ops"]["abs"]["oracle_suspects"] == 1
    assert x["ops"]["abs"]["type_keys"]["f16"]["oracle_suspects"] == 1
    assert x["ops"]["add"]["oracle_suspects"] == 0
    assert x["ops"]["add"]["type_keys"]["f32"]["disagreements"] == \
        {"jax~vendor": 2, "jax~xla": 0, "vendor~xla": 2}
    # per backend: only the pairs it is in
    assert s["backends"]["xla"]["totals"]["disagreements"] == {"jax~xla": 0, "vendor~xla": 2}
    flagged = [d for d in s["divergences"] if d["oracle_suspect"]]
    assert sorted(d["backend"] for d in flagged) == ["jax", "vendor"]
    crash = next(d for d in s["divergences"] if d["class"] == "crash")
    assert crash["oracle_suspect"] is False and "signal 11" in crash["message"]


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
    from conformance.apps.runner import RunConfig, run
    cfg = RunConfig(ops=["add"], depth="quick", out=tmp_path, progress=False)
    run(cfg, [get_backend("numpy")], tmp_path / "results.jsonl")
    index = render(tmp_path / "results.jsonl", tmp_path / "report")
    assert index.is_file() and "add" in index.read_text()
    assert "Run complete" in index.read_text()
    s = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert s["totals"]["cases"] > 0 and "add" in s["backends"]["numpy"]["ops"]
    ET.parse(tmp_path / "report" / "junit.xml")


def test_real_two_backend_run(tmp_path):
    from conformance.backends import get_backend
    from conformance.apps.runner import RunConfig, run
    cfg = RunConfig(backends=["jax", "numpy"], ops=["multiply"], depth="quick", out=tmp_path,
                    progress=False)
    run(cfg, [get_backend("jax"), get_backend("numpy")], tmp_path / "results.jsonl")
    index = render(tmp_path / "results.jsonl", tmp_path / "report")
    html = index.read_text()
    combined = matrices(index)["matrix-combined"]
    applicable = {k[2] for k in combined if combined[k][0]["data-outcome"] != "not_applicable"}
    assert applicable and {("jax", "multiply", t) for t in applicable} <= set(combined)
    assert {("numpy", "multiply", t) for t in applicable} <= set(combined)
    assert '<table id="pairs">' in html and '<tr data-pair="jax~numpy">' in html
    assert "Oracle suspects:" in html
    s = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert list(s["cross"]["pairs"]) == ["jax~numpy"]
    assert s["cross"]["cases"] > 0 and "multiply" in s["cross"]["ops"]
    op = (tmp_path / "report" / "ops" / "multiply.html").read_text()
    assert '<table class="cross" id="cross-table">' in op
    ET.parse(tmp_path / "report" / "junit.xml")


# ---------------------------------------------------------------------------
# The CI gate: rendered with an expectations file
# ---------------------------------------------------------------------------

EXPECTATIONS = """\
backend: "*"
expectations:
  - op: add                     # matches vendor's add f32 value divergence
    element_type: f32
    class: value
    reason: vendor rounds <differently>
    link: https://example.com/bug/1
  - op: add                     # stale: the run covered add f32, no nan there
    element_type: f32
    class: nan
    reason: fixed long ago
  - op: sine                    # not exercised: the run did not cover sine
    element_type: f32
    class: accuracy
    reason: sine is slow
  - op: add                     # an invalid rule the vendor runs anyway
    rule: C1
    class: accepted_invalid
    reason: vendor skips verification
    link: "javascript:alert(1)"
"""


@pytest.fixture
def gated(tmp_path):
    write_results(tmp_path / "results.jsonl")
    (tmp_path / "vendor.yaml").write_text(EXPECTATIONS)
    index = render(tmp_path / "results.jsonl", tmp_path / "report",
                   expectations=tmp_path / "vendor.yaml")
    return tmp_path / "report", index, str(tmp_path / "vendor.yaml")


def rows(table: str, attr: str = "data-op") -> list[str]:
    return table.split(f"<tr {attr}=")[1:]


def test_gate_section_on_index(gated):
    _, index, path = gated
    html = index.read_text()
    gate = section(html, '<section id="gate"', "</section>")
    # at the top: before the run's details and the matrices
    assert html.index('<section id="gate"') < html.index("<h2>Run</h2>")
    assert gate.startswith(' class="fail" data-passed="false"')
    assert '<span class="verdict">FAIL</span>' in gate and path in gate
    counts = dict(re.findall(r'<tr data-count="(\w+)"><th>[^<]*</th><td class="num[^"]*">(\d+)',
                             gate))
    assert counts == {"unexpected": "8", "expected": "2", "stale": "1", "not_exercised": "1"}
    # unexpected: one row per (backend, op, type key or rule, class), linking the op page
    unexpected = section(gate, '<table id="gate-unexpected">')
    got = re.findall(r'<tr data-backend="([^"]+)" data-op="([^"]+)" data-where="([^"]+)" '
                     r'data-class="([^"]+)">', unexpected)
    assert ("vendor", "abs", "f16", "signed_zero") in got
    assert ("xla", "add", "si32", "crash") in got
    assert ("vendor", "add", "example-0", "fail") in got
    assert ("vendor", "convert", "si8-&gt;f32", "accuracy") in got
    assert len(got) == 8 and not any(g[:3] == ("vendor", "add", "f32") for g in got)
    row = section(unexpected, 'data-where="si32" data-class="crash">', "</tr>")
    assert '<td class="num">32</td>' in row and 'href="ops/add.html#divergences"' in row
    assert 'href="ops/add.html#examples"' in section(unexpected, 'data-where="example-0"', "</tr>")
    # stale: file, index, op, type, class, reason
    stale = section(gate, '<table id="gate-stale">')
    (row,) = rows(stale, "data-index")
    assert row.startswith('"1" data-op="add"') and "STALE" in row and path in row
    assert "<code>f32</code>" in row and "o-nan" in row and "fixed long ago" in row
    # expected: compact, with the reason and a link (only web addresses become links)
    expected = section(gate, '<ul id="gate-expected">', "</ul>")
    assert 'data-op="add" data-where="f32" data-class="value"' in expected
    assert "vendor rounds &lt;differently&gt;" in expected
    assert '<a href="https://example.com/bug/1">' in expected
    assert 'href="ops/add.html#invalid"' in expected and "vendor skips verification" in expected
    assert 'href="javascript' not in html
    # not exercised
    assert 'data-index="2" data-op="sine"' in section(gate, '<ul id="gate-not-exercised"', "</ul>")


def test_gate_marks_expected_matrix_cells(gated):
    _, index, _ = gated
    html = index.read_text()
    c = cells(index)
    attrs, text = c[("vendor", "add", "f32")]
    assert "exp" in attrs["class"].split() and "o-value" in attrs["class"].split()
    assert attrs["data-gate"] == "expected" and text == "\u2713val"
    assert "expected: value (vendor rounds <differently>)" in attrs["title"]
    attrs, text = c[("vendor", "abs", "f16")]
    assert attrs["data-gate"] == "unexpected" and "exp" not in attrs["class"].split()
    assert text == "±0" and "UNEXPECTED: signed_zero" in attrs["title"]
    # passing cells carry no gate mark
    assert "data-gate" not in c[("jax", "add", "f32")][0]
    combined = matrices(index)["matrix-combined"]
    attrs, text = combined[("vendor", "add", "f32")]
    assert "exp" in attrs["class"].split() and text == "\u2713"
    assert combined[("xla", "add", "si32")][0]["data-gate"] == "unexpected"
    # the hatched look, and its legend
    assert ".o-value.exp{background:repeating-linear-gradient(" in html
    assert 'id="gate-legend"' in html


def test_gate_labels_on_op_pages(gated):
    out, _, path = gated
    html = (out / "ops" / "add.html").read_text()
    div = divergence(html, 0)                     # vendor add f32 value: expected
    assert 'data-gate="expected"' in div
    assert ('<p class="gate-verdict expected"><strong>expected:</strong> vendor rounds '
            '&lt;differently&gt; (<a href="https://example.com/bug/1">') in div
    assert "UNEXPECTED" not in div
    div = divergence(html, 1)                     # xla add si32 crash: unexpected
    assert 'data-gate="unexpected"' in div and "UNEXPECTED" in div and path in div
    # the rule the vendor runs anyway is expected in the invalid-case table
    row = section(html, '<tr data-rule="C1">', "</tr>")
    assert 'class="gate-tag expected"' in row
    # the op's findings and stale entries at the top of the page
    top = section(html, '<div id="gate"', '<p>Sections:')
    assert top.startswith(' class="fail"')
    assert 'data-gate="expected" data-backend="vendor" data-where="f32"' in top
    assert 'data-gate="unexpected" data-backend="xla" data-where="si32"' in top
    assert 'class="gate-stale" data-index="1"' in top
    html = (out / "ops" / "abs.html").read_text()
    assert all('data-gate="unexpected"' in divergence(html, i) for i in (0, 1))
    assert "gate-stale" not in html


def test_gate_in_summary_json(gated):
    out, _, path = gated
    s = json.loads((out / "summary.json").read_text())
    g = s["gate"]
    assert g["passed"] is False and g["file"] == path
    assert g["counts"] == {"unexpected": 8, "expected": 2, "stale": 1, "not_exercised": 1}
    assert {"backend": "vendor", "op": "add", "element_type": "f32", "rule": None,
            "class": "value", "cases": 2, "reason": "vendor rounds <differently>",
            "link": "https://example.com/bug/1"} in g["expected"]
    assert {"backend": "xla", "op": "add", "element_type": "si32", "rule": None,
            "class": "crash", "cases": 32} in g["unexpected"]
    assert [(e["index"], e["op"], e["element_type"], e["class"], e["reason"])
            for e in g["stale"]] == [(1, "add", "f32", "nan", "fixed long ago")]
    assert [e["op"] for e in g["not_exercised"]] == ["sine"]


def test_gate_in_junit(gated):
    out, _, path = gated
    root = ET.parse(out / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"jax", "vendor", "xla", "conformance-expectations"}
    v = suites["vendor"]
    # expected -> skipped: add f32 value, invalid[C1]; the rest as without expectations
    tc = v.find("testcase[@name='f32']")
    assert tc.find("failure") is None
    skipped = tc.find("skipped")
    assert skipped.get("message") == "expected: vendor rounds <differently>"
    assert "repros/vendor/add/f32-value-1/repro.py" in skipped.text
    c1 = v.find("testcase[@name='invalid[C1]']")
    assert c1.find("failure") is None
    assert c1.find("skipped").get("message") == "expected: vendor skips verification"
    # unexpected ones stay failures and errors
    assert v.find("testcase[@name='f16']/failure").get("message") == "signed_zero"
    assert v.find("testcase[@name='si32']/error").get("message") == "backend_error"
    assert (v.get("failures"), v.get("errors"), v.get("skipped"), v.get("tests")) == \
        ("3", "1", "4", "9")
    assert suites["xla"].find("testcase[@name='si32']/error").get("message") == "crash"
    # stale and not-exercised entries: skipped cases of their own suite, never failing
    e = suites["conformance-expectations"]
    assert (e.get("failures"), e.get("errors"), e.get("skipped"), e.get("tests")) == \
        ("0", "0", "2", "2")
    stale = e.find("testcase[@name='expectations[1] add f32 nan']/skipped")
    assert stale.get("message").startswith("stale: ") and "fixed long ago" in stale.get("message")
    assert path in stale.text
    missing = e.find("testcase[@name='expectations[2] sine f32 accuracy']/skipped")
    assert missing.get("message").startswith("not exercised: ")
    assert root.get("failures") == "5" and root.get("errors") == "3"


def test_gate_passes_when_every_divergence_is_expected(tmp_path):
    from conformance.apps.expectations import Expectations, update
    recs = write_results(tmp_path / "results.jsonl")
    entries = update(recs, None)
    index = render(tmp_path / "results.jsonl", tmp_path / "report",
                   expectations=Expectations(entries, path="all.yaml"))
    html = index.read_text()
    assert '<section id="gate" class="ok" data-passed="true">' in html
    assert '<span class="verdict">PASS</span>' in html and 'id="gate-unexpected"' not in html
    assert 'data-gate="unexpected"' not in html
    assert cells(index)[("xla", "add", "si32")][0]["data-gate"] == "expected"
    s = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert s["gate"]["passed"] is True and s["gate"]["counts"]["unexpected"] == 0
    root = ET.parse(tmp_path / "report" / "junit.xml").getroot()
    assert root.get("failures") == "0" and root.get("errors") == "0"
    assert "conformance-expectations" not in {s.get("name") for s in root.iter("testsuite")}


def test_no_expectations_no_gate(rendered):
    out, _, index = rendered
    body = index.read_text().split("</style>", 1)[1]
    assert 'id="gate' not in body and "data-gate" not in body and "gate-tag" not in body
    assert "\u2713" not in body
    assert not any("exp" in a["class"].split() for t in matrices(index).values()
                   for a, _ in t.values())
    body = (out / "ops" / "add.html").read_text().split("</style>", 1)[1]
    assert 'id="gate' not in body and "gate-tag" not in body and "expected:" not in body
    assert json.loads((out / "summary.json").read_text())["gate"] is None
    root = ET.parse(out / "junit.xml").getroot()
    assert "conformance-expectations" not in {s.get("name") for s in root.iter("testsuite")}
    assert all(p.get("name") != "expectations" for p in root.iter("property"))


def test_bad_expectations_file_writes_nothing(tmp_path):
    from conformance.apps.expectations import ExpectationsError
    write_results(tmp_path / "results.jsonl")
    (tmp_path / "bad.yaml").write_text("expectations:\n  - op: add\n    class: value\n")
    with pytest.raises(ExpectationsError, match="'reason' is required"):
        render(tmp_path / "results.jsonl", tmp_path / "report", expectations=tmp_path / "bad.yaml")
    assert not (tmp_path / "report").exists()


def test_cli_gate_end_to_end(tmp_path):
    """`conformance run --expectations`, `report --expectations` and `expectations check`
    on a backend with a planted divergence (add f32, one ulp high) and on one without."""
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root / "tests")}      # planted:Class backends

    def cli(*args, cwd=root):
        return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)

    def run(backend, out, *extra):
        return cli("run", "--backend", backend, "--ops", "add", "--types", "f32", "--depth",
                   "quick", "--no-invalid", "--no-progress", "--out", str(out), *extra)

    known = tmp_path / "planted.yaml"
    known.write_text("expectations:\n  - {op: add, element_type: f32, class: value, "
                     "reason: planted}\n")
    other = tmp_path / "other.yaml"
    other.write_text("expectations:\n  - {op: add, element_type: f32, class: nan, "
                     "reason: not this one}\n")

    # without expectations, the planted divergence fails the run
    p = run("planted:PlantedAddF32", tmp_path / "plain")
    assert p.returncode == 1, p.stderr
    plain = tmp_path / "plain" / "results.jsonl"
    # expected: exit 0, and the report says so
    p = run("planted:PlantedAddF32", tmp_path / "known", "--expectations", str(known))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "gate: 0 unexpected, 1 expected, 0 stale" in p.stdout
    index = tmp_path / "known" / "index.html"
    html = index.read_text()
    assert '<section id="gate" class="ok" data-passed="true">' in html
    assert 'data-op="add" data-where="f32" data-class="value"' in \
        section(html, '<ul id="gate-expected">', "</ul>")
    assert cells(index)[("planted", "add", "f32")][0]["data-gate"] == "expected"
    op = (tmp_path / "known" / "ops" / "add.html").read_text()
    assert '<p class="gate-verdict expected"><strong>expected:</strong> planted' in op
    s = json.loads((tmp_path / "known" / "summary.json").read_text())
    assert s["gate"]["passed"] is True and s["gate"]["counts"]["expected"] == 1
    junit = ET.parse(tmp_path / "known" / "junit.xml").getroot()
    assert junit.find(".//testcase[@name='f32']/skipped").get("message") == "expected: planted"
    assert junit.get("failures") == "0"
    # a divergence the file does not expect still fails
    p = run("planted:PlantedAddF32", tmp_path / "other", "--expectations", str(other))
    assert p.returncode == 1 and "UNEXPECTED  planted: add f32 value" in p.stdout
    assert "STALE" in p.stdout                       # the nan entry matched nothing
    # the divergence gone: exit 0, the entry listed stale in stdout and in the report
    p = run("planted:OracleBackend", tmp_path / "clean", "--expectations", str(known))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"STALE       {known}: expectations[0] add f32 value" in p.stdout
    html = (tmp_path / "clean" / "index.html").read_text()
    stale = section(html, '<table id="gate-stale">')
    assert "STALE" in stale and str(known) in stale and "planted" in stale
    clean = tmp_path / "clean" / "results.jsonl"
    # `expectations check` gives the same verdicts on the saved results
    p = cli("expectations", "check", str(plain), str(known))
    assert p.returncode == 0 and "1 expected" in p.stdout
    p = cli("expectations", "check", str(plain), str(other))
    assert p.returncode == 1 and "UNEXPECTED" in p.stdout
    p = cli("expectations", "check", str(clean), str(known))
    assert p.returncode == 0 and "STALE" in p.stdout
    assert cli("expectations", "check", str(clean), str(known), "--fail-on-stale").returncode == 1
    # `report --expectations` renders the gate but does not gate (exit 0 even on FAIL)
    p = cli("report", str(plain), "--out", str(tmp_path / "rep"), "--expectations", str(other))
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "rep" / "index.html").read_text()
    assert '<section id="gate" class="fail" data-passed="false">' in html
    assert json.loads((tmp_path / "rep" / "summary.json").read_text())["gate"]["passed"] is False
    # a malformed file is a usage error, before anything is written
    bad = tmp_path / "bad.yaml"
    bad.write_text("expectations:\n  - {op: add, class: value}\n")
    p = cli("report", str(plain), "--out", str(tmp_path / "bad"), "--expectations", str(bad))
    assert p.returncode == 2 and "'reason' is required" in p.stderr
    assert not (tmp_path / "bad").exists()
    # a saved reproducer, run alone from elsewhere, still fails
    repros = sorted((tmp_path / "plain" / "repros" / "planted" / "add").glob("*/repro.py"))
    assert repros
    p = subprocess.run([sys.executable, str(repros[0])], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "verdict:  value" in p.stdout


def test_replayed_reproducers_are_listed(tmp_path):
    """Reproducers of an earlier run, re-run first, appear with their verdict now."""
    from conformance import reports
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(json.dumps(r) for r in [
        {"kind": "run", "seed": 0, "depth": "quick", "backends": [{"name": "vendor"}]},
        {"kind": "replay", "case_id": "0:quick:add:f32:1:0:3", "op": "add", "type_key": "f32",
         "backend": "vendor", "class": "value", "class_before": "value",
         "repro": "repros/vendor/add/f32-value-1"},
        {"kind": "replay", "case_id": "0:quick:add:f32:2:0:9", "op": "add", "type_key": "f32",
         "backend": "vendor", "class": "pass", "class_before": "value",
         "repro": "repros/vendor/add/f32-value-2"},
        {"kind": "end", "elapsed": 1.0, "ops": ["add"]}]) + "\n")
    html = reports.render(results, tmp_path / "out").read_text()
    assert 'id="replays"' in html and "0:quick:add:f32:2:0:9" in html
    assert "2 saved case(s) re-run before any new case;\n1 still diverge" in html
