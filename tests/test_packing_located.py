"""A text pack whose compile error names its members (issue 33, backends/text_pack.py
``located_members``): the members named go alone, the others are packed again in one
compile, not bisected; such packs do not stop packing for the unit; the records stay
those of an unpacked run. A location that names no member is halved as before, and a
location that names the wrong member costs a compile, not a verdict."""
from __future__ import annotations

import re

import numpy as np

from conformance.backends.text_pack import (fault_marker, located_members,
                                            member_spans)
from conformance.checking import packing
from conformance.core.packs import PackSignature
from conformance.backends import vendor
from test_packing import _records, _run, _sigs
from test_text_packs import TextXla


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


class RefusesSi8Subtract(TextXla):
    """A vendor compiler that cannot lower an si8 subtract and says where, as MLIR tools
    do (``<stdin>:LINE:COL: error: ...``, the first such line of its text)."""

    name = "refuses-si8-subtract"
    where = "op"            # the location it reports: the op's line, or the function's

    def compile_text(self, text, sig):
        for n, line in enumerate(text.splitlines(), 1):
            if '"stablehlo.subtract"' in line and "i8>" in line:
                at = n if self.where == "op" else _line_of(text, "func.func")
                raise RuntimeError(f"acme-compile: <stdin>:{at}:5: error: failed to "
                                   "legalize operation 'arith.subi' on i8")
        return super().compile_text(text, sig)


class BlamesTheFirstMember(TextXla):
    """Fails packs holding an si8 subtract, but its location names the pack's first
    member (a compiler whose locations are off): harmless, only slower."""

    name = "blames-first"

    def compile_text(self, text, sig):
        if any('"stablehlo.subtract"' in ln and "i8>" in ln for ln in text.splitlines()):
            raise RuntimeError(f"acme-compile: <stdin>:{_line_of(text, '%v0 ')}:5: error: "
                               "failed to legalize operation 'arith.subi' on i8")
        return super().compile_text(text, sig)


def _mixed():
    """Three sets of 4: f32 adds around si8 subtracts (each pack of 4 holds one)."""
    from conformance.checking.plan import plan_binding, select_bindings
    from conformance.specs import binding_key, load_spec
    add, sub = load_spec("add"), load_spec("subtract")
    f32 = [s for b in select_bindings(add, None) if binding_key(b) == "f32"
           for s in plan_binding(add, b, 0, "quick")]
    si8 = [s for b in select_bindings(sub, None) if binding_key(b) == "si8"
           for s in plan_binding(sub, b, 0, "quick")]
    out = []
    for k in range(3):
        out += [f32[k % len(f32)], si8[k % len(si8)], f32[(k + 1) % len(f32)],
                f32[(k + 2) % len(f32)]]
    return out


def _packer(b, sigs, size):
    draw = {s: [np.ones((2,) + t.shape, t.element_type.dtype) for t in s.input_leaves]
            for s in sigs}
    return packing.UnitPacker([b], [("k", i, s) for i, s in enumerate(sigs)], size, 1,
                              lambda key, i, batch, sig: draw[sig])


def test_member_spans_are_each_member_s_op_lines():
    sigs = _sigs("add", 3)
    text = vendor.module_text(PackSignature.of(sigs))
    spans = member_spans(text, 3)
    lines = text.splitlines()
    for j, (a, b) in enumerate(spans):
        assert b > a and lines[a - 1].lstrip().startswith(f"%v{j} ")
    assert located_members(sigs, f"x:{spans[1][0]}:3: error: no", text) == [1]
    assert located_members(sigs, "x:2:3: error: no", text) == []     # the signature
    assert located_members(sigs, f"whatever [{fault_marker([2, 0])}]", text) == [0, 2]


def test_a_located_member_goes_alone_and_the_others_pack_in_one_compile():
    sigs = _mixed()
    b = RefusesSi8Subtract()
    packer = _packer(b, sigs, 4)
    for i in range(len(sigs)):
        packer.before(sigs[i].op, "k", i)
    # each pack of 4 failed once, naming its subtract; its 3 adds packed at once
    assert packer.stats["bisections"] == 0, packer.stats
    assert packer.stats["located"] == 3 and packer.stats["packs"] == 3
    assert packer.stats["packed"] == 9 and packer.stats["alone"] == 3
    assert b.packs == [4, 3, 4, 3, 4, 3]
    # three failed packs, none of them halved: the unit kept packing
    assert not packer.failed


def test_a_location_outside_every_member_is_halved_as_before():
    sigs = _mixed()[:4]
    b = RefusesSi8Subtract()
    b.where = "func"
    packer = _packer(b, sigs, 4)
    packer.before(sigs[0].op, "k", 0)
    assert packer.stats["located"] == 0 and packer.stats["bisections"] >= 1


def test_located_packs_give_the_unpacked_records(tmp_path):
    ops, types = ["add", "subtract"], ["f32", "si8"]
    plain = _records(_run(tmp_path, "plain", [RefusesSi8Subtract()], 0, ops, types))
    b = RefusesSi8Subtract()
    packed = _records(_run(tmp_path, "packed", [b], 16, ops, types))
    assert plain == packed
    bad = [r for r in packed if '"backend_error"' in r]
    assert bad and all('"subtract"' in r and "arith.subi" in r for r in bad)


def test_a_wrong_location_costs_a_compile_not_a_verdict(tmp_path):
    ops, types = ["add", "subtract"], ["f32", "si8"]
    plain = _records(_run(tmp_path, "plain", [BlamesTheFirstMember()], 0, ops, types))
    packed = _records(_run(tmp_path, "packed", [BlamesTheFirstMember()], 16, ops, types))
    assert plain == packed
    assert not any(re.search(r'"outcome": "backend_error".*"add"', r) for r in packed)


class KnowsItRefusesSi8(TextXla):
    """A vendor adapter that knows before compiling that its compiler refuses every si8
    subtract (as IREE knows its HAL lacks f8E3M4): it names those members with
    ``fault_marker`` and compiles nothing; alone, each fails as its compiler does."""

    name = "knows-si8"

    def compile(self, sig):
        vendor.module_text(sig)             # it takes the text it is handed, as IREE does
        members = getattr(sig, "members", None)
        if members:
            at = [j for j, m in enumerate(members)
                  if m.op == "subtract" and m.input_leaves[0].element_type.name == "si8"]
            if at:
                raise RuntimeError(f"not compiled [{fault_marker(at)}]")
        elif sig.op == "subtract" and sig.input_leaves[0].element_type.name == "si8":
            raise RuntimeError("acme-compile: <stdin>:3:5: error: failed to legalize "
                               "operation 'arith.subi' on i8")
        return super().compile(sig)


def test_a_backend_naming_every_member_sends_them_all_alone_unhalved():
    """A pack all of whose members the backend names goes alone member by member: no
    bisection (each probe would be named again) and no failed pack counted, so the
    unit's later packs are still packed."""
    from conformance.checking.plan import plan_binding, select_bindings
    from conformance.specs import binding_key, load_spec
    sub = load_spec("subtract")
    si8 = [s for b in select_bindings(sub, None) if binding_key(b) == "si8"
           for s in plan_binding(sub, b, 0, "quick")]
    sigs = (si8 * 8)[:8]
    b = KnowsItRefusesSi8()
    packer = _packer(b, sigs, 4)
    for i in range(len(sigs)):
        packer.before(sigs[i].op, "k", i)
    assert packer.stats["bisections"] == 0, packer.stats
    assert packer.stats["located"] == 2 and packer.stats["alone"] == 8, packer.stats
    assert not packer.failed and b.texts == []


def test_known_refusals_give_the_unpacked_records(tmp_path):
    ops, types = ["add", "subtract"], ["f32", "si8"]
    plain = _records(_run(tmp_path, "plain", [KnowsItRefusesSi8()], 0, ops, types))
    packed = _records(_run(tmp_path, "packed", [KnowsItRefusesSi8()], 16, ops, types))
    assert plain == packed
    bad = [r for r in packed if '"backend_error"' in r]
    assert bad and all('"subtract"' in r and "arith.subi" in r for r in bad)


class SubtractsF32Adds(TextXla):
    """A miscompile: its compiler lowers an f32 add to a subtract, alone or packed, so
    every f32 add diverges and the minimiser re-runs the diverging cases."""

    name = "subtracts-f32-adds"

    def compile_text(self, text, sig):
        lines = [ln.replace('"stablehlo.add"', '"stablehlo.subtract"') if "xf32>" in ln
                 or "<f32>" in ln else ln for ln in text.splitlines()]
        return super().compile_text("\n".join(lines), sig)


def test_a_diverging_packed_member_is_re_run_through_its_pack(tmp_path):
    """The minimiser's one-case runs of a packed signature go through its pack (a batch
    of one), not a compile of the member alone, and the records are an unpacked run's."""
    from conformance.checking.plan import plan_binding, select_bindings
    from conformance.specs import binding_key, load_spec
    ops, types = ["add"], ["f32"]
    plain = _records(_run(tmp_path, "plain", [SubtractsF32Adds()], 0, ops, types))
    b = SubtractsF32Adds()
    packed = _records(_run(tmp_path, "packed", [b], 16, ops, types))
    assert plain == packed
    assert any('"kind": "divergence"' in r and '"value"' in r for r in packed)
    spec = load_spec("add")
    sigs = [s for bd in select_bindings(spec, None) if binding_key(bd) == "f32"
            for s in plan_binding(spec, bd, 0, "quick") if not s.invalid]
    members = {vendor.module_text(s) for s in sigs}
    assert b.packs and not [t for t in b.texts if t in members]
