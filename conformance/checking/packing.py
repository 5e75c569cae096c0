"""Packing: many independent signatures compiled as one program (issue 20).

A fresh run is bound by one compile per signature (XLA CPU: about 23 ms for a one-op
module, most of it fixed cost: a module of 16 unrelated ops compiles in about 90 ms).
So before a unit's signatures are checked, the runner draws the value batches of the
next ``--pack N`` signatures and asks each backend that has a pack path
(``Backend.compile_pack``) for ONE executable computing all of them: a program of N
disjoint parts (:func:`pack_program`, conformance.core.program), each part one
signature's op on its own arguments. The pack runs every batch of every member; the
results are split back per signature and handed to the ordinary check path as that
signature's batch executable (:class:`PackedMember`), so oracle, verdicts,
minimisation, records and reproducers are those of an unpacked run.

- A pack that fails (a compile error, a crash, ``Unsupported`` for one member, a
  run-time error) is split in halves and each half packed again, down to single
  signatures, which take the ordinary path (their own compile): a crash or error is
  recorded for the signature that causes it, exactly as without packing. A text pack
  whose error names its members (its MLIR diagnostics' locations, or the backend's own
  words: backends/text_pack.py ``located_members``) sends those alone and packs the
  others again instead (the backend's own words may name every member: IREE names,
  before compiling, members with a type it is known to refuse); such a pack does not
  count toward ``MAX_FAILED_PACKS`` (IREE refuses a few type pairs of convert
  everywhere, which would otherwise stop packing for the op after three packs: issue
  33). A pack that
  hangs or crashes its isolated backend's process (``BackendTimeout``,
  ``BackendCrash``) is not bisected (each probe would cost a timeout, or seconds to
  start the process again): its members take the ordinary path, which finds the
  culprit as an unpacked run does and bounds hangs per op (a pack's timeout counts in
  the op's hang budget too: ``on_timeout``). After ``MAX_FAILED_PACKS``
  packs of a unit that failed on a backend (however many steps their bisection took),
  the unit's other signatures are compiled alone on it.
- A member's executable gives the pack's results once per batch, for the very input
  arrays the runner drew; any other call (a verdict re-running the batch to check
  determinism, the minimiser, a culprit search) runs the backend again, through the
  pack with filler inputs for the other members where the backend can
  (``pack(member_batches)`` with None for the others), so a re-run is a real run. A
  text pack's member's one-case executable (``Backend.executable``: ``check_case``, the
  minimiser re-running a diverging case) is the pack too, a batch of one, not a compile
  of the member alone that an unpacked run would not have paid.
- Every backend that compiles StableHLO text packs (issue 33): iree, ``pjrt:`` (the xla
  path), any vendor adapter. ``Backend.compile_pack``'s default hands the pack's
  canonical text to the backend's ordinary compile (backends/text_pack.py). A backend
  that cannot pack says why (``Backend.pack_refusal``: the class's ``no_pack``, a
  ``run(case)``-only backend, or :class:`~conformance.backends.base.CannotPack` from a
  compile that did not take the pack's text); so does one found refusing packs as such:
  ``REFUSED_PAIRS`` pairs of a text pack that fail where both members compile alone,
  before any pack of it succeeded (a compiler that takes one result per module), turn
  packing off for that backend (``Backend.refuse_packs``; :attr:`UnitPacker.refused` has the reason).
- Not packed: ops whose spec says ``pack_alone`` (rng: hidden state shared by the
  copies in one executable), invalid signatures (each must be rejected alone),
  tuple-typed ones, collectives (a process grid), and spec examples and probes (run
  as before).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from conformance.core.case import Signature
from conformance.core.packs import batch_size, pack_program, packable, split_results

#: Signatures per pack by default (``--pack``): bench/bench_packing.py measured XLA CPU
#: compile time per signature 23 ms alone, 8.4 ms in packs of 4, 6.7 in 8, 5.9 in 16,
#: 5.6 in 32; 16 keeps most of the gain with a bounded bisection on failure.
DEFAULT_PACK = 16

#: After this many failed packs of one backend in a unit, its other signatures there are
#: compiled alone: an op most of whose signatures a backend refuses (jax's int4 start
#: indices, a vmap rule that refuses) would otherwise pay a bisection per pack.
MAX_FAILED_PACKS = 3

#: A text-packing backend none of whose packs has succeeded is taken to refuse packs as
#: such (a compiler that takes one result per module) after this many failed pairs whose
#: two members each compile alone: one such pair could be a bug of two programs together.
REFUSED_PAIRS = 2

PackExecutable = Callable[[Sequence["Sequence[np.ndarray] | None"]], list]


class PackedMember:
    """A member's batch executable: the pack's results for the batches the runner drew
    (each given once, for those very arrays), a real run for any other call."""

    def __init__(self, pack: PackExecutable, index: int, count: int,
                 ready: list[tuple[list[np.ndarray], list[np.ndarray]]],
                 fallback: Callable[[], Callable] | None = None) -> None:
        self.pack, self.index, self.count = pack, index, count
        self.ready = ready
        self._fallback = fallback
        self._own: Callable | None = None

    def __call__(self, stacked: Sequence[np.ndarray]) -> list[np.ndarray]:
        stacked = list(stacked)
        for i, (inputs, results) in enumerate(self.ready):
            if len(inputs) == len(stacked) and all(a is b for a, b in zip(inputs, stacked)):
                del self.ready[i]
                return results
        if self._fallback is not None:
            if self._own is None:
                self._own = self._fallback()
            return list(self._own(stacked))
        batches: list = [None] * self.count
        batches[self.index] = stacked
        return list(self.pack(batches)[self.index])


def _one_case(member: PackedMember) -> Callable:
    """A member's one-case executable: the case as a batch of one through the pack."""
    def run(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(r)[0] for r in member([np.asarray(x)[None] for x in inputs])]
    return run


class UnitPacker:
    """Packs of one unit's valid signatures, run ahead of the ordinary check path.

    ``items`` are (type key, signature index, signature) in the order the runner checks
    them (several ops' items may be mixed: the op is the signature's); ``draw(key,
    index, batch, sig)`` the runner's value batches. :meth:`before`
    is called before each signature is checked: the first time a pack's member comes
    up, the pack is compiled and run on every backend that packs, and its members'
    executables installed in each backend's cache (``Backend.adopt_batch_executable``).
    """

    def __init__(self, backends: Sequence, items: Sequence[tuple[str, int, Signature]],
                 size: int, batches: int,
                 draw: Callable[[str, int, int, Signature], list[np.ndarray]],
                 skip: Callable[[Any], bool] = lambda b: False, spec=None,
                 on_timeout: Callable[[Any], Any] = lambda b: None) -> None:
        self.backends = [b for b in backends if getattr(b, "can_pack", False)]
        self.refused: dict[str, str] = {}       # backend name -> why it stopped packing
        self.batches, self.draw, self.skip = batches, draw, skip
        self.on_timeout = on_timeout        # a pack timed out on this backend
        self.inputs: dict[tuple[str, str, int, int], list[np.ndarray]] = {}
        self.pack_of: dict[tuple[str, str, int], int] = {}
        self.packs: list[list[tuple[str, int, Signature]]] = []
        self.done: set[int] = set()
        self.stats = {"packs": 0, "packed": 0, "bisections": 0, "alone": 0, "failures": 0,
                      "located": 0}
        self.failed: dict[str, int] = {}        # backend name -> packs that failed
        if size < 2 or not self.backends:
            return
        todo = [it for it in items if packable(it[2], spec)]
        for start in range(0, len(todo), size):
            chunk = todo[start:start + size]
            if len(chunk) < 2:
                continue
            for key, index, sig in chunk:
                self.pack_of[(sig.op, key, index)] = len(self.packs)
            self.packs.append(chunk)

    def before(self, op: str, key: str, index: int) -> None:
        p = self.pack_of.get((op, key, index))
        if p is None or p in self.done:
            return
        self.done.add(p)
        chunk = self.packs[p]
        for key_, index_, sig in chunk:
            for b in range(self.batches):
                self.inputs[(sig.op, key_, index_, b)] = self.draw(key_, index_, b, sig)
        for backend in self.backends:
            if self.skip(backend) or self.failed.get(backend.name, 0) >= MAX_FAILED_PACKS \
                    or not backend.can_pack:
                continue
            before = self.stats["failures"] - self.stats["located"]
            self._run(backend, chunk)
            if self.stats["failures"] - self.stats["located"] > before:
                self.failed[backend.name] = self.failed.get(backend.name, 0) + 1

    def take_inputs(self, op: str, key: str, index: int, batch: int
                    ) -> list[np.ndarray] | None:
        """The batch drawn for a pack (once; None if it was not drawn ahead)."""
        return self.inputs.pop((op, key, index, batch), None)

    def _run(self, backend, chunk: list[tuple[str, int, Signature]]) -> None:
        """Compile and run ``chunk`` as one pack on ``backend``; on failure, its halves."""
        from conformance.backends.base import CannotPack
        from conformance.checking.isolation import BackendCrash, BackendTimeout
        if len(chunk) < 2 or not backend.can_pack:
            self.stats["alone"] += len(chunk)
            return
        sigs = [s for _, _, s in chunk]
        try:
            pack = backend.compile_pack(sigs)
            got: list[list] = [[] for _ in chunk]
            for b in range(self.batches):
                batch = [self.inputs[(s.op, k, i, b)] for k, i, s in chunk]
                for j, r in enumerate(pack(batch)):
                    got[j].append((batch[j], [np.asarray(x) for x in r]))
        except (BackendTimeout, BackendCrash) as e:
            # Each probe of a bisection would cost a timeout, or a new process for the
            # backend (seconds): the members run alone instead (one compile each).
            if isinstance(e, BackendTimeout):
                self.on_timeout(backend)
            self.stats["alone"] += len(chunk)
            self.stats["failures"] += 1
            return
        except CannotPack as e:
            self._refuse(backend, str(e))
            self.stats["alone"] += len(chunk)
            return
        except Exception as e:  # noqa: BLE001 - a failing pack is bisected to its signature
            self.stats["failures"] += 1
            named = self._named(backend, sigs, e)
            if named:
                # The error names its members (a text pack's diagnostic locations): they
                # go alone, the others are packed again, one compile instead of a
                # bisection's log2(N) (IREE fails a pack of 16 in about 0.3 s)
                self.stats["located"] += 1
                self.stats["alone"] += len(named)
                self._run(backend, [c for j, c in enumerate(chunk) if j not in named])
                return
            if len(chunk) == 2 and self._refuses_packs(backend, sigs):
                pairs = backend.__dict__["_refused_pairs"] = \
                    backend.__dict__.get("_refused_pairs", 0) + 1
                if pairs >= REFUSED_PAIRS:
                    self._refuse(backend, f"{pairs} packs of two signatures failed where "
                                 f"each member compiles alone, and none succeeded (the "
                                 f"last: {sigs[0].op}, {sigs[1].op}): {type(e).__name__}: "
                                 f"{' '.join(str(e).split())[:300]}")
                self.stats["alone"] += len(chunk)
                return
            self.stats["bisections"] += 1
            half = len(chunk) // 2
            self._run(backend, chunk[:half])
            self._run(backend, chunk[half:])
            return
        self.stats["packs"] += 1
        self.stats["packed"] += len(chunk)
        backend.__dict__["_packed_once"] = True
        fallback = getattr(pack, "member_fallback", None)
        text = getattr(backend, "pack_kind", "own") == "text" and fallback is None
        for j, (_, _, sig) in enumerate(chunk):
            own = (lambda s=sig: fallback(s)) if fallback is not None else None
            member = PackedMember(pack, j, len(chunk), got[j], own)
            backend.adopt_batch_executable(sig, member)
            if text and sig.input_leaves:
                # one case (check_case: a divergence's minimiser re-running it) through
                # the pack too, not a compile of the member alone (IREE: 0.4 s CPU each)
                backend.adopt_case_executable(sig, _one_case(member))

    @staticmethod
    def _named(backend, sigs: list[Signature], e: BaseException) -> set[int]:
        """The members a text pack's error names (backends/text_pack.py
        ``located_members``), if some but not all; else none (the pack is halved). The
        backend's own words (``marked_members``: members it knows it refuses) may name
        them all: each goes alone."""
        if getattr(backend, "pack_kind", "own") != "text":
            return set()
        from conformance.backends.text_pack import located_members, marked_members
        marked = set(marked_members(sigs, str(e)))
        if marked:
            return marked
        from conformance.backends.vendor import NoProgram, module_text
        from conformance.core.packs import PackSignature
        try:
            text = module_text(PackSignature.of(sigs))    # the text the backend was handed
        except NoProgram:
            text = None
        named = set(located_members(sigs, str(e), text))
        return named if 0 < len(named) < len(sigs) else set()

    def _refuse(self, backend, reason: str) -> None:
        backend.refuse_packs(reason)
        self.refused[backend.name] = reason

    @staticmethod
    def _refuses_packs(backend, sigs: list[Signature]) -> bool:
        """Whether a failed pair of a text pack (backends/text_pack.py) is the backend
        refusing packs as such: no pack of it has succeeded yet and each member compiles
        alone (compiled here through the backend's cache, so the ordinary path that runs
        them next compiles nothing again; a member that fails alone is the culprit, and
        the ordinary path records it)."""
        if getattr(backend, "pack_kind", "own") != "text" or \
                backend.__dict__.get("_packed_once"):
            return False
        for sig in sigs:
            try:
                backend.batch_executable(sig)
            except Exception:  # noqa: BLE001 - the member's failure, recorded by its check
                return False
        return True

    def clear(self) -> None:
        self.inputs.clear()


__all__ = ["DEFAULT_PACK", "packable", "pack_program", "split_results", "PackedMember",
           "UnitPacker", "batch_size"]
