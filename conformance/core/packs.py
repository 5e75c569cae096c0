"""The program of a pack: several independent signatures as one program (issue 20).

Plain data on top of :mod:`conformance.core.program`, shared by the runner's packing
(conformance.checking.packing) and the backends' pack paths (backends/xla_pack.py,
backends/jax_pack.py, backends/text_pack.py): which signatures may be packed, the pack's
program of disjoint parts, the signature that stands for it where a backend compiles text
(:class:`PackSignature`, issue 33), and its flat results split back per member.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from conformance.core.case import Signature
from conformance.core.program import Operation, Program


def packable(sig: Signature, spec=None) -> bool:
    """Whether a signature may share a compiled program with others (``spec``: its
    op's spec, whose ``pack_alone`` says why the op never may)."""
    if spec is not None and spec.data.get("pack_alone"):
        return False
    return (not sig.invalid and not sig.has_tuples and sig.num_replicas == 1
            and sig.num_partitions == 1 and len(sig.result_types) > 0)


def pack_program(signatures: Sequence[Signature]) -> Program:
    """One program of ``len(signatures)`` disjoint parts: part ``j`` is signature ``j``'s
    op on arguments ``s{j}_{i}``, its results returned after part ``j-1``'s."""
    args: list[tuple[str, Any]] = []
    ops: list[Operation] = []
    results: list[str] = []
    for j, s in enumerate(signatures):
        mine = [(f"s{j}_{i}", t) for i, t in enumerate(s.input_types)]
        o = Operation(s, tuple(n for n, _ in mine), f"v{j}")
        args += mine
        ops.append(o)
        results += o.results
    return Program.make(args, ops, results)


@dataclasses.dataclass(frozen=True)
class PackSignature(Signature):
    """The signature a text-compiling backend's ordinary ``compile(signature)`` is given
    for a pack (issue 33): op ``pack``, the members' input leaves and result leaves in
    member order, and the members themselves. ``backends.vendor.module_text`` prints it as
    the pack's canonical program (:func:`pack_program`), so an adapter that compiles the
    text it is handed compiles the pack with no code of its own.

    ``reads`` (not part of its identity) counts the times its text was taken: whether the
    backend compiled the text or something else (a backend that builds programs from
    ``signature.op`` cannot pack)."""

    members: tuple[Signature, ...] = ()
    reads: list = dataclasses.field(default_factory=list, compare=False, repr=False)

    @staticmethod
    def of(signatures: Sequence[Signature]) -> "PackSignature":
        members = tuple(signatures)
        return PackSignature("pack", tuple(t for s in members for t in s.input_leaves),
                             tuple(t for s in members for t in s.result_leaves),
                             members=members)

    def program(self) -> Program:
        return pack_program(self.members)


def split_results(signatures: Sequence[Signature], flat: Sequence[Any]) -> list[list[Any]]:
    """The pack's flat results, one list per member."""
    out, k = [], 0
    for s in signatures:
        n = len(s.result_leaves)
        out.append(list(flat[k:k + n]))
        k += n
    return out


def batch_size(stacked: Sequence[np.ndarray]) -> int:
    """Cases in a batch (a member of no inputs runs once, as compile_batch has it)."""
    return int(stacked[0].shape[0]) if stacked else 1


__all__ = ["packable", "pack_program", "PackSignature", "split_results", "batch_size"]
