"""The op specs: every file loads and validates; malformed files fail with path and key."""
from pathlib import Path

import pytest
import yaml

from conformance.specs import SpecError, UnknownOp, load_file, load_spec, op_names, validate_all
from conformance.specs.validity import checks, violations
from conformance.core.case import Signature

ELEMENTWISE_OPS = {
    "abs", "add", "and", "atan2", "bitcast_convert", "cbrt", "ceil", "clamp", "compare",
    "complex", "convert", "cosine", "count_leading_zeros", "divide", "exponential",
    "exponential_minus_one", "floor", "imag", "is_finite", "log", "log_plus_one", "logistic",
    "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "power", "real",
    "reduce_precision", "remainder", "round_nearest_afz", "round_nearest_even", "rsqrt",
    "select", "shift_left", "shift_right_arithmetic", "shift_right_logical", "sign", "sine",
    "sqrt", "subtract", "tanh", "xor", "tan"}


def test_every_elementwise_op_has_a_valid_spec():
    assert ELEMENTWISE_OPS <= set(op_names())
    assert validate_all() == []


def test_every_spec_has_examples_constraints_and_xla_names():
    for name in op_names():
        spec = load_spec(name)
        assert spec.examples, name
        # 003 labels no constraint for ops without inputs or attributes (replica_id,
        # partition_id): their one rule is the result type, which the type rows hold.
        assert spec.constraints or not (spec.inputs or spec.attributes), name
        # (XLA has no HLO op for the current text's quantization ops: `xla: []` there)
        assert spec.xla_names or (spec.family == "quantization" and
                                  spec.spec_version == "stablehlo-2026-08"), name
        assert spec.type_bindings(), name


def test_unknown_op_is_a_clear_error():
    with pytest.raises(UnknownOp, match="unknown op 'nosuch'"):
        load_spec("nosuch")


def _write(tmp_path: Path, name: str, data) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


def _add_spec():
    return yaml.safe_load((Path(load_spec("add").path)).read_text())


def test_missing_key_names_file_and_key(tmp_path):
    data = _add_spec()
    del data["constraints"]
    p = _write(tmp_path, "add", data)
    with pytest.raises(SpecError) as e:
        load_file(p)
    assert str(p) in str(e.value) and "constraints" in str(e.value)


def test_bad_expression_names_the_key(tmp_path):
    data = _add_spec()
    data["constraints"][0]["check"] = "same_type(lhs, rhs, reslt)"
    p = _write(tmp_path, "add", data)
    with pytest.raises(SpecError, match=r"constraints\[0\]\.check.*reslt"):
        load_file(p)


def test_unsafe_expression_is_rejected(tmp_path):
    data = _add_spec()
    data["constraints"][0]["check"] = "__import__('os').system('true')"
    p = _write(tmp_path, "add", data)
    with pytest.raises(SpecError, match="constraints"):
        load_file(p)


def test_unknown_element_type_in_spec(tmp_path):
    data = _add_spec()
    data["type_variables"]["E"]["types"] = ["f33"]
    p = _write(tmp_path, "add", data)
    with pytest.raises(SpecError, match=r"type_variables\.E\.types.*f33"):
        load_file(p)


def test_example_of_wrong_shape(tmp_path):
    data = _add_spec()
    data["examples"][0]["inputs"]["lhs"]["value"] = [1, 2, 3]
    p = _write(tmp_path, "add", data)
    with pytest.raises(SpecError, match=r"examples\[0\]\.inputs\.lhs"):
        load_file(p)


def test_invalid_yaml_names_line(tmp_path):
    p = _write(tmp_path, "add", "op: [\n")
    with pytest.raises(SpecError, match="line 2"):
        load_file(p)


def test_file_name_must_match_op(tmp_path):
    p = _write(tmp_path, "sub", _add_spec())
    with pytest.raises(SpecError, match="must match the file name"):
        load_file(p)


def test_violations_report_each_broken_rule():
    ok = Signature.make("add", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xf32>"])
    assert violations(ok) == []
    bad = Signature.make("add", ["tensor<2xf32>", "tensor<2xsi32>"], ["tensor<2xf32>"])
    assert violations(bad) == ["C1"]
    abs_u = Signature.make("abs", ["tensor<2xui8>"], ["tensor<2xui8>"])
    assert violations(abs_u) == ["I1", "O1"]
    cmp = Signature.make("compare", ["tensor<2xf32>", "tensor<2xf32>"], ["tensor<2xi1>"],
                         {"comparison_direction": "LT", "compare_type": "SIGNED"})
    assert violations(cmp) == ["C3"]
    rp = Signature.make("reduce_precision", ["tensor<2xf32>"], ["tensor<2xf32>"],
                        {"exponent_bits": 0, "mantissa_bits": 3})
    assert violations(rp) == ["C2"]


def test_bitcast_shape_rule_matches_spec_example():
    ok = Signature.make("bitcast_convert", ["tensor<2xf32>"], ["tensor<2x4xsi8>"])
    assert violations(ok) == []
    wrong = Signature.make("bitcast_convert", ["tensor<2xf32>"], ["tensor<2x2xsi8>"])
    assert violations(wrong) == ["C1"]
    complex_mix = Signature.make("bitcast_convert", ["tensor<2xcomplex<f32>>"], ["tensor<2xsi64>"])
    assert "C2" in violations(complex_mix)


def test_checks_list_labels_in_spec_order():
    ids = [c.id for c in checks(load_spec("compare"))]
    assert ids == ["I1", "I2", "I3", "I4", "C1", "C2", "C3", "O1"]


def test_accuracy_lookup_by_type_then_class():
    sine = load_spec("sine")
    assert sine.accuracy("f32").kind == "ulp" and sine.accuracy("f32").bound == 4
    assert sine.accuracy("bf16").bound == 1
    assert sine.accuracy("complex<f32>").kind == "rel_eps"
    assert load_spec("add").accuracy("f32").kind == "exact"
    assert load_spec("bitcast_convert").accuracy("f32").kind == "bits"
