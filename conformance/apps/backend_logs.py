"""The folder a pytest session's isolated backend writes its child's stderr to, when no
``--conformance-repro-dir`` is given: a temporary folder of the session's own
(``conformance-backend-*`` in the temporary directory), removed at the session's end
unless it holds something worth keeping.

Worth keeping is a crash's stderr: the backend's child process died (or reported heap
corruption) during the session and a log in the folder is not empty; the crash reasons of
the failed tests name that log, and the session's summary names the folder. Anything else
(no log, empty logs, or the warnings a child that never crashed printed) is removed, so
that sessions do not pile folders up in the temporary directory.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

PREFIX = "conformance-backend-"


def new_folder() -> Path:
    """A fresh temporary folder for one session's backend logs."""
    return Path(tempfile.mkdtemp(prefix=PREFIX))


def has_output(folder: Path) -> bool:
    """Whether any file in ``folder`` holds bytes."""
    try:
        return any(p.is_file() and p.stat().st_size > 0 for p in folder.rglob("*"))
    except OSError:
        return False


def crashed(backend: Any) -> bool:
    """Whether ``backend`` (an isolated backend: conformance.checking.isolation) lost an
    answer to its child process dying or corrupting its heap."""
    return int(getattr(backend, "crashes", 0) or 0) > 0


def release(folder: Path | None, backend: Any = None, keep_output: bool = False
            ) -> Path | None:
    """End of the session: remove ``folder`` unless it holds a crash's stderr (or, with
    ``keep_output``, any output: a backend that did not load, whose error names its log).
    Returns the folder when it is kept, else None. Call it after the backend's child
    process has stopped."""
    if folder is None or not folder.is_dir():
        return None
    if has_output(folder) and (keep_output or crashed(backend)):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    return None


def kept_line(folders: list[str]) -> str:
    """The summary line that names the kept folders."""
    return ("conformance: the backend's child process crashed; its stderr is kept in "
            + ", ".join(sorted(folders)) + " (the crash reasons name the log)")


__all__ = ["PREFIX", "crashed", "has_output", "kept_line", "new_folder", "release"]
