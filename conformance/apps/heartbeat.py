"""Progress lines for logs (issue 31): where stderr is not a terminal (a CI job's log),
the long commands (``run``, ``fuzz``, ``programs``) print a line now and then, as
pytest's log does, so that a log is never silent for minutes:

    conformance run: elapsed 2m30s, 12/174 ops done, 3456 cases; now: add f32

On a terminal ``run`` shows its progress bar instead (tqdm; it is off where stderr is
not a terminal). The interval is :data:`DEFAULT_EVERY` seconds, or
``CONFORMANCE_PROGRESS_EVERY`` (seconds; 0 turns the lines off); ``run --no-progress``
turns both off. A line is printed by a daemon thread from a status callable, so that a
unit that takes long (a slow op, a hanging backend waiting for its timeout) still gets
its lines; a status that raises is skipped, never the run's failure.
"""
from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

#: Seconds between two lines, unless ``CONFORMANCE_PROGRESS_EVERY`` says otherwise.
DEFAULT_EVERY = 30.0
EVERY_VARIABLE = "CONFORMANCE_PROGRESS_EVERY"


def interval() -> float | None:
    """Seconds between two progress lines (None: no lines)."""
    text = os.environ.get(EVERY_VARIABLE)
    if text is None or not text.strip():
        return DEFAULT_EVERY
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_EVERY
    return value if value > 0 and math.isfinite(value) else None


def is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):      # closed, or not a file
        return False


def duration_text(seconds: float) -> str:
    """``4.2s``, ``2m05s``, ``1h02m03s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    s = int(seconds)
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


class Heartbeat:
    """``with Heartbeat("conformance run", status):`` prints ``LABEL: elapsed T,
    STATUS`` to stderr every :func:`interval` seconds while the block runs, where stderr
    is not a terminal (``force``: also on one)."""

    def __init__(self, label: str, status: Callable[[], str], every: float | None = None,
                 stream: TextIO | None = None, force: bool = False,
                 enabled: bool = True) -> None:
        self.label, self.status = label, status
        self.stream = stream if stream is not None else sys.stderr
        self.every = every if every is not None else interval()
        self.active = bool(enabled and self.every and (force or not is_terminal(self.stream)))
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        return (f"{self.label}: elapsed {duration_text(time.monotonic() - self.started)}, "
                f"{self.status()}")

    def beat(self) -> None:
        try:
            text = self.line()
        except Exception:  # noqa: BLE001 - a status that fails is skipped, not the run
            return
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):         # the log went away: no more lines
            self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.beat()

    def __enter__(self) -> "Heartbeat":
        self.started = time.monotonic()
        if self.active:
            self._thread = threading.Thread(target=self._loop, name="conformance-heartbeat",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


class ResultsTally:
    """What a results file being written holds so far, read incrementally: the ops done
    (``unit_done`` records) out of ``ops``, the value cases checked (``signature``
    records), and ``now``, the unit under way (set by the caller)."""

    def __init__(self, path: Path, ops: int) -> None:
        self.path, self.ops = Path(path), ops
        self.now: str | None = None
        self._reset()

    def _reset(self) -> None:
        self._offset, self._inode, self._rest = 0, None, b""
        self.done: set[str] = set()
        self.cases = 0

    def _read(self) -> None:
        try:
            st = self.path.stat()
        except OSError:
            return
        if st.st_ino != self._inode or st.st_size < self._offset:   # replaced (a resume)
            self._reset()
            self._inode = st.st_ino
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        *lines, self._rest = (self._rest + data).split(b"\n")
        for line in lines:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if not isinstance(r, dict):
                continue
            if r.get("kind") == "unit_done" and "part" not in r:
                self.done.add(str(r.get("op")))
            elif r.get("kind") == "signature":
                n = r.get("cases")
                if not isinstance(n, int):
                    n = sum(v for v in (r.get("counts") or {}).values() if isinstance(v, int))
                self.cases += n

    def line(self) -> str:
        self._read()
        return (f"{len(self.done)}/{self.ops} ops done, {self.cases} cases"
                + (f"; now: {self.now}" if self.now else ""))


def campaign_status(state_path: Path) -> str:
    """A fuzz campaign's progress from its ``campaign.json`` (replaced after every draw)."""
    try:
        state = json.loads(Path(state_path).read_text())
    except (OSError, ValueError):
        return "starting"
    return (f"{state.get('draws', 0)} draws done, {state.get('cases', 0)} cases, "
            f"{state.get('corpus', 0)} distinct divergence(s) in the corpus; next draw "
            f"{state.get('next_draw', 0)}")


__all__ = ["DEFAULT_EVERY", "EVERY_VARIABLE", "Heartbeat", "ResultsTally", "campaign_status",
           "duration_text", "interval", "is_terminal"]
