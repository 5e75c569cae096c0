"""``summary.json``: the report's numbers for machines (dashboards, CI annotations, diffs of runs)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from conformance.core.results import BOUND_BUCKET_LABELS

from .aggregate import Cell, CrossCell, Report, pair_backends

#: Bumped when the layout of summary.json changes. 2: ``cross`` (backends compared with
#: each other, oracle suspects), and the ``totals`` keys ``compared_cases``,
#: ``disagreements``, ``oracle_suspects``, ``saved_oracle_suspects``. 3: ``gate`` (the CI
#: gate against an expectations file; null when the report was rendered without one). 4:
#: ``coverage`` (value coverage: special-value classes, pairs and targets met per op and
#: type key, with what was missed). 5: ``bound_hist`` (the error as a fraction of the bound,
#: per element type, in cells and per backend and op; ``bound_buckets`` names the
#: buckets) and ``implementation_defined_behaviour`` (what each backend evidently does:
#: accumulation precision and order, from ``probe`` records).
FORMAT_VERSION = 5

#: the keys of a ``probe`` record that summary.json keeps
PROBE_KEYS = ("op", "backend", "element_type", "precision_config", "accumulation",
              "precision_bits", "order", "in_index_order", "operand_precision",
              "operand_bits", "detail")


def _error(x: float | None) -> float | str | None:
    if x is None:
        return None
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _cell(c: Cell) -> dict[str, Any]:
    return {"outcome": c.outcome, "signatures": c.records, "unsupported_signatures": c.unsupported,
            "cases": c.cases, "counts": dict(sorted(c.counts.items())),
            "max_error": _error(c.max_error), "impl_defined": c.impl_defined,
            "reasons": c.reasons, **({"bound_hist": c.bound_hist} if c.bound_hist else {})}


def _cross_cell(c: CrossCell) -> dict[str, Any]:
    return {"signatures": c.records, "cases": c.cases,
            "disagreements": {p: c.disagreements.get(p, 0) for p in c.pairs()},
            "oracle_suspects": c.oracle_suspects}


def cross(report: Report) -> dict[str, Any]:
    """Backends compared with each other: pairwise disagreements, and oracle suspects
    (cases where every backend diverged from the oracle but all agreed with each other),
    in total, per pair and per op."""
    total = report.cross_total()
    ops = [o for o in report.sorted_ops() if o.cross]
    pairs = {}
    for pair in report.pairs():
        per_op = {o.name: o.cross_total().disagreements.get(pair, 0) for o in ops}
        pairs[pair] = {"backends": list(pair_backends(pair)),
                       "cases": total.compared.get(pair, 0),
                       "disagreements": total.disagreements.get(pair, 0),
                       "ops": {k: v for k, v in per_op.items() if v}}
    return {
        "backends": total.backends, "signatures": total.records, "cases": total.cases,
        "pairs": pairs,
        "oracle_suspects": total.oracle_suspects,
        "saved_oracle_suspects": sum(len(o.suspect_divergences()) for o in report.sorted_ops()),
        "ops": {o.name: {**_cross_cell(o.cross_total()),
                         "saved_oracle_suspects": len(o.suspect_divergences()),
                         "type_keys": {k: _cross_cell(o.cross[k]) for k in o.cross_keys()}}
                for o in ops},
    }


def coverage(report: Report) -> dict[str, Any]:
    """Value coverage (generators/coverage.py): per kind (``pairs`` of special-value
    classes met at one element position, ``classes`` of each input, named ``targets``)
    how many the run's value batches met of those targeted, in total, per op and per
    type key, with the items no batch met."""
    ops = {}
    for o in report.sorted_ops():
        keys = o.value_keys()
        if keys:
            ops[o.name] = {"totals": o.value_totals(),
                           "type_keys": {k: {"totals": o.values[k].totals(),
                                             "missing": {kind: sorted(items) for kind, items
                                                         in o.values[k].missing.items()
                                                         if items}}
                                         for k in keys}}
    return {"totals": report.value_totals(), "ops": ops}


def summary(report: Report) -> dict[str, Any]:
    """The whole report as plain JSON data."""
    run = dict(report.run or {})
    run.pop("kind", None)
    run.update(complete=report.complete,
               elapsed=(report.end or {}).get("elapsed"),
               ops_done=[o.name for o in report.sorted_ops() if o.done])
    backends: dict[str, Any] = {}
    invalid: dict[str, Any] = {}
    for b in report.backends:
        ops = {}
        for op in report.sorted_ops():
            keys = op.type_keys(b)
            if keys:
                ops[op.name] = {"family": op.family,
                                "type_keys": {k: _cell(op.cells[(b, k)]) for k in keys}}
                hists = op.bound_hists(b)
                if hists:
                    ops[op.name]["bound_hist"] = hists
        backends[b] = {"info": report.backend_info.get(b, {}), "totals": report.totals(b),
                       "ops": ops}
        invalid[b] = {op.name: {**op.coverage(b),
                                "rules_detail": {r.rule: {"outcome": r.outcome,
                                                          "counts": dict(r.outcomes)}
                                                 for (bb, _), r in op.invalid.items() if bb == b}}
                      for op in report.sorted_ops() if op.invalid or op.checks()}
    examples = [{k: e.get(k) for k in ("op", "backend", "example", "index", "outcome", "message",
                                       "signature")} for e in report.examples()]
    divergences = [{**{k: d.get(k) for k in ("backend", "op", "type_key", "class",
                                             "minimised_class", "case_id", "signature",
                                             "minimised_signature", "repro", "message")},
                    "oracle_suspect": bool(d.get("oracle_suspect"))}
                   for d in report.divergences()]
    return {"format_version": FORMAT_VERSION, "run": run, "totals": report.totals(),
            "backends": backends, "cross": cross(report), "coverage": coverage(report),
            "examples": examples,
            "bound_buckets": BOUND_BUCKET_LABELS,
            "implementation_defined_behaviour": [{k: p.get(k) for k in PROBE_KEYS}
                                                 for p in report.probes()],
            "invalid": invalid, "divergences": divergences,
            "internal_errors": len(report.internal_errors),
            "gate": report.gate.summary() if report.gate is not None else None,
            "programs": report.programs.summary() if report.programs else None,
            "modules": report.modules.summary() if report.modules else None}


def write_summary(report: Report, path: Path) -> Path:
    path.write_text(json.dumps(summary(report), indent=1, sort_keys=False, default=str) + "\n",
                    encoding="utf-8")
    return path
