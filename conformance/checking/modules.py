"""Checking a module read in from elsewhere (issue 29): three checks on one backend.

:func:`check_module` judges a :class:`~conformance.mlir.reader.ReadModule` (the
judgeable program of a jax export, a test file, a compiler's dump) on one backend for a
batch of argument values:

1. **op by op on the backend's own values** (``op_by_op``): every operation runs alone
   on the backend (its single-op executable), fed the backend's own values of its
   operands (backends.programs.op_by_op), and is judged by its op's own verdict
   (exact, ulp, bound, residual, ...; conformance.checking.programs.judge_operation)
   against the oracle on those operands. The first operation, in module order, that
   diverges is named by its location in the module and its text: this localises a bug
   in a real model, one op at a time, whatever the ops around it did.
2. **the whole module against the oracle** (``exact``), and 3. **the whole module
   against its own ops** (``metamorphic``): conformance.checking.programs.check_program
   on the module's program. The whole module compiled once must give the oracle's bits
   where every op on the path is exact on those values (an element an inexact op or an
   implementation-defined rule reaches stays open); each inexact op's value in the
   whole-module run is judged by its verdict on the run's own operands, and an element
   that fails there but equals the op run alone is the op's own (check 1 judges it): what
   is left is a change the whole-module compile made (fusion, reassociation,
   contraction, folding).

A backend that cannot run an op (Unsupported) leaves that op, and the whole module's
checks, unjudged with the reason; a backend that fails (crash, error) on an op alone is
a finding of that op. Arguments on which the oracle cannot evaluate the module (a loop
that does not end on drawn values) leave it ``unjudged``, with the oracle's reason.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from conformance.backends.base import Backend, Unsupported
from conformance.checking.checker import error_text, failure_class
from conformance.checking.compare import worst
from conformance.checking.programs import Finding, check_program, finding_of, judge_operation
from conformance.mlir.reader import ReadModule

__all__ = ["ModuleVerdict", "check_module", "op_by_op_findings"]


@dataclasses.dataclass
class ModuleVerdict:
    """What the three checks found on one backend."""

    outcome: str            # pass, an element class, unsupported, unjudged (no oracle)
    op_by_op: list[Finding]                         # check 1
    whole: dict[str, Any]                           # checks 2 and 3 (ProgramVerdict JSON)
    first: dict[str, Any] | None = None             # the first diverging op, located
    message: str | None = None
    judged_ops: int = 0

    @property
    def diverges(self) -> bool:
        return self.outcome not in ("pass", "unsupported", "unjudged")

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "message": self.message,
                "judged_ops": self.judged_ops, "first": self.first,
                "op_by_op": [f.to_json() for f in self.op_by_op], "whole": self.whole}


def op_by_op_findings(backend: Backend, read: ReadModule, inputs: Sequence[np.ndarray],
                      batch: int) -> tuple[list[Finding], int, str | None]:
    """Check 1 (module docstring): the findings, how many operations were judged, and
    the reason where the backend cannot run an op alone (Unsupported)."""
    program = read.program
    env = {n: np.asarray(x) for n, x in zip(program.argument_names, inputs)}
    findings: list[Finding] = []
    judged = 0
    for o in program.operations:
        try:
            exe = backend.executable(o.signature)
        except Unsupported as e:
            return findings, judged, f"{o.op} ({o.name}): {e}"
        except Exception as e:  # noqa: BLE001 - the backend fails on this op alone
            findings.append(Finding(o.results[0], o.op, "op_by_op", failure_class(e), 0, 0,
                                    (), None, error_text(e)[:300], at=o.results[0]))
            return findings, judged, None
        xs = [env[v] for v in o.operands]
        cases = batch if o.signature.input_types else 1     # a constant, an iota: once
        try:
            per_case = [[np.asarray(r) for r in exe([x[b] for x in xs])]
                        for b in range(cases)]
        except Unsupported as e:
            return findings, judged, f"{o.op} ({o.name}): {e}"
        except Exception as e:  # noqa: BLE001
            findings.append(Finding(o.results[0], o.op, "op_by_op", failure_class(e), 0, 0,
                                    (), None, error_text(e)[:300], at=o.results[0]))
            return findings, judged, None
        got = [np.stack([c[i] for c in per_case]) for i in range(len(o.results))]
        env.update((r, np.broadcast_to(g, (batch,) + g.shape[1:]))
                   for r, g in zip(o.results, got))
        judged += 1
        verdict, expected = judge_operation(o, xs, got)
        if verdict.type_message is not None:
            findings.append(Finding(o.results[0], o.op, "op_by_op", "type", 0, 0, (),
                                    None, verdict.type_message, at=o.results[0]))
            continue
        for r, cls, e, a in zip(o.results, verdict.element_classes, expected, got):
            f = finding_of(r, o.op, "op_by_op", np.asarray(cls), e, a)
            if f is not None:
                f.at = r
                findings.append(f)
    return findings, judged, None


def check_module(backend: Backend, read: ReadModule, inputs: Sequence[np.ndarray],
                 batch: int) -> ModuleVerdict:
    """The three checks of ``read`` on ``backend`` for the stacked ``inputs``."""
    from conformance.oracles.registry import OracleError
    inputs = [np.asarray(x) for x in inputs]
    with np.errstate(all="ignore"):
        try:
            mine, judged, unsupported = op_by_op_findings(backend, read, inputs, batch)
            if unsupported is not None:
                return ModuleVerdict("unsupported", mine, {}, message=unsupported,
                                     judged_ops=judged)
            whole = check_program(backend, read.program, inputs, batch=batch)
        except OracleError as e:    # (a loop drawn values never end, ...): not judged
            return ModuleVerdict("unjudged", [], {}, message=f"the oracle cannot evaluate "
                                 f"it on these arguments: {str(e).splitlines()[0]}")
    classes = [f.cls for f in mine] + ([whole.outcome] if whole.diverges else [])
    outcome = worst(classes) if classes else "pass"
    if whole.outcome == "unsupported" and not mine:
        outcome = "unsupported"
    return ModuleVerdict(outcome, mine, whole.to_json(), _first(read, mine, whole),
                         whole.message if whole.outcome == "unsupported" else None, judged)


def _first(read: ReadModule, mine: list[Finding], whole) -> dict[str, Any] | None:
    """The first diverging operation in module order (check 1's, else the whole
    module's localised finding), with its location and text in the module."""
    order = {o.name: i for i, o in enumerate(read.program.operations)}
    producer = read.program.producer()

    def op_name(value: str | None) -> str | None:
        return read.program.operations[producer[value][0]].name \
            if value in producer else None

    candidates = [(f, "op_by_op") for f in mine] + \
        [(f, f.check) for f in whole.findings]
    located = [(order[op_name(f.at or f.value)], f, check) for f, check in candidates
               if op_name(f.at or f.value) in order]
    if not located:
        return None
    _, f, check = min(located, key=lambda x: x[0])
    name = op_name(f.at or f.value)
    origin = read.origins.get(name)
    return {"value": f.at or f.value, "op": f.op, "class": f.cls, "check": check,
            "location": origin.location if origin else None,
            "text": origin.text if origin else None,
            "expected": f.expected, "actual": f.actual, "case": f.case,
            "index": list(f.index)}
