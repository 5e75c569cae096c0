"""Merging result streams (``conformance merge OUT A.jsonl B.jsonl ...``): the runs of
several machines (``--shard K/N``, a split by ``--ops`` or ``--types``) or nights, as
one results file the report renders from.

Every record has an identity (:func:`record_key`): a ``signature`` record is
(backend, op, type key, signature index), a ``divergence`` (backend, op, case id,
class), an ``invalid`` (backend, op, rule, signature), and so on; the case id of a
value case is seed:depth:op:type_key:signature_index:batch:case, so the identities
are the case ids the records speak for. The merged stream has each identity once:

- the same record in two inputs (the same unit run twice: a retried shard, two
  overlapping runs) is kept once (``duplicates``);
- two different records with one identity (timing fields aside) are a *conflict*:
  the first is kept and the conflict reported (``conflicts``); with the same seed
  and options that means a backend or the suite is not deterministic;
- records of a unit an input did not finish (no ``unit_done`` for the op: an
  interrupted run) are left out, as ``--resume`` leaves them out (``unfinished``).

Inputs must be results of ``conformance run`` (a programs results file is refused, named
as such), runs of the same seed, depth, backends and options (the header fields
``--resume`` compares, :data:`conformance.apps.runner.RESUME_KEYS`), except the filters
(``ops``, ``families``, ``element_types``) and ``shard``: those are what splits a run.
Another input is refused with a one-line reason naming it, and so is an input this
version cannot read (conformance.core.results: a format it does not know, a record of an
unknown kind, a record without a required field or with one its kind does not declare,
named by file and line): nothing it does not know is copied.
"""
from __future__ import annotations

import dataclasses
import filecmp
import json
import shutil
from pathlib import Path
from typing import Any, Iterable, Sequence

from conformance.core.results import (MergedEnd, RecordError, check_record, format_problem,
                                      header_format, known_format)

#: Fields that differ between two runs of the same cases (left out of comparisons).
TIMING = ("started", "elapsed", "out")

#: Header fields that may differ between the runs merged (they split the run).
SPLITS = ("ops", "families", "element_types", "shard")


class MergeError(ValueError):
    """Inputs that cannot be merged (one-line reason naming the file)."""


def record_key(r: dict[str, Any]) -> tuple:
    """The identity of a results record within a run (see the module doc)."""
    kind = r.get("kind")
    g = r.get
    if kind == "signature":
        return (kind, g("backend"), g("op"), g("type_key"), g("index"), g("signature"))
    if kind == "divergence":
        return (kind, g("backend"), g("op"), g("type_key"), g("case_id"), g("class"))
    if kind == "invalid":
        return (kind, g("backend"), g("op"), g("rule"), g("signature"))
    if kind == "example":
        return (kind, g("backend"), g("op"), g("index"), g("example"))
    if kind == "validity":
        return (kind, g("op"), g("type_key"))
    if kind == "cross":
        return (kind, g("op"), g("type_key"), g("signature"))
    if kind == "replay":
        return (kind, g("backend"), g("case_id"), g("repro"))
    if kind == "unit_done":
        return (kind, g("op"))
    if kind == "internal_error":
        return (kind, g("op"), g("type_key"), g("what"), g("error"))
    return (kind, json.dumps(strip(r), sort_keys=True, default=str))


def strip(r: dict[str, Any]) -> dict[str, Any]:
    """A record without its timing fields."""
    return {k: v for k, v in r.items() if k not in TIMING and not k.startswith("_")}


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True,
                                                                    default=str)


def check_headers(headers: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Refuse inputs whose runs differ in anything but the filters and the shard."""
    from conformance.apps.runner import RESUME_KEYS, resume_value
    first_name, first = headers[0]
    for name, h in headers[1:]:
        diff = [f"{k} {json.dumps(h.get(k), default=str)} ({first_name}: "
                f"{json.dumps(first.get(k), default=str)})"
                for k in RESUME_KEYS if k not in SPLITS and (k in h or k in first)
                and resume_value(k, h.get(k)) != resume_value(k, first.get(k))]
        if diff:
            raise MergeError(f"{name}: cannot merge a run with different options: "
                             + "; ".join(diff))


def _union(values: Iterable[Any]) -> Any:
    """A filter of the merged run: None (everything) if any input had none."""
    out: list = []
    for v in values:
        if not v:
            return None
        out += [x for x in v if x not in out]
    return out


@dataclasses.dataclass
class Merged:
    records: list[dict[str, Any]]
    duplicates: int = 0
    unfinished: int = 0
    conflicts: list[tuple[tuple, str, str]] = dataclasses.field(default_factory=list)
    renamed: int = 0


def merge_records(inputs: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Merged:
    """Merge the records of several results files, given as (name, records) with the run
    header first (see the module doc). Raises :class:`MergeError`."""
    headers = []
    for name, recs in inputs:
        if not recs or recs[0].get("kind") != "run":
            raise MergeError(f"{name}: not a results file of `conformance run` (no run header)")
        if recs[0].get("command") == "programs":
            raise MergeError(f"{name}: the results of `conformance programs`: merge joins "
                             f"the results of `conformance run` only")
        try:
            check_record(recs[0], strict=True)
        except RecordError as e:
            raise MergeError(f"{name}: record 1: {e}: not merged") from None
        if not known_format(header_format(recs[0])):
            raise MergeError(f"{name}: {format_problem(header_format(recs[0]))}")
        headers.append((name, recs[0]))
    check_headers(headers)
    first = headers[0][1]
    header = {**first,
              **{k: _union(h.get(k) for _, h in headers) for k in ("ops", "families",
                                                                  "element_types")},
              "merged_from": [name for name, _ in headers],
              "shards": sorted({str(h["shard"]) for _, h in headers if h.get("shard")})}
    header.pop("shard", None)
    header["started"] = min(h.get("started") or 0 for _, h in headers)
    out = Merged([header])
    seen: dict[tuple, tuple[str, dict]] = {}
    ops: list[str] = []
    elapsed = 0.0
    for name, recs in inputs:
        done = {r.get("op") for r in recs if r.get("kind") == "unit_done"}
        for i, r in enumerate(recs[1:], 2):
            try:
                check_record(r, strict=False)     # (the writer checks the fields)
            except RecordError as e:
                raise MergeError(f"{name}: record {i}: {e}: not merged") from None
            kind = r.get("kind")
            if kind == "end":
                elapsed = max(elapsed, float(r.get("elapsed") or 0))
                ops += [o for o in r.get("ops") or [] if o not in ops]
                continue
            if kind == "run":
                continue
            if kind != "replay" and r.get("op") is not None and r.get("op") not in done:
                out.unfinished += 1
                continue
            key = record_key(r)
            if key in seen:
                if _same(strip(seen[key][1]), strip(r)):
                    out.duplicates += 1
                else:
                    out.conflicts.append((key, seen[key][0], name))
                continue
            seen[key] = (name, r)
            out.records.append(r)
    out.records.append(MergedEnd(elapsed=elapsed, ops=ops, merged=len(inputs)).to_dict())
    return out


def copy_repros(merged: Merged, sources: dict[str, Path], out: Path) -> None:
    """Copy each kept divergence's reproducer folder into ``out`` (its path relative to
    the run's folder kept; a different folder already there under that name gets a
    ``-mN`` suffix and the record is updated)."""
    for r in merged.records:
        rel = r.get("repro")
        src_name = r.pop("_source", None)
        if r.get("kind") != "divergence" or not rel or src_name is None:
            continue
        src = sources[src_name] / rel
        if not src.is_dir():
            continue
        dest, n = out / rel, 1
        while dest.exists() and not _same_folder(src, dest):
            n += 1
            dest = out / f"{rel}-m{n}"
        if dest.resolve() == src.resolve():
            continue
        if not dest.exists():
            shutil.copytree(src, dest)
        if n > 1:
            r["repro"] = f"{rel}-m{n}"
            merged.renamed += 1


def _same_folder(a: Path, b: Path) -> bool:
    if not b.is_dir():
        return False
    cmp = filecmp.dircmp(a, b)
    return not (cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files)


def merge_files(paths: Sequence[Path], out: Path) -> Merged:
    """Merge results files into ``out/results.jsonl`` (reproducer folders copied along);
    returns what was merged. The report is rendered by the caller."""
    from conformance.core.results import ResultsWriter, read_results
    inputs = []
    sources: dict[str, Path] = {}
    for p in paths:
        name = str(p)
        recs = list(read_results(p, strict=True))   # ResultsFormatError: FILE:LINE: ...
        for r in recs:
            if r.get("kind") == "divergence":
                r["_source"] = name
        inputs.append((name, recs))
        sources[name] = Path(p).parent
    merged = merge_records(inputs)
    out.mkdir(parents=True, exist_ok=True)
    copy_repros(merged, sources, out)
    for r in merged.records:
        r.pop("_source", None)
    tmp = out / "results.jsonl.merging"
    with ResultsWriter(tmp) as w:
        for r in merged.records:
            w.write(r)
    tmp.replace(out / "results.jsonl")
    return merged
