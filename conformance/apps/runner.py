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
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from conformance.checking import golden, plan, verdicts
from conformance.backends import Backend
from conformance.checking.checker import accuracy_of, check_example, check_invalid, error_text
from conformance.checking import stream
from conformance.checking.stage_clock import stage
from conformance.core.case import Case, Signature
from conformance.core.literals import encode
from conformance.core.results import ResultsWriter
from conformance.generators import breakable, unbreakable
from conformance.checking.packing import DEFAULT_PACK, UnitPacker
from conformance.checking.plan import (DEPTHS, Depth, plan_signatures, select_bindings,  # noqa: F401
                              signatures_per_binding, stable_hash)
from conformance.apps.repro import case_record, folder_name, save
from conformance.specs import OpSpec, binding_key, load_spec
from conformance.specs.validity import violations




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
    probes: bool = True          # what each backend evidently does (conformance.checking.probes)
    progress: bool = True
    replay: bool = True              # re-run the reproducers already in ``out`` first
    shard: tuple[int, int] | None = None   # (K, N): only shard K of N of the units (1-based)
    #: signatures compiled together as one program where a backend can (0 or 1: one
    #: compile per signature; conformance.checking.packing); records are the same either way
    pack: int = DEFAULT_PACK


def select_ops(config: RunConfig) -> list[OpSpec]:
    specs = plan.select_ops(config.ops, config.families)
    if config.shard is not None:
        specs = [s for s in specs if in_shard(s.name, *config.shard)]
    return specs


def in_shard(unit: str, k: int, n: int) -> bool:
    """Shard ``k`` of ``n`` (1-based) holds the units whose stable hash is k-1 mod n: the
    same split in every process and machine, and a new op moves no other."""
    return stable_hash("shard", unit) % n == k - 1


def part_bindings(bindings: Sequence[dict], k: int, m: int) -> list[dict]:
    """The k-th (0-based) of m contiguous, nearly equal ranges of an op's type bindings:
    a unit finer than an op that never splits a binding (reproducers are counted per
    binding, so a binding's records are those of a whole-op run)."""
    n = len(bindings)
    return list(bindings[k * n // m:(k + 1) * n // m])


def plan_binding(spec: OpSpec, binding: dict[str, str], config: RunConfig) -> list[Signature]:
    with stage("generate"):
        return _plan_binding(spec, binding, config)


def _plan_binding(spec: OpSpec, binding: dict[str, str], config: RunConfig) -> list[Signature]:
    """The signatures the runner runs for one type binding (index = position)."""
    return plan.plan_binding(spec, binding, config.seed, config.depth)


def batch_for(config: RunConfig, spec: OpSpec, key: str, index: int, batch: int,
              sig: Signature) -> list[np.ndarray]:
    """The stacked inputs of value batch ``batch`` of signature ``index`` of binding
    ``key`` (conformance.checking.plan.batch_for)."""
    return plan.batch_for(config.seed, config.depth, spec, key, index, batch, sig)


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
        self.hangs = stream.HangBudget()     # timeouts per (backend, op): bounded cost
        self.packer: UnitPacker | None = None       # the unit's packs (conformance.checking.packing)

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
                "shard": _shard_text(self.config.shard), "started": time.time()}

    def run_unit(self, spec: OpSpec, part: tuple[int, int] | None = None) -> None:
        """Everything for one op: valid cases per binding, invalid cases, examples.

        ``part`` (k, m), 0-based: only the k-th of m contiguous ranges of the op's type
        bindings (:func:`part_bindings`), and in the last part the invalid programs,
        examples and probes as well; its ``unit_done`` record says ``part``. The m parts'
        records are the whole op's (an executor runs them on several workers).

        Floating-point warnings are silenced: NaNs and overflows are what we test.
        """
        with np.errstate(all="ignore"):
            try:
                self._run_unit(spec, part)
            finally:
                # What this op compiled is not needed again: memory stays flat in the
                # number of ops (bench/bench_memory.py).
                for b in self.backends:
                    clear = getattr(b, "clear_cache", None)
                    if clear is not None:
                        clear()

    def _run_unit(self, spec: OpSpec, part: tuple[int, int] | None = None) -> None:
        every = select_bindings(spec, self.config.element_types, self.config.depth)
        bindings = every if part is None else part_bindings(every, *part)
        last = part is None or part[0] == part[1] - 1
        plans: list[tuple[str, list[Signature] | Exception]] = []
        for binding in bindings:        # planned first, so that packs may span bindings
            key = binding_key(binding)
            try:
                plans.append((key, plan_binding(spec, binding, self.config)))
            except Exception as e:  # noqa: BLE001 - a generator bug must not stop the run
                plans.append((key, e))
        self.packer = UnitPacker(
            self.backends, [(key, i, s) for key, sigs in plans if isinstance(sigs, list)
                            for i, s in enumerate(sigs)],
            self.config.pack, self.depth.batches,
            lambda key, i, b, sig: batch_for(self.config, spec, key, i, b, sig),
            skip=lambda b: self.hangs.exhausted(b.name, spec.name), spec=spec,
            on_timeout=lambda b: self.hangs.hung(b.name, spec.name))
        planned: list[Signature] = []
        try:
            for key, sigs in plans:
                self.on_progress(f"{spec.name} {key}")
                if isinstance(sigs, Exception):
                    self._internal_error(spec.name, key, "generating signatures", sigs)
                    continue
                planned += sigs
                with stage("validity"):
                    self._record_validity(spec, key, sigs)
                for i, sig in enumerate(sigs):
                    with stage("pack"):
                        self.packer.before(spec.name, key, i)
                    self.run_signature(spec, key, i, sig)
        finally:
            self.packer.clear()
            self.packer = None
        if not last:
            self.writer.write({"kind": "unit_done", "op": spec.name, "part": list(part)})
            return
        if self.config.invalid:
            with stage("invalid"):
                self._invalid_unit(spec, part, every, planned)
        if self.config.examples:
            with stage("examples"):
                self.run_examples(spec)
        if self.config.probes:
            with stage("probes"):
                self.run_probes(spec)
        self.writer.write({"kind": "unit_done", "op": spec.name,
                           **({"part": list(part)} if part is not None else {})})

    def _invalid_unit(self, spec: OpSpec, part: tuple[int, int] | None,
                      every: list[dict[str, str]], planned: list[Signature]) -> None:
        """The op's invalid programs, changed from the valid signatures of every part."""
        if part is not None and part[1] > 1:     # the other parts' signatures too
            planned = []
            for binding in every:
                try:
                    planned += plan_binding(spec, binding, self.config)
                except Exception:  # noqa: BLE001 - its own part recorded the error
                    pass
        self.run_invalid(spec, planned)

    def run_probes(self, spec: OpSpec) -> None:
        """The implementation-defined behaviour an op's probes find on each backend
        (accumulation precision and order of sums: conformance.checking.probes), as ``probe``
        records; nothing for ops without probes."""
        from conformance.checking import probes
        if spec.name not in probes.PROBED or spec.name not in probes.SUM_FORMS:
            return
        for b in self.backends:
            self.on_progress(f"{spec.name} probes on {b.name}")
            try:    # (a probe that times out counts in the hang budget; once it is spent,
                #      the probes left give undetermined, not run)
                found = probes.probe_backend(self.hangs.guard(b, spec.name), spec.name,
                                             element_types=self.config.element_types)
            except Exception as e:  # noqa: BLE001 - a probe bug must not stop the run
                self._internal_error(spec.name, "probes", f"probing {b.name}", e)
                continue
            for rec in found:
                self.writer.write({**rec, "family": spec.family})

    # -- valid signatures --------------------------------------------------------------
    def _record_validity(self, spec: OpSpec, key: str, plan: Sequence[Signature]) -> None:
        """Validity is measured, not assumed: every planned signature is checked
        against the spec's constraint expressions and type tables."""
        broken = {s.key(): violations(s, spec) for s in plan}
        bad = {k: v for k, v in broken.items() if v}
        self.writer.write({"kind": "validity", "op": spec.name, "type_key": key,
                           "generated": len(plan), "valid": len(plan) - len(bad),
                           "invalid_examples": dict(list(bad.items())[:3])})

    def run_signature(self, spec: OpSpec, key: str, index: int, sig: Signature) -> None:
        """One signature on every backend: the checker's event stream
        (conformance.checking.stream) written as records per backend (totals), per
        divergence (minimised, saved) and across backends."""
        base = {"kind": "signature", "op": spec.name, "family": spec.family, "type_key": key,
                "signature": sig.key(), "index": index}

        def draw(b: int) -> list[np.ndarray]:
            stacked = self.packer and self.packer.take_inputs(spec.name, key, index, b)
            return stacked if stacked is not None else \
                batch_for(self.config, spec, key, index, b, sig)

        def choose(backend: str, classes, counts) -> list[str]:
            cell = self.cells[(backend, spec.name, key)]
            return [c for c in classes if cell.repros[c] < self.config.max_repros]

        events = stream.check_signature(
            spec, sig, self.backends, batches=self.depth.batches, draw=draw, choose=choose,
            budget=self.hangs, accuracy=self.accuracy(spec, sig),
            case_id=lambda b, c: self.case_id(spec.name, key, index, b, c), key=key)
        for ev in events:
            with stage("write"):
                self.write_event(spec, key, sig, base, ev)

    def write_event(self, spec: OpSpec, key: str, sig: Signature, base: dict[str, Any],
                    ev: "stream.Event") -> None:
        """The records of one event of a signature's check."""
        if isinstance(ev, (stream.NotRun, stream.CompileFailed)):
            self.writer.write({**base, "backend": ev.backend, "outcome": ev.outcome,
                               "reason": ev.reason, "cases": 0, "counts": {}})
            self.cells[(ev.backend, sig.op, key)].cases[ev.outcome] += 1
        elif isinstance(ev, stream.Declined):
            self.writer.write({**base, "backend": ev.backend, "outcome": "unsupported",
                               "reason": ev.reason, "cases": 0, "counts": {}})
        elif isinstance(ev, stream.OracleFailed):
            self._internal_error(spec.name, key, f"oracle on {sig.key()}", ev.error)
        elif isinstance(ev, stream.BackendFailed):
            if ev.culprit is not None:
                self._write_culprit(spec, key, sig, ev)
        elif isinstance(ev, stream.Diverged):
            self._write_divergence(spec, key, sig, ev)
        elif isinstance(ev, stream.SignatureDone):
            for name, t in ev.totals.items():
                self.writer.write({**base, "backend": name, **t.record(),
                                   "coverage": ev.coverage})
                cell = self.cells[(name, spec.name, key)]
                for cls, n in t.counts.items():
                    cell.cases[cls] += n
            if ev.cross is not None:
                self.writer.write({"kind": "cross", "op": spec.name, "family": spec.family,
                                   "type_key": key, "signature": sig.key(), **ev.cross})

    def _write_culprit(self, spec, key, sig: Signature, ev: "stream.BackendFailed") -> None:
        """The case that crashes (or hangs) the backend alone, saved as a reproducer."""
        case, outcome, name = ev.culprit.case, ev.outcome, ev.backend
        cell = self.cells[(name, spec.name, key)]
        cell.repros[outcome] += 1
        backend = next(b for b in self.backends if b.name == name)
        folder = self.repro_dir / folder_name(name, spec.name, key, outcome, cell.repros[outcome])
        save(folder, backend.locator, case, outcome, ev.culprit.expected, None,
             {"original_case_id": case.case_id,
              "original_inputs": [_enc(x) for x in case.inputs],
              "accuracy": verdicts.describe(self.accuracy(spec, sig))})
        self.writer.write({
            "kind": "divergence", "backend": name, "op": spec.name, "family": spec.family,
            "type_key": key, "class": outcome, "minimised_class": outcome,
            "case_id": case.case_id, "signature": sig.key(),
            "minimised_signature": sig.key(), "reproduces_alone": True,
            "case": case_record(case), "expected": [_enc(x) for x in ev.culprit.expected],
            "actual": None, "message": error_text(ev.error),
            "stablehlo": case_record(case)["stablehlo"],
            "repro": str(folder.relative_to(Path(self.config.out))), "batch_count": None})

    def case_id(self, op: str, key: str, index: int, batch: int, case: int) -> str:
        """``seed:depth:op:type_key:signature_index:batch:case_index`` (see
        :mod:`conformance.checking.plan`, which parses it and rebuilds the case)."""
        return plan.case_id(self.config.seed, self.config.depth, op, key, index, batch, case)

    def accuracy(self, spec: OpSpec, sig: Signature):
        """The spec's verdict for the case's element type, or the tolerance profile's."""
        return accuracy_of(spec, sig, self.config.tolerances)

    def _write_divergence(self, spec, key, sig: Signature, ev: "stream.Diverged") -> None:
        cell = self.cells[(ev.backend, spec.name, key)]
        cell.repros[ev.cls] += 1
        d, backend_name, cls = ev.divergence, ev.backend, ev.cls
        backend = next(b for b in self.backends if b.name == backend_name)
        folder = self.repro_dir / folder_name(backend_name, spec.name, key, cls,
                                              cell.repros[cls])
        save(folder, backend.locator, d.small, d.small_cls or cls, d.expected, d.actual,
             {"original_case_id": d.case.case_id,
              "original_inputs": [_enc(x) for x in d.case.inputs],
              "accuracy": verdicts.describe(self.accuracy(spec, sig))})
        self.writer.write({
            "kind": "divergence", "backend": backend_name, "op": spec.name,
            "family": spec.family, "type_key": key, "class": cls,
            "minimised_class": d.small_cls, "case_id": d.case.case_id,
            "signature": sig.key(), "minimised_signature": d.small.signature.key(),
            "reproduces_alone": d.small_cls is not None,
            "case": case_record(d.small),
            "expected": [_enc(x) for x in d.expected],
            "actual": [_enc(x) for x in d.actual] if d.actual is not None else None,
            "message": ev.type_message or d.message or None,
            "stablehlo": case_record(d.small)["stablehlo"],
            "repro": str(folder.relative_to(Path(self.config.out))),
            "batch_count": d.batch_count,
            "oracle_suspect": ev.oracle_suspect,
            **({"arbiter": d.arbiter} if d.arbiter else {})})

    # -- invalid signatures --------------------------------------------------------------
    def run_invalid(self, spec: OpSpec, valid: Sequence[Signature]) -> None:
        for rule, reason in unbreakable(spec.name).items():
            for b in self.backends:
                self.writer.write({"kind": "invalid", "op": spec.name, "family": spec.family,
                                   "backend": b.name, "rule": rule, "outcome": "not_generated",
                                   "reason": reason})
        for rule in breakable(spec):
            self.on_progress(f"{spec.name} !{rule}")
            planned = plan.plan_invalid(spec, rule, self.depth.invalid_per_rule,
                                        self.config.seed, valid)
            if not planned:
                for b in self.backends:
                    self.writer.write({"kind": "invalid", "op": spec.name, "family": spec.family,
                                       "backend": b.name, "rule": rule,
                                       "outcome": "not_generated",
                                       "reason": "no change of this run's signatures breaks it "
                                                 "alone"})
                continue
            for i, sig in enumerate(planned):
                inputs = plan.invalid_inputs(self.config.seed, spec, rule, i, sig)
                verifier = _verifier_message(sig)
                for b in self.backends:
                    outcome, reason = self._budgeted(
                        b, spec.name, lambda: check_invalid(b, Case(sig, inputs)))
                    self.writer.write({"kind": "invalid", "op": spec.name, "family": spec.family,
                                       "backend": b.name, "rule": rule,
                                       "signature": sig.key(), "outcome": outcome,
                                       "reason": reason, "verifier": verifier})

    # -- spec examples -------------------------------------------------------------------
    def run_examples(self, spec: OpSpec) -> None:
        for ex in golden.examples(spec):
            for b in self.backends:
                outcome, problem = self._budgeted(b, spec.name,
                                                  lambda: check_example(b, ex)[:2])
                self.writer.write({"kind": "example", "op": spec.name, "backend": b.name,
                                   "example": ex.name, "index": ex.index, "outcome": outcome,
                                   "message": problem, "signature": ex.case.signature.key()})

    def _budgeted(self, b: Backend, op: str, check: Callable[[], tuple[str, str | None]]
                  ) -> tuple[str, str | None]:
        """``check()`` (an invalid program or a spec example on ``b``): its (outcome,
        reason), a timeout counted in the hang budget; once ``b`` hung too often in the
        op, not run: (``timeout``, the budget's reason), as for signatures."""
        if self.hangs.exhausted(b.name, op):
            return "timeout", self.hangs.not_run_reason(op)
        outcome, reason = check()
        self.hangs.spend(b.name, op, outcome)
        return outcome, reason

    def _internal_error(self, op: str, key: str, what: str, e: BaseException) -> None:
        self.writer.write({"kind": "internal_error", "op": op, "type_key": key, "what": what,
                           "error": error_text(e),
                           "traceback": "".join(traceback.format_exception(e, limit=6))})


def _verifier_message(sig: Signature) -> str | None:
    """What the StableHLO dialect's verifier says of an invalid program (None: it
    accepts it, so only a backend's own checks can reject it)."""
    from conformance.mlir.emitter import EmitError, verifier_rejects
    try:
        return verifier_rejects(sig)
    except EmitError as e:
        return f"not printable: {e}"


def _enc(x):
    return encode(np.asarray(x))


def prepare_backends(config: RunConfig, backends: Sequence[Backend]) -> list[Backend]:
    """Wrap the backends that must run in a child process (conformance.checking.isolation)."""
    from conformance.checking.isolation import prepare_backends as prepare
    return prepare(backends, config.out, config.isolate, config.timeout)


class ResumeError(ValueError):
    """The results file cannot be continued by this run (one-line reason)."""


@dataclasses.dataclass
class ResumeState:
    """What an interrupted run left: the records to keep and the ops that are done."""

    kept: list[dict[str, Any]]     # the header, replays, and the records of done ops
    done: set[str]                 # ops with a ``unit_done`` record


#: header fields that must match for a run to continue another one's results file
RESUME_KEYS = ("seed", "depth", "locators", "ops", "families", "element_types", "invalid",
               "examples", "max_repros", "tolerances", "shard")


def _shard_text(shard: tuple[int, int] | None) -> str | None:
    return f"{shard[0]}/{shard[1]}" if shard else None


def resume_value(key: str, value: Any) -> Any:
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
        records = list(read_results(path, strict=True))    # kept records are written again
    except ValueError as e:
        raise ResumeError(f"cannot resume: {e}") from None
    if not records or records[0].get("kind") != "run":
        raise ResumeError(f"{path}: cannot resume: the file has no run header")
    header = records[0]
    mine = {"seed": config.seed, "depth": config.depth,
            "locators": [b.locator for b in backends], "ops": config.ops,
            "families": config.families, "element_types": config.element_types,
            "invalid": config.invalid, "examples": config.examples,
            "max_repros": config.max_repros, "tolerances": config.tolerances,
            "shard": _shard_text(config.shard)}
    if "locators" not in header:        # a header written before locators were recorded
        header = {**header, "locators": [b.get("name") for b in header.get("backends", [])]}
        mine["locators"] = [b.name for b in backends]
    diff = [f"{k} {json.dumps(header.get(k))} (this run: {json.dumps(mine[k])})"
            for k in RESUME_KEYS
            if k in header and resume_value(k, header[k]) != resume_value(k, mine[k])]
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
        resume: ResumeState | None = None, executor=None) -> dict[str, Any]:
    """Run everything the config selects; stream results to ``results_path``.

    With ``jobs`` > 1 the ops are spread over that many worker processes; each op's
    records are appended to the results file as the op completes. Every op is
    seeded on its own, so the cases and verdicts are those of a serial run.

    Before any new case, the reproducers an earlier run saved under ``config.out``
    are re-run on these backends (``replay`` records; ``config.replay=False`` skips
    it). With ``resume`` (see :func:`load_resume`) the file keeps the records of the
    ops already done and only the other ops run, appended after them. With an
    ``executor`` (conformance.apps.executors: worker processes for ``jobs`` > 1, Ray tasks)
    the units run there instead, their records written as each unit arrives.
    """
    started = time.time()
    specs = select_ops(config)
    results_path = Path(results_path)
    saved = []
    if config.replay and resume is None:
        from conformance.apps.replay import saved_cases
        saved = saved_cases(Path(config.out))      # read before this run overwrites them
    remote = jobs > 1 or executor is not None
    if remote and executor is None:
        raise ValueError("jobs > 1: give an executor (conformance.apps.executors.ProcessExecutor)")
    if not remote:
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
                replays = _replay(config, backends, saved, writer, 2 if remote else 1)
            todo = [s for s in specs if resume is None or s.name not in resume.done]
            if not remote:
                for spec in todo:
                    runner.run_unit(spec)
            else:
                executor.drive(config, [b.locator for b in backends], todo, writer, runner,
                               progress, already=resume.kept if resume else ())
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
    from conformance.apps.replay import replay_saved
    own = prepare_backends(config, backends) if jobs > 1 else backends
    try:
        return replay_saved(saved, own, writer, config)
    finally:
        for b in own:
            close = getattr(b, "close", None)
            if close and not any(b is x for x in backends):
                close()
