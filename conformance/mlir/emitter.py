"""The canonical program: any signature printed as a StableHLO MLIR module.

Every case of the suite has one textual form, the module that XLA-direct, the
StableHLO reference interpreter and IREE consume and that every reproducer and
report shows (DESIGN.md, "Canonical program")::

    module {
      func.func public @main(%arg0: tensor<2xi32>, %arg1: tensor<2xi32>) -> (tensor<2xi32>) {
        %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
        func.return %0 : tensor<2xi32>
      }
    }

One printer serves every op: the op is written in MLIR's *generic* form, and all
that differs between ops comes from the ``mlir:`` section of the op's spec YAML
(the full op name, and per MLIR attribute a format string over the spec's
attributes; see specs/schema.yaml). Operands are the spec's inputs in spec order;
input and result types are printed exactly as the signature declares them, so
convert, bitcast_convert and *invalid* signatures print what they say (an
invalid program is what a backend is asked to reject).

:func:`parse` parses and verifies a text with the MLIR Python bindings that
jaxlib bundles, in a cached context with the func, stablehlo and chlo dialects
registered; :func:`verifier_rejects` says whether the MLIR verifier itself
rejects a signature (then no backend ever sees that program).

Regions (sort's comparator, scatter's update, ...) are data (specs/regions.py)
and print as generic-form blocks (:func:`block_text`) between the operands and the
attributes. The bodies of if, case and while are region programs
(conformance/core/region_program.py), printed op by op; an op whose spec names a
``captured`` input (``mlir: captured:``) takes it as values its regions read from
``@main``, not as operands. An op whose spec names its region ``mlir: function:`` (call's
callee, composite's decomposition) prints that region program as ``func.func private
@NAME`` after ``@main`` and names it by the symbol attribute ``NAME = @NAME``.
"""
from __future__ import annotations

import atexit
import contextvars
import functools
import math
import os
import re
import string
import threading
from typing import Any, Sequence

from conformance.core.case import Signature
from conformance.core.types import TensorType, TokenType, TupleType
from conformance.specs import load_spec
from conformance.specs.host import device_signature
from conformance.specs.mlir import OpSyntax, syntax_of
from conformance.specs.regions import Arg, Node, RegionError, parse as parse_region
from conformance.core.region_program import (RegionProgramError, is_program as
                                             is_region_program, parse as parse_region_program)

__all__ = ["EmitError", "VerifyError", "OpSyntax", "op_syntax", "attribute_value", "block_text",
           "op_text", "module_text", "context", "parse", "verify", "verifier_rejects", "MLIR_LOCK",
           "functions_of", "jaxlib_lacks", "pack_operands", "unpack_results"]


class EmitError(ValueError):
    """A signature that cannot be printed (regions, an attribute the spec has no syntax for)."""


class VerifyError(ValueError):
    """The MLIR parser or verifier rejected a module; one line: op name and message."""

    def __init__(self, op: str, message: str, text: str):
        super().__init__(f"{op}: MLIR rejected the program: {message}")
        self.op, self.message, self.text = op, message, text


# ---------------------------------------------------------------------------
# The op's syntax, from the spec YAML (read and checked by conformance.specs.mlir)
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def op_syntax(op: str) -> OpSyntax:
    """The checked ``mlir:`` section of ``op``'s spec (loading the spec checked it)."""
    return syntax_of(load_spec(op))


# ---------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------

def _float_text(v: float) -> str:
    if not math.isfinite(v):
        raise EmitError(f"cannot print the non-finite float attribute value {v!r} yet")
    from conformance.core.dense import mlir_float
    return mlir_float(repr(float(v)))


def attribute_value(value: Any) -> str:
    """How one spec attribute value fills a format placeholder.

    str as is, bool as ``true``/``false``, int in decimal, float as an MLIR float
    literal, a list as its items joined by ``", "`` (nested lists in brackets).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ", ".join(f"[{attribute_value(v)}]" if isinstance(v, (list, tuple))
                         else attribute_value(v) for v in value)
    if hasattr(value, "item"):                       # numpy scalar
        return attribute_value(value.item())
    raise EmitError(f"cannot print the attribute value {value!r} ({type(value).__name__})")


def _attributes_text(sig: Signature, syntax: OpSyntax) -> str:
    """`` {name = value, ...}`` or ``""``. An MLIR attribute whose spec attributes the
    signature lacks is left out (the verifier then says whether that is allowed), and so
    is one whose spec attributes are all None: an optional attribute not set
    (dot_general's empty algorithm)."""
    attrs = sig.attributes
    known = set().union(syntax.name_fields, *syntax.fields)
    extra = set(attrs) - known
    if extra:
        raise EmitError(f"{sig.op}: the spec's mlir section has no syntax for attribute(s) "
                        f"{sorted(extra)}")
    parts = []
    for (mlir_name, fmt), names in zip(syntax.attributes, syntax.fields):
        if not names <= set(attrs) or (names and all(attrs[n] is None for n in names)):
            continue
        text = _FORMATTER.format(fmt, **{n: attrs[n] for n in names})
        if text:        # (empty: a false unit attribute, left out)
            parts.append(f"{mlir_name} = {text}")
    if syntax.function:         # the region printed as func.func @NAME (module_text)
        parts.append(f"{syntax.function} = @{_function_symbol(sig, syntax)}")
    return f" {{{', '.join(parts)}}}" if parts else ""


class _AttributeFormatter(string.Formatter):
    """Placeholders print spec attribute values with :func:`attribute_value`; the
    format spec ``i64array`` prints an integer list as MLIR's dense i64 array
    (``array<i64: 1, 2>``, or ``array<i64>`` when empty); ``i64tensor`` a list of
    integer rows as a 2-D si64 tensor constant (replica_groups); ``unit`` a boolean as a
    unit attribute (left out when false: use_global_device_ids); ``precision`` prints a list of
    precision names as ``[#stablehlo<precision DEFAULT>, ...]`` (precision_config)."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "i64array":
            items = ", ".join(attribute_value(v) for v in value)
            return f"array<i64: {items}>" if items else "array<i64>"
        if format_spec == "unit":           # a unit attribute: present when true
            return "unit" if value else ""
        if format_spec == "i64tensor":      # a 2-D list: dense<[[0, 1]]> : tensor<1x2xi64>
            rows = [list(r) for r in value]
            cols = {len(r) for r in rows}
            if len(cols) > 1:
                raise EmitError(f"rows of different lengths {rows} make no 2-D tensor")
            body = "[" + ", ".join(f"[{attribute_value(r)}]" for r in rows) + "]" \
                if rows and rows[0] else ""
            return f"dense<{body}> : tensor<{len(rows)}x{cols.pop() if cols else 0}xi64>"
        if format_spec == "precision":
            items = ", ".join(f"#stablehlo<precision {attribute_value(v)}>" for v in value)
            return f"[{items}]"
        if format_spec == "channel_type":   # #stablehlo.channel_handle's integer type
            if value not in _CHANNEL_TYPES:
                raise EmitError(f"unknown channel_type {value!r} (one of {list(_CHANNEL_TYPES)})")
            return str(_CHANNEL_TYPES[value])
        if format_spec == "symbols":        # called_computations: [@f, @g]
            return "[" + ", ".join(f"@{attribute_value(v)}" for v in value) + "]"
        if format_spec == "string":         # a string constant, quoted and escaped
            return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
        if format_spec:
            raise EmitError(f"unknown attribute format spec {format_spec!r}")
        return attribute_value(value)


_FORMATTER = _AttributeFormatter()

#: the integers of StableHLO's ChannelType in ``#stablehlo.channel_handle<type = N>``
_CHANNEL_TYPES = {"CHANNEL_TYPE_INVALID": 0, "DEVICE_TO_DEVICE": 1, "DEVICE_TO_HOST": 2,
                  "HOST_TO_DEVICE": 3}


def _regions_text(sig: Signature, captured: Sequence[str] = ()) -> str:
    """`` ({...}, {...})``: the op's regions (conformance.specs.regions texts, or region
    programs) in generic form; ``captured``: the enclosing values region programs read."""
    if not sig.regions:
        return ""
    try:
        blocks = [block_text(r, f"r{i}_", captured=captured)
                  for i, r in enumerate(sig.regions)]
    except (RegionError, RegionProgramError) as e:
        raise EmitError(f"{sig.op}: {e}") from None
    return f" ({', '.join(blocks)})"


def _program_block(text: str, prefix: str, indent: str, captured: Sequence[str]) -> str:
    """A region program (conformance/core/region_program.py) as an MLIR region: its block
    arguments as ``^bb0`` arguments, its captured arguments as the enclosing values
    ``captured`` (in order), every op by :func:`op_text`."""
    body = parse_region_program(text)
    program = body.program
    prefix = f"{prefix}b_"      # never the names of a nested op's regions (r0_arg0, ...)
    names = {}
    for i, (n, _) in enumerate(program.arguments):
        if i < body.block:
            names[n] = f"%{prefix}{n}"
        elif i - body.block < len(captured):
            names[n] = captured[i - body.block]
        else:   # more than the op captures (an invalid case): a value MLIR cannot find
            names[n] = f"%{prefix}uncaptured_{n}"
    lines = []
    for o in program.operations:
        for r in o.results:
            names[r] = f"%{prefix}{o.name}" + (r[len(o.name):] if r != o.name else "")
        lines.append(op_text(o.signature, [names[v] for v in o.operands],
                             f"%{prefix}{o.name}"))
    types = program.result_types
    lines.append(f'"stablehlo.return"({", ".join(names[r] for r in program.results)}) : '
                 f'({", ".join(t.mlir() for t in types)}) -> ()')
    params = ", ".join(f"%{prefix}{n}: {t.mlir()}" for n, t in program.arguments[:body.block])
    head = f"\n{indent}^bb0({params}):" if body.block else ""
    text_ = "".join(f"\n{indent}  {line}" for line in lines)
    return f"{{{head}{text_}\n{indent}}}"


def block_text(text: str, prefix: str, indent: str = "      ",
               captured: Sequence[str] = ()) -> str:
    """A region text as an MLIR region in generic form, ``{ ^bb0(...): ... }``. Value
    names carry ``prefix`` so that they never shadow the enclosing function's. A region
    program reads the enclosing values ``captured``."""
    if is_region_program(text):
        return _program_block(text, prefix, indent, captured)
    region = parse_region(text)
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


def _types(types: Sequence[TensorType]) -> str:
    return ", ".join(t.mlir() for t in types)


def op_text(sig: Signature, operands: Sequence[str], result: str = "%0",
            operand_types: Sequence[str] | None = None) -> str:
    """One op in generic form: ``%0 = "stablehlo.add"(%a, %b) {...} : (...) -> ...``.

    With several results the line binds ``%0:N`` and they are ``%0#0 ...``.
    ``operand_types``: the operands' type texts where they are not the signature's (a
    decomposition's value of a bounded dynamic type).
    """
    syntax = op_syntax(sig.op)
    lacks = jaxlib_lacks(sig)
    if lacks:
        raise EmitError(f"{sig.op}: {lacks}")
    n = len(sig.result_types)
    lhs = "" if n == 0 else (f"{result} = " if n == 1 else f"{result}:{n} = ")
    texts = result_type_texts(sig, syntax)
    results = texts[0] if n == 1 else f"({', '.join(texts)})"
    inputs, captured = list(sig.input_types), []
    if syntax.captured:         # the last input's values: read by the regions, no operands
        k = len(load_spec(sig.op).inputs) - 1
        operands, captured, inputs = operands[:k], operands[k:], inputs[:k]
    regions = "" if syntax.function else _regions_text(sig, captured)  # (a func.func)
    if syntax.async_pair:
        return _pair_text(sig, syntax, operands, result, inputs, regions, operand_types)
    return (f'{lhs}"{op_name(sig, syntax)}"({", ".join(operands)})'
            f"{regions}"
            f"{_attributes_text(sig, syntax)} : "
            f"({', '.join(operand_types) if operand_types is not None else _types(inputs)})"
            f" -> {results}")


def _pair_text(sig: Signature, syntax: OpSyntax, operands, result: str, inputs, regions: str,
               operand_types) -> str:
    """A pair's two ops (``mlir.async_pair``: async_start, async_done): the start op takes
    the operands and the region and returns one ``!stablehlo.future`` of the signature's
    result types (async_start's rule C4; for the done op's own signature, the body's result
    types: its rule C1 relates them to its results); the done op awaits it and binds
    ``result`` (two lines)."""
    start, done = syntax.async_pair
    texts = result_type_texts(sig, syntax)
    future = f"!stablehlo.future<{', '.join(texts)}>"
    if syntax.name == done:     # the future is the body's (async_done's rule: returns T)
        future = f"!stablehlo.future<{', '.join(_body_result_texts(sig))}>"
    handle = f"%future_{result.lstrip('%')}"
    n = len(texts)
    lhs = "" if n == 0 else (f"{result} = " if n == 1 else f"{result}:{n} = ")
    results = texts[0] if n == 1 else f"({', '.join(texts)})"
    ins = ", ".join(operand_types) if operand_types is not None else _types(inputs)
    return (f'{handle} = "{start}"({", ".join(operands)}){regions}'
            f"{_attributes_text(sig, syntax)} : ({ins}) -> {future}\n"
            f'{lhs}"{done}"({handle}) : ({future}) -> {results}')


def _body_result_texts(sig: Signature) -> list[str]:
    try:
        return [t.mlir() for t in parse_region_program(sig.regions[0]).result_types]
    except (IndexError, RegionProgramError) as e:
        raise EmitError(f"{sig.op}: {e}") from None


def jaxlib_lacks(sig: Signature) -> str | None:
    """Why the dialect jaxlib ships cannot hold ``sig``'s program (its spec's
    ``mlir.jaxlib_lacks``), or None. A signature the expression cannot read (an invalid
    one with a group cut short) is printed and left to the verifier."""
    lacks = op_syntax(sig.op).jaxlib_lacks
    if not lacks:
        return None
    from conformance.specs import expressions
    from conformance.specs.validity import environment
    try:
        held = not expressions.evaluate(lacks[0], environment(load_spec(sig.op), sig))
    except (expressions.ExpressionError, ValueError, TypeError, IndexError):
        held = True
    return None if held else lacks[1]


def result_type_texts(sig: Signature, syntax: OpSyntax | None = None) -> list[str]:
    """The MLIR text of each result type. A spec's ``mlir.dynamic_result``
    (set_dimension_size) names the result dimension that is dynamic: printed ``?``,
    bounded by the signature's static size there (``tensor<?x3xf32,
    #stablehlo.bounds<4, ?>>``); where it is no dimension (an invalid signature) the
    static type prints."""
    syntax = syntax or op_syntax(sig.op)
    texts = [t.mlir() for t in sig.result_types]
    if not syntax.dynamic_result:
        return texts
    try:
        d = int(string.Formatter().format(syntax.dynamic_result, **sig.attributes))
    except (KeyError, ValueError, TypeError):
        return texts
    out = []
    for t, text in zip(sig.result_types, texts):
        if not isinstance(t, TensorType) or not 0 <= d < t.rank:
            out.append(text)
            continue
        dims = "".join("?x" if i == d else f"{n}x" for i, n in enumerate(t.shape))
        bounds = ", ".join(str(n) if i == d else "?" for i, n in enumerate(t.shape))
        out.append(f"tensor<{dims}{t.element_type.mlir}, #stablehlo.bounds<{bounds}>>")
    return out


def op_name(sig: Signature, syntax: OpSyntax | None = None) -> str:
    """The op's MLIR name; one with placeholders (``chlo.broadcast_{operation}``) takes
    the signature's attribute values, which must be plain names."""
    syntax = syntax or op_syntax(sig.op)
    if not syntax.name_fields:
        return syntax.name
    values = {}
    for n in syntax.name_fields:
        v = sig.attributes.get(n)
        if not isinstance(v, str) or not v.replace("_", "").isalnum():
            raise EmitError(f"{sig.op}: attribute {n} = {v!r} cannot name an MLIR op")
        values[n] = v
    return syntax.name.format(**values)


def module_text(sig: Signature) -> str:
    """The signature as a complete StableHLO module: ``@main`` takes the inputs and
    returns the results, with exactly the types the signature declares.

    Tuple-typed inputs and results (tuple, get_tuple_element) do not cross ``@main``'s
    boundary, because neither runner takes them there: PJRT refuses to compile such a
    ``@main`` (jaxlib 0.10.2: "Nested tuples are not supported for argument", "Invalid
    XLA PrimitiveType: 13 (TUPLE)") and the interpreter aborts its process ("LLVM
    ERROR: InterpreterValue is not a Tensor"). So ``@main`` takes a tuple-typed input's
    leaves and builds the tuple with ``stablehlo.tuple``, and takes a tuple-typed result
    apart with ``stablehlo.get_tuple_element``, returning its leaves (what
    ``Signature.input_leaves``/``result_leaves`` and every case's values are). Those
    helper ops are printed in the custom form, so the op under test stays the only
    generic-form op of the module (the one a VerifyError names).

    Tokens (after_all, infeed, ...) carry no data and do not cross ``@main``'s boundary
    either: a token operand is made inside with ``stablehlo.after_all`` of no tokens,
    and a token result is not returned. A host transfer's queues (``host: true`` in the
    spec: infeed's data, outfeed's) are not in the program at all: the op is printed
    with its own operands and results (conformance.specs.host).
    """
    syntax = op_syntax(sig.op)
    if syntax.decomposition:
        return _decomposition_text(sig, syntax.decomposition)
    sig = device_signature(sig)
    args = [f"%arg{i}" for i in range(len(sig.input_leaves))]
    params = ", ".join(f"{a}: {t.mlir()}" for a, t in zip(args, sig.input_leaves))
    lines: list[str] = []
    operands = pack_operands(sig.input_types, iter(args), lines) if sig.has_tuples else args
    lines.append(op_text(sig, operands))
    n = len(sig.result_types)
    values = ["%0"] if n == 1 else [f"%0#{i}" for i in range(n)]
    if sig.has_tuples:
        values = unpack_results(values, sig.result_types, lines)
    out_types = _types(sig.result_leaves) if sig.has_tuples else \
        ", ".join(result_type_texts(sig))
    ret = f"func.return {', '.join(values)} : {out_types}" if values else "func.return"
    attrs = ""
    if sig.num_replicas != 1 or sig.num_partitions != 1:
        attrs = (f" attributes {{mhlo.num_partitions = {sig.num_partitions} : i32, "
                 f"mhlo.num_replicas = {sig.num_replicas} : i32}}")
    body = "".join(f"    {line}\n" for line in lines)
    return (f"module{attrs} {{\n"
            f"  func.func public @main({params}) -> ({out_types}) {{\n"
            f"{body}"
            f"    {ret}\n"
            f"  }}\n"
            f"{_function_text(sig, syntax)}"
            f"}}\n")


#: while a program is printed (:func:`functions_of`): region text -> (symbol, func text)
#: of every function-region op met, at any depth
_FUNCTIONS: "contextvars.ContextVar[dict | None]" = contextvars.ContextVar(
    "conformance_functions", default=None)


def _function_symbol(sig: Signature, syntax: OpSyntax) -> str:
    """The symbol a function-region op (call, composite) names: the spec's name for a
    single-op module (module_text prints that one function); inside a program being
    printed, one function per distinct region, numbered, collected for the module."""
    collected = _FUNCTIONS.get()
    if collected is None:
        return syntax.function
    key = sig.regions[0] if sig.regions else ""
    if key not in collected:
        symbol = f"{syntax.function}_{len(collected)}"
        collected[key] = (symbol, "")
        collected[key] = (symbol, _function_text(sig, syntax, symbol))
    return collected[key][0]


class functions_of:
    """``with functions_of() as functions:`` print a program's ops; then ``functions``
    (region text -> (symbol, ``func.func private`` text)) holds the functions its
    call and composite ops name, each printed once."""

    def __enter__(self) -> dict:
        self.collected: dict = {}
        self.token = _FUNCTIONS.set(self.collected)
        return self.collected

    def __exit__(self, *exc) -> None:
        _FUNCTIONS.reset(self.token)


def _function_text(sig: Signature, syntax: OpSyntax, symbol: str | None = None) -> str:
    """The op's region as ``func.func private @NAME`` (the spec's ``mlir.function``:
    func.call's callee, stablehlo.composite's decomposition), or ``""``. Every argument
    of the region program is a function argument; its results are ``func.return``'s."""
    if not syntax.function:
        return ""
    try:
        body = parse_region_program(sig.regions[0])
    except (IndexError, RegionProgramError) as e:
        raise EmitError(f"{sig.op}: region {syntax.function}: {e}") from None
    program = body.program
    names = {n: f"%f_{n}" for n, _ in program.arguments}
    lines = []
    for o in program.operations:
        for r in o.results:
            names[r] = f"%f_{o.name}" + (r[len(o.name):] if r != o.name else "")
        lines.append(op_text(o.signature, [names[v] for v in o.operands], f"%f_{o.name}"))
    types = ", ".join(t.mlir() for t in program.result_types)
    values = ", ".join(names[r] for r in program.results)
    lines.append(f"func.return {values} : {types}" if values else "func.return")
    params = ", ".join(f"%f_{n}: {t.mlir()}" for n, t in program.arguments)
    text_ = "".join(f"    {line}\n" for line in lines)
    return (f"  func.func private @{symbol or syntax.function}({params}) -> ({types}) {{\n"
            f"{text_}  }}\n")


def _decomposition_text(sig: Signature, name: str) -> str:
    """The module of a form whose canonical program is a decomposition (the spec's
    ``mlir.decomposition``: conformance/core/decompositions.py), each op printed as its
    single-op case would be."""
    from conformance.core.decompositions import DecompositionError, decompose
    try:
        program = decompose(name, sig)
    except DecompositionError as e:
        raise EmitError(str(e)) from None
    problems = program.problems()
    if problems:
        raise EmitError(f"{sig.op}: malformed decomposition {name}: {'; '.join(problems)}")
    # each value's type text: an op's result may be bounded dynamic (set_dimension_size)
    texts = {n: t.mlir() for n, t in program.arguments}
    lines = []
    for o in program.operations:
        lines.append(op_text(o.signature, [f"%{v}" for v in o.operands], f"%{o.name}",
                             [texts[v] for v in o.operands]))
        texts.update(zip(o.results, result_type_texts(o.signature)))
    params = ", ".join(f"%{n}: {t.mlir()}" for n, t in program.arguments)
    out_types = ", ".join(texts[r] for r in program.results)
    body = "".join(f"    {line}\n" for line in lines)
    values = ", ".join(f"%{r}" for r in program.results)
    return (f"module {{\n  func.func public @main({params}) -> ({out_types}) {{\n{body}"
            f"    func.return {values} : {out_types}\n  }}\n}}\n")


def pack_operands(types, args, lines: list[str], prefix: str = "%") -> list[str]:
    """Operands for ``types`` from leaf values (``args``, an iterator): a tuple-typed one
    built (inner tuples first) with ``stablehlo.tuple``, a token made with
    ``stablehlo.after_all`` of none; the lines are appended, their values named
    ``PREFIXtupleN``/``PREFIXtokenN``."""
    out = []
    for t in types:
        if isinstance(t, TokenType):
            name = f"{prefix}token{len(lines)}"
            lines.append(f"{name} = stablehlo.after_all : !stablehlo.token")
            out.append(name)
        elif isinstance(t, TupleType):
            elements = pack_operands(t.elements, args, lines, prefix)
            name = f"{prefix}tuple{len(lines)}"
            lines.append(f"{name} = stablehlo.tuple {', '.join(elements)} : {t.mlir()}")
            out.append(name)
        else:
            out.append(next(args))
    return out


def unpack_results(values, types, lines: list[str], prefix: str = "%") -> list[str]:
    """The leaves of ``values`` of ``types``: a tuple-typed one taken apart with
    ``stablehlo.get_tuple_element``, depth-first, a token left out (no data); the lines
    are appended, their values named ``PREFIXelemN``."""
    out = []
    for v, t in zip(values, types):
        if isinstance(t, TokenType):        # no data: not returned
            continue
        if not isinstance(t, TupleType):
            out.append(v)
            continue
        elements = []
        for j, e in enumerate(t.elements):
            name = f"{prefix}elem{len(lines)}"
            lines.append(f"{name} = stablehlo.get_tuple_element {v}[{j}] : "
                         f"({t.mlir()}) -> {e.mlir()}")
            elements.append(name)
        out += unpack_results(elements, t.elements, lines, prefix)
    return out


# ---------------------------------------------------------------------------
# Parsing and verifying with jaxlib's MLIR
# ---------------------------------------------------------------------------

_LOCK = threading.RLock()
#: held while the shared MLIR context parses or prints (the bindings are not thread-safe)
MLIR_LOCK = _LOCK


def _new_context():
    """A fresh context with the upstream dialects (func, ...) that jax uses.

    PRIVATE API, the one place that touches it: jaxlib's Python MLIR has no public
    way to register the upstream ``func`` dialect. jax does it through jaxlib's
    ``jaxlib.mlir._mlir_libs._jax_mlir_ext.register_dialects`` (see
    ``upstream_dialects`` in jax/_src/interpreters/mlir.py; checked with jaxlib
    0.10.2); we do the same. Should a jaxlib release drop that extension, we fall
    back to ``jax.interpreters.mlir.make_ir_context`` (jax's own context, which
    also loads sdy/mpmd/mhlo and shares jax's thread pool).
    """
    from jaxlib.mlir import ir
    try:
        from jaxlib.mlir._mlir_libs import _jax_mlir_ext
        register = _jax_mlir_ext.register_dialects
    except (ImportError, AttributeError):
        from jax.interpreters.mlir import make_ir_context
        return make_ir_context()
    registry = ir.DialectRegistry()
    register(registry)
    ctx = ir.Context()
    ctx.enable_multithreading(False)
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    return ctx


def context():
    """The MLIR context (one per process, cached): func, stablehlo and chlo registered
    and loaded, unregistered dialects refused, MLIR's own threading off (the
    modules are tiny, and no thread pool is left behind for a fork)."""
    return _context(os.getpid())


@functools.lru_cache(maxsize=1)
def _context(pid: int):
    from jaxlib.mlir.dialects import chlo, stablehlo
    ctx = _new_context()
    stablehlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    ctx.allow_unregistered_dialects = False
    return ctx


_OP_RE = re.compile(r'"([a-z_]\w*\.[\w.]+)"\s*\(')     # the first generic-form op


def _op_of(text: str) -> str:
    m = _OP_RE.search(text)
    return m.group(1) if m else "module"


def _message(err) -> str:
    diags = getattr(err, "error_diagnostics", None) or []
    parts = []
    for d in diags:
        msg = d.message
        notes = [n.message for n in d.notes]
        parts.append(msg + (f" ({'; '.join(notes)})" if notes else ""))
    text = "; ".join(parts) if parts else str(err)
    return " ".join(text.split())


def parse(text: str):
    """Parse and verify ``text``; the ``ir.Module``, or :class:`VerifyError` (one line
    with the op name and the parser's or verifier's message)."""
    from jaxlib.mlir import ir
    ctx = context()
    with _LOCK:
        try:
            module = ir.Module.parse(text, ctx)
            module.operation.verify()
        except ir.MLIRError as e:
            raise VerifyError(_op_of(text), _message(e), text) from None
    return module


def verify(sig: Signature):
    """``parse(module_text(sig))``: the verified module of a signature."""
    return parse(module_text(sig))


@functools.lru_cache(maxsize=4096)
def verifier_rejects(sig: Signature) -> str | None:
    """The MLIR verifier's message if it rejects ``sig``'s program, else None.

    For an invalid signature this says whether the case reaches a backend at all:
    a program the verifier rejects never gets past parsing.

    A program with regions but no operands is verified in a process of its own
    (:class:`VerifierProcess`):
    jaxlib 0.10.2's StableHLO verifier can crash on one (a ``stablehlo.reduce`` without
    inputs segfaults once jax has compiled something in the process), and a crash of the
    verifier is then its message. So is an invalid program of an op outside the
    stablehlo dialect: jaxlib 0.10.2's CHLO verifier segfaults on a negative
    ``broadcast_dimensions`` entry of ``chlo.broadcast_add``. And so is an invalid
    collective with an empty list attribute: the StableHLO verifier divides by the group
    size (SIGFPE on all_to_all's empty ``replica_groups``).

    None for a program with quantized types: jaxlib 0.10.2's bindings cannot parse them.
    """
    if any(t.element_type.is_quantized for t in sig.input_leaves + sig.result_leaves):
        # jaxlib's bindings register no quant dialect: they cannot read the program, so
        # they say nothing of it (the backends' own verifiers do: XLA's, IREE's)
        return None
    if (sig.regions and not sig.input_types) or (
            sig.invalid and not op_name(sig).startswith("stablehlo.")) or (
            sig.invalid and sig.num_replicas * sig.num_partitions > 1
            and any(v == [] for v in sig.attributes.values())):
        return _verify_in_child(sig)
    try:
        verify(sig)
    except VerifyError as e:
        return e.message
    return None


def _verify_in_child(sig: Signature) -> str | None:
    """Verify ``sig``'s program in the verifier's own process (:class:`VerifierProcess`):
    a crash there is the verifier's answer, and this process goes on."""
    return _VERIFIER.ask(module_text(sig))


#: how long the verifier's process may take over one module
VERIFY_TIMEOUT = 60.0

#: what the verifier's process runs (``sys.path`` as its parent's, the first argument)
_CHILD_MAIN = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
               "from conformance.mlir.verifier_process import main; main()")


class VerifierProcess:
    """A long-lived process that parses and verifies module texts for this one, so that
    a verifier crash (the segfaults and SIGFPE of :func:`verifier_rejects`) kills it,
    not the run.

    It is started with ``subprocess`` (a fresh interpreter: fork and exec at once), not
    ``os.fork``: this process runs XLA's threads once jax has compiled anything, and a
    fork of a threaded process may deadlock in the child (jax warns on every
    ``os.fork``). Nor is it a ``multiprocessing`` child: a daemonic worker process (a
    multiprocessing pool's) may not start one. It reads one module text per line on its
    stdin (JSON) and answers each with one line (JSON ``[message or null]``)
    (:mod:`conformance.mlir.verifier_process`). A process that dies while verifying is
    the verifier crashing (the next module starts a new one); one that does not answer
    in ``timeout`` seconds is killed. Requests from several threads take turns.
    """

    def __init__(self, timeout: float = VERIFY_TIMEOUT) -> None:
        self.timeout = timeout
        self._proc = None
        self._pid = None          # the process that started it (a forked copy starts its own)
        self._pending = b""
        self._lock = threading.Lock()

    def ask(self, text: str) -> str | None:
        """The verifier's message for ``text`` (None: it accepts it), or what became of
        the verifier (crashed, did not answer)."""
        import json
        with self._lock:
            if self._proc is not None and (self._pid != os.getpid()
                                           or self._proc.poll() is not None):
                self._stop(kill=True)       # another process's, or it ended: a new one
            if self._proc is None:
                self._start()
            proc = self._proc
            try:
                proc.stdin.write(json.dumps(text).encode() + b"\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return self._died()
            line = self._read_line()
            if line is None:
                self._stop(kill=True)
                return "the MLIR verifier did not answer"
            if not line:
                return self._died()
            try:
                return json.loads(line.decode())[0]
            except (ValueError, IndexError, UnicodeDecodeError):
                self._stop(kill=True)
                return "the MLIR verifier crashed (no answer)"

    def _start(self) -> None:
        import json
        import subprocess
        import sys
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, json.dumps(sys.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONFAULTHANDLER": ""})
        self._pid = os.getpid()
        self._pending = b""

    def _read_line(self) -> bytes | None:
        """One line of the process's answer (b"": it closed its end; None: no answer in
        time)."""
        import select
        import time
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _died(self) -> str:
        proc = self._proc
        try:
            code = proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - it did not end: the verifier is stuck
            code = None
        self._stop(kill=True)
        if code is None or code == 0:
            return "the MLIR verifier crashed (no answer)"
        return f"the MLIR verifier crashed (exit code {code})"

    def _stop(self, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None or self._pid != os.getpid():
            return
        try:
            if kill:
                proc.kill()
            else:
                proc.stdin.close()
            proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - a process that will not end is killed
            proc.kill()
            proc.wait()
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass

    def close(self) -> None:
        """End the process (it exits at the end of its input)."""
        with self._lock:
            self._stop()


_VERIFIER = VerifierProcess()
atexit.register(_VERIFIER.close)
