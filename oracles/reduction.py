"""reduce and reduce_window, written from the spec's "More formally", with the body as
data; and the conditions that say which of their results the spec leaves open.

Both ops reduce *leaves* with a ``body`` region. The spec's ``reduce`` is
``exec(schedule)`` for an implementation-defined full binary tree whose in-order
traversal is the slice's values in index order, interspersed with an
implementation-defined number of ``init_values`` (003 "### reduce"); ``reduce_window``
is that reduce over each window of the inputs padded (and base-dilated) with the init
values (003 "### reduce_window"). A *geometry* says where each result element's leaves
are (:class:`ReduceGeometry`, :class:`WindowGeometry`, registered per op in
:data:`GEOMETRIES`), for the oracle, for the conditions below and for the
``reduction`` bound of conformance/checking/verdicts/reduction.py alike.

The oracle's tree: the init value once, then the leaves. A body whose result ``k`` is
one op of ``(arg k, arg N+k)`` (``add``, ``multiply``, ``maximum``, ``minimum``,
``and``, ``or``, ``xor``) is evaluated per result with numpy ufunc reductions: floats at
float64 (complex128) and correctly rounded once at the end, so that a float sum is the
rounded float64 sum (within a few float64 ulps of the exact one, and exactly it where
every order gives the same value), integers on two's-complement bit patterns (wrapping),
IEEE maximum/minimum with NaN propagation and -0 < +0. Any other body (a tuple body
whose results depend on each other, such as an arg-max, subtract, divide, the complex
maximum) is evaluated as a balanced tree over ``[init, leaf0, leaf1, ...]``: one
vectorised region evaluation (oracles/regions.py) per level, over every result element
at once. No Python loop runs over result elements.

What the spec leaves open (the ``implementation_defined`` rules of the specs call the
conditions registered here, which get the inputs with a leading batch axis):

- ``reduction_init_dependent``: where the number of init values in the tree changes the
  result (an init value that is not the body's identity on the values involved);
- ``reduction_nan_forced``: where every result is NaN whatever the tree (a NaN leaf of a
  NaN-propagating body), so that even an order-dependent body is checked there;
- ``reduction_sum_out_of_range``: where a partial sum of some tree could overflow
  (floats: infinity in one tree, a finite value in another; integers: an overflow,
  implementation-defined by the spec's "Errors");
- ``reduction_product_out_of_range``: where a partial product of some tree could
  overflow or underflow (floats) or overflow (integers), or complex arithmetic meets a
  non-finite part (implementation-defined);
- ``reduction_complex_order``: where a complex maximum/minimum meets a NaN part or a tie
  (values equal under IEEE comparison that differ in the sign of a zero part), which
  maximum's and minimum's own specs leave implementation-defined.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

from conformance.core.dense import parse_dense
from conformance.core.numerics import round_to, to_wide
from conformance.core.types import ElementType, element_type
from conformance.specs.expressions import alternative, condition
from conformance.specs.regions import Arg, Call, parse as parse_region

from . import regions
from .regions import converted
from ._kernels import as_u64, int_values, wrap
from .registry import Membership, register

__all__ = ["GEOMETRIES", "LEAVES", "geometry", "components", "evaluate_tree", "leaves_with_init",
           "granularity", "finite_magnitudes"]


# ---------------------------------------------------------------------------
# The body
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def components(text: str) -> tuple[str | None, ...]:
    """Per result ``k`` of a body with ``2N`` arguments: the op's name where result ``k``
    is one call ``op(arg k, arg N+k)`` or ``op(arg N+k, arg k)`` without attributes, else
    None (a result that reads other arguments or calls several ops)."""
    region = parse_region(text)
    n = len(region.arg_types) // 2
    out: list[str | None] = []
    for k, node in enumerate(region.results):
        ok = (isinstance(node, Call) and not node.attributes and len(node.operands) == 2
              and all(isinstance(o, Arg) for o in node.operands)
              and sorted(o.index for o in node.operands) == [k, n + k])
        out.append(node.op if ok else None)
    return tuple(out)


# ---------------------------------------------------------------------------
# Geometries: where each result element's leaves are. ``lead`` leading axes (a batch)
# are carried through unchanged; init values then have the lead shape.
# ---------------------------------------------------------------------------

def _attr_array(value) -> np.ndarray:
    """A tensor-constant attribute (its MLIR text, or already an array) as int64."""
    if isinstance(value, str):
        value = parse_dense(value)
    return np.asarray(value, np.int64)


@dataclasses.dataclass
class ReduceGeometry:
    """``reduce``: the leaves of ``results[j]`` are ``inputs[j0, ..., :, ..., jR-1]`` with
    ``:`` at ``dimensions``, in the ascending lexicographic order of their index."""

    shape: tuple[int, ...]          # one input's shape, lead axes included
    dimensions: tuple[int, ...]
    lead: int = 0

    def __post_init__(self):
        self.axes = tuple(self.lead + d for d in sorted(self.dimensions))
        self.kept = [d for d in range(len(self.shape)) if d not in self.axes]
        self.out_shape = tuple(self.shape[d] for d in self.kept)
        self.size = int(np.prod([self.shape[d] for d in self.axes], dtype=np.int64))

    def fold(self, ufunc, x: np.ndarray, fill, identity, dtype=None) -> np.ndarray:
        """``ufunc`` reduced over every result element's leaves (``identity`` for none),
        computed in ``dtype`` (numpy casts block by block: no widened copy)."""
        return ufunc.reduce(x, axis=self.axes, initial=identity, dtype=dtype)

    def leaves(self, x: np.ndarray, fill) -> np.ndarray:
        """The leaves materialised: result shape + [number of leaves], in index order."""
        moved = np.moveaxis(x, self.axes, tuple(range(-len(self.axes), 0)))
        return moved.reshape(self.out_shape + (self.size,))


@dataclasses.dataclass
class WindowGeometry:
    """``reduce_window``: the inputs padded with the init values (``padding``, and
    ``base_dilations - 1`` holes between elements; negative padding cuts), then per result
    index the window of ``window_dimensions`` elements ``window_dilations`` apart that
    starts at ``result_index * window_strides`` (C15's ``dilated_window_shape``: XLA's
    window dilation)."""

    shape: tuple[int, ...]
    window_dimensions: Sequence[int]
    window_strides: Sequence[int]
    base_dilations: Sequence[int]
    window_dilations: Sequence[int]
    padding: Any
    lead: int = 0

    def __post_init__(self):
        pad = _attr_array(self.padding).reshape(-1, 2)
        r = len(self.shape) - self.lead
        self.wd = [int(v) for v in self.window_dimensions]
        self.ws = [int(v) for v in self.window_strides]
        self.bd = [int(v) for v in self.base_dilations]
        self.wdl = [int(v) for v in self.window_dilations]
        self.pad = [(int(lo), int(hi)) for lo, hi in pad]
        base = self.shape[self.lead:]
        dilated = [0 if s == 0 else (s - 1) * b + 1 for s, b in zip(base, self.bd)]
        self.padded_shape = [lo + d + hi for (lo, hi), d in zip(self.pad, dilated)]
        self.window_extent = [0 if w == 0 else (w - 1) * dl + 1
                              for w, dl in zip(self.wd, self.wdl)]
        self.out_shape = tuple(self.shape[:self.lead]) + tuple(
            0 if (p <= 0 or e > p) else (p - e) // s + 1
            for p, e, s in zip(self.padded_shape, self.window_extent, self.ws))
        self.size = int(np.prod(self.wd, dtype=np.int64)) if r else 1
        self.rank = r

    def padded(self, x: np.ndarray, fill, dtype=None) -> np.ndarray:
        """The inputs base-dilated and padded with ``fill`` (one value per lead index),
        in ``dtype`` (default: the inputs')."""
        lead = self.shape[:self.lead]
        dtype = x.dtype if dtype is None else np.dtype(dtype)
        if not self.bd or (all(b == 1 for b in self.bd) and all(lo == 0 and hi == 0
                                                               for lo, hi in self.pad)):
            return x.astype(dtype, copy=False)
        fill = np.asarray(fill).astype(dtype)
        if fill.ndim:       # one value per lead index
            fill = fill.reshape(lead + (1,) * self.rank)
        # Place the input on the grid with positive padding first, then cut where the
        # padding is negative.
        grid = [max(lo, 0) + (0 if s == 0 else (s - 1) * b + 1) + max(hi, 0)
                for (lo, hi), s, b in zip(self.pad, x.shape[self.lead:], self.bd)]
        out = np.empty(lead + tuple(grid), dtype)
        out[...] = fill
        if x.size:
            place = tuple(slice(None) for _ in lead) + tuple(
                slice(max(lo, 0), max(lo, 0) + (s - 1) * b + 1, b)
                for (lo, _), s, b in zip(self.pad, x.shape[self.lead:], self.bd))
            out[place] = x
        cut = tuple(slice(None) for _ in lead) + tuple(
            slice(max(-lo, 0), g - max(-hi, 0)) for (lo, hi), g in zip(self.pad, grid))
        return out[cut]

    def windows(self, p: np.ndarray) -> np.ndarray:
        """A view: result shape + window shape (no copy)."""
        if self.rank == 0:
            return p
        if any(d == 0 for d in self.out_shape[self.lead:]):
            return np.zeros(self.out_shape + tuple(self.wd), p.dtype)
        dtype = p.dtype
        if _custom(dtype):
            # ml_dtypes (fp8, int4) have no array-interface type string that as_strided
            # could rebuild them from: window their bit patterns, view the windows back
            p = p.view(np.dtype(f"u{dtype.itemsize}"))
        view = np.lib.stride_tricks.sliding_window_view(
            p, self.window_extent, axis=tuple(range(self.lead, self.lead + self.rank)))
        if view.dtype != dtype:
            view = view.view(dtype)
        index = (tuple(slice(None) for _ in range(self.lead))
                 + tuple(slice(None, None, s) for s in self.ws)
                 + tuple(slice(None, None, dl) for dl in self.wdl))
        view = view[index]
        cut = (tuple(slice(None) for _ in range(self.lead))
               + tuple(slice(0, o) for o in self.out_shape[self.lead:]))
        return view[cut]

    def fold(self, ufunc, x: np.ndarray, fill, identity, dtype=None) -> np.ndarray:
        w = self.windows(self.padded(x, fill, dtype))
        if self.rank == 0:
            return w
        axes = tuple(range(len(self.out_shape), len(self.out_shape) + self.rank))
        return ufunc.reduce(w, axis=axes, initial=identity, dtype=dtype)

    def leaves(self, x: np.ndarray, fill) -> np.ndarray:
        w = self.windows(self.padded(x, fill))
        return np.array(w, order="C").reshape(self.out_shape + (self.size,))


def _custom(dtype: np.dtype) -> bool:
    """A dtype numpy cannot rebuild from its array-interface type string (ml_dtypes)."""
    try:
        return np.dtype(dtype.str) != dtype
    except TypeError:
        return True


def _reduce_geometry(shape, attrs, lead):
    return ReduceGeometry(tuple(shape), tuple(attrs["dimensions"]), lead)


def _window_geometry(shape, attrs, lead):
    return WindowGeometry(tuple(shape), attrs["window_dimensions"], attrs["window_strides"],
                          attrs["base_dilations"], attrs["window_dilations"],
                          attrs["padding"], lead)


#: op -> geometry(shape of one input with its lead axes, attributes, lead): where the
#: leaves of each result element are.
GEOMETRIES: dict[str, Callable[..., Any]] = {
    "reduce": _reduce_geometry,
    "reduce_window": _window_geometry,
}


def geometry(op: str, shape, attrs, lead: int = 0):
    """The geometry of ``op`` for inputs of ``shape`` (``lead`` leading batch axes)."""
    return GEOMETRIES[op](shape, attrs, lead)


def _geometry_of(spec_geometry: Sequence[Any], shape, lead: int):
    """A condition's geometry argument, ``[op, attribute, ...]`` as the spec's ``when:``
    writes it (``['reduce', dimensions]``), made a geometry."""
    op, *values = spec_geometry
    names = {"reduce": ["dimensions"],
             "reduce_window": ["window_dimensions", "window_strides", "base_dilations",
                               "window_dilations", "padding"],
             "select_and_scatter": ["operand", "window_dimensions", "window_strides",
                                    "padding", "select"]}[op]
    return geometry(op, shape, dict(zip(names, values)), lead)


# ---------------------------------------------------------------------------
# Evaluating a tree
# ---------------------------------------------------------------------------

def _float_identity(op: str):
    return {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}.get(op)


_FLOAT_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.fmax,
                 "minimum": np.fmin}


def _fast_float(op, g, x, e, et: ElementType, with_init: bool):
    """A float add/multiply/maximum/minimum at float64 (complex128), rounded once."""
    ufunc = _FLOAT_UFUNCS.get(op)
    if ufunc is None or (et.is_complex and op not in ("add", "multiply")):
        return None
    wide = np.complex128 if et.is_complex else np.float64
    ew = np.asarray(to_wide(e), wide)
    if op in ("maximum", "minimum"):
        xw = to_wide(x)
        # fmax/fmin skip NaN; NaN propagates (IEEE maximum) through an explicit test, and
        # -0 < +0 through the signs of the zeros among the leaves.
        r = g.fold(ufunc, xw, ew, _float_identity(op))
        nan = g.fold(np.logical_or, np.isnan(xw), np.isnan(ew), False)
        if op == "maximum":
            pos_zero = g.fold(np.logical_or, (xw == 0) & ~np.signbit(xw),
                              (ew == 0) & ~np.signbit(ew), False)
        else:
            neg_zero = g.fold(np.logical_or, (xw == 0) & np.signbit(xw),
                              (ew == 0) & np.signbit(ew), False)
        if with_init:
            r = ufunc(r, _lead_shaped(ew, r, g))
            nan = nan | np.isnan(_lead_shaped(ew, r, g))
            extra = _lead_shaped(ew, r, g)
            if op == "maximum":
                pos_zero = pos_zero | ((extra == 0) & ~np.signbit(extra))
            else:
                neg_zero = neg_zero | ((extra == 0) & np.signbit(extra))
        zero = r == 0
        if op == "maximum":
            r = np.where(zero, np.where(pos_zero, 0.0, -0.0), r)
        else:
            r = np.where(zero, np.where(neg_zero, -0.0, 0.0), r)
        r = np.where(nan, np.nan, r)
    else:
        # -0 is the identity of IEEE addition (+0 would turn a sum of -0s into +0)
        identity = (complex(-0.0, -0.0) if et.is_complex else -0.0) if op == "add" else 1.0
        r = g.fold(ufunc, np.asarray(x), ew, identity, wide)
        if with_init:
            r = ufunc(r, _lead_shaped(ew, r, g))
    return round_to(np.asarray(r), et)


def _lead_shaped(e: np.ndarray, r: np.ndarray, g) -> np.ndarray:
    """Per-case init values broadcast against a result with ``g.lead`` leading axes."""
    e = np.asarray(e)
    return e.reshape(e.shape + (1,) * (np.ndim(r) - e.ndim))


_INT_UFUNCS = {"add": (np.add, 0), "multiply": (np.multiply, 1),
               "and": (np.bitwise_and, 0xFFFFFFFFFFFFFFFF), "or": (np.bitwise_or, 0),
               "xor": (np.bitwise_xor, 0)}
_BOOL_UFUNCS = {"add": np.logical_or, "or": np.logical_or, "maximum": np.logical_or,
                "multiply": np.logical_and, "and": np.logical_and,
                "minimum": np.logical_and, "xor": np.logical_xor}


def _fast_integer(op, g, x, e, et: ElementType, with_init: bool):
    """Integer and boolean monoids: two's-complement bit patterns (wrapping), exact
    maximum/minimum."""
    if et.is_boolean:
        ufunc = _BOOL_UFUNCS.get(op)
        if ufunc is None:
            return None
        identity = ufunc is np.logical_and
        r = g.fold(ufunc, np.asarray(x, bool), np.asarray(e, bool), identity)
        if with_init:
            r = ufunc(r, _lead_shaped(np.asarray(e, bool), r, g))
        return np.asarray(r, bool)
    if op in ("maximum", "minimum"):
        v, ev = int_values(x), int_values(e)
        info = np.iinfo(v.dtype)
        ufunc = np.maximum if op == "maximum" else np.minimum
        r = g.fold(ufunc, v, ev, int(info.min if op == "maximum" else info.max))
        if with_init:
            r = ufunc(r, _lead_shaped(ev, r, g))
        return np.asarray(r).astype(et.dtype)
    if op not in _INT_UFUNCS:
        return None
    ufunc, identity = _INT_UFUNCS[op]
    u, eu = as_u64(np.asarray(x)), as_u64(np.asarray(e))
    r = g.fold(ufunc, u, eu, np.uint64(identity))
    if with_init:
        r = ufunc(r, _lead_shaped(eu, r, g))
    return wrap(np.asarray(r, np.uint64), et, np.shape(r))


def leaves_with_init(g, x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The leaves of every result element with the init value first:
    result shape + [1 + number of leaves]."""
    leaves = g.leaves(np.asarray(x), np.asarray(e))
    e = np.asarray(e)
    head = np.broadcast_to(e.reshape(e.shape + (1,) * (leaves.ndim - 1 - e.ndim)),
                           leaves.shape[:-1])[..., None]
    return np.concatenate([head.astype(leaves.dtype), leaves], axis=-1)


def _tree(body: str, columns: list[np.ndarray]) -> list[np.ndarray]:
    """A balanced tree over the last axis of ``columns`` (one array per body result, the
    same shape, at least one leaf): adjacent leaves combined level by level, in order."""
    n = len(columns)
    while columns[0].shape[-1] > 1:
        m = columns[0].shape[-1]
        h = m // 2
        left = [np.ascontiguousarray(c[..., 0:2 * h:2]) for c in columns]
        right = [np.ascontiguousarray(c[..., 1:2 * h:2]) for c in columns]
        combined = regions.evaluate(body, left + right)
        combined = [np.asarray(c).astype(columns[k].dtype, copy=False).reshape(left[k].shape)
                    for k, c in enumerate(combined)]
        if m % 2:
            combined = [np.concatenate([c, col[..., -1:]], axis=-1)
                        for c, col in zip(combined, columns)]
        columns = combined
    assert len(columns) == n
    return [c[..., 0] for c in columns]


def evaluate_tree(body: str, g, xs: Sequence[np.ndarray], es: Sequence[np.ndarray],
                  with_init: bool = True) -> list[np.ndarray]:
    """Every result of a reduction: ``body`` over each result element's leaves (and the
    init value once, first, unless ``with_init`` is false: then a result element without
    leaves comes out as its init value)."""
    ops = components(body)
    types = [element_type(np.asarray(x).dtype) for x in xs]
    out: list[np.ndarray | None] = [None] * len(xs)
    if all(op is not None for op in ops):
        for k, (op, et) in enumerate(zip(ops, types)):
            if et.is_float or et.is_complex:
                out[k] = _fast_float(op, g, xs[k], es[k], et, with_init)
            else:
                out[k] = _fast_integer(op, g, xs[k], es[k], et, with_init)
    missing = [k for k, o in enumerate(out) if o is None]
    if not missing:
        return out
    if all(op is not None for op in ops):
        # Independent results: each missing one as a body of its own.
        for k in missing:
            t = types[k].name
            single = f"({t}, {t}) -> {ops[k]}(arg0, arg1)"
            out[k] = _generic(single, g, [xs[k]], [es[k]], with_init)[0]
        return out
    return _generic(body, g, xs, es, with_init)


def _generic(body: str, g, xs, es, with_init: bool) -> list[np.ndarray]:
    if with_init:
        columns = [leaves_with_init(g, x, e) for x, e in zip(xs, es)]
    else:
        columns = [g.leaves(np.asarray(x), np.asarray(e)) for x, e in zip(xs, es)]
        if columns[0].shape[-1] == 0:
            return [np.broadcast_to(np.asarray(e).reshape(np.shape(e) + (1,) * (
                c.ndim - 1 - np.ndim(e))), c.shape[:-1]).astype(c.dtype)
                for e, c in zip(es, columns)]
    if columns[0].size == 0:
        return [np.zeros(c.shape[:-1], c.dtype) for c in columns]
    return _tree(body, columns)


def _retyped_body(body: str, xs: Sequence[np.ndarray]) -> str:
    """The body with its arguments typed as the arrays it is given (the ``reduction``
    bound evaluates the op at float64 on magnitudes)."""
    from conformance.specs.regions import retyped
    region = parse_region(body)
    n = len(region.arg_types) // 2
    positions = {}
    for k, x in enumerate(xs):
        t = element_type(np.asarray(x).dtype)
        if region.arg_types[k] != t:
            positions[k] = positions[n + k] = t.name
    return retyped(body, positions=positions) if positions else body


def _reduction(op: str):
    def oracle(inputs, attrs, types):
        n = len(types)
        xs, es = converted(attrs["body"], inputs[:n], inputs[n:])
        g = geometry(op, np.shape(xs[0]), attrs)
        out = evaluate_tree(_retyped_body(attrs["body"], xs), g, xs, es)
        return tuple(np.asarray(r).astype(t.element_type.dtype, copy=False).reshape(t.shape)
                     for r, t in zip(out, types))
    return oracle


register("reduce")(_reduction("reduce"))
register("reduce_window")(_reduction("reduce_window"))


def _leaves_of(op: str):
    def leaves(inputs, attrs, n: int, k: int) -> np.ndarray:
        xs, es = inputs[:n], inputs[n:2 * n]
        if "body" in attrs:
            xs, es = converted(attrs["body"], xs, es)
        g = geometry(op, np.shape(xs[0]), attrs, lead=1)
        return leaves_with_init(g, np.asarray(xs[k]), np.asarray(es[k]))
    return leaves


#: op -> leaves(inputs with a leading batch axis, attributes (regions included), number
#: of results, k): the leaves of result ``k`` of every case, init value first, as
#: [batch] + result shape + [leaves] (the ``reduction`` bound reads them).
LEAVES: dict[str, Callable[..., np.ndarray]] = {
    "reduce": _leaves_of("reduce"),
    "reduce_window": _leaves_of("reduce_window"),
}


# ---------------------------------------------------------------------------
# select_and_scatter: a selection per window, then a reduction per operand element of
# the source values that selected it
# ---------------------------------------------------------------------------

def selections(operand: np.ndarray, window_dimensions, window_strides, padding, select: str,
               lead: int = 0) -> np.ndarray:
    """``selected_index`` of every source index: the flat index (in the operand without
    its lead axes) of the operand element the window's reduce_window_without_init selects,
    -1 for a window without operand elements (only padding). Shape: lead + source shape.

    The selection is a fold over the window's elements in index order (padding elements
    are not the operand's, so no values of the window: XLA's rule), ``select(a, b) ? a :
    b``, evaluated for every window at once, one region evaluation per window position.
    A fold is one of the trees the spec allows; where the select is no total preorder on
    a window's values (compare FLOAT with a NaN) other trees select otherwise, which the
    spec's rules mask."""
    operand = np.asarray(operand)
    r = operand.ndim - lead
    ones = [1] * r
    g = WindowGeometry(operand.shape, window_dimensions, window_strides, ones, ones,
                       padding, lead)
    inner = operand.shape[lead:]
    flat = np.arange(int(np.prod(inner, dtype=np.int64)), dtype=np.int64).reshape(inner)
    flat = np.broadcast_to(flat, operand.shape)
    idx = g.leaves(flat, np.int64(-1))
    vals = g.leaves(operand, operand.reshape(-1)[0] if operand.size else 0)
    m = idx.shape[-1]
    cur_i = np.full(idx.shape[:-1], -1, np.int64)
    cur_v = np.zeros(idx.shape[:-1], operand.dtype)
    for j in range(m):
        v, i = np.ascontiguousarray(vals[..., j]), idx[..., j]
        valid = i >= 0
        have = cur_i >= 0
        if (have & valid).any():
            (keep,) = regions.evaluate(select, [cur_v, v])
            keep = np.asarray(keep, bool).reshape(cur_i.shape)
        else:
            keep = np.ones(cur_i.shape, bool)
        take = valid & (~have | ~keep)
        cur_i = np.where(take, i, cur_i)
        cur_v = np.where(take, v, cur_v).astype(operand.dtype)
    return cur_i


@dataclasses.dataclass
class ScatterGeometry:
    """``select_and_scatter``'s reduction: the leaves of ``result[i]`` are the source
    values whose window selected operand element ``i``, in the order of their source
    index (a different number per element: materialised padded to the largest count,
    with the init value, which the spec lets a tree hold any number of; folds pad with the
    ufunc's identity instead)."""

    targets: np.ndarray         # lead + source shape: selected flat index, -1 none
    shape: tuple[int, ...]      # the operand's, lead axes included
    lead: int = 0

    def __post_init__(self):
        inner = self.shape[self.lead:]
        self.out_shape = tuple(self.shape)
        self.cells = int(np.prod(inner, dtype=np.int64))
        lead = int(np.prod(self.shape[:self.lead], dtype=np.int64))
        t = self.targets.reshape(lead, -1)
        case = np.repeat(np.arange(lead), t.shape[1]).reshape(t.shape)
        ok = t >= 0
        self._key = (case * self.cells + t)[ok]              # flat result position
        self._src = np.nonzero(ok.reshape(-1))[0]            # flat source position
        from .indexing import occurrence
        self._occ = occurrence(self._key) if self._key.size else self._key
        self.counts = np.bincount(self._key, minlength=lead * self.cells).reshape(self.shape) \
            if lead * self.cells else np.zeros(self.shape, np.int64)
        self.size = int(self._occ.max()) + 1 if self._occ.size else 0

    def leaves(self, x: np.ndarray, fill) -> np.ndarray:
        x = np.asarray(x)
        fill = np.asarray(fill).astype(x.dtype)
        out = np.empty((int(np.prod(self.out_shape, dtype=np.int64)), self.size), x.dtype)
        lead_n = int(np.prod(self.shape[:self.lead], dtype=np.int64))
        out[...] = np.broadcast_to(fill.reshape(-1, 1, 1), (lead_n, self.cells, self.size)
                                   ).reshape(out.shape) if fill.ndim else fill
        if self._key.size:
            out[self._key, self._occ] = x.reshape(-1)[self._src]
        return out.reshape(self.out_shape + (self.size,))

    def fold(self, ufunc, x, fill, identity, dtype=None) -> np.ndarray:
        x = np.asarray(x)
        if dtype is not None:
            x = x.astype(dtype)
        pad = identity if identity is not None else np.asarray(fill).reshape(-1)[0]
        leaves = self.leaves(x, np.asarray(pad).astype(x.dtype))
        return ufunc.reduce(leaves, axis=-1, initial=identity, dtype=dtype)


def _scatter_geometry(shape, attrs, lead):
    operand = np.asarray(attrs["operand"])
    targets = selections(operand, attrs["window_dimensions"], attrs["window_strides"],
                         attrs["padding"], attrs["select"], lead)
    return ScatterGeometry(targets, tuple(operand.shape), lead)


GEOMETRIES["select_and_scatter"] = _scatter_geometry


def _waves(g: ScatterGeometry, scatter: str, source: np.ndarray, init) -> np.ndarray:
    """A fold per operand element: the init value, then its source values in source index
    order (all first hits at once, then all second hits, ...)."""
    out = np.full(int(np.prod(g.out_shape, dtype=np.int64)), np.asarray(init),
                  np.asarray(init).dtype)
    src = np.asarray(source).reshape(-1)
    for wave in range(g.size):
        sel = g._occ == wave
        t = g._key[sel]
        (new,) = regions.evaluate(scatter, [out[t], src[g._src[sel]]])
        out[t] = np.asarray(new).astype(out.dtype)
    return out.reshape(g.out_shape)


@register("select_and_scatter")
def select_and_scatter(inputs, attrs, types):
    operand, source, init = (np.asarray(x) for x in inputs)
    # the newer spec's promotable scatter (stablehlo-spec-2026-08.md C10): the reduce of
    # the source values converts them and the init value to the scatter's type E
    ([source], [init]) = converted(attrs["scatter"], [source], [init])
    (t,) = types
    g = _scatter_geometry(operand.shape, {**attrs, "operand": operand}, 0)
    scatter = _retyped_body(attrs["scatter"], [source])
    (op,) = components(scatter)
    if op is not None and op in (_FLOAT_UFUNCS if element_type(source.dtype).is_float
                                 else _INT_UFUNCS):
        (out,) = evaluate_tree(scatter, g, [source], [init])
    else:
        out = _waves(g, scatter, source, init)
    return np.asarray(out).astype(t.element_type.dtype, copy=False).reshape(t.shape)


def _scatter_leaves(inputs, attrs, n: int, k: int) -> np.ndarray:
    operand, source, init = (np.asarray(x) for x in inputs[:3])
    if "scatter" in attrs:
        ([source], [init]) = converted(attrs["scatter"], [source], [init])
    g = _scatter_geometry(operand.shape, {**attrs, "operand": operand}, 1)
    return leaves_with_init(g, source, init)


LEAVES["select_and_scatter"] = _scatter_leaves


@condition("select_and_scatter_empty_window")
def empty_window(operand, source, window_dimensions, window_strides, padding, select):
    """Every element of a case with a window that holds no operand element (only
    padding): "It is currently unspecified what happens if the corresponding window
    doesn't have values" (#731)."""
    operand = np.asarray(operand)
    targets = selections(operand, window_dimensions, window_strides, padding, select, 1)
    empty = (targets.reshape(targets.shape[0], -1) < 0).any(axis=1) if targets.size \
        else np.zeros(operand.shape[0], bool)
    return np.broadcast_to(empty.reshape((-1,) + (1,) * (operand.ndim - 1)),
                           operand.shape).copy()


@condition("select_and_scatter_unordered_windows")
def unordered_windows(operand, window_dimensions, window_strides, padding, select):
    """Every operand element of a window on whose values ``select`` is no total preorder
    (it neither prefers a over b nor b over a, and they are not tied the way compare's
    ties are: a NaN under compare FLOAT), so that the tree decides which one is selected.
    Tested on every pair of the window's elements."""
    operand = np.asarray(operand)
    r = operand.ndim - 1
    ones = [1] * r
    g = WindowGeometry(operand.shape, window_dimensions, window_strides, ones, ones,
                       padding, 1)
    inner = operand.shape[1:]
    flat = np.broadcast_to(np.arange(int(np.prod(inner, dtype=np.int64)),
                                     dtype=np.int64).reshape(inner), operand.shape)
    idx = g.leaves(flat, np.int64(-1))
    vals = g.leaves(operand, operand.reshape(-1)[0] if operand.size else 0)
    m = idx.shape[-1]
    out = np.zeros(operand.shape, bool)
    if m < 2 or idx.size == 0:
        return out
    a = np.ascontiguousarray(np.broadcast_to(vals[..., :, None], vals.shape + (m,)))
    b = np.ascontiguousarray(np.broadcast_to(vals[..., None, :], vals.shape + (m,)))
    (ab,) = regions.evaluate(select, [a, b])
    (ba,) = regions.evaluate(select, [b, a])
    ab, ba = np.asarray(ab, bool).reshape(a.shape), np.asarray(ba, bool).reshape(a.shape)
    valid = (idx[..., :, None] >= 0) & (idx[..., None, :] >= 0)
    # a total preorder: one of the two is preferred (ties: select(a, b) and select(b, a),
    # GE/LE; or neither only where a and b are equal as values, GT/LT ties), transitively
    eq = np.asarray(_equal_values(a, b)).reshape(a.shape)
    bad = valid & ~(ab | ba | eq)
    per_window = bad.any(axis=(-2, -1))
    if per_window.any():
        hit = idx[per_window]
        cases = np.nonzero(per_window)[0]
        for c, row in zip(cases, hit):
            cell = out[c].reshape(-1)
            cell[row[row >= 0]] = True
    return out


def _equal_values(a, b):
    w = to_wide(np.asarray(a)), to_wide(np.asarray(b))
    return w[0] == w[1]


# ---------------------------------------------------------------------------
# Numbers about leaves (the conditions below and the reduction bound use them)
# ---------------------------------------------------------------------------

def finite_magnitudes(x: np.ndarray) -> np.ndarray:
    """|x| as float64 for finite elements, 0 elsewhere (complex: the modulus)."""
    w = to_wide(np.asarray(x))
    a = np.abs(w).astype(np.float64)
    return np.where(np.isfinite(a), a, 0.0)


def granularity(x: np.ndarray) -> np.ndarray:
    """The largest power of two that divides each finite nonzero float (as float64); inf
    for zeros and non-finite values. Every sum of such values is a multiple of the
    smallest granularity among them."""
    w = np.asarray(x, np.float64)
    finite = np.isfinite(w) & (w != 0)
    m, ex = np.frexp(np.where(finite, np.abs(w), 1.0))
    mant = (m * 2.0 ** 53).astype(np.int64)
    low = (mant & -mant).astype(np.float64)
    return np.where(finite, np.ldexp(low, ex - 53), np.inf)


def _parts(x: np.ndarray) -> list[np.ndarray]:
    w = to_wide(np.asarray(x))
    return [w.real.astype(np.float64), w.imag.astype(np.float64)] if np.iscomplexobj(w) \
        else [w.astype(np.float64)]


def _finfo(et: ElementType):
    return ml_dtypes.finfo(et.component.dtype)


def overflow_threshold(et: ElementType) -> float:
    """The smallest magnitude that rounds to infinity: max + ulp(max) / 2."""
    fi = _finfo(et)
    return float(fi.max) * (1.0 + 2.0 ** -(fi.nmant + 1))


def unit_roundoff(et: ElementType) -> float:
    return float(_finfo(et).eps) / 2


def gamma(n, u: float) -> np.ndarray:
    n = np.asarray(n, np.float64)
    nu = n * u
    return np.where(nu < 1, nu / np.maximum(1 - nu, 1e-300), np.inf)


# ---------------------------------------------------------------------------
# Conditions of the implementation-defined rules (specs/ops/reduce.yaml,
# reduce_window.yaml). They see the inputs with a leading batch axis and return a mask
# of the batched result shape.
# ---------------------------------------------------------------------------

def _batched(spec_geometry, inputs, init_values):
    xs = [np.asarray(x) for x in inputs]
    es = [np.asarray(e) for e in init_values]
    return _geometry_of(spec_geometry, xs[0].shape, 1), xs, es


def _bits_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element: different bit patterns, any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    et = element_type(a.dtype)
    size = a.dtype.itemsize
    ab = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (size,))
    bb = np.ascontiguousarray(b.astype(a.dtype)).view(np.uint8).reshape(a.shape + (size,))
    differ = (ab != bb).any(axis=-1)
    if et.is_float or et.is_complex:
        wa, wb = to_wide(a), to_wide(b)
        differ &= ~(np.isnan(wa) & np.isnan(wb))
    return differ


def _init_analysis(spec_geometry, inputs, init_values, body):
    """What the number of init values does to each result: the leaves alone ``R`` (one
    array per result), per result whether ``e ⊕ e = e`` (lead-shaped, broadcast over the
    result) and whether ``R ⊕ e`` differs from ``R``, whether it is inexact, and ``g``."""
    g, xs, es = _batched(spec_geometry, inputs, init_values)
    body = _retyped_body(body, xs)
    r0 = evaluate_tree(body, g, xs, es, with_init=False)
    out_shape = np.shape(r0[0])
    e_full = [np.broadcast_to(_lead_shaped(e, r, g), out_shape).astype(r.dtype)
              for e, r in zip(es, r0)]
    r1 = regions.evaluate(body, e_full + [np.asarray(r) for r in r0])
    ee = regions.evaluate(body, [np.asarray(e) for e in es] + [np.asarray(e) for e in es])
    idem = [_lead_shaped(~_bits_differ(e, np.asarray(v).astype(e.dtype)),
                         np.zeros(out_shape, bool), g) for e, v in zip(es, ee)]
    inexact = [element_type(e.dtype).is_float or element_type(e.dtype).is_complex
               for e in es]
    changed = [_bits_differ(np.asarray(a), np.asarray(b).astype(np.asarray(a).dtype))
               for a, b in zip(r0, r1)]
    independent = all(op is not None for op in components(body))
    return g, r0, idem, inexact, changed, independent


def _groups(n: int, independent: bool) -> list[list[int]]:
    """The results judged together: each alone where they never meet in the body."""
    return [[k] for k in range(n)] if independent else [list(range(n))] * n


@condition("reduction_init_dependent")
def init_dependent(spec_geometry, inputs, init_values, body, each: bool = False):
    """Result elements whose value depends on how many init values the tree holds.

    Read for a body that is associative and commutative (the other rules mask the rest):
    every tree then gives ``R ⊕ e^k`` (``R``: the leaves alone, ``e``: the init values,
    ``k >= 0``, ``k >= 1`` without leaves). Where ``e ⊕ e = e`` the results are ``R`` and
    ``R ⊕ e``: open where those differ (or, without leaves, never). Otherwise ``e``
    must leave ``R`` unchanged (``R ⊕ e = R``, then every ``k`` gives ``R``); for floats,
    whose ``⊕`` rounds, no such ``e`` is trusted but ±0 and the other idempotent ones,
    and the whole result is open.

    ``each``: a list of one mask per result. Where every result ``k`` is one op of (arg
    k, arg N+k) (:func:`components`) the results never meet in the body, and result
    ``k``'s mask depends on its own leaves and init value only; otherwise every result
    gets the mask of them all."""
    g, r0, idem_k, inexact_k, changed_k, independent = _init_analysis(
        spec_geometry, inputs, init_values, body)
    out_shape = np.shape(r0[0])

    def mask(ks) -> np.ndarray:
        idem = np.logical_and.reduce([idem_k[k] for k in ks])
        changed = np.logical_or.reduce([changed_k[k] for k in ks])
        if g.size == 0:
            return np.broadcast_to(~idem, out_shape).copy()
        if any(inexact_k[k] for k in ks):
            return np.where(idem, changed, True)
        return changed

    if not each:
        return mask(range(len(r0)))
    return [mask(ks) for ks in _groups(len(r0), independent)]


@condition("reduction_init_unbounded")
def init_unbounded(spec_geometry, inputs, init_values, body) -> list[np.ndarray]:
    """Per result: where the number of init values is open and the results it gives are
    no finite set: ``e ⊕ e != e``, so ``R ⊕ e^k`` is another value for every ``k`` (an
    integer sum with init 3). Where ``e ⊕ e = e`` the spec allows exactly ``R`` and
    ``R ⊕ e`` (:func:`without_init` and the oracle's value)."""
    g, r0, idem_k, inexact_k, changed_k, independent = _init_analysis(
        spec_geometry, inputs, init_values, body)
    open_ = init_dependent(spec_geometry, inputs, init_values, body, each=True)
    return [m & ~np.logical_and.reduce([idem_k[k] for k in ks])
            for m, ks in zip(open_, _groups(len(r0), independent))]


def _judged(body: str, xs: Sequence[np.ndarray]) -> list[bool]:
    """Per result: does :func:`init_multiples` judge it with any number of init values?
    An add (float, complex or integer) or an xor (integer or boolean) of (arg k, arg
    N+k), where every result is one op of its own arguments (they never meet)."""
    ops = components(body)
    independent = all(op is not None for op in ops)
    out = []
    for k, x in enumerate(xs):
        et = element_type(np.asarray(x).dtype)
        op = ops[k] if k < len(ops) else None
        out.append(independent and (
            (op == "add" and (et.is_float or et.is_complex or et.is_integer))
            or (op == "xor" and (et.is_integer or et.is_boolean))))
    return out


@condition("reduction_init_unjudged")
def init_unjudged(spec_geometry, inputs, init_values, body) -> list[np.ndarray]:
    """Per result: where the number of init values is open, the results it gives are no
    finite set (:func:`init_unbounded`) and no test judges them (:func:`init_multiples`
    judges sums and xors): a float or integer product with an init value other than 1,
    and bodies whose results meet. Masked."""
    masks = init_unbounded(spec_geometry, inputs, init_values, body)
    judged = _judged(body, [np.asarray(x) for x in inputs])
    return [m & ~j for m, j in zip(masks, judged)]


def _rel(m, u: float) -> np.ndarray:
    """The relative error of a sum of ``m`` terms in any tree, at unit roundoff ``u``,
    plus the float64 reference's own (conformance/checking/verdicts/reduction.py)."""
    return gamma(np.maximum(m - 1, 0), u) + u + gamma(m + 1, 2.0 ** -53)


def _sum_member(g, x, e, a, et: ElementType) -> "tuple[np.ndarray, np.ndarray]":
    """Per (batched) result element: is ``a`` a sum, in some tree, of the element's leaves
    (the operand's elements of its window: reduce_window's padding and holes count as
    init values) and ``k`` copies of the init value ``e`` for some ``k >= 0`` (``k >= 1``
    without leaves)? Per part (complex addition is per part), with one ``k`` for both
    parts: ``|a - (S + k·e)| <= rel(n + k)·(Σ|leaf| + k|e|)`` (Higham's bound for ``n + k``
    terms; 0 where every partial sum of every tree is representable: all terms multiples
    of the smallest power of two ``G`` dividing one of them and the magnitudes' sum at most
    ``2^p·G``); a zero is -0 only where every term is -0 (every leaf and, unless ``k =
    0``, ``e``), as an IEEE sum of terms that are not all -0 is never -0. The ``k``
    tried are the two integers around ``(a - S)/e`` (on the part of ``e`` with the
    largest finite magnitude) and the smallest allowed. An infinite ``a`` where a partial
    sum of some tree can overflow that way (always towards ``e``'s sign: k is not
    bounded), NaN where both ways; a part of ``e`` that is infinite or NaN gives that
    part itself for every ``k >= 1``; a part with a non-finite leaf the leaves' infinity
    (NaN beside the other infinity or a NaN) in every tree, the other part still judged.
    ``e ⊕ e != e`` where this runs: ``e`` is not ±0.

    Returns (in the set, explained by flushing subnormals instead): the second mask holds
    elements outside the set that lie in it with every subnormal leaf and init value read
    as zero, within ``tiny·(n + k)`` more (FTZ: a flushed partial sum moves the sum by
    less than ``tiny``), and only where a leaf or the init value of the element's own is
    finer than ``tiny`` (the developers' guide: the element's own evidence)."""
    xw, ew = to_wide(np.asarray(x)), to_wide(np.asarray(e))
    leaves = g.leaves(xw, ew)                             # out_shape + (size,)
    # reduce_window: the positions of the padding and of the base dilation's holes hold
    # init values; they join the init values whose number is open (XLA skips them: a
    # window on padding only gives e once), so the leaves are the operand's elements
    real = g.leaves(np.ones(np.shape(x), bool), np.zeros(np.shape(e), bool)).astype(bool)
    leaves = np.where(real, leaves, np.zeros((), leaves.dtype))
    n = real.sum(axis=-1)
    # (leaves.shape[:-1]: the result elements, also where a reduce has no leaves at all)
    ew = np.broadcast_to(_lead_shaped(ew, np.empty(leaves.shape[:-1]), g), leaves.shape[:-1])
    aw = to_wide(np.asarray(a))
    tiny = float(_finfo(et).smallest_normal)
    with np.errstate(all="ignore"):
        member = _lattice(leaves, real, n, ew, aw, et, 0.0)
        fine = np.zeros(aw.shape, bool)
        for lv, ev in zip(_parts(leaves), _parts(ew)):
            fine |= (granularity(lv) < tiny).any(axis=-1) | (granularity(ev) < tiny)
        flush = np.zeros(aw.shape, bool)
        if (fine & ~member).any():
            def flushed(v):
                parts = [np.where(np.abs(q) < tiny, 0.0, q) for q in _parts(v)]
                return parts[0] + 1j * parts[1] if np.iscomplexobj(v) else parts[0]
            flush = fine & ~member & _lattice(flushed(leaves), real, n, flushed(ew), aw, et,
                                              tiny)
    return member, flush


def _lattice(leaves, real, n, ew, aw, et: ElementType, slack: float) -> np.ndarray:
    """:func:`_sum_member`'s test on (already widened) leaves, init values and results;
    ``slack`` per term added to the bound (FTZ)."""
    kmin = np.where(n >= 1, 0.0, 1.0)
    u = unit_roundoff(et)
    p = int(_finfo(et).nmant) + 1
    thr = overflow_threshold(et)
    parts = list(zip(_parts(leaves), _parts(ew), _parts(aw)))
    reach = []          # per part: can some tree overflow to +inf, to -inf?
    for lv, ev, av in parts:
        grow = 1 + gamma(n + 1, u)
        # k copies of e reach either infinity of e's sign, for k large enough
        reach.append(((ev > 0) | (np.maximum(lv, 0).sum(axis=-1) * grow >= thr),
                      (ev < 0) | (np.maximum(-lv, 0).sum(axis=-1) * grow >= thr)))
    # the k around (a - S)/e, on the part of e with the largest finite magnitude
    kstar = np.full(aw.shape, np.nan)
    best = np.zeros(aw.shape)
    for lv, ev, av in parts:
        m = np.where(np.isfinite(ev), np.abs(ev), 0.0)
        take = m > best
        kstar = np.where(take, (av - lv.sum(axis=-1)) / np.where(take, ev, 1.0), kstar)
        best = np.maximum(best, m)
    kstar = np.where(np.isfinite(kstar), kstar, kmin)
    kf = np.maximum(np.floor(np.minimum(kstar, 2.0 ** 62)), kmin)
    member = np.zeros(aw.shape, bool)
    for k in (kf, kf + 1, kmin):
        ok = np.ones(aw.shape, bool)
        for (lv, ev, av), (up, down) in zip(parts, reach):
            s = lv.sum(axis=-1)
            efin = np.isfinite(ev)
            evf = np.where(efin, ev, 0.0)
            mag = np.abs(lv).sum(axis=-1) + k * np.abs(evf)
            gran = np.minimum(granularity(lv).min(axis=-1, initial=np.inf),
                              np.where(k > 0, granularity(evf), np.inf))
            exact = ((mag <= np.ldexp(1.0, p) * gran) | (mag == 0)) & (slack == 0)
            tol = np.where(exact, 0.0, _rel(n + k, u) * mag + slack * (n + k))
            center = s + k * evf
            close = np.abs(av - center) <= tol
            all_neg = (~real | (np.signbit(lv) & (lv == 0))).all(axis=-1) & \
                ((k == 0) | (np.signbit(evf) & (evf == 0)))
            zero = av == 0
            close = np.where(zero, close & ((np.signbit(av) == all_neg) | (slack > 0)),
                             close)
            # an infinity where a partial sum can overflow that way; NaN where both
            # ways (inf - inf)
            close = np.where(np.isinf(av), np.where(av > 0, up, down), close)
            close = np.where(np.isnan(av), up & down, close)
            # a non-finite part of e: that part itself once it is in the tree
            same = (av == ev) | (np.isnan(av) & np.isnan(ev))
            close = np.where(efin, close, np.where(k >= 1, same, close))
            # a non-finite leaf in this part: every tree gives the leaves' infinity (NaN
            # for both infinities or a NaN), whatever k; or NaN where a partial sum of
            # other terms can overflow to the other infinity (k copies of e of the other
            # sign: k is not bounded)
            bad = ~np.isfinite(lv).all(axis=-1)
            if bad.any():
                snf = np.where(np.isfinite(lv), 0.0, lv).sum(axis=-1)
                other = np.where(snf > 0, down, up)
                close = np.where(bad, np.where(np.isnan(snf), np.isnan(av),
                                               (av == snf) | (np.isnan(av) & other)),
                                 close)
            ok &= close
        member |= ok
    return member


def _int_sum_member(r, e, a, et: ElementType) -> np.ndarray:
    """``a`` is ``R + k·e`` modulo ``2^bits`` for some ``k``: ``a - R`` a multiple of the
    lowest set bit ``d`` of ``e`` (k·e runs through every multiple of ``d``, the
    leafless ``k >= 1`` included)."""
    mask = np.uint64(0xFFFFFFFFFFFFFFFF if et.bits >= 64 else (1 << et.bits) - 1)
    ra, aa = as_u64(np.asarray(r)), as_u64(np.asarray(a))
    eb = np.broadcast_to(as_u64(np.asarray(e)), ra.shape) & mask
    d = eb & (~eb + np.uint64(1))
    diff = (aa - ra) & mask
    return (eb != 0) & ((diff & (d - np.uint64(1))) == 0)


@alternative("reduction_init_multiples")
def init_multiples(spec_geometry, inputs, init_values, body) -> Membership:
    """The results of an associative and commutative body with any number ``k`` of init
    values, ``R ⊕ e^k``, where that is no finite set (``e ⊕ e != e``), as a test of the
    backend's values (:class:`~conformance.oracles.registry.Membership`), per result:

    - a float or complex sum: :func:`_sum_member` (some tree of the leaves and ``k``
      copies of ``e`` within the rounding bound of ``n + k`` terms);
    - an integer sum: ``a - R`` a multiple of ``e``'s lowest set bit, modulo 2^bits;
    - an xor: ``R`` or ``R xor e``;
    - any other result: nothing (its elements are masked: :func:`init_unjudged`)."""
    g, xs, es = _batched(spec_geometry, inputs, init_values)
    body = _retyped_body(body, xs)
    judged = _judged(body, xs)
    ops = components(body)

    def test(actual):
        r0 = None
        out = []
        flushes = {}
        for k, a in enumerate(actual):
            a = np.asarray(a)
            if k >= len(xs) or not judged[k] or a.shape != tuple(g.out_shape):
                out.append(np.zeros(a.shape, bool))
                continue
            et = element_type(xs[k].dtype)
            if ops[k] == "add" and (et.is_float or et.is_complex):
                m, f = _sum_member(g, xs[k], es[k], a, et)
                out.append(m)
                flushes[k] = f
                continue
            if r0 is None:
                r0 = evaluate_tree(body, g, xs, es, with_init=False)
            r = np.asarray(r0[k])
            ev = np.broadcast_to(_lead_shaped(np.asarray(es[k]), r, g), r.shape)
            if ops[k] == "add":
                out.append(_int_sum_member(r, ev, a, et))
            elif et.is_boolean:
                out.append((a == r) | (a == (r ^ ev)))
            else:
                ra, aa = as_u64(r), as_u64(a)
                out.append((aa == ra) | (aa == (ra ^ as_u64(ev))))
        return out, [flushes.get(k, np.zeros(np.shape(a), bool))
                     for k, a in enumerate(actual)]

    return Membership(test)


@alternative("reduction_without_init")
def without_init(spec_geometry, inputs, init_values, body) -> list[np.ndarray]:
    """``R``, every result of the reduction with no init value in the tree (a result
    without leaves: its init value, once, as no tree has fewer)."""
    g, xs, es = _batched(spec_geometry, inputs, init_values)
    return [np.asarray(r) for r in evaluate_tree(_retyped_body(body, xs), g, xs, es,
                                                 with_init=False)]


@condition("reduction_nan_forced")
def nan_forced(spec_geometry, inputs, init_values, ks, n) -> np.ndarray:
    """Result elements where every one of the ``n`` results is NaN in every tree: each
    result ``k`` in ``ks`` (a NaN-propagating body of (arg k, arg N+k)) with a NaN among
    its leaves or init value, and every result in ``ks``."""
    g, xs, es = _batched(spec_geometry, inputs, init_values)
    shape = g.out_shape
    if sorted(set(ks)) != list(range(n)):
        return np.zeros(shape, bool)
    out = np.ones(shape, bool)
    for k in ks:
        et = element_type(xs[k].dtype)
        if not (et.is_float or et.is_complex):
            return np.zeros(shape, bool)
        nan = np.isnan(to_wide(xs[k]))
        e_nan = np.isnan(to_wide(es[k]))
        hit = g.fold(np.logical_or, nan, e_nan, False)
        out &= hit | _lead_shaped(e_nan, hit, g)
    return out


def _sum_may_overflow(g, x, e, et: ElementType) -> np.ndarray:
    count = g.size + 1
    hit = np.zeros(g.out_shape, bool)
    for xp, ep in zip(_parts(x), _parts(e)):
        a = np.where(np.isfinite(xp), np.abs(xp), 0.0)
        ea = np.where(np.isfinite(ep), np.abs(ep), 0.0)
        s = g.fold(np.add, a, ea, 0.0) + _lead_shaped(ea, np.zeros(g.out_shape), g)
        u = unit_roundoff(et)
        hit |= ~(s * (1 + gamma(count, u)) < overflow_threshold(et))
    return hit


def _int_sum_may_overflow(g, x, e, et: ElementType) -> np.ndarray:
    v = int_values(np.asarray(x)).astype(np.float64)
    ev = int_values(np.asarray(e)).astype(np.float64)
    pos = g.fold(np.add, np.maximum(v, 0), np.maximum(ev, 0), 0.0) + \
        _lead_shaped(np.maximum(ev, 0), np.zeros(g.out_shape), g)
    neg = g.fold(np.add, np.minimum(v, 0), np.minimum(ev, 0), 0.0) + \
        _lead_shaped(np.minimum(ev, 0), np.zeros(g.out_shape), g)
    # float64 sums: conservative by a relative margin (values up to 2^64).
    margin = 1.0 - 1e-9
    return (pos > et.int_max * margin) | (neg < et.int_min * margin)


@condition("reduction_sum_out_of_range")
def sum_out_of_range(spec_geometry, inputs, init_values, ks) -> np.ndarray:
    """Result elements where, for a result ``k`` in ``ks`` (a body adding (arg k, arg
    N+k)), a partial sum of some tree could leave the type's range: floats, the sum of
    the finite magnitudes (leaves and init value) grown by the worst rounding reaches the
    overflow threshold; integers, the sum of the positive or of the negative values
    (init value included) is out of range (integer overflow is implementation-defined,
    003 "Errors")."""
    g, xs, es = _batched(spec_geometry, inputs, init_values)
    out = np.zeros(g.out_shape, bool)
    for k in ks:
        et = element_type(xs[k].dtype)
        if et.is_float or et.is_complex:
            out |= _sum_may_overflow(g, xs[k], es[k], et)
        elif et.is_integer:
            out |= _int_sum_may_overflow(g, xs[k], es[k], et)
    return out


def _log2_extremes(g, x, e):
    """Per result element: (log2 of the largest and of the smallest product of any
    subset of the finite nonzero magnitudes among its leaves and init value, whether a
    zero, an infinity, a NaN is among them, the number of leaves)."""
    a, ea = finite_magnitudes(x), finite_magnitudes(e)
    w, ew = to_wide(np.asarray(x)), to_wide(np.asarray(e))

    def logs(v):
        with np.errstate(divide="ignore"):
            return np.where(v > 0, np.log2(np.where(v > 0, v, 1.0)), 0.0)

    la, le = logs(a), logs(ea)
    hi = g.fold(np.add, np.maximum(la, 0), np.maximum(le, 0), 0.0) + \
        _lead_shaped(np.maximum(le, 0), np.zeros(g.out_shape), g)
    lo = g.fold(np.add, np.minimum(la, 0), np.minimum(le, 0), 0.0) + \
        _lead_shaped(np.minimum(le, 0), np.zeros(g.out_shape), g)

    def any_of(flags, eflags):
        hit = g.fold(np.logical_or, flags, eflags, False)
        return hit | _lead_shaped(eflags, hit, g)

    zero = any_of(w == 0, ew == 0)
    inf = any_of(np.isinf(w) & ~np.isnan(w), np.isinf(ew) & ~np.isnan(ew))
    nan = any_of(np.isnan(w), np.isnan(ew))
    return hi, lo, zero, inf, nan


@condition("reduction_product_out_of_range")
def product_out_of_range(spec_geometry, inputs, init_values, ks) -> np.ndarray:
    """Result elements where, for a result ``k`` in ``ks`` (a body multiplying (arg k,
    arg N+k)), the tree decides: floats, some partial product could overflow (unless a
    NaN or a zero times an infinity makes every tree NaN, or an infinity is absent and a
    zero makes every tree zero) or underflow (unless a zero and no infinity make every
    tree zero); integers, a partial product could overflow (implementation-defined);
    complex values, also any non-finite part (complex arithmetic exceptions are
    implementation-defined, 003 "Errors")."""
    g, xs, es = _batched(spec_geometry, inputs, init_values)
    out = np.zeros(g.out_shape, bool)
    for k in ks:
        et = element_type(xs[k].dtype)
        hi, lo, zero, inf, nan = _log2_extremes(g, xs[k], es[k])
        count = g.size + 1
        if et.is_integer:
            out |= hi >= (et.bits - 1 if et.is_signed else et.bits) - 1e-9
            continue
        if not (et.is_float or et.is_complex):
            continue
        fi = _finfo(et)
        slack = np.log2(1 + gamma(count, unit_roundoff(et) * (8 if et.is_complex else 1)))
        over = hi + slack >= np.log2(overflow_threshold(et))
        under = lo - slack < np.log2(float(fi.smallest_normal))
        if et.is_complex:
            out |= over | under | inf | nan
            continue
        settled = nan | (zero & inf)
        out |= ~settled & ((zero & ~inf & over) | (inf & ~zero & under)
                           | (~zero & ~inf & (over | under)))
    return out


@condition("reduction_complex_order")
def complex_order(spec_geometry, inputs, init_values, ks) -> np.ndarray:
    """Result elements where a complex maximum or minimum (result ``k`` in ``ks``) meets
    a NaN part (maximum's and minimum's ``complex_nan``) or could meet a tie (their
    ``complex_tie``: values equal under IEEE comparison differ only in the sign of a zero
    part, so a zero part among the leaves)."""
    g, xs, es = _batched(spec_geometry, inputs, init_values)
    out = np.zeros(g.out_shape, bool)
    for k in ks:
        et = element_type(xs[k].dtype)
        if not et.is_complex:
            continue
        w, ew = to_wide(xs[k]), to_wide(es[k])

        def odd(v):
            return np.isnan(v.real) | np.isnan(v.imag) | (v.real == 0) | (v.imag == 0)

        hit = g.fold(np.logical_or, odd(w), odd(ew), False)
        out |= hit | _lead_shaped(odd(ew), hit, g)
    return out
