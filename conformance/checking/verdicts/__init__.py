"""How results are judged: verdict kinds as spec data, one registered function each.

An op's spec says, per element type, how its results are judged (the ``accuracy:``
table of specs/ops/*.yaml, or a tolerance profile): ``exact``, ``bits``,
``{ulp: N}``, ``{rel_eps: N}``, or ``{KIND: VALUE, ...}`` for any other kind
registered here. :func:`judge` dispatches on the entry's kind, never on the op, and
every front-end (CLI runner, pytest plugin, repro, replay, bench) reaches a verdict
through it (conformance.checking.checker). Registering a kind once is enough for all of them::

    @verdict_kind("my_kind")
    def my_kind(j: Judgement) -> BatchVerdict: ...

Kinds:

- ``exact`` / ``bits`` / ``ulp`` / ``rel_eps`` (:func:`elementwise`): element by element
  against the oracle (conformance.checking.compare).
- ``bound`` (:func:`bounded`): a per-element error bound computed from the inputs by a
  named function of :data:`BOUNDS`, where the spec allows several results (an
  implementation-defined evaluation order); class ``bound`` beyond it.
- ``residual`` (:func:`residual`): a named property of inputs and results of
  :data:`RESIDUALS` with its bound, where a backward-stable answer is what the spec can
  ask for; class ``bound`` beyond it.
- ``property`` (:func:`properties`): named checks of :data:`PROPERTIES` where the spec
  fixes no values; class ``property`` when one fails.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

from conformance.checking.compare import (BOUND, NAN, PASS, PROPERTY, SUBNORMAL_FLUSH, VALUE,
                                          BatchVerdict, class_errors, reduce_to_cases,
                                          compare_batch)
from conformance.core.case import Signature
from conformance.oracles import RuleMasks
from conformance.core.types import TensorType, element_type, type_of
from conformance.specs import Accuracy, OpSpec


class UnknownVerdict(ValueError):
    """A spec or tolerance profile names a verdict kind (or bound, residual, property)
    that nothing registered; one line naming it."""


@dataclasses.dataclass(slots=True)
class Judgement:
    """What a verdict function sees: one batch (leading axis = case) of one signature.
    Slots: what a verdict function keeps on it is a declared field (``memo``)."""

    sig: Signature
    spec: OpSpec
    accuracy: Accuracy
    inputs: Sequence[np.ndarray]
    expected: Sequence[np.ndarray]
    actual: Sequence[np.ndarray]
    #: the implementation-defined rules (conformance.oracles.implementation_defined); a
    #: plain ``{rule: mask}`` or None given here becomes a RuleMasks (RuleMasks.of)
    masks: RuleMasks
    reevaluate: Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]] | None = None
    #: runs the backend again on the same inputs (for the ``deterministic`` property)
    rerun: Callable[[], Sequence[np.ndarray]] | None = None
    #: the implementation-defined rules on other inputs and their oracle results
    #: (conformance.oracles.implementation_defined): what the spec allows on flushed inputs
    rules_on: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], Any] | None = None
    #: runs the same executable on other (batched) inputs: an rng state chain
    run_on: Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]] | None = None
    #: compiles the signature anew and runs that on (batched) inputs: determinism across
    #: separate compiles
    run_fresh: Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]] | None = None
    #: what verdict functions compute once per judgement and share (name -> value; the
    #: rng properties' state chain), never an input of the verdict
    memo: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.masks = RuleMasks.of(self.masks)

    @property
    def batch(self) -> int:
        e = self.expected
        return int(e[0].shape[0]) if e and np.ndim(e[0]) else 1


Verdict = Callable[[Judgement], BatchVerdict]
VERDICTS: dict[str, Verdict] = {}


def _registrar(table: dict, what: str):
    """A decorator factory registering functions by name in ``table``, once each."""
    def register(name: str):
        def deco(fn):
            if name in table:
                raise RuntimeError(f"{what} {name!r} registered twice")
            table[name] = fn
            return fn
        return deco
    return register


def verdict_kind(*kinds: str) -> Callable[[Verdict], Verdict]:
    """Register a verdict function under one or more kind names."""
    def deco(fn: Verdict) -> Verdict:
        for k in kinds:
            if k in VERDICTS:
                raise RuntimeError(f"verdict kind {k!r} registered twice")
            VERDICTS[k] = fn
        return fn
    return deco


def _load_extensions() -> None:
    """Import the modules of this package (the verdict functions of an op family:
    reduction.py's ``reduction`` bound), which register here."""
    import importlib
    import pkgutil
    from pathlib import Path
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__package__}.{info.name}")


def check_known(accuracy: Accuracy, where: str) -> None:
    """Raise :class:`UnknownVerdict` if ``accuracy`` names a kind (or a bound, residual
    or property function) that is not registered."""
    table = {"bound": BOUNDS, "residual": RESIDUALS}.get(accuracy.kind)
    if accuracy.kind not in VERDICTS or (table is not None and
                                         accuracy.options.get(accuracy.kind) not in table) or (
            accuracy.kind == "property" and
            not set(_property_names(accuracy)) <= set(PROPERTIES)):
        _load_extensions()
    if accuracy.kind not in VERDICTS:
        raise UnknownVerdict(f"{where}: unknown verdict kind {accuracy.kind!r}; known: "
                             f"{', '.join(sorted(VERDICTS))}")
    table = {"bound": BOUNDS, "residual": RESIDUALS}.get(accuracy.kind)
    if table is not None and accuracy.options.get(accuracy.kind) not in table:
        raise UnknownVerdict(f"{where}: unknown {accuracy.kind} function "
                             f"{accuracy.options.get(accuracy.kind)!r}; known: "
                             f"{', '.join(sorted(table))}")
    if accuracy.kind == "property":
        for name in _property_names(accuracy):
            if name not in PROPERTIES:
                raise UnknownVerdict(f"{where}: unknown property {name!r}; known: "
                                     f"{', '.join(sorted(PROPERTIES))}")


def judge(j: Judgement) -> BatchVerdict:
    """The verdict on one batch: results of the wrong number, shape or element type are
    class ``type`` whatever the kind; otherwise the kind's function decides."""
    _check_known_once(j.accuracy, j.spec)
    mismatch = type_mismatch(j.expected, j.actual)
    if mismatch is not None:
        return BatchVerdict(np.full(j.batch, -1, np.int8), [], [], {}, mismatch)
    verdict = VERDICTS[j.accuracy.kind](j)
    # what each diverging class's witnesses look like (expectations' looks_like)
    verdict.class_errors = class_errors(verdict, j.inputs, j.expected, j.actual,
                                        "eps" if j.accuracy.kind == "rel_eps" else "ulp")
    return verdict


#: verdict entries :func:`check_known` passed (a registered kind stays registered): the
#: check runs on every batch otherwise
_KNOWN: set = set()


def _check_known_once(accuracy: Accuracy, spec: OpSpec) -> None:
    try:
        if accuracy in _KNOWN and accuracy.kind in VERDICTS:
            return
    except TypeError:                       # (an entry holding a list: checked each time)
        check_known(accuracy, f"{spec.path}: accuracy")
        return
    check_known(accuracy, f"{spec.path}: accuracy")
    _KNOWN.add(accuracy)


def type_mismatch(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> str | None:
    if len(actual) == len(expected) and all(
            isinstance(a, np.ndarray) and isinstance(e, np.ndarray) and a.shape == e.shape
            and a.dtype == e.dtype for a, e in zip(actual, expected)):
        return None         # (arrays of one shape and dtype are of one type: most batches)
    if len(actual) != len(expected) or any(
            type_of(np.asarray(a)) != type_of(np.asarray(e)) for a, e in zip(actual, expected)):
        got = ", ".join(str(type_of(np.asarray(a))) for a in actual)
        want = ", ".join(str(type_of(np.asarray(e))) for e in expected)
        return f"results are ({got}); expected ({want})"
    return None


# ---------------------------------------------------------------------------
# exact, bits, ulp, rel_eps
# ---------------------------------------------------------------------------

@verdict_kind("exact", "bits", "ulp", "rel_eps")
def elementwise(j: Judgement) -> BatchVerdict:
    """Element by element against the oracle (conformance.checking.compare.classify).

    Sound where the spec fixes one result per element: ``exact`` for the IEEE-754
    operations, integers and data movement (any NaN equals any NaN, ±0 differ), ``bits``
    where even NaN payloads are fixed, ``ulp`` / ``rel_eps`` where the spec gives no
    accuracy and the suite's bound stands in for "close to the true value"."""
    return compare_batch(j.expected, j.actual, j.accuracy, j.masks, j.inputs, j.reevaluate,
                         rules_on=j.rules_on, moves_values=j.spec.moves_values)


# ---------------------------------------------------------------------------
# bound: an error bound per element, computed from the inputs
# ---------------------------------------------------------------------------

#: name -> function(judgement) -> one float64 array per result (broadcastable to it):
#: the largest |actual - expected| that some evaluation the spec allows can give.
BOUNDS: dict[str, Callable[[Judgement], list[np.ndarray]]] = {}


bound_function = _registrar(BOUNDS, "bound function")

#: name of a bound function -> function(judgement) -> one float64 array per result: how
#: much further than the bound flushing subnormal intermediate results to zero (FTZ) can
#: move a result; a difference within bound + that is class ``subnormal_flush``. Optional.
FLUSH_ALLOWANCES: dict[str, Callable[[Judgement], list[np.ndarray]]] = {}

flush_allowance = _registrar(FLUSH_ALLOWANCES, "flush allowance")

#: name of a bound function -> function(judgement) -> None (no such latitude here), or
#: (class code, one float64 array per result): a looser bound within which a finite
#: difference beyond the bound (class ``bound``, or ``value`` beyond a bound of 0) gets
#: that class instead, where the spec leaves the precision itself open (dot_general's
#: precision_config below HIGHEST: ``precision``); optionally a third item, (results,
#: bounds) of the reduced precision itself (the oracle on the operands a bf16 pass reads),
#: within whose bound an element whose value or oracle value is not finite gets that
#: class too (an operand that a bf16 pass turns into an infinity). Optional.
LOOSER_BOUNDS: dict[str, Callable[[Judgement], "tuple[int, list[np.ndarray]] | None"]] = {}

looser_bound = _registrar(LOOSER_BOUNDS, "looser bound")


def unit_roundoff(et) -> float:
    """u = eps / 2 of a float (or complex component) type: round-to-nearest's relative
    error bound."""
    et = element_type(et)
    return float(ml_dtypes.finfo(et.component.dtype).eps) / 2


def gamma(n: np.ndarray, u: float) -> np.ndarray:
    """γ(n) = n·u / (1 − n·u) (Higham, Accuracy and Stability of Numerical Algorithms,
    §3.1): |fl(Σ x_i) − Σ x_i| ≤ γ(n−1)·Σ|x_i| for ANY order of n−1 additions."""
    n = np.asarray(n, np.float64)
    nu = n * u
    return np.where(nu < 1, nu / np.maximum(1 - nu, 1e-300), np.inf)


def _widened(sig: Signature) -> Signature:
    """The same signature with every real float / complex element type made f64 /
    complex128, so that the op's own oracle computes magnitudes without rounding."""
    def wide(t):
        et = t.element_type
        if et.is_complex:
            return TensorType(t.shape, element_type("f64"))
        if et.is_float:
            return TensorType(t.shape, element_type("f64"))
        return t
    return dataclasses.replace(sig, input_types=tuple(wide(t) for t in sig.input_types),
                               result_types=tuple(wide(t) for t in sig.result_types))


@bound_function("accumulation")
def accumulation(j: Judgement) -> list[np.ndarray]:
    """For ops whose result elements are sums of terms (reduce with add, dot_general,
    convolution, and the trivial case add): the oracle of the op itself, run at float64
    on |inputs|, gives S = Σ|term| per result element, and on all-ones inputs the number
    of terms n. Any evaluation order of the sum at the result type's precision is within
    γ(n−1)·S of the exact value, and the oracle's own (correctly rounded) result within
    u·S of it, so |actual − expected| ≤ γ(n)·S for every legal order (Higham §3.1).
    Products that underflow add at most n·η/2 (η: the smallest subnormal)."""
    from conformance import oracles
    wide = _widened(j.sig)
    mags = [np.abs(np.asarray(x)).astype(np.float64) if element_type(x.dtype).is_float
            or element_type(x.dtype).is_complex else np.asarray(x) for x in j.inputs]
    ones = [np.ones_like(m) for m in mags]
    s = oracles.evaluate_batch(wide, mags, j.spec)
    n = oracles.evaluate_batch(wide, ones, j.spec)
    out = []
    for e, si, ni in zip(j.expected, s, n):
        et = element_type(np.asarray(e).dtype)
        if not (et.is_float or et.is_complex):
            out.append(np.zeros(np.shape(e)))
            continue
        u = unit_roundoff(et)
        eta = float(ml_dtypes.finfo(et.component.dtype).smallest_subnormal)
        ni = np.abs(np.asarray(ni, np.float64))
        out.append(gamma(ni, u) * np.abs(np.asarray(si, np.float64)) + ni * eta / 2)
    return out


def _difference(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """|actual − oracle|, float64; complex: the modulus of the parts' differences, a part
    equal in both (the same infinity included) differing by 0, so that a sum with an
    infinite real part still has its imaginary part judged within the bound (each part
    is a sum of its own, its tree as open), not NaN."""
    if not (np.iscomplexobj(a) or np.iscomplexobj(e)):
        return np.abs(a.astype(np.float64) - e.astype(np.float64))
    aw, ew = a.astype(np.complex128), e.astype(np.complex128)
    parts = [np.where(x == y, 0.0, x - y) for x, y in ((aw.real, ew.real),
                                                       (aw.imag, ew.imag))]
    return np.hypot(*parts)


def _all_finite(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if np.iscomplexobj(x):
        return np.isfinite(x.real) & np.isfinite(x.imag)
    return np.isfinite(x.astype(np.float64)) if x.dtype.kind == "f" or \
        element_type(x.dtype).is_float else np.ones(x.shape, bool)


def _matched_difference(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """:func:`_difference` with the same infinity, or NaN beside NaN, in a part counting
    0 (real results too): finite where every non-finite part is matched."""
    aw, ew = np.asarray(a).astype(np.complex128), np.asarray(e).astype(np.complex128)
    parts = []
    for x, y in ((aw.real, ew.real), (aw.imag, ew.imag)):
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        parts.append(np.where(same, 0.0, x - y))
    return np.hypot(*parts)


@verdict_kind("bound")
def bounded(j: Judgement) -> BatchVerdict:
    """Exact comparison, except that a finite difference no larger than the named
    bound function's bound passes (another order the spec allows) and a larger one is
    class ``bound``. NaN, infinities and ±0 are judged as by ``exact``: every legal
    order gives the same non-finite result and the same zero sign for these ops'
    exact-value inputs, so a backend that differs there is wrong, not reordered."""
    name = j.accuracy.options.get("bound")
    limits = BOUNDS[name](j)
    flushes = FLUSH_ALLOWANCES[name](j) if name in FLUSH_ALLOWANCES else None
    looser = LOOSER_BOUNDS[name](j) if name in LOOSER_BOUNDS else None
    diffs: dict[int, np.ndarray] = {}

    def allowance(i: int, a: np.ndarray, e: np.ndarray, cls: np.ndarray) -> np.ndarray:
        lim = np.broadcast_to(np.asarray(limits[i], np.float64), cls.shape)
        with np.errstate(all="ignore"):
            diff = _difference(a, e)
        diffs[i] = diff
        finite = np.isfinite(diff)
        cls = cls.copy()
        wrong = (cls == VALUE) & finite
        cls[wrong & (diff <= lim)] = PASS
        # beyond a bound of 0 (a result every legal order gives exactly) the value is
        # simply wrong
        cls[wrong & (diff > lim) & (lim > 0)] = BOUND
        if flushes is not None:
            extra = np.broadcast_to(np.asarray(flushes[i], np.float64), cls.shape)
            cls[wrong & (diff > lim) & (diff <= lim + extra)] = SUBNORMAL_FLUSH
        return cls

    verdict = compare_batch(j.expected, j.actual, Accuracy("exact"), j.masks, j.inputs,
                            j.reevaluate, allowance=allowance, rules_on=j.rules_on,
                            moves_values=j.spec.moves_values)
    if looser is not None and verdict.type_message is None:
        code, wide, *rest = looser
        reduced = rest[0] if rest else None
        for i, cls in enumerate(verdict.element_classes):
            if i not in diffs:
                continue
            lim = np.broadcast_to(np.asarray(wide[i], np.float64), cls.shape)
            d = diffs[i]
            cls[((cls == BOUND) | (cls == VALUE)) & np.isfinite(d) & (d <= lim)] = code
            if reduced is not None:
                # what the reduced precision itself gives where it leaves the finite range
                ya = np.asarray(reduced[0][i])
                wa = np.broadcast_to(np.asarray(reduced[1][i], np.float64), cls.shape)
                a, e = np.asarray(j.actual[i]), np.asarray(j.expected[i])
                with np.errstate(all="ignore"):
                    da = _matched_difference(a, ya)
                    top = ~_all_finite(ya) | ~_all_finite(e)
                cls[((cls == BOUND) | (cls == VALUE) | (cls == NAN)) & top
                    & np.isfinite(da) & (da <= wa)] = code
        verdict.case_classes = np.zeros(j.batch, np.int8)
        for cls in verdict.element_classes:
            verdict.case_classes = np.maximum(verdict.case_classes, reduce_to_cases(cls))
    if verdict.type_message is None:
        # the report's histogram of the error as a fraction of the bound (a declared
        # field: the runner sums it into the signature record's ``bound_hist``)
        verdict.bound_hist = bound_fractions(j, diffs, limits)
        # each element's error as a fraction of its bound (what looks_like measures for
        # the bound classes)
        verdict.fractions = [_fraction(diffs[i], limits[i]) if i in diffs else None
                             for i in range(len(verdict.element_classes))]
    return verdict


def _fraction(diff: np.ndarray, limit) -> np.ndarray:
    """|actual − oracle| / bound per element (NaN where not finite; inf beyond a bound of
    0)."""
    lim = np.broadcast_to(np.asarray(limit, np.float64), np.shape(diff))
    with np.errstate(all="ignore"):
        frac = np.where(lim > 0, diff / lim, np.where(diff > 0, np.inf, 0.0))
    return np.where(np.isfinite(diff), frac, np.nan)


def bound_fractions(j: Judgement, diffs: dict[int, np.ndarray],
                    limits: Sequence[np.ndarray]) -> dict[str, dict]:
    """Per result element type: |actual − oracle| / bound over the checked elements (finite
    difference, not covered by an implementation-defined rule), as
    conformance.core.results.bound_histogram counts them."""
    from conformance.core.results import bound_histogram, merge_bound_hist
    out: dict[str, dict] = {}
    for i, d in diffs.items():
        et = element_type(np.asarray(j.expected[i]).dtype)
        if not (et.is_float or et.is_complex):
            continue
        checked = np.isfinite(d)
        for rule, m in j.masks.items():
            if np.asarray(m).dtype.kind == "b":
                checked &= ~np.broadcast_to(j.masks.for_result(rule, i), d.shape)
        lim = np.broadcast_to(np.asarray(limits[i], np.float64), d.shape)
        merge_bound_hist(out, {et.name: bound_histogram(d[checked], lim[checked])})
    return out


# ---------------------------------------------------------------------------
# residual: a property of inputs and results with its bound
# ---------------------------------------------------------------------------

#: name -> function(judgement) -> (residual per case, allowed per case), float64 of
#: shape (batch,), and optionally a third array: int8 per case, a class (compare's codes)
#: that overrides the residual's where it is not PASS (a structural check that failed: a
#: Cholesky factor's diagonal that is not positive, a NaN the result dropped). A case
#: passes when residual <= allowed. The function reads ``j.masks`` for what the spec leaves
#: open inside a case; a case whose every result element lies under some rule is masked
#: here.
RESIDUALS: dict[str, Callable[[Judgement], tuple]] = {}


residual_function = _registrar(RESIDUALS, "residual function")


def _case_verdict(j: Judgement, case_cls: np.ndarray) -> BatchVerdict:
    """A verdict whose class is decided per case: every element of every result carries
    its case's class (the minimiser and the cross-backend table read elements)."""
    element = []
    for a in j.actual:
        shape = np.shape(a)
        c = np.broadcast_to(case_cls.reshape((-1,) + (1,) * (len(shape) - 1)), shape) \
            if len(shape) else case_cls.reshape(())
        element.append(np.array(c, np.int8))
    return BatchVerdict(case_cls.astype(np.int8), element, [None] * len(j.actual), {})


@verdict_kind("residual")
def residual(j: Judgement) -> BatchVerdict:
    """The named residual (e.g. ‖L·Lᴴ − A‖ / ‖A‖ for a Cholesky factor) within its
    allowed size passes, whatever the result's bits: sound where the spec can ask only
    for a backward-stable answer. Beyond it: ``bound``; a NaN residual where the oracle's
    result is finite: ``value``; a class the function gives (a structural check) wins.
    A case whose every result element an implementation-defined rule covers passes
    (masked), and what the backend gave under each rule is recorded."""
    out = RESIDUALS[j.accuracy.options.get("residual")](j)
    res, allowed = np.asarray(out[0], np.float64), np.asarray(out[1], np.float64)
    override = np.asarray(out[2], np.int8) if len(out) > 2 else None
    finite_expected = np.ones(j.batch, bool)
    for e in j.expected:
        e = np.asarray(e)
        if element_type(e.dtype).is_float or element_type(e.dtype).is_complex:
            finite_expected &= np.isfinite(e.reshape(j.batch, -1)).all(axis=1) \
                if e.size else True
    cls = np.full(j.batch, PASS, np.int8)
    cls[~(res <= allowed)] = BOUND
    cls[np.isnan(res) & finite_expected] = VALUE
    cls[np.isnan(res) & ~finite_expected] = PASS
    if override is not None:
        cls = np.where(override != PASS, override, cls).astype(np.int8)
    masked, stats = _residual_masks(j)
    cls[masked] = PASS
    verdict = _case_verdict(j, cls)
    verdict.impl_defined.update(stats)
    with np.errstate(all="ignore"):
        frac = np.where(allowed > 0, res / allowed, np.where(res > 0, np.inf, 0.0))
    # the residual as a fraction of what is allowed, per case (looks_like's measure)
    verdict.fractions = [np.broadcast_to(frac.reshape((-1,) + (1,) * (np.ndim(a) - 1)),
                                         np.shape(a)) if np.ndim(a) else frac.reshape(())
                         for a in j.actual]
    return verdict


def _residual_masks(j: Judgement) -> tuple[np.ndarray, dict[str, dict]]:
    """Cases whose every result element some implementation-defined rule covers (a
    matrix the spec leaves undefined), and per rule what the backend gave at its
    elements: how many (``elements``), how many the oracle's values bit for bit or both
    NaN (``conventional``), and by kind (``alternatives``: nan, inf, finite)."""
    from conformance.core.numerics import same_bits_or_nan
    masked = np.zeros(j.batch, bool)
    stats: dict[str, dict] = {}
    for rule, m in j.masks.items():
        if np.asarray(m).dtype.kind != "b":
            continue
        covered = np.ones(j.batch, bool)
        st = {"elements": 0, "conventional": 0, "alternatives": {}, "outside": 0}
        for i, (a, e) in enumerate(zip(j.actual, j.expected)):
            a, e = np.asarray(a), np.asarray(e)
            mi = j.masks.for_result(rule, i)
            mi = np.broadcast_to(np.asarray(mi, bool), a.shape)
            if a.size:
                covered &= mi.reshape(j.batch, -1).all(axis=1)
            st["elements"] += int(np.count_nonzero(mi))
            st["conventional"] += int(np.count_nonzero(mi & same_bits_or_nan(a, e)))
            if element_type(a.dtype).is_float or element_type(a.dtype).is_complex:
                with np.errstate(invalid="ignore"):
                    w = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
                    nan = np.isnan(w)
                    inf = np.isinf(w) & ~nan
                alts = st["alternatives"]
                for name, k in (("nan", nan), ("inf", inf), ("finite", ~nan & ~inf)):
                    n = int(np.count_nonzero(mi & k))
                    if n:
                        alts[name] = alts.get(name, 0) + n
        if any(np.asarray(x).size for x in j.actual):
            masked |= covered
        if st["elements"]:
            stats[rule] = st
    return masked, stats


# ---------------------------------------------------------------------------
# property: named checks where the spec fixes no values
# ---------------------------------------------------------------------------

#: name -> function(judgement) -> bool per case (True: the property holds), or (bool per
#: case, records): records is rule name -> statistics in the implementation-defined
#: table's form ({elements, conventional, alternatives: {name: count}}), what a property
#: measured where the spec leaves the choice to the backend.
PROPERTIES: dict[str, Callable[[Judgement], np.ndarray]] = {}


property_check = _registrar(PROPERTIES, "property")


def _property_names(accuracy: Accuracy) -> list[str]:
    names = accuracy.options.get("property", ())
    return [names] if isinstance(names, str) else list(names)


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(np.uint8).reshape(x.shape[0] if x.ndim else 1, -1)


@property_check("deterministic")
def deterministic(j: Judgement) -> np.ndarray:
    """The same inputs give the same bits when run again. Sound for every op the spec
    defines as a function of its inputs (rng_bit_generator included: its state is an
    input); a backend that differs from itself cannot be conformant whichever value
    the spec leaves open."""
    if j.rerun is None:
        return np.ones(j.batch, bool)
    again = j.rerun()
    ok = np.ones(j.batch, bool)
    for a, b in zip(j.actual, again):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return np.zeros(j.batch, bool)
        if a.size:
            ok &= (_bits(a) == _bits(b)).all(axis=1)
    return ok


@property_check("same_multiset")
def same_multiset(j: Judgement) -> np.ndarray:
    """Each case's results hold the oracle's values in some order (bit patterns
    compared as multisets). Sound where the spec fixes the values but leaves their
    positions open (an unstable sort's ties, a shuffle)."""
    ok = np.ones(j.batch, bool)
    for a, e in zip(j.actual, j.expected):
        a, e = np.asarray(a), np.asarray(e)
        if a.size:
            ok &= _multiset_equal(a, e, j.batch)
    return ok


def _multiset_equal(a: np.ndarray, e: np.ndarray, batch: int) -> np.ndarray:
    size = a.dtype.itemsize
    ra = np.ascontiguousarray(a).view(np.uint8).reshape(batch, -1, size)
    re_ = np.ascontiguousarray(e).view(np.uint8).reshape(batch, -1, size)
    out = np.ones(batch, bool)
    for c in range(batch):
        ka = sorted(map(bytes, ra[c]))
        ke = sorted(map(bytes, re_[c]))
        out[c] = ka == ke
    return out


@verdict_kind("property")
def properties(j: Judgement) -> BatchVerdict:
    """Every named property must hold for a case (class ``property`` otherwise); the
    result's type and shape are checked by :func:`judge` for every kind."""
    ok = np.ones(j.batch, bool)
    records: dict[str, dict] = {}
    failed: list[list[str]] = [[] for _ in range(j.batch)]
    for name in _property_names(j.accuracy):
        out = PROPERTIES[name](j)
        if isinstance(out, tuple):
            out, more = out
            records.update(more)
        holds = np.broadcast_to(np.asarray(out, bool), (j.batch,))
        for c in np.nonzero(~holds)[0]:
            failed[c].append(name)
        ok &= holds
    cls = np.where(ok, PASS, PROPERTY).astype(np.int8)
    verdict = _case_verdict(j, cls)
    verdict.impl_defined.update(records)
    # per case, which properties failed (what a divergence's message says)
    verdict.notes = [f"property failed: {', '.join(f)}" if f else "" for f in failed]
    return verdict


def describe(accuracy: Accuracy) -> dict[str, Any]:
    """How a verdict is recorded with a reproducer (enough to judge it again)."""
    return {"kind": accuracy.kind, "bound": accuracy.bound,
            **({"params": [list(p) for p in accuracy.params]} if accuracy.params else {})}


def from_record(rec: dict[str, Any] | None) -> Accuracy | None:
    if not rec:
        return None
    params = tuple((k, _tuple(v)) for k, v in rec.get("params", ()))
    return Accuracy(rec["kind"], float(rec.get("bound", 0.0)), params)


def _tuple(v: Any) -> Any:
    return tuple(_tuple(x) for x in v) if isinstance(v, list) else v


__all__ = ["Judgement", "VERDICTS", "BOUNDS", "RESIDUALS", "PROPERTIES", "verdict_kind",
           "bound_function", "looser_bound", "residual_function", "property_check", "judge",
           "check_known",
           "UnknownVerdict", "gamma", "unit_roundoff", "describe", "from_record"]
