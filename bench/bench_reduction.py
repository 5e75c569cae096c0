"""The oracle's speed on reductions, against plain numpy (issue 13's targets).

- reduce over 2^24 f32 elements (a 4096 x 4096 tensor reduced along its last axis, body
  ``add``): within 3x of ``numpy.sum`` of the same data as float64 (the float64 sum is
  what the oracle must at least do; the oracle also widens f32 to float64 and rounds
  once);
- reduce_window of a 1x256x256x64 f32 tensor with a 3x3 window, stride 1 (no padding):
  within 5x of a ``sliding_window_view`` sum of the same data (float32, as numpy gives
  it).

Each is timed as the median of ``--repeat`` runs (after one warm-up) of
``conformance.oracles.evaluate`` with the case's result type, against the numpy
reference on the same input array.

    python bench/bench_reduction.py              # both targets, median of 5
    python bench/bench_reduction.py --repeat 9 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from timing import median_seconds  # bench/timing.py (the script's folder is on sys.path)

TARGETS = {"reduce_2^24_f32": 3.0, "reduce_window_1x256x256x64_3x3": 5.0}


def bench_reduce(repeat: int) -> dict:
    from conformance import oracles
    x = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
    x64 = x.astype(np.float64)
    init = np.array(-0.0, np.float32)

    def oracle():
        return oracles.evaluate("reduce", [x, init], {"dimensions": [1]},
                                result_types=["tensor<4096xf32>"],
                                regions=("(f32, f32) -> add(arg0, arg1)",))

    def reference():
        return np.sum(x64, axis=1)

    t_oracle, t_ref = median_seconds(oracle, repeat), median_seconds(reference, repeat)
    return {"name": "reduce_2^24_f32", "oracle_s": t_oracle, "numpy_s": t_ref,
            "reference": "numpy.sum(float64 copy, axis=1)",
            "ratio": t_oracle / t_ref, "target": TARGETS["reduce_2^24_f32"]}


def bench_reduce_window(repeat: int) -> dict:
    from conformance import oracles
    x = np.random.default_rng(1).standard_normal((1, 256, 256, 64)).astype(np.float32)
    init = np.array(-0.0, np.float32)
    attrs = {"window_dimensions": [1, 3, 3, 1], "window_strides": [1, 1, 1, 1],
             "base_dilations": [1, 1, 1, 1], "window_dilations": [1, 1, 1, 1],
             "padding": "dense<0> : tensor<4x2xi64>"}

    def oracle():
        return oracles.evaluate("reduce_window", [x, init], attrs,
                                result_types=["tensor<1x254x254x64xf32>"],
                                regions=("(f32, f32) -> add(arg0, arg1)",))

    def reference():
        view = np.lib.stride_tricks.sliding_window_view(x, (1, 3, 3, 1))
        return view.sum(axis=(-4, -3, -2, -1))

    t_oracle, t_ref = median_seconds(oracle, repeat), median_seconds(reference, repeat)
    return {"name": "reduce_window_1x256x256x64_3x3", "oracle_s": t_oracle,
            "numpy_s": t_ref, "reference": "sliding_window_view(x, (1,3,3,1)).sum(...)",
            "ratio": t_oracle / t_ref,
            "target": TARGETS["reduce_window_1x256x256x64_3x3"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--only", choices=["reduce", "reduce_window"])
    args = p.parse_args(argv)
    results = []
    if args.only in (None, "reduce"):
        results.append(bench_reduce(args.repeat))
    if args.only in (None, "reduce_window"):
        try:
            results.append(bench_reduce_window(args.repeat))
        except Exception as e:  # noqa: BLE001 - an op without a spec yet
            print(f"reduce_window: not measured ({type(e).__name__}: {e})")
    ok = True
    for r in results:
        met = r["ratio"] <= r["target"]
        ok &= met
        print(f"{r['name']}: oracle {r['oracle_s'] * 1e3:.1f} ms, {r['reference']} "
              f"{r['numpy_s'] * 1e3:.1f} ms, ratio {r['ratio']:.2f} (target <= "
              f"{r['target']:g}) {'met' if met else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "numpy": np.__version__}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
