"""A region's calls are typed by the called ops' specs, without running an oracle.

For every op that can appear in a region (every element-wise op) and every input type
binding its spec allows, the result type that the spec's output rule gives a call
(``conformance.specs.regions.parse``, through ``OpSpec.result_types_for``) is the type
of what the oracle returns for those inputs, and the result type of the op's canonical
signature. Input types the spec does not allow are refused.
"""
import numpy as np
import pytest

from conformance import oracles
from conformance.core.types import ALL_ELEMENT_TYPES, element_type
from type_sampling import sampled_pairs  # noqa: E402
from conformance.generators import canonical
from conformance.specs import all_specs, load_spec
from conformance.specs import regions
from conformance.specs.regions import RegionError

# (a region's text holds plain element types: ops drawn with quantized tensors only,
# uniform_quantize and kin, are no region's)
ELEMENTWISE = [s.name for s in all_specs() if s.elementwise and not s.quantized]
# The ops whose result type the inputs do not determine (the spec leaves it free).
FREE_RESULT = {"convert", "bitcast_convert"}


def _literal(value) -> str:
    return repr(value.item() if hasattr(value, "item") else value)


def _call(spec, input_types, attributes) -> str:
    args = [f"arg{i}" for i in range(len(input_types))]
    literals = [_literal(attributes[a.name]) for a in spec.attributes if a.name in attributes]
    body = f"{spec.name}({', '.join(args + literals)})"
    return regions.make([t.element_type for t in input_types], body)


def _zeros(types):
    return [np.zeros((), t.element_type.dtype) for t in types]


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_spec_rule_types_equal_what_the_oracle_returns(op):
    spec = load_spec(op)
    assert spec.type_bindings()
    for binding in spec.type_bindings():
        sig = canonical(spec, binding, ())
        text = _call(spec, sig.input_types, sig.attributes)
        if op in FREE_RESULT:
            with pytest.raises(RegionError, match="cannot be inferred"):
                regions.parse(text)
            with pytest.raises(oracles.OracleError, match="pass result_types"):
                oracles.evaluate(op, _zeros(sig.input_types), sig.attributes)
            continue
        typed = list(regions.parse(text).result_types)
        returned = [element_type(x.dtype)
                    for x in oracles.evaluate(op, _zeros(sig.input_types), sig.attributes)]
        assert typed == returned, (text, binding)
        assert typed == [t.element_type for t in sig.result_types], (text, binding)


@pytest.mark.parametrize("op", sorted(set(ELEMENTWISE) - FREE_RESULT))
def test_input_types_the_spec_does_not_allow_are_refused(op):
    spec = load_spec(op)
    allowed = {tuple(t.element_type.name for t in canonical(spec, b, ()).input_types)
               for b in spec.type_bindings()}
    # The first input typed by a type variable gets X, the others Y (all X when X == Y);
    # an input of a fixed type (select's pred) keeps it.
    fixed = [None if t.element_type in spec.type_variables else t.element_type.strip("'")
             for t in spec.inputs]
    attrs = canonical(spec, spec.type_bindings()[0], ()).attributes
    literals = [_literal(attrs[a.name]) for a in spec.attributes if a.name in attrs]
    args = [f"arg{i}" for i in range(len(fixed))]
    tried = 0
    pairs = sampled_pairs(ALL_ELEMENT_TYPES)      # the newer float formats sampled (CI time)
    for x, y in pairs:
        names, first = [], True
        for f in fixed:
            names.append(f or (x.name if first else y.name))
            first = first and bool(f)
        text = regions.make(names, f"{op}({', '.join(args + literals)})")
        tried += 1
        if tuple(names) in allowed:
            assert regions.parse(text).result_types, text
        else:
            with pytest.raises(RegionError, match=f"region call {op}: "):
                regions.parse(text)
    assert tried == len(pairs)


def test_a_refusal_names_the_rule():
    with pytest.raises(RegionError, match=r"region call add: add: rhs is si32, but an earlier "
                                          r"input makes E f32"):
        regions.parse("(f32, si32) -> add(arg0, arg1)")
    with pytest.raises(RegionError, match=r"region call sqrt: sqrt: E cannot be si32"):
        regions.parse("(si32) -> sqrt(arg0)")
    with pytest.raises(RegionError, match=r"region call select: select: pred cannot be f32"):
        regions.parse("(f32, f32, f32) -> select(arg0, arg1, arg2)")
