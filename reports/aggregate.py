"""The report's data model, built once from the records of a results file.

The HTML pages, ``summary.json`` and ``junit.xml`` all read this one model, so
they agree on what a cell's outcome is and on every total. Records of unknown
kinds and unknown keys are kept or ignored, never an error: the results format
grows, and a report of a newer run must still render.

With two or more backends the runner also writes ``cross`` records (one per
signature): the backends compared case by case with each other, the cases
where each pair disagrees, and the *oracle suspects*, cases where every backend
diverged from the oracle while all agreed with each other. They are kept per
(op, type key) in :class:`CrossCell`; divergence records carry
``oracle_suspect`` to say which saved divergences are such cases.
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from conformance.checking.compare import merge_impl_stats, merge_statistics, worst
from conformance.core.results import merge_bound_hist, read_results
from conformance.core.types import ALL_ELEMENT_TYPES

#: Matrix columns: every spec element type, in spec order.
COLUMNS: list[str] = [t.name for t in ALL_ELEMENT_TYPES]
#: Invalid-case outcomes that mean "a case breaking the rule was generated".
GENERATED = ("rejected", "accepted_invalid", "unsupported")
#: Outcomes that are errors of the backend rather than wrong values (JUnit <error>).
ERRORS = ("backend_error", "crash", "timeout")


def first_type(type_key: str) -> str:
    """The matrix column of a type key: ``si8->f32`` is listed under ``si8``."""
    return type_key.split("->")[0]


def parse_error(x: Any) -> float | None:
    """A ``max_error`` value (float, "inf", "nan" or null) as a float."""
    if x is None or isinstance(x, bool):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _max_error(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b)


def _add_unique(items: list, x: Any) -> None:
    if x and x not in items:
        items.append(x)


@dataclasses.dataclass
class Cell:
    """The ``signature`` records of one (backend, op, type key), or of a matrix column."""

    records: int = 0
    outcomes: Counter = dataclasses.field(default_factory=Counter)   # per signature record
    cases: int = 0
    counts: Counter = dataclasses.field(default_factory=Counter)     # per case
    max_error: float | None = None
    ulp_hist: list[int] | None = None
    impl_defined: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    #: statistical tests of property verdicts (rng): name -> tests, failed, samples, worst
    statistics: dict[str, dict] = dataclasses.field(default_factory=dict)
    #: the error as a fraction of the bound (ops judged by a ``bound``), per element type:
    #: counts per conformance.core.results.BOUND_BUCKET_LABELS, max, exact, exact_off
    bound_hist: dict[str, dict] = dataclasses.field(default_factory=dict)
    reasons: list[str] = dataclasses.field(default_factory=list)     # deduplicated
    signatures: list[str] = dataclasses.field(default_factory=list)  # deduplicated
    type_keys: list[str] = dataclasses.field(default_factory=list)

    def add(self, rec: dict[str, Any]) -> None:
        self.records += 1
        self.outcomes[str(rec.get("outcome", "pass"))] += 1
        self.cases += int(rec.get("cases") or 0)
        for cls, n in (rec.get("counts") or {}).items():
            self.counts[cls] += int(n)
        self.max_error = _max_error(self.max_error, parse_error(rec.get("max_error")))
        hist = rec.get("ulp_hist")
        if hist:
            if self.ulp_hist is None:
                self.ulp_hist = [int(n) for n in hist]
            else:
                self.ulp_hist = [a + int(b) for a, b in zip(self.ulp_hist, hist)]
        merge_impl_stats(self.impl_defined, rec.get("impl_defined") or {})
        merge_statistics(self.statistics, rec.get("statistics") or {})
        if isinstance(rec.get("bound_hist"), dict):
            merge_bound_hist(self.bound_hist, rec["bound_hist"])
        _add_unique(self.reasons, rec.get("reason"))
        _add_unique(self.signatures, rec.get("signature"))
        _add_unique(self.type_keys, rec.get("type_key"))

    def merge(self, other: "Cell") -> None:
        self.records += other.records
        self.outcomes.update(other.outcomes)
        self.cases += other.cases
        self.counts.update(other.counts)
        self.max_error = _max_error(self.max_error, other.max_error)
        if other.ulp_hist is not None:
            self.ulp_hist = (list(other.ulp_hist) if self.ulp_hist is None else
                             [a + b for a, b in zip(self.ulp_hist, other.ulp_hist)])
        merge_impl_stats(self.impl_defined, other.impl_defined)
        merge_statistics(self.statistics, other.statistics)
        merge_bound_hist(self.bound_hist, other.bound_hist)
        for r in other.reasons:
            _add_unique(self.reasons, r)
        for s in other.signatures:
            _add_unique(self.signatures, s)
        for k in other.type_keys:
            _add_unique(self.type_keys, k)

    @property
    def outcome(self) -> str:
        """Worst outcome among the signatures that ran; ``unsupported`` only if none ran.

        A cell where some signatures pass and others are unsupported is ``pass``
        (with :attr:`partial` set): green means every case that ran agreed.
        """
        ran = [o for o in self.outcomes if o != "unsupported"]
        if ran:
            return worst(ran)
        return "unsupported" if self.outcomes else "not_run"

    @property
    def unsupported(self) -> int:
        return self.outcomes.get("unsupported", 0)

    @property
    def partial(self) -> bool:
        return 0 < self.unsupported < self.records

    @property
    def diverging(self) -> dict[str, int]:
        return {k: v for k, v in sorted(self.counts.items()) if k != "pass"}

    @property
    def has_ulp(self) -> bool:
        return bool(self.ulp_hist) and sum(self.ulp_hist) > 0


#: Kinds of value coverage (generators/coverage.py), in display order.
COVERAGE_KINDS = ("pairs", "classes", "targets")


@dataclasses.dataclass
class Coverage:
    """The value coverage of one (op, type key): what the value batches of its signatures
    met of the op's coverage model (``coverage`` fields of ``signature`` records, every
    backend's; a record says what its signature missed, so the type key missed what
    every record missed)."""

    of: dict[str, int] = dataclasses.field(default_factory=dict)         # kind -> targeted
    missing: dict[str, set] = dataclasses.field(default_factory=dict)    # kind -> missed by all
    records: int = 0

    def add(self, cov: Any) -> None:
        if not isinstance(cov, dict) or not isinstance(cov.get("of"), dict):
            return
        self.records += 1
        miss = cov.get("missing") if isinstance(cov.get("missing"), dict) else {}
        for kind, n in cov["of"].items():
            items = {str(x) for x in (miss.get(kind) or [])}
            if kind in self.missing:
                self.missing[kind] &= items
            else:
                self.missing[kind] = items
            self.of[kind] = max(self.of.get(kind, 0), int(n or 0))

    def met(self, kind: str) -> int:
        return max(0, self.of.get(kind, 0) - len(self.missing.get(kind, ())))

    def kinds(self) -> list[str]:
        return [k for k in COVERAGE_KINDS if self.of.get(k)] + \
            sorted(k for k in self.of if k not in COVERAGE_KINDS and self.of[k])

    def totals(self) -> dict[str, dict[str, int]]:
        return {k: {"met": self.met(k), "of": self.of[k]} for k in self.kinds()}

    @property
    def complete(self) -> bool:
        return all(self.met(k) == self.of[k] for k in self.kinds())


def coverage_sum(covs: Iterable[Coverage]) -> dict[str, dict[str, int]]:
    """Met and targeted per kind, summed over several type keys (or ops)."""
    out: dict[str, dict[str, int]] = {}
    for c in covs:
        for k, t in c.totals().items():
            d = out.setdefault(k, {"met": 0, "of": 0})
            d["met"] += t["met"]
            d["of"] += t["of"]
    return {k: out[k] for k in COVERAGE_KINDS if k in out} | \
        {k: v for k, v in sorted(out.items()) if k not in COVERAGE_KINDS}


def pair_backends(pair: str) -> tuple[str, str]:
    """The two backends of a ``cross`` record's pair key (``"jax~numpy"``)."""
    a, _, b = pair.partition("~")
    return a, b


@dataclasses.dataclass
class CrossCell:
    """The ``cross`` records of one (op, type key) or of a matrix column: the backends
    compared with each other, case by case."""

    records: int = 0
    cases: int = 0
    backends: list[str] = dataclasses.field(default_factory=list)
    disagreements: Counter = dataclasses.field(default_factory=Counter)   # pair -> cases
    compared: Counter = dataclasses.field(default_factory=Counter)        # pair -> cases
    oracle_suspects: int = 0
    signatures: list[str] = dataclasses.field(default_factory=list)
    type_keys: list[str] = dataclasses.field(default_factory=list)

    def add(self, rec: dict[str, Any]) -> None:
        self.records += 1
        cases = int(rec.get("cases") or 0)
        self.cases += cases
        names = [str(b) for b in rec.get("backends") or []]
        for b in names:
            _add_unique(self.backends, b)
        if isinstance(rec.get("compared"), dict):      # per pair: both produced results
            for pair, n in rec["compared"].items():
                self.compared[str(pair)] += int(n or 0)
        else:                                          # older records: every pair
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    self.compared[f"{a}~{b}"] += cases
        for pair, n in (rec.get("disagreements") or {}).items():
            self.disagreements[str(pair)] += int(n or 0)
            self.compared.setdefault(str(pair), 0)
        self.oracle_suspects += int(rec.get("oracle_suspects") or 0)
        _add_unique(self.signatures, rec.get("signature"))
        _add_unique(self.type_keys, rec.get("type_key"))

    def merge(self, other: "CrossCell") -> None:
        self.records += other.records
        self.cases += other.cases
        for b in other.backends:
            _add_unique(self.backends, b)
        self.disagreements.update(other.disagreements)
        self.compared.update(other.compared)
        for pair in other.compared:
            self.compared.setdefault(pair, 0)
        self.oracle_suspects += other.oracle_suspects
        for s in other.signatures:
            _add_unique(self.signatures, s)
        for k in other.type_keys:
            _add_unique(self.type_keys, k)

    @property
    def disagreeing(self) -> int:
        """Cases summed over pairs (a case where three backends split counts up to 3 times)."""
        return sum(self.disagreements.values())

    def pairs(self) -> list[str]:
        return list(self.compared)


@dataclasses.dataclass
class RuleResult:
    """Every invalid case of one rule of one op on one backend."""

    rule: str
    outcomes: Counter = dataclasses.field(default_factory=Counter)
    reasons: list[str] = dataclasses.field(default_factory=list)
    signatures: list[str] = dataclasses.field(default_factory=list)

    @property
    def outcome(self) -> str:
        for o in ("accepted_invalid", "rejected", "unsupported", "not_generated"):
            if self.outcomes.get(o):
                return o
        return next(iter(self.outcomes), "not_generated")

    @property
    def generated(self) -> bool:
        return any(self.outcomes.get(o) for o in GENERATED)


@dataclasses.dataclass
class OpData:
    """Everything recorded about one op."""

    name: str
    family: str = "other"
    spec: Any = None                          # OpSpec, or None if it cannot be loaded
    cells: dict[tuple[str, str], Cell] = dataclasses.field(default_factory=dict)
    divergences: list[dict] = dataclasses.field(default_factory=list)
    invalid: dict[tuple[str, str], RuleResult] = dataclasses.field(default_factory=dict)
    examples: list[dict] = dataclasses.field(default_factory=list)
    internal_errors: list[dict] = dataclasses.field(default_factory=list)
    done: bool = False
    generated: int = 0                        # signatures the generators planned
    valid: int = 0                            # ... of which satisfy every rule of the spec
    cross: dict[str, CrossCell] = dataclasses.field(default_factory=dict)   # by type key
    values: dict[str, Coverage] = dataclasses.field(default_factory=dict)   # by type key
    #: ``probe`` records: what each backend evidently does where the spec leaves it open
    #: (accumulation precision and order; conformance.checking.probes)
    probes: list[dict] = dataclasses.field(default_factory=list)

    def value_keys(self) -> list[str]:
        """Type keys with value coverage recorded, in matrix order."""
        return sorted((k for k, c in self.values.items() if c.of), key=_type_key_order)

    def value_totals(self) -> dict[str, dict[str, int]]:
        """Value coverage of the op: met / targeted per kind, over its type keys."""
        return coverage_sum(self.values[k] for k in self.value_keys())

    @property
    def summary(self) -> str:
        return getattr(self.spec, "summary", "") if self.spec is not None else ""

    def type_keys(self, backend: str) -> list[str]:
        keys = [k for b, k in self.cells if b == backend]
        return sorted(keys, key=_type_key_order)

    def applicable(self) -> set[str]:
        """Matrix columns the spec allows for this op (or, without a spec, those seen)."""
        if self.spec is not None:
            try:
                from conformance.specs import binding_key
                return {first_type(binding_key(b)) for b in self.spec.type_bindings()}
            except Exception:  # noqa: BLE001 - a broken spec must not break the report
                pass
        return {first_type(k) for _, k in self.cells}

    def column(self, backend: str, column: str) -> Cell | None:
        """The matrix cell: every type key of ``backend`` whose first type is ``column``."""
        out = None
        for (b, k), cell in self.cells.items():
            if b == backend and first_type(k) == column:
                out = out or Cell()
                out.merge(cell)
        return out

    def cross_keys(self) -> list[str]:
        return sorted(self.cross, key=_type_key_order)

    def bound_hists(self, backend: str) -> dict[str, dict]:
        """The error as a fraction of the bound on ``backend``, per result element type,
        over every type key (empty where no verdict of the op is a ``bound``)."""
        out: dict[str, dict] = {}
        for (b, _), cell in self.cells.items():
            if b == backend:
                merge_bound_hist(out, cell.bound_hist)
        return {k: out[k] for k in sorted(out, key=_type_key_order)}

    def cross_column(self, column: str) -> CrossCell | None:
        """Backends compared with each other over every type key under ``column``."""
        out = None
        for k, cc in self.cross.items():
            if first_type(k) == column:
                out = out or CrossCell()
                out.merge(cc)
        return out

    def cross_total(self) -> CrossCell:
        out = CrossCell()
        for cc in self.cross.values():
            out.merge(cc)
        return out

    @property
    def cross_differs(self) -> bool:
        """Whether two backends disagreed, or all agreed against the oracle, on some case."""
        return any(c.disagreeing or c.oracle_suspects for c in self.cross.values())

    def suspect_divergences(self) -> list[tuple[int, dict]]:
        """Saved divergences flagged ``oracle_suspect``, with their index on the op page."""
        return [(i, d) for i, d in enumerate(self.divergences) if d.get("oracle_suspect")]

    def rule_ids(self) -> list[str]:
        """The op's rules in spec order, then any others seen in records."""
        ids: list[str] = [c.id for c in self.checks()]
        for _, rule in self.invalid:
            _add_unique(ids, rule)
        return ids

    def checks(self) -> list:
        if self.spec is None:
            return []
        try:
            from conformance.specs.validity import checks
            return checks(self.spec)
        except Exception:  # noqa: BLE001
            return []

    def rule_text(self, rule: str) -> str:
        for c in self.checks():
            if c.id == rule:
                return c.text
        return ""

    def coverage(self, backend: str) -> dict[str, int]:
        """Negative conformance of one backend: rules broken on purpose, and the answers."""
        results = [r for (b, _), r in self.invalid.items() if b == backend]
        counts: Counter = Counter()
        for r in results:
            counts.update(r.outcomes)
        labelled = [c.id for c in self.checks() if c.kind == "constraint"]
        by_rule = {rule: r for (b, rule), r in self.invalid.items() if b == backend}
        return {"rules": len(self.rule_ids()),
                "generated": sum(1 for r in results if r.generated),
                # the spec's labelled constraints (C1, C2, ...) with a negative case
                "constraints": len(labelled),
                "constraints_covered": sum(1 for c in labelled
                                           if c in by_rule and by_rule[c].generated),
                **{o: counts.get(o, 0) for o in
                   ("rejected", "accepted_invalid", "unsupported", "not_generated")}}


def _type_key_order(key: str) -> tuple:
    parts = key.split("->")
    return tuple((COLUMNS.index(p) if p in COLUMNS else len(COLUMNS), p) for p in parts)


@dataclasses.dataclass
class Report:
    """A whole results file, aggregated."""

    run: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    backends: list[str] = dataclasses.field(default_factory=list)
    backend_info: dict[str, dict] = dataclasses.field(default_factory=dict)
    ops: dict[str, OpData] = dataclasses.field(default_factory=dict)
    internal_errors: list[dict] = dataclasses.field(default_factory=list)
    replays: list[dict] = dataclasses.field(default_factory=list)   # reproducers re-run first
    unknown_records: int = 0
    #: The CI gate (reports.gating.GateView) when rendered with an expectations file.
    gate: Any = None
    #: ``program`` records of conformance programs (reports.programs.ProgramsView)
    programs: Any = None
    #: ``module`` records of conformance check (reports.modules.ModulesView)
    modules: Any = None

    @property
    def complete(self) -> bool:
        return self.end is not None

    def value_totals(self) -> dict[str, dict[str, int]]:
        """Value coverage of the run: met / targeted per kind, over every op."""
        return coverage_sum(c for o in self.ops.values() for k in o.value_keys()
                            for c in [o.values[k]])

    def coverage_totals(self, backend: str) -> dict[str, int]:
        """Negative conformance of one backend summed over every op of the run."""
        total: Counter = Counter()
        for op in self.ops.values():
            total.update(op.coverage(backend))
        return dict(total)

    def planned_ops(self) -> list[str] | None:
        """The ops the run set out to do, where the header or end record says so."""
        for rec in (self.end, self.run):
            if rec and isinstance(rec.get("ops"), list):
                return rec["ops"]
        return None

    def op(self, name: str, family: str | None = None) -> OpData:
        if name not in self.ops:
            spec = _load_spec(name)
            fam = family or (getattr(spec, "family", None) if spec is not None else None)
            self.ops[name] = OpData(name, fam or "other", spec)
        elif family and self.ops[name].family == "other":
            self.ops[name].family = family
        return self.ops[name]

    def backend(self, name: str | None) -> str:
        name = name or "?"
        if name not in self.backends:
            self.backends.append(name)
        return name

    def sorted_ops(self) -> list[OpData]:
        return sorted(self.ops.values(), key=lambda o: (o.family, o.name))

    def families(self) -> list[tuple[str, list[OpData]]]:
        out: dict[str, list[OpData]] = {}
        for o in self.sorted_ops():
            out.setdefault(o.family, []).append(o)
        return list(out.items())

    def examples(self, backend: str | None = None) -> list[dict]:
        return [e for o in self.sorted_ops() for e in o.examples
                if backend is None or e.get("backend") == backend]

    def divergences(self) -> list[dict]:
        return [d for o in self.sorted_ops() for d in o.divergences]

    def probes(self) -> list[dict]:
        """The implementation-defined behaviour matrix: every ``probe`` record, by op,
        backend (in run order), element type and precision_config."""
        order = {b: i for i, b in enumerate(self.backends)}
        return sorted((p for o in self.sorted_ops() for p in o.probes),
                      key=lambda p: (str(p.get("op")), order.get(p.get("backend"), len(order)),
                                     _type_key_order(str(p.get("element_type", ""))),
                                     str(p.get("precision_config") or "")))

    @property
    def cross_run(self) -> bool:
        """Whether backends were compared with each other (a ``cross`` record, or 2+ backends)."""
        return len(self.backends) > 1 or any(o.cross for o in self.ops.values())

    def cross_total(self) -> CrossCell:
        out = CrossCell()
        for o in self.ops.values():
            for cc in o.cross.values():
                out.merge(cc)
        return out

    def pairs(self) -> list[str]:
        """Pairs of backends compared, in the order of the run's backends."""
        pairs = self.cross_total().pairs()
        order = {b: i for i, b in enumerate(self.backends)}

        def key(p: str) -> tuple:
            a, b = pair_backends(p)
            return (order.get(a, len(order)), order.get(b, len(order)), p)
        return sorted(pairs, key=key)

    def pair_top_ops(self, pair: str, n: int = 5) -> list[tuple[str, int]]:
        """The ops where ``pair`` disagrees most: (op, cases), largest first."""
        counts = [(o.name, o.cross_total().disagreements.get(pair, 0)) for o in self.sorted_ops()]
        counts = [c for c in counts if c[1]]
        return sorted(counts, key=lambda c: -c[1])[:n]

    def suspects(self) -> list[tuple[OpData, str, CrossCell]]:
        """Every (op, type key) with suspected oracle defects (cases where all backends
        agree with each other against the oracle), or a saved divergence flagged so."""
        out = []
        for o in self.sorted_ops():
            flagged = {d.get("type_key") for _, d in o.suspect_divergences()}
            for k in o.cross_keys():
                if o.cross[k].oracle_suspects or k in flagged:
                    out.append((o, k, o.cross[k]))
            for k in sorted(flagged - set(o.cross), key=lambda k: _type_key_order(str(k))):
                out.append((o, str(k), CrossCell()))
        return out

    def totals(self, backend: str | None = None) -> dict[str, Any]:
        """Cases checked, diverging cases and signatures by class, unsupported, masked,
        and (backends compared with each other) disagreements and oracle suspects."""
        cell = Cell()
        saved: Counter = Counter()
        examples: Counter = Counter()
        cross = CrossCell()
        saved_suspects = 0
        for o in self.ops.values():
            for (b, _), c in o.cells.items():
                if backend is None or b == backend:
                    cell.merge(c)
            for cc in o.cross.values():
                if backend is None or backend in cc.backends:
                    cross.merge(cc)
            for d in o.divergences:
                if backend is None or d.get("backend") == backend:
                    saved[str(d.get("class"))] += 1
                    saved_suspects += bool(d.get("oracle_suspect"))
            for e in o.examples:
                if backend is None or e.get("backend") == backend:
                    examples[str(e.get("outcome"))] += 1
        impl = {"elements": sum(d["elements"] for d in cell.impl_defined.values()),
                "conventional": sum(d["conventional"] for d in cell.impl_defined.values())}
        alternatives = sum(n for d in cell.impl_defined.values()
                           for n in (d.get("alternatives") or {}).values())
        outside = sum(d.get("outside", 0) for d in cell.impl_defined.values())
        if alternatives or outside:
            impl.update(alternatives=alternatives, outside=outside)
        return {
            "signatures": cell.records,
            "cases": cell.cases,
            "diverging_cases": cell.diverging,
            "diverging_signatures": {k: v for k, v in sorted(cell.outcomes.items())
                                     if k not in ("pass", "unsupported")},
            "saved_divergences": dict(sorted(saved.items())),
            "unsupported_signatures": cell.unsupported,
            "impl_defined": impl,
            "examples": dict(sorted(examples.items())),
            "validity": {"generated": sum(o.generated for o in self.ops.values()),
                         "valid": sum(o.valid for o in self.ops.values())},
            "internal_errors": sum(1 for e in self.internal_errors
                                   if backend is None or e.get("backend") in (None, backend)),
            "compared_cases": cross.cases,
            "disagreements": {p: n for p, n in sorted(cross.disagreements.items())
                              if backend is None or backend in pair_backends(p)},
            "oracle_suspects": cross.oracle_suspects,
            "saved_oracle_suspects": saved_suspects,
        }


def _load_spec(name: str):
    try:
        from conformance.specs import load_spec
        return load_spec(name)
    except Exception:  # noqa: BLE001 - ops without a spec still get a page
        return None


def build(records: Iterable[dict[str, Any]]) -> Report:
    """Aggregate results records (in file order) into a :class:`Report`."""
    rep = Report()
    for rec in records:
        if not isinstance(rec, dict):
            rep.unknown_records += 1
            continue
        kind = rec.get("kind")
        if kind == "run":
            rep.run = rec
            for info in rec.get("backends") or []:
                if isinstance(info, dict):
                    name = rep.backend(info.get("name"))
                    rep.backend_info[name] = info
            for op in rec.get("ops") or []:
                rep.op(op)
        elif kind == "signature":
            op = rep.op(rec.get("op", "?"), rec.get("family"))
            key = (rep.backend(rec.get("backend")), str(rec.get("type_key", "?")))
            op.cells.setdefault(key, Cell()).add(rec)
            if "coverage" in rec:
                op.values.setdefault(key[1], Coverage()).add(rec["coverage"])
        elif kind == "divergence":
            rep.backend(rec.get("backend"))
            rep.op(rec.get("op", "?"), rec.get("family")).divergences.append(rec)
        elif kind == "cross":
            for b in rec.get("backends") or []:
                rep.backend(str(b))
            op = rep.op(rec.get("op", "?"), rec.get("family"))
            op.cross.setdefault(str(rec.get("type_key", "?")), CrossCell()).add(rec)
        elif kind == "invalid":
            op = rep.op(rec.get("op", "?"), rec.get("family"))
            key = (rep.backend(rec.get("backend")), str(rec.get("rule", "?")))
            r = op.invalid.setdefault(key, RuleResult(key[1]))
            r.outcomes[str(rec.get("outcome", "?"))] += 1
            _add_unique(r.reasons, rec.get("reason"))
            _add_unique(r.signatures, rec.get("signature"))
        elif kind == "example":
            rep.backend(rec.get("backend"))
            rep.op(rec.get("op", "?")).examples.append(rec)
        elif kind == "internal_error":
            rep.internal_errors.append(rec)
            if rec.get("op"):
                rep.op(rec["op"]).internal_errors.append(rec)
        elif kind == "validity":
            op = rep.op(rec.get("op", "?"))
            op.generated += int(rec.get("generated", 0))
            op.valid += int(rec.get("valid", 0))
        elif kind == "unit_done":
            if rec.get("op"):
                rep.op(rec["op"]).done = True
        elif kind == "replay":
            rep.replays.append(rec)
        elif kind == "probe":
            rep.backend(rec.get("backend"))
            rep.op(rec.get("op", "?"), rec.get("family")).probes.append(rec)
        elif kind == "program":
            rep.backend(rec.get("backend"))
        elif kind == "end":
            rep.end = rec
            for op in rec.get("ops") or []:
                rep.op(op)
        else:
            rep.unknown_records += 1
    return rep


def load(results_path: "str | Path") -> Report:
    """Read and aggregate a results file (a torn last line is skipped)."""
    return build(read_results(results_path))
