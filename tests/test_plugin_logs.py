"""The pytest plugin's backend log folder (issue 31): a session without
``--conformance-repro-dir`` gives its isolated backend's child a temporary folder of its
own for its stderr, and removes it at the end unless it holds a crash's stderr; a kept
folder is named in the session's summary (with xdist too: the workers' folders are
named by the controller). Each session runs in a subprocess with its own TMPDIR, so
what it leaves behind there is all its own.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.apps import backend_logs

TESTS = Path(__file__).resolve().parent


def session(tmp_path: Path, backend: str, *extra: str) -> tuple[subprocess.CompletedProcess,
                                                                  list[Path]]:
    """A plugin session on negate f32 (quick) with ``backend``; its output and the
    conformance-backend-* folders it left in its TMPDIR."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(
        [str(TESTS), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])}
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs",
                        "conformance.apps.suite", f"--conformance-backend={backend}",
                        "--conformance-ops=negate", "--conformance-types=f32",
                        "--conformance-depth=quick", "--conformance-timeout=60", "-q",
                        *extra], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=600)
    return p, sorted(tmp.glob(backend_logs.PREFIX + "*"))


def test_a_session_that_did_not_crash_leaves_no_folder_behind(tmp_path):
    p, left = session(tmp_path, "planted:ChattyOracle")
    assert p.returncode == 0, p.stdout + p.stderr
    assert left == [], [list(f.iterdir()) for f in left]     # its warnings are not kept
    assert "crashed" not in p.stdout


def test_a_crash_s_stderr_is_kept_and_named(tmp_path):
    p, left = session(tmp_path, "planted:LoudCrashOnNegativeZero")
    assert p.returncode == 1, p.stdout + p.stderr                # the crash fails a test
    (folder,) = left
    (log,) = folder.glob("*.stderr.log")
    assert "planted: fatal error on -0.0" in log.read_text()
    assert f"its stderr is kept in {folder}" in p.stdout, p.stdout
    assert f"(stderr log: {log})" in p.stdout                    # the crash reason names it


def test_under_xdist_the_workers_kept_folders_are_named(tmp_path):
    p, left = session(tmp_path, "planted:LoudCrashOnNegativeZero", "-n", "2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert left, "the crashing worker's folder is kept"
    for folder in left:
        assert str(folder) in p.stdout, p.stdout
    # A worker that met no crash removed its own folder.
    assert all(backend_logs.has_output(f) for f in left)


def test_release_removes_empty_logs_and_keeps_only_a_crash_s_output(tmp_path):
    class Backend:
        crashes = 0

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "x.stderr.log").write_text("")
    assert backend_logs.release(empty, Backend()) is None and not empty.exists()
    noisy = tmp_path / "noisy"
    noisy.mkdir()
    (noisy / "x.stderr.log").write_text("a warning\n")
    assert backend_logs.release(noisy, Backend()) is None and not noisy.exists()
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    (crashed / "x.stderr.log").write_text("Fatal Python error\n")
    b = Backend()
    b.crashes = 1
    assert backend_logs.release(crashed, b) == crashed and crashed.is_dir()
    silent = tmp_path / "silent"          # crashed, but nothing was written: nothing to keep
    silent.mkdir()
    (silent / "x.stderr.log").write_text("")
    assert backend_logs.release(silent, b) is None and not silent.exists()
    assert backend_logs.release(None) is None
