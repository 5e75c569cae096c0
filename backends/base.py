"""The Backend interface: what an implementation under test provides.

A vendor subclasses :class:`Backend` and writes *either* ``run(case)`` (simplest:
take a case, return its results) *or* ``compile(signature)`` (return a callable
from input arrays to result arrays; the runner then compiles each signature once
and runs many value batches through it). The base class supplies the other one,
caching of compiled signatures, and a batched entry point (``compile_batch``) that
a backend may override with something faster (the JAX backend vmaps).

To decline a case, raise :class:`Unsupported` with the reason: it becomes an
"unsupported" outcome in the report, never a silent skip. Any other exception
from compile or run means the backend rejected the program: a backend error for
a valid case, the right answer for an invalid one.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from conformance.core.case import Case, Signature

Executable = Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]]

_malloc_trim: Any = None


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``). What a
    compiler or the checking's numpy freed stays resident otherwise, held by the
    allocator's arenas: 320 MB after bitcast_convert's compiles at quick depth, never
    used again, so that a run's resident size grew with the number of ops (issue 31).
    Nothing where the C library has no ``malloc_trim``."""
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes
            import ctypes.util
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _malloc_trim = libc.malloc_trim
            _malloc_trim.argtypes, _malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError):
            pass
    if _malloc_trim:
        _malloc_trim(0)


class Unsupported(Exception):
    """The backend does not implement this case; the message says why.

    ``compiled=True``: the backend's compiler itself declined the program (it was
    compiled and refused as unimplemented), as opposed to a decision taken before
    compiling (by element type, say). For an *invalid* program only the former is an
    answer: one declared Unsupported untried is a must-reject case left unchecked, and
    the checker warns (backends.vendor.NeverCompiledWarning)."""

    compiled: bool = False

    def __init__(self, *args: object, compiled: bool = False) -> None:
        super().__init__(*args)
        self.compiled = compiled


class NoProgram(Unsupported):
    """The suite cannot print this signature as a program (conformance.mlir.emitter's
    EmitError): no backend that consumes the canonical text ever sees it."""


class CannotPack(Exception):
    """This backend cannot compile packs (conformance.checking.packing); the message says
    why. No verdict on any member: the runner compiles the backend's signatures alone
    from then on (``Backend.refuse_packs``)."""


class BackendLoadError(Exception):
    """A backend that cannot be found, imported or constructed."""


class Backend:
    """Base class of every implementation under test."""

    #: Short name used in reports and on the command line.
    name: str = "backend"
    #: Run this backend's cases in a child process (crash/hang isolation) by default:
    #: True or False, or None (a vendor class that says nothing): isolated, so that an
    #: abort or segfault in native code costs one case and a message, not the run.
    #: ``--isolate`` / ``--no-isolate`` decide for every backend of a run.
    isolate: bool | None = None
    #: Whether the backend compiles programs it is given, invalid ones included (a
    #: compiler adapter). A front end that can only build valid programs from its own API
    #: (jax: jax.lax) sets False: its Unsupported on an invalid program is then no
    #: warning (backends.vendor.NeverCompiledWarning).
    compiles_invalid: bool = True
    #: Ops of which this backend compiled a valid program (the checker notes them:
    #: backends.vendor.note_compiled): whether declining an invalid program of the op
    #: untried is a gap. Held by the instance, never by the process, so that no other
    #: backend's history decides an outcome.
    compiled_ops: set[str]
    #: Whether this backend was warned of a NeverCompiledWarning (once per backend).
    warned_never_compiled: bool

    def __init__(self) -> None:
        cls = type(self)
        if cls.run is Backend.run and cls.compile is Backend.compile:
            raise TypeError(f"{cls.__name__} must implement run(case) or compile(signature)")
        self._cache: dict[Signature, Executable] = {}
        self._batch_cache: dict[Signature, Executable] = {}
        self.compiled_ops = set()
        self.warned_never_compiled = False

    # -- what a vendor implements (one of the two) ------------------------------------
    def run(self, case: Case) -> Sequence[np.ndarray]:
        """Run one case and return its results (one array per result)."""
        return self.executable(case.signature)(case.inputs)

    def compile(self, signature: Signature) -> Executable:
        """Prepare ``signature`` once; return a function from inputs to results."""
        def execute(inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
            return self.run(Case(signature, tuple(inputs)))
        return execute

    # -- optional ------------------------------------------------------------------------
    def compile_program(self, program: Any) -> Executable:
        """A whole program of several ops (``conformance.core.program.Program``, issue 19)
        compiled once: a function from its arguments' arrays to its results' arrays (one
        case). xla and interpreter compile the program's StableHLO text, jax composes its
        op mappings under one jit (backends/programs.py); a backend without a program
        path says so."""
        raise Unsupported(f"{self.name}: this backend has no program path (it runs single "
                          "ops only; a backend runs programs by implementing "
                          "compile_program(program))")

    def compile_pack(self, signatures: Sequence[Signature]) -> Callable:
        """Several independent signatures compiled as ONE program (issues 20, 33,
        conformance.checking.packing): a function from one stacked batch per member (None: a
        member not run this time) to one list of stacked results per member. Any
        failure (a member Unsupported too) makes the runner split the pack until the
        culprit runs alone through :meth:`compile_batch`; :class:`CannotPack` stops
        packing on this backend.

        The default hands the pack's canonical text to this backend's own
        :meth:`compile_batch` (backends/text_pack.py): a backend that compiles the text
        ``backends.vendor.module_text`` gives it packs with no code of its own. xla and
        jax have pack paths of their own; a backend that must not be packed says why in
        :attr:`no_pack`."""
        from conformance.core.packs import PackSignature
        from .text_pack import TextPack
        sig = PackSignature.of(signatures)
        try:
            run = self.compile_batch(sig)
        except Unsupported:
            raise                               # a member it declines: the pack is halved
        except Exception as e:  # noqa: BLE001 - what it means depends on the text's use
            if not sig.reads:
                raise CannotPack(
                    f"{self.name}: its compile failed on a pack before taking the pack's "
                    f"text from backends.vendor.module_text ({type(e).__name__}: "
                    f"{' '.join(str(e).split())[:300]}): it does not compile the canonical "
                    "text it is handed") from None
            raise
        finally:
            getattr(self, "_cache", {}).pop(sig, None)
        if not sig.reads:
            raise CannotPack(f"{self.name}: its compile returned without taking the pack's "
                             "text from backends.vendor.module_text: it compiles something "
                             "else than the canonical text it is handed")
        return TextPack(signatures, run)

    #: Why this backend is never packed (None: it is, where the runner packs): a class
    #: whose compile cannot take a pack's text, or for which packing does not pay.
    no_pack: str | None = None

    @property
    def pack_refusal(self) -> str | None:
        """Why this backend's signatures are compiled alone even with ``--pack``: its
        class's :attr:`no_pack`, a backend that implements ``run(case)`` only, or what
        the runner found (:meth:`refuse_packs`); None if it packs."""
        found = self.__dict__.get("_pack_refused")
        if found:
            return found
        if self.no_pack:
            return self.no_pack
        cls = type(self)
        if cls.compile_pack is Backend.compile_pack and cls.compile is Backend.compile:
            return (f"{self.name} implements run(case), not compile(signature): there is "
                    "no compile to share")
        return None

    def refuse_packs(self, reason: str) -> None:
        """Compile this backend's signatures alone from now on (the runner found that its
        packs fail where their members do not: ``reason``)."""
        self.__dict__["_pack_refused"] = reason

    @property
    def pack_kind(self) -> str:
        """``text`` (the pack's canonical text through :meth:`compile_batch`), ``own`` (a
        pack path of the backend's own: xla, jax) or ``none`` (:attr:`pack_refusal`)."""
        if self.pack_refusal is not None:
            return "none"
        return "text" if type(self).compile_pack is Backend.compile_pack else "own"

    @property
    def can_pack(self) -> bool:
        """Whether the runner packs this backend's signatures (:attr:`pack_refusal`)."""
        return self.pack_refusal is None

    def adopt_batch_executable(self, signature: Signature, executable: Executable) -> None:
        """Use ``executable`` as the signature's batch executable (a member of a pack
        the runner compiled: conformance.checking.packing); dropped by :meth:`clear_cache`."""
        self._batch_cache[signature] = executable

    def adopt_case_executable(self, signature: Signature, executable: Executable) -> None:
        """Use ``executable`` as the signature's one-case executable (a text pack's
        member run as a batch of one: conformance.checking.packing); dropped by
        :meth:`clear_cache`."""
        self._cache[signature] = executable

    def describe(self) -> dict[str, Any]:
        """Versions and platform, recorded with every run."""
        return {"name": self.name}

    def compile_batch(self, signature: Signature) -> Executable:
        """Like compile, but inputs and results carry a leading batch axis.

        The default runs the single-case executable once per case.
        """
        return self._per_case(self.executable(signature), signature)

    def _per_case(self, single: Executable, signature: Signature) -> Executable:
        """A batch executable running the single-case executable once per case."""
        def execute(stacked: Sequence[np.ndarray]) -> list[np.ndarray]:
            batch = stacked[0].shape[0] if stacked else 1
            per_case = [[np.asarray(r) for r in single([x[b] for x in stacked])]
                        for b in range(batch)]
            n_results = len(signature.result_leaves)
            return [np.stack([c[i] for c in per_case]) for i in range(n_results)]
        return execute

    # -- used by the runner (cached) -------------------------------------------------------
    def executable(self, signature: Signature) -> Executable:
        exe = self._cache.get(signature)
        if exe is None:
            exe = self._cache[signature] = self.compile(signature)
        return exe

    def batch_executable(self, signature: Signature) -> Executable:
        exe = self._batch_cache.get(signature)
        if exe is None:
            exe = self._batch_cache[signature] = self.compile_batch(signature)
        return exe

    def fresh_batch_executable(self, signature: Signature) -> Executable:
        """A batch executable compiled anew, bypassing the cache: a new
        ``compile(signature)`` run once per case (the ``property`` verdicts that ask
        whether separate compiles agree: rng_bit_generator's determinism). A backend
        whose compiler caches by program text (jax's jit) may still share its work."""
        return self._per_case(self.compile(signature), signature)

    def clear_cache(self) -> None:
        """Drop every compiled signature. The runner calls it when an op is done, so
        that memory stays flat in the number of ops; a backend that keeps more (a
        compiler's own caches) releases that too by overriding it. (What the backend
        was seen to implement, :attr:`compiled_ops`, is no cache: it stays.) What the
        process freed goes back to the system (:func:`release_freed_memory`)."""
        self._cache.clear()
        self._batch_cache.clear()
        release_freed_memory()

    @property
    def locator(self) -> str:
        """How to load this backend again (reproducers record it): a short name,
        ``module:Class`` or an entry point name."""
        return getattr(self, "_locator", None) or \
            f"{type(self).__module__}:{type(self).__qualname__}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
