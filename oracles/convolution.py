"""convolution, written from the spec (003 "### convolution"): every result element is a
dot product of a window of the padded, dilated ``lhs`` with the kernel ``rhs``.

The spec's formulas, vectorised:

1. ``lhs`` is transposed to ``[batch, feature, spatial...]`` and ``rhs`` to ``[output
   feature, input feature, spatial...]`` (the dimension numbers, any layout);
2. ``padded_lhs = pad(lhs, 0, padding[:, 0], padding[:, 1], lhs_dilation - 1)`` is built
   once: the input written ``lhs_dilation`` apart into zeros, then padded with zeros
   (negative padding cuts);
3. the windows are a strided view of it (numpy's ``sliding_window_view``, im2col without a
   copy): ``window_strides`` apart, and inside a window ``rhs_dilation`` apart;
4. ``window_reversal``: the spec reverses the lhs window along those spatial dimensions;
   the products are the same as those of the window with the kernel reversed there, which
   is what is done (one flip of ``rhs``);
5. groups: ``feature_group_count = G`` splits the input features and the output features
   into G groups, ``batch_group_count = G`` the batch and the output features; either way
   the group is a batching dimension of one batched matrix product, and the group's
   results are concatenated along the output feature dimension (group-major);
6. the dot products: oracles/contraction.py's :func:`contract` (float64 BLAS for types up
   to f32, an error-free product for f64 and complex<f64>, exact wrapped integers,
   and/or for booleans), rounded once (:func:`to_result`) and transposed into the output
   layout.

No Python loop runs over result elements (only over spatial dimensions, to pad and dilate).
The same construction with a leading case axis (``lead=1``) serves the conditions of the
spec's implementation-defined cases and the error bound's parts (:func:`bound_parts`:
Σ|a|·|b| and K per result element).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from conformance.core.dense import parse_dense
from conformance.core.numerics import to_wide
from conformance.core.types import element_type
from conformance.specs.expressions import alternative, condition

from . import contraction
from .registry import OracleError, register

__all__ = ["ConvGeometry", "geometry", "operands", "from_groups", "convolution",
           "bound_parts", "ATTRIBUTE_ORDER"]

#: the attribute list the spec's conditions pass, in this order
ATTRIBUTE_ORDER = ("window_strides", "padding", "lhs_dilation", "rhs_dilation",
                   "window_reversal", "input_batch_dimension", "input_feature_dimension",
                   "input_spatial_dimensions", "kernel_input_feature_dimension",
                   "kernel_output_feature_dimension", "kernel_spatial_dimensions",
                   "output_batch_dimension", "output_feature_dimension",
                   "output_spatial_dimensions", "feature_group_count", "batch_group_count")


def _padding(value) -> np.ndarray:
    if isinstance(value, str):
        value = parse_dense(value)
    return np.asarray(value, np.int64).reshape(-1, 2)


@dataclasses.dataclass
class ConvGeometry:
    """The index arithmetic of one signature: sizes, windows and groups."""

    lead: int
    nsp: int
    strides: list[int]
    pad: np.ndarray                  # [nsp, 2]
    lhs_dilation: list[int]
    rhs_dilation: list[int]
    reversal: list[bool]
    lhs_perm: list[int]              # -> [batch, feature, spatial...]
    rhs_perm: list[int]              # -> [out, in, spatial...]
    out_perm: list[int]              # output axis d <- canonical [batch, spatial..., feature]
    fgc: int
    bgc: int
    batch: int
    features: int
    in_spatial: list[int]
    out_features: int
    kernel_in: int
    kernel_spatial: list[int]
    windows: list[int]               # num_windows per spatial dimension (C26)

    @property
    def groups(self) -> int:
        return self.fgc * self.bgc

    @property
    def terms(self) -> int:
        """K: the number of products in every result element."""
        return int(self.kernel_in * np.prod(self.kernel_spatial, dtype=np.int64))

    @property
    def out_canonical(self) -> list[int]:
        """[batch / bgc, windows..., out features]"""
        return [self.batch // self.bgc] + self.windows + [self.out_features]

    @property
    def empty(self) -> bool:
        """No products in a result element, or no result elements."""
        return self.terms == 0 or 0 in self.out_canonical


def geometry(lhs_shape: Sequence[int], rhs_shape: Sequence[int], attrs: Mapping[str, Any],
             lead: int = 0) -> ConvGeometry:
    """The geometry of a convolution of these operand shapes (``lead`` leading case axes on
    both) and attributes; OracleError where the attributes break the constraints."""
    a = attrs
    try:
        nsp = len(a["input_spatial_dimensions"])
        ib, if_ = int(a["input_batch_dimension"]), int(a["input_feature_dimension"])
        isd = [int(d) for d in a["input_spatial_dimensions"]]
        ki, ko = int(a["kernel_input_feature_dimension"]), int(a["kernel_output_feature_dimension"])
        ksd = [int(d) for d in a["kernel_spatial_dimensions"]]
        ob, of = int(a["output_batch_dimension"]), int(a["output_feature_dimension"])
        osd = [int(d) for d in a["output_spatial_dimensions"]]
        fgc, bgc = int(a["feature_group_count"]), int(a["batch_group_count"])
        strides = [int(s) for s in a["window_strides"]]
        pad = _padding(a["padding"])
        ld = [int(d) for d in a["lhs_dilation"]]
        rd = [int(d) for d in a["rhs_dilation"]]
        rev = [r is True or r == "true" for r in a["window_reversal"]]
    except (KeyError, TypeError, ValueError) as e:
        raise OracleError(f"convolution: attributes unreadable ({e})") from None
    ls, rs = tuple(lhs_shape)[lead:], tuple(rhs_shape)[lead:]
    n = len(ls)
    lhs_perm, rhs_perm = [ib, if_] + isd, [ko, ki] + ksd
    canon_out = [ob] + osd + [of]
    if not (len(rs) == n and n == nsp + 2 and sorted(lhs_perm) == list(range(n)) and
            sorted(rhs_perm) == list(range(n)) and sorted(canon_out) == list(range(n)) and
            len(strides) == len(ld) == len(rd) == len(rev) == nsp and pad.shape == (nsp, 2)
            and min(strides + ld + rd, default=1) > 0 and fgc > 0 and bgc > 0
            and (fgc == 1 or bgc == 1)):
        raise OracleError("convolution: the attributes break C1-C24")
    batch, features = ls[ib], ls[if_]
    out_features, kernel_in = rs[ko], rs[ki]
    if batch % bgc or features % fgc or out_features % (fgc * bgc) or \
            kernel_in != features // fgc:
        raise OracleError("convolution: group counts do not divide (C11, C12, C15-C17)")
    in_spatial = [ls[d] for d in isd]
    kernel_spatial = [rs[d] for d in ksd]
    windows = []
    for i in range(nsp):
        dil = 0 if in_spatial[i] == 0 else (in_spatial[i] - 1) * ld[i] + 1
        padded = int(pad[i, 0]) + dil + int(pad[i, 1])
        win = 0 if kernel_spatial[i] == 0 else (kernel_spatial[i] - 1) * rd[i] + 1
        if padded < 0:
            raise OracleError("convolution: padding cuts more than the dilated input")
        windows.append(0 if (padded == 0 or win > padded) else (padded - win) // strides[i] + 1)
    out_perm = [canon_out.index(d) for d in range(n)]
    return ConvGeometry(lead, nsp, strides, pad, ld, rd, rev, lhs_perm, rhs_perm, out_perm,
                        fgc, bgc, batch, features, in_spatial, out_features, kernel_in,
                        kernel_spatial, windows)


def _padded(x: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """``x`` ([lead..., N, C, spatial...]) dilated and padded with zeros along the spatial
    axes: the spec's ``pad(lhs, 0, low, high, lhs_dilation - 1)``."""
    L = g.lead
    for i in range(g.nsp):
        ax = L + 2 + i
        size, d = x.shape[ax], g.lhs_dilation[i]
        if d > 1 and size > 1:
            shape = list(x.shape)
            shape[ax] = (size - 1) * d + 1
            y = np.zeros(shape, x.dtype)
            idx = [slice(None)] * x.ndim
            idx[ax] = slice(None, None, d)
            y[tuple(idx)] = x
            x = y
        # zeros on the positive sides first, then the negative sides cut from the padded
        # array (a cut larger than the input on its side takes the other side's padding)
        lo, hi = int(g.pad[i, 0]), int(g.pad[i, 1])
        if lo > 0 or hi > 0:
            widths = [(0, 0)] * x.ndim
            widths[ax] = (max(0, lo), max(0, hi))
            x = np.pad(x, widths)
        idx = [slice(None)] * x.ndim
        idx[ax] = slice(max(0, -lo), x.shape[ax] - max(0, -hi))
        x = x[tuple(idx)]
    return x


def operands(lhs: np.ndarray, rhs: np.ndarray, g: ConvGeometry
             ) -> tuple[np.ndarray, np.ndarray, list[int], list[int], list[int], list[int]]:
    """The convolution as one dot_general: ``lhs`` windows as ``[lead..., G, Nb, W..., Cg,
    K...]`` (a strided view: im2col without a copy) and ``rhs`` as ``[lead..., G, Cg, K...,
    Og]``, with their batching and contracting dimensions (lead axes not counted). Only for
    geometries with windows and products (:func:`convolution` handles the others)."""
    L, n = g.lead, g.nsp
    pre = list(range(L))
    x = np.transpose(lhs, pre + [L + d for d in g.lhs_perm])       # [.., N, C, S...]
    w = np.transpose(rhs, pre + [L + d for d in g.rhs_perm])       # [.., O, I, K...]
    if any(g.reversal):
        w = np.flip(w, axis=[L + 2 + i for i in range(n) if g.reversal[i]])
    xp = _padded(x, g)
    span = [(k - 1) * r + 1 for k, r in zip(g.kernel_spatial, g.rhs_dilation)]
    view = np.lib.stride_tricks.sliding_window_view(
        xp, span, axis=tuple(L + 2 + i for i in range(n)))         # [.., N, C, P'..., span...]
    idx = [slice(None)] * (L + 2) + [slice(None, None, s) for s in g.strides] + \
        [slice(None, None, r) for r in g.rhs_dilation]
    view = view[tuple(idx)]                                        # [.., N, C, W..., K...]
    G, nb = g.groups, g.batch // g.bgc
    cg = g.features // g.fgc
    lead_shape = view.shape[:L]
    rest = view.shape[L + 2:]
    if g.bgc > 1:
        v = view.reshape(lead_shape + (G, nb, g.features) + rest)   # [.., G, Nb, C, W, K]
        v = np.moveaxis(v, L + 2, L + 2 + n)                         # [.., G, Nb, W, C, K]
    else:
        v = view.reshape(lead_shape + (g.batch, G, cg) + rest)      # [.., N, G, Cg, W, K]
        v = np.moveaxis(v, L + 1, L)                                 # [.., G, N, Cg, W, K]
        v = np.moveaxis(v, L + 2, L + 2 + n)                         # [.., G, N, W, Cg, K]
    og = g.out_features // G
    k = w.reshape(w.shape[:L] + (G, og) + w.shape[L + 1:])          # [.., G, Og, I, K]
    k = np.moveaxis(k, L + 1, k.ndim - 1)                            # [.., G, I, K, Og]
    lc = [2 + n + j for j in range(n + 1)]
    rc = [1 + j for j in range(n + 1)]
    return v, k, [0], [0], lc, rc


def from_groups(c: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """A dot_general result ``[lead..., G, Nb, W..., Og]`` as the convolution's result in
    its output layout: groups concatenated along the output features."""
    L = g.lead
    c = np.moveaxis(c, L, c.ndim - 2)                                # [.., Nb, W, G, Og]
    c = c.reshape(c.shape[:-2] + (c.shape[-2] * c.shape[-1],))       # [.., Nb, W, F]
    return np.transpose(c, list(range(L)) + [L + p for p in g.out_perm])


def _canonical_zeros(lead_shape, g: ConvGeometry, dtype) -> np.ndarray:
    """The result where no element has a product (an empty sum: the init value 0), or
    there are no result elements: zeros in the output layout."""
    z = np.zeros(tuple(lead_shape) + tuple(g.out_canonical), dtype)
    return np.transpose(z, list(range(len(lead_shape))) +
                        [len(lead_shape) + p for p in g.out_perm])


def _wide(lhs: np.ndarray, rhs: np.ndarray):
    """Exact widenings (float64, complex128, int64/uint64, bool) and whether the dot
    products need the error-free path (f64 and complex<f64>)."""
    et = element_type(lhs.dtype)
    exact = (et.is_float or et.is_complex) and et.component.name == "f64"
    return to_wide(lhs), to_wide(rhs), exact


def contract_wide(lhs: np.ndarray, rhs: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """The convolution's dot products, unrounded (contraction.contract's kinds: float64,
    complex128, uint64 modulo 2^64, bool), in the output layout."""
    a, b, exact = _wide(lhs, rhs)
    if g.empty:
        et = element_type(lhs.dtype)
        kind = (np.bool_ if et.is_boolean else np.uint64 if et.is_integer else
                np.complex128 if et.is_complex else np.float64)
        return _canonical_zeros(lhs.shape[:g.lead], g, kind)
    v, k, lb, rb, lc, rc = operands(a, b, g)
    c = contraction.contract(v, k, lb, rb, lc, rc, lead=g.lead, exact=exact)
    return from_groups(c, g)


@register("convolution")
def convolution(inputs, attrs, types):
    lhs, rhs = (np.asarray(x) for x in inputs)
    if lhs.dtype != rhs.dtype:
        raise OracleError(f"convolution: lhs is {element_type(lhs.dtype).name}, rhs "
                          f"{element_type(rhs.dtype).name} (C2)")
    g = geometry(lhs.shape, rhs.shape, attrs)
    (t,) = types
    wide = contract_wide(lhs, rhs, g)
    if tuple(wide.shape) != tuple(t.shape):
        raise OracleError(f"convolution: the result shape is {list(wide.shape)}, the "
                          f"signature says {list(t.shape)} (C26)")
    return contraction.to_result(np.ascontiguousarray(wide), t)


# ---------------------------------------------------------------------------
# The bound's parts and the conditions of the spec's implementation-defined cases
# (inputs with a leading case axis)
# ---------------------------------------------------------------------------

def _attrs(values: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(ATTRIBUTE_ORDER, values))


def bound_parts(lhs: np.ndarray, rhs: np.ndarray, attrs: Mapping[str, Any]
                ) -> tuple[np.ndarray, int]:
    """For batched operands (a leading case axis): S = Σ|a|·|b| per result element at
    float64 (non-finite values as 0, padding and holes as 0) and K, the number of products
    per element (kernel spatial sizes times kernel input features)."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    g = geometry(lhs.shape, rhs.shape, attrs, lead=1)
    if g.empty:
        return _canonical_zeros(lhs.shape[:1], g, np.float64), g.terms

    def mag(x):
        m = np.abs(to_wide(x)).astype(np.float64)
        return np.where(np.isfinite(m), m, 0.0)
    v, k, lb, rb, lc, rc = operands(mag(lhs), mag(rhs), g)
    s = contraction.contract(v, k, lb, rb, lc, rc, lead=1, exact=False)
    return from_groups(s, g), g.terms


@condition("convolution_out_of_range")
def _out_of_range(lhs, rhs, attr_values, result):
    """Where some order's partial sum may overflow (Σ|a·b| reaches the largest finite
    value), or complex arithmetic meets a non-finite part: contraction.out_of_range_mask
    on the windows."""
    lhs, rhs, r = np.asarray(lhs), np.asarray(rhs), np.asarray(result)
    g = geometry(lhs.shape, rhs.shape, _attrs(attr_values), lead=1)
    et = element_type(r.dtype)
    if g.empty or not (et.is_float or et.is_complex):
        return np.zeros(r.shape, bool)
    a, b, _ = _wide(lhs, rhs)
    v, k, lb, rb, lc, rc = operands(a, b, g)
    m = contraction.out_of_range_mask(v, k, lb, rb, lc, rc, et, lead=1)
    return from_groups(m, g)


def _zero_parts(lhs, rhs, attr_values, result) -> list[np.ndarray]:
    """Per part of the result (one for real types; real and imaginary for complex): zero
    results whose sign an order may change: every real product of that part over the
    window is a zero of either sign (padding and dilation holes included; without the init
    value a sum of -0 products is -0), or every real product of that part rounds to a zero
    at the element type (contraction.underflowing_parts: their signs, or the sign of a
    fused sum, decide), or the exact sum is nonzero but rounds to zero (the products
    rounded at the element type may underflow to zeros of either sign)."""
    lhs, rhs, r = np.asarray(lhs), np.asarray(rhs), np.asarray(result)
    parts = [r.real, r.imag] if np.iscomplexobj(r) else [r]
    g = geometry(lhs.shape, rhs.shape, _attrs(attr_values), lead=1)
    et = element_type(r.dtype)
    if g.empty or r.size == 0 or not (et.is_float or et.is_complex):
        return [np.zeros(r.shape, bool) for _ in parts]
    a, b, exact = _wide(lhs, rhs)
    v, k, lb, rb, lc, rc = operands(a, b, g)
    zero = contraction.all_zero_terms(v, k, lb, rb, lc, rc, lead=1)
    # every real product of the part underflows to a zero at the operands' type (dot_general's
    # rule too): the exact sum may be a nonzero below float64's range, which the sums
    # below cannot see
    under = contraction.underflowing_parts(v, k, lb, rb, lc, rc, lead=1,
                                           et=element_type(lhs.dtype))
    with np.errstate(all="ignore"):
        c = from_groups(contraction.contract(v, k, lb, rb, lc, rc, lead=1, exact=exact), g)
    sums = [c.real, c.imag] if np.iscomplexobj(c) else [c]
    return [(from_groups(z, g) | from_groups(u, g) | (w != 0)) & (q == 0)
            for z, u, w, q in zip(zero, under, sums, parts)]


@condition("convolution_zero_terms")
def _zero_terms(lhs, rhs, attr_values, result):
    """Zero results (a part of them) whose sign the order decides (:func:`_zero_parts`)."""
    out = np.zeros(np.shape(result), bool)
    for z in _zero_parts(lhs, rhs, attr_values, result):
        out |= z
    return out


@alternative("convolution_other_zero")
def _other_zero(lhs, rhs, attr_values, result):
    """The oracle's result with the other zero in each part whose sign the order decides;
    for complex, each such part alone and both."""
    r = np.asarray(result)
    return contraction.other_zeros(r, _zero_parts(lhs, rhs, attr_values, result))
