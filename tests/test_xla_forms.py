"""XLA's binary ops with broadcast_dimensions (issue 21): the oracle's broadcasting
against a naive loop of XLA's rule, the canonical CHLO program, and planted backends
that broadcast the numpy way (trailing alignment: must fail) or explicitly with
broadcast_in_dim (jax's path: must pass)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from conformance.mlir import emitter

from conformance import oracles
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.oracles.xla_forms import broadcast_operands
from conformance.checking.plan import batch_for, binding_for, plan_binding
from conformance.specs import load_spec
from conformance.specs.validity import violations
from planted import OracleBackend

OP = "binary_with_broadcast_dimensions"


def _naive(lhs, rhs, dims, fn):
    """XLA's rule read literally: the lower operand's index j is the result's index at
    dims[j]; a size-1 dimension of either operand reads index 0."""
    low_is_lhs = lhs.ndim <= rhs.ndim
    low, high = (lhs, rhs) if low_is_lhs else (rhs, lhs)
    shape = [max([h] + [low.shape[j] for j, d in enumerate(dims) if d == k])
             for k, h in enumerate(high.shape)]
    out = np.empty(shape, np.result_type(lhs, rhs))
    for idx in itertools.product(*map(range, shape)):
        hi = tuple(0 if high.shape[k] == 1 else i for k, i in enumerate(idx))
        lo = tuple(0 if low.shape[j] == 1 else idx[d] for j, d in enumerate(dims))
        a, b = (low[lo], high[hi]) if low_is_lhs else (high[hi], low[lo])
        out[idx] = fn(a, b)
    return out


@pytest.mark.parametrize("ls,hs,dims", [
    ((3,), (2, 3), [1]), ((2,), (2, 3), [0]), ((), (2, 3), []), ((2, 1), (2, 1, 4), [0, 1]),
    ((1, 4), (3, 2, 4), [0, 2]), ((2, 1), (1, 3), [0, 1]), ((5,), (5, 1, 1), [0])])
def test_oracle_broadcasts_as_xla_does(ls, hs, dims):
    rng = np.random.default_rng(0)
    low = rng.integers(-9, 9, ls).astype(np.int32)
    high = rng.integers(-9, 9, hs).astype(np.int32)
    for lhs, rhs in [(low, high), (high, low)] if len(ls) < len(hs) else [(low, high)]:
        want = _naive(lhs, rhs, dims, lambda x, y: x - y)
        got = oracles.evaluate(OP, [lhs, rhs], {"operation": "subtract",
                                                 "broadcast_dimensions": dims},
                               result_types=[f"tensor<{'x'.join(map(str, want.shape))}xsi32>"
                                             if want.ndim else "tensor<si32>"])[0]
        assert got.shape == want.shape and (got == want).all()


def test_the_canonical_program_is_chlos_broadcasting_op():
    sig = Signature.make(OP, ["tensor<2x3xf32>", "tensor<3xf32>"], ["tensor<2x3xf32>"],
                         {"operation": "add", "broadcast_dimensions": [1]})
    text = emitter.module_text(sig)
    assert '"chlo.broadcast_add"(%arg0, %arg1) {broadcast_dimensions = array<i64: 1>}' in text
    emitter.parse(text)


def test_a_verifier_crash_on_an_invalid_chlo_program_is_its_message():
    """jaxlib 0.10.2's CHLO verifier segfaults on a negative broadcast dimension: the
    invalid program is verified in a child process, so the crash is a message."""
    import dataclasses
    sig = Signature.make(OP, ["tensor<2xsi32>", "tensor<2xsi32>"], ["tensor<2xsi32>"],
                         {"operation": "add", "broadcast_dimensions": [-1]})
    sig = dataclasses.replace(sig, invalid="C3")
    message = emitter.verifier_rejects(sig)
    # this process is alive, and the verifier's verdict (a crash or an error) is text
    assert isinstance(message, str) and message


class NumpyAligned(OracleBackend):
    """Broadcasts the numpy way (the lower operand aligned with the trailing dimensions),
    ignoring broadcast_dimensions: right for a suffix, another shape or value elsewhere,
    an error where the trailing dimensions do not fit."""
    name = "numpy-aligned"

    def compile(self, sig):
        if violations(sig):
            raise ValueError("invalid program")
        op = sig.attributes["operation"]
        et = sig.result_types[0].element_type

        def run(inputs):
            x, y = (np.asarray(v) for v in inputs)
            shape = np.broadcast_shapes(x.shape, y.shape)     # raises where they do not fit
            x, y = np.broadcast_to(x, shape), np.broadcast_to(y, shape)
            t = f"tensor<{'x'.join(map(str, shape))}x{et}>" if shape else f"tensor<{et}>"
            return oracles.evaluate(op, [np.ascontiguousarray(x), np.ascontiguousarray(y)],
                                    {}, result_types=[t])
        return run


class ExplicitBroadcast(OracleBackend):
    """broadcast_in_dim of both operands to the result's shape, then the op: jax's path."""
    name = "explicit"

    def compile(self, sig):
        if violations(sig):
            raise ValueError("invalid program")
        a = sig.attributes
        shape = sig.result_types[0].shape

        def run(inputs):
            x, y = (np.asarray(v) for v in inputs)
            low_is_lhs = x.ndim <= y.ndim
            low, high = (x, y) if low_is_lhs else (y, x)
            expanded = [1] * len(shape)
            for j, d in enumerate(a["broadcast_dimensions"]):
                expanded[d] = low.shape[j]
            low = np.broadcast_to(low.reshape(expanded), shape)
            high = np.broadcast_to(high, shape)
            x, y = (low, high) if low_is_lhs else (high, low)
            t = sig.result_types[0]
            return oracles.evaluate(a["operation"], [np.ascontiguousarray(x),
                                                     np.ascontiguousarray(y)], {},
                                    result_types=[t])
        return run


def _classes(backend, key, depth="default"):
    spec = load_spec(OP)
    counts: dict[str, int] = {}
    for i, sig in enumerate(plan_binding(spec, binding_for(spec, key), 0, depth)):
        check = SignatureCheck(spec, sig, [backend])
        check.compile()
        if check.failed or check.unsupported:
            continue
        batch = check.run_batch(0, batch_for(0, depth, spec, key, i, 0, sig))
        for cls, n in batch.results[backend.name].verdict.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


def test_numpy_trailing_alignment_fails():
    counts = {}
    for key in ["si32", "f32", "ui8"]:
        for cls, n in _classes(NumpyAligned(), key).items():
            counts[cls] = counts.get(cls, 0) + n
    assert set(counts) - {"pass"}, counts


@pytest.mark.parametrize("key", ["si32", "f32", "i1", "complex<f32>"])
def test_explicit_broadcasting_passes(key):
    assert set(_classes(ExplicitBroadcast(), key)) == {"pass"}


def test_the_operation_follows_the_stablehlo_ops_type_column():
    spec = load_spec(OP)
    (attr,) = [a for a in spec.attributes if a.name == "operation"]
    from conformance.specs import expressions as ex
    assert ex.evaluate(attr.choose, {"E": "i1"}) == ["add", "multiply", "maximum", "minimum",
                                                     "and", "or", "xor"]
    assert "shift_left" not in ex.evaluate(attr.choose, {"E": "f32"})
    assert "remainder" in ex.evaluate(attr.choose, {"E": "complex<f32>"})


def _verify_invalid_chlo(_):
    import dataclasses as dc
    sig = Signature.make(OP, ["tensor<2xsi32>", "tensor<2xsi32>"], ["tensor<2xsi32>"],
                         {"operation": "add", "broadcast_dimensions": [-1]})
    return emitter.verifier_rejects.__wrapped__(dc.replace(sig, invalid="C3"))


def test_the_child_verifier_runs_inside_a_daemonic_worker():
    """bench/bench_mutation.py and pools run the suite in daemonic processes, which
    multiprocessing forbids to start children: the verifier's child is a plain fork."""
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(1) as pool:
        (message,) = pool.map(_verify_invalid_chlo, [0])
    assert isinstance(message, str) and message


# ---------------------------------------------------------------------------
# pow, atan2, compare and complex with broadcast_dimensions: specs of their own, judged
# as the underlying op's spec judges it (pow/atan2 ULP bounds, compare and complex exact)
# ---------------------------------------------------------------------------

FORMS = ["power_with_broadcast_dimensions", "atan2_with_broadcast_dimensions",
         "compare_with_broadcast_dimensions", "complex_with_broadcast_dimensions"]


def _form_classes(backend, op, keys, depth="default"):
    spec = load_spec(op)
    counts: dict[str, int] = {}
    for key in keys:
        for i, sig in enumerate(plan_binding(spec, binding_for(spec, key), 0, depth)):
            check = SignatureCheck(spec, sig, [backend])
            check.compile()
            if check.failed or check.unsupported:
                continue
            batch = check.run_batch(0, batch_for(0, depth, spec, key, i, 0, sig))
            for cls, n in batch.results[backend.name].verdict.counts().items():
                counts[cls] = counts.get(cls, 0) + n
    return counts


class _Broadcasting(OracleBackend):
    """Broadcasts explicitly (jax's path), then runs ``element(op, x, y, sig)`` on the
    broadcast operands: a planted element-wise implementation."""
    name = "planted-form"

    def element(self, x, y, sig):
        raise NotImplementedError

    def compile(self, sig):
        if violations(sig):
            raise ValueError("invalid program")
        dims = sig.attributes["broadcast_dimensions"]
        t = sig.result_types[0]

        def run(inputs):
            x, y = broadcast_operands(np.asarray(inputs[0]), np.asarray(inputs[1]), dims)
            with np.errstate(all="ignore"):
                return [np.asarray(self.element(np.ascontiguousarray(x),
                                                np.ascontiguousarray(y), sig),
                                   t.element_type.dtype).reshape(t.shape)]
        return run

    def oracle(self, x, y, sig, **attrs):
        from conformance.oracles.xla_forms import operation_attributes
        t = sig.result_types[0]
        return oracles.evaluate(sig.attributes["operation"], [x, y],
                                {**operation_attributes(sig.attributes), **attrs},
                                result_types=[t])[0]


def _ulps_off(out, n):
    """``out`` moved ``n`` ULPs up where it is a normal finite float (a subnormal would
    read as a flush)."""
    out = np.asarray(out)
    if out.dtype.kind != "f":
        return out
    info = np.finfo(out.dtype)
    bump = np.isfinite(out) & (np.abs(out) >= info.tiny) & (np.abs(out) < info.max / 2)
    moved = out.copy()
    for _ in range(n):
        moved = np.nextafter(moved, np.asarray(np.inf, out.dtype))
    return np.where(bump, moved, out)


class PowWithinBound(_Broadcasting):
    """pow 3 ULPs off (power's bound is 4 at f32 and f64): allowed."""
    def element(self, x, y, sig):
        return _ulps_off(self.oracle(x, y, sig), 3)


class NaivePow(_Broadcasting):
    """pow as exp(y * log(x)) at the operands' precision (no extra-precise log): the
    rounding error of y*log(x) is multiplied by |y log x|, far beyond 4 ULPs for large
    results; negative bases give NaN."""
    def element(self, x, y, sig):
        return np.exp(y * np.log(x))


def test_pow_form_within_its_ulp_bound_passes():
    assert set(_form_classes(PowWithinBound(), FORMS[0], ["f32", "f64"])) <= {"pass"}


def test_pow_form_computed_naively_fails():
    counts = _form_classes(NaivePow(), FORMS[0], ["f32", "f64"])
    assert counts.get("accuracy", 0) + counts.get("value", 0) > 0, counts


class Atan2WithinBound(_Broadcasting):
    """atan2 2 ULPs off (atan2's bound is 4 at f32 and f64): allowed."""
    def element(self, x, y, sig):
        return _ulps_off(self.oracle(x, y, sig), 2)


class Atan2WithoutQuadrant(_Broadcasting):
    """atan(y / x): the classic bug, right for x > 0, off by pi for x < 0."""
    def element(self, x, y, sig):
        return np.arctan(x / y)


def test_atan2_form_within_its_ulp_bound_passes():
    assert set(_form_classes(Atan2WithinBound(), FORMS[1], ["f32", "f64"])) <= {"pass"}


def test_atan2_form_without_the_quadrant_fails():
    counts = _form_classes(Atan2WithoutQuadrant(), FORMS[1], ["f32", "f64"])
    assert counts.get("value", 0) > 0, counts


_MIRROR = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ", "NE": "NE"}


class CompareMirrored(_Broadcasting):
    """rhs OP' lhs with the mirrored direction (a < b as b > a): the same booleans."""
    def element(self, x, y, sig):
        d = sig.attributes["comparison_direction"]
        return self.oracle(y, x, sig, comparison_direction=_MIRROR[d])


class CompareLowOnTheRight(OracleBackend):
    """XLA's implicit broadcast read as 'the broadcast operand is the right one': where
    lhs is the lower-rank operand, the operands are swapped (b < a for a < b)."""
    name = "planted-form"

    def compile(self, sig):
        if violations(sig):
            raise ValueError("invalid program")
        a = sig.attributes
        t = sig.result_types[0]

        def run(inputs):
            x, y = (np.asarray(v) for v in inputs)
            if x.ndim < y.ndim:
                x, y = y, x
            x, y = broadcast_operands(x, y, a["broadcast_dimensions"])
            from conformance.oracles.xla_forms import operation_attributes
            return oracles.evaluate("compare", [np.ascontiguousarray(x),
                                                np.ascontiguousarray(y)],
                                    operation_attributes(a), result_types=[t])
        return run


def test_compare_form_mirrored_passes():
    assert set(_form_classes(CompareMirrored(), FORMS[2], ["si32", "f32", "ui8"])) \
        == {"pass"}


def test_compare_form_with_swapped_operands_fails():
    counts = _form_classes(CompareLowOnTheRight(), FORMS[2], ["si32", "f32", "ui8"])
    assert counts.get("value", 0) > 0, counts


class ComplexOtherNaN(_Broadcasting):
    """complex(lhs, rhs) with every NaN part replaced by another NaN (a negative quiet
    NaN): any NaN equals any NaN."""
    def element(self, x, y, sig):
        out = self.oracle(x, y, sig)
        nan = -np.asarray(np.nan, x.dtype)
        re = np.where(np.isnan(out.real), nan, out.real)
        im = np.where(np.isnan(out.imag), nan, out.imag)
        return _pair(re, im, out.dtype)


def _pair(re, im, dtype):
    out = np.empty(np.shape(re), dtype)
    out.real, out.imag = re, im
    return out


class ComplexByArithmetic(_Broadcasting):
    """x + 1j * y: the imaginary unit times y loses -0 (0*(-0) + 1*0 ... gives +0) and
    makes a NaN real part of an infinite y."""
    def element(self, x, y, sig):
        return x + np.asarray(1j, sig.result_types[0].element_type.dtype) * y


def test_complex_form_with_other_nans_passes():
    assert set(_form_classes(ComplexOtherNaN(), FORMS[3], ["f32", "f64"])) == {"pass"}


def test_complex_form_by_arithmetic_fails():
    counts = _form_classes(ComplexByArithmetic(), FORMS[3], ["f32", "f64"])
    assert set(counts) - {"pass"}, counts


@pytest.mark.parametrize("op,text", [
    (FORMS[0], '"chlo.broadcast_power"'), (FORMS[1], '"chlo.broadcast_atan2"'),
    (FORMS[3], '"chlo.broadcast_complex"')])
def test_the_forms_print_as_chlo_broadcasting_ops(op, text):
    et = "f32"
    out = "complex<f32>" if op == FORMS[3] else et
    sig = Signature.make(op, [f"tensor<2x3x{et}>", f"tensor<3x{et}>"], [f"tensor<2x3x{out}>"],
                         {"operation": op.split("_")[0], "broadcast_dimensions": [1]})
    module = emitter.module_text(sig)
    assert text in module and "broadcast_dimensions = array<i64: 1>" in module
    emitter.parse(module)


def test_the_compare_form_prints_chlos_direction_and_type():
    sig = Signature.make(FORMS[2], ["tensor<2x3xf32>", "tensor<3xf32>"], ["tensor<2x3xi1>"],
                         {"operation": "compare", "broadcast_dimensions": [1],
                          "comparison_direction": "LT", "compare_type": "TOTALORDER"})
    module = emitter.module_text(sig)
    assert "#chlo<comparison_direction LT>" in module
    assert "#chlo<comparison_type TOTALORDER>" in module
    emitter.parse(module)


def test_a_size_one_dimension_against_size_zero_broadcasts_to_zero():
    """XLA's degenerate-dimension rule: a size-1 dimension takes the other's size, 0
    too (the result shape is not the larger of the two)."""
    attrs = {"operation": "compare", "broadcast_dimensions": [0],
             "comparison_direction": "EQ", "compare_type": "SIGNED"}
    ins = ["tensor<1x3xsi32>", "tensor<0xsi32>"]
    assert not violations(Signature.make(FORMS[2], ins, ["tensor<0x3xi1>"], attrs))
    assert "C6" in str(violations(Signature.make(FORMS[2], ins, ["tensor<1x3xi1>"], attrs)))
    got = oracles.evaluate(FORMS[2], [np.zeros((1, 3), np.int32), np.zeros((0,), np.int32)],
                           {"operation": "compare", "broadcast_dimensions": [0],
                            "comparison_direction": "EQ", "compare_type": "SIGNED"},
                           result_types=["tensor<0x3xi1>"])[0]
    assert got.shape == (0, 3)


# ---------------------------------------------------------------------------
# SetDimensionSize: a bounded dynamic result; past `size` is padding
# ---------------------------------------------------------------------------

SDS = "set_dimension_size"


def _sds_sig(shape=(4, 2, 3), dimension=1, et="f32"):
    dims = "x".join(map(str, shape))
    return Signature.make(SDS, [f"tensor<{dims}x{et}>", "tensor<si32>"],
                          [f"tensor<{dims}x{et}>"], {"dimension": dimension})


def test_set_dimension_size_prints_a_bounded_dynamic_result():
    text = emitter.module_text(_sds_sig())
    assert "-> tensor<4x?x3xf32, #stablehlo.bounds<?, 2, ?>>" in text
    assert "-> (tensor<4x?x3xf32, #stablehlo.bounds<?, 2, ?>>)" in text
    emitter.parse(text)


def test_set_dimension_size_padding_is_masked_past_size():
    from conformance.oracles.xla_forms import dynamic_padding, dynamic_size_out_of_range
    r = np.zeros((3, 4, 2, 3))                      # a batch of 3 cases
    size = np.array([0, 1, 2], np.int32)
    m = dynamic_padding(None, size, 1, r)
    assert m[0].all() and not m[2].any()
    assert m[1][:, 1:].all() and not m[1][:, :1].any()
    assert not dynamic_size_out_of_range(None, size, 1, r).any()
    assert dynamic_size_out_of_range(None, np.array([-1, 3, 2]), 1, r)[:2].all()


class _Dynamic(OracleBackend):
    """The operand passed through; ``mode`` says what stands past ``size``."""
    name = "planted-dynamic"

    def __init__(self, mode):
        self.mode = mode
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError("invalid program")
        d = sig.attributes["dimension"]

        def run(inputs):
            x, size = np.array(inputs[0]), int(np.asarray(inputs[1]))
            logical = np.take(x, np.arange(min(size, x.shape[d])), axis=d)
            out = np.zeros_like(x)
            if self.mode == "packed":
                # the logical array's elements at the start of the bound's buffer, read
                # with the bound's shape (what np.asarray of XLA CPU's buffer gives)
                out.reshape(-1)[:logical.size] = logical.reshape(-1)
                return [out]
            out[...] = x
            if self.mode == "garbage" and x.dtype.kind == "f":
                index = [slice(None)] * x.ndim
                index[d] = slice(size, None)
                out[tuple(index)] = np.nan
            return [out]
        return run


def test_set_dimension_size_with_any_padding_passes():
    counts = _form_classes(_Dynamic("garbage"), SDS, ["f32", "si32", "bf16"])
    assert set(counts) == {"pass"}, counts


def test_set_dimension_size_read_as_packed_fails():
    """A dynamic result's logical elements read with the bound's shape: right where the
    dynamic dimension is the first (or size = bound), wrong elsewhere."""
    counts = _form_classes(_Dynamic("packed"), SDS, ["f32", "si32", "bf16"])
    assert counts.get("value", 0) > 0, counts


def test_set_dimension_size_on_xla_reads_the_logical_shape():
    """XLA CPU packs the result's logical elements at the start of the bound's buffer;
    the xla backend reads it in its logical shape and pads it (jaxlib_support.Loaded)."""
    pytest.importorskip("jax")
    from conformance.backends.xla_backend import XlaBackend
    run = XlaBackend().compile(_sds_sig((4, 2, 3), 1))
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    (out,) = run([x, np.int32(1)])
    assert out.shape == (4, 2, 3)
    assert (out[:, :1] == x[:, :1]).all()


def test_set_dimension_size_is_declined_where_it_cannot_run():
    from conformance.backends.base import Unsupported
    from conformance.backends.interpreter_backend import ABORTS
    assert "dynamic result types are not supported" in ABORTS[SDS]
    pytest.importorskip("jax")
    from conformance.backends import jax_ops
    with pytest.raises(Unsupported, match="static shapes"):
        jax_ops.build(_sds_sig())


# ---------------------------------------------------------------------------
# GetDimensionSize of a dynamic dimension (a decomposition: set_dimension_size, then
# get_dimension_size of its bounded result)
# ---------------------------------------------------------------------------

GDS = "get_dimension_size_dynamic"


def _gds_sig(shape=(4, 3), dimension=1, query=1):
    dims = "x".join(map(str, shape))
    return Signature.make(GDS, [f"tensor<{dims}xf32>", "tensor<si32>"], ["tensor<si32>"],
                          {"dimension": dimension, "query": query})


def test_the_dynamic_dimension_is_made_and_asked_for_in_one_program():
    text = emitter.module_text(_gds_sig())
    assert '"stablehlo.set_dimension_size"' in text and '"stablehlo.get_dimension_size"' in text
    # the bounded type flows from set_dimension_size's result into get_dimension_size
    assert "(tensor<4x?xf32, #stablehlo.bounds<?, 3>>) -> tensor<i32>" in text
    emitter.parse(text)


class _Size(OracleBackend):
    """``static``: GetDimensionSize folded to the static size (what XLA gives when the
    program's set_dimension_size has a static result type): a wrong size.
    ``legal``: the size read off the logical array; anything for a size out of range."""
    name = "planted-size"

    def __init__(self, mode):
        self.mode = mode
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError("invalid program")
        a = sig.attributes

        def run(inputs):
            x, size = np.asarray(inputs[0]), int(np.asarray(inputs[1]))
            if self.mode == "static":
                return [np.asarray(x.shape[a["query"]], np.int32)]
            if not 0 <= size <= x.shape[a["dimension"]]:
                return [np.asarray(-7, np.int32)]
            logical = np.take(x, np.arange(size), axis=a["dimension"])
            return [np.asarray(logical.shape[a["query"]], np.int32)]
        return run


def test_the_dynamic_size_read_off_the_logical_array_passes():
    assert set(_form_classes(_Size("legal"), GDS, ["f32", "si8"])) == {"pass"}
    spec = load_spec(GDS)
    check = SignatureCheck(spec, _gds_sig(), [_Size("legal")])
    check.compile()
    stacked = [np.zeros((3, 4, 3), np.float32), np.array([2, 9, -1], np.int32)]
    v = check.run_batch(0, stacked).results["planted-size"].verdict
    assert v.case_class_names() == ["pass", "pass", "pass"]     # 9 and -1: masked


def test_the_static_size_for_a_dynamic_dimension_fails():
    counts = _form_classes(_Size("static"), GDS, ["f32", "si8"])
    assert counts.get("value", 0) > 0, counts


def test_xla_gives_the_dynamic_size():
    pytest.importorskip("jax")
    from conformance.backends.xla_backend import XlaBackend
    run = XlaBackend().compile(_gds_sig((10,), 0, 0))
    (out,) = run([np.arange(10, dtype=np.float32), np.int32(5)])
    assert int(out) == 5
