"""``junit.xml``: the run as JUnit XML, so any CI system shows it as test results.

One ``<testsuite>`` per backend. Test cases: one per (op, type key), one per
spec example, one per rule broken on purpose. Divergences are ``<failure>``
(message = class; a divergence that every backend shares against the oracle is
marked "oracle suspect" in the text, but still fails: the oracle is the
reference), backend errors, crashes and timeouts are ``<error>``,
unsupported and not-generated cases are ``<skipped>``. An incomplete run and
internal errors of the suite go to an extra ``conformance-run`` suite as
``<error>`` so that a killed run never looks green.

Rendered with an expectations file, a test case whose divergences are all
expected is ``<skipped message="expected: REASON">`` instead of a failure or
error (one unexpected class keeps it failing, its text naming which classes
are expected); the file's stale entries, and those for ops the run did not
cover, are ``<skipped>`` test cases of a ``conformance-expectations`` suite:
shown by CI, never failing. Without expectations nothing changes.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from .aggregate import ERRORS, Report
from .gating import Verdict, where

_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: object) -> str:
    """Text without the characters XML 1.0 cannot hold (backend messages may have them)."""
    return _ILLEGAL_XML.sub("\ufffd", str(text))


class _Suite:
    def __init__(self, parent: ET.Element, name: str) -> None:
        self.el = ET.SubElement(parent, "testsuite", name=_clean(name))
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(self, classname: str, name: str, result: str | None = None,
             message: str = "", text: str = "") -> ET.Element:
        """Add a test case; ``result`` is None (pass), failure, error or skipped."""
        tc = ET.SubElement(self.el, "testcase", classname=_clean(classname), name=_clean(name),
                           time="0")
        self.counts["tests"] += 1
        if result is not None:
            child = ET.SubElement(tc, result, message=_clean(message))
            if result != "skipped":
                child.set("type", _clean(message))
            if text:
                child.text = _clean(text)
            self.counts[{"failure": "failures", "error": "errors",
                         "skipped": "skipped"}[result]] += 1
        return tc

    def close(self) -> None:
        for k, v in self.counts.items():
            self.el.set(k, str(v))
        self.el.set("time", "0")


def _result(outcome: str, ok: tuple[str, ...], skipped: tuple[str, ...]) -> str | None:
    if outcome in ok:
        return None
    if outcome in skipped:
        return "skipped"
    if outcome in ERRORS:
        return "error"
    return "failure"


def _gated(result: str | None, message: str, text: str, verdict: Verdict | None
           ) -> tuple[str | None, str, str]:
    """A failing or erroring case whose divergences are all expected becomes skipped."""
    if verdict is None or result not in ("failure", "error") or verdict.status is None:
        return result, message, text
    lines = [f"{'expected' if ok else 'UNEXPECTED'}: {i['class']}"
             + (f" ({i['reason']}{', ' + i['link'] if i.get('link') else ''})" if ok else "")
             for ok, items in ((False, verdict.unexpected), (True, verdict.expected))
             for i in items]
    text = "\n".join([*lines, text]) if text else "\n".join(lines)
    if verdict.status == "expected":
        return "skipped", verdict.message, text
    return result, message, text


def _expectations_suite(root: ET.Element, report: Report) -> "_Suite | None":
    """Stale entries of the expectations file (and entries for ops the run did not
    cover) as skipped test cases: visible in CI, never failing."""
    gate = report.gate
    if gate is None or not (gate.gate.stale or gate.gate.not_exercised or gate.broad()):
        return None
    suite = _Suite(root, "conformance-expectations")
    ET.SubElement(ET.SubElement(suite.el, "properties"), "property", name="file",
                  value=_clean(gate.path))
    for kind, entries, why in (
            ("stale", gate.stale(), "matched no divergence of this run; remove the entry if "
                                    "the divergence is fixed"),
            ("not exercised", gate.not_exercised(), "the run did not cover this op")):
        for e in entries:
            text = f"{gate.path}: expectations[{e['index']}] {e['op']} {where(e)} {e['class']}" \
                   f"\nreason: {e['reason']}" + (f"\nlink: {e['link']}" if e["link"] else "")
            suite.case("conformance.apps.expectations",
                       f"expectations[{e['index']}] {e['op']} {where(e)} {e['class']}",
                       "skipped", f"{kind}: {why} ({e['reason']})", text)
    for e in gate.broad():
        name = f"expectations[{e['index']}] {e['op']} {where(e)} {e['class']}"
        text = "\n".join([f"{gate.path}: {name}", *e["broad"], "narrow entries to replace it:",
                          *(f"  {s}" for s in e["suggestion"])])
        suite.case("conformance.apps.expectations", name, "skipped",
                   "broad: waives more than this run matched (" + "; ".join(e["broad"]) + ")",
                   text)
    return suite


def junit_tree(report: Report) -> ET.ElementTree:
    root = ET.Element("testsuites", name="stablehlo-conformance")
    suites: list[_Suite] = []
    run = report.run or {}
    gate = report.gate
    for b in report.backends:
        suite = _Suite(root, b)
        suites.append(suite)
        props = ET.SubElement(suite.el, "properties")
        info = {"seed": run.get("seed"), "depth": run.get("depth"), "complete": report.complete,
                **{f"backend.{k}": v for k, v in report.backend_info.get(b, {}).items()}}
        if gate is not None:
            info["expectations"] = gate.path
        for k, v in info.items():
            ET.SubElement(props, "property", name=_clean(k), value=_clean(v))
        for op in report.sorted_ops():
            cls = f"conformance.{b}.{op.name}"
            for key in op.type_keys(b):
                cell = op.cells[(b, key)]
                outcome = cell.outcome
                lines = [f"cases per outcome: {dict(sorted(cell.counts.items()))}"]
                for d in op.divergences:
                    if d.get("backend") == b and d.get("type_key") == key:
                        suspect = " (oracle suspect: every backend agrees)" \
                            if d.get("oracle_suspect") else ""
                        lines.append(f"{d.get('class')}{suspect}: "
                                     f"{d.get('minimised_signature') or d.get('signature')}"
                                     f"\n  repro: python {d.get('repro')}/repro.py")
                        if d.get("actual") is None and d.get("message"):
                            lines.append(f"  message: {d.get('message')}")
                if len(lines) == 1:
                    lines += [f"signature: {s}" for s in cell.signatures]
                lines += [f"reason: {r}" for r in cell.reasons]
                result = _result(outcome, ("pass",), ("unsupported",))
                message = outcome if result != "skipped" else \
                    f"unsupported: {cell.reasons[0] if cell.reasons else ''}"
                verdict = gate.type_key(b, op.name, key, cell) if gate is not None else None
                suite.case(cls, key, *_gated(result, message, "\n".join(lines), verdict))
            for e in op.examples:
                if e.get("backend") != b:
                    continue
                outcome = str(e.get("outcome", "?"))
                result = _result(outcome, ("pass",), ("unsupported",))
                verdict = gate.example(e) if gate is not None else None
                suite.case(cls, f"example[{e.get('index', '')}] {e.get('example', '')}",
                           *_gated(result, outcome, f"{e.get('signature', '')}\n"
                                   f"{e.get('message') or ''}".strip(), verdict))
            for rule in op.rule_ids():
                r = op.invalid.get((b, rule))
                if r is None:
                    continue
                result = _result(r.outcome, ("rejected",), ("unsupported", "not_generated"))
                text = "\n".join([*r.signatures, *r.reasons])
                verdict = gate.rule(b, op.name, r) if gate is not None else None
                suite.case(cls, f"invalid[{rule}]", *_gated(result, r.outcome, text, verdict))
    if not report.complete or report.internal_errors:
        suite = _Suite(root, "conformance-run")
        suites.append(suite)
        if not report.complete:
            done = sum(1 for o in report.ops.values() if o.done)
            suite.case("conformance.run", "complete", "error", "incomplete",
                       f"no end record: the run stopped early ({done} of {len(report.ops)} "
                       f"ops finished)")
        for i, e in enumerate(report.internal_errors):
            suite.case(f"conformance.run.{e.get('op', '')}", f"internal_error[{i}] "
                       f"{e.get('type_key', '')}", "error", "internal_error",
                       f"{e.get('what', '')}: {e.get('error', '')}\n{e.get('traceback', '')}")
    from .modules import junit_cases as module_cases
    from .programs import junit_cases as program_cases
    for prefix, view, cases in (("programs", report.programs, program_cases),
                                ("modules", report.modules, module_cases)):
        for b in (view.backends if view else []):
            suite = _Suite(root, f"{prefix}.{b}")
            suites.append(suite)
            for case in cases(view, b):
                suite.case(*case)
    expectations_suite = _expectations_suite(root, report)
    if expectations_suite is not None:
        suites.append(expectations_suite)
    for s in suites:
        s.close()
    for k in ("tests", "failures", "errors", "skipped"):
        root.set(k, str(sum(s.counts[k] for s in suites)))
    return ET.ElementTree(root)


def write_junit(report: Report, path: Path) -> Path:
    tree = junit_tree(report)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path
