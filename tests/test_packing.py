"""Packing several signatures into one compiled program (issue 20, conformance/checking/packing.py):
the records are those of an unpacked run; a failing pack is split down to the signature
at fault; a crashing pack sends its members alone; a re-run of a batch is a real run."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from conformance.checking import packing
from conformance.backends import get_backend
from conformance.checking.isolation import BackendCrash
from conformance.mlir.program_emit import program_text
from conformance.apps.runner import RunConfig, run
from planted import OracleBackend


def _records(path: Path) -> list[str]:
    """The run's records as text, without header and end (times), the run's folder
    (in a crash's log path), the time stamps and thread ids native code prints in a
    crash's last words, and source positions in jax's errors."""
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["kind"] in ("run", "end"):
            continue
        text = json.dumps(r, sort_keys=True).replace(str(path.parent), "OUT")
        text = re.sub(r"[FEW]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+", "LOG", text)
        # (jax's errors name the Python lines that called it: this test's differ)
        out.append(re.sub(r"\.py(\\?\")?:\d+:\d+( to \d*:?\d+)?", ".py:L", text))
    return out


def _run(tmp: Path, name: str, backends, pack: int, ops, types=None, isolate=None) -> Path:
    out = tmp / name
    config = RunConfig(backends=[b.name for b in backends], ops=ops, element_types=types,
                       depth="quick", out=out, progress=False, replay=False, probes=False,
                       pack=pack, isolate=isolate)
    run(config, backends, out / "results.jsonl")
    return out / "results.jsonl"


# -- the program of a pack ---------------------------------------------------------------

def _sigs(op: str, n: int):
    from conformance.checking.plan import plan_binding, select_bindings
    from conformance.specs import load_spec
    spec = load_spec(op)
    return [s for b in select_bindings(spec, None) for s in plan_binding(spec, b, 0, "quick")][:n]


def test_a_pack_is_one_module_of_disjoint_parts():
    sigs = _sigs("add", 3) + _sigs("sort", 2)
    program = packing.pack_program(sigs)
    assert program.problems() == []
    assert [o.op for o in program.operations] == [s.op for s in sigs]
    for j, o in enumerate(program.operations):     # each part reads only its own arguments
        assert all(v.startswith(f"s{j}_") for v in o.operands)
    text = program_text(program)
    assert text.count("func.func") == 1 and text.count('"stablehlo.add"') == 3
    flat = list(range(sum(len(s.result_leaves) for s in sigs)))
    parts = packing.split_results(sigs, flat)
    assert [len(p) for p in parts] == [len(s.result_leaves) for s in sigs]
    assert sum(parts, []) == flat


def test_what_is_never_packed():
    from conformance.specs import load_spec
    add = _sigs("add", 1)[0]
    assert packing.packable(add, load_spec("add"))
    assert not packing.packable(_sigs("rng", 1)[0], load_spec("rng"))    # pack_alone
    assert not packing.packable(dataclasses.replace(add, invalid="C1"))


# -- the same records ------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["xla", "jax"])
def test_packed_and_unpacked_runs_give_the_same_records(tmp_path, backend, monkeypatch):
    """Ops with one and several results, regions, attributes, a crash of XLA (remainder
    of complex kills the process compiling it: the pack crashes, its members run alone)
    and rng (packed alone; on xla only: in jax's process, XLA's rng state is shared by
    every executable the process ran before, so two runs in one process draw other
    values, packed or not); records compared one by one."""
    ops = ["add", "compare", "reduce", "remainder"] + (["rng"] if backend == "xla" else [])
    types = ["f32", "si8", "complex<f32>", "i1"]
    b = get_backend(backend)
    plain = _records(_run(tmp_path, "plain", [b], 0, ops, types))
    packs = []
    original = packing.UnitPacker._run

    def counting(self, backend_, chunk):
        packs.append(len(chunk))
        return original(self, backend_, chunk)
    monkeypatch.setattr(packing.UnitPacker, "_run", counting)
    packed = _records(_run(tmp_path, "packed", [b], 16, ops, types))
    assert packs and max(packs) > 2, packs          # it did pack
    if backend == "xla" and _records(_run(tmp_path, "again", [b], 0, ["rng"], types)) != [
            r for r in plain if '"op": "rng"' in r]:
        # rng may use hidden state (003 "### rng"): where XLA's values differ between two
        # unpacked runs (jaxlib 0.12 does), packing cannot be asked to reproduce them
        plain, packed = ([r for r in x if '"op": "rng"' not in r] for x in (plain, packed))
    assert len(plain) == len(packed)
    for x, y in zip(plain, packed):
        assert x == y


# -- failures ----------------------------------------------------------------------------

class _Packing(OracleBackend):
    """The oracle with a pack path that runs each member's own batch executable, and a
    compile error on one planted signature (the second f32 add); counts its packs."""

    name = "packing"
    isolate = False
    bad_index = 1
    crash = False

    def __init__(self) -> None:
        super().__init__()
        self.packs: list[int] = []          # sizes of the packs compiled
        self.failed: list[int] = []         # sizes of those that failed
        self.runs = 0

    def is_bad(self, sig) -> bool:
        return self.bad_index is not None and sig.op == "add" \
            and sig == _sigs_f32_add()[self.bad_index]

    def compile(self, sig):
        if self.is_bad(sig):
            raise RuntimeError("planted compile error")
        return super().compile(sig)

    def compile_pack(self, signatures):
        self.packs.append(len(signatures))
        if any(self.is_bad(s) for s in signatures):
            self.failed.append(len(signatures))
            if self.crash:
                raise BackendCrash("planted: the process died compiling the pack")
            raise RuntimeError("planted compile error in a pack")
        exes = [self.compile_batch(s) for s in signatures]

        def execute(batches):
            self.runs += 1
            return [None if b is None else e(b) for e, b in zip(exes, batches)]
        return execute


def _sigs_f32_add():
    from conformance.checking.plan import plan_binding
    from conformance.specs import load_spec
    from conformance.checking.plan import select_bindings
    from conformance.specs import binding_key
    spec = load_spec("add")
    binding = next(b for b in select_bindings(spec, None) if binding_key(b) == "f32")
    return plan_binding(spec, binding, 0, "quick")


def test_a_failing_pack_is_bisected_to_its_signature(tmp_path):
    plain = _records(_run(tmp_path, "plain", [_Packing()], 0, ["add"]))
    b = _Packing()
    packed = _records(_run(tmp_path, "packed", [b], 16, ["add"]))
    assert plain == packed
    bad = [json.loads(r) for r in packed if '"backend_error"' in r]
    assert len(bad) == 1 and bad[0]["type_key"] == "f32" and bad[0]["index"] == 1
    # the pack, then the half holding the planted signature, ... down to a pair; then it
    # compiles alone (its error recorded as unpacked) and every other member is packed
    assert len(b.failed) >= 3 and b.failed[-1] == 2
    assert all(a == 2 * c or a == 2 * c + 1 for a, c in zip(b.failed, b.failed[1:]))
    assert len(b.packs) - len(b.failed) > len(b.failed)


def test_a_crashing_pack_sends_its_members_alone(tmp_path):
    plain = _records(_run(tmp_path, "plain", [_Packing()], 0, ["add"]))
    b = _Packing()
    b.crash = True
    packed = _records(_run(tmp_path, "packed", [b], 16, ["add"]))
    assert plain == packed
    assert len(b.failed) == 1 and b.failed[0] > 2     # no bisection after a crash
    assert len(b.packs) > 1                           # the other packs went as they were


def test_a_rerun_of_a_batch_runs_the_backend_again():
    """The determinism verdicts re-run a batch: the pack's results are given once, for
    the arrays the runner drew; any other call is a real run."""
    b = _Packing()
    b.bad_index = None
    sigs = _sigs("add", 3)
    draw = {s: [np.ones((2,) + t.shape, t.element_type.dtype) for t in s.input_leaves]
            for s in sigs}
    packer = packing.UnitPacker([b], [("k", i, s) for i, s in enumerate(sigs)], 16, 1,
                                lambda key, i, batch, sig: draw[sig])
    packer.before("add", "k", 0)
    assert b.packs == [3] and b.runs == 1
    exe = b.batch_executable(sigs[0])
    assert isinstance(exe, packing.PackedMember)
    stacked = packer.take_inputs("add", "k", 0, 0)
    exe(stacked)
    assert b.runs == 1                      # the pack's result, given once
    again = exe(stacked)
    assert b.runs == 2                      # a real run (with the other members left out)
    assert np.array_equal(again[0], exe([x.copy() for x in stacked])[0]) and b.runs == 3
    b.clear_cache()
    assert not isinstance(b.batch_executable(sigs[0]), packing.PackedMember)


def test_a_backend_whose_packs_keep_failing_stops_packing_in_the_unit():
    """After MAX_FAILED_PACKS failed packs in a unit, its other signatures go alone (an
    op that a backend refuses in most of its signatures pays no bisection per pack)."""
    class Refuses(_Packing):
        def is_bad(self, sig) -> bool:
            return True
    b = Refuses()
    sigs = _sigs("add", 40)
    draw = {s: [np.ones((2,) + t.shape, t.element_type.dtype) for t in s.input_leaves]
            for s in sigs}
    packer = packing.UnitPacker([b], [("k", i, s) for i, s in enumerate(sigs)], 4, 1,
                                lambda key, i, batch, sig: draw[sig])
    for i in range(len(sigs)):
        packer.before("add", "k", i)
    assert len(packer.packs) == 10
    # each of the first MAX_FAILED_PACKS packs: 4, then its halves 2 and 2
    assert b.failed == [4, 2, 2] * packing.MAX_FAILED_PACKS
    assert not b._batch_cache          # nothing adopted: every signature compiles alone
