"""One signature's check as a stream of typed events, read by every front-end.

:func:`check_signature` owns a whole signature: it compiles it on every backend, draws
and checks each value batch (oracle, masks, verdicts, the cross-backend view), finds
the case that crashes or hangs a backend, minimises divergences, and keeps the totals
and the coverage tally. It yields what happened as events; a front-end only decides
what to do with them: the CLI runner writes records, the pytest plugin fails a test on
the first one its expectations do not list, fuzz and bench count them. Because they
read one stream, they cannot drift: a crashing, hanging or lying backend costs the same
bounded time and gives the same events on every route.

Two decisions stay with the front-end, as callbacks:

- ``draw(batch)``: the stacked inputs of a value batch (the plan's, or a pack's);
- ``choose(backend, classes, counts)``: which of a batch's diverging classes (or a
  failure outcome) to minimise or bisect, in order (the runner: those under its
  reproducer limit; the plugin: the worst one no expectation lists).

:class:`HangBudget` bounds what a hanging backend costs per op: after
``MAX_HANGS_PER_OP`` timeouts (a compile, a batch, an invalid program, a spec example or
a probe) nothing else of the op is run on it (its other signatures, invalid programs,
examples and probes are recorded as not run), and only the first hang of an op is
bisected (each step of the bisection costs a timeout).
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from conformance.checking.stage_clock import stage
from conformance import oracles

from conformance.checking import plan
from conformance.backends import Backend
from conformance.checking.checker import (Batch, BackendBatch, Divergence, OracleFailure,
                                          SignatureCheck, error_text, failure_class)
from conformance.checking.compare import (STATISTICS_PREFIX, BatchVerdict, max_error,
                                          merge_class_errors, merge_impl_stats,
                                          merge_statistics, ulp_histogram, worst)
from conformance.core.case import Case, Signature
from conformance.core.results import finite_or_none, merge_bound_hist
from conformance.specs import Accuracy, OpSpec

#: After this many timeouts of a backend in one op (compiles, batches, invalid programs,
#: spec examples and probes together), nothing else of the op is run on it: with one
#: culprit bisection per op, a hanging backend costs at most about
#: (MAX_HANGS_PER_OP + log2(batch size) + 1) x the timeout per op.
MAX_HANGS_PER_OP = 2

#: ``choose(backend, classes, counts) -> classes to minimise (or bisect), in order``
Chooser = Callable[[str, Sequence[str], dict], Sequence[str]]


class HangBudget:
    """Timeouts per (backend, op), shared by every signature a front-end checks."""

    def __init__(self, limit: int = MAX_HANGS_PER_OP) -> None:
        self.limit = limit
        self.counts: dict[tuple[str, str], int] = defaultdict(int)
        self.bisected: set[tuple[str, str]] = set()    # a hang of the op was bisected

    def exhausted(self, backend: str, op: str) -> bool:
        return self.counts[(backend, op)] >= self.limit

    def hung(self, backend: str, op: str) -> int:
        """Count a timeout; returns how many the op has had on that backend."""
        self.counts[(backend, op)] += 1
        return self.counts[(backend, op)]

    def spend(self, backend: str, op: str, outcome: str | None) -> None:
        """Count the outcome of something run on ``backend`` for ``op`` outside a
        signature's check (an invalid program, a spec example) if it timed out."""
        if outcome == "timeout":
            self.hung(backend, op)

    def not_run_reason(self, op: str) -> str:
        return f"not run: the backend hung {self.limit} times in {op} already"

    def guard(self, backend: Backend, op: str) -> "BudgetedBackend":
        """``backend`` for code that compiles and runs programs of ``op`` on its own (the
        probes): every timeout counts, and once the budget is spent nothing more runs."""
        return BudgetedBackend(backend, self, op)


class NotRunHere(Exception):
    """The hang budget of the backend in the op is spent: the program was not run."""


class BudgetedBackend:
    """A backend seen through a :class:`HangBudget` for one op: its batch executables
    count each timeout, and raise :class:`NotRunHere` (the budget's reason) instead of
    compiling or running once the backend hung ``limit`` times in the op. Anything else
    is the backend's own."""

    def __init__(self, backend: Backend, budget: HangBudget, op: str) -> None:
        self.backend, self.budget, self.op = backend, budget, op

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def _check(self) -> None:
        if self.budget.exhausted(self.backend.name, self.op):
            raise NotRunHere(self.budget.not_run_reason(self.op))

    def _counted(self, fn: Callable, *args):
        self._check()
        try:
            return fn(*args)
        except Exception as e:
            self.budget.spend(self.backend.name, self.op, failure_class(e))
            raise

    def batch_executable(self, sig: Signature) -> Callable:
        exe = self._counted(self.backend.batch_executable, sig)
        return lambda stacked: self._counted(exe, stacked)

    def executable(self, sig: Signature) -> Callable:
        exe = self._counted(self.backend.executable, sig)
        return lambda inputs: self._counted(exe, inputs)

    def run(self, case: Case) -> Sequence[np.ndarray]:
        return self.executable(case.signature)(case.inputs)


# ---------------------------------------------------------------------------
# Totals of one backend over a signature's batches
# ---------------------------------------------------------------------------

class BackendTotals:
    """What one backend's batches of a signature add up to (the ``signature`` record)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.hist = None
        self.max_err: float | None = None
        self.impl: dict[str, dict[str, int]] = {}
        self.bound_hist: dict[str, dict] = {}  # error / bound per element type (bound kind)
        self.class_errors: dict[str, dict] = {}  # per diverging class: its witnesses' worst
        self.stats: dict[str, dict] = {}      # statistical tests of property verdicts
        self.error: str | None = None
        self.outcome: str | None = None      # set when the backend failed (error/crash/hang)
        self.type_message: str | None = None

    def add(self, v: BatchVerdict) -> None:
        for cls, n in v.counts().items():
            self.counts[cls] += n
        h = ulp_histogram(v.errors)
        self.hist = h if self.hist is None else [a + b for a, b in zip(self.hist, h)]
        m = max_error(v.errors)
        if m is not None:
            self.max_err = m if self.max_err is None else max(self.max_err, m)
        merge_impl_stats(self.impl, {k: st for k, st in v.impl_defined.items()
                                     if not k.startswith(STATISTICS_PREFIX)})
        merge_statistics(self.stats, {k[len(STATISTICS_PREFIX):]: st
                                      for k, st in v.impl_defined.items()
                                      if k.startswith(STATISTICS_PREFIX)})
        merge_bound_hist(self.bound_hist, v.bound_hist)
        merge_class_errors(self.class_errors, v.class_errors)
        self.type_message = self.type_message or v.type_message

    def failed(self, outcome: str, error: BaseException, cases: int) -> None:
        self.error = error_text(error)
        self.outcome = outcome
        self.counts[outcome] += cases

    def record(self) -> dict[str, Any]:
        cases = sum(self.counts.values())
        diverging = {k: v for k, v in self.counts.items() if k != "pass"}
        outcome = "pass"
        if self.error:
            outcome = self.outcome or "backend_error"
        elif diverging:
            outcome = worst(list(diverging))
        return {"outcome": outcome, "cases": cases, "counts": dict(self.counts),
                "ulp_hist": self.hist, "max_error": finite_or_none(self.max_err),
                "impl_defined": self.impl, "reason": self.error or self.type_message,
                **({"statistics": self.stats} if self.stats else {}),
                **({"bound_hist": self.bound_hist} if self.bound_hist else {}),
                **({"class_errors": {c: {**d, "worst": finite_or_none(d["worst"])}
                                     for c, d in self.class_errors.items()}}
                   if self.class_errors else {})}


# ---------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class NotRun:
    """The backend is not run on this signature: it hung too often in the op already."""

    backend: str
    outcome: str
    reason: str


@dataclasses.dataclass
class Declined:
    """The backend declined the signature when compiling it (``Unsupported``)."""

    backend: str
    reason: str


@dataclasses.dataclass
class CompileFailed:
    """Compiling the signature raised, crashed or hung the backend."""

    backend: str
    outcome: str          # backend_error, crash or timeout
    reason: str


@dataclasses.dataclass
class OracleFailed:
    """The oracle failed on a batch: a suite bug; the signature's check stops."""

    error: BaseException


@dataclasses.dataclass
class BatchJudged:
    """One backend's results of a batch, judged by the op's verdict kind."""

    backend: str
    batch: Batch
    result: BackendBatch

    @property
    def verdict(self) -> BatchVerdict:
        return self.result.verdict


@dataclasses.dataclass
class Culprit:
    """The one case of a batch that crashes (or hangs) the backend again alone."""

    index: int            # its row in the batch
    case: Case
    expected: list[np.ndarray]


@dataclasses.dataclass
class BackendFailed:
    """A batch made the backend raise, crash or hang (it is not run on later batches);
    ``culprit``: the case that does it alone, where it was looked for and found."""

    backend: str
    batch: Batch
    outcome: str          # unsupported, backend_error, crash or timeout
    error: BaseException
    culprit: Culprit | None = None


@dataclasses.dataclass
class Diverged:
    """One diverging class of a batch on a backend, one case of it minimised."""

    backend: str
    batch: Batch
    cls: str
    case_index: int
    divergence: Divergence
    type_message: str | None
    oracle_suspect: bool  # every backend diverges there and all agree with each other


@dataclasses.dataclass
class SignatureDone:
    """The signature's totals per backend that ran it, its coverage tally, and the
    cross-backend record where two or more backends ran every batch."""

    totals: dict[str, BackendTotals]
    coverage: dict[str, Any]
    cross: dict[str, Any] | None


Event = (NotRun | Declined | CompileFailed | OracleFailed | BatchJudged | BackendFailed
         | Diverged | SignatureDone)


def first_appearance(choose_from: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(choose_from))


# ---------------------------------------------------------------------------
# The stream
# ---------------------------------------------------------------------------

def check_signature(spec: OpSpec, sig: Signature, backends: Sequence[Backend], *,
                    batches: int, draw: Callable[[int], Sequence[np.ndarray]],
                    choose: Chooser, budget: HangBudget,
                    accuracy: Accuracy | None = None,
                    case_id: Callable[[int, int], str | None] | None = None,
                    key: str | None = None) -> Iterator[Event]:
    """Check ``sig`` on ``backends`` over ``batches`` value batches; yield the events.

    ``key`` names the signature's plan (its type key) for the coverage tally."""
    for b in backends:
        if budget.exhausted(b.name, spec.name):
            yield NotRun(b.name, "timeout", budget.not_run_reason(spec.name))
    check = SignatureCheck(spec, sig,
                           [b for b in backends if not budget.exhausted(b.name, spec.name)],
                           accuracy, case_id)
    exes = check.compile()
    for name, reason in check.unsupported.items():
        yield Declined(name, reason)
    for name, (outcome, reason) in check.failed.items():
        budget.spend(name, spec.name, outcome)
        yield CompileFailed(name, outcome, reason)
    if not exes:
        return
    totals = {name: BackendTotals() for name in exes}
    with stage("coverage"):
        met = plan.coverage_tally(spec, key, sig) if key is not None else None
    for index in range(batches):
        if not check.executables:
            break
        with stage("generate"):
            stacked = draw(index)
        if met is not None:
            with stage("coverage"):
                met.add(stacked)
        try:
            batch = check.run_batch(index, stacked)
        except OracleFailure as e:
            yield OracleFailed(e.__cause__ or e)
            return
        for name, r in batch.results.items():
            if r.error is not None:
                totals[name].failed(r.outcome, r.error, batch.size)
                yield _failure(check, budget, choose, name, batch, r)
                continue
            totals[name].add(r.verdict)
            yield BatchJudged(name, batch, r)
            if r.diverges:
                yield from _divergences(check, choose, name, batch)
    yield SignatureDone(totals, met.record() if met is not None else {},
                        check.cross_record() if len(exes) > 1 else None)


def _failure(check: SignatureCheck, budget: HangBudget, choose: Chooser, name: str,
             batch: Batch, r: BackendBatch) -> BackendFailed:
    """A failed batch; for a crash or hang, the case that does it, where it is wanted."""
    event = BackendFailed(name, batch, r.outcome, r.error)
    if r.outcome not in ("crash", "timeout"):
        return event
    key = (name, check.spec.name)
    if r.outcome == "timeout":
        budget.hung(*key)
        if key in budget.bisected:
            return event    # bisecting a hang costs a timeout per probe: once per op
    if r.outcome not in choose(name, [r.outcome], {r.outcome: batch.size}):
        return event
    if r.outcome == "timeout":
        budget.bisected.add(key)
    found = check.culprit(name, batch, r.outcome)
    if found is not None:
        c, case = found
        sig = check.sig
        expected = list(oracles.evaluate(sig.op, case.inputs, sig.attributes,
                                         result_types=sig.result_types,
                                         input_types=sig.input_types, regions=sig.regions))
        event.culprit = Culprit(c, case, expected)
    return event


def _divergences(check: SignatureCheck, choose: Chooser, name: str,
                 batch: Batch) -> Iterator[Diverged]:
    verdict = batch.results[name].verdict
    names = verdict.case_class_names()
    diverging = first_appearance(names[c] for c in verdict.diverging_cases())
    counts = {cls: sum(1 for n in names if n == cls) for cls in diverging}
    for cls in choose(name, diverging, counts):
        c = check.representative(name, batch, cls)
        d = check.divergence(name, batch, c, cls)
        yield Diverged(name, batch, cls, c, d, verdict.type_message,
                       bool(batch.suspects is not None and batch.suspects[c]))


__all__ = ["MAX_HANGS_PER_OP", "HangBudget", "NotRunHere", "BudgetedBackend", "BackendTotals",
           "NotRun", "Declined", "CompileFailed", "OracleFailed", "BatchJudged", "Culprit",
           "BackendFailed", "Diverged", "SignatureDone", "Event", "check_signature"]
