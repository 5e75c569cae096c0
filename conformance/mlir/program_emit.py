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
(issue 16). Tuple-typed values are not supported yet (EmitError).
"""
from __future__ import annotations

from conformance.core.program import Program
from conformance.core.types import TupleType
from conformance.mlir.emitter import EmitError, functions_of, op_text, parse

__all__ = ["program_text", "body_lines", "parse_program", "EmitError"]


def _v(name: str) -> str:
    return "%" + name


def body_lines(program: Program) -> list[str]:
    """One line per operation (no indentation), value names as in the program."""
    problems = program.problems()
    if problems:
        raise EmitError("malformed program: " + "; ".join(problems))
    lines = []
    for o in program.operations:
        if any(isinstance(t, TupleType) for t in o.signature.input_types
               + o.signature.result_types):
            raise EmitError(f"{o.name} = {o.op}: tuple-typed values in programs are not "
                            "supported yet")
        lines.append(op_text(o.signature, [_v(v) for v in o.operands], _v(o.name)))
    return lines


def program_text(program: Program) -> str:
    """The program as a complete StableHLO module (``@main``; after it, one ``func.func
    private`` per distinct region of its call and composite ops, at any depth)."""
    with functions_of() as functions:
        lines = body_lines(program)
    if any(isinstance(t, TupleType) for t in program.argument_types):
        raise EmitError("tuple-typed program arguments are not supported yet")
    params = ", ".join(f"{_v(n)}: {t.mlir()}" for n, t in program.arguments)
    out_types = ", ".join(t.mlir() for t in program.result_types)
    values = ", ".join(_v(r) for r in program.results)
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
