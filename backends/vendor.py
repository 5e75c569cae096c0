"""What a vendor's compiler adapter needs, in one public place (issue 22): none of it
imports jax or jaxlib.

**The canonical module** (:func:`module_text`, printed by conformance.mlir.emitter) is::

    module {
      func.func public @main(%arg0: tensor<2xi32>, %arg1: tensor<2xi32>) -> (tensor<2xi32>) {
        %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
        func.return %0 : tensor<2xi32>
      }
    }

- one function, :data:`ENTRY` (``main``), public; the op under test is the only op in
  MLIR's generic form; no other functions;
- ``%arg0, %arg1, ...`` are ``signature.input_leaves`` in order (tuple-typed inputs
  flattened depth-first: ``@main`` never takes or returns a tuple), results are
  ``signature.result_leaves`` in order, with exactly the signature's types (an
  *invalid* signature prints the types it breaks its rule with);
- a collective's module carries ``mhlo.num_replicas`` / ``mhlo.num_partitions``;
- **inputs may be 0-d arrays** (``tensor<f32>``: numpy shape ``()``); keep them 0-d
  when handing them to a runtime (some runtimes' own conversion makes them 1-d, which
  a ``tensor<f32>`` parameter refuses), and return 0-d results as 0-d arrays;
- values are numpy arrays of the element type's dtype (:func:`storage`): ``bool`` for
  i1, ``ml_dtypes`` types for bf16, fp8 and int4, ``complex64/128`` for complex.

**Packs** (issue 33). With ``--pack`` (the default) ``compile`` is also handed a
``conformance.core.packs.PackSignature`` (op ``pack``): several independent signatures
whose :func:`module_text` is ONE module, each member's op on its own arguments
(``%s0_0, %s0_1, %s1_0, ...``: the members' input leaves in member order), its results
the members' result leaves in member order; ``signature.input_leaves`` and
``result_leaves`` are those lists. An adapter that compiles the text it is handed packs
with no code of its own; one that builds programs from ``signature.op`` instead is
found out (it never took the pack's text) and compiled one signature at a time. Any
failure on a pack is never a verdict: the suite halves the pack down to the member at
fault, which then runs alone.

**Declining and failing.** Raise :class:`~conformance.backends.Unsupported` (its
reason is reported) for what the backend does not implement; any other exception is a
compile error — a backend error for a valid program, the right answer for an invalid
one. A compiler that gives only text diagnostics tells the two apart with
:func:`compile_error` and the patterns of its own "not implemented" messages. Try to
compile an *invalid* program before declaring its types unsupported: every invalid
program must be rejected, and one declared Unsupported untried is a must-reject case
that silently goes unchecked (the checker warns: :class:`NeverCompiledWarning`).
Raise ``Unsupported(reason, compiled=True)`` (what :func:`compile_error` does) when the
compiler itself declined the program.
"""
from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Iterable

import numpy as np

from conformance.core.case import Signature
from conformance.core.literals import bit_patterns, from_bit_patterns
from conformance.core.types import ElementType, element_type

from .base import Backend, NoProgram, Unsupported

#: The entry function of every canonical module.
ENTRY = "main"

__all__ = ["ENTRY", "module_text", "Storage", "storage", "to_bits", "from_bits",
           "to_bytes", "from_bytes", "pack_int4", "unpack_int4", "compile_error",
           "NeverCompiledWarning", "NoProgram"]


def module_text(sig: Signature) -> str:
    """The canonical StableHLO module of ``sig``; :class:`NoProgram` (an Unsupported)
    when the suite cannot print one (the backend is not at fault and never saw a
    program). For a pack of several signatures (``conformance.core.packs.PackSignature``,
    what ``Backend.compile_pack`` hands to ``compile``) it is the pack's one module: each
    member's op on its own arguments, results returned in member order."""
    from conformance.core.packs import PackSignature
    from conformance.mlir.emitter import EmitError
    from conformance.mlir.emitter import module_text as emit
    if isinstance(sig, PackSignature):      # a pack (backends/text_pack.py, issue 33)
        sig.reads.append(True)
        from conformance.mlir.program_emit import program_text
        try:
            return program_text(sig.program())
        except EmitError as e:
            raise NoProgram(f"no StableHLO text for the pack: {e}") from None
    try:
        return emit(sig)
    except EmitError as e:
        raise NoProgram(f"no StableHLO text for {sig.op}: {e}") from None


@dataclasses.dataclass(frozen=True)
class Storage:
    """How arrays of one element type are held and laid out as raw bytes.

    ``dtype``: the numpy dtype the suite's arrays have. ``bits``: the type's width.
    ``raw_dtype``: the unsigned integer dtype of one element's (one component's, for
    complex) bit pattern in memory. ``byte_per_element``: i1 is one byte per element
    (0 or 1), as numpy's bool and most runtimes hold it; si4/ui4 are one per byte in
    numpy (an ``ml_dtypes`` int4 array, sign-extended for si4) but usually two per byte
    in a device buffer (:func:`pack_int4`). ``components``: 2 for complex (real then
    imaginary part, each ``raw_dtype``), else 1.
    """

    element_type: ElementType
    dtype: np.dtype
    bits: int
    raw_dtype: np.dtype
    components: int
    packed_int4: bool

    @property
    def mlir(self) -> str:
        return self.element_type.mlir


def storage(et: "str | ElementType | np.dtype") -> Storage:
    """The :class:`Storage` of an element type (``"bf16"``, ``"si4"``, a dtype...)."""
    et = element_type(et)
    return Storage(et, et.dtype, et.bits, et.component.bits_dtype,
                   2 if et.is_complex else 1, et.bits == 4)


def to_bits(array: np.ndarray) -> np.ndarray:
    """Every element's bit pattern as uint64 (complex: an extra last axis of 2, real
    then imaginary; si4 as its 4-bit two's complement, 0..15): exact for NaN payloads,
    -0, subnormals."""
    return bit_patterns(np.asarray(array))


def from_bits(bits: np.ndarray, et: "str | ElementType") -> np.ndarray:
    """Inverse of :func:`to_bits`."""
    return from_bit_patterns(np.asarray(bits), element_type(et))


def pack_int4(array: np.ndarray) -> bytes:
    """si4/ui4 elements packed two per byte, the first element in the low nibble (the
    layout of XLA's and IREE's int4 buffers); an odd count pads the last high nibble
    with 0."""
    nibbles = to_bits(array).reshape(-1).astype(np.uint8)
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8).tobytes()


def unpack_int4(data: bytes, et: "str | ElementType",
                shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`pack_int4`: ``shape`` elements of si4 or ui4 from packed bytes."""
    et = element_type(et)
    if et.bits != 4:
        raise ValueError(f"unpack_int4: {et} is not a 4-bit type")
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.frombuffer(data, np.uint8)
    if raw.size * 2 < n:
        raise ValueError(f"unpack_int4: {raw.size} bytes hold fewer than {n} elements")
    nibbles = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(-1)[:n]
    return from_bit_patterns(nibbles.astype(np.uint64), et).reshape(shape)


def to_bytes(array: np.ndarray, pack4: bool = True) -> bytes:
    """An array's elements as a device buffer holds them (little-endian, row-major):
    i1 one byte each (0/1), int4 packed two per byte (``pack4``) or one per byte,
    complex as real/imaginary pairs."""
    array = np.asarray(array)
    st = storage(array.dtype)
    if st.packed_int4 and pack4:
        return pack_int4(array)
    bits = to_bits(array)
    return np.ascontiguousarray(bits.astype(st.raw_dtype.newbyteorder("<"))).tobytes()


def from_bytes(data: bytes, et: "str | ElementType", shape: tuple[int, ...],
               pack4: bool = True) -> np.ndarray:
    """Inverse of :func:`to_bytes`; a byte count that does not fit ``shape`` is a
    ValueError (a runtime returning the wrong size is the backend's answer to report)."""
    st = storage(et)
    if st.packed_int4 and pack4:
        return unpack_int4(data, st.element_type, shape)
    n = int(np.prod(shape, dtype=np.int64)) * st.components
    want = n * st.raw_dtype.itemsize
    if len(data) != want:
        raise ValueError(f"{len(data)} bytes for {int(np.prod(shape, dtype=np.int64))} "
                         f"{st.element_type} elements (expected {want})")
    raw = np.frombuffer(data, st.raw_dtype.newbyteorder("<")).astype(np.uint64)
    if st.element_type.is_boolean:
        raw = raw != 0
    return from_bits(raw.reshape(tuple(shape) + ((2,) if st.components == 2 else ())),
                     st.element_type)


def compile_error(sig: Signature, error: BaseException,
                  unsupported: Iterable[str] = ()) -> BaseException:
    """What to raise for a compiler's text diagnostic ``error`` on ``sig``:
    ``Unsupported(..., compiled=True)`` when the program is valid and the message
    matches one of the ``unsupported`` regular expressions (the compiler's own "not
    implemented" wording, e.g. ``r"failed to legalize"``, ``r"UNIMPLEMENTED"``), else
    ``error`` itself: a compile error — a backend error for a valid program, the right
    answer for an invalid one (an invalid program is never Unsupported here)::

        try:
            binary = my_compiler.compile(text)
        except MyCompilerError as e:
            raise compile_error(sig, e, [r"not supported", r"failed to legalize"])
    """
    text = " ".join(str(error).split())
    if not sig.invalid and any(re.search(p, text) for p in unsupported):
        return Unsupported(f"the compiler declined it: {text[:500]}", compiled=True)
    return error


class NeverCompiledWarning(UserWarning):
    """A backend declared an *invalid* program Unsupported without compiling it (its
    must-reject case went unchecked)."""


def note_compiled(backend: Backend, op: str) -> None:
    """The checker saw ``backend`` compile a valid program of ``op``: the backend
    implements the op, so declining one of its invalid programs untried is a gap (a
    backend that implements no program of an op declines them all, rightly). Noted on
    the backend instance (:attr:`Backend.compiled_ops`), not in the process."""
    backend.compiled_ops.add(op)


def warn_never_compiled(backend: Backend, sig: Signature, error: Unsupported) -> bool:
    """Warn (once per backend instance) when ``error`` declines the invalid ``sig`` of
    an op ``backend`` compiled a valid program of (:func:`note_compiled`), without having
    compiled it; True when it was such a case. A function of its arguments only: the
    backend's own record, never what other backends did in this process."""
    if not sig.invalid or error.compiled or isinstance(error, NoProgram):
        return False
    if sig.op not in backend.compiled_ops:
        return False
    if not backend.warned_never_compiled:
        backend.warned_never_compiled = True
        warnings.warn(NeverCompiledWarning(
            f"backend {backend.name}: declared the invalid program {sig.op} "
            f"(breaks {sig.invalid}) Unsupported without compiling it ({error}); its "
            "must-reject case is not checked: compile invalid programs before declaring "
            "their types unsupported, and raise Unsupported(..., compiled=True) when the "
            "compiler itself declines"), stacklevel=3)
    return True
