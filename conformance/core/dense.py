"""Tensor constants in StableHLO/MLIR text: ``dense<[[1.0, 0x7FC00001], [-0.0, 2.5]]> : tensor<2x2xf32>``.

The spec's ``TensorConstant`` ("Constants": ``'dense' '<' DenseLiteral '>' ':' TensorType``)
is how a tensor value is written *inside* a program (``constant``'s ``value``). This
module prints a numpy array as such a literal and reads one back, exactly:

- floats that are finite print in decimal, as the shortest text that reads back to the
  same float64 (every narrower float is exactly a float64, so MLIR's parser -- decimal
  to double, then to the element type -- gets the same bits back), with MLIR's required
  ``.`` before an exponent (``1.0e-45``); ``-0.0`` keeps its sign;
- NaN (any payload, signalling or quiet, either sign) and infinities print as the
  spec's hexadecimal float literal, the element's bit pattern with num_bits / 4 digits
  (``0x7FC00001``, bf16 ``0xFFC1``, f8E4M3FN ``0x7F``);
- complex elements are ``(re, im)`` pairs of such floats; integers print in decimal
  (si4 ``-8``, ui64 ``18446744073709551615``); i1 as ``true``/``false``;
- a tensor with no elements is ``dense<>`` (what MLIR accepts for every zero-sized
  shape: ``dense<[]>`` only fits ``tensor<0xT>``).

Checked against jaxlib's MLIR: every bit pattern of f8E4M3FN, f8E5M2, bf16 and f16 and
the special values of every other type survive printing, parsing into a program, and
running it (tests/test_tuples.py). The per-element form is used rather than MLIR's raw
``dense<"0x...">`` storage form because it is readable in reports and does not depend
on how a given MLIR version stores i1 and 4-bit elements.

:func:`parse_dense` also reads what the spec's examples write (decimal floats, splats
such as ``dense<1.0> : tensor<2x2xf32>``, hex integers).
"""
from __future__ import annotations

import re

import numpy as np

from conformance.core.literals import LiteralError, bit_patterns, from_literal, nest
from conformance.core.types import ElementType, TensorType, element_type, tensor_type

__all__ = ["dense_text", "parse_dense", "dense_type", "DenseError"]


class DenseError(LiteralError):
    """Text that is not a tensor constant this module can read."""


def mlir_float(r: str) -> str:
    """An MLIR float literal: digits with a '.' (before any exponent): ``-0`` is
    ``-0.0``, ``1e-45`` is ``1.0e-45``."""
    mantissa, e, exponent = r.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exponent


def _float_text(x: float, bits: int, et: ElementType) -> str:
    if not np.isfinite(x):
        return f"0x{bits:0{max(1, (et.bits + 3) // 4)}X}"
    if et.bits < 64:
        # The shortest text for the element type, if it reads back as MLIR reads it
        # (decimal -> double -> element type, round to nearest even); else the double.
        short = str(np.array(x).astype(et.dtype)[()])
        try:
            back = np.array(float(short)).astype(et.dtype)
        except ValueError:
            back = None
        if back is not None and back.view(et.bits_dtype) == \
                np.array(x).astype(et.dtype).view(et.bits_dtype):
            return mlir_float(short)
    return mlir_float(repr(float(x)))


def _element_texts(array: np.ndarray, et: ElementType) -> list[str]:
    flat = np.ascontiguousarray(array).reshape(-1)
    if et.is_boolean:
        return ["true" if v else "false" for v in flat]
    if et.is_integer:
        wide = flat.astype(np.uint64 if et.is_unsigned else np.int64)
        return [str(int(v)) for v in wide]
    comp = et.component
    bits = bit_patterns(flat).reshape(flat.size, -1)      # complex: [re, im] per element
    if et.is_complex:
        with np.errstate(invalid="ignore", over="ignore"):
            parts = np.stack([flat.real, flat.imag], axis=-1).astype(np.float64)
        return [f"({_float_text(p[0], int(b[0]), comp)}, {_float_text(p[1], int(b[1]), comp)})"
                for p, b in zip(parts, bits)]
    with np.errstate(invalid="ignore", over="ignore"):
        wide = flat.astype(np.float64)
    return [_float_text(v, int(b[0]), et) for v, b in zip(wide, bits)]


def _nested_text(value) -> str:
    """Nested lists of element texts (literals.nest) as MLIR's ``[a, [b, c]]``."""
    if isinstance(value, list):
        return "[" + ", ".join(_nested_text(v) for v in value) + "]"
    return value


def dense_text(array: np.ndarray) -> str:
    """``dense<...> : tensor<...>`` for ``array``, exact (see the module docstring)."""
    array = np.asarray(array)
    et = element_type(array.dtype)
    ttype = TensorType(array.shape, et)
    if array.size == 0:
        return f"dense<> : {ttype.mlir()}"
    return f"dense<{_nested_text(nest(_element_texts(array, et), array.shape))}> : {ttype.mlir()}"


_TOKEN = re.compile(r"\s*(?:(?P<punct>[\[\](),])|(?P<atom>[^\s\[\](),]+))")


def _split(text: str) -> tuple[str, TensorType]:
    s = text.strip()
    if not s.startswith("dense<"):
        raise DenseError(f"not a tensor constant (expected dense<...> : tensor<...>): "
                         f"{s[:60]!r}")
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                rest = s[i + 1:].strip()
                if not rest.startswith(":"):
                    raise DenseError(f"a tensor constant needs its type after ' : ': {s[:60]!r}")
                try:
                    return s[len("dense<"):i].strip(), tensor_type(rest[1:].strip())
                except ValueError as e:
                    raise DenseError(str(e)) from None
    raise DenseError(f"unbalanced '<' in {s[:60]!r}")


def dense_type(text: str) -> TensorType:
    """The tensor type written after ``:`` in a tensor constant."""
    return _split(text)[1]


def _atom(tok: str):
    low = tok.lower()
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"[-+]?0x[0-9a-f]+", low):
        return tok                               # bit pattern: from_literal reads it
    if re.fullmatch(r"[-+]?[0-9]+", low):
        return int(low)
    return tok                                   # a decimal float


def _parse_body(body: str):
    tokens = [(m.group("punct"), m.group("atom")) for m in _TOKEN.finditer(body)]
    if "".join(p or a for p, a in tokens) != re.sub(r"\s+", "", body):
        raise DenseError(f"cannot read the tensor literal {body[:60]!r}")
    pos = 0

    def expect(p):
        nonlocal pos
        if pos >= len(tokens) or tokens[pos][0] != p:
            raise DenseError(f"expected {p!r} in the tensor literal {body[:60]!r}")
        pos += 1

    def value():
        nonlocal pos
        if pos >= len(tokens):
            raise DenseError(f"the tensor literal {body[:60]!r} ends early")
        punct, atom = tokens[pos]
        if atom is not None:
            pos += 1
            return _atom(atom)
        if punct == "(":                          # a complex element (re, im)
            pos += 1
            re_ = value()
            expect(",")
            im = value()
            expect(")")
            return [re_, im]
        if punct == "[":
            pos += 1
            items = []
            while pos < len(tokens) and tokens[pos][0] != "]":
                items.append(value())
                if pos < len(tokens) and tokens[pos][0] == ",":
                    pos += 1
            expect("]")
            return items
        raise DenseError(f"unexpected {punct!r} in the tensor literal {body[:60]!r}")

    out = value()
    if pos != len(tokens):
        raise DenseError(f"text after the tensor literal in {body[:60]!r}")
    return out


def _is_element(v, et: ElementType) -> bool:
    if et.is_complex:
        return isinstance(v, list) and len(v) == 2 and not any(isinstance(p, list) for p in v)
    return not isinstance(v, list)


def parse_dense(text: str) -> np.ndarray:
    """The array a tensor constant denotes, bit-exact for what :func:`dense_text` prints."""
    body, ttype = _split(text)
    et = ttype.element_type
    if not body:
        if ttype.size != 0:
            raise DenseError(f"dense<> has no elements, but {ttype.mlir()} has {ttype.size}")
        return np.zeros(ttype.shape, et.dtype)
    if body.startswith('"'):
        return _hex_blob(body, ttype, text)
    value = _parse_body(body)
    if ttype.shape and _is_element(value, et):                  # a splat
        try:
            one = from_literal(value, TensorType((), et))
        except LiteralError as e:
            raise DenseError(str(e)) from None
        return np.array(np.broadcast_to(one, ttype.shape), order="C")
    if not ttype.shape and isinstance(value, list) and not _is_element(value, et):
        raise DenseError(f"a list where {ttype.mlir()} needs one element: {body[:60]!r}")
    if ttype.size == 0:
        return np.zeros(ttype.shape, et.dtype)                  # dense<[]>, dense<[[]]>
    try:
        return from_literal(value, ttype)
    except LiteralError as e:
        raise DenseError(f"{e} (in {text.strip()[:60]!r})") from None


def _hex_blob(body: str, ttype: TensorType, text: str) -> np.ndarray:
    """MLIR's hexadecimal form of a large constant, ``dense<"0x...">``: the elements'
    bytes, little-endian, in row-major order (one byte per i1 element); one element's
    bytes for a splat."""
    m = re.fullmatch(r'"0x([0-9A-Fa-f]*)"', body)
    if not m:
        raise DenseError(f"cannot read the tensor literal {body[:60]!r}")
    et = ttype.element_type
    dtype = np.dtype(et.dtype)      # (numpy's native order: little-endian where jaxlib runs)
    raw = bytes.fromhex(m.group(1))
    itemsize = 1 if et.is_boolean else dtype.itemsize
    if len(raw) == itemsize and ttype.size != 1:                # a splat
        raw = raw * ttype.size
    if len(raw) != itemsize * ttype.size:
        raise DenseError(f"the hexadecimal constant holds {len(raw)} bytes, {ttype.mlir()} "
                         f"needs {itemsize * ttype.size} (in {text.strip()[:60]!r})")
    if et.is_boolean:
        return (np.frombuffer(raw, np.uint8) != 0).reshape(ttype.shape)
    return np.frombuffer(raw, dtype).reshape(ttype.shape).copy()
