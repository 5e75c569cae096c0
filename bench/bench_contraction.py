"""The oracle's speed on dot_general, against plain numpy (issue 14's target).

- dot_general 512x512x512 f32 (lhs [512, 512] contracting dimension 1 with rhs [512, 512]
  dimension 0): within 3x of ``numpy.matmul`` of the same data as float64 (the float64
  product is what the oracle must at least do: it widens f32 to float64, multiplies
  through BLAS and rounds once).
- for information (no target): the same shape in f64, where the oracle runs the
  error-free (Ozaki) product with a compensated sum, against the same float64 matmul.

Each is timed as the median of ``--repeat`` runs (after one warm-up) of
``conformance.oracles.evaluate`` with the case's result type, against numpy on
float64 copies made beforehand.

    python bench/bench_contraction.py              # median of 5
    python bench/bench_contraction.py --repeat 9 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from timing import median_seconds  # bench/timing.py (the script's folder is on sys.path)

TARGETS = {"dot_general_512^3_f32": 3.0}

ATTRS = {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
         "lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0],
         "precision_config": ["HIGHEST", "HIGHEST"]}


def bench(et: str, repeat: int) -> dict:
    from conformance import oracles
    rng = np.random.default_rng(0)
    dtype = np.float32 if et == "f32" else np.float64
    a = rng.standard_normal((512, 512)).astype(dtype)
    b = rng.standard_normal((512, 512)).astype(dtype)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)

    def oracle():
        return oracles.evaluate("dot_general", [a, b], ATTRS,
                                result_types=[f"tensor<512x512x{et}>"])

    def reference():
        return np.matmul(a64, b64)

    t_oracle, t_ref = median_seconds(oracle, repeat), median_seconds(reference, repeat)
    name = f"dot_general_512^3_{et}"
    return {"name": name, "oracle_s": t_oracle, "numpy_s": t_ref,
            "reference": "numpy.matmul(float64 copies)", "ratio": t_oracle / t_ref,
            "target": TARGETS.get(name)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)
    results = [bench("f32", args.repeat), bench("f64", args.repeat)]
    ok = True
    for r in results:
        target = r["target"]
        met = target is None or r["ratio"] <= target
        ok &= met
        verdict = f"(target <= {target:g}) {'met' if met else 'MISSED'}" if target \
            else "(no target)"
        print(f"{r['name']}: oracle {r['oracle_s'] * 1e3:.1f} ms, {r['reference']} "
              f"{r['numpy_s'] * 1e3:.1f} ms, ratio {r['ratio']:.2f} {verdict}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "numpy": np.__version__}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
