"""Hardening, second round (issue 31, items 2, 4, 6 and 7): what a CI job and a new user
hit.

2. a resumed fuzz campaign is judged on its whole corpus (against ``--expectations``,
   as ``run`` is on its results file), not on what the last session found;
4. ``programs --out`` refuses a folder of another run (a ``run``'s, another programs
   run's, a merge's) without ``--force``, as run, merge and report do; ``--count`` and
   the program sizes are bounded; ``fuzz --out`` refuses a run's folder (and run,
   programs, merge and report a campaign's);
6. with stderr not a terminal (a CI log), run, fuzz and programs print a line now and
   then (what, how far, elapsed);
7. one-liners that name the fault: a negative-looking value of an option or argument
   is a value, a programs results file is named as such by merge and ``run --out``.

Every refusal: one line naming the option or file, exit 2, nothing already written lost.
"""
import contextlib
import hashlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from conformance.apps import cli

PLANTED = "planted:PlantedAddF32"


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(folder.rglob("*"))}


def one_line_usage_error(code: int, out: str, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, f"exit {code}\nstdout={out!r}\nstderr={err!r}"
    assert "Traceback" not in out + err
    return lines[0]


RUN = ["run", "--backend", "numpy", "--ops", "abs", "--types", "f32", "--depth", "quick",
       "--no-progress", "--no-replay", "--no-invalid"]
PROGRAMS = ["programs", "--backend", "numpy", "--ops", "abs", "--types", "f32", "--count", "1",
            "--batch", "1", "--max-ops", "2", "--no-minimize", "--quiet"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A run's folder, a programs run's folder and a merge output (each left as made)."""
    base = tmp_path_factory.mktemp("hardening")
    run, prog, merged = base / "run", base / "prog", base / "merged"
    code, out, err = call([*RUN, "--out", str(run)])
    assert code == 0, out + err
    code, out, err = call([*PROGRAMS, "--out", str(prog), "--seed", "0"])
    assert code == 0, out + err
    code, out, err = call(["merge", str(merged), str(run / "results.jsonl")])
    assert code == 0, out + err
    return base


def copy_of(folders: Path, name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(folders / name, dest)
    return dest


# ---------------------------------------------------------------------------
# 2. A resumed fuzz campaign is judged on its whole corpus
# ---------------------------------------------------------------------------

FUZZ = ["fuzz", "--backend", PLANTED, "--ops", "add", "--types", "f32", "--depth", "quick",
        "--seed", "5"]


def test_a_resumed_campaign_fails_on_the_divergences_its_corpus_holds(tmp_path):
    out = tmp_path / "camp"
    code, text, err = call([*FUZZ, "--draws", "2", "--out", str(out)])
    assert code == 1, text + err                  # the planted f32 add: found
    corpus = [json.loads(x) for x in (out / "corpus" / "index.jsonl").read_text().splitlines()]
    assert corpus and all(e["class"] == "value" for e in corpus)
    # The same command after a crash (it resumes): nothing new, still the same verdict.
    code, text, err = call([*FUZZ, "--draws", "3", "--out", str(out)])
    assert "0 new" in text and "resuming" in text, text
    assert code == 1, text + err
    assert "UNEXPECTED  planted: add f32 value" in text, text
    # Listed as expected: green; listing something else: still red.
    known = tmp_path / "known.yaml"
    known.write_text("expectations:\n- {op: add, element_type: f32, class: value, "
                     "reason: planted}\n")
    code, text, err = call([*FUZZ, "--draws", "4", "--out", str(out),
                            "--expectations", str(known)])
    assert code == 0, text + err
    assert "gate (the whole corpus): 0 unexpected, 1 expected" in text, text
    other = tmp_path / "other.yaml"
    other.write_text("expectations:\n- {op: add, element_type: f64, class: value, "
                     "reason: not this one}\n")
    code, text, err = call([*FUZZ, "--draws", "5", "--out", str(out),
                            "--expectations", str(other)])
    assert code == 1 and "UNEXPECTED  planted: add f32 value" in text, text + err


def test_a_campaign_with_an_empty_corpus_passes(tmp_path):
    code, text, err = call(["fuzz", "--backend", "numpy", "--ops", "abs", "--types", "f32",
                            "--depth", "quick", "--draws", "1", "--out", str(tmp_path / "c")])
    assert code == 0, text + err
    assert "gate (the whole corpus): 0 unexpected" in text, text


def test_a_campaign_whose_draws_hit_suite_errors_exits_3(tmp_path, monkeypatch):
    """As `run`: internal errors of the suite and no divergence is exit 3, never 0; a
    divergence still decides (1); a resumed campaign remembers its failed draws."""
    from conformance.apps import runner

    def broken(spec, binding, config):
        raise ValueError("a generator bug")
    monkeypatch.setattr(runner, "plan_binding", broken)
    out = tmp_path / "camp"
    args = ["fuzz", "--backend", "numpy", "--ops", "abs", "--types", "f32", "--depth",
            "quick", "--no-invalid", "--out", str(out)]
    code, text, err = call([*args, "--draws", "1"])
    assert code == 3, text + err
    assert "FAILED draw 0 (abs): internal error generating signatures: ValueError: a " \
           "generator bug" in text, text
    assert "internal errors of the suite: 1 draw(s)" in err, err
    (log,) = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert log["failed"].startswith("internal error generating signatures")
    code, text, err = call([*args, "--draws", "2"])      # resumed: still failed
    assert code == 3, text + err
    assert "draw(s) of earlier sessions failed" in text, text
    # A divergence decides over a suite error, as for run.
    monkeypatch.undo()
    code, text, err = call(["fuzz", "--backend", PLANTED, "--ops", "add", "--types", "f32",
                            "--depth", "quick", "--draws", "1", "--no-invalid", "--out",
                            str(out)])
    assert code == 1, text + err


def test_fuzz_expectations_are_checked_before_anything_is_written(tmp_path):
    out = tmp_path / "camp"
    bad = tmp_path / "bad.yaml"
    bad.write_text("expectations:\n- {op: add}\n")
    line = one_line_usage_error(*call([*FUZZ, "--draws", "1", "--out", str(out),
                                       "--expectations", str(bad)]))
    assert "--expectations" in line
    assert not out.exists()


# ---------------------------------------------------------------------------
# 4. Output folders of another kind are not overwritten; bounds
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, what", [("run", "`conformance run`"),
                                        ("merged", "`conformance merge`")])
def test_programs_refuses_the_folder_of_a_run_or_a_merge(folders, tmp_path, name, what):
    target = copy_of(folders, name, tmp_path)
    before = digest(target)
    line = one_line_usage_error(*call([*PROGRAMS, "--out", str(target)]))
    assert f"--out {target}" in line and what in line and "--force" in line, line
    assert digest(target) == before


def test_programs_refuses_another_programs_run_without_force(folders, tmp_path):
    target = copy_of(folders, "prog", tmp_path)
    before = digest(target)
    line = one_line_usage_error(*call([*PROGRAMS, "--out", str(target), "--seed", "1"]))
    assert f"--out {target}" in line and "seed" in line and "--force" in line, line
    assert digest(target) == before
    # the same options again may replace their own results
    code, out, err = call([*PROGRAMS, "--out", str(target), "--seed", "0"])
    assert code == 0, out + err
    # --force replaces another run's
    code, out, err = call([*PROGRAMS, "--out", str(target), "--seed", "1", "--force"])
    assert code == 0, out + err
    assert '"seed":1' in (target / "results.jsonl").read_text()


def test_programs_force_and_resume_exclude_each_other(tmp_path):
    line = one_line_usage_error(*call([*PROGRAMS, "--out", str(tmp_path / "p"), "--force",
                                       "--resume"]))
    assert "--force" in line or "--resume" in line


@pytest.mark.parametrize("option, value", [("--count", str(10 ** 12)),
                                           ("--max-ops", str(10 ** 6)),
                                           ("--batch", str(10 ** 9)),
                                           ("--start", str(10 ** 30)),
                                           ("--start", str(2 ** 53))])
def test_programs_sizes_are_bounded(tmp_path, option, value):
    out = tmp_path / "p"
    line = one_line_usage_error(*call([*PROGRAMS, "--out", str(out), option, value]))
    assert option in line and value in line, line
    assert not out.exists()


def test_fuzz_refuses_a_runs_folder(folders, tmp_path):
    for name in ("run", "prog", "merged"):
        target = copy_of(folders, name, tmp_path)
        before = digest(target)
        line = one_line_usage_error(*call([*FUZZ, "--draws", "1", "--out", str(target)]))
        assert f"--out {target}" in line and "not a fuzz campaign" in line, line
        assert digest(target) == before


def test_a_campaign_folder_is_not_a_runs_output(tmp_path, folders):
    camp = tmp_path / "camp"
    code, out, err = call(["fuzz", "--backend", "numpy", "--ops", "abs", "--types", "f32",
                           "--depth", "quick", "--draws", "1", "--out", str(camp)])
    assert code == 0, out + err
    before = digest(camp)
    for argv in ([*RUN, "--out", str(camp)], [*RUN, "--out", str(camp), "--force"],
                 [*PROGRAMS, "--out", str(camp)],
                 ["merge", str(camp), str(folders / "run" / "results.jsonl")],
                 ["report", str(folders / "run" / "results.jsonl"), "--out", str(camp)]):
        line = one_line_usage_error(*call(argv))
        assert "fuzz campaign" in line and str(camp) in line, line
        assert digest(camp) == before


# ---------------------------------------------------------------------------
# 6. Progress lines where stderr is not a terminal
# ---------------------------------------------------------------------------

@pytest.fixture
def often(monkeypatch):
    monkeypatch.setenv("CONFORMANCE_PROGRESS_EVERY", "0.05")


def test_run_prints_progress_lines_into_a_log(often, tmp_path):
    code, out, err = call(["run", "--backend", "numpy", "--ops", "abs,negate,add",
                           "--depth", "quick", "--no-replay", "--out", str(tmp_path / "r")])
    assert code == 0, out + err
    lines = [x for x in err.splitlines() if x.startswith("conformance run: ")]
    assert lines, err
    assert all(re.fullmatch(r"conformance run: elapsed \d+\.\ds, [0-3]/3 ops done, \d+ "
                            r"cases(; now: .+)?", x) for x in lines), lines
    # --no-progress: none
    code, out, err = call(["run", "--backend", "numpy", "--ops", "abs", "--depth", "quick",
                           "--no-replay", "--no-progress", "--out", str(tmp_path / "q")])
    assert code == 0 and "conformance run: " not in err, err


def test_fuzz_and_programs_print_progress_lines_into_a_log(often, tmp_path, monkeypatch):
    import time
    from conformance.apps import programs
    check_one = programs.check_one

    def slow(*args, **kwargs):           # (numpy finds every program unsupported at once)
        time.sleep(0.2)
        return check_one(*args, **kwargs)
    monkeypatch.setattr(programs, "check_one", slow)
    code, out, err = call([*FUZZ, "--draws", "3", "--out", str(tmp_path / "f")])
    assert code == 1, out + err
    lines = [x for x in err.splitlines() if x.startswith("conformance fuzz: ")]
    assert lines and all("draws" in x and "cases" in x and "elapsed" in x for x in lines), err
    code, out, err = call(["programs", "--backend", "numpy", "--ops", "abs", "--types", "f32",
                           "--count", "3", "--no-minimize", "--out", str(tmp_path / "p")])
    assert code == 0, out + err
    lines = [x for x in err.splitlines() if x.startswith("conformance programs: ")]
    assert lines and all("programs checked" in x and "elapsed" in x for x in lines), err


def test_the_status_line_counts_what_the_results_file_holds(tmp_path):
    from conformance.apps.heartbeat import ResultsTally
    path = tmp_path / "results.jsonl"
    tally = ResultsTally(path, ops=4)
    assert tally.line() == "0/4 ops done, 0 cases"
    recs = [{"kind": "run"}, {"kind": "signature", "op": "abs", "cases": 8},
            {"kind": "signature", "op": "abs", "cases": 4}, {"kind": "unit_done", "op": "abs"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"kind": "sig')
    assert tally.line() == "1/4 ops done, 12 cases"
    with open(path, "a") as f:                     # the torn line, completed
        f.write('nature", "op": "add", "cases": 3}\n')
    assert tally.line() == "1/4 ops done, 15 cases"
    tally.now = "add f32"
    assert tally.line() == "1/4 ops done, 15 cases; now: add f32"


# ---------------------------------------------------------------------------
# 7. One-liners that name the fault
# ---------------------------------------------------------------------------

def test_a_negative_case_id_is_read_as_the_case_id():
    line = one_line_usage_error(*call(["repro", "-1:default:add:f32:0:0:0"]))
    assert "required" not in line and "-1:default:add:f32:0:0:0" in line, line
    assert "negative" in line


def test_a_negative_duration_is_read_as_the_duration(tmp_path):
    line = one_line_usage_error(*call(["fuzz", "--for", "-5m", "--out", str(tmp_path / "c")]))
    assert "--for" in line and "'-5m'" in line and "expected one argument" not in line, line
    line = one_line_usage_error(*call(["run", "--seed", "-3", "--out", str(tmp_path / "r")]))
    assert "--seed" in line and "'-3'" in line


def test_merge_names_a_programs_results_file(folders, tmp_path):
    run = folders / "run" / "results.jsonl"
    prog = folders / "prog" / "results.jsonl"
    for i, inputs in enumerate([(run, prog), (prog, run), (prog, prog)]):
        out = tmp_path / f"m{i}"
        if inputs == (prog, prog):
            other = tmp_path / "prog2"
            shutil.copytree(folders / "prog", other)
            inputs = (prog, other / "results.jsonl")
        line = one_line_usage_error(*call(["merge", str(out), *map(str, inputs)]))
        assert f"{prog}" in line and "`conformance programs`" in line, line
        assert "null" not in line
        assert not (out / "results.jsonl").exists()


def test_run_out_names_a_programs_folder(folders, tmp_path):
    target = copy_of(folders, "prog", tmp_path)
    before = digest(target)
    for extra in ([], ["--resume"]):
        line = one_line_usage_error(*call([*RUN, "--out", str(target), *extra]))
        assert "`conformance programs`" in line and "null" not in line, line
        assert "depth" not in line
        assert digest(target) == before
