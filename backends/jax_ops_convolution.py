"""jax.lax mapping of convolution (registered into jax_ops.BUILDERS).

``lax.conv_general_dilated`` takes every attribute of the spec's op except
``window_reversal``: the dimension numbers as ``ConvDimensionNumbers`` (lhs ``(batch,
feature, spatial...)``, rhs ``(out, in, spatial...)``, out ``(batch, feature,
spatial...)``), padding as (low, high) pairs (negative ones too), both dilations, both group
counts, ``precision`` as one ``lax.Precision`` per operand and ``preferred_element_type``
as the result's element type (C27: the operands'). jax lowers it to one
stablehlo.convolution. ``window_reversal`` has no jax.lax parameter (jax always emits it
false); a reversed window pairs with the kernel exactly as the window does with the kernel
reversed along those spatial dimensions, so the mapping reverses ``rhs`` there with
``lax.rev`` first (what XLA itself does with window reversal). jax.vmap batches the cases
(conv_general_dilated's batching rule folds the case axis into the batch or feature
dimension).
"""
from __future__ import annotations

from jax import lax

from conformance.core.case import Signature
from conformance.core.dense import parse_dense

from .base import Unsupported
from .jax_ops import builder

_PRECISION = {"DEFAULT": lax.Precision.DEFAULT, "HIGH": lax.Precision.HIGH,
              "HIGHEST": lax.Precision.HIGHEST}


@builder("convolution")
def _convolution(sig: Signature):
    a = sig.attributes
    try:
        padding = [tuple(int(v) for v in row) for row in parse_dense(a["padding"]).reshape(-1, 2)]
    except (ValueError, TypeError) as e:
        raise Unsupported(f"convolution: jax.lax takes padding as (low, high) pairs; "
                          f"{a['padding']!r} is not a N x 2 tensor ({e})") from None
    pc = list(a["precision_config"])
    if len(pc) != 2 or any(p not in _PRECISION for p in pc):
        raise Unsupported(f"convolution: jax.lax takes one precision per operand; "
                          f"precision_config {pc} cannot be expressed")
    rev = list(a["window_reversal"])
    if any(r not in ("true", "false", True, False) for r in rev):
        raise Unsupported(f"convolution: window_reversal {rev} is not a list of booleans")
    ksd = [int(d) for d in a["kernel_spatial_dimensions"]]
    if len(rev) != len(ksd):
        raise Unsupported("convolution: jax.lax has no window_reversal; its mapping (lax.rev of "
                          "the kernel) needs one entry per kernel spatial dimension")
    flip = tuple(d for d, r in zip(ksd, rev) if r in ("true", True))
    dn = lax.ConvDimensionNumbers(
        lhs_spec=(int(a["input_batch_dimension"]), int(a["input_feature_dimension"]),
                  *[int(d) for d in a["input_spatial_dimensions"]]),
        rhs_spec=(int(a["kernel_output_feature_dimension"]),
                  int(a["kernel_input_feature_dimension"]), *ksd),
        out_spec=(int(a["output_batch_dimension"]), int(a["output_feature_dimension"]),
                  *[int(d) for d in a["output_spatial_dimensions"]]))
    kwargs = dict(window_strides=tuple(int(s) for s in a["window_strides"]), padding=padding,
                  lhs_dilation=tuple(int(d) for d in a["lhs_dilation"]),
                  rhs_dilation=tuple(int(d) for d in a["rhs_dilation"]), dimension_numbers=dn,
                  feature_group_count=int(a["feature_group_count"]),
                  batch_group_count=int(a["batch_group_count"]),
                  precision=(_PRECISION[pc[0]], _PRECISION[pc[1]]),
                  preferred_element_type=sig.result_types[0].element_type.dtype)

    def run(lhs, rhs):
        if flip:
            rhs = lax.rev(rhs, flip)
        return lax.conv_general_dilated(lhs, rhs, **kwargs)
    return run
