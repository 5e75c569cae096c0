"""The report's programs section (issue 19): the ``program`` records of ``conformance
programs``, per backend, per generator pattern and per op at fault, with every diverging
program's reproducer: its (minimised) program text and the oracle's values op by op.

One model (:class:`ProgramsView`) feeds the HTML section (``programs.html.j2``), the
``programs`` object of ``summary.json`` and the ``programs`` JUnit suites, so that the
three agree. With an expectations file (``conformance programs --expectations``) each
finding is expected (with the entry's reason) or unexpected
(conformance.apps.expectations.program_gate), and the JUnit test case of an expected one is
``<skipped>``. A results file without program records has no such section.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Iterable

#: outcomes that do not count as a divergence
NOT_DIVERGING = ("pass", "unsupported")
#: outcomes that are errors of the backend rather than wrong values (JUnit <error>)
ERRORS = ("backend_error", "crash", "timeout")


def _label(rec: dict) -> str:
    return str(rec.get("outcome", "?"))


@dataclasses.dataclass
class Group:
    """Program records of one backend sharing a key (a pattern, an op at fault)."""

    programs: int = 0
    diverging: int = 0
    fusion: int = 0
    classes: Counter = dataclasses.field(default_factory=Counter)
    ids: list[str] = dataclasses.field(default_factory=list)

    def add(self, rec: dict, cls: str | None, fusion: bool | None) -> None:
        self.programs += 1
        if cls is not None:
            self.diverging += 1
            self.classes[cls] += 1
            self.fusion += bool(fusion)
            if len(self.ids) < 5:
                self.ids.append(str(rec.get("id")))

    def to_json(self) -> dict[str, Any]:
        return {"programs": self.programs, "diverging": self.diverging, "fusion": self.fusion,
                "classes": dict(sorted(self.classes.items())), "examples": self.ids}


@dataclasses.dataclass
class ProgramsView:
    records: list[dict]
    gate: Any = None                 # conformance.apps.expectations.Gate (program_gate) or None
    #: the end record's validity: programs, operations, rejected_steps, verifier_refused
    validity: dict | None = None

    @staticmethod
    def from_records(records: Iterable[dict], expectations=None,
                     accept: Iterable[str] = ()) -> "ProgramsView":
        records = list(records)
        recs = [r for r in records if isinstance(r, dict) and r.get("kind") == "program"]
        gate = None
        if expectations is not None and recs:
            from conformance.apps.expectations import program_gate
            gate = program_gate(records, expectations, accept)
        end = next((r for r in records if isinstance(r, dict) and r.get("kind") == "end"
                    and r.get("command") == "programs"), None)
        valid = end.get("validity") if end else None
        return ProgramsView(recs, gate, valid if isinstance(valid, dict) else None)

    def __bool__(self) -> bool:
        return bool(self.records)

    @property
    def backends(self) -> list[str]:
        return list(dict.fromkeys(str(r.get("backend")) for r in self.records))

    def of(self, backend: str) -> list[dict]:
        return [r for r in self.records if r.get("backend") == backend]

    def totals(self, backend: str) -> dict[str, Any]:
        recs = self.of(backend)
        outcomes = Counter(_label(r) for r in recs)
        div = [r for r in recs if _label(r) not in NOT_DIVERGING]
        return {"programs": len(recs), "outcomes": dict(sorted(outcomes.items())),
                "diverging": len(div), "fusion": sum(1 for r in div if r.get("fusion")),
                "operations": sum(int(r.get("size") or 0) for r in recs),
                "minimized_ops": sorted(int(r["minimized"]["size"]) for r in div
                                        if isinstance(r.get("minimized"), dict)
                                        and r["minimized"].get("size") is not None)}

    def by_pattern(self, backend: str) -> dict[str, Group]:
        """Per generator pattern: the programs holding it, and those whose op at fault
        belongs to it (a program without a pattern is under ``(none)``)."""
        out: dict[str, Group] = {}
        for r in self.of(backend):
            pats = list(dict.fromkeys(r.get("patterns") or [])) or ["(none)"]
            fs = r.get("findings") or []
            for p in pats:
                hit = [f for f in fs if p in (f.get("patterns") or [])] if p != "(none)" \
                    else fs
                cls = (hit[0].get("cls") if hit else None) if _label(r) not in \
                    NOT_DIVERGING else None
                if _label(r) in ERRORS:
                    cls = _label(r)
                out.setdefault(p, Group()).add(r, cls, any(f.get("fusion") for f in hit))
        return dict(sorted(out.items(), key=lambda kv: (-kv[1].diverging, kv[0])))

    def by_op(self, backend: str) -> dict[str, Group]:
        """Per op at fault (and type key): the diverging programs whose finding is there;
        ``programs`` counts the programs holding the op."""
        out: dict[str, Group] = {}
        for r in self.of(backend):
            fs = r.get("findings") or []
            faults = {}
            for f in fs:
                key = f"{f.get('op')} {f.get('type_key') or ''}".strip()
                faults.setdefault(key, f)
            holding = {f"{op} {k}" for op, k in r.get("exercised") or []}
            for key in sorted(holding | set(faults)):
                f = faults.get(key)
                g = out.setdefault(key, Group())
                g.add(r, f.get("cls") if f else None, f.get("fusion") if f else None)
        return dict(sorted(((k, g) for k, g in out.items() if g.diverging),
                           key=lambda kv: (-kv[1].diverging, kv[0])))

    def unsupported(self, backend: str) -> dict[str, int]:
        """Reasons of unsupported programs, with counts."""
        return dict(Counter(str(r.get("reason") or r.get("message") or "")
                            for r in self.of(backend) if _label(r) == "unsupported"))

    def diverging(self, backend: str | None = None) -> list[dict]:
        return [r for r in self.records if _label(r) not in NOT_DIVERGING
                and (backend is None or r.get("backend") == backend)]

    def verdict(self, rec: dict) -> str | None:
        """expected / unexpected (with an expectations file), else None."""
        if self.gate is None:
            return None
        rid = rec.get("id")
        mine = [i for i in self.gate.unexpected if i["backend"] == rec.get("backend")
                and rid in i["ids"]]
        return "unexpected" if mine else "expected" if any(
            i["backend"] == rec.get("backend") and rid in i["ids"]
            for i in self.gate.expected) else None

    def reasons(self, rec: dict) -> list[str]:
        if self.gate is None:
            return []
        return list(dict.fromkeys(i["reason"] for i in self.gate.expected
                                  if i["backend"] == rec.get("backend")
                                  and rec.get("id") in i["ids"]))

    # -- summary.json ----------------------------------------------------------------------
    def summary(self) -> dict[str, Any] | None:
        if not self.records:
            return None
        out: dict[str, Any] = {"backends": {}, "validity": self.validity}
        for b in self.backends:
            out["backends"][b] = {
                "totals": self.totals(b),
                "patterns": {k: g.to_json() for k, g in self.by_pattern(b).items()},
                "ops_at_fault": {k: g.to_json() for k, g in self.by_op(b).items()},
                "unsupported": self.unsupported(b)}
        out["divergences"] = [reproducer(r) for r in self.diverging()]
        if self.gate is not None:
            g = self.gate
            out["gate"] = {"passed": g.passed, "unexpected": g.unexpected,
                           "expected": g.expected,
                           "stale": [e.flow() for e in g.stale]}
        return out


def reproducer(rec: dict) -> dict[str, Any]:
    """What summary.json keeps of a diverging program record."""
    m = rec.get("minimized") or {}
    return {"id": rec.get("id"), "backend": rec.get("backend"), "class": rec.get("outcome"),
            "fusion": rec.get("fusion"), "patterns": rec.get("patterns"),
            "findings": [{k: f.get(k) for k in ("value", "op", "type_key", "check", "cls",
                                                "fusion", "patterns", "expected", "actual")}
                         for f in rec.get("findings") or []],
            "size": rec.get("size"), "minimized_size": m.get("size"),
            "program": m.get("text") or rec.get("text"), "shrunk": m.get("shrunk"),
            "trace": rec.get("trace"), "repro": rec.get("repro"),
            "message": rec.get("message")}


def junit_cases(view: ProgramsView, backend: str):
    """(classname, name, result, message, text) per program of ``backend``: result None
    (pass), failure, error or skipped (unsupported, or every finding expected)."""
    for r in view.of(backend):
        outcome = _label(r)
        name = f"{r.get('id')} [{', '.join(r.get('patterns') or []) or 'no pattern'}]"
        cls = f"conformance.apps.programs.{backend}"
        if outcome == "pass":
            yield cls, name, None, "", ""
            continue
        if outcome == "unsupported":
            yield cls, name, "skipped", f"unsupported: {r.get('reason') or r.get('message')}", ""
            continue
        rep = reproducer(r)
        lines = [f"{f['cls']} at {f['op']} {f.get('type_key') or ''} ({f['check']}"
                 f"{', fusion' if f.get('fusion') else ''}): expected {f.get('expected')}, "
                 f"got {f.get('actual')}" for f in rep["findings"]]
        if rep["program"]:
            lines += ["program:", rep["program"]]
        for row in rep["trace"] or []:
            lines.append(f"  {row['name']} = {row['op']}: oracle {row.get('oracle')}"
                         + (f", backend {row['actual']}" if "actual" in row else ""))
        if rep.get("repro"):
            lines.append(f"repro: python {rep['repro']}/repro.py")
        if r.get("message"):
            lines.append(f"message: {r['message']}")
        result = "error" if outcome in ERRORS else "failure"
        message = outcome + (" (fusion)" if r.get("fusion") else "")
        v = view.verdict(r)
        if v == "expected":
            yield cls, name, "skipped", "expected: " + "; ".join(view.reasons(r)), \
                "\n".join(lines)
            continue
        yield cls, name, result, message, "\n".join(lines)
