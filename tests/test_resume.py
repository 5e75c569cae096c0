"""Resuming: a run killed mid-way is continued with ``conformance run --resume`` and
ends with the records and report of a run that was never interrupted."""
import json
import os
import subprocess
import sys
from pathlib import Path

from planted import PlantedAddF32

from conformance.core.results import read_results

ROOT = Path(__file__).resolve().parents[1]
TIMING = {"started", "elapsed"}
BACKEND = "test_resume:DiesOnCue"
RUN = ["run", "--ops", "add,not,compare", "--types", "f32,si8", "--depth", "quick",
       "--backend", BACKEND, "--no-progress"]


class DiesOnCue(PlantedAddF32):
    """PlantedAddF32 (so that the run has divergences and reproducers), which kills its
    own process, as ``kill -9`` would, at the Nth compile of the op named in
    $DIE_ON_OP."""

    isolate = False     # the run's own process dies (a vendor class would be isolated)

    name = "cue"
    compiles = 0

    def compile(self, sig):
        if sig.op == os.environ.get("DIE_ON_OP"):
            DiesOnCue.compiles += 1
            if DiesOnCue.compiles >= int(os.environ.get("DIE_AT", "1")):
                os._exit(137)
        return super().compile(sig)


def cli(*args, **env):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests"), **env}
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env)


def _strip(rec):
    rec = {k: v for k, v in rec.items() if k not in TIMING}
    if rec.get("kind") == "run":
        rec.pop("out")
    return rec


def _summary(out: Path):
    s = json.loads((out / "summary.json").read_text())
    for k in TIMING | {"out"}:
        s["run"].pop(k, None)
    return s


def test_killed_run_resumes_to_the_same_results_and_report(tmp_path):
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    p = cli(*RUN, "--out", str(ref))
    assert p.returncode == 1, p.stderr          # add f32 diverges (planted)
    expected = [_strip(r) for r in read_results(ref / "results.jsonl")]

    # Killed in the middle of the second op: add is done, `not` is partial.
    p = cli(*RUN, "--out", str(cut), DIE_ON_OP="not", DIE_AT="3")
    assert p.returncode == 137, p.stderr
    partial = list(read_results(cut / "results.jsonl"))
    assert [r["op"] for r in partial if r["kind"] == "unit_done"] == ["add"]
    assert any(r.get("op") == "not" for r in partial)            # a partial unit
    assert partial[-1]["kind"] != "end"
    with open(cut / "results.jsonl", "a") as f:                   # and a torn last line
        f.write('{"kind": "signature", "op": "no')

    p = cli(*RUN, "--out", str(cut), "--resume")
    assert p.returncode == 1, p.stderr
    assert "resuming" in p.stderr and "1 op(s) done" in p.stderr
    got = [_strip(r) for r in read_results(cut / "results.jsonl")]
    assert got == expected
    assert not any(r["kind"] == "replay" for r in got)       # resume does not replay
    assert _summary(cut) == _summary(ref)
    assert sorted(p.relative_to(cut) for p in (cut / "repros").rglob("*")) == \
        sorted(p.relative_to(ref) for p in (ref / "repros").rglob("*"))


def test_resume_refuses_other_options_and_keeps_the_file(tmp_path):
    p = cli(*RUN, "--out", str(tmp_path), DIE_ON_OP="add", DIE_AT="2")
    assert p.returncode == 137
    before = (tmp_path / "results.jsonl").read_bytes()
    for change in (["--seed", "1"], ["--depth", "default"], ["--types", "f32"],
                   ["--backend", "numpy"], ["--no-invalid"]):
        args = list(RUN) + ["--out", str(tmp_path), "--resume"]
        flag = change[0]
        if flag in args and len(change) == 2:
            args[args.index(flag) + 1] = change[1]
        else:
            args += change
        p = cli(*args)
        assert p.returncode == 2, (change, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "cannot resume" in p.stderr
        assert (tmp_path / "results.jsonl").read_bytes() == before


def test_resume_of_a_finished_run_runs_nothing_again(tmp_path):
    args = ["run", "--ops", "not", "--types", "si8", "--depth", "quick", "--backend", "numpy",
            "--no-progress", "--out", str(tmp_path)]
    assert cli(*args).returncode == 0
    first = [_strip(r) for r in read_results(tmp_path / "results.jsonl")]
    p = cli(*args, "--resume")
    assert p.returncode == 0, p.stderr
    assert [_strip(r) for r in read_results(tmp_path / "results.jsonl")] == first
    # Without a results file there is nothing to resume: a fresh run.
    p = cli(*args[:-1], str(tmp_path / "fresh"), "--resume")
    assert p.returncode == 0, p.stderr
    assert [_strip(r) for r in read_results(tmp_path / "fresh" / "results.jsonl")] == first


def test_resume_with_jobs_2_gives_the_same_records(tmp_path):
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    assert cli(*RUN, "--out", str(ref), "--ops", "add,not,negate,compare").returncode == 1
    p = cli(*RUN, "--out", str(cut), "--ops", "add,not,negate,compare", DIE_ON_OP="negate")
    assert p.returncode == 137
    p = cli(*RUN, "--out", str(cut), "--ops", "add,not,negate,compare", "--resume",
            "--jobs", "2")
    assert p.returncode == 1, p.stderr
    assert "2 op(s) done" in p.stderr
    key = lambda out: sorted(json.dumps(_strip(r), sort_keys=True)
                             for r in read_results(out / "results.jsonl"))
    assert key(cut) == key(ref)
    assert _summary(cut) == _summary(ref)
