"""Same seed, same verdicts: the one check path (conformance.checking.checker) gives the records
the three separate loops gave before it.

``data/verdicts-quick-jax-numpy.jsonl`` holds the verdict-bearing fields
(tests/verdict_records.py) of this run. It was made by the code before the checker
existed (commit ddecba0) and matched the checker record for record; it was regenerated
for the deliberate reduce_precision change of commit 4906b35 (a NaN with
mantissa_bits = 0 overflows to infinity), which changed exactly the two
reduce_precision e1m0 signatures' records, and for value coverage (issue 12, point 3:
generators/coverage.py), which changed what is drawn: each binding's plan now holds a
rich signature and one per signature-level target (compare TOTALORDER, ...) chosen
from more hypothesis draws, and the first positions of every value batch enumerate the
special-value class pairs, so most signatures and cases differ; and for allowed sets
(issue 12, point 2: implementation-defined elements checked against what the spec
still allows instead of masked), which extends the records of rules with alternatives
by ``alternatives`` and ``outside`` counts (117 signature records, same classes) and
changes four jax signatures from pass to subnormal_flush: an inexact f64 -> f32,
complex<f64> -> f32 and complex<f64> -> bf16 conversion whose subnormal result XLA
flushes to zero (not one of the two neighbouring floats, masked before), and a bf16
subnormal that an out-of-bounds gather window reads and XLA flushes; and for values at
the ops' boundaries (issue 12: convert draws a fifth of its operands next to the
destination's range limits, so the convert records' values and counts change, no class
appears or goes) and select's signature-level coverage target (a rank-0 pred with
tensor branches is planned for every binding); and for live plans (issue 32 item 1: a
signature-level target per binding that a NaN update under a maximum region needs, and
up to 64n + 256 draws for a binding whose targets the first draws miss), which changed
27 scatter records (other signatures of f32, bf16 and i1; no class appears or goes); and
for the 2026-12-07 merge (newer float formats' coverage classes, looks_like records,
text packs), after which XLA CPU no longer flushes the bf16 subnormal of one gather and
one pad signature in this run (then read as depending on what ran before in the process;
it is the host's CPU, below) and the
pad signature's diverging case is a quieted signalling NaN instead; and for class pools
(issue 33, the warm path: the systematic positions of a batch take their values from
pools drawn once per seed, the same classes at the same positions), which changed the
counts of 172 signature records of convert, multiply, add and sort (same coverage) and
puts one bf16 NaN whose payload jax's sort quiets into a quick sort bf16 batch; and for
gather and scatter with batching dimensions (issue 30: signatures carry the batching
attributes and the rules their 2026-08 numbers, so every gather/scatter record's key
changes: 119 differ, 162 new; no other record changes); and for the newer float formats
drawn by op bindings (issue 30: convert's turn of the nine formats adds six bindings that
name one of this run's types, i1->f8E3M4, i1->f8E4M3, i1->f8E4M3FNUZ, f8E4M3->si8,
f8E4M3->bf16, f8E4M3FNUZ->i1: 24 new records, all passing; none differs); and for
scatter's promotable update computations (issue 30, C23/C25: one input in six drawn with a
wider computation type and the constraints renumbered, so scatter's plans and invalid
programs change: 35 records differ, 35 new, all scatter; jax runs the promoted signatures as
Unsupported). The pad bf16 signature's records hold XLA CPU's unflushed result (every CI
run before 2026-12-07); the flushed one (one case `subnormal_flush` more) is the one
alternative accepted (data/verdicts-quick-jax-numpy.alternative.json). What decides it is
the HOST: XLA CPU converts bf16 through f32, with AVX512_BF16's conversion instruction
(which flushes subnormals) where the CPU has it, in software where not; the machines of
2026-12-07 had it (backends/host_cpu.py, tests/test_host_cpu.py); and for inputs of one
element type and distribution drawn by one draw (issue 33, the warm path: 60 records of
add, multiply, divide, scatter and sort differ, the same signatures and classes; verdicts
unchanged, checked on the old draw). Regenerated on an AVX512_BF16 host twice, once with
``XLA_FLAGS=--xla_cpu_max_isa=AVX2`` (the golden) and once without (the alternative: the
same pad records as before)::

    conformance run --backend jax,numpy --ops add,multiply,divide,compare,select,sort,\\
        gather,scatter,pad,convert,reduce_precision --types f32,si8,bf16,ui8,i1 \\
        --depth quick --out OUT

A verdict that changes on purpose regenerates it (and says why in the commit).
"""
from __future__ import annotations

import json
from pathlib import Path

from conformance.apps.cli import main

import verdict_records

GOLDEN = Path(__file__).parent / "data" / "verdicts-quick-jax-numpy.jsonl"
ARGS = ["run", "--backend", "jax,numpy", "--ops",
        "add,multiply,divide,compare,select,sort,gather,scatter,pad,convert,reduce_precision",
        "--types", "f32,si8,bf16,ui8,i1", "--depth", "quick", "--no-progress"]


def test_records_match_the_recorded_verdicts(tmp_path):
    code = main(ARGS + ["--out", str(tmp_path / "out")])
    assert code in (0, 1)
    got = verdict_records.verdicts(tmp_path / "out" / "results.jsonl")
    want = {}
    for line in GOLDEN.read_text().splitlines():
        key, n = json.loads(line)
        want[key] = n
    missing = {k: n for k, n in want.items() if got.get(k, 0) != n}
    extra = {k: n for k, n in got.items() if k not in want}
    if _the_recorded_alternative(missing, got, want):
        missing, extra = {}, {}
    assert not missing and not extra, (
        f"{len(missing)} recorded verdict(s) differ, {len(extra)} new; first: "
        f"{next(iter(missing or extra))[:300]}")


ALTERNATIVE = Path(__file__).parent / "data" / "verdicts-quick-jax-numpy.alternative.json"


def _the_recorded_alternative(missing: dict, got: dict, want: dict) -> bool:
    """XLA CPU flushes the bf16 subnormal of one pad signature on hosts with AVX512_BF16 and
    not on others (backends/host_cpu.py). The golden file
    holds the unflushed one, the alternative file the flushed one (its records exactly:
    one `subnormal_flush` case more, its divergence record and its cross count). Nothing
    else may differ."""
    alt = json.loads(ALTERNATIVE.read_text())
    if missing != alt["recorded"]:
        return False
    differing = {k: n for k, n in got.items() if want.get(k) != n}
    return differing == alt["alternative"]
