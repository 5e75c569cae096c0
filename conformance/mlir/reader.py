"""Reading a StableHLO module written elsewhere into a Program (issue 29).

A jax export, a test file, a compiler's dump: text (``.mlir``) or bytecode (``.mlirbc``,
a VHLO portable artifact as ``jax.export`` serialises it, or plain MLIR bytecode) is
parsed and verified with the MLIR bindings jaxlib ships, and its ``@main`` (or its one
public function) is walked op by op into a :class:`~conformance.core.program.Program`
of the suite's op specs:

- an op maps back to the spec whose ``mlir: op`` names it (``chlo.broadcast_add`` to
  the spec of ``chlo.broadcast_{operation}``); its attributes are read through the spec's
  ``mlir:`` section, with the spec's ``mlir: defaults`` where the text omits one
  (conformance/mlir/attributes.py), and the signature must be valid by the spec;
- every read is checked: the signature is printed again (the emitter's op text) and
  each attribute the module gives must equal, as an MLIR attribute, the one printed,
  so a misread op is reported, never judged;
- ``func.call`` of a private function is followed: the callee's ops are read in place
  (each keeps its own location), so they are judged one by one;
- regions: an op whose spec holds region programs (``mlir: region_form: program``: if,
  case, while, composite) reads each region as a program; a value a region reads from
  outside is a constant cloned into it, or, for an op whose spec names a ``captured``
  input (if, case), one of its captured operands; other regions (sort's comparator,
  reduce's body, ...) are read as the spec's region expressions (rank-0 element-wise
  ops of the block's arguments);
- a composite's decomposition (``func.func private``) becomes its region program; a
  composite its spec cannot hold (a name or attributes it does not list: jax's
  ``chlo.top_k``) is read as its decomposition, in place, as a call is;
  CHLO ops map to the XLA-form specs that name them (chlo.broadcast_*), any other CHLO
  op is not judged (jax writes erf, tan, ... as composites whose decompositions hold
  StableHLO ops only, and those are judged).

Token and tuple values are read as their leaves, as a case holds them (a tuple's
tensors depth-first, a token none: conformance.core.program), so tuple,
get_tuple_element, after_all and optimization_barrier are read like any op and the
values that pass through a tuple reach the ops after it. A host transfer (infeed,
outfeed, send, recv) is not judged (its data crosses the module's boundary through a
queue the module does not hold), but a token carries no data whatever made it, so the
users of its token are read.

What cannot be judged (an op no spec names, a dynamic shape, an attribute no spec
models, a host transfer, a tuple-typed argument of ``@main``, token and tuple values
inside a region, an op that reads the value of one of those) is an
:class:`Unjudged` line
naming the op and its location; the rest of the module is still read. Values are
named ``arg0, ...`` (the function's arguments) and ``v0, v1, ...`` (op results, in
order); :attr:`ReadModule.origins` maps each operation's name to the op's location
and text in the module.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any, Callable

from conformance.core.case import Signature
from conformance.core.program import Operation, Program
from conformance.core.types import TensorType, TokenType, is_structured, value_type
from conformance.mlir.attributes import ReadError, attribute_map, spec_attributes

__all__ = ["ReadError", "Origin", "Unjudged", "ReadModule", "read_file", "read_text",
           "load_module"]

_BYTECODE_MAGIC = b"ML\xefR"


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where an operation of the read program sits in the module."""

    op: str            # the MLIR op name (stablehlo.add)
    location: str      # its location, compact (file:line:col, or jax's name and source)
    text: str          # the op as the module has it (generic form, no debug info)

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Unjudged:
    """An op of the module the suite cannot judge, and why (one line)."""

    op: str
    location: str
    reason: str

    def __str__(self) -> str:
        return f"{self.op} at {self.location}: {self.reason}"

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ReadModule:
    """A module read in: the judgeable program of its entry function."""

    source: str
    program: Program
    origins: dict[str, Origin]
    unjudged: list[Unjudged]
    #: positions of the entry function's results that are not in ``program.results``
    #: (they depend on an op not judged)
    dropped_results: tuple[int, ...] = ()
    num_replicas: int = 1
    num_partitions: int = 1


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------

def load_module(path: "str | Path"):
    """The parsed and verified ``ir.Module`` of a file (text or bytecode); ReadError in
    one line naming the file."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo
    from conformance.mlir.emitter import MLIR_LOCK, context
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ReadError(f"{path}: cannot read it: {e.strerror or e}") from None
    ctx = context()
    with MLIR_LOCK, ctx:
        try:
            if data.startswith(_BYTECODE_MAGIC):
                try:    # a VHLO portable artifact (jax.export's serialisation)
                    module = stablehlo.deserialize_portable_artifact(ctx, data)
                except Exception:  # noqa: BLE001 - plain MLIR bytecode, next
                    module = ir.Module.parse(data, ctx)
            else:
                module = ir.Module.parseFile(str(path))
            module.operation.verify()
        except ir.MLIRError as e:
            raise ReadError(f"{path}: not a valid StableHLO module: {_first_line(e)}") \
                from None
        except (ValueError, RuntimeError) as e:
            raise ReadError(f"{path}: not a StableHLO module: {_first_line(e)}") from None
    return module


def _first_line(e: Exception) -> str:
    diags = getattr(e, "error_diagnostics", None)
    if diags:
        d = diags[0]
        return f"{_compact_location(str(d.location))}: {d.message}"
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def read_file(path: "str | Path") -> ReadModule:
    """Read a module file (text or bytecode) into its judgeable program."""
    from conformance.mlir.emitter import MLIR_LOCK, context
    module = load_module(path)
    with MLIR_LOCK, context():
        return _Reader(module, str(path)).read()


def read_text(text: str, source: str = "<text>") -> ReadModule:
    """Read a module given as text (locations say line:col of ``text``)."""
    from jaxlib.mlir import ir
    from conformance.mlir.emitter import MLIR_LOCK, context
    ctx = context()
    with MLIR_LOCK, ctx:
        try:
            module = ir.Module.parse(text, ctx)
            module.operation.verify()
        except ir.MLIRError as e:
            raise ReadError(f"{source}: not a valid StableHLO module: {_first_line(e)}") \
                from None
        return _Reader(module, source).read()


# ---------------------------------------------------------------------------------------
# Op names -> specs
# ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _index() -> tuple[dict[str, list[str]], list[tuple[re.Pattern, str]]]:
    """MLIR op name -> the specs that print as it; patterns for names with fields."""
    from conformance.mlir.emitter import op_syntax
    from conformance.specs import op_names
    exact: dict[str, list[str]] = {}
    patterns: list[tuple[re.Pattern, str]] = []
    for op in op_names():
        syntax = op_syntax(op)
        if syntax.decomposition:        # printed as several ops: never read back as one
            continue
        if syntax.name_fields:
            regex = re.escape(syntax.name)
            for f in syntax.name_fields:
                regex = regex.replace(re.escape("{" + f + "}"), f"(?P<{f}>[a-z0-9_]+)")
            patterns.append((re.compile(regex + r"\Z"), op))
        else:
            exact.setdefault(syntax.name, []).append(op)
    return exact, patterns


def _candidates(mlir_name: str) -> list[tuple[str, dict[str, str]]]:
    exact, patterns = _index()
    out = [(op, {}) for op in exact.get(mlir_name, [])]
    for regex, op in patterns:
        m = regex.match(mlir_name)
        if m:
            out.append((op, m.groupdict()))
    return out


# ---------------------------------------------------------------------------------------
# Locations and texts
# ---------------------------------------------------------------------------------------

_FILE_LOC = re.compile(r'"([^"]*)":(\d+):(\d+)')
_HEAD_LOC = re.compile(r'loc\("([^"]*)"(:\d+:\d+)?')


def _compact_location(loc: str) -> str:
    """``file:line:col`` of a file location; jax's ``name (file:line:col)`` of a named
    one (its first source position); the text itself otherwise."""
    head = _HEAD_LOC.match(loc)
    where = _FILE_LOC.search(loc)
    place = f"{Path(where.group(1)).name}:{where.group(2)}:{where.group(3)}" if where else ""
    if head and head.group(2):                   # loc("file":line:col)
        return place
    if head:
        return f"{head.group(1)} ({place})" if place else head.group(1)
    return place or loc


def _op_text(op) -> str:
    text = op.get_asm(enable_debug_info=False, print_generic_op_form=True)
    return text.strip()


# ---------------------------------------------------------------------------------------
# The walk
# ---------------------------------------------------------------------------------------

class _Unavailable(Exception):
    """An operand whose value the read program does not have (an op not judged)."""


_BOUNDED = re.compile(r"tensor<((?:[0-9?]+x)*)([a-z][\w<>]*),\s*#stablehlo\.bounds<([^>]*)>>\Z")


def _bounded(text: str) -> str:
    """A bounded dynamic type (``tensor<?x3xf32, #stablehlo.bounds<4, ?>>``) as its
    static bound (``tensor<4x3xf32>``): how the spec of an op with a dynamic result
    (``mlir: dynamic_result``) holds it."""
    m = _BOUNDED.match(text)
    if not m:
        return text
    dims = [d for d in m.group(1).split("x") if d]
    bounds = [b.strip() for b in m.group(3).split(",")]
    if len(dims) != len(bounds):
        return text
    static = [b if d == "?" else d for d, b in zip(dims, bounds)]
    return f"tensor<{''.join(d + 'x' for d in static)}{m.group(2)}>"


def _type(t, where: str, bounded: bool = False):
    text = _bounded(str(t)) if bounded else str(t)
    if "?" in text:
        raise ReadError(f"{where}: dynamic shape {text} (only static shapes are judged)")
    if "!quant." in text:
        # jaxlib's MLIR parses quantized types only once a VHLO artifact has loaded the
        # quant dialect into the process's context: refused always, not by history
        raise ReadError(f"{where}: quantized type {text} (the module reader does not read "
                        "quantized types: docs/quantized-types.md)")
    try:
        return value_type(text)
    except ValueError as e:
        raise ReadError(f"{where}: type {text}: {str(e).splitlines()[0]}") from None


def _leaves(name: "str | tuple[str, ...]") -> list[str]:
    """The program's names of a value: a tensor's one name, a tuple's leaves, a token's
    none (conformance.core.program: values are tensors)."""
    return [name] if isinstance(name, str) else list(name)


class _Scope:
    """Names of a block's values (a tensor's name; a tuple's leaf names, a token's none,
    as a tuple); values from outside resolve through ``outer``."""

    def __init__(self, outer: Callable[[Any], str] | None = None):
        self.names: dict[Any, str | tuple[str, ...] | None] = {}
        self.outer = outer

    def lookup(self, value) -> "str | tuple[str, ...]":
        if value in self.names:
            name = self.names[value]
            if name is None:
                raise _Unavailable(value)
            return name
        if self.outer is None:
            raise _Unavailable(value)
        return self.outer(value)


class _Reader:
    def __init__(self, module, source: str):
        self.module = module
        self.source = source
        self.funcs = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[_symbol(op.operation.attributes["sym_name"])] = op
        self.origins: dict[str, Origin] = {}
        self.unjudged: list[Unjudged] = []
        self.counter = 0
        self.calls: list[str] = []
        attrs = attribute_map(module.operation)
        #: (replicas, partitions) of the module (mhlo.num_replicas, mhlo.num_partitions)
        self.grid = (_int_attr(attrs.get("mhlo.num_replicas"), 1),
                     _int_attr(attrs.get("mhlo.num_partitions"), 1))

    # -- the entry function ----------------------------------------------------------------
    def entry(self):
        if "main" in self.funcs:
            return self.funcs["main"]
        public = [f for f in self.funcs.values()
                  if "sym_visibility" not in f.operation.attributes
                  or _symbol(f.operation.attributes["sym_visibility"]) == "public"]
        if len(public) != 1:
            raise ReadError(f"{self.source}: no @main and {len(public)} public functions "
                            "(the entry function is @main or the only public one)")
        return public[0]

    def read(self) -> ReadModule:
        func = self.entry()
        block = func.regions[0].blocks[0]
        args = [(f"arg{i}", _type(a.type, f"{self.source}: @main argument {i}"))
                for i, a in enumerate(block.arguments)]
        scope = _Scope()
        for (name, t), a in zip(args, block.arguments):
            # a token argument carries no data (no leaves: its users are judged); a
            # tuple argument is no value of the read program (its users are not judged)
            scope.names[a] = () if isinstance(t, TokenType) else \
                None if is_structured(t) else name
        args = [(n, t) for n, t in args if not is_structured(t)]
        ops: list[Operation] = []
        returned = self.block(block, scope, ops)
        # a tuple result is its leaves, a token result none (it carries no data)
        results = tuple(leaf for r in returned if r is not None for leaf in _leaves(r))
        dropped = tuple(i for i, r in enumerate(returned) if r is None)
        program = Program.make(args, ops, results)
        return ReadModule(self.source, program, self.origins, self.unjudged, dropped,
                          *self.grid)

    def loc(self, operation) -> str:
        """The op's compact location; a text parsed from a string (file ``-``) names
        the source given."""
        where = _compact_location(str(operation.location))
        if where.startswith("-:"):
            where = Path(self.source).name + where[1:]
        return where

    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter - 1}"

    # -- a block ----------------------------------------------------------------------------
    def block(self, block, scope: _Scope, ops: list[Operation]
              ) -> list[str | tuple[str, ...] | None]:
        """Read the block's ops into ``ops``; the names it returns (None: not judged; a
        tuple: a tuple's leaves or a token's none)."""
        returned: list[str | tuple[str, ...] | None] = []
        for op in block.operations:
            name = op.operation.name
            if name in ("func.return", "stablehlo.return"):
                for v in op.operation.operands:
                    try:
                        returned.append(scope.lookup(v))
                    except _Unavailable:
                        returned.append(None)
                continue
            if name == "func.call":
                self.call(op, scope, ops)
                continue
            self.one(op, scope, ops)
        return returned

    def _unjudged(self, op, reason: str, scope: _Scope) -> None:
        self.unjudged.append(Unjudged(op.operation.name,
                                      self.loc(op.operation), reason))
        for r in op.operation.results:
            # a token carries no data, whatever the op: its users are still judged
            scope.names[r] = () if str(r.type) == "!stablehlo.token" else None

    def call(self, op, scope: _Scope, ops: list[Operation], callee: str | None = None
             ) -> None:
        """``func.call @f``: f's ops read in place, its arguments the call's operands
        (``callee``: a composite's decomposition, read so)."""
        callee = callee or _symbol(op.operation.attributes["callee"])
        func = self.funcs.get(callee)
        if func is None or callee in self.calls:
            self._unjudged(op, f"calls @{callee}, which " +
                           ("calls itself" if func is not None else "is not in the module"),
                           scope)
            return
        block = func.regions[0].blocks[0]
        inner = _Scope()
        for a, v in zip(block.arguments, op.operation.operands):
            try:
                inner.names[a] = scope.lookup(v)
            except _Unavailable:
                inner.names[a] = None
        self.calls.append(callee)
        try:
            returned = self.block(block, inner, ops)
        finally:
            self.calls.pop()
        for r, name in zip(op.operation.results, returned):
            scope.names[r] = name

    def one(self, op, scope: _Scope, ops: list[Operation]) -> None:
        where = f"{op.operation.name} at {self.loc(op.operation)}"
        try:
            operands = [leaf for v in op.operation.operands for leaf in _leaves(scope.lookup(v))]
        except _Unavailable as e:
            self._unjudged(op, f"reads {_value_name(e.args[0])}, the value of an op not "
                           "judged", scope)
            return
        try:
            sig, extra = self.signature(op, scope, where)
        except _Unavailable as e:
            self._unjudged(op, f"its region reads {_value_name(e.args[0])}, the value of "
                           "an op not judged", scope)
            return
        except ReadError as e:
            decomposition = _decomposition(op)
            if decomposition in self.funcs:
                # a composite its spec cannot hold (jax's chlo.top_k with {k = 3}: the
                # spec models the names and attributes it lists): the composite means
                # its decomposition, whose ops are read in place and judged one by one
                self.call(op, scope, ops, decomposition)
                return
            text = str(e)
            self._unjudged(op, text[len(where) + 2:] if text.startswith(where + ": ")
                           else text, scope)
            return
        name = self.fresh()
        o = Operation(sig, tuple(operands) + tuple(extra), name)
        ops.append(o)
        self.origins[name] = Origin(op.operation.name,
                                    self.loc(op.operation),
                                    _op_text(op))
        if not sig.has_tuples:
            for r, rn in zip(op.operation.results, o.results):
                scope.names[r] = rn
            return
        names = iter(o.results)     # the results' leaves, depth-first
        for r, t in zip(op.operation.results, sig.result_types):
            mine = tuple(next(names) for _ in t.leaves())
            scope.names[r] = mine[0] if isinstance(t, TensorType) else mine

    # -- one op's signature -----------------------------------------------------------------
    def signature(self, op, scope: _Scope, where: str) -> tuple[Signature, list[str]]:
        """The op's signature and the names of its captured operands (if, case)."""
        from conformance.mlir.emitter import op_syntax
        from conformance.specs import load_spec
        from conformance.specs.validity import violations
        operation = op.operation
        candidates = _candidates(operation.name)
        if not candidates:
            raise ReadError(f"{where}: no spec of the suite is the op {operation.name}")
        input_types = [_type(v.type, where) for v in operation.operands]
        bounded = any(op_syntax(c).dynamic_result for c, _ in candidates)
        result_types = [_type(r.type, where, bounded) for r in operation.results]
        if any(load_spec(c).host_transfer for c, _ in candidates):
            raise ReadError(f"{where}: a host transfer: its data crosses the module's "
                            "boundary through a queue the module does not hold (single-op "
                            "runs judge it with the queue in the case)")
        if operation.regions and any(is_structured(t) for t in input_types + result_types):
            raise ReadError(f"{where}: token and tuple values of an op with regions are "
                            "not judged in modules")
        mlir_attrs = attribute_map(operation)
        errors = []
        for spec_name, name_values in candidates:
            spec, syntax = load_spec(spec_name), op_syntax(spec_name)
            try:
                regions, captured, captured_types = self.regions(op, spec, syntax, scope, where)
                types = input_types + captured_types
                attrs = dict(name_values)
                attrs.update(spec_attributes(spec, syntax, mlir_attrs,
                                             _input_env(spec, types), where))
                order = [a.name for a in spec.attributes]
                attrs = {k: attrs[k] for k in sorted(attrs, key=lambda k: (
                    order.index(k) if k in order else len(order)))}
                sig = Signature.make(spec_name, types, result_types, attrs,
                                     regions=tuple(regions), num_replicas=self.grid[0],
                                     num_partitions=self.grid[1])
                broken = violations(sig, spec)
                if broken:
                    rules = ", ".join(broken)
                    tokens = any(isinstance(t, TokenType) for t in types + result_types)
                    raise ReadError(f"{where}: as {spec_name} it breaks {rules} of the "
                                    "spec" + (" (the suite's spec of the op models no "
                                              "token values)" if tokens else ""))
                _check_printed(sig, syntax, mlir_attrs, where)
                return sig, captured
            except ReadError as e:
                errors.append(str(e))
        raise ReadError(errors[0] if len(errors) == 1 else
                        f"{where}: read as none of " + "; ".join(errors))

    # -- regions ----------------------------------------------------------------------------
    def regions(self, op, spec, syntax, scope: _Scope, where: str
                ) -> tuple[list[str], list[str], list[Any]]:
        """The op's region texts, and its captured operands' names and types."""
        operation = op.operation
        if syntax.function:                 # composite: the region is a function
            symbol = _symbol(operation.attributes[syntax.function])
            func = self.funcs.get(symbol)
            if func is None:
                raise ReadError(f"{where}: {syntax.function} @{symbol} is not in the module")
            return [self.program_region(func.regions[0], _Scope(), where)[0]], [], []
        if not operation.regions:
            return [], [], []
        if syntax.region_form != "program":
            return [self.expression_region(r, where) for r in operation.regions], [], []
        captured: list[str] = []
        captured_types: list[Any] = []
        texts = []
        for region in operation.regions:
            text, caps = self.program_region(region, scope, where,
                                             allow_capture=bool(syntax.captured))
            texts.append(text)
            for n, t in caps:
                if n not in captured:
                    captured.append(n)
                    captured_types.append(t)
        if captured:                    # every branch reads every captured value, in order
            order = list(zip(captured, captured_types))
            texts = [self.program_region(r, scope, where, allow_capture=True,
                                         order=order)[0] for r in operation.regions]
        return texts, captured, captured_types

    def program_region(self, region, outer: _Scope, where: str, allow_capture=False,
                       order: list[tuple[str, Any]] | None = None) -> tuple[str, list[tuple[str, Any]]]:
        """A region as a region program (conformance/core/region_program.py): its block
        arguments, the values it captures (constants are cloned in), its ops."""
        from conformance.core import region_program
        block = region.blocks[0]
        args = [(f"a{i}", _type(a.type, where)) for i, a in enumerate(block.arguments)]
        inner_ops: list[Operation] = []
        captures: list[tuple[str, Any, str]] = []     # (inner name, type, outer name)
        if order:       # (name outside, type) of every value the op captures
            captures = [(f"c{i}", t, o) for i, (o, t) in enumerate(order)]

        def outside(value):
            owner = value.owner
            if _is_constant(owner):
                sig, _ = self.signature(owner, scope, where)
                name = self.fresh()
                inner_ops.append(Operation(sig, (), name))
                scope.names[value] = name
                # the clone is judged where the constant stands (a report names it)
                self.origins[name] = Origin(owner.operation.name, self.loc(owner.operation),
                                            _op_text(owner))
                return name
            outer_name = outer.lookup(value)
            if not allow_capture:
                raise ReadError(f"{where}: a region reads {_value_name(value)} from "
                                "outside it, which this op's spec cannot hold")
            for inner, _, o in captures:
                if o == outer_name:
                    return inner
            inner = f"c{len(captures)}"
            captures.append((inner, _type(value.type, where), outer_name))
            return inner

        scope = _Scope(outside)
        for (n, _), a in zip(args, block.arguments):
            scope.names[a] = n
        saved = (self.origins, self.unjudged)
        self.origins, self.unjudged = {}, []
        try:
            returned = self.block(block, scope, inner_ops)
            if any(o.signature.has_tuples for o in inner_ops) or \
                    any(not isinstance(r, str) for r in returned if r is not None):
                raise ReadError(f"{where}: its region holds token or tuple values, which "
                                "a region program does not hold")
            if self.unjudged:
                raise ReadError(f"{where}: its region holds an op not judged: "
                                f"{self.unjudged[0]}")
            inner = self.origins
        finally:
            self.origins, self.unjudged = saved
        # the region's ops keep their places (names are unique in the module): check 1
        # names an op inside a loop it judges trip by trip (conformance.checking.modules)
        self.origins.update(inner)
        cap_args = [(inner, t) for inner, t, _ in captures]
        text = region_program.make(args + cap_args, inner_ops, returned, block=len(args))
        return text, [(o, t) for _, t, o in captures]

    def constant_node(self, op, where: str) -> str:
        """A rank-0 constant read from outside a region, as a region call."""
        sig, _ = self.signature(op, _Scope(), where)
        if sig.result_types[0].shape != ():
            raise ReadError(f"{where}: a region reads a constant of type "
                            f"{sig.result_types[0]}, not rank 0")
        return f"constant({sig.attributes['value']!r})"

    def expression_region(self, region, where: str) -> str:
        """A region as a region expression (specs/regions.py): rank-0 block arguments,
        element-wise ops of them."""
        from conformance.mlir.emitter import op_syntax
        from conformance.specs import load_spec, regions
        block = region.blocks[0]
        arg_types = []
        nodes: dict[Any, str] = {}
        for i, a in enumerate(block.arguments):
            t = _type(a.type, where)
            if not isinstance(t, TensorType) or t.shape != ():
                raise ReadError(f"{where}: region argument {i} is {t}, not a rank-0 tensor")
            arg_types.append(t.element_type)
            nodes[a] = f"arg{i}"
        results = None
        for op in block.operations:
            operation = op.operation
            if operation.name == "stablehlo.constant":     # inside the region
                (r,) = operation.results
                nodes[r] = self.constant_node(op, where)
                continue
            if operation.name == "stablehlo.return":
                for v in operation.operands:
                    if v not in nodes and _is_constant(v.owner):
                        nodes[v] = self.constant_node(v.owner, where)
                results = [nodes[v] for v in operation.operands]
                break
            inner = f"{operation.name} in a region at " \
                    f"{self.loc(operation)}"
            operands = []
            for v in operation.operands:
                if v not in nodes and _is_constant(v.owner):    # cloned in, as a node
                    nodes[v] = self.constant_node(v.owner, where)
                if v not in nodes:
                    raise ReadError(f"{inner}: reads {_value_name(v)} from outside the "
                                    "region, which is not a constant")
                operands.append(nodes[v])
            cands = [c for c, _ in _candidates(operation.name)
                     if not load_spec(c).regions and load_spec(c).elementwise
                     and not load_spec(c).quantized]
            if not cands:
                raise ReadError(f"{inner}: not an element-wise op of the suite")
            spec = load_spec(cands[0])
            attrs = spec_attributes(spec, op_syntax(cands[0]), attribute_map(operation),
                                    _input_env(spec, [_type(v.type, inner)
                                                      for v in operation.operands]), inner)
            literals = [repr(attrs[a.name]) for a in spec.attributes if a.name in attrs]
            call = f"{cands[0]}({', '.join(operands + literals)})"
            for r in operation.results:
                nodes[r] = call
        if results is None:
            raise ReadError(f"{where}: a region without stablehlo.return")
        body = results[0] if len(results) == 1 else f"({', '.join(results)})"
        text = regions.make(arg_types, body)
        try:
            regions.parse(text)
        except regions.RegionError as e:
            raise ReadError(f"{where}: {e}") from None
        return text


def _decomposition(op) -> str | None:
    """A ``stablehlo.composite``'s decomposition function's name (None for another op)."""
    if op.operation.name != "stablehlo.composite" or \
            "decomposition" not in op.operation.attributes:
        return None
    return _symbol(op.operation.attributes["decomposition"])


def _is_constant(op) -> bool:
    return hasattr(op, "operation") and op.operation.name == "stablehlo.constant"


def _value_name(value) -> str:
    try:
        return value.get_name()
    except Exception:  # noqa: BLE001 - a value without a printable name
        return "a value"


def _symbol(attr) -> str:
    text = str(attr)
    return text.lstrip("@").strip('"')


def _int_attr(attr, default: int) -> int:
    if attr is None:
        return default
    try:
        return int(str(attr).split(":")[0])
    except ValueError:
        return default


def _input_env(spec, types: list) -> dict[str, Any]:
    """The spec's input names bound to the operands' types (a list for a variadic
    input), for the defaults' expressions."""
    try:
        return dict(zip((t.name for t in spec.inputs), spec.split_inputs(types)))
    except ValueError:
        return {}


def _check_printed(sig: Signature, syntax, mlir_attrs: dict[str, Any], where: str) -> None:
    """The signature printed again must give every attribute the module gives; an
    attribute the op's spec does not model (and that is not a discardable ``dialect.``
    one) means the op cannot be judged as the spec's op."""
    from jaxlib.mlir import ir
    from conformance.mlir.emitter import EmitError, op_text, result_type_texts
    modelled = {name for name, _ in syntax.attributes}
    if syntax.function:
        modelled.add(syntax.function)
    for name in mlir_attrs:
        if name not in modelled and "." not in name:
            raise ReadError(f"{where}: attribute {name} = {str(mlir_attrs[name])[:80]} is "
                            f"not modelled by the spec of {sig.op}")
    try:
        operands = [f"%x{i}" for i in range(len(sig.input_types))]
        line = op_text(sig, operands)
    except EmitError as e:
        raise ReadError(f"{where}: cannot print it again: {e}") from None
    params = ", ".join(f"%x{i}: {t.mlir()}" for i, t in enumerate(sig.input_types))
    results = ", ".join(result_type_texts(sig))
    text = (f"func.func private @check({params}) -> ({results}) {{\n  {line}\n  "
            f"func.return {_result_names(sig)} : {results}\n}}" if sig.result_types else
            f"func.func private @check({params}) {{\n  {line}\n  func.return\n}}")
    try:
        module = ir.Module.parse(f"module {{\n{text}\n{_functions(sig, syntax)}}}")
    except ir.MLIRError as e:
        raise ReadError(f"{where}: printed again, MLIR rejects it: {_first_line(e)}") \
            from None
    printed_op = module.body.operations[0].regions[0].blocks[0].operations[0]
    printed = attribute_map(printed_op.operation)
    for name, attr in mlir_attrs.items():
        if name not in modelled or name == syntax.function:
            continue
        if name not in printed or printed[name] != attr:
            got = str(printed.get(name, "nothing"))[:80]
            raise ReadError(f"{where}: attribute {name} = {str(attr)[:80]} reads back as "
                            f"{got}")


def _result_names(sig: Signature) -> str:
    n = len(sig.result_types)
    return "%0" if n == 1 else ", ".join(f"%0#{i}" for i in range(n))


def _functions(sig: Signature, syntax) -> str:
    """The ``func.func`` a function-region op names (composite's decomposition)."""
    if not syntax.function:
        return ""
    from conformance.mlir.emitter import module_text
    text = module_text(sig)
    i = text.find("func.func private")
    return text[i:text.rfind("}")] if i >= 0 else ""
