"""Comparing a backend's results with the oracle's, element by element, and
classifying every difference.

Element classes (DESIGN.md "Comparing results"):
- ``value``: a different value (integers, booleans, exact floats, infinities);
- ``nan``: NaN on one side only (any NaN equals any NaN);
- ``signed_zero``: +0 where -0 was due, or the reverse;
- ``accuracy``: beyond the op's ULP (or complex relative-error) bound;
- ``subnormal_flush``: the difference disappears when subnormal inputs and
  results are flushed to zero, i.e. the backend runs with FTZ/DAZ;
- ``precision``: beyond the op's error bound under a ``precision_config`` below
  HIGHEST, whose meaning the spec leaves open (#755): a reduced-precision pass the
  backend chose, which an expectations file can accept (conformance/checking/verdicts/contraction.py).
A case's class is the worst class among its elements; ``type`` is a result of
the wrong shape or element type. Elements the spec leaves implementation-defined
are masked: not counted as divergences, but whether the backend gave the
conventional value is recorded. Where the spec leaves only an order open (equal
keys of an unstable sort), the rule gives permutation groups instead of a mask:
each group's values are compared as a multiset (:func:`permuted_within_groups`).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import ml_dtypes
import numpy as np

from conformance.oracles import RuleMasks
from conformance.core.numerics import (element_bits as _element_bits, eps, flush_subnormals,
                                       is_subnormal, ordinal, permuted_within_groups,
                                       same_bits_or_nan, to_wide)
from conformance.specs import Accuracy
from conformance.core.types import element_type, type_of

# Outcome classes. Element-level ones first, in increasing severity.
PASS, SUBNORMAL_FLUSH, PRECISION, ACCURACY, BOUND, SIGNED_ZERO, NAN, VALUE, PROPERTY = range(9)
ELEMENT_CLASSES = ["pass", "subnormal_flush", "precision", "accuracy", "bound", "signed_zero",
                   "nan", "value", "property"]
# Case-level outcomes beyond the element classes.
CASE_OUTCOMES = ELEMENT_CLASSES + ["type", "backend_error", "crash", "timeout", "unsupported",
                                   "accepted_invalid", "rejected"]
DIVERGENCES = ["value", "nan", "signed_zero", "accuracy", "bound", "property",
               "subnormal_flush", "precision", "type",
               "accepted_invalid", "backend_error", "crash", "timeout"]
SEVERITY = {name: i for i, name in enumerate(
    ["pass", "rejected", "unsupported", "subnormal_flush", "precision", "accuracy", "bound",
     "signed_zero",
     "nan", "value", "property", "type", "accepted_invalid", "backend_error", "timeout", "crash"])}

# ULP histogram buckets: upper bounds (inclusive); the last bucket is "more".
ULP_BUCKETS = [0, 1, 2, 4, 8, 16, 64, 1024, 2 ** 20]
ULP_BUCKET_LABELS = ["0", "1", "2", "3-4", "5-8", "9-16", "17-64", "65-1024", "1025-2^20",
                     ">2^20"]


def worst(classes: Sequence[str]) -> str:
    return max(classes, key=lambda c: SEVERITY.get(c, 0), default="pass")


@dataclasses.dataclass(slots=True)
class BatchVerdict:
    """The comparison of one batch of cases (leading axis = case). Slots: a verdict
    kind that wants to say more declares a field here (an attribute set from outside
    raises AttributeError)."""

    case_classes: np.ndarray               # int8 per case: element class code, or -1 for type
    element_classes: list[np.ndarray]      # per result: int8 per element
    errors: list[np.ndarray | None]        # per result: ULP (or eps) error per element
    impl_defined: dict[str, dict[str, int]]
    type_message: str | None = None
    #: per result element type, the error as a fraction of the bound over the checked
    #: elements (the ``bound`` kind: conformance.core.results.bound_histogram's entries;
    #: the runner sums them into the signature record's ``bound_hist``); empty otherwise
    bound_hist: dict[str, dict] = dataclasses.field(default_factory=dict)
    #: per case, a note for its divergence message (the ``property`` kind: which
    #: properties failed; "" for a case without one); empty: no notes
    notes: list[str] = dataclasses.field(default_factory=list)
    #: per result, the error of each element as a fraction of its bound (the ``bound``
    #: and ``residual`` kinds; None or empty: not a bound verdict): what
    #: :func:`class_errors` reads for the bound classes
    fractions: list = dataclasses.field(default_factory=list)
    #: per diverging case class, what its witnesses look like (:func:`class_errors`:
    #: worst error, its unit, cases, cases involving a non-finite value); what an
    #: expectations entry's ``looks_like`` is matched against
    class_errors: dict[str, dict] = dataclasses.field(default_factory=dict)

    def case_class_names(self) -> list[str]:
        return ["type" if c < 0 else ELEMENT_CLASSES[c] for c in self.case_classes]

    def diverging_cases(self) -> np.ndarray:
        return np.nonzero(self.case_classes != PASS)[0]

    def counts(self) -> dict[str, int]:
        if self.type_message is not None:
            return {"type": int(self.case_classes.size)}
        n = np.bincount(self.case_classes.astype(np.intp), minlength=len(ELEMENT_CLASSES))
        return {ELEMENT_CLASSES[i]: int(c) for i, c in enumerate(n) if c}


def _not_close(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Wrong beyond any accuracy question: the sign differs, or the error exceeds the
    value itself (not one correct bit). Such misses are ``value``, not ``accuracy``."""
    with np.errstate(invalid="ignore", over="ignore"):
        sign_flip = (np.sign(a) * np.sign(e)) < 0
        return sign_flip | (np.abs(a - e) > np.abs(e))


def _float_classes(a: np.ndarray, e: np.ndarray, acc: Accuracy) -> tuple[np.ndarray, np.ndarray]:
    """Classes and ULP errors for real floats of one type (a: actual, e: expected)."""
    cls = np.zeros(e.shape, np.int8)
    same_bits = a.view(element_type(a.dtype).bits_dtype) == e.view(element_type(e.dtype).bits_dtype)
    if same_bits.all():
        # Every element the oracle's bit for bit (most batches): class pass and error 0,
        # what every kind below gives there (an ulp bound is never negative: Accuracy).
        return cls, np.zeros(e.shape, np.float64)
    aw, ew = a.astype(np.float64), e.astype(np.float64)
    a_nan, e_nan = np.isnan(aw), np.isnan(ew)
    if acc.kind == "bits":
        cls[~same_bits] = VALUE
        cls[~same_bits & a_nan & e_nan] = NAN
        return cls, np.where(same_bits, 0.0, np.nan)
    both_nan = a_nan & e_nan
    one_nan = a_nan ^ e_nan
    equal = (aw == ew) | both_nan
    signed_zero = (aw == 0) & (ew == 0) & (np.signbit(aw) != np.signbit(ew))
    err = np.abs(ordinal(a) - ordinal(e)).astype(np.float64)
    # (equal values are one ordinal, ±0 both 0: only two NaNs need their error set)
    err = np.where(both_nan, 0.0, err)
    err = np.where(one_nan, np.inf, err)
    if acc.kind == "ulp":
        inf_mismatch = (np.isinf(aw) | np.isinf(ew)) & (aw != ew) & ~one_nan
        beyond = (err > acc.bound) & ~one_nan
        cls[beyond] = ACCURACY
        cls[beyond & _not_close(aw, ew)] = VALUE
        cls[inf_mismatch] = VALUE
        err = np.where(inf_mismatch, np.inf, err)
    else:  # exact
        cls[~equal & ~one_nan] = VALUE
    cls[signed_zero] = SIGNED_ZERO
    cls[one_nan] = NAN
    return cls, err


def _complex_classes(a: np.ndarray, e: np.ndarray, acc: Accuracy) -> tuple[np.ndarray, np.ndarray]:
    comp = element_type(e.dtype).component
    parts = [(np.array(a.real, order="C").astype(comp.dtype),
              np.array(e.real, order="C").astype(comp.dtype)),
             (np.array(a.imag, order="C").astype(comp.dtype),
              np.array(e.imag, order="C").astype(comp.dtype))]
    a_nan = np.isnan(a.real) | np.isnan(a.imag)
    e_nan = np.isnan(e.real) | np.isnan(e.imag)
    if acc.kind in ("exact", "bits", "ulp"):
        part_acc = acc
        results = [_float_classes(x, y, part_acc) for x, y in parts]
        cls = np.maximum(results[0][0], results[1][0])
        err = np.maximum(results[0][1], results[1][1])
    else:  # rel_eps: normwise relative error in units of eps
        aw, ew = to_wide(a), to_wide(e)
        finite = np.isfinite(ew) & np.isfinite(aw)
        scale = np.maximum(np.abs(ew), float(ml_dtypes.finfo(comp.dtype).tiny))
        with np.errstate(all="ignore"):
            err = np.where(finite, np.abs(aw - ew) / scale / eps(comp), np.inf)
        exact = (aw == ew)
        err = np.where(exact, 0.0, err)
        cls = np.where(err > acc.bound, ACCURACY, PASS).astype(np.int8)
        cls[(err > acc.bound) & (np.abs(aw - ew) > np.abs(ew))] = VALUE   # not one bit right
        cls[~finite & ~exact] = VALUE
    both_nan = a_nan & e_nan
    cls[both_nan] = PASS
    err = np.where(both_nan, 0.0, err)
    cls[a_nan ^ e_nan] = NAN
    return cls, err


def classify(actual: np.ndarray, expected: np.ndarray, acc: Accuracy
             ) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-element classes (and float errors) of one result array."""
    et = element_type(expected.dtype)
    if et.is_float:
        with np.errstate(invalid="ignore", over="ignore"):
            # (contiguous for the bit views; neither is written to: no copy needed)
            return _float_classes(_contiguous(actual), _contiguous(expected), acc)
    if et.is_complex:
        with np.errstate(invalid="ignore", over="ignore"):
            return _complex_classes(actual, expected, acc)
    cls = np.where(to_wide(actual) == to_wide(expected), PASS, VALUE).astype(np.int8)
    return cls, None


def _contiguous(x) -> np.ndarray:
    """``x`` as a C-contiguous array, copied only where it is not one (0-d stays 0-d)."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.array(x, order="C")


def reduce_to_cases(cls: np.ndarray) -> np.ndarray:
    if cls.ndim == 0:
        return cls.reshape(1)
    if cls.size == 0:
        return np.zeros(cls.shape[0], np.int8)
    return cls.reshape(cls.shape[0], -1).max(axis=1)


def compare_batch(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
                  accuracy: Accuracy, impl_masks: "RuleMasks | Mapping | None" = None,
                  inputs: Sequence[np.ndarray] | None = None,
                  reevaluate: Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]] | None = None,
                  allowance: "Callable[[int, np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None"
                  = None,
                  rules_on: "Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], RuleMasks]"
                  " | None" = None, moves_values: bool = False) -> BatchVerdict:
    """Compare a batch (leading axis = case) of backend results with the oracle's.

    ``impl_masks`` (a :class:`~conformance.oracles.RuleMasks`, what
    conformance.oracles.implementation_defined returns; a plain ``{rule: mask}`` or None
    is taken as :meth:`RuleMasks.of` makes it) says which elements the
    spec leaves open and what it still allows there: a rule whose ``allowed:`` is
    ``any`` masks its elements; one with named alternatives passes an element whose
    value is the oracle's or one of them (bit for bit, any NaN equals any NaN) and
    leaves any other value its class; permutation groups compare as multisets.

    ``reevaluate`` (the oracle on other inputs) lets the comparator tell a
    subnormal flush from a wrong value, element by element (:func:`_detect_flush`);
    ``rules_on(inputs, results)`` gives the implementation-defined rules on other
    inputs (what the spec allows on flushed inputs); ``moves_values``: the op's results
    are input values it picks by comparing them (the spec's ``moves_values``).
    ``allowance(i, actual, expected,
    classes)`` (a verdict kind's hook, conformance.checking.verdicts) may reclassify result
    ``i``'s elements before that, e.g. pass a difference within a bound the spec allows
    and class the rest ``bound``.
    """
    batch = expected[0].shape[0] if expected and expected[0].ndim else 1
    rules = RuleMasks.of(impl_masks)
    groups = {r: m for r, m in rules.items() if np.asarray(m).dtype.kind in "iu"}
    masked = {r: m for r, m in rules.items() if r not in groups}
    if len(actual) != len(expected) or any(
            not _same_type(np.asarray(a), e) for a, e in zip(actual, expected)):
        got = ", ".join(str(type_of(np.asarray(a))) for a in actual)
        want = ", ".join(str(type_of(e)) for e in expected)
        return BatchVerdict(np.full(batch, -1, np.int8), [], [], {},
                            f"results are ({got}); expected ({want})")
    group_stats: dict[str, dict[str, int]] = {}
    if groups:
        actual, expected, group_stats = _permutation_groups(actual, expected, groups,
                                                             accuracy)
        if reevaluate is not None:
            plain = reevaluate

            def reevaluate(xs):     # the oracle on other inputs, in the same canonical order
                out = list(plain(xs))
                for labels in groups.values():
                    out = permuted_within_groups(out, labels)
                return out
    element_classes, errors = [], []
    for i, (a, e) in enumerate(zip(actual, expected)):
        cls, err = classify(np.asarray(a), e, accuracy)
        if allowance is not None:
            cls = allowance(i, np.asarray(a), e, cls)
        element_classes.append(cls)
        errors.append(err)
    if reevaluate is not None and inputs is not None:
        _detect_flush(element_classes, expected, actual, inputs, accuracy, reevaluate,
                      rules if not groups else RuleMasks(), rules_on if not groups else None,
                      moves_values)
    impl_stats: dict[str, dict] = dict(group_stats)
    if masked:
        # each result's own shape (results of an op may differ in shape:
        # batch_norm_training's output and its per-feature statistics)
        passed = [np.zeros(c.shape, bool) for c in element_classes]
        for rule in masked:
            each = [np.broadcast_to(rules.for_result(rule, i), c.shape)
                    for i, c in enumerate(element_classes)]
            kind = rules.allowed(rule)
            conventional = [m & (c == PASS) for m, c in zip(each, element_classes)]
            st = {"elements": sum(int(np.count_nonzero(m)) for m in each),
                  "conventional": sum(int(np.count_nonzero(c)) for c in conventional)}
            if kind != "set":
                for p, m in zip(passed, each):
                    p |= m
            else:
                st.update(_allowed_set(rules, rule, each, element_classes, actual, passed))
            impl_stats[rule] = st
        for i, c in enumerate(element_classes):
            c = c.copy()
            c[passed[i]] = PASS
            element_classes[i] = c
            if errors[i] is not None:
                errors[i] = np.where(passed[i], np.nan, errors[i])
    case_classes = np.zeros(batch, np.int8)
    for c in element_classes:
        case_classes = np.maximum(case_classes, reduce_to_cases(c))
    return BatchVerdict(case_classes, element_classes, errors, impl_stats)


def _same_type(a: np.ndarray, e: np.ndarray) -> bool:
    """``type_of(a) == type_of(e)``; arrays of one shape and dtype (every batch but a
    wrong one) answer without looking their types up."""
    return (a.shape == e.shape and a.dtype == e.dtype) or type_of(a) == type_of(e)


def _allowed_set(rules: RuleMasks, rule: str, masks: Sequence[np.ndarray], classes, actual,
                 passed) -> dict:
    """Elements of ``rule`` pass when the backend gave the oracle's value or one of the
    rule's alternatives (bit for bit, any NaN equals any NaN); ``passed`` gathers them.
    Alternatives given by a test (RuleMasks.tests: a set without a finite list of
    members) are tried last, on the backend's values.
    Returns the rule's record: how many elements took each alternative (the first that
    matches, in the spec's order; ``any`` for those the rule leaves unbounded) and how
    many lay outside the set (divergences of their own class)."""
    open_ = [m & (c != PASS) for m, c in zip(masks, classes)]
    chosen: dict[str, int] = {}
    outside = 0
    if not any(o.any() for o in open_):
        return {"alternatives": chosen, "outside": 0}
    alternatives = rules.alternatives(rule)
    members = None          # the rule's tests (RuleMasks.member), run once, where needed
    for i, o in enumerate(open_):
        anywhere = rules.anywhere(rule, i)
        left = o.copy()
        if anywhere is not None:
            hit = left & np.broadcast_to(anywhere, left.shape)
            if hit.any():
                chosen["any"] = chosen.get("any", 0) + int(np.count_nonzero(hit))
                left &= ~hit
        a = np.asarray(actual[i])
        for name, candidates in alternatives.items():
            if not left.any():
                break
            hit = np.zeros(left.shape, bool)
            for cand in candidates:
                hit |= left & same_bits_or_nan(a, np.asarray(cand[i]))
            if hit.any():
                chosen[name] = chosen.get(name, 0) + int(np.count_nonzero(hit))
                left &= ~hit
        if left.any() and rules.tests(rule):
            if members is None:
                members = rules.member(rule, [np.asarray(x) for x in actual])
            for name, (masks, flushed) in members.items():
                hit = left & np.broadcast_to(masks[i], left.shape)
                if hit.any():
                    chosen[name] = chosen.get(name, 0) + int(np.count_nonzero(hit))
                    left &= ~hit
                # outside the set, explained by the element's own subnormal inputs
                fl = left & np.broadcast_to(flushed[i], left.shape)
                if fl.any():
                    classes[i][fl] = SUBNORMAL_FLUSH
        passed[i] |= (masks[i] & (classes[i] == PASS)) | (o & ~left)
        outside += int(np.count_nonzero(left))
    return {"alternatives": chosen, "outside": outside}


#: a verdict's ``impl_defined`` entries named ``statistics:NAME`` are not rules but a
#: statistical test a property verdict ran (conformance/checking/verdicts/rng.py): {tests, failed,
#: samples, worst (the largest statistic / threshold)}; the runner records them apart
STATISTICS_PREFIX = "statistics:"


def merge_statistics(into: dict, stats: dict) -> None:
    """Add one batch's (or record's) statistical tests to a total: counts summed, the
    worst ratio of statistic to threshold kept."""
    for name, st in stats.items():
        d = into.setdefault(name, {"tests": 0, "failed": 0, "samples": 0, "worst": 0.0})
        for k in ("tests", "failed", "samples"):
            d[k] += int(st.get(k, 0))
        d["worst"] = max(float(d["worst"]), float(st.get("worst", 0.0)))


def merge_impl_stats(into: dict, rule_stats: dict) -> None:
    """Add one batch's (or record's) per-rule implementation-defined counts to a total."""
    for rule, st in rule_stats.items():
        d = into.setdefault(rule, {"elements": 0, "conventional": 0})
        d["elements"] += int(st.get("elements", 0))
        d["conventional"] += int(st.get("conventional", 0))
        if "alternatives" in st:
            alts = d.setdefault("alternatives", {})
            for name, n in st["alternatives"].items():
                alts[name] = alts.get(name, 0) + int(n)
            d["outside"] = d.get("outside", 0) + int(st.get("outside", 0))


def _permutation_groups(actual, expected, groups, accuracy):
    """Both sides put in canonical order within each implementation-defined group, and
    per rule how many of its elements the backend had in the oracle's order."""
    actual = [np.asarray(a) for a in actual]
    stats = {}
    for rule, labels in groups.items():
        in_group = np.broadcast_to(np.asarray(labels) > 0, np.asarray(expected[0]).shape)
        same = sum(int(np.count_nonzero(classify(a, e, accuracy)[0][in_group] == PASS))
                   for a, e in zip(actual, expected))
        stats[rule] = {"elements": int(np.count_nonzero(in_group)) * len(expected),
                       "conventional": same}
    for labels in groups.values():
        actual = permuted_within_groups(actual, labels)
        expected = permuted_within_groups(expected, labels)
    return actual, expected, stats


def _detect_flush(classes, expected, actual, inputs, accuracy, reevaluate,
                  rules: RuleMasks, rules_on=None, moves_values: bool = False) -> None:
    """Reclassify failing elements as ``subnormal_flush`` where flushing subnormals to
    zero explains them, each on its own evidence (never its batch-mates'):

    - FTZ (results flushed): the element's own oracle value is tiny (a nonzero
      subnormal, or the smallest normal, which a result tiny before rounding becomes)
      and the backend gave zero there (of either sign: flushing loses the sign of what
      it flushed), every other part (complex) as the oracle's;
    - DAZ (inputs flushed): the backend gave what the spec allows on the inputs with
      their subnormals flushed (``reevaluate``: the oracle there; ``rules_on``: the
      implementation-defined rules there), up to FTZ and the sign of a zero, and that
      allowance is new at this element: the oracle's value there differs from the
      oracle's value here, or a rule leaves the element open there and not here, or a
      rule's alternative differs there from here (a flushed subnormal made two complex
      values compare equal). For an op that moves values it picks by comparing them
      (``moves_values``: maximum, sort), a backend value that is a nonzero subnormal
      of the case's own inputs counts as its flush (compared as zero, moved unchanged).

    A backend that computes a nonzero subnormal where neither hypothesis gives one is
    not flushing anything, and a ±0 difference with no flushed subnormal behind it is
    ``signed_zero``.
    """
    failing = [c >= ACCURACY for c in classes]
    if not any(f.any() for f in failing):
        return
    daz, daz_rules = None, RuleMasks()
    # (Only a shortcut: with no subnormal input the flushed-input oracle is the oracle.)
    if any(is_subnormal(np.asarray(x)).any() for x in inputs):
        flushed = [flush_subnormals(np.asarray(x)) for x in inputs]
        with np.errstate(all="ignore"):
            daz = reevaluate(flushed)
            if rules_on is not None:
                daz_rules = RuleMasks.of(rules_on(flushed, daz))
    for i, (a, e) in enumerate(zip(actual, expected)):
        f = failing[i]
        if not f.any():
            continue
        a, e = np.asarray(a), np.asarray(e)
        et = element_type(e.dtype)
        floating = et.is_float or et.is_complex     # (FTZ flushes float results only)
        rescued = f & _ftz_explains(a, e, accuracy, tie=False) if floating \
            else np.zeros(f.shape, bool)
        if daz is not None:
            d = np.asarray(daz[i])
            ok = _daz_allows(a, d, e, i, daz_rules, rules, accuracy)
            if moves_values:
                moved = f & is_subnormal(a) & _inputs_hold(a, inputs)
                if moved.any():
                    ok |= moved & _daz_allows(flush_subnormals(a), d, e, i, daz_rules, rules,
                                              accuracy)
            rescued |= f & ok
        classes[i][rescued] = SUBNORMAL_FLUSH


def _bool_masks(rules: RuleMasks) -> dict:
    return {r: m for r, m in rules.items() if np.asarray(m).dtype == bool}


def _daz_allows(v, d, e, i, daz_rules: RuleMasks, rules: RuleMasks, accuracy) -> np.ndarray:
    """Per element: is ``v`` what the spec allows on the flushed inputs (the oracle's
    value there ``d``, or what a rule allows there), up to FTZ and the sign of a zero,
    where that differs from what it allows on the inputs themselves (``e``, ``rules``)?"""
    ok = _ftz_explains(v, d, accuracy, tie=True) & ~same_bits_or_nan(d, e)
    plain = _bool_masks(rules)
    for rule, m in _bool_masks(daz_rules).items():
        m = np.broadcast_to(daz_rules.for_result(rule, i), ok.shape)
        before = np.broadcast_to(rules.for_result(rule, i), ok.shape) \
            if rule in plain else np.zeros(ok.shape, bool)
        kind = daz_rules.allowed(rule)
        if kind != "set":
            ok |= m & ~before
            continue
        plain_kind = rules.allowed(rule) if rule in plain else None
        anywhere = daz_rules.anywhere(rule, i)
        if anywhere is not None:
            was = rules.anywhere(rule, i) if plain_kind == "set" else None
            was = before & np.broadcast_to(was, ok.shape) if was is not None else \
                np.zeros(ok.shape, bool)
            ok |= m & np.broadcast_to(anywhere, ok.shape) & ~was
        was_alts = rules.alternatives(rule) if plain_kind == "set" else {}
        for name, candidates in daz_rules.alternatives(rule).items():
            before_cands = was_alts.get(name, [])
            for k, cand in enumerate(candidates):
                c = np.asarray(cand[i])
                new = ~before
                if k < len(before_cands):
                    new = new | ~same_bits_or_nan(c, np.asarray(before_cands[k][i]))
                else:
                    new = np.ones(ok.shape, bool)
                ok |= m & new & _ftz_explains(v, c, accuracy, tie=True)
    return ok


def _ftz_explains(a: np.ndarray, e: np.ndarray, accuracy: Accuracy, tie: bool) -> np.ndarray:
    """Per element: ``a`` is ``e`` with some of ``e``'s tiny parts (nonzero subnormal or
    the smallest normal) flushed to zero of either sign, and at least one part flushed
    (``tie``: or ``a`` is ``e`` up to the sign of a zero)."""
    et = element_type(e.dtype)
    if et.is_complex:
        comp = et.component.dtype
        parts = [(np.array(a.real, comp), np.array(e.real, comp)),
                 (np.array(a.imag, comp), np.array(e.imag, comp))]
    else:
        parts = [(a, e)]
    flushed = np.zeros(e.shape, bool)
    alt_parts = []
    for ap, ep in parts:
        with np.errstate(invalid="ignore"):
            f = _tiny(ep) & (ap.astype(np.float64) == 0)
        flushed |= f
        alt_parts.append(np.where(f, ap, ep).astype(ep.dtype))
    if et.is_complex:
        alt = np.empty(e.shape, e.dtype)
        alt.real, alt.imag = alt_parts
    else:
        alt = alt_parts[0]
    cls, _ = classify(a, alt, accuracy)
    ok = (cls == PASS) & flushed
    if tie:
        ok |= (cls == PASS) | (cls == SIGNED_ZERO)
    return ok


def _inputs_hold(a: np.ndarray, inputs) -> np.ndarray:
    """Per element of ``a`` (leading axis = case): is its bit pattern a value of one of
    its own case's inputs of the same element type?"""
    out = np.zeros(a.shape, bool)
    if a.ndim == 0:
        return out
    ab = _element_bits(a).view(f"V{a.dtype.itemsize}").reshape(a.shape)
    same = [np.asarray(x) for x in inputs if np.asarray(x).dtype == a.dtype]
    for c in range(a.shape[0]):
        vals = [_element_bits(x[c] if x.ndim else x).view(f"V{a.dtype.itemsize}").reshape(-1)
                for x in same]
        if vals:
            out[c] = np.isin(ab[c], np.concatenate(vals))
    return out


def _tiny(x: np.ndarray) -> np.ndarray:
    """Subnormals, and values equal to the smallest normal (tiny before rounding?)."""
    et = element_type(x.dtype)
    if not (et.is_float or et.is_complex):
        return np.zeros(x.shape, bool)
    tiny = float(ml_dtypes.finfo(et.component.dtype).smallest_normal)
    parts = [x.real, x.imag] if et.is_complex else [x]
    out = np.zeros(x.shape, bool)
    for p in parts:
        w = np.abs(np.asarray(p).astype(np.float64))
        out |= (w > 0) & (w <= tiny)
    return out


def ulp_histogram(errors: Sequence[np.ndarray | None]) -> list[int]:
    """Counts of element errors per ULP bucket (masked and non-float elements excluded)."""
    hist = np.zeros(len(ULP_BUCKET_LABELS), np.int64)
    for err in errors:
        if err is None:
            continue
        e = err[~np.isnan(err)]
        if e.size:
            idx = _ULP_EDGES.searchsorted(e, side="left")
            hist += np.bincount(idx, minlength=len(ULP_BUCKET_LABELS))[:len(ULP_BUCKET_LABELS)]
    return hist.tolist()


_ULP_EDGES = np.array(ULP_BUCKETS, np.float64)
_ULP_EDGES.flags.writeable = False


def max_error(errors: Sequence[np.ndarray | None]) -> float | None:
    best = None
    for e in errors:
        if e is None or not e.size:
            continue
        nan = np.isnan(e)
        if nan.all():
            continue
        # (the array's own max where it holds no NaN: what np.nanmax gives, cheaper)
        m = float(np.nanmax(e)) if nan.any() else float(e.max())
        best = m if best is None else max(best, m)
    return best


#: the classes measured as a fraction of their bound where the verdict gives one
#: (BatchVerdict.fractions); the others in the verdict's error unit (ULPs, or eps for
#: ``rel_eps``)
BOUND_MEASURED = (BOUND, PRECISION, SUBNORMAL_FLUSH)


def _not_float(x: np.ndarray) -> bool:
    """Not an array of a float or complex suite type (integers, booleans, other)."""
    if x.dtype.kind in "biuOU":
        return True
    try:
        et = element_type(x.dtype)
    except Exception:  # noqa: BLE001 - an array of no suite type: not a value
        return True
    return not (et.is_float or et.is_complex)


def _nonfinite_cases(arrays: Sequence[np.ndarray], batch: int) -> np.ndarray:
    """Per case: does a float or complex array of ``arrays`` (leading axis = case) hold
    an infinity or a NaN?"""
    out = np.zeros(batch, bool)
    for x in arrays:
        x = np.asarray(x)
        if x.ndim == 0 or x.shape[0] != batch or _not_float(x):
            continue
        wide = to_wide(x).reshape(batch, -1)
        out |= ~np.isfinite(wide).all(axis=1)
    return out


def class_errors(v: BatchVerdict, inputs: Sequence[np.ndarray],
                 expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
                 unit: str = "ulp") -> dict[str, dict]:
    """What the witnesses of each diverging case class look like (an expectations
    entry's ``looks_like`` is matched against it): ``worst``, the largest error of the
    elements of that class in the cases of that class (in ``unit``, or ``bound`` for the
    bound classes of a verdict giving fractions of its bound; None where no element
    error is measured: integers, properties), ``cases`` and ``nonfinite`` (of those cases,
    how many have an infinite or NaN input, oracle result or backend result: where every
    float input and result has the shape of the results, element by element, at a
    witness's own position; otherwise anywhere in the case)."""
    if v.type_message is not None or not v.case_classes.size or not (v.case_classes > PASS).any():
        return {}
    batch = int(v.case_classes.shape[0])
    arrays = [np.asarray(x) for x in (*inputs, *expected, *actual)]
    floats = [x for x in arrays if np.ndim(x) and not _not_float(x)]
    shapes = {np.shape(c) for c in v.element_classes}
    aligned = None
    if len(shapes) == 1 and all(np.shape(x) == next(iter(shapes)) for x in floats):
        # element-aligned (elementwise ops): a witness involves inf/NaN where its own
        # inputs or results are, not where another element of its case is
        aligned = np.zeros(next(iter(shapes)), bool)
        for x in floats:
            aligned |= ~np.isfinite(to_wide(x))
    nonfinite = _nonfinite_cases(arrays, batch) if aligned is None else None
    out: dict[str, dict] = {}
    for code in np.unique(v.case_classes):
        if code <= PASS:
            continue
        cases = v.case_classes == code
        if aligned is not None:
            wit = np.logical_or.reduce([c.reshape(batch, -1) == code
                                        for c in v.element_classes]) & cases[:, None]
            nonfinite = (wit & aligned.reshape(batch, -1)).any(axis=1)
        by_fraction = code in BOUND_MEASURED and any(f is not None for f in v.fractions)
        sources = v.fractions if by_fraction else v.errors
        worst = None
        for i, cls in enumerate(v.element_classes):
            src = sources[i] if i < len(sources) else None
            if src is None or (cls.ndim and cls.shape[0] != batch):
                continue
            src = np.broadcast_to(np.asarray(src, np.float64), cls.shape).reshape(batch, -1)
            vals = src[(cls.reshape(batch, -1) == code) & cases[:, None]]
            vals = vals[~np.isnan(vals)]
            if vals.size:
                m = float(vals.max())
                worst = m if worst is None else max(worst, m)
        out[ELEMENT_CLASSES[code]] = {
            "worst": worst, "unit": "bound" if by_fraction else unit,
            "cases": int(cases.sum()), "nonfinite": int((cases & nonfinite).sum())}
    return out


def merge_class_errors(into: dict[str, dict], other: "Mapping[str, dict] | None") -> dict:
    """Add ``class_errors`` (:func:`class_errors`, or a signature record's) to a total:
    the worst of the worst errors, cases and non-finite cases summed; malformed entries
    (a newer or older file's) are skipped."""
    for cls, d in (other or {}).items():
        if not isinstance(d, Mapping):
            continue
        t = into.setdefault(str(cls), {"worst": None, "unit": d.get("unit"), "cases": 0,
                                       "nonfinite": 0})
        w = d.get("worst")
        if w is not None:
            try:
                w = float(w)
            except (TypeError, ValueError):
                w = None
        if w is not None and not np.isnan(w):
            t["worst"] = w if t["worst"] is None else max(float(t["worst"]), w)
        t["cases"] += int(d.get("cases") or 0)
        t["nonfinite"] += int(d.get("nonfinite") or 0)
    return into
