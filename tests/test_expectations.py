"""Expectations: matching, stale entries, update keeping reasons, one-line errors."""
from pathlib import Path

import pytest

from conformance.expectations import (ExpectationsError, dump, gate, load_expectations,
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
    from conformance.expectations import Expectation
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
    exp = load_expectations(ROOT / "expectations" / "jax-cpu.yaml")
    assert exp.backend == "jax" and len(exp.entries) > 10
    assert all(not e.reason.startswith("TODO") for e in exp.entries)
