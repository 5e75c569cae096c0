"""How each spec op is expressed with the public ``jax.lax`` API.

A table from spec op name to a builder: given the signature (for attributes and
result types), return a function of the input arrays. Ops with no attributes map
straight onto one ``lax`` function. This is the JAX backend's knowledge, not the
spec's, so it lives here rather than in the YAML.
"""
from __future__ import annotations

from typing import Any, Callable

from jax import lax

from conformance.case import Signature

from .base import Unsupported

Builder = Callable[[Signature], Callable[..., Any]]

DIRECT: dict[str, Callable[..., Any]] = {
    "abs": lax.abs, "add": lax.add, "and": lax.bitwise_and, "atan2": lax.atan2,
    "cbrt": lax.cbrt, "ceil": lax.ceil, "clamp": lax.clamp, "complex": lax.complex,
    "cosine": lax.cos, "count_leading_zeros": lax.clz, "divide": lax.div,
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


def build(sig: Signature) -> Callable[..., Any]:
    if sig.op in BUILDERS:
        return BUILDERS[sig.op](sig)
    if sig.op in DIRECT:
        return DIRECT[sig.op]
    raise Unsupported(f"the jax backend has no mapping for op {sig.op!r}")
