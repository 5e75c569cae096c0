"""Value coverage: which special-value classes, and which combinations of them, a plan
meets; and the systematic part of a value batch that makes it meet them.

The model of one op and type binding (:func:`model`) is built from the spec:

- **classes** of every tracked input (an input whose element type the binding fixes,
  index inputs aside): for floats ``+0 -0 +inf -inf nan subnormal extreme ordinary``
  (``extreme`` = ±the largest finite value; types without infinities have no ±inf),
  for signed integers ``0 -1 min max ordinary``, for unsigned ``0 max ordinary``, for
  booleans ``false true``, for complex numbers ``zero nan inf subnormal extreme
  ordinary`` (by the most special part). These generic classes live here; an op's
  ``coverage: operands:`` section in its YAML names another *scheme* for an input
  (``shift_count``: ``0 in_range width-1 width past_width negative``; ``rounding``:
  the float classes with ``ordinary`` split into ``integral tie_even tie_odd
  ordinary``) or the element type of an input whose expression the binding alone does
  not give (sort's first operand: ``{type: E}``).
- **pairs**: for element-wise ops with two or more tracked inputs, every pair of
  classes of every two inputs met at the same element position (a scalar that is
  broadcast meets every position of its case). Other ops count each input's classes.
- **targets**: the YAML's ``coverage: targets:``, named combinations that bugs hide
  behind: ``types`` (over the type variables: whether the target applies to a
  binding), ``where`` (over the signature: its attributes, regions, input and output
  types and type variables; the scheduler puts a signature meeting it in the plan)
  and ``at`` (input -> class, met together at one element position).

The scheduler (:func:`schedule`) picks a binding's planned signatures from a pool of
hypothesis draws: one per signature-level target, a *rich* one (every input non-empty,
at least :data:`RICH` elements, no broadcast scalar where it can be avoided), then the
draws in hypothesis order; the first, minimal draw keeps index 0 where it is planned. The
overlay (:func:`overlay`) writes into the first positions of each value batch (at most
:data:`SYSTEMATIC_SHARE` of them) the model's combinations in order of importance,
targets first, then the combinations of special classes, ordinary values last; the
rest of the batch stays random. :class:`Tally` measures what a signature's batches met,
for the ``coverage`` field of the runner's ``signature`` records.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import math
import zlib
from typing import Any, Callable, Mapping, Sequence

import ml_dtypes
import numpy as np

from conformance.core.case import Signature
from conformance.core.literals import from_bit_patterns
from conformance.core.numerics import round_to
from conformance.core.types import ElementType, TensorType, TokenType, element_type
from conformance.specs import OpSpec
from conformance.specs import expressions as ex

#: A signature is rich when its largest tracked input has at least this many elements:
#: with quick depth's 32 cases, 4 x 32 positions hold every pair of 8 classes with room
#: for random values.
RICH = 4
#: At most this share of a batch's positions is systematic; the rest stays random.
SYSTEMATIC_SHARE = 0.75

KINDS = ("pairs", "classes", "targets")


# ---------------------------------------------------------------------------
# Class schemes: names, classification, sampling
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _has_inf(et: ElementType) -> bool:
    return bool(np.isinf(np.asarray(np.inf).astype(et.component.dtype).astype(np.float64)))


@functools.lru_cache(maxsize=None)
def classes_of(et: "ElementType | str", scheme: str = "generic") -> tuple[str, ...]:
    """The class names of ``scheme`` for element type ``et``, in a fixed order."""
    et = element_type(et)
    if scheme not in SCHEMES:
        raise ValueError(f"unknown coverage class scheme {scheme!r}; known: "
                         f"{', '.join(SCHEMES)}")
    return SCHEMES[scheme].names(et)


def classify(x: np.ndarray, et: "ElementType | str", scheme: str = "generic") -> np.ndarray:
    """The class of every element of ``x`` (an index into :func:`classes_of`), int16.
    Types of one or two bytes look their bit patterns up in a table of the scheme's own
    codes (the same answer, without a dozen passes over the array per call)."""
    et = element_type(et)
    x = np.asarray(x)
    table = _class_table(et, scheme)
    if table is not None and x.dtype == et.dtype:
        bits = np.ascontiguousarray(x).reshape(x.shape)     # (0-d stays 0-d)
        return np.asarray(table[bits.view(np.uint8 if table.size == 256 else np.uint16)])
    with np.errstate(all="ignore"):
        return SCHEMES[scheme].classify(x, et)


@functools.lru_cache(maxsize=None)
def _class_table(et: ElementType, scheme: str) -> "np.ndarray | None":
    """The code of every bit pattern of a one- or two-byte type (None for the others, and
    for booleans and complex numbers): classification is element by element, so a
    lookup gives exactly the scheme's codes."""
    size = np.dtype(et.dtype).itemsize
    if size > 2 or et.is_boolean or et.is_complex:
        return None
    index = np.uint8 if size == 1 else np.uint16
    every = np.arange(1 << (8 * size), dtype=index).view(et.dtype)
    with np.errstate(all="ignore"):
        table = np.asarray(SCHEMES[scheme].classify(every, et), np.int16)
    table.flags.writeable = False
    return table


def sample(et: "ElementType | str", cls: str, n: int, rng: np.random.Generator,
           scheme: str = "generic", distribution: str = "default") -> np.ndarray:
    """``n`` values of ``et`` of class ``cls``, varied (signs, payloads, magnitudes)."""
    et = element_type(et)
    names = classes_of(et, scheme)
    if cls not in names:
        raise ValueError(f"{et.name} has no class {cls!r} in scheme {scheme!r} "
                         f"(classes: {', '.join(names)})")
    code = names.index(cls)
    with np.errstate(all="ignore"):
        out = np.asarray(SCHEMES[scheme].generate(et, cls, n, rng, distribution)).astype(et.dtype)
    bad = classify(out, et, scheme) != code
    if bad.any():           # a candidate that rounded into another class: a sure value
        out[bad] = _fallback(et, scheme, cls)
    return out


@functools.lru_cache(maxsize=None)
def _fallback(et: ElementType, scheme: str, cls: str):
    """One value of ``cls`` (searched among the special values and a few constants)."""
    from .values import special_values
    cands = [special_values(et)]
    if et.is_float:
        cands.append(round_to(np.array([1.25, -0.75, 2.75, 1.5, -2.5, 0.5, 6.5, -3.0, 2.0,
                                        3.5, -5.0, 1.75, 0.25, 0.125]), et))
    elif et.is_integer:
        lo, hi = et.int_min, et.int_max
        vals = [v for v in range(max(lo, -20), min(hi, 20) + 1)] + [lo + 1, hi - 1, hi // 2 + 1]
        cands.append(np.array(vals, dtype=object).astype(
            np.uint64 if et.name == "ui64" else np.int64).astype(et.dtype))
    pool = np.concatenate([np.asarray(c).astype(et.dtype) for c in cands])
    code = classes_of(et, scheme).index(cls)
    hit = np.nonzero(classify(pool, et, scheme) == code)[0]
    if not hit.size:
        raise ValueError(f"no fallback value of class {cls!r} for {et.name} ({scheme})")
    return pool[hit[0]]


def _wide(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _float_codes(w: np.ndarray, et: ElementType, names: Sequence[str]) -> np.ndarray:
    """Generic float classes of float64 values ``w`` that hold values of ``et``; the
    codes index ``names`` (``ordinary`` for everything the others do not take)."""
    fi = ml_dtypes.finfo(et.dtype)
    tiny, big = float(fi.smallest_normal), float(fi.max)
    a = np.abs(w)
    with np.errstate(invalid="ignore"):
        conds = [np.isnan(w), w == np.inf, w == -np.inf, (w == 0) & ~np.signbit(w),
                 (w == 0) & np.signbit(w), (a > 0) & (a < tiny), a == big]
    if not et.has_sign:              # f8E8M0FNU: its smallest value is an extreme too
        conds[-1] = (a == big) | (a == tiny)
    labels = ["nan", "+inf", "-inf", "+0", "-0", "subnormal", "extreme"]
    # (f4E2M1FN's rounding classes leave no value ordinary: every other class is met)
    codes = np.full(w.shape, names.index("ordinary") if "ordinary" in names else -1, np.int16)
    for cond, label in reversed(list(zip(conds, labels))):
        if label in names:
            codes[cond] = names.index(label)
    return codes


def _float_generate(et: ElementType, cls: str, n: int, rng: np.random.Generator,
                    distribution: str) -> np.ndarray:
    from .values import draw_array, special_values
    fi = ml_dtypes.finfo(et.dtype)
    sign = np.where(rng.integers(0, 2, n) == 1, -1.0, 1.0) if et.has_sign else np.ones(n)
    if cls in ("+0", "-0", "+inf", "-inf"):
        v = {"+0": 0.0, "-0": -0.0, "+inf": np.inf, "-inf": -np.inf}[cls]
        return np.full(n, v).astype(et.dtype)
    if cls == "nan":
        pool = special_values(et)
        pool = pool[np.isnan(_wide(pool))]
        return pool[rng.integers(0, len(pool), n)]
    if cls == "extreme":
        if not et.has_sign:          # f8E8M0FNU: both ends of its range
            return np.where(rng.integers(0, 2, n) == 1, float(fi.max),
                            float(fi.smallest_normal)).astype(et.dtype)
        return (sign * float(fi.max)).astype(et.dtype)
    if cls == "subnormal":
        mant = rng.integers(1, 1 << fi.nmant, n, dtype=np.uint64, endpoint=False)
        # half of them the smallest or the largest subnormal
        edge = rng.integers(0, 4, n)
        mant = np.where(edge == 0, np.uint64(1),
                        np.where(edge == 1, np.uint64((1 << fi.nmant) - 1), mant))
        bits = mant | np.where(sign < 0, np.uint64(et.sign_bit), np.uint64(0))
        return from_bit_patterns(bits, et)
    # ordinary (and the rounding scheme's refinements, made by the caller): the operand's
    # own distribution, then its finite non-special values kept
    draws = draw_array(et, (4 * n + 8,), rng, distribution)
    w = _wide(draws)
    ok = np.isfinite(w) & (np.abs(w) >= float(fi.smallest_normal)) & (np.abs(w) < float(fi.max))
    good = draws[ok]
    if good.size >= n:
        return good[:n]
    extra = round_to(rng.uniform(-8, 8, n - good.size), et)
    return np.concatenate([good, extra])


def _complex_codes(x: np.ndarray, et: ElementType, names: Sequence[str]) -> np.ndarray:
    comp = et.component
    parts = [np.asarray(x.real).astype(comp.dtype), np.asarray(x.imag).astype(comp.dtype)]
    fnames = classes_of(comp)
    re, im = (np.array(fnames, dtype=object)[_float_codes(_wide(p), comp, fnames)]
              for p in parts)

    def either(*labels):
        return np.isin(re, labels) | np.isin(im, labels)
    codes = np.full(x.shape, names.index("ordinary"), np.int16)
    order = [("extreme", either("extreme")), ("subnormal", either("subnormal")),
             ("zero", np.isin(re, ["+0", "-0"]) & np.isin(im, ["+0", "-0"])),
             ("inf", either("+inf", "-inf")), ("nan", either("nan"))]
    for label, cond in order:          # later ones win: nan > inf > zero > ...
        codes[cond] = names.index(label)
    return codes


def _complex_generate(et: ElementType, cls: str, n: int, rng: np.random.Generator,
                      distribution: str) -> np.ndarray:
    comp = et.component

    def part(c):
        return sample(comp, c, n, rng).astype(np.float64)
    zero = np.where(rng.integers(0, 2, n) == 1, -0.0, 0.0)
    ordinary = part("ordinary")
    if cls == "zero":
        re, im = np.where(rng.integers(0, 2, n) == 1, -0.0, 0.0), zero
    elif cls == "nan":
        re, im = part("nan"), np.where(rng.integers(0, 2, n) == 1, ordinary, part("+inf")
                                       if _has_inf(comp) else ordinary)
    elif cls == "inf":
        re = np.where(rng.integers(0, 2, n) == 1, np.inf, -np.inf)
        im = np.where(rng.integers(0, 2, n) == 1, ordinary, zero)
    elif cls == "subnormal":
        re, im = part("subnormal"), np.where(rng.integers(0, 2, n) == 1, ordinary, zero)
    elif cls == "extreme":
        re, im = part("extreme"), np.where(rng.integers(0, 2, n) == 1, ordinary, zero)
    else:
        re, im = ordinary, np.where(rng.integers(0, 4, n) == 0, zero, part("ordinary"))
    swap = rng.integers(0, 2, n) == 1
    out = np.empty(n, et.dtype)
    out.real = np.where(swap, im, re).astype(comp.dtype)
    out.imag = np.where(swap, re, im).astype(comp.dtype)
    return out


def _ints(x: np.ndarray, et: ElementType) -> np.ndarray:
    return np.asarray(x).astype(np.int64 if et.is_signed else np.uint64)


def _int_generate(et: ElementType, cls: str, n: int, rng: np.random.Generator,
                  distribution: str) -> np.ndarray:
    from .values import draw_array
    fixed = {"0": 0, "-1": -1, "min": et.int_min, "max": et.int_max}
    if cls in fixed:
        return np.full(n, fixed[cls], dtype=object).astype(
            np.uint64 if et.name == "ui64" else np.int64).astype(et.dtype)
    draws = draw_array(et, (4 * n + 8,), rng, distribution)
    codes = classify(draws, et)
    good = draws[codes == classes_of(et).index("ordinary")]
    if good.size >= n:
        return good[:n]
    lo, hi = max(et.int_min + 1, -100), min(et.int_max - 1, 100)
    extra = rng.integers(lo, hi, n - good.size, endpoint=True).astype(et.dtype)
    return np.concatenate([good, extra])


@dataclasses.dataclass(frozen=True)
class Scheme:
    names: Callable[[ElementType], tuple[str, ...]]
    classify: Callable[[np.ndarray, ElementType], np.ndarray]
    generate: Callable[[ElementType, str, int, np.random.Generator, str], np.ndarray]


def _generic_names(et: ElementType) -> tuple[str, ...]:
    if et.is_boolean:
        return ("false", "true")
    if et.is_signed:
        return ("0", "-1", "min", "max", "ordinary")
    if et.is_unsigned:
        return ("0", "max", "ordinary")
    if et.is_complex:
        return ("zero", "nan", "inf", "subnormal", "extreme", "ordinary")
    # Only the classes the format has: FNUZ no -0, f8E8M0FNU no zero and no
    # subnormal, f4E2M1FN and the f6 formats no NaN, several no infinity.
    zeros = ("+0", "-0") if et.has_negative_zero else ("+0",) if et.has_zero else ()
    inf = ("+inf", "-inf") if _has_inf(et) else ()
    nan = ("nan",) if et.has_nan else ()
    sub = ("subnormal",) if _has_subnormals(et) else ()
    return (*zeros, *inf, *nan, *sub, "extreme", "ordinary")


#: The float classes some format lacks: a coverage target that names one does not
#: apply to a binding whose format lacks it.
_FORMAT_CLASSES = ("+0", "-0", "+inf", "-inf", "nan", "subnormal", "integral", "tie_even",
                   "tie_odd")


def _has_subnormals(et: ElementType) -> bool:
    fi = ml_dtypes.finfo(et.dtype)
    return float(fi.smallest_subnormal) < float(fi.smallest_normal)


def _generic_classify(x: np.ndarray, et: ElementType) -> np.ndarray:
    names = _generic_names(et)
    if et.is_boolean:
        return np.asarray(x).astype(bool).astype(np.int16)
    if et.is_complex:
        return _complex_codes(x, et, names)
    if et.is_float:
        return _float_codes(_wide(x), et, names)
    v = _ints(x, et)
    codes = np.full(v.shape, names.index("ordinary"), np.int16)
    codes[v == et.int_max] = names.index("max")
    if et.is_signed:
        codes[v == -1] = names.index("-1")
        codes[v == et.int_min] = names.index("min")
    codes[v == 0] = names.index("0")
    return codes


def _generic_generate(et, cls, n, rng, distribution):
    if et.is_boolean:
        return np.full(n, cls == "true")
    if et.is_complex:
        return _complex_generate(et, cls, n, rng, distribution)
    if et.is_float:
        return _float_generate(et, cls, n, rng, distribution)
    return _int_generate(et, cls, n, rng, distribution)


def _shift_names(et: ElementType) -> tuple[str, ...]:
    if not et.is_integer:
        return _generic_names(et)
    neg = ("negative",) if et.is_signed else ()
    return ("0", "in_range", "width-1", "width", "past_width", *neg)


def _shift_classify(x: np.ndarray, et: ElementType) -> np.ndarray:
    if not et.is_integer:
        return _generic_classify(x, et)
    names = _shift_names(et)
    v = _ints(x, et)
    codes = np.full(v.shape, names.index("past_width"), np.int16)
    if et.is_signed:
        codes[v < 0] = names.index("negative")
    codes[(v >= 1) & (v <= et.bits - 2)] = names.index("in_range")
    codes[v == et.bits - 1] = names.index("width-1")
    codes[v == et.bits] = names.index("width")
    codes[v == 0] = names.index("0")
    return codes


def _shift_generate(et, cls, n, rng, distribution):
    if not et.is_integer:
        return _generic_generate(et, cls, n, rng, distribution)
    b = et.bits
    ranges = {"0": (0, 0), "in_range": (1, b - 2), "width-1": (b - 1, b - 1), "width": (b, b),
              "past_width": (b + 1, min(et.int_max, 4 * b)), "negative": (max(et.int_min, -b), -1)}
    lo, hi = ranges[cls]
    vals = rng.integers(lo, hi, n, endpoint=True).astype(object)
    if cls in ("past_width", "negative"):       # now and then the type's extreme
        vals[rng.integers(0, 4, n) == 0] = et.int_max if cls == "past_width" else et.int_min
    return vals.astype(
        np.uint64 if et.name == "ui64" else np.int64).astype(et.dtype)


def _rounding_names(et: ElementType) -> tuple[str, ...]:
    base = _generic_names(et)
    if not et.is_float:
        return base
    names = tuple(n for n in base if n != "ordinary") + ("integral", "tie_even", "tie_odd",
                                                        "ordinary")
    if et.bits <= 8:            # keep the classes the format has values of (f8E8M0FNU:
        every = np.arange(1 << et.bits, dtype=np.uint8).view(et.dtype)   # no tie_odd)
        met = set(np.unique(_rounding_codes(every, et, names)).tolist())
        names = tuple(n for i, n in enumerate(names) if i in met)
    return names


def _rounding_classify(x: np.ndarray, et: ElementType) -> np.ndarray:
    if not et.is_float:
        return _generic_classify(x, et)
    return _rounding_codes(x, et, _rounding_names(et))


def _rounding_codes(x: np.ndarray, et: ElementType, names: Sequence[str]) -> np.ndarray:
    w = _wide(x)
    codes = _float_codes(w, et, names)
    ordinary = codes == (names.index("ordinary") if "ordinary" in names else -1)
    a = np.abs(np.where(ordinary, w, 0.0))
    fl = np.floor(a)
    frac = a - fl
    half = ordinary & (frac == 0.5)
    even = np.fmod(fl, 2) == 0
    for label, cond in (("integral", ordinary & (frac == 0)), ("tie_even", half & even),
                        ("tie_odd", half & ~even)):
        if label in names:
            codes[cond] = names.index(label)
    return codes


def _rounding_generate(et, cls, n, rng, distribution):
    if not et.is_float or cls not in ("integral", "tie_even", "tie_odd", "ordinary"):
        return _generic_generate(et, cls, n, rng, distribution)
    fi = ml_dtypes.finfo(et.dtype)
    p = fi.nmant + 1            # precision: the largest tie is 2**(p - 1) - 0.5
    sign = np.where(rng.integers(0, 2, n) == 1, -1.0, 1.0) if et.has_sign else np.ones(n)
    k = rng.integers(0, 4, n).astype(np.float64)
    if cls == "integral":
        v = rng.integers(1, 9, n).astype(np.float64)
        v = np.where(rng.integers(0, 4, n) == 0, 2.0 ** (p - 1) + 1, v)   # odd, above the ties
    elif cls == "tie_even":
        v = 2 * k + 0.5
    elif cls == "tie_odd":
        v = 2 * k + 1.5
        v = np.where(rng.integers(0, 4, n) == 0, 2.0 ** (p - 1) - 0.5, v)  # the largest tie
    else:
        v = rng.uniform(0, 8, n)
        v = np.where(rng.integers(0, 4, n) == 0, 0.5 - 2.0 ** -(p + 1), v)  # just below 0.5
    return round_to(sign * v, et)


SCHEMES: dict[str, Scheme] = {
    "generic": Scheme(_generic_names, _generic_classify, _generic_generate),
    "shift_count": Scheme(_shift_names, _shift_classify, _shift_generate),
    "rounding": Scheme(_rounding_names, _rounding_classify, _rounding_generate),
}

#: Classes of ordinary importance: rows made of them only come last.
_PLAIN = {"ordinary", "in_range", "integral", "true", "false"}


# ---------------------------------------------------------------------------
# The model of one op and binding
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Operand:
    name: str                   # the spec input's name
    spec_index: int             # its position among the spec's inputs
    et: ElementType
    scheme: str
    distribution: str

    @property
    def classes(self) -> tuple[str, ...]:
        return classes_of(self.et, self.scheme)


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    where: str | None
    at: tuple[tuple[str, str], ...]         # (input name, class)
    text: str = ""


@dataclasses.dataclass(frozen=True)
class Model:
    op: str
    operands: tuple[Operand, ...]
    pairs: tuple[tuple[int, int], ...]      # operand index pairs (element-wise ops)
    targets: tuple[Target, ...]
    #: the YAML's ``coverage: live:``, over the signature: where a nonempty signature's
    #: results still do not depend on its inputs through the op's main computation
    #: (reduce_window's windows on padding only), it is false (:func:`live`)
    live: "str | None" = None

    def items(self) -> dict[str, list[str]]:
        """The universe: what this binding's plan should meet, per kind."""
        out: dict[str, list[str]] = {k: [] for k in KINDS}
        if self.pairs:
            for i, j in self.pairs:
                a, b = self.operands[i], self.operands[j]
                out["pairs"] += [pair_item(a.name, x, b.name, y)
                                 for x in a.classes for y in b.classes]
        else:
            for o in self.operands:
                out["classes"] += [f"{o.name}={c}" for c in o.classes]
        out["targets"] = [t.name for t in self.targets]
        return out

    @property
    def signature_targets(self) -> tuple[Target, ...]:
        return tuple(t for t in self.targets if t.where)


def pair_item(a: str, x: str, b: str, y: str) -> str:
    return f"{a}={x},{b}={y}"


def _section(spec: OpSpec) -> dict:
    return spec.data.get("coverage") or {}


#: id(spec) -> (spec, {binding items: Model}); specs hold dicts, so they are not hashable
_MODELS: dict[int, tuple[OpSpec, dict[tuple, "Model"]]] = {}


def model(spec: OpSpec, binding: Mapping[str, str]) -> Model:
    """The coverage model of ``spec`` for one type binding (cached per op and binding)."""
    held = _MODELS.get(id(spec))
    if held is None or held[0] is not spec:
        held = _MODELS[id(spec)] = (spec, {})
    key = tuple(sorted(binding.items()))
    if key not in held[1]:
        held[1][key] = _model(spec, dict(binding))
    return held[1][key]


def _model(spec: OpSpec, binding: dict[str, str]) -> Model:
    section = _section(spec)
    declared = section.get("operands") or {}
    operands: list[Operand] = []
    for i, t in enumerate(spec.inputs):
        opts = declared.get(t.name) or {}
        if opts.get("track") is False or t.type is not None:
            continue
        if t.values == "index" and "classes" not in opts:
            continue            # start indices: their own distribution, not values
        try:
            et = element_type(ex.evaluate(opts.get("type", t.element_type), {**binding, "k": 0}))
        except (ex.ExpressionError, ValueError):
            continue            # not fixed by the binding (gather's index type)
        operands.append(Operand(t.name, i, et, opts.get("classes", "generic"),
                                t.values or "default"))
    pairs: tuple = ()
    if spec.elementwise and len(operands) >= 2:
        pairs = tuple((i, j) for i in range(len(operands)) for j in range(i + 1, len(operands)))
    targets = []
    for t in section.get("targets") or []:
        if "types" in t and not ex.evaluate(t["types"], binding):
            continue
        at = tuple((str(k), str(v)) for k, v in (t.get("at") or {}).items())
        names = {o.name: o for o in operands}
        for k, v in at:
            if k not in names:
                raise ValueError(f"{spec.name}: coverage target {t['name']}: {k!r} is not a "
                                 f"tracked input ({', '.join(names)})")
            if v not in names[k].classes and v in _FORMAT_CLASSES and names[k].et.is_float:
                break           # a class this format lacks (FNUZ -0, E8M0 zero, f4 NaN)
            if v not in names[k].classes:
                raise ValueError(f"{spec.name}: coverage target {t['name']}: {names[k].et.name} "
                                 f"has no class {v!r} in scheme {names[k].scheme!r}")
        else:
            targets.append(Target(str(t["name"]), t.get("where"), at, t.get("text", "")))
    return Model(spec.name, tuple(operands), pairs, tuple(targets), section.get("live"))


# ---------------------------------------------------------------------------
# Signatures: the environment of `where`, and the scheduler
# ---------------------------------------------------------------------------

def signature_env(spec: OpSpec, sig: Signature, binding: Mapping[str, str]) -> dict[str, Any]:
    env: dict[str, Any] = dict(binding)
    env.update(sig.attributes)
    env.update(spec.region_env(sig.regions))
    env.update(zip((t.name for t in spec.inputs), spec.split_inputs(sig.input_types)))
    env.update(zip((t.name for t in spec.outputs), spec.split_outputs(sig.result_types)))
    return env


def meets_where(spec: OpSpec, sig: Signature, binding: Mapping[str, str], where: str) -> bool:
    try:
        return bool(ex.evaluate(where, signature_env(spec, sig, binding)))
    except ex.ExpressionError:
        return False


def _leaf_sizes(types) -> list[int]:
    return [leaf.size for t in types for leaf in t.leaves()]


def nonempty(sig: Signature) -> bool:
    """Does every tensor of the signature hold elements? A signature of tokens only
    (after_all) holds no tensor and counts as nonempty; one of no value at all (an empty
    tuple) does not."""
    sizes = _leaf_sizes(sig.input_types) + _leaf_sizes(sig.result_types)
    if not sizes:
        return any(isinstance(t, TokenType) for t in sig.input_types + sig.result_types)
    return min(sizes) > 0


def live(spec: OpSpec, sig: Signature, binding: Mapping[str, str]) -> bool:
    """Do the signature's results depend on its inputs through the op's main computation?
    Every tensor holds elements (:func:`nonempty`) and the spec's ``coverage: live:``
    expression, where it has one, holds (a reduce_window window touches the operand)."""
    if not nonempty(sig):
        return False
    m = model(spec, binding)
    return m.live is None or meets_where(spec, sig, binding, m.live)


def _operand_types(spec: OpSpec, sig: Signature, m: Model) -> list[TensorType]:
    groups = spec.split_inputs(list(sig.input_types))
    out = []
    for o in m.operands:
        g = groups[o.spec_index]
        if isinstance(g, list) and not g:       # an empty variadic group (outfeed of none)
            continue
        out.append(g[0] if isinstance(g, list) else g)
    return out


def richness(spec: OpSpec, sig: Signature, m: Model) -> tuple[int, bool]:
    """(elements of the largest tracked input, whether no tracked input of an element-wise
    op is broadcast). An op without tracked inputs counts its inputs and results alike:
    rng_bit_generator's state is two or four words whatever it computes, so a rich
    signature is one with a large output (measured on its inputs alone, none was ever
    rich and every binding drew all four pools, a fifth of a quick plan's time)."""
    types = [t for t in _operand_types(spec, sig, m) if isinstance(t, TensorType)] \
        if m.operands else [leaf for t in (*sig.input_types, *sig.result_types)
                            for leaf in t.leaves()]
    if not types:
        return 0, True
    return max(t.size for t in types), not m.pairs or len({t.shape for t in types}) == 1


def _rank(spec: OpSpec, sig: Signature, m: Model, binding: Mapping[str, str]
          ) -> tuple[bool, bool, bool]:
    """(False, False, False) for a rich signature (a :func:`live` one); smaller is
    richer."""
    size, flat = richness(spec, sig, m)
    return (not live(spec, sig, binding), size < RICH, not flat)


def schedule(spec: OpSpec, binding: Mapping[str, str],
             draw: "Callable[[int], Sequence[Signature]]", n: int) -> list[Signature]:
    """``n`` signatures for one binding, chosen from hypothesis's draws (``draw(k)``: the
    first ``k``, in order): one meeting each signature-level target, a rich one (no
    zero-sized input, at least :data:`RICH` elements, no broadcast input of an
    element-wise op), then the draws in their order; the first draw, where chosen, first. From ``n + 2`` draws, or
    ``4n + 16`` where those have no rich signature or none for a target (each draw costs
    about a millisecond: a quick run plans some 1000 bindings), then ``16n + 64`` and
    ``64n + 256`` where those have none either (reduce_window's draws put most windows on
    padding only: one in a hundred of its f8E5M2 draws sums several operand elements)."""
    m = model(spec, binding)
    for size in (n + 2, 4 * n + 16, 16 * n + 64, 64 * n + 256):
        chosen, complete = _choose(spec, binding, m, list(dict.fromkeys(draw(size))), n)
        if complete:
            break
    return chosen


def _choose(spec: OpSpec, binding: Mapping[str, str], m: Model, pool: list[Signature],
            n: int) -> tuple[list[Signature], bool]:
    chosen: list[Signature] = []
    complete = True

    def pick(cands: list[Signature]) -> None:
        cands = [s for s in cands if s not in chosen]
        if cands and len(chosen) < n:
            chosen.append(min(cands, key=lambda s: (_rank(spec, s, m, binding),
                                                    cands.index(s))))

    for t in m.signature_targets:
        if any(meets_where(spec, s, binding, t.where) and live(spec, s, binding)
               for s in chosen):
            continue
        found = [s for s in pool if meets_where(spec, s, binding, t.where)]
        complete &= any(live(spec, s, binding) for s in found)
        pick(found)
    if not any(_rank(spec, s, m, binding) == (False, False, False) for s in chosen):
        complete &= any(_rank(spec, s, m, binding) == (False, False, False) for s in pool)
        pick(pool)
    for s in pool:
        if len(chosen) >= n:
            break
        if s not in chosen:
            chosen.append(s)
    # hypothesis's first, minimal draw (a scalar, an empty tensor) stays first where it is
    # planned: what a hypothesis-driven front-end tries first
    if pool and pool[0] in chosen:
        chosen.remove(pool[0])
        chosen.insert(0, pool[0])
    return chosen, complete


# ---------------------------------------------------------------------------
# The systematic part of a batch
# ---------------------------------------------------------------------------

def _importance(m: Model, ops: Sequence[int], row: Sequence[int]) -> int:
    return sum(m.operands[i].classes[c] in _PLAIN for i, c in zip(ops, row))


def _rows(m: Model, ops: Sequence[int]) -> list[tuple[int, ...]]:
    """Class combinations of operands ``ops`` that meet every pair of them (every class
    of each when there is one): the targets' combinations first (-1: any value), then
    the others, those with fewer ordinary classes first."""
    sizes = [len(m.operands[i].classes) for i in ops]
    if not ops:
        return []
    if len(ops) == 1:
        rows = [(c,) for c in range(sizes[0])]
    elif len(ops) == 2:
        rows = [(a, b) for a in range(sizes[0]) for b in range(sizes[1])]
    else:
        # a covering array of strength 2: the two largest factors in full, each other
        # one by (a + b) mod its size (every pair of it with either of them is met, as
        # those two are at least as large)
        order = sorted(range(len(ops)), key=lambda k: -sizes[k])
        x, y = order[0], order[1]
        rows = []
        for a in range(sizes[x]):
            for b in range(sizes[y]):
                r = [0] * len(ops)
                r[x], r[y] = a, b
                for k in order[2:]:
                    r[k] = (a + b) % sizes[k]
                rows.append(tuple(r))
    rows.sort(key=lambda r: _importance(m, ops, r))
    names = [m.operands[i].name for i in ops]
    first: list[tuple[int, ...]] = []
    for t in m.targets:
        want = dict(t.at)
        if want and set(want) <= set(names):
            row = tuple(m.operands[i].classes.index(want[n]) if n in want else -1
                        for i, n in zip(ops, names))
            if row not in first:
                first.append(row)
    return first + [r for r in rows if r not in first]


def _leaf_index(sig: Signature, spec: OpSpec) -> list[int]:
    """The stacked-array index of each spec input's first tensor (-1: none)."""
    groups = spec.split_inputs(list(range(len(sig.input_types))))
    leaves = np.cumsum([0] + [len(t.leaves()) for t in sig.input_types]).tolist()
    out = []
    for g in groups:
        flat = (g[0] if g else None) if isinstance(g, list) else g
        out.append(-1 if flat is None else leaves[flat])
    return out


def _layout(spec: OpSpec, sig: Signature, m: Model) -> list:
    """Per tracked operand: (its stacked array index, its tensor type), or None."""
    index = _leaf_index(sig, spec)
    out = []
    for o, t in zip(m.operands, _operand_types(spec, sig, m)):
        ok = isinstance(t, TensorType) and index[o.spec_index] >= 0
        out.append((index[o.spec_index], t) if ok else None)
    return out


# ---------------------------------------------------------------------------
# Class pools: each class's values drawn once per seed
# ---------------------------------------------------------------------------

#: Values of each class in a seed's pool; every batch gathers its systematic values from
#: the pools (a random member per position), so that drawing costs one gather per input.
POOL = 256
#: Pools held (one per seed, element type, scheme and distribution: a few per op), least
#: recently used dropped first.
POOLS_HELD = 512
_POOLS: "collections.OrderedDict[tuple, np.ndarray]" = collections.OrderedDict()


def class_pool(et: "ElementType | str", scheme: str, distribution: str,
               seed: int) -> np.ndarray:
    """[classes, POOL] values of ``et``, row ``c`` of class ``c`` of ``scheme``
    (:func:`sample`): drawn from the seed and the type alone, so that every process and
    every front-end gathers from the same pool."""
    et = element_type(et)
    key = (seed, et, scheme, distribution)
    pool = _POOLS.get(key)
    if pool is not None:
        _POOLS.move_to_end(key)
        return pool
    tag = "\x1f".join(("coverage pool", et.name, scheme, distribution))
    rng = np.random.default_rng([seed, zlib.crc32(tag.encode())])
    pool = np.stack([sample(et, c, POOL, rng, scheme, distribution)
                     for c in classes_of(et, scheme)])
    pool.flags.writeable = False
    _POOLS[key] = pool
    while len(_POOLS) > POOLS_HELD:
        _POOLS.popitem(last=False)
    return pool


# ---------------------------------------------------------------------------
# What is fixed per signature (cached: the overlay and the tally run per batch)
# ---------------------------------------------------------------------------

#: Per-signature layouts held, least recently used dropped first.
SIGNATURES_HELD = 4096
_PER_SIGNATURE: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()


def _per_signature(what: str, spec: OpSpec, sig: Signature, binding: Mapping[str, str],
                   build: Callable[[], Any]) -> Any:
    key = (what, id(spec), sig, tuple(sorted(binding.items())))
    held = _PER_SIGNATURE.get(key)
    if held is not None and held[0] is spec:        # (specs hold dicts: keyed by id)
        _PER_SIGNATURE.move_to_end(key)
        return held[1]
    value = build()
    _PER_SIGNATURE[key] = (spec, value)
    while len(_PER_SIGNATURE) > SIGNATURES_HELD:
        _PER_SIGNATURE.popitem(last=False)
    return value


@dataclasses.dataclass(frozen=True, eq=False)
class _Group:
    """Inputs of one shape that take class combinations position by position."""
    rows: np.ndarray                             # [combinations, inputs] codes; -1: any
    cycle: bool                                  # over the whole systematic share
    inputs: tuple[tuple[int, Operand], ...]      # (stacked array index, operand)
    free: tuple[bool, ...]                       # per input: has a row left it free (-1)


def _groups(spec: OpSpec, sig: Signature, binding: Mapping[str, str]) -> tuple[_Group, ...]:
    """Element-wise ops: the inputs of the largest shape take the combinations position
    by position; inputs broadcast from a scalar take theirs case by case. Other ops:
    each input its own classes."""
    m = model(spec, binding)
    layout = _layout(spec, sig, m)
    live = [k for k, l in enumerate(layout) if l is not None and l[1].size > 0]
    if not live:
        return ()
    cycle = False
    if m.pairs:
        shape = max((layout[k][1].shape for k in live), key=lambda s: math.prod(s))
        full = [k for k in live if layout[k][1].shape == shape]
        scalars = [k for k in live if k not in full and layout[k][1].size == 1]
        groups = [full, scalars]
        # both groups go round their combinations over the whole systematic share, so
        # that each case's scalars meet several of the full inputs' combinations
        cycle = bool(scalars)
    else:
        groups = [[k] for k in live]
    out = []
    for ops in groups:
        if ops:
            rows = np.array(_rows(m, ops), np.int64).reshape(-1, len(ops))
            out.append(_Group(rows, cycle, tuple((layout[k][0], m.operands[k]) for k in ops),
                              tuple(bool(f) for f in (rows < 0).any(axis=0))))
    return tuple(out)


# ---------------------------------------------------------------------------
# The systematic part of a batch
# ---------------------------------------------------------------------------

def overlay(spec: OpSpec, sig: Signature, binding: Mapping[str, str],
            arrays: Sequence[np.ndarray], rng: np.random.Generator, batch_no: int = 0,
            seed: int = 0) -> None:
    """Write the model's class combinations into the first positions of ``arrays`` (the
    stacked inputs of one batch, changed in place); batch ``batch_no`` of a signature
    goes on where the one before it stopped. Each position's value is a random member
    of its class's pool for ``seed`` (:func:`class_pool`)."""
    groups = _per_signature("groups", spec, sig, binding,
                            lambda: _groups(spec, sig, binding))
    todo = []
    for g in groups:
        positions = arrays[g.inputs[0][0]].size     # cases x elements (same in the group)
        if positions:
            cap = max(1, int(positions * SYSTEMATIC_SHARE))
            todo.append((g, cap if g.cycle else min(len(g.rows), cap)))
    if not todo:
        return
    # Every position's pool member, drawn in one call: the values consecutive calls of
    # rng.integers(0, POOL, count), group by group and input by input, give (the same
    # stream; tests/test_warm_draws.py holds the equality).
    members = rng.integers(0, POOL, sum(count * len(g.inputs) for g, count in todo))
    start = 0
    with np.errstate(all="ignore"):
        for g, count in todo:
            n = count * len(g.inputs)
            _fill(g, arrays, members[start:start + n].reshape(len(g.inputs), count),
                  batch_no, seed, count)
            start += n


def _fill(g: _Group, arrays, members: np.ndarray, batch_no: int, seed: int,
          count: int) -> None:
    """Rows of the group into the first ``count`` positions of its inputs (of one
    shape), each position a pool member (``members``: [inputs, count]); once through
    (``cycle``: over the whole systematic share)."""
    picked = _picked(g, batch_no, count)
    for col, (index, o) in enumerate(g.inputs):
        pool = class_pool(o.et, o.scheme, o.distribution, seed)
        target = arrays[index]
        assert target.flags.c_contiguous, "value batches are contiguous arrays"
        flat = target.reshape(-1)           # (a view of a contiguous array)
        codes, at = picked[col]
        if at is not None:
            flat[at] = pool[codes[at], members[col][at]]
        else:
            flat[:count] = pool[codes, members[col]]


@functools.lru_cache(maxsize=4096)
def _picked(g: _Group, batch_no: int, count: int) -> tuple:
    """Per input of the group: the class codes of batch ``batch_no``'s first ``count``
    positions, and where a row leaves the input free, the positions it does not (None:
    every one). A function of the group's rows alone (held: every batch asks)."""
    picked = g.rows[(batch_no * count + np.arange(count)) % len(g.rows)]
    out = []
    for col in range(len(g.inputs)):
        codes = np.ascontiguousarray(picked[:, col])
        codes.flags.writeable = False
        at = None
        if g.free[col]:
            at = np.nonzero(codes >= 0)[0]
            at.flags.writeable = False
        out.append((codes, at))
    return tuple(out)


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------

def met(spec: OpSpec, sig: Signature, binding: Mapping[str, str],
        arrays: Sequence[np.ndarray]) -> set[tuple[str, str]]:
    """What one batch of ``sig`` meets: (kind, item) pairs of the model's universe."""
    t = Tally(spec, sig, binding)
    t.add(arrays)
    return t.seen


@dataclasses.dataclass(frozen=True)
class _Probe:
    """What measuring a signature's batches needs that the signature alone fixes."""
    inputs: dict[int, tuple[int, Operand]]      # live operand -> (array index, operand)
    sizes: dict[int, int]                       # live operand -> its classes
    pairs: tuple[tuple[int, int], ...]          # pairs of live operands
    targets: tuple[Target, ...]                 # the `at` targets whose `where` holds
    plain: tuple[str, ...]                      # the targets met by any batch (no `at`)


def _probe(spec: OpSpec, sig: Signature, binding: Mapping[str, str]) -> _Probe:
    m = model(spec, binding)
    inputs = {k: (l[0], m.operands[k]) for k, l in enumerate(_layout(spec, sig, m))
              if l is not None and l[1].size > 0}
    targets, plain = [], []
    for t in m.targets:
        if t.where and not meets_where(spec, sig, binding, t.where):
            continue
        if t.at:
            targets.append(t)
        elif nonempty(sig):
            plain.append(t.name)
    return _Probe(inputs, {k: len(o.classes) for k, (_, o) in inputs.items()},
                  tuple((i, j) for i, j in m.pairs if i in inputs and j in inputs),
                  tuple(targets), tuple(plain))


class Tally:
    """What the batches of one signature met, for the runner's ``signature`` records:
    per pair of inputs a table of the class pairs met, per input its classes met, and
    the targets met; once every item of the universe is met, later batches are not
    looked at."""

    def __init__(self, spec: OpSpec, sig: Signature, binding: Mapping[str, str]) -> None:
        self.spec, self.sig, self.binding = spec, sig, dict(binding)
        self.model = model(spec, binding)
        self.universe = self.model.items()
        self.probe = _per_signature("probe", spec, sig, binding,
                                    lambda: _probe(spec, sig, binding))
        size = self.probe.sizes
        self._pairs = {(i, j): np.zeros(size[i] * size[j], bool) for i, j in self.probe.pairs}
        self._classes = {k: np.zeros(n, bool) for k, n in size.items()} \
            if not self.model.pairs else {}
        self._targets: set[str] = set()
        self._total = sum(map(len, self.universe.values()))
        self._done = False

    def add(self, arrays: Sequence[np.ndarray]) -> None:
        if self._done:
            return
        p, m = self.probe, self.model
        self._targets.update(p.plain)
        live = dict(p.inputs)
        if m.pairs and live:
            widths = {k: _width(arrays[i]) for k, (i, _) in live.items()}
            width = max(widths.values())
            live = {k: v for k, v in live.items() if widths[k] in (1, width)}
            # (an input that is not element-aligned makes no pairs and meets no target)
        codes: dict[int, np.ndarray] = {}

        def code(k: int) -> np.ndarray:
            if k not in codes:
                i, o = live[k]
                x = np.asarray(arrays[i])
                codes[k] = classify(x.reshape(len(x), -1), o.et, o.scheme)
            return codes[k]

        for (i, j), seen in self._pairs.items():
            if i in live and j in live and not seen.all():
                kj, ki = p.sizes[j], p.sizes[i]
                a, b = np.broadcast_arrays(code(i), code(j))
                # (a code of -1, no class, is read as Python reads index -1: the last)
                x, y = np.divmod(a.astype(np.int64) * kj + b, kj)
                seen |= np.bincount(((x % ki) * kj + y).reshape(-1),
                                    minlength=ki * kj).astype(bool)
        for k, seen in self._classes.items():
            if not seen.all():
                n = p.sizes[k]
                seen |= np.bincount((code(k).astype(np.int64) % n).reshape(-1),
                                    minlength=n).astype(bool)
        for t in p.targets:
            if t.name in self._targets or any(self._index(n) not in live for n, _ in t.at):
                continue
            try:
                hits = np.broadcast_arrays(*[code(self._index(n)) ==
                                             m.operands[self._index(n)].classes.index(c)
                                             for n, c in t.at])
            except ValueError:
                continue
            if np.logical_and.reduce(hits).any():
                self._targets.add(t.name)
        self._done = self._met_count() == self._total

    def _index(self, name: str) -> int:
        return next(k for k, o in enumerate(self.model.operands) if o.name == name)

    def _met_count(self) -> int:
        return sum(int(s.sum()) for s in (*self._pairs.values(), *self._classes.values())) \
            + len(self._targets)

    @property
    def seen(self) -> set[tuple[str, str]]:
        """(kind, item) pairs of the model's universe met so far."""
        ops, out = self.model.operands, set()
        for (i, j), seen in self._pairs.items():
            ci, cj = ops[i].classes, ops[j].classes
            kj = len(cj)
            for v in np.nonzero(seen)[0].tolist():
                x, y = divmod(v, kj)
                out.add(("pairs", pair_item(ops[i].name, ci[x], ops[j].name, cj[y])))
        for k, seen in self._classes.items():
            ck = ops[k].classes
            out.update(("classes", f"{ops[k].name}={ck[v]}")
                       for v in np.nonzero(seen)[0].tolist())
        out.update(("targets", t) for t in self._targets)
        return out

    def record(self) -> dict[str, Any]:
        """``{"of": {kind: n}, "met": {kind: n}, "missing": {kind: [item, ...]}}`` (kinds
        with an empty universe left out)."""
        seen = self.seen
        of, got, missing = {}, {}, {}
        for kind, items in self.universe.items():
            if not items:
                continue
            miss = [i for i in items if (kind, i) not in seen]
            of[kind], got[kind] = len(items), len(items) - len(miss)
            if miss:
                missing[kind] = miss
        return {"of": of, "met": got, "missing": missing}


def _width(x: np.ndarray) -> int:
    """Elements per case of a stacked input."""
    x = np.asarray(x)
    return x.size // len(x) if len(x) else math.prod(x.shape[1:])
