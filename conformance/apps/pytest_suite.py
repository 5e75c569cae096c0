"""The conformance suite's tests, as plain functions a pytest session (or a vendor's own
test) calls: the bodies of ``test_op``, ``test_example`` and ``test_invalid``
(:func:`run_op_binding`, :func:`run_example`, :func:`run_invalid_rule`), their
parameters, the expectations gate of one test, the hypothesis profiles, and the vendor
API :func:`check`. The pytest glue (options, hooks, fixtures) is
conformance.apps.pytest_plugin; the checking is conformance.checking's event stream,
read here as the CLI's runner reads it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from pathlib import Path
from typing import Any, Sequence

import pytest

DEPTH_NAMES = ("quick", "default", "deep")
DEFAULT_BACKEND = "jax"
DEFAULT_DEPTH = "quick"
PROFILE_CHOICES = ("auto", "local", "ci")
DEFAULT_DATABASE = ".hypothesis/conformance"
DEFAULT_TIMEOUT = 60.0      # as ``conformance run --timeout``
MAX_TIMEOUT = 604800.0      # a week, as ``conformance run --timeout``


@dataclasses.dataclass(frozen=True)
class Options:
    """The conformance options of a pytest session, validated."""

    backend: str
    backend_explicit: bool
    depth_name: str
    ops: tuple[str, ...] | None
    families: tuple[str, ...] | None
    element_types: tuple[str, ...] | None
    seed: int | None               # None: hypothesis draws at random (local runs)
    repro_dir: Path | None
    profile: str = "local"         # "local" or "ci" (auto resolved)
    database: Path | None = None   # the example database's folder (local runs)
    expectations: Any = dataclasses.field(default=None, compare=False)
    fail_on_stale: bool = False
    isolate: bool | None = None    # None: as the backend asks (conformance.checking.isolation)
    timeout: float = DEFAULT_TIMEOUT
    modules: tuple[str, ...] | None = None      # --conformance-modules, expanded

    @property
    def depth(self):
        from conformance.checking.plan import DEPTHS
        return DEPTHS[self.depth_name]

    @property
    def hypothesis_profile(self) -> str:
        """The name of the hypothesis settings profile the suite's tests use."""
        return "conformance-ci" if self.profile == "ci" else f"conformance-{self.depth_name}"

    @property
    def explicit(self) -> bool:
        return (self.backend_explicit or self.ops is not None or self.families is not None
                or self.element_types is not None or self.expectations is not None)


@dataclasses.dataclass(frozen=True)
class OpBinding:
    """One matrix cell of the suite: an op and one assignment of its type variables."""

    op: str
    binding: tuple[tuple[str, str], ...]
    n_bindings: int            # all bindings of the op (sets the examples per binding)

    @property
    def binding_dict(self) -> dict[str, str]:
        return dict(self.binding)

    @property
    def key(self) -> str:
        from conformance.specs import binding_key
        return binding_key(self.binding_dict)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.key}"


@dataclasses.dataclass(frozen=True)
class ExampleRef:
    op: str
    index: int

    @property
    def id(self) -> str:
        return f"{self.op}-{self.index}"


@dataclasses.dataclass(frozen=True)
class InvalidRule:
    op: str
    rule: str

    @property
    def id(self) -> str:
        return f"{self.op}-{self.rule}"


def selected_specs(options: Options) -> list:
    from conformance.checking.plan import select_bindings, select_ops
    specs = select_ops(options.ops, options.families)
    if options.element_types:
        specs = [s for s in specs if select_bindings(s, options.element_types, options.depth_name)]
    return specs


def selected_op_bindings(options: Options) -> list[OpBinding]:
    from conformance.checking.plan import select_bindings
    out = []
    for spec in selected_specs(options):
        n = len(spec.type_bindings())
        for b in select_bindings(spec, options.element_types, options.depth_name):
            out.append(OpBinding(spec.name, tuple(b.items()), n))
    return out


def selected_examples(options: Options) -> list[ExampleRef]:
    from conformance.checking import golden
    out = []
    for spec in selected_specs(options):
        for ex in golden.examples(spec):
            if options.element_types:
                used = {t.element_type.name for t in
                        ex.case.signature.input_leaves + ex.case.signature.result_leaves}
                if not used & set(options.element_types):
                    continue
            out.append(ExampleRef(spec.name, ex.index))
    return out


def selected_invalid_rules(options: Options) -> list[InvalidRule]:
    from conformance.generators import breakable
    return [InvalidRule(spec.name, rule) for spec in selected_specs(options)
            for rule in breakable(spec)]


# ---------------------------------------------------------------------------
# Failure reporting
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ModuleRef:
    """A module file ``test_module`` judges (--conformance-modules)."""

    path: str

    @property
    def id(self) -> str:
        return Path(self.path).name


def selected_modules(options: Options) -> list[ModuleRef]:
    return [ModuleRef(p) for p in options.modules or ()]


def run_module(backend, param: ModuleRef, options: Options, record=None) -> None:
    """``test_module``: the module read in and judged by `conformance check`'s three
    checks (conformance.checking.modules) on the session's backend, with its argument
    values drawn for the session's seed; the ``module`` record is attached to the test
    (``conformance_module`` property); the test fails on a divergence, naming the first
    diverging op by its location and text."""
    import json
    import time
    from conformance.apps.check import DEPTH_BATCH, inputs_for, record as module_record, \
        summary_line
    from conformance.checking.modules import check_module
    from conformance.core.results import json_default
    from conformance.mlir.reader import ReadError, read_file
    try:
        read = read_file(param.path)
    except ReadError as e:
        raise ConformanceFailure(str(e)) from None
    batch = DEPTH_BATCH[options.depth_name]
    inputs, n = inputs_for(read.program, options.seed or 0, Path(param.path).name, batch,
                           None)
    started = time.perf_counter()
    verdict = check_module(backend, read, inputs, n)
    rec = module_record(read, backend, verdict, time.perf_counter() - started)
    if record is not None:
        record("conformance_module", json.dumps(rec, default=json_default))
    for u in read.unjudged:
        warnings.warn(f"{param.path}: not judged: {u}", stacklevel=2)
    if verdict.diverges:
        text = summary_line(rec)
        first = rec.get("first") or {}
        if first.get("text"):
            text += "\n" + str(first["text"])
        raise ConformanceFailure(text)
    if verdict.outcome in ("unsupported", "unjudged"):
        pytest.skip(f"{verdict.outcome}: {verdict.message}")


class ConformanceFailure(AssertionError):
    """A divergence found by the suite; reported as its message alone (no traceback).

    ``conformance_matched``: indices of expectation entries the test matched before it
    failed on a divergence that no entry lists."""

    conformance_matched: tuple[int, ...] = ()


class ExpectedDivergence(pytest.xfail.Exception):
    """Every divergence a test found is listed in the expectations file: an xfail
    whose reason is the entries' (``conformance_matched``: their indices)."""

    def __init__(self, reason: str, matched: Sequence[int]) -> None:
        super().__init__(reason)
        self.conformance_matched = tuple(matched)


_DESCRIBED: dict[int, tuple[Any, str, dict]] = {}


def backend_name_and_info(backend) -> tuple[str, dict]:
    """The backend's name and describe() (what an entry's ``when`` is matched against)."""
    hit = _DESCRIBED.get(id(backend))
    if hit is not None and hit[0] is backend:
        return hit[1], hit[2]
    name = getattr(backend, "name", str(backend))
    try:
        info = dict(backend.describe())
    except Exception:  # noqa: BLE001 - a backend without describe() still gets gated
        info = {"name": name}
    _DESCRIBED[id(backend)] = (backend, name, info)
    return name, info


class _Gatekeeper:
    """Which of one test's divergence classes the expectations file lists."""

    def __init__(self, backend, options: "Options | None", op: str,
                 element_type: str | None = None, rule: str | None = None) -> None:
        self.expectations = options.expectations if options is not None else None
        self.backend = backend
        self.op, self.element_type, self.rule = op, element_type, rule
        self.seen: dict[str, list] = {}          # class -> [entry, cases]

    def lists(self, cls: str):
        """The entry that expects ``cls`` here, or None (nothing is remembered)."""
        if self.expectations is None:
            return None
        name, info = backend_name_and_info(self.backend)
        return self.expectations.match(name, info, self.op, cls, self.element_type, self.rule)

    def expected(self, cls: str, cases: int = 1):
        """The entry that expects ``cls`` here (and remember it), or None."""
        if self.expectations is None:
            return None
        name, info = backend_name_and_info(self.backend)
        e = self.expectations.match(name, info, self.op, cls, self.element_type, self.rule)
        if e is not None:
            seen = self.seen.setdefault(cls, [e, 0])
            seen[1] += cases
        return e

    @property
    def matched(self) -> tuple[int, ...]:
        return tuple(sorted({e.index for e, _ in self.seen.values()}))

    def describe(self) -> str:
        path = self.expectations.path if self.expectations is not None else "?"
        parts = []
        for cls, (e, n) in sorted(self.seen.items()):
            link = f" ({e.link})" if e.link else ""
            parts.append(f"expected {cls} divergence ({n} case{'s' if n != 1 else ''}): "
                         f"{e.reason}{link} [{path}: expectations[{e.index}]]")
        return "; ".join(parts)

    def failure(self, message: str) -> ConformanceFailure:
        path = self.expectations.path if self.expectations is not None else "?"
        for cls, (e, _) in sorted(self.seen.items()):
            message += (f"\n  expected:  {cls} divergence, also seen: {e.reason} "
                        f"[{path}: expectations[{e.index}]]")
        exc = ConformanceFailure(message)
        exc.conformance_matched = self.matched
        return exc

    def finish(self) -> None:
        """xfail with the entries' reasons if any expected divergence was seen."""
        __tracebackhide__ = True
        if self.seen:
            raise ExpectedDivergence(self.describe(), self.matched)




@dataclasses.dataclass(frozen=True)
class CheckResult:
    """What ``conformance_check`` found for an agreeing case."""

    cls: str
    expected: list
    actual: list | None
    message: str


def _fmt_array(x) -> str:
    import json
    import numpy as np
    from conformance.core.literals import to_hex, to_literal
    from conformance.core.types import type_of
    try:
        x = np.asarray(x)
        t = type_of(x)
        text = json.dumps(to_literal(x))
    except Exception:  # noqa: BLE001 - a backend may return something odd; show it anyway
        text = repr(x)
        return text if len(text) <= 600 else text[:600] + " ..."
    if len(text) > 600:
        text = text[:600] + " ..."
    if (t.element_type.is_float or t.element_type.is_complex) and 0 < x.size <= 8:
        text += f"  (bits {to_hex(x)})"
    return f"{t} {text}"


def describe_case(case, cls: str, expected: Sequence | None, actual: Sequence | None,
                  message: str = "", title: str | None = None) -> str:
    """A readable multi-line account of one case's verdict."""
    lines = [title or f"{case.op}: {cls} divergence",
             f"  class:     {cls}{(' - ' + message) if message else ''}",
             f"  signature: {case.signature.key()}"]
    for i, x in enumerate(case.inputs):
        lines.append(f"  input {i}:   {_fmt_array(x)}")
    for i, e in enumerate(expected or ()):
        lines.append(f"  expected {i}: {_fmt_array(e)}   (oracle)")
    if actual is None:
        lines.append("  actual:    (no result)")
    else:
        for i, a in enumerate(actual):
            lines.append(f"  actual {i}:   {_fmt_array(a)}")
    return "\n".join(lines)


def check(backend, case) -> CheckResult:
    """Run ``case`` on ``backend`` and judge it (conformance.checking.checker.check_case).

    Raises ConformanceFailure (an AssertionError) on any divergence and calls
    pytest.skip when the backend says Unsupported.
    """
    __tracebackhide__ = True
    from conformance.checking.checker import check_case
    r = check_case(backend, case)
    cls, expected, actual, message = r.cls, r.expected, r.actual, r.message
    if cls == "unsupported":
        pytest.skip(f"unsupported by {getattr(backend, 'name', backend)}: {message}")
    if cls != "pass":
        raise ConformanceFailure(describe_case(
            case, cls, expected, actual, message,
            title=f"{case.op} on {getattr(backend, 'name', backend)}: {cls} divergence"))
    return CheckResult(cls, expected, actual, message)


# ---------------------------------------------------------------------------
# What the suite's tests do (conformance/apps/suite/test_conformance.py calls these)
# ---------------------------------------------------------------------------

PROFILE_NAMES = tuple(f"conformance-{d}" for d in DEPTH_NAMES) + ("conformance-ci",)
_registered_database: list = []     # the database folder the profiles were registered with


def register_profiles(database: "str | Path | None" = None) -> None:
    """Register the suite's hypothesis settings profiles.

    ``conformance-quick``, ``conformance-default``, ``conformance-deep``: local runs:
    random generation, ``max_examples`` = the depth's signatures per type binding, and
    a persistent :class:`~hypothesis.database.DirectoryBasedExampleDatabase` in
    ``database`` (None: no database) whose failing examples are replayed first.
    ``conformance-ci``: as ``conformance-default``, derandomized, without a database,
    printing the ``@reproduce_failure`` blob. All: ``deadline=None``, no shrinking
    (the suite minimises divergences itself), one bug per test.
    """
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.database import DirectoryBasedExampleDatabase
    from conformance.checking.plan import DEPTHS

    db = DirectoryBasedExampleDatabase(str(database)) if database is not None else None
    common = dict(
        deadline=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                               HealthCheck.data_too_large],
        report_multiple_bugs=False)
    for name in DEPTH_NAMES:
        settings.register_profile(f"conformance-{name}", max_examples=DEPTHS[name].signatures,
                                  derandomize=False, database=db, print_blob=False, **common)
    settings.register_profile("conformance-ci", parent=settings.get_profile("conformance-default"),
                              derandomize=True, database=None, print_blob=True)
    _registered_database[:] = [database]


def _database_namespace():
    """An ExampleDatabase view that prefixes every key: the suite's hypothesis tests are
    one inner function run for many parameters, so hypothesis' own key (a digest of the
    function's source) is the same for all of them."""
    from hypothesis.database import ExampleDatabase

    class Namespaced(ExampleDatabase):
        def __init__(self, db, prefix: bytes) -> None:
            super().__init__()
            self.db, self.prefix = db, prefix

        def __repr__(self) -> str:
            return f"Namespaced({self.db!r}, {self.prefix!r})"

        def fetch(self, key: bytes):
            return self.db.fetch(self.prefix + key)

        def save(self, key: bytes, value: bytes) -> None:
            self.db.save(self.prefix + key, value)

        def delete(self, key: bytes, value: bytes) -> None:
            self.db.delete(self.prefix + key, value)

        def move(self, src: bytes, dest: bytes, value: bytes) -> None:
            self.db.move(self.prefix + src, self.prefix + dest, value)

    return Namespaced


def suite_settings(options: Options, max_examples: int, test_key: str, backend=None):
    """The hypothesis settings of one of the suite's tests: the options' profile, with
    ``max_examples`` and the example database namespaced by backend and test."""
    from hypothesis import settings
    if not _registered_database or _registered_database[0] != options.database:
        register_profiles(options.database)
    base = settings.get_profile(options.hypothesis_profile)
    db = base.database if options.seed is None else None
    if db is not None:
        name = getattr(backend, "name", str(backend))
        db = _database_namespace()(db, f"conformance:{name}:{test_key}:".encode())
    return settings(base, max_examples=max_examples, database=db)


def _with_seed(options: Options, *parts):
    """``@seed`` from --conformance-seed and the test, or nothing (random) on a local
    run without a seed."""
    from hypothesis import seed as hseed
    from conformance.checking.plan import stable_hash
    if options.seed is None:
        return lambda f: f
    return hseed(stable_hash(options.seed, *parts))


class _FailureStore:
    """The (plan seed, signature index) pairs whose check failed on a local run, kept in
    the session's example database (hypothesis' DirectoryBasedExampleDatabase, under a
    key per backend and test) and replayed first by the next run."""

    def __init__(self, options: Options, backend, test_key: str) -> None:
        from hypothesis.database import DirectoryBasedExampleDatabase
        self.db = (DirectoryBasedExampleDatabase(str(options.database))
                   if options.database is not None else None)
        name = getattr(backend, "name", str(backend))
        self.key = f"conformance:{name}:{test_key}".encode()

    def fetch(self) -> list[tuple[int, int]]:
        if self.db is None:
            return []
        out = []
        for value in self.db.fetch(self.key):
            try:
                seed, index = (int(x) for x in value.decode().split(":"))
            except ValueError:
                continue
            out.append((seed, index))
        return sorted(out)

    def forget(self, seed: int, index: int) -> None:
        if self.db is not None:
            self.db.delete(self.key, f"{seed}:{index}".encode())

    @contextlib.contextmanager
    def remember(self, seed: int, index: int):
        """Save the pair when the check inside fails (and re-raise)."""
        try:
            yield
        except ConformanceFailure:
            if self.db is not None:
                self.db.save(self.key, f"{seed}:{index}".encode())
            raise


def _divergence_message(ev, spec, sig, backend, options: Options, key: str) -> str:
    """The text of a failing test: a diverging class no expectation lists (the checker's
    ``Diverged`` event), its case minimised, its case id and how to run it again."""
    from conformance.checking.arbiter import describe as arbiter_line
    d, name, cls = ev.divergence, ev.backend, ev.cls
    verdict = ev.batch.results[name].verdict
    names = verdict.case_class_names()
    diverging = [int(c) for c in verdict.diverging_cases()]
    counts = ", ".join(f"{k}={v}" for k, v in sorted(verdict.counts().items()))
    text = describe_case(d.small, d.small_cls or cls, d.expected, d.actual, d.message,
                         title=f"{spec.name} [{key}] on {name}: {cls} divergence "
                               f"({len(diverging)} of {len(names)} cases in the batch: "
                               f"{counts})")
    extra = [f"  {arbiter_line(d.arbiter)}"] if d.arbiter else []
    extra += [f"  case id:   {d.case.case_id}",
              f"  repro:     conformance repro {d.case.case_id} --backend {backend.locator}"]
    if d.small_cls is None:
        extra.append("  note:      does not diverge when run alone (only in the batched "
                     "executable)")
    elif d.small is not d.case:
        extra.append("  note:      minimised from a case of the batch")
        extra.append(f"  batch case signature: {sig.key()}")
    if options.repro_dir is not None:
        folder = _save_repro(options, backend, spec, sig, key, cls, d.case, d.small,
                             d.small_cls or cls, d.expected, d.actual)
        extra.append(f"  reproducer: python {folder / 'repro.py'}")
    return text + "\n" + "\n".join(extra)


def _save_repro(options: Options, backend, spec, sig, key: str, cls: str, original, small,
                small_cls: str, expected, actual) -> Path:
    from conformance.checking.plan import stable_hash
    from conformance.apps.repro import folder_name, save
    from conformance.checking.verdicts import describe
    from conformance.checking.checker import accuracy_of
    folder = options.repro_dir / folder_name(backend.name, spec.name, key, cls,
                                             stable_hash(original.case_id) % 10 ** 6)
    save(folder, backend.locator, small, small_cls, expected, actual,
         {"original_case_id": original.case_id, "accuracy": describe(accuracy_of(spec, sig))})
    return folder


def _failure_message(ev, spec, sig, backend, options: Options, key: str, what: str) -> str:
    """The text of a test failed by a backend that raised, crashed or hung on a batch
    (the checker's ``BackendFailed`` event), with the case that does it alone."""
    from conformance.checking.checker import error_text
    text = (f"{spec.name} [{key}]: {ev.outcome}: {what} {sig.key()} failed: "
            f"{error_text(ev.error)}")
    if ev.culprit is None:
        return text
    case = ev.culprit.case
    text += (f"\n  culprit:   case {ev.culprit.index} of batch {ev.batch.index} does it alone"
             f"\n  case id:   {case.case_id}"
             f"\n  repro:     conformance repro {case.case_id} --backend {backend.locator}")
    if options.repro_dir is not None:
        folder = _save_repro(options, backend, spec, sig, key, ev.outcome, case, case,
                             ev.outcome, ev.culprit.expected, None)
        text += f"\n  reproducer: python {folder / 'repro.py'}"
    return text


def signature_record(base: dict, ev) -> dict | None:
    """The ``signature`` record(s) ``conformance run`` writes for an event of the
    checker's stream (None for events that have none): what the plugin attaches to a
    test (``conformance_signature`` user properties, in --junitxml)."""
    from conformance.checking import stream
    if isinstance(ev, (stream.NotRun, stream.CompileFailed)):
        return {**base, "backend": ev.backend, "outcome": ev.outcome, "reason": ev.reason,
                "cases": 0, "counts": {}}
    if isinstance(ev, stream.Declined):
        return {**base, "backend": ev.backend, "outcome": "unsupported", "reason": ev.reason,
                "cases": 0, "counts": {}}
    return None


def record_text(rec: dict) -> str:
    """A record as the results file's line has it (JSON)."""
    import json
    from conformance.core.results import json_default
    return json.dumps(rec, default=json_default, separators=(",", ":"))


def run_op_binding(backend, param: OpBinding, options: Options, record=None,
                   budget=None) -> None:
    """The body of ``test_op``: the signatures of one op and type binding, drawn from the
    same plan as ``conformance run`` (conformance.checking.plan), packed and checked by the
    checker's event stream (conformance.checking.stream) as the CLI does: the same
    verdicts, crash bisection and hang budget (``budget``: the session's
    :class:`~conformance.checking.stream.HangBudget`).

    With ``--conformance-seed=N`` the test checks exactly the signatures and values that
    ``conformance run --seed N --depth D`` checks, with the same case ids. Without a seed
    (local runs), hypothesis draws a plan seed and a signature index per example, so the
    example database replays a failing (seed, index) first next time; the case id
    printed names the case either way and ``conformance repro ID`` re-runs it.

    With expectations (``options.expectations``), divergences of a class the file lists
    for this op and binding do not stop the test; it goes on looking for others, and
    ends as an xfail with the entries' reasons (or fails on the first class no entry
    lists). ``record(name, value)`` (pytest's ``record_property``) receives the
    ``signature`` records ``conformance run`` would write (JSON text), as
    ``conformance_signature`` (``--junitxml`` writes them as the test's properties)."""
    __tracebackhide__ = True
    from conformance.checking import plan
    from conformance.checking.checker import accuracy_of
    from conformance.checking import stream
    from conformance.checking.compare import worst
    from conformance.checking.packing import DEFAULT_PACK, UnitPacker
    from conformance.specs import load_spec

    spec = load_spec(param.op)
    depth = options.depth
    key = param.key
    name = getattr(backend, "name", str(backend))
    gate = _Gatekeeper(backend, options, spec.name, element_type=key)
    budget = budget if budget is not None else stream.HangBudget()
    unsupported: list[str] = []
    ran = [0]

    pending: list = [None]      # (failure, cause): the first unexpected event

    def fail(message: str, cls: str, error=None) -> None:
        """Fail the test when the signature ends, unless the expectations list ``cls``."""
        if not gate.expected(cls) and pending[0] is None:
            pending[0] = (gate.failure(message), error)

    def choose(_backend: str, classes, counts) -> list[str]:
        if pending[0] is not None:
            return []
        unexpected = [c for c in classes if gate.lists(c) is None]
        return [worst(unexpected)] if unexpected else []

    def check_planned(seed: int, index: int, sig, packer) -> None:
        __tracebackhide__ = True
        base = {"kind": "signature", "op": spec.name, "family": spec.family, "type_key": key,
                "signature": sig.key(), "index": index}

        def draw(b: int):
            stacked = packer.take_inputs(spec.name, key, index, b)
            return stacked if stacked is not None else \
                plan.batch_for(seed, options.depth_name, spec, key, index, b, sig)

        packer.before(spec.name, key, index)
        events = stream.check_signature(
            spec, sig, [backend], batches=depth.batches, draw=draw, choose=choose,
            budget=budget, accuracy=accuracy_of(spec, sig),
            case_id=lambda b, c: plan.case_id(seed, options.depth_name, spec.name, key,
                                              index, b, c), key=key)
        # The first unexpected event fails the test when the signature's stream ends, so
        # that its records are those `conformance run` writes (and nothing more is
        # minimised meanwhile: ``choose`` asks for nothing once a failure is pending).
        declined = False
        for ev in events:
            rec = signature_record(base, ev)
            if rec is not None and record is not None:
                record("conformance_signature", record_text(rec))
            if isinstance(ev, stream.Declined):
                unsupported.append(ev.reason)
                declined = True
            elif isinstance(ev, (stream.NotRun, stream.CompileFailed)):
                what = "compiling" if isinstance(ev, stream.CompileFailed) else "running"
                fail(f"{spec.name} [{key}]: {ev.outcome}: {what} {sig.key()} failed: "
                     f"{ev.reason}", ev.outcome)
            elif isinstance(ev, stream.OracleFailed):
                raise RuntimeError(f"{spec.name} [{key}]: the oracle failed on "
                                   f"{sig.key()} (a bug of the suite)") from ev.error
            elif isinstance(ev, stream.BatchJudged):
                for cls, n in ev.verdict.counts().items():
                    if cls != "pass":
                        gate.expected(cls, n)
            elif isinstance(ev, stream.BackendFailed):
                if ev.outcome == "unsupported":
                    unsupported.append(str(ev.error))
                    declined = True
                else:
                    fail(_failure_message(ev, spec, sig, backend, options, key, "running"),
                         ev.outcome, ev.error)
            elif isinstance(ev, stream.Diverged):
                if pending[0] is None:
                    pending[0] = (gate.failure(_divergence_message(ev, spec, sig, backend,
                                                                   options, key)), None)
            elif isinstance(ev, stream.SignatureDone) and record is not None:
                for n, t in ev.totals.items():
                    record("conformance_signature",
                           record_text({**base, "backend": n, **t.record(),
                                        "coverage": ev.coverage}))
        if pending[0] is not None:
            failure, cause = pending[0]
            pending[0] = None
            raise failure from cause
        if not declined:
            ran[0] += 1

    def planned(seed: int) -> list:
        return plan.plan_binding(spec, param.binding_dict, seed, options.depth_name)

    def packed(seed: int, sigs) -> "UnitPacker":
        """The binding's signatures in packs, as the runner packs a unit."""
        return UnitPacker([backend], [(key, i, s) for i, s in enumerate(sigs)], DEFAULT_PACK,
                          depth.batches,
                          lambda k, i, b, sig: plan.batch_for(seed, options.depth_name, spec,
                                                              k, i, b, sig),
                          skip=lambda b: budget.exhausted(b.name, spec.name), spec=spec,
                          on_timeout=lambda b: budget.hung(b.name, spec.name))

    def check_all(seed: int, sigs, store=None) -> None:
        packer = packed(seed, sigs)
        try:
            for index, sig in enumerate(sigs):
                if store is None:
                    check_planned(seed, index, sig, packer)
                else:
                    with store.remember(seed, index):
                        check_planned(seed, index, sig, packer)
        finally:
            packer.clear()

    try:
        if options.seed is not None:
            check_all(options.seed, planned(options.seed))
        else:
            # A local run without a seed: a fresh random plan seed, after the (seed, index)
            # pairs that failed before (the example database), so a divergence once found
            # is checked first until it is fixed.
            import random
            store = _FailureStore(options, backend, f"op:{spec.name}:{key}")
            for seed, index in store.fetch():
                sigs = planned(seed)
                if index < len(sigs):
                    packer = packed(seed, [])
                    with store.remember(seed, index):
                        check_planned(seed, index, sigs[index], packer)
                store.forget(seed, index)
            seed = random.SystemRandom().randrange(2 ** 32)
            check_all(seed, planned(seed), store)
    finally:
        clear = getattr(backend, "clear_cache", None)
        if clear is not None:     # as the runner after each unit: memory stays flat
            clear()
    gate.finish()
    if unsupported:
        reason = unsupported[0]
        if not ran[0]:
            pytest.skip(f"unsupported by {name}: {reason}")
        warnings.warn(pytest.PytestWarning(
            f"conformance: {spec.name} [{key}]: {len(unsupported)} signature(s) unsupported "
            f"by {name}, {ran[0]} checked: {reason}"))


def run_example(backend, param: ExampleRef, options: "Options | None" = None,
                budget=None) -> None:
    """The body of ``test_example``: one example of the spec, compared exactly (or with
    the example's own tolerance). With expectations, an entry with ``rule:
    example-<index>`` and class ``fail`` (or ``backend_error``) makes it an xfail. With
    ``budget`` (the session's :class:`~conformance.checking.stream.HangBudget`), a
    timeout counts there, and an example of an op the backend hung in too often is not
    run (it fails as a timeout, as ``conformance run`` records it)."""
    __tracebackhide__ = True
    from conformance.checking import golden
    from conformance.checking.checker import check_example
    from conformance.specs import load_spec

    ex = golden.examples(load_spec(param.op))[param.index]
    name = getattr(backend, "name", str(backend))
    gate = _Gatekeeper(backend, options, param.op, rule=f"example-{param.index}")
    if budget is not None and budget.exhausted(name, param.op):
        outcome, problem, actual = "timeout", budget.not_run_reason(param.op), None
    else:
        outcome, problem, actual = check_example(backend, ex)
        if budget is not None:
            budget.spend(name, param.op, outcome)
    if outcome == "unsupported":
        pytest.skip(f"unsupported by {name}: {problem}")
    if outcome == "pass":
        return
    if gate.expected(outcome):
        gate.finish()
    if actual is None:
        raise gate.failure(f"{param.op} example {param.index} ({ex.name}) on {name}: "
                           f"{outcome}: {problem}\n"
                           f"  signature: {ex.case.signature.key()}")
    raise gate.failure(
        describe_case(ex.case, "example", ex.expected, actual, problem,
                      title=f"{param.op} example {param.index} ({ex.name}) on {name}: "
                            f"differs from the spec"))


def run_invalid_rule(backend, param: InvalidRule, options: Options, budget=None) -> None:
    """The body of ``test_invalid``: programs that break one rule of the spec must be
    rejected (any exception other than Unsupported). With expectations, an entry with
    this ``rule`` and class ``accepted_invalid`` (or crash, timeout) makes it an xfail.
    With ``budget`` (the session's hang budget), a timeout counts there, and no program
    of an op the backend hung in too often is run (a timeout, not run: hypothesis's
    shrinking of a hang costs no more timeouts)."""
    __tracebackhide__ = True
    import numpy as np
    from hypothesis import given, strategies as st
    from hypothesis.errors import Unsatisfiable
    from conformance.core.case import Case
    from conformance.generators import batch_inputs, invalid_signatures
    from conformance.checking.checker import check_invalid
    from conformance.specs import load_spec

    spec = load_spec(param.op)
    depth = options.depth
    name = getattr(backend, "name", str(backend))
    from conformance.specs.validity import checks
    text = next((c.text for c in checks(spec) if c.id == param.rule), param.rule)
    gate = _Gatekeeper(backend, options, spec.name, rule=param.rule)
    unsupported: list[str] = []
    rejected = [0]

    @_with_seed(options, spec.name, "invalid", param.rule)
    @suite_settings(options, depth.invalid_per_rule, f"invalid:{spec.name}:{param.rule}",
                    backend)
    @given(sig=invalid_signatures(spec, param.rule, depth.shape_profile),
           value_seed=st.integers(0, 2 ** 32 - 1))
    def example(sig, value_seed):
        __tracebackhide__ = True
        rng = np.random.default_rng(value_seed)
        inputs = tuple(x[0] for x in batch_inputs(sig, rng, 1, spec))
        if budget is not None and budget.exhausted(name, spec.name):
            outcome, reason = "timeout", budget.not_run_reason(spec.name)
        else:
            outcome, reason = check_invalid(backend, Case(sig, inputs))
            if budget is not None:
                budget.spend(name, spec.name, outcome)
        if outcome == "unsupported":
            unsupported.append(reason or "")
        elif outcome in ("accepted_invalid", "crash", "timeout"):
            if gate.expected(outcome):
                return
            what = ("the backend ran a program that breaks " + param.rule
                    if outcome == "accepted_invalid" else
                    f"the backend's process died on a program that breaks {param.rule}: "
                    f"{reason}")
            raise gate.failure(
                f"{spec.name} {param.rule} on {name}: {outcome}: {what}\n"
                f"  rule:      {param.rule}: {text}\n"
                f"  signature: {sig.key()}")
        else:
            rejected[0] += 1

    from conformance.generators.determinism import seed_only
    try:
        with seed_only():
            example()
    except Unsatisfiable:
        pytest.skip(f"no signature breaking {param.rule} alone could be generated")
    gate.finish()
    if unsupported and not rejected[0]:
        pytest.skip(f"unsupported by {name}: {unsupported[0]}")
