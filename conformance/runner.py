"""The differential runner: generate, run on every backend, compare with the oracle,
stream results, minimise and save every divergence.

Work is grouped in *units*, one per op. For each of the op's type bindings (its
matrix columns) the runner draws signatures with hypothesis (seeded: the same
command gives the same cases), compiles each signature once per backend, and runs
several batches of vectorised value cases through it. Then every rule of the spec
is broken on purpose (invalid signatures the backends must reject), and the spec's
examples are run.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
import traceback
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

from conformance import golden, oracles
from conformance.backends import Backend, Unsupported
from conformance.core.case import Case, Signature
from conformance.compare import (ELEMENT_CLASSES, PASS, BatchVerdict, compare_batch, max_error,
                                 ulp_histogram)
from conformance.generators import (batch_inputs, breakable, candidates, canonical,
                                    signatures, unbreakable)
from conformance.generators.signatures import SHAPE_PROFILES
from conformance.minimize import element_mask, minimize
from conformance.repro import case_record, check_case, folder_name, save
from conformance.core.results import ResultsWriter, finite_or_none
from conformance.specs import OpSpec, binding_key, load_spec, op_names
from conformance.specs.validity import violations
from conformance.core.types import element_type


@dataclasses.dataclass(frozen=True)
class Depth:
    """How hard a run looks."""

    signatures: int            # signatures per type binding
    batches: int               # value batches per signature
    batch_size: int            # value cases per batch
    invalid_per_rule: int      # invalid signatures per rule of the spec
    shape_profile: str
    max_signatures_per_op: int  # ops with many bindings (convert) get fewer per binding


DEPTHS = {
    "quick": Depth(2, 1, 32, 1, "quick", 60),
    "default": Depth(4, 3, 64, 1, "default", 160),
    "deep": Depth(16, 8, 256, 3, "deep", 1200),
}


@dataclasses.dataclass
class RunConfig:
    backends: Sequence[str] = ("jax",)
    ops: Sequence[str] | None = None
    families: Sequence[str] | None = None
    element_types: Sequence[str] | None = None
    depth: str = "default"
    seed: int = 0
    out: Path = Path("conformance-report")
    max_repros: int = 2          # saved reproducers per (backend, op, binding, class)
    tolerances: dict | None = None   # a tolerance profile: {op: accuracy table}
    isolate: bool | None = None      # run backends in child processes (None: as each asks)
    timeout: float = 60.0            # seconds per compile or batch in an isolated backend
    invalid: bool = True
    examples: bool = True
    progress: bool = True
    replay: bool = True              # re-run the reproducers already in ``out`` first


def select_ops(config: RunConfig) -> list[OpSpec]:
    names = list(config.ops) if config.ops else op_names()
    specs = [load_spec(n) for n in names]
    if config.families:
        specs = [s for s in specs if s.family in set(config.families)]
    return specs


def select_bindings(spec: OpSpec, element_types: Sequence[str] | None) -> list[dict[str, str]]:
    bindings = spec.type_bindings()
    if element_types:
        wanted = {element_type(t).name for t in element_types}
        bindings = [b for b in bindings if wanted & set(b.values())]
    return bindings


def stable_hash(*parts: Any) -> int:
    return zlib.crc32("\x1f".join(map(str, parts)).encode())


def _collect(strategy, n: int, seed: int) -> list:
    """The first ``n`` examples hypothesis generates from ``strategy`` for ``seed``.

    Deterministic for a seed: no example database, generation phase only.
    """
    out: list = []

    @hseed(seed)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), derandomize=False)
    @given(strategy)
    def gather(x):
        out.append(x)

    gather()
    return out[:n]


def signatures_per_binding(spec: OpSpec, depth: Depth) -> int:
    """Signatures planned per type binding: ops with many bindings (convert) get fewer.

    It depends on the op and the depth only, never on the run's filters, so a case id
    (seed, depth, op, type key, indices) names the same case in every run that has it:
    a ``--types f32`` run draws exactly the f32 signatures of the full run.
    """
    n_bindings = len(spec.type_bindings())
    return max(1, min(depth.signatures, depth.max_signatures_per_op // max(1, n_bindings)))


def plan_binding(spec: OpSpec, binding: dict[str, str], config: RunConfig) -> list[Signature]:
    """The signatures the runner runs for one type binding (index = position)."""
    depth = DEPTHS[config.depth]
    return plan_signatures(spec, binding, signatures_per_binding(spec, depth), config.seed,
                           depth.shape_profile)


def batch_for(config: RunConfig, spec: OpSpec, key: str, index: int, batch: int,
              sig: Signature) -> list[np.ndarray]:
    """The stacked inputs of value batch ``batch`` of signature ``index`` of binding
    ``key``: what the runner feeds the backend, and what ``conformance repro`` rebuilds."""
    rng = np.random.default_rng([config.seed, stable_hash(spec.name, key), index, batch])
    return batch_inputs(sig, rng, DEPTHS[config.depth].batch_size, spec)


def plan_signatures(spec: OpSpec, binding: dict[str, str], n: int, seed: int,
                    profile: str) -> list[Signature]:
    sigs = _collect(signatures(spec, binding, profile), n,
                    stable_hash(seed, spec.name, binding_key(binding)))
    unique: list[Signature] = []
    for s in sigs:
        if s not in unique:
            unique.append(s)
    return unique


def plan_invalid(spec: OpSpec, rule: str, n: int, seed: int,
                 valid: Sequence[Signature]) -> list[Signature]:
    """``n`` signatures breaking ``rule`` alone, each a single change of a valid one.

    Deterministic: the valid signatures are the unit's own plan plus canonical
    small ones; the changes are picked with a seeded generator.
    """
    bindings = spec.type_bindings()
    step = max(1, len(bindings) // 6)
    pool = list(valid) + [canonical(spec, b) for b in bindings[::step]]
    rng = np.random.default_rng([seed, stable_hash(spec.name, "invalid", rule)])
    out: list[Signature] = []
    for i in rng.permutation(len(pool)):
        found = candidates(spec, pool[i], rule)
        if found:
            out.append(found[int(rng.integers(len(found)))])
            if len(out) == n:
                break
    return out


@dataclasses.dataclass
class CellStats:
    """Totals for one (backend, op, binding) cell, kept for the run summary."""

    cases: dict[str, int] = dataclasses.field(default_factory=lambda: defaultdict(int))
    repros: dict[str, int] = dataclasses.field(default_factory=lambda: defaultdict(int))


class Runner:
    def __init__(self, config: RunConfig, backends: Sequence[Backend], writer: ResultsWriter,
                 on_progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.depth = DEPTHS[config.depth]
        self.backends = list(backends)
        self.writer = writer
        self.cells: dict[tuple[str, str, str], CellStats] = defaultdict(CellStats)
        self.on_progress = on_progress or (lambda _: None)
        self.repro_dir = Path(config.out) / "repros"

    # -- top level -------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        return {"kind": "run", "seed": self.config.seed, "depth": self.config.depth,
                "out": str(self.config.out),
                "backends": [b.describe() for b in self.backends],
                "locators": [b.locator for b in self.backends],
                "ops": self.config.ops, "families": self.config.families,
                "element_types": self.config.element_types,
                "invalid": self.config.invalid, "examples": self.config.examples,
                "max_repros": self.config.max_repros, "tolerances": self.config.tolerances,
                "started": time.time()}

    def run_unit(self, spec: OpSpec) -> None:
        """Everything for one op: valid cases per binding, invalid cases, examples.

        Floating-point warnings are silenced: NaNs and overflows are what we test.
        """
        with np.errstate(all="ignore"):
            self._run_unit(spec)

    def _run_unit(self, spec: OpSpec) -> None:
        bindings = select_bindings(spec, self.config.element_types)
        planned: list[Signature] = []
        for binding in bindings:
            key = binding_key(binding)
            self.on_progress(f"{spec.name} {key}")
            try:
                plan = plan_binding(spec, binding, self.config)
            except Exception as e:  # noqa: BLE001 - a generator bug must not stop the run
                self._internal_error(spec.name, key, "generating signatures", e)
                continue
            planned += plan
            self._record_validity(spec, key, plan)
            for i, sig in enumerate(plan):
                self.run_signature(spec, key, i, sig)
        if self.config.invalid:
            self.run_invalid(spec, planned)
        if self.config.examples:
            self.run_examples(spec)
        self.writer.write({"kind": "unit_done", "op": spec.name})

    # -- valid signatures --------------------------------------------------------------
    def _record_validity(self, spec: OpSpec, key: str, plan: Sequence[Signature]) -> None:
        """Validity is measured, not assumed: every planned signature is checked
        against the spec's constraint expressions and type tables."""
        broken = {s.key(): violations(s, spec) for s in plan}
        bad = {k: v for k, v in broken.items() if v}
        self.writer.write({"kind": "validity", "op": spec.name, "type_key": key,
                           "generated": len(plan), "valid": len(plan) - len(bad),
                           "invalid_examples": dict(list(bad.items())[:3])})

    def _executables(self, sig: Signature, record_base: dict) -> dict[str, Any]:
        exes = {}
        for b in self.backends:
            try:
                exes[b.name] = b.batch_executable(sig)
            except Unsupported as e:
                self.writer.write({**record_base, "backend": b.name, "outcome": "unsupported",
                                   "reason": str(e), "cases": 0, "counts": {}})
            except Exception as e:  # noqa: BLE001 - the backend's failure is a finding
                outcome = failure_class(e)
                self.writer.write({**record_base, "backend": b.name, "outcome": outcome,
                                   "reason": _one_line(e), "cases": 0, "counts": {}})
                self.cells[(b.name, sig.op, record_base["type_key"])].cases[outcome] += 1
        return exes

    def run_signature(self, spec: OpSpec, key: str, index: int, sig: Signature) -> None:
        base = {"kind": "signature", "op": spec.name, "family": spec.family, "type_key": key,
                "signature": sig.key(), "index": index}
        exes = self._executables(sig, base)
        if not exes:
            return
        accuracy = self.accuracy(spec, sig)
        totals = {name: _Totals() for name in exes}
        cross = _Cross(list(exes))
        for batch in range(self.depth.batches):
            stacked = batch_for(self.config, spec, key, index, batch, sig)
            try:
                expected = oracles.evaluate_batch(sig, stacked, spec)
                masks = oracles.implementation_defined(sig, stacked, spec, expected)
            except Exception as e:  # noqa: BLE001
                self._internal_error(spec.name, key, f"oracle on {sig.key()}", e)
                return
            actuals, verdicts = {}, {}
            for name, exe in list(exes.items()):
                try:
                    actuals[name] = exe(stacked)
                except Exception as e:  # noqa: BLE001 - error, crash or hang of the backend
                    self._backend_failed(spec, key, index, sig, name, batch, stacked, e,
                                         totals[name])
                    del exes[name]
                    continue
                verdicts[name] = compare_batch(expected, actuals[name], accuracy, masks, stacked,
                                               lambda xs: oracles.evaluate_batch(sig, xs, spec))
                totals[name].add(verdicts[name])
            suspects = cross.add(actuals, verdicts, accuracy, masks)
            for name, verdict in verdicts.items():
                if (verdict.case_classes != PASS).any():
                    self._record_divergences(spec, key, index, sig, name, batch, stacked,
                                             expected, actuals[name], verdict, suspects)
        for name, t in totals.items():
            self.writer.write({**base, "backend": name, **t.record()})
            cell = self.cells[(name, spec.name, key)]
            for cls, n in t.counts.items():
                cell.cases[cls] += n
        if len(cross.names) > 1:
            self.writer.write({"kind": "cross", "op": spec.name, "family": spec.family,
                               "type_key": key, "signature": sig.key(), **cross.record()})

    def _backend_failed(self, spec, key, index, sig, name, batch, stacked, error, totals) -> None:
        """A batch made the backend raise, crash or hang: count the batch, and for a crash
        or hang find the one case that does it and save it as a reproducer."""
        outcome = failure_class(error)
        totals.error = _one_line(error)
        totals.outcome = outcome
        totals.counts[outcome] += stacked[0].shape[0] if stacked else 1
        if outcome not in ("crash", "timeout"):
            return
        cell = self.cells[(name, spec.name, key)]
        if cell.repros[outcome] >= self.config.max_repros:
            return
        backend = self._backend(name)
        found = _culprit(backend, sig, stacked, outcome)
        if found is None:
            return
        c, case = found
        cell.repros[outcome] += 1
        case_id = self.case_id(spec.name, key, index, batch, c)
        case = Case(sig, case.inputs, case_id)
        accuracy = self.accuracy(spec, sig)
        expected = list(oracles.evaluate(sig.op, case.inputs, sig.attributes,
                                         result_types=sig.result_types,
                                         input_types=sig.input_types,
                                         regions=sig.regions))
        folder = self.repro_dir / folder_name(name, spec.name, key, outcome, cell.repros[outcome])
        save(folder, backend.locator, case, outcome, expected, None,
             {"original_case_id": case_id, "original_inputs": [_enc(x) for x in case.inputs],
              "accuracy": {"kind": accuracy.kind, "bound": accuracy.bound}})
        self.writer.write({
            "kind": "divergence", "backend": name, "op": spec.name, "family": spec.family,
            "type_key": key, "class": outcome, "minimised_class": outcome, "case_id": case_id,
            "signature": sig.key(), "minimised_signature": sig.key(), "reproduces_alone": True,
            "case": case_record(case), "expected": [_enc(x) for x in expected], "actual": None,
            "message": _one_line(error), "stablehlo": case_record(case)["stablehlo"],
            "repro": str(folder.relative_to(Path(self.config.out))), "batch_count": None})

    def case_id(self, op: str, key: str, index: int, batch: int, case: int) -> str:
        """``seed:depth:op:type_key:signature_index:batch:case_index`` (see
        :mod:`conformance.replay`, which parses it and rebuilds the case)."""
        return f"{self.config.seed}:{self.config.depth}:{op}:{key}:{index}:{batch}:{case}"

    def accuracy(self, spec: OpSpec, sig: Signature):
        """The spec's bound for the case's element type, or the tolerance profile's."""
        overrides = (self.config.tolerances or {}).get(spec.name)
        return spec.signature_accuracy(sig, overrides)

    def _backend(self, name: str) -> Backend:
        return next(b for b in self.backends if b.name == name)

    def _record_divergences(self, spec, key, index, sig, backend_name, batch, stacked,
                            expected, actual, verdict: BatchVerdict,
                            suspects: np.ndarray | None = None) -> None:
        cell = self.cells[(backend_name, spec.name, key)]
        names = verdict.case_class_names()
        seen_here: set[str] = set()
        for c in verdict.diverging_cases():
            cls = names[c]
            if cls in seen_here or cell.repros[cls] >= self.config.max_repros:
                continue
            seen_here.add(cls)
            cell.repros[cls] += 1
            case_id = self.case_id(spec.name, key, index, batch, int(c))
            case = Case(sig, tuple(np.array(x[c], order="C") for x in stacked), case_id)
            backend = self._backend(backend_name)
            accuracy = self.accuracy(spec, sig)
            if verdict.type_message:
                small, small_cls = case, "type"
            else:
                mask = element_mask(verdict.element_classes, c, int(verdict.case_classes[c]))
                small, small_cls = minimize(spec, case, mask,
                                            lambda k: _check(backend, k, accuracy))
            exp_small, act_small = _results(backend, small, accuracy)
            folder = self.repro_dir / folder_name(backend_name, spec.name, key, cls,
                                                  cell.repros[cls])
            save(folder, backend.locator, small, small_cls or cls, exp_small, act_small,
                 {"original_case_id": case_id,
                  "original_inputs": [_enc(x) for x in case.inputs],
                  "accuracy": {"kind": accuracy.kind, "bound": accuracy.bound}})
            self.writer.write({
                "kind": "divergence", "backend": backend_name, "op": spec.name,
                "family": spec.family, "type_key": key, "class": cls,
                "minimised_class": small_cls, "case_id": case_id,
                "signature": sig.key(), "minimised_signature": small.signature.key(),
                "reproduces_alone": small_cls is not None,
                "case": case_record(small),
                "expected": [_enc(x) for x in exp_small],
                "actual": [_enc(x) for x in act_small] if act_small is not None else None,
                "message": verdict.type_message,
                "stablehlo": case_record(small)["stablehlo"],
                "repro": str(folder.relative_to(Path(self.config.out))),
                "batch_count": int(sum(1 for n in names if n == cls)),
                "oracle_suspect": bool(suspects is not None and suspects[c])})

    # -- invalid signatures --------------------------------------------------------------
    def run_invalid(self, spec: OpSpec, valid: Sequence[Signature]) -> None:
        for rule, reason in unbreakable(spec.name).items():
            for b in self.backends:
                self.writer.write({"kind": "invalid", "op": spec.name, "family": spec.family,
                                   "backend": b.name, "rule": rule, "outcome": "not_generated",
                                   "reason": reason})
        for rule in breakable(spec):
            self.on_progress(f"{spec.name} !{rule}")
            plan = plan_invalid(spec, rule, self.depth.invalid_per_rule, self.config.seed, valid)
            if not plan:
                for b in self.backends:
                    self.writer.write({"kind": "invalid", "op": spec.name, "family": spec.family,
                                       "backend": b.name, "rule": rule,
                                       "outcome": "not_generated",
                                       "reason": "no change of this run's signatures breaks it "
                                                 "alone"})
                continue
            for i, sig in enumerate(plan):
                rng = np.random.default_rng([self.config.seed, stable_hash(spec.name, rule), i])
                inputs = tuple(x[0] for x in batch_inputs(sig, rng, 1, spec))
                verifier = _verifier_message(sig)
                for b in self.backends:
                    outcome, reason = _run_invalid(b, Case(sig, inputs))
                    self.writer.write({"kind": "invalid", "op": spec.name, "family": spec.family,
                                       "backend": b.name, "rule": rule,
                                       "signature": sig.key(), "outcome": outcome,
                                       "reason": reason, "verifier": verifier})

    # -- spec examples -------------------------------------------------------------------
    def run_examples(self, spec: OpSpec) -> None:
        for ex in golden.examples(spec):
            for b in self.backends:
                try:
                    actual = b.run(ex.case)
                    problem = golden.mismatch(ex, [np.asarray(a) for a in actual])
                    outcome = "pass" if problem is None else "fail"
                except Unsupported as e:
                    outcome, problem = "unsupported", str(e)
                except Exception as e:  # noqa: BLE001
                    outcome, problem = failure_class(e), _one_line(e)
                self.writer.write({"kind": "example", "op": spec.name, "backend": b.name,
                                   "example": ex.name, "index": ex.index, "outcome": outcome,
                                   "message": problem, "signature": ex.case.signature.key()})

    def _internal_error(self, op: str, key: str, what: str, e: Exception) -> None:
        self.writer.write({"kind": "internal_error", "op": op, "type_key": key, "what": what,
                           "error": _one_line(e),
                           "traceback": traceback.format_exc(limit=6)})


class _Totals:
    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.hist = None
        self.max_err: float | None = None
        self.impl: dict[str, dict[str, int]] = {}
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
        for rule, st in v.impl_defined.items():
            d = self.impl.setdefault(rule, {"elements": 0, "conventional": 0})
            d["elements"] += st["elements"]
            d["conventional"] += st["conventional"]
        self.type_message = self.type_message or v.type_message

    def record(self) -> dict[str, Any]:
        cases = sum(self.counts.values())
        diverging = {k: v for k, v in self.counts.items() if k != "pass"}
        outcome = "pass"
        if self.error:
            outcome = self.outcome or "backend_error"
        elif diverging:
            from conformance.compare import worst
            outcome = worst(list(diverging))
        return {"outcome": outcome, "cases": cases, "counts": dict(self.counts),
                "ulp_hist": self.hist, "max_error": finite_or_none(self.max_err),
                "impl_defined": self.impl, "reason": self.error or self.type_message}


class _Cross:
    """Backends compared with each other, case by case: pairwise disagreements, and
    cases where every backend diverges from the oracle but they all agree with each
    other (a suspected oracle defect)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.pairs: dict[str, int] = defaultdict(int)
        self.suspects = 0
        self.cases = 0

    def add(self, actuals: dict, verdicts: dict, accuracy, masks: dict) -> np.ndarray | None:
        if len(verdicts) < 2:
            return None
        names = list(verdicts)
        batch = next(iter(verdicts.values())).case_classes.size
        self.cases += batch
        agree_all = np.ones(batch, bool)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                same = _agree(actuals[a], actuals[b], accuracy, batch, masks)
                self.pairs[f"{a}~{b}"] += int(np.count_nonzero(~same))
                agree_all &= same
        all_diverge = np.all([v.case_classes != PASS for v in verdicts.values()], axis=0)
        suspects = all_diverge & agree_all
        self.suspects += int(np.count_nonzero(suspects))
        return suspects

    def record(self) -> dict[str, Any]:
        return {"backends": self.names, "cases": self.cases, "disagreements": dict(self.pairs),
                "oracle_suspects": self.suspects}


def _agree(x: Sequence[np.ndarray], y: Sequence[np.ndarray], accuracy, batch: int,
           masks: dict) -> np.ndarray:
    """Per case: do two backends' results match each other under the op's rule?
    Implementation-defined elements may differ between backends and are ignored."""
    from conformance.compare import _reduce_to_cases, classify
    out = np.ones(batch, bool)
    for a, b in zip(x, y):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return np.zeros(batch, bool)
        cls, _ = classify(a, b, accuracy)
        for m in masks.values():
            cls = np.where(np.broadcast_to(m, cls.shape), PASS, cls)
        out &= _reduce_to_cases(cls) == PASS
    return out


def _verifier_message(sig: Signature) -> str | None:
    """What the StableHLO dialect's verifier says of an invalid program (None: it
    accepts it, so only a backend's own checks can reject it)."""
    from conformance.emitter import EmitError, verifier_rejects
    try:
        return verifier_rejects(sig)
    except EmitError as e:
        return f"not printable: {e}"


def failure_class(e: BaseException) -> str:
    """The outcome class of an exception a backend raised while running a case."""
    from conformance.isolation import BackendCrash, BackendTimeout
    if isinstance(e, BackendCrash):
        return "crash"
    if isinstance(e, BackendTimeout):
        return "timeout"
    return "backend_error"


def _culprit(backend: Backend, sig: Signature, stacked, outcome: str
             ) -> tuple[int, Case] | None:
    """The case of a batch that crashes (or hangs) the backend, found by bisection in
    the backend's own process, with its index in the batch; None if no single case
    does it again."""
    lo, hi = 0, stacked[0].shape[0] if stacked else 0
    run = backend.batch_executable(sig) if hi else None

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
        return lo, Case(sig, tuple(np.array(x[lo], order="C") for x in stacked))
    return None


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:500]


def _enc(x):
    from conformance.core.literals import encode
    return encode(np.asarray(x))


def _check(backend: Backend, case: Case, accuracy) -> str | None:
    cls, _, _, _ = check_case(backend, case, accuracy)
    return None if cls in ("pass", "unsupported") else cls


def _results(backend: Backend, case: Case, accuracy):
    _, expected, actual, _ = check_case(backend, case, accuracy)
    return expected, actual


def _run_invalid(backend: Backend, case: Case) -> tuple[str, str | None]:
    try:
        backend.run(case)
    except Unsupported as e:
        return "unsupported", str(e)
    except Exception as e:  # noqa: BLE001 - rejecting the program is the right answer
        outcome = failure_class(e)
        return ("rejected" if outcome == "backend_error" else outcome), _one_line(e)
    return "accepted_invalid", "the backend ran a program that breaks this rule"


def _run_unit_in_worker(config: RunConfig, locators: Sequence[str], op: str,
                        part: str) -> tuple[str, dict]:
    """One op in a worker process: records go to ``part``; returns the cell totals."""
    from conformance.backends import get_backend
    backends = _worker_backends(config, tuple(locators))
    with ResultsWriter(part) as writer:
        runner = Runner(config, backends, writer)
        runner.run_unit(load_spec(op))
    return part, {k: {"cases": dict(v.cases), "repros": dict(v.repros)}
                  for k, v in runner.cells.items()}


_WORKER_BACKENDS: dict[tuple[str, ...], list[Backend]] = {}


def _worker_backends(config: RunConfig, locators: tuple[str, ...]) -> list[Backend]:
    """Backends are built once per worker process and reused across its ops."""
    from conformance.backends import get_backend
    if locators not in _WORKER_BACKENDS:
        _WORKER_BACKENDS[locators] = prepare_backends(config,
                                                      [get_backend(x) for x in locators])
    return _WORKER_BACKENDS[locators]


def prepare_backends(config: RunConfig, backends: Sequence[Backend]) -> list[Backend]:
    """Wrap the backends that must run in a child process (``--isolate``, or those whose
    class asks for it, like the StableHLO interpreter)."""
    import re as _re
    from conformance.isolation import isolated
    out = []
    for b in backends:
        wanted = config.isolate if config.isolate is not None else b.isolate
        if not wanted:
            out.append(b)
            continue
        Path(config.out).mkdir(parents=True, exist_ok=True)
        log = Path(config.out) / f"{_re.sub(r'[^A-Za-z0-9_.-]+', '_', b.name)}.stderr.log"
        out.append(isolated(b, config.timeout, str(log)))
    return out


class ResumeError(ValueError):
    """The results file cannot be continued by this run (one-line reason)."""


@dataclasses.dataclass
class ResumeState:
    """What an interrupted run left: the records to keep and the ops that are done."""

    kept: list[dict[str, Any]]     # the header, replays, and the records of done ops
    done: set[str]                 # ops with a ``unit_done`` record


#: header fields that must match for a run to continue another one's results file
RESUME_KEYS = ("seed", "depth", "locators", "ops", "families", "element_types", "invalid",
               "examples", "max_repros", "tolerances")


def _resume_value(key: str, value: Any) -> Any:
    if key in ("ops", "families", "element_types"):    # filters: order does not matter
        return sorted(value) if value else None
    return json.loads(json.dumps(value, sort_keys=True, default=str))   # as the header has it


def load_resume(config: RunConfig, backends: Sequence[Backend],
                results_path: "str | Path") -> ResumeState | None:
    """Read an interrupted run's results file for ``--resume``.

    Returns None when there is no file (nothing to resume: a fresh run). Raises
    :class:`ResumeError` when the file's header says a different seed, depth,
    backends or filters. Records of ops without a ``unit_done`` record (the unit
    that was interrupted) are dropped: that op is run again from its start.
    """
    from conformance.core.results import read_results
    path = Path(results_path)
    if not path.is_file():
        return None
    try:
        records = list(read_results(path))
    except ValueError as e:
        raise ResumeError(f"cannot resume: {e}") from None
    if not records or records[0].get("kind") != "run":
        raise ResumeError(f"{path}: cannot resume: the file has no run header")
    header = records[0]
    mine = {"seed": config.seed, "depth": config.depth,
            "locators": [b.locator for b in backends], "ops": config.ops,
            "families": config.families, "element_types": config.element_types,
            "invalid": config.invalid, "examples": config.examples,
            "max_repros": config.max_repros, "tolerances": config.tolerances}
    if "locators" not in header:        # a header written before locators were recorded
        header = {**header, "locators": [b.get("name") for b in header.get("backends", [])]}
        mine["locators"] = [b.name for b in backends]
    diff = [f"{k} {json.dumps(header.get(k))} (this run: {json.dumps(mine[k])})"
            for k in RESUME_KEYS
            if k in header and _resume_value(k, header[k]) != _resume_value(k, mine[k])]
    if diff:
        raise ResumeError(f"{path}: cannot resume a run with different options: "
                          + "; ".join(diff))
    done = {r["op"] for r in records if r.get("kind") == "unit_done"}
    kept = [records[0]] + [r for r in records[1:]
                           if r.get("kind") == "replay"
                           or (r.get("kind") not in ("run", "end") and r.get("op") in done)]
    return ResumeState(kept, done)


def cells_from_records(records: Sequence[dict[str, Any]]
                       ) -> dict[tuple[str, str, str], CellStats]:
    """The run summary's cell totals, rebuilt from results records (for a resumed run:
    the same totals the runner counted while writing them)."""
    cells: dict[tuple[str, str, str], CellStats] = defaultdict(CellStats)
    for r in records:
        if r.get("kind") == "signature":
            cell = cells[(r["backend"], r["op"], r["type_key"])]
            if r.get("counts"):
                for cls, n in r["counts"].items():
                    cell.cases[cls] += n
            elif r.get("outcome") not in ("unsupported", "pass"):
                cell.cases[r["outcome"]] += 1      # the compile failed: one per signature
        elif r.get("kind") == "divergence":
            cells[(r["backend"], r["op"], r["type_key"])].repros[r["class"]] += 1
    return cells


def run(config: RunConfig, backends: Sequence[Backend], results_path: Path,
        progress: Callable[[str], None] | None = None, jobs: int = 1,
        resume: ResumeState | None = None) -> dict[str, Any]:
    """Run everything the config selects; stream results to ``results_path``.

    With ``jobs`` > 1 the ops are spread over that many worker processes; each op's
    records are appended to the results file as the op completes. Every op is
    seeded on its own, so the cases and verdicts are those of a serial run.

    Before any new case, the reproducers an earlier run saved under ``config.out``
    are re-run on these backends (``replay`` records; ``config.replay=False`` skips
    it). With ``resume`` (see :func:`load_resume`) the file keeps the records of the
    ops already done and only the other ops run, appended after them.
    """
    started = time.time()
    specs = select_ops(config)
    results_path = Path(results_path)
    saved = []
    if config.replay and resume is None:
        from conformance.replay import saved_cases
        saved = saved_cases(Path(config.out))      # read before this run overwrites them
    if jobs <= 1:
        backends = prepare_backends(config, backends)
    replays: list[dict[str, Any]] = []
    if resume is not None:
        tmp = results_path.with_name(results_path.name + ".resume")
        with ResultsWriter(tmp) as w:
            for r in resume.kept:
                w.write(r)
        os.replace(tmp, results_path)
        replays = [r for r in resume.kept if r.get("kind") == "replay"]
    try:
        with ResultsWriter(results_path, append=resume is not None) as writer:
            runner = Runner(config, backends, writer, progress)
            if resume is None:
                writer.write(runner.header())
            else:
                runner.cells.update(cells_from_records(resume.kept))
            if saved:
                replays = _replay(config, backends, saved, writer, jobs)
            todo = [s for s in specs if resume is None or s.name not in resume.done]
            if jobs <= 1:
                for spec in todo:
                    runner.run_unit(spec)
            else:
                _run_parallel(config, backends, todo, writer, runner, progress, jobs,
                              results_path)
            writer.write({"kind": "end", "elapsed": time.time() - started,
                          "ops": [s.name for s in specs]})
    finally:
        for b in backends:
            close = getattr(b, "close", None)
            if close:
                close()
    return {"elapsed": time.time() - started, "cells": runner.cells, "replays": replays}


def _replay(config, backends, saved, writer, jobs) -> list[dict[str, Any]]:
    """The saved reproducers first, one case each on every backend of this run."""
    from conformance.replay import replay_saved
    own = prepare_backends(config, backends) if jobs > 1 else backends
    try:
        return replay_saved(saved, own, writer, config)
    finally:
        for b in own:
            close = getattr(b, "close", None)
            if close and not any(b is x for x in backends):
                close()


def _run_parallel(config, backends, specs, writer, runner, progress, jobs, results_path):
    import multiprocessing
    import tempfile
    from concurrent.futures import ProcessPoolExecutor, as_completed

    locators = [b.locator for b in backends]
    # The biggest units first (convert, bitcast_convert: hundreds of signatures), so that
    # no worker is left with a long one at the end. The order records are written in
    # changes; the records themselves do not.
    depth = DEPTHS[config.depth]
    specs = sorted(specs, key=lambda s: -len(select_bindings(s, config.element_types))
                   * signatures_per_binding(s, depth))
    ctx = multiprocessing.get_context("spawn")      # jax is not fork-safe
    with tempfile.TemporaryDirectory(dir=results_path.parent, prefix=".parts-") as tmp, \
            ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_run_unit_in_worker, config, locators, s.name,
                               str(Path(tmp) / f"{s.name}.jsonl")): s.name for s in specs}
        for fut in as_completed(futures):
            op = futures[fut]
            if progress:
                progress(f"{op} done")
            try:
                part, cells = fut.result()
            except Exception as e:  # noqa: BLE001 - a dead worker costs its op only
                runner._internal_error(op, "", "worker process", e)
                continue
            for line in Path(part).read_text().splitlines():
                writer.write(json.loads(line))
            for key, cell in cells.items():
                target = runner.cells[key]
                for cls, n in cell["cases"].items():
                    target.cases[cls] += n
                for cls, n in cell["repros"].items():
                    target.repros[cls] += n
