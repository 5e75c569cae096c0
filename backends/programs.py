"""Running programs (conformance.core.program) on backends (issue 19).

A backend's program path is ``Backend.compile_program(program)``: a function from the
arguments' arrays (one case) to the results' arrays. xla and interpreter compile the
program's canonical text (conformance.mlir.program_emit) with their ``compile_text``; jax
composes its per-op builders (jax_ops.build) inside one ``jax.jit``
(:func:`jax_function`); the base class says Unsupported with the reason, so a vendor
backend without a program path costs one "unsupported" outcome, never a crash.

:func:`op_by_op` is the metamorphic reference: the same backend running every operation
alone (its single-op executable, compiled once per signature and cached), fed the
values the backend itself produced for the operations before it.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from conformance.core.case import Signature
from conformance.core.program import Program

from .base import Backend, Unsupported

ProgramExecutable = Callable[[Sequence[np.ndarray]], list[np.ndarray]]


def program_signature(program: Program) -> Signature:
    """A signature standing for the whole program where a backend's text path asks for
    one (its input and result types; op name ``program``)."""
    return Signature.make("program", program.argument_types, program.result_types)


def program_text_or_unsupported(program: Program) -> str:
    from conformance.mlir.program_emit import EmitError, program_text
    try:
        return program_text(program)
    except EmitError as e:
        raise Unsupported(f"no StableHLO text for the program: {e}") from None


def jax_function(program: Program) -> Callable[..., Any]:
    """A jax function of the arguments computing the program's results, each operation
    by its jax_ops builder (so a program means what its ops mean one by one)."""
    from .jax_ops import build
    steps = [(o, build(o.signature)) for o in program.operations]
    names = program.argument_names
    results = program.results

    def fn(*args):
        env = dict(zip(names, args))
        for o, f in steps:
            out = f(*(env[v] for v in o.operands))
            outs = out if isinstance(out, (tuple, list)) else (out,)
            env.update(zip(o.results, outs))
        return tuple(env[r] for r in results)
    return fn


def compile_program(backend: Backend, program: Program) -> ProgramExecutable:
    """``backend.compile_program(program)``, with the checks every path shares."""
    problems = program.problems()
    if problems:
        raise ValueError("malformed program: " + "; ".join(problems))
    return backend.compile_program(program)


def op_by_op(backend: Backend, program: Program) -> Callable[[Sequence[np.ndarray]],
                                                              dict[str, np.ndarray]]:
    """Every value of ``program`` for one case, each operation run alone on ``backend``
    (cached single-op executables) on the backend's own earlier values."""
    exes = [(o, backend.executable(o.signature)) for o in program.operations]

    def run(inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        env = {n: np.asarray(x) for n, x in zip(program.argument_names, inputs)}
        for o, exe in exes:
            outs = exe([env[v] for v in o.operands])
            env.update(zip(o.results, (np.asarray(r) for r in outs)))
        return env
    return run


def run_batch(exe: ProgramExecutable, stacked: Sequence[np.ndarray], batch: int
              ) -> list[np.ndarray]:
    """A single-case program executable run once per case; results stacked."""
    per_case = [[np.asarray(r) for r in exe([x[b] for x in stacked])] for b in range(batch)]
    if not per_case:
        return []
    return [np.stack([c[i] for c in per_case]) for i in range(len(per_case[0]))]


__all__ = ["compile_program", "op_by_op", "jax_function", "program_signature", "run_batch",
           "program_text_or_unsupported", "ProgramExecutable"]
