"""Measure what the shipped expectations entries of broad classes look like (issue 32 item 3).

For each entry of a broad class (property, accuracy, bound, value) without ``looks_like``
(or the ones named by ``--ops``), run the entry's op and element types narrowed
(``conformance run --ops OP --types T --depth D``, at each depth the entry was seen at),
gate the records with the entry alone, and print the ``looks_like`` that ``expectations
update`` would write for what it matched (:func:`conformance.apps.expectations.looks_of`).
With ``--write`` the entries are edited in place (a ``looks_like:`` line inserted after the
entry's ``depth:`` line; nothing else in the file changes), so that a file other people add
entries to merges cleanly.

    python bench/looks_like_of_shipped.py --file jax-cpu --backend jax [--ops tanh,cbrt] [--write]

Each run is one op and its types: seconds to a minute each.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from conformance.apps.expectations import (Expectations, gate, load_expectations, looks_of,
                                           resolve_expectations, without_looks_like)


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()
            if line.strip()]


def measure(entry, backend: str, work: Path, timeout: int) -> tuple[tuple, str]:
    """The looks_like of one entry from narrowed runs, and a note."""
    got: list[dict] = []
    for depth in entry.depths or ("quick", "default"):
        out = work / f"{entry.index}-{depth}"
        cmd = [sys.executable, "-m", "conformance", "run", "--backend", backend,
               "--ops", entry.op, "--types", ",".join(entry.element_types), "--depth", depth,
               "--out", str(out), "--force", "--no-progress", "--no-invalid",
               "--max-repros", "0"]
        try:
            subprocess.run(cmd, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return (), f"timed out at {depth}"
        if not (out / "results.jsonl").exists():
            return (), f"no results at {depth}"
        got += records(out)
    import dataclasses
    alone = Expectations([dataclasses.replace(entry, looks_like=(), index=0)])
    items = [i for i in gate(got, alone).expected if i["entry"] == 0]
    if not items:
        return (), "matched nothing"
    worst = max((i.get("worst") or 0.0) for i in items) if all(
        i.get("worst") is not None for i in items) else None
    nf = sum(i.get("nonfinite") or 0 for i in items)
    cases = sum(i.get("witnessed") or 0 for i in items)
    return looks_of(entry.cls, items), f"worst {worst} {items[0].get('unit')}, " \
                                       f"{nf}/{cases} cases with inf/NaN"


def write_looks(path: Path, entry, looks: tuple) -> bool:
    """Insert ``looks_like: {...}`` into the entry's block (after its class/depth lines)."""
    text = path.read_text().splitlines(keepends=True)
    starts = [i for i, line in enumerate(text) if line.startswith("- op: ")]
    if entry.index >= len(starts):
        return False
    i = starts[entry.index]
    end = starts[entry.index + 1] if entry.index + 1 < len(starts) else len(text)
    block = text[i:end]
    if any(line.startswith("  looks_like:") for line in block) \
            or block[0].strip() != f"- op: {entry.op}":
        return False
    at = next((k for k, line in enumerate(block) if line.startswith("  reason:")), None)
    if at is None:
        return False
    flow = entry.__class__(op=entry.op, cls=entry.cls, reason="r",
                           looks_like=looks).to_yaml()["looks_like"]
    import yaml
    from conformance.apps.expectations import _Dumper
    line = "  looks_like: " + yaml.dump(flow, Dumper=_Dumper, default_flow_style=True,
                                        width=1 << 16).strip() + "\n"
    text[i + at:i + at] = [line]
    path.write_text("".join(text))
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", required=True, help="a shipped file's name (jax-cpu) or a path")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--ops", help="comma list: only the entries of these ops")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--from", type=int, default=0, dest="start",
                    help="only entries at this index and after (to resume)")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per run")
    args = ap.parse_args()
    exp = load_expectations(args.file)
    path = Path(str(resolve_expectations(args.file)))
    ops = set(args.ops.split(",")) if args.ops else None
    todo = [e for e in without_looks_like(exp) if (ops is None or e.op in ops)
            and e.index >= args.start]
    with tempfile.TemporaryDirectory() as work:
        for e in todo:
            looks, note = measure(e, args.backend, Path(work), args.timeout)
            flow = dict(looks)
            print(f"{e.index:4d} {e.op} {e.where} {e.cls}: {flow or '-'} ({note})", flush=True)
            if looks and args.write:
                ok = write_looks(path, e, looks)
                if not ok:
                    print(f"     not written (entry block not found)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
