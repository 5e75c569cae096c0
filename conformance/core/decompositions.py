"""Canonical programs of XLA forms that are no single StableHLO op (a spec's
``mlir.decomposition``): a builder per name gives, for a signature of the form, the
:class:`~conformance.core.program.Program` (StableHLO ops only) that the emitter prints
as the form's module (``conformance.mlir.emitter.module_text``), so that the xla backend,
the interpreter and a vendor's compiler get a program they can run.

A builder raises :class:`DecompositionError` (one line) where the form's signature has
no faithful program: e.g. a rule of the XLA text that no StableHLO op would check.

- ``dynamic_dimension_size``: GetDimensionSize of a dynamic dimension, ``get_dimension_size(
  set_dimension_size(operand, size) {dimension}) {query}``.
- ``rng_bernoulli`` (000 "RngBernoulli", B(1, mean)): ``u = rng(0, 1, shape)`` UNIFORM in
  f32 of the result's shape, ``m = broadcast_in_dim(mean)``, ``compare(u, m, LT, FLOAT)``,
  ``convert`` to the result's ui32: P(u < p) = p for u uniform on [0, 1) (the expansion
  XLA's client library used, and what jax writes with lax.rng_uniform).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .case import Signature
from .dense import dense_text
from .program import Operation, Program
from .types import TensorType, element_type

__all__ = ["DecompositionError", "DECOMPOSITIONS", "decomposition", "decompose"]


class DecompositionError(ValueError):
    """The signature has no canonical program; one line saying why."""


DECOMPOSITIONS: dict[str, Callable[[Signature], Program]] = {}


def decomposition(name: str):
    def deco(fn):
        if name in DECOMPOSITIONS:
            raise RuntimeError(f"decomposition {name!r} registered twice")
        DECOMPOSITIONS[name] = fn
        return fn
    return deco


def decompose(name: str, sig: Signature) -> Program:
    """The canonical program of ``sig`` by the builder ``name``; DecompositionError if
    there is no builder or no faithful program."""
    fn = DECOMPOSITIONS.get(name)
    if fn is None:
        raise DecompositionError(f"{sig.op}: no decomposition named {name!r} "
                                 f"(known: {', '.join(sorted(DECOMPOSITIONS))})")
    return fn(sig)


def _constant(name: str, value: np.ndarray) -> Operation:
    t = TensorType(value.shape, element_type(value.dtype))
    return Operation(Signature.make("constant", [], [t], {"value": dense_text(value)}), (),
                     name)


@decomposition("rng_bernoulli")
def _rng_bernoulli(sig: Signature) -> Program:
    if len(sig.input_types) != 1 or len(sig.result_types) != 1:
        raise DecompositionError(f"{sig.op}: takes one input (mean) and gives one result")
    (mean,), (out,) = sig.input_types, sig.result_types
    if out.element_type.name != "ui32":
        # convert would take any integer type: the program would not check the XLA
        # text's "elemental type U32" (O1)
        raise DecompositionError(
            f"{sig.op}: RngBernoulli's output is U32; its decomposition (rng, compare, "
            f"convert) cannot check a {out.element_type.name} output")
    f32 = element_type("f32")
    uniform = TensorType(out.shape, f32)
    shape = np.asarray(out.shape, np.int64)
    ops = [
        _constant("zero", np.asarray(0.0, np.float32)),
        _constant("one", np.asarray(1.0, np.float32)),
        _constant("shape", shape),
        Operation(Signature.make("rng", [TensorType((), f32)] * 2 + [TensorType(shape.shape,
                                 element_type("si64"))], [uniform],
                                 {"rng_distribution": "UNIFORM"}), ("zero", "one", "shape"),
                  "u"),
        Operation(Signature.make("broadcast_in_dim", [mean],
                                 [TensorType(out.shape, mean.element_type)],
                                 {"broadcast_dimensions": []}), ("arg0",), "m"),
        Operation(Signature.make("compare", [uniform, TensorType(out.shape, mean.element_type)],
                                 [TensorType(out.shape, element_type("i1"))],
                                 {"comparison_direction": "LT", "compare_type": "FLOAT"}),
                  ("u", "m"), "hit"),
        Operation(Signature.make("convert", [TensorType(out.shape, element_type("i1"))],
                                 [out]), ("hit",), "result"),
    ]
    return Program.make([("arg0", mean)], ops, ["result"])


@decomposition("dynamic_dimension_size")
def _dynamic_dimension_size(sig: Signature) -> Program:
    """GetDimensionSize of a dynamic dimension: ``v = set_dimension_size(operand, size)
    {dimension}``, then ``get_dimension_size(v) {dimension = query}`` (the emitter prints
    v's type bounded dynamic, as set_dimension_size's result is)."""
    if len(sig.input_types) != 2 or len(sig.result_types) != 1:
        raise DecompositionError(f"{sig.op}: takes operand and size, gives one result")
    operand, size = sig.input_types
    a = sig.attributes
    ops = [
        Operation(Signature.make("set_dimension_size", [operand, size], [operand],
                                 {"dimension": a.get("dimension")}), ("arg0", "arg1"), "v"),
        Operation(Signature.make("get_dimension_size", [operand], list(sig.result_types),
                                 {"dimension": a.get("query")}), ("v",), "result"),
    ]
    return Program.make([("arg0", operand), ("arg1", size)], ops, ["result"])
