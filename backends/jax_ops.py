"""How each spec op is expressed with the public ``jax.lax`` API.

A table from spec op name to a builder: given the signature (for attributes and
result types), return a function of the input arrays. Ops with no attributes map
straight onto one ``lax`` function. This is the JAX backend's knowledge, not the
spec's, so it lives here rather than in the YAML.

This module holds the element-wise and data-movement ops and the table; the other op
families register their builders into it from modules named ``jax_ops_<family>``
(the ``family:`` of the op's spec: jax_ops_indexing.py, jax_ops_sorting.py,
jax_ops_tuples.py), which :func:`build` imports the first time it meets one of their
ops. Nothing imports those modules for their side effects.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from jax import lax

from conformance.core.case import Signature
from conformance.core.types import TensorType
from conformance.specs import import_family_module
from conformance.specs.regions import Arg, Node, parse as parse_region

from .base import Unsupported

Builder = Callable[[Signature], Callable[..., Any]]

DIRECT: dict[str, Callable[..., Any]] = {
    "abs": lax.abs, "add": lax.add, "and": lax.bitwise_and, "atan2": lax.atan2,
    "cbrt": lax.cbrt, "ceil": lax.ceil, "clamp": lax.clamp, "complex": lax.complex,
    "cosine": lax.cos, "count_leading_zeros": lax.clz, "divide": lax.div, "erf": lax.erf,
    "exponential": lax.exp, "exponential_minus_one": lax.expm1, "floor": lax.floor,
    "imag": lax.imag, "is_finite": lax.is_finite, "log": lax.log, "log_plus_one": lax.log1p,
    "logistic": lax.logistic, "maximum": lax.max, "minimum": lax.min, "multiply": lax.mul,
    "negate": lax.neg, "not": lax.bitwise_not, "or": lax.bitwise_or,
    "popcnt": lax.population_count, "power": lax.pow, "real": lax.real,
    "remainder": lax.rem, "rsqrt": lax.rsqrt, "select": lax.select,
    "shift_left": lax.shift_left, "shift_right_arithmetic": lax.shift_right_arithmetic,
    "shift_right_logical": lax.shift_right_logical, "sign": lax.sign, "sine": lax.sin,
    "sqrt": lax.sqrt, "subtract": lax.sub, "tan": lax.tan, "tanh": lax.tanh,
    "xor": lax.bitwise_xor,
}

BUILDERS: dict[str, Builder] = {}


def builder(op: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        BUILDERS[op] = fn
        return fn
    return deco


def _result_dtype(sig: Signature):
    return sig.result_types[0].element_type.dtype


@builder("convert")
def _convert(sig):
    dtype = _result_dtype(sig)
    return lambda x: lax.convert_element_type(x, dtype)


@builder("bitcast_convert")
def _bitcast(sig):
    dtype = _result_dtype(sig)
    return lambda x: lax.bitcast_convert_type(x, dtype)


@builder("reduce_precision")
def _reduce_precision(sig):
    a = sig.attributes
    return lambda x: lax.reduce_precision(x, exponent_bits=a["exponent_bits"],
                                          mantissa_bits=a["mantissa_bits"])


@builder("slice")
def _slice(sig):
    a = sig.attributes
    return lambda x: lax.slice(x, a["start_indices"], a["limit_indices"], a["strides"])


@builder("broadcast_in_dim")
def _broadcast_in_dim(sig):
    # jax.lax takes broadcast_dimensions in any order (an unsorted list also transposes),
    # as StableHLO does.
    shape = sig.result_types[0].shape
    dims = tuple(sig.attributes["broadcast_dimensions"])
    return lambda x: lax.broadcast_in_dim(x, shape, dims)


@builder("concatenate")
def _concatenate(sig):
    d = sig.attributes["dimension"]
    return lambda *xs: lax.concatenate(xs, d)


@builder("pad")
def _pad(sig):
    a = sig.attributes
    low, high, interior = a["edge_padding_low"], a["edge_padding_high"], a["interior_padding"]
    if not len(low) == len(high) == len(interior):
        raise Unsupported("jax.lax.pad takes one (low, high, interior) triple per dimension; "
                          f"it cannot express lists of sizes {len(low)}, {len(high)} and "
                          f"{len(interior)}")
    config = list(zip(low, high, interior))
    return lambda x, value: lax.pad(x, value, config)


@builder("reverse")
def _reverse(sig):
    dims = tuple(sig.attributes["dimensions"])
    return lambda x: lax.rev(x, dims)


@builder("reshape")
def _reshape(sig):
    shape = sig.result_types[0].shape
    return lambda x: lax.reshape(x, shape)


@builder("transpose")
def _transpose(sig):
    perm = tuple(sig.attributes["permutation"])
    return lambda x: lax.transpose(x, perm)


@builder("iota")
def _iota(sig):
    # A function of no inputs: jax.vmap cannot map it, so JaxBackend.compile_batch runs
    # it once per case.
    (t,) = sig.result_types
    d = sig.attributes["iota_dimension"]
    return lambda: lax.broadcasted_iota(t.element_type.dtype, t.shape, d)


@builder("get_dimension_size")
def _get_dimension_size(sig):
    # jax.lax has no get_dimension_size: with static shapes jax knows every dimension at
    # trace time, so the nearest public form is the size as an si32 constant (what jax
    # itself stages out for x.shape[d]). The op itself is tested by the xla and
    # interpreter backends.
    d = sig.attributes["dimension"]
    size = sig.input_types[0].shape[d] if 0 <= d < sig.input_types[0].rank else None
    if size is None:
        raise Unsupported(f"get_dimension_size: dimension {d} is not a dimension of "
                          f"{sig.input_types[0]}, and jax.lax has no get_dimension_size op "
                          "to pass it to")
    return lambda x: lax.full((), size, np.int32)


@builder("optimization_barrier")
def _optimization_barrier(sig):
    return lambda *xs: tuple(lax.optimization_barrier(tuple(xs)))


@builder("dynamic_slice")
def _dynamic_slice(sig):
    # allow_negative_indices=False: jax.lax's default wraps a negative start index around
    # (i + dim, numpy style); StableHLO clamps it to 0.
    sizes = tuple(sig.attributes["slice_sizes"])
    return lambda x, *starts: lax.dynamic_slice(x, starts, sizes,
                                                allow_negative_indices=False)


@builder("dynamic_update_slice")
def _dynamic_update_slice(sig):
    return lambda x, update, *starts: lax.dynamic_update_slice(x, update, starts,
                                                               allow_negative_indices=False)


@builder("round_nearest_afz")
def _round_afz(sig):
    return lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)


@builder("round_nearest_even")
def _round_even(sig):
    return lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


_QUIET = {"EQ": lax.eq, "NE": lax.ne, "GE": lax.ge, "GT": lax.gt, "LE": lax.le, "LT": lax.lt}
# jax.lax has total-order EQ, LE and LT primitives; the other directions swap or negate.
_TOTAL = {
    "EQ": lambda x, y: lax.eq_to_p.bind(x, y),
    "NE": lambda x, y: lax.bitwise_not(lax.eq_to_p.bind(x, y)),
    "LE": lambda x, y: lax.le_to_p.bind(x, y),
    "LT": lambda x, y: lax.lt_to_p.bind(x, y),
    "GE": lambda x, y: lax.le_to_p.bind(y, x),
    "GT": lambda x, y: lax.lt_to_p.bind(y, x),
}


@builder("compare")
def _compare(sig):
    a = sig.attributes
    et = sig.input_types[0].element_type
    ctype, direction = a["compare_type"], a["comparison_direction"]
    if ctype == "TOTALORDER":
        return _TOTAL[direction]
    # jax.lax derives compare_type from the element type (SIGNED, UNSIGNED or FLOAT);
    # it cannot express any other combination.
    implied = ("SIGNED" if et.is_signed else "UNSIGNED" if (et.is_unsigned or et.is_boolean)
               else "FLOAT")
    if ctype != implied:
        raise Unsupported(f"jax.lax cannot express compare_type {ctype} for {et.name} "
                          f"(it always uses {implied})")
    return _QUIET[direction]


def _load_family(op: str) -> None:
    """Import ``jax_ops_<family>`` for ``op``'s spec family, where there is one: it
    registers that family's builders."""
    import_family_module(op, f"{__package__}.jax_ops_{{family}}")


def build(sig: Signature) -> Callable[..., Any]:
    if sig.op not in BUILDERS and sig.op not in DIRECT:
        _load_family(sig.op)
    if sig.op in BUILDERS:
        return BUILDERS[sig.op](sig)
    if sig.op in DIRECT:
        return DIRECT[sig.op]
    raise Unsupported(f"the jax backend has no mapping for op {sig.op!r}")


def jax_function(text: str):
    """A jax function of the rank-0 block arguments computing a region text
    (specs/regions.py), composed of the per-op builders (so a region means
    the same as the ops it calls)."""
    region = parse_region(text)

    def compile_node(n: Node):
        if isinstance(n, Arg):
            return lambda *xs: xs[n.index]
        parts = [compile_node(o) for o in n.operands]
        types = [TensorType((), region.type_of(o)) for o in n.operands]
        result = TensorType((), region.type_of(n))
        fn = build(Signature.make(n.op, types, [result], dict(n.attributes)))
        return lambda *xs: fn(*(p(*xs) for p in parts))

    fns = [compile_node(n) for n in region.results]
    return lambda *xs: tuple(f(*xs) for f in fns)
