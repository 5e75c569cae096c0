"""A small, safe expression language for the checkable parts of the op specs.

Constraint checks, output type rules and implementation-defined conditions are
written in the YAML as Python-like expressions that read like the spec's own
notation: ``same_type(lhs, rhs, result)``, ``rank(min) == 0 or shape(min) ==
shape(operand)``. They are parsed with :mod:`ast`, checked against a whitelist of
node kinds and functions, and compiled once into closures over the tree's nodes;
nothing is ever passed to ``eval``. Element types are plain strings in this language (``'si32'``), tensor
values are :class:`~conformance.core.types.TensorType` (in type-level checks) or numpy
arrays (in element-wise conditions, where ``and``/``or``/``not`` work per element).
"""
from __future__ import annotations

import ast
import functools
import math
import operator
from typing import Any, Callable, Mapping

import ml_dtypes

import numpy as np

from conformance.core.types import (ElementType, TensorType, TokenType, TupleType,
                                    complex_type as _complex_type, element_type as _element_type)

from conformance.core import promotion as _promotion

from . import regions


class ExpressionError(ValueError):
    """An expression that does not parse, names something unknown, or fails to evaluate."""


# ---------------------------------------------------------------------------
# Functions available to expressions (named as in the spec where it has a name).
# ---------------------------------------------------------------------------

def _as_type(x: Any) -> ElementType:
    if isinstance(x, TensorType):
        return x.element_type
    if isinstance(x, np.ndarray):
        return _element_type(x.dtype)
    return _element_type(x)


def _tensor_shape(x: Any) -> list[int]:
    if isinstance(x, (TensorType, np.ndarray)):
        return list(x.shape)
    raise ExpressionError(f"shape() of something that is not a tensor: {x!r}")


def _same(key: Callable[[Any], Any]) -> Callable[..., bool]:
    def check(*xs: Any) -> bool:
        # Variadic operands arrive as lists: same_type(inputs) or same_type(a, inputs).
        flat = [y for x in xs for y in (x if isinstance(x, (list, tuple)) else [x])]
        return all(key(x) == key(flat[0]) for x in flat[1:])
    return check


def _type_key(x: Any):
    if isinstance(x, TensorType):
        return (x.shape, x.element_type.name)
    if isinstance(x, TupleType):
        return ("tuple", tuple(_type_key(e) for e in x.elements))
    if isinstance(x, TokenType):
        return ("token",)
    if isinstance(x, np.ndarray):
        return (x.shape, _element_type(x.dtype).name)
    raise ExpressionError(f"same_type() of something that is not a tensor: {x!r}")


def _size(x: Any) -> int:
    """The spec's ``size``: the number of elements of a tensor, of a tuple (its
    elements, not its leaves) or of a list."""
    if isinstance(x, (TupleType, list, tuple)):
        return len(x)
    return int(np.prod(_tensor_shape(x), dtype=np.int64))


def _value_type(x: Any):
    """The spec's ``type``: a value type as itself, an array as its tensor type."""
    if isinstance(x, (TensorType, TupleType, TokenType)):
        return x
    if isinstance(x, np.ndarray):
        return TensorType(x.shape, _element_type(x.dtype))
    raise ExpressionError(f"type() of something that is not a value: {x!r}")


def _is_nan(x):
    x = np.asarray(x)
    if x.dtype.kind in "biu":
        return np.zeros(x.shape, bool)
    return np.isnan(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))


def _is_finite(x):
    x = np.asarray(x)
    if x.dtype.kind in "biu":
        return np.ones(x.shape, bool)
    return np.isfinite(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))


def _as_number(x):
    """Exact values for arithmetic in conditions.

    Integers up to 32 bits widen to int64 (sums and products stay exact); 64-bit
    integers become Python ints in an object array, so that ``value(a) + value(b)
    > max_value(a)`` detects overflow exactly. Floats widen to float64.
    """
    x = np.asarray(x)
    et = _element_type(x.dtype)
    if et.is_boolean:
        return x
    if et.is_integer:
        return x.astype(object) if et.bits == 64 else x.astype(np.int64)
    if et.is_complex:
        return x.astype(np.complex128)
    return x.astype(np.float64)


def _fits(x, t) -> np.ndarray:
    """Per element: does ``convert`` to the element type of ``t`` keep the value exactly?

    For float-to-integer, the truncated value must be in range (the spec truncates).
    Complex sources use their real part, except complex-to-complex (both parts).
    """
    from conformance.core.numerics import round_to
    x = np.asarray(x)
    src, dst = _element_type(x.dtype), _as_type(t)
    if src.is_boolean or dst.is_boolean:
        return np.ones(x.shape, bool)
    if src.is_complex and dst.is_complex:
        return _fits(x.real.astype(src.component.dtype), dst.component) & \
            _fits(x.imag.astype(src.component.dtype), dst.component)
    if src.is_complex:
        return _fits(x.real.astype(src.component.dtype), dst)
    dst_real = dst.component
    if src.is_integer:
        if dst.is_integer:
            v = _as_number(x)
            return np.asarray((v >= dst.int_min) & (v <= dst.int_max), dtype=bool)
        f = x.astype(np.float64)
        big = float(2 ** 64 if src.is_unsigned else 2 ** 63)
        back_dtype = np.uint64 if src.is_unsigned else np.int64
        with np.errstate(invalid="ignore"):
            exact_f64 = (np.abs(f) < big) & (np.where(np.abs(f) < big, f, 0).astype(back_dtype)
                                             == x.astype(back_dtype))
        return exact_f64 & (round_to(f, dst_real).astype(np.float64) == f)
    f = x.astype(np.float64)
    if dst.is_integer:
        with np.errstate(invalid="ignore"):
            t_ = np.trunc(f)
            return (t_ >= float(dst.int_min)) & (t_ < float(dst.int_max) + 1.0)
    with np.errstate(invalid="ignore"):
        r = round_to(f, dst_real).astype(np.float64)
    return (r == f) | (np.isnan(f) & np.isnan(r))


def _power_overflows(a, b) -> np.ndarray:
    """Per element: is the exact integer a**b (b >= 0) outside a's type?"""
    et = _element_type(np.asarray(a).dtype)

    def one(x, y):
        x, y = int(x), int(y)
        if y < 0 or x in (0, 1, -1):
            return False
        if y >= et.bits:
            return True
        return not (et.int_min <= x ** y <= et.int_max)

    a_obj = np.asarray(a).astype(object)
    b_obj = np.asarray(b).astype(object)
    return np.frompyfunc(one, 2, 1)(a_obj, b_obj).astype(bool)


def _window_reaches(shape, window_dimensions, window_strides, base_dilations,
                    window_dilations, padding, at_least: int = 1) -> bool:
    """Does some window of a windowed op (reduce_window; convolution's spatial
    dimensions) hold at least ``at_least`` elements of the operand, rather than only
    padding and the holes of the base dilation? Per dimension (the dimensions are
    independent, so the fullest window is the product of each dimension's fullest): the
    operand's element ``i`` sits at ``lo + i·base_dilation`` of the padded extent
    (negative padding cuts), window ``o`` covers ``o·stride + j·window_dilation`` for
    ``j`` below its size. A dimension without windows or elements holds none."""
    from conformance.core.dense import parse_dense
    pad = np.asarray(parse_dense(padding) if isinstance(padding, str) else padding,
                     np.int64).reshape(-1, 2)
    most = 1
    for s, w, st, b, wd, (lo, hi) in zip(shape, window_dimensions, window_strides,
                                         base_dilations, window_dilations, pad.tolist()):
        if s == 0 or w == 0:
            return False
        extent = lo + (s - 1) * b + 1 + hi
        span = (w - 1) * wd + 1
        if extent < span:
            return False
        elements = {lo + i * b for i in range(s)} & set(range(extent))
        windows = (extent - span) // st + 1
        most *= max(sum(o * st + j * wd in elements for j in range(w))
                    for o in range(windows))
    return most >= at_least


def _exact_ids(x: Any) -> int:
    """How many ids 0, 1, ... ``constant(id, E)`` holds exactly (an iota's longest exact
    dimension): past it the spec does not say what ``output = id`` is (it rounds). In a
    type without zero (f8E8M0FNU) 0 is the constant's NaN and 1, 2 are exact: 3."""
    et = _as_type(x).component
    if et.is_integer:
        return et.int_max + 1
    info = ml_dtypes.finfo(et.dtype)
    return min(2 ** (info.nmant + 1), math.floor(float(info.max))) + 1


FUNCTIONS: dict[str, Callable[..., Any]] = {
    # types and shapes
    "shape": _tensor_shape,
    "rank": lambda x: len(_tensor_shape(x)),
    "dim": lambda x, i: _tensor_shape(x)[i],
    "size": lambda x: _size(x),
    "element_type": lambda x: _as_type(x).name,
    "num_bits": lambda t: _as_type(t).bits,
    "is_boolean": lambda t: _as_type(t).is_boolean,
    "is_integer": lambda t: _as_type(t).is_integer,
    "is_signed_integer": lambda t: _as_type(t).is_signed,
    "is_unsigned_integer": lambda t: _as_type(t).is_unsigned,
    "is_float": lambda t: _as_type(t).is_float,
    "is_complex": lambda t: _as_type(t).is_complex,
    # what a float format holds (f4E2M1FN: no NaN, no infinity; FNUZ: no -0)
    "has_nan": lambda t: _as_type(t).component.has_nan,
    "has_inf": lambda t: _as_type(t).component.has_inf,
    "has_zero": lambda t: _as_type(t).component.has_zero,      # f8E8M0FNU has none
    "real_type": lambda t: _as_type(t).component.name,
    "complex_type": lambda t: _complex_type(_as_type(t)).name,
    # A float type's finite range and precision (boundaries of value generation).
    "exact_ids": _exact_ids,
    "finite_max": lambda t: float(ml_dtypes.finfo(_as_type(t).dtype).max),
    "smallest_normal": lambda t: float(ml_dtypes.finfo(_as_type(t).dtype).smallest_normal),
    "smallest_subnormal": lambda t: float(
        ml_dtypes.finfo(_as_type(t).dtype).smallest_subnormal),
    "epsilon": lambda t: float(ml_dtypes.finfo(_as_type(t).dtype).eps),
    "ln": lambda x: float(np.log(x)),
    "atanh": lambda x: float(np.arctanh(x)),
    "erfc_inverse": lambda x: _erfc_inverse(x),
    "min_value": lambda t: _as_type(t).int_min,
    "max_value": lambda t: _as_type(t).int_max,
    "same_type": _same(_type_key),
    # value types (tuple, get_tuple_element): build them, take one's type
    "tensor": lambda shape, et: TensorType(tuple(shape), _element_type(et)),
    "tuple": lambda types: TupleType(tuple(types)),
    "type": lambda x: _value_type(x),
    "is_tuple": lambda x: isinstance(x, TupleType),
    # the token type ("Types": TokenType; after_all, infeed, ...), and whether a value
    # type is one
    "token": lambda: TokenType(),
    "is_token": lambda x: isinstance(x, TokenType),
    "is_tensor": lambda x: isinstance(x, TensorType),
    # custom_call's registered targets (specs/custom_calls.py)
    "custom_call_targets": lambda et: _custom_calls().names_for(str(et)),
    "custom_call_covers": lambda et: _custom_calls().covers(str(et)),
    "custom_call_unregistered": lambda name, x: _custom_calls().unregistered_mask(name, x),
    "custom_call_io": lambda name, et, shape: _custom_calls().io_types(name, str(et), shape),
    "custom_call_accepts": lambda name, ins, outs: _custom_calls().accepts(name, ins, outs),
    "custom_call_side_effects": lambda name: _custom_calls().side_effect_choices(name),
    "custom_call_side_effect_ok": lambda name, s: _custom_calls().side_effect_ok(name, s),
    "custom_call_api_versions": lambda name: _custom_calls().api_version_choices(name),
    "custom_call_backend_config": lambda name: _custom_calls().backend_config_of(name),
    "same_shape": _same(lambda x: tuple(_tensor_shape(x))),
    # windowed ops: does some window touch the operand (coverage: live:)
    "window_reaches": _window_reaches,
    "same_element_type": _same(lambda x: _as_type(x).name),
    # collections
    "all": all, "any": any, "len": len, "min": min, "max": max, "range": range,
    "list": list,
    "sum": lambda xs: sum(xs),
    "sorted": lambda xs: sorted(xs),
    "set": lambda xs: set(xs),
    "zip": lambda *xs: list(zip(*xs)),
    "enumerate": lambda xs: list(enumerate(xs)),
    "prod": lambda xs: int(np.prod(list(xs), dtype=np.int64)),
    "unique": lambda xs: len(set(xs)) == len(list(xs)),
    # element-wise conditions over values
    "is_nan": _is_nan,
    "is_finite": _is_finite,
    "is_inf": lambda x: ~_is_finite(x) & ~_is_nan(x),
    "value": _as_number,
    "real": lambda x: np.real(np.asarray(x)).astype(np.float64),
    "imag": lambda x: np.imag(np.asarray(x)).astype(np.float64),
    "abs": lambda x: np.abs(_as_number(x)),
    "is_integral": lambda x: (np.floor(_as_number(x)) == _as_number(x)),
    "is_odd_integral": lambda x: (np.floor(_as_number(x)) == _as_number(x))
                                 & (np.fmod(_as_number(x), 2) != 0),
    "all_of": lambda x: bool(np.all(x)),
    "fits": _fits,
    "power_overflows": _power_overflows,
    "any_of": lambda x: bool(np.any(x)),
    # regions (specs/regions.py): build a region's text, read its types
    "region": lambda types, body: regions.make(types, body),
    "region_arg_types": lambda r: [t.name for t in regions.parse(r).arg_types],
    "region_result_types": lambda r: [t.name for t in regions.parse(r).result_types],
    "join": lambda sep, xs: str(sep).join(str(x) for x in xs),
    # the spec's `combine` (gather C13, scatter C4) and an oracle's named conditions
    "combine": lambda rest, placed, dims: _combine(rest, placed, dims),
    "condition": lambda name, *args: _condition(name, *args),
    "alternative": lambda name, *args: _alternative(name, *args),
    "saturate": lambda x, t: _saturate(x, t),
    # a reduction's computation type (conformance/core/promotion.py): the newer spec's
    # is_promotable, the value-preserving widenings the generators draw, and the values
    # converted to the body's types (to_destination_type) for the rules that judge them
    "is_promotable": lambda x, y: _promotion.is_promotable(_as_type(x), _as_type(y)),
    "widenings": lambda t: list(_promotion.widenings(_as_type(t).name)),
    "converted": lambda xs, types: [_promotion.to_destination_type(x, t)
                                    for x, t in zip(xs, types)],
    "where": lambda c, a, b: np.where(c, a, b),
    # quantized element types (conformance/core/types.py ("Quantized element types"); spec "Types" and
    # "Quantization computations"): a family name or a concrete type; storage_type and
    # the rest of a type that is not quantized is an error (the rule reading it breaks)
    "is_quantized": lambda x: _as_type(x).is_quantized,
    "is_per_axis_quantized": lambda x: _quant(x, "per_axis"),
    "is_per_tensor_quantized": lambda x: _as_type(x).is_quantized and not _quant(x, "per_axis"),
    "storage_type": lambda x: _quant(x, "storage").name,
    "expressed_type": lambda x: _quant(x, "expressed").name,
    "quantization_dimension": lambda x: _quant(x, "quantization_dimension"),
    "scales": lambda x: list(_quant(x, "scales")),
    "zero_points": lambda x: list(_quant(x, "zero_points")),
    "storage_min": lambda x: _quant(x, "storage_min"),
    "storage_max": lambda x: _quant(x, "storage_max"),
    "quantized": lambda family, scales, zero_points, dim=None: _quantized(family, scales,
                                                                          zero_points, dim),
    # significant bits of a float type (or of a quantized type's expressed type)
    "precision": lambda t: _precision(_as_type(t)),
    "region_calls": lambda r: _region_calls(r),
    # whether a region text parses and type-checks (a spec draws only bodies that do)
    "is_region": lambda r: _is_region(r),
    # region programs (conformance/core/region_program.py: if, case, while): the value
    # types of a body's block arguments, of the values it captures, of its results
    "body_block_types": lambda r: _body(r, "block_types"),
    "body_capture_types": lambda r: _body(r, "capture_types"),
    "body_result_types": lambda r: _body(r, "result_types"),
    # the names of a body's ops in order (async_start: one op, of a given list)
    "body_op_names": lambda r: _body(r, "op_names"),
    # does a whole string match a regular expression (composite's namespaced name)?
    "matches": lambda pattern, text: __import__("re").fullmatch(str(pattern), str(text))
    is not None,
    # draw('name', ...): a function a generator module registered (@draw('name')), to
    # build what a spec cannot write as an expression (a region program from a seed)
    "draw": lambda name, *args: _draw(name, *args),
}


def _custom_calls():
    from . import custom_calls
    return custom_calls


def _body(text, part: str):
    """A part of a region program's types; None for a text that is not one (so that a
    constraint on it is broken, not an error)."""
    from conformance.core import region_program
    try:
        return list(getattr(region_program.parse(str(text)), part))
    except region_program.RegionProgramError:
        return None


#: functions that ``draw('name', ...)`` calls, registered by generator modules
DRAWS: dict[str, Callable[..., Any]] = {}


def draw(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a function as ``draw('name', ...)`` of the expression language."""
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in DRAWS:
            raise RuntimeError(f"draw {name!r} registered twice")
        DRAWS[name] = fn
        return fn
    return deco


def _draw(name, *args):
    if name not in DRAWS:
        raise ExpressionError(f"unknown draw {name!r}; registered: {', '.join(sorted(DRAWS))} "
                              "(generators/<family>.py registers them)")
    return DRAWS[name](*args)


def _is_region(text) -> bool:
    try:
        regions.parse(str(text))
    except regions.RegionError:
        return False
    return True


def _region_calls(text):
    """Per result of a region: ``['arg', [i]]`` for a bare argument, ``[op, [i, j, ...]]``
    for one op called on arguments (``add(arg0, arg2)``), ``['', []]`` for anything else
    (which update computations are order-independent, for scatter)."""
    out = []
    for node in regions.parse(text).results:
        if isinstance(node, regions.Arg):
            out.append(["arg", [node.index]])
        elif all(isinstance(o, regions.Arg) for o in node.operands):
            out.append([node.op, [o.index for o in node.operands]])
        else:
            out.append(["", []])
    return out


def _combine(rest, placed, dims):
    """The spec's ``combine``: a list of ``len(rest) + len(placed)`` sizes with
    ``placed[k]`` at axis ``dims[k]`` and ``rest`` at the other axes, in order. None
    where that is not defined (``dims`` not as long as ``placed``, repeated, or out of
    range), so that a rule written with it is judged only where it is defined."""
    rest, placed, dims = list(rest), list(placed), list(dims)
    n = len(rest) + len(placed)
    if len(dims) != len(placed) or len(set(dims)) != len(dims) \
            or any(not 0 <= d < n for d in dims):
        return None
    out, others = [None] * n, iter(rest)
    for d, size in zip(dims, placed):
        out[d] = size
    return [next(others) if x is None else x for x in out]


# Conditions that implementation-defined rules name in their ``when:`` expressions as
# ``condition('name', ...)``: tests that need the op's own index arithmetic, kept next to
# the oracle that does it (the oracle family modules register them with
# ``@condition('name')``; conformance.oracles loads an op's family before it evaluates
# the op's rules). They see what ``when:`` sees (inputs with the leading batch axis,
# attributes) and return a mask of the batched result's shape.
CONDITIONS: dict[str, Callable[..., Any]] = {}


def condition(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a function as ``condition('name', ...)`` of the expression language."""
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in CONDITIONS:
            raise RuntimeError(f"condition {name!r} registered twice")
        CONDITIONS[name] = fn
        return fn
    return deco


def _condition(name, *args):
    """``condition('name', args...)``: a condition registered with
    ``@condition('name')`` (by an oracle module), for implementation-defined rules whose
    test is the op's own index arithmetic (which gather windows leave the operand)."""
    fn = CONDITIONS.get(name)
    if fn is None:
        raise ExpressionError(f"unknown condition {name!r}; registered: "
                              f"{sorted(CONDITIONS)}")
    return fn(*args)

# Alternatives that implementation-defined rules allow (``allowed:`` in the specs), named
# as ``alternative('name', ...)``: results an implementation may give instead of the
# oracle's conventional one that need the op's own arithmetic (an inexact conversion
# rounded the other way, a gather window at another in-range start). Registered by the
# oracle family modules with ``@alternative('name')``; they see what ``when:`` sees and
# return one array of the batched result's shape, or a list of them.
ALTERNATIVES: dict[str, Callable[..., Any]] = {}


def alternative(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a function as ``alternative('name', ...)`` of the expression language."""
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in ALTERNATIVES:
            raise RuntimeError(f"alternative {name!r} registered twice")
        ALTERNATIVES[name] = fn
        return fn
    return deco


def _alternative(name, *args):
    fn = ALTERNATIVES.get(name)
    if fn is None:
        raise ExpressionError(f"unknown alternative {name!r}; registered: "
                              f"{sorted(ALTERNATIVES)}")
    return fn(*args)


def _quant(x: Any, what: str):
    """One part of a quantized type (a family has storage, expressed, per_axis only)."""
    t = _as_type(x)
    if not t.is_quantized:
        raise ExpressionError(f"{t.name} is not a quantized type (no {what})")
    if what == "per_axis":
        return bool(getattr(t, "per_axis", getattr(t, "is_per_axis", False)))
    if not hasattr(t, what):
        raise ExpressionError(f"{t.name} is a quantized family, without {what}")
    return getattr(t, what)


def _quantized(family, scales, zero_points, dim):
    """The concrete type of a family with these parameters (a per-tensor family ignores
    ``dim``; a scalar scale or zero point is one parameter)."""
    from conformance.core.types import quantized_type
    f = _as_type(family)
    if not f.is_quantized:
        raise ExpressionError(f"quantized({f.name}, ...): not a quantized family")
    per_axis = _quant(f, "per_axis")
    return quantized_type(f.storage.name, f.expressed.name, scales, zero_points,
                          dim if per_axis else None,
                          getattr(f, "storage_min", None), getattr(f, "storage_max", None))


def _precision(t: ElementType) -> int:
    if t.is_quantized:
        t = t.expressed
    return int(ml_dtypes.finfo(t.dtype).nmant) + 1


def _erfc_inverse(x: float) -> float:
    """The x with erfc(x) = ``x`` (where erf rounds to one: a value-generation boundary)."""
    from scipy.special import erfcinv
    return float(erfcinv(x))


def _saturate(x, t) -> np.ndarray:
    """The exact integer values of ``x`` clamped to the range of ``t``'s integer element
    type, as that type (the spec's "saturation to 2^(n-1) - 1 (or -2^(n-1))")."""
    x = np.asarray(x)
    dst = _as_type(t)
    src = _element_type(x.dtype)
    if src.is_unsigned:
        w = x.astype(np.uint64)
        out = np.minimum(w, np.uint64(dst.int_max)) if dst.int_max < 2 ** 64 - 1 else w
        return np.asarray(out).astype(dst.dtype)
    w = x.astype(np.int64)
    hi = min(dst.int_max, 2 ** 63 - 1)
    lo = max(dst.int_min, -2 ** 63)
    out = np.clip(w, lo, hi)
    if dst.is_unsigned:
        return np.asarray(out).astype(np.uint64).astype(dst.dtype)
    return np.asarray(out).astype(dst.dtype)


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.Pow: operator.pow}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
           ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_ALLOWED_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not,
                  ast.ListComp, ast.GeneratorExp, ast.comprehension, ast.Store,
                  ast.USub, ast.UAdd, ast.BinOp, ast.Compare, ast.IfExp, ast.Call, ast.Name,
                  ast.Load, ast.Constant, ast.List, ast.Tuple, ast.Subscript, ast.Slice,
                  *_BINOPS, *_CMPOPS)


@functools.lru_cache(maxsize=None)
def parse(text: str) -> ast.Expression:
    """Parse and whitelist-check an expression; cached, so each is parsed once."""
    try:
        tree = ast.parse(str(text).strip(), mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"syntax error in {text!r}: {e.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ExpressionError(f"{type(node).__name__} is not allowed in {text!r}")
        if isinstance(node, ast.Call) and not isinstance(node.func, ast.Name):
            raise ExpressionError(f"only named functions may be called in {text!r}")
        if isinstance(node, ast.Call) and node.keywords:
            raise ExpressionError(f"keyword arguments are not allowed in {text!r}")
    return tree


def names(text: str) -> set[str]:
    """Free names of an expression (function names and comprehension variables
    excluded): for load-time checks."""
    tree = parse(text)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}
    bound = {t.id for c in ast.walk(tree) if isinstance(c, ast.comprehension)
             for t in ast.walk(c.target) if isinstance(t, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called - bound


def called_functions(text: str) -> set[str]:
    return {n.func.id for n in ast.walk(parse(text)) if isinstance(n, ast.Call)}


def _is_array(v: Any) -> bool:
    return isinstance(v, np.ndarray)


class _Evaluator:
    """Compiles a parsed expression, once per text, into nested closures that each take
    the environment: evaluating one then walks no tree and looks up no method (the
    constraints, rules and draws of a plan evaluate hundreds of thousands of them).
    Each closure computes what its node means, in Python's order of evaluation."""

    def __init__(self, text: str):
        self.text = text

    def visit(self, node: ast.AST) -> Callable[[Mapping[str, Any]], Any]:
        method = _METHODS.get(type(node))
        if method is None:
            method = _METHODS[type(node)] = getattr(_Evaluator, "v_" + type(node).__name__)
        return method(self, node)

    def v_Expression(self, node):
        return self.visit(node.body)

    def v_Constant(self, node):
        value = node.value
        return lambda env: value

    def v_Name(self, node):
        name, text = node.id, self.text
        if name in _LITERAL_NAMES:
            value = _LITERAL_NAMES[name]
            return lambda env: value

        def lookup(env):
            if name in env:
                v = env[name]
                return v.name if isinstance(v, ElementType) else v
            raise ExpressionError(f"unknown name {name!r} in {text!r}")
        return lookup

    def v_List(self, node):
        elts = [self.visit(e) for e in node.elts]
        return lambda env: [f(env) for f in elts]

    v_Tuple = v_List

    def v_Subscript(self, node):
        target = self.visit(node.value)
        if isinstance(node.slice, ast.Slice):
            s = node.slice
            parts = [None if p is None else self.visit(p) for p in (s.lower, s.upper, s.step)]

            def sliced(env):
                t = target(env)
                return t[slice(*(None if p is None else p(env) for p in parts))]
            return sliced
        index = self.visit(node.slice)
        return lambda env: target(env)[index(env)]

    def v_Slice(self, node):  # pragma: no cover - handled in v_Subscript
        text = self.text

        def bare(env):
            raise ExpressionError(f"bare slice in {text!r}")
        return bare

    def v_BoolOp(self, node):
        operands = [self.visit(e) for e in node.values]
        is_and = isinstance(node.op, ast.And)

        def boolop(env):
            values = []
            arrays = False                  # an array among the values so far
            for f in operands:
                v = f(env)
                if not arrays and not _is_array(v):
                    # Short-circuit like Python while everything is a scalar.
                    if is_and and not v:
                        return v
                    if not is_and and v:
                        return v
                else:
                    arrays = True
                values.append(v)
            if arrays:
                fn = np.logical_and if is_and else np.logical_or
                return functools.reduce(fn, values)
            return values[-1] if values else None
        return boolop

    def v_UnaryOp(self, node):
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            def negation(env):
                v = operand(env)
                return np.logical_not(v) if _is_array(v) else not v
            return negation
        if isinstance(node.op, ast.USub):
            return lambda env: -operand(env)
        return lambda env: +operand(env)

    def v_BinOp(self, node):
        fn, left, right = _BINOPS[type(node.op)], self.visit(node.left), self.visit(node.right)
        return lambda env: fn(left(env), right(env))

    def v_Compare(self, node):
        first = self.visit(node.left)
        pairs = [(_CMPOPS[type(op)], self.visit(comp))
                 for op, comp in zip(node.ops, node.comparators)]

        def compare(env):
            left = first(env)
            result: Any = True
            for fn, comp in pairs:
                right = comp(env)
                r = fn(left, right)
                result = np.logical_and(result, r) if (_is_array(r) or _is_array(result)) \
                    else (result and r)
                left = right
            return result
        return compare

    def v_IfExp(self, node):
        test, body, orelse = self.visit(node.test), self.visit(node.body), self.visit(node.orelse)
        return lambda env: body(env) if test(env) else orelse(env)

    def _comprehension(self, node):
        """[elt for target in iter if cond ...]: targets are names or tuples of names,
        bound in a child scope; nothing leaks out."""
        elt, text = self.visit(node.elt), self.text
        gens = [(self.visit(g.iter), g.target, [self.visit(c) for c in g.ifs])
                for g in node.generators]
        depth = len(gens)

        def comprehension(env):
            results: list = []

            def loop(i, env):
                if i == depth:
                    results.append(elt(env))
                    return
                iterable, target, ifs = gens[i]
                for item in iterable(env):
                    scope = dict(env)
                    _bind(target, item, scope, text)
                    if all(c(scope) for c in ifs):
                        loop(i + 1, scope)

            loop(0, dict(env))
            return results
        return comprehension

    def v_ListComp(self, node):
        return self._comprehension(node)

    v_GeneratorExp = v_ListComp

    def v_Call(self, node):
        name, text = node.func.id, self.text
        args = [self.visit(a) for a in node.args]

        def call(env):
            # (looked up when called: families register functions as they load)
            fn = FUNCTIONS.get(name)
            if fn is None:
                raise ExpressionError(f"unknown function {name!r} in {text!r}")
            return fn(*[a(env) for a in args])
        return call


_METHODS: dict[type, Callable] = {}
_LITERAL_NAMES = {"true": True, "True": True, "false": False, "False": False}


def _bind(target: ast.AST, value: Any, scope: dict, text: str) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
    elif isinstance(target, ast.Tuple):
        values = list(value)
        if len(values) != len(target.elts):
            raise ExpressionError(f"cannot unpack {len(values)} values in {text!r}")
        for t, v in zip(target.elts, values):
            _bind(t, v, scope, text)
    else:
        raise ExpressionError(f"unsupported loop target in {text!r}")


@functools.lru_cache(maxsize=None)
def _compiled(text: str) -> Callable[[Mapping[str, Any]], Any]:
    return _Evaluator(text).visit(parse(text))


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    """Evaluate ``text`` with the names in ``env``; raises ExpressionError on any failure."""
    try:
        return _compiled(text)(env)
    except ExpressionError:
        raise
    except Exception as e:  # noqa: BLE001 - every failure becomes one clear error
        raise ExpressionError(f"cannot evaluate {text!r}: {type(e).__name__}: {e}") from None
