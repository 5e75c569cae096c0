"""The ``mlir:`` section of an op spec, read and checked: the op's MLIR name and, per MLIR
attribute, a format string over the spec's attributes (see schema.yaml).

Pure format-string parsing, no MLIR: the spec loader checks every spec with it, and
the emitter (conformance/mlir/emitter.py) prints attributes with the :class:`OpSyntax` it
returns.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass

__all__ = ["MlirSyntaxError", "OpSyntax", "FORMAT_SPECS", "fields", "syntax_of"]

#: the format specs a placeholder may carry (``{dims:i64array}``)
FORMAT_SPECS = ("", "i64array", "precision", "i64tensor", "unit", "string", "channel_type",
                "symbols")


class MlirSyntaxError(ValueError):
    """An ``mlir:`` section that is missing or inconsistent with the spec; one line naming
    the file and the key."""


@dataclass(frozen=True)
class OpSyntax:
    """The ``mlir:`` section of one op's spec, checked."""

    op: str                                     # spec name: add
    name: str                                   # MLIR name: stablehlo.add
    attributes: tuple[tuple[str, str], ...]     # (MLIR attribute name, format string)
    fields: tuple[frozenset[str], ...]          # spec attributes each format names
    # spec attributes the op's name names (chlo.broadcast_{operation}: XLA's binary ops
    # with broadcast_dimensions are one spec, one CHLO op per operation)
    name_fields: frozenset[str] = frozenset()
    # the spec input (the last) whose values the op's regions read from the enclosing
    # function instead of taking them as operands (if's and case's ``captured``)
    captured: str | None = None
    # the canonical program is a decomposition, not one op (an XLA form with no StableHLO
    # op: rng_bernoulli): a builder of conformance/core/decompositions.py
    decomposition: str | None = None
    # a format string over the attributes naming the result dimension that is dynamic
    # (set_dimension_size: '{dimension}'), printed `?` bounded by its static size
    dynamic_result: str | None = None
    # the op's one region printed not inline but as ``func.func private @NAME`` of the
    # module, named by the symbol attribute ``NAME = @NAME`` (func.call's callee,
    # stablehlo.composite's decomposition)
    function: str | None = None
    # what an attribute is where the module's text omits its MLIR attribute (the
    # dialect's default): spec attribute name -> an expression over the op's inputs and
    # its other attributes (read by conformance/mlir/attributes.py)
    defaults: tuple[tuple[str, str], ...] = ()
    # how the op's regions are held: "expression" (specs/regions.py: rank-0 element-wise
    # bodies) or "program" (conformance/core/region_program.py: if, case, while, ...)
    region_form: str = "expression"
    # (when, says): the signatures, by an expression over what a constraint sees, that the
    # dialect jaxlib ships cannot hold (a newer spec's form), and the measured reason
    jaxlib_lacks: tuple[str, str] | None = None
    # (start, done): the op is one of a pair that only makes sense together (async_start,
    # async_done): its signature is printed as ``start`` (the region, the operands, one
    # future result) awaited at once by ``done`` (the signature's results)
    async_pair: tuple[str, str] | None = None


def fields(fmt: str, where: str) -> frozenset[str]:
    """The spec attribute names the placeholders of ``fmt`` name."""
    names = set()
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError as e:
        raise MlirSyntaxError(f"{where}: bad format string {fmt!r}: {e}") from None
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not re.fullmatch(r"[a-z][a-z0-9_]*", field) or spec not in FORMAT_SPECS \
                or conversion:
            raise MlirSyntaxError(
                f"{where}: placeholder {{{field}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} in {fmt!r} must be a spec "
                "attribute name, optionally with a format spec "
                f"({', '.join(x for x in FORMAT_SPECS if x)})")
        names.add(field)
    return frozenset(names)


def syntax_of(spec) -> OpSyntax:
    """The checked ``mlir:`` section of one OpSpec: every placeholder names an attribute
    of the spec and every spec attribute is printed by some MLIR attribute."""
    op = spec.name
    data = spec.data.get("mlir")
    if not data:
        raise MlirSyntaxError(f"{spec.path}: mlir: the spec has no mlir section (needed to "
                              f"print {op} as StableHLO)")
    spec_attrs = {a.name for a in spec.attributes}
    attrs, names_per_attr = [], []
    for mlir_name, fmt in (data.get("attributes") or {}).items():
        where = f"{spec.path}: mlir.attributes.{mlir_name}"
        names = fields(fmt, where)
        unknown = names - spec_attrs
        if unknown:
            raise MlirSyntaxError(f"{where}: {fmt!r} names {sorted(unknown)}, which are not "
                                  f"attributes of {op} (it has {sorted(spec_attrs)})")
        attrs.append((mlir_name, fmt))
        names_per_attr.append(names)
    name_fields = fields(data["op"], f"{spec.path}: mlir.op")
    if name_fields - spec_attrs:
        raise MlirSyntaxError(f"{spec.path}: mlir.op: {data['op']!r} names "
                              f"{sorted(name_fields - spec_attrs)}, which are not attributes "
                              f"of {op}")
    unused = spec_attrs - set().union(name_fields, *names_per_attr)
    if unused and not data.get("decomposition"):    # (a decomposition's ops print them)
        raise MlirSyntaxError(f"{spec.path}: mlir.attributes: no MLIR attribute prints the "
                              f"spec attribute(s) {sorted(unused)}")
    dynamic = data.get("dynamic_result")
    if dynamic is not None and not fields(dynamic, f"{spec.path}: mlir.dynamic_result") \
            <= spec_attrs:
        raise MlirSyntaxError(f"{spec.path}: mlir.dynamic_result: {dynamic!r} must name "
                              f"an attribute of {op}")
    captured = data.get("captured")
    if captured is not None and (not spec.inputs or spec.inputs[-1].name != captured):
        raise MlirSyntaxError(f"{spec.path}: mlir.captured: {captured!r} must name the "
                              f"op's last input")
    function = data.get("function")
    if function is not None and [r.name for r in spec.regions] != [function]:
        raise MlirSyntaxError(f"{spec.path}: mlir.function: {function!r} must name the "
                              f"op's one region")
    defaults = data.get("defaults") or {}
    if set(defaults) - spec_attrs:
        raise MlirSyntaxError(f"{spec.path}: mlir.defaults: {sorted(set(defaults) - spec_attrs)}"
                              f" are not attributes of {op}")
    region_form = data.get("region_form", "expression")
    if region_form not in ("expression", "program"):
        raise MlirSyntaxError(f"{spec.path}: mlir.region_form: {region_form!r} must be "
                              "expression or program")
    lacks = data.get("jaxlib_lacks")
    pair = data.get("async_pair")
    if pair is not None and data["op"] not in pair:
        raise MlirSyntaxError(f"{spec.path}: mlir.async_pair: {pair!r} must hold mlir.op "
                              f"{data['op']!r}")
    return OpSyntax(op, data["op"], tuple(attrs), tuple(names_per_attr), name_fields,
                    captured, data.get("decomposition"), data.get("dynamic_result"),
                    function, tuple((k, str(v)) for k, v in defaults.items()), region_form,
                    (lacks["when"], " ".join(lacks["says"].split())) if lacks else None,
                    tuple(pair) if pair else None)
