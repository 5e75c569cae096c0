"""Indexing ops (gather, scatter): the oracle against independent formulations written
from the spec's "More formally" (explicit loops over result / update indices, on raw
bytes), out-of-bounds start indices generated on purpose and masked as the spec's
implementation-defined rule says (with XLA's conventional behaviour as the oracle's
value), the dimension numbers valid by construction, the jax mapping against the
oracle, and invalid cases rejected."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conformance import golden, oracles
from conformance.backends import get_backend
from conformance.backends.numpy_backend import InvalidProgram
from conformance.case import Case
from conformance.compare import compare_batch
from conformance.emitter import verifier_rejects
from conformance.generators import (breakable, candidates, canonical, case_inputs, cases,
                                    signatures)
from conformance.specs import expressions as ex
from conformance.specs import load_spec
from conformance.specs.validity import violations
from conformance.types import element_type

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
        offset = [ri[d] for d in offset_dims]
        full_offset, it = [], iter(offset)
        for d in range(rank):
            full_offset.append(0 if d in collapsed else next(it))
        # the slice, at least one element along every dimension, within the operand?
        inside = all(0 <= full_start[d] and full_start[d] + max(sizes[d], 1) <= operand.shape[d]
                     for d in range(rank))
        oob[ri] = not inside
        clamped = [min(max(s, 0), max(operand.shape[d] - sizes[d], 0))
                   for d, s in enumerate(full_start)]
        index = [c + o for c, o in zip(clamped, full_offset)]
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
    """Operand ranks 0..4, zero-sized dimensions, every index_vector_dim position
    including the implicit one, collapsed and offset dimensions, index types."""
    seen = {"ranks": set(), "zero": False, "implicit": False, "ivd_first": False,
            "collapsed": False, "no_offsets": False, "itypes": set(), "sorted_flag": False}

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

    check()
    assert seen["ranks"] == {0, 1, 2, 3, 4}
    assert all(v for k, v in seen.items() if k not in ("ranks", "itypes"))
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
    attrs = {"offset_dims": [0], "collapsed_slice_dims": [], "start_index_map": [0],
             "index_vector_dim": 0, "slice_sizes": [2], "indices_are_sorted": False}
    case = Case.make("gather", [x, start], ["tensor<2xsi8>"], attrs)
    assert violations(case.signature) == []
    assert oracles.evaluate_case(case)[0].tolist() == expected
    in_range = 0 <= _int(start[0]) <= 3
    assert ("out_of_bounds" in _impl_masks(case)) == (not in_range)


def test_gather_unsorted_indices_with_the_sorted_flag_are_masked():
    x = np.arange(6, dtype=np.int32)
    attrs = {"offset_dims": [], "collapsed_slice_dims": [0], "start_index_map": [0],
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
    attrs = {"offset_dims": [0], "collapsed_slice_dims": [0], "start_index_map": [0, 1],
             "index_vector_dim": 0, "slice_sizes": [0, 3], "indices_are_sorted": False}
    case = Case.make("gather", [x, np.array([2, 0], np.int32)], ["tensor<3xsi32>"], attrs)
    assert violations(case.signature) == []
    assert oracles.evaluate_case(case)[0].tolist() == [6, 7, 8]
    assert _impl_masks(case) == {}
    past = Case.make("gather", [x, np.array([3, 0], np.int32)], ["tensor<3xsi32>"], attrs)
    assert _impl_masks(past)["out_of_bounds"].all()


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
    return True


@pytest.mark.parametrize("op", ["gather"])
def test_jax_backend_agrees_with_the_oracle(op):
    jax_backend = get_backend("jax")
    spec = load_spec(op)
    rng = np.random.default_rng(3)
    sigs = []

    @settings(SETTINGS, max_examples=12)
    @given(signatures(op, profile="quick"))
    def collect(sig):
        sigs.append(sig)

    collect()
    checked = 0
    for sig in sigs:
        if not _jax_can(sig):
            continue
        case = Case(sig, case_inputs(sig, rng, spec))
        ok, verdict = _agree_outside(case, jax_backend.run(case), _impl_masks(case))
        assert ok, (sig.key(), verdict.counts())
        checked += 1
    assert checked >= 5


def test_golden_examples_pass_on_the_oracle():
    for example in golden.examples(load_spec("gather")):
        assert golden.mismatch(example, oracles.evaluate_case(example.case)) is None


@pytest.mark.parametrize("op", ["gather"])
def test_invalid_cases_are_rejected(op):
    spec = load_spec(op)
    numpy_backend = get_backend("numpy")
    binding = spec.type_bindings()[0]
    valid = canonical(spec, binding)
    rng = np.random.default_rng(0)
    for rule in breakable(spec):
        found = candidates(spec, valid, rule)
        assert found, rule
        bad = found[0]
        assert verifier_rejects(bad), (rule, bad.key())
        with pytest.raises(InvalidProgram):
            numpy_backend.run(Case(bad, case_inputs(valid, rng, spec)))
