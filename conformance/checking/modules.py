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

A backend that cannot run an op alone (Unsupported) leaves that op unjudged, with the
reason, and the ops after it are judged on the oracle's value of it; a backend that
cannot run the whole module leaves checks 2 and 3 ``unsupported``; an op whose verdict
has no bound to state (a ``while`` whose body holds inexact ops, an RNN's cell: rounding
errors compound over the trips) is ``unjudged`` alone, its values the backend's, and the
metamorphic check passes over it too; a backend that fails (crash, error) on an op alone is
a finding of that op, and the ops after it are judged on the oracle's value of it (a
crash early in a model hides nothing after it). Arguments on which the oracle cannot evaluate the module (a loop
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
from conformance.checking.verdicts.control_flow import NoBound
from conformance.mlir.reader import ReadModule

__all__ = ["ModuleVerdict", "check_module", "loop_operations", "op_by_op_findings",
           "region_operations", "NOT_DIVERGING"]

#: a module's outcomes that are no divergence (the CLI's exit code, the report, JUnit)
NOT_DIVERGING = ("pass", "unsupported", "unjudged")


@dataclasses.dataclass
class ModuleVerdict:
    """What the three checks found on one backend."""

    outcome: str            # pass, an element class, unsupported, unjudged (no oracle)
    op_by_op: list[Finding]                         # check 1
    whole: dict[str, Any]                           # checks 2 and 3 (ProgramVerdict JSON)
    first: dict[str, Any] | None = None             # the first diverging op, located
    message: str | None = None
    judged_ops: int = 0
    #: operation name -> its check-1 outcome (pass, a class, unsupported)
    op_outcomes: dict[str, str] = dataclasses.field(default_factory=dict)
    #: for reproducers (not serialised): the first check-1 finding's operation and its
    #: operands' values (the backend's own) in the diverging case, each [1, ...]; the
    #: whole module's ProgramVerdict
    first_operands: tuple[Any, list] | None = None
    whole_verdict: Any = None

    @property
    def diverges(self) -> bool:
        return self.outcome not in NOT_DIVERGING

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "message": self.message,
                "judged_ops": self.judged_ops, "first": self.first,
                "op_outcomes": self.op_outcomes,
                "op_by_op": [f.to_json() for f in self.op_by_op], "whole": self.whole}


def op_by_op_findings(backend: Backend, read: ReadModule, inputs: Sequence[np.ndarray],
                      batch: int, outcomes: dict[str, str] | None = None,
                      operands: list | None = None
                      ) -> tuple[list[Finding], int, list[str]]:
    """Check 1 (module docstring): the findings, how many operations were judged, and
    the ops the backend cannot run alone (Unsupported, with the reason: their values
    are then the oracle's, so that the ops after them are still judged; so are an op's
    the backend fails on, a finding of that op). ``outcomes``, if given, gets each
    operation's outcome by name (pass, its worst class, unsupported); ``operands``, if given, gets
    (operation, its operands' values in the diverging case) of the first finding."""
    outcomes = {} if outcomes is None else outcomes
    from conformance import oracles
    from conformance.specs import load_spec
    program = read.program
    env = {n: np.asarray(x) for n, x in zip(program.argument_names, inputs)}
    findings: list[Finding] = []
    unsupported: list[str] = []
    judged = 0
    for o in program.operations:
        xs = [env[v] for v in o.operands]
        cases = batch if o.signature.input_types else 1     # a constant, an iota: once
        try:
            exe = backend.executable(o.signature)
            per_case = [[np.asarray(r) for r in exe([x[b] for x in xs])]
                        for b in range(cases)]
        except Exception as e:  # noqa: BLE001 - the backend cannot or fails to run it alone
            if isinstance(e, Unsupported):
                where = read.origins[o.name].location if o.name in read.origins else o.name
                unsupported.append(f"{o.op} at {where}: {e}")
                outcomes[o.name] = "unsupported"
            else:   # a finding of this op; the ops after it are still judged
                findings.append(Finding(_key(o), o.op, "op_by_op", failure_class(e), 0,
                                        0, (), None, error_text(e)[:300], at=_key(o)))
                outcomes[o.name] = findings[-1].cls
                if operands is not None and not operands:   # every case: which failed is unknown
                    operands.append((o, [np.asarray(x) for x in xs]))
            got = list(oracles.evaluate_batch(o.signature, xs, load_spec(o.op)))
            env.update((r, np.broadcast_to(g, (batch,) + np.shape(g)[1:]))
                       for r, g in zip(o.results, got))
            continue
        got = [np.stack([c[i] for c in per_case]) for i in range(len(o.results))]
        env.update((r, np.broadcast_to(g, (batch,) + g.shape[1:]))
                   for r, g in zip(o.results, got))
        try:
            verdict, expected = judge_operation(o, xs, got)
        except NoBound as e:    # a loop of inexact ops: no bound to judge it by
            where = read.origins[o.name].location if o.name in read.origins else o.name
            outcomes[o.name] = "unjudged"
            note = ""
            if o.op == "while":     # its cond's and body's ops, trip by trip
                inside, n, first = loop_findings(backend, o, xs, batch, outcomes)
                note = f" (its cond's and body's ops judged inside, trip by trip: {n})"
                if first is not None and operands is not None and not operands:
                    operands.append(first)
                findings += inside
            unsupported.append(f"{o.op} at {where}: not judged alone: {e}{note}")
            continue
        judged += 1
        if verdict.type_message is not None:
            findings.append(Finding(_key(o), o.op, "op_by_op", "type", 0, 0, (),
                                    None, verdict.type_message, at=_key(o)))
            outcomes[o.name] = "type"
            continue
        mine = []
        for r, cls, e, a in zip(o.results, verdict.element_classes, expected, got):
            f = finding_of(r, o.op, "op_by_op", np.asarray(cls), e, a)
            if f is not None:
                f.at = r
                mine.append(f)
        if mine and operands is not None and not operands:
            case = mine[0].case
            operands.append((o, [np.asarray(x)[case:case + 1] for x in xs]))
        findings += mine
        outcomes[o.name] = worst([f.cls for f in mine]) if mine else "pass"
    return findings, judged, unsupported


def _key(o) -> str:
    """The value a finding of operation ``o`` is named by: its first result, or the
    operation's own name where it has none (a token's op: after_all)."""
    return o.results[0] if o.results else o.name


#: the most trips of a loop judged inside, per case (the rest of the loop is not judged)
MAX_LOOP_TRIPS = 1000


def region_operations(program) -> dict[str, tuple[Any, str]]:
    """Every value an op inside a while's regions makes (at any depth): its operation
    and the name of the module-level while that holds it."""
    return {r: (o, top) for o, top, _, _ in loop_operations(program) for r in o.results}


def loop_operations(program) -> list[tuple[Any, str, int, str]]:
    """Every op inside a while's cond and body (at any depth; check 1 judges them trip
    by trip), in module order: (its operation, the module-level while that holds it,
    its depth (1 in a module-level while's regions), ``cond`` or ``body`` of the
    innermost while)."""
    from conformance.core import region_program
    out: list[tuple[Any, str, int, str]] = []

    def walk(ops, top: str | None, depth: int, part: str):
        for o in ops:
            if top is not None:
                out.append((o, top, depth, part))
            if o.op == "while":
                for text, which in zip(o.signature.regions, ("cond", "body")):
                    walk(region_program.parse(text).program.operations, top or o.name,
                         depth + 1, which)
    walk(program.operations, None, 0, "")
    return out


def loop_findings(backend: Backend, o, xs: Sequence[np.ndarray], batch: int,
                  outcomes: dict[str, str]) -> tuple[list[Finding], int, tuple | None]:
    """A while whose body holds inexact ops (no bound for the loop as one op), judged
    inside: case by case, the loop runs trip by trip on the backend, each op of its cond
    and body alone on the backend's own values of its operands (the loop's operands as
    the backend gave them, then each trip's results), judged by its own verdict as
    check 1 judges the module's ops. Returns the findings (the first per value, its
    elements summed over trips and cases), how many ops were judged, and (op, its
    operands in the first diverging case) of the first finding. An op the backend
    cannot run alone takes the oracle's value; one it fails on ends that case's loop
    with a finding; a nested loop of inexact ops runs alone, not judged."""
    from conformance import oracles
    from conformance.core import region_program
    from conformance.specs import load_spec
    cond, body = (region_program.parse(t).program for t in o.signature.regions)
    found: dict[str, Finding] = {}
    judged: set[str] = set()
    first: list = []

    def run(program, args, case: int) -> list | None:
        env = dict(zip(program.argument_names, args))
        for op in program.operations:
            ys = [np.asarray(env[v]) for v in op.operands]
            try:
                got = [np.asarray(r) for r in backend.executable(op.signature)(ys)]
            except Unsupported:
                got = [np.asarray(r)[0] for r in oracles.evaluate_batch(
                    op.signature, [y[None] for y in ys], load_spec(op.op))]
                env.update(zip(op.results, got))
                continue
            except Exception as e:  # noqa: BLE001 - the backend fails on this op alone
                f = Finding(op.results[0], op.op, "op_by_op", failure_class(e), 0, case,
                            (), None, error_text(e)[:300], at=op.results[0])
                found.setdefault(op.results[0], f)
                outcomes[op.name] = f.cls
                return None
            env.update(zip(op.results, got))
            try:
                verdict, expected = judge_operation(op, [y[None] for y in ys],
                                                    [g[None] for g in got])
            except NoBound:
                continue
            judged.add(op.name)
            mine = []
            if verdict.type_message is not None:
                mine = [Finding(op.results[0], op.op, "op_by_op", "type", 0, case, (), None,
                                verdict.type_message, at=op.results[0])]
            for r, cls, e, a in zip(op.results, verdict.element_classes, expected,
                                    [g[None] for g in got]):
                if verdict.type_message is not None:
                    break
                f = finding_of(r, op.op, "op_by_op", np.asarray(cls), e, a)
                if f is not None:
                    f.at, f.case = r, case
                    mine.append(f)
            for f in mine:
                if f.at in found:
                    found[f.at].elements += f.elements
                else:
                    found[f.at] = f
            if mine and not first:
                first.append((op, [y[None] for y in ys]))
            # over every trip and case: the worst class seen, else pass
            outcomes[op.name] = worst([outcomes.get(op.name, "pass")] +
                                      [f.cls for f in mine])
        return [env[r] for r in program.results]

    for case in range(batch):
        state = [np.asarray(x)[case] for x in xs]
        for _ in range(MAX_LOOP_TRIPS):
            pred = run(cond, state, case)
            if pred is None or not bool(np.asarray(pred[0])):
                break
            state = run(body, state, case)
            if state is None:
                break
    return list(found.values()), len(judged), first[0] if first else None


def check_module(backend: Backend, read: ReadModule, inputs: Sequence[np.ndarray],
                 batch: int) -> ModuleVerdict:
    """The three checks of ``read`` on ``backend`` for the stacked ``inputs``."""
    from conformance.oracles.registry import OracleError
    if not read.program.operations:
        return ModuleVerdict("unjudged", [], {}, message="no op of the module can be judged"
                             + (f" ({len(read.unjudged)} not judged)" if read.unjudged else ""))
    inputs = [np.asarray(x) for x in inputs]
    with np.errstate(all="ignore"):
        try:
            # the oracle first: arguments on which it cannot evaluate the module (a loop
            # that does not end) never reach the backend
            from conformance.oracles.programs import evaluate_program
            oracle = evaluate_program(read.program, inputs, batch=batch)
            per_op: dict[str, str] = {}
            first_operands: list = []
            mine, judged, unsupported = op_by_op_findings(backend, read, inputs, batch,
                                                          per_op, first_operands)
            whole = check_program(backend, read.program, inputs, batch=batch,
                                  oracle=oracle)
        except OracleError as e:    # (a loop drawn values never end, ...): not judged
            return ModuleVerdict("unjudged", [], {}, message=f"the oracle cannot evaluate "
                                 f"it on these arguments: {str(e).splitlines()[0]}")
    classes = [f.cls for f in mine] + ([whole.outcome] if whole.diverges else [])
    outcome = worst(classes) if classes else "unsupported" if judged == 0 and \
        read.program.operations else "pass"
    message = None
    alone = [u for u in unsupported if ": not judged alone: " not in u]
    unbounded = [u for u in unsupported if ": not judged alone: " in u]
    if alone:
        message = (f"{len(alone)} op(s) the backend cannot run alone (their values "
                   f"are the oracle's): " + "; ".join(alone[:3]))
    if unbounded:
        message = ((message + "; ") if message else "") + (
            f"{len(unbounded)} op(s) with no bound to judge them by (their values are the "
            f"backend's): " + "; ".join(u.replace(": not judged alone: ", ": ")
                                         for u in unbounded[:3]))
    elif whole.outcome == "unsupported":
        message = f"the whole module: {whole.message}"
    return ModuleVerdict(outcome, mine, whole.to_json(), _first(read, mine, whole),
                         message, judged, per_op,
                         first_operands[0] if first_operands else None, whole)


def _first(read: ReadModule, mine: list[Finding], whole) -> dict[str, Any] | None:
    """The first diverging operation in module order (check 1's, else the whole
    module's localised finding), with its location and text in the module."""
    order = {o.name: i for i, o in enumerate(read.program.operations)}
    producer = read.program.producer()
    inside = region_operations(read.program)

    def op_name(value: str | None) -> str | None:
        if value in inside:             # an op inside a loop: the loop's place
            return inside[value][1]
        if value in producer:
            return read.program.operations[producer[value][0]].name
        return value if value in order else None    # an op of no result value (a token)

    candidates = [(f, "op_by_op") for f in mine] + \
        [(f, f.check) for f in whole.findings]
    located = [(order[op_name(f.at or f.value)], f, check) for f, check in candidates
               if op_name(f.at or f.value) in order]
    if not located:
        return None
    _, f, check = min(located, key=lambda x: x[0])
    name = op_name(f.at or f.value)
    if (f.at or f.value) in inside:     # named by the op inside the loop itself
        name = inside[f.at or f.value][0].name
    origin = read.origins.get(name)
    return {"value": f.at or f.value, "op": f.op, "class": f.cls, "check": check,
            "location": origin.location if origin else None,
            "text": origin.text if origin else None,
            "expected": f.expected, "actual": f.actual, "case": f.case,
            "index": list(f.index)}
