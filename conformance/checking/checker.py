"""One check path: a signature (or one case) against one or more backends.

Every front-end reaches a verdict here and nowhere else: the CLI runner
(conformance.apps.runner), the pytest plugin, ``conformance repro``, saved repro.py
scripts, replay and bench/. For each value batch the checker evaluates the oracle,
computes the implementation-defined masks, runs each backend, judges its results by
the spec's verdict kind (conformance.checking.verdicts), compares backends with each other,
and, for a divergence, minimises the case; for a crash or hang it finds the culprit
case. Front-ends decide only what to do with the outcome (stream records, fail a
pytest test, print).

Collective ops (issue 18) run on a process grid: a signature's ``num_replicas`` ×
``num_partitions``. The checker passes the grid on to backends and oracle in the
signature; per-process inputs and results carry one set per process on the axis
after the case axis (``processes(sig)``), and every verdict kind judges them as
further elements of the case.
"""
from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from typing import Any, Callable, Sequence

import numpy as np

from conformance import oracles
from conformance.backends import Backend, Unsupported
from conformance.checking.compare import (ELEMENT_CLASSES, PASS, BatchVerdict, reduce_to_cases,
                                          classify)
from conformance.core.case import Case, Signature
from conformance.core.types import element_type
from conformance.checking.minimize import element_mask, minimize
from conformance.checking.stage_clock import run_stage, stage
from conformance.specs import Accuracy, OpSpec, load_spec
from conformance.checking.verdicts import Judgement, judge

#: how much of a backend's error message a record keeps
ERROR_TEXT_LIMIT = 4000


def failure_class(e: BaseException) -> str:
    """The outcome class of an exception a backend raised while running a case."""
    from conformance.checking.isolation import BackendCrash, BackendTimeout
    if isinstance(e, BackendCrash):
        return "crash"
    if isinstance(e, BackendTimeout):
        return "timeout"
    return "backend_error"


def error_text(e: BaseException, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``Type: message`` with the whole message (many exceptions say what matters after
    their first line), bounded in length, without what names the caller's Python frames
    (:func:`without_python_frames`): a reason is the backend's message, the same
    whichever route (serial, a worker process, the plugin) reached the case."""
    text = f"{type(e).__name__}: {without_python_frames(str(e)).strip()}"
    return text if len(text) <= limit else text[:limit - 15] + " ... (cut)"


#: jaxlib appends the Python stack that traced the failing op to an XLA error
_SUSPECTED = re.compile(r"[ \t\n]*Suspected Python Code Location:[ \t]*\n"
                        r"(?:[ \t]+[^\n]*(?:\n|$))*")
#: ... and names it in the HLO op's metadata
_STACK_FRAME_ID = re.compile(r"\s*stack_frame_id=\d+")
#: an MLIR location that names a Python source file (a frame of whoever traced the op)
_PY_FILE = re.compile(r"\.py\"?:\d+")


def without_python_frames(text: str) -> str:
    """``text`` without the Python call stack jax attaches to an error: jaxlib's
    "Suspected Python Code Location:" paragraph, ``stack_frame_id=N`` in HLO metadata,
    and MLIR locations (``loc(callsite(...))``) naming Python files (they become
    ``loc(unknown)``). Those frames are the suite's own (runner, executor, plugin) and
    differ between routes to the same case; the backend's message stays as it is."""
    if "Suspected Python Code Location:" in text:
        text = _SUSPECTED.sub("\n", text)
    if "stack_frame_id=" in text:
        text = _STACK_FRAME_ID.sub("", text)
    if "loc(" in text:
        text = _without_python_locations(text)
    return text


def _without_python_locations(text: str) -> str:
    out, i = [], 0
    while True:
        j = text.find("loc(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        depth, k, quoted = 0, j + 3, False
        while k < len(text):               # the matching parenthesis (quotes skipped)
            c = text[k]
            if c == '"' and text[k - 1] != "\\":
                quoted = not quoted
            elif not quoted and c == "(":
                depth += 1
            elif not quoted and c == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        if depth != 0:                      # unbalanced: leave the rest as it is
            out.append(text[i:])
            return "".join(out)
        loc = text[j:k + 1]
        out.append(text[i:j])
        out.append("loc(unknown)" if _PY_FILE.search(loc) else loc)
        i = k + 1


def processes(sig: Signature) -> int:
    """How many processes a signature runs on (its replicas × partitions)."""
    return int(sig.num_replicas) * int(sig.num_partitions)


def accuracy_of(spec: OpSpec, sig: Signature, tolerances: dict | None = None) -> Accuracy:
    """The spec's verdict for the signature, or a tolerance profile's override."""
    return spec.signature_accuracy(sig, (tolerances or {}).get(spec.name))


@dataclasses.dataclass
class CaseResult:
    """One case judged on one backend."""

    cls: str                          # pass, a divergence class, unsupported, ...
    expected: list[np.ndarray]
    actual: list[np.ndarray] | None
    message: str = ""


def check_case(backend: Backend, case: Case, accuracy: Accuracy | None = None) -> CaseResult:
    """Run one case on a backend (its one-case executable) and judge it as a batch of
    one. ``accuracy`` overrides the spec's verdict (a tolerance profile's)."""
    spec = load_spec(case.op)
    sig = case.signature
    stacked = [x[None] for x in case.inputs]
    with np.errstate(all="ignore"):
        expected = list(oracles.evaluate_batch(sig, stacked, spec))
        try:
            actual = [np.asarray(a)[None] for a in backend.run(case)]
        except Unsupported as e:
            return CaseResult("unsupported", [x[0] for x in expected], None, str(e))
        except Exception as e:  # noqa: BLE001 - the backend's own failure is the finding
            return CaseResult(failure_class(e), [x[0] for x in expected], None, error_text(e))
        masks = oracles.implementation_defined(sig, stacked, spec, expected)
        verdict = judge(Judgement(sig, spec, accuracy or spec.signature_accuracy(sig), stacked,
                                  expected, actual, masks,
                                  lambda xs: oracles.evaluate_batch(sig, xs, spec),
                                  lambda: [np.asarray(a)[None] for a in backend.run(case)],
                                  rules_on=_rules_on(sig, spec),
                                  run_on=lambda xs: backend.batch_executable(sig)(xs),
                                  run_fresh=lambda xs: backend.fresh_batch_executable(sig)(xs)))
    notes = verdict.notes or [""]     # (property verdicts say which)
    return CaseResult(verdict.case_class_names()[0], [e[0] for e in expected],
                      [a[0] for a in actual], verdict.type_message or notes[0])


def _rules_on(sig: Signature, spec: OpSpec):
    """The spec's implementation-defined rules on other inputs of the signature (and the
    oracle's results on them): what the verdict needs to judge a flush."""
    return lambda xs, ys: oracles.implementation_defined(sig, xs, spec, ys)


def check_invalid(backend: Backend, case: Case) -> tuple[str, str | None]:
    """A program that breaks a rule must be rejected: (``rejected``, ``unsupported``,
    ``accepted_invalid``, ``crash`` or ``timeout``; the backend's reason)."""
    try:
        backend.run(case)
    except Unsupported as e:
        if getattr(backend, "compiles_invalid", True):
            from conformance.backends.vendor import warn_never_compiled
            if warn_never_compiled(backend, case.signature, e):
                return "unsupported", f"{e} (declared without compiling the program)"
        return "unsupported", str(e)
    except Exception as e:  # noqa: BLE001 - rejecting the program is the right answer
        outcome = failure_class(e)
        return ("rejected" if outcome == "backend_error" else outcome), error_text(e)
    return "accepted_invalid", "the backend ran a program that breaks this rule"


def check_example(backend: Backend, example) -> tuple[str, str | None, list | None]:
    """A spec example (conformance.checking.golden): (outcome, message, actual results);
    outcome ``pass``, ``fail``, ``unsupported`` or a failure class."""
    from conformance.checking import golden
    try:
        actual = [np.asarray(a) for a in backend.run(example.case)]
    except Unsupported as e:
        return "unsupported", str(e), None
    except Exception as e:  # noqa: BLE001
        return failure_class(e), error_text(e), None
    problem = golden.mismatch(example, actual)
    return ("pass" if problem is None else "fail"), problem, actual


# ---------------------------------------------------------------------------
# A signature against backends, batch by batch
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class BackendBatch:
    """One backend's part of a batch."""

    name: str
    actual: list | None = None
    verdict: BatchVerdict | None = None
    error: BaseException | None = None
    outcome: str | None = None        # unsupported or a failure class when it raised

    @property
    def diverges(self) -> bool:
        return self.verdict is not None and bool((self.verdict.case_classes != PASS).any())


@dataclasses.dataclass
class Batch:
    index: int
    stacked: list[np.ndarray]
    expected: list[np.ndarray]
    masks: oracles.RuleMasks
    results: dict[str, BackendBatch]
    suspects: np.ndarray | None = None   # per case: every backend agrees against the oracle

    @property
    def size(self) -> int:
        return int(self.stacked[0].shape[0]) if self.stacked else 1


class OracleFailure(Exception):
    """The oracle failed on a batch (a suite bug, not the backend's)."""


@dataclasses.dataclass
class Divergence:
    """One diverging case of a batch, minimised."""

    backend: str
    cls: str                        # the class the case was counted for
    case: Case                      # as drawn (with its case id)
    small: Case                     # minimised (== case when it could not be)
    small_cls: str | None           # its class when run alone (None: only in the batch)
    expected: list[np.ndarray]      # of ``small`` (oracle)
    actual: list[np.ndarray] | None  # of ``small`` (backend)
    message: str
    batch_count: int                # cases of the batch with class ``cls``
    #: which side is wrong, by the mpmath arbiter (conformance.checking.arbiter), where the spec
    #: gives the op's true value (``reference:``) and the class is about values
    arbiter: dict | None = None


class SignatureCheck:
    """A signature compiled once on each backend and checked batch after batch."""

    def __init__(self, spec: OpSpec, sig: Signature, backends: Sequence[Backend],
                 accuracy: Accuracy | None = None,
                 case_id: Callable[[int, int], str | None] | None = None) -> None:
        self.spec, self.sig = spec, sig
        self.backends = {b.name: b for b in backends}
        self.accuracy = accuracy or spec.signature_accuracy(sig)
        self.case_id = case_id or (lambda batch, case: None)
        self.executables: dict[str, Callable] = {}
        self.unsupported: dict[str, str] = {}
        self.failed: dict[str, tuple[str, str]] = {}     # name -> (outcome, error text)
        self.pairs: dict[str, int] = defaultdict(int)
        #: pair -> cases both backends produced results for (a backend that declined,
        #: failed or crashed on a batch compares nothing there)
        self.compared: dict[str, int] = defaultdict(int)
        self.produced: list[str] = []          # backends that produced a result at all
        self.cases_compared = 0
        self.suspects = 0

    # -- compile -----------------------------------------------------------------------
    def compile(self) -> dict[str, Callable]:
        """Compile on every backend; the ones that cannot are in ``unsupported`` (with
        the reason) or ``failed`` (with the failure class and the error)."""
        for name, b in self.backends.items():
            try:
                with stage("compile"):
                    self.executables[name] = b.batch_executable(self.sig)
                if not self.sig.invalid:
                    from conformance.backends.vendor import note_compiled
                    note_compiled(b, self.sig.op)
            except Unsupported as e:
                from conformance.checking.decomposable import no_excuse
                divergence = no_excuse(self.spec, self.sig, b, e)   # (composite)
                if divergence:
                    self.failed[name] = ("backend_error", divergence)
                else:
                    self.unsupported[name] = str(e)
            except Exception as e:  # noqa: BLE001 - the backend's failure is a finding
                self.failed[name] = (failure_class(e), error_text(e))
        return self.executables

    # -- one batch ---------------------------------------------------------------------
    def run_batch(self, index: int, stacked: Sequence[np.ndarray]) -> Batch:
        """Oracle, masks, every compiled backend, verdicts and the cross-backend view.
        A backend that raises is dropped from later batches (``BackendBatch.error``).
        Raises :class:`OracleFailure` when the oracle does."""
        stacked = list(stacked)
        sig, spec = self.sig, self.spec
        with np.errstate(all="ignore"):
            try:
                with stage("oracle"):
                    expected = list(oracles.evaluate_batch(sig, stacked, spec))
                    masks = oracles.implementation_defined(sig, stacked, spec, expected)
            except Exception as e:  # noqa: BLE001
                raise OracleFailure(error_text(e)) from e
            results: dict[str, BackendBatch] = {}
            for name, exe in list(self.executables.items()):
                r = results[name] = BackendBatch(name)
                try:
                    with run_stage(exe):
                        r.actual = exe(stacked)
                except Exception as e:  # noqa: BLE001 - error, crash or hang of the backend
                    r.error = e
                    r.outcome = "unsupported" if isinstance(e, Unsupported) else failure_class(e)
                    del self.executables[name]
                    continue
                with stage("verdict"):
                    r.verdict = judge(Judgement(sig, spec, self.accuracy, stacked, expected,
                                                r.actual, masks,
                                                lambda xs: oracles.evaluate_batch(sig, xs, spec),
                                                lambda exe=exe: exe(stacked),
                                                rules_on=_rules_on(sig, spec),
                                                run_on=exe,
                                                run_fresh=lambda xs, b=self.backends[name]:
                                                    b.fresh_batch_executable(sig)(xs)))
            batch = Batch(index, stacked, expected, masks, results)
            with stage("cross"):
                batch.suspects = self._cross(batch)
        return batch

    def _cross(self, batch: Batch) -> np.ndarray | None:
        """Backends compared with each other, case by case: pairwise disagreements, and
        cases where every backend diverges from the oracle but all agree with each other
        (a suspected oracle defect).

        Only backends that produced a result on the batch take part: one that declined
        the signature (unsupported), failed to compile it, or crashed, errored or hung
        on the batch neither agrees nor disagrees, and a suspect needs two that did."""
        judged = {n: r for n, r in batch.results.items() if r.verdict is not None}
        for name in judged:
            if name not in self.produced:
                self.produced.append(name)
        if len(judged) < 2:
            return None
        names = list(judged)
        n = batch.size
        self.cases_compared += n
        agree_all = np.ones(n, bool)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                same = self._agree(judged[a].actual, judged[b].actual, batch)
                self.pairs[f"{a}~{b}"] += int(np.count_nonzero(~same))
                self.compared[f"{a}~{b}"] += n
                agree_all &= same
        all_diverge = np.all([r.verdict.case_classes != PASS for r in judged.values()], axis=0)
        suspects = all_diverge & agree_all
        self.suspects += int(np.count_nonzero(suspects))
        return suspects

    def _agree(self, x, y, batch: Batch) -> np.ndarray:
        """Per case: do two backends' results match each other under the op's verdict?
        Implementation-defined elements may differ between backends and are ignored.
        Element-wise kinds compare element by element; other kinds judge one backend's
        results with the other's standing in for the oracle's."""
        n = batch.size
        if self.accuracy.kind not in ("exact", "bits", "ulp", "rel_eps"):
            try:
                v = judge(Judgement(self.sig, self.spec, self.accuracy, batch.stacked,
                                    [np.asarray(a) for a in x], y, batch.masks))
            except Exception:  # noqa: BLE001 - no comparison: count as disagreeing
                return np.zeros(n, bool)
            return v.case_classes == PASS
        out = np.ones(n, bool)
        for i, (a, b) in enumerate(zip(x, y)):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape or a.dtype != b.dtype:
                return np.zeros(n, bool)
            cls, _ = classify(a, b, self.accuracy)
            for rule in batch.masks:
                m = batch.masks.for_result(rule, i)
                cls = np.where(np.broadcast_to(m, cls.shape), PASS, cls)
            out &= reduce_to_cases(cls) == PASS
        return out

    def cross_record(self) -> dict[str, Any]:
        return {"backends": list(self.backends), "cases": self.cases_compared,
                "disagreements": dict(self.pairs), "oracle_suspects": self.suspects,
                "produced": list(self.produced), "compared": dict(self.compared)}

    # -- one diverging case ------------------------------------------------------------
    def case_of(self, batch: Batch, c: int) -> Case:
        return Case(self.sig, tuple(np.array(x[c], order="C") for x in batch.stacked),
                    self.case_id(batch.index, c))

    def representative(self, name: str, batch: Batch, cls: str) -> int:
        """The case of the batch to show for class ``cls``: the first one, or for
        ``accuracy`` the one with the largest error (the worst case found)."""
        verdict = batch.results[name].verdict
        names = verdict.case_class_names()
        cases = [c for c, n in enumerate(names) if n == cls]
        if cls != "accuracy":
            return cases[0]
        best, worst = cases[0], -1.0
        code = ELEMENT_CLASSES.index(cls)
        for classes, errors in zip(verdict.element_classes, verdict.errors):
            if errors is None:
                continue
            for c in cases:
                err = np.where(classes[c] == code, errors[c], -1.0)
                m = float(np.nanmax(err)) if err.size else -1.0
                if m > worst:
                    best, worst = c, m
        return best

    def _focus(self, verdict, c: int, cls: str) -> np.ndarray:
        """The elements of case ``c`` to minimise towards: those of class ``cls``, and for
        ``accuracy`` only the one with the largest error."""
        focus = ELEMENT_CLASSES.index(cls) if cls in ELEMENT_CLASSES else None
        mask = element_mask(verdict.element_classes, c, focus)
        errors = verdict.errors[0] if verdict.errors else None
        if cls == "accuracy" and errors is not None and mask.shape == np.shape(errors[c]) \
                and mask.any():
            err = np.where(mask, errors[c], -1.0)
            worst = np.zeros(mask.shape, bool)
            worst[np.unravel_index(int(np.nanargmax(err)), mask.shape)] = True
            return worst
        return mask

    def divergence(self, name: str, batch: Batch, c: int, cls: str) -> Divergence:
        """:meth:`_divergence`, its time charged to minimising."""
        with stage("minimise"):
            return self._divergence(name, batch, c, cls)

    def _divergence(self, name: str, batch: Batch, c: int, cls: str) -> Divergence:
        """Case ``c`` of the batch, counted as class ``cls`` on backend ``name``,
        minimised to the fewest elements that still diverge with that class when the
        backend runs it alone (its one-case executable)."""
        backend = self.backends[name]
        verdict = batch.results[name].verdict
        case = self.case_of(batch, c)
        names = verdict.case_class_names()
        count = int(sum(1 for x in names if x == cls))

        def check(k: Case) -> str | None:
            got = check_case(backend, k, self.accuracy).cls
            return None if got in ("pass", "unsupported") else got

        if verdict.type_message:
            small, small_cls = case, "type"
        else:
            try:
                small, small_cls = minimize(self.spec, case, self._focus(verdict, c, cls),
                                            check)
            except Exception:  # noqa: BLE001 - the minimiser must not hide the divergence
                small, small_cls = case, None
        if small_cls is not None:
            r = check_case(backend, small, self.accuracy)
            d = Divergence(name, cls, case, small, small_cls, r.expected, r.actual,
                           verdict.type_message or r.message, count)
        else:
            # Diverges only in the batch: show the batch's case.
            actual = batch.results[name].actual
            d = Divergence(name, cls, case, case, None,
                           [np.asarray(e[c]) for e in batch.expected],
                           [np.asarray(a[c]) for a in actual] if not verdict.type_message
                           else [np.asarray(a) for a in actual],
                           verdict.type_message or (verdict.notes or
                                                    [""] * (c + 1))[c], count)
        d.arbiter = self._arbitrate(d)
        return d

    def _arbitrate(self, d: Divergence) -> dict | None:
        """The mpmath arbiter's verdict on the minimised case's first diverging element
        (element-wise ops with a ``reference:`` in their spec)."""
        reference = self.spec.data.get("reference")
        if not reference or not self.spec.elementwise or d.actual is None \
                or d.cls not in ("accuracy", "value", "nan"):
            return None
        try:
            e, a = np.asarray(d.expected[0]), np.asarray(d.actual[0])
            et = element_type(e.dtype)
            if not (et.is_float or et.is_complex) or a.shape != e.shape:
                return None
            cls, err = classify(a, e, self.accuracy)
            bad = np.argwhere(np.asarray(cls).reshape(e.shape) != PASS)
            if not len(bad):
                return None
            if err is not None and np.ndim(err):
                errs = np.where(np.asarray(cls) != PASS, err, -1.0)
                idx = np.unravel_index(int(np.nanargmax(errs)), e.shape)
            else:
                idx = tuple(bad[0])
            inputs = [np.asarray(x)[idx] if np.ndim(x) else np.asarray(x)[()]
                      for x in d.small.inputs]
            names = [t.name for t in self.spec.inputs]
            from conformance.checking.arbiter import arbitrate
            return {"element": [int(i) for i in idx],
                    **arbitrate(reference, names, inputs, e[idx], a[idx],
                                max(self.accuracy.bound, 0.0))}
        except Exception:  # noqa: BLE001 - the arbiter must not hide the divergence
            return None

    def culprit(self, name: str, batch: Batch, outcome: str) -> tuple[int, Case] | None:
        """The case of a batch that crashes (or hangs) the backend, found by bisection in
        the backend's own process, with its index in the batch; None if no single case
        does it again."""
        backend = self.backends[name]
        stacked = batch.stacked
        lo, hi = 0, batch.size if stacked else 0
        run = backend.batch_executable(self.sig) if hi else None

        def fails(a: int, b: int) -> bool:
            try:
                run([x[a:b] for x in stacked])
            except Exception as e:  # noqa: BLE001
                return failure_class(e) == outcome
            return False

        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fails(lo, mid):
                hi = mid
            elif fails(mid, hi):
                lo = mid
            else:
                return None
        if hi - lo == 1 and fails(lo, hi):
            return lo, self.case_of(batch, lo)
        return None
