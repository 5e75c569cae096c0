"""XLA's pack path (issue 20, conformance.checking.packing): several independent signatures in
one module, compiled once.

The module is the pack's program (``conformance.checking.packing.pack_program``) printed by
``conformance.mlir.program_emit.program_text``: each member's op exactly as its own module
prints it (the emitter's ``op_text``), on its own arguments, results returned in
member order. Nothing joins the parts, so each member computes what it computes
alone. Cases run in lockstep: case ``c`` of every member in one execute; a member
with fewer cases, or not run this time (None), gets filler inputs (zeros, put on the
device once) whose results are dropped.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance.core.case import Signature

from .base import Unsupported


class XlaPack:
    """A compiled pack: ``pack(member_batches) -> member results`` (stacked)."""

    def __init__(self, backend, signatures: Sequence[Signature]) -> None:
        from conformance.core.packs import pack_program
        from . import jaxlib_support
        from .programs import program_text_or_unsupported
        self.signatures = list(signatures)
        for sig in self.signatures:
            for t in tuple(sig.input_leaves) + tuple(sig.result_leaves):
                why = backend.pjrt.cannot_transfer(t.element_type.dtype)
                if why is not None:
                    raise Unsupported(f"{backend.platform} cannot hold {t.element_type} "
                                      f"arrays: {why}")
        text = program_text_or_unsupported(pack_program(self.signatures))
        self.pjrt = backend.pjrt
        try:
            self.run = self.pjrt.loaded(self.pjrt.compile(text))
        except Exception as e:  # noqa: BLE001 - classified as compile_text does
            if jaxlib_support.status_code(e) == "UNIMPLEMENTED":
                raise Unsupported(f"XLA {backend.platform}: {e}") from None
            raise
        self._fillers: list[list] | None = None

    def fillers(self) -> list[list]:
        if self._fillers is None:
            put = self.pjrt.put
            self._fillers = [[put(np.zeros(t.shape, t.element_type.dtype))
                              for t in s.input_leaves] for s in self.signatures]
        return self._fillers

    def __call__(self, batches: Sequence["Sequence[np.ndarray] | None"]) -> list:
        from conformance.core.packs import batch_size, split_results
        pjrt, sigs = self.pjrt, self.signatures
        batches = [None if b is None else [np.ascontiguousarray(x) for x in b]
                   for b in batches]
        sizes = [0 if b is None else batch_size(b) for b in batches]
        avals = [None if b is None else [pjrt.aval(x.shape[1:], x.dtype) for x in b]
                 for b in batches]
        outs: list = [None] * len(sigs)
        fill = self.fillers() if any(n < max(sizes) for n in sizes) else None
        for c in range(max(sizes, default=0)):
            args: list = []
            for j, b in enumerate(batches):
                if c < sizes[j] and b is not None:
                    args += [pjrt.put(x[c], a) for x, a in zip(b, avals[j])]
                else:
                    args += fill[j]
            for j, results in enumerate(split_results(sigs, self.run(args))):
                if c >= sizes[j]:
                    continue
                if outs[j] is None:
                    outs[j] = [np.empty((sizes[j],) + r.shape, r.dtype) for r in results]
                for out, r in zip(outs[j], results):
                    out[c, ...] = r
        for j, b in enumerate(batches):
            if b is not None and sizes[j] == 0:
                outs[j] = [np.zeros((0,) + t.shape, t.element_type.dtype)
                           for t in sigs[j].result_leaves]
        return outs
