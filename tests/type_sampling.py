"""Sampling the float formats of the current spec in tests that walk every type binding.

The nine formats (f4E2M1FN ... f8E8M0FNU) would make every walk of all bindings grow by
about half (convert's (n + 9)**2 pairs more than double): CI time is the constraint.
A walk keeps every binding of the seed's element types and, of the bindings that name a
newer format, the first (in spec order) that brings in a format not yet met, so every
newer format is walked at least once and each walk costs about what it did before.
tests/test_float_formats.py checks the formats themselves.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from conformance.core.types import NEWER_FLOAT_TYPES, ElementType

NEWER = frozenset(NEWER_FLOAT_TYPES)


def _newer_in(binding: Mapping) -> frozenset:
    names = set()
    for v in binding.values():
        for part in (v if isinstance(v, (list, tuple)) else [v]):
            s = str(part)
            names.update(n for n in NEWER if n == s or f"<{n}>" in s or f"x{n}>" in s)
    return frozenset(names)


def sampled(bindings: Iterable[Mapping]) -> list:
    """The bindings of the seed's types, and one binding per newer format (deterministic)."""
    kept, met = [], set()
    for b in bindings:
        newer = _newer_in(b)
        if not newer:
            kept.append(b)
        elif not newer <= met:
            kept.append(b)
            met |= newer
    return kept


def sampled_pairs(types: Sequence[ElementType]) -> list[tuple[ElementType, ElementType]]:
    """Every pair of the seed's types, and each newer format paired with itself and with
    one seed type, each way."""
    seed = [t for t in types if t.name not in NEWER]
    newer = [t for t in types if t.name in NEWER]
    pairs = [(x, y) for x in seed for y in seed]
    for i, t in enumerate(newer):
        other = seed[i % len(seed)]
        pairs += [(t, t), (t, other), (other, t)]
    return pairs
