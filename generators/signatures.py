"""Hypothesis strategies for *valid* signatures, built from an op's spec by construction.

A spec declares type variables (``E``: the element types the op allows; ``R``
for convert's result), shape variables (``S``), and for every input and output an
element-type expression and one or more shape expressions over those variables.
Drawing a signature is: bind the type variables (respecting their ``where``
filters), draw the shapes, evaluate every expression, and draw the attributes from
their legal values. Nothing op-specific lives here; it all comes from the YAML.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from hypothesis import strategies as st

from conformance.case import Signature
from conformance.specs import OpSpec, load_spec
from conformance.specs import expressions as ex
from conformance.types import TensorType, element_type


@dataclasses.dataclass(frozen=True)
class ShapeProfile:
    """How big generated shapes get. Ranks go from the spec's min to max rank."""

    max_side: int = 6          # largest dimension size
    max_size: int = 128        # largest element count of one input
    zero_size_chance: int = 8  # one draw in this many gets a zero-sized dimension


SHAPE_PROFILES = {
    "quick": ShapeProfile(max_side=4, max_size=32),
    "default": ShapeProfile(max_side=6, max_size=128),
    "deep": ShapeProfile(max_side=16, max_size=2048),
}


@st.composite
def shapes(draw, min_rank: int = 0, max_rank: int = 4,
           profile: ShapeProfile = SHAPE_PROFILES["default"]) -> list[int]:
    """Shapes of rank min_rank..max_rank, at most ``profile.max_size`` elements,
    sometimes with a zero-sized dimension."""
    rank = draw(st.integers(min_rank, max_rank))
    dims: list[int] = []
    budget = profile.max_size
    for i in range(rank):
        remaining = rank - i - 1
        cap = max(1, min(profile.max_side, budget // (2 ** remaining) if remaining else budget))
        d = draw(st.integers(1, cap))
        dims.append(d)
        budget = max(1, budget // d)
    if rank and draw(st.integers(0, profile.zero_size_chance - 1)) == 0:
        dims[draw(st.integers(0, rank - 1))] = 0
    return dims


class Chooser:
    """Where a signature's free choices come from: hypothesis draws, or fixed picks."""

    def shape(self, min_rank: int, max_rank: int) -> list[int]:
        raise NotImplementedError

    def choice(self, options: list):
        raise NotImplementedError

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError


class DrawChooser(Chooser):
    def __init__(self, draw, profile: ShapeProfile):
        self.draw, self.profile = draw, profile

    def shape(self, min_rank, max_rank):
        return self.draw(shapes(min_rank, max_rank, self.profile))

    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def integer(self, lo, hi):
        return self.draw(st.integers(lo, hi))


class FixedChooser(Chooser):
    """The first legal option everywhere and a given base shape: a canonical signature."""

    def __init__(self, base_shape: list[int]):
        self.base_shape = list(base_shape)

    def shape(self, min_rank, max_rank):
        shape = self.base_shape[:max_rank]
        return shape + [1] * (min_rank - len(shape))

    def choice(self, options):
        return options[0]

    def integer(self, lo, hi):
        return lo


def bind_types(chooser: Chooser, spec: OpSpec, fixed: Mapping[str, str] | None) -> dict[str, str]:
    binding: dict[str, str] = {}
    for name, (domain, where) in spec.type_variables.items():
        if fixed and name in fixed:
            binding[name] = element_type(fixed[name]).name
            continue
        choices = [t.name for t in domain
                   if where is None or ex.evaluate(where, {**binding, name: t.name})]
        binding[name] = chooser.choice(choices)
    return binding


def _tensor(chooser: Chooser, t, env) -> TensorType:
    et = ex.evaluate(t.element_type, env)
    shape_expr = t.shape[0] if len(t.shape) == 1 else chooser.choice(list(t.shape))
    return TensorType(tuple(ex.evaluate(shape_expr, env)), element_type(et))


def _attribute(chooser: Chooser, a, env):
    if a.kind == "enum":
        return chooser.choice(ex.evaluate(a.choose, env) if a.choose else list(a.values))
    if a.kind == "boolean":
        return chooser.choice([False, True])
    lo, hi = (ex.evaluate(b, env) if isinstance(b, str) else b for b in a.range)
    return chooser.integer(lo, hi)


def build(chooser: Chooser, spec: OpSpec, binding: Mapping[str, str]) -> Signature:
    """One signature for a fixed type binding, every free choice made by ``chooser``."""
    env: dict = dict(binding)
    for name, sv in spec.shape_variables.items():
        env[name] = chooser.shape(sv.get("min_rank", 0), sv.get("max_rank", 4))
    inputs = [_tensor(chooser, t, env) for t in spec.inputs]
    attrs = {a.name: _attribute(chooser, a, env) for a in spec.attributes}
    outputs = [_tensor(chooser, t, env) for t in spec.outputs]
    return Signature.make(spec.name, inputs, outputs, attrs)


def canonical(spec: OpSpec, binding: Mapping[str, str], base_shape=(2,)) -> Signature:
    """A fixed, small valid signature for ``binding`` (no hypothesis involved)."""
    return build(FixedChooser(list(base_shape)), spec, binding)


def signatures(op: "str | OpSpec", binding: Mapping[str, str] | None = None,
               profile: "ShapeProfile | str" = "default") -> st.SearchStrategy[Signature]:
    """Valid signatures of ``op``; ``binding`` fixes some type variables (``{"E": "f32"}``)."""
    spec = load_spec(op) if isinstance(op, str) else op
    prof = SHAPE_PROFILES[profile] if isinstance(profile, str) else profile

    @st.composite
    def strategy(draw):
        chooser = DrawChooser(draw, prof)
        return build(chooser, spec, bind_types(chooser, spec, binding))

    return strategy()


def binding_of(spec: OpSpec, sig: Signature) -> dict[str, str]:
    """Recover the type binding of a valid signature (its matrix column).

    Each type variable is read from the first input or output whose element type
    expression is exactly that variable.
    """
    out: dict[str, str] = {}
    for name in spec.type_variables:
        for t, tt in list(zip(spec.inputs, sig.input_types)) + list(zip(spec.outputs,
                                                                          sig.result_types)):
            if t.element_type == name:
                out[name] = tt.element_type.name
                break
    return out
