"""Oracle of the token and host-transfer ops: after_all, infeed, outfeed, send, recv.

The host side is modelled as queues that are part of the case (003 "### infeed",
"### outfeed", "### send", "### recv"; specs/host.py): infeed reads the next item the
host put on the infeed queue, outfeed appends its inputs to the outfeed queue, send
appends to its channel's queue and recv takes the next item of its channel's queue. An
item is the tuple of values one op moves (XLA: "Reads a single data item ... interpreting
the data as the given shape").

For one op, the case holds the queue it reads (a ``host: true`` input: infeed's data,
recv's channel) or the queue it writes comes back as its result (a ``host: true``
output: outfeed's queue, send's channel). Tokens carry no data (:data:`TOKEN`).

What tokens are for - ordering - is checkable with :func:`run_token_program`: several
host ops joined by tokens are run in an order their token dependencies allow, and two
ops on the same queue must be ordered by them (XLA's Infeed: "there must be a total
order among the Infeed operations"); otherwise the program's result is not defined and
:class:`OrderError` says which ops are unordered.
"""
from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, Mapping, Sequence

import numpy as np

from conformance.core.types import TOKEN, Token, TokenType, TensorType, type_of

from .registry import OracleError, register


class OrderError(OracleError):
    """Host ops on one queue that their tokens do not order (the result is undefined)."""


def _tensor_types(types) -> list[TensorType]:
    return [t for t in types if not isinstance(t, TokenType)]


def _copy(values: Sequence[np.ndarray], types: Sequence[TensorType], what: str) -> tuple:
    """The queue's item as the op's payload: each value must have the payload's type
    (the host put data of another type on the queue otherwise: a malformed case)."""
    values = [np.asarray(v) for v in values]
    if [type_of(v) for v in values] != list(types):
        raise OracleError(f"{what}: the queue's item is "
                          f"({', '.join(str(type_of(v)) for v in values)}), the op reads "
                          f"({', '.join(map(str, types))})")
    return tuple(v.copy() for v in values)


@register("after_all")
def _after_all(args, attrs, types):
    """Does nothing: a token (003 "### after_all")."""
    if not all(isinstance(a, Token) for a in args):
        raise OracleError("after_all: every input must be a token")
    return TOKEN


@register("infeed")
def _infeed(args, attrs, types):
    """``results`` = the next item of the infeed queue (the case's ``infeed_queue``),
    then a token."""
    token, *queue = args
    payload = _tensor_types(types)
    return _copy(queue, payload, "infeed") + (TOKEN,)


@register("recv")
def _recv(args, attrs, types):
    """``results`` = the next item of channel ``channel_id`` (the case's ``channel``),
    then a token."""
    token, *channel = args
    payload = _tensor_types(types)
    return _copy(channel, payload, f"recv on channel {attrs.get('channel_id')}") + (TOKEN,)


@register("outfeed", "send")
def _write(args, attrs, types):
    """The token, then what the host (or the channel's other end) receives: the inputs."""
    *inputs, token = args
    return (TOKEN,) + tuple(np.asarray(x).copy() for x in inputs)


# ---------------------------------------------------------------------------
# Several host ops joined by tokens
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class HostQueues:
    """The host's side of a program: infeed items to read, outfeed items written, and a
    FIFO per channel id (send appends, recv takes)."""

    infeed: deque = dataclasses.field(default_factory=deque)
    outfeed: list = dataclasses.field(default_factory=list)
    channels: dict = dataclasses.field(default_factory=dict)

    def take(self, queue: deque, what: str) -> tuple:
        if not queue:
            raise OracleError(f"{what}: the queue is empty (the program reads more items "
                              "than the case put on it)")
        return tuple(queue.popleft())


@dataclasses.dataclass(frozen=True)
class HostStep:
    """One op of a token program: ``after`` names the tokens it takes (its token
    operand; after_all takes several), ``token`` the one it produces; ``values`` are a
    write's inputs, ``types`` a read's payload types."""

    op: str
    token: str
    after: tuple[str, ...] = ()
    values: tuple = ()
    types: tuple = ()
    attributes: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def _queue_of(step: HostStep) -> str | None:
    if step.op in ("infeed", "outfeed"):
        return step.op
    if step.op in ("send", "recv"):
        return f"channel {step.attributes.get('channel_id')}"
    return None


def token_order(steps: Sequence[HostStep]) -> list[HostStep]:
    """An execution order the tokens allow (each op after the ops producing its tokens),
    checked: ops on one queue must be ordered by their tokens (OrderError otherwise);
    an unknown token or a cycle is an OracleError."""
    by_token = {s.token: s for s in steps}
    if len(by_token) != len(steps):
        raise OracleError("two ops produce the same token")
    for s in steps:
        for t in s.after:
            if t not in by_token:
                raise OracleError(f"{s.op} {s.token!r} takes token {t!r}, which no op produces")
    before: dict[str, set[str]] = {}

    def ancestors(name: str, seen: tuple = ()) -> set[str]:
        if name in seen:
            raise OracleError(f"the tokens form a cycle through {name!r}")
        if name not in before:
            out: set[str] = set()
            for t in by_token[name].after:
                out |= {t} | ancestors(t, seen + (name,))
            before[name] = out
        return before[name]

    for s in steps:
        ancestors(s.token)
    for i, a in enumerate(steps):
        for b in steps[i + 1:]:
            q = _queue_of(a)
            if q is not None and q == _queue_of(b) and a.token not in before[b.token] \
                    and b.token not in before[a.token]:
                raise OrderError(f"{a.op} {a.token!r} and {b.op} {b.token!r} use the {q} "
                                 "queue but no token orders them: the program's result is "
                                 "not defined")
    return sorted(steps, key=lambda s: (len(before[s.token]), steps.index(s)))


def run_token_program(steps: Sequence[HostStep], queues: HostQueues) -> dict[str, tuple]:
    """Run host ops in token order against ``queues``; what each read op read, by its
    token name (writes go to ``queues``)."""
    read: dict[str, tuple] = {}
    for s in token_order(steps):
        if s.op == "infeed":
            read[s.token] = _copy(queues.take(queues.infeed, "infeed"), s.types, "infeed")
        elif s.op == "recv":
            cid = s.attributes.get("channel_id")
            queue = queues.channels.setdefault(cid, deque())
            read[s.token] = _copy(queues.take(queue, f"recv on channel {cid}"), s.types, "recv")
        elif s.op == "outfeed":
            queues.outfeed.append(tuple(np.asarray(v).copy() for v in s.values))
        elif s.op == "send":
            cid = s.attributes.get("channel_id")
            queues.channels.setdefault(cid, deque()).append(
                tuple(np.asarray(v).copy() for v in s.values))
        elif s.op != "after_all":
            raise OracleError(f"{s.op} is not a token op")
    return read
