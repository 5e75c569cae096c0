"""Backends with planted program-level bugs (issue 19), loaded as planted_programs:Class
(tests/ is on sys.path under pytest; subprocesses get it through PYTHONPATH).

Each runs single ops with the oracle (``compile``: exactly right alone) and programs op
by op through :meth:`OracleProgram.step`, where a subclass plants the rewrite an
optimiser might make: what only a whole-program check can see.
"""
import ml_dtypes
import numpy as np

from conformance import oracles
from conformance.backends import Backend, Unsupported
from conformance.core.case import Signature
from conformance.core.program import Operation, Program

def build(args, steps, results) -> Program:
    """A program for the tests: args [(name, type)], steps [(name, op, operands, result
    type, attributes)], results [names]."""
    types = dict(args)
    ops = []
    for name, op, operands, rtype, attrs in steps:
        sig = Signature.make(op, [types[v] for v in operands], [rtype], attrs)
        ops.append(Operation(sig, tuple(operands), name))
        types[name] = sig.result_types[0]
    return Program.make(args, ops, results)


#: float types whose multiply-add float64 computes exactly enough to round once
NARROW_FLOATS = ("f32", "f16", "bf16")


class OracleProgram(Backend):
    """Right everywhere: single ops and programs (op by op) with the oracle."""

    name = "oracle-program"
    isolate = False

    def compile(self, signature):
        return lambda xs: oracles.evaluate(signature.op, xs, signature.attributes,
                                           result_types=signature.result_types,
                                           input_types=signature.input_types,
                                           regions=signature.regions)

    def step(self, o, env, producers):
        return self.compile(o.signature)([env[v] for v in o.operands])

    def compile_program(self, program):
        producers = {r: o for o in program.operations for r in o.results}

        def run(inputs):
            env = dict(zip(program.argument_names, inputs))
            for o in program.operations:
                with np.errstate(all="ignore"):
                    outs = self.step(o, env, producers)
                env.update(zip(o.results, (np.asarray(x) for x in outs)))
            return [env[r] for r in program.results]
        return run


class FusesMultiplyAdd(OracleProgram):
    """add(multiply(a, b), c) and add(c, multiply(a, b)) of f32/f16/bf16 with one
    rounding (computed in float64, rounded once): an FMA contraction."""

    name = "fma"

    def step(self, o, env, producers):
        if o.op == "add" and o.signature.result_types[0].element_type.name in NARROW_FLOATS:
            for i, v in enumerate(o.operands):
                m = producers.get(v)
                if m is not None and m.op == "multiply":
                    a, b = (np.asarray(env[x], np.float64) for x in m.operands)
                    c = np.asarray(env[o.operands[1 - i]], np.float64)
                    dtype = o.signature.result_types[0].element_type.dtype
                    return [np.asarray(a * b + c).astype(dtype)]
        return super().step(o, env, producers)


class FoldsConvertPair(OracleProgram):
    """convert(convert(x, T), type of x) folded to x when T is a float type: right only
    where x is representable in T (f16 -> f32 -> f16 is exact; f32 -> f16 -> f32 is not)."""

    name = "fold-convert"

    def step(self, o, env, producers):
        if o.op == "convert":
            inner = producers.get(o.operands[0])
            if inner is not None and inner.op == "convert" and \
                    inner.signature.input_types[0] == o.signature.result_types[0] and \
                    inner.signature.result_types[0].element_type.is_float:
                return [np.asarray(env[inner.operands[0]])]
        return super().step(o, env, producers)


class FoldsWideningConvertPair(OracleProgram):
    """convert(convert(x, wider float), x's float type) folded to x: right for every
    value (a widening float convert is exact, and the way back gives x again, NaN
    payloads aside)."""

    name = "fold-widening-convert"

    def step(self, o, env, producers):
        if o.op == "convert":
            inner = producers.get(o.operands[0])
            if inner is not None and inner.op == "convert":
                src = inner.signature.input_types[0].element_type
                mid = inner.signature.result_types[0].element_type
                if src.is_float and mid.is_float and src == o.signature.result_types[0] \
                        .element_type and ml_dtypes.finfo(mid.dtype).nmant >= ml_dtypes.finfo(src.dtype).nmant \
                        and ml_dtypes.finfo(mid.dtype).maxexp >= ml_dtypes.finfo(src.dtype).maxexp \
                        and ml_dtypes.finfo(mid.dtype).minexp <= ml_dtypes.finfo(src.dtype).minexp:
                    return [np.asarray(env[inner.operands[0]])]
        return super().step(o, env, producers)


class RefusesMultiply(OracleProgram):
    """Has no mapping for multiply: single ops and programs holding one are Unsupported."""

    name = "no-multiply"

    def compile(self, signature):
        if signature.op == "multiply":
            raise Unsupported("multiply is not implemented")
        return super().compile(signature)

    def compile_program(self, program):
        for o in program.operations:
            if o.op == "multiply":
                raise Unsupported("the program holds an op this backend lacks")
        return super().compile_program(program)


def _narrows(a, b) -> bool:
    """Is float type b no wider than a (precision and exponent range)?"""
    fa, fb = ml_dtypes.finfo(a.dtype), ml_dtypes.finfo(b.dtype)
    return fb.nmant <= fa.nmant and fb.maxexp <= fa.maxexp and fb.minexp >= fa.minexp


class FoldsConvertChain(OracleProgram):
    """convert(convert(x, M), R) folded to convert(x, R) where each step narrows (f64 ->
    f32 -> f16): one rounding where the spec rounds twice (an algebraic simplifier's
    convert-of-convert rewrite). Allowed while float rounding is TBD (#180: either
    neighbour at each step)."""

    name = "fold-convert-chain"

    def step(self, o, env, producers):
        if o.op == "convert":
            inner = producers.get(o.operands[0])
            ts = (inner.signature.input_types[0].element_type,
                  inner.signature.result_types[0].element_type,
                  o.signature.result_types[0].element_type) if inner is not None \
                and inner.op == "convert" else ()
            if ts and all(t.is_float for t in ts) and _narrows(ts[0], ts[1]) \
                    and _narrows(ts[1], ts[2]):
                x = np.asarray(env[inner.operands[0]])
                return [x.astype(o.signature.result_types[0].element_type.dtype)]
        return super().step(o, env, producers)


class CrashesOnNegate(OracleProgram):
    """Dies (abort) compiling negate, alone or in a program: isolated, a crash."""

    name = "crash-negate"
    isolate = True

    def compile(self, signature):
        if signature.op == "negate":
            import os
            os.abort()
        return super().compile(signature)

    def compile_program(self, program):
        if "negate" in program.ops():
            import os
            os.abort()
        return super().compile_program(program)


class CrashesOnNegatePrograms(CrashesOnNegate):
    """Dies compiling a program holding negate; negate alone is fine."""

    name = "crash-negate-programs"

    def compile(self, signature):
        return OracleProgram.compile(self, signature)
