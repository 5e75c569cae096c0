"""Cases again: rebuilding a case from its id, and replaying saved reproducers.

Case ids
--------
Every value case the runner checks has an id::

    SEED:DEPTH:OP:TYPE_KEY:SIGNATURE_INDEX:BATCH:CASE_INDEX
    e.g. 0:quick:add:f32:1:0:17

``SIGNATURE_INDEX`` is the signature's position in the plan of the type binding
``TYPE_KEY`` (:func:`conformance.runner.plan_binding`), ``BATCH`` the value batch
(:func:`conformance.runner.batch_for`) and ``CASE_INDEX`` the case's row in that
batch. The plan depends on the seed, depth, op and type key only (never on a run's
``--types``/``--ops`` filters), so the id alone, with the functions the runner
itself calls, rebuilds the exact case: ``conformance repro ID``. It is the case as
the run drew it, before minimisation (the saved reproducer holds the minimised one).

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

from conformance.core.case import Case


class CaseIdError(ValueError):
    """A case id that is malformed or names no case (one-line reason naming the id)."""


@dataclasses.dataclass(frozen=True)
class CaseId:
    seed: int
    depth: str
    op: str
    type_key: str
    index: int          # signature index in the binding's plan
    batch: int          # value batch of that signature
    case: int           # row in the batch

    FORMAT = "SEED:DEPTH:OP:TYPE_KEY:SIGNATURE_INDEX:BATCH:CASE_INDEX"

    def __str__(self) -> str:
        return (f"{self.seed}:{self.depth}:{self.op}:{self.type_key}:{self.index}:"
                f"{self.batch}:{self.case}")

    @classmethod
    def parse(cls, text: str) -> "CaseId":
        from conformance.runner import DEPTHS
        if text.strip().startswith("pytest/"):
            raise CaseIdError(f"case id {text!r} was drawn by the pytest plugin's hypothesis "
                              "run, not by the runner; rerun it with the reproducer saved by "
                              "--conformance-repro-dir, or with the same pytest options")
        parts = text.strip().split(":")
        if len(parts) != 7:
            raise CaseIdError(f"case id {text!r}: expected {cls.FORMAT}")
        seed, depth, op, key, index, batch, case = parts
        if depth not in DEPTHS:
            raise CaseIdError(f"case id {text!r}: unknown depth {depth!r}; known: "
                              f"{', '.join(DEPTHS)}")
        try:
            ints = [int(seed), int(index), int(batch), int(case)]
        except ValueError:
            raise CaseIdError(f"case id {text!r}: seed, signature index, batch and case "
                              f"index must be integers ({cls.FORMAT})") from None
        if min(ints[1:]) < 0:
            raise CaseIdError(f"case id {text!r}: negative index")
        return cls(ints[0], depth, op, key, ints[1], ints[2], ints[3])


def rebuild(case_id: "str | CaseId") -> tuple[Case, Any]:
    """The case an id names, drawn again with the runner's own planning and seeding;
    returns (case, spec). Raises :class:`CaseIdError`."""
    from conformance.runner import DEPTHS, RunConfig, batch_for, plan_binding
    from conformance.specs import UnknownOp, binding_key, load_spec
    cid = case_id if isinstance(case_id, CaseId) else CaseId.parse(case_id)
    try:
        spec = load_spec(cid.op)
    except UnknownOp:
        raise CaseIdError(f"case id {str(cid)!r}: unknown op {cid.op!r}") from None
    bindings = {binding_key(b): b for b in spec.type_bindings()}
    if cid.type_key not in bindings:
        raise CaseIdError(f"case id {str(cid)!r}: {cid.op} has no type key "
                          f"{cid.type_key!r} (see `conformance show {cid.op}`)")
    config = RunConfig(seed=cid.seed, depth=cid.depth)
    depth = DEPTHS[cid.depth]
    plan = plan_binding(spec, bindings[cid.type_key], config)
    if cid.index >= len(plan):
        raise CaseIdError(f"case id {str(cid)!r}: signature index {cid.index} out of range "
                          f"({len(plan)} signature(s) planned for {cid.op} {cid.type_key}; "
                          "an id the pytest plugin printed is not a runner case: run the "
                          "repro.py it saved)")
    if cid.batch >= depth.batches:
        raise CaseIdError(f"case id {str(cid)!r}: batch {cid.batch} out of range (depth "
                          f"{cid.depth} runs {depth.batches} batch(es) per signature)")
    if cid.case >= depth.batch_size:
        raise CaseIdError(f"case id {str(cid)!r}: case index {cid.case} out of range "
                          f"(batches of {depth.batch_size} at depth {cid.depth})")
    sig = plan[cid.index]
    stacked = batch_for(config, spec, cid.type_key, cid.index, cid.batch, sig)
    return Case(sig, tuple(np.array(x[cid.case], order="C") for x in stacked), str(cid)), spec


def repro(case_id: str, backend: str = "jax", save: "str | Path | None" = None,
          isolate: bool | None = None, timeout: float = 60.0, file=None) -> int:
    """``conformance repro``: rebuild the case, run it on ``backend``, compare with the
    oracle, print everything. Returns 0 (agrees), 1 (diverges). Raises CaseIdError,
    BackendLoadError."""
    import tempfile
    from conformance.backends import get_backend
    from conformance.repro import check_case, exit_code, save as save_case, show
    from conformance.runner import RunConfig, prepare_backends
    case, spec = rebuild(case_id)
    raw = get_backend(backend)
    with tempfile.TemporaryDirectory(prefix="conformance-repro-") as tmp:
        (b,) = prepare_backends(RunConfig(out=Path(tmp), isolate=isolate, timeout=timeout),
                                [raw])
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
                           {"original_case_id": case.case_id,
                            "accuracy": {"kind": acc.kind, "bound": acc.bound}})
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
    from conformance.repro import case_from_record, check_case
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
            r = {"kind": "replay", "case_id": case_id, "op": rec.get("signature", {}).get("op"),
                 "type_key": type_key, "backend": b.name, "class": cls,
                 "class_before": rec.get("class"), "found_on": rec.get("backend"),
                 "same_backend": b.locator == rec.get("backend"),
                 "repro": folder, "message": message or None}
            writer.write(r)
            out.append(r)
    return out
