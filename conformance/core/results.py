"""The results stream: one JSON object per line, appended and flushed as it happens.

A killed run loses at most the record being written; readers skip a torn last
line. Reports, summaries and JUnit XML are all rendered from this file.

Record kinds (the ``kind`` key):
- ``run``: header: seed, depth, backends and their versions, the backends' locators,
  filters, options (invalid, examples, max_repros, tolerances), start time.
- ``validity``: for one op and type binding, how many generated signatures satisfy
  every rule of the spec (the generators' validity, measured).
- ``signature``: one signature on one backend: case counts per outcome, ULP
  histogram, implementation-defined statistics.
- ``divergence``: one saved, minimised divergence with its reproducer path.
- ``invalid``: one invalid signature on one backend: rejected / accepted_invalid /
  unsupported / crash / timeout, and what the StableHLO verifier says of the program
  (``verifier``: its message, or null when the verifier accepts it).
- ``cross``: one signature on two or more backends: pairwise disagreements and
  suspected oracle defects (every backend diverges, all agree with each other).
- ``example``: one spec example on one backend.
- ``replay``: a reproducer an earlier run saved in the output folder, re-run first on
  one backend of this run: ``case_id``, ``backend``, ``class`` (now), ``class_before``
  (saved), ``found_on`` (the backend that diverged), ``same_backend``, ``repro``.
- ``unit_done``: every record of one op has been written (for resuming: ``conformance
  run --resume`` keeps the ops that have one and runs the others again).
- ``end``: elapsed time and the ops covered (the totals are in the records above).
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np


def _default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class ResultsWriter:
    """Appends records to a JSON-lines file; safe to share between threads."""

    def __init__(self, path: "str | Path", append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a" if append else "w", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=_default, allow_nan=False, separators=(",", ":"))
        with self._lock:
            self._f.write(line + "\n")
            self._f.flush()
            if record.get("kind") in ("unit_done", "end"):
                os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_results(path: "str | Path") -> Iterator[dict[str, Any]]:
    """Records of a results file, skipping a torn (partially written) last line."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for i, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                return
            raise ValueError(f"{path}: line {i + 1} is not a JSON record") from None


def finite_or_none(x: float | None) -> float | str | None:
    """JSON has no inf/nan: encode them as strings."""
    if x is None:
        return None
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)
