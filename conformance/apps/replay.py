"""Cases again: rebuilding a case from its id, and replaying saved reproducers.

Case ids are :mod:`conformance.checking.plan`'s: ``conformance repro ID`` rebuilds the case
an id names with the plan every front-end draws from (CLI runner and pytest plugin
alike) and checks it on a backend.

Replay
------
A run into an output folder that already holds reproducers (``repros/**/case.json``,
from an earlier run) re-runs each of them first, one case on every backend of the
run, and records a ``replay`` record: so a divergence once found is tried first the
next time (the suite's example database).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from conformance.core.case import Case  # noqa: F401
from conformance.core.results import Replay
from conformance.checking.plan import CaseId, CaseIdError, rebuild  # noqa: F401 - the public names


def repro(case_id: str, backend: str = "jax", save: "str | Path | None" = None,
          isolate: bool | None = None, timeout: float = 60.0, file=None) -> int:
    """``conformance repro``: rebuild the case, run it on ``backend``, compare with the
    oracle, print everything. Returns 0 (agrees), 1 (diverges). Raises CaseIdError,
    BackendLoadError."""
    import tempfile
    from conformance.backends import get_backend
    from conformance.checking.isolation import prepare_backends
    from conformance.apps.repro import check_case, exit_code, save as save_case, show
    from conformance.checking.verdicts import describe
    case, spec = rebuild(case_id)
    raw = get_backend(backend)
    with tempfile.TemporaryDirectory(prefix="conformance-repro-") as tmp:
        (b,) = prepare_backends([raw], Path(tmp), isolate, timeout)
        try:
            cls, expected, actual, message = check_case(b, case)
        finally:
            close = getattr(b, "close", None)
            if close and b is not raw:
                close()
    show(case, b.name, cls, expected, actual, message, file=file)
    if save is not None:
        acc = spec.signature_accuracy(case.signature)
        folder = save_case(Path(save), raw.locator, case, cls, expected, actual,
                           {"original_case_id": case.case_id, "accuracy": describe(acc)})
        print(f"saved:    {folder / 'repro.py'}", file=file or sys.stdout)
    return exit_code(cls)


# ---------------------------------------------------------------------------
# Replay: the reproducers of earlier runs first
# ---------------------------------------------------------------------------

def saved_cases(out: Path) -> list[tuple[str, dict[str, Any]]]:
    """(folder relative to ``out``, case.json) of every reproducer under out/repros,
    in a fixed order; unreadable files are skipped."""
    root = Path(out) / "repros"
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.rglob("case.json")):
        try:
            rec = json.loads(path.read_text())
            rec["signature"], rec["inputs"]          # noqa: B018 - must be there
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append((str(path.parent.relative_to(out)), rec))
    return found


def replay_saved(saved: Sequence[tuple[str, dict[str, Any]]], backends: Sequence[Any],
                 writer, config, progress: Callable[[str], None] | None = None
                 ) -> list[dict[str, Any]]:
    """Re-run each saved case once on every backend; write and return ``replay`` records:
    case id, backend, class now (``class``) and the class saved with it
    (``class_before``, found on ``found_on``; ``same_backend``: this backend is that one)."""
    from conformance.apps.repro import case_from_record, check_case
    from conformance.specs import load_spec
    out = []
    for folder, rec in saved:
        try:
            case = case_from_record(rec)
            spec = load_spec(case.op)
            overrides = (config.tolerances or {}).get(spec.name)
            accuracy = spec.signature_accuracy(case.signature, overrides)
        except Exception as e:  # noqa: BLE001 - a stale or foreign case.json
            case, accuracy, problem = None, None, f"{type(e).__name__}: {e}"
        case_id = rec.get("original_case_id") or rec.get("case_id")
        try:
            type_key = CaseId.parse(case_id).type_key if case_id else None
        except CaseIdError:
            type_key = None
        for b in backends:
            if progress:
                progress(f"replay {folder}")
            if case is None:
                cls, message = "unreadable", problem
            else:
                try:
                    with np.errstate(all="ignore"):
                        cls, _, _, message = check_case(b, case, accuracy)
                except Exception as e:  # noqa: BLE001 - the oracle failed on a stale case
                    cls, message = "unreadable", f"{type(e).__name__}: {e}"
            r = Replay(case_id=case_id, op=rec.get("signature", {}).get("op"),
                       type_key=type_key, backend=b.name, cls=cls,
                       class_before=rec.get("class"), found_on=rec.get("backend"),
                       same_backend=b.locator == rec.get("backend"),
                       repro=folder, message=message or None).to_dict()
            writer.write(r)
            out.append(r)
    return out
