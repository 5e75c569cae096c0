"""The seams every part shares: Signature (a case without values) and Case.

A :class:`Signature` is what a backend compiles once: op name, input types,
attributes (plain Python data, named as in the spec), regions (data, see
DESIGN.md), result types, and the process grid it needs. A :class:`Case` adds
input values. Result types are always carried, even where the spec could infer
them, so that convert/bitcast_convert and invalid cases need no special path.

Types are value types: tensors, or tuples (``tuple<tensor<2xf32>, tuple<>>``, for
tuple and get_tuple_element), or tokens (``token``: after_all, infeed, ...; they carry no
data, so no array). Values are always tensors: a case holds one array per
input *leaf* (tuple-typed inputs flattened depth-first, ``Signature.input_leaves``) and
a backend returns one array per result leaf (``Signature.result_leaves``).
"""
from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Mapping, Sequence

import numpy as np

from conformance.core.types import TensorType, is_structured, leaves, type_of, value_type


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, np.generic):
        return value.item()
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class Signature:
    """The static part of a case: what a backend compiles once and runs many times."""

    op: str
    input_types: tuple[TensorType, ...]     # value types: a TupleType where the op takes one
    result_types: tuple[TensorType, ...]
    attribute_items: tuple[tuple[str, Any], ...] = ()
    regions: tuple[str, ...] = ()          # region bodies as data, e.g. "return add(arg0, arg1)"
    num_replicas: int = 1                  # the process grid the case needs (collectives)
    num_partitions: int = 1
    invalid: str | None = None             # the constraint id this signature breaks, if any

    def __hash__(self) -> int:
        # the generated hash of the fields, computed once: signatures key the per-signature
        # caches (coverage groups and probes, boundary points, inferred types) on every
        # value batch, and hashing one walks all its types
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.op, self.input_types, self.result_types, self.attribute_items,
                      self.regions, self.num_replicas, self.num_partitions, self.invalid))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        # (a str's hash differs between processes: the held one never travels)
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @staticmethod
    def make(op: str, input_types: Sequence[TensorType | str],
             result_types: Sequence[TensorType | str],
             attributes: Mapping[str, Any] | None = None, **kw: Any) -> "Signature":
        return Signature(op, tuple(value_type(t) for t in input_types),
                         tuple(value_type(t) for t in result_types),
                         tuple((k, _freeze(v)) for k, v in (attributes or {}).items()), **kw)

    @property
    def attributes(self) -> dict[str, Any]:
        return {k: _thaw(v) for k, v in self.attribute_items}

    @property
    def input_leaves(self) -> tuple[TensorType, ...]:
        """The input tensors a case holds values for: tuple-typed inputs flattened
        depth-first (conformance.core.types.TupleType); the input types where none is a tuple."""
        return leaves(self.input_types) if self.has_tuples else self.input_types

    @property
    def result_leaves(self) -> tuple[TensorType, ...]:
        """The result tensors a backend returns, tuple-typed results flattened."""
        return leaves(self.result_types) if self.has_tuples else self.result_types

    @functools.cached_property
    def has_tuples(self) -> bool:
        """Whether a value type is a tuple or a token (conformance.core.types.is_structured):
        then a case's values are not one array per type. (Held on the instance: a
        function of its frozen fields, asked several times per value batch.)"""
        return any(is_structured(t) for t in self.input_types + self.result_types)

    def key(self) -> str:
        """A stable, readable one-line identity (used for caching, ids and reports)."""
        attrs = ", ".join(f"{k} = {json.dumps(_thaw(v))}" for k, v in self.attribute_items)
        s = (f"{self.op}({', '.join(map(str, self.input_types))})"
             f"{' {' + attrs + '}' if attrs else ''} -> "
             f"({', '.join(map(str, self.result_types))})")
        if self.regions:
            s += " regions[" + "; ".join(self.regions) + "]"
        if self.num_replicas != 1 or self.num_partitions != 1:
            s += f" grid={self.num_replicas}x{self.num_partitions}"
        if self.invalid:
            s += f" !{self.invalid}"
        return s

    __str__ = key

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op,
                             "input_types": [str(t) for t in self.input_types],
                             "result_types": [str(t) for t in self.result_types],
                             "attributes": self.attributes}
        if self.regions:
            d["regions"] = list(self.regions)
        if self.num_replicas != 1 or self.num_partitions != 1:
            d["num_replicas"], d["num_partitions"] = self.num_replicas, self.num_partitions
        if self.invalid:
            d["invalid"] = self.invalid
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Signature":
        return Signature.make(d["op"], d["input_types"], d["result_types"], d.get("attributes"),
                              regions=tuple(d.get("regions", ())),
                              num_replicas=d.get("num_replicas", 1),
                              num_partitions=d.get("num_partitions", 1),
                              invalid=d.get("invalid"))

    def with_shapes(self, input_shapes: Sequence[Sequence[int]],
                    result_shapes: Sequence[Sequence[int]]) -> "Signature":
        """The same signature with other shapes (used by the minimiser)."""
        return dataclasses.replace(
            self,
            input_types=tuple(TensorType(tuple(s), t.element_type)
                              for s, t in zip(input_shapes, self.input_types)),
            result_types=tuple(TensorType(tuple(s), t.element_type)
                               for s, t in zip(result_shapes, self.result_types)))


@dataclasses.dataclass(frozen=True)
class Case:
    """A signature with input values: the unit a backend runs and the oracle checks."""

    signature: Signature
    inputs: tuple[np.ndarray, ...]
    case_id: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(np.asarray(x) for x in self.inputs))
        if not self.signature.invalid:
            # On a grid of several processes (collectives) each input holds one value per
            # process, on a leading axis: [processes] + its type's shape.
            n = self.signature.num_replicas * self.signature.num_partitions
            for i, (x, t) in enumerate(zip(self.inputs, self.signature.input_leaves)):
                want = t if n == 1 else TensorType((n,) + t.shape, t.element_type)
                if type_of(x) != want.held_as():
                    raise ValueError(f"{self.signature.op}: input {i} is {type_of(x)}, "
                                     f"but the signature says {want}")

    @property
    def op(self) -> str:
        return self.signature.op

    @property
    def attributes(self) -> dict[str, Any]:
        return self.signature.attributes

    @staticmethod
    def make(op: str, inputs: Sequence[np.ndarray], result_types: Sequence[TensorType | str],
             attributes: Mapping[str, Any] | None = None, **kw: Any) -> "Case":
        """Build a case from arrays; the input types are read off the arrays."""
        inputs = tuple(np.asarray(x) for x in inputs)
        sig = Signature.make(op, [type_of(x) for x in inputs], result_types, attributes, **kw)
        return Case(sig, inputs)
