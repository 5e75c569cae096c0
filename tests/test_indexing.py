"""Indexing ops (gather, scatter): the oracle against independent formulations written
from the spec's "More formally" (explicit loops over result / update indices, on raw
bytes), out-of-bounds start indices generated on purpose and masked as the spec's
implementation-defined rule says (with XLA's conventional behaviour as the oracle's
value), the dimension numbers valid by construction, the jax mapping against the
oracle, and invalid cases rejected."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conformance.checking import golden

from conformance import oracles
from conformance.oracles import regions as oracle_regions
from conformance.specs import regions
from conformance.backends import get_backend
from conformance.backends.base import Unsupported
from conformance.backends.numpy_backend import InvalidProgram
from conformance.core.case import Case
from conformance.checking.compare import compare_batch
from conformance.mlir.emitter import verifier_rejects
from conformance.generators import (breakable, candidates, canonical, case_inputs, cases,
                                    signatures)
from conformance.specs import expressions as ex
from conformance.apps.runner import plan_signatures
from conformance.specs import load_spec
from conformance.specs.validity import violations
from conformance.core.types import element_type

SETTINGS = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


def _bytes(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, order="C")
    return x.reshape(-1).view(np.uint8).reshape(x.shape + (x.dtype.itemsize,))


def _int(x) -> int:
    """The exact integer an index element holds, per its own type."""
    et = element_type(np.asarray(x).dtype)
    return int(np.asarray(x).astype(np.uint64 if et.is_unsigned else np.int64))


# ---------------------------------------------------------------------------
# gather: an independent formulation, one result index at a time
# ---------------------------------------------------------------------------

def ref_gather(operand, indices, a, shape):
    """(result bytes, out-of-bounds mask) from the spec's formula, literally: the
    start index vector, full_start_index, full_offset_index; XLA's clamp where the
    slice leaves the operand (then the element is implementation-defined)."""
    x = _bytes(operand)
    out = np.zeros(tuple(shape) + x.shape[-1:], np.uint8)
    oob = np.zeros(tuple(shape), bool)
    offset_dims, collapsed = a["offset_dims"], a["collapsed_slice_dims"]
    smap, ivd, sizes = a["start_index_map"], a["index_vector_dim"], a["slice_sizes"]
    obd, sibd = a["operand_batching_dims"], a["start_indices_batching_dims"]
    rank = operand.ndim
    batch_dims = [d for d in range(len(shape)) if d not in offset_dims]
    for ri in np.ndindex(*shape):
        bi = [ri[d] for d in batch_dims]
        if ivd < indices.ndim:
            start = [_int(indices[tuple(bi[:ivd] + [k] + bi[ivd:])])
                     for k in range(indices.shape[ivd])]
        else:
            start = [_int(indices[tuple(bi)])]
        full_start = [0] * rank
        for ds, do in enumerate(smap):
            full_start[do] = start[ds]
        full_batching = [0] * rank
        for do, ds in zip(obd, sibd):
            full_batching[do] = bi[ds - (0 if ds < ivd else 1)]
        offset = [ri[d] for d in offset_dims]
        full_offset, it = [], iter(offset)
        for d in range(rank):
            full_offset.append(0 if d in collapsed or d in obd else next(it))
        # the slice, at least one element along every dimension, within the operand?
        inside = all(0 <= full_start[d] and full_start[d] + max(sizes[d], 1) <= operand.shape[d]
                     for d in range(rank))
        oob[ri] = not inside
        clamped = [min(max(s, 0), max(operand.shape[d] - sizes[d], 0))
                   for d, s in enumerate(full_start)]
        index = [c + b + o for c, b, o in zip(clamped, full_batching, full_offset)]
        if inside:
            assert clamped == full_start
        if all(0 <= i < n for i, n in zip(index, operand.shape)):
            out[ri] = x[tuple(index)]
    return out, oob


def _impl_masks(case):
    sig = case.signature
    stacked = [x[None] for x in case.inputs]
    return oracles.implementation_defined(sig, stacked)


def test_gather_oracle_matches_the_spec_formula_and_masks_out_of_bounds_slices():
    kinds = set()

    @SETTINGS
    @given(cases("gather", profile="quick"))
    def check(case):
        operand, indices = case.inputs
        (got,) = oracles.evaluate_case(case)
        want, oob = ref_gather(operand, indices, case.attributes,
                               case.signature.result_types[0].shape)
        assert np.array_equal(_bytes(got), want), case.signature.key()
        masks = _impl_masks(case)
        mask = masks.get("out_of_bounds", np.zeros((1,) + oob.shape, bool))[0]
        assert np.array_equal(mask, oob), case.signature.key()
        if got.size:
            kinds.add("in bounds" if not oob.all() else "out of bounds")
            kinds.add("out of bounds" if oob.any() else "in bounds")

    check()
    assert kinds == {"in bounds", "out of bounds"}


def test_gather_signatures_cover_the_dimension_number_space():
    """Operand ranks 0..4 (and the padded rank 6), zero-sized dimensions, every
    index_vector_dim position including the implicit one, collapsed and offset
    dimensions, index types, one and two batching dimensions (paired out of order, and
    after the index vector dimension)."""
    seen = {"ranks": set(), "zero": False, "implicit": False, "ivd_first": False,
            "collapsed": False, "no_offsets": False, "itypes": set(), "sorted_flag": False,
            "batching": set(), "batching_crossed": False, "batching_after_ivd": False}

    @settings(SETTINGS, max_examples=150)
    @given(signatures("gather", profile="quick"))
    def check(sig):
        assert violations(sig) == [], sig.key()
        op, idx = sig.input_types
        a = sig.attributes
        seen["ranks"].add(op.rank)
        seen["zero"] |= 0 in op.shape
        seen["implicit"] |= a["index_vector_dim"] == idx.rank
        seen["ivd_first"] |= a["index_vector_dim"] == 0 and idx.rank > 1
        seen["collapsed"] |= bool(a["collapsed_slice_dims"])
        seen["no_offsets"] |= not a["offset_dims"]
        seen["itypes"].add(idx.element_type.name)
        seen["sorted_flag"] |= a["indices_are_sorted"]
        sibd = a["start_indices_batching_dims"]
        seen["batching"].add(len(sibd))
        seen["batching_crossed"] |= sibd != sorted(sibd)
        seen["batching_after_ivd"] |= any(d > a["index_vector_dim"] for d in sibd)

    check()
    assert seen["ranks"] == {0, 1, 2, 3, 4, 6}
    assert seen["batching"] == {0, 1, 2}
    assert all(v for k, v in seen.items() if k not in ("ranks", "itypes", "batching"))
    assert len(seen["itypes"]) >= 6


def test_combine_is_the_specs_combine():
    assert ex.evaluate("combine([2, 3], [5], [1])", {}) == [2, 5, 3]
    assert ex.evaluate("combine([], [4, 5], [0, 1])", {}) == [4, 5]
    assert ex.evaluate("combine([7], [4, 5], [2, 0])", {}) == [5, 7, 4]
    assert ex.evaluate("combine([7], [4, 5], [0])", {}) is None       # too few dims
    assert ex.evaluate("combine([7], [4, 5], [0, 0])", {}) is None    # repeated
    assert ex.evaluate("combine([7], [4, 5], [0, 3])", {}) is None    # out of range


def test_boolean_chains_of_three_scalars():
    assert ex.evaluate("False or True or False", {}) is True
    assert ex.evaluate("True and False and True", {}) is False
    assert ex.evaluate("True and 1 and 2", {}) == 2


@pytest.mark.parametrize("itype,value,expected", [
    ("si8", -128, [0, 1]), ("si8", 127, [3, 4]), ("ui8", 255, [3, 4]), ("si4", -8, [0, 1]),
    ("ui64", 2 ** 64 - 1, [3, 4]), ("si64", -2 ** 63, [0, 1]), ("si32", 3, [3, 4]),
    ("si32", 4, [3, 4]), ("ui16", 2, [2, 3])])
def test_gather_clamps_extreme_start_indices_conventionally(itype, value, expected):
    et = element_type(itype)
    start = np.array([value], dtype=np.uint64 if et.is_unsigned else np.int64).astype(et.dtype)
    x = np.arange(5, dtype=np.int8)
    attrs = {"offset_dims": [0], "collapsed_slice_dims": [],
             "operand_batching_dims": [], "start_indices_batching_dims": [],
             "start_index_map": [0],
             "index_vector_dim": 0, "slice_sizes": [2], "indices_are_sorted": False}
    case = Case.make("gather", [x, start], ["tensor<2xsi8>"], attrs)
    assert violations(case.signature) == []
    assert oracles.evaluate_case(case)[0].tolist() == expected
    in_range = 0 <= _int(start[0]) <= 3
    assert ("out_of_bounds" in _impl_masks(case)) == (not in_range)


def test_gather_unsorted_indices_with_the_sorted_flag_are_masked():
    x = np.arange(6, dtype=np.int32)
    attrs = {"offset_dims": [], "collapsed_slice_dims": [0],
             "operand_batching_dims": [], "start_indices_batching_dims": [],
             "start_index_map": [0],
             "index_vector_dim": 1, "slice_sizes": [1], "indices_are_sorted": True}
    up = Case.make("gather", [x, np.array([1, 1, 4], np.int32)], ["tensor<3xsi32>"], attrs)
    assert violations(up.signature) == []
    down = Case.make("gather", [x, np.array([4, 1, 1], np.int32)], ["tensor<3xsi32>"], attrs)
    assert "unsorted_indices" not in _impl_masks(up)
    assert _impl_masks(down)["unsorted_indices"].all()
    flag_off = Case.make("gather", [x, np.array([4, 1, 1], np.int32)], ["tensor<3xsi32>"],
                         {**attrs, "indices_are_sorted": False})
    assert "unsorted_indices" not in _impl_masks(flag_off)


def test_gather_collapsed_dimension_of_slice_size_zero():
    """C8 allows a collapsed dimension of slice size 0; the result still has elements,
    read at offset 0 of that dimension."""
    x = np.arange(9, dtype=np.int32).reshape(3, 3)
    attrs = {"offset_dims": [0], "collapsed_slice_dims": [0],
             "operand_batching_dims": [], "start_indices_batching_dims": [],
             "start_index_map": [0, 1],
             "index_vector_dim": 0, "slice_sizes": [0, 3], "indices_are_sorted": False}
    case = Case.make("gather", [x, np.array([2, 0], np.int32)], ["tensor<3xsi32>"], attrs)
    assert violations(case.signature) == []
    assert oracles.evaluate_case(case)[0].tolist() == [6, 7, 8]
    assert _impl_masks(case) == {}
    past = Case.make("gather", [x, np.array([3, 0], np.int32)], ["tensor<3xsi32>"], attrs)
    assert _impl_masks(past)["out_of_bounds"].all()


# ---------------------------------------------------------------------------
# scatter: an independent formulation, one update index at a time
# ---------------------------------------------------------------------------

def ref_scatter(case):
    """(results, out-of-bounds mask, hit counts) from the spec's formula, literally, with
    the updates applied in row-major order and XLA's rule for windows not entirely in
    bounds (skipped; the elements their in-bounds part reaches are implementation-defined).
    A promoted update computation (2026-08 C23): inputs and updates converted to its types
    (numpy's astype: exact for the widenings drawn)."""
    sig = case.signature
    a = sig.attributes
    n = len(sig.result_types)
    xs, idx, ups = case.inputs[:n], case.inputs[n], case.inputs[n + 1:]
    body_types = regions.parse(sig.regions[0]).arg_types
    xs = [np.asarray(x).astype(t.dtype) for x, t in zip(xs, body_types[:n])]
    ups = [np.asarray(u).astype(t.dtype) for u, t in zip(ups, body_types[n:])]
    results = [np.array(x, copy=True) for x in xs]
    shape = xs[0].shape
    rank = len(shape)
    uwd, iwd = a["update_window_dims"], a["inserted_window_dims"]
    smap, ivd = a["scatter_dims_to_operand_dims"], a["index_vector_dim"]
    ibd, sibd = a["input_batching_dims"], a["scatter_indices_batching_dims"]
    region = sig.regions[0]
    oob = np.zeros(shape, bool)
    hits = np.zeros(shape, np.int64)
    scatter_dims = [d for d in range(ups[0].ndim) if d not in uwd]
    window_sizes = [ups[0].shape[d] for d in uwd]
    for ui in np.ndindex(*ups[0].shape):
        si = [ui[d] for d in scatter_dims]
        if ivd < idx.ndim:
            start = [_int(idx[tuple(si[:ivd] + [k] + si[ivd:])]) for k in range(idx.shape[ivd])]
        else:
            start = [_int(idx[tuple(si)])]
        full_start = [0] * rank
        for ds, do in enumerate(smap):
            full_start[do] = start[ds]
        for do, ds in zip(ibd, sibd):
            full_start[do] = si[ds - (0 if ds < ivd else 1)]      # full_batching_index
        window = [ui[d] for d in uwd]
        full_window, it = [], iter(window)
        extent, its = [], iter(window_sizes)
        for d in range(rank):
            full_window.append(0 if d in iwd or d in ibd else next(it))
            extent.append(1 if d in iwd or d in ibd else next(its))
        ri = tuple(s + w for s, w in zip(full_start, full_window))
        inside = all(0 <= ri[d] < shape[d] for d in range(rank))
        whole = all(0 <= full_start[d] and full_start[d] + extent[d] <= shape[d]
                    for d in range(rank))
        if inside:
            hits[ri] += 1
            if not whole:
                oob[ri] = True
        if whole:
            args = [np.array(r[ri]) for r in results] + [np.array(u[ui]) for u in ups]
            for r, v in zip(results, oracle_regions.evaluate(region, args)):
                r[ri] = v
    return results, oob, hits


def _order_independent(case) -> bool:
    n = len(case.signature.result_types)
    region = regions.parse(case.signature.regions[0])
    for k, (node, t) in enumerate(zip(region.results, region.result_types)):
        if not (isinstance(node, regions.Call)
                and node.op in ("add", "multiply", "maximum", "minimum")
                and [o.index for o in node.operands] in ([k, n + k], [n + k, k])
                and (t.is_integer or t.is_boolean
                     or (node.op in ("maximum", "minimum") and t.is_float))):
            return False
    return True


def test_scatter_oracle_matches_the_spec_formula_and_masks():
    kinds = set()

    @settings(SETTINGS, max_examples=100)
    @given(cases("scatter", profile="quick"))
    def check(case):
        got = oracles.evaluate_case(case)
        want, oob, hits = ref_scatter(case)
        for g, w in zip(got, want):
            assert np.array_equal(_bytes(g), _bytes(w)), case.signature.key()
        masks = {k: v[0] for k, v in _impl_masks(case).items()}
        empty = np.zeros(oob.shape, bool)
        assert np.array_equal(masks.get("out_of_bounds", empty), oob), case.signature.key()
        repeated = (hits > 1) & (not _order_independent(case))
        assert np.array_equal(masks.get("update_order", empty), repeated), case.signature.key()
        if oob.any():
            kinds.add("partly out of bounds")
        if (hits > 1).any():
            kinds.add("repeated")
        if len(case.signature.result_types) > 1:
            kinds.add("variadic")

    check()
    assert kinds == {"partly out of bounds", "repeated", "variadic"}


def test_scatter_signatures_cover_the_dimension_number_space():
    seen = {"ranks": set(), "n": set(), "bodies": set(), "implicit": False, "mixed": False,
            "zero": False, "unique": False, "sorted": False, "batching": set(),
            "batching_crossed": False, "batching_after_ivd": False}

    @settings(SETTINGS, max_examples=150)
    @given(signatures("scatter", profile="quick"))
    def check(sig):
        assert violations(sig) == [], sig.key()
        n = len(sig.result_types)
        a = sig.attributes
        seen["ranks"].add(sig.input_types[0].rank)
        seen["n"].add(n)
        for node in regions.parse(sig.regions[0]).results:
            seen["bodies"].add("replace" if isinstance(node, regions.Arg) else node.op)
        seen["implicit"] |= a["index_vector_dim"] == sig.input_types[n].rank
        seen["mixed"] |= len({t.element_type for t in sig.input_types[:n]}) > 1
        seen["zero"] |= any(0 in t.shape for t in sig.input_types)
        seen["unique"] |= a["unique_indices"]
        seen["sorted"] |= a["indices_are_sorted"]
        sibd = a["scatter_indices_batching_dims"]
        seen["batching"].add(len(sibd))
        seen["batching_crossed"] |= sibd != sorted(sibd)
        seen["batching_after_ivd"] |= any(d > a["index_vector_dim"] for d in sibd)

    check()
    assert seen["ranks"] == {0, 1, 2, 3, 4, 6} and seen["n"] == {1, 2, 3}
    assert seen["batching"] == {0, 1, 2}
    assert seen["bodies"] == {"replace", "add", "multiply", "maximum", "minimum", "subtract"}
    assert all(v for k, v in seen.items() if k not in ("ranks", "n", "bodies", "batching"))


def _scatter_case(operand, indices, updates, region, **attrs):
    a = {"update_window_dims": [1], "inserted_window_dims": [],
         "input_batching_dims": [], "scatter_indices_batching_dims": [],
         "scatter_dims_to_operand_dims": [0], "index_vector_dim": 1,
         "indices_are_sorted": False, "unique_indices": False, **attrs}
    case = Case.make("scatter", [operand, indices, updates], [f"tensor<{operand.size}xsi32>"],
                     a, regions=(region,))
    assert violations(case.signature) == []
    return case


def test_scatter_windows_partly_or_entirely_out_of_bounds():
    """A window entirely outside changes nothing (checked); the elements that the in-bounds
    part of a partly outside window reaches are implementation-defined (masked), and the
    oracle skips such a window (XLA's rule)."""
    x = np.arange(5, dtype=np.int32)
    up = np.array([[100, 200], [10, 20]], np.int32)
    add = "(si32, si32) -> add(arg0, arg1)"
    case = _scatter_case(x, np.array([[4], [0]], np.int32), up, add)
    assert oracles.evaluate_case(case)[0].tolist() == [10, 21, 2, 3, 4]
    assert _impl_masks(case)["out_of_bounds"][0].tolist() == [0, 0, 0, 0, 1]
    case = _scatter_case(x, np.array([[200], [-7]], np.int32), up, add)
    assert oracles.evaluate_case(case)[0].tolist() == [0, 1, 2, 3, 4]
    assert _impl_masks(case) == {}


def test_scatter_repeated_updates_are_masked_only_where_order_matters():
    x = np.zeros(3, np.int32)
    idx = np.array([[0], [0]], np.int32)
    up = np.array([[1, 2], [4, 8]], np.int32)
    add = _scatter_case(x, idx, up, "(si32, si32) -> add(arg0, arg1)")
    assert oracles.evaluate_case(add)[0].tolist() == [5, 10, 0]
    assert "update_order" not in _impl_masks(add)
    replace = _scatter_case(x, idx, up, "(si32, si32) -> arg1")
    assert oracles.evaluate_case(replace)[0].tolist() == [4, 8, 0]     # row-major: last wins
    assert _impl_masks(replace)["update_order"][0].tolist() == [1, 1, 0]
    xf = np.zeros(3, np.float32)
    fadd = Case.make("scatter", [xf, idx, up.astype(np.float32)], ["tensor<3xf32>"],
                     add.attributes, regions=("(f32, f32) -> add(arg0, arg1)",))
    assert _impl_masks(fadd)["update_order"][0].tolist() == [1, 1, 0]
    fmax = Case.make("scatter", [xf, idx, up.astype(np.float32)], ["tensor<3xf32>"],
                     add.attributes, regions=("(f32, f32) -> maximum(arg0, arg1)",))
    assert "update_order" not in _impl_masks(fmax)


def test_scatter_flags_mask_the_whole_result_when_their_promise_is_broken():
    x = np.zeros(4, np.int32)
    up = np.array([[1], [2]], np.int32)
    add = "(si32, si32) -> add(arg0, arg1)"
    same = _scatter_case(x, np.array([[1], [1]], np.int32), up, add, unique_indices=True)
    assert _impl_masks(same)["non_unique_indices"].all()
    apart = _scatter_case(x, np.array([[1], [2]], np.int32), up, add, unique_indices=True)
    assert "non_unique_indices" not in _impl_masks(apart)
    down = _scatter_case(x, np.array([[2], [1]], np.int32), up, add, indices_are_sorted=True)
    assert _impl_masks(down)["unsorted_indices"].all()
    assert "unsorted_indices" not in _impl_masks(
        _scatter_case(x, np.array([[1], [2]], np.int32), up, add, indices_are_sorted=True))


def test_scatter_masks_what_the_region_ops_leave_implementation_defined():
    """An update computation is judged by its ops' own specs: si8 add overflowing wraps
    conventionally but is masked; an update that does not overflow is checked."""
    x = np.array([100, 1, 0], np.int8)
    attrs = {"update_window_dims": [], "inserted_window_dims": [0],
             "input_batching_dims": [], "scatter_indices_batching_dims": [],
             "scatter_dims_to_operand_dims": [0], "index_vector_dim": 1,
             "indices_are_sorted": False, "unique_indices": False}
    case = Case.make("scatter", [x, np.array([[0], [1]], np.int32), np.array([100, 5], np.int8)],
                     ["tensor<3xsi8>"], attrs, regions=("(si8, si8) -> add(arg0, arg1)",))
    assert oracles.evaluate_case(case)[0].tolist() == [-56, 6, 0]
    masks = _impl_masks(case)
    assert list(masks) == ["region_implementation_defined"]
    assert masks["region_implementation_defined"][0].tolist() == [True, False, False]


def test_xla_scatter_with_an_empty_index_vector():
    """Known XLA divergence (jaxlib 0.10.2): with an index vector of size 0 (every
    full_start_index is 0), XLA scatters update i to element i instead of element 0; the
    interpreter follows the spec. gather with an empty index vector is right."""
    attrs = {"update_window_dims": [], "inserted_window_dims": [0],
             "input_batching_dims": [], "scatter_indices_batching_dims": [],
             "scatter_dims_to_operand_dims": [], "index_vector_dim": 1,
             "indices_are_sorted": False, "unique_indices": False}
    case = Case.make("scatter", [np.zeros(3, np.int8), np.zeros((3, 0), np.int8),
                                 np.array([1, 2, 4], np.int8)], ["tensor<3xsi8>"], attrs,
                     regions=("(si8, si8) -> add(arg0, arg1)",))
    assert oracles.evaluate_case(case)[0].tolist() == [7, 0, 0]
    assert _impl_masks(case) == {}
    assert np.asarray(get_backend("interpreter").run(case)[0]).tolist() == [7, 0, 0]
    assert np.asarray(get_backend("xla").run(case)[0]).tolist() == [1, 2, 4]


# ---------------------------------------------------------------------------
# Backends and invalid cases
# ---------------------------------------------------------------------------

def _agree_outside(case, got, masks):
    want = oracles.evaluate_case(case)
    stacked_want = [w[None] for w in want]
    stacked_got = [np.asarray(g)[None] for g in got]
    spec = load_spec(case.op)
    v = compare_batch(stacked_want, stacked_got, spec.signature_accuracy(case.signature), masks)
    return v.counts() == {"pass": 1}, v


def _jax_can(sig) -> bool:
    a = sig.attributes
    if sig.op == "gather":
        return all(a["slice_sizes"][d] == 1 for d in a["collapsed_slice_dims"])
    n = len(sig.result_types)
    region = regions.parse(sig.regions[0])
    return all(isinstance(node, regions.Arg) or (
        node.op in ("add", "multiply", "maximum", "minimum")
        and not (t.is_boolean and node.op in ("add", "multiply")))
        for node, t in zip(region.results, region.result_types)) and not (
        # XLA's verifier refuses a variadic scatter of floats of several widths
        len({t.element_type for t in sig.input_types[:n] if t.element_type.is_float}) > 1)


# jaxlib 0.10.2 on CPU cannot hold an f6 array (measured: the jax backend's transfer check
# raises Unsupported "jax on cpu cannot hold f6E2M3FN arrays"); the agreement tests skip
# those signatures with that reason and check the rest.
_JAX_CPU_CANNOT_HOLD = ("f6E2M3FN", "f6E3M2FN")


def _unheld_by_jax(sig, e: Exception) -> bool:
    """The Unsupported is jax's measured refusal of an f6 type that the signature names."""
    names = {t.element_type.name for t in tuple(sig.input_leaves) + tuple(sig.result_leaves)}
    return any(f"cannot hold {n} arrays" in str(e) for n in names & set(_JAX_CPU_CANNOT_HOLD))


def _xla_known(sig) -> bool:
    """Signatures that meet a pinned XLA divergence: an empty index vector (scatter)."""
    if sig.op != "scatter":
        return False
    a, n = sig.attributes, len(sig.result_types)
    idx = sig.input_types[n]
    return a["index_vector_dim"] < idx.rank and idx.shape[a["index_vector_dim"]] == 0


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_jax_backend_agrees_with_the_oracle(op):
    jax_backend = get_backend("jax")
    spec = load_spec(op)
    rng = np.random.default_rng(3)
    sigs = plan_signatures(spec, {}, 25, seed=3, profile="quick")
    checked = 0
    for sig in sigs:
        if not _jax_can(sig) or _xla_known(sig):
            continue
        case = Case(sig, case_inputs(sig, rng, spec))
        try:
            got = jax_backend.run(case)
        except Unsupported as e:
            assert _unheld_by_jax(sig, e), (sig.key(), e)
            continue
        ok, verdict = _agree_outside(case, got, _impl_masks(case))
        assert ok, (sig.key(), verdict.counts())
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_golden_examples_pass_on_the_oracle(op):
    for example in golden.examples(load_spec(op)):
        assert golden.mismatch(example, oracles.evaluate_case(example.case)) is None


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_invalid_cases_are_rejected(op):
    """Every labelled constraint has a negative case; the numpy backend rejects them all
    and the MLIR verifier all those of gather. For scatter the verifier lets two kinds
    through (pinned below)."""
    spec = load_spec(op)
    numpy_backend = get_backend("numpy")
    binding = spec.type_bindings()[0]
    valid = canonical(spec, binding)
    rng = np.random.default_rng(0)
    for rule in breakable(spec):
        found = candidates(spec, valid, rule)
        assert found, rule
        assert any(verifier_rejects(bad) for bad in found), rule
        if op == "gather":
            assert all(verifier_rejects(bad) for bad in found), rule
        bad = found[0]
        with pytest.raises(InvalidProgram):
            numpy_backend.run(Case(bad, case_inputs(valid, rng, spec)))


def test_the_mlir_verifier_accepts_some_invalid_scatters():
    """jaxlib 0.10.2's StableHLO verifier accepts scatter indices of type i1 (the spec
    says "tensor of integer type", I2) and updates of another floating-point type than
    their input (C6); the backends then run programs the spec rules out."""
    spec = load_spec("scatter")
    valid = canonical(spec, {"E": "f32"})
    accepted = {(rule, tuple(str(t.element_type) for t in bad.input_types))
                for rule in ("I2", "C6") for bad in candidates(spec, valid, rule)
                if not verifier_rejects(bad)}
    assert ("I2", ("f32", "f32", "i1", "f32", "f32")) in accepted
    assert ("C6", ("f32", "f32", "si32", "bf16", "f32")) in accepted
    assert not any(rule == "C6" and any(t.startswith(("si", "ui", "c")) for t in types[3:])
                   for rule, types in accepted)
