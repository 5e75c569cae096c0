"""The report's modules section (issue 29): the ``module`` records of ``conformance
check``, a page per module (its ops in module order with their location, text and each
backend's check-1 outcome; the first diverging op highlighted; what could not be
judged), the ``modules`` object of ``summary.json`` and the ``modules.BACKEND`` JUnit
suites, from one model (:class:`ModulesView`) so that the three agree. A results file
without module records has no such section.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any, Iterable

from conformance.checking.modules import NOT_DIVERGING
#: outcomes that are errors of the backend rather than wrong values (JUnit <error>)
ERRORS = ("backend_error", "crash", "timeout")


def page_name(index: int, module: str) -> str:
    """The page of the ``index``-th module (its file name kept readable)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", module.rsplit("/", 1)[-1])[:60]
    return f"module-{index}-{stem}.html"


@dataclasses.dataclass
class ModuleRow:
    """One operation of a module: where it is, and each backend's outcome."""

    name: str
    op: str
    location: str
    text: str
    outcomes: dict[str, str]
    first_on: list[str]                 # backends whose first diverging op this is
    depth: int = 0                      # 1 and more: an op inside a while's region
    part: str = ""                      # cond or body (of its innermost while)
    holds_first: list[str] = dataclasses.field(default_factory=list)   # a while whose
    #                                     region holds the backend's first diverging op


@dataclasses.dataclass
class ModulesView:
    records: list[dict]

    @staticmethod
    def from_records(records: Iterable[dict]) -> "ModulesView":
        return ModulesView([r for r in records
                            if isinstance(r, dict) and r.get("kind") == "module"])

    def __bool__(self) -> bool:
        return bool(self.records)

    @property
    def backends(self) -> list[str]:
        return list(dict.fromkeys(str(r.get("backend")) for r in self.records))

    @property
    def modules(self) -> list[str]:
        return list(dict.fromkeys(str(r.get("id")) for r in self.records))

    def record(self, module: str, backend: str) -> dict | None:
        return next((r for r in self.records if r.get("id") == module
                     and r.get("backend") == backend), None)

    def of(self, backend: str) -> list[dict]:
        return [r for r in self.records if r.get("backend") == backend]

    def page(self, module: str) -> str:
        return page_name(self.modules.index(module), module)

    def unjudged(self, module: str) -> list[dict]:
        rec = next(r for r in self.records if r.get("id") == module)
        return list(rec.get("unjudged") or [])

    def rows(self, module: str) -> list[ModuleRow]:
        """The module's operations in order, each with every backend's outcome; after a
        while, the ops of its cond and body (check 1 judges them trip by trip)."""
        recs = {b: self.record(module, b) for b in self.backends}
        base = next(r for r in recs.values() if r is not None)
        origins = base.get("origins") or {}
        firsts = {b: _op_of(r["first"].get("value")) for b, r in recs.items()
                  if r is not None and r.get("first")}
        inside: dict[str, list] = {}
        for name, op, top, depth, part in base.get("loop_operations") or []:
            inside.setdefault(top, []).append((name, op, depth, part))

        def row(name: str, op: str, depth: int = 0, part: str = "") -> ModuleRow:
            where = origins.get(name) or {}
            outcomes = {b: (r.get("op_outcomes") or {}).get(name, "")
                        for b, r in recs.items() if r is not None}
            return ModuleRow(name, op, str(where.get("location") or ""),
                             str(where.get("text") or ""), outcomes,
                             [b for b, f in firsts.items() if f == name], depth, part)
        out = []
        for name, op in base.get("operations") or []:
            top = row(name, op)
            out.append(top)
            for inner in inside.get(name, ()):
                out.append(row(*inner))
                top.holds_first += out[-1].first_on
        return out

    def totals(self, backend: str) -> dict[str, Any]:
        recs = self.of(backend)
        return {"modules": len(recs),
                "outcomes": dict(sorted(Counter(str(r.get("outcome")) for r in recs).items())),
                "diverging": sum(1 for r in recs if r.get("outcome") not in NOT_DIVERGING),
                "ops_judged": sum(int(r.get("judged_ops") or 0) for r in recs),
                "ops_not_judged": sum(len(r.get("unjudged") or []) for r in recs)}

    # -- summary.json ----------------------------------------------------------------------
    def summary(self) -> dict[str, Any] | None:
        if not self.records:
            return None
        return {"backends": {b: self.totals(b) for b in self.backends},
                "modules": {m: {"unjudged": self.unjudged(m),
                                "backends": {b: _brief(self.record(m, b))
                                             for b in self.backends
                                             if self.record(m, b) is not None}}
                            for m in self.modules}}


def _op_of(value: str | None) -> str | None:
    """The operation name of a value (``v3#1`` -> ``v3``)."""
    return value.split("#")[0] if value else None


def _brief(rec: dict) -> dict[str, Any]:
    return {"outcome": rec.get("outcome"), "judged_ops": rec.get("judged_ops"),
            "first": rec.get("first"), "message": rec.get("message")}


def junit_cases(view: ModulesView, backend: str):
    """(classname, name, result, message, text) per module of ``backend``: result None
    (pass), failure, error or skipped (unsupported, unjudged)."""
    for r in view.of(backend):
        outcome = str(r.get("outcome"))
        cls = f"conformance.apps.check.{backend}"
        name = str(r.get("id"))
        if outcome == "pass":
            yield cls, name, None, "", ""
            continue
        if outcome in ("unsupported", "unjudged"):
            yield cls, name, "skipped", f"{outcome}: {r.get('message')}", ""
            continue
        lines = []
        first = r.get("first")
        if first:
            lines += [f"first diverging op: {first.get('op')} at {first.get('location')} "
                      f"[{first.get('check')}, {first.get('class')}]: expected "
                      f"{first.get('expected')}, got {first.get('actual')} (case "
                      f"{first.get('case')}, element {first.get('index')})",
                      str(first.get("text") or "")]
        for u in r.get("unjudged") or []:
            lines.append(f"not judged: {u.get('op')} at {u.get('location')}: "
                         f"{u.get('reason')}")
        if r.get("message"):
            lines.append(f"message: {r['message']}")
        yield cls, name, "error" if outcome in ERRORS else "failure", outcome, \
            "\n".join(lines)
