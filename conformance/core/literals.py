"""Tensor values <-> JSON/YAML: readable literals and exact bit patterns.

Spec examples and reports use readable nested lists (``[1.0, "nan", "-0.0"]``,
complex elements as ``[re, im]`` pairs, floats also as ``"0x7FC00000"`` bit
patterns like the spec writes them). Results files and reproducers store the
exact bits as hex so that NaN payloads, signed zeros and bf16/fp8/int4 values
survive the round trip.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from conformance.core.types import ElementType, TensorType, element_type, tensor_type

_SPECIAL_FLOATS = {"nan": np.nan, "+nan": np.nan, "-nan": -np.nan, "inf": np.inf,
                   "+inf": np.inf, "-inf": -np.inf}


class LiteralError(ValueError):
    """A literal that does not fit its declared tensor type."""


def bit_patterns(array: np.ndarray) -> np.ndarray:
    """The bit pattern of every element as uint64 (complex: shape + [2], re then im)."""
    et = element_type(array.dtype)
    a = np.asarray(array)
    if et.is_complex:
        parts = np.stack([a.real, a.imag], axis=-1).astype(et.component.dtype)
        return bit_patterns(parts)
    if et.is_boolean:
        return a.astype(np.uint64)
    if et.is_integer:
        return (a.astype(np.int64).astype(np.uint64) if et.is_signed else a.astype(np.uint64)) \
            & np.uint64((1 << et.bits) - 1 if et.bits < 64 else 0xFFFFFFFFFFFFFFFF)
    return a.view(et.bits_dtype).astype(np.uint64)


def from_bit_patterns(bits: np.ndarray, et: ElementType) -> np.ndarray:
    """Inverse of :func:`bit_patterns`."""
    bits = np.asarray(bits, dtype=np.uint64)
    if et.is_complex:
        parts = from_bit_patterns(bits, et.component)
        out = np.empty(parts.shape[:-1], et.dtype)
        out.real = parts[..., 0]
        out.imag = parts[..., 1]
        return out
    if et.is_boolean:
        return bits.astype(bool)
    if et.is_integer:
        if et.is_signed and et.bits < 64:
            sign = np.uint64(1 << (et.bits - 1))
            signed = (bits ^ sign).astype(np.int64) - np.int64(1 << (et.bits - 1))
            return signed.astype(et.dtype)
        if et.is_signed:
            return bits.view(np.int64).astype(et.dtype)
        return bits.astype(et.dtype)
    return bits.astype(et.bits_dtype).view(et.dtype)


def _hex_width(et: ElementType) -> int:
    return max(1, (et.component.bits + 3) // 4)


def to_hex(array: np.ndarray) -> str:
    """All elements' bits as one space-separated hex string, row-major."""
    et = element_type(array.dtype)
    w = _hex_width(et)
    return " ".join(f"{int(b):0{w}x}" for b in bit_patterns(array).reshape(-1))


def from_hex(text: str, ttype: "TensorType | str") -> np.ndarray:
    ttype = tensor_type(ttype)
    et = ttype.element_type
    words = [int(w, 16) for w in text.split()] if text.strip() else []
    shape = ttype.shape + ((2,) if et.is_complex else ())
    bits = np.array(words, dtype=np.uint64).reshape(shape)
    return from_bit_patterns(bits, et)


def encode(array: np.ndarray) -> dict[str, Any]:
    """A JSON-able record of an array: its type, exact bits, and a readable literal."""
    array = np.asarray(array)
    return {"type": str(TensorType(array.shape, element_type(array.dtype))),
            "bits": to_hex(array), "literal": to_literal(array)}


def decode(record: dict[str, Any]) -> np.ndarray:
    return from_hex(record["bits"], record["type"])


# ---------------------------------------------------------------------------
# Readable literals
# ---------------------------------------------------------------------------

def _scalar_literal(x: Any, et: ElementType) -> Any:
    if et.is_boolean:
        return bool(x)
    if et.is_integer:
        return int(x)
    f = float(x)
    if np.isnan(f):
        return "-nan" if np.signbit(f) else "nan"
    if np.isinf(f):
        return "-inf" if f < 0 else "inf"
    if f == 0.0 and np.signbit(f):
        return "-0.0"
    return f


def to_literal(array: np.ndarray) -> Any:
    """Nested lists that :func:`from_literal` reads back (exactly, for finite values)."""
    array = np.asarray(array)
    et = element_type(array.dtype)
    if et.is_complex:
        comp = et.component
        flat = [[_scalar_literal(v.real, comp), _scalar_literal(v.imag, comp)]
                for v in array.reshape(-1)]
    elif et.is_float:
        with np.errstate(invalid="ignore"):
            wide = array.astype(np.float64)
        flat = [_scalar_literal(v, et) for v in wide.reshape(-1)]
    elif et.is_integer:
        flat = [int(v) for v in array.astype(np.uint64 if et.name == "ui64" else np.int64)
                .reshape(-1)]
    else:
        flat = [bool(v) for v in array.reshape(-1)]
    return nest(flat, array.shape)


def nest(flat: list, shape: tuple[int, ...]) -> Any:
    """Row-major ``flat`` items as nested lists of ``shape`` (the item itself for ())."""
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = int(np.prod(shape[1:], dtype=np.int64))
    return [nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _flatten(value: Any, shape: tuple[int, ...], leaf_len: int | None, where: str) -> list:
    if not shape:
        if leaf_len is not None:
            if not (isinstance(value, (list, tuple)) and len(value) == leaf_len):
                raise LiteralError(f"{where}: expected a [re, im] pair, got {value!r}")
            return [list(value)]
        if isinstance(value, (list, tuple)):
            raise LiteralError(f"{where}: expected a scalar, got a list")
        return [value]
    if not isinstance(value, (list, tuple)) or len(value) != shape[0]:
        got = f"{len(value)} items" if isinstance(value, (list, tuple)) else repr(value)
        raise LiteralError(f"{where}: expected {shape[0]} items along a dimension, got {got}")
    out: list = []
    for i, v in enumerate(value):
        out.extend(_flatten(v, shape[1:], leaf_len, f"{where}[{i}]"))
    return out


def _parse_float(v: Any, et: ElementType) -> tuple[bool, Any]:
    """(is_bits, value): hex strings are bit patterns, other strings special values."""
    if isinstance(v, bool):
        raise LiteralError(f"boolean {v!r} where a {et.name} value was expected")
    if isinstance(v, str):
        s = v.strip().lower()
        if s.startswith("0x"):
            return True, int(s, 16)
        if s in _SPECIAL_FLOATS:
            return False, _SPECIAL_FLOATS[s]
        try:
            return False, float(s)
        except ValueError:
            raise LiteralError(f"not a {et.name} literal: {v!r}") from None
    return False, float(v)


def _float_array(items: list, et: ElementType) -> np.ndarray:
    from conformance.core.numerics import round_to  # local: numerics imports this module
    out = np.empty(len(items), et.dtype)
    for i, v in enumerate(items):
        is_bits, x = _parse_float(v, et)
        if is_bits:
            out[i] = from_bit_patterns(np.array([x], np.uint64), et)[0]
        else:
            out[i] = round_to(np.array([x], np.float64), et)[0]
    return out


def from_literal(value: Any, ttype: "TensorType | str") -> np.ndarray:
    """Build an array of ``ttype`` from a readable literal (spec example notation)."""
    ttype = tensor_type(ttype)
    et = ttype.element_type
    where = str(ttype)
    if et.is_complex:
        items = _flatten(value, ttype.shape, 2, where)
        re = _float_array([p[0] for p in items], et.component)
        im = _float_array([p[1] for p in items], et.component)
        out = np.empty(len(items), et.dtype)
        out.real, out.imag = re, im
    else:
        items = _flatten(value, ttype.shape, None, where)
        if et.is_float:
            out = _float_array(items, et)
        elif et.is_boolean:
            if not all(isinstance(v, bool) or v in (0, 1) for v in items):
                raise LiteralError(f"{where}: i1 values must be true/false")
            out = np.array([bool(v) for v in items], bool)
        else:
            ints = []
            for v in items:
                if isinstance(v, str) and v.lower().startswith("0x"):
                    v = from_bit_patterns(np.array([int(v, 16)], np.uint64), et)[0]
                if isinstance(v, bool) or int(v) != v:
                    raise LiteralError(f"{where}: {v!r} is not an integer")
                v = int(v)
                if not et.int_min <= v <= et.int_max:
                    raise LiteralError(f"{where}: {v} is out of range for {et.name}")
                ints.append(v)
            out = np.array(ints, dtype=object).astype(
                np.uint64 if et.name == "ui64" else np.int64).astype(et.dtype)
    return out.reshape(ttype.shape)


def from_value_literal(value: Any, vtype: Any) -> list[np.ndarray]:
    """The tensor leaves of a literal of a value type: a tensor type as
    :func:`from_literal`; a tuple type (``tuple<tensor<2xf32>, tuple<tensor<si32>>>``,
    conformance.core.types.TupleType) takes the list of its elements' literals
    (``[[1.0, 2.0], [3]]``) and gives their leaves flattened depth-first."""
    from conformance.core.types import TokenType, TupleType, value_type
    vtype = value_type(vtype)
    if isinstance(vtype, TokenType):            # no data: no leaves; its literal is null
        if value is not None:
            raise LiteralError(f"a token carries no data; its value is null, got {value!r}")
        return []
    if not isinstance(vtype, TupleType):
        return [from_literal(value, vtype)]
    if not isinstance(value, (list, tuple)) or len(value) != len(vtype):
        got = f"{len(value)} items" if isinstance(value, (list, tuple)) else repr(value)
        raise LiteralError(f"{vtype}: expected a list of {len(vtype)} element values, got {got}")
    return [leaf for v, t in zip(value, vtype.elements) for leaf in from_value_literal(v, t)]
