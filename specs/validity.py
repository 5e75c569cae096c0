"""Checking a signature against its op's spec: which constraints does it break?

This is how validity is *measured* rather than assumed: generators build valid
signatures by construction, and every one they build is checked here against
the spec's own constraint expressions and type tables. The numpy backend (the
oracle as a backend) uses the same check to reject invalid programs.

Besides the labelled constraints (C1, C2, ...), the type tables of the spec are
checks too: each input's element type must be one the table allows (id = the
input's label, ``I1``), each enum attribute must hold one of its values (its
label), and each output's element type must be allowed (``O1``, ``O2``...).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

from conformance.core.case import Signature
from conformance.core.types import TensorType, TokenType, TupleType, allowed_by
from . import OpSpec, load_spec
from . import expressions as ex


@dataclasses.dataclass(frozen=True)
class Check:
    """One checkable rule of an op: a labelled constraint or a type-table row."""

    id: str
    text: str
    kind: str          # constraint | input_type | attribute_value | output_type


def checks(spec: OpSpec) -> list[Check]:
    """Every rule a signature of ``spec`` must satisfy, in spec order."""
    out = []
    for i, t in enumerate(spec.inputs):
        if t.host:          # a host-side queue (specs/host.py), not an operand: no row
            continue
        out.append(Check(t.label or f"I{i + 1}",
                         f"`{t.name}` is a {t.type_text or 'tensor'}", "input_type"))
    for a in spec.attributes:
        if a.kind == "enum":
            out.append(Check(a.label or a.name, f"`{a.name}` is one of "
                             f"{', '.join('(not set)' if v is None else str(v) for v in a.values)}",
                             "attribute_value"))
        elif a.kind == "enum_list":
            out.append(Check(a.label or a.name,
                             f"every item of `{a.name}` is one of {', '.join(a.values)}",
                             "attribute_value"))
    out += [Check(c.id, c.text, "constraint") for c in spec.constraints]
    for i, t in enumerate(spec.outputs):
        if t.host:
            continue
        out.append(Check(f"O{i + 1}", f"`{t.name}` is a {t.type_text or 'tensor'}", "output_type"))
    return out


def environment(spec: OpSpec, sig: Signature) -> dict[str, Any]:
    """Names the constraint expressions see: inputs and outputs as TensorTypes, attributes."""
    env: dict[str, Any] = {}
    for t, tt in zip(spec.inputs, spec.split_inputs(sig.input_types)):
        env[t.name] = tt
    for t, tt in zip(spec.outputs, spec.split_outputs(sig.result_types)):
        env[t.name] = tt
    env.update({a.name: None for a in spec.attributes if a.optional})
    env.update(sig.attributes)
    for a in spec.attributes:            # a tensor constant (constant's value): its array
        if a.kind == "tensor" and a.name in env:
            env[a.name] = tensor_attribute(env[a.name])
    env.update(spec.region_env(sig.regions))
    env["num_replicas"], env["num_partitions"] = sig.num_replicas, sig.num_partitions
    return env


@functools.lru_cache(maxsize=4096)
def _parsed(text: str):
    from conformance.core.dense import parse_dense
    a = parse_dense(text)
    a.flags.writeable = False
    return a


def tensor_attribute(text: Any):
    """A tensor-constant attribute (its MLIR text) as a read-only numpy array; None if
    the text is not a tensor constant (then every rule that reads it is broken)."""
    try:
        return _parsed(text)
    except (ValueError, TypeError):
        return None


def _type_row_broken(t, value) -> bool:
    """Does a value (a variadic group: every value of it) break its type-table row? It
    must be of the kind the row allows (tensor, tuple or either) and every tensor of it
    (a tuple's leaves) must have an element type the row lists."""
    for x in (value if t.variadic else [value]):
        if (t.value_kind == "tensor" and not isinstance(x, TensorType)) or \
                (t.value_kind == "tuple" and not isinstance(x, TupleType)) or \
                (t.value_kind == "token" and not isinstance(x, TokenType)) or \
                (t.value_kind == "tensor_or_token" and
                 not isinstance(x, (TensorType, TokenType))):
            return True
        if any(not allowed_by(leaf.element_type, t.types) for leaf in x.leaves()):
            return True
        # a quantized tensor's own rules ("Types" C12-C13: the quantization dimension
        # within the rank, one scale per slice)
        if any(getattr(leaf.element_type, "violations", None) is not None and
               leaf.element_type.violations(leaf.shape) for leaf in x.leaves()):
            return True
    return False


def violations(sig: Signature, spec: OpSpec | None = None) -> list[str]:
    """Ids of every rule ``sig`` breaks (empty: the signature is valid).

    A constraint whose expression cannot be evaluated on this signature (say,
    ``dim(x, -1)`` of a rank-0 tensor) counts as broken.
    """
    spec = spec or load_spec(sig.op)
    try:
        ins = spec.split_inputs(sig.input_types)
        outs = spec.split_outputs(sig.result_types)
    except ValueError:
        return ["arity"]
    broken: list[str] = []
    for i, (t, tt) in enumerate(zip(spec.inputs, ins)):
        if not t.host and _type_row_broken(t, tt):
            broken.append(t.label or f"I{i + 1}")
    attrs = sig.attributes
    for a in spec.attributes:
        if a.name not in attrs:
            if not a.optional:
                broken.append(a.label or a.name)
        elif a.kind == "enum" and attrs[a.name] not in a.values:
            broken.append(a.label or a.name)
        elif a.kind == "enum_list" and (not isinstance(attrs[a.name], (list, tuple)) or
                                        any(v not in a.values for v in attrs[a.name])):
            broken.append(a.label or a.name)
        elif a.kind == "tensor" and tensor_attribute(attrs[a.name]) is None:
            broken.append(a.label or a.name)
        elif a.kind == "string" and not isinstance(attrs[a.name], str):
            broken.append(a.label or a.name)
        elif a.kind == "string_list" and not (isinstance(attrs[a.name], (list, tuple)) and
                                              all(isinstance(x, str) for x in attrs[a.name])):
            broken.append(a.label or a.name)
    env = environment(spec, sig)
    for c in spec.constraints:
        try:
            ok = bool(ex.evaluate(c.check, env))
        except ex.ExpressionError:
            ok = False
        if not ok:
            broken.append(c.id)
    for i, (t, tt) in enumerate(zip(spec.outputs, outs)):
        if not t.host and _type_row_broken(t, tt):
            broken.append(f"O{i + 1}")
    return broken


def is_valid(sig: Signature, spec: OpSpec | None = None) -> bool:
    return not violations(sig, spec)
