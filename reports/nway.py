"""Who disagrees with whom, with several implementations (issue 22).

With four or more backends a column per pair (the op page's "Backends compared" table)
grows quadratically and hides the pattern that matters: is one backend the odd one
out, or do they split in camps? This module turns an op's ``cross`` records
(reports.aggregate.CrossCell: disagreeing and compared cases per pair, counted only
where both backends produced a result) into

- a symmetric backends x backends table per op: disagreeing cases / cases compared;
- per type key, the *odd one out*: the backend that disagrees with every other while
  those all agree with each other (a bug of that backend, not of the spec's reading);
  and the oracle suspects (every backend agrees, against the oracle), flagged for
  review as before.

:func:`render` gives the op page's markup (autoescaped text, no script).
"""
from __future__ import annotations

import dataclasses
import html

from .aggregate import CrossCell, OpData, pair_backends

#: From this many backends the op page shows the table.
MIN_BACKENDS = 3


@dataclasses.dataclass
class NWay:
    """One op's (or one type key's) comparison of every backend with every other."""

    backends: list[str]
    disagree: dict[tuple[str, str], int]       # (a, b) and (b, a): disagreeing cases
    compared: dict[tuple[str, str], int]       # cases both produced a result for
    odd_one_out: dict[str, str]                # type key -> backend
    suspects: dict[str, int]                   # type key -> oracle-suspect cases

    def cell(self, a: str, b: str) -> tuple[int, int] | None:
        """(disagreeing, compared) for a pair, None where they were never compared."""
        if (a, b) not in self.compared:
            return None
        return self.disagree.get((a, b), 0), self.compared[(a, b)]

    def peers_disagreeing(self, backend: str) -> int:
        """With how many other backends ``backend`` disagrees at least once."""
        return sum(1 for b in self.backends if b != backend
                   and (self.disagree.get((backend, b)) or 0) > 0)


def _pairs(cell: CrossCell):
    for pair in set(cell.compared) | set(cell.disagreements):
        a, b = pair_backends(pair)
        yield a, b, int(cell.disagreements.get(pair, 0)), int(cell.compared.get(pair, 0))


def odd_one_out(cell: CrossCell) -> str | None:
    """The backend that disagrees with each of at least two others, which all agree
    with each other (where compared); None if there is no such backend."""
    names = sorted({n for a, b, _, _ in _pairs(cell) for n in (a, b)})
    if len(names) < 3:
        return None
    bad = {(a, b) for a, b, d, _ in _pairs(cell) if d} | \
        {(b, a) for a, b, d, _ in _pairs(cell) if d}
    compared = {(a, b) for a, b, _, _ in _pairs(cell)} | {(b, a) for a, b, _, _ in _pairs(cell)}
    for x in names:
        others = [y for y in names if y != x and (x, y) in compared]
        if len(others) >= 2 and all((x, y) in bad for y in others) and \
                not any(p in bad for p in compared if x not in p):
            return x
    return None


def nway(op: OpData, backends: list[str]) -> NWay:
    """The table of ``op`` over ``backends`` (the run's order)."""
    disagree: dict[tuple[str, str], int] = {}
    compared: dict[tuple[str, str], int] = {}
    for a, b, d, c in _pairs(op.cross_total()):
        for key in ((a, b), (b, a)):
            disagree[key] = disagree.get(key, 0) + d
            compared[key] = compared.get(key, 0) + c
    odd = {k: x for k, cc in op.cross.items() if (x := odd_one_out(cc)) is not None}
    suspects = {k: cc.oracle_suspects for k, cc in op.cross.items() if cc.oracle_suspects}
    present = [b for b in backends if any(b in p for p in compared)]
    return NWay(present, disagree, compared, odd, suspects)


def render(op: OpData, backends: list[str]) -> str:
    """The op page's "who disagrees with whom" table (HTML, escaped); empty below
    :data:`MIN_BACKENDS` compared backends."""
    t = nway(op, backends)
    if len(t.backends) < MIN_BACKENDS:
        return ""
    e = html.escape
    rows = ['<table class="cross nway" id="nway-table">',
            "<tr><th>disagrees with →</th>" + "".join(f"<th class=\"num\">{e(b)}</th>"
                                                     for b in t.backends)
            + '<th class="num">peers disagreeing</th></tr>']
    for a in t.backends:
        tds = []
        for b in t.backends:
            c = t.cell(a, b) if a != b else None
            if a == b or c is None:
                tds.append('<td class="num"><span class="muted">—</span></td>')
                continue
            d, n = c
            tds.append(f'<td class="num{" nonzero" if d else ""}" data-pair="{e(a)}~{e(b)}" '
                       f'title="{d} of {n} cases compared disagree">{d} / {n}</td>')
        rows.append(f'<tr data-backend="{e(a)}"><th>{e(a)}</th>{"".join(tds)}'
                    f'<td class="num">{t.peers_disagreeing(a)} of {len(t.backends) - 1}</td></tr>')
    rows.append("</table>")
    notes = []
    for k, x in sorted(t.odd_one_out.items()):
        notes.append(f"<li><code>{e(k)}</code>: <strong>{e(x)}</strong> is the odd one out "
                     "(it disagrees with every other backend; they agree with each other)</li>")
    for k, n in sorted(t.suspects.items()):
        notes.append(f"<li><code>{e(k)}</code>: {n} oracle suspect case(s): every backend "
                     "that produced a result agrees, against the oracle — review</li>")
    head = ('<h3 id="nway">Who disagrees with whom</h3><p>Cases where two backends '
            "differ under the op's comparison rule / cases both produced a result for, over "
            "every type key.</p>")
    return head + "\n".join(rows) + (f"<ul class=\"nway-notes\">{''.join(notes)}</ul>"
                                     if notes else "")
