"""Programs of several ops (issue 19): representation, text, generator, oracle, verdicts,
minimiser, planted backends, the CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conformance.backends.base import Backend, Unsupported
from conformance.checking.programs import check_program, minimize
from conformance.core.case import Signature
from conformance.core.dense import dense_text
from conformance.core.program import Operation, Program
from conformance.generators.programs import Config, Stats, draw_inputs, generate, rng_for
from conformance.oracles import evaluate
from conformance.oracles.programs import evaluate_program
from conformance.mlir.program_emit import parse_program, program_text
from conformance.specs.validity import violations

from planted_programs import OracleProgram, build

F32 = "tensor<4xf32>"


def _op(name, operands, types, result, attrs=None, ins=None):
    return Operation(Signature.make(name, ins or [types[v] for v in operands], [result], attrs),
                     tuple(operands), None)




def fma_program() -> Program:
    return build([("a", F32), ("b", F32), ("c", F32)],
                 [("m", "multiply", ["a", "b"], F32, None),
                  ("s", "add", ["m", "c"], F32, None)], ["s"])


def fma_inputs():
    a = np.float32([1 + 2 ** -12, 3, -0.0, np.inf])
    c = np.float32([-1, 1, 0.0, -np.inf])
    return [a[None], a[None], c[None]]


# ---------------------------------------------------------------------------------------
# Planted backends: the program oracle op by op, with a rewrite
# ---------------------------------------------------------------------------------------

class OpByOp(OracleProgram):
    """Runs single ops with the oracle, programs op by op through :meth:`step`."""

    name = "planted"


class FusedMultiplyAdd(OpByOp):
    """add(multiply(a, b), c) with one rounding (f32): an FMA contraction."""

    def step(self, o, env, producers):
        p = producers
        if o.op == "add" and o.operands[0] in p and p[o.operands[0]].op == "multiply":
            m = p[o.operands[0]]
            a, b = (env[v].astype(np.float64) for v in m.operands)
            c = env[o.operands[1]].astype(np.float64)
            return [(a * b + c).astype(np.float32)]
        return super().step(o, env, producers)


class WideThenRound(OpByOp):
    """Each op at float64, rounded once to f32, and NaNs of another sign and payload: a
    different evaluation the spec allows (add, multiply, subtract are correctly rounded
    either way; any NaN equals any NaN)."""

    def step(self, o, env, producers):
        if o.op in ("add", "multiply", "subtract"):
            x, y = (env[v].astype(np.float64) for v in o.operands)
            r = {"add": x + y, "multiply": x * y, "subtract": x - y}[o.op].astype(np.float32)
            return [np.where(np.isnan(r), np.float32(-np.nan), r)]
        return super().step(o, env, producers)


def _constant_of(producers, name, value) -> bool:
    p = producers.get(name)
    return p is not None and p.op == "constant" and bool(np.all(
        evaluate("constant", [], p.signature.attributes,
                 result_types=p.signature.result_types)[0] == value))


class TimesOneIsX(OpByOp):
    """x * 1 -> x (right for every value, NaN and -0 included)."""

    def step(self, o, env, producers):
        if o.op == "multiply" and _constant_of(producers, o.operands[1], 1):
            return [env[o.operands[0]]]
        return super().step(o, env, producers)


class MinusSelfIsZero(OpByOp):
    """x - x -> 0 (wrong where x is NaN or an infinity)."""

    def step(self, o, env, producers):
        if o.op == "subtract" and o.operands[0] == o.operands[1]:
            x = env[o.operands[0]]
            return [np.zeros_like(x)]
        return super().step(o, env, producers)


# ---------------------------------------------------------------------------------------
# Representation and text
# ---------------------------------------------------------------------------------------

def test_program_text_parses_and_round_trips():
    p = fma_program()
    assert p.problems() == []
    text = program_text(p)
    assert '%s = "stablehlo.add"(%m, %c)' in text and "func.return %s" in text
    parse_program(p)
    assert Program.from_json(json.loads(json.dumps(p.to_json()))) == p


def test_problems_name_an_undefined_operand_and_a_wrong_type():
    sig = Signature.make("add", [F32, F32], [F32])
    bad = Program.make([("a", F32)], [Operation(sig, ("a", "zz"), "v0")], ["v0"])
    assert any("zz is not defined" in x for x in bad.problems())
    wrong = Program.make([("a", "tensor<4xf16>")], [Operation(sig, ("a", "a"), "v0")], ["v0"])
    assert any("is tensor<4xf16>" in x for x in wrong.problems())


def test_cut_at_makes_a_value_an_argument_and_prunes():
    p = fma_program().cut_at("m")
    assert p.ops() == ["add"] and p.argument_names == ("c", "m")


# ---------------------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 7])
def test_generated_programs_are_valid_and_parse(seed):
    stats = Stats()
    seen_ops, seen_patterns = set(), set()
    for i in range(30):
        d = generate(seed, i, Config(max_ops=6), stats=stats)
        p = d.program
        assert p.problems() == [], p
        assert 1 <= len(p.operations) and p.results
        for o in p.operations:
            assert violations(o.signature) == [], o.signature.key()
        parse_program(p)
        seen_ops |= set(p.ops())
        seen_patterns |= set(d.patterns)
    assert stats.rejected == 0, stats.reasons[:3]
    assert {"add", "multiply", "compare", "select", "convert"} & seen_ops
    assert len(seen_patterns) >= 5


def test_generation_is_deterministic_per_seed():
    a = [generate(3, i).program for i in range(5)]
    assert a == [generate(3, i).program for i in range(5)]
    assert a != [generate(4, i).program for i in range(5)]
    d = generate(3, 1)
    x1 = draw_inputs(d, rng_for(3, 1), 4)
    x2 = draw_inputs(d, rng_for(3, 1), 4)
    assert all(np.array_equal(u, v, equal_nan=True) for u, v in zip(x1, x2))


# ---------------------------------------------------------------------------------------
# Oracle
# ---------------------------------------------------------------------------------------

def test_oracle_rounds_every_op_to_its_type():
    p = fma_program()
    out = evaluate_program(p, fma_inputs()).results(p)[0][0]
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 in f32; minus 1: 2^-11
    assert out[0] == np.float32(2 ** -11)
    assert out[1] == 10 and out[2] == 0 and not np.signbit(out[2])
    assert np.isnan(out[3])                       # inf * inf - inf


def test_masks_propagate_from_implementation_defined_elements():
    t = "tensor<3xsi32>"
    p = build([("x", t), ("y", t)], [("q", "divide", ["x", "y"], t, None),
                                      ("r", "add", ["q", "x"], t, None),
                                      ("z", "add", ["x", "y"], t, None)], ["r", "z"])
    x, y = np.int32([[6, 1, 4]]), np.int32([[3, 0, 2]])
    v = evaluate_program(p, [x, y])
    assert v.masked["r"][0].tolist() == [False, True, False]       # division by zero
    assert not v.masked["z"].any()


# ---------------------------------------------------------------------------------------
# Verdicts on planted backends
# ---------------------------------------------------------------------------------------

def test_a_fused_multiply_add_is_caught_exactly():
    v = check_program(FusedMultiplyAdd(), fma_program(), fma_inputs())
    assert v.outcome == "value" and v.findings[0].op == "add"
    assert v.findings[0].fusion is True           # op by op the same backend is right


def test_a_different_but_allowed_evaluation_passes():
    assert check_program(WideThenRound(), fma_program(), fma_inputs()).outcome == "pass"
    assert check_program(OpByOp(), fma_program(), fma_inputs()).outcome == "pass"


def _identity_programs():
    one = dense_text(np.ones(4, np.float32))
    times_one = build([("x", F32)], [("k", "constant", [], F32, {"value": one}),
                                     ("y", "multiply", ["x", "k"], F32, None)], ["y"])
    minus_self = build([("x", F32)], [("y", "subtract", ["x", "x"], F32, None)], ["y"])
    x = np.float32([[np.nan, -np.inf, -0.0, 1e-45]])
    return times_one, minus_self, [x]


def test_x_times_one_rewrite_passes_x_minus_x_rewrite_fails():
    times_one, minus_self, x = _identity_programs()
    assert check_program(TimesOneIsX(), times_one, x).outcome == "pass"
    v = check_program(MinusSelfIsZero(), minus_self, x)
    assert v.outcome == "nan", v


def test_metamorphic_check_catches_a_changed_inexact_op():
    """exp feeding add: the add reads an inexact value, so it is judged on the backend's
    own operands; a backend whose fused add is off while alone it is right fails."""

    class OffByOneInProgram(OpByOp):
        def step(self, o, env, producers):
            out = super().step(o, env, producers)
            if o.op == "add":
                return [np.nextafter(out[0], np.float32(np.inf))]
            return out

    p = build([("x", F32), ("y", F32)], [("e", "exponential", ["x"], F32, None),
                                         ("s", "add", ["e", "y"], F32, None)], ["s"])
    x = [np.float32([[0.5, 1, 2, 3]]), np.float32([[1, 2, 3, 4]])]
    assert check_program(OpByOp(), p, x).outcome == "pass"
    v = check_program(OffByOneInProgram(), p, x)
    assert v.outcome == "value" and "metamorphic" in v.checks
    assert v.findings[0].check == "metamorphic" and v.findings[0].op == "add"


def test_minimisation_shrinks_a_planted_divergence_to_three_ops():
    t = F32
    p = build([("a", t), ("b", t), ("c", t), ("d", t)],
              [("n", "negate", ["d"], t, None),
               ("u", "maximum", ["n", "c"], t, None),
               ("m", "multiply", ["a", "b"], t, None),
               ("s", "add", ["m", "c"], t, None),
               ("w", "add", ["s", "u"], t, None),
               ("z", "subtract", ["w", "d"], t, None)], ["z", "u"])
    a, _, c = fma_inputs()
    x = [np.repeat(a, 3, 0), np.repeat(a, 3, 0), np.repeat(c, 3, 0),
         np.zeros((3, 4), np.float32)]
    v = check_program(FusedMultiplyAdd(), p, x)
    assert v.diverges
    m = minimize(FusedMultiplyAdd(), p, x, v)
    assert m.verdict.outcome == v.outcome
    assert len(m.program.operations) <= 3, m.program
    assert "add" in m.program.ops() and "multiply" in m.program.ops()
    assert m.inputs[0].shape[0] == 1


def test_a_backend_without_a_program_path_is_unsupported():
    class Vendor(Backend):
        name = "vendor"

        def run(self, case):
            raise AssertionError

    v = check_program(Vendor(), fma_program(), fma_inputs())
    assert v.outcome == "unsupported" and "no program path" in v.message


# ---------------------------------------------------------------------------------------
# Real backends and the CLI
# ---------------------------------------------------------------------------------------

def test_jax_runs_an_integer_program_exactly():
    pytest.importorskip("jax")
    from conformance.backends import get_backend
    t = "tensor<4xsi32>"
    p = build([("x", t), ("y", t)], [("m", "multiply", ["x", "y"], t, None),
                                      ("s", "add", ["m", "x"], t, None),
                                      ("k", "compare", ["s", "y"], "tensor<4xi1>",
                                       {"comparison_direction": "LT",
                                        "compare_type": "SIGNED"}),
                                      ("r", "select", ["k", "s", "y"], t, None)], ["r", "m"])
    x = [np.int32([[2 ** 31 - 1, -3, 0, 7]]), np.int32([[2, 5, -1, 7]])]
    assert check_program(get_backend("jax"), p, x).outcome == "pass"


def test_cli_programs_writes_records(tmp_path):
    pytest.importorskip("jax")
    from conformance.apps.cli import main
    code = main(["programs", "--count", "3", "--seed", "1", "--backend", "jax", "--out",
                 str(tmp_path), "--no-minimize", "--quiet"])
    records = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records] == ["run"] + ["program"] * 3 + ["end"]
    assert records[0]["command"] == "programs" and records[0]["count"] == 3
    assert code == (1 if any(r["outcome"] not in ("pass", "unsupported")
                             for r in records[1:-1]) else 0)


def test_a_saved_bf16_program_reproducer_reads_its_inputs_back(tmp_path):
    """np.savez writes ml_dtypes' bf16 as raw |V2 bytes: repro.py must read the arguments
    back in the program's own type (else the oracle refuses them and it exits 1 on any
    backend); it exits 0 on a right backend and 1 on the fused one."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    import ml_dtypes
    from conformance.apps.programs import save_reproducer
    t = "tensor<4xbf16>"
    program = build([("a", t), ("b", t), ("c", t)],
                    [("m", "multiply", ["a", "b"], t, None),
                     ("s", "add", ["m", "c"], t, None)], ["s"])
    a = np.array([1 + 2 ** -7, 3, -0.0, 2], ml_dtypes.bfloat16)
    c = np.array([-1, 1, 0.0, -5], ml_dtypes.bfloat16)
    d = save_reproducer(tmp_path, OpByOp(), 0, 0, program, [a[None], a[None], c[None]])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    for locator, code in (("test_programs:OpByOp", 0), ("test_programs:FusedMultiplyAdd", 1)):
        proc = subprocess.run([sys.executable, "repro.py", locator], cwd=d, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == code, (locator, proc.stdout[-1500:] + proc.stderr[-1500:])
