"""SHIPPED GATE: the shipped jax-cpu expectations gate the quick jax run to exit 0.

These tests run the whole quick profile of the shipped backend (every op, every element
type), one op family per test so that CI's workers share it (the whole run in one test
was CI's critical path, issue 33). They check what issue 12 asks of the shipped file:
`conformance run --depth quick --expectations jax-cpu` exits 0, and `conformance
expectations check RESULTS jax-cpu --strict` finds no entry broader than what the run
matched, and no reason of an entry the run used that its records refute (issue 32 item 7:
conformance.apps.reason_claims, at no cost: the run's own records). The default run is checked by hand (about 3 minutes with --jobs 2),
with the commands in the README ("Gating CI on known divergences"):

    conformance run --expectations jax-cpu --out /tmp/d --no-progress --jobs 2
    conformance expectations check /tmp/d/results.jsonl jax-cpu --strict

When a change of the suite finds new divergences of jax (or loses old ones), rewrite the
file from both runs and fill in the reasons of the new entries:

    conformance expectations update /tmp/q/results.jsonl conformance/apps/expectations_files/jax-cpu.yaml \\
        --also /tmp/d/results.jsonl
"""
from __future__ import annotations

import pytest

from conformance.apps.cli import main

pytest.importorskip("jax")


def _families() -> list[str]:
    from conformance.specs import all_specs
    return sorted({s.family for s in all_specs()})


def _ops_named_by_a_pattern(entries) -> list[str]:
    from conformance.apps.expectations import is_pattern
    return [f"{e.op} ({e.where})" for e in entries if is_pattern(e.op)]


def test_the_per_family_gate_sees_every_entry_of_jax_cpu():
    """The quick jax gate runs one family at a time (below): an entry is judged (stale,
    broad) by the run of its op's family only, which is sound while no entry's op is a
    pattern that could name ops of two families, and the families cover every op."""
    from conformance.apps.expectations import load_expectations
    from conformance.specs import all_specs, op_names
    assert not _ops_named_by_a_pattern(load_expectations("jax-cpu").entries)
    by_family = {s.name for s in all_specs() if s.family in _families()}
    assert by_family == set(op_names())


@pytest.mark.parametrize("family", _families())
def test_SHIPPED_GATE_quick_jax_run_exits_0_with_the_shipped_expectations(family, tmp_path,
                                                                           capsys):
    """One family of the quick jax run (the parts together are the whole run: CI shares
    them between its workers)."""
    out = tmp_path / "quick"
    code = main(["run", "--depth", "quick", "--family", family, "--expectations", "jax-cpu",
                 "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    text = captured.out
    assert code == 0, "\n".join([line for line in text.splitlines()
                                 if line.startswith(("UNEXPECTED", "gate:", "divergences"))]
                                + captured.err.splitlines()[-20:])
    # No entry is stale: those seen only by the default run (depth: default) are not
    # judged by a quick one (issue 31: 32 STALE lines before entries knew their depth)
    stale = [line for line in text.splitlines() if line.startswith("STALE")]
    assert not stale and " 0 stale," in text, "\n".join(stale)
    # no entry broader than what the run matched (--strict would also fail on the entries
    # of broad classes without looks_like: those are counted by
    # test_entries_without_looks_like_do_not_grow)
    # and no reason of an entry the run used says what its records refute (issue 32 item
    # 7: an error figure such as "87-103 ulp", or inf/NaN the witnesses do not show;
    # conformance.apps.reason_claims, checked on this run's own records: CLAIM lines)
    code = main(["expectations", "check", str(out / "results.jsonl"), "jax-cpu"])
    text = capsys.readouterr().out
    assert code == 0 and "; 0 broad entries;" in text \
        and "; 0 reason claim(s) the records refute" in text, "\n".join(
        line for line in text.splitlines()
        if "BROAD" in line or line.startswith(("UNEXPECTED", "gate:", "CLAIM")))


# ---------------------------------------------------------------------------------------
# xla-cpu: the shipped file of the `xla` backend (StableHLO text straight to XLA's PJRT CPU
# client). Its full quick run takes about 3 minutes, so CI gates a quick run of a few ops
# that have entries: element-wise (add: FTZ; compare and maximum: complex LE/GE that ignore
# the imaginary part) and a contraction and a reduction (dot_general: FTZ and invalid
# programs it runs; reduce: the mixed-precision variadic reduce the HLO verifier refuses).
# The whole file is checked by hand (README "Gating CI on known divergences"):
#     conformance run --backend xla --depth quick --expectations xla-cpu --out /tmp/q --jobs 1
#     conformance run --backend xla --expectations xla-cpu --out /tmp/d --jobs 2
#     conformance expectations check /tmp/q/results.jsonl xla-cpu --strict   (same for /tmp/d)
# ---------------------------------------------------------------------------------------

XLA_GATE_OPS = "add,compare,maximum,dot_general,reduce"


def test_xla_cpu_file_loads_with_a_reason_for_every_entry_of_the_xla_backend():
    from conformance.apps.expectations import load_expectations, shipped_expectations
    assert "xla-cpu" in shipped_expectations()
    e = load_expectations("xla-cpu")
    assert e.backend == "xla" and len(e.entries) > 100
    assert all(x.backend in (None, "xla") for x in e.entries)
    assert e.for_backend("xla") == e.entries and e.for_backend("jax") == []
    bad = [f"{x.op} {x.cls} {x.where}" for x in e.entries
           if not x.reason.strip() or x.reason.startswith("TODO") or len(x.reason) > 300
           or "\n" in x.reason]
    assert not bad, bad
    assert all(x.is_narrow() for x in e.entries)
    assert {x.op for x in e.entries if x.programs not in (None, ("module",))} == {
        "add", "log", "reduce", "select"}
    # the corpus's findings (conformance check --corpus models, issue 29): module only
    assert {x.op for x in e.entries if x.programs == ("module",)} == {
        "add", "broadcast_in_dim", "convert", "divide", "multiply", "sort"}
    # depths: the default run's entries (not met by a quick run) say so; the quick run's
    # alone: gather's crash and scatter's bf16 FTZ, and the newer float formats' (issue 30,
    # from a quick run of the nine formats: the default run of every binding has not been
    # gated yet); the rest, met at quick, are judged at every depth
    depths = [x.depths for x in e.entries]
    # (50 with the dynamic-shape ops' three; 51 since compare complex value is met at
    # default depth only with the class pools' values; 57 with issue 30's dot_general f8
    # algorithm and all_gather ui4 entries, and since gather and scatter draw batching
    # dimensions (their divergences moved to other types); the three at quick only are
    # gather's crash and scatter's bf16 FTZ; 65 and 8 since reduce and reduce_window draw
    # bodies promoted to a wider type (issue 30: XLA refuses them, and the plans moved
    # XLA's other reduce divergences to other types): reduce si8 and complex<f64>
    # backend_error, f16 type, reduce_window f8E5M2 backend_error, ui64 FTZ and C6 accepted
    # at quick only; 69 and 9 with all_reduce's promoted computation: XLA reduces in the
    # operands' type, and the plans moved its other all_reduce divergences; 72 with
    # reduce_scatter's; 74 with its part order on 2x2, which the changed plan met; 75 and 10 since the changed plans meet reduce_scatter's signed zero at default only and its C4 accepted at quick only)
    # (with the newer float formats drawn by op bindings (issue 30): +21 at quick, from
    # the quick runs of the nine formats; +1 default: scatter's FTZ in ui4 and
    # complex<f64> is met by the default run only since the batching plans)
    # (78 and 29 after the merge of both: atan2 f64 accuracy and
    # compare_with_broadcast_dimensions' FTZ are met at default only; three quick entries of
    # the newer formats went stale (sort f8E5M2 value, reduce_scatter f8E3M4 nan,
    # reduce_window f8E4M3FNUZ FTZ) and one came (reduce_window's promoted bodies in three
    # newer formats, refused))
    # (79 and 35 with scatter's and select_and_scatter's promotable computations (issue 30):
    # the select_and_scatter tie entry is met at default only, the quick scatter f8
    # backend_error and bf16 FTZ entries went stale, and eight came at quick: XLA refuses or
    # ignores the promoted computations, and the changed plans meet its f32 tie-breaking;
    # 88 from their default run: two default entries went stale, eleven came)
    # (142 with the default run of the nine newer formats (issue 30, branch gate30): 62
    # entries at default depth, and 2 from a default run of reduce_window over every type,
    # whose variadic plans in the nine differ from a --types run's; docs/float-formats.md)
    # (152 and 32 with both, and the three f4E2M1FN signed_zero entries gone: any value is
    # allowed where the exact result is no real number, shared rule no_real_value_without_nan)
    # (39 at quick with the seven crash entries of the quantized data-movement forms, issue
    # 30, from their quick xla run: docs/quantized-types.md; 41 with the quantized select's
    # two: XLA's verifier refuses branches of differing parameters)
    # (154: a full default run (no --types, branch gateall): binary_with_broadcast_dimensions'
    # f64 / complex<f64> value entry split in two (their reasons' claims apart), and
    # collective_broadcast's backend_error in i1, bf16, complex<f32>)
    # (157 with sort f8E4M3FNUZ value, divide complex<f32> accuracy and rng I3 accepted
    # from the same run; 161 with the quantized forms' default run: broadcast_in_dim,
    # transpose and pad crashes, select's verifier refusal in more types; 163 with add f8E8M0FNU
    # and scatter f64 from the default run after the one-draw change)
    assert depths.count(("default",)) == 163 and depths.count(("quick",)) == 41
    assert set(depths) == {None, ("default",), ("quick",)}


def test_SHIPPED_GATE_quick_xla_run_of_a_few_ops_exits_0_with_xla_cpu(tmp_path, capsys):
    import json
    out = tmp_path / "xla"
    code = main(["run", "--backend", "xla", "--ops", XLA_GATE_OPS, "--depth", "quick",
                 "--expectations", "xla-cpu", "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert code == 0, "\n".join(line for line in text.splitlines()
                                if line.startswith(("UNEXPECTED", "gate:", "divergences")))
    # No entry is stale at quick: those the quick run does not meet say `depth: default`
    # (5 STALE lines for these ops before: reduce and dot_general entries of the default run)
    stale = [line for line in text.splitlines() if line.startswith("STALE")]
    assert not stale and " 0 stale," in text, "\n".join(stale)
    gate = json.loads((out / "summary.json").read_text())["gate"]
    # the run met XLA's own divergences (not a run that diverged nowhere), each listed
    # (compare's complex LE/GE value divergence is met at default depth: about 1 position
    # in 500, which the quick run's one LE signature did not meet after issue 33)
    waived = {(m["op"], m["class"]) for m in gate["expected"]}
    assert {("add", "subnormal_flush"), ("compare", "subnormal_flush"), ("maximum", "value"),
            ("dot_general", "accepted_invalid"), ("reduce", "backend_error")} <= waived, waived
    # no entry broader than what the run matched (--strict would also fail on the entries
    # of broad classes without looks_like: those are counted by
    # test_entries_without_looks_like_do_not_grow)
    # (and no reason the run's records refute: CLAIM lines)
    code = main(["expectations", "check", str(out / "results.jsonl"), "xla-cpu"])
    text = capsys.readouterr().out
    assert code == 0 and "; 0 broad entries;" in text \
        and "; 0 reason claim(s) the records refute" in text, "\n".join(
        line for line in text.splitlines()
        if "BROAD" in line or line.startswith(("UNEXPECTED", "gate:", "CLAIM")))


def test_iree_cpu_entries_say_the_quick_run_saw_them():
    """iree-cpu.yaml is the record of one quick run (seed 0): every entry says so
    (`depth: quick`), so a default IREE run still waives what they match but calls none of
    them stale (issue 31, item 9, for the other shipped files)."""
    from conformance.apps.expectations import load_expectations
    e = load_expectations("iree-cpu")
    assert len(e.entries) > 200 and {x.depths for x in e.entries} == {("quick",)}
    x = e.entries[0]
    assert not x.judged_at("default") and x.judged_at("quick")
    assert e.match("iree", {}, x.op, x.cls, x.element_types[0]) is x   # waives at any depth


#: entries of a broad class (property, accuracy, bound, value) without ``looks_like``, per
#: shipped file: each waives any other bug of its op, type and class (issue 32 item 3).
#: The numbers only go down: fill ``looks_like`` from a narrowed run (``conformance run
#: --ops OP --types T``: the records' ``class_errors``) and lower them; a new entry says
#: what its divergence looks like (``expectations update`` writes it).
#: (jax-cpu 24 with issue 30's sort f8E8M0FNU value: its findings measure no error (a
#: permutation) and 13 of 31 cases involve NaN, so ``expectations update`` derives no
#: looks_like for it; the quick run of the sorting family, seed 0)
#: (jax-cpu 27, xla-cpu 29 with the default run of the nine newer formats, issue 30: convert
#: f4E2M1FN to integers and f8E8M0FNU to i1, gather's slice size 0, reduce's NaN payloads and
#: xla's sort f8E8M0FNU measure no error (integer, index and permutation results))
#: (xla-cpu 30 with the full default run's sort f8E4M3FNUZ value, branch gateall: the
#: operands come back unsorted, a permutation that measures no error, and 242 of its 384
#: cases involve NaN, so no looks_like can be derived)
WITHOUT_LOOKS_LIKE = {"jax-cpu": 27, "xla-cpu": 30, "iree-cpu": 54}


def test_entries_without_looks_like_do_not_grow():
    from conformance.apps.expectations import load_expectations, without_looks_like
    got = {name: len(without_looks_like(load_expectations(name))) for name in WITHOUT_LOOKS_LIKE}
    assert all(got[n] <= WITHOUT_LOOKS_LIKE[n] for n in got), got
