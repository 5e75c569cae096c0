"""Regions as data: the bodies of sort, scatter, reduce, ... as one small text form.

DESIGN.md asks that a region be data, not a Python callable, so that the oracle
can evaluate it (oracles/regions.py), the StableHLO emitter can print it
(conformance/mlir/emitter.py, ``block_text``), a backend can map it (the jax backend:
``conformance.backends.jax_ops.jax_function``) and a report can show it.
The form is a typed expression::

    (f32, f32) -> compare(arg0, arg1, 'LT', 'TOTALORDER')
    (si32, si32) -> arg1
    (f32, si8, f32, si8) -> (add(arg0, arg2), max(arg1, arg3))

Before ``->``: the element types of the rank-0 block arguments ``arg0, arg1, ...``.
After it: an argument, a call of a StableHLO element-wise op (operands first, then
the op's spec attributes as literals in the spec's order), a rank-0 constant
(``constant('dense<0.0> : tensor<f32>')``, typed by its value: what a comparator as
jax writes it reads), or a tuple of those when the region returns several values. The op names, operand counts and attribute
order all come from the op specs (specs/ops/*.yaml), and so do the types: a call is
typed by the called op's spec, its operands' element types checked against the
spec's type variables and its result type given by the spec's output type rule
(:meth:`conformance.specs.OpSpec.result_types_for`). Nothing here knows any op, and
nothing runs an oracle.

The op specs reach this module through :func:`use_specs`, which the spec loader
(specs/__init__.py) calls with its ``load_spec``: the specs' expressions
build and read regions, so this module cannot import the loader.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import keyword
import re
from typing import Any, Callable, Sequence, Union

from conformance.core.types import ElementType, TensorType, element_type

__all__ = ["RegionError", "Region", "Arg", "Call", "Node", "parse", "make", "retyped",
           "simple_call", "use_specs"]


class RegionError(ValueError):
    """A region text that does not parse or does not type-check; one line."""


@dataclasses.dataclass(frozen=True)
class Arg:
    index: int


@dataclasses.dataclass(frozen=True)
class Call:
    op: str
    operands: tuple["Node", ...]
    attributes: tuple[tuple[str, Any], ...]


Node = Union[Arg, Call]


@dataclasses.dataclass(frozen=True)
class Region:
    text: str
    arg_types: tuple[ElementType, ...]
    results: tuple[Node, ...]
    #: the element type of every call in the body (inferred once, by :func:`parse`)
    call_types: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def type_of(self, n: Node) -> ElementType:
        return self.arg_types[n.index] if isinstance(n, Arg) else self.call_types[n]

    @property
    def result_types(self) -> tuple[ElementType, ...]:
        return tuple(self.type_of(n) for n in self.results)


# The op specs by name (conformance.specs.load_spec, registered by the loader) and the
# exceptions that lookup raises for an unknown op.
_specs: Callable[[str], Any] | None = None
_unknown: tuple[type[BaseException], ...] = (KeyError,)


def use_specs(lookup: Callable[[str], Any],
              unknown: tuple[type[BaseException], ...] = (KeyError,)) -> None:
    """Read op specs through ``lookup(name)``; ``unknown``: what it raises for a name
    that is not an op."""
    global _specs, _unknown
    _specs, _unknown = lookup, tuple(unknown)
    parse.cache_clear()


def _spec(op: str, text: str):
    if _specs is None:
        raise RegionError(f"region {text!r}: no op specs to type it with "
                          "(conformance.specs registers them)")
    try:
        return _specs(op)
    except _unknown:
        raise RegionError(f"region {text!r}: unknown op {op!r}") from None


# Ops named like Python keywords (and, or, not) are called as and_(...) in the parsed
# tree; _op_name undoes it.
_KEYWORD_CALL = re.compile(r"\b(" + "|".join(keyword.kwlist) + r")\s*\(")


def _op_name(name: str) -> str:
    return name[:-1] if name.endswith("_") and keyword.iskeyword(name[:-1]) else name


_HEADER = re.compile(r"^\s*\(([^()]*)\)\s*->\s*(.+?)\s*$", re.S)


def make(arg_types: Sequence["ElementType | str"], body: str) -> str:
    """The region text for ``arg_types`` and ``body``."""
    return f"({', '.join(element_type(t).name for t in arg_types)}) -> {body}"


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Region:
    """Parse and type-check a region text (cached: regions are part of signatures)."""
    m = _HEADER.match(text)
    if not m:
        raise RegionError(f"region {text!r}: expected '(T0, T1, ...) -> body'")
    try:
        types = tuple(element_type(t.strip()) for t in m.group(1).split(",") if t.strip())
    except (KeyError, ValueError) as e:
        raise RegionError(f"region {text!r}: {e}") from None
    try:
        tree = ast.parse(_KEYWORD_CALL.sub(r"\1_(", m.group(2)), mode="eval").body
    except SyntaxError as e:
        raise RegionError(f"region {text!r}: {e.msg}") from None
    items = tree.elts if isinstance(tree, ast.Tuple) else [tree]
    results = tuple(_node(x, text, len(types)) for x in items)
    call_types: dict = {}
    for n in results:
        _type(n, types, call_types)
    return Region(text, types, results, call_types)


def _node(x: ast.AST, text: str, nargs: int) -> Node:
    if isinstance(x, ast.Name):
        m = re.fullmatch(r"arg(\d+)", x.id)
        if not m or int(m.group(1)) >= nargs:
            raise RegionError(f"region {text!r}: unknown name {x.id!r} "
                              f"(the arguments are arg0 .. arg{nargs - 1})")
        return Arg(int(m.group(1)))
    if isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and not x.keywords:
        op = _op_name(x.func.id)
        spec = _spec(op, text)
        operands = [a for a in x.args if not isinstance(a, ast.Constant)]
        literals = [a.value for a in x.args if isinstance(a, ast.Constant)]
        if x.args[:len(operands)] != operands:
            raise RegionError(f"region {text!r}: {op}: operands come before attributes")
        if len(operands) != len(spec.inputs) or len(literals) > len(spec.attributes):
            raise RegionError(f"region {text!r}: {op} takes {len(spec.inputs)} "
                              f"operand(s) and up to {len(spec.attributes)} attribute(s)")
        attrs = tuple((a.name, v) for a, v in zip(spec.attributes, literals))
        return Call(op, tuple(_node(a, text, nargs) for a in operands), attrs)
    raise RegionError(f"region {text!r}: expected argN, op(...) or a tuple, "
                      f"found {ast.unparse(x)!r}")


def _type(n: Node, arg_types: Sequence[ElementType], call_types: dict) -> ElementType:
    """The element type of ``n``; every call's goes into ``call_types``. A call is typed
    by its op's spec: the operands must fit the spec's input types (one element type per
    type variable, among those it allows) and the result is the spec's output rule."""
    if isinstance(n, Arg):
        return arg_types[n.index]
    if n in call_types:
        return call_types[n]
    if not n.operands:          # constant('dense<...> : tensor<f32>'): its value's type
        call_types[n] = _constant_type(n)
        return call_types[n]
    operands = [TensorType((), _type(o, arg_types, call_types)) for o in n.operands]
    try:
        results = _specs(n.op).result_types_for(operands, strict=True)
    except ValueError as e:         # SpecError: the spec's rules refuse these operands
        raise RegionError(f"region call {n.op}: {str(e).splitlines()[0]}") from None
    if len(results) != 1 or not isinstance(results[0], TensorType):
        raise RegionError(f"region call {n.op}: a call in a region has one tensor result, "
                          f"{n.op} has {len(results)}")
    call_types[n] = results[0].element_type
    return call_types[n]


def _constant_type(n: Call) -> ElementType:
    """The element type of a call without operands: the rank-0 type of its tensor
    attribute's value (the spec's attribute of kind ``tensor``: constant's ``value``)."""
    from conformance.core.dense import DenseError, dense_type
    attrs = dict(n.attributes)
    for a in _specs(n.op).attributes:
        if a.kind == "tensor" and isinstance(attrs.get(a.name), str):
            try:
                t = dense_type(attrs[a.name])
            except DenseError as e:
                raise RegionError(f"region call {n.op}: {e}") from None
            if t.shape != ():
                raise RegionError(f"region call {n.op}: a region's value is rank 0, "
                                  f"{a.name} is {t.mlir()}")
            return t.element_type
    raise RegionError(f"region call {n.op}: no operands and no tensor value to type it by")


def retyped(text: str, mapping: dict[str, str] | None = None,
            positions: dict[int, str] | None = None) -> str:
    """The same body with other block argument types: every argument of type ``t`` made
    ``mapping[t]``, or argument ``i`` made ``positions[i]`` (for negative cases)."""
    m = _HEADER.match(text)
    if not m:
        raise RegionError(f"region {text!r}: expected '(T0, T1, ...) -> body'")
    types = [t.strip() for t in m.group(1).split(",") if t.strip()]
    types = [(mapping or {}).get(t, t) for t in types]
    for i, t in (positions or {}).items():
        types[i] = t
    return f"({', '.join(types)}) -> {m.group(2)}"


def simple_call(text: str) -> tuple[str, dict[str, Any], tuple[int, ...]] | None:
    """``('add', {}, (0, 1))`` for ``add(arg0, arg1)``, ``('arg', {}, (1,))`` for a
    region returning ``arg1``: the one-op forms a backend may map onto a fixed API
    (jax.lax.scatter_add, ...); None for anything else."""
    region = parse(text)
    if len(region.results) != 1:
        return None
    (n,) = region.results
    if isinstance(n, Arg):
        return "arg", {}, (n.index,)
    if all(isinstance(o, Arg) for o in n.operands):
        return n.op, dict(n.attributes), tuple(o.index for o in n.operands)
    return None
