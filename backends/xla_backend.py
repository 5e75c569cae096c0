"""The XLA backend: each case's canonical StableHLO module, compiled straight through
jaxlib's PJRT client and run on one device.

Unlike the ``jax`` backend nothing goes through ``jax.lax``: XLA sees exactly the
spec's op with exactly the signature's types (``conformance.mlir.emitter.module_text``),
including what ``jax.lax`` does not expose (``add`` on i1, which the spec defines as
logical OR). ``XlaBackend("cpu")`` is the short name ``xla``, ``XlaBackend("gpu")``
is ``xla-gpu``.

Outcomes:

- a compile error for a valid signature is a backend error (it propagates), except
  XLA's ``UNIMPLEMENTED`` status, which is the platform saying it does not support
  the case, and an op XLA's StableHLO importer "can't [translate] to XLA HLO" (no HLO
  instruction for it): ``Unsupported``, with XLA's message;
- a dot_general algorithm XLA refuses ("Algorithm not supported"): ``Unsupported``, the
  error the spec asks of an unsupported algorithm (stablehlo-spec-2026-08.md);
- any compile error for an invalid signature is the right answer (a rejection);
- an input element type that the device cannot hold is ``Unsupported`` at compile
  time (PJRT CPU holds all 19 StableHLO element types).

Batches run the same loaded executable once per case (the program under test is
never changed to add a batch dimension), with the per-call work cut to a transfer
per input, one execute and one fetch per result (~25 us for a two-input op on CPU).
All private jax/jaxlib use is in :mod:`.jaxlib_support`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from conformance.core.case import Signature

from . import jaxlib_support
from .base import Backend, BackendLoadError, Unsupported
from .host_cpu import bf16_conversion
from .vendor import module_text  # the canonical text; NoProgram (Unsupported) if none


class XlaBackend(Backend):
    name = "xla"
    #: XLA CPU kills the process compiling some valid programs (SIGABRT on
    #: bitcast_convert complex<f32> -> complex<f64>, SIGSEGV on remainder of complex),
    #: so it runs in a child process by default.
    isolate = True

    def __init__(self, platform: str = "cpu") -> None:
        super().__init__()
        who = "xla" if platform == "cpu" else f"xla-{platform}"
        self.lib = jaxlib_support.load(who, "pjrt")
        try:
            self.pjrt = jaxlib_support.Pjrt(self.lib, platform)
        except (RuntimeError, IndexError, ValueError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise BackendLoadError(f"{who} backend: no {platform} device ({first})") from None
        self.platform = platform
        if platform != "cpu":
            self.name = f"xla-{platform}"

    def describe(self) -> dict[str, Any]:
        info = {"name": self.name, "jax": self.lib.jax_version,
                "jaxlib": self.lib.jaxlib_version, "platform": self.platform,
                "device": str(self.pjrt.device),
                "platform_version": getattr(self.pjrt.client, "platform_version", None)}
        if self.platform == "cpu":
            info["cpu_bf16"] = bf16_conversion()
        return info

    # -- compile ---------------------------------------------------------------------
    def compile_text(self, text: str, sig: Signature):
        """Compile module ``text`` (the canonical module of ``sig``) into a loaded
        executable; the classification of errors is in the module docstring."""
        for t in tuple(sig.input_leaves) + tuple(sig.result_leaves):
            why = self.pjrt.cannot_transfer(t.element_type.dtype)
            if why is not None:
                raise Unsupported(f"{self.platform} cannot hold {t.element_type} arrays: {why}")
        devices = sig.num_replicas * sig.num_partitions
        if devices > len(self.pjrt.client.local_devices()):
            raise Unsupported(f"{sig.op} needs {sig.num_replicas}x{sig.num_partitions} "
                              f"processes; the {self.platform} client has "
                              f"{len(self.pjrt.client.local_devices())} devices (XLA_FLAGS="
                              "--xla_force_host_platform_device_count=8 before XLA starts; "
                              "the isolated child sets it)")
        try:
            if devices > 1:         # one device per process (issue 18)
                return jaxlib_support.GridLoaded(self.pjrt, text, sig.num_replicas,
                                                 sig.num_partitions)
            compiled = self.pjrt.compile(text)
        except Exception as e:  # noqa: BLE001 - classified below, re-raised otherwise
            if not sig.invalid and _untranslatable_quantized(sig, e):
                raise Unsupported(f"XLA {self.platform} verifies quantized programs but "
                                  f"cannot translate them to HLO: {_one_line(e)}",
                                  compiled=True) from None
            if not sig.invalid and jaxlib_support.status_code(e) == "UNIMPLEMENTED":
                raise Unsupported(f"XLA {self.platform}: {_one_line(e)}", compiled=True) from None
            if not sig.invalid and "can't be translated to XLA HLO" in str(e):
                # a StableHLO op that XLA's importer has no HLO for (jaxlib 0.10.2:
                # dynamic_pad, dynamic_gather, dynamic_conv)
                raise Unsupported(f"XLA {self.platform}: {_one_line(e)}", compiled=True) from None
            if not sig.invalid and "Algorithm not supported" in str(e):
                # dot_general's algorithm (stablehlo-spec-2026-08.md: "If a given algorithm
                # is not supported, an error should be raised"): XLA CPU 0.10.2 refuses
                # ALG_DOT_ANY_F8_ANY_F8_F32 ("Algorithm not supported by the
                # ElementalIrEmitter"), as the spec asks
                raise Unsupported(f"XLA {self.platform}: {_one_line(e)}", compiled=True) from None
            if not sig.invalid and jaxlib_support.status_code(e) == "NOT_FOUND" and \
                    "custom call" in str(e):
                # a custom_call target this XLA has no implementation of
                raise Unsupported(f"XLA {self.platform}: {_one_line(e)}", compiled=True) from None
            raise
        self._refuse_host_transfer(sig)
        return compiled

    def _refuse_host_transfer(self, sig: Signature) -> None:
        """Unsupported for an op that exchanges data with the host (``host: true`` in its
        spec: infeed, outfeed, send, recv), after the program compiled (so an invalid one
        is still rejected): PJRT gives no way here to fill or drain the device's queues,
        and XLA CPU's infeed and outfeed wait for them forever (measured on jaxlib
        0.10.2: the run never returns)."""
        from conformance.specs import SpecError, UnknownOp, load_spec
        try:
            host = load_spec(sig.op).host_transfer
        except (UnknownOp, SpecError):
            return
        if host:
            missing = [n for n in ("transfer_to_infeed", "transfer_from_outfeed")
                       if not hasattr(self.pjrt.device, n)]
            raise Unsupported(
                f"XLA {self.platform}: {sig.op} exchanges data with the host, and jaxlib "
                f"{self.lib.jaxlib_version}'s PJRT client has no host-transfer API "
                f"({', '.join(missing) or 'no transfer'} missing on its devices), so nothing "
                "could fill or drain the queue and the program would wait forever; declined "
                "at compile time")

    def _executable(self, sig: Signature):
        compiled = self.compile_text(module_text(sig), sig)
        if isinstance(compiled, jaxlib_support.GridLoaded):
            return compiled
        from conformance.mlir.emitter import op_syntax
        if op_syntax(sig.op).dynamic_result:     # set_dimension_size: a bounded result
            return self.pjrt.loaded(compiled, [t.shape for t in sig.result_leaves])
        return self.pjrt.loaded(compiled)

    def compile(self, signature: Signature):
        run = self._executable(signature)
        if isinstance(run, jaxlib_support.GridLoaded):
            return run          # [processes] + shape per input and result
        put = self.pjrt.put

        def execute(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            return run([put(np.ascontiguousarray(x)) for x in inputs])
        return execute

    def compile_program(self, program):
        """The program's canonical text compiled as one module (backends/programs.py)."""
        from .programs import program_signature, program_text_or_unsupported
        text = program_text_or_unsupported(program)
        run = self.pjrt.loaded(self.compile_text(text, program_signature(program)))
        put = self.pjrt.put

        def execute(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            return run([put(np.ascontiguousarray(x)) for x in inputs])
        return execute

    def compile_pack(self, signatures: Sequence[Signature]):
        """Several independent signatures as one module (backends/xla_pack.py)."""
        from .xla_pack import XlaPack
        return XlaPack(self, signatures)

    def compile_batch(self, signature: Signature):
        run = self._executable(signature)
        if isinstance(run, jaxlib_support.GridLoaded):
            return _grid_batch(run, signature)
        pjrt = self.pjrt
        put = pjrt.put

        def execute(stacked: Sequence[np.ndarray]) -> list[np.ndarray]:
            stacked = [np.ascontiguousarray(x) for x in stacked]
            batch = stacked[0].shape[0] if stacked else 1
            if batch == 0:
                return [np.zeros((0,) + t.shape, t.element_type.dtype)
                        for t in signature.result_leaves]
            avals = [pjrt.aval(x.shape[1:], x.dtype) for x in stacked]
            outs: list[np.ndarray] = []
            for b in range(batch):
                results = run([put(x[b], a) for x, a in zip(stacked, avals)])
                if b == 0:
                    outs = [np.empty((batch,) + r.shape, r.dtype) for r in results]
                for out, r in zip(outs, results):
                    out[b, ...] = r
            return outs
        return execute


def _grid_batch(run, signature: Signature):
    """A batch on a grid: one execution per case, [batch, processes] + shape."""
    n = signature.num_replicas * signature.num_partitions

    def execute(stacked: Sequence[np.ndarray]) -> list[np.ndarray]:
        batch = stacked[0].shape[0] if stacked else 1
        if batch == 0:
            return [np.zeros((0, n) + t.shape, t.element_type.dtype)
                    for t in signature.result_leaves]
        per_case = [run([x[b] for x in stacked]) for b in range(batch)]
        return [np.stack([c[i] for c in per_case]) for i in range(len(per_case[0]))]
    return execute


#: What XLA says where a verified program's quantized types reach HLO translation
#: (measured on jaxlib 0.10.2, CPU): the quant ops have no HLO counterpart, and a quantized
#: tensor has no XLA primitive type. The StableHLO verifier runs first, so an invalid
#: quantized program is still rejected with the verifier's own message. A quantized pad's
#: operand, having no primitive type, reads as a tuple to HLO's shape inference ("Pad
#: operation does not support tuple-shape operands"; specs/quantized_movement.yaml).
QUANT_UNTRANSLATABLE = ("can't be translated to XLA HLO", "primitive_type_invalid",
                         "PRIMITIVE_TYPE_INVALID",
                         "Pad operation does not support tuple-shape operands",
                         # a zero-sized quantized result, folded to a constant of its type
                         "result #0 type is not supported")


def _untranslatable_quantized(sig: Signature, e: Exception) -> bool:
    quantized = any(t.element_type.is_quantized
                    for t in tuple(sig.input_leaves) + tuple(sig.result_leaves))
    return quantized and any(m in str(e) for m in QUANT_UNTRANSLATABLE)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 500 else text[:497] + "..."
