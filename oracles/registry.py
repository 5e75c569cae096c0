"""The oracle registry: op name -> numpy function, filled by the family modules.

Each family module of this package (arithmetic.py, bitwise.py, ...) registers the
ops of one spec family with :func:`register`; the module is named after the family
(the ``family:`` of the op's spec YAML), so :func:`oracle_for` finds and imports it
the first time one of its ops is looked up. Nothing imports the family modules for
their side effects, and they import only this module (and the layers below).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from conformance.core.types import TensorType
from conformance.specs import import_family_module

__all__ = ["OracleFn", "REGISTRY", "OracleError", "register", "oracle_for", "load_family",
           "BATCHED", "register_batched", "Membership", "TYPED", "register_typed"]

OracleFn = Callable[[Sequence[np.ndarray], Mapping[str, Any], Sequence[TensorType]],
                    "tuple[np.ndarray, ...] | np.ndarray"]
REGISTRY: dict[str, OracleFn] = {}


class OracleError(Exception):
    """The oracle cannot evaluate this case (unknown op, missing result types, ...)."""


class Membership:
    """An allowed set given by a test instead of by its members: what an ``allowed:``
    alternative returns where the spec allows no finite set (a sum with any number of
    init values). ``test(actual)`` takes the backend's batched results (one array per
    result) and gives, per result, a bool mask of the elements that lie in the set; the
    comparator passes an element of the rule's mask where it does (RuleMasks.tests).
    ``test`` may instead give ``(in_set, flushed)``: the second list of masks holds
    elements outside the set that the element's own subnormal inputs explain (read as
    zero, FTZ), which the comparator classes ``subnormal_flush``."""

    def __init__(self, test: Callable[[Sequence[np.ndarray]], Any]):
        self.test = test

    def __call__(self, actual: Sequence[np.ndarray]
                 ) -> "tuple[list[np.ndarray], list[np.ndarray] | None]":
        out = self.test(actual)
        if isinstance(out, tuple):
            inside, flushed = out
            return ([np.asarray(m, bool) for m in inside],
                    [np.asarray(m, bool) for m in flushed])
        return [np.asarray(m, bool) for m in out], None


def register(*ops: str) -> Callable[[OracleFn], OracleFn]:
    def deco(fn: OracleFn) -> OracleFn:
        for op in ops:
            if op in REGISTRY:
                raise RuntimeError(f"oracle for {op!r} registered twice")
            REGISTRY[op] = fn
        return fn
    return deco


#: ops whose oracle also takes the inputs' types, ``fn(inputs, attrs, result_types,
#: input_types)``: where an input's values do not say what they mean (a quantized
#: tensor's storage integers: scale and zero point are in its type). The input types are
#: the signature's (no batch axis); the arrays may carry leading batch axes.
TYPED: set[str] = set()


def register_typed(*ops: str) -> Callable[[Callable], Callable]:
    def deco(fn):
        register(*ops)(fn)
        TYPED.update(ops)
        return fn
    return deco


#: op -> ``fn(sig, stacked) -> results``: an oracle that evaluates a whole batch of cases
#: at once (inputs and results with a leading batch axis); evaluate_batch uses it instead
#: of one call per case (if, case, while: a branch evaluated once for the rows taking it)
BATCHED: dict[str, Callable[..., Any]] = {}


def register_batched(*ops: str) -> Callable:
    def deco(fn):
        for op in ops:
            if op in BATCHED:
                raise RuntimeError(f"batched oracle for {op!r} registered twice")
            BATCHED[op] = fn
        return fn
    return deco


def load_family(op: str) -> None:
    """Import the family module that registers ``op`` (and its conditions), if the op has
    a spec and its family a module here; nothing otherwise."""
    if op not in REGISTRY:
        import_family_module(op, f"{__package__}.{{family}}")


def oracle_for(op: str) -> OracleFn:
    """The oracle function of ``op``; OracleError if there is none."""
    load_family(op)
    fn = REGISTRY.get(op)
    if fn is None:
        raise OracleError(f"no oracle for op {op!r}")
    return fn
