"""Regions as data: the bodies of sort, scatter, reduce, ... as one small text form.

DESIGN.md asks that a region be data, not a Python callable, so that the oracle
can evaluate it, the StableHLO emitter can print it and a report can show it.
The form is a typed expression::

    (f32, f32) -> compare(arg0, arg1, 'LT', 'TOTALORDER')
    (si32, si32) -> arg1
    (f32, si8, f32, si8) -> (add(arg0, arg2), max(arg1, arg3))

Before ``->``: the element types of the rank-0 block arguments ``arg0, arg1, ...``.
After it: an argument, a call of a StableHLO element-wise op (operands first, then
the op's spec attributes as literals in the spec's order), or a tuple of those
when the region returns several values. The op names, operand counts and attribute
order all come from the op specs (specs/ops/*.yaml); result types are inferred by
running the oracle on one zero of each argument type, so nothing here knows any op.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import keyword
import re
from typing import Any, Sequence, Union

import numpy as np

from conformance.core.types import ElementType, TensorType, element_type

__all__ = ["RegionError", "Region", "Arg", "Call", "parse", "make", "evaluate",
           "implementation_defined",
           "block_text", "jax_function", "simple_call", "retyped"]


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
    # Type-check every call once, by running it on a zero of each argument type.
    call_types: dict = {}
    for n in results:
        _eval_node(n, [np.zeros((), t.dtype) for t in types],
                   lambda call, _, out: call_types.setdefault(call, element_type(out.dtype)))
    return Region(text, types, results, call_types)


def _node(x: ast.AST, text: str, nargs: int) -> Node:
    if isinstance(x, ast.Name):
        m = re.fullmatch(r"arg(\d+)", x.id)
        if not m or int(m.group(1)) >= nargs:
            raise RegionError(f"region {text!r}: unknown name {x.id!r} "
                              f"(the arguments are arg0 .. arg{nargs - 1})")
        return Arg(int(m.group(1)))
    if isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and not x.keywords:
        from conformance.specs import SpecError, load_spec
        op = _op_name(x.func.id)
        try:
            spec = load_spec(op)
        except (SpecError, KeyError, FileNotFoundError):
            raise RegionError(f"region {text!r}: unknown op {op!r}") from None
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


def _eval_node(n: Node, args: Sequence[np.ndarray], on_call=None) -> np.ndarray:
    """``n`` evaluated on ``args`` through the oracles; ``on_call(call, operands, out)``
    sees every call on the way."""
    if isinstance(n, Arg):
        return args[n.index]
    from conformance import oracles
    operands = [_eval_node(o, args, on_call) for o in n.operands]
    try:
        out = tuple(oracles.evaluate(n.op, operands, dict(n.attributes)))[0]
    except Exception as e:  # noqa: BLE001 - any oracle refusal is a type error here
        raise RegionError(f"region call {n.op}: {str(e).splitlines()[0]}") from None
    if on_call is not None:
        on_call(n, operands, out)
    return out


def evaluate(text: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The region's results, element-wise over arrays of one shape (one array per
    block argument, each of that argument's element type)."""
    region = parse(text)
    if len(args) != len(region.arg_types):
        raise RegionError(f"region {text!r} takes {len(region.arg_types)} arguments, "
                          f"got {len(args)}")
    return [_eval_node(n, args) for n in region.results]


def implementation_defined(text: str, args: Sequence[np.ndarray]) -> np.ndarray:
    """Per element (``args``: same-shape arrays, one per block argument): does evaluating
    the region meet an implementation-defined rule of an op it calls (integer overflow of
    add, a complex minimum with a NaN part, ...)? Each call is judged by its own op's
    spec, on the values it receives."""
    from conformance import oracles
    from conformance.core.case import Signature
    region = parse(text)
    shape = np.asarray(args[0]).shape
    hit = np.zeros(int(np.prod(shape, dtype=np.int64)), bool)

    def judge(call: Call, operands: Sequence[np.ndarray], out: np.ndarray) -> None:
        sig = Signature.make(call.op, [TensorType((), element_type(o.dtype)) for o in operands],
                             [TensorType((), element_type(out.dtype))], dict(call.attributes))
        for mask in oracles.implementation_defined(sig, operands, expected=[out]).values():
            hit[...] |= np.asarray(mask).reshape(-1) > 0

    if hit.size:
        flat = [np.asarray(a).reshape(-1) for a in args]
        for n in region.results:
            _eval_node(n, flat, judge)
    return hit.reshape(shape)


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


# ---------------------------------------------------------------------------
# Printing (the emitter's part)
# ---------------------------------------------------------------------------

def block_text(text: str, prefix: str, indent: str = "      ") -> str:
    """The region as an MLIR region in generic form, ``{ ^bb0(...): ... }``. Value
    names carry ``prefix`` so that they never shadow the enclosing function's."""
    from conformance.core.case import Signature
    from conformance.emitter import op_text
    region = parse(text)
    args = [f"%{prefix}arg{i}" for i in range(len(region.arg_types))]
    scalar = [TensorType((), t) for t in region.arg_types]
    lines: list[str] = []
    counter = [0]

    def emit(n: Node) -> tuple[str, TensorType]:
        if isinstance(n, Arg):
            return args[n.index], scalar[n.index]
        operands = [emit(o) for o in n.operands]
        result = TensorType((), region.type_of(n))
        sig = Signature.make(n.op, [t for _, t in operands], [result], dict(n.attributes))
        name = f"%{prefix}{counter[0]}"
        counter[0] += 1
        lines.append(op_text(sig, [v for v, _ in operands], name))
        return name, result

    outs = [emit(n) for n in region.results]
    lines.append(f'"stablehlo.return"({", ".join(v for v, _ in outs)}) : '
                 f'({", ".join(t.mlir() for _, t in outs)}) -> ()')
    params = ", ".join(f"{a}: {t.mlir()}" for a, t in zip(args, scalar))
    body = "".join(f"\n{indent}  {line}" for line in lines)
    return f"{{\n{indent}^bb0({params}):{body}\n{indent}}}"


# ---------------------------------------------------------------------------
# Backends' helpers
# ---------------------------------------------------------------------------

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


def jax_function(text: str):
    """A jax function of the rank-0 block arguments computing the region, composed of
    the jax backend's per-op builders (so a region means the same as the ops it calls)."""
    from conformance.backends.jax_ops import build
    from conformance.core.case import Signature
    region = parse(text)

    def compile_node(n: Node):
        if isinstance(n, Arg):
            return lambda *xs: xs[n.index]
        parts = [compile_node(o) for o in n.operands]
        types = [TensorType((), region.type_of(o)) for o in n.operands]
        result = TensorType((), region.type_of(n))
        fn = build(Signature.make(n.op, types, [result], dict(n.attributes)))
        return lambda *xs: fn(*(p(*xs) for p in parts))

    fns = [compile_node(n) for n in region.results]
    return lambda *xs: tuple(f(*xs) for f in fns)
