"""The canonical StableHLO text of a program (conformance.core.program): one ``func @main``
whose body prints every operation with the emitter's :func:`~conformance.mlir.emitter.op_text`
(generic form, exactly the types each signature declares), so that a program means what
its single-op cases mean::

    module {
      func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> (tensor<2xf32>) {
        %v0 = "stablehlo.multiply"(%arg0, %arg1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
        %v1 = "stablehlo.add"(%v0, %arg1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
        func.return %v1 : tensor<2xf32>
      }
    }

:func:`body_lines` gives the operations' lines alone, for a program used as a region body
(issue 16). Values are tensors: an op with tuple- or token-typed operands or results
reads and defines their leaves (conformance.core.program), so its tuple operands are
built before it with ``stablehlo.tuple`` (its tokens made with ``stablehlo.after_all``)
and its tuple results taken apart after it with ``stablehlo.get_tuple_element``, as the
single-op module does. Tuple-typed program arguments are not supported (EmitError).
"""
from __future__ import annotations

from conformance.core.program import Program
from conformance.core.types import TupleType
from conformance.mlir.emitter import (EmitError, functions_of, op_text, pack_operands, parse,
                                      unpack_results)

__all__ = ["program_text", "body_lines", "parse_program", "EmitError"]


def _v(name: str) -> str:
    return "%" + name


def body_lines(program: Program) -> list[str]:
    """One line per operation (no indentation), value names as in the program."""
    return _body(program)[0]


def _body(program: Program) -> tuple[list[str], dict[str, str]]:
    """The body's lines, and each value's MLIR name where it is not ``%name`` (a leaf of
    a tuple-typed result: taken apart with get_tuple_element after its op)."""
    problems = program.problems()
    if problems:
        raise EmitError("malformed program: " + "; ".join(problems))
    lines: list[str] = []
    names: dict[str, str] = {}
    for o in program.operations:
        sig = o.signature
        operands = [names.get(v, _v(v)) for v in o.operands]
        if not sig.has_tuples:
            lines.append(op_text(sig, operands, _v(o.name)))
            continue
        # values are leaves (conformance.core.program): the op's tuple operands built
        # from them, its tokens made, its tuple results taken apart into them
        operands = pack_operands(sig.input_types, iter(operands), lines, f"%{o.name}_")
        lines.append(op_text(sig, operands, _v(o.name)))
        n = len(sig.result_types)
        values = [_v(o.name)] if n == 1 else [f"{_v(o.name)}#{i}" for i in range(n)]
        names.update(zip(o.results, unpack_results(values, sig.result_types, lines,
                                                    f"%{o.name}_")))
    return lines, names


def program_text(program: Program) -> str:
    """The program as a complete StableHLO module (``@main``; after it, one ``func.func
    private`` per distinct region of its call and composite ops, at any depth)."""
    with functions_of() as functions:
        lines, names = _body(program)
    if any(isinstance(t, TupleType) for t in program.argument_types):
        raise EmitError("tuple-typed program arguments are not supported yet")
    params = ", ".join(f"{_v(n)}: {t.mlir()}" for n, t in program.arguments)
    out_types = ", ".join(t.mlir() for t in program.result_types)
    values = ", ".join(names.get(r, _v(r)) for r in program.results)
    ret = f"func.return {values} : {out_types}" if program.results else "func.return"
    body = "".join(f"    {line}\n" for line in lines)
    return (f"module {{\n"
            f"  func.func public @main({params}) -> ({out_types}) {{\n"
            f"{body}"
            f"    {ret}\n"
            f"  }}\n"
            f"{''.join(text for _, text in functions.values())}"
            f"}}\n")


def parse_program(program: Program):
    """Parse and verify the program's text (``conformance.mlir.emitter.parse``)."""
    return parse(program_text(program))
