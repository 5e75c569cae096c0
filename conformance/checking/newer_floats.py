"""Which type bindings that name the current spec's newer float formats a depth draws.

The nine formats (f4E2M1FN ... f8E8M0FNU, ``NEWER_FLOAT_TYPES``) are in every type class
("float", "any"), so an op's bindings name them; drawn everywhere they would make the
quick run (CI's critical path) about 60% bigger, convert's bindings alone 361 -> 784.
So a depth says how many of them it draws (``Depth.newer_float_cap``):

- ``None`` (default, deep): every binding.
- an int ``cap`` (quick): a rotation. The nine formats are dealt round-robin over the
  ops of a family that name them (name order), ``ceil(9 / n)`` consecutive formats to
  each of its ``n`` ops (its *turn*), so that every family's quick plans meet every
  format; an op draws, for each format of its turn, at most ``cap`` of the bindings that
  name it and no newer format outside the turn, evenly spaced in spec order (one for an
  op with one type variable; for convert: some from, some to, some to itself).

The rule is a function of the shipped specs' families and names only (never of a run's
filters), so a type key's plan is the same in every run that draws it; ``--types`` then
selects among the drawn bindings. docs/float-formats.md describes it.
"""
from __future__ import annotations

import functools
import math
from typing import Mapping, Sequence

from conformance.core.types import NEWER_FLOAT_TYPES

NEWER = frozenset(NEWER_FLOAT_TYPES)


def newer_in(binding: Mapping[str, str]) -> frozenset[str]:
    """The newer float formats a type binding names."""
    return frozenset(v for v in binding.values() if v in NEWER)


@functools.lru_cache(maxsize=None)
def _family_ops(family: str) -> tuple[str, ...]:
    """The shipped ops of ``family`` with a binding that names a newer format, name order."""
    from conformance.specs import all_specs
    return tuple(sorted(s.name for s in all_specs() if s.family == family
                        and any(newer_in(b) for b in s.type_bindings())))


def turn(op: str, family: str) -> tuple[str, ...]:
    """The newer formats dealt to ``op`` at a capped depth (all nine for an op that is no
    shipped spec of its family: a test's or a user's own)."""
    ops = _family_ops(family)
    if op not in ops:
        return tuple(NEWER_FLOAT_TYPES)
    each = math.ceil(len(NEWER_FLOAT_TYPES) / len(ops))
    start = ops.index(op) * each
    return tuple(NEWER_FLOAT_TYPES[(start + j) % len(NEWER_FLOAT_TYPES)]
                 for j in range(min(each, len(NEWER_FLOAT_TYPES))))


def drawn(op: str, family: str, bindings: Sequence[Mapping[str, str]],
          cap: int | None) -> list:
    """``bindings`` (spec order) less those naming a newer format that the depth's ``cap``
    does not draw; the seed's types' bindings always stay."""
    if cap is None:
        return list(bindings)
    formats = turn(op, family)
    keep: set[int] = set()
    for f in formats:
        mine = [i for i, b in enumerate(bindings)
                if f in newer_in(b) and newer_in(b) <= set(formats)]
        keep.update(mine[(j * len(mine)) // cap] for j in range(min(cap, len(mine))))
    return [b for i, b in enumerate(bindings) if not newer_in(b) or i in keep]


def seed_bindings(bindings: Sequence[Mapping[str, str]]) -> list:
    """The bindings that name no newer format: what sets an op's signatures per binding
    and its invalid programs, so that drawing the newer formats left them as they were."""
    return [b for b in bindings if not newer_in(b)]
