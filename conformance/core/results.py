"""The results stream: one JSON object per line, appended and flushed as it happens.

A killed run loses at most the record being written; readers skip a torn last
line. Reports, summaries and JUnit XML are all rendered from this file.

Record kinds (the ``kind`` key):
- ``run``: header: seed, depth, backends and their versions, the backends' locators,
  filters, options (invalid, examples, max_repros, tolerances), start time.
- ``validity``: for one op and type binding, how many generated signatures satisfy
  every rule of the spec (the generators' validity, measured).
- ``signature``: one signature on one backend: case counts per outcome, ULP
  histogram, implementation-defined statistics, and for ops judged by a ``bound``
  (float reductions, contractions) ``bound_hist``: per result element type, the error
  as a fraction of the bound, |actual − oracle| / bound, over the checked elements
  (:func:`bound_histogram`; absent in older files).
- ``probe``: what one backend evidently does where the spec leaves it to the
  implementation (conformance.probes): op, backend, element type, precision_config,
  the evident accumulation precision and order (or ``undetermined``), and the evidence.
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


def json_default(o: Any) -> Any:
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
        line = json.dumps(record, default=json_default, allow_nan=False, separators=(",", ":"))
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


# ---------------------------------------------------------------------------
# The error as a fraction of the bound (``bound_hist`` of ``signature`` records)
# ---------------------------------------------------------------------------

#: Upper edges of the buckets of |actual − oracle| / bound, after the first bucket
#: (exactly 0): (0, 2^-16], (2^-16, 2^-15], ..., (1/2, 1]; the last bucket is > 1
#: (beyond the bound: a divergence unless a looser rule passed it).
BOUND_FRACTION_EDGES: list[float] = [2.0 ** -k for k in range(16, -1, -1)]
BOUND_BUCKET_LABELS: list[str] = (["0", "≤2^-16"] +
                                  [f"≤2^-{k}" for k in range(15, 0, -1)] + ["≤1", ">1"])


def bound_histogram(diff: np.ndarray, bound: np.ndarray) -> dict[str, Any]:
    """One element type's entry of ``bound_hist``: ``counts`` per bucket of
    ``diff / bound`` (:data:`BOUND_BUCKET_LABELS`) over the elements whose bound is > 0,
    ``max`` (the largest fraction seen), ``exact`` (elements whose bound is 0: every legal
    evaluation gives the oracle's value, checked bit for bit), ``exact_off`` (of
    those, how many differed) and ``vacuous`` (elements whose bound is infinite: a sum
    too long for the type's precision). ``diff`` and ``bound`` are the checked elements
    only (finite, not masked)."""
    diff = np.asarray(diff, np.float64).ravel()
    bound = np.broadcast_to(np.asarray(bound, np.float64), np.shape(diff)).ravel() \
        if np.ndim(bound) == 0 else np.asarray(bound, np.float64).ravel()
    positive = (bound > 0) & np.isfinite(bound)
    with np.errstate(all="ignore"):
        frac = diff[positive] / bound[positive]
    counts = np.zeros(len(BOUND_BUCKET_LABELS), np.int64)
    if frac.size:
        counts[0] = int(np.count_nonzero(frac == 0))
        nz = frac[frac > 0]
        idx = np.searchsorted(np.array(BOUND_FRACTION_EDGES), nz, side="left")
        counts[1:] += np.bincount(idx, minlength=len(BOUND_BUCKET_LABELS) - 1)
    # JSON has no inf: an infinite fraction (|actual - oracle| overflowing, as two huge
    # f64 values of opposite signs give) is recorded as the largest finite float
    big = float(np.finfo(np.float64).max)
    return {"counts": counts.tolist(),
            "max": float(np.nan_to_num(frac.max(), nan=big, posinf=big)) if frac.size else 0.0,
            "exact": int(np.count_nonzero(bound == 0)),
            "exact_off": int(np.count_nonzero((bound == 0) & (diff > 0))),
            "vacuous": int(np.count_nonzero(np.isinf(bound)))}


def merge_bound_hist(into: dict[str, dict], other: "dict[str, dict] | None") -> dict:
    """Add ``bound_hist`` entries (per element type) to a total; unknown or malformed
    entries (a newer or older file's) are skipped."""
    for et, h in (other or {}).items():
        if not isinstance(h, dict) or not isinstance(h.get("counts"), list):
            continue
        counts = [int(c) for c in h["counts"]]
        d = into.setdefault(str(et), {"counts": [0] * len(counts), "max": 0.0,
                                      "exact": 0, "exact_off": 0, "vacuous": 0})
        if len(d["counts"]) != len(counts):
            continue
        d["counts"] = [a + b for a, b in zip(d["counts"], counts)]
        try:
            d["max"] = max(float(d["max"]), float(h.get("max") or 0.0))
        except (TypeError, ValueError):
            pass
        d["exact"] += int(h.get("exact") or 0)
        d["exact_off"] += int(h.get("exact_off") or 0)
        d["vacuous"] = d.get("vacuous", 0) + int(h.get("vacuous") or 0)
    return into
