"""The spec's own examples as golden cases: built from the YAML, checked against any
implementation (the oracle, a backend).

An example is compared exactly (NaN equals NaN, +0 and -0 differ) unless it
declares a tolerance, which examples whose printed results are rounded do
(``cosine`` prints 0.0 for cos(pi/2)). Where the spec makes an element of an
example implementation-defined (a rule of its ``implementation_defined:`` covers it),
the element is checked against what the rule allows instead (the printed value or one
of the rule's alternatives, bit for bit; any value where the rule bounds nothing; any
order within a permutation group), as a run's verdict checks it.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from conformance.core.case import Case, Signature
from conformance.core.literals import from_value_literal, to_literal
from conformance.core.numerics import permuted_within_groups, same_bits_or_nan, to_wide
from conformance.specs import OpSpec
from conformance.core.types import element_type, type_of, value_type


@dataclasses.dataclass(frozen=True)
class Example:
    spec: OpSpec
    index: int
    name: str
    case: Case
    expected: tuple[np.ndarray, ...]
    rtol: float | None
    atol: float | None
    note: str | None

    @property
    def id(self) -> str:
        return f"{self.spec.name}:example:{self.index}"


def _regions(spec: OpSpec, given: dict) -> tuple[str, ...]:
    """An example's region texts in spec order (a variadic region's list flattened)."""
    out: list[str] = []
    for r in spec.regions:
        v = given.get(r.name, [] if r.variadic else "")
        out += list(v) if r.variadic else [v]
    return tuple(out)


def examples(spec: OpSpec) -> list[Example]:
    out = []
    for i, ex in enumerate(spec.examples):
        ins = _flat(ex["inputs"].values())
        outs = _flat(ex["expected"].values())
        grid = ex.get("grid") or [1, 1]
        # A tuple-typed value's literal lists its elements; the case holds its leaves.
        # On a grid (collectives) a value is one literal per process, stacked.
        inputs = [x for v in ins for x in _literal(v, grid)]
        expected = tuple(x for v in outs for x in _literal(v, grid))
        sig = Signature.make(spec.name, [value_type(v["type"]) for v in ins],
                             [value_type(v["type"]) for v in outs],
                             ex.get("attributes", {}),
                             regions=_regions(spec, ex.get("regions", {})),
                             num_replicas=grid[0], num_partitions=grid[1])
        tol = ex.get("tolerance", {})
        out.append(Example(spec, i, ex.get("name", f"example {i + 1}"),
                           Case(sig, tuple(inputs), case_id=f"{spec.name}:example:{i}"),
                           expected, tol.get("rtol"), tol.get("atol"), ex.get("note")))
    return out


def _literal(v: dict, grid) -> list[np.ndarray]:
    """One example tensor's arrays; on a grid of several processes, [processes] + shape."""
    if grid[0] * grid[1] == 1:
        return list(from_value_literal(v["value"], v["type"]))
    per = [from_value_literal(x, v["type"]) for x in v["value"]]
    return [np.stack([p[i] for p in per]) for i in range(len(per[0]))]


def _flat(values) -> list[dict]:
    """Example tensors in order; a variadic input's list is spliced in place."""
    return [item for v in values for item in (v if isinstance(v, list) else [v])]


def _same(a: np.ndarray, e: np.ndarray, rtol: float | None, atol: float | None) -> np.ndarray:
    et = element_type(e.dtype)
    if not (et.is_float or et.is_complex):
        return to_wide(a) == to_wide(e)
    aw, ew = to_wide(a), to_wide(e)
    parts = [(aw.real, ew.real), (aw.imag, ew.imag)] if et.is_complex else [(aw, ew)]
    ok = np.ones(e.shape, bool)
    for x, y in parts:
        both_nan = np.isnan(x) & np.isnan(y)
        if rtol is None and atol is None:
            same = (x == y) & (np.signbit(x) == np.signbit(y))
        else:
            with np.errstate(invalid="ignore"):
                close = np.abs(x - y) <= (atol or 0.0) + (rtol or 0.0) * np.abs(y)
            same = close | ((x == y) & np.isinf(y))
        ok &= both_nan | same
    return ok


def _allowed(example: Example, actual: Sequence[np.ndarray]
             ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per result: the example's expected values and the backend's (both put in one
    order within permutation groups), and the elements that pass by what an
    implementation-defined rule allows there."""
    from conformance import oracles
    expected = [np.asarray(e) for e in example.expected]
    actual = [np.asarray(a) for a in actual]
    passed = [np.zeros(e.shape, bool) for e in expected]
    if not example.spec.implementation_defined:
        return expected, actual, passed
    sig = example.case.signature
    stacked = [np.asarray(x)[None] for x in example.case.inputs]
    try:
        with np.errstate(all="ignore"):
            oracle = oracles.evaluate_batch(sig, stacked, example.spec)
            rules = oracles.implementation_defined(sig, stacked, example.spec, oracle)
    except Exception:  # noqa: BLE001 - no rule applies where the oracle cannot say
        return expected, actual, passed
    for rule, mask in rules.items():
        mask = np.asarray(mask)[0]
        if mask.dtype.kind in "iu":
            expected = permuted_within_groups(expected, mask)
            actual = permuted_within_groups(actual, mask)
            continue
        kind = rules.allowed(rule)
        for i, a in enumerate(actual):
            # result i's own mask (a per_result rule's; results may differ in shape)
            m = np.broadcast_to(np.asarray(rules.for_result(rule, i))[0], passed[i].shape)
            if kind != "set":
                passed[i] |= m
                continue
            anywhere = rules.anywhere(rule, i)
            if anywhere is not None:
                passed[i] |= m & np.broadcast_to(anywhere[0], m.shape)
            for candidates in rules.alternatives(rule).values():
                for cand in candidates:
                    c = np.asarray(cand[i])[0]
                    if c.shape == a.shape and c.dtype == a.dtype:
                        passed[i] |= m & same_bits_or_nan(a, c)
            if rules.tests(rule) and all(np.shape(x) == np.shape(e) and x.dtype == e.dtype
                                         for x, e in zip(actual, expected)):
                for masks, _ in rules.member(rule, [x[None] for x in actual]).values():
                    passed[i] |= m & np.asarray(masks[i])[0]
    return expected, actual, passed


def mismatch(example: Example, actual: Sequence[np.ndarray]) -> str | None:
    """None if ``actual`` matches the example's expected results (or, at elements the
    spec makes implementation-defined, what it allows there), else why not."""
    if len(actual) != len(example.expected):
        return f"{len(actual)} results, expected {len(example.expected)}"
    for i, (a, e) in enumerate(zip(actual, example.expected)):
        a = np.asarray(a)
        if type_of(a) != type_of(e):
            return f"result {i} is {type_of(a)}, expected {type_of(e)}"
    expected, canonical, passed = _allowed(example, actual)
    for i, (a, e) in enumerate(zip(actual, example.expected)):
        a = np.asarray(a)
        ok = _same(canonical[i], expected[i], example.rtol, example.atol) | passed[i]
        if not ok.all():
            return (f"result {i}: got {to_literal(a)}, expected {to_literal(e)}"
                    + (f" (rtol={example.rtol}, atol={example.atol})"
                       if example.rtol or example.atol else ""))
    return None
