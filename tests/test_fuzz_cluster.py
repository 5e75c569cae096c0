"""Campaign mode on workers (issue 20): ``conformance fuzz --jobs N`` and ``--cluster``
run the draws as executor tasks, a window in flight, applied as they arrive (out of
order); the corpus is that of a campaign in one process, a stop loses no finding and
counts no draw twice, and a resume runs exactly the draws not done."""
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.apps import cli
from conformance.apps.executors import UnitFailure
from conformance.apps.fuzz import Campaign, CampaignConfig, DrawBook, draw_config
from conformance.apps.fuzz_executor import InlineStream, Lost

ROOT = Path(__file__).resolve().parents[1]
BACKEND = "planted_fuzz:ManyKeys"
OPS = ["add", "negate"]
TYPES = ["f32", "f64", "i32", "i8"]
DRAWS = 16
ARGS = ["fuzz", "--backend", BACKEND, "--ops", ",".join(OPS), "--types", ",".join(TYPES),
        "--seed", "5"]


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "tests"), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                if p]])}


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _fuzz(out: Path, *extra: str) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli.main([*ARGS, "--out", str(out), *extra])
    return code, buf.getvalue()


def _draws(out: Path) -> dict[int, tuple]:
    """Draw -> what it was and met (the new/known split depends on arrival order)."""
    got: dict[int, tuple] = {}
    for d in _lines(out / "log.jsonl"):
        assert d["draw"] not in got, f"draw {d['draw']} logged twice"
        got[d["draw"]] = (d["round"], d["seed"], d["op"], d["cases"],
                          tuple(sorted(set(d["new"] + d["known"]))), d.get("failed"))
    return got


def _keys(out: Path) -> list[str]:
    keys = [e["key"] for e in _lines(out / "corpus" / "index.jsonl")]
    assert len(keys) == len(set(keys))
    return sorted(keys)


def _consistent(out: Path) -> dict:
    """campaign.json agrees with log.jsonl: the draws done are exactly those logged;
    every corpus line is JSON with its reproducer folder."""
    state = json.loads((out / "campaign.json").read_text())
    logged = set(_draws(out))
    done = set(range(state["next_draw"])) | set(state["done_above"])
    assert done == logged and state["draws"] == len(logged)
    assert all(k > state["next_draw"] for k in state["done_above"])
    for e in _lines(out / "corpus" / "index.jsonl"):
        assert e["repro"] is None or (out / e["repro"] / "case.json").is_file()
    assert state["corpus"] == len(_keys(out))
    assert not (out / ".work").exists()
    return state


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The reference: the campaign's first DRAWS draws, one after another here."""
    out = tmp_path_factory.mktemp("local") / "camp"
    code, text = _fuzz(out, "--draws", str(DRAWS))
    assert code == 1 and "the draws asked for are done" in text, text
    assert len(_keys(out)) >= 4                     # several keys, met by several draws
    assert sorted(_draws(out)) == list(range(DRAWS))
    return out


# ---------------------------------------------------------------------------
# The state of draws done out of order
# ---------------------------------------------------------------------------

def test_draw_book_keeps_the_lowest_draw_not_done_and_those_done_above_it():
    b = DrawBook()
    for k in (3, 1, 5):
        assert b.mark(k)
    assert b.state() == {"next_draw": 0, "done_above": [1, 3, 5]}
    assert not b.mark(3)                            # done once
    assert b.mark(0) and b.state() == {"next_draw": 2, "done_above": [3, 5]}
    todo = b.todo()
    assert [next(todo) for _ in range(4)] == [2, 4, 6, 7]
    again = DrawBook(**b.state())                   # as a resume reads it back
    assert again.state() == b.state() and not again.is_done(4) and again.is_done(5)
    assert b.mark(2) and b.state() == {"next_draw": 4, "done_above": [5]}
    assert DrawBook(4, [2, 5, 6]).state() == {"next_draw": 4, "done_above": [5, 6]}


def _config(out: Path, **kw) -> CampaignConfig:
    return CampaignConfig(backends=[BACKEND], ops=OPS, element_types=TYPES, depth="quick",
                          seed=5, out=out, **kw)


class _StopAfter(InlineStream):
    """Completes the tasks in flight in a scrambled order; after ``n`` results it
    delivers, as a SIGTERM would, a stop (the rest in flight are cancelled)."""

    def __init__(self, campaign_box, n):
        super().__init__(workers=2, order=lambda keys: sorted(keys, key=lambda k: -(k % 3)))
        self.box, self.n = campaign_box, n

    def wait(self, timeout):
        from conformance.apps.executors import run_unit_safely
        if self.n <= 0:
            self.box[0].signal_name = "SIGTERM"
            return []
        keys = self.order(list(self._tasks))[:self.n]
        self.n -= len(keys)
        return [(k, run_unit_safely(*self._tasks.pop(k))) for k in keys]


def test_out_of_order_draws_then_a_stop_then_a_resume_run_each_draw_once(local, tmp_path):
    from conformance.backends import get_backend
    out = tmp_path / "camp"
    box: list = []
    c = Campaign(_config(out, draws=DRAWS), [get_backend(BACKEND)], say=lambda s: None)
    box.append(c)
    res = c.run(_StopAfter(box, 7))
    assert res["stopped_by"] == "SIGTERM"
    state = _consistent(out)
    assert state["done_above"], state               # out of order: a gap below some draw
    first = _draws(out)
    assert len(first) == 7 and [d for d in first] != sorted(first)
    # Resume (in flight at the stop: not done, run again; done: skipped).
    c2 = Campaign(_config(out, draws=DRAWS), [get_backend(BACKEND)], say=lambda s: None)
    res = c2.run(InlineStream(workers=3))
    assert res["stopped_by"] == "draws" and res["draws"] == DRAWS - 7
    state = _consistent(out)
    assert state["next_draw"] == DRAWS and state["done_above"] == []
    assert _draws(out) == _draws(local) and _keys(out) == _keys(local)


def test_a_failed_draw_is_logged_and_counted_a_lost_one_runs_again(tmp_path):
    from conformance.backends import get_backend

    class Flaky(InlineStream):
        lost = {3: 1, 5: 99}            # draw -> times its worker is lost

        def wait(self, timeout):
            out = []
            for k, res in super().wait(timeout):
                if self.lost.get(k, 0) > 0:
                    self.lost[k] -= 1
                    res = Lost("worker process: BrokenProcessPool: a child died")
                elif k == 2:
                    res = UnitFailure("add", "ValueError: a suite bug", "", "add")
                out.append((k, res))
            return out

    out = tmp_path / "camp"
    said: list[str] = []
    res = Campaign(_config(out, draws=8), [get_backend(BACKEND)], say=said.append
                   ).run(Flaky(workers=2))
    assert res["failed"] == [2] and res["lost"] == [5]
    assert any(s.startswith("FAILED draw 2 (add): ValueError: a suite bug") for s in said)
    assert sum(s.startswith("LOST   draw 3") for s in said) == 1       # ran again, done
    assert sum(s.startswith("LOST   draw 5") for s in said) == 3       # 1 + 2 retries
    state = _consistent(out)
    assert state["next_draw"] == 5 and state["done_above"] == [6, 7]
    assert state["failed"] == 1
    assert _draws(out)[2][-1] == "ValueError: a suite bug"
    lines = cli_summary(res, out)
    assert "1 draw(s) failed with a suite error" in lines
    assert "1 draw(s) lost with their worker, not done (a resume runs them): 5" in lines


def cli_summary(res, out):
    from conformance.apps.fuzz import summary_lines
    return "\n".join(summary_lines(res, out))


# ---------------------------------------------------------------------------
# --jobs N: spawned worker processes
# ---------------------------------------------------------------------------

def test_jobs_2_gives_the_corpus_of_one_process(local, tmp_path):
    out = tmp_path / "camp"
    code, text = _fuzz(out, "--draws", str(DRAWS), "--jobs", "2")
    assert code == 1, text
    assert "on 2 processes worker(s)" in text, text
    _consistent(out)
    assert _draws(out) == _draws(local)
    assert _keys(out) == _keys(local)


def _children(pid: int) -> list[int]:
    ps = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                        text=True).stdout
    return [int(x) for x in ps.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _stop_and_resume(tmp_path, local, *extra: str, resume_here: bool = False) -> None:
    """``conformance fuzz ... EXTRA`` in a subprocess, SIGTERM once a few draws are in,
    then the same command to DRAWS (``resume_here``: without EXTRA, in this process):
    the corpus and draws of the local campaign."""
    out = tmp_path / "camp"
    cmd = [sys.executable, "-m", "conformance", *ARGS, "--out", str(out), *extra]
    p = subprocess.Popen([*cmd, "--draws", "100000"], cwd=ROOT, env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = out / "log.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None \
            and (not log.exists() or len(log.read_text().splitlines()) < 3):
        time.sleep(0.05)
    assert p.poll() is None and log.exists(), p.kill() or p.communicate()
    kids = _children(p.pid)
    assert kids                     # its workers (or Ray's processes)
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    time.sleep(0.5)
    assert not [k for k in kids if _alive(k)], "workers left running after the stop"
    assert p.returncode in (0, 1), stdout + stderr
    assert "stopped by SIGTERM" in stdout, stdout + stderr
    assert "Traceback" not in stderr, stderr
    _consistent(out)
    first = _draws(out)
    assert len(first) >= 3
    assert {k: v for k, v in _draws(local).items() if k in first} \
        == {k: v for k, v in first.items() if k < DRAWS}
    # The same command resumes: the draws not done, each once.
    upto = str(max(DRAWS, max(first) + 1))
    if resume_here:
        code, text = _fuzz(out, "--draws", upto)
    else:
        again = subprocess.run([*cmd, "--draws", upto], cwd=ROOT, env=_env(),
                               capture_output=True, text=True, timeout=300)
        code, text = again.returncode, again.stdout + again.stderr
    assert code in (0, 1), text
    assert "resuming the campaign" in text, text
    _consistent(out)
    both = _draws(out)
    assert {k: v for k, v in both.items() if k < DRAWS} == _draws(local)
    assert set(_keys(local)) <= set(_keys(out))


def test_jobs_2_stops_cleanly_on_sigterm_and_resumes(local, tmp_path):
    _stop_and_resume(tmp_path, local, "--jobs", "2")


# ---------------------------------------------------------------------------
# --pack
# ---------------------------------------------------------------------------

def test_pack_reaches_each_draw_and_changes_no_finding(tmp_path, monkeypatch):
    from conformance.apps import runner
    from conformance.checking.packing import DEFAULT_PACK
    assert draw_config(_config(tmp_path), 0, tmp_path).pack == DEFAULT_PACK
    seen: list[int] = []
    real = runner.Runner.__init__

    def spy(self, config, *a, **kw):
        seen.append(config.pack)
        real(self, config, *a, **kw)
    monkeypatch.setattr(runner.Runner, "__init__", spy)
    got = {}
    for pack in ("1", "4"):
        out = tmp_path / pack
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = cli.main(["fuzz", "--backend", "jax", "--ops", "add", "--types", "f32,i32",
                             "--seed", "2", "--draws", "2", "--pack", pack,
                             "--out", str(out)])
        assert code in (0, 1), buf.getvalue()
        assert seen == [int(pack)] * 2
        seen.clear()
        got[pack] = (_draws(out), _keys(out))
    assert got["1"] == got["4"]


# ---------------------------------------------------------------------------
# Ray (where it is installed)
# ---------------------------------------------------------------------------

def test_ray_campaign_stops_on_sigterm_resumes_and_gives_the_local_corpus(local, tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (the optional extra "
                                      "stablehlo-conformance[ray])")
    # (resumed here, not on Ray: a campaign continues on any executor, and one Ray
    # start is enough for the test)
    _stop_and_resume(tmp_path, local, "--cluster", "ray", "--jobs", "2", resume_here=True)
