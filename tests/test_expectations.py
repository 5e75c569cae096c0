"""Expectations: matching, stale entries, update keeping reasons, one-line errors."""
import json
from pathlib import Path

import pytest

from conformance.apps.expectations import (ExpectationsError, dump, gate, load_expectations,
                                           update)

ROOT = Path(__file__).resolve().parents[1]

RUN = {"kind": "run", "backends": [{"name": "jax", "platform": "cpu", "jax": "0.10.2"}]}


def sig(op, key, counts, outcome="pass"):
    return {"kind": "signature", "backend": "jax", "op": op, "type_key": key,
            "counts": counts, "outcome": outcome}


RECORDS = [
    RUN,
    sig("add", "f32", {"pass": 60, "subnormal_flush": 4}, "subnormal_flush"),
    sig("popcnt", "si4", {"pass": 50, "value": 14}, "value"),
    sig("convert", "si8->f32", {"pass": 64}),
    {"kind": "invalid", "backend": "jax", "op": "sign", "rule": "I1",
     "outcome": "accepted_invalid"},
    {"kind": "example", "backend": "jax", "op": "divide", "index": 0, "outcome": "fail"},
    {"kind": "unit_done", "op": "add"}, {"kind": "unit_done", "op": "popcnt"},
    {"kind": "unit_done", "op": "convert"}, {"kind": "unit_done", "op": "sign"},
    {"kind": "unit_done", "op": "divide"},
    {"kind": "example", "backend": "jax", "op": "tanh", "index": 0, "outcome": "pass"},
]


def write(tmp_path, text):
    p = tmp_path / "exp.yaml"
    p.write_text(text)
    return p


def test_expected_unexpected_and_stale(tmp_path):
    exp = load_expectations(write(tmp_path, """
backend: jax
expectations:
- {op: '*', element_type: '*', class: subnormal_flush, when: {platform: cpu}, reason: FTZ}
- {op: sign, rule: I1, class: accepted_invalid, reason: lax.sign takes unsigned}
- {op: convert, element_type: 'si8->*', class: value, reason: gone now}
- {op: tanh, element_type: f32, class: accuracy, reason: tanh f32 was not run}
"""))
    g = gate(RECORDS, exp)
    assert {(u["op"], u["class"]) for u in g.unexpected} == {("popcnt", "value"),
                                                            ("divide", "fail")}
    assert {(e["op"], e["reason"]) for e in g.expected} == {("add", "FTZ"),
                                                           ("sign", "lax.sign takes unsigned")}
    assert [e.op for e in g.stale] == ["convert"]
    assert [e.op for e in g.not_exercised] == ["tanh"]
    assert not g.passed


def test_entries_for_what_the_run_filtered_out_are_not_stale(tmp_path):
    exp = load_expectations(write(tmp_path, """
expectations:
- {op: add, element_type: si8, class: value, reason: si8 was filtered out of this run}
- {op: add, element_type: '*', class: nan, when: {platform: gpu}, reason: gpu only}
"""))
    g = gate(RECORDS, exp)
    assert g.stale == [] and len(g.not_exercised) == 2


def test_conditions_must_match_the_backend():
    from conformance.apps.expectations import Expectation
    e = Expectation(op="add", cls="value", reason="r", when=(("platform", "gpu"),))
    assert not e.matches("jax", {"platform": "cpu"}, "add", "value", "f32")
    assert e.matches("jax", {"platform": "gpu"}, "add", "value", "f32")


def test_update_keeps_reasons_and_marks_new_entries(tmp_path):
    old = load_expectations(write(tmp_path, """
expectations:
- {op: popcnt, element_type: si4, class: value, reason: int4 storage, link: 'https://x/1'}
"""))
    entries = update(RECORDS, old)
    by_op = {e.op: e for e in entries}
    assert by_op["popcnt"].reason == "int4 storage" and by_op["popcnt"].link == "https://x/1"
    assert by_op["add"].reason.startswith("TODO")
    text = dump(entries, "jax")
    again = load_expectations(write(tmp_path, text))
    assert gate(RECORDS, again).passed


@pytest.mark.parametrize("text, message", [
    ("expectations: [{op: add, class: value}]", r"expectations\[0\]: 'reason' is required"),
    ("expectations: [{op: add, class: valu, reason: r}]", "not a divergence class"),
    ("expectations: [{op: nosuch, class: value, reason: r}]", "matches no op"),
    ("expectations: [{op: add, class: value, reason: r, colour: red}]", "unknown key"),
    ("expectations: [", "not valid YAML"),
])
def test_malformed_files_name_file_and_entry(tmp_path, text, message):
    p = write(tmp_path, text)
    with pytest.raises(ExpectationsError, match=message) as e:
        load_expectations(p)
    assert str(p) in str(e.value)


def test_shipped_jax_cpu_expectations_load():
    exp = load_expectations(ROOT / "conformance" / "apps" / "expectations_files" / "jax-cpu.yaml")
    assert exp.backend == "jax" and len(exp.entries) > 10
    assert all(not e.reason.startswith("TODO") for e in exp.entries)


# ---------------------------------------------------------------------------
# Breadth (issue 12, point 4): an entry that names more than it matched
# ---------------------------------------------------------------------------

from conformance.apps.cli import main  # noqa: E402
from conformance.apps.expectations import Expectation, audit, type_keys  # noqa: E402

NARROW_RECORDS = [
    RUN,
    {**sig("atan2", "f32", {"pass": 60, "value": 3}, "value"),
     "class_errors": {"value": {"worst": 5.0, "unit": "ulp", "cases": 3, "nonfinite": 0}}},
    sig("atan2", "f64", {"pass": 64}),
    sig("atan2", "complex<f32>", {"pass": 60, "nan": 2}, "nan"),
    sig("atan2", "complex<f64>", {"pass": 60, "nan": 1}, "nan"),
    sig("log", "f32", {"pass": 60, "subnormal_flush": 5}, "subnormal_flush"),
    sig("log_plus_one", "f32", {"pass": 64}),
    {"kind": "invalid", "backend": "jax", "op": "select", "rule": "I1",
     "outcome": "accepted_invalid"},
    {"kind": "invalid", "backend": "jax", "op": "select", "rule": "C1", "outcome": "rejected"},
]


def audited(tmp_path, text, records=NARROW_RECORDS):
    exp = load_expectations(write(tmp_path, "expectations:\n" + text))
    g = gate(records, exp)
    return g, {a.entry.index: a for a in audit(g, exp)}


def check(tmp_path, records, text, *flags):
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    p = tmp_path / "check.yaml"
    p.write_text("expectations:\n" + text)
    return main(["expectations", "check", str(results), str(p), *flags])


@pytest.mark.parametrize("entry, flagged", [
    # a '*' element type that matched one type of the eight atan2 has
    ("{op: atan2, element_type: '*', class: value, reason: r}", ["element_type '*'"]),
    # a class wildcard that matched one class
    ("{op: atan2, element_type: f32, class: '*', reason: r}", ["class '*'"]),
    # an op glob that matched one op of the three it names (log, log_plus_one, logistic)
    ("{op: 'log*', element_type: f32, class: subnormal_flush, reason: r}", ["op 'log*'"]),
    # all three at once: the old jax-cpu subnormal_flush entry
    ("{op: '*', element_type: '*', class: '*', reason: r}",
     ["op '*'", "element_type '*'", "class '*'"]),
    # a rule pattern that matched one rule of select's
    ("{op: select, rule: '*', class: accepted_invalid, reason: r}", ["rule '*'"]),
])
def test_a_broad_entry_is_flagged_with_the_narrow_entries_it_suggests(tmp_path, entry, flagged):
    g, audits = audited(tmp_path, f"- {entry}\n")
    a = audits[0]
    assert a.status == "used" and a.is_broad
    assert [line.split(" matched")[0] for line in a.broad] == flagged
    # the suggestion waives exactly what the entry matched, and names nothing else
    assert all(s.is_narrow() and s.reason == "r" for s in a.suggestion)
    exp = load_expectations(write(tmp_path, dump(a.suggestion)))
    again = gate(NARROW_RECORDS, exp)
    assert {(i["op"], i["element_type"], i["rule"], i["class"]) for i in again.expected} == \
        {(i["op"], i["element_type"], i["rule"], i["class"]) for i in g.expected}
    assert not any(x.is_broad for x in audit(again, exp))


def test_the_suggestion_lists_the_types_seen_per_op_and_class(tmp_path):
    _, audits = audited(tmp_path, "- {op: '*', element_type: '*', class: '*', reason: r, "
                                  "link: 'https://x/1', when: {platform: cpu}}\n")
    a = audits[0]
    assert [s.flow() for s in a.suggestion] == [
        "{op: atan2, element_type: [complex<f32>, complex<f64>], class: nan, "
        "when: {platform: cpu}}",
        "{op: atan2, element_type: f32, class: value, when: {platform: cpu}, "
        "looks_like: {error_at_most: 16, nonfinite: false}}",
        "{op: log, element_type: f32, class: subnormal_flush, when: {platform: cpu}}",
    ]
    assert {s.link for s in a.suggestion} == {"https://x/1"}
    assert a.ops == ["atan2", "log"] and a.classes == ["nan", "subnormal_flush", "value"]
    assert a.cases == 11
    assert "matched 2 ops (atan2, log)" in a.summary()


@pytest.mark.parametrize("entry", [
    "{op: atan2, element_type: f32, class: value, reason: r}",
    "{op: atan2, element_type: [complex<f32>, complex<f64>], class: nan, reason: r}",
    # a pattern that names exactly what it matched is not broader than its matches
    "{op: atan2, element_type: 'complex*', class: nan, reason: r}",
    "{op: select, rule: I1, class: accepted_invalid, reason: r}",
])
def test_a_narrow_entry_is_not_flagged(tmp_path, entry):
    _, audits = audited(tmp_path, f"- {entry}\n")
    assert audits[0].status == "used" and not audits[0].is_broad
    assert audits[0].suggestion == [] and audits[0].unused == []


def test_listed_types_the_run_exercised_without_a_match_are_unused(tmp_path):
    _, audits = audited(tmp_path, "- {op: atan2, element_type: [f32, f64, bf16], class: value, "
                                  "reason: r}\n")
    # f64 ran and passed: that part is stale; bf16 was not run: nothing to say
    assert audits[0].unused == ["f64"] and not audits[0].is_broad


def test_check_strict_fails_on_broad_entries_only(tmp_path, capsys):
    records = NARROW_RECORDS
    narrow = ("- {op: atan2, element_type: f32, class: value, reason: r, "
              "looks_like: {error_at_most: 16}}\n"
              "- {op: atan2, element_type: [complex<f32>, complex<f64>], class: nan, reason: r}\n"
              "- {op: log, element_type: f32, class: subnormal_flush, reason: r}\n"
              "- {op: select, rule: I1, class: accepted_invalid, reason: r}\n")
    assert check(tmp_path, records, narrow, "--strict") == 0
    out = capsys.readouterr().out
    assert "ENTRY       expectations[0] atan2 f32 value: matched 1 op (atan2), 1 element " \
           "type (f32), 1 class (value), 3 case(s)" in out
    assert "0 broad entries" in out and "BROAD" not in out
    assert "LOOKS_LIKE" not in out
    broad = narrow.replace("element_type: f32, class: value", "element_type: '*', class: value")
    assert check(tmp_path, records, broad) == 0            # reported, not failing
    out = capsys.readouterr().out
    assert "BROAD     element_type '*' matched 1 element type (f32) of the" in out
    assert "SUGGEST   replace it with 1 narrow entry" in out
    assert "- {op: atan2, element_type: f32, class: value, looks_like: {error_at_most: 16}}" \
        in out
    assert check(tmp_path, records, broad, "--strict") == 1
    # the unused part of a list fails only with --fail-on-stale
    unused = narrow.replace("element_type: f32, class: value", "element_type: [f32, f64], "
                                                               "class: value")
    assert check(tmp_path, records, unused, "--strict") == 0
    assert "UNUSED" in capsys.readouterr().out
    assert check(tmp_path, records, unused, "--fail-on-stale") == 1


def test_update_writes_narrow_entries_keeping_reasons_links_and_conditions(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in NARROW_RECORDS))
    target = tmp_path / "mine.yaml"
    target.write_text("""# my backend's known divergences
# (kept on update)
backend: jax
expectations:
- {op: '*', element_type: '*', class: subnormal_flush, when: {platform: cpu}, reason: FTZ,
   link: 'https://x/ftz'}
- {op: atan2, element_type: '*', class: '*', reason: atan2 is off}
- {op: popcnt, element_type: si4, class: value, reason: not run here, looks_like: {nonfinite: false}}
- {op: log_plus_one, element_type: f32, class: accuracy, reason: fixed since}
""")
    assert main(["expectations", "update", str(results), str(target)]) == 0
    text = target.read_text()
    assert text.startswith("# my backend's known divergences\n# (kept on update)\nbackend: jax\n")
    exp = load_expectations(target)
    assert [(e.op, e.where, e.cls, e.reason) for e in exp.entries] == [
        ("log", "f32", "subnormal_flush", "FTZ"),                # the broad FTZ entry, narrowed
        ("atan2", "[complex<f32>, complex<f64>]", "nan", "atan2 is off"),
        ("atan2", "f32", "value", "atan2 is off"),
        ("popcnt", "si4", "value", "not run here"),              # not exercised: kept
        ("select", "I1", "accepted_invalid", "TODO: why this divergence is expected"),
    ]                                                            # log_plus_one: stale, gone
    assert exp.entries[0].when == (("platform", "cpu"),) and exp.entries[0].link == "https://x/ftz"
    assert "element_type: [complex<f32>, complex<f64>]" in text     # a list on one line
    assert all(e.is_narrow() for e in exp.entries)
    assert check(tmp_path, NARROW_RECORDS, text.split("expectations:\n", 1)[1], "--strict") == 0


def test_update_takes_several_runs_into_account(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in NARROW_RECORDS))
    other = [RUN, sig("atan2", "f64", {"pass": 60, "value": 1}, "value"),
             sig("atan2", "f32", {"pass": 64})]
    second.write_text("".join(json.dumps(r) + "\n" for r in other))
    target = tmp_path / "both.yaml"
    assert main(["expectations", "update", str(first), str(target), "--also", str(second)]) == 0
    exp = load_expectations(target)
    assert ("atan2", "[f32, f64]", "value") in [(e.op, e.where, e.cls) for e in exp.entries]
    # the file gates both runs, and nothing in it is broader than what they matched
    for records in (NARROW_RECORDS, other):
        g = gate(records, exp)
        assert g.passed and not any(a.is_broad for a in audit(g, exp))


def test_update_of_several_backends_writes_one_entry_per_backend(tmp_path):
    run = {"kind": "run", "backends": [{"name": "jax"}, {"name": "xla"}]}
    records = [run, sig("add", "f32", {"value": 1}, "value"),
               {**sig("add", "f32", {"value": 1}, "value"), "backend": "xla"},
               {**sig("add", "f64", {"value": 1}, "value"), "backend": "xla"}]
    entries = update(records, None)
    assert [(e.backend, e.where) for e in entries] == [("jax", "f32"), ("xla", "[f32, f64]")]


@pytest.mark.parametrize("text, message", [
    ("expectations: [{op: atan2, element_type: complex64, class: value, reason: r}]",
     "element type 'complex64' matches no element type of atan2"),
    ("expectations: [{op: select, rule: C9, class: accepted_invalid, reason: r}]",
     "rule 'C9' matches no rule of select"),
    ("expectations: [{op: add, element_type: f32, rule: C1, class: value, reason: r}]",
     "not both"),
    ("expectations: [{op: add, element_type: [], class: value, reason: r}]",
     "'element_type' must be a name or a list of names"),
])
def test_entries_that_name_nothing_are_errors(tmp_path, text, message):
    with pytest.raises(ExpectationsError, match=message):
        load_expectations(write(tmp_path, text))


def test_lists_match_each_name():
    e = Expectation(op="atan2", cls="value", reason="r", element_types=("f32", "complex*"))
    assert e.matches("jax", {}, "atan2", "value", "f32")
    assert e.matches("jax", {}, "atan2", "value", "complex<f64>")
    assert not e.matches("jax", {}, "atan2", "value", "f64")
    assert not e.is_narrow() and e.element_type == "[f32, complex*]"
    assert "f32" in type_keys("atan2")


def test_shipped_jax_cpu_expectations_are_narrow():
    """Every entry of the shipped file names exactly what it waives (an op, a class, the
    element types or rules), with a one-line reason."""
    exp = load_expectations("jax-cpu")
    wide = [f"expectations[{e.index}] {e.op} {e.where} {e.cls}" for e in exp.entries
            if not e.is_narrow()]
    assert wide == []
    assert all("\n" not in e.reason and len(e.reason) <= 300 for e in exp.entries)
    keys = [(e.op, e.where, e.cls) for e in exp.entries]
    assert len(keys) == len(set(keys))


def test_the_report_carries_what_each_entry_matched_and_the_broad_ones(tmp_path):
    """summary.json's gate.entries (every entry) and a skipped JUnit case per broad entry."""
    import xml.etree.ElementTree as ET
    from conformance import reports
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in NARROW_RECORDS))
    p = write(tmp_path, "expectations:\n"
                        "- {op: atan2, element_type: '*', class: '*', reason: r}\n"
                        "- {op: log, element_type: f32, class: subnormal_flush, reason: r}\n"
                        "- {op: select, rule: I1, class: accepted_invalid, reason: r}\n")
    reports.render(results, tmp_path / "out", expectations=p)
    entries = json.loads((tmp_path / "out" / "summary.json").read_text())["gate"]["entries"]
    assert [(e["index"], e["status"], bool(e["broad"])) for e in entries] == \
        [(0, "used", True), (1, "used", False), (2, "used", False)]
    assert entries[0]["element_types"] == ["complex<f32>", "complex<f64>", "f32"]
    assert entries[0]["cases"] == 6 and entries[2]["rules"] == ["I1"]
    assert {"op": "atan2", "element_type": "f32", "class": "value", "reason": "r",
            "looks_like": {"error_at_most": 16, "nonfinite": False}} in entries[0]["suggestion"]
    root = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "conformance-expectations")
    (case,) = suite.findall("testcase")
    assert case.get("name") == "expectations[0] atan2 * *"
    assert case.find("skipped").get("message").startswith("broad: ")
    assert "{op: atan2, element_type: f32, class: value, looks_like: {error_at_most: 16, " \
        "nonfinite: false}}" in case.find("skipped").text


# ---------------------------------------------------------------------------
# Depths (issue 31, item 9): an entry is judged only by a run at a depth it was seen at
# ---------------------------------------------------------------------------

QUICK = {**RUN, "depth": "quick"}
DEFAULT = {**RUN, "depth": "default"}

DEPTH_FILE = """
backend: jax
expectations:
- {op: add, element_type: f32, class: subnormal_flush, depth: [quick, default], reason: FTZ}
- {op: add, element_type: f32, class: value, depth: default, reason: seen at default only}
- {op: add, element_type: f32, class: accuracy, depth: [quick, default], reason: gone}
- {op: add, element_type: f32, class: nan, reason: 'gone, no depth said'}
- {op: popcnt, element_type: si4, class: value, depth: default, reason: waives at quick too}
"""


def test_a_quick_run_does_not_call_an_entry_seen_only_at_default_stale(tmp_path, capsys):
    exp = load_expectations(write(tmp_path, DEPTH_FILE))
    assert [e.depths for e in exp.entries] == [("quick", "default"), ("default",),
                                               ("quick", "default"), None, ("default",)]
    records = [QUICK, *RECORDS[1:3]]
    g = gate(records, exp)
    assert g.passed and [e["entry"] for e in g.expected] == [0, 4]   # waived at any depth
    assert [e.reason for e in g.stale] == ["gone", "gone, no depth said"]   # still stale
    assert [e.reason for e in g.not_exercised] == ["seen at default only"]
    assert [e.index for e in gate([DEFAULT, *RECORDS[1:3]], exp).stale] == [1, 2, 3]
    # the CLI's lines: no STALE line for the default-only entry
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["expectations", "check", str(results), str(tmp_path / "exp.yaml")]) == 0
    stale = [line for line in capsys.readouterr().out.splitlines() if line.startswith("STALE")]
    assert len(stale) == 2 and not any("seen at default only" in s or "add f32 value" in s
                                       for s in stale)
    assert main(["expectations", "check", str(results), str(tmp_path / "exp.yaml"),
                 "--fail-on-stale"]) == 1


def test_a_run_that_does_not_say_its_depth_judges_every_entry(tmp_path):
    exp = load_expectations(write(tmp_path, DEPTH_FILE))
    assert [e.index for e in gate(RECORDS[:3], exp).stale] == [1, 2, 3]


def test_update_writes_the_depths_each_divergence_was_seen_at(tmp_path):
    quick = [QUICK, sig("add", "f32", {"pass": 60, "subnormal_flush": 4}, "subnormal_flush"),
             sig("add", "f64", {"pass": 64})]
    default = [DEFAULT, sig("add", "f32", {"pass": 60, "subnormal_flush": 4}, "subnormal_flush"),
               sig("add", "f64", {"pass": 60, "subnormal_flush": 1}, "subnormal_flush"),
               sig("add", "bf16", {"pass": 60, "value": 1}, "value")]
    old = load_expectations(write(tmp_path, """
expectations:
- {op: add, element_type: '*', class: subnormal_flush, reason: FTZ}
"""))
    entries = update(quick + default, old)
    assert [(e.where, e.cls, e.depths, e.reason[:4]) for e in entries] == [
        ("f32", "subnormal_flush", ("quick", "default"), "FTZ"),
        ("f64", "subnormal_flush", ("default",), "FTZ"),
        ("bf16", "value", ("default",), "TODO")]
    text = dump(entries)
    assert "depth: [quick, default]" in text and "depth: default" in text
    again = load_expectations(write(tmp_path, text))
    assert [e.depths for e in again.entries] == [e.depths for e in entries]
    # the file gates both runs, and neither calls anything stale
    for records in (quick, default):
        assert not gate(records, again).stale
    # a quick run alone keeps what only default saw (it does not judge it)
    entries = update(quick, again)
    assert [(e.where, e.cls, e.depths) for e in entries] == [
        ("f32", "subnormal_flush", ("quick", "default")),
        ("f64", "subnormal_flush", ("default",)), ("bf16", "value", ("default",))]
    # a depth that is no depth is refused in one line
    with pytest.raises(ExpectationsError, match="depth 'fast' is not a depth"):
        load_expectations(write(tmp_path, "expectations: [{op: add, element_type: f32, "
                                          "class: value, depth: fast, reason: r}]"))
