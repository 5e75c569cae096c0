"""Which type bindings naming the newer float formats each depth draws
(conformance/checking/newer_floats.py, docs/float-formats.md "Which runs draw them").

Default depth draws every binding; quick depth a rotation over each family's ops, so
that every family's quick plans meet all nine formats while the quick run (CI's critical
path) grows by about a tenth; the seed's types' bindings, plans and invalid programs are
what they were before the formats were drawn.
"""
from __future__ import annotations

import collections
from conformance.checking import newer_floats, plan
from conformance.checking.plan import DEPTHS, select_bindings, signatures_per_binding
from conformance.core.types import ALL_ELEMENT_TYPES, NEWER_FLOAT_TYPES, SEED_ELEMENT_TYPES
from conformance.specs import all_specs, binding_key, load_spec

NINE = set(NEWER_FLOAT_TYPES)


def _met(specs, depth):
    out = collections.defaultdict(set)
    for s in specs:
        for b in select_bindings(s, None, depth):
            out[s.name] |= newer_floats.newer_in(b)
    return out


def test_every_newer_format_is_a_drawn_element_type_and_no_invalid_mutation_yet():
    names = [t.name for t in ALL_ELEMENT_TYPES]
    assert NINE <= set(names)
    assert not NINE & {t.name for t in SEED_ELEMENT_TYPES}
    assert len(SEED_ELEMENT_TYPES) + 9 == len(ALL_ELEMENT_TYPES)


def test_default_plans_of_every_float_or_any_op_draw_every_newer_format():
    """Every op with a type variable that takes every float type (its table says float
    or any) draws each of the nine formats at default depth (and deep): every binding."""
    floats = {t.name for t in ALL_ELEMENT_TYPES if t.is_float}
    checked = 0
    for s in all_specs():
        if not any(floats <= {t.name for t in ts} for ts, _ in s.type_variables.values()):
            continue
        checked += 1
        for depth in ("default", "deep"):
            got = select_bindings(s, None, depth)
            assert got == s.type_bindings(), (s.name, depth)
            assert set().union(*map(newer_floats.newer_in, got)) == NINE, (s.name, depth)
    assert checked > 80


def test_every_family_s_quick_plans_meet_every_newer_format():
    met = _met(all_specs(), "quick")
    by_family = collections.defaultdict(set)
    for s in all_specs():
        by_family[s.family] |= met[s.name]
    named = {s.family for s in all_specs()
             if any(newer_floats.newer_in(b) for b in s.type_bindings())}
    assert len(named) > 20
    assert {f: sorted(NINE - by_family[f]) for f in named if by_family[f] != NINE} == {}
    # the conversions (convert, bitcast_convert, reduce_precision) meet them all, three each
    assert by_family["conversion"] == NINE and len(met["convert"]) == 3
    assert set().union(*(met[s.name] for s in all_specs() if s.elementwise)) == NINE


def test_each_quick_op_draws_only_its_turn_at_most_cap_bindings_per_format():
    cap = DEPTHS["quick"].newer_float_cap
    assert cap and DEPTHS["default"].newer_float_cap is None
    for s in all_specs():
        turn = set(newer_floats.turn(s.name, s.family))
        newer = [b for b in select_bindings(s, None, "quick") if newer_floats.newer_in(b)]
        assert all(newer_floats.newer_in(b) <= turn for b in newer), s.name
        # at most cap picked per format (a binding picked for one may name another too)
        assert len(newer) <= cap * len(turn), (s.name, len(newer))
        named = set().union(*map(newer_floats.newer_in, s.type_bindings()))
        assert set().union(*map(newer_floats.newer_in, newer)) == turn & named, s.name
    # an op with one type variable: one binding per format of its turn
    add = [binding_key(b) for b in select_bindings(load_spec("add"), None, "quick")]
    assert sorted(set(add) & NINE) == sorted(newer_floats.turn("add", "arithmetic"))
    # convert: each of its formats converted from, to and into itself, not every pair
    conv = [b for b in select_bindings(load_spec("convert"), None, "quick")
            if newer_floats.newer_in(b)]
    assert len(conv) == cap * len(newer_floats.turn("convert", "conversion"))
    assert any(b["E"] in NINE and b["R"] not in NINE for b in conv)
    assert any(b["R"] in NINE and b["E"] not in NINE for b in conv)


def test_quick_run_grows_by_about_a_tenth_and_keeps_every_seed_binding():
    quick, default = DEPTHS["quick"], DEPTHS["default"]
    seed = newer = full = 0
    for s in all_specs():
        every = s.type_bindings()
        drawn = select_bindings(s, None, "quick")
        assert newer_floats.seed_bindings(drawn) == newer_floats.seed_bindings(every), s.name
        k = signatures_per_binding(s, quick)
        seed += k * len(newer_floats.seed_bindings(every))
        newer += k * (len(drawn) - len(newer_floats.seed_bindings(every)))
        full += k * (len(every) - len(newer_floats.seed_bindings(every)))
    assert 0.05 * seed < newer < 0.13 * seed, (seed, newer)
    assert full > 0.5 * seed        # what drawing every binding at quick would have cost
    # the budget per binding is the seed's bindings': convert as before the formats
    assert signatures_per_binding(load_spec("convert"), default) == 1
    assert signatures_per_binding(load_spec("add"), default) == 4


def test_types_selects_among_the_bindings_the_depth_draws():
    spec = load_spec("add")
    (mine,) = newer_floats.turn("add", "arithmetic")[:1]
    other = next(f for f in NEWER_FLOAT_TYPES if f not in newer_floats.turn("add", "arithmetic"))
    assert [binding_key(b) for b in select_bindings(spec, [mine], "quick")] == [mine]
    assert select_bindings(spec, [other], "quick") == []
    assert [binding_key(b) for b in select_bindings(spec, [other], "default")] == [other]
    # any binding is rebuilt by its key at any depth (repro of a default-only case)
    assert binding_key(plan.binding_for(spec, other)) == other


def test_a_spec_that_is_no_shipped_op_of_its_family_draws_all_nine_capped():
    spec = load_spec("add")
    assert newer_floats.turn("my_add", spec.family) == tuple(NEWER_FLOAT_TYPES)
    got = newer_floats.drawn("my_add", spec.family, spec.type_bindings(), 1)
    assert {binding_key(b) for b in got} >= NINE


def test_invalid_programs_are_changes_of_the_seed_types_only():
    """The newer formats join no invalid program yet: a plan whose valid pool holds a
    newer-format signature changes it into one of the seed's types' signatures."""
    spec = load_spec("add")
    valid = plan.plan_binding(spec, {next(iter(spec.type_variables)): "f8E4M3FNUZ"}, 0, "quick")
    for rule in ("C1",):
        for sig in plan.plan_invalid(spec, rule, 3, 0, valid):
            names = {t.element_type.name for t in sig.input_leaves + sig.result_leaves}
            assert not names & NINE, sig.key()
