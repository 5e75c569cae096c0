"""Probes: what a backend evidently does where the spec leaves the choice to it.

A reduction's tree and the precision it sums in are implementation-defined (003,
"reduce": ``schedule`` is an implementation-defined full binary tree over the input in
index order), and a contraction's accumulation is a ``reduce`` of the products (issue 14;
``precision_config`` is underspecified, #755). The verdicts accept every legal choice;
this module finds out which one a backend evidently made, from crafted inputs run
through the backend's normal compile path (``Backend.batch_executable``, as the checker
compiles a signature) and nothing else: no oracle, no backend internals.

Every probe here is a *sum of terms*: the op's **sum form** (:data:`SUM_FORMS`) builds, for
an element type, a length ``n`` and a precision_config, a valid signature whose one result
per case is the sum of ``n`` given terms (reduce: an add body with init value 0;
dot_general: a dot product with a vector of ones; convolution: one window as long as
the input, a kernel of ones), so the same probes serve every op that has a sum form; an
op gains them by registering one (``@sum_form("op")``).
Which ops are probed, with which element types and precision_configs, is
:data:`PROBED` (op -> :class:`ProbePlan`).

Three probes, each with a decision rule that says ``undetermined`` rather than guess:

- **accumulation precision**: rows with ``B``, ``δ``, ``−B`` in this order (384 apart,
  zeros between), ``δ = B·2^-j``, for every ``j`` the element type can hold (2..63). Summed at a precision of ``q`` significand bits, every
  tree over the three in index order gives exactly δ when ``j <= q − 1`` and 0 when
  ``j >= q + 1`` (``B + δ`` and ``δ − B`` round to ``±B``, ties to even), so the ``j``
  where δ turns into 0 brackets ``q`` to two neighbours; the one format of bf16 (8),
  f16 (11), f32 (24), f64 (53) or wider (64) within that bracket is the answer. The rows
  are run at two lengths; a pattern that is not δ-then-0, a value that is neither, or
  lengths whose brackets do not meet give ``undetermined``.
- **order**: rows of zeros with ``B`` at ``a``, ``−B`` at ``b`` and ``s = B·2^-g`` at ``c``,
  where ``s`` is lost when added to ``±B`` at the accumulation precision (``g >= q + 1``).
  The sum is ``s`` exactly when ``B`` and ``−B`` meet before ``s`` joins either, else 0,
  so the outcomes over many placements are a fingerprint of the tree. Each model of
  :data:`ORDER_MODELS` (sequential, reverse, pairwise, numpy's blocked pairwise, k
  strided partial sums) predicts the fingerprint; the one model that fits all is the
  answer, several or none give ``undetermined`` (with the candidates). Independently of
  the models, an ``s`` where ``c`` lies between ``a`` and ``b`` proves that no tree in
  index order was used (``in_index_order: false``).
- **operand precision** (contractions: a sum form with ``products``): one product
  ``(1 + 2^-j)·1`` per row, the long value in lhs, then in rhs: rounded to ``q`` bits it
  is kept up to ``j = q − 1`` and lost from ``j = q``, so each operand's evident bits
  are exact. Fewer than the element type's and than the accumulation's (which alone
  would lose it too) means the operands are rounded first (a TF32- or bf16-like pass
  at DEFAULT or HIGH); as many as the accumulation's is ``undetermined``.

Findings are ``probe`` records of the results stream (conformance.core.results).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

from conformance.backends import Backend, Unsupported
from conformance.core.case import Signature
from conformance.core.types import element_type

__all__ = ["SUM_FORMS", "PROBED", "PROBE_BATCH", "ProbePlan", "SumForm", "sum_form", "probe_backend",
           "probe_one", "accumulation_from", "order_from", "operand_from", "operand_rows",
           "FORMATS", "OPERAND_FORMATS", "ORDER_MODELS", "UNDETERMINED"]

UNDETERMINED = "undetermined"

#: accumulation formats told apart, by significand bits (implicit bit included); 64 stands
#: for anything wider than f64 (x87 extended, double-double, exact or compensated sums)
FORMATS: dict[int, str] = {8: "bf16", 11: "f16", 24: "f32", 53: "f64", 64: "wider than f64"}


# ---------------------------------------------------------------------------
# Sum forms: an op's case whose result is the sum of given terms
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SumForm:
    """``signature(T, n, precision_config)`` -> a signature whose result (one scalar per
    case) is the sum of ``n`` terms of element type ``T``; ``inputs(terms)`` -> the
    stacked inputs for rows of terms (``[batch, n]`` of T)."""

    signature: Callable[[str, int, Any], Signature]
    inputs: Callable[[np.ndarray], list[np.ndarray]]
    #: contractions: ``products(lhs, rhs)`` -> the stacked inputs whose result is
    #: Σ lhs·rhs per row (``inputs(terms)`` is ``products(terms, ones)``); None for a sum
    #: of inputs (reduce), which has no operands to round
    products: Callable[[np.ndarray, np.ndarray], list[np.ndarray]] | None = None


SUM_FORMS: dict[str, SumForm] = {}


def sum_form(op: str):
    """Register an op's sum form: ``@sum_form("op")`` on a function returning a
    :class:`SumForm`."""
    def deco(fn: Callable[[], SumForm]):
        if op in SUM_FORMS:
            raise RuntimeError(f"sum form of {op!r} registered twice")
        SUM_FORMS[op] = fn()
        return fn
    return deco


@sum_form("reduce")
def _reduce_form() -> SumForm:
    def sig(t: str, n: int, pc: Any) -> Signature:
        return Signature.make("reduce", [f"tensor<{n}x{t}>", f"tensor<{t}>"], [f"tensor<{t}>"],
                              {"dimensions": [0]}, regions=(f"({t}, {t}) -> add(arg0, arg1)",))

    def inputs(terms: np.ndarray) -> list[np.ndarray]:
        return [terms, np.zeros(terms.shape[:1], terms.dtype)]
    return SumForm(sig, inputs)


@sum_form("dot_general")
def _dot_form() -> SumForm:
    def sig(t: str, n: int, pc: Any) -> Signature:
        return Signature.make("dot_general", [f"tensor<{n}x{t}>", f"tensor<{n}x{t}>"],
                              [f"tensor<{t}>"],
                              {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
                               "lhs_contracting_dimensions": [0],
                               "rhs_contracting_dimensions": [0],
                               "precision_config": [pc or "DEFAULT"] * 2})

    def products(lhs: np.ndarray, rhs: np.ndarray) -> list[np.ndarray]:
        return [lhs, rhs]

    def inputs(terms: np.ndarray) -> list[np.ndarray]:
        return products(terms, np.ones_like(terms))
    return SumForm(sig, inputs, products)


@sum_form("convolution")
def _convolution_form() -> SumForm:
    """A 1-D convolution of one batch, one feature and a window as long as the input
    (NWC / WIO): the one output element is the sum of the products with a kernel of
    ones."""
    def sig(t: str, n: int, pc: Any) -> Signature:
        return Signature.make(
            "convolution", [f"tensor<1x{n}x1x{t}>", f"tensor<{n}x1x1x{t}>"],
            [f"tensor<1x1x1x{t}>"],
            {"window_strides": [1], "padding": "dense<[[0, 0]]> : tensor<1x2xi64>",
             "lhs_dilation": [1], "rhs_dilation": [1], "window_reversal": ["false"],
             "input_batch_dimension": 0, "input_feature_dimension": 2,
             "input_spatial_dimensions": [1], "kernel_input_feature_dimension": 1,
             "kernel_output_feature_dimension": 2, "kernel_spatial_dimensions": [0],
             "output_batch_dimension": 0, "output_feature_dimension": 2,
             "output_spatial_dimensions": [1], "feature_group_count": 1,
             "batch_group_count": 1, "precision_config": [pc or "DEFAULT"] * 2})

    def products(lhs: np.ndarray, rhs: np.ndarray) -> list[np.ndarray]:
        return [lhs[:, None, :, None], rhs[:, :, None, None]]

    def inputs(terms: np.ndarray) -> list[np.ndarray]:
        return products(terms, np.ones_like(terms))
    return SumForm(sig, inputs, products)


@dataclasses.dataclass(frozen=True)
class ProbePlan:
    """What to probe of an op: element types, precision_configs (None: the op has none)."""

    element_types: tuple[str, ...] = ("bf16", "f16", "f32", "f64")
    precision_configs: tuple[Any, ...] = (None,)
    order: bool = True


#: op -> what is probed (an op without an entry, or without a sum form, is not probed)
#: (contractions: each precision_config, one compile per element type and config)
PROBED: dict[str, ProbePlan] = {
    "reduce": ProbePlan(),
    "dot_general": ProbePlan(precision_configs=("DEFAULT", "HIGH", "HIGHEST")),
    "convolution": ProbePlan(precision_configs=("DEFAULT", "HIGH", "HIGHEST")),
}


# ---------------------------------------------------------------------------
# Running rows of terms through a backend
# ---------------------------------------------------------------------------

class _Skip(Exception):
    """The backend cannot run the probe (unsupported, or it failed): the reason."""


#: the most rows one execution of a probe's batch executable takes: the rows go in batches
#: of this many, the last padded with rows of zeros (so that one compile serves every
#: batch; their sums are dropped). A batch of a contraction whose operands both carry the
#: batch axis may cost the batch size squared: jax's vmap of a convolution with a kernel
#: per row is a convolution with a feature group per row, whose kernel XLA on CPU expands
#: to rows x rows x n (the 468 rows of f64 terms in one batch held 1.8 GB, the peak of a
#: whole run, issue 31); 32 rows, 8 MB. Each row's sum is the same either way.
PROBE_BATCH = 32


def _run_rows(backend: Backend, form: SumForm, t: str, pc: Any, rows: np.ndarray,
              rhs: np.ndarray | None = None) -> np.ndarray:
    """The backend's sums of ``rows`` ([batch, n] of T) as float64 (with ``rhs``: of the
    products ``rows·rhs``), through the backend's batch executable of the form's
    signature (compiled once per (T, n, pc)), :data:`PROBE_BATCH` rows at a time."""
    sig = form.signature(t, rows.shape[1], pc)
    count = rows.shape[0]
    pad = -count % PROBE_BATCH

    def padded(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)]) if pad else x
    rows = padded(rows)
    rhs = None if rhs is None else padded(rhs)
    sums = []
    try:
        exe = backend.batch_executable(sig)
        for start in range(0, rows.shape[0], PROBE_BATCH):
            part = rows[start:start + PROBE_BATCH]
            out = exe(form.inputs(part) if rhs is None else
                      form.products(part, rhs[start:start + PROBE_BATCH]))
            sums.append(np.asarray(out[0]).reshape(part.shape[0]).astype(np.float64))
    except Unsupported as e:
        raise _Skip(f"unsupported: {e}") from e
    except Exception as e:  # noqa: BLE001 - the backend's failure: no finding
        raise _Skip(f"{type(e).__name__}: {str(e).strip()[:300]}") from e
    return np.concatenate(sums)[:count] if sums else np.zeros(0)


def _exponents(t: str) -> tuple[int, int]:
    """The smallest and largest exponent of a normal number of T whose double is finite."""
    fi = ml_dtypes.finfo(element_type(t).dtype)
    return int(fi.minexp), int(fi.maxexp) - 2


# ---------------------------------------------------------------------------
# Accumulation precision
# ---------------------------------------------------------------------------

#: the length of every probe row: one compile (and one run) per element type and
#: precision_config serves both probes
LENGTH = 1024

#: positions of B, δ and −B in the precision rows: 384 apart, the same lane of any strided
#: evaluation with k lanes, k dividing 384 (2^i up to 128, 3·2^i), so that δ meets B
#: first there too, as in every tree in index order (three contiguous terms are three
#: lanes of such an evaluation, where B and −B may cancel first at any precision); two
#: placements, whose brackets must meet
PRECISION_LAYOUTS: tuple[tuple[int, int, int], ...] = ((0, 384, 768), (131, 515, 899))

def precision_rows(t: str, n: int, at: tuple[int, int, int]) -> tuple[list[int], np.ndarray]:
    """The ``j`` the type can hold, and per ``j`` a row of ``n`` terms with ``B``, ``B·2^-j``
    and ``−B`` at the positions ``at`` (every value a normal number of T)."""
    emin, emax = _exponents(t)
    js, rows = [], []
    for j in range(2, 64):
        eb = max(0, emin + j)
        if eb > emax:
            break
        row = np.zeros(n)
        row[list(at)] = [2.0 ** eb, 2.0 ** (eb - j), -(2.0 ** eb)]
        js.append(j)
        rows.append(row)
    return js, np.asarray(rows).astype(element_type(t).dtype)


def decide_precision(js: Sequence[int], sums: np.ndarray, deltas: np.ndarray
                     ) -> tuple[tuple[int, int] | None, str]:
    """From the sums of the ``[B, δ, −B]`` rows: the bracket ``(lo, hi)`` of the
    accumulation precision (``hi`` 10**6 where no row showed an upper limit), or None and
    why not."""
    got_delta = sums == deltas
    got_zero = sums == 0
    if not np.all(got_delta | got_zero):
        j = js[int(np.argmax(~(got_delta | got_zero)))]
        return None, f"j={j}: the sum of [B, B*2^-{j}, -B] is neither B*2^-{j} nor 0"
    d = [j for j, g in zip(js, got_delta) if g]
    z = [j for j, g in zip(js, got_zero) if g]
    if d and z and max(d) > min(z):
        return None, (f"not monotone: exact at j={max(d)} but lost at j={min(z)} "
                      f"(the sum depends on more than the precision)")
    lo = max(d) if d else 1
    hi = min(z) if z else 10 ** 6
    return (lo, hi), ""


def format_of(bracket: tuple[int, int]) -> tuple[str, int | None]:
    """The one accumulation format within a bracket of precisions (name, bits), a lower
    bound (``f64 or wider``, None) where the rows could not go further, or undetermined."""
    lo, hi = bracket
    inside = [b for b in FORMATS if lo <= b <= hi]
    if len(inside) == 1 and hi < 10 ** 6:
        return FORMATS[inside[0]], inside[0]
    if hi >= 10 ** 6 and inside:
        if len(inside) == 1:
            return FORMATS[inside[0]], inside[0]
        return f"{FORMATS[inside[0]]} or wider", None
    return UNDETERMINED, None


def accumulation_from(t: str, sums: Sequence[np.ndarray]) -> dict[str, Any]:
    """The evident accumulation precision from the backend's sums of the precision rows
    (one array per layout of :data:`PRECISION_LAYOUTS`, rows as :func:`precision_rows`)."""
    brackets, notes = [], []
    for at, got in zip(PRECISION_LAYOUTS, sums):
        js, rows = precision_rows(t, LENGTH, at)
        deltas = rows[:, at[1]].astype(np.float64)
        bracket, why = decide_precision(js, got, deltas)
        if bracket is None:
            return {"accumulation": UNDETERMINED, "precision_bits": None,
                    "detail": f"B at {at[0]}: {why}"}
        brackets.append(bracket)
        notes.append(f"B at {at[0]}: {_bracket_text(bracket, js)}")
    # each bracket holds the precision (at j = q the trees may differ): they must meet
    both = (max(b[0] for b in brackets), min(b[1] for b in brackets))
    if both[0] > both[1]:
        return {"accumulation": UNDETERMINED, "precision_bits": None,
                "detail": "placements disagree: " + "; ".join(notes)}
    name, bits = format_of(both)
    return {"accumulation": name, "precision_bits": bits,
            "bracket": [both[0], both[1] if both[1] < 10 ** 6 else None],
            "detail": f"[B, B*2^-j, -B] {'; '.join(notes)}"}


def _bracket_text(bracket: tuple[int, int], js: Sequence[int]) -> str:
    lo, hi = bracket
    if hi >= 10 ** 6:
        return f"exact up to j={max(js)} (the largest the type holds): at least {lo} bits"
    if lo < min(js):
        return f"lost from j={hi}: at most {hi} bits"
    return f"exact up to j={lo}, lost from j={hi}: {lo}-{hi} bits"


# ---------------------------------------------------------------------------
# Operand precision (contractions): are the operands rounded first (TF32-like passes)?
# ---------------------------------------------------------------------------

#: names of operand precisions, by significand bits (TF32 keeps f16's 11 bits)
OPERAND_FORMATS: dict[int, str] = {8: "bf16", 11: "f16/TF32", 24: "f32", 53: "f64"}


def operand_rows(t: str, n: int) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Per ``j`` (1 .. T's stored mantissa bits) two rows of one nonzero product,
    ``(1 + 2^-j)·1`` with the long value in lhs, then in rhs: ``(lhs, rhs)``, ``[2J, n]``
    of T (row ``2i`` probes lhs, ``2i + 1`` rhs). Rounded to ``q`` significand bits (to
    nearest, ties to even, or toward zero) ``1 + 2^-j`` stays for ``j <= q - 1`` and is
    lost from ``j = q``."""
    nmant = int(ml_dtypes.finfo(element_type(t).dtype).nmant)
    js = list(range(1, nmant + 1))
    lhs, rhs = np.zeros((2 * len(js), n)), np.ones((2 * len(js), n))
    for i, j in enumerate(js):
        lhs[2 * i, 0] = 1.0 + 2.0 ** -j
        lhs[2 * i + 1, 0], rhs[2 * i + 1, 0] = 1.0, 1.0 + 2.0 ** -j
    dt = element_type(t).dtype
    return js, lhs.astype(dt), rhs.astype(dt)


def operand_bits(js: Sequence[int], sums: np.ndarray, full: int) -> tuple[int | None, str]:
    """The significand bits one operand evidently keeps, from the sums of its rows: one
    more than the largest ``j`` kept, ``full`` (T's) where every ``j`` is kept; None and
    why where a sum is neither kept nor a rounding of it, or kept after lost."""
    j = np.asarray(js, np.float64)
    want = 1.0 + 2.0 ** -j
    kept = sums == want
    # rounded to j bits: one of its two neighbours there, 1 and 1 + 2^(1-j)
    lost = (sums == 1.0) | (sums == 1.0 + 2.0 ** (1 - j))
    if not np.all(kept | lost):
        j = js[int(np.argmax(~(kept | lost)))]
        return None, f"j={j}: (1 + 2^-{j})*1 summed to {sums[js.index(j)]!r}"
    if kept.all():
        return full, ""
    first = int(np.argmax(lost))
    if kept[first:].any():
        return None, "not monotone: kept after lost"
    return js[first], ""


def operand_from(t: str, sums: np.ndarray, acc_bits: int | None) -> dict[str, Any]:
    """The evident operand precision from the sums of :func:`operand_rows`: each
    operand's bits; where they are fewer than T's and than the accumulation's, the
    operands are evidently rounded first (``operand_rounded``)."""
    js, _, _ = operand_rows(t, 1)
    full = int(ml_dtypes.finfo(element_type(t).dtype).nmant) + 1
    found = [operand_bits(js, sums[k::2], full) for k in (0, 1)]
    bits = [b for b, _ in found]
    if any(b is None for b in bits):
        why = "; ".join(f"{side}: {w}" for side, (b, w) in zip(("lhs", "rhs"), found) if w)
        return {"operand_precision": UNDETERMINED, "operand_bits": bits,
                "operand_detail": why}
    q = min(bits)
    name = OPERAND_FORMATS.get(q, f"{q} bits")
    detail = f"(1 + 2^-j)*1 kept up to j={q - 1} (lhs {bits[0]}, rhs {bits[1]} bits)"
    if q >= full:
        return {"operand_precision": f"{name} (as given)", "operand_bits": bits,
                "operand_rounded": False, "operand_detail": detail}
    if acc_bits is not None and q >= acc_bits:
        return {"operand_precision": UNDETERMINED, "operand_bits": bits,
                "operand_detail": f"{detail}: no finer than the accumulation's {acc_bits} "
                                  "bits, which alone explains it"}
    return {"operand_precision": f"{name} (rounded)", "operand_bits": bits,
            "operand_rounded": True, "operand_detail": detail}


# ---------------------------------------------------------------------------
# Order
# ---------------------------------------------------------------------------

def _seq(x: np.ndarray) -> np.ndarray:
    acc = x[:, 0].copy()
    for i in range(1, x.shape[1]):
        acc = acc + x[:, i]
    return acc


def _rev(x: np.ndarray) -> np.ndarray:
    return _seq(x[:, ::-1])


def _halves(x: np.ndarray, split: Callable[[int], int]) -> np.ndarray:
    n = x.shape[1]
    if n == 1:
        return x[:, 0].copy()
    h = split(n)
    return _halves(x[:, :h], split) + _halves(x[:, h:], split)


def _pairwise(x: np.ndarray) -> np.ndarray:
    return _halves(x, lambda n: n // 2)


def _pairwise_pow2(x: np.ndarray) -> np.ndarray:
    return _halves(x, lambda n: 1 << ((n - 1).bit_length() - 1))


def _numpy_pairwise(x: np.ndarray) -> np.ndarray:
    """numpy's pairwise summation (8 strided accumulators per block of at most 128)."""
    n = x.shape[1]
    if n < 8:
        return _seq(x) if n else np.zeros(x.shape[0])
    if n <= 128:
        r = [x[:, i].copy() for i in range(8)]
        m = n - n % 8
        for i in range(8, m, 8):
            for k in range(8):
                r[k] = r[k] + x[:, i + k]
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(m, n):
            res = res + x[:, i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _numpy_pairwise(x[:, :n2]) + _numpy_pairwise(x[:, n2:])


def _by_halves(x: np.ndarray) -> np.ndarray:
    """Lanes folded in halves, ``l[i] + l[i + k/2]`` (a vector register's horizontal sum)."""
    while x.shape[1] > 1:
        h = x.shape[1] // 2
        odd = x[:, 2 * h:]
        x = x[:, :h] + x[:, h:2 * h]
        if odd.shape[1]:
            x = np.concatenate([x[:, :1] + odd, x[:, 1:]], axis=1)
    return x[:, 0]


def _strided(k: int, combine: Callable[[np.ndarray], np.ndarray]):
    def model(x: np.ndarray) -> np.ndarray:
        n = x.shape[1]
        lanes = np.stack([_seq(x[:, i::k]) for i in range(min(k, n))], axis=1)
        return combine(lanes)
    return model


def _windows(w: int):
    """Windows of ``w`` consecutive terms (padded with zeros evenly on both sides to a
    multiple of ``w``), each summed in order, then the window sums the same way until one
    is left (XLA's tree reduction rewrite: a reduce_window, then a reduce)."""
    def model(x: np.ndarray) -> np.ndarray:
        while x.shape[1] > w:
            pad = -x.shape[1] % w
            x = np.pad(x, ((0, 0), (pad // 2, pad - pad // 2)))
            parts = x.reshape(x.shape[0], -1, w)
            acc = parts[:, :, 0].copy()
            for i in range(1, w):
                acc = acc + parts[:, :, i]
            x = acc
        return _seq(x)
    return model


#: name -> model: rows of terms (float64, [batch, n]) -> the sum that order gives, in
#: float64 (the probe's values are exact there except where ``s`` meets ``±B``);
#: ``True`` where the model is a tree in index order (what the spec allows)
ORDER_MODELS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], bool]] = {
    "sequential": (_seq, True),
    "reverse sequential": (_rev, False),
    "pairwise": (_pairwise, True),
    "pairwise (power-of-two split)": (_pairwise_pow2, True),
    "numpy pairwise (8 lanes per block of 128)": (_numpy_pairwise, False),
    **{f"windows of {w} summed in order, then their sums": (_windows(w), True)
       for w in (8, 16, 32, 64, 128, 256)},
    **{f"strided-{k}, lanes summed {how}": (_strided(k, f), False)
       for k in (2, 4, 8, 16, 32, 64, 128, 256)
       for how, f in (("in order", _seq), ("pairwise", _pairwise),
                      ("by halves (l[i] + l[i+k/2])", _by_halves))},
}

#: how many placements (a, b, c) the order rows try
ORDER_PLACEMENTS = 240


def order_placements(n: int, count: int, seed: int = 0) -> np.ndarray:
    """Placements (a, b, c) of B, −B and s: structured ones (neighbours, powers of two,
    the ends) and seeded random ones, all distinct positions."""
    rng = np.random.default_rng(seed + n)
    out = set()
    marks = sorted({0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, n // 2, n - 1, n - 2,
                    n - 3} & set(range(n)))
    for a in marks[:8]:
        for b in marks:
            for c in marks[::3]:
                if len({a, b, c}) == 3:
                    out.add((a, b, c))
    out = sorted(out)
    rng.shuffle(out)
    out = out[:count // 2]
    while len(out) < count:
        a, b, c = (int(v) for v in rng.choice(n, 3, replace=False))
        out.append((a, b, c))
    return np.asarray(out)


def _order_rows(n: int, placements: np.ndarray, big: float, small: float) -> np.ndarray:
    rows = np.zeros((len(placements), n))
    idx = np.arange(len(placements))
    rows[idx, placements[:, 0]] = big
    rows[idx, placements[:, 1]] = -big
    rows[idx, placements[:, 2]] = small
    return rows


def order_gap(t: str) -> int:
    """How far below B the order rows put s: as far as T's normal range allows, up to 66
    bits (s is lost against B at any precision up to 65 bits)."""
    emin, emax = _exponents(t)
    return min(66, emax - emin)


def order_rows(t: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Placements, rows (of T) and the value of s."""
    emin, _ = _exponents(t)
    gap = order_gap(t)
    eb = max(0, emin + gap)
    pl = order_placements(LENGTH, ORDER_PLACEMENTS)
    rows = _order_rows(LENGTH, pl, 2.0 ** eb, 2.0 ** (eb - gap))
    return pl, rows.astype(element_type(t).dtype), 2.0 ** (eb - gap)


def order_from(t: str, sums: np.ndarray, bits: int | None) -> dict[str, Any]:
    """The evident summation order from the backend's sums of :func:`order_rows`, given
    the accumulation precision ``bits`` (None: unknown, which the gap must then exceed
    too: more than 64 bits)."""
    gap = order_gap(t)
    need = (bits + 1) if bits else 65
    if gap < need:
        return {"order": UNDETERMINED,
                "order_detail": f"{t} spans {gap} binades; telling the order needs a term "
                                f"lost against B at {bits or 'any'} bits ({need})"}
    pl, _, small = order_rows(t)
    got_s, got_0 = sums == small, sums == 0
    if not np.all(got_s | got_0):
        k = int(np.argmax(~(got_s | got_0)))
        return {"order": UNDETERMINED,
                "order_detail": f"B at {pl[k][0]}, -B at {pl[k][1]}, s at {pl[k][2]} summed "
                                f"to {sums[k]!r}, neither s nor 0"}
    lo, hi = np.minimum(pl[:, 0], pl[:, 1]), np.maximum(pl[:, 0], pl[:, 1])
    outside_order = int(np.count_nonzero(got_s & (pl[:, 2] > lo) & (pl[:, 2] < hi)))
    unit = _order_rows(LENGTH, pl, 1.0, 2.0 ** -60)
    names = [name for name, (model, _) in ORDER_MODELS.items()
             if np.array_equal(model(unit) == 2.0 ** -60, got_s)]
    in_order = outside_order == 0
    base = {"in_index_order": in_order, "order_models": names}
    where = f"{len(pl)} placements of B, -B and s = B*2^-{gap} in {LENGTH} terms"
    if not in_order:
        where += (f"; {outside_order} kept s lying between B and -B, which no tree in "
                  f"index order does")
    if len(names) == 1:
        return {**base, "order": names[0], "order_detail": where}
    if names:
        return {**base, "order": UNDETERMINED,
                "order_detail": f"{where}: fits {' / '.join(names)}"}
    return {**base, "order": UNDETERMINED,
            "order_detail": f"{where}: none of the {len(ORDER_MODELS)} order models fits"}


def probe_one(backend: Backend, op: str, t: str, pc: Any = None, order: bool = True
              ) -> dict[str, Any]:
    """Both probes of ``op`` on ``backend`` for element type ``t`` and precision_config
    ``pc``: every row through one compile (:data:`PROBE_BATCH` rows per execution).
    Raises :class:`_Skip` when the backend cannot run it."""
    form = SUM_FORMS[op]
    parts = [precision_rows(t, LENGTH, at)[1] for at in PRECISION_LAYOUTS]
    if order:
        parts.append(order_rows(t)[1])
    rhs = [np.ones_like(p) for p in parts]
    if form.products is not None:
        _, lhs_o, rhs_o = operand_rows(t, LENGTH)
        parts.append(lhs_o)
        rhs.append(rhs_o)
    sums = _run_rows(backend, form, t, pc, np.concatenate(parts),
                     np.concatenate(rhs) if form.products is not None else None)
    cuts = np.cumsum([len(p) for p in parts])[:-1]
    pieces = np.split(sums, cuts)
    found = accumulation_from(t, pieces[:len(PRECISION_LAYOUTS)])
    if order:
        found.update(order_from(t, pieces[len(PRECISION_LAYOUTS)], found.get("precision_bits")))
    if form.products is not None:
        found.update(operand_from(t, pieces[-1], found.get("precision_bits")))
    return found


# ---------------------------------------------------------------------------
# One backend, one op
# ---------------------------------------------------------------------------

def probe_backend(backend: Backend, op: str, plan: ProbePlan | None = None,
                  element_types: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """``probe`` records of one op on one backend: per element type and precision_config,
    the evident accumulation precision and (where the plan asks) order. A backend that
    cannot run a probe gives ``undetermined`` with the reason."""
    plan = plan or PROBED.get(op)
    if plan is None or op not in SUM_FORMS:
        return []
    out = []
    types = [t for t in plan.element_types if element_types is None or t in element_types]
    for t in types:
        for pc in plan.precision_configs:
            rec: dict[str, Any] = {"kind": "probe", "op": op, "backend": backend.name,
                                   "element_type": t, "precision_config": pc}
            try:
                rec.update(probe_one(backend, op, t, pc, plan.order))
            except _Skip as e:
                rec.update(accumulation=UNDETERMINED, precision_bits=None,
                           detail=f"the backend did not run the probe: {e}")
            detail = rec.get("detail", "")
            if rec.get("order_detail"):
                detail += f". Order: {rec['order_detail']}"
            if rec.get("operand_detail"):
                detail += f". Operands: {rec['operand_detail']}"
            rec["detail"] = detail
            out.append(rec)
    return out
