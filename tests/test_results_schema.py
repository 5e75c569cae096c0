"""Results records are declared types with one schema and a format version in every
results file (issue 28): the writer checks every record against its kind's class and
stamps ``format`` into headers; every reader refuses a format or a record kind it does
not know, and a record without a required field, with one line naming file and line."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conformance.apps.cli import main
from conformance.core import results as R
from conformance.core.results import (ABSENT, FORMAT_VERSION, RECORD_CLASSES, RECORDS,
                                      CorpusEntry, DrawLog, RecordError, ResultsFormatError,
                                      ResultsWriter, check_record, read_declared,
                                      read_results, record_class, record_from_dict)

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------
# The schema
# ---------------------------------------------------------------------------


def test_every_kind_a_writer_writes_is_declared():
    """Every literal ``"kind": "..."`` in the package's writers names a declared kind."""
    found = {}
    for folder in ("conformance", "reports", "backends"):
        for path in (ROOT / folder).rglob("*.py"):
            for m in re.finditer(r'"kind":\s*"(\w+)"', path.read_text(encoding="utf-8")):
                found.setdefault(m.group(1), path.relative_to(ROOT))
    assert found, "no writer found"
    unknown = {k: str(p) for k, p in found.items() if k not in RECORDS}
    assert not unknown, f"record kinds written but not declared in core/results.py: {unknown}"


def test_one_class_per_form_and_the_registry_resolves_each():
    assert {c.KIND for c in RECORD_CLASSES} == set(RECORDS)
    assert record_class({"kind": "run"}) is R.RunHeader
    assert record_class({"kind": "run", "command": "programs"}) is R.ProgramsRunHeader
    assert record_class({"kind": "run", "merged_from": ["a"]}) is R.MergedRunHeader
    assert record_class({"kind": "end"}) is R.RunEnd
    assert record_class({"kind": "end", "merged": 2}) is R.MergedEnd
    assert record_class({"kind": "end", "command": "programs"}) is R.ProgramsEnd
    assert record_class({"kind": "run", "command": "check"}) is R.CheckRunHeader
    assert record_class({"kind": "end", "command": "check"}) is R.CheckEnd
    assert [c for c in RECORD_CLASSES if c.HEADER] == [R.RunHeader, R.MergedRunHeader,
                                                       R.ProgramsRunHeader, R.CheckRunHeader]


def _sample(cls, optional: bool):
    """An instance of ``cls`` with every required field (and, ``optional``, every
    optional one) set to a value of its own."""
    values = {}
    for key, f in cls.keys().items():
        required = f.default is dataclasses.MISSING
        if required or optional:
            command = "check" if cls.__name__.startswith("Check") else "programs"
            values[f.name] = {"format": FORMAT_VERSION, "command": command}.get(
                key, f"v-{key}")
    return cls(**values)


@pytest.mark.parametrize("cls", RECORD_CLASSES + (CorpusEntry, DrawLog),
                         ids=lambda c: c.__name__)
@pytest.mark.parametrize("optional", [False, True], ids=["required", "all"])
def test_round_trip_of_every_class(cls, optional):
    rec = _sample(cls, optional)
    d = rec.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert ABSENT not in d.values()
    if issubclass(cls, R.Record):
        assert d["kind"] == cls.KIND and list(d)[0] == "kind"
        assert record_from_dict(d) == rec and type(record_from_dict(d)) is cls
    assert cls.from_dict(d) == rec and cls.from_dict(d).to_dict() == d
    if "cls" in {f.name for f in dataclasses.fields(cls)}:
        assert "class" in d and "cls" not in d          # the JSON key is "class"


def test_optional_fields_left_out_are_not_written():
    d = R.UnitDone(op="add").to_dict()
    assert d == {"kind": "unit_done", "op": "add"}
    assert R.UnitDone(op="add", part=[0, 2]).to_dict() == {"kind": "unit_done", "op": "add",
                                                           "part": [0, 2]}
    # None is a value (written), ABSENT is not
    assert R.Replay(case_id=None, backend="b", cls="pass").to_dict() == {
        "kind": "replay", "case_id": None, "backend": "b", "class": "pass"}


# ---------------------------------------------------------------------------
# The writer
# ---------------------------------------------------------------------------

def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


@pytest.mark.parametrize("record, words", [
    ({"kind": "signature", "op": "add", "type_key": "f32", "backend": "b", "outcome": "pass",
      "colour": "red"}, ["'signature'", "'colour'"]),
    ({"kind": "signature", "op": "add", "type_key": "f32", "backend": "b"},
     ["'signature'", "'outcome'"]),
    ({"kind": "verdict", "op": "add"}, ["'verdict'"]),
    ({"op": "add"}, ["'kind'"]),
    ({"kind": "run", "command": "programs", "seed": 0, "count": 3, "colour": 1},
     ["'run'", "'colour'"]),
])
def test_the_writer_refuses_a_record_its_schema_does_not_declare(tmp_path, record, words):
    with ResultsWriter(tmp_path / "r.jsonl") as w:
        with pytest.raises(ValueError) as e:
            w.write(record)
    assert all(word in str(e.value) for word in words), str(e.value)
    assert _lines(tmp_path / "r.jsonl") == []


def test_the_writer_stamps_the_format_into_headers_only(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        w.write({"kind": "run", "seed": 0, "depth": "quick"})
        w.write({"kind": "unit_done", "op": "add"})
        w.write({"kind": "end", "elapsed": 1.0, "ops": ["add"]})
        w.write({"kind": "run", "command": "programs", "seed": 1})
        w.write(R.RunHeader(seed=2, depth="quick"))
        w.write({"kind": "run", "format": 1, "seed": 3})
    assert _lines(path) == [
        '{"kind":"run","format":1,"seed":0,"depth":"quick"}',
        '{"kind":"unit_done","op":"add"}',
        '{"kind":"end","elapsed":1.0,"ops":["add"]}',
        '{"kind":"run","format":1,"command":"programs","seed":1}',
        '{"kind":"run","format":1,"seed":2,"depth":"quick"}',
        '{"kind":"run","format":1,"seed":3}']


def test_a_record_object_writes_what_its_dict_writes(tmp_path):
    d = {"kind": "replay", "case_id": "0:quick:add:f32:0:0:1", "op": "add", "type_key": "f32",
         "backend": "numpy", "class": "pass", "class_before": "value", "found_on": "x",
         "same_backend": False, "repro": "repros/x/add/f32-value-1", "message": None}
    with ResultsWriter(tmp_path / "a.jsonl") as w:
        w.write(d)
    with ResultsWriter(tmp_path / "b.jsonl") as w:
        w.write(record_from_dict(d))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_fuzz_draw_checks_the_runners_records_as_a_results_file_would():
    from conformance.apps.fuzz import _Sink
    sink = _Sink(SimpleNamespace(signal_name=None, corpus={}), 0, 0, Path("."),
                 stoppable=False)
    with pytest.raises(ValueError, match="'signature'.*'colour'"):
        sink.write({"kind": "signature", "op": "add", "type_key": "f32", "backend": "b",
                    "outcome": "pass", "colour": 1})


# ---------------------------------------------------------------------------
# read_results
# ---------------------------------------------------------------------------

HEAD = {"kind": "run", "seed": 0, "depth": "quick", "backends": [{"name": "numpy"}],
        "locators": ["numpy"], "ops": None, "families": None, "element_types": None,
        "invalid": True, "examples": True, "max_repros": 2, "tolerances": None,
        "shard": None, "started": 0.0}
SIG = {"kind": "signature", "op": "abs", "family": "arithmetic", "type_key": "f32",
       "signature": "abs(tensor<f32>) -> (tensor<f32>)", "index": 0, "backend": "numpy",
       "outcome": "pass", "reason": None, "cases": 4, "counts": {"pass": 4}}
DONE = {"kind": "unit_done", "op": "abs"}
END = {"kind": "end", "elapsed": 1.0, "ops": ["abs"]}
FORMAT_99 = "results format 99 is not known to this version of the suite (it reads format 1)"

#: name -> (records, the line at fault, the message after "FILE:LINE: ")
BAD = {
    "format": ([{**HEAD, "format": 99}, SIG, DONE, END], 1, FORMAT_99),
    "kind": ([HEAD, SIG, {"kind": "x", "op": "abs"}, DONE, END], 3, "unknown record kind 'x'"),
    "field": ([HEAD, {k: v for k, v in SIG.items() if k != "outcome"}, DONE, END], 2,
              "a 'signature' record without 'outcome'"),
}


def _write(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("bad", BAD)
def test_read_results_refuses_with_file_and_line(tmp_path, bad):
    records, line, message = BAD[bad]
    path = _write(tmp_path / "results.jsonl", records)
    with pytest.raises(ResultsFormatError) as e:
        list(read_results(path))
    assert str(e.value) == f"{path}:{line}: {message}"


def test_read_results_reads_a_header_without_format_as_format_1(tmp_path):
    path = _write(tmp_path / "r.jsonl", [HEAD, SIG, DONE, END])
    path.write_text(path.read_text() + '{"kind": "signature", "op": "ab')      # torn
    assert list(read_results(path)) == [HEAD, SIG, DONE, END]
    for fmt in (1,):
        _write(tmp_path / "f.jsonl", [{**HEAD, "format": fmt}, END])
        assert len(list(read_results(tmp_path / "f.jsonl"))) == 2
    for fmt in (0, 2, "1", True, None, [1]):
        _write(tmp_path / "f.jsonl", [{**HEAD, "format": fmt}, END])
        with pytest.raises(ResultsFormatError, match=r"f\.jsonl:1: results format .* is not "
                                                     r"known"):
            list(read_results(tmp_path / "f.jsonl"))


def test_undeclared_fields_are_read_and_refused_only_where_records_are_written_again(tmp_path):
    path = _write(tmp_path / "r.jsonl", [HEAD, {**SIG, "colour": 1}, DONE, END])
    assert list(read_results(path))[1]["colour"] == 1
    with pytest.raises(ResultsFormatError) as e:
        list(read_results(path, strict=True))
    assert str(e.value) == (f"{path}:2: a 'signature' record with a field its kind does "
                            f"not declare: 'colour'")


@pytest.mark.parametrize("text, message", [
    ("[1, 2]\n{}\n", "1: not a results record"),
    ('{"kind": "run"}\nnot json\n{"kind": "end"}\n', "2: not a JSON record"),
    ('{"kind": "run"}\n{"op": "add"}\n', "2: a record without 'kind'"),
    ('{"kind": "run"}\n{"kind": 5}\n', "2: unknown record kind 5"),
])
def test_other_lines_that_are_not_records(tmp_path, text, message):
    path = tmp_path / "r.jsonl"
    path.write_text(text)
    with pytest.raises(ResultsFormatError) as e:
        list(read_results(path))
    assert str(e.value).startswith(f"{path}:{message}"), str(e.value)


# ---------------------------------------------------------------------------
# Every reader route: one line naming file and line, exit 2
# ---------------------------------------------------------------------------

def _one_line_error(capsys, code: int, where: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert where in lines[0], (where, err)
    return lines[0]


def _expect(capsys, code, path, bad):
    _, line, message = BAD[bad]
    shown = _one_line_error(capsys, code, f"{path}:{line}: {message}")
    return shown


@pytest.mark.parametrize("bad", BAD)
def test_report_refuses(tmp_path, capsys, bad):
    path = _write(tmp_path / "run" / "results.jsonl", BAD[bad][0])
    _expect(capsys, main(["report", str(path)]), path, bad)
    assert not (tmp_path / "run" / "index.html").exists()


@pytest.mark.parametrize("bad", BAD)
def test_python_m_reports_refuses(tmp_path, bad):
    path = _write(tmp_path / "run" / "results.jsonl", BAD[bad][0])
    p = subprocess.run([sys.executable, "-m", "conformance.reports", str(path)], cwd=ROOT,
                       capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert f"{path}:{BAD[bad][1]}: {BAD[bad][2]}" in lines[0]


@pytest.mark.parametrize("bad", BAD)
def test_merge_refuses_and_copies_nothing(tmp_path, capsys, bad):
    good = _write(tmp_path / "a" / "results.jsonl", [HEAD, SIG, DONE, END])
    path = _write(tmp_path / "b" / "results.jsonl", BAD[bad][0])
    out = tmp_path / "merged"
    _expect(capsys, main(["merge", str(out), str(good), str(path)]), path, bad)
    assert not (out / "results.jsonl").exists()


def test_merge_refuses_an_undeclared_field_it_would_copy(tmp_path, capsys):
    good = _write(tmp_path / "a" / "results.jsonl", [HEAD, SIG, DONE, END])
    path = _write(tmp_path / "b" / "results.jsonl", [HEAD, {**SIG, "colour": 1}, DONE, END])
    out = tmp_path / "merged"
    _one_line_error(capsys, main(["merge", str(out), str(good), str(path)]),
                    f"{path}:2: a 'signature' record with a field its kind does not declare: "
                    f"'colour'")
    assert not (out / "results.jsonl").exists()


def test_merge_records_does_not_copy_an_unknown_kind():
    from conformance.apps.merge import MergeError, merge_records
    with pytest.raises(MergeError, match="b: record 3: unknown record kind 'x'"):
        merge_records([("a", [HEAD, SIG, DONE, END]),
                       ("b", [HEAD, SIG, {"kind": "x", "op": "abs"}, DONE, END])])
    with pytest.raises(MergeError, match=re.escape(f"b: {FORMAT_99}")):
        merge_records([("a", [HEAD, DONE]), ("b", [{**HEAD, "format": 99}, DONE])])


def test_merge_of_files_without_format_writes_format_1(tmp_path, capsys):
    a = _write(tmp_path / "a" / "results.jsonl", [HEAD, SIG, DONE, END])
    b = _write(tmp_path / "b" / "results.jsonl", [HEAD, SIG, DONE, END])
    assert main(["merge", str(tmp_path / "m"), str(a), str(b)]) == 0, capsys.readouterr()
    merged = list(read_results(tmp_path / "m" / "results.jsonl", strict=True))
    assert merged[0]["format"] == FORMAT_VERSION and list(merged[0])[:2] == ["kind", "format"]
    assert [r["kind"] for r in merged] == ["run", "signature", "unit_done", "end"]


@pytest.mark.parametrize("command", ["check", "update", "update --also"])
@pytest.mark.parametrize("bad", BAD)
def test_expectations_refuse(tmp_path, capsys, bad, command):
    path = _write(tmp_path / "run" / "results.jsonl", BAD[bad][0])
    good = _write(tmp_path / "good" / "results.jsonl", [HEAD, SIG, DONE, END])
    target = tmp_path / "mine.yaml"
    if command == "check":
        argv = ["expectations", "check", str(path), "jax-cpu"]
    elif command == "update":
        argv = ["expectations", "update", str(path), str(target)]
    else:
        argv = ["expectations", "update", str(good), str(target), "--also", str(path)]
    _expect(capsys, main(argv), path, bad)
    assert not target.exists()


@pytest.mark.parametrize("bad", BAD)
def test_run_resume_refuses(tmp_path, capsys, bad):
    out = tmp_path / "run"
    path = _write(out / "results.jsonl", BAD[bad][0])
    before = path.read_bytes()
    code = main(["run", "--ops", "abs", "--types", "f32", "--depth", "quick", "--seed", "0",
                 "--backend", "numpy", "--no-progress", "--out", str(out), "--resume"])
    _expect(capsys, code, path, bad)
    assert path.read_bytes() == before
    # without --resume: another run's results, not overwritten without --force
    code = main(["run", "--ops", "abs", "--types", "f32", "--depth", "quick", "--seed", "0",
                 "--backend", "numpy", "--no-progress", "--out", str(out)])
    assert "--force" in _expect(capsys, code, path, bad)
    assert path.read_bytes() == before


PROGRAMS_HEAD = {"kind": "run", "command": "programs", "seed": 0, "depth": "quick"}
PROGRAM = {"kind": "program", "id": "0:program:0", "backend": "numpy", "seed": 0,
           "index": 0, "outcome": "pass"}
PROGRAMS_BAD = {
    "format": ([{**PROGRAMS_HEAD, "format": 99}, PROGRAM], 1, FORMAT_99),
    "kind": ([PROGRAMS_HEAD, PROGRAM, {"kind": "x"}], 3, "unknown record kind 'x'"),
    "field": ([PROGRAMS_HEAD, {k: v for k, v in PROGRAM.items() if k != "outcome"}], 2,
              "a 'program' record without 'outcome'"),
}


@pytest.mark.parametrize("bad", PROGRAMS_BAD)
def test_programs_resume_refuses(tmp_path, capsys, bad):
    records, line, message = PROGRAMS_BAD[bad]
    out = tmp_path / "programs"
    path = _write(out / "results.jsonl", records)
    before = path.read_bytes()
    code = main(["programs", "--count", "2", "--depth", "quick", "--backend", "numpy",
                 "--out", str(out), "--resume", "--quiet"])
    _one_line_error(capsys, code, f"{path}:{line}: {message}")
    assert path.read_bytes() == before
    # its expectations check reads it as any results file
    code = main(["expectations", "check", str(path), "jax-cpu"])
    _one_line_error(capsys, code, f"{path}:{line}: {message}")


FUZZ = ["fuzz", "--backend", "numpy", "--ops", "abs", "--types", "f32", "--depth", "quick",
        "--draws", "1"]
ENTRY = {"key": "numpy|abs|f32|value|r0->r0", "backend": "numpy", "op": "abs", "where": "f32",
         "class": "value", "shape": "r0->r0", "case_id": None, "signature": None,
         "repro": None, "draw": 0, "seed": 0, "found": 0.0, "message": None}


def test_fuzz_resume_refuses_a_campaign_of_another_format(tmp_path, capsys):
    out = tmp_path / "camp"
    out.mkdir()
    state = out / "campaign.json"
    state.write_text(json.dumps({"format": 99, "next_draw": 3}, indent=1))
    _one_line_error(capsys, main([*FUZZ, "--out", str(out)]), f"{state}:2: {FORMAT_99}")
    assert json.loads(state.read_text()) == {"format": 99, "next_draw": 3}


def test_fuzz_resume_refuses_a_corpus_entry_without_a_required_field(tmp_path, capsys):
    out = tmp_path / "camp"
    index = _write(out / "corpus" / "index.jsonl",
                   [ENTRY, {k: v for k, v in ENTRY.items() if k != "key"}])
    _one_line_error(capsys, main([*FUZZ, "--out", str(out)]),
                    f"{index}:2: a corpus entry without 'key'")
    with pytest.raises(ResultsFormatError, match=re.escape(f"{index}:2: a corpus entry "
                                                           f"without 'key'")):
        list(read_declared(index, CorpusEntry))


# ---------------------------------------------------------------------------
# Real runs: every record they write fits the schema
# ---------------------------------------------------------------------------

def _validate_all(path: Path) -> list[dict]:
    records = list(read_results(path, strict=True))
    for r in records:
        obj = record_from_dict(r)
        assert obj.to_dict() == r, r
    assert records[0]["kind"] == "run" and records[0]["format"] == FORMAT_VERSION
    assert list(records[0])[:2] == ["kind", "format"]
    assert sum(1 for r in records if "format" in r) == 1
    return records


def test_a_quick_run_writes_records_of_the_schema(tmp_path, capsys):
    pytest.importorskip("jax")
    out = tmp_path / "run"
    code = main(["run", "--ops", "add,reduce", "--depth", "quick", "--backend", "jax,numpy",
                 "--no-progress", "--out", str(out)])
    assert code in (0, 1), capsys.readouterr()
    records = _validate_all(out / "results.jsonl")
    kinds = {r["kind"] for r in records}
    assert {"run", "validity", "signature", "cross", "invalid", "example", "unit_done",
            "end"} <= kinds, kinds
    # rendered again from the file: the report reads it
    assert main(["report", str(out / "results.jsonl")]) == 0
    # resumed (every op done): the kept records are written again, as they were
    before = _lines(out / "results.jsonl")
    code = main(["run", "--ops", "add,reduce", "--depth", "quick", "--backend", "jax,numpy",
                 "--no-progress", "--out", str(out), "--resume"])
    assert code in (0, 1), capsys.readouterr()
    after = _lines(out / "results.jsonl")
    assert after[:-1] == before[:-1]           # (the end record's time differs)
    _validate_all(out / "results.jsonl")


def test_a_fuzz_campaign_writes_lines_of_the_schema(tmp_path, capsys):
    out = tmp_path / "camp"
    code = main(["fuzz", "--backend", "planted:PlantedAddF32", "--ops", "add",
                 "--types", "f32", "--depth", "quick", "--draws", "2", "--out", str(out)])
    assert code == 1, capsys.readouterr()                 # the planted divergence: new
    state = json.loads((out / "campaign.json").read_text())
    assert state["format"] == FORMAT_VERSION and list(state)[0] == "format"
    index = list(read_declared(out / "corpus" / "index.jsonl", CorpusEntry))
    assert index and all(CorpusEntry.from_dict(e).to_dict() == e for e in index)
    log = list(read_declared(out / "log.jsonl", DrawLog))
    assert len(log) == 2 and all(DrawLog.from_dict(x).to_dict() == x for x in log)
    # a restart reads them back
    code = main(["fuzz", "--backend", "planted:PlantedAddF32", "--ops", "add",
                 "--types", "f32", "--depth", "quick", "--draws", "3", "--out", str(out)])
    assert code == 1, capsys.readouterr()          # (the corpus's divergence: issue 31)


def test_a_programs_run_writes_records_of_the_schema(tmp_path, capsys):
    pytest.importorskip("jax")
    out = tmp_path / "programs"
    code = main(["programs", "--count", "3", "--seed", "1", "--backend", "jax", "--out",
                 str(out), "--no-minimize", "--quiet"])
    assert code in (0, 1), capsys.readouterr()
    records = _validate_all(out / "results.jsonl")
    assert [type(record_from_dict(r)).__name__ for r in records] == [
        "ProgramsRunHeader", "Program", "Program", "Program", "ProgramsEnd"]
    # and --resume keeps them (read strictly, written again)
    code = main(["programs", "--count", "3", "--seed", "1", "--backend", "jax", "--out",
                 str(out), "--no-minimize", "--quiet", "--resume"])
    assert code in (0, 1), capsys.readouterr()
    again = _validate_all(out / "results.jsonl")
    assert again[0]["resumed"] == 3
    assert [r["id"] for r in again[1:-1]] == [r["id"] for r in records[1:-1]]


def test_a_replay_record_fits_its_class(tmp_path):
    """Replay records (conformance.apps.replay) are built as :class:`Replay` objects."""
    from conformance.apps.replay import replay_saved
    written = []
    sink = SimpleNamespace(write=lambda r: written.append(check_record(r) and r))
    recs = replay_saved([("repros/x/abs/f32-value-1", {"signature": {"op": "abs"},
                                                       "inputs": [], "class": "value",
                                                       "backend": "x"})],
                        [SimpleNamespace(name="numpy", locator="numpy")], sink,
                        SimpleNamespace(tolerances=None))
    assert recs == written and len(recs) == 1
    assert recs[0]["class"] == "unreadable" and recs[0]["class_before"] == "value"
    assert type(record_from_dict(recs[0])) is R.Replay


def test_record_error_is_a_value_error():
    assert issubclass(RecordError, ValueError) and issubclass(ResultsFormatError, ValueError)
