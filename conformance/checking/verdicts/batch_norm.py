"""The ``batch_norm`` bound: per element, what evaluating the spec's decomposition of
batch_norm_inference, batch_norm_training or batch_norm_grad in the element type allows.

The specs name it with a safety factor::

    accuracy:
      default: {bound: batch_norm, c: 2}

The spec defines the three ops as compositions of reduce (add, with an
implementation-defined tree), broadcast, subtract, add, multiply, divide and sqrt, each
rounded to the element type ``E`` (unit roundoff ``u``), and gives no accuracy guarantee
of its own ("### Accuracy"). The bound is a first-order forward error analysis of that
composition for ANY reduction trees (Higham, Accuracy and Stability of Numerical
Algorithms, §3.1 and §4.2: a sum of m terms in any order is within γ(m−1)·Σ|terms|),
with the decomposition's constants ``m`` (elements per feature) and ``epsilon`` rounded to
``E`` or kept exact; the oracle (oracles/batch_norm.py) evaluates the decomposition at
float64. With d = |x − μ|, t = variance + epsilon, s = √t per feature:

- mean (training): e_μ = (γ(m−1) + 3u)·Σ|x|/m (the tree, the division, the divisor);
- variance (training, two passes as the spec): e_v = γ(m+3)·mean((d + e_μ)²) + 2e_μ·mean(d)
  + e_μ², and for the normalisation also |ε − ε_E| + u·ε (epsilon added exactly or in E)
  and 2u·t (the add's rounding);
- s: relative error r_s = e_v / (2t) + 2u (first order; the rule
  ``unstable_denominator`` masks features where e_v ≥ t/2, where t's sign or zero-ness
  is the tree's);
- output = scale·(x − μ)/s + offset: |scale|/s·(e_μ + u·(|x| + |μ| + e_μ)) + n·(r_s + 3u)
  + u·(n + |offset|), n = |scale|·(d + e_μ)/s;
- batch_norm_grad, with its temporaries i1 = g·m, i2 = Σg, i3 = Σ g·(x − μ), i5 = i3·(x −
  μ)/t and the factor K = |scale|/(s·m): grad_offset γ(m−1)·Σ|g| + u·|Σg|; grad_scale
  (γ(m−1) + 4u)·Σ|g|·d/s + |Σ g·(x − μ)|/s·r_s; grad_operand K·(γ(m)·Σ|g| + (γ(m+1)·Σ|g|d
  + 3u·|i3|)·d/t + |i5|·e_v/t + 3u·(|i1| + |i2| + |i5|)) + K·|i1 − i2 − i5|·(r_s + 4u).

Each bound is multiplied by ``c`` (second-order terms, an rsqrt or a reciprocal that is
not correctly rounded: a few ulps where the decomposition has one rounding), and gets the
oracle's own error (2^-50 of the magnitudes) and 4·tiny (the smallest normal number) for
underflowing intermediate results.

Backward stability is the question, not the decomposition's exact roundings: the centred
values x − μ are allowed an error of u·(|x| + |μ|) (the result of inputs perturbed by u
relatively), not only u·|x − μ|, and the variance 2u·mean(|x − μ|·(|x| + |μ|)) for the
same reason. So x·k + (offset − μ·k) for (x − μ)·k + offset (XLA's BatchNormExpander)
passes: it is the exact result of inputs perturbed by a few u. The one-pass variance
E[x²] − E[x]² (the same expander's) does not where |μ| ≫ the spread or a feature is
constant: its error, u·mean(x²), is no perturbation of the inputs by a few u (the
textbook unstable variance algorithm; Higham §1.9, Chan, Golub and LeVeque 1983).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.core.types import element_type
from conformance.oracles import batch_norm as bn
from conformance.checking.verdicts import Judgement, bound_function, gamma

__all__ = ["batch_norm_bound"]

_U64 = 2.0 ** -50


@bound_function("batch_norm")
def batch_norm_bound(j: Judgement) -> list[np.ndarray]:
    """One bound array per result (see the module's docstring)."""
    op = j.sig.op
    attrs = j.sig.attributes
    c = float(j.accuracy.options.get("c", 2))
    xs = [np.asarray(v) for v in j.inputs]
    x = xs[0]
    lead = 1
    fi = int(attrs["feature_index"])
    rank = x.ndim - lead
    et = element_type(x.dtype)
    u = bn.unit_roundoff(x.dtype)
    tiny = float(ml_dtypes.finfo(et.dtype).smallest_normal)
    m, m_e, eps_e = bn.constants(x.dtype, x.shape[lead:], fi, attrs["epsilon"])
    eps32 = float(np.float32(attrs["epsilon"]))
    d_eps = abs(eps32 - eps_e) + u * eps32
    b = lambda v: bn.bcast(np.asarray(v, np.float64), fi, rank, lead)   # noqa: E731
    axes = bn.feature_axes(rank, fi, lead)
    with np.errstate(all="ignore"):
        xw = x.astype(np.float64)
        if op == "batch_norm_training":
            _, mean, var = bn.training(x, xs[1], xs[2], eps_e, m_e, fi, lead)
            err_m = bn.mean_error(x, fi, lead, m, u)
            err_var = bn.variance_error(x, mean, err_m, fi, lead, m, u)
            scale = xs[1].astype(np.float64)
        else:
            k_mean, k_var = (3, 4) if op == "batch_norm_inference" else (2, 3)
            mean, var = xs[k_mean].astype(np.float64), xs[k_var].astype(np.float64)
            err_m = np.zeros(mean.shape)
            err_var = np.zeros(var.shape)
            scale = xs[1].astype(np.float64)
        t = var + eps_e
        err_v = err_var + d_eps + 2 * u * np.abs(t)
        s = np.sqrt(t)
        rel_s = err_v / (2 * t) + 2 * u
        d = np.abs(xw - b(mean))
        sc = np.abs(b(scale))
        if op in ("batch_norm_inference", "batch_norm_training"):
            offset = np.abs(xs[2].astype(np.float64))
            n = sc * (d + b(err_m)) / b(s)
            ax = np.abs(xw) + np.abs(b(mean)) + b(err_m)
            out = (sc / b(s) * (b(err_m) + u * ax) + n * (b(rel_s) + 3 * u)
                   + u * (n + b(offset)))
            mag = n + b(offset)
            bounds = [c * out + _U64 * mag + 4 * tiny]
            if op == "batch_norm_training":
                bounds += [c * err_m + _U64 * np.abs(mean) + 4 * tiny,
                           c * err_var + _U64 * np.abs(var) + 4 * tiny]
        else:
            g = xs[4].astype(np.float64)
            ga = np.abs(g)
            centered = xw - b(mean)
            sum_g = g.sum(axis=axes)
            s_g = ga.sum(axis=axes)
            s_gd = (ga * d).sum(axis=axes)
            # the centred values within u·(|x| + |mean|): a backward-stable centring
            s_gx = (ga * (np.abs(xw) + np.abs(b(mean)))).sum(axis=axes)
            s_gd = s_gd + u * s_gx
            i3 = (g * centered).sum(axis=axes)
            i1 = g * m_e
            i5 = b(i3) * centered / b(t)
            K = sc / (b(s) * max(m_e, 1e-300))
            bracket_err = (gamma(m, u) * b(s_g)
                           + (gamma(m + 1, u) * b(s_gd) + 3 * u * np.abs(b(i3))) * d / b(t)
                           + np.abs(i5) * b(err_v) / b(t)
                           + 3 * u * (np.abs(i1) + np.abs(b(sum_g)) + np.abs(i5)))
            bracket = np.abs(i1 - b(sum_g) - i5)
            go = K * bracket_err + K * bracket * (b(rel_s) + 4 * u)
            gs = (gamma(max(m - 1, 0), u) + 4 * u) * s_gd / s + np.abs(i3) / s * rel_s
            gb = gamma(max(m - 1, 0), u) * s_g + u * np.abs(sum_g)
            bounds = [c * go + _U64 * K * (np.abs(i1) + np.abs(b(sum_g)) + np.abs(i5))
                      + 4 * tiny,
                      c * gs + _U64 * s_gd / s + 4 * tiny,
                      c * gb + _U64 * s_g + 4 * tiny]
    out = []
    for bound, e in zip(bounds, j.expected):
        bound = np.broadcast_to(np.asarray(bound, np.float64), np.shape(e))
        out.append(np.where(np.isnan(bound), np.inf, bound))
    return out
