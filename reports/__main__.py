"""``python -m conformance.reports RESULTS [OUT]``: render a results file without the full CLI."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.core.results import ResultsFormatError

from . import render


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.reports", description=__doc__)
    p.add_argument("results", type=Path, help="a results.jsonl file")
    p.add_argument("out", type=Path, nargs="?", help="output folder (default: report/ next to "
                                                     "the results file)")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="folder the reproducer paths are relative to (default: the results "
                        "file's folder)")
    p.add_argument("--expectations", type=Path, default=None, metavar="FILE",
                   help="known divergences (YAML): show the CI gate in the report")
    args = p.parse_args(argv)
    try:
        index = render(args.results, args.out or args.results.parent / "report",
                       args.expectations, run_dir=args.run_dir)
    except ResultsFormatError as e:        # FILE:LINE: what this version cannot read
        print(f"{p.prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
