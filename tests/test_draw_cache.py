"""The draw cache (generators/draw_cache.py): a plan another process drew is read back
equal, and never where it could differ (another code digest, a registered vendor
target, a spec object of the test's own, a torn file)."""
import copy

import pytest

from conformance.checking import plan
from conformance.generators import draw_cache, invalid
from conformance.specs import custom_calls, load_spec, parse_spec


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder and a fresh in-process memo; records every draw_plan call."""
    monkeypatch.setenv(draw_cache.ENV, str(tmp_path))
    monkeypatch.setattr(plan, "_PLANS", type(plan._PLANS)())
    drawn = []
    real = plan.draw_plan
    monkeypatch.setattr(plan, "draw_plan", lambda *a: drawn.append(a[0].name) or real(*a))
    return tmp_path, drawn


def _new_process(monkeypatch):
    """What a new process has: no plan in memory."""
    monkeypatch.setattr(plan, "_PLANS", type(plan._PLANS)())


def test_a_plan_drawn_by_one_process_is_read_back_equal_by_the_next(cache, monkeypatch):
    root, drawn = cache
    spec = load_spec("add")
    first = plan.plan_binding(spec, {"E": "f32"}, 3, "quick")
    files = list(root.rglob("plan-*.pkl"))
    assert drawn == ["add"] and len(files) == 1
    assert files[0].parent.name == "add" and files[0].parent.parent.name == draw_cache.code_digest()
    _new_process(monkeypatch)
    assert plan.plan_binding(spec, {"E": "f32"}, 3, "quick") == first
    assert drawn == ["add"]                  # read, not drawn
    plan.plan_binding(spec, {"E": "f32"}, 4, "quick")      # another seed: its own entry
    assert drawn == ["add", "add"] and len(list(root.rglob("plan-*.pkl"))) == 2


def test_without_the_variable_nothing_is_kept(cache, monkeypatch):
    root, drawn = cache
    monkeypatch.delenv(draw_cache.ENV)
    plan.plan_binding(load_spec("add"), {"E": "f32"}, 3, "quick")
    _new_process(monkeypatch)
    plan.plan_binding(load_spec("add"), {"E": "f32"}, 3, "quick")
    assert drawn == ["add", "add"] and not list(root.rglob("*.pkl"))


def test_other_code_draws_anew(cache, monkeypatch):
    """The folder is named by the digest of the code that draws: changed code (another
    digest) never reads what the old code drew."""
    root, drawn = cache
    spec = load_spec("add")
    digest = draw_cache.code_digest()
    plan.plan_binding(spec, {"E": "si8"}, 3, "quick")
    _new_process(monkeypatch)
    monkeypatch.setattr(draw_cache, "code_digest", lambda: "other-code")
    plan.plan_binding(spec, {"E": "si8"}, 3, "quick")
    assert drawn == ["add", "add"]
    assert sorted(p.name for p in root.iterdir()) == sorted([digest, "other-code"])


def test_the_digest_covers_the_planner_s_code(monkeypatch):
    """A one-byte change in a file that decides a draw changes the digest."""
    from pathlib import Path
    before = draw_cache.code_digest()
    target = Path(plan.__file__)
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes",
                        lambda p: real(p) + (b" " if p == target else b""))
    draw_cache.code_digest.cache_clear()
    try:
        assert draw_cache.code_digest() != before
    finally:
        monkeypatch.undo()
        draw_cache.code_digest.cache_clear()
    assert draw_cache.code_digest() == before


def test_a_registered_vendor_target_turns_the_cache_off(cache, monkeypatch):
    """custom_call's draws follow the registered targets, which another process may not
    have: with a vendor's target registered nothing is read or written."""
    root, drawn = cache
    spec = load_spec("add")
    plan.plan_binding(spec, {"E": "f32"}, 3, "quick")
    custom_calls.register_target(custom_calls.CustomCallTarget(
        "test.draw_cache", lambda inputs, attributes: list(inputs),
        lambda et, shape: ([f"tensor<{et}>"], [f"tensor<{et}>"])))
    try:
        assert not custom_calls.stock() and draw_cache.folder() is None
        _new_process(monkeypatch)
        plan.plan_binding(spec, {"E": "f32"}, 3, "quick")
        assert drawn == ["add", "add"]
    finally:
        custom_calls.unregister_target("test.draw_cache")
    assert custom_calls.stock()


def test_a_spec_object_of_the_test_s_own_is_drawn_for(cache, monkeypatch):
    root, drawn = cache
    spec = load_spec("add")
    plan.plan_binding(spec, {"E": "f32"}, 3, "quick")
    own = parse_spec(copy.deepcopy(spec.data), spec.path)
    plan.plan_binding(own, {"E": "f32"}, 3, "quick")
    assert drawn == ["add", "add"] and len(list(root.rglob("*.pkl"))) == 1


def test_a_torn_or_foreign_file_is_drawn_again_and_replaced(cache, monkeypatch):
    root, drawn = cache
    spec = load_spec("add")
    first = plan.plan_binding(spec, {"E": "f32"}, 3, "quick")
    (path,) = root.rglob("plan-*.pkl")
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    _new_process(monkeypatch)
    assert plan.plan_binding(spec, {"E": "f32"}, 3, "quick") == first
    assert drawn == ["add", "add"] and path.read_bytes() == whole
    # a file whose key is another's (a hash collision, a copied file) is not believed
    import pickle
    path.write_bytes(pickle.dumps((("plan", "add", ("f32", 9, "quick")), ["not this plan"])))
    _new_process(monkeypatch)
    assert plan.plan_binding(spec, {"E": "f32"}, 3, "quick") == first
    assert len(drawn) == 3


def test_the_unbreakable_rules_are_searched_once(cache, monkeypatch):
    searched = []
    real = invalid._search_unbreakable
    monkeypatch.setattr(invalid, "_search_unbreakable",
                        lambda op: searched.append(op) or real(op))
    invalid._unbreakable.cache_clear()
    try:
        first = invalid.unbreakable("pad")
        invalid._unbreakable.cache_clear()              # a new process
        assert invalid.unbreakable("pad") == first
        assert searched == ["pad"]
    finally:
        invalid._unbreakable.cache_clear()
