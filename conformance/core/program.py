"""Programs: a typed sequence of ops with named values (issue 19; issue 16's region bodies).

A :class:`Program` is plain data, like a :class:`~conformance.core.case.Signature`:

- ``arguments``: ``(name, type)`` pairs, the function's (or block's) arguments;
- ``operations``: :class:`Operation` in order, each an op application: the op's
  :class:`Signature` (op name, operand types, attributes, regions, result types), the
  names of its operand values, and the name it defines (one result: ``name``; several:
  ``name#0``, ``name#1``, ... as in MLIR);
- ``results``: the names of the values returned, in order (a value may be returned twice,
  an argument may be returned).

Values are tensors. An op with tuple- or token-typed operands or results (tuple,
get_tuple_element, after_all, ...: a module read in) reads and defines their leaves, as
its cases do (``Signature.input_leaves``, ``result_leaves``): a tuple-typed result is one
name per leaf, a token none.

Every value is defined once, before it is used, with the type its users' signatures
declare: :meth:`Program.problems` says where that does not hold (the checks are
structural; whether each op's signature is valid is the spec's business,
``conformance.specs.validity``). Names are identifiers (``[A-Za-z_][A-Za-z0-9_]*``)
so that they print as MLIR value names (``%arg0``, ``%v3``, ``%v3#1``) unchanged.

The text form (:meth:`Program.describe`) is for reports::

    (arg0: tensor<2x3xf32>, arg1: tensor<2x3xf32>) {
      v0 = multiply(arg0, arg1) : tensor<2x3xf32>
      v1 = add(v0, arg1) : tensor<2x3xf32>
      return v1
    }

The canonical StableHLO module is ``conformance.mlir.program_emit.program_text``.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable, Mapping, Sequence

from conformance.core.case import Signature
from conformance.core.types import TensorType, TupleType, value_type

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

ValueType = "TensorType | TupleType"


@dataclasses.dataclass(frozen=True)
class Operation:
    """One op application: ``name = op(operands...) : result types``."""

    signature: Signature
    operands: tuple[str, ...]
    name: str

    @property
    def op(self) -> str:
        return self.signature.op

    @property
    def results(self) -> tuple[str, ...]:
        """The names this operation defines: ``name``, or ``name#i`` for several results.
        A value is a tensor: a tuple-typed result stands for its leaves (one name each,
        depth-first) and a token for none, as in a case (``Signature.result_leaves``)."""
        n = len(self.signature.result_leaves)
        return (self.name,) if n == 1 else tuple(f"{self.name}#{i}" for i in range(n))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "operands": list(self.operands),
                "signature": self.signature.to_json()}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Operation":
        return Operation(Signature.from_json(d["signature"]), tuple(d["operands"]), d["name"])


@dataclasses.dataclass(frozen=True)
class Program:
    """A function (or region body) of several ops; see the module docstring."""

    arguments: tuple[tuple[str, Any], ...]
    operations: tuple[Operation, ...]
    results: tuple[str, ...]

    @staticmethod
    def make(arguments: Iterable[tuple[str, Any]], operations: Iterable[Operation],
             results: Iterable[str]) -> "Program":
        return Program(tuple((n, value_type(t)) for n, t in arguments), tuple(operations),
                       tuple(results))

    # -- reading ---------------------------------------------------------------------------
    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.arguments)

    @property
    def argument_types(self) -> tuple[Any, ...]:
        return tuple(t for _, t in self.arguments)

    def types(self) -> dict[str, Any]:
        """Every value's type by name (arguments and op results)."""
        out = dict(self.arguments)
        for o in self.operations:
            out.update(zip(o.results, o.signature.result_leaves))
        return out

    @property
    def result_types(self) -> tuple[Any, ...]:
        types = self.types()
        return tuple(types[r] for r in self.results)

    def ops(self) -> list[str]:
        return [o.op for o in self.operations]

    def users(self) -> dict[str, list[int]]:
        """value name -> indices of the operations that read it."""
        out: dict[str, list[int]] = {}
        for i, o in enumerate(self.operations):
            for v in o.operands:
                out.setdefault(v, []).append(i)
        return out

    def producer(self) -> dict[str, tuple[int, int]]:
        """result name -> (operation index, result index)."""
        return {r: (i, k) for i, o in enumerate(self.operations) for k, r in enumerate(o.results)}

    def problems(self) -> list[str]:
        """Structural faults, one line each (empty: well formed)."""
        out: list[str] = []
        defined: dict[str, Any] = {}
        for n, t in self.arguments:
            if not _NAME.match(n):
                out.append(f"argument name {n!r} is not an identifier")
            if n in defined:
                out.append(f"{n} is defined twice")
            defined[n] = t
        for i, o in enumerate(self.operations):
            sig = o.signature
            if not _NAME.match(o.name):
                out.append(f"operation {i} ({o.op}): name {o.name!r} is not an identifier")
            if len(o.operands) != len(sig.input_leaves):
                out.append(f"{o.name} = {o.op}: {len(o.operands)} operand(s) for "
                           f"{len(sig.input_leaves)} input type(s)")
            for v, t in zip(o.operands, sig.input_leaves):
                if v not in defined:
                    out.append(f"{o.name} = {o.op}: operand {v} is not defined before it")
                elif defined[v] != t:
                    out.append(f"{o.name} = {o.op}: operand {v} is {defined[v]}, the "
                               f"signature says {t}")
            for r, t in zip(o.results, sig.result_leaves):
                if r in defined:
                    out.append(f"{r} is defined twice")
                defined[r] = t
        for r in self.results:
            if r not in defined:
                out.append(f"result {r} is not defined")
        return out

    # -- changing (the minimiser's moves; each returns a new program) -----------------------
    def pruned(self) -> "Program":
        """Without the operations and arguments that no result depends on."""
        live = set(self.results)
        keep: list[Operation] = []
        for o in reversed(self.operations):
            if live & set(o.results):
                keep.append(o)
                live |= set(o.operands)
        args = tuple((n, t) for n, t in self.arguments if n in live)
        return Program(args, tuple(reversed(keep)), self.results)

    def with_results(self, results: Sequence[str]) -> "Program":
        return dataclasses.replace(self, results=tuple(results))

    def cut_at(self, value: str, argument: str | None = None) -> "Program":
        """The value ``value`` (an operation's only result) becomes a new argument (named
        ``argument``, default the value's own name), appended after the others; the
        operation that made it is dropped. Unused operations and arguments are pruned."""
        index, _ = self.producer()[value]
        o = self.operations[index]
        if len(o.results) != 1:
            raise ValueError(f"{value}: only an operation of one result can be cut")
        name = argument or value
        rename = {value: name}
        ops = tuple(dataclasses.replace(x, operands=tuple(rename.get(v, v) for v in x.operands))
                    for i, x in enumerate(self.operations) if i != index)
        results = tuple(rename.get(r, r) for r in self.results)
        return Program(self.arguments + ((name, o.signature.result_types[0]),), ops,
                       results).pruned()

    def exposed(self) -> "Program":
        """The same operations, returning every operation's results (after the program's
        own results): what the metamorphic check reads intermediate values from."""
        extra = tuple(r for o in self.operations for r in o.results)
        return dataclasses.replace(self, results=self.results + extra)

    # -- printing and serialising -----------------------------------------------------------
    def describe(self) -> str:
        args = ", ".join(f"{n}: {t.mlir()}" for n, t in self.arguments)
        lines = [f"({args}) {{"]
        for o in self.operations:
            sig = o.signature
            attrs = sig.attributes
            attr_text = (" {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}"
                         if attrs else "")
            regions = (" [" + "; ".join(sig.regions) + "]") if sig.regions else ""
            results = ", ".join(t.mlir() for t in sig.result_types)
            lines.append(f"  {o.name} = {o.op}({', '.join(o.operands)}){attr_text}{regions}"
                         f" : {results}")
        lines.append(f"  return {', '.join(self.results)}")
        lines.append("}")
        return "\n".join(lines)

    __str__ = describe

    def to_json(self) -> dict[str, Any]:
        return {"arguments": [[n, str(t)] for n, t in self.arguments],
                "operations": [o.to_json() for o in self.operations],
                "results": list(self.results)}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Program":
        return Program.make([(n, t) for n, t in d["arguments"]],
                            [Operation.from_json(o) for o in d["operations"]], d["results"])


def single(sig: Signature) -> Program:
    """The one-op program of a signature (arguments arg0.., the op named v0; a tuple
    input's leaves are arguments each, a token input none)."""
    args = tuple((f"arg{i}", t) for i, t in enumerate(sig.input_leaves))
    o = Operation(sig, tuple(n for n, _ in args), "v0")
    return Program(args, (o,), o.results)


__all__ = ["Operation", "Program", "single", "TensorType"]
