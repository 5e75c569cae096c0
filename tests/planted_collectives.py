"""Planted backends for the collectives (issue 18), loadable in an isolated child as
``planted_collectives:Class`` (tests/ is on the path of pytest and its children).

``GridOracle`` runs every case through the oracle on the case's process grid (inputs and
results ``[processes] + shape``); the others change one thing of it.
"""
import time

import numpy as np

from conformance import oracles
from conformance.backends import Backend
from conformance.specs.validity import violations


def sum_last_first(x, members, dtype):
    """Each group's values added last process first, one by one, rounded to ``dtype``
    after every addition: another legal all_reduce schedule (the spec leaves the order of
    a float reduction implementation-defined)."""
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        for q, g in enumerate(members):
            acc = x[g[-1]]
            for s in g[-2::-1]:
                acc = (acc.astype(np.float64) + x[s].astype(np.float64)).astype(dtype)
            out[q] = acc
    return out


class GridOracle(Backend):
    name = "grid-oracle"
    isolate = False

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        return lambda inputs: [x[0] for x in oracles.evaluate_batch(
            self.change(sig), [np.asarray(x)[None] for x in inputs])]

    def change(self, sig):
        """The signature this backend actually computes (the bug, if any)."""
        return sig


class HangsOnPermute(GridOracle):
    """Waits forever in collective_permute (a mismatched permutation a backend accepts)."""

    name = "hangs-on-permute"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "collective_permute":
            return inner

        def run(inputs):
            time.sleep(3600)
            return inner(inputs)
        return run
