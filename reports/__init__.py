"""Reports: render a results file into a self-contained HTML report, JSON summary and JUnit XML.

    from conformance.reports import render
    index = render("out/results.jsonl", "out/report")
    index = render("out/results.jsonl", "out/report", expectations="jax.yaml")

Everything is rendered from the results stream alone (plus the op specs for
names and rule texts), so a report can be made of a run that is still going
or was killed. Reproducer links are relative to the folder holding the
results file, which is where the runner writes ``repros/``; pass ``run_dir``
if it is elsewhere.

With ``expectations`` (an :class:`~conformance.apps.expectations.Expectations` or the
path of its YAML file) the report also shows the CI gate: a section at the top
of ``index.html`` (pass or fail, unexpected divergences, expected ones with their
reasons, stale entries), hatched matrix cells where every divergence is expected,
a verdict on each divergence of the op pages, a ``gate`` object in ``summary.json``,
and in ``junit.xml`` expected divergences as ``<skipped>`` rather than ``<failure>``.
"""
from __future__ import annotations

from pathlib import Path

from conformance.apps.expectations import Expectations
from conformance.core.results import read_results

from .aggregate import Report, build, load
from .gating import GateView, as_expectations
from .html import write_pages
from .junit import junit_tree, write_junit
from .summary import summary, write_summary

__all__ = ["render", "load", "build", "Report", "summary", "junit_tree", "GateView"]


def render(results_path: "str | Path", out_dir: "str | Path",
           expectations: "Expectations | str | Path | None" = None, *,
           run_dir: "str | Path | None" = None,
           program_expectations: "Expectations | None" = None,
           program_accept: "tuple[str, ...]" = ()) -> Path:
    """Write index.html, ops/<op>.html, summary.json and junit.xml; return index.html's path.

    A malformed expectations file raises ExpectationsError before anything is written.
    """
    exp = as_expectations(expectations)
    results_path = Path(results_path)
    out_dir = Path(out_dir)
    records = list(read_results(results_path))
    report = build(records)
    if exp is not None:
        report.gate = GateView.from_records(records, exp, report.backend_info)
    from .programs import ProgramsView
    report.programs = ProgramsView.from_records(records, program_expectations or exp,
                                                program_accept)
    from .modules import ModulesView
    report.modules = ModulesView.from_records(records)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_summary(report, out_dir / "summary.json")
    write_junit(report, out_dir / "junit.xml")
    return write_pages(report, out_dir, Path(run_dir) if run_dir else results_path.parent)
