"""The CI gate in the report: a run's divergences against an expectations file.

:func:`conformance.apps.expectations.gate` decides what is expected, unexpected,
stale and not exercised; :class:`GateView` indexes that verdict for the pages,
``summary.json`` and ``junit.xml``, so that all three agree with the exit code of
``conformance run --expectations`` and ``conformance expectations check``.

Each finding is keyed by (backend, op, type key or rule, class), the same key
the gate uses; a matrix cell, a JUnit test case or a saved divergence is
*expected* when every divergence class it holds is expected.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import functools
from pathlib import Path
from typing import Any, Iterable

from conformance.checking.compare import DIVERGENCES
from conformance.apps.expectations import (EntryAudit, Expectation, Expectations, Gate, audit, gate,
                                           load_expectations)

from .aggregate import Cell, OpData, RuleResult, first_type

#: Outcomes of invalid cases that the gate counts (see conformance.apps.expectations.findings).
INVALID_DIVERGENCES = ("accepted_invalid", "crash", "timeout")


def as_expectations(expectations: "Expectations | str | Path | None") -> Expectations | None:
    """An Expectations object from itself or from the path of a YAML file."""
    if expectations is None or isinstance(expectations, Expectations):
        return expectations
    return load_expectations(expectations)


def safe_link(link: Any) -> str | None:
    """An expectation's link, if it is a web address (never a ``javascript:`` one)."""
    text = str(link or "")
    return text if text.startswith(("https://", "http://")) else None


def where(item: dict) -> str:
    """The type key or rule of a finding or an expectation entry."""
    return str(item.get("rule") or item.get("element_type") or "*")


def anchor(item: dict) -> str:
    """The section of an op page about a finding."""
    rule = item.get("rule")
    if not rule:
        return "divergences"
    return "examples" if str(rule).startswith("example-") else "invalid"


def entry_dict(e: Expectation, path: str | None) -> dict[str, Any]:
    """An expectation entry as plain data (summary.json, templates)."""
    return {"file": path, "index": e.index, "op": e.op,
            "element_type": None if e.rules is not None else e.element_type,
            "rule": e.rule, "class": e.cls, "reason": e.reason, "link": e.link,
            "when": dict(e.when), "backend": e.backend}


@dataclasses.dataclass
class Verdict:
    """How the gate sees one thing shown in the report (a cell, a divergence, a rule)."""

    expected: list[dict]          # expected findings, each with its reason and link
    unexpected: list[dict]

    @property
    def status(self) -> str | None:
        """``expected`` (all of it), ``unexpected`` (some of it), None (no divergence)."""
        if self.unexpected:
            return "unexpected"
        return "expected" if self.expected else None

    @property
    def reasons(self) -> list[str]:
        out: list[str] = []
        for item in self.expected:
            if item["reason"] not in out:
                out.append(item["reason"])
        return out

    @property
    def links(self) -> list[str]:
        out: list[str] = []
        for item in self.expected:
            link = safe_link(item.get("link"))
            if link and link not in out:
                out.append(link)
        return out

    @property
    def message(self) -> str:
        """``expected: reason; reason`` for a JUnit ``<skipped>``."""
        return "expected: " + "; ".join(self.reasons)


_NONE = Verdict([], [])


class GateView:
    """A run's gate, indexed for rendering."""

    def __init__(self, gate_: Gate, expectations: Expectations,
                 info: dict[str, dict] | None = None) -> None:
        self.gate = gate_
        self.expectations = expectations
        self.info = info or {}
        self._by_key: dict[tuple, tuple[bool, dict]] = {}
        for ok, items in ((False, gate_.unexpected), (True, gate_.expected)):
            for item in items:
                self._by_key[self._key(item["backend"], item["op"], item["element_type"],
                                       item["rule"], item["class"])] = (ok, item)

    @staticmethod
    def _key(backend, op, element_type, rule, cls) -> tuple:
        return (backend, op, element_type, rule, cls)

    @classmethod
    def from_records(cls, records: Iterable[dict], expectations: Expectations,
                     info: dict[str, dict] | None = None) -> "GateView":
        return cls(gate(records, expectations), expectations, info)

    # -- the verdict as a whole ---------------------------------------------------------

    @property
    def passed(self) -> bool:
        return self.gate.passed

    @property
    def path(self) -> str:
        return self.expectations.path or "expectations"

    def counts(self) -> dict[str, int]:
        g = self.gate
        return {"unexpected": len(g.unexpected), "expected": len(g.expected),
                "stale": len(g.stale), "not_exercised": len(g.not_exercised)}

    def unexpected(self) -> list[dict]:
        return sorted(self.gate.unexpected, key=_order)

    def expected(self) -> list[dict]:
        return sorted(self.gate.expected, key=_order)

    def stale(self) -> list[dict]:
        return [entry_dict(e, self.expectations.path) for e in self.gate.stale]

    def not_exercised(self) -> list[dict]:
        return [entry_dict(e, self.expectations.path) for e in self.gate.not_exercised]

    @functools.cached_property
    def audits(self) -> list[EntryAudit]:
        """Per entry: what it matched, and whether it is broader than that."""
        return audit(self.gate, self.expectations)

    def broad(self) -> list[dict]:
        """The entries broader than their matches, each with the narrow ones suggested."""
        return [{**entry_dict(a.entry, self.expectations.path), "broad": a.broad,
                 "suggestion": [s.flow() for s in a.suggestion]}
                for a in self.audits if a.is_broad]

    def summary(self) -> dict[str, Any]:
        """The ``gate`` object of summary.json."""
        def item(i: dict) -> dict:
            return {k: i.get(k) for k in ("backend", "op", "element_type", "rule", "class",
                                          "cases", "reason", "link") if k in i}
        return {"passed": self.passed, "file": self.expectations.path,
                "counts": self.counts(),
                "unexpected": [item(i) for i in self.unexpected()],
                "expected": [item(i) for i in self.expected()],
                "stale": self.stale(), "not_exercised": self.not_exercised(),
                "entries": [_plain(a.as_dict()) for a in self.audits]}

    # -- per thing shown -------------------------------------------------------------

    def _verdict(self, keys: Iterable[tuple]) -> Verdict:
        expected, unexpected = [], []
        for key in keys:
            hit = self._by_key.get(key)
            if hit is None:
                continue
            (expected if hit[0] else unexpected).append(hit[1])
        return Verdict(expected, unexpected) if expected or unexpected else _NONE

    def _match(self, backend: str, op: str, cls: str, element_type: str | None = None,
               rule: str | None = None) -> Verdict:
        """A thing the gate did not list (e.g. a saved divergence of a class not counted):
        matched against the file directly."""
        item = {"backend": backend, "op": op, "element_type": element_type, "rule": rule,
                "class": cls, "cases": 0}
        e = self.expectations.match(backend, self.info.get(backend, {}), op, cls,
                                    element_type, rule)
        if e is None:
            return Verdict([], [item])
        return Verdict([{**item, "reason": e.reason, "link": e.link}], [])

    def type_key(self, backend: str, op: str, type_key: str, cell: Cell) -> Verdict:
        """One (backend, op, type key): every divergence class counted in it."""
        return self._verdict(self._key(backend, op, type_key, None, c)
                             for c in _cell_classes(cell))

    def column(self, op: OpData, backend: str, column: str) -> Verdict:
        """A matrix cell: every type key of ``backend`` under ``column``."""
        keys = [self._key(backend, op.name, k, None, c)
                for (b, k), cell in op.cells.items() if b == backend and first_type(k) == column
                for c in _cell_classes(cell)]
        return self._verdict(keys)

    def divergence(self, d: dict) -> Verdict:
        """A saved divergence record."""
        backend, op, cls = str(d.get("backend")), str(d.get("op")), str(d.get("class"))
        key = self._key(backend, op, d.get("type_key"), None, cls)
        if key in self._by_key:
            return self._verdict([key])
        return self._match(backend, op, cls, element_type=d.get("type_key"))

    def rule(self, backend: str, op: str, r: RuleResult) -> Verdict:
        """The invalid cases of one rule."""
        return self._verdict(self._key(backend, op, None, r.rule, o)
                             for o in INVALID_DIVERGENCES if r.outcomes.get(o))

    def example(self, e: dict) -> Verdict:
        outcome = str(e.get("outcome"))
        if outcome in ("pass", "unsupported"):
            return _NONE
        return self._verdict([self._key(e.get("backend"), e.get("op"), None,
                                        f"example-{e.get('index', 0)}", outcome)])

    def op_stale(self, op: str) -> list[dict]:
        """The stale entries whose op pattern matches ``op``."""
        return [e for e in self.stale() if fnmatch.fnmatchcase(op, e["op"])]

    def op_verdicts(self, op: str) -> list[tuple[str, dict]]:
        """Every finding of one op: ("expected" | "unexpected", item)."""
        out = [("unexpected", i) for i in self.unexpected() if i["op"] == op]
        return out + [("expected", i) for i in self.expected() if i["op"] == op]


def _cell_classes(cell: Cell) -> list[str]:
    """The divergence classes the gate counts in a cell (as findings() does)."""
    out = [c for c, n in cell.counts.items() if c in DIVERGENCES and n]
    for outcome, n in cell.outcomes.items():
        if outcome in DIVERGENCES and n and outcome not in out:
            out.append(outcome)
    return out


def _plain(value: Any) -> Any:
    """Tuples (flow lists of entries) as lists, for JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _order(item: dict) -> tuple:
    return (str(item.get("backend")), str(item.get("op")), where(item), str(item.get("class")))
