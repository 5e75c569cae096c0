"""dot_general's `algorithm` (stablehlo-spec-2026-08.md, issue 30): the operands rounded to
lhs_precision_type / rhs_precision_type, the sums at accumulation_type. Rules C21-C24 each
broken alone (the verifier agrees); the emitter prints the attribute and leaves the empty
algorithm out; the reader reads it back; the `contraction` bound follows the algorithm's
types: a backend that accumulates in bf16 where accumulation_type says f32 fails, one
that computes more precisely passes, and operands rounded to a bf16 precision type pass
where the algorithm names it (and fail where it does not)."""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from conformance.checking.verdicts.contraction import algorithm_of, precision_type
from conformance.core.case import Signature
from conformance.generators import breakable, candidates, canonical
from conformance.mlir.emitter import module_text, verifier_rejects
from conformance.mlir.reader import read_text
from conformance.specs import load_spec
from conformance.specs.validity import violations

from test_dot_general import Planted, classes, dg_sig

SPEC = load_spec("dot_general")


def with_algorithm(sig: Signature, lhs, rhs, acc, counts=(1, 1, 1), imprecise=False):
    a = {**sig.attributes, "precision_config": ["DEFAULT", "DEFAULT"],
         "lhs_precision_type": lhs, "rhs_precision_type": rhs, "accumulation_type": acc,
         "lhs_component_count": counts[0], "rhs_component_count": counts[1],
         "num_primitive_operations": counts[2], "allow_imprecise_accumulation": imprecise}
    return Signature.make(sig.op, sig.input_types, sig.result_types, a)


class RoundsOperands(Planted):
    """Rounds both operands to ``to`` (bf16), then sums in ``acc``: what an algorithm
    with bf16 precision types allows."""

    def __init__(self, to, acc, name):
        self.to = to
        super().__init__(acc=acc, name=name)

    def compile(self, sig):
        inner = super().compile(sig)
        dtype = ml_dtypes.bfloat16 if self.to == "bf16" else np.dtype(self.to)

        def run(inputs):
            with np.errstate(all="ignore"):
                rounded = [np.asarray(x).astype(dtype).astype(np.asarray(x).dtype)
                           for x in inputs]
            return inner(rounded)
        return run


BF16_F32 = dg_sig((3, 32, 2), (32, 3, 2), "bf16", [0], [1], [1], [0], rt="f32")
F32 = dg_sig((2, 3, 32), (2, 32, 4), "f32", [0], [0], [2], [1])
F16 = dg_sig((2, 24), (24, 3), "f16", [], [], [1], [0])


# -- rules ------------------------------------------------------------------------------

def test_the_empty_algorithm_is_absent_and_valid():
    assert algorithm_of(F32.attributes) is None and violations(F32) == []
    assert "algorithm" not in module_text(F32)


def test_c21_to_c24_each_break_alone_and_the_verifier_agrees():
    assert {"C21", "C22", "C23", "C24"} <= set(breakable(SPEC))
    valid = canonical(SPEC, {"E": "f32", "R": "f32"})
    assert algorithm_of(valid.attributes) == ("f32", "f32", "f32") and not violations(valid)
    for rule in ("C21", "C22", "C23", "C24"):
        found = candidates(SPEC, valid, rule)
        assert found, rule
        for bad in found[:3]:
            assert violations(bad) == [rule]
            assert verifier_rejects(bad), (rule, bad.attributes)


def test_the_verifier_knows_the_drawn_combinations_and_refuses_others():
    base = with_algorithm(F32, "bf16", "bf16", "f32")
    assert verifier_rejects(base) is None
    odd = with_algorithm(F32, "f32", "f32", "bf16")       # valid by C21-C24
    assert violations(odd) == []
    assert "not known to be supported" in verifier_rejects(odd)


def test_the_algorithm_prints_and_reads_back():
    sig = with_algorithm(F32, "tf32", "tf32", "f32")
    text = module_text(sig)
    assert ("algorithm = #stablehlo.dot_algorithm<lhs_precision_type = tf32, "
            "rhs_precision_type = tf32, accumulation_type = f32") in text
    got = [o.signature for o in read_text(text).program.operations]
    assert got == [sig]
    plain = [o.signature for o in read_text(module_text(F32)).program.operations]
    assert plain == [F32] and "lhs_precision_type" not in plain[0].attributes


def test_tf32_and_the_element_types_have_their_precision():
    assert precision_type("tf32")[0] == 11 and precision_type("bf16")[0] == 8
    assert precision_type("f32")[0] == 24


# -- the bound follows the algorithm ----------------------------------------------------

def test_accumulating_in_bf16_where_the_algorithm_says_f32_fails():
    sig = with_algorithm(BF16_F32, "bf16", "bf16", "f32")
    counts = classes(Planted(acc="bf16", name="bf16-sums"), sig)
    assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts
    assert "precision" not in counts
    # without the algorithm the seed's rule allows sums at the operands' bf16
    assert set(classes(Planted(acc="bf16", name="bf16-sums"), BF16_F32)) <= {"pass"}


@pytest.mark.parametrize("acc", ["f32", "f64", None], ids=["f32", "f64", "oracle"])
def test_accumulating_as_or_more_precisely_than_the_algorithm_passes(acc):
    sig = with_algorithm(BF16_F32, "bf16", "bf16", "f32")
    assert set(classes(Planted(acc=acc, name=f"acc-{acc}"), sig)) <= {"pass"}


def test_operands_rounded_to_the_algorithms_bf16_pass_and_fail_without_it():
    sig = with_algorithm(F32, "bf16", "bf16", "f32")
    backend = RoundsOperands("bf16", "f32", "bf16-operands")
    assert set(classes(backend, sig)) <= {"pass"}
    # the empty algorithm under HIGHEST: the same rounding is beyond the f32 bound
    counts = classes(backend, F32)
    assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts
    # and tf32 (11 bits) is not bf16 (8 bits): bf16 operands are beyond a tf32 algorithm
    tf32 = with_algorithm(F32, "tf32", "tf32", "f32")
    counts = classes(backend, tf32)
    assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts


def test_f16_sums_where_the_algorithm_says_f16_pass_and_f8_sums_fail():
    sig = with_algorithm(F16, "f16", "f16", "f16")
    assert set(classes(Planted(acc="f16", name="f16-sums"), sig)) <= {"pass"}
    counts = classes(Planted(acc="f8E5M2", name="f8-sums"), sig)
    assert counts.get("bound", 0) + counts.get("value", 0) > 0, counts


# -- backends ---------------------------------------------------------------------------

def test_jax_runs_an_algorithm_it_has_and_declines_one_it_lacks():
    from conformance.backends import Unsupported, get_backend
    b = get_backend("jax")
    sig = with_algorithm(F32, "bf16", "bf16", "f32")
    # (XLA on CPU computes dot products under FTZ/DAZ, with an algorithm or without: the
    # jax-cpu expectations' subnormal_flush of dot_general)
    assert set(classes(b, sig)) <= {"pass", "subnormal_flush"}
    lacking = with_algorithm(F32, "tf32", "tf32", "f32")
    with pytest.raises(Unsupported, match="refuses the algorithm"):
        b.compile(lacking)


def test_generated_float_signatures_draw_verifier_known_algorithms():
    from conformance.apps.runner import plan_signatures
    seen = set()
    for binding in ({"E": "f32", "R": "f32"}, {"E": "bf16", "R": "f32"},
                    {"E": "f8E5M2", "R": "f32"}, {"E": "f64", "R": "f64"}):
        for sig in plan_signatures(SPEC, binding, 12, seed=3, profile="default"):
            alg = algorithm_of(sig.attributes)
            assert violations(sig) == []
            if alg is not None:
                seen.add((binding["E"],) + alg)
                assert sig.attributes["precision_config"] == ["DEFAULT", "DEFAULT"]
                assert verifier_rejects(sig) is None, sig.attributes
    assert len(seen) >= 4, seen
    ints = plan_signatures(SPEC, {"E": "si8", "R": "si32"}, 12, seed=3, profile="default")
    assert all(algorithm_of(s.attributes) is None for s in ints)
