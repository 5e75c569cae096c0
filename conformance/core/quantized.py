"""Quantized element types (``!quant.uniform``), per tensor and per axis.

The current spec ("Types": QuantizedTensorElementType) gives a quantized element type a
storage type (an integer type), an optional storage range, an expressed type (a float
type), an optional quantization dimension, and one ``scale:zero_point`` pair per tensor
or per slice of that dimension. A value is held as its storage integer; what it means
(``(i - zero_point) * scale``) lives in the type, so a case's arrays are storage
integers and its signature carries the parameters.

Two kinds of object live here:

- :class:`QuantizedElementType`: one concrete type, parameters included; its ``name``
  is its MLIR spelling (the spelling of the spec's own examples), so that
  ``tensor<2x!quant.uniform<i8:f32, 0.5:3>>`` round-trips through :func:`parse`;
- *families* (``quant_si8_f32``, ``quant_axis_ui8_f32``): a storage type, an expressed
  type and per-tensor or per-axis, parameters left open. They are what type variables
  bind (the matrix columns); a spec builds the concrete type from a family and drawn
  parameters with the expression function ``quantized(...)``.

The spelling is read here with a small grammar of our own (as ``types.tensor_type``
reads ``tensor<...>``): the MLIR bindings jaxlib ships register no quant dialect
(jaxlib 0.10.2: "type created with unregistered dialect"), so they cannot read it.
"""
from __future__ import annotations

import dataclasses
import re
from functools import cached_property

import numpy as np

from .types import ELEMENT_TYPES, ElementType, UnknownElementType

# Storage spellings: the quant dialect writes i8 (signed) and u8 (unsigned); the
# project's own names (si8, ui8) are accepted on input.
_STORAGE_MLIR = {"si4": "i4", "si8": "i8", "si16": "i16", "si32": "i32",
                 "ui4": "u4", "ui8": "u8", "ui16": "u16", "ui32": "u32"}
_STORAGE_IN = {**{v: k for k, v in _STORAGE_MLIR.items()}, **{k: k for k in _STORAGE_MLIR}}
_EXPRESSED = ("f16", "bf16", "f32", "f64")


def _scale_text(x: float) -> str:
    """An f64 scale as an MLIR float literal that reads back exactly (shortest repr,
    with the ``.`` MLIR's float literal needs)."""
    s = repr(float(x))
    mant, e, exp = s.partition("e")
    if "." not in mant:
        mant += ".0"
    return mant + (f"e{exp}" if e else "")


@dataclasses.dataclass(frozen=True)
class QuantizedElementType(ElementType):
    """One ``!quant.uniform`` type: storage values in ``[storage_min, storage_max]``
    standing for ``(i - zero_point) * scale`` of the expressed type."""

    storage: ElementType = dataclasses.field(default=None, compare=False)
    expressed: ElementType = dataclasses.field(default=None, compare=False)
    scales: tuple[float, ...] = dataclasses.field(default=(), compare=False)
    zero_points: tuple[int, ...] = dataclasses.field(default=(), compare=False)
    quantization_dimension: "int | None" = dataclasses.field(default=None, compare=False)
    storage_min: int = dataclasses.field(default=0, compare=False)
    storage_max: int = dataclasses.field(default=0, compare=False)

    @property
    def is_per_axis(self) -> bool:
        return self.quantization_dimension is not None

    @property
    def int_min(self) -> int:          # what literals and value sources range over
        return self.storage_min

    @property
    def int_max(self) -> int:
        return self.storage_max

    @cached_property
    def family(self) -> ElementType:
        """The family this type belongs to (``quant_si8_f32``, ``quant_axis_si8_f32``)."""
        return family_of(self)

    def violations(self, shape: "tuple[int, ...] | None" = None) -> list[str]:
        """The rules of "Types" this type breaks: C1-C11 of quantized element types,
        and with a tensor's ``shape`` C12-C13 of quantized tensor types. A scale is a
        constant of the expressed type (C4): it is read rounded to it."""
        out = []
        st = self.storage
        if not st.int_min <= self.storage_min < self.storage_max <= st.int_max:
            out.append("C3")
        s = self.scales_as_expressed().astype(np.float64)
        if not np.all(s > 0):
            out.append("C5")
        if not np.all(np.isfinite(s)):
            out.append("C6")
        if not all(self.storage_min <= z <= self.storage_max for z in self.zero_points):
            out.append("C7")
        if len(self.scales) != len(self.zero_points):
            out.append("C9")
        if self.quantization_dimension is None and len(self.scales) != 1:
            out.append("C10")
        qd = self.quantization_dimension
        if qd is not None and qd < 0:
            out.append("C11")
        if shape is not None and qd is not None and qd >= 0:
            if qd >= len(shape):
                out.append("C12")
            elif shape[qd] != len(self.scales):
                out.append("C13")
        return out

    def scales_as_expressed(self) -> np.ndarray:
        """``constant(scale, expressed_type)`` of the spec's compute_scales: the scales
        rounded to the expressed type."""
        with np.errstate(all="ignore"):
            return np.array(self.scales, np.float64).astype(self.expressed.dtype)


def family_name(storage: str, expressed: str, per_axis: bool) -> str:
    return f"quant_{'axis_' if per_axis else ''}{storage}_{expressed}"


def quantized_type(storage, expressed, scales, zero_points=None, quantization_dimension=None,
                   storage_min=None, storage_max=None) -> QuantizedElementType:
    """A concrete quantized element type; parameters as the spec's grammar has them
    (zero points default to 0, the storage range to the storage type's). The type's
    own constraints (C1-C13 of "Types") are the spec's business, not checked here:
    an invalid program may carry a broken type."""
    st = ELEMENT_TYPES[_STORAGE_IN.get(str(storage), str(storage))]
    et = ELEMENT_TYPES[str(expressed)]
    scales = tuple(float(s) for s in (scales if isinstance(scales, (list, tuple)) else [scales]))
    if zero_points is None:
        zero_points = [0] * len(scales)
    zps = tuple(int(z) for z in (zero_points if isinstance(zero_points, (list, tuple))
                                 else [zero_points]))
    lo = st.int_min if storage_min is None else int(storage_min)
    hi = st.int_max if storage_max is None else int(storage_max)
    qd = None if quantization_dimension is None else int(quantization_dimension)
    stor = _STORAGE_MLIR.get(st.name, st.name)
    if lo != st.int_min or hi != st.int_max:
        stor += f"<{lo}:{hi}>"
    head = f"{stor}:{et.mlir}" + (f":{qd}" if qd is not None else "")
    params = [f"{_scale_text(s)}:{z}" for s, z in zip(scales, zps)]
    body = ("{" + ",".join(params) + "}") if qd is not None else ",".join(params)
    name = f"!quant.uniform<{head}, {body}>"
    return QuantizedElementType(name, "quantized", st.bits, st.dtype, name, st, et, scales,
                                zps, qd, lo, hi)


_QUANT_RE = re.compile(
    r"^!quant\.uniform<(?P<storage>[a-z]+\d+)(?:<(?P<lo>-?\d+):(?P<hi>-?\d+)>)?"
    r":(?P<expressed>\w+)(?::(?P<dim>-?\d+))?,(?P<params>.+)>$")
_PARAM_RE = re.compile(r"^(?P<scale>[-+]?[0-9.]+(?:[eE][-+]?\d+)?|[-+]?inf|nan)"
                       r"(?::(?P<zp>-?\d+))?$")


def parse(text: str) -> QuantizedElementType:
    """Read ``!quant.uniform<i8:f32, 0.5:3>`` (or per axis:
    ``!quant.uniform<i8<-127:127>:f32:1, {0.1:-30,0.5:-20}>``)."""
    s = str(text).replace(" ", "")
    m = _QUANT_RE.match(s)
    if not m or m.group("storage") not in _STORAGE_IN or m.group("expressed") not in _EXPRESSED:
        raise UnknownElementType(f"not a quantized element type: {text!r} (expected e.g. "
                                 "!quant.uniform<i8:f32, 0.5:3>)")
    params = m.group("params")
    per_axis = params.startswith("{") and params.endswith("}")
    scales, zps = [], []
    for p in (params[1:-1] if per_axis else params).split(","):
        pm = _PARAM_RE.match(p)
        if not pm:
            raise UnknownElementType(f"{text!r}: cannot read quantization parameter {p!r}")
        scales.append(float(pm.group("scale")))
        zps.append(int(pm.group("zp") or 0))
    dim = m.group("dim")
    if per_axis != (dim is not None):
        raise UnknownElementType(f"{text!r}: a quantization dimension goes with a {{...}} "
                                 "list of parameters, and only with one")
    return quantized_type(m.group("storage"), m.group("expressed"), scales, zps,
                          None if dim is None else int(dim),
                          None if m.group("lo") is None else int(m.group("lo")),
                          None if m.group("hi") is None else int(m.group("hi")))


# ---------------------------------------------------------------------------
# Families: the quantized columns of the type matrix
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QuantizedFamily(ElementType):
    """Storage type x expressed type x per-tensor/per-axis, parameters open: what a
    type variable binds. Its values are storage integers (its ``dtype``)."""

    storage: ElementType = dataclasses.field(default=None, compare=False)
    expressed: ElementType = dataclasses.field(default=None, compare=False)
    per_axis: bool = dataclasses.field(default=False, compare=False)

    @property
    def family(self) -> ElementType:
        return self

    @property
    def int_min(self) -> int:
        return self.storage.int_min

    @property
    def int_max(self) -> int:
        return self.storage.int_max


def _family(storage: str, expressed: str, per_axis: bool = False) -> QuantizedFamily:
    st, et = ELEMENT_TYPES[storage], ELEMENT_TYPES[expressed]
    name = family_name(storage, expressed, per_axis)
    return QuantizedFamily(name, "quantized", st.bits, st.dtype, name, st, et, per_axis)


#: The families op bindings draw: si8 and ui8 storage in f32 (per tensor and per axis),
#: si4 and si16 in f32, si8 in bf16 and f16. Every storage difference ``i - zero_point``
#: is exact in its expressed type (si16 in f32 only: f16 holds integers to 2048, bf16 to
#: 256). si32 storage and f64 expressed types parse and print but are not drawn.
FAMILY_LIST: tuple[QuantizedFamily, ...] = (
    _family("si8", "f32"), _family("ui8", "f32"), _family("si4", "f32"),
    _family("si16", "f32"), _family("si8", "bf16"), _family("si8", "f16"),
    _family("si8", "f32", True), _family("ui8", "f32", True))
FAMILIES: dict[str, QuantizedFamily] = {f.name: f for f in FAMILY_LIST}


def _extra_family(storage: str, expressed: str, per_axis: bool) -> QuantizedFamily:
    """A family outside FAMILY_LIST (a parsed type's, say si32 storage): made on use."""
    name = family_name(storage, expressed, per_axis)
    if name not in FAMILIES:
        FAMILIES[name] = _family(storage, expressed, per_axis)
    return FAMILIES[name]


def family_of(t: ElementType) -> "QuantizedFamily | None":
    """The family of a quantized type or family; None for any other element type."""
    if isinstance(t, QuantizedFamily):
        return t
    if isinstance(t, QuantizedElementType):
        return _extra_family(t.storage.name, t.expressed.name, t.is_per_axis)
    return None
