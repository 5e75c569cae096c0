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

import numpy as np

from hypothesis import strategies as st

from conformance.core.case import Signature
from conformance.specs import OpSpec, load_spec
from conformance.specs import expressions as ex
from conformance.core.types import family_of
from conformance.core.types import TensorType, element_type, value_type


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

    def permutation(self, n: int) -> list[int]:
        raise NotImplementedError

    def booleans(self, n: int) -> list[bool]:
        return [self.choice([False, True]) for _ in range(n)]


class DrawChooser(Chooser):
    def __init__(self, draw, profile: ShapeProfile):
        self.draw, self.profile = draw, profile

    def shape(self, min_rank, max_rank):
        return self.draw(shapes(min_rank, max_rank, self.profile))

    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def integer(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def permutation(self, n):
        return list(self.draw(st.permutations(list(range(n)))))

    def booleans(self, n):
        return list(self.draw(st.lists(st.booleans(), min_size=n, max_size=n)))


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

    def permutation(self, n):
        return list(range(n))

    def booleans(self, n):
        return [False] * n


def _bound(b, env):
    return ex.evaluate(b, env) if isinstance(b, str) else b


def draw_variable(chooser: Chooser, var, env: dict):
    """One named draw of the spec's ``variables`` list (see specs/schema.yaml)."""
    p = var.params
    if var.kind == "integer":
        lo, hi = (_bound(b, env) for b in p)
        return chooser.integer(lo, hi)
    if var.kind == "integers":
        out: list[int] = []
        for i in range(_bound(p["length"], env)):
            scope = {**env, "i": i, "prev": list(out)}
            lo, hi = (_bound(b, scope) for b in p["each"])
            out.append(chooser.integer(lo, hi))
        return out
    if var.kind == "permutation":
        return chooser.permutation(_bound(p, env))
    if var.kind == "subset":
        n = _bound(p["of"], env)
        lo, hi = (_bound(b, env) for b in p.get("size", [0, n]))
        size = chooser.integer(max(0, lo), min(n, hi))
        return sorted(chooser.permutation(n)[:size])
    if var.kind == "booleans":
        return chooser.booleans(_bound(p, env))
    if var.kind == "choice":
        return chooser.choice(list(ex.evaluate(p, env)))
    raise ValueError(f"unknown variable kind {var.kind!r}")


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
    if t.type is not None:              # a value type expression (tensor or tuple)
        return value_type(ex.evaluate(t.type, env))
    et = ex.evaluate(t.element_type, env)
    shape_expr = t.shape[0] if len(t.shape) == 1 else chooser.choice(list(t.shape))
    return TensorType(tuple(ex.evaluate(shape_expr, env)), element_type(et))


def _tensors(chooser: Chooser, specs, env) -> list[TensorType]:
    """The flat tensor list: a variadic spec entry gives ``count`` tensors, each
    evaluated with ``k`` bound to its position."""
    out: list[TensorType] = []
    for t in specs:
        if t.variadic:
            out += [_tensor(chooser, t, {**env, "k": k})
                    for k in range(ex.evaluate(t.variadic, env))]
        else:
            out.append(_tensor(chooser, t, env))
    return out


def _attribute(chooser: Chooser, a, env):
    if a.value is not None:
        return ex.evaluate(a.value, env)
    if a.kind == "tensor":
        # A tensor constant: values drawn by numpy from a seed the chooser picks (the
        # canonical signature: seed 0), held as its exact MLIR text (hashable, and what
        # the emitter prints).
        from conformance.core.dense import dense_text
        from .values import draw_array
        et = ex.evaluate(a.element_type, env)
        shape = tuple(ex.evaluate(a.shape, env))
        rng = np.random.default_rng(chooser.integer(0, 2 ** 32 - 1))
        return dense_text(draw_array(et, shape, rng, a.distribution or "default"))
    if a.kind == "enum":
        return chooser.choice(ex.evaluate(a.choose, env) if a.choose else list(a.values))
    if a.kind == "enum_list":
        lo, hi = (ex.evaluate(b, env) if isinstance(b, str) else b for b in a.range)
        options = ex.evaluate(a.choose, env) if a.choose else list(a.values)
        return [chooser.choice(list(options)) for _ in range(chooser.integer(lo, hi))]
    if a.kind == "boolean":
        return chooser.choice([False, True])
    if a.kind == "float":
        return float(chooser.choice(list(a.values)))
    if a.kind == "string":
        return str(chooser.choice(list(a.values)))
    lo, hi = (ex.evaluate(b, env) if isinstance(b, str) else b for b in a.range)
    return chooser.integer(lo, hi)


def _uses_draws(spec: OpSpec) -> None:
    """Load the spec family's generator module where the spec calls ``draw(...)`` (the
    module registers those functions: generators/control_flow.py)."""
    if spec.name not in _DRAWS_LOADED:
        if "draw(" in repr([spec.data.get("variables", []), spec.data.get("regions", [])]):
            from conformance.specs import import_family_module
            import_family_module(spec.name, "conformance.generators.{family}")
        _DRAWS_LOADED.add(spec.name)


_DRAWS_LOADED: set[str] = set()


def build(chooser: Chooser, spec: OpSpec, binding: Mapping[str, str]) -> Signature:
    """One signature for a fixed type binding, every free choice made by ``chooser``."""
    _uses_draws(spec)
    env: dict = dict(binding)
    for name, sv in spec.shape_variables.items():
        env[name] = chooser.shape(sv.get("min_rank", 0), sv.get("max_rank", 4))
    for var in spec.variables:
        env[var.name] = draw_variable(chooser, var, env)
    attrs = {}
    for a in spec.attributes:
        attrs[a.name] = _attribute(chooser, a, {**env, **attrs})
    env.update(attrs)
    # an optional attribute not set is left out of the signature (as of the module: the
    # dialect's optional attribute absent); the rules read it as None
    optional = {a.name for a in spec.attributes if a.optional}
    attrs = {n: v for n, v in attrs.items() if not (v is None and n in optional)}
    inputs = _tensors(chooser, spec.inputs, env)
    # Output shapes may name the inputs (gather's result shape is the spec's C13 formula
    # over the start indices' shape), so that invalid.py can re-derive them.
    outputs = _tensors(chooser, spec.outputs,
                       {**env, **dict(zip((t.name for t in spec.inputs),
                                          spec.split_inputs(inputs)))})
    regions: tuple[str, ...] = ()
    if spec.regions:
        env.update(zip((t.name for t in spec.inputs), spec.split_inputs(inputs)))
        env.update(zip((t.name for t in spec.outputs), spec.split_outputs(outputs)))
        regions = tuple(t for r in spec.regions
                        for t in (ex.evaluate(r.value, env) if r.variadic
                                  else [ex.evaluate(r.value, env)]))
    # A collective's process grid (issue 18): the spec's variables of these names.
    grid = {k: int(env[k]) for k in ("num_replicas", "num_partitions") if k in env}
    return Signature.make(spec.name, inputs, outputs, attrs, regions=regions, **grid)


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
    expression is exactly that variable (a tuple-typed one: its first leaf).
    """
    out: dict[str, str] = {}
    pairs = list(zip(spec.inputs, spec.split_inputs(sig.input_types))) + \
        list(zip(spec.outputs, spec.split_outputs(sig.result_types)))
    for name in spec.type_variables:
        for t, tt in pairs:
            if t.element_type == name:
                if t.variadic and not tt:
                    continue
                first = tt[0] if t.variadic else tt
                if not first.leaves():
                    continue
                out[name] = first.leaves()[0].element_type.name
                break
        else:
            # A quantized tensor's expression builds its type from the family variable
            # and drawn parameters (``quantized(Q, ...)``): the column is the family.
            for t, tt in pairs:
                if t.element_type is None or t.variadic or not tt.leaves() or \
                        name not in ex.names(t.element_type):
                    continue
                family = family_of(tt.leaves()[0].element_type)
                if family is not None:
                    out[name] = family.name
                    break
            else:
                # (uniform_quantize's operand: ``quantized(O, ...) if is_quantized(O) else
                # O``, a float type here) the one type variable such an expression names
                domain = spec.type_variables[name][0]
                for t, tt in pairs:
                    if t.element_type is None or t.variadic or not tt.leaves():
                        continue
                    named = ex.names(t.element_type) & set(spec.type_variables)
                    et = tt.leaves()[0].element_type
                    if named == {name} and et in domain:
                        out[name] = et.name
                        break
    return out
