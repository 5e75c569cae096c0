"""The interpreter backend: jaxlib's StableHLO reference interpreter (eval_module).

Covers: the short name and isolation flag, hand-written module text, bit-exact
numpy <-> DenseElementsAttr conversion for all 19 element types (list, splat and
raw-hex printed forms, NaN payloads, signed zeros, subnormals, integer extremes),
ops against the oracle (with the interpreter's known divergences written down),
rejections, diagnostics, the context recycling that bounds memory, and the inputs
known to kill the interpreter's process (run in a subprocess).
"""
import os
import platform
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Unsupported, get_backend, jaxlib_support
from conformance.backends.interpreter_backend import InterpreterError
from conformance.core.case import Case, Signature
from conformance.core.literals import from_bit_patterns
from conformance.core.types import ALL_ELEMENT_TYPES, element_type

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_xla_backend import (  # noqa: E402
    ADD_I32, FAMILY, divergences, identity_text, same_bits, special_values)


@pytest.fixture(scope="module")
def interp():
    return get_backend("interpreter")


def test_short_name_isolation_and_description(interp):
    assert interp.name == "interpreter" and interp.isolate is True
    assert jaxlib_support.supported(interp.describe()["jaxlib"])


def test_runs_hand_written_module_text(interp):
    sig = Signature.make("add", ["tensor<2xsi32>"] * 2, ["tensor<2xsi32>"])
    run = interp.compile_text(ADD_I32, sig)
    (out,) = run([np.array([1, 2], np.int32), np.array([3, 4], np.int32)])
    assert out.dtype == np.int32 and out.tolist() == [4, 6]


@pytest.mark.parametrize("et", ALL_ELEMENT_TYPES, ids=str)
def test_every_element_type_round_trips_exactly(interp, et):
    x = special_values(et)
    n = x.shape[0]
    sig = Signature.make("convert", [f"tensor<{n}x{et.name}>"], [f"tensor<{n}x{et.name}>"])
    # through eval_module unchanged (argument in, the same value out)
    transfer = interp.compile_text(identity_text(f"tensor<{n}x{et.mlir}>"), sig)
    assert same_bits(transfer([x])[0], x)
    # convert to the same type, through the emitter: every bit kept
    assert same_bits(interp.run(Case(sig, (x,)))[0], x)
    # each printed form of a result: element list (<= 100), raw hex (> 100), splat
    many = np.concatenate([x] * (101 // n + 1))
    splat = np.repeat(x[-1:], 7, axis=0)
    for v in (many, splat, x[:1].reshape(()), x[:0].reshape(0, 2)):
        t = f"tensor<{''.join(f'{d}x' for d in v.shape)}{et.name}>"
        assert same_bits(interp.run(Case.make("convert", [v], [t]))[0], v), v.shape


@pytest.mark.parametrize("name", ["bf16", "f16", "f8E4M3FN", "f8E5M2", "si4", "ui4"])
def test_attribute_conversion_is_exact_for_every_value(interp, name):
    """Every value of the narrow types, in the printed list form (chunks of <= 100
    elements: decimals rounded exactly, specials as hex) and the raw hex form."""
    et = element_type(name)
    x = from_bit_patterns(np.arange(1 << et.bits, dtype=np.uint64), et)
    conv = jaxlib_support.AttributeConverter(interp.lib, jaxlib_support.make_context(interp.lib))
    for chunk in [x] + np.array_split(x, max(1, x.size // 97)):
        assert same_bits(conv.from_attribute(conv.to_attribute(chunk)), chunk)


def test_decimal_tokens_round_to_nearest_even_without_double_rounding():
    bf16 = element_type("bf16")
    # 1.00390625 is the midpoint of bf16 1.0 (0x3F80) and 1.0078125 (0x3F81)
    tokens = ["1.00390625", "1.0039062500000001", "1.0039062499999999", "-1.00390625",
              "1.01171875", "-0.000000e+00", "0x7F81", "9.183550e-41"]
    got = [hex(int(b)) for b in jaxlib_support._float_bits(tokens, bf16)]
    assert got == ["0x3f80", "0x3f81", "0x3f80", "0xbf80", "0x3f82", "0x8000", "0x7f81", "0x1"]


def test_add_on_i1_is_logical_or(interp):
    case = Case.make("add", [np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)],
                     ["tensor<4xi1>"])
    assert interp.run(case)[0].tolist() == [False, True, True, True]


# Where the reference interpreter itself departs from the spec (and the oracle).
KNOWN = {
    # compare ignores compare_type = TOTALORDER: NaNs compare unordered and -0 == +0,
    # as with FLOAT. Spec: TOTALORDER is IEEE-754 totalOrder.
    **{f"compare TOTALORDER {d}": "totalorder" for d in ("EQ", "NE", "LT", "LE", "GT", "GE")},
    # reduce_precision with mantissa_bits = 0: no NaN is left in a type without mantissa
    # bits, and the spec's steps overflow it to infinity with the original sign (as the
    # oracle does); the interpreter gives +inf whatever the NaN's sign (XLA keeps NaN).
    "reduce_precision e1m0": "inf_sign",
}


@pytest.mark.parametrize("name", list(FAMILY))
def test_ops_agree_with_the_oracle(interp, name):
    case = FAMILY[name]
    actual = interp.run(case)
    problems = divergences(case, actual)
    if name not in KNOWN:
        assert problems == []
        return
    assert problems, f"{name}: known divergence no longer happens; update KNOWN"
    (out,) = actual
    if KNOWN[name] == "totalorder":
        float_case = Case(Signature.make("compare", case.signature.input_types,
                                         case.signature.result_types,
                                         {**case.attributes, "compare_type": "FLOAT"}),
                          case.inputs)
        assert np.array_equal(out, oracles.evaluate_case(float_case)[0])
    else:
        (want,) = oracles.evaluate_case(case)
        nan = np.isnan(case.inputs[0])
        assert np.all(np.isinf(want[nan])) and (np.signbit(want[nan]) == np.signbit(
            case.inputs[0][nan])).all()
        assert np.all(np.isposinf(out[nan])) and same_bits(out[~nan], want[~nan])


def test_a_signature_the_emitter_cannot_print_is_unsupported(interp):
    sig = Signature.make("add", ["tensor<2xsi32>"] * 2, ["tensor<2xsi32>"],
                         regions=("return add(arg0, arg1)",))
    with pytest.raises(Unsupported, match="no StableHLO text"):
        interp.executable(sig)


def test_invalid_program_is_rejected_at_compile_time(interp):
    sig = Signature.make("add", ["tensor<2xsi32>", "tensor<2xf32>"], ["tensor<2xsi32>"],
                         invalid="C1")
    with pytest.raises(Exception) as e:
        interp.run(Case(sig, (np.zeros(2, np.int32), np.zeros(2, np.float32))))
    assert not isinstance(e.value, Unsupported)
    assert "same element type" in str(e.value)


def test_interpreter_failures_carry_its_diagnostics(interp):
    run = interp.compile_text(ADD_I32, Signature.make("add", ["tensor<2xsi32>"] * 2,
                                                      ["tensor<2xsi32>"]))
    with pytest.raises(InterpreterError, match="incorrect number of arguments"):
        run([np.zeros(2, np.int32)])
    with pytest.raises(InterpreterError, match="invalid input argument type"):
        run([np.zeros(2, np.float32), np.zeros(2, np.float32)])


def test_context_is_replaced_when_its_attributes_grow(interp, monkeypatch):
    arena = interp._arena
    monkeypatch.setattr(arena, "limit", 1000)
    sig = Signature.make("multiply", ["tensor<64xbf16>"] * 2, ["tensor<64xbf16>"])
    run = interp.compile(sig)
    before = arena.generation
    x = np.linspace(-4, 4, 64).astype(ml_dtypes.bfloat16)
    for _ in range(4):
        (out,) = run([x, x])
        assert same_bits(out, (x.astype(np.float32) ** 2).astype(ml_dtypes.bfloat16))
    assert arena.generation >= before + 2


def test_batches(interp):
    sig = Signature.make("shift_left", ["tensor<3xui4>", "tensor<3xui4>"], ["tensor<3xui4>"])
    rng = np.random.default_rng(1)
    stacked = [rng.integers(0, 16, (5, 3)).astype(ml_dtypes.uint4) for _ in range(2)]
    (out,) = interp.batch_executable(sig)(stacked)
    want = oracles.evaluate("shift_left", stacked, result_types=["tensor<5x3xui4>"])[0]
    assert same_bits(out, want)


def _dies(code: str) -> subprocess.CompletedProcess:
    prelude = ("import numpy as np\n"
               "from conformance.backends import get_backend\n"
               "from conformance.core.case import Case\n"
               "b = get_backend('interpreter')\n")
    return subprocess.run([sys.executable, "-c", prelude + code + "\nprint('survived')\n"],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("what, code, signal", [
    pytest.param(
        "integer division by zero (SIGFPE)",
        "b.run(Case.make('divide', [np.array([1], np.int32), np.array([0], np.int32)], "
        "['tensor<1xsi32>']))", -8,
        marks=pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                 reason="only x86 traps on integer division by zero")),
    ("compare LE on complex (LLVM ERROR: Unsupported element type, SIGABRT)",
     "x = np.array([1+1j], np.complex64)\n"
     "b.run(Case.make('compare', [x, x], ['tensor<1xi1>'], "
     "{'comparison_direction': 'LE', 'compare_type': 'FLOAT'}))", -6),
])
def test_known_crashes_kill_the_interpreter_process(what, code, signal):
    """Why InterpreterBackend.isolate is True: these valid cases end the process."""
    p = _dies(code)
    assert "survived" not in p.stdout, what
    assert p.returncode == signal, (what, p.returncode, p.stderr[-500:])


def test_float_token_cache_refills_after_clearing(monkeypatch):
    """Regression: clearing the printed-float cache mid-call lost tokens cached before
    (KeyError '-5.000000e-01' on a long complex<f64> run)."""
    import numpy as np
    from conformance.core.types import element_type
    from conformance.backends import jaxlib_support as js
    et = element_type("f64")
    js._FLOAT_TOKENS.pop(et.name, None)
    js._float_bits(["-5.000000e-01"], et)                      # cached
    monkeypatch.setattr(js, "_FLOAT_TOKENS", {et.name: {**js._FLOAT_TOKENS[et.name],
                                                          **{str(i): i for i in range(1 << 17)}}})
    bits = js._float_bits(["-5.000000e-01", "2.5"], et)       # forces a clear
    assert bits.tolist() == [np.float64(-0.5).view(np.uint64), np.float64(2.5).view(np.uint64)]


ABORTING = {
    "cholesky": (["tensor<2x2xf32>"], {"lower": True}),
    "batch_norm_inference": (["tensor<2x3xf32>"] + ["tensor<3xf32>"] * 4,
                             {"epsilon": 0.001, "feature_index": 1}),
}


@pytest.mark.parametrize("op", list(ABORTING))
def test_ops_the_interpreter_aborts_on_are_declined_after_verifying(interp, op):
    """The interpreter says these ops are "unsupported at the moment" by aborting the process
    (measured below on its raw eval path); the backend declines them with those words once
    the program verified, instead of one crash and bisection per signature, and still
    rejects an invalid program of them."""
    from conformance.backends.interpreter_backend import ABORTS_VERIFIED
    inputs, attributes = ABORTING[op]
    sig = Signature.make(op, inputs, [inputs[0]], attributes)
    with pytest.raises(Unsupported, match="unsupported at the moment"):
        interp.executable(sig)
    assert "openxla/stablehlo#1571" in ABORTS_VERIFIED[op]
    bad = Signature.make(op, inputs, ["tensor<7x7x7xf32>"], attributes, invalid="shape")
    with pytest.raises(Exception) as e:
        interp.executable(bad)
    assert not isinstance(e.value, Unsupported)


def test_the_raw_interpreter_aborts_on_cholesky():
    """The measurement behind the declined list: eval_module on a valid cholesky module
    ends the process with SIGABRT (LLVM ERROR ... unsupported at the moment)."""
    p = _dies("from conformance.mlir.emitter import module_text\n"
              "from conformance.core.case import Signature\n"
              "sig = Signature.make('cholesky', ['tensor<2x2xf32>'], ['tensor<2x2xf32>'], "
              "{'lower': True})\n"
              "run = b._interpret(module_text(sig), 'cholesky')\n"
              "run([np.eye(2, dtype=np.float32)])")
    assert "survived" not in p.stdout
    assert p.returncode == -6 and "unsupported at the moment" in p.stderr, p.stderr[-500:]
