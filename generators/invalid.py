"""Invalid signatures: a valid one changed so that exactly one rule of the spec fails.

For a target rule (a labelled constraint ``C2``, or a type-table row ``I1``), we
take a valid signature and enumerate every single change of it — another element
type for one tensor, another shape for one tensor, another value for one
attribute, or the signature rebuilt with one type variable bound outside its
domain — and keep the changes whose violations are exactly the target. Which
rules break is measured with the same checker that measures validity.

Breaking an input's type-table row may also break the other type-table rows that
the spec ties to it through a type variable (``and`` of ``f32`` breaks the rows of
``lhs``, ``rhs`` and ``result`` at once); that collateral is allowed, since no
program can break one of them alone. Rules no single change can break alone (a table that allows every type)
are reported by :func:`unbreakable` with the reason.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Iterator

import numpy as np
from hypothesis import reject, strategies as st

from conformance.core.case import Signature
from conformance.specs import OpSpec, load_spec
from conformance.specs import expressions as ex
from conformance.specs.validity import checks, violations
from conformance.core.types import (ALL_ELEMENT_TYPES, NEWER_FLOAT_TYPES, SEED_ELEMENT_TYPES,
                                    TensorType, TokenType, TupleType, element_type,
                                    value_type)

from .signatures import ShapeProfile, binding_of, canonical, signatures


def _grid(sig: Signature) -> dict[str, int]:
    """A collective's process grid, kept by every change (issue 18)."""
    return {"num_replicas": sig.num_replicas, "num_partitions": sig.num_partitions}


def _retype(sig: Signature, which: str, i: int, t: TensorType) -> Signature:
    field = "input_types" if which == "in" else "result_types"
    types = list(getattr(sig, field))
    types[i] = t
    return dataclasses.replace(sig, **{field: tuple(types)})


def _shape_mutations(shape: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    yield shape + (2,)
    if shape:
        yield shape[:-1]
        yield shape[:-1] + (shape[-1] + 1,)
        yield (shape[0] + 1,) + shape[1:]
    else:
        yield (3,)


def _type_mutations(t) -> Iterator:
    """Single changes of one value type: a tensor's element type or shape; for a tuple,
    one change of one element, one element dropped or the last repeated, or the tuple
    replaced by its first element (a tensor where a tuple belongs)."""
    if isinstance(t, TokenType):            # a tensor where a token belongs
        yield TensorType((), element_type("si32"))
        return
    if isinstance(t, TupleType):
        for j, e in enumerate(t.elements):
            for alt in _type_mutations(e):
                yield TupleType(t.elements[:j] + (alt,) + t.elements[j + 1:])
        if t.elements:
            yield TupleType(t.elements[:-1])
            yield TupleType(t.elements + t.elements[-1:])
            yield t.elements[0]
        return
    for et in SEED_ELEMENT_TYPES:
        if et != t.element_type:
            yield TensorType(t.shape, et)
    for shape in _shape_mutations(t.shape):
        yield TensorType(shape, t.element_type)
    if t.element_type.is_quantized:     # its parameters, storage and expressed types
        from .quantization import type_variants
        yield from type_variants(t)


def _tensor_attribute_mutations(text) -> Iterator[str]:
    """A tensor constant of another type: each other element type (same shape), and each
    shape change (same element type); values drawn with a fixed seed."""
    from conformance.core.dense import dense_text, dense_type
    from .values import draw_array
    try:
        t = dense_type(text)
    except ValueError:
        return
    for alt in _type_mutations(t):
        yield dense_text(draw_array(alt.element_type, alt.shape, np.random.default_rng(0)))


def mutations(spec: OpSpec, sig: Signature) -> Iterator[Signature]:
    """Every single-step change of ``sig`` (types, shapes, attributes), in a fixed order."""
    for which, types in (("in", sig.input_types), ("out", sig.result_types)):
        for i, t in enumerate(types):
            for alt in _type_mutations(t):
                yield _retype(sig, which, i, alt)
    yield from _count_mutations(spec, sig)
    yield from _group_retypes(spec, sig)
    yield from _token_mutations(sig)
    yield from _region_mutations(sig)
    if spec.regions and spec.regions[-1].variadic:      # case: no branches at all
        yield dataclasses.replace(sig, regions=sig.regions[:len(spec.regions) - 1])
    attrs = sig.attributes
    for a in spec.attributes:
        current = attrs.get(a.name)
        if a.kind == "enum":
            alternatives = [v for v in a.values if v != current]
        elif a.kind == "boolean":
            alternatives = [not current]
        elif a.kind == "integer_list":
            alternatives = list(_list_mutations(list(current or [])))
        elif a.kind == "enum_list":
            # one item changed (to each other value, or to one outside the enum), the list
            # one longer or one shorter
            xs = list(current or [])
            alternatives = [xs[:i] + [v] + xs[i + 1:] for i in range(len(xs))
                            for v in (*a.values, "UNKNOWN") if v != xs[i]]
            alternatives += [xs + [a.values[0]]] + ([xs[:-1]] if xs else [])
        elif a.kind == "tensor":
            alternatives = list(_tensor_attribute_mutations(current))
        elif a.kind in ("string", "string_list"):
            alternatives = []       # any string is a string: no change breaks its row
        elif current is None:       # an optional attribute not set (dot_general's algorithm)
            alternatives = [-1, 0, 1]
        else:
            alternatives = [v for v in (-1, 0, current - 1, current + 1) if v != current]
        for v in alternatives:
            changed = Signature.make(sig.op, sig.input_types, sig.result_types,
                                     {**attrs, a.name: v}, regions=sig.regions, **_grid(sig))
            yield changed
            # The same change with the results re-derived from the spec's output rules,
            # so that a rule on the attribute breaks without the result-shape rule.
            derived = _rederive_outputs(spec, changed)
            if derived is not None and derived != changed:
                yield derived


def _regroup(specs: tuple, groups: list, count: int) -> list:
    """Flatten ``groups`` (from ``_split``) with every variadic group resized to ``count``
    (cut, or extended by repeating its last tensor)."""
    flat = []
    for t, g in zip(specs, groups):
        if not t.variadic:
            flat.append(g)
        elif count <= len(g):
            flat.extend(g[:count])
        elif g:
            flat.extend(list(g) + [g[-1]] * (count - len(g)))
        else:
            return []
    return flat


def _count_mutations(spec: OpSpec, sig: Signature) -> Iterator[Signature]:
    """The number of tensors in the variadic groups changed: to none, one fewer, one
    more, on the inputs, on the results, or on both (``0 < size(inputs)``,
    ``size(inputs) = size(results)``)."""
    ins = spec.split_inputs(sig.input_types) if any(t.variadic for t in spec.inputs) else None
    outs = spec.split_outputs(sig.result_types) if any(t.variadic for t in spec.outputs) else None
    def count(specs, groups):
        return next(len(g) for t, g in zip(specs, groups) if t.variadic)
    n_in = count(spec.inputs, ins) if ins is not None else None
    n_out = count(spec.outputs, outs) if outs is not None else None
    for which in ("in", "out", "both"):
        n = n_in if which != "out" else n_out
        if n is None or (which == "both" and n_out is None):
            continue
        for k in sorted({0, n - 1, n + 1} - {n, -1}):
            new_in = (_regroup(spec.inputs, ins, k) if which in ("in", "both")
                      else list(sig.input_types))
            new_out = (_regroup(spec.outputs, outs, k) if which in ("out", "both")
                       else list(sig.result_types))
            yield Signature.make(sig.op, new_in, new_out, sig.attributes, regions=sig.regions, **_grid(sig))


def _group_retypes(spec: OpSpec, sig: Signature) -> Iterator[Signature]:
    """Every tensor of one variadic input group given another element type at once
    (the start indices' type of dynamic_slice: one type for the group)."""
    if not any(t.variadic for t in spec.inputs):
        return
    groups = spec.split_inputs(sig.input_types)
    for gi, t in enumerate(spec.inputs):
        if not t.variadic or len(groups[gi]) < 2 or \
                not all(isinstance(x, TensorType) for x in groups[gi]):
            continue
        for et in SEED_ELEMENT_TYPES:
            if et == groups[gi][0].element_type:
                continue
            changed = list(groups)
            changed[gi] = [TensorType(x.shape, et) for x in groups[gi]]
            yield Signature.make(sig.op, _regroup(spec.inputs, changed, len(groups[gi])),
                                 sig.result_types, sig.attributes, regions=sig.regions, **_grid(sig))


def _token_mutations(sig: Signature) -> Iterator[Signature]:
    """A token where a tensor belongs (outfeed's inputs): only for signatures that have a
    token already, so that every other op's changes stay as they were."""
    if not any(isinstance(t, TokenType) for t in sig.input_types + sig.result_types):
        return
    for which, types in (("in", sig.input_types), ("out", sig.result_types)):
        for i, t in enumerate(types):
            if isinstance(t, TensorType):
                yield _retype(sig, which, i, TokenType())


def _region_mutations(sig: Signature) -> Iterator[Signature]:
    """One region changed: every argument of one element type given another (the body
    stays well typed), or the body replaced by ``arg0`` (another result type); a region
    program (if/case/while) by ``region_program.mutations``."""
    from conformance.core import region_program
    from conformance.specs import regions
    for i, text in enumerate(sig.regions):
        if region_program.is_program(text):     # a body of if/case/while: its own moves
            for v in region_program.mutations(text):
                yield dataclasses.replace(sig, regions=sig.regions[:i] + (v,)
                                          + sig.regions[i + 1:])
            continue
        try:
            region = regions.parse(text)
        except regions.RegionError:
            continue
        variants = []
        for t in dict.fromkeys(region.arg_types):
            for et in SEED_ELEMENT_TYPES:
                if et != t:
                    variants.append(regions.retyped(text, {t.name: et.name}))
        variants.append(regions.make(region.arg_types, "arg0") if region.arg_types else None)
        for v in variants:
            if v is None or v == text:
                continue
            try:
                regions.parse(v)
            except regions.RegionError:
                continue
            yield dataclasses.replace(sig, regions=sig.regions[:i] + (v,) + sig.regions[i + 1:])


def _rederive_outputs(spec: OpSpec, sig: Signature) -> Signature | None:
    """``sig`` with its result types evaluated from the spec's output expressions over
    its attributes, type binding and input types; None if they need more than that."""
    env: dict = {**binding_of(spec, sig), **sig.attributes}
    for t, tt in zip(spec.inputs, spec.split_inputs(sig.input_types)):
        env[t.name] = tt
    try:
        outs = []
        for t in spec.outputs:
            if t.type is not None and not t.variadic:      # a value type expression
                outs.append(value_type(ex.evaluate(t.type, env)))
                continue
            if t.variadic or len(t.shape) != 1:
                return None
            shape = ex.evaluate(t.shape[0], env)
            if any(int(d) < 0 for d in shape):
                return None
            outs.append(TensorType(tuple(shape), element_type(ex.evaluate(t.element_type, env))))
    except (ex.ExpressionError, ValueError, TypeError):
        return None
    return Signature.make(sig.op, sig.input_types, outs, sig.attributes, regions=sig.regions, **_grid(sig))


def _shape_env(spec: OpSpec, sig: Signature) -> dict[str, list[int]] | None:
    """The shape variables of a signature, read off tensors whose shape is just ``S``."""
    env: dict[str, list[int]] = {}
    if spec.variables or any(t.variadic for t in spec.inputs + spec.outputs):
        return None     # shapes depend on more than S: no rebuilding from a signature
    for t, tt in list(zip(spec.inputs, sig.input_types)) + list(zip(spec.outputs,
                                                                      sig.result_types)):
        if len(t.shape) == 1 and t.shape[0] in spec.shape_variables:
            env.setdefault(t.shape[0], list(tt.shape))
    return env if set(env) == set(spec.shape_variables) else None


def rebound(spec: OpSpec, sig: Signature) -> Iterator[Signature]:
    """``sig`` rebuilt with one type variable bound to each type outside its domain."""
    shapes = _shape_env(spec, sig)
    binding = binding_of(spec, sig)
    if shapes is None or set(binding) != set(spec.type_variables):
        return
    old_env = {**binding, **shapes}
    for name, (domain, _) in spec.type_variables.items():
        for et in SEED_ELEMENT_TYPES:
            if et in domain:
                continue
            env = {**old_env, name: et.name}
            try:
                def retyped(specs, types):
                    out = []
                    for t, tt in zip(specs, types):
                        alternatives = [s for s in t.shape
                                        if list(ex.evaluate(s, old_env)) == list(tt.shape)]
                        shape = ex.evaluate(alternatives[0] if alternatives else t.shape[0], env)
                        out.append(TensorType(tuple(shape),
                                              element_type(ex.evaluate(t.element_type, env))))
                    return out
                yield Signature.make(sig.op, retyped(spec.inputs, sig.input_types),
                                     retyped(spec.outputs, sig.result_types), sig.attributes, regions=sig.regions, **_grid(sig))
            except (ex.ExpressionError, ValueError):
                continue


def _list_mutations(xs: list[int]) -> Iterator[list[int]]:
    """Single changes of an integer-list attribute: one element up or down, set to -1,
    the list one longer or shorter, two elements swapped or made equal. A list of rows
    (replica_groups, source_target_pairs): one element up, down or -1, a row dropped or
    repeated, a column dropped, two rows' first elements made equal, no rows at all."""
    if xs and all(isinstance(r, (list, tuple)) for r in xs):
        rows = [list(r) for r in xs]
        for i, r in enumerate(rows):
            for j, x in enumerate(r):
                for v in (x - 1, x + 1, -1):
                    yield rows[:i] + [r[:j] + [v] + r[j + 1:]] + rows[i + 1:]
        yield rows[:-1]
        yield rows + [rows[-1]]
        if rows[0]:
            yield [r[:-1] for r in rows]
        if len(rows) >= 2 and rows[1]:
            yield [rows[0], [rows[0][0]] + rows[1][1:]] + rows[2:]
        yield []
        return
    for i in range(len(xs)):
        for v in (xs[i] - 1, xs[i] + 1, -1):
            if v != xs[i]:
                yield xs[:i] + [v] + xs[i + 1:]
    yield xs + [0]
    if xs:
        yield xs[:-1]
    if len(xs) >= 2:
        yield [xs[1], xs[0]] + xs[2:]
        if xs[0] != xs[1]:
            yield [xs[0], xs[0]] + xs[2:]


def _allowed_collateral(spec: OpSpec, target: str) -> set[str]:
    kinds = {c.id: c.kind for c in checks(spec)}
    if kinds.get(target) == "input_type":
        return {c.id for c in checks(spec) if c.kind in ("input_type", "output_type")}
    return set()


_VIOLATIONS: dict = {}


def _violations(spec: OpSpec, sig: Signature) -> tuple[str, ...]:
    """``violations`` once per signature (candidates() asks about every rule in turn).
    Keyed by the spec object's id; the entry holds the spec, so the id stays its own."""
    hit = _VIOLATIONS.get((id(spec), sig))
    if hit is not None and hit[0] is spec:
        return hit[1]
    if len(_VIOLATIONS) > 1 << 16:
        _VIOLATIONS.clear()
    broken = tuple(violations(sig, spec))
    _VIOLATIONS[(id(spec), sig)] = (spec, broken)
    return broken


def breaks_only(spec: OpSpec, sig: Signature, target: str) -> bool:
    broken = _violations(spec, sig)
    return target in broken and set(broken) - {target} <= _allowed_collateral(spec, target)


_CHANGES: dict = {}


def _changes(spec: OpSpec, valid: Signature) -> tuple[Signature, ...]:
    """Every single change of ``valid`` (mutations, then rebound ones), once per signature:
    candidates() asks for them once per rule, and drawing them dominates the invalid
    generator (convolution's rules asked ~40 times). Keyed like :func:`_violations`."""
    hit = _CHANGES.get((id(spec), valid))
    if hit is not None and hit[0] is spec:
        return hit[1]
    if len(_CHANGES) > 1 << 12:
        _CHANGES.clear()
    changes = tuple(mutations(spec, valid)) + tuple(rebound(spec, valid))
    _CHANGES[(id(spec), valid)] = (spec, changes)
    return changes


def candidates(spec: OpSpec, valid: Signature, target: str) -> list[Signature]:
    """Every single change of ``valid`` that breaks ``target`` and nothing else, and
    prints as another module (:func:`_same_program`)."""
    out = [m for m in _changes(spec, valid) if breaks_only(spec, m, target)]
    base = _printed(valid) if out else None
    if base is not None:
        out = [m for m in out if _printed(m) != base]
    return [dataclasses.replace(m, invalid=target) for m in out]


_PRINTED: dict = {}


def _printed(sig: Signature) -> str | None:
    """The module a backend receives for ``sig``; None where the emitter cannot print it
    (such a module is judged elsewhere). Once per signature: every rule's candidates
    compare against the valid module's text (anew when the custom_call targets change)."""
    from conformance.specs import custom_calls
    key = (sig, custom_calls.generation())
    if key in _PRINTED:
        return _PRINTED[key]
    from conformance.mlir.emitter import module_text
    try:
        text = module_text(sig)
    except Exception:  # noqa: BLE001 - a module the emitter cannot print is judged elsewhere
        text = None
    if len(_PRINTED) > 1 << 12:
        _PRINTED.clear()
    _PRINTED[key] = text
    return text


def _same_program(valid: Signature, changed: Signature) -> bool:
    """Whether a change leaves the module a backend receives byte for byte the valid
    one's (a value a region captures but never reads is not in the module): no backend
    could reject it, so it is no invalid program. Unknown (cannot print): False."""
    base = _printed(valid)
    return base is not None and _printed(changed) == base


def unbreakable(op: str) -> dict[str, str]:
    """Rules of ``op`` that no single change breaks alone, with the reason (cached; anew
    when the registered custom_call targets change, which custom_call's rules read)."""
    from conformance.specs import custom_calls
    return _unbreakable(op, custom_calls.generation())


@functools.lru_cache(maxsize=None)
def _unbreakable(op: str, generation: int) -> dict[str, str]:
    from conformance.generators import draw_cache
    return draw_cache.cached("unbreakable", op, (), lambda: _search_unbreakable(op))


def _search_unbreakable(op: str) -> dict[str, str]:
    """Tries each rule on a sample of canonical signatures (seconds for all ops)."""
    spec = load_spec(op)
    out: dict[str, str] = {c.id: c.unbreakable for c in spec.constraints if c.unbreakable}
    # of the seed's types, as the invalid programs (checking/plan.py plan_invalid)
    bindings = [b for b in spec.type_bindings() if not set(b.values()) & set(NEWER_FLOAT_TYPES)]
    step = max(1, len(bindings) // 6)
    samples = [canonical(spec, b, shape) for b in bindings[::step] for shape in ((2,), ())]
    for c in checks(spec):
        if c.id in out:
            continue
        if c.kind in ("input_type", "output_type"):
            tensors = spec.inputs if c.kind == "input_type" else spec.outputs
            index = int(c.id[1:]) - 1 if c.id[1:].isdigit() else 0
            # (an op with tokens can break a row with a token where a tensor belongs)
            has_tokens = any(t.value_kind in ("token", "tensor_or_token")
                             for t in spec.inputs + spec.outputs)
            if index < len(tensors) and len(tensors[index].types) == len(ALL_ELEMENT_TYPES) \
                    and not has_tokens:
                out[c.id] = "the type table allows every element type"
                continue
        if not any(candidates(spec, s, c.id) for s in samples):
            out[c.id] = ("no single change of a type, shape or attribute breaks it without "
                         "breaking another rule")
    return out


def breakable(spec: OpSpec) -> list[str]:
    """The rules of ``spec`` that the invalid-case generator breaks one at a time."""
    skip = unbreakable(spec.name)
    return [c.id for c in checks(spec) if c.id not in skip]


def invalid_signatures(op: "str | OpSpec", target: str,
                       profile: "ShapeProfile | str" = "default") -> st.SearchStrategy[Signature]:
    """Signatures of ``op`` that break rule ``target`` (and no other rule)."""
    spec = load_spec(op) if isinstance(op, str) else op
    rules = {c.id for c in checks(spec)}
    if target not in rules:
        raise KeyError(f"{spec.name} has no rule {target!r}; it has {', '.join(sorted(rules))}")
    if target in unbreakable(spec.name):
        raise ValueError(f"{spec.name} {target}: {unbreakable(spec.name)[target]}")

    @st.composite
    def strategy(draw):
        valid = draw(signatures(spec, None, profile))
        found = candidates(spec, valid, target)
        if not found:
            reject()
        return draw(st.sampled_from(found))

    return strategy()
