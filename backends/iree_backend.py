"""The IREE backend: each case's canonical StableHLO module compiled by IREE for the
``llvm-cpu`` target and run with IREE's runtime (issue 22) — a compiler that shares no
code with XLA. Optional: ``pip install 'stablehlo-conformance[iree]'`` installs
``iree-base-compiler`` and ``iree-base-runtime``.

How the canonical text meets IREE (what a vendor writing such an adapter needs to know):

- the module is ``module { func.func public @main(...) }`` (conformance.mlir.emitter);
  IREE names the compiled module ``module``, so the entry is ``module.main``;
- inputs are numpy arrays of the case's element types, 0-d arrays included; bf16, the
  fp8 types, i1 and the complex types cross as they are (ml_dtypes arrays);
- IREE demotes f64 to f32 and i64 to i32 unless told not to: both are turned off
  (:data:`FLAGS`), so every type is compiled at its own width;
- si4/ui4 tensors cross packed two per byte, the first element in the low nibble
  (backends.vendor.pack_int4: the Python runtime maps no int4 numpy array itself); IREE
  compiles none whose size is not a whole number of bytes ("does not have integral
  number of total bytes"): a valid program with such a tensor is ``Unsupported`` with
  that reason (an invalid one is still compiled, to see whether IREE rejects it);
- IREE reports only text diagnostics: a compile error of a valid program is a backend
  error (its first diagnostic line), of an invalid program the right answer (a
  rejection); only the byte-count refusal above counts as ``Unsupported``.

It runs in a child process by default (``isolate``), as xla and interpreter do.

IREE's Python runtime is a nanobind extension, and nanobind reports every object of it
still alive when the interpreter ends as a leak (about 130 lines on stderr at the end of
an in-process pytest session: a driver, a device, VM modules, ...). A backend releases
them in :meth:`IreeBackend.close` (the runner and the pytest plugin call it), and every
backend still open is closed at exit (``atexit``, before the interpreter's teardown), so
nothing is left to report.
"""
from __future__ import annotations

import atexit
import gc
import re
import weakref
from typing import Any, Sequence

import numpy as np

from conformance.core.case import Signature

from .base import Backend, BackendLoadError, Unsupported

#: iree-compile flags: the llvm-cpu target for this machine, no demotion of f64/i64.
FLAGS = ("--iree-input-demote-f64-to-f32=false", "--iree-input-demote-i64-to-i32=false",
         "--iree-llvmcpu-target-cpu=host")
TARGET = "llvm-cpu"
DRIVER = "local-sync"


class IreeError(RuntimeError):
    """IREE refused or failed a program (its diagnostics, on one line)."""


def _first_diagnostic(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if "error:" in ln]
    return (lines[0] if lines else " ".join(str(e).split()))[:500]


def _diagnostics(e: BaseException) -> list[str]:
    """Every error line of IREE's diagnostics."""
    return [ln.strip() for ln in str(e).splitlines() if "error:" in ln]


def _refused_before(members) -> list[int]:
    """The members of a pack that IREE is known to refuse before it is run: those with
    an input or result leaf whose element type its HAL has no type for (f8E3M4, f8E4M3,
    f4E2M1FN, ...: ``'hal.element_type' op unsupported element type``, or a crash of
    iree-compile 3.13 in ``BitcastUnsupportedElementTypes`` for f4E2M1FN), or an si4/ui4
    leaf (a quantized one's storage too) of an odd element count ("does not have integral
    number of total bytes", located at ``@main``'s line, naming no member). Such a pack
    fails whole and its error names no member, so it would be halved and would count
    toward the packer's MAX_FAILED_PACKS; these members go alone instead (their own
    compile gives their own record, as in an unpacked run)."""
    def refused(t) -> bool:
        held = t.held_as()
        et = held.element_type
        if et.name not in _HAL_TYPES:
            return True
        return et.bits == 4 and int(np.prod(held.shape, dtype=np.int64)) % 2 == 1
    return [j for j, m in enumerate(members)
            if any(refused(t) for t in (*m.input_leaves, *m.result_leaves))]


def _at_fault(members, text: str, said: str) -> list[int]:
    """The members of a pack that IREE's diagnostics name: those on whose op lines an
    error is located, and, where IREE refuses an element type at the function's
    signature (``'hal.element_type' op unsupported element type``: a location that
    names no member), those with a leaf of a type its runtime has no HAL type for."""
    from .text_pack import located_members
    at = set(located_members(members, said, text))
    if "'hal.element_type' op unsupported element type" in said:
        at |= {j for j, m in enumerate(members)
               if any(t.held_as().element_type.name not in _HAL_TYPES
                      for t in (*m.input_leaves, *m.result_leaves))}
    return sorted(at)


class IreeBackend(Backend):
    name = "iree"
    isolate = True

    def __init__(self) -> None:
        super().__init__()
        try:
            import iree.compiler as compiler
            import iree.runtime as runtime
        except ImportError as e:
            raise BackendLoadError(
                f"iree backend: {e.name or 'iree'} is not installed (pip install "
                "'stablehlo-conformance[iree]' installs iree-base-compiler and "
                "iree-base-runtime)") from None
        self.compiler, self.runtime = compiler, runtime
        from importlib import metadata
        self.versions = {p: metadata.version(p) for p in ("iree-base-compiler",
                                                         "iree-base-runtime")}
        self._config = None
        self._device = None
        if not _OPEN:
            atexit.register(_close_all)
        _OPEN.add(self)

    @property
    def config(self):
        """IREE's runtime configuration (its driver and device), made when first
        needed (again after :meth:`close`)."""
        if self._config is None:
            self._config = self.runtime.Config(DRIVER)
        return self._config

    def close(self) -> None:
        """Release IREE's objects now: the compiled modules (the executables' caches),
        the device and the driver. The backend stays usable (they are made again)."""
        self.clear_cache()
        self._config = self._device = None
        gc.collect()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.versions, "platform": TARGET, "driver": DRIVER,
                "flags": list(FLAGS)}

    def compile(self, sig: Signature):
        from .vendor import module_text
        text = module_text(sig)          # NoProgram (an Unsupported) if there is none
        members = getattr(sig, "members", None)
        if members:
            at = _refused_before(members)
            if at:
                from .text_pack import fault_marker
                raise IreeError(
                    "iree-compile not run on this pack: IREE refuses a tensor of these "
                    "members (an element type its HAL lacks, or an odd count of int4 "
                    f"elements) [{fault_marker(at)}]")
        try:
            return self._compile_text(text, sig.input_leaves, sig.result_leaves,
                                      sig.invalid, full=bool(members))
        except (IreeError, Unsupported) as e:
            if not members:
                raise
            # a pack (backends/text_pack.py): name the members at fault, so that the
            # runner sends those alone instead of halving (nothing records this error)
            at = _at_fault(members, text, str(e))
            if at:
                from .text_pack import fault_marker
                e.args = (f"{e.args[0]} [{fault_marker(at)}]",)
            raise

    def compile_program(self, program):
        """A whole program (a module read in by ``conformance check``: its checks 2 and
        3) as one module: its canonical text (conformance.mlir.program_emit) compiled
        and run as a single op's is."""
        from .programs import program_text_or_unsupported
        return self._compile_text(program_text_or_unsupported(program),
                                  program.argument_types, program.result_types, False)

    def _compile_text(self, text: str, input_types, result_types, invalid: bool,
                      full: bool = False):
        """``@main`` of ``text`` compiled for llvm-cpu: a function of the input leaves'
        arrays (one case) to the result leaves' arrays. ``full``: an error keeps every
        diagnostic line (a pack's: :func:`_at_fault` reads them), not only the first."""
        try:
            vmfb = self.compiler.compile_str(text, target_backends=[TARGET],
                                             input_type="stablehlo", extra_args=list(FLAGS))
        except self.compiler.CompilerToolError as e:
            said = _first_diagnostic(e)
            if full:
                said = " | ".join(_diagnostics(e)) or said
            if "does not have integral number of total bytes" in said and not invalid:
                raise Unsupported(f"IREE cannot hold this int4 tensor: {said}",
                                  compiled=True) from None
            raise IreeError(f"iree-compile: {said}") from None
        rt = self.runtime
        ctx = rt.SystemContext(config=self.config)
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
        entry = ctx.modules.module["main"]
        device = self.config.device
        # (a quantized tensor crosses as its storage integers: IREE's ABI lowers the
        # !quant.uniform types of @main to them)
        put = [self._putter(t.held_as().element_type) for t in input_types]
        outs_t = [t.held_as() for t in result_types]

        def execute(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            out = entry(*(p(np.asarray(x)) for p, x in zip(put, inputs)))
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            return [_to_numpy(o, t) for o, t in zip(outs, outs_t)]
        self._device = device
        return execute

    def _putter(self, et):
        """A function from a numpy array of ``et`` to an IREE buffer view of its element
        type and shape (0-d included: the runtime's own conversion makes a 0-d array
        1-d, which a tensor<T> parameter refuses). si4/ui4 go in packed two per byte,
        first element in the low nibble (backends.vendor.pack_int4)."""
        rt = self.runtime
        hal_type = getattr(rt.HalElementType, _HAL_TYPES[et.name])
        device = self.config.device
        if et.bits == 4:
            from .vendor import to_bytes

            def put4(x: np.ndarray):
                x = np.asarray(x, dtype=et.dtype)
                buf = device.allocator.allocate_buffer_copy(
                    memory_type=rt.MemoryType.DEVICE_LOCAL,
                    allowed_usage=rt.BufferUsage.DEFAULT, device=device,
                    buffer=np.frombuffer(to_bytes(x), np.uint8))
                return rt.HalBufferView(buf, list(x.shape), hal_type)
            return put4
        raw = np.dtype(f"u{et.dtype.itemsize}") if et.name not in (
            "complex<f32>", "complex<f64>") else et.dtype

        def put(x: np.ndarray):
            x = np.array(x, dtype=et.dtype, order="C", copy=True).view(raw)
            return device.allocator.allocate_buffer_copy(
                memory_type=rt.MemoryType.DEVICE_LOCAL, allowed_usage=rt.BufferUsage.DEFAULT,
                device=device, buffer=x, element_type=hal_type)
        return put


#: The backends not closed yet (closed at exit: :func:`_close_all`).
_OPEN: "weakref.WeakSet[IreeBackend]" = weakref.WeakSet()


def _close_all() -> None:
    for b in list(_OPEN):
        b.close()


#: element type -> IREE HAL element type name
_HAL_TYPES = {
    "i1": "BOOL_8", "si4": "SINT_4", "ui4": "UINT_4", "si8": "SINT_8", "si16": "SINT_16", "si32": "SINT_32", "si64": "SINT_64",
    "ui8": "UINT_8", "ui16": "UINT_16", "ui32": "UINT_32", "ui64": "UINT_64",
    "f16": "FLOAT_16", "bf16": "BFLOAT_16", "f32": "FLOAT_32", "f64": "FLOAT_64",
    "f8E4M3FN": "FLOAT_8_E4M3_FN", "f8E5M2": "FLOAT_8_E5M2",
    "f8E4M3FNUZ": "FLOAT_8_E4M3_FNUZ", "f8E5M2FNUZ": "FLOAT_8_E5M2_FNUZ",
    "f8E8M0FNU": "FLOAT_8_E8M0_FNU",
    "complex<f32>": "COMPLEX_64", "complex<f64>": "COMPLEX_128",
}


def _to_numpy(o, t) -> np.ndarray:
    """A result's bytes as an array of the declared type and IREE's shape (a wrong
    shape is the backend's answer, reported as a type divergence)."""
    view = o._buffer_view if hasattr(o, "_buffer_view") else o
    shape = tuple(view.shape)
    dt = t.element_type.dtype
    mapped = view.map()
    nbytes = int(view.byte_length)
    raw = np.array(mapped.asarray([nbytes], np.dtype(np.uint8)), copy=True)
    n = int(np.prod(shape, dtype=np.int64))
    if t.element_type.bits == 4:                    # packed two per byte
        from .vendor import from_bytes
        if nbytes != (n + 1) // 2:
            raise IreeError(f"IREE returned {nbytes} bytes for a result of shape "
                            f"{list(shape)} and type {t.element_type}")
        return from_bytes(raw.tobytes(), t.element_type, shape)
    if nbytes != n * dt.itemsize:
        raise IreeError(f"IREE returned {nbytes} bytes for a result of shape {list(shape)} "
                        f"and type {t.element_type}")
    return raw.view(dt).reshape(shape)
