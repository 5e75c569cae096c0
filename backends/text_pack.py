"""The pack path of every backend that compiles StableHLO text (issue 33): iree, any
vendor adapter, any backend without a pack path of its own.

The suite decides what the text holds, the backend compiles it as it compiles any
case: the pack's :class:`~conformance.core.packs.PackSignature` is handed to the
backend's ordinary ``compile_batch`` (its ``compile``, run once per case, unless it
batches itself), and ``backends.vendor.module_text`` prints it as the pack's one module
(conformance.core.packs.pack_program: each member's op on its own arguments, results in
member order). So a vendor adapter packs without writing code for it.

Whether the backend compiled the text it was handed is seen, not assumed: a compile that
returns without having taken the pack's text, or that fails on it before taking it with
anything but ``Unsupported`` (a backend that builds programs from ``signature.op``: the
oracle-based test backends), raises :class:`~conformance.backends.base.CannotPack`, and
the runner compiles that backend's signatures alone from then on. Any other failure is
the pack's (a member the backend refuses, a compile error): the runner halves it.

Cases run in lockstep: case ``c`` of every member in one case of the pack. A member with
fewer cases, or not run this time (None: a verdict re-running one member's batch), is
given filler inputs, its own first case of the pack's first run (inputs the pack is known
to run), whose results are dropped.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from conformance.core.case import Signature
from conformance.core.packs import batch_size, split_results


class TextPack:
    """A compiled pack: ``pack(member_batches) -> member results`` (stacked); ``run`` is
    the backend's batch executable of the pack's signature (``Backend.compile_pack``)."""

    def __init__(self, signatures: Sequence[Signature], run) -> None:
        self.signatures = list(signatures)
        self.run = run
        self._fillers: list[list[np.ndarray] | None] = [None] * len(self.signatures)

    def _filler(self, j: int, n: int) -> list[np.ndarray]:
        """``n`` filler cases of member ``j`` (its first case seen, else zeros)."""
        row = self._fillers[j]
        if row is None:
            row = [np.zeros((1,) + t.shape, t.element_type.dtype)
                   for t in self.signatures[j].input_leaves]
        return [np.repeat(x, n, axis=0) for x in row]

    def __call__(self, batches: Sequence["Sequence[np.ndarray] | None"]) -> list:
        sigs = self.signatures
        batches = [None if b is None else [np.asarray(x) for x in b] for b in batches]
        sizes = [0 if b is None else batch_size(b) for b in batches]
        for j, b in enumerate(batches):
            if b is not None and self._fillers[j] is None and b and sizes[j] > 0:
                self._fillers[j] = [np.array(x[:1]) for x in b]
        n = max(sizes, default=0)
        if n == 0:
            return [None if b is None else
                    [np.zeros((0,) + t.shape, t.element_type.dtype)
                     for t in sigs[j].result_leaves] for j, b in enumerate(batches)]
        stacked: list[np.ndarray] = []
        for j, b in enumerate(batches):
            if b is None:
                stacked += self._filler(j, n)
            elif sizes[j] < n and b:
                stacked += [np.concatenate([x, f]) for x, f in
                            zip(b, self._filler(j, n - sizes[j]))]
            else:
                stacked += b        # n cases, or a member of no inputs
        flat = list(self.run(stacked))
        want = sum(len(s.result_leaves) for s in sigs)
        if len(flat) != want:
            raise ValueError(f"the pack of {len(sigs)} signatures gave {len(flat)} results, "
                             f"not {want}")
        return [None if b is None else [np.asarray(r)[:sizes[j]] for r in results]
                for j, (b, results) in enumerate(zip(batches, split_results(sigs, flat)))]


#: an MLIR diagnostic's location: ``NAME:LINE:COL: error`` (the first one is the error's)
_ERROR_AT = re.compile(r":(\d+):\d+: error")
#: what a backend that knows better says (:func:`fault_marker`)
_MARKED = re.compile(r"pack members at fault: (\d+(?:, \d+)*)")


def member_spans(text: str, count: int) -> list[tuple[int, int]]:
    """The lines (1-based, end excluded) of each member's op in a pack's text
    (conformance.core.packs.pack_program printed: member ``j`` defines ``%v{j}``); a
    member not found has an empty span."""
    lines = text.splitlines()
    starts: dict[int, int] = {}
    end = len(lines) + 1
    for n, line in enumerate(lines, 1):
        head = line.lstrip()
        m = re.match(r"%v(\d+)[ :]", head)
        if m and int(m.group(1)) < count and int(m.group(1)) not in starts:
            starts[int(m.group(1))] = n
        elif head.startswith(("func.return", "return ")) and starts:
            end = n
            break
    order = sorted(starts.items(), key=lambda kv: kv[1])
    spans = [(0, 0)] * count
    for k, (j, start) in enumerate(order):
        spans[j] = (start, order[k + 1][1] if k + 1 < len(order) else end)
    return spans


def fault_marker(members: Sequence[int]) -> str:
    """The words a backend adds to a failed pack's error to name the members at fault
    (read back by :func:`located_members` in the runner, across the isolation pipe)."""
    return "pack members at fault: " + ", ".join(str(j) for j in sorted(set(members)))


def marked_members(signatures: Sequence[Signature], message: str) -> list[int]:
    """The members a backend's own :func:`fault_marker` names in ``message`` (it knows
    them, so all of a pack's members may be named); empty if it names none."""
    marked = _MARKED.search(message)
    if not marked:
        return []
    return sorted({int(x) for x in marked.group(1).split(", ") if int(x) < len(signatures)})


def located_members(signatures: Sequence[Signature], message: str,
                    text: str | None = None) -> list[int]:
    """The members a failed pack's error names (issue 33): the backend's own
    :func:`fault_marker`, else the members whose op lines the error's MLIR locations
    (``NAME:LINE:COL: error``) fall on in the pack's canonical text ``text``, which the
    caller prints (backends.vendor.module_text). Empty: the error
    names none (a location outside every member's op, no location): the runner halves.

    A hint, not a verdict: a member named here is compiled alone by the ordinary path
    (its own record, as in an unpacked run) and the others packed again."""
    if _MARKED.search(message):
        return marked_members(signatures, message)
    lines = [int(m.group(1)) for m in _ERROR_AT.finditer(message)]
    if not lines:
        return []
    if text is None:        # (the caller prints it: backends.vendor.module_text sits above)
        return []
    spans = member_spans(text, len(signatures))
    return sorted({j for n in lines for j, (a, b) in enumerate(spans) if a <= n < b})


__all__ = ["TextPack", "member_spans", "fault_marker", "marked_members", "located_members"]
