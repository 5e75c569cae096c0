"""The verdict-bearing fields of a results stream, as a multiset: what "same seed, same
verdicts" compares (timings, paths and error texts left out)."""
from __future__ import annotations

import collections
import json
from pathlib import Path

FIELDS = {
    "signature": ("op", "type_key", "signature", "index", "backend", "outcome", "counts",
                  "impl_defined"),
    "divergence": ("op", "type_key", "backend", "class", "case_id", "minimised_class",
                   "minimised_signature", "batch_count", "oracle_suspect"),
    "cross": ("op", "type_key", "signature", "backends", "cases", "disagreements",
              "oracle_suspects"),
    "invalid": ("op", "rule", "signature", "backend", "outcome"),
    "example": ("op", "index", "backend", "outcome"),
    "validity": ("op", "type_key", "generated", "valid"),
}


def verdicts(path: "str | Path") -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        fields = FIELDS.get(r.get("kind"))
        if fields:
            out[json.dumps([r["kind"]] + [r.get(f) for f in fields], sort_keys=True)] += 1
    return out
