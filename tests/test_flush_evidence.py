"""A subnormal flush is told from a wrong value by each element's own evidence
(issue 12, point 1): a reclassification as ``subnormal_flush`` never rests on another
case of the batch. Planted backends on the whole check path (conformance.checking.checker):
ones that differ from the oracle only by flushing (FTZ: subnormal results; DAZ:
subnormal inputs) get ``subnormal_flush``; ones with a real bug next to a flushed case
keep their bug's class."""
import numpy as np

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.checking.compare import compare_batch
from conformance.core.case import Signature
from conformance.core.numerics import flush_subnormals
from conformance.specs import Accuracy, load_spec

SUB = np.float32(1e-39)                       # a subnormal f32
TINY = np.float32(np.finfo(np.float32).tiny)  # the smallest normal f32
MIN_SUB = np.float32(np.finfo(np.float32).smallest_subnormal)


def _flush_tiny_before_rounding(sig, inputs, out):
    """FTZ as hardware that detects tininess before rounding does it: a result whose
    exact value is below the smallest normal becomes zero of its sign."""
    exact = oracles.evaluate(sig.op, [np.asarray(x, np.float64) for x in inputs],
                             sig.attributes,
                             result_types=[f"tensor<{'x'.join(map(str, t.shape))}"
                                           f"{'x' if t.shape else ''}f64>"
                                           for t in sig.result_types])
    res = []
    for o, ex in zip(out, exact):
        tiny = (ex != 0) & (np.abs(ex) < np.finfo(o.dtype).tiny)
        zeros = np.where(np.signbit(ex), -0.0, 0.0).astype(o.dtype)
        res.append(np.where(tiny, zeros, o).astype(o.dtype))
    return res


class Flushing(Backend):
    """The oracle run as FTZ and/or DAZ hardware would, with an optional planted bug
    ``bug(op, inputs, outputs) -> outputs``."""

    name = "flushing"

    def __init__(self, ftz=False, daz=False, bug=None):
        super().__init__()
        self.ftz, self.daz, self.bug = ftz, daz, bug

    def compile(self, sig):
        def run(inputs):
            ins = [flush_subnormals(np.asarray(x)) for x in inputs] if self.daz else inputs
            out = list(oracles.evaluate(sig.op, ins, sig.attributes,
                                        result_types=sig.result_types, regions=sig.regions))
            if self.ftz:
                out = _flush_tiny_before_rounding(sig, ins, out)
            if self.bug is not None:
                out = self.bug(sig.op, ins, out)
            return out
        return run


def _classes(op, types, backend, *stacked):
    sig = Signature.make(op, [types] * len(stacked), [types])
    check = SignatureCheck(load_spec(op), sig, [backend])
    check.compile()
    batch = check.run_batch(0, [np.asarray(x, np.float32) for x in stacked])
    return batch.results[backend.name].verdict.case_class_names()


def _judge_batch(sig, stacked, fn):
    class Fixed(Backend):
        name = "fixed"

        def compile(self, sig):
            return fn
    check = SignatureCheck(load_spec(sig.op), sig, [Fixed()])
    check.compile()
    return check.run_batch(0, stacked).results["fixed"].verdict.case_class_names()


def _minimum_by_less(op, ins, out):
    """minimum lowered as ``lhs < rhs ? lhs : rhs``: min(-0, +0) = +0 (should be -0)."""
    lhs, rhs = ins
    return [np.where(lhs < rhs, lhs, rhs).astype(lhs.dtype)]


def test_a_signed_zero_bug_batched_with_an_unrelated_subnormal_case_is_signed_zero():
    # Case 0: min(-0, +0) with the wrong zero sign, no subnormal anywhere in the case.
    # Case 1: a subnormal operand, flushed by the (DAZ + FTZ) backend: a real flush.
    backend = Flushing(ftz=True, daz=True, bug=_minimum_by_less)
    lhs = [[-0.0, 1.0], [SUB, 3.0]]
    rhs = [[0.0, 2.0], [1.0, 4.0]]
    assert _classes("minimum", "tensor<2xf32>", backend, lhs, rhs) == \
        ["signed_zero", "subnormal_flush"]


def test_sqrt_of_minus_zero_with_the_wrong_sign_next_to_a_flushed_subnormal():
    def sqrt_of_abs(op, ins, out):
        return [np.sqrt(np.abs(ins[0])).astype(ins[0].dtype)]
    backend = Flushing(daz=True, bug=sqrt_of_abs)
    assert _classes("sqrt", "tensor<1xf32>", backend, [[-0.0], [SUB]]) == \
        ["signed_zero", "subnormal_flush"]


def test_a_real_ftz_backend_is_a_subnormal_flush():
    backend = Flushing(ftz=True)
    # 1e-20 * 1e-20 is subnormal; 2^-63 * 2^-63 (1 - 2^-24) is tiny before rounding and
    # rounds to the smallest normal; 3 * 2 is untouched.
    lhs = [[1e-20, 3.0], [2.0 ** -63, 3.0]]
    rhs = [[1e-20, 2.0], [2.0 ** -63 * (1 - 2.0 ** -24), 2.0]]
    assert _classes("multiply", "tensor<2xf32>", backend, lhs, rhs) == \
        ["subnormal_flush", "subnormal_flush"]
    # and a backend that is right throughout passes
    assert _classes("multiply", "tensor<2xf32>", Flushing(), lhs, rhs) == ["pass", "pass"]


def test_a_real_daz_backend_is_a_subnormal_flush():
    backend = Flushing(daz=True)
    # SUB + SUB = 2 SUB (DAZ: 0); -SUB + 0 = -SUB (DAZ: -0 + 0 = +0)
    assert _classes("add", "tensor<2xf32>", backend, [[SUB, 1.0], [-SUB, 1.0]],
                    [[SUB, 2.0], [0.0, 2.0]]) == ["subnormal_flush", "subnormal_flush"]
    # SUB * 1e10 = 1e-29 (DAZ: 0); -SUB * 1 = -SUB (DAZ: -0)
    assert _classes("multiply", "tensor<2xf32>", backend, [[SUB, 1.0], [-SUB, 1.0]],
                    [[1e10, 2.0], [1.0, 2.0]]) == ["subnormal_flush", "subnormal_flush"]
    assert _classes("sqrt", "tensor<1xf32>", backend, [[SUB], [-SUB]]) == \
        ["subnormal_flush", "subnormal_flush"]


def test_a_daz_sort_that_moves_subnormals_unchanged_is_a_subnormal_flush():
    # Under DAZ the comparator sees -SUB as -0 (= +0): the stable order keeps +0 first,
    # and the values are moved, not flushed.
    sig = Signature.make("sort", ["tensor<2xf32>"], ["tensor<2xf32>"],
                         {"dimension": 0, "is_stable": True},
                         regions=("(f32, f32) -> compare(arg0, arg1, 'LT', 'FLOAT')",))
    stacked = [np.array([[0.0, -SUB], [2.0, 1.0]], np.float32)]
    expected = oracles.evaluate_batch(sig, stacked)
    actual = [np.array([[0.0, -SUB], [1.0, 2.0]], np.float32)]
    v = compare_batch(expected, actual, Accuracy("bits"), None, stacked,
                      lambda xs: oracles.evaluate_batch(sig, xs), moves_values=True)
    assert v.case_class_names() == ["subnormal_flush", "pass"]
    # an op that computes its results does not move a subnormal: reduce_precision
    # returning its subnormal operand unrounded (-1.25 * 2^-7, which one mantissa bit
    # rounds to -2^-7, ties to even) is a value, not a flush
    rp = Signature.make("reduce_precision", ["tensor<1xf8E4M3FN>"], ["tensor<1xf8E4M3FN>"],
                        {"exponent_bits": 11, "mantissa_bits": 1})
    x = [np.array([[-0.009765625], [1.0]], "float8_e4m3fn")]
    assert _judge_batch(rp, x, lambda xs: [xs[0].copy()]) == ["value", "pass"]


def test_a_nonzero_subnormal_where_the_oracle_says_zero_is_a_value():
    # An FTZ backend never returns a subnormal: add(SUB, -SUB) = +0 returned as SUB, and
    # min_sub * 0.5 = 0 (ties to even) returned as min_sub, next to a real flush.
    def bug(op, ins, out):
        lhs, rhs = ins
        if op == "add":
            return [np.where(lhs == -rhs, lhs, out[0]).astype(lhs.dtype)]
        return [np.where(rhs == 0.5, lhs, out[0]).astype(lhs.dtype)]
    backend = Flushing(bug=bug)
    assert _classes("add", "tensor<1xf32>", backend, [[SUB], [SUB]], [[-SUB], [SUB]])[0] == \
        "value"
    assert _classes("multiply", "tensor<2xf32>", backend,
                    [[MIN_SUB, 1e-20]], [[0.5, 1e-20]]) == ["value"]
    ftz_too = Flushing(ftz=True, bug=bug)
    assert _classes("multiply", "tensor<2xf32>", ftz_too,
                    [[MIN_SUB, 1.0], [1e-20, 1.0]], [[0.5, 1.0], [1e-20, 1.0]]) == \
        ["value", "subnormal_flush"]


def test_a_wrong_subnormal_computed_from_subnormal_inputs_is_a_value():
    # add(SUB, 2e-39) computed as lhs + lhs: the inputs hold a subnormal and flushing
    # them changes the result (DAZ gives 0), but the backend's subnormal is computed (not
    # one of the case's inputs, moved), and no flush gives it.
    def doubles_lhs(op, ins, out):
        return [(ins[0] + ins[0]).astype(ins[0].dtype)]
    assert _classes("add", "tensor<1xf32>", Flushing(bug=doubles_lhs),
                    [[SUB]], [[np.float32(3e-39)]]) == ["value"]


def test_a_zero_for_a_normal_result_is_a_value_even_in_a_batch_with_subnormals():
    def zero_for_six(op, ins, out):
        return [np.where(out[0] == 6, np.float32(0), out[0]).astype(np.float32)]
    backend = Flushing(ftz=True, daz=True, bug=zero_for_six)
    assert _classes("multiply", "tensor<1xf32>", backend, [[3.0], [SUB]], [[2.0], [1.0]]) \
        == ["value", "subnormal_flush"]
