"""jax's pack path (issue 20, conformance.checking.packing): several independent signatures
under one ``jax.jit``, each member ``jax.vmap`` of its own op mapping (what the
member's ``compile_batch`` compiles alone), so one XLA compile serves them all.

A member that jax cannot batch or type (``Unsupported`` from the member's type check)
fails the pack, which the runner then splits until that member runs alone through
``compile_batch`` (and its per-case fallback). A member run on other inputs than the
pack's (a verdict re-running a batch) is compiled alone (``member_fallback``): a jax
pack takes every member's batch in each call, so it has no filler inputs.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from conformance.core.case import Signature


class JaxPack:
    def __init__(self, backend, signatures: Sequence[Signature]) -> None:
        jax = backend._jax
        self.signatures = list(signatures)
        fns = []
        for sig in self.signatures:
            fn = jax.vmap(backend._function(sig))
            backend._check_types(sig, fn, 1)
            fns.append((fn, len(sig.input_leaves)))

        def packed(*args):
            out, k = [], 0
            for fn, n in fns:
                r = fn(*args[k:k + n])
                k += n
                out.extend(r if isinstance(r, (tuple, list)) else (r,))
            return tuple(out)
        self.execute = backend._executor(jax.jit(packed))
        self.member_fallback = backend.compile_batch

    def __call__(self, batches: Sequence["Sequence[np.ndarray] | None"]) -> list:
        from conformance.core.packs import split_results
        if any(b is None for b in batches):
            raise ValueError("a jax pack runs every member's batch in each call")
        return split_results(self.signatures,
                             self.execute([x for b in batches for x in b]))
