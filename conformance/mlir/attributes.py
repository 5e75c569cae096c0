"""Reading an op's MLIR attributes back into the spec's attributes (issue 29).

The inverse of the emitter's attribute printing: each op spec's ``mlir:`` section says,
per MLIR attribute, a format string over the spec's attributes
(``'{window_strides:i64array}'``, ``'#stablehlo<comparison_direction
{comparison_direction}>'``, ``'#stablehlo.gather<offset_dims = [{offset_dims}], ...>'``).
Here the same format strings are read the other way: the MLIR attribute's text is
matched against the format, each placeholder's text is converted by the spec
attribute's ``kind`` (integer, integer_list, enum, enum_list, boolean, float, string,
string_list, tensor). A dimension-numbers attribute (``#stablehlo.conv<...>``, whose
printed form is not the format's ``raw`` one, and whose empty fields MLIR omits) is
read field by field through the struct's accessor in jaxlib's bindings, named by the
format's ``key = {field}`` pairs.

An MLIR attribute the text omits takes the spec's default (``mlir: defaults:``, an
expression over the op's inputs and the other attributes: the dialect's defaults,
strides 1, padding 0, DEFAULT precision, the compare type from the element type).

Nothing here knows an op: the op knowledge is the spec's ``mlir:`` section. The reader
(conformance/mlir/reader.py) checks every read by printing the signature again and
comparing each attribute with the module's, so a misread is caught, not judged.
"""
from __future__ import annotations

import re
import string
from typing import Any, Mapping

__all__ = ["ReadError", "TextAttribute", "spec_attributes", "attribute_map"]


class ReadError(ValueError):
    """Something of a module the suite cannot read into a signature; one line."""


#: the dimension-numbers attributes of jaxlib's stablehlo bindings, by the mnemonic
#: their format strings start with (``#stablehlo.conv<...>``)
_STRUCTS = {"conv": "ConvDimensionNumbers", "gather": "GatherDimensionNumbers",
            "scatter": "ScatterDimensionNumbers", "dot": "DotDimensionNumbers",
            "channel_handle": "ChannelHandle"}

#: format spec -> the regular expression its placeholder matches in the MLIR text
_PLACEHOLDER = {
    "": r"(.*?)",
    "i64array": r"array<i64(?::\s*(.*?))?>",
    "precision": r"\[(.*?)\]",
    "i64tensor": r"(dense<.*?>\s*:\s*tensor<[^>]*>)",
    "string": r'"(.*)"',
    "symbols": r"\[(.*?)\]",
    "channel_type": r"(\d+)",
}
_CHANNEL_TYPES = {0: "CHANNEL_TYPE_INVALID", 1: "DEVICE_TO_DEVICE", 2: "DEVICE_TO_HOST",
                  3: "HOST_TO_DEVICE"}


class TextAttribute:
    """An attribute the bindings cannot hand to Python (jaxlib's nanobind casters stop
    the process on a complex ``DenseElementsAttr`` reached through ``NamedAttribute.attr``
    and raise on ``attributes[name]``): its text, as the op prints it. Two compare
    equal when their texts do (MLIR prints an attribute one way)."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(self.text)


def attribute_map(operation) -> dict[str, Any]:
    """An MLIR operation's attributes by name (``ir.Attribute`` values, or
    :class:`TextAttribute` where the bindings cannot cast one)."""
    attrs = operation.attributes
    out: dict[str, Any] = {}
    for name in list(attrs):            # names only: never NamedAttribute.attr
        try:
            out[name] = attrs[name]
        except TypeError:
            out[name] = TextAttribute(_printed_attribute(operation, name))
    return out


def _printed_attribute(operation, name: str) -> str:
    """The text of attribute ``name`` in the op's generic form (``name = TEXT`` up to
    the next top-level comma or the end of the attribute dictionary)."""
    asm = operation.get_asm(enable_debug_info=False, print_generic_op_form=True)
    head = asm.split("\n", 1)[0]
    m = re.search(r"[{ ,]" + re.escape(name) + r" = ", head)
    if not m:
        raise ReadError(f"{operation.name}: attribute {name} is not in its text")
    depth, quoted, i = 0, False, m.end()
    for j in range(m.end(), len(head)):
        ch = head[j]
        if quoted:
            quoted = ch != '"' or head[j - 1] == "\\"
        elif ch == '"':
            quoted = True
        elif ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            if depth == 0:
                return head[i:j].strip()
            depth -= 1
        elif ch == "," and depth == 0:
            return head[i:j].strip()
    return head[i:].strip()


def _items(text: str) -> list[str]:
    """Top-level comma-separated items of a list's text (brackets nest)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[<(":
            depth += 1
        elif ch in "]>)":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _convert(text: str, kind: str, fmt_spec: str, where: str) -> Any:
    """One placeholder's text as the spec attribute's Python value."""
    text = text.strip()
    try:
        if fmt_spec == "unit":
            return True
        if fmt_spec == "precision":
            return [re.fullmatch(r"#stablehlo<precision\s+(\w+)>", i).group(1)
                    for i in _items(text)]
        if fmt_spec == "symbols":
            return [i.lstrip("@").strip('"') for i in _items(text)]
        if fmt_spec == "channel_type":
            return _CHANNEL_TYPES[int(text)]
        if fmt_spec == "i64tensor":
            from conformance.core.dense import parse_dense
            return parse_dense(text).astype(int).tolist()
        if fmt_spec == "string":
            return text.encode().decode("unicode_escape") if "\\" in text else text
        if kind == "integer":
            return int(text.split(":")[0])
        if kind == "integer_list":
            text = text.strip("[]")
            return [int(i) for i in _items(text)]
        if kind == "float":         # the shortest text of the attribute's own type
            value, _, ftype = text.partition(":")
            if ftype.strip() in ("f16", "bf16", "f32"):
                import ml_dtypes
                import numpy as np
                dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16,
                         "f32": np.float32}[ftype.strip()]
                return float(str(np.asarray(float(value), dtype)[()]))
            return float(value)
        if kind == "boolean":
            if text not in ("true", "false"):
                raise ValueError(text)
            return text == "true"
        if kind == "enum_list":
            return [i for i in _items(text.strip("[]"))]
        if kind == "string_list":
            return [i.lstrip("@").strip('"') for i in _items(text.strip("[]"))]
        if kind == "tensor":
            from conformance.core.dense import dense_text, parse_dense
            return dense_text(parse_dense(text))
        return text                                     # enum, string, dictionaries
    except Exception as e:  # noqa: BLE001 - any misfit is one line naming the attribute
        raise ReadError(f"{where}: cannot read {text[:80]!r} as {kind}: {e}") from None


def _pattern(fmt: str) -> tuple[re.Pattern, list[tuple[str, str]]]:
    """The regular expression a format string prints, and its (field, format spec)s."""
    parts, fields = [], []
    for literal, field, spec, _ in string.Formatter().parse(fmt):
        parts.append(r"\s*".join(re.escape(w) for w in re.split(r"\s+", literal)))
        if field is not None:
            parts.append(_PLACEHOLDER.get(spec, r"(.*?)"))
            fields.append((field, spec))
    return re.compile("".join(parts) + r"\Z", re.S), fields


_STRUCT_RE = re.compile(r"#stablehlo\.(\w+)<")
_KEY_RE = re.compile(r"(\w+)\s*=\s*\[?\{(\w+)(?::(\w+))?\}")


def _struct_fields(mnemonic: str, fmt: str, attr, kinds: Mapping[str, str], where: str
                   ) -> dict[str, Any]:
    """A dimension-numbers attribute, by the format's ``key = {field}`` pairs: each key
    read from the printed text (``offset_dims = [1]``; MLIR leaves empty lists out), or,
    where the binding class has an accessor of that name, through it (the printed form
    may be a compact one, ``#stablehlo.conv<[b, 0, f]x...>``, or leave a default out)."""
    text = str(attr)
    if not text.startswith(f"#stablehlo.{mnemonic}<"):
        raise ReadError(f"{where}: {text[:80]} is not a #stablehlo.{mnemonic}")
    struct = None
    out: dict[str, Any] = {}
    for key, field, spec in _KEY_RE.findall(fmt):
        kind = kinds.get(field, "string")
        if struct is None:
            from jaxlib.mlir.dialects import stablehlo
            cls = getattr(stablehlo, _STRUCTS.get(mnemonic, ""), None)
            struct = cls(attr) if cls is not None else False
        m = re.search(rf"\b{key}\s*=\s*(\[[^\]]*\]|[^,>]+)", text)
        if struct and hasattr(struct, key) and spec != "channel_type":
            value = getattr(struct, key)
            out[field] = ([int(v) for v in value] if kind == "integer_list" else
                          int(value) if kind == "integer" else value)
        elif m:
            out[field] = _convert(m.group(1), kind, spec, where)
        elif kind == "integer_list":
            out[field] = []                     # an empty list, left out of the text
        else:
            raise ReadError(f"{where}: {text[:80]} gives no {key}")
    return out


def _read_one(fmt: str, attr, kinds: Mapping[str, str], where: str) -> dict[str, Any]:
    m = _STRUCT_RE.match(fmt)
    if m:
        return _struct_fields(m.group(1), fmt, attr, kinds, where)
    pattern, fields = _pattern(fmt)
    text = str(attr)
    found = pattern.match(text)
    if not found:
        raise ReadError(f"{where}: {text[:100]!r} does not have the form {fmt!r}")
    typed = re.search(r"\}\s*:\s*(\w+)\Z", fmt)     # '{epsilon} : f32': the value's type
    suffix = f" : {typed.group(1)}" if typed else ""
    return {f: _convert((found.group(i + 1) or "") + suffix, kinds.get(f, "string"), spec,
                        where)
            for i, (f, spec) in enumerate(fields)}


def spec_attributes(spec, syntax, mlir_attrs: Mapping[str, Any],
                    inputs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The spec attributes of one MLIR operation.

    ``mlir_attrs``: the operation's attributes by name; ``inputs``: the spec's input
    names bound to their types (for the defaults' expressions); ``where``: how error
    lines name the operation. Raises :class:`ReadError`.
    """
    kinds = {a.name: a.kind for a in spec.attributes}
    defaults = dict(syntax.defaults)
    out: dict[str, Any] = {}
    missing: list[tuple[str, frozenset]] = []
    for (mlir_name, fmt), names in zip(syntax.attributes, syntax.fields):
        if mlir_name in mlir_attrs:
            out.update(_read_one(fmt, mlir_attrs[mlir_name], kinds, f"{where}: {mlir_name}"))
        elif fmt.endswith(":unit}"):
            out.update({n: False for n in names})       # a unit attribute left out: false
        else:
            missing.append((mlir_name, names))
    for mlir_name, names in missing:
        for n in sorted(names):
            if n in out:
                continue
            if n not in defaults:
                raise ReadError(f"{where}: attribute {mlir_name} is missing and the spec "
                                f"gives no default for {n}")
            from conformance.specs.expressions import ExpressionError, evaluate
            try:
                out[n] = evaluate(defaults[n], {**inputs, **out})
            except ExpressionError as e:
                raise ReadError(f"{where}: the default of {n}: {e}") from None
            if kinds.get(n) == "tensor":
                out[n] = _convert(out[n], "tensor", "", where)
    # an optional attribute the module leaves out is left out of the signature too (as
    # the generators leave it out: dot_general's empty algorithm)
    optional = {a.name for a in spec.attributes if getattr(a, "optional", False)}
    return {n: v for n, v in out.items() if not (v is None and n in optional)}
