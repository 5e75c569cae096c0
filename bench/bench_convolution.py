"""The convolution oracle's speed against the equivalent im2col matmul (issue 14's target).

- an 8x64x64x64 f32 input (NHWC) with a 3x3x64x64 kernel (HWIO), stride 1, SAME padding
  (1 on each side): within 5x of the same convolution done by hand as one im2col matrix
  (32768 x 576, built from a strided view of the padded float64 input) times the kernel
  reshaped to 576 x 64, in float64 (what the oracle must at least do: it widens to
  float64, builds the windows once and makes one BLAS matmul, then rounds once).

Also reported, without a target: the same convolution in a transposed layout (NCHW input,
OIHW kernel) with feature_group_count 4, and with lhs and rhs dilation 2.

Each is timed as the median of ``--repeat`` runs (after one warm-up) of
``conformance.oracles.evaluate`` with the case's result type.

    python bench/bench_convolution.py              # median of 5
    python bench/bench_convolution.py --repeat 9 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from timing import median_seconds  # bench/timing.py (the script's folder is on sys.path)

TARGETS = {"conv_8x64x64x64_k3x3x64x64_f32": 5.0}


def _attrs(layout: str, fgc: int = 1, ld: int = 1, rd: int = 1, pad: int = 1) -> dict:
    if layout == "NHWC":
        dims = dict(input_batch_dimension=0, input_feature_dimension=3,
                    input_spatial_dimensions=[1, 2], kernel_input_feature_dimension=2,
                    kernel_output_feature_dimension=3, kernel_spatial_dimensions=[0, 1],
                    output_batch_dimension=0, output_feature_dimension=3,
                    output_spatial_dimensions=[1, 2])
    else:
        dims = dict(input_batch_dimension=0, input_feature_dimension=1,
                    input_spatial_dimensions=[2, 3], kernel_input_feature_dimension=1,
                    kernel_output_feature_dimension=0, kernel_spatial_dimensions=[2, 3],
                    output_batch_dimension=0, output_feature_dimension=1,
                    output_spatial_dimensions=[2, 3])
    return {"window_strides": [1, 1],
            "padding": f"dense<[[{pad}, {pad}], [{pad}, {pad}]]> : tensor<2x2xi64>",
            "lhs_dilation": [ld, ld], "rhs_dilation": [rd, rd],
            "window_reversal": ["false", "false"], **dims, "feature_group_count": fgc,
            "batch_group_count": 1, "precision_config": ["HIGHEST", "HIGHEST"]}


def _im2col_matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The baseline: NHWC input, HWIO kernel, 3x3, stride 1, padding 1, by hand."""
    x64 = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    n, h, ww, c = x.shape
    view = np.lib.stride_tricks.sliding_window_view(x64, (3, 3), axis=(1, 2))
    cols = view.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * ww, 9 * c)   # (kh, kw, c)
    out = cols @ w.astype(np.float64).reshape(9 * c, -1)
    return out.reshape(n, h, ww, -1).astype(np.float32)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)

    from conformance import oracles
    from conformance.core.types import TensorType, element_type

    rng = np.random.default_rng(0)
    f32 = element_type("f32")
    x = rng.standard_normal((8, 64, 64, 64)).astype(np.float32)
    w = rng.standard_normal((3, 3, 64, 64)).astype(np.float32)
    out_t = [TensorType((8, 64, 64, 64), f32)]
    attrs = _attrs("NHWC")

    def oracle():
        return oracles.evaluate("convolution", [x, w], attrs, result_types=out_t)

    (got,) = oracle()
    base = _im2col_matmul(x, w)
    assert np.array_equal(got, base) or np.allclose(got, base, rtol=1e-6, atol=1e-4), \
        "the oracle and the im2col baseline disagree"
    t_oracle = median_seconds(oracle, args.repeat)
    t_base = median_seconds(lambda: _im2col_matmul(x, w), args.repeat)
    ratio = t_oracle / t_base
    figures = {"conv_8x64x64x64_k3x3x64x64_f32": {
        "oracle_s": t_oracle, "im2col_matmul_s": t_base, "ratio": ratio,
        "target": TARGETS["conv_8x64x64x64_k3x3x64x64_f32"]}}
    print(f"convolution 8x64x64x64 * 3x3x64x64 f32 (NHWC/HWIO): oracle {t_oracle * 1e3:.1f} ms, "
          f"im2col matmul {t_base * 1e3:.1f} ms, ratio {ratio:.2f}x (target <= 5)")

    # no target: NCHW / OIHW with 4 feature groups, and dilations
    xn = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    for name, a, rhs_shape, out_shape in (
            ("nchw_groups4", _attrs("NCHW", fgc=4), (64, 16, 3, 3), (8, 64, 64, 64)),
            ("nchw_dilated2", _attrs("NCHW", ld=2, rd=2, pad=2), (64, 64, 3, 3),
             (8, 64, 127, 127))):
        k = rng.standard_normal(rhs_shape).astype(np.float32)
        t = [TensorType(out_shape, f32)]
        s = median_seconds(lambda: oracles.evaluate("convolution", [xn, k], a, result_types=t),
                    max(1, args.repeat // 2))
        figures[name] = {"oracle_s": s}
        print(f"  (no target) {name}: oracle {s * 1e3:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0 if ratio <= TARGETS["conv_8x64x64x64_k3x3x64x64_f32"] else 1


if __name__ == "__main__":
    sys.exit(main())
