"""Reports: render a results file into a self-contained HTML report, JSON summary and JUnit XML.

    from conformance.reports import render
    index = render("out/results.jsonl", "out/report")

Everything is rendered from the results stream alone (plus the op specs for
names and rule texts), so a report can be made of a run that is still going
or was killed. Reproducer links are relative to the folder holding the
results file, which is where the runner writes ``repros/``; pass ``run_dir``
if it is elsewhere.
"""
from __future__ import annotations

from pathlib import Path

from .aggregate import Report, build, load
from .html import write_pages
from .junit import junit_tree, write_junit
from .summary import summary, write_summary

__all__ = ["render", "load", "build", "Report", "summary", "junit_tree"]


def render(results_path: "str | Path", out_dir: "str | Path",
           run_dir: "str | Path | None" = None) -> Path:
    """Write index.html, ops/<op>.html, summary.json and junit.xml; return index.html's path."""
    results_path = Path(results_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = load(results_path)
    write_summary(report, out_dir / "summary.json")
    write_junit(report, out_dir / "junit.xml")
    return write_pages(report, out_dir, Path(run_dir) if run_dir else results_path.parent)
