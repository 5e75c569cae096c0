"""Backends with host queues, for tests/test_host_io.py (loaded as planted_host_io:Class;
tests/ is on sys.path under pytest, and child processes get it through PYTHONPATH).

A backend that can transfer to and from the host runs the op's own program
(conformance.specs.host.host_split: the device signature) and moves the case's host-side
values through queues: what the host put on infeed or a channel before the run, and what
it read back from outfeed or a channel after it.
"""
import threading
from collections import deque

import numpy as np

from conformance.backends import Backend, Unsupported
from conformance.specs.host import host_split
from conformance.specs.validity import violations


class HostQueues(Backend):
    """A device with an infeed, an outfeed and channels, implemented right."""

    name = "hostq"
    isolate = False

    def read(self, queue: deque, n: int) -> list:
        return [queue.popleft() for _ in range(n)]

    def compile(self, sig):
        if sig.op not in ("after_all", "infeed", "outfeed", "send", "recv"):
            raise Unsupported(f"{self.name}: host ops only")
        if violations(sig):                 # its compiler verifies the program
            raise ValueError(f"invalid program: {violations(sig)}")
        split = host_split(sig)

        def run(inputs):
            queue = deque(np.asarray(inputs[i]).copy() for i in split.host_inputs)
            device_args = [inputs[i] for i in split.device_inputs]
            if sig.op in ("infeed", "recv"):             # payload read from the queue
                return self.read(queue, len(split.device_outputs))
            if sig.op in ("outfeed", "send"):            # the host reads the inputs back
                return [np.asarray(x).copy() for x in device_args]
            return []                                    # after_all: nothing to return
        return run


class StaleInfeed(HostQueues):
    """A realistic bug: the second and later payload values of one infeed item are read
    from a buffer that is not refreshed (zeros), not from the queue."""

    name = "hostq-stale"

    def read(self, queue, n):
        got = super().read(queue, n)
        return got[:1] + [np.zeros_like(x) for x in got[1:]]


class HangingInfeed(HostQueues):
    """Waits forever on infeed (the data never arrives: XLA CPU's own behaviour when
    nobody feeds it); everything else as HostQueues."""

    name = "hostq-hangs"
    isolate = True

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "infeed":
            return inner
        return lambda inputs: threading.Event().wait() or inner(inputs)
