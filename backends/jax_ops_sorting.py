"""jax.lax mappings of the sorting ops (registered into jax_ops.BUILDERS).

``jax.lax.sort(operands, dimension, is_stable, num_keys)`` sorts ascending,
lexicographically by its first ``num_keys`` operands, each in jax's order: integers and
booleans by value; floats "NaN last" (jax canonicalises -0 to +0 and every NaN to +NaN
inside its comparator, then compares in total order); complex numbers by (real, imag),
each part "NaN last". A StableHLO comparator is mapped onto it only where it means
exactly that, recognised from the region's structure (specs/regions.py):

    or(lt_0, and(eq_0, or(lt_1, and(eq_1, ... lt_last))))

where each key is one operand pair (``arg2j``, ``arg2j+1``; complex "NaN last": its real
part, then its imaginary part) and ``lt``/``eq`` compare it in one of these orders:

- integers, booleans: ``compare LT`` / ``GT`` (SIGNED, UNSIGNED, or no compare_type),
  with ``compare EQ`` as eq;
- floats, complex: "NaN last", written with compare FLOAT: ``x LT y or (y != y and
  x == x)`` (``GT`` for descending), eq ``x == y or (x != x and y != y)``;
- floats: ``compare LT/GT TOTALORDER``, eq ``compare EQ TOTALORDER``.

jax sorts by keys it can order only ascending in its own order, so each key is given to
it as an exact order-preserving transform of the operand, placed before the operands:
the operand itself (ascending in jax's order), its bitwise not (descending integers),
its negation ("NaN last" descending: negation reverses the order of numbers and keeps
NaNs last), or the IEEE totalOrder integer key of its bits (TOTALORDER), inverted for
descending. Stability is kept, since jax is told ``is_stable``. Every other comparator
(compare FLOAT on its own, LE, NE, anything else) raises Unsupported.
"""
from __future__ import annotations

import functools

import numpy as np
from jax import lax

from conformance.core.case import Signature
from conformance.core.types import ElementType
from conformance.specs import regions

from .base import Unsupported
from .jax_ops import builder

_SIMPLE_LT = "compare({x}, {y}, '{d}'{k})"
_SIMPLE_EQ = "compare({x}, {y}, 'EQ'{k})"
_NANLAST_LT = ("or(compare({x}, {y}, '{d}', 'FLOAT'), and(compare({y}, {y}, 'NE', 'FLOAT'), "
               "compare({x}, {x}, 'EQ', 'FLOAT')))")
_NANLAST_EQ = ("or(compare({x}, {y}, 'EQ', 'FLOAT'), and(compare({x}, {x}, 'NE', 'FLOAT'), "
               "compare({y}, {y}, 'NE', 'FLOAT')))")


@functools.lru_cache(maxsize=4096)
def _tree(arg_types: tuple[str, ...], body: str):
    return regions.parse(regions.make(arg_types, body)).results[0]


def _part_candidates(types: tuple[ElementType, ...]):
    """Every (lt, eq, operand, component, order, descending) a key part may be: the
    trees of its ``lt`` and ``eq`` in this comparator's argument types."""
    arg_types = tuple(t.name for t in types for _ in (0, 1))
    out = []
    for j, t in enumerate(types):
        x, y = f"arg{2 * j}", f"arg{2 * j + 1}"
        forms = []
        if t.is_integer or t.is_boolean:
            implied = "SIGNED" if t.is_signed else "UNSIGNED"
            for k in (f", '{implied}'", ""):
                forms.append(("", _SIMPLE_LT, _SIMPLE_EQ, k, "int"))
        if t.is_float:
            forms.append(("", _SIMPLE_LT, _SIMPLE_EQ, ", 'TOTALORDER'", "total"))
            forms.append(("", _NANLAST_LT, _NANLAST_EQ, "", "nanlast"))
        if t.is_complex:
            for part in ("real", "imag"):
                forms.append((part, _NANLAST_LT, _NANLAST_EQ, "", "nanlast"))
        for part, lt, eq, k, order in forms:
            px, py = (f"{part}({x})", f"{part}({y})") if part else (x, y)
            for d in ("LT", "GT"):
                out.append((_tree(arg_types, lt.format(x=px, y=py, d=d, k=k)),
                            _tree(arg_types, eq.format(x=px, y=py, k=k)),
                            j, part, order, d == "GT"))
    return out


def _split_lexicographic(node, cands):
    """The parts of ``or(lt, and(eq, rest))`` ... ``lt`` as (candidate, eq), eq None for
    the last; None if the region is not of that form. A part's ``lt`` is found among the
    candidates before the node is taken apart ("NaN last" is an ``or`` too)."""
    lts = {c[0]: c for c in cands}
    parts = []
    while node not in lts:
        if not (isinstance(node, regions.Call) and node.op == "or"
                and isinstance(node.operands[1], regions.Call) and node.operands[1].op == "and"):
            return None
        lt, (eq, rest) = node.operands[0], node.operands[1].operands
        if lt not in lts:
            return None
        parts.append((lts[lt], eq))
        node = rest
    parts.append((lts[node], None))
    return parts


def jax_keys(sig: Signature) -> list[tuple[int, str, bool]]:
    """The keys jax sorts by, as (operand, order, descending); Unsupported if the
    comparator is not lexicographic in orders that jax can be given exactly."""
    if len(sig.regions) != 1:
        raise Unsupported("sort: expected one comparator region")
    region = regions.parse(sig.regions[0])
    types = tuple(t.element_type for t in sig.input_types)
    if len(region.results) != 1 or [t.name for t in region.arg_types] != \
            [t.name for t in types for _ in (0, 1)]:
        raise Unsupported("sort: the comparator's arguments are not the operands' pairs")
    parts = _split_lexicographic(region.results[0], _part_candidates(types))
    if parts is None or any(eq is not None and eq != c[1] for c, eq in parts):
        raise Unsupported("sort: jax.lax.sort orders lexicographically by keys in jax's order "
                          "(integers by value, floats NaN last, or TOTALORDER via integer keys); "
                          f"the comparator {sig.regions[0]!r} is not of that form")
    keys: list[tuple[int, str, bool]] = []
    i = 0
    while i < len(parts):
        (_, _, j, part, order, desc), _ = parts[i]
        if part == "real":
            # A complex key: real part then imaginary part, the same direction.
            nxt = parts[i + 1][0] if i + 1 < len(parts) else None
            if nxt is None or nxt[2:] != (j, "imag", order, desc):
                raise Unsupported("sort: a complex key's real part without its imaginary "
                                  "part is not an order jax.lax.sort can be given")
            i += 1
        elif part == "imag":
            raise Unsupported("sort: a complex key ordered by its imaginary part first is not "
                              "an order jax.lax.sort can be given")
        keys.append((j, order, desc))
        i += 1
    return keys


def _total_order_key(x):
    """IEEE totalOrder as a signed integer of the same width: the bits, with the
    magnitude bits of negative values inverted (so -NaN is the smallest)."""
    itype = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[x.dtype.itemsize * 8]
    bits = lax.bitcast_convert_type(x, itype)
    sign = lax.shift_right_arithmetic(bits, np.array(x.dtype.itemsize * 8 - 1, itype))
    return lax.bitwise_xor(bits, lax.shift_right_logical(sign, np.array(1, itype)))


def _key(x, order: str, desc: bool):
    if order == "total":
        k = _total_order_key(x)
        return lax.bitwise_not(k) if desc else k
    if not desc:
        return x
    return lax.bitwise_not(x) if order == "int" else lax.neg(x)


@builder("sort")
def _sort(sig: Signature):
    a = sig.attributes
    keys = jax_keys(sig)
    dimension, stable = a["dimension"], bool(a["is_stable"])
    direct = (all(order != "total" and not desc for _, order, desc in keys)
              and [j for j, _, _ in keys] == list(range(len(keys))))
    if direct:
        # The comparator is jax's own: sort the operands as they are.
        return lambda *xs: tuple(lax.sort(list(xs), dimension=dimension, is_stable=stable,
                                          num_keys=len(keys)))

    def fn(*xs):
        extra = [_key(xs[j], order, desc) for j, order, desc in keys]
        out = lax.sort(extra + list(xs), dimension=dimension, is_stable=stable,
                       num_keys=len(extra))
        return tuple(out[len(extra):])
    return fn
