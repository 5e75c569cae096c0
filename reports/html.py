"""Renders the model into HTML: ``index.html`` and one page per op, from jinja2 templates.

Templates ship inside the package (``PackageLoader``), so a wheel install
renders the same pages as a source checkout. Autoescaping is on for every
``.html.j2`` template: messages and literals come from backends and must never
be able to inject markup.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from . import nway, style, svg
from .aggregate import COLUMNS, Cell, CrossCell, OpData, Report, first_type, pair_backends
from .gating import Verdict, anchor, safe_link, where

#: Longest literal shown inline; longer ones are cut (the reproducer has them all).
MAX_LITERAL = 4000


def op_filename(op: str) -> str:
    """A safe file name for an op's page."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", op) + ".html"


def fmt_error(x: float | None) -> str:
    if x is None:
        return "—"
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return str(int(x)) if x == int(x) and abs(x) < 1e15 else f"{x:.3g}"


def fmt_time(t: Any) -> str:
    try:
        return _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return "—"


def fmt_elapsed(s: Any) -> str:
    try:
        s = float(s)
    except (TypeError, ValueError):
        return "—"
    if s < 120:
        return f"{s:.1f} s"
    return f"{int(s // 60)} min {s % 60:.0f} s"


def _literal_text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_literal_text(v) for v in value) + "]"
    if isinstance(value, str):      # special values as the literal format writes them: nan, -0.0
        return value
    return json.dumps(value)


def fmt_literal(value: Any) -> str:
    """A tensor literal as the spec writes it: ``[1.0, -0.0, nan]`` (strings unquoted)."""
    text = _literal_text(value)
    return text if len(text) <= MAX_LITERAL else text[:MAX_LITERAL] + " … (cut; see the reproducer)"


def fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "—"


def cell_title(backend: str, op: str, column: str, cell: Cell | None, applicable: bool) -> str:
    """The tooltip of a matrix cell: what it aggregates, with counts."""
    if cell is None:
        return (f"{op} {column} on {backend}: " +
                ("allowed by the spec, no result recorded" if applicable
                 else "not applicable (the spec does not allow this type)"))
    keys = cell.type_keys
    shown = ", ".join(keys[:8]) + (f" … ({len(keys)} type keys)" if len(keys) > 8 else "")
    lines = [f"{op} {column} on {backend}: {cell.outcome}",
             f"{cell.records} signature(s): {fmt_counts(dict(cell.outcomes))}",
             f"{cell.cases} case(s): {fmt_counts(dict(cell.counts))}"]
    if cell.max_error is not None:
        lines.append(f"max error {fmt_error(cell.max_error)} (ULP; complex rel_eps: eps)")
    if len(keys) > 1 or (keys and keys[0] != column):
        lines.append(f"type keys: {shown}")
    return "\n".join(lines)


def cell_text(cell: Cell | None, applicable: bool) -> str:
    """The short text in a matrix cell: the case count when it passes, else the class."""
    if cell is None:
        return "·" if applicable else ""
    outcome = cell.outcome
    text = str(cell.cases) if outcome == "pass" else style.look(outcome).abbrev
    return text + ("*" if cell.partial else "")


def short_names(backends: list[str], width: int = 3) -> dict[str, str]:
    """Short, distinct labels for the combined matrix's sub-columns: the shortest prefix
    (at least one letter) that tells each backend from the others, at most ``width``
    characters; backends that still collide are numbered."""
    out: dict[str, str] = {}
    for b in backends:
        for n in range(1, width + 1):
            label = b[:n]
            if not any(o != b and o[:n] == label for o in backends):
                break
        out[b] = label
    clashing = {v for v in out.values() if list(out.values()).count(v) > 1}
    seen: dict[str, int] = {}
    for b in backends:
        if out[b] in clashing:
            seen[out[b]] = n = seen.get(out[b], 0) + 1
            out[b] = f"{out[b][:width - 1]}{n}"
    return out


def pair_label(pair: str) -> str:
    a, b = pair_backends(pair)
    return f"{a} ~ {b}"


def short_cell_text(cell: Cell | None, applicable: bool) -> str:
    """The text of a narrow cell of the combined matrix: the outcome's abbreviation."""
    if cell is None:
        return "·" if applicable else ""
    return style.look(cell.outcome).abbrev + ("*" if cell.partial else "")


def cross_title(cross: CrossCell | None, backend: str | None = None) -> str:
    """Tooltip lines: how the backends compared with each other (pairs with ``backend``)."""
    if cross is None or not cross.records:
        return ""
    lines = [f"{cross.cases} case(s) compared across backends"]
    for pair in cross.pairs():
        if backend is None or backend in pair_backends(pair):
            lines.append(f"{pair_label(pair)}: {cross.disagreements.get(pair, 0)} disagreeing")
    if cross.oracle_suspects:
        lines.append(f"oracle suspects: {cross.oracle_suspects} (every backend agrees, "
                     f"against the oracle)")
    return "\n".join(lines)


def cross_css(cross: CrossCell | None) -> str:
    """Marks of a combined-matrix cell group: backends disagree (xd), oracle suspects (xs)."""
    if cross is None:
        return ""
    return " ".join(c for c, on in (("xd", cross.disagreeing), ("xs", cross.oracle_suspects))
                    if on)


#: The mark of a matrix cell whose divergences are all expected (with a hatched look).
EXPECTED_MARK = "\u2713"


def gate_title(verdict: Verdict | None) -> str:
    """Tooltip lines: what the expectations file says about a cell's divergences."""
    if verdict is None or verdict.status is None:
        return ""
    lines = [f"UNEXPECTED: {i['class']} ({i['cases']} cases)" for i in verdict.unexpected]
    lines += [f"expected: {i['class']} ({i['reason']})" for i in verdict.expected]
    return "\n".join(lines)


def percent(n: int, of: int) -> str:
    if not of:
        return "—"
    x = 100.0 * n / of
    return f"{x:.1f}%" if x >= 0.1 or x == 0 else "<0.1%"


def fmt_region(text: str) -> str:
    """A region as a report shows it: a region program (if/case/while bodies) by its
    readable form (``Body.describe``), an expression region as written."""
    from conformance.core import region_program
    if region_program.is_program(text):
        try:
            return region_program.parse(text).describe()
        except ValueError:
            return text
    return text


#: How conformance.checking.isolation names a child's stderr log in a message.
_STDERR_LOG = re.compile(r"\(stderr log: ([^()]+?\.stderr\.log)\)")


def link_logs(text: Any, base: str, log_dir: Path) -> markupsafe.Markup:
    """``text`` escaped, each ``(stderr log: PATH)`` in it a link to the log (``base`` +
    its name, relative to the page) when the log is in ``log_dir`` (the run's folder, as
    the isolation layer writes it), so that a crash's last words are one click away."""
    text = "" if text is None else str(text)
    parts: list[Any] = []
    pos = 0
    for m in _STDERR_LOG.finditer(text):
        parts.append(markupsafe.escape(text[pos:m.start()]))
        name = Path(m.group(1)).name
        if (log_dir / name).is_file():
            parts.append(markupsafe.Markup('(stderr log: <a href="{}">{}</a>)').format(
                base + name, name))
        else:
            parts.append(markupsafe.escape(m.group(0)))
        pos = m.end()
    parts.append(markupsafe.escape(text[pos:]))
    return markupsafe.Markup("").join(parts)


@jinja2.pass_context
def _logs_filter(ctx, text: Any) -> markupsafe.Markup:
    return link_logs(text, ctx.get("log_base") or "", Path(ctx.get("log_dir") or "."))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("conformance.reports", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2", "html", "xml"),
                                            default_for_string=True, default=False),
        trim_blocks=True, lstrip_blocks=True, undefined=jinja2.ChainableUndefined)
    env.filters.update(error=fmt_error, time=fmt_time, elapsed=fmt_elapsed,
                       literal=fmt_literal, counts=fmt_counts, css=style.css_class,
                       abbrev=lambda o: style.look(o).abbrev, page=op_filename,
                       region=fmt_region, logs=_logs_filter)
    env.globals.update(look=style.look, legend=style.LEGEND, looks=style.LOOKS,
                       outcome_css=style.stylesheet(), columns=COLUMNS, ulp_chart=svg.ulp_chart,
                       bound_chart=svg.bound_chart,
                       cell_title=cell_title, cell_text=cell_text,
                       short_cell_text=short_cell_text, cross_title=cross_title,
                       cross_css=cross_css, pair_label=pair_label, percent=percent,
                       pair_backends=pair_backends, safe_link=safe_link, gate_where=where,
                       gate_anchor=anchor, gate_title=gate_title, EXPECTED_MARK=EXPECTED_MARK,
                       nway_table=lambda op, backends: markupsafe.Markup(
                           nway.render(op, backends)))
    return env


def _repro_links(op: OpData, ops_dir: Path, run_dir: Path) -> dict[int, dict[str, str]]:
    """Per divergence: a link to its repro.py relative to the op page, and the command."""
    out = {}
    for i, d in enumerate(op.divergences):
        repro = d.get("repro")
        if not repro:
            continue
        target = (run_dir / repro / "repro.py").resolve()
        href = Path(os.path.relpath(target, ops_dir.resolve())).as_posix()
        out[i] = {"href": href, "folder": str(repro),
                  "command": f"python {Path(repro).as_posix()}/repro.py",
                  "exists": target.exists()}
    return out


def _base(page_dir: Path, run_dir: Path) -> str:
    """The run's folder relative to a page's folder, as a link prefix ("" or "../")."""
    rel = Path(os.path.relpath(Path(run_dir).resolve(), Path(page_dir).resolve())).as_posix()
    return "" if rel == "." else rel + "/"


def write_pages(report: Report, out_dir: Path, run_dir: Path) -> Path:
    """Write ``index.html`` and ``ops/<op>.html``; returns the index path."""
    env = _environment()
    ops_dir = out_dir / "ops"
    ops_dir.mkdir(parents=True, exist_ok=True)
    totals = report.totals()
    per_backend = {b: report.totals(b) for b in report.backends}
    index = out_dir / "index.html"
    # columns beyond the element types where an op has one (after_all's `token`)
    extra = sorted({first_type(k) for op in report.ops.values() for _, k in op.cells}
                   - set(COLUMNS) - {""})
    index.write_text(env.get_template("index.html.j2").render(
        report=report, totals=totals, per_backend=per_backend, run=report.run or {},
        run_dir=str(run_dir), short=short_names(report.backends),
        columns=COLUMNS + extra, log_dir=run_dir, log_base=_base(out_dir, run_dir)),
        encoding="utf-8")
    if report.modules:
        modules_dir = out_dir / "modules"
        modules_dir.mkdir(parents=True, exist_ok=True)
        module_page = env.get_template("module.html.j2")
        for m in report.modules.modules:
            (modules_dir / report.modules.page(m)).write_text(module_page.render(
                report=report, mv=report.modules, module=m, run=report.run or {}),
                encoding="utf-8")
    page = env.get_template("op.html.j2")
    for op in report.sorted_ops():
        (ops_dir / op_filename(op.name)).write_text(page.render(
            report=report, op=op, run=report.run or {},
            repros=_repro_links(op, ops_dir, run_dir), log_dir=run_dir,
            log_base=_base(ops_dir, run_dir)), encoding="utf-8")
    return index
