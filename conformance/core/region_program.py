"""Region programs: region bodies of several ops (issue 16: if, case, while).

A region of ``if``/``case``/``while`` is a small program, not one expression: a typed
sequence of ops with named values (a :class:`~conformance.core.program.Program`, the
representation the programs feature already uses), block arguments of any shape and
several results. It is plain data held as a string in ``Signature.regions`` (so
signatures stay hashable and serialisable) and parses back to the same program.

The API (small on purpose; call and composite use it too: their callee/decomposition is
a body whose arguments are all block arguments, printed as a ``func.func``):

- :class:`Body` ``(program, block)``: the first ``block`` arguments of ``program`` are
  the region's block arguments (``^bb0(...)``); the others are values *captured* from
  the enclosing function, in order (an ``if``'s branches have no block arguments, 003
  "### if" C1, and read the op's ``captured`` inputs this way). ``results`` of the
  program are what the region returns (``stablehlo.return``).
- :func:`text` ``(body) -> str``: the canonical text, ``program {JSON}`` (keys sorted,
  no spaces): the same body always gives the same text;
- :func:`parse` ``(text) -> Body`` (cached; :class:`RegionProgramError` in one line);
- :func:`is_program` ``(text)``: is this a region program (rather than a
  ``specs/regions.py`` expression)?
- ``Body.block_types``, ``capture_types``, ``result_types``; ``Body.describe()``: the
  readable form for reports (``(captured: c0) (c0: tensor<i32>) { ... }``).

Evaluated by ``conformance.oracles.control_flow`` (each op at its own oracle, via
``oracles/programs.py``), printed by the emitter (``conformance.mlir.emitter.block_text``),
built for jax by ``backends/jax_ops_control_flow.py`` (``backends/programs.jax_function``).
"""
from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Sequence

from conformance.core.program import Operation, Program

__all__ = ["Body", "RegionProgramError", "text", "parse", "is_program", "make", "mutations",
           "PREFIX"]

PREFIX = "program "


class RegionProgramError(ValueError):
    """A region program text that does not parse or is malformed; one line."""


@dataclasses.dataclass(frozen=True)
class Body:
    """A region body: ``program`` whose first ``block`` arguments are block arguments."""

    program: Program
    block: int

    @property
    def block_types(self) -> tuple[Any, ...]:
        return self.program.argument_types[:self.block]

    @property
    def capture_types(self) -> tuple[Any, ...]:
        return self.program.argument_types[self.block:]

    @property
    def result_types(self) -> tuple[Any, ...]:
        return self.program.result_types

    @property
    def op_names(self) -> tuple[str, ...]:
        """The ops of the body in order (async_start's C1, C2 count and name them)."""
        return tuple(o.signature.op for o in self.program.operations)

    def describe(self) -> str:
        names = self.program.argument_names
        if self.block == len(names):
            return self.program.describe()
        captured = ", ".join(names[self.block:])
        return f"(captured: {captured}) " + self.program.describe()

    def problems(self) -> list[str]:
        out = self.program.problems()
        if not 0 <= self.block <= len(self.program.arguments):
            out.append(f"block {self.block}: the program has {len(self.program.arguments)} "
                       "arguments")
        return out


def make(arguments: Sequence[tuple[str, Any]], operations: Sequence[Operation],
         results: Sequence[str], block: int | None = None) -> str:
    """The text of a body (``block``: how many arguments are block arguments; default
    all of them)."""
    program = Program.make(arguments, operations, results)
    return text(Body(program, len(program.arguments) if block is None else block))


def text(body: Body) -> str:
    d = {"block": body.block, **body.program.to_json()}
    return PREFIX + json.dumps(d, sort_keys=True, separators=(",", ":"))


def is_program(text_: str) -> bool:
    return isinstance(text_, str) and text_.startswith(PREFIX)


@functools.lru_cache(maxsize=4096)
def parse(text_: str) -> Body:
    if not is_program(text_):
        raise RegionProgramError(f"region {text_[:60]!r}: a region program starts with "
                                 f"{PREFIX!r}")
    try:
        d = json.loads(text_[len(PREFIX):])
        body = Body(Program.from_json(d), int(d["block"]))
    except (ValueError, KeyError, TypeError) as e:
        raise RegionProgramError(f"region program {text_[:60]!r}...: {e}") from None
    problems = body.problems()
    if problems:
        raise RegionProgramError(f"region program: {problems[0]}")
    return body


def mutations(text_: str) -> list[str]:
    """Single changes of a body's type, each still a well-formed program (for invalid
    cases): one more block argument; one result more (the first repeated) or fewer; the
    first result replaced by a value of another type. Not one more captured value: an
    MLIR region captures a value by using it, so one that no op reads is not in the
    module at all (the "invalid" program printed byte for byte as the valid one, and a
    backend that ran it was reported as accepting an invalid program)."""
    body = parse(text_)
    p = body.program
    out: list[Body] = []
    first = p.result_types[0] if p.results else None
    extra = first if first is not None else "tensor<i32>"
    names = {n for n, _ in p.arguments}
    fresh = next(f"x{i}" for i in range(len(names) + 1) if f"x{i}" not in names)
    args = list(p.arguments)
    out.append(Body(Program.make(args[:body.block] + [(fresh, extra)] + args[body.block:],
                                 p.operations, p.results), body.block + 1))
    if p.results:
        out.append(Body(dataclasses.replace(p, results=p.results + p.results[:1]), body.block))
        if len(p.results) > 1:
            out.append(Body(dataclasses.replace(p, results=p.results[:-1]), body.block))
        types = p.types()
        other = [v for v in list(types) if types[v] != first]
        if other:
            out.append(Body(dataclasses.replace(p, results=(other[0],) + p.results[1:]),
                            body.block))
    return [text(b) for b in out]
