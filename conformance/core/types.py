"""StableHLO element and tensor types, and their numpy / ml_dtypes counterparts.

The spec ("Types" in the StableHLO specification) names element types as
``i1``, ``si8`` ... ``ui64``, ``f8E4M3FN`` ... ``f64``, ``complex<f32>``. Every part
of the suite speaks those names; this module is the one place that maps them to
numpy dtypes, to MLIR spellings and to the type classes the spec's op tables use.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from functools import cached_property

import ml_dtypes
import numpy as np


class UnknownElementType(ValueError):
    """An element type name that the StableHLO spec does not define."""


@dataclasses.dataclass(frozen=True)
class ElementType:
    """One StableHLO element type (spec section "Types")."""

    name: str            # spec spelling: si32, f8E4M3FN, complex<f32>
    kind: str            # boolean | signed | unsigned | float | complex
    bits: int            # storage width in bits (num_bits in the spec)
    dtype: np.dtype = dataclasses.field(compare=False, repr=False)
    mlir: str = dataclasses.field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        # the generated hash of (name, kind, bits), computed once: element types key
        # the draw's and the pools' caches on every batch (a subclass dataclass
        # generates its own)
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.name, self.kind, self.bits))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        # (a str's hash differs between processes: the held one never travels)
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def is_boolean(self) -> bool:
        return self.kind == "boolean"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("signed", "unsigned")

    @property
    def is_signed(self) -> bool:
        return self.kind == "signed"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "unsigned"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_quantized(self) -> bool:
        """A quantized element type or family (below: "Quantized element types")."""
        return self.kind == "quantized"

    @cached_property
    def component(self) -> "ElementType":
        """The real type of a complex type (``real_type`` in the spec); else itself."""
        if self.is_complex:
            return ELEMENT_TYPES[self.name[len("complex<"):-1]]
        return self

    @cached_property
    def int_min(self) -> int:
        if self.is_signed:
            return -(1 << (self.bits - 1))
        return 0

    @cached_property
    def int_max(self) -> int:
        if self.is_boolean:
            return 1
        if self.is_signed:
            return (1 << (self.bits - 1)) - 1
        return (1 << self.bits) - 1

    @cached_property
    def bits_dtype(self) -> np.dtype:
        """Unsigned integer dtype that holds this type's bit pattern (int4 in a uint8)."""
        return np.dtype({1: np.uint8, 4: np.uint8, 6: np.uint8, 8: np.uint8, 16: np.uint16,
                         32: np.uint32, 64: np.uint64, 128: np.uint64}[self.bits])

    # -- traits of a float format, read from the format itself (ml_dtypes) ----------
    # The formats differ in what they can hold: f8E4M3FN has no infinity, the FNUZ
    # formats no -0 and one NaN (the -0 bit pattern), f8E8M0FNU neither zero nor sign,
    # f4E2M1FN and the f6 formats neither infinity nor NaN. Every part of the suite
    # that makes or judges special values asks these, never the type's name.

    def _from_f64(self, v: float) -> float:
        with np.errstate(all="ignore"):
            return float(np.array(v, np.float64).astype(self.dtype).astype(np.float64))

    @cached_property
    def has_inf(self) -> bool:
        return self.is_float and bool(np.isinf(self._from_f64(np.inf)))

    @cached_property
    def has_nan(self) -> bool:
        return self.is_float and bool(np.isnan(self._from_f64(np.nan)))

    @cached_property
    def has_zero(self) -> bool:
        return not self.is_float or self._from_f64(0.0) == 0.0

    @cached_property
    def has_negative_zero(self) -> bool:
        """Whether -0 is a value of its own (not FNUZ, not E8M0)."""
        v = self._from_f64(-0.0)
        return self.is_float and v == 0.0 and bool(np.signbit(v))

    @cached_property
    def has_sign(self) -> bool:
        """Whether the encoding has a sign bit (every float type but f8E8M0FNU)."""
        return not self.is_float or self._from_f64(-1.0) == -1.0

    @cached_property
    def mantissa_bits(self) -> int:
        """Stored (trailing) significand bits of a float type."""
        return int(ml_dtypes.finfo(self.dtype).nmant)

    @cached_property
    def exponent_bits(self) -> int:
        return self.bits - int(self.has_sign) - self.mantissa_bits

    @cached_property
    def sign_bit(self) -> int:
        """The sign bit's mask in the bit pattern (0 for a type without one)."""
        if self.is_float and not self.has_sign:
            return 0
        return 1 << (self.bits - 1)


def _et(name, kind, bits, dtype, mlir=None):
    return ElementType(name, kind, bits, np.dtype(dtype), mlir or name)


# Spec order ("Types"): boolean, integers, floats, complex.
_ALL = [
    _et("i1", "boolean", 1, np.bool_),
    _et("si4", "signed", 4, ml_dtypes.int4, "i4"),
    _et("si8", "signed", 8, np.int8, "i8"),
    _et("si16", "signed", 16, np.int16, "i16"),
    _et("si32", "signed", 32, np.int32, "i32"),
    _et("si64", "signed", 64, np.int64, "i64"),
    _et("ui4", "unsigned", 4, ml_dtypes.uint4),
    _et("ui8", "unsigned", 8, np.uint8),
    _et("ui16", "unsigned", 16, np.uint16),
    _et("ui32", "unsigned", 32, np.uint32),
    _et("ui64", "unsigned", 64, np.uint64),
    _et("f4E2M1FN", "float", 4, ml_dtypes.float4_e2m1fn),
    _et("f6E2M3FN", "float", 6, ml_dtypes.float6_e2m3fn),
    _et("f6E3M2FN", "float", 6, ml_dtypes.float6_e3m2fn),
    _et("f8E3M4", "float", 8, ml_dtypes.float8_e3m4),
    _et("f8E4M3", "float", 8, ml_dtypes.float8_e4m3),
    _et("f8E4M3FN", "float", 8, ml_dtypes.float8_e4m3fn),
    _et("f8E4M3FNUZ", "float", 8, ml_dtypes.float8_e4m3fnuz),
    _et("f8E4M3B11FNUZ", "float", 8, ml_dtypes.float8_e4m3b11fnuz),
    _et("f8E5M2", "float", 8, ml_dtypes.float8_e5m2),
    _et("f8E5M2FNUZ", "float", 8, ml_dtypes.float8_e5m2fnuz),
    _et("f8E8M0FNU", "float", 8, ml_dtypes.float8_e8m0fnu),
    _et("bf16", "float", 16, ml_dtypes.bfloat16),
    _et("f16", "float", 16, np.float16),
    _et("f32", "float", 32, np.float32),
    _et("f64", "float", 64, np.float64),
    _et("complex<f32>", "complex", 64, np.complex64),
    _et("complex<f64>", "complex", 128, np.complex128),
]

#: The float formats the current spec (2026-08) added to the seed's: microscaling
#: (f4E2M1FN, f6E2M3FN, f6E3M2FN, f8E8M0FNU), IEEE-like fp8 (f8E3M4, f8E4M3) and the
#: FNUZ fp8 formats. docs/float-formats.md says what each is.
NEWER_FLOAT_TYPES: tuple[str, ...] = (
    "f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E3M4", "f8E4M3", "f8E4M3FNUZ",
    "f8E4M3B11FNUZ", "f8E5M2FNUZ", "f8E8M0FNU")
#: Every format is drawn by op type bindings (what type classes such as "float" expand
#: to); which of the bindings that name one a run draws is the depth's business
#: (conformance/checking/newer_floats.py: every one at default depth, a rotation at quick).

ELEMENT_TYPES: dict[str, ElementType] = {t.name: t for t in _ALL}
#: Every element type of the spec's grammar, spec order (``conformance list types``).
SPEC_ELEMENT_TYPES: tuple[ElementType, ...] = tuple(_ALL)
#: The element types that op type bindings and type classes draw from, spec order.
ALL_ELEMENT_TYPES: tuple[ElementType, ...] = tuple(_ALL)
#: The seed spec's element types (all but the newer float formats), spec order: what
#: invalid-type mutations draw from (generators/invalid.py), so that drawing the newer
#: formats leaves every op's invalid programs as they were (docs/float-formats.md).
SEED_ELEMENT_TYPES: tuple[ElementType, ...] = tuple(
    t for t in _ALL if t.name not in NEWER_FLOAT_TYPES)

# Aliases accepted on input (MLIR spellings, numpy names). Output is always spec names.
_ALIASES: dict[str, str] = {}
for _t in _ALL:
    _ALIASES[_t.mlir] = _t.name
    _ALIASES[_t.dtype.name] = _t.name
_ALIASES.update({"pred": "i1", "bool": "i1", "c64": "complex<f32>", "c128": "complex<f64>",
                 "complex64": "complex<f32>", "complex128": "complex<f64>",
                 "bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64"})

# Type classes used by the spec's input tables ("tensor of integer type", ...).
TYPE_CLASSES: dict[str, tuple[str, ...]] = {
    "boolean": ("boolean",),
    "integer": ("signed", "unsigned"),
    "signed_integer": ("signed",),
    "unsigned_integer": ("unsigned",),
    "float": ("float",),
    "complex": ("complex",),
    "any": ("boolean", "signed", "unsigned", "float", "complex"),
    # the quantized families (below: QuantizedFamily); not part of "any": the
    # spec says "tensor or quantized tensor" where an op takes both
    "quantized": ("quantized",),
}


_BY_DTYPE: dict[np.dtype, ElementType] = {t.dtype: t for t in _ALL}


def element_type(name: "str | ElementType | np.dtype") -> ElementType:
    """Look up an element type by spec name, MLIR name or numpy dtype."""
    if isinstance(name, ElementType):
        return name
    if isinstance(name, np.dtype):
        found = _BY_DTYPE.get(name)      # the hot path: dtype.name is slow in numpy
        if found is not None:
            return found
    if isinstance(name, np.dtype) or isinstance(name, type):
        name = np.dtype(name).name
    key = str(name).strip()
    if key in ELEMENT_TYPES:
        return ELEMENT_TYPES[key]
    if key in _ALIASES:
        return ELEMENT_TYPES[_ALIASES[key]]
    if key in FAMILIES:
        return FAMILIES[key]
    if key.startswith("!quant."):
        return parse_quantized(key)
    raise UnknownElementType(
        f"unknown element type {key!r}; the spec's element types are: "
        + ", ".join(ELEMENT_TYPES))


def element_types_of(spec: "str | list[str]") -> tuple[ElementType, ...]:
    """Expand a list of type classes and/or type names into element types, spec order."""
    items = (spec,) if isinstance(spec, str) else tuple(spec)
    try:
        return _element_types_of(items)
    except TypeError:           # an unhashable item: expanded without the cache
        return _element_types_of.__wrapped__(items)


@functools.lru_cache(maxsize=4096)
def _element_types_of(items: tuple) -> tuple[ElementType, ...]:
    # (a pure function of the names: a spec's type variables are expanded on every
    # signature drawn, ~40,000 times in a quick plan of every op)
    kinds: set[str] = set()
    names: set[str] = set()
    for item in items:
        if item in TYPE_CLASSES:
            kinds.update(TYPE_CLASSES[item])
        else:
            names.add(element_type(item).name)
    drawn = set(ALL_ELEMENT_TYPES)
    out = tuple(t for t in SPEC_ELEMENT_TYPES
                if (t.kind in kinds and t in drawn) or t.name in names)
    if "quantized" in kinds or any(n.startswith("quant_") for n in names):
        out += tuple(f for f in FAMILY_LIST if "quantized" in kinds or f.name in names)
    return out


def allowed_by(et: ElementType, types) -> bool:
    """Is ``et`` one of ``types`` (a type-table row)? A concrete quantized type is when
    its family is (``quant_si8_f32`` stands for every parameter choice) and the type
    keeps the rules of quantized element types ("Types" C1-C11): a broken type is no
    quantized type."""
    if et in types:
        return True
    if et.is_quantized:
        return family_of(et) in types and not getattr(et, "violations", list)()
    return False


def complex_type(t: ElementType) -> ElementType:
    """``complex_type`` in the spec: f32 -> complex<f32>, f64 -> complex<f64>."""
    try:
        return ELEMENT_TYPES[f"complex<{t.name}>"]
    except KeyError:
        raise UnknownElementType(f"there is no complex type with {t.name} parts") from None


@dataclasses.dataclass(frozen=True)
class TensorType:
    """``tensor<shape x element_type>``: the type of one op input or result."""

    shape: tuple[int, ...]
    element_type: ElementType

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def mlir(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.element_type.mlir}>"

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.element_type.name}>"

    def to_json(self) -> str:
        return str(self)

    def held_as(self) -> "TensorType":
        """The type of the array that holds a value of this type: itself, or for a
        quantized tensor the same shape of its storage type (the parameters are the
        type's, not the values')."""
        storage = getattr(self.element_type, "storage", None)
        return self if storage is None else TensorType(self.shape, storage)

    def leaves(self) -> tuple["TensorType", ...]:
        """The tensors of this value type: a tensor is its own only leaf (see TupleType)."""
        return (self,)


_TENSOR_RE = re.compile(r"^tensor<((?:\d+x)*)(.+)>$")


def tensor_type(text: "str | TensorType") -> TensorType:
    """Parse ``tensor<2x3xf32>`` (spec or MLIR spelling of the element type)."""
    if isinstance(text, TensorType):
        return text
    m = _TENSOR_RE.match(text.replace(" ", ""))
    if not m:
        raise ValueError(f"not a tensor type: {text!r} (expected e.g. tensor<2x3xf32>)")
    dims = tuple(int(d) for d in m.group(1).split("x") if d)
    return TensorType(dims, element_type(m.group(2)))


#: (shape, dtype) -> its TensorType: the verdicts ask the type of every result array of
#: every batch, and a frozen TensorType can be shared (cleared when it grows large)
_TYPE_OF: dict[tuple, TensorType] = {}
TYPE_OF_HELD = 4096


def type_of(array: np.ndarray) -> TensorType:
    key = (array.shape, array.dtype)
    held = _TYPE_OF.get(key)
    if held is None:
        held = TensorType(array.shape, element_type(array.dtype))
        if len(_TYPE_OF) >= TYPE_OF_HELD:
            _TYPE_OF.clear()
        _TYPE_OF[key] = held
    return held


# ---------------------------------------------------------------------------
# Tuple types ("Types": TupleType ::= 'tuple' '<' [ValueType {',' ValueType}] '>')
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TupleType:
    """``tuple<...>``: a heterogeneous list of value types (tensors or tuples, nested).

    A tuple's *values* never travel as a Python object through the suite: a signature
    may declare a tuple-typed input or result, but its case holds the tuple's leaves,
    flattened depth-first (:func:`leaves`), so that runners, comparators, literals and
    reports only ever see tensors. ``len``, indexing and iteration give the elements,
    so that constraint expressions read like the spec (``operand[index]``).
    """

    elements: tuple["TensorType | TupleType", ...]

    def __post_init__(self):
        object.__setattr__(self, "elements", tuple(value_type(e) for e in self.elements))

    def __len__(self) -> int:
        return len(self.elements)

    def __getitem__(self, i):
        return self.elements[i]

    def __iter__(self):
        return iter(self.elements)

    def leaves(self) -> tuple[TensorType, ...]:
        return tuple(leaf for e in self.elements for leaf in e.leaves())

    def mlir(self) -> str:
        return f"tuple<{', '.join(e.mlir() for e in self.elements)}>"

    def __str__(self) -> str:
        return f"tuple<{', '.join(str(e) for e in self.elements)}>"

    def to_json(self) -> str:
        return str(self)


# ---------------------------------------------------------------------------
# Token types ("Types": TokenType ::= 'token')
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TokenType:
    """``token`` (``!stablehlo.token`` in MLIR): an opaque value that orders side effects
    (after_all, infeed, outfeed, send, recv).

    A token carries no data, so it has no leaves: a case holds no array for a token
    input and a backend returns none for a token result (``Signature.input_leaves`` /
    ``result_leaves`` leave them out, as they do an empty tuple). Where a value must
    stand for a token (an oracle function's arguments and results, through
    :func:`unflatten`) it is :data:`TOKEN`. The canonical program makes the tokens its
    op takes inside ``@main`` and returns none (conformance/mlir/emitter.py).
    """

    def leaves(self) -> tuple[TensorType, ...]:
        return ()

    def mlir(self) -> str:
        return "!stablehlo.token"

    def __str__(self) -> str:
        return "token"

    def to_json(self) -> str:
        return "token"


class Token:
    """The value of a token (see :class:`TokenType`): one object, no data."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "TOKEN"


TOKEN = Token()


def is_structured(t) -> bool:
    """A value type that is not one tensor (a tuple or a token): its values travel as
    leaves (:func:`leaves`, :func:`unflatten`)."""
    return isinstance(t, (TupleType, TokenType))


def _split_top_level(body: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [p for p in (p.strip() for p in parts) if p]


def value_type(text: "str | TensorType | TupleType | TokenType"
               ) -> "TensorType | TupleType | TokenType":
    """Parse a value type: ``tensor<2xf32>``, ``tuple<tensor<2xf32>, tuple<>>`` or
    ``token`` (``!stablehlo.token``)."""
    if isinstance(text, (TensorType, TupleType, TokenType)):
        return text
    s = str(text).strip()
    if s in ("token", "!stablehlo.token"):
        return TokenType()
    if s.startswith("tuple<") and s.endswith(">"):
        return TupleType(tuple(value_type(p) for p in _split_top_level(s[len("tuple<"):-1])))
    return tensor_type(s)


def leaves(types) -> tuple[TensorType, ...]:
    """The tensors of a list of value types, tuples flattened depth-first (tokens have
    none)."""
    return tuple(leaf for t in types for leaf in value_type(t).leaves())


def unflatten(values, types) -> list:
    """Group flat leaf values by ``types``: a tuple-typed value becomes a Python tuple
    of its elements' values (nested), a tensor-typed one stays as it is."""
    values = list(values)
    pos = 0

    def take(t):
        nonlocal pos
        if isinstance(t, TupleType):
            return tuple(take(e) for e in t.elements)
        if isinstance(t, TokenType):
            return TOKEN
        if pos >= len(values):
            raise ValueError(f"{len(values)} values for the tensor leaves of "
                             f"{', '.join(map(str, types))}")
        pos += 1
        return values[pos - 1]

    out = [take(value_type(t)) for t in types]
    if pos != len(values):
        raise ValueError(f"{len(values)} values for {pos} tensor leaves of "
                         f"{', '.join(map(str, types))}")
    return out


def flatten(values) -> list:
    """Inverse of :func:`unflatten`: Python tuples (tuple values) spliced depth-first,
    tokens (:data:`TOKEN`, no data) left out."""
    out = []
    for v in values:
        if isinstance(v, tuple):
            out.extend(flatten(v))
        elif isinstance(v, Token):
            continue
        else:
            out.append(v)
    return out

# ---------------------------------------------------------------------------
# Quantized element types ("Types": QuantizedTensorElementType)
# ---------------------------------------------------------------------------
# Quantized element types (``!quant.uniform``), per tensor and per axis.
#
# The current spec ("Types": QuantizedTensorElementType) gives a quantized element type a
# storage type (an integer type), an optional storage range, an expressed type (a float
# type), an optional quantization dimension, and one ``scale:zero_point`` pair per tensor
# or per slice of that dimension. A value is held as its storage integer; what it means
# (``(i - zero_point) * scale``) lives in the type, so a case's arrays are storage
# integers and its signature carries the parameters.
#
# Two kinds of object live here:
#
# - :class:`QuantizedElementType`: one concrete type, parameters included; its ``name``
#   is its MLIR spelling (the spelling of the spec's own examples), so that
#   ``tensor<2x!quant.uniform<i8:f32, 0.5:3>>`` round-trips through :func:`parse_quantized`;
# - *families* (``quant_si8_f32``, ``quant_axis_ui8_f32``): a storage type, an expressed
#   type and per-tensor or per-axis, parameters left open. They are what type variables
#   bind (the matrix columns); a spec builds the concrete type from a family and drawn
#   parameters with the expression function ``quantized(...)``.
#
# The spelling is read here with a small grammar of our own (as ``types.tensor_type``
# reads ``tensor<...>``): the MLIR bindings jaxlib ships register no quant dialect
# (jaxlib 0.10.2: "type created with unregistered dialect"), so they cannot read it.



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


def parse_quantized(text: str) -> QuantizedElementType:
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
