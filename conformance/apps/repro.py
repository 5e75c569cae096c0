"""Reproducers: every saved divergence is a folder with ``case.json`` and ``repro.py``.

``case.json`` holds the signature, the exact input bits, the oracle's and the
backend's results, the class and the backend's name. ``repro.py`` re-runs the
case on the backend (or another one given on its command line), compares with the
oracle exactly as the run did, prints both, and exits 1 while the divergence is
there and 0 once it is fixed. It needs only this package installed: no network.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from conformance.checking import checker
from conformance.checking.compare import ELEMENT_CLASSES
from conformance.core.case import Case, Signature
from conformance.core.literals import decode, encode, to_literal
from conformance.specs import Accuracy
from conformance.checking.verdicts import from_record

SCRIPT = '''"""Reproducer: {op} on {backend}: {cls} divergence.

{signature}

The case as a StableHLO program (case.json holds the exact input bits):

{stablehlo}

Run:  python repro.py [BACKEND]     (BACKEND: jax, numpy, module:Class, ...; default {backend})
Exit: 1 while the backend diverges from the StableHLO oracle, 0 when it agrees.
"""
import sys
from pathlib import Path

from conformance.apps.repro import main

sys.exit(main(Path(__file__).with_name("case.json"), *sys.argv[1:]))
'''


def case_record(case: Case) -> dict[str, Any]:
    """A case as JSON: signature, exact input bits, and its StableHLO module text."""
    return {"signature": case.signature.to_json(), "inputs": [encode(x) for x in case.inputs],
            "case_id": case.case_id, "stablehlo": stablehlo_text(case.signature)}


def stablehlo_text(sig: Signature) -> str | None:
    """The canonical module of a signature, or None where it cannot be printed yet."""
    from conformance.mlir.emitter import EmitError, module_text
    try:
        return module_text(sig)
    except EmitError:
        return None


def case_from_record(rec: dict[str, Any]) -> Case:
    return Case(Signature.from_json(rec["signature"]), tuple(decode(x) for x in rec["inputs"]),
                rec.get("case_id"))


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80]


def save(folder: Path, backend: str, case: Case, cls: str, expected: Sequence[np.ndarray],
         actual: Sequence[np.ndarray] | None, extra: dict[str, Any] | None = None) -> Path:
    """Write ``case.json`` and ``repro.py`` into ``folder``; returns the folder.

    ``backend`` is how to load the backend again (see Backend.locator).
    """
    folder.mkdir(parents=True, exist_ok=True)
    record = {"backend": backend, "class": cls, **case_record(case),
              "expected": [encode(x) for x in expected],
              "actual": [encode(np.asarray(x)) for x in actual] if actual is not None else None,
              **(extra or {})}
    (folder / "case.json").write_text(json.dumps(record, indent=1))
    text = stablehlo_text(case.signature) or "(no StableHLO text for this case)"
    (folder / "repro.py").write_text(SCRIPT.format(
        op=case.op, backend=backend, cls=cls, signature=case.signature.key(),
        stablehlo="\n".join("    " + line for line in text.splitlines())))
    return folder


def folder_name(backend: str, op: str, key: str, cls: str, n: int) -> str:
    return f"{slug(backend)}/{slug(op)}/{slug(key)}-{cls}-{n}"


def check_case(backend, case: Case, accuracy: Accuracy | None = None
               ) -> tuple[str, list[np.ndarray], list[np.ndarray] | None, str]:
    """Run one case on a backend and judge it (conformance.checking.checker.check_case): returns
    (class, expected, actual, message); class is ``pass`` when they agree."""
    r = checker.check_case(backend, case, accuracy)
    return r.cls, r.expected, r.actual, r.message


def show(case: Case, name: str, cls: str, expected: Sequence[np.ndarray],
         actual: Sequence[np.ndarray] | None, message: str = "", file=None) -> None:
    """Print a checked case: signature, StableHLO text, inputs, oracle and backend
    results, verdict (what ``repro.py`` and ``conformance repro`` show)."""
    file = file or sys.stdout
    if case.case_id:
        print(f"case id:  {case.case_id}", file=file)
    print(f"case:     {case.signature.key()}", file=file)
    text = stablehlo_text(case.signature)
    if text:
        print(text, file=file)
    for i, x in enumerate(case.inputs):
        print(f"input {i}:  {to_literal(x)}", file=file)
    for i, e in enumerate(expected):
        print(f"oracle {i}: {to_literal(e)}", file=file)
    if actual is not None:
        for i, a in enumerate(actual):
            print(f"{name} {i}: {to_literal(a)}", file=file)
    print(f"verdict:  {cls}{(' - ' + message) if message else ''}", file=file)


def exit_code(cls: str) -> int:
    """0 when the backend agrees with the oracle, 1 otherwise."""
    return 0 if cls == "pass" else 1


def main(case_json: "str | Path", backend_name: str | None = None) -> int:
    from conformance.backends import BackendLoadError, get_backend
    rec = json.loads(Path(case_json).read_text())
    case = case_from_record(rec)
    name = backend_name or rec["backend"]
    if case.signature.num_replicas * case.signature.num_partitions > 1:
        from conformance.backends.jaxlib_support import ask_for_host_devices
        ask_for_host_devices()          # a collective's grid: host devices for jax (issue 18)
    try:
        backend = get_backend(name)
    except BackendLoadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cls, expected, actual, message = check_case(backend, case,
                                                from_record(rec.get("accuracy")))
    show(case, name, cls, expected, actual, message)
    return exit_code(cls)


def is_divergence(cls: str) -> bool:
    return cls not in ("pass", "unsupported", "rejected") and cls in ELEMENT_CLASSES + [
        "type", "backend_error"]
