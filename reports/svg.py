"""Hand-written inline SVG bar charts: the report must be one offline file, no plotting library.

Bar heights are on a log scale (log10(1 + n)): a histogram of ULP errors is
typically thousands of exact results and a handful of 1-ULP ones, and on a
linear scale the interesting bars would be invisible. Every bar is labelled
with its count, and has a tooltip.
"""
from __future__ import annotations

import math
from html import escape
from typing import Sequence

from markupsafe import Markup

from conformance.checking.compare import ULP_BUCKET_LABELS
from conformance.core.results import BOUND_BUCKET_LABELS


def _e(x: object) -> str:
    return escape(str(x), quote=True)


def bar_chart(counts: Sequence[int], labels: Sequence[str], title: str = "",
              bar_width: int = 46, height: int = 90, unit: str = "ULP",
              axis: str = "ULP error (elements, log scale)",
              colours: Sequence[str] | None = None,
              tips: Sequence[str] | None = None) -> Markup:
    """A labelled, log-scaled bar chart as an inline ``<svg>`` element (``colours``: one
    per bar; default green for the first, orange for the others; ``tips``: each bar's
    tooltip label, default its label)."""
    counts = [int(c) for c in counts]
    labels = list(labels)[:len(counts)] + [""] * max(0, len(counts) - len(labels))
    top, bottom, left = 16, 30, 4
    width = left * 2 + bar_width * len(counts)
    total_h = top + height + bottom
    peak = math.log10(1 + max(counts, default=0)) or 1.0
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{total_h}" viewBox="0 0 {width} {total_h}" role="img" '
             f'aria-label="{_e(title)}">']
    if title:
        parts.append(f"<title>{_e(title)}</title>")
    parts.append(f'<line x1="{left}" y1="{top + height}" x2="{width - left}" '
                 f'y2="{top + height}" stroke="#888" stroke-width="1"/>')
    for i, (n, label) in enumerate(zip(counts, labels)):
        x = left + i * bar_width
        h = round(height * math.log10(1 + n) / peak, 1) if n else 0
        y = top + height - h
        colour = colours[i] if colours else ("#4caf50" if i == 0 else "#ef6c00")
        tip = tips[i] if tips and i < len(tips) else label
        parts.append(f'<g><title>{_e(tip)} {_e(unit)}: {n}</title>'
                     f'<rect x="{x + 3}" y="{y}" width="{bar_width - 6}" height="{h}" '
                     f'fill="{colour}"/>')
        if n:
            parts.append(f'<text x="{x + bar_width / 2}" y="{y - 3}" font-size="9" '
                         f'text-anchor="middle">{n}</text>')
        parts.append(f'<text x="{x + bar_width / 2}" y="{top + height + 12}" font-size="9" '
                     f'text-anchor="middle">{_e(label)}</text></g>')
    parts.append(f'<text x="{width / 2}" y="{total_h - 3}" font-size="9" fill="#555" '
                 f'text-anchor="middle">{_e(axis)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def ulp_chart(hist: Sequence[int], title: str = "") -> Markup:
    """The ULP-error distribution of one (backend, type key), buckets from the comparator."""
    return bar_chart(hist, ULP_BUCKET_LABELS, title)


def _short_bound_label(label: str) -> str:
    """``≤2^-16`` as ``2⁻¹⁶`` (the chart's narrow bars)."""
    sup = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    return "2" + label[3:].translate(sup) if label.startswith("≤2^") else label


def bound_chart(counts: Sequence[int], title: str = "") -> Markup:
    """The error as a fraction of the bound of one (op, backend, element type): buckets
    of |actual − oracle| / bound (conformance.core.results.BOUND_BUCKET_LABELS), the
    last one (beyond the bound) in red."""
    n = len(BOUND_BUCKET_LABELS)
    colours = ["#4caf50"] + ["#ef6c00"] * (n - 2) + ["#c62828"]
    return bar_chart(counts, [_short_bound_label(x) for x in BOUND_BUCKET_LABELS], title,
                     bar_width=26, unit="of the bound", tips=BOUND_BUCKET_LABELS,
                     axis="|actual − oracle| / bound (elements, log scale)", colours=colours)
