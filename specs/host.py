"""Host-side values of a signature: what a host transfer reads or writes, apart from the op.

infeed, outfeed, send and recv talk to the host (or to another device) through queues:
infeed reads the values the host put on the infeed queue, outfeed writes its inputs to
the outfeed queue, send writes to a channel and recv reads from one. The suite makes
those queues part of the case (oracles/host_io.py): an op's spec marks them as inputs
or outputs with ``host: true`` (specs/schema.yaml), so a signature lists them among its
input and result types and a case holds their arrays like any other value.

They are not operands or results of the op. :func:`host_split` says which of a
signature's values are which, so that

- the canonical program (conformance/mlir/emitter.py) prints the op without them
  (:attr:`HostSplit.device` is the op's own signature);
- a backend that can transfer to and from the host feeds ``host_inputs`` (positions in
  the case's input leaves) to the device before it runs the program, and returns what
  it read back from the device for ``host_outputs`` (positions in the result leaves);
- a backend that cannot says Unsupported at compile time (``spec.host_transfer``).
"""
from __future__ import annotations

import dataclasses

from conformance.core.case import Signature
from conformance.core.types import leaves

from . import OpSpec, load_spec


@dataclasses.dataclass(frozen=True)
class HostSplit:
    device: Signature                    # the op's own operands and results
    host_inputs: tuple[int, ...]         # positions in sig.input_leaves: the host's queues
    device_inputs: tuple[int, ...]       # positions in sig.input_leaves: @main's arguments
    host_outputs: tuple[int, ...]        # positions in sig.result_leaves: read back from host
    device_outputs: tuple[int, ...]      # positions in sig.result_leaves: @main's results


def _part(specs, groups) -> tuple[list, list[bool]]:
    """Flat types of the groups, and per flat type whether it is host-side."""
    types, host = [], []
    for t, g in zip(specs, groups):
        members = list(g) if t.variadic else [g]
        types += members
        host += [t.host] * len(members)
    return types, host


def _leaf_positions(types, host) -> tuple[tuple[int, ...], tuple[int, ...]]:
    on_host, on_device, pos = [], [], 0
    for t, h in zip(types, host):
        n = len(leaves([t]))
        (on_host if h else on_device).extend(range(pos, pos + n))
        pos += n
    return tuple(on_host), tuple(on_device)


def host_split(sig: Signature, spec: OpSpec | None = None) -> HostSplit:
    """Which values of ``sig`` are the host's (see the module docstring). A signature
    whose values do not split by the spec (an invalid one with another count) is all
    device-side: its program is printed as it is, for the verifier to judge."""
    spec = spec or load_spec(sig.op)
    n_in, n_out = len(sig.input_leaves), len(sig.result_leaves)
    everything = HostSplit(sig, (), tuple(range(n_in)), (), tuple(range(n_out)))
    if not spec.host_transfer:
        return everything
    try:
        ins, in_host = _part(spec.inputs, spec.split_inputs(sig.input_types))
        outs, out_host = _part(spec.outputs, spec.split_outputs(sig.result_types))
    except ValueError:
        return everything
    device = dataclasses.replace(
        sig, input_types=tuple(t for t, h in zip(ins, in_host) if not h),
        result_types=tuple(t for t, h in zip(outs, out_host) if not h))
    hi, di = _leaf_positions(ins, in_host)
    ho, do = _leaf_positions(outs, out_host)
    return HostSplit(device, hi, di, ho, do)


def device_signature(sig: Signature) -> Signature:
    """The op's own signature: ``sig`` without its host-side values."""
    return host_split(sig).device
