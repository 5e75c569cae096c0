"""The results stream: one JSON object per line, appended and flushed as it happens.

A killed run loses at most the record being written; readers skip a torn last
line. Reports, summaries and JUnit XML are all rendered from this file.

The schema lives here: one dataclass per record kind (:data:`RECORDS`, kind -> class;
a kind written in several forms, the ``run`` header and the ``end`` record, has a class
per form, told apart by a field: :func:`record_class`). Field names are the JSON keys
(``class`` is the attribute ``cls``); fields without a default are *required* (what
every reader relies on: what the record is about and its verdict; a header's and an
``end`` record's fields are all optional), the others are *optional*: absent in some
writers' records or in older files, :data:`ABSENT` when not given (and then left out
of the JSON). :meth:`Record.to_dict` and :meth:`Record.from_dict` convert.
:meth:`ResultsWriter.write` takes a record object or a dict; a dict is checked against
its kind's class (an unknown kind, a missing required field or an undeclared field is a
ValueError naming both), so no writer can drift from the schema.

Every results file carries its format version: the header record (``kind: run``, the
first record of a file written by ``conformance run``, ``programs`` or ``merge``) has
``format`` (:data:`FORMAT_VERSION`), which the writer adds. :func:`read_results` refuses
a header of a format it does not know, a record of an unknown kind and a record without
a required field, each with one line naming the file and line
(:class:`ResultsFormatError`); a header without ``format`` (files written before it was
added) is read as format 1. A field its kind does not declare is kept by the readers
that only read (report, expectations) and refused by those that write the records again
(merge, ``--resume``: ``read_results(path, strict=True)``), as the writer would refuse
it. The format version changes when a reader of this version would misread a file: a
field's meaning changes, a required field is added, a kind is renamed or removed.

Record kinds (the ``kind`` key):
- ``run``: header: seed, depth, backends and their versions, the backends' locators,
  filters, options (invalid, examples, max_repros, tolerances), start time
  (:class:`RunHeader`); ``conformance merge`` writes :class:`MergedRunHeader`
  (``merged_from``), ``conformance programs`` :class:`ProgramsRunHeader`
  (``command: programs``).
- ``validity``: for one op and type binding, how many generated signatures satisfy
  every rule of the spec (the generators' validity, measured).
- ``signature``: one signature on one backend: case counts per outcome, ULP
  histogram, implementation-defined statistics, and for ops judged by a ``bound``
  (float reductions, contractions) ``bound_hist``: per result element type, the error
  as a fraction of the bound, |actual − oracle| / bound, over the checked elements
  (:func:`bound_histogram`; absent in older files); ``class_errors``: per diverging
  class, the worst error of its witnesses and how many involve inf/NaN (absent in
  older files).
- ``probe``: what one backend evidently does where the spec leaves it to the
  implementation (conformance.checking.probes): op, backend, element type, precision_config,
  the evident accumulation precision and order (or ``undetermined``), and the evidence.
- ``divergence``: one saved, minimised divergence with its reproducer path.
- ``invalid``: one invalid signature on one backend: rejected / accepted_invalid /
  unsupported / crash / timeout, and what the StableHLO verifier says of the program
  (``verifier``: its message, or null when the verifier accepts it).
- ``cross``: one signature on two or more backends: pairwise disagreements and
  suspected oracle defects (every backend diverges, all agree with each other).
- ``example``: one spec example on one backend.
- ``replay``: a reproducer an earlier run saved in the output folder, re-run first on
  one backend of this run: ``case_id``, ``backend``, ``class`` (now), ``class_before``
  (saved), ``found_on`` (the backend that diverged), ``same_backend``, ``repro``.
- ``program``: one generated program on one backend (``conformance programs``).
- ``module``: one module read in (a jax export, a test file) on one backend
  (``conformance check``, header :class:`CheckRunHeader` ``command: check``, end
  :class:`CheckEnd`): its three checks, its first diverging op with location and text,
  and the ops it holds that could not be judged (:class:`ModuleRecord`).
- ``internal_error``: a bug of the suite met while running one op.
- ``unit_done``: every record of one op has been written (for resuming: ``conformance
  run --resume`` keeps the ops that have one and runs the others again).
- ``end``: elapsed time and the ops covered (the totals are in the records above);
  :class:`MergedEnd` (``merged``) and :class:`ProgramsEnd` (``command: programs``).

A fuzz campaign's folder (conformance.apps.fuzz) holds no results file; its corpus index
lines (:class:`CorpusEntry`) and draw log lines (:class:`DrawLog`) are declared here
too, and its ``campaign.json`` carries the same ``format``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping

import numpy as np

#: The format version of results files this version writes.
FORMAT_VERSION = 1

#: The format versions this version reads.
KNOWN_FORMATS: tuple[int, ...] = (1,)


def json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# ---------------------------------------------------------------------------
# The schema: one dataclass per record kind
# ---------------------------------------------------------------------------

class _Absent:
    """The value of an optional field a record does not carry (left out of its JSON)."""

    _it: "_Absent | None" = None

    def __new__(cls) -> "_Absent":
        if cls._it is None:
            cls._it = super().__new__(cls)
        return cls._it

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


#: An optional field not given (falsy; not written).
ABSENT: Any = _Absent()


def _opt(key: str | None = None) -> Any:
    return dataclasses.field(default=ABSENT, metadata={"key": key} if key else {})


def _req(key: str | None = None) -> Any:
    return dataclasses.field(metadata={"key": key} if key else {})


class RecordError(ValueError):
    """A record that does not fit its declared class (one line naming kind and field)."""


class ResultsFormatError(ValueError):
    """A results file (or campaign file) this version cannot read: one line naming the
    file and line."""


@dataclasses.dataclass(kw_only=True)
class Declared:
    """A JSON object with a declared set of fields (see the module doc)."""

    LABEL: ClassVar[str] = "record"

    @classmethod
    def keys(cls) -> dict[str, dataclasses.Field]:
        """JSON key -> field, in the order :meth:`to_dict` writes them."""
        got = cls.__dict__.get("_keys")
        if got is None:
            got = {f.metadata.get("key", f.name): f for f in dataclasses.fields(cls)}
            cls._keys = got                                  # type: ignore[attr-defined]
        return got

    @classmethod
    def required(cls) -> tuple[str, ...]:
        return tuple(k for k, f in cls.keys().items()
                     if f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)

    @classmethod
    def check(cls, d: Mapping[str, Any], strict: bool = True) -> None:
        """RecordError unless ``d`` has every required field (and, ``strict``, no field
        this class does not declare)."""
        keys = cls.keys()
        for k in cls.required():
            if k not in d:
                raise RecordError(f"{cls.describe()} without {k!r}")
        if strict:
            for k in d:
                if k not in keys and k != "kind":
                    raise RecordError(f"{cls.describe()} with a field its kind does not "
                                      f"declare: {k!r}")

    @classmethod
    def describe(cls) -> str:
        return f"a {cls.LABEL}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, f in self.keys().items():
            v = getattr(self, f.name)
            if v is not ABSENT:
                out[k] = v
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Declared":
        """The object of a dict (RecordError if it does not fit this class)."""
        cls.check(d, strict=True)
        return cls(**{f.name: d[k] for k, f in cls.keys().items() if k in d})


@dataclasses.dataclass(kw_only=True)
class Record(Declared):
    """A results record: a :class:`Declared` object with a ``kind``."""

    KIND: ClassVar[str] = ""
    HEADER: ClassVar[bool] = False        # the first record of a file: carries ``format``

    @classmethod
    def describe(cls) -> str:
        return f"a {cls.KIND!r} record"

    @classmethod
    def variant(cls, d: Mapping[str, Any]) -> "type[Record]":
        """The class of this kind that ``d`` is written in (kinds with several forms)."""
        return cls

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, **super().to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Record":
        """The record object of a dict of this kind (of the form :meth:`variant` says)."""
        if d.get("kind") != cls.KIND:
            raise RecordError(f"not {cls.describe()}: kind {d.get('kind')!r}")
        real = cls.variant(d)
        real.check(d, strict=True)
        return real(**{f.name: d[k] for k, f in real.keys().items() if k in d})


#: kind -> the class of its records (the kind's first form; see :func:`record_class`)
RECORDS: dict[str, type[Record]] = {}


def _kind(cls):
    RECORDS.setdefault(cls.KIND, cls)
    return cls


@_kind
@dataclasses.dataclass(kw_only=True)
class RunHeader(Record):
    """``conformance run``'s header (the options ``--resume`` and ``merge`` compare; every
    one optional: readers compare those a header has)."""

    KIND: ClassVar[str] = "run"
    HEADER: ClassVar[bool] = True
    format: int = FORMAT_VERSION
    seed: int = _opt()
    depth: str = _opt()
    out: str = _opt()
    backends: list = _opt()          # each backend's describe()
    locators: list = _opt()          # absent in the oldest files
    ops: list | None = _opt()
    families: list | None = _opt()
    element_types: list | None = _opt()
    invalid: bool = _opt()
    examples: bool = _opt()
    max_repros: int = _opt()
    tolerances: dict | None = _opt()
    shard: str | None = _opt()
    started: float = _opt()

    @classmethod
    def variant(cls, d: Mapping[str, Any]) -> "type[Record]":
        if d.get("command") == "programs":
            return ProgramsRunHeader
        if d.get("command") == "check":
            return CheckRunHeader
        if "merged_from" in d:
            return MergedRunHeader
        return RunHeader


@dataclasses.dataclass(kw_only=True)
class MergedRunHeader(RunHeader):
    """``conformance merge``'s header: the first input's, the filters joined, the shards
    listed (no ``shard``), the earliest start."""

    merged_from: list = _req()
    shards: list = _opt()


@dataclasses.dataclass(kw_only=True)
class ProgramsRunHeader(Record):
    """``conformance programs``' header."""

    KIND: ClassVar[str] = "run"
    HEADER: ClassVar[bool] = True
    format: int = FORMAT_VERSION
    command: str = _req()            # "programs"
    seed: int = _opt()
    depth: str = _opt()
    count: int = _opt()
    start: int = _opt()
    max_ops: int = _opt()
    batch: int = _opt()
    ops: list | None = _opt()
    types: list | None = _opt()
    backends: list = _opt()
    locators: list = _opt()
    out: str = _opt()
    minimize: bool = _opt()
    started: float = _opt()
    resumed: int = _opt()            # records kept from an interrupted run

    @classmethod
    def variant(cls, d: Mapping[str, Any]) -> "type[Record]":
        return RunHeader.variant(d)


@dataclasses.dataclass(kw_only=True)
class CheckRunHeader(Record):
    """``conformance check``'s header (modules read in and judged, issue 29)."""

    KIND: ClassVar[str] = "run"
    HEADER: ClassVar[bool] = True
    format: int = FORMAT_VERSION
    command: str = _req()            # "check"
    modules: list = _opt()           # the module files, in order
    seed: int = _opt()
    depth: str = _opt()
    batch: int = _opt()
    inputs: str | None = _opt()      # --inputs FILE.npz
    backends: list = _opt()
    locators: list = _opt()
    out: str = _opt()
    started: float = _opt()
    resumed: int = _opt()            # module records kept from an interrupted check

    @classmethod
    def variant(cls, d: Mapping[str, Any]) -> "type[Record]":
        return RunHeader.variant(d)


@_kind
@dataclasses.dataclass(kw_only=True)
class Validity(Record):
    KIND: ClassVar[str] = "validity"
    op: str = _req()
    type_key: str = _req()
    generated: int = _req()
    valid: int = _opt()
    invalid_examples: dict = _opt()  # signature -> the rules it breaks (3 at most)


@_kind
@dataclasses.dataclass(kw_only=True)
class SignatureRecord(Record):
    """One signature on one backend (``counts``: cases per class; a compile that failed
    or was not run has ``cases`` 0 and the outcome with its ``reason``)."""

    KIND: ClassVar[str] = "signature"
    op: str = _req()
    family: str = _opt()
    type_key: str = _req()
    signature: str = _opt()
    index: int = _opt()
    backend: str = _req()
    outcome: str = _req()
    reason: str | None = _opt()
    cases: int = _opt()
    counts: dict = _opt()
    ulp_hist: list | None = _opt()
    max_error: float | str | None = _opt()
    impl_defined: dict = _opt()
    statistics: dict = _opt()        # property verdicts' statistical tests
    bound_hist: dict = _opt()        # bound verdicts: error / bound (bound_histogram)
    #: per diverging class: {worst, unit, cases, nonfinite} (compare.class_errors): the
    #: worst error of its witnesses (ULPs, eps, or a fraction of the bound: ``unit``; a
    #: string "inf" where infinite) and how many of its cases involve an inf or NaN;
    #: what an expectations entry's ``looks_like`` is matched against (absent in older
    #: files: an optional field, so the format version stays)
    class_errors: dict = _opt()
    coverage: dict = _opt()          # value classes the batches met


@_kind
@dataclasses.dataclass(kw_only=True)
class Cross(Record):
    KIND: ClassVar[str] = "cross"
    op: str = _req()
    family: str = _opt()
    type_key: str = _req()
    signature: str = _req()
    backends: list = _req()
    cases: int = _opt()
    disagreements: dict = _opt()
    oracle_suspects: int = _opt()
    produced: list = _opt()
    compared: dict = _opt()


@_kind
@dataclasses.dataclass(kw_only=True)
class Divergence(Record):
    KIND: ClassVar[str] = "divergence"
    backend: str = _req()
    op: str = _req()
    family: str = _opt()
    type_key: str = _req()
    cls: str = _req("class")
    minimised_class: str | None = _opt()
    case_id: str = _req()
    signature: str = _opt()
    minimised_signature: str = _opt()
    reproduces_alone: bool = _opt()
    case: dict = _opt()
    expected: list | None = _opt()
    actual: list | None = _opt()
    message: str | None = _opt()
    stablehlo: str | None = _opt()
    repro: str = _opt()
    batch_count: int | None = _opt()
    oracle_suspect: bool = _opt()
    arbiter: dict = _opt()


@_kind
@dataclasses.dataclass(kw_only=True)
class Invalid(Record):
    KIND: ClassVar[str] = "invalid"
    op: str = _req()
    family: str = _opt()
    backend: str = _req()
    rule: str = _req()
    signature: str = _opt()          # absent: not generated
    outcome: str = _req()
    reason: str | None = _opt()
    verifier: str | None = _opt()


@_kind
@dataclasses.dataclass(kw_only=True)
class Example(Record):
    KIND: ClassVar[str] = "example"
    op: str = _req()
    backend: str = _req()
    example: str = _opt()
    index: int = _req()
    outcome: str = _req()
    message: str | None = _opt()
    signature: str = _opt()


@_kind
@dataclasses.dataclass(kw_only=True)
class Probe(Record):
    KIND: ClassVar[str] = "probe"
    op: str = _req()
    backend: str = _req()
    element_type: str = _req()
    precision_config: Any = _req()
    accumulation: str = _req()
    precision_bits: int | None = _opt()
    bracket: list = _opt()
    detail: str = _opt()
    in_index_order: bool = _opt()
    order_models: list = _opt()
    order: str = _opt()
    order_detail: str = _opt()
    operand_precision: str = _opt()
    operand_bits: int | None = _opt()
    operand_rounded: Any = _opt()
    operand_detail: str = _opt()
    family: str = _opt()


@_kind
@dataclasses.dataclass(kw_only=True)
class Replay(Record):
    KIND: ClassVar[str] = "replay"
    case_id: str | None = _req()
    op: str | None = _opt()
    type_key: str | None = _opt()
    backend: str = _req()
    cls: str = _req("class")
    class_before: str | None = _opt()
    found_on: str | None = _opt()
    same_backend: bool = _opt()
    repro: str = _opt()
    message: str | None = _opt()


@_kind
@dataclasses.dataclass(kw_only=True)
class Program(Record):
    """One generated program on one backend (conformance.apps.programs)."""

    KIND: ClassVar[str] = "program"
    id: str = _req()
    backend: str = _req()
    seed: int = _opt()
    index: int = _opt()
    ops: list = _opt()
    patterns: list = _opt()
    exercised: list = _opt()
    size: int = _opt()
    outcome: str = _req()
    message: str | None = _opt()
    checks: list = _opt()
    fusion: bool | None = _opt()
    findings: list = _opt()
    seconds: float = _opt()
    reason: str | None = _opt()
    minimized: dict = _opt()
    trace: list = _opt()
    repro: str = _opt()
    program: dict = _opt()
    text: str = _opt()


@_kind
@dataclasses.dataclass(kw_only=True)
class ModuleRecord(Record):
    """One module read in, on one backend (conformance.apps.check): its three checks
    (conformance.checking.modules) and what of it could not be judged."""

    KIND: ClassVar[str] = "module"
    id: str = _req()                 # the module file
    backend: str = _req()
    outcome: str = _req()
    message: str | None = _opt()
    judged_ops: int = _opt()         # operations check 1 judged
    ops: int = _opt()                # operations read
    unjudged: list = _opt()          # {op, location, reason} of the ops not judged
    dropped_results: list = _opt()   # results of @main that depend on one of those
    first: dict | None = _opt()      # the first diverging op: location, text, values
    op_by_op: list = _opt()          # check 1's findings
    whole: dict = _opt()             # checks 2 and 3 (the program verdict)
    seconds: float = _opt()
    program: dict = _opt()           # the program read, where it diverged
    origins: dict = _opt()           # operation name -> {op, location, text}
    operations: list = _opt()        # [name, op] of every operation read, in order
    #: [name, op, the module-level while holding it, depth, cond|body] of every op inside
    #: a while (check 1 judges them trip by trip), in module order
    loop_operations: list = _opt()
    op_outcomes: dict = _opt()       # operation name -> its check-1 outcome
    repro: str = _opt()              # the folder of its minimal reproducer


@_kind
@dataclasses.dataclass(kw_only=True)
class InternalError(Record):
    KIND: ClassVar[str] = "internal_error"
    op: str = _req()
    type_key: str = _opt()
    what: str = _req()
    error: str = _req()
    traceback: str = _opt()


@_kind
@dataclasses.dataclass(kw_only=True)
class UnitDone(Record):
    KIND: ClassVar[str] = "unit_done"
    op: str = _req()
    part: list = _opt()              # [k, m]: the k-th of m parts of the op


@_kind
@dataclasses.dataclass(kw_only=True)
class RunEnd(Record):
    KIND: ClassVar[str] = "end"
    elapsed: float = _opt()
    ops: list = _opt()

    @classmethod
    def variant(cls, d: Mapping[str, Any]) -> "type[Record]":
        if d.get("command") == "programs":
            return ProgramsEnd
        if d.get("command") == "check":
            return CheckEnd
        if "merged" in d:
            return MergedEnd
        return RunEnd


@dataclasses.dataclass(kw_only=True)
class MergedEnd(RunEnd):
    merged: int = _req()             # how many results files


@dataclasses.dataclass(kw_only=True)
class ProgramsEnd(Record):
    KIND: ClassVar[str] = "end"
    command: str = _req()            # "programs"
    elapsed: float = _opt()
    validity: dict = _opt()

    @classmethod
    def variant(cls, d: Mapping[str, Any]) -> "type[Record]":
        return RunEnd.variant(d)


@dataclasses.dataclass(kw_only=True)
class CheckEnd(Record):
    KIND: ClassVar[str] = "end"
    command: str = _req()            # "check"
    elapsed: float = _opt()
    outcomes: dict = _opt()          # outcome -> how many (module, backend) pairs

    @classmethod
    def variant(cls, d: Mapping[str, Any]) -> "type[Record]":
        return RunEnd.variant(d)


#: Every record class (each form of every kind).
RECORD_CLASSES: tuple[type[Record], ...] = (
    RunHeader, MergedRunHeader, ProgramsRunHeader, Validity, SignatureRecord, Cross,
    Divergence, Invalid, Example, Probe, Replay, Program, InternalError, UnitDone, RunEnd,
    MergedEnd, ProgramsEnd, CheckRunHeader, ModuleRecord, CheckEnd)


def record_class(d: Any) -> type[Record]:
    """The declared class of a record dict (RecordError: not a record, unknown kind)."""
    if not isinstance(d, dict):
        raise RecordError("not a results record (a JSON object with a 'kind')")
    kind = d.get("kind")
    if "kind" not in d:
        raise RecordError("a record without 'kind'")
    cls = RECORDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RecordError(f"unknown record kind {kind!r}")
    return cls.variant(d)


def check_record(d: Any, strict: bool = True) -> type[Record]:
    """``d``'s class, after checking that ``d`` fits it (RecordError: not a record, an
    unknown kind, a required field missing, and with ``strict`` a field the class does
    not declare)."""
    cls = record_class(d)
    cls.check(d, strict)
    return cls


def record_from_dict(d: Any) -> Record:
    """The record object of a record dict (its kind's class; RecordError)."""
    return record_class(d).from_dict(d)


def header_format(d: Mapping[str, Any]) -> Any:
    """The format version a header record says (1 when it says none)."""
    return d.get("format", 1)


def known_format(fmt: Any) -> bool:
    return isinstance(fmt, int) and not isinstance(fmt, bool) and fmt in KNOWN_FORMATS


def format_problem(fmt: Any) -> str:
    return (f"results format {json.dumps(fmt, default=str)} is not known to this version "
            f"of the suite (it reads format "
            f"{', '.join(str(f) for f in KNOWN_FORMATS)})")


# -- the fuzz campaign folder's lines (no kind: files of their own) ----------------------

@dataclasses.dataclass(kw_only=True)
class CorpusEntry(Declared):
    """One line of a fuzz campaign's ``corpus/index.jsonl``: a distinct divergence."""

    LABEL: ClassVar[str] = "corpus entry"
    key: str = _req()
    backend: str = _req()
    op: str = _req()
    where: str = _req()
    cls: str = _req("class")
    shape: str = _req()
    case_id: str | None = _opt()
    signature: str | None = _opt()
    repro: str | None = _opt()
    draw: int = _opt()
    seed: int = _opt()
    found: float = _opt()
    message: str | None = _opt()


@dataclasses.dataclass(kw_only=True)
class DrawLog(Declared):
    """One line of a fuzz campaign's ``log.jsonl``: a finished draw."""

    LABEL: ClassVar[str] = "draw log line"
    draw: int = _req()
    round: int = _req()
    seed: int = _req()
    op: str = _req()
    cases: int = _req()
    new: list = _req()
    known: list = _req()
    seconds: float = _req()
    failed: str = _opt()             # the unit raised (a suite error)


# ---------------------------------------------------------------------------
# Writing and reading
# ---------------------------------------------------------------------------

def as_record_dict(record: "Record | dict[str, Any]") -> dict[str, Any]:
    """The dict a writer writes for ``record``: a record object's :meth:`~Record.to_dict`,
    or a dict checked against its kind's class (ValueError naming kind and field); a
    header gets ``format`` (:data:`FORMAT_VERSION`) when it has none."""
    if isinstance(record, Record):
        cls, d = type(record), record.to_dict()
    else:
        cls, d = check_record(record, strict=True), record
    if cls.HEADER and "format" not in d:
        d = {"kind": d["kind"], "format": FORMAT_VERSION, **d}
    return d


class ResultsWriter:
    """Appends records to a JSON-lines file; safe to share between threads. Each record
    (a :class:`Record` or a dict) is checked against the schema first
    (:func:`as_record_dict`)."""

    def __init__(self, path: "str | Path", append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a" if append else "w", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: "Record | dict[str, Any]") -> None:
        record = as_record_dict(record)
        line = json.dumps(record, default=json_default, allow_nan=False, separators=(",", ":"))
        with self._lock:
            self._f.write(line + "\n")
            self._f.flush()
            if record.get("kind") in ("unit_done", "end"):
                os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _json_lines(path: "str | Path") -> Iterator[tuple[int, Any]]:
    """(line number, value) of a JSON-lines file, skipping blank lines and a torn
    (partially written) last line; ResultsFormatError for another line that is not JSON."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for i, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                return
            raise ResultsFormatError(f"{path}:{i + 1}: not a JSON record") from None
        except RecursionError:
            raise ResultsFormatError(f"{path}:{i + 1}: not a JSON record (nested too "
                                     f"deeply)") from None
        yield i + 1, value


def read_results(path: "str | Path", strict: bool = False) -> Iterator[dict[str, Any]]:
    """Records of a results file (dicts, as written), skipping a torn last line.

    Raises :class:`ResultsFormatError` (one line: ``FILE:LINE: ...``) at a header of a
    format this version does not know, a record of an unknown kind, a record without a
    required field, or a line that is not a JSON object. A header without ``format``
    is format 1. Fields a record's class does not declare are kept, or with ``strict``
    refused too: readers that write the records again (merge, ``--resume``) read
    strictly, as the writer would refuse them."""
    for n, r in _json_lines(path):
        try:
            cls = check_record(r, strict=strict)
        except RecordError as e:
            raise ResultsFormatError(f"{path}:{n}: {e}") from None
        if cls.HEADER and not known_format(header_format(r)):
            raise ResultsFormatError(f"{path}:{n}: {format_problem(header_format(r))}")
        yield r


def read_declared(path: "str | Path", cls: "type[Declared]") -> Iterator[dict[str, Any]]:
    """The lines of a JSON-lines file of ``cls`` objects (a fuzz corpus index, a draw
    log), as dicts, each checked for ``cls``'s required fields (ResultsFormatError naming
    file and line); a torn last line is skipped."""
    for n, r in _json_lines(path):
        if not isinstance(r, dict):
            raise ResultsFormatError(f"{path}:{n}: not {cls.describe()} (a JSON object)")
        try:
            cls.check(r, strict=False)
        except RecordError as e:
            raise ResultsFormatError(f"{path}:{n}: {e}") from None
        yield r


def finite_or_none(x: float | None) -> float | str | None:
    """JSON has no inf/nan: encode them as strings."""
    if x is None:
        return None
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


# ---------------------------------------------------------------------------
# The error as a fraction of the bound (``bound_hist`` of ``signature`` records)
# ---------------------------------------------------------------------------

#: Upper edges of the buckets of |actual − oracle| / bound, after the first bucket
#: (exactly 0): (0, 2^-16], (2^-16, 2^-15], ..., (1/2, 1]; the last bucket is > 1
#: (beyond the bound: a divergence unless a looser rule passed it).
BOUND_FRACTION_EDGES: list[float] = [2.0 ** -k for k in range(16, -1, -1)]
BOUND_BUCKET_LABELS: list[str] = (["0", "≤2^-16"] +
                                  [f"≤2^-{k}" for k in range(15, 0, -1)] + ["≤1", ">1"])


def bound_histogram(diff: np.ndarray, bound: np.ndarray) -> dict[str, Any]:
    """One element type's entry of ``bound_hist``: ``counts`` per bucket of
    ``diff / bound`` (:data:`BOUND_BUCKET_LABELS`) over the elements whose bound is > 0,
    ``max`` (the largest fraction seen), ``exact`` (elements whose bound is 0: every legal
    evaluation gives the oracle's value, checked bit for bit), ``exact_off`` (of
    those, how many differed) and ``vacuous`` (elements whose bound is infinite: a sum
    too long for the type's precision). ``diff`` and ``bound`` are the checked elements
    only (finite, not masked)."""
    diff = np.asarray(diff, np.float64).ravel()
    bound = np.broadcast_to(np.asarray(bound, np.float64), np.shape(diff)).ravel() \
        if np.ndim(bound) == 0 else np.asarray(bound, np.float64).ravel()
    positive = (bound > 0) & np.isfinite(bound)
    with np.errstate(all="ignore"):
        frac = diff[positive] / bound[positive]
    counts = np.zeros(len(BOUND_BUCKET_LABELS), np.int64)
    if frac.size:
        counts[0] = int(np.count_nonzero(frac == 0))
        nz = frac[frac > 0]
        idx = np.searchsorted(np.array(BOUND_FRACTION_EDGES), nz, side="left")
        counts[1:] += np.bincount(idx, minlength=len(BOUND_BUCKET_LABELS) - 1)
    # JSON has no inf: an infinite fraction (|actual - oracle| overflowing, as two huge
    # f64 values of opposite signs give) is recorded as the largest finite float
    big = float(np.finfo(np.float64).max)
    return {"counts": counts.tolist(),
            "max": float(np.nan_to_num(frac.max(), nan=big, posinf=big)) if frac.size else 0.0,
            "exact": int(np.count_nonzero(bound == 0)),
            "exact_off": int(np.count_nonzero((bound == 0) & (diff > 0))),
            "vacuous": int(np.count_nonzero(np.isinf(bound)))}


def merge_bound_hist(into: dict[str, dict], other: "dict[str, dict] | None") -> dict:
    """Add ``bound_hist`` entries (per element type) to a total; unknown or malformed
    entries (a newer or older file's) are skipped."""
    for et, h in (other or {}).items():
        if not isinstance(h, dict) or not isinstance(h.get("counts"), list):
            continue
        counts = [int(c) for c in h["counts"]]
        d = into.setdefault(str(et), {"counts": [0] * len(counts), "max": 0.0,
                                      "exact": 0, "exact_off": 0, "vacuous": 0})
        if len(d["counts"]) != len(counts):
            continue
        d["counts"] = [a + b for a, b in zip(d["counts"], counts)]
        try:
            d["max"] = max(float(d["max"]), float(h.get("max") or 0.0))
        except (TypeError, ValueError):
            pass
        d["exact"] += int(h.get("exact") or 0)
        d["exact_off"] += int(h.get("exact_off") or 0)
        d["vacuous"] = d.get("vacuous", 0) + int(h.get("vacuous") or 0)
    return into
