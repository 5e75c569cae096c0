"""Expectations for programs (issue 19): ``conformance programs --expectations FILE``
fails only on findings the file does not list. A program entry (``program: PATTERN``)
names a generator pattern the op at fault belongs to; a finding the backend shows
running the op alone (``fusion: false``) is waived by the op's own single-op entry;
matching stays narrow (edge cases below)."""
from __future__ import annotations

import json

import pytest

from conformance.apps.cli import main
from conformance.apps.expectations import (ExpectationsError, load_expectations, match_program,
                                           program_findings, program_gate, gate)


def write(tmp_path, text: str, name="exp.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return load_expectations(p)


def record(op="add", key="f32", cls="value", fusion=True, patterns=("a*b+c",),
           finding_patterns=None, backend="xla", rid="0:program:1", outcome=None,
           exercised=None):
    f = {"value": "v2", "op": op, "check": "exact", "cls": cls, "elements": 1,
         "type_key": key, "fusion": fusion,
         "patterns": list(patterns if finding_patterns is None else finding_patterns)}
    return {"kind": "program", "id": rid, "backend": backend, "outcome": outcome or cls,
            "fusion": fusion, "patterns": list(patterns), "findings": [f],
            "exercised": exercised or [[op, key], ["multiply", key]]}


HEAD = {"kind": "run", "command": "programs", "backends": [{"name": "xla", "platform": "cpu"}]}


def test_a_program_entry_waives_its_pattern_op_type_and_class_only(tmp_path):
    exp = write(tmp_path, "expectations:\n"
                "- {op: add, program: a*b+c, element_type: f32, class: value, "
                "reason: FMA contraction}\n")
    info = {"platform": "cpu"}
    (item,), _, _ = program_findings([HEAD, record()])
    assert match_program(exp, item, info) is not None
    for other in (record(key="f64"), record(cls="signed_zero"), record(op="subtract"),
                  record(finding_patterns=("x+0",), patterns=("a*b+c", "x+0")),
                  record(finding_patterns=())):
        (it,), _, _ = program_findings([HEAD, other])
        assert match_program(exp, it, info) is None, other


def test_a_pattern_name_with_a_star_is_a_name_not_a_glob(tmp_path):
    """a*b+c must not match a pattern 'ab+c' or 'a-b+c' (fnmatch would): pattern names
    are compared as names."""
    exp = write(tmp_path, "- {op: add, program: a*b+c, class: value, reason: r}\n")
    e = exp.entries[0]
    assert e.is_narrow() is False            # element_type '*' is still broad
    assert e.covers("xla", {}, "add", "f32", None, ("a*b+c",))
    assert not e.covers("xla", {}, "add", "f32", None, ("ab+c",))
    assert not e.covers("xla", {}, "add", "f32", None, ("a-b+c",))
    narrow = write(tmp_path, "- {op: add, program: a*b+c, element_type: f32, class: value, "
                   "reason: r}\n", "n.yaml")
    assert narrow.entries[0].is_narrow()


def test_a_program_entry_never_waives_a_single_op_divergence(tmp_path):
    exp = write(tmp_path, "- {op: add, program: '*', class: value, reason: r}\n")
    sig = {"kind": "signature", "backend": "xla", "op": "add", "type_key": "f32",
           "counts": {"value": 3}, "outcome": "value"}
    g = gate([HEAD, sig], exp)
    assert len(g.unexpected) == 1 and not g.expected
    assert [e.index for e in g.not_exercised] == [0]     # never stale in single-op runs


def test_a_single_op_entry_waives_only_what_the_op_alone_shows(tmp_path):
    """fusion false: the same backend running the op alone gives the same wrong value
    (the op's own divergence, listed for single-op runs). fusion true or unknown: the
    whole-program compile did it, and only a program entry waives it."""
    exp = write(tmp_path, "- {op: multiply, element_type: f32, class: subnormal_flush, "
                "reason: FTZ}\n")
    own = record(op="multiply", cls="subnormal_flush", fusion=False)
    fused = record(op="multiply", cls="subnormal_flush", fusion=True, rid="0:program:2")
    unknown = record(op="multiply", cls="subnormal_flush", fusion=None, rid="0:program:3")
    g = program_gate([HEAD, own, fused, unknown], exp)
    assert [i["ids"] for i in g.expected] == [["0:program:1"]]
    assert sorted(i["ids"][0] for i in g.unexpected) == ["0:program:2", "0:program:3"]
    assert not g.stale                       # single-op entries are never stale here


def test_a_rule_entry_never_waives_a_program_finding(tmp_path):
    exp = write(tmp_path, "- {op: add, rule: example-0, class: fail, reason: r}\n")
    g = program_gate([HEAD, record(fusion=False, cls="fail")], exp)
    assert g.unexpected and not g.expected


def test_stale_program_entries(tmp_path):
    exp = write(tmp_path, "expectations:\n"
                "- {op: add, program: a*b+c, element_type: f32, class: value, reason: r}\n"
                "- {op: add, program: x+0, element_type: f32, class: signed_zero, "
                "reason: r}\n")
    passing = {**record(), "outcome": "pass", "findings": [], "fusion": None}
    g = program_gate([HEAD, passing], exp)
    assert [e.index for e in g.stale] == [0]         # a*b+c f32 add was checked, passed
    assert [e.index for e in g.not_exercised] == [1]  # no program held x+0


def test_crashes_need_an_op_star_entry(tmp_path):
    crash = {"kind": "program", "id": "0:program:9", "backend": "xla", "outcome": "crash",
             "patterns": ["x-x"], "findings": [], "exercised": [["subtract", "f32"]]}
    exp = write(tmp_path, "- {op: subtract, program: x-x, class: crash, reason: r}\n")
    assert program_gate([HEAD, crash], exp).unexpected
    exp = write(tmp_path, "- {op: '*', program: x-x, class: crash, reason: r}\n", "b.yaml")
    assert program_gate([HEAD, crash], exp).passed


def test_accepted_classes_are_not_findings():
    g = program_gate([HEAD, record(cls="subnormal_flush")], None, accept=["subnormal_flush"])
    assert g.passed


@pytest.mark.parametrize("text,message", [
    ("- {op: add, program: nosuch, class: value, reason: r}\n", "not a pattern"),
    ("- {op: add, program: a*b+c, rule: C1, class: value, reason: r}\n", "cannot be combined"),
    ("- {op: add, program: [], class: value, reason: r}\n", "'program' must be"),
    ("- {op: add, program: 'zz*', class: value, reason: r}\n", "not a pattern"),
])
def test_malformed_program_entries_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(ExpectationsError, match=message):
        write(tmp_path, text)


def test_program_entries_round_trip_through_to_yaml(tmp_path):
    exp = write(tmp_path, "- {op: add, program: [a*b+c, x+0], element_type: f32, "
                "class: value, reason: r}\n")
    e = exp.entries[0]
    assert e.programs == ("a*b+c", "x+0")
    assert "program: [a*b+c, x+0]" in e.flow()


# ---------------------------------------------------------------------------------------
# The CLI: exit 1 only on unlisted findings
# ---------------------------------------------------------------------------------------

def _run(out, *extra):
    # the first 120 programs of a default run (seed 0) hold FMA findings
    return main(["programs", "--backend", "planted_programs:FusesMultiplyAdd", "--depth",
                 "default", "--count", "120", "--out", str(out), "--quiet", "--no-isolate",
                 *extra])


def test_cli_gates_programs_on_expectations(tmp_path):
    assert _run(tmp_path / "plain") == 1
    recs = [json.loads(x) for x in (tmp_path / "plain" / "results.jsonl").read_text()
            .splitlines()]
    items, _, _ = program_findings(recs)
    assert items and all(i["fusion"] for i in items)
    assert {i["op"] for i in items} == {"add"}        # localised: where it starts
    lines = ["expectations:"]
    for i in items:
        pats = ", ".join(i["patterns"]) or "'*'"
        lines.append(f"- {{op: {i['op']}, program: [{pats}], element_type: "
                     f"{i['element_type']}, class: {i['class']}, reason: a planted FMA}}")
    exp = tmp_path / "fma.yaml"
    exp.write_text("\n".join(lines) + "\n")
    assert _run(tmp_path / "gated", "--expectations", str(exp)) == 0
    summary = json.loads((tmp_path / "gated" / "summary.json").read_text())
    assert summary["programs"]["gate"]["passed"] is True
    junit = (tmp_path / "gated" / "junit.xml").read_text()
    assert "expected: a planted FMA" in junit
    # one entry less: that finding is unexpected again
    exp.write_text("\n".join(lines[:-1]) + "\n")
    assert _run(tmp_path / "less", "--expectations", str(exp)) == 1


def test_cli_rejects_a_bad_expectations_file_before_writing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {op: add, program: nosuch, class: value, reason: r}\n")
    assert _run(tmp_path / "out", "--expectations", str(bad)) == 2
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_expectations_check_gates_a_programs_results_file(tmp_path):
    assert _run(tmp_path / "r") == 1
    results = str(tmp_path / "r" / "results.jsonl")
    empty = tmp_path / "none.yaml"
    empty.write_text("expectations: []\n")
    assert main(["expectations", "check", results, str(empty)]) == 1
    star = tmp_path / "star.yaml"
    star.write_text("- {op: add, program: '*', class: value, reason: planted}\n"
                    "- {op: add, program: x-x, class: nan, reason: never}\n")
    assert main(["expectations", "check", results, str(star)]) == 0
    assert main(["expectations", "check", results, str(star), "--fail-on-stale"]) == 1


def test_program_none_names_an_op_in_no_pattern(tmp_path):
    exp = write(tmp_path, "- {op: log, program: none, element_type: f16, class: value, "
                "reason: r}\n")
    assert exp.entries[0].is_narrow()
    alone = record(op="log", key="f16", patterns=(), finding_patterns=())
    in_pattern = record(op="log", key="f16", patterns=("x+0",), finding_patterns=("x+0",),
                        rid="0:program:2")
    g = program_gate([HEAD, alone, in_pattern], exp)
    assert [i["ids"] for i in g.expected] == [["0:program:1"]]
    assert [i["ids"] for i in g.unexpected] == [["0:program:2"]]


def test_expectations_update_writes_narrow_program_entries(tmp_path):
    assert _run(tmp_path / "r") == 1
    results = str(tmp_path / "r" / "results.jsonl")
    new = tmp_path / "new.yaml"
    assert main(["expectations", "update", results, str(new)]) == 0
    exp = load_expectations(new)
    assert exp.entries and all(e.programs and e.is_narrow() for e in exp.entries)
    assert all(e.reason.startswith("TODO") for e in exp.entries)
    assert main(["expectations", "check", results, str(new), "--fail-on-stale"]) == 0
