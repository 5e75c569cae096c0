"""The StableHLO emitter: every case of every op prints as a module that jaxlib's MLIR
parses and verifies; goldens pin the exact text; invalid cases still print, and we
measure which of them the MLIR verifier itself rejects (those never reach a backend)."""
import collections
import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conformance.mlir import emitter
from conformance.core.case import Signature
from conformance.mlir.emitter import (EmitError, VerifyError, module_text, op_syntax, parse,
                                      verifier_rejects)
from conformance.checking.golden import examples as golden_examples
from conformance.generators import breakable, candidates, canonical, signatures
from conformance.specs import SpecError, load_spec, op_names, parse_spec
from conformance.core.types import ALL_ELEMENT_TYPES, TensorType
from type_sampling import sampled  # noqa: E402  (CI time: the newer float formats once)

SETTINGS = settings(max_examples=8, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))
SHAPES = ((), (3,), (2, 0))


def _held(sig: Signature) -> bool:
    """Whether jaxlib's dialect holds ``sig``'s program: not one of its spec's
    ``mlir.jaxlib_lacks`` (a newer spec's form; the emitter prints no module for it)."""
    return emitter.jaxlib_lacks(sig) is None


def _verify(sig: Signature) -> None:
    if not _held(sig):
        with pytest.raises(EmitError, match="jaxlib"):
            module_text(sig)
        return
    text = module_text(sig)
    if _quantized(sig):
        return _verify_with_xla(sig, text)
    try:
        parse(text)
    except VerifyError as e:
        pytest.fail(f"{sig.key()}: {e}\n{text}")


def _quantized(sig: Signature) -> bool:
    return any(t.element_type.is_quantized for t in sig.input_leaves + sig.result_leaves)


#: Valid programs (by the 2026-08 text) that XLA's StableHLO verifier refuses, measured on
#: jaxlib 0.10.2 (IREE 3.13's verifier too; the xla-cpu and iree-cpu entries say so): a
#: quantized select whose branches differ in scale or zero point (its C2 asks only equal
#: baseline types). op -> (which signatures, XLA's words).
VERIFIER_REFUSES = {
    "select_quantized": (lambda sig: sig.input_types[1] != sig.input_types[2],
                         "requires compatible types for non-predicate operands"),
}


def _verify_with_xla(sig: Signature, text: str) -> None:
    """A program with quantized types, which jaxlib's Python bindings cannot parse (no
    quant dialect), through StableHLO's parser and verifier in jaxlib's C++ (serialising
    it as a portable artifact parses and verifies it, and compiles nothing: XLA CPU's
    compile aborts the process on some verified quantized programs, e.g. a quantized
    reshape, "shape.h:843 Check failed: buffer != nullptr"; docs/quantized-types.md)."""
    from jaxlib.mlir.dialects import stablehlo
    try:
        stablehlo.serialize_portable_artifact_str(text, stablehlo.get_current_version())
    except Exception as e:  # noqa: BLE001 - the verifier's message went to stderr
        which, _words = VERIFIER_REFUSES.get(sig.op, (lambda sig: False, None))
        if which(sig):
            return
        pytest.fail(f"{sig.key()}: StableHLO's parser or verifier refused it: {e}\n{text}")


# ---------------------------------------------------------------------------
# The spec's mlir section
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", op_names())
def test_every_spec_names_a_registered_op(op):
    syntax = emitter.op_syntax(op)
    names = [syntax.name]
    if syntax.name_fields:      # chlo.broadcast_{operation}: every value of the attribute
        (field,) = syntax.name_fields
        (attr,) = [a for a in load_spec(op).attributes if a.name == field]
        names = [syntax.name.format(**{field: v}) for v in attr.values]
    if syntax.jaxlib_lacks and syntax.jaxlib_lacks[0].strip() == "True":
        # an op newer than jaxlib's dialect (collective_reduce): if this fails, jaxlib
        # learnt it, and its spec's mlir.jaxlib_lacks is out of date
        assert not any(emitter.context().is_registered_operation(n) for n in names), names
        return
    for name in names:
        assert emitter.context().is_registered_operation(name), name


def _spec_data(op):
    return copy.deepcopy(load_spec(op).data)


def test_schema_requires_the_mlir_section():
    data = _spec_data("add")
    del data["mlir"]
    with pytest.raises(SpecError, match="mlir"):
        parse_spec(data, "add.yaml")


def test_placeholders_must_name_spec_attributes():
    data = _spec_data("reduce_precision")
    data["mlir"]["attributes"]["exponent_bits"] = "{exponent_bit} : i32"
    # Loading the spec checks its mlir section: the error names the file and the key.
    with pytest.raises(SpecError, match=r"reduce_precision.yaml: mlir.attributes.exponent_bits: "
                                        r".*exponent_bit\b.*not attributes"):
        parse_spec(data, "reduce_precision.yaml")
    data = _spec_data("reduce_precision")
    del data["mlir"]["attributes"]["mantissa_bits"]
    with pytest.raises(SpecError, match="mantissa_bits"):
        parse_spec(data, "reduce_precision.yaml")


# ---------------------------------------------------------------------------
# Valid signatures: every op, every type binding, parse and verify
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", op_names())
def test_canonical_signatures_verify(op):
    """Every type binding (all of convert's and bitcast_convert's) at rank 0, rank 1
    and a zero-sized shape."""
    spec = load_spec(op)
    for binding in sampled(spec.type_bindings()):
        for shape in SHAPES:
            _verify(canonical(spec, binding, shape))


@pytest.mark.parametrize("op", op_names())
def test_generated_signatures_verify(op):
    seen = []

    @SETTINGS
    @given(signatures(op, profile="quick"))
    def check(sig):
        seen.append(sig)
        _verify(sig)

    check()
    assert seen


@pytest.mark.parametrize("op", op_names())
def test_spec_examples_verify(op):
    """The signatures of the spec's own examples (with their attribute values)."""
    for ex in golden_examples(load_spec(op)):
        _verify(ex.case.signature)


@pytest.mark.parametrize("et", ALL_ELEMENT_TYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_element_type_prints_and_verifies(et, shape):
    t = TensorType(shape, et)
    sig = Signature.make("convert", [t], [TensorType(shape, ALL_ELEMENT_TYPES[-1])])
    text = module_text(sig)
    assert f"%arg0: {t.mlir()}" in text
    _verify(sig)


def test_element_type_spellings():
    spelled = {et.name: TensorType((2, 0), et).mlir() for et in ALL_ELEMENT_TYPES}
    assert spelled["i1"] == "tensor<2x0xi1>"
    assert spelled["si4"] == "tensor<2x0xi4>"
    assert spelled["ui4"] == "tensor<2x0xui4>"
    assert spelled["si64"] == "tensor<2x0xi64>"
    assert spelled["f8E4M3FN"] == "tensor<2x0xf8E4M3FN>"
    assert spelled["f8E5M2"] == "tensor<2x0xf8E5M2>"
    assert spelled["bf16"] == "tensor<2x0xbf16>"
    assert spelled["complex<f64>"] == "tensor<2x0xcomplex<f64>>"
    assert TensorType((), ALL_ELEMENT_TYPES[0]).mlir() == "tensor<i1>"


# ---------------------------------------------------------------------------
# Goldens: the exact text
# ---------------------------------------------------------------------------

GOLDENS = [
    (Signature.make("add", ["tensor<2x3xsi32>"] * 2, ["tensor<2x3xsi32>"]),
     """module {
  func.func public @main(%arg0: tensor<2x3xi32>, %arg1: tensor<2x3xi32>) -> (tensor<2x3xi32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
    func.return %0 : tensor<2x3xi32>
  }
}
"""),
    (Signature.make("compare", ["tensor<2xf32>"] * 2, ["tensor<2xi1>"],
                    {"comparison_direction": "LT", "compare_type": "FLOAT"}),
     """module {
  func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> (tensor<2xi1>) {
    %0 = "stablehlo.compare"(%arg0, %arg1) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    func.return %0 : tensor<2xi1>
  }
}
"""),
    (Signature.make("reduce_precision", ["tensor<6xbf16>"], ["tensor<6xbf16>"],
                    {"exponent_bits": 5, "mantissa_bits": 2}),
     """module {
  func.func public @main(%arg0: tensor<6xbf16>) -> (tensor<6xbf16>) {
    %0 = "stablehlo.reduce_precision"(%arg0) {exponent_bits = 5 : i32, mantissa_bits = 2 : i32} : (tensor<6xbf16>) -> tensor<6xbf16>
    func.return %0 : tensor<6xbf16>
  }
}
"""),
    (Signature.make("convert", ["tensor<si8>"], ["tensor<bf16>"]),
     """module {
  func.func public @main(%arg0: tensor<i8>) -> (tensor<bf16>) {
    %0 = "stablehlo.convert"(%arg0) : (tensor<i8>) -> tensor<bf16>
    func.return %0 : tensor<bf16>
  }
}
"""),
    (Signature.make("select", ["tensor<2x0xi1>", "tensor<2x0xcomplex<f32>>",
                               "tensor<2x0xcomplex<f32>>"], ["tensor<2x0xcomplex<f32>>"]),
     """module {
  func.func public @main(%arg0: tensor<2x0xi1>, %arg1: tensor<2x0xcomplex<f32>>, %arg2: tensor<2x0xcomplex<f32>>) -> (tensor<2x0xcomplex<f32>>) {
    %0 = "stablehlo.select"(%arg0, %arg1, %arg2) : (tensor<2x0xi1>, tensor<2x0xcomplex<f32>>, tensor<2x0xcomplex<f32>>) -> tensor<2x0xcomplex<f32>>
    func.return %0 : tensor<2x0xcomplex<f32>>
  }
}
"""),
]


@pytest.mark.parametrize("sig,expected", GOLDENS, ids=lambda x: x.op if isinstance(x, Signature) else "")
def test_golden_text(sig, expected):
    assert module_text(sig) == expected
    _verify(sig)


def test_tan_is_stablehlo_tan():
    sig = Signature.make("tan", ["tensor<2xf8E4M3FN>"], ["tensor<2xf8E4M3FN>"])
    assert '"stablehlo.tan"(%arg0)' in module_text(sig)


def test_the_interpreter_runs_the_emitted_text():
    """The text is what the StableHLO reference interpreter that jaxlib ships runs."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo
    sig = GOLDENS[1][0]
    module = parse(module_text(sig))
    with emitter.context():
        args = [ir.DenseElementsAttr.get(np.array(v, np.float32)) for v in ([1.0, 3.0], [1.1, 2.9])]
        out = stablehlo.eval_module(module, args)
    assert str(out[0]).startswith("dense<[true, false]>")


# ---------------------------------------------------------------------------
# Printing details and errors
# ---------------------------------------------------------------------------

def test_several_results_print_and_the_verifier_judges_them():
    sig = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<2xf32>", "tensor<2xf32>"])
    text = module_text(sig)
    assert '%0:2 = "stablehlo.add"' in text and "-> (tensor<2xf32>, tensor<2xf32>)" in text
    assert "func.return %0#0, %0#1 : tensor<2xf32>, tensor<2xf32>" in text
    assert verifier_rejects(sig)


def test_verifier_error_is_one_line_with_the_op_name():
    sig = Signature.make("add", ["tensor<2xf32>", "tensor<2xsi32>"], ["tensor<2xf32>"])
    with pytest.raises(VerifyError) as e:
        emitter.verify(sig)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("stablehlo.add:") and "element type" in msg
    assert e.value.text == module_text(sig)


def test_syntax_error_is_reported_too():
    with pytest.raises(VerifyError, match="stablehlo.add"):
        parse('module { func.func @main() { %0 = "stablehlo.add"( } }')


def test_a_malformed_region_is_a_one_line_emit_error():
    sig = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<2xf32>"],
                         regions=("return add(arg0, arg1)",))
    with pytest.raises(EmitError, match="region"):
        module_text(sig)


def test_unknown_attribute_is_an_error():
    sig = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<2xf32>"], {"foo": 1})
    with pytest.raises(EmitError, match="foo"):
        module_text(sig)


def test_missing_attribute_is_left_out_and_the_verifier_decides():
    sig = Signature.make("compare", ["tensor<2xf32>"] * 2, ["tensor<2xi1>"],
                         {"compare_type": "FLOAT"})
    text = module_text(sig)
    assert "comparison_direction" not in text
    assert "comparison_direction" in verifier_rejects(sig)


def test_attribute_values():
    v = emitter.attribute_value
    assert v(True) == "true" and v(False) == "false"
    assert v(-1) == "-1" and v(np.int64(3)) == "3"
    assert v([0, 1, 2]) == "0, 1, 2" and v([[0, 1], [2, 3]]) == "[0, 1], [2, 3]"
    assert v(1e-5) == "1.0e-05" and v(0.5) == "0.5"
    with pytest.raises(EmitError):
        v(float("nan"))


def test_grid_attributes_on_the_module():
    sig = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<2xf32>"], num_replicas=2)
    text = module_text(sig)
    assert text.startswith("module attributes {mhlo.num_partitions = 1 : i32, "
                           "mhlo.num_replicas = 2 : i32} {")
    _verify(sig)


# ---------------------------------------------------------------------------
# Invalid signatures: they print, and which does the verifier reject?
# ---------------------------------------------------------------------------

def _invalid(op, bindings_per_op=8):
    """(rule, candidate) for a deterministic sample of type bindings, at ranks 1 and 0."""
    spec = load_spec(op)
    bindings = spec.type_bindings()
    step = max(1, len(bindings) // bindings_per_op)
    for binding in bindings[::step]:
        for shape in ((2,), ()):
            valid = canonical(spec, binding, shape)
            for rule in breakable(spec):
                for c in candidates(spec, valid, rule):
                    yield rule, c


@pytest.mark.parametrize("op", op_names())
def test_invalid_signatures_print(op, record_property):
    """Every invalid candidate prints exactly the types it declares; record whether the
    MLIR verifier rejects it (rejected ones test the parser, not the backend)."""
    stats = collections.defaultdict(lambda: [0, 0])
    from conformance.specs.host import device_signature
    decomposed = op_syntax(op).decomposition
    for rule, sig0 in _invalid(op):
        if not _held(sig0):         # (no program: every MLIR backend declines it)
            stats[rule][0] += 1
            continue
        if decomposed:
            # a form printed as its decomposition (conformance/core/decompositions.py):
            # one that breaks a rule no StableHLO op checks has no program at all
            try:
                text = module_text(sig0)
            except EmitError:
                stats[rule][0] += 1
                continue
        text = module_text(sig0)
        sig = device_signature(sig0)    # a host transfer's queues are not in the program
        # @main takes and returns tensors (a tuple's leaves); the op shows the declared types
        for i, t in enumerate(sig.input_leaves):
            assert f"%arg{i}: {t.mlir()}" in text
        # (a dynamic result, set_dimension_size's, prints `?` bounded by its static size)
        outs = [t.mlir() for t in sig.result_leaves] if sig.has_tuples else \
            emitter.result_type_texts(sig)
        assert f"-> ({', '.join(outs)})" in text
        # (an op whose regions read its last input, `captured`, takes the others only)
        operands = (sig.input_types[:len(load_spec(op).inputs) - 1]
                    if op_syntax(op).captured else sig.input_types)
        if not decomposed:      # (a decomposition's ops show their own operands)
            assert f": ({', '.join(t.mlir() for t in operands)}) -> " in text
        stats[rule][0 if verifier_rejects(sig0) else 1] += 1
    # rule -> [rejected by the MLIR verifier, accepted (reaches a backend)]; in JUnit XML
    record_property("verifier_rejected_accepted", dict(stats))


def test_verifier_rejects_mismatched_element_types():
    spec = load_spec("add")
    found = list(candidates(spec, canonical(spec, {"E": "f32"}, (2,)), "C1"))
    mixed = [c for c in found if len({t.element_type for t in c.input_types + c.result_types}) > 1]
    assert mixed
    for c in mixed:
        assert "element type" in verifier_rejects(c), c.key()


def test_verifier_lets_some_invalid_cases_through():
    """Known laxness of the StableHLO verifier in jaxlib 0.10.2 (if this fails, the
    verifier got stricter: those invalid cases no longer reach a backend)."""
    # compare C3: compare_type is not checked against the element type.
    lax = Signature.make("compare", ["tensor<2xf32>"] * 2, ["tensor<2xi1>"],
                         {"comparison_direction": "LT", "compare_type": "SIGNED"},
                         invalid="C3")
    assert verifier_rejects(lax) is None
    # bitcast_convert C1: equal bit widths but a different rank, where the shorter shape
    # is a prefix of the longer one (the verifier zips the two shapes).
    lax = Signature.make("bitcast_convert", ["tensor<2xf16>"], ["tensor<2x2xsi16>"], invalid="C1")
    assert verifier_rejects(lax) is None
    strict = Signature.make("bitcast_convert", ["tensor<2xf16>"], ["tensor<3xsi16>"], invalid="C1")
    assert verifier_rejects(strict)


# ---------------------------------------------------------------------------
# The verifier's own process (issue 31, item 5)
# ---------------------------------------------------------------------------

def test_the_verifier_process_is_no_fork_of_this_threaded_one(monkeypatch):
    """The programs that crash jaxlib's verifier are verified in a process of its own,
    started without ``os.fork`` (this process runs XLA's threads: a fork may deadlock,
    and jax warns on each), and the crashes are still the verifier's answers."""
    import os
    import warnings
    import jax
    import jax.numpy as jnp
    jax.jit(lambda x: x + 1)(jnp.ones(2))     # XLA's threads run; jax's fork hook is in

    def no_fork():
        raise AssertionError("os.fork() called in a process that runs XLA's threads")
    monkeypatch.setattr(os, "fork", no_fork)
    fpe = Signature.make("all_to_all", ["tensor<4xf32>"], ["tensor<4xf32>"],
                         {"split_dimension": 0, "concat_dimension": 0, "split_count": 2,
                          "replica_groups": [], "channel_id": 0}, num_replicas=2,
                         invalid="C6")
    segv = Signature.make("atan2_with_broadcast_dimensions", ["tensor<2xbf16>"] * 2,
                          ["tensor<2xbf16>"], {"operation": "atan2",
                                               "broadcast_dimensions": [-1]}, invalid="C3")
    no_operands = Signature.make("map", [], ["tensor<3x2xf32>"], {"dimensions": [0, 1]},
                                 regions=("(f32, f32) -> add(arg0, arg1)",), invalid="C2")
    verifier_rejects.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answers = [verifier_rejects(s) for s in (fpe, segv, no_operands, fpe)]
    assert [str(w.message) for w in caught if "fork" in str(w.message)] == []
    assert answers[0] == answers[3] == "the MLIR verifier crashed (exit code -8)"   # SIGFPE
    assert answers[1] == "the MLIR verifier crashed (exit code -11)"               # SIGSEGV
    assert "expected 1 or more operands, but found 0" in answers[2]   # after a crash, anew


def test_a_verifier_that_does_not_answer_is_killed(monkeypatch):
    from conformance.mlir.emitter import VerifierProcess
    import conformance.mlir.emitter as em
    v = VerifierProcess(timeout=1.0)
    monkeypatch.setattr(em, "_CHILD_MAIN", "import time; time.sleep(60)")
    try:
        assert v.ask("module {}") == "the MLIR verifier did not answer"
        monkeypatch.undo()
        v.timeout = 120.0       # a real child's start (jaxlib's import) is seconds on a loaded machine
        assert v.ask("module {}") is None          # a new process took over
        v._proc.kill()
        v._proc.wait()
        assert v.ask("module {}") is None          # and another, after it ended
    finally:
        v.close()


def test_a_run_prints_no_fork_warning(tmp_path):
    """Issue 31: every run printed jax's "os.fork() was called ... JAX is multithreaded"
    (8 times for the invalid programs of this one op and type); with warnings as errors
    it prints none, and the crash of the verifier is still the invalid program's record."""
    import json
    import subprocess
    import sys
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "conformance",
                           "run", "--ops", "atan2_with_broadcast_dimensions", "--types", "bf16",
                           "--depth", "quick", "--no-progress", "--no-examples", "--out",
                           str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]      # (XLA's FTZ: a divergence)
    assert "fork" not in proc.stderr, proc.stderr[-2000:]
    verifier = [r.get("verifier") for r in map(json.loads, (out / "results.jsonl")
                                               .read_text().splitlines())
                if r["kind"] == "invalid"]
    assert "the MLIR verifier crashed (exit code -11)" in verifier
