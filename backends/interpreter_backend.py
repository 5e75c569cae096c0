"""The interpreter backend: the StableHLO reference interpreter that jaxlib ships
(``eval_module`` in its StableHLO bindings), run on each case's canonical module.

Inputs become dense attributes of exactly the declared tensor type, built from the
arrays' raw bits (bf16, fp8, int4, i1 and complex included); results come back
bit-exact as numpy arrays of their own element type (NaN payloads, signed zeros and
subnormals preserved) -- see :mod:`.jaxlib_support`.

Programs are verified once with ``conformance.mlir.emitter.parse`` and run in a private
MLIR context that is replaced after every ``context_limit`` bytes of case data:
MLIR keeps every attribute (every input and result) for the life of its context.

The interpreter kills its process on some inputs (integer division by zero raises
SIGFPE; compare LE/LT/GE/GT on complex aborts), so ``isolate = True``: the runner
runs it in a child process. A program
that the MLIR verifier rejects is a rejection (right for an invalid signature, a
backend error for a valid one); an ``eval_module`` failure raises
:class:`InterpreterError` with the interpreter's own diagnostics.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from conformance.core.case import Signature

from . import jaxlib_support
from .base import Backend, Unsupported
from .xla_backend import module_text


#: ops whose every program kills the interpreter's process (jaxlib 0.10.2's eval_module),
#: declared Unsupported with its own words instead of one crash per signature
#: (tests/test_rng.py runs one such case isolated and sees the crash)
ABORTS = {
    op: (f"the StableHLO reference interpreter aborts the process on stablehlo.{op} "
         f"(jaxlib 0.10.2: \"LLVM ERROR: Operation stablehlo.{op} is unsupported at the "
         "moment\", openxla/stablehlo#1571)")
    for op in ("rng", "rng_bit_generator")}
# RngBernoulli's canonical program draws with stablehlo.rng (conformance/core/decompositions.py)
ABORTS["rng_bernoulli"] = "its canonical program draws with stablehlo.rng: " + ABORTS["rng"]
# (measured on jaxlib 0.10.2: both kill the process)
ABORTS["set_dimension_size"] = (
    "the StableHLO reference interpreter aborts the process on a bounded dynamic result "
    "(jaxlib 0.10.2: \"LLVM ERROR: dynamic result types are not supported at the moment\"; "
    "with a static result type: \"LLVM ERROR: Unsupported op: stablehlo.set_dimension_size\")")
ABORTS["get_dimension_size_dynamic"] = ("its canonical program makes the dynamic dimension "
                                        "with set_dimension_size: " + ABORTS["set_dimension_size"])


#: ops whose valid programs kill the interpreter's process, declined once they verified
ABORTS_VERIFIED = {
    "custom_call": ("the StableHLO reference interpreter has no custom call targets: jaxlib "
                    "0.10.2's eval_module aborts the process (\"LLVM ERROR: Unsupported op: "
                    "stablehlo.custom_call\")")}
# The ops the interpreter declares unsupported (it aborts at the first one it meets, after
# the program verified: an invalid program of them is still rejected). Measured on jaxlib
# 0.10.2: every signature of these ops crashed the child process before (the three-backend
# quick run: 12 crash records and a bisection per op).
ABORTS_VERIFIED.update({
    op: (f"the StableHLO reference interpreter aborts the process on stablehlo.{op} "
         f"(jaxlib 0.10.2: \"LLVM ERROR: Operation stablehlo.{op} is unsupported at the "
         "moment\", openxla/stablehlo#1571)")
    for op in ("batch_norm_grad", "batch_norm_inference", "batch_norm_training", "cholesky")})
# The collectives (issue 18), on any grid, 1x1 included
ABORTS_VERIFIED.update({
    op: (f"jaxlib 0.10.2's eval_module aborts the process on stablehlo.{op} (\"LLVM ERROR: "
         f"{op} is only supported when run via interpreter.run_parallel\"), and run_parallel, "
         "the interpreter's entry point for a process grid, is not in jaxlib's bindings")
    for op in ("all_gather", "all_reduce", "all_to_all", "collective_permute",
               "reduce_scatter", "replica_id", "partition_id", "collective_broadcast")})

# async_start / async_done (stablehlo-spec-2026-08), printed as the pair (docs/async-ops.md)
ABORTS_VERIFIED.update({
    op: ("jaxlib 0.10.2's eval_module aborts the process on stablehlo.async_start (\"LLVM "
         "ERROR: Unsupported op: %0 = \"stablehlo.async_start\"...\"), even with a slice "
         "body")
    for op in ("async_start", "async_done")})

#: Why quantized programs do not reach the interpreter (measured on jaxlib 0.10.2): the
#: MLIR context of jaxlib's Python bindings registers no quant dialect, so the module
#: does not parse.
QUANTIZED_REASON = ("jaxlib 0.10.2's MLIR bindings register no quant dialect, so a module "
                    "with !quant.uniform types does not parse for eval_module ('type "
                    "created with unregistered dialect')")


class InterpreterError(RuntimeError):
    """``eval_module`` refused to run the program; the message has its diagnostics."""


class _Arena:
    """A private MLIR context for running modules, replaced by a fresh one once the
    attributes made in it hold more than ``limit`` bytes: MLIR keeps every attribute
    (every input and result of every case) until its context is destroyed."""

    def __init__(self, lib: jaxlib_support.Jaxlib, limit: int) -> None:
        self.lib = lib
        self.limit = limit
        self.generation = 0
        self.used = 0
        self.context: Any = None
        self.converter: jaxlib_support.AttributeConverter | None = None

    def refresh(self) -> None:
        if self.context is None or self.used > self.limit:
            self.converter = None
            self.context = None               # drop ours before making the next one
            self.context = jaxlib_support.make_context(self.lib)
            jaxlib_support.install_dense_caster(self.lib, self.context)
            self.converter = jaxlib_support.AttributeConverter(self.lib, self.context)
            self.generation += 1
            self.used = 0


class InterpreterBackend(Backend):
    name = "interpreter"
    isolate = True
    #: Bytes of input and result data after which the MLIR context is replaced.
    context_limit = 64 << 20
    #: Its text path takes packs (a pack's members are refused as alone), but packing
    #: does not pay here (issue 33): there is no compile to share, and a pack dies with
    #: its process where one member's case does (SIGFPE on an integer division by zero).
    no_pack = ("the StableHLO interpreter compiles nothing to share (its compile parses "
               "and verifies the text, under a millisecond; every case is interpreted), "
               "and a pack that kills its process (SIGFPE on an integer division by zero) "
               "sends every member alone after a restart: packs of 16 ran 0.59x the "
               "signatures/s of one compile each (bench/bench_packing.py --backend "
               "interpreter --isolate)")

    def __init__(self) -> None:
        super().__init__()
        self.lib = jaxlib_support.load("interpreter", "interpreter")
        self._arena = _Arena(self.lib, self.context_limit)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "jax": self.lib.jax_version,
                "jaxlib": self.lib.jaxlib_version, "platform": "stablehlo-interpreter"}

    def parse(self, text: str):
        """Parse and verify module text (``conformance.mlir.emitter.parse``): a program the
        MLIR verifier rejects raises here, at compile time."""
        from conformance.mlir.emitter import parse
        return parse(text)

    def compile_text(self, text: str, sig: Signature):
        """Verify ``text`` (the canonical module of ``sig``) once; return a function
        that interprets it on input arrays."""
        parts = getattr(sig, "members", ()) or (sig,)    # a pack: each member as alone
        for part in parts:
            self._refuse(part)
        run = self._interpret(text, sig.op)         # verified: an invalid one raised here
        for part in parts:
            self._refuse_verified(part)
        return run

    def _refuse_verified(self, sig: Signature) -> None:
        """Unsupported, once the program verified (so an invalid one is still rejected),
        where eval_module would abort the process: a host transfer (``host: true`` in
        the op's spec) or an op in :data:`ABORTS_VERIFIED`."""
        from conformance.specs import SpecError, UnknownOp, load_spec
        try:
            host = load_spec(sig.op).host_transfer
        except (UnknownOp, SpecError):
            host = False
        if host:
            raise Unsupported(
                f"{sig.op}: the StableHLO reference interpreter's eval_module has no host "
                "queues: jaxlib 0.10.2's eval_module aborts the process on infeed and outfeed "
                "(\"LLVM ERROR: infeed is only supported when run via "
                "interpreter.run_parallel\", which jaxlib's bindings lack) and dies with "
                "SIGSEGV on send and recv (measured)")
        if sig.op in ABORTS_VERIFIED:
            raise Unsupported(f"{sig.op}: {ABORTS_VERIFIED[sig.op]}")

    def _refuse(self, sig: Signature) -> None:
        """Unsupported where the interpreter cannot (or must not) run ``sig``'s op."""
        if sig.num_replicas * sig.num_partitions > 1:
            raise Unsupported(f"{sig.op} needs {sig.num_replicas}x{sig.num_partitions} "
                              "processes; jaxlib's interpreter entry point (stablehlo."
                              "eval_module) interprets one and takes no process grid")
        from conformance.mlir.emitter import op_name
        name = op_name(sig)
        if name.partition(".")[0] != "stablehlo" and name != "func.call":
            # (jaxlib 0.10.2's eval_module aborts the process on a chlo op; it evaluates
            # func.call, measured: the call spec's module)
            raise Unsupported(f"{sig.op}: the StableHLO reference interpreter evaluates "
                              f"stablehlo ops only, not {name}")
        if sig.op in ABORTS:
            raise Unsupported(f"{sig.op}: {ABORTS[sig.op]}")
        if any(t.element_type.is_quantized
               for t in tuple(sig.input_leaves) + tuple(sig.result_leaves)):
            # (valid and invalid alike: the parse fails before any rule is read)
            raise Unsupported(f"{sig.op}: {QUANTIZED_REASON}")

    def compile_program(self, program):
        """The program's canonical text, every op refused as alone (backends/programs.py)."""
        from .programs import program_text_or_unsupported
        for o in program.operations:
            self._refuse(o.signature)
        return self._interpret(program_text_or_unsupported(program), "program")

    def _interpret(self, text: str, op: str):
        self.parse(text)
        arena = self._arena
        lib = self.lib
        eval_module = lib.eval_module
        parsed: list[Any] = [0, None]            # [arena generation, module]

        def execute(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            arena.refresh()
            if parsed[0] != arena.generation:
                parsed[:] = [arena.generation,
                             jaxlib_support.parse_module(lib, text, arena.context)]
            module, conv, context = parsed[1], arena.converter, arena.context
            arrays = [np.asarray(x) for x in inputs]
            args = [conv.to_attribute(x) for x in arrays]
            diagnostics = jaxlib_support.Diagnostics(context)
            try:
                results = eval_module(module, args)
            except Exception as e:  # noqa: BLE001 - the interpreter's own refusal
                said = "; ".join(diagnostics.take()) or str(e)
                raise InterpreterError(f"{op}: the interpreter failed: "
                                       f"{' '.join(said.split())}") from None
            finally:
                diagnostics.detach()
            outs = [conv.from_attribute(r) for r in results]
            arena.used += sum(x.nbytes for x in arrays) + sum(x.nbytes for x in outs)
            return outs
        return execute

    def compile(self, signature: Signature):
        return self.compile_text(module_text(signature), signature)
