"""Comparing a backend's results with the oracle's, element by element, and
classifying every difference.

Element classes (DESIGN.md "Comparing results"):
- ``value``: a different value (integers, booleans, exact floats, infinities);
- ``nan``: NaN on one side only (any NaN equals any NaN);
- ``signed_zero``: +0 where -0 was due, or the reverse;
- ``accuracy``: beyond the op's ULP (or complex relative-error) bound;
- ``subnormal_flush``: the difference disappears when subnormal inputs and
  results are flushed to zero, i.e. the backend runs with FTZ/DAZ.
A case's class is the worst class among its elements; ``type`` is a result of
the wrong shape or element type. Elements the spec leaves implementation-defined
are masked: not counted as divergences, but whether the backend gave the
conventional value is recorded. Where the spec leaves only an order open (equal
keys of an unstable sort), the rule gives permutation groups instead of a mask:
each group's values are compared as a multiset (:func:`permuted_within_groups`).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import ml_dtypes
import numpy as np

from conformance.core.numerics import eps, flush_subnormals, is_subnormal, ordinal, to_wide
from conformance.specs import Accuracy
from conformance.core.types import element_type, type_of

# Outcome classes. Element-level ones first, in increasing severity.
PASS, SUBNORMAL_FLUSH, ACCURACY, BOUND, SIGNED_ZERO, NAN, VALUE, PROPERTY = range(8)
ELEMENT_CLASSES = ["pass", "subnormal_flush", "accuracy", "bound", "signed_zero", "nan", "value",
                   "property"]
# Case-level outcomes beyond the element classes.
CASE_OUTCOMES = ELEMENT_CLASSES + ["type", "backend_error", "crash", "timeout", "unsupported",
                                   "accepted_invalid", "rejected"]
DIVERGENCES = ["value", "nan", "signed_zero", "accuracy", "bound", "property",
               "subnormal_flush", "type",
               "accepted_invalid", "backend_error", "crash", "timeout"]
SEVERITY = {name: i for i, name in enumerate(
    ["pass", "rejected", "unsupported", "subnormal_flush", "accuracy", "bound", "signed_zero",
     "nan", "value", "property", "type", "accepted_invalid", "backend_error", "timeout", "crash"])}

# ULP histogram buckets: upper bounds (inclusive); the last bucket is "more".
ULP_BUCKETS = [0, 1, 2, 4, 8, 16, 64, 1024, 2 ** 20]
ULP_BUCKET_LABELS = ["0", "1", "2", "3-4", "5-8", "9-16", "17-64", "65-1024", "1025-2^20",
                     ">2^20"]


def worst(classes: Sequence[str]) -> str:
    return max(classes, key=lambda c: SEVERITY.get(c, 0), default="pass")


@dataclasses.dataclass
class BatchVerdict:
    """The comparison of one batch of cases (leading axis = case)."""

    case_classes: np.ndarray               # int8 per case: element class code, or -1 for type
    element_classes: list[np.ndarray]      # per result: int8 per element
    errors: list[np.ndarray | None]        # per result: ULP (or eps) error per element
    impl_defined: dict[str, dict[str, int]]
    type_message: str | None = None

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
    aw, ew = a.astype(np.float64), e.astype(np.float64)
    a_nan, e_nan = np.isnan(aw), np.isnan(ew)
    same_bits = a.view(element_type(a.dtype).bits_dtype) == e.view(element_type(e.dtype).bits_dtype)
    if acc.kind == "bits":
        cls[~same_bits] = VALUE
        cls[~same_bits & a_nan & e_nan] = NAN
        return cls, np.where(same_bits, 0.0, np.nan)
    both_nan = a_nan & e_nan
    one_nan = a_nan ^ e_nan
    equal = (aw == ew) | both_nan
    signed_zero = (aw == 0) & (ew == 0) & (np.signbit(aw) != np.signbit(ew))
    err = np.abs(ordinal(a) - ordinal(e)).astype(np.float64)
    err = np.where(both_nan | (equal & ~signed_zero), 0.0, err)
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
            return _float_classes(np.array(actual, order="C"), np.array(expected, order="C"), acc)
    if et.is_complex:
        with np.errstate(invalid="ignore", over="ignore"):
            return _complex_classes(actual, expected, acc)
    cls = np.where(to_wide(actual) == to_wide(expected), PASS, VALUE).astype(np.int8)
    return cls, None


def _reduce_to_cases(cls: np.ndarray) -> np.ndarray:
    if cls.ndim == 0:
        return cls.reshape(1)
    if cls.size == 0:
        return np.zeros(cls.shape[0], np.int8)
    return cls.reshape(cls.shape[0], -1).max(axis=1)


def compare_batch(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
                  accuracy: Accuracy, impl_masks: dict[str, np.ndarray] | None = None,
                  inputs: Sequence[np.ndarray] | None = None,
                  reevaluate: Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]] | None = None,
                  allowance: "Callable[[int, np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None"
                  = None) -> BatchVerdict:
    """Compare a batch (leading axis = case) of backend results with the oracle's.

    ``reevaluate`` (the oracle on other inputs) lets the comparator tell a
    subnormal flush from a wrong value: where the backend's result matches the
    oracle on flushed inputs, or the flushed oracle result, the class is
    ``subnormal_flush``. ``allowance(i, actual, expected, classes)`` (a verdict kind's
    hook, conformance.verdicts) may reclassify result ``i``'s elements before that, e.g.
    pass a difference within a bound the spec allows and class the rest ``bound``.
    """
    batch = expected[0].shape[0] if expected and expected[0].ndim else 1
    impl_masks = dict(impl_masks or {})
    groups = {r: m for r, m in impl_masks.items() if np.asarray(m).dtype.kind in "iu"}
    if len(actual) != len(expected) or any(
            type_of(np.asarray(a)) != type_of(e) for a, e in zip(actual, expected)):
        got = ", ".join(str(type_of(np.asarray(a))) for a in actual)
        want = ", ".join(str(type_of(e)) for e in expected)
        return BatchVerdict(np.full(batch, -1, np.int8), [], [], {},
                            f"results are ({got}); expected ({want})")
    group_stats: dict[str, dict[str, int]] = {}
    if groups:
        actual, expected, group_stats = _permutation_groups(actual, expected, groups,
                                                             accuracy)
        impl_masks = {r: m for r, m in impl_masks.items() if r not in groups}
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
        _detect_flush(element_classes, expected, actual, inputs, accuracy, reevaluate)
    impl_stats: dict[str, dict[str, int]] = dict(group_stats)
    if impl_masks:
        combined = np.zeros(element_classes[0].shape, bool)
        for rule, mask in impl_masks.items():
            mask = np.broadcast_to(mask, element_classes[0].shape)
            conventional = sum(int(np.count_nonzero(c[mask] == PASS)) for c in element_classes)
            impl_stats[rule] = {"elements": int(np.count_nonzero(mask)) * len(element_classes),
                                "conventional": conventional}
            combined |= mask
        for i, c in enumerate(element_classes):
            c = c.copy()
            c[combined] = PASS
            element_classes[i] = c
            if errors[i] is not None:
                errors[i] = np.where(combined, np.nan, errors[i])
    case_classes = np.zeros(batch, np.int8)
    for c in element_classes:
        case_classes = np.maximum(case_classes, _reduce_to_cases(c))
    return BatchVerdict(case_classes, element_classes, errors, impl_stats)


def permuted_within_groups(arrays: Sequence[np.ndarray], labels: np.ndarray
                           ) -> list[np.ndarray]:
    """``arrays`` (of one shape) with the elements of each group (same label > 0) put
    in one canonical order: sorted by their bytes in all the arrays together, and placed
    back at the group's positions in index order. Two sets of results that hold the same
    tuples of values in a group, in any order, become equal."""
    arrays = [np.asarray(a) for a in arrays]
    shape = arrays[0].shape
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return arrays
    flat_labels = np.broadcast_to(np.asarray(labels), shape).reshape(-1)
    group = np.where(flat_labels > 0, flat_labels, -1 - np.arange(n))  # others: alone
    flats = [np.ascontiguousarray(a.reshape(-1)) for a in arrays]
    keys = [col for f in flats for col in f.view(np.uint8).reshape(n, -1).T]
    by_value = np.lexsort(keys + [group])            # grouped, then by bytes
    by_position = np.argsort(group, kind="stable")   # grouped, then by index
    out = []
    for f in flats:
        g = f.copy()
        g[by_position] = f[by_value]
        out.append(g.reshape(shape))
    return out


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


def _detect_flush(classes, expected, actual, inputs, accuracy, reevaluate) -> None:
    """Reclassify failing elements as ``subnormal_flush`` where flushing subnormals to
    zero explains them: the backend's result, flushed, equals the oracle's result
    flushed (FTZ), or the oracle's result on flushed inputs (DAZ), or the oracle's
    result with results that were tiny before rounding flushed (FTZ of an
    intermediate: a product that rounds up to the smallest normal)."""
    failing = [c >= ACCURACY for c in classes]
    if not any(f.any() for f in failing):
        return
    if not (any(is_subnormal(x).any() for x in inputs)
            or any(_tiny(e).any() for e in expected)):
        return
    with np.errstate(all="ignore"):
        flushed_in = reevaluate([flush_subnormals(x) for x in inputs])
    candidates = [expected, flushed_in, [_flush_tiny(e) for e in expected]]
    flushed_actual = [flush_subnormals(np.asarray(a)) for a in actual]
    for alt in candidates:
        for i, (a, e) in enumerate(zip(flushed_actual, alt)):
            cls, _ = classify(a, flush_subnormals(e), accuracy)
            # Flushing loses the sign of what was flushed: ±0 ties are not held against it.
            rescued = failing[i] & ((cls == PASS) | (cls == SIGNED_ZERO))
            classes[i][rescued] = SUBNORMAL_FLUSH


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


def _flush_tiny(x: np.ndarray) -> np.ndarray:
    et = element_type(x.dtype)
    if et.is_complex:
        comp = et.component.dtype
        out = x.copy()
        out.real = _flush_tiny(np.array(x.real, comp))
        out.imag = _flush_tiny(np.array(x.imag, comp))
        return out
    if not et.is_float:
        return x
    zeros = np.where(np.signbit(x.astype(np.float64)), -0.0, 0.0).astype(x.dtype)
    return np.where(_tiny(x), zeros, x)


def ulp_histogram(errors: Sequence[np.ndarray | None]) -> list[int]:
    """Counts of element errors per ULP bucket (masked and non-float elements excluded)."""
    hist = np.zeros(len(ULP_BUCKET_LABELS), np.int64)
    for err in errors:
        if err is None:
            continue
        e = err[~np.isnan(err)]
        if e.size:
            idx = np.searchsorted(np.array(ULP_BUCKETS, np.float64), e, side="left")
            hist += np.bincount(idx, minlength=len(ULP_BUCKET_LABELS))[:len(ULP_BUCKET_LABELS)]
    return hist.tolist()


def max_error(errors: Sequence[np.ndarray | None]) -> float | None:
    vals = [float(np.nanmax(e)) for e in errors
            if e is not None and e.size and not np.all(np.isnan(e))]
    return max(vals) if vals else None
