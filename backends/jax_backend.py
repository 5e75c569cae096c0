"""The JAX backend: every case through the public ``jax.lax`` API, jit-compiled.

x64 is enabled (si64, ui64, f64 and complex<f64> need it). CPU is the default
platform; ``JaxBackend(platform="gpu")`` (short name ``jax-gpu``) runs on a GPU.
Batches of value cases run through ``jax.vmap`` of the op, one compile per
signature. jax.lax infers result types itself, so a declared result type it
cannot produce is a type divergence for a valid case, and "unsupported" for an
invalid case whose only fault is that declared type.
"""
from __future__ import annotations

import collections
import os
import warnings
from typing import Any, Sequence

import numpy as np

from conformance.core.case import Signature
from conformance.core.types import TensorType, element_type

from .base import Backend, BackendLoadError, Unsupported
from .host_cpu import bf16_conversion


#: (backend class, platform, signature, batch) -> what :meth:`JaxBackend._infer` found: a
#: function of the signature alone, so that a signature compiled again (alone after its
#: pack, per case for a culprit, by another backend object) is not traced again to learn
#: it; least recently used dropped first.
_INFERRED: "collections.OrderedDict[tuple, Any]" = collections.OrderedDict()
INFERRED_HELD = 16384


def _inline_cpu_dispatch(jax) -> None:
    """Run CPU computations inline in the calling thread (``jax_cpu_enable_async_dispatch``
    off), where the CPU client is not made yet (the flag is read when it is): the suite
    reads every batch's results at once, so asynchronous dispatch only adds a hand-off to
    a worker thread and back per call, which costs more than the call itself on a busy
    machine (measured: a warm 64-case call 42 -> 20 us back to back, 95 -> 65 us with the
    suite's numpy work between calls; issue 33). The values are the same executable's."""
    from jax._src import xla_bridge
    if "cpu" in getattr(xla_bridge, "_backends", {}) or \
            os.environ.get("JAX_CPU_ENABLE_ASYNC_DISPATCH"):
        return          # (a client made already, or the user chose)
    jax.config.update("jax_cpu_enable_async_dispatch", False)


class JaxBackend(Backend):
    isolate = False     # in-process: jax runs what it compiled, no native aborts seen
    compiles_invalid = False   # jax.lax builds valid programs only (backends/base.py)
    name = "jax"

    def __init__(self, platform: str = "cpu") -> None:
        super().__init__()
        try:
            import jax
            jax.config.update("jax_enable_x64", True)
            if platform == "cpu":
                _inline_cpu_dispatch(jax)
            self.device = jax.devices(platform)[0]
        except ImportError as e:
            raise BackendLoadError(f"jax backend: cannot import jax ({e})") from None
        except RuntimeError as e:
            raise BackendLoadError(f"jax backend: no {platform} device ({e})") from None
        self._jax = jax
        self.platform = platform
        if platform != "cpu":
            self.name = f"jax-{platform}"

    def clear_cache(self) -> None:
        """Also jax's own caches of traced and compiled functions, which otherwise keep
        every signature's executable for the whole run (first, so that what they held is
        given back to the system with the rest)."""
        import jax
        jax.clear_caches()
        super().clear_cache()

    def describe(self) -> dict[str, Any]:
        import jaxlib
        info = {"name": self.name, "jax": self._jax.__version__, "jaxlib": jaxlib.__version__,
                "platform": self.platform, "device": str(self.device)}
        if self.platform == "cpu":
            info["cpu_bf16"] = bf16_conversion()
        return info

    # -- compile ---------------------------------------------------------------------
    def _check_holds(self, sig: "Signature | Any") -> None:
        """Unsupported where the device cannot hold an input or result element type,
        measured by a one-element transfer (jaxlib 0.10.2 on CPU: the f6 formats, whose
        programs abort the process where a tensor is empty): before anything is traced."""
        held = self.__dict__.setdefault("_holds", {})
        leaves = (tuple(sig.input_leaves) + tuple(sig.result_leaves)
                  if isinstance(sig, Signature) else tuple(sig))
        for t in leaves:
            dtype = t.element_type.dtype
            if dtype not in held:
                try:
                    back = np.asarray(self._jax.device_put(np.zeros((1,), dtype), self.device))
                    held[dtype] = None if back.dtype == dtype else \
                        f"comes back from {self.platform} as {back.dtype}"
                except Exception as e:  # noqa: BLE001 - the platform's refusal is the reason
                    held[dtype] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
            if held[dtype] is not None:
                raise Unsupported(f"jax on {self.platform} cannot hold {t.element_type} "
                                  f"arrays: {held[dtype]}")

    def _function(self, sig: Signature):
        from .jax_ops import build
        return build(sig)

    def _check_types(self, sig: Signature, fn, batch: int | None) -> None:
        """Trace once (no compile; once per signature in the process) to learn the result
        types jax.lax infers.

        jax.lax refusing the input types is "unsupported" for a valid case and a
        rejection for an invalid one.
        """
        self._check_holds(sig)          # (every path comes here: alone, batched, packed)
        key = (type(self), self.platform, sig, batch)
        held = _INFERRED.get(key)
        if held is None:
            held = _INFERRED[key] = self._infer(sig, fn, batch)
            while len(_INFERRED) > INFERRED_HELD:
                _INFERRED.popitem(last=False)
        else:
            _INFERRED.move_to_end(key)
        if isinstance(held, BaseException):
            raise held.with_traceback(None)
        if isinstance(held, str):
            raise Unsupported(held)
        if sig.invalid and held != list(sig.result_leaves):
            raise Unsupported("jax.lax infers the result type "
                              f"{', '.join(map(str, held))}; the invalid case declares "
                              f"{', '.join(map(str, sig.result_types))}, which jax cannot express")

    def _infer(self, sig: Signature, fn,
               batch: int | None) -> "list[TensorType] | str | BaseException":
        """The result types jax.lax infers (one trace, no compile), or why it refuses:
        the reason (a valid case: unsupported) or jax's own error (an invalid case)."""
        jax = self._jax
        lead = () if batch is None else (batch,)
        specs = [jax.ShapeDtypeStruct(lead + t.shape, t.element_type.dtype)
                 for t in sig.input_leaves]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = jax.eval_shape(fn, *specs)
        except (TypeError, ValueError, NotImplementedError) as e:
            if sig.invalid:
                return e
            return (f"jax.lax refuses {sig.op} on {', '.join(map(str, sig.input_types))}: "
                    f"{(str(e).splitlines() or [type(e).__name__])[0]}")
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return [TensorType(o.shape[len(lead):], element_type(o.dtype)) for o in outs]

    def _compiled(self, sig: Signature, batched: bool):
        jax = self._jax
        fn = self._function(sig)
        if getattr(fn, "per_process", False):          # a collective (issue 18)
            return self._on_grid(sig, fn, batched)
        if batched:
            fn = jax.vmap(fn)
        self._check_types(sig, fn, 1 if batched else None)
        return self._executor(jax.jit(fn))

    def _on_grid(self, sig: Signature, fn, batched: bool):
        """One process's program under shard_map over the grid's devices
        (backends/jax_ops_collectives.py); a batch runs case by case."""
        from .jax_ops_collectives import on_grid
        jax = self._jax
        self._check_holds(sig)
        n = sig.num_replicas * sig.num_partitions
        # (Unsupported where this process has fewer devices than processes: CPU has one
        # unless XLA_FLAGS said otherwise before jax started; the CLI and the pytest plugin
        # ask for 8)
        grid_fn = on_grid(sig, fn, jax.devices(self.platform))
        lead = () if n == 1 else (n,)
        specs = [jax.ShapeDtypeStruct(lead + t.shape, t.element_type.dtype)
                 for t in sig.input_leaves]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                jax.eval_shape(grid_fn, *specs)
                # lowered once here, so that a collective jax lowers on some platforms
                # only (pbroadcast: GPU) is Unsupported, not a failure of every case
                with jax.default_device(self.device):
                    jax.jit(grid_fn).lower(*specs)
        except (TypeError, ValueError, NotImplementedError) as e:
            if sig.invalid:
                raise
            raise Unsupported(f"jax.lax refuses {sig.op} on {sig.key()}: "
                              f"{(str(e).splitlines() or [type(e).__name__])[0]}") from None
        if sig.invalid:
            # jax builds its own collective from the attributes it maps (no channel, no
            # region, no declared result type): what it did not refuse it cannot express
            raise Unsupported(f"jax.lax cannot express this invalid {sig.op} (it breaks "
                              f"{sig.invalid}; jax's collective takes no channel, region or "
                              "declared result type)")
        run = self._executor(jax.jit(grid_fn))
        if not batched:
            return run

        def execute(stacked):
            batch = stacked[0].shape[0] if stacked else 1
            cases = [run([x[b] for x in stacked]) for b in range(batch)]
            if not cases:
                return [np.zeros((0,) + lead + t.shape, t.element_type.dtype)
                        for t in sig.result_leaves]
            return [np.stack([c[i] for c in cases]) for i in range(len(cases[0]))]
        return execute

    def _executor(self, jitted):
        """Inputs to results through ``jitted``: numpy inputs go straight to it (a separate
        device_put per input costs 5x the call), the device made explicit around it."""
        jax, device = self._jax, self.device
        # The process's default device needs no context around the call (with none, the
        # call keys jit's cache the same way every time). Warnings come from tracing:
        # inputs of shapes and types the executable has run already call it bare.
        default = device == jax.devices()[0]
        ran: set = set()

        def execute(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            try:
                avals = tuple((x.shape, x.dtype) for x in inputs)
            except AttributeError:
                avals = None
            if default and jax.config.jax_default_device is None:
                if avals is not None and avals in ran:
                    out = jitted(*inputs)
                else:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        out = jitted(*inputs)
            else:
                with warnings.catch_warnings(), jax.default_device(device):
                    warnings.simplefilter("ignore")
                    out = jitted(*inputs)
            if avals is not None:
                ran.add(avals)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            return [np.asarray(o) for o in outs]
        return execute

    def compile(self, signature: Signature):
        return self._compiled(signature, batched=False)

    def compile_program(self, program):
        """The program's ops composed from their jax.lax mappings under one jax.jit
        (backends/programs.py); a result type jax infers otherwise is Unsupported."""
        from .programs import jax_function
        jax = self._jax
        self._check_holds([t for t in list(program.argument_types) + list(program.result_types)
                           if isinstance(t, TensorType)])
        fn = jax_function(program)
        specs = [jax.ShapeDtypeStruct(t.shape, t.element_type.dtype)
                 for t in program.argument_types]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = jax.eval_shape(fn, *specs)
        except (TypeError, ValueError, NotImplementedError) as e:
            raise Unsupported("jax.lax refuses an op of the program: "
                              f"{(str(e).splitlines() or [type(e).__name__])[0]}") from None
        inferred = [TensorType(o.shape, element_type(o.dtype)) for o in out]
        if inferred != list(program.result_types):
            raise Unsupported("jax.lax infers the program's result types "
                              f"{', '.join(map(str, inferred))}, not "
                              f"{', '.join(map(str, program.result_types))}")
        return self._executor(jax.jit(fn))

    def compile_pack(self, signatures):
        """Several independent signatures under one jax.jit (backends/jax_pack.py)."""
        from .jax_pack import JaxPack
        return JaxPack(self, signatures)

    def compile_batch(self, signature: Signature):
        """jax.vmap of the op; where only vmap refuses (a batching rule that cannot take
        int4 start indices, a function of no inputs such as iota), the op compiled once
        and run per case."""
        try:
            batched = self._compiled(signature, batched=True)
        except Unsupported:
            return super().compile_batch(signature)
        if signature.invalid:
            return batched
        fallback: list = []

        def execute(stacked: Sequence[np.ndarray]) -> list[np.ndarray]:
            # Some batching rules fail only when lowered or compiled: vmap of
            # dynamic_update_slice with int4 start indices becomes a scatter that
            # np.iinfo cannot describe; vmap of dynamic_slice with int4 start indices
            # becomes a gather that XLA's HLO verifier rejects (E(4) layout on s32).
            if not fallback:
                try:
                    return batched(stacked)
                except (TypeError, ValueError, NotImplementedError, RuntimeError):
                    fallback.append(Backend.compile_batch(self, signature))
            return fallback[0](stacked)
        return execute
