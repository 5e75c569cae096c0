"""Packing for every backend that compiles StableHLO text (issue 33, backends/text_pack.py):
a vendor adapter packs with no code of its own (its ordinary compile is handed the pack's
canonical text); the records are those of an unpacked run; a member whose compile kills
the process is blamed alone; a backend that refuses packs as such, or does not compile the
text it is handed, goes alone with the reason recorded; a backend that lies about a pack's
parts is caught, not hidden by packing.

The adapters here compile the text with XLA through jaxlib's PJRT client, as a vendor's
compiler would (so these tests need no optional extra); IREE's own packed and unpacked
records are compared where the [iree] extra is installed.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conformance.backends import Backend, CannotPack, vendor
from conformance.checking import packing
from conformance.core.case import Signature
from conformance.core.packs import PackSignature
from test_packing import _records, _run, _sigs


class TextXla(Backend):
    """A vendor adapter as docs/vendor-guide.md writes one: ``compile(signature)`` takes
    ``vendor.module_text(signature)`` and compiles it (here with XLA's CPU client)."""

    name = "text-xla"
    isolate = False

    def __init__(self) -> None:
        super().__init__()
        from conformance.backends import jaxlib_support
        self.pjrt = jaxlib_support.Pjrt(jaxlib_support.load("text-xla", "pjrt"), "cpu")
        self.texts: list[str] = []          # every module compiled

    def compile_text(self, text: str, sig):
        return self.pjrt.loaded(self.pjrt.compile(text))

    def compile(self, sig):
        text = vendor.module_text(sig)
        self.texts.append(text)
        run = self.compile_text(text, sig)
        put = self.pjrt.put
        return lambda inputs: run([put(np.ascontiguousarray(x)) for x in inputs])

    @property
    def packs(self) -> list[int]:
        """Members of each pack compiled (its text's parts: arguments ``%sJ_0``)."""
        return [j for t in self.texts for j in [sum(f"%s{k}_" in t for k in range(64))]
                if j > 1]


class CrashesOnSecondF32Add(TextXla):
    """Its compiler kills the process on one program: the second f32 add of the quick
    plan (a (3, 1, 4, 4)-ish shape: whatever it is, the one of index 1), alone or in a
    pack; isolated, as a vendor class is by default."""

    name = "crashes-on-one"
    isolate = True

    def compile_text(self, text, sig):
        bad = _sigs_of("add", "f32")[1]
        if f"tensor<{'x'.join(map(str, bad.input_types[0].shape))}xf32>" in text and \
                '"stablehlo.add"' in text:
            os.abort()
        return super().compile_text(text, sig)


class OneResultPerModule(TextXla):
    """A compiler that takes modules of one result only (it refuses every pack)."""

    name = "one-result"

    def compile_text(self, text, sig):
        if len(sig.result_leaves) > 1:
            raise RuntimeError("acme-compile: error: only single-result functions are "
                               "supported")
        return super().compile_text(text, sig)


class SwapsPackedResults(TextXla):
    """Lies in packs only: of a module's results, the first two of one shape come back
    swapped (each converted to the other's element type; each member alone is right)."""

    name = "swaps-results"

    def compile(self, sig):
        run = super().compile(sig)
        types = list(sig.result_leaves)
        pair = next(((i, j) for i in range(len(types)) for j in range(i + 1, len(types))
                     if types[i].shape == types[j].shape), None)
        if pair is None:
            return run
        i, j = pair

        def lie(inputs):
            out = [np.asarray(x) for x in run(inputs)]
            out[i], out[j] = out[j].astype(out[i].dtype), out[i].astype(out[j].dtype)
            return out
        return lie


class ReadsNoText(TextXla):
    """Compiles from ``signature.op`` (a table of its own), never the text: cannot pack."""

    name = "reads-no-text"

    def compile(self, sig):
        if sig.op not in ("add", "subtract"):
            raise KeyError(sig.op)
        return super().compile(sig)


def _sigs_of(op: str, et: str):
    from conformance.checking.plan import plan_binding, select_bindings
    from conformance.specs import load_spec
    spec = load_spec(op)
    return [s for b in select_bindings(spec, [et]) for s in plan_binding(spec, b, 0, "quick")]


def _counting(monkeypatch) -> list[int]:
    sizes: list[int] = []
    original = packing.UnitPacker._run

    def counting(self, backend, chunk):
        sizes.append(len(chunk))
        return original(self, backend, chunk)
    monkeypatch.setattr(packing.UnitPacker, "_run", counting)
    return sizes


def test_a_pack_signature_prints_as_the_pack_program():
    sigs = _sigs("add", 2) + _sigs("sort", 1)
    p = PackSignature.of(sigs)
    assert p.input_types == tuple(t for s in sigs for t in s.input_leaves)
    assert p.result_types == tuple(t for s in sigs for t in s.result_leaves)
    text = vendor.module_text(p)
    assert p.reads and text.count("func.func public @main") == 1
    assert text.count('"stablehlo.add"') == 2 and '"stablehlo.sort"' in text


def test_a_vendor_adapter_packs_and_its_records_are_an_unpacked_runs(tmp_path, monkeypatch):
    """One and two results, a region (sort), two element types; records one by one."""
    ops, types = ["add", "sort"], ["f32", "si8"]
    plain = _records(_run(tmp_path, "plain", [TextXla()], 0, ops, types))
    sizes = _counting(monkeypatch)
    b = TextXla()
    assert b.pack_kind == "text" and b.can_pack
    packed = _records(_run(tmp_path, "packed", [b], 16, ops, types))
    assert sizes and max(sizes) > 2 and max(b.packs) > 2, (sizes, b.packs)
    assert plain == packed


def _narrow(tmp, name: str, backend, pack: int, ops, types, isolate=False):
    """A run of the valid signatures only (no invalid programs, examples or probes)."""
    from conformance.apps.runner import RunConfig, run
    out = tmp / name
    run(RunConfig(backends=[backend.name], ops=ops, element_types=types, depth="quick",
                  out=out, progress=False, replay=False, probes=False, invalid=False,
                  examples=False, pack=pack, isolate=isolate),
        [backend], out / "results.jsonl")
    return out / "results.jsonl"


def test_iree_packs_and_its_records_are_an_unpacked_runs(tmp_path, monkeypatch):
    """IREE (the [iree] extra; skipped without it) through the same text path."""
    pytest.importorskip("iree.compiler")
    pytest.importorskip("iree.runtime")
    from conformance.backends import get_backend
    ops, types = ["add"], ["f32", "si8"]
    plain = _records(_narrow(tmp_path, "plain", get_backend("iree"), 0, ops, types))
    sizes = _counting(monkeypatch)
    b = get_backend("iree")
    assert b.pack_kind == "text"
    packed = _records(_narrow(tmp_path, "packed", b, 16, ops, types))
    assert sizes and max(sizes) > 2, sizes
    assert plain == packed


def test_the_interpreter_says_why_it_does_not_pack():
    from conformance.backends import get_backend
    b = get_backend("interpreter")
    assert not b.can_pack and "nothing to share" in b.pack_refusal and b.pack_kind == "none"
    sigs = _sigs("add", 2)                  # (its text path would take a pack)
    pack = b.compile_pack(sigs)
    x = [[np.ones((1,) + t.shape, t.element_type.dtype) for t in s.input_leaves] for s in sigs]
    assert [r[0].shape[0] for r in pack(x)] == [1, 1]


def test_a_member_that_crashes_the_compiler_is_blamed_alone(tmp_path):
    """The pack holding it kills the (isolated) process: its members go alone, the one at
    fault crashes alone and is recorded so; the others are judged. (Packed only: a
    process start costs seconds; test_packing's crashing pack compares with unpacked.)"""
    path = _narrow(tmp_path, "packed", CrashesOnSecondF32Add(), 16, ["add"], ["f32", "si32"],
                   isolate=True)
    sigs = [r for r in map(json.loads, path.read_text().splitlines())
            if r["kind"] == "signature"]
    crashed = [r for r in sigs if r["outcome"] == "crash"]
    assert [(r["type_key"], r["index"]) for r in crashed] == [("f32", 1)], crashed
    assert "SIGABRT" in crashed[0]["reason"]
    judged = [r for r in sigs if r not in crashed]
    assert len(judged) == 3 and all(r["counts"].get("pass") for r in judged), judged


def test_a_backend_that_refuses_packs_goes_alone_with_the_reason(tmp_path, monkeypatch):
    ops = ["add", "subtract"]
    plain = _records(_run(tmp_path, "plain", [OneResultPerModule()], 0, ops, ["f32", "si8"]))
    sizes = _counting(monkeypatch)
    b = OneResultPerModule()
    packed = _records(_run(tmp_path, "packed", [b], 16, ops, ["f32", "si8"]))
    assert plain == packed
    assert "only single-result functions" in b.pack_refusal
    assert "each member compiles alone" in b.pack_refusal and not b.can_pack
    # the first pack, halved down to pairs whose members compile alone (two): then no more
    assert sizes[0] > 2 and sizes[-1] == 2 and all(s > 1 for s in sizes), sizes
    assert len(sizes) <= 5


class RefusesAddWithSubtract(TextXla):
    """Fails one combination only (a module holding both add and subtract)."""

    name = "refuses-one-pair"

    def compile_text(self, text, sig):
        if '"stablehlo.add"' in text and '"stablehlo.subtract"' in text:
            raise RuntimeError("acme-compile: error: internal compiler error")
        return super().compile_text(text, sig)


def test_a_failing_pair_after_a_good_pack_turns_nothing_off():
    b = RefusesAddWithSubtract()
    a, s = _sigs("add", 3), _sigs("subtract", 1)
    items = [("k", 0, a[0]), ("k", 1, a[1]), ("k", 2, s[0]), ("k", 3, a[2])]
    packer = packing.UnitPacker(
        [b], items, 2, 1, lambda key, i, batch, sig:
        [np.ones((2,) + t.shape, t.element_type.dtype) for t in sig.input_leaves])
    packer.before("add", "k", 0)
    packer.before("subtract", "k", 2)
    assert packer.stats["packs"] == 1 and packer.stats["alone"] == 2
    assert b.can_pack and not packer.refused


def test_a_backend_that_does_not_compile_the_text_cannot_pack(monkeypatch):
    b = ReadsNoText()
    with pytest.raises(CannotPack, match="before taking the pack's text"):
        b.compile_pack(_sigs("add", 2))
    sigs = _sigs("add", 2) + _sigs("subtract", 2)
    draw = {s: [np.ones((2,) + t.shape, t.element_type.dtype) for t in s.input_leaves]
            for s in sigs}
    packer = packing.UnitPacker([b], [("k", i, s) for i, s in enumerate(sigs)], 16, 1,
                                lambda key, i, batch, sig: draw[sig])
    packer.before("add", "k", 0)
    assert "reads-no-text" in packer.refused and not b.can_pack
    assert packer.stats["bisections"] == 0 and not b._batch_cache

    class RunOnly(Backend):
        name = "run-only"

        def run(self, case):
            return []
    assert "run(case)" in RunOnly().pack_refusal and not RunOnly().can_pack


def test_results_swapped_inside_a_pack_are_caught(tmp_path):
    """Packing must not hide a lie: the members whose results came back swapped diverge
    in the packed run (and nothing does unpacked)."""
    ops, types = ["add"], ["f32", "si32"]
    plain = [json.loads(r) for r in _records(_run(tmp_path, "plain", [SwapsPackedResults()],
                                                  0, ops, types))]
    b = SwapsPackedResults()
    packed = [json.loads(r) for r in _records(_run(tmp_path, "packed", [b], 16, ops, types))]
    assert b.packs, "it did pack"

    def counts(records):
        return {(r["op"], r["type_key"], r["index"]): r["counts"] for r in records
                if r["kind"] == "signature"}
    before, after = counts(plain), counts(packed)
    changed = sorted(k for k in before if before[k] != after[k])
    assert [k for _, k, _ in changed] == ["f32", "si32"], changed
    assert all(after[k].get("value", 0) > before[k].get("value", 0) for k in changed)


def test_pack_fillers_are_inputs_the_pack_ran():
    """A member re-run alone through the pack: the others get their own first case of the
    pack's first run, and a member with fewer cases is padded; results are cut back."""
    b = TextXla()
    sigs = [Signature.make(op, ["tensor<2xsi32>"] * 2, ["tensor<2xsi32>"])
            for op in ("add", "divide")]
    pack = b.compile_pack(sigs)
    ones = [np.ones((3, 2), np.int32)] * 2
    first = pack([ones, [np.full((3, 2), 7, np.int32), np.full((3, 2), 2, np.int32)]])
    assert first[1][0].tolist() == [[3, 3]] * 3
    again = pack([None, [np.full((1, 2), 9, np.int32), np.full((1, 2), 3, np.int32)]])
    assert again[0] is None and again[1][0].tolist() == [[3, 3]]
