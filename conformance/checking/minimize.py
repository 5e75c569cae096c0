"""Shrinking a diverging case to the fewest elements that still diverge.

For element-wise ops (``elementwise: true`` in the spec) every result element
depends only on the input elements at the same index of the op's base shape
``S``, so one diverging element gives a case with ``S = []``: each input is cut
to its sub-array at that index (scalar inputs stay as they are). If that smaller
case no longer diverges on the backend, the 1-element-per-axis case is tried,
then the original. Other ops keep their shapes (a smaller shape would need a new
signature) but their input values are simplified: blocks of input elements are set
to zero, halving the block size, while the case still diverges with the same class,
so that the reproducer shows only the elements that matter (say, the one NaN that
a backend quiets) within a fixed budget of backend runs.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from conformance.core.case import Case, Signature
from conformance.specs import OpSpec
from conformance.core.types import TensorType

# check(case) -> the case's divergence class, or None if it does not diverge.
Check = Callable[[Case], "str | None"]


def base_rank(sig: Signature) -> int:
    """Rank of the element-wise op's base shape S (scalar-broadcast inputs excluded)."""
    ranks = [t.rank for t in sig.result_types] + [t.rank for t in sig.input_types if t.rank > 0]
    return min(ranks) if ranks else 0


def _cut(case: Case, index: tuple[int, ...], keep_axes: bool) -> Case:
    sig = case.signature
    r = len(index)
    sel = tuple(slice(i, i + 1) for i in index) if keep_axes else index
    new_inputs = []
    for x, t in zip(case.inputs, sig.input_types):
        new_inputs.append(x[sel] if t.rank >= r and t.rank > 0 else x)
    lead = (1,) * r if keep_axes else ()
    in_types = [TensorType(lead + t.shape[r:], t.element_type) if t.rank >= r and t.rank > 0 else t
                for t in sig.input_types]
    out_types = [TensorType(lead + t.shape[r:], t.element_type) for t in sig.result_types]
    new_sig = Signature(sig.op, tuple(in_types), tuple(out_types), sig.attribute_items,
                        sig.regions, sig.num_replicas, sig.num_partitions, sig.invalid)
    return Case(new_sig, tuple(np.array(x, order="C") for x in new_inputs), case.case_id)


def minimize(spec: OpSpec, case: Case, diverging: np.ndarray, check: Check
             ) -> tuple[Case, str | None]:
    """The smallest variant of ``case`` that ``check`` still finds diverging.

    ``diverging`` is a boolean mask over the first result's elements. Returns the
    case and its class (None if not even the original diverges when run alone).
    """
    original = check(case)
    if original is not None and not spec.elementwise:
        return simplify_values(case, original, check), original
    if not spec.elementwise or diverging.ndim == 0 or not diverging.any():
        return case, original
    r = base_rank(case.signature)
    if r == 0:
        return case, original
    index = tuple(int(i) for i in np.argwhere(diverging)[0][:r])
    for keep_axes in (False, True):
        smaller = _cut(case, index, keep_axes)
        cls = check(smaller)
        if cls is not None:
            return smaller, cls
    return case, original


def simplify_values(case: Case, cls: str, check: Check, budget: int = 32) -> Case:
    """``case`` with as many input elements zeroed as ``budget`` backend runs can show
    to be irrelevant: the divergence class must stay ``cls``."""
    inputs = [np.array(x, copy=True) for x in case.inputs]
    for i, x in enumerate(inputs):
        n = x.size
        chunk = max(n // 2, 1)
        while n >= 1 and budget > 0:
            for start in range(0, n, chunk):
                flat = inputs[i].reshape(-1)
                block = flat[start:start + chunk]
                if budget <= 0 or not block.view(np.uint8).any():
                    continue
                trial = flat.copy()
                trial[start:start + chunk] = np.zeros((), x.dtype)
                candidate = inputs[:i] + [trial.reshape(x.shape)] + inputs[i + 1:]
                budget -= 1
                if check(Case(case.signature, tuple(candidate), case.case_id)) == cls:
                    inputs = candidate
            if chunk == 1:
                break
            chunk = max(chunk // 2, 1)
    return Case(case.signature, tuple(inputs), case.case_id)


def element_mask(element_classes: Sequence[np.ndarray], case_index: int,
                 case_class: int | None = None) -> np.ndarray:
    """Elements of one case of a batch that diverge (over the first result's shape);
    with ``case_class``, only those of that class, so that the minimised case shows
    the divergence the case was counted for."""
    mask = None
    for c in element_classes:
        m = c[case_index] == case_class if case_class is not None else c[case_index] != 0
        if mask is None:
            mask = m
        elif m.shape == mask.shape:
            mask = mask | m
    return mask if mask is not None else np.zeros((), bool)
