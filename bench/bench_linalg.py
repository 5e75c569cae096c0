"""The oracle's speed on cholesky, against plain numpy (issue 15's target).

- cholesky of a batch of 64 Hermitian positive definite f32 matrices of 256 x 256:
  within 3x of ``numpy.linalg.cholesky`` of the same batch as float64 (what the oracle must
  at least do: it widens to float64, factors the stack in one call and rounds once).

Also reported, without a target: triangular_solve of the same matrices with 8 right-hand
sides (the oracle's substitution, one vectorised step per row).

Each is timed as the median of ``--repeat`` runs (after one warm-up) of
``conformance.oracles.evaluate`` with the case's result type.

    python bench/bench_linalg.py              # median of 5
    python bench/bench_linalg.py --repeat 9 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from timing import median_seconds  # bench/timing.py (the script's folder is on sys.path)

TARGETS = {"cholesky_64x256x256_f32": 3.0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args(argv)
    from conformance import oracles
    from conformance.generators.linalg import hermitian_pd
    rng = np.random.default_rng(0)
    lam = np.exp(-rng.uniform(0, 1, (64, 256)) * np.log(10.0))
    a = hermitian_pd((64,), 256, lam, rng, False).astype(np.float32)
    a = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    wide = a.astype(np.float64)
    b = rng.uniform(-1, 1, (64, 256, 8)).astype(np.float32)
    ref = median_seconds(lambda: np.linalg.cholesky(wide), args.repeat)
    ora = median_seconds(lambda: oracles.evaluate("cholesky", [a], {"lower": True},
                                           result_types=["tensor<64x256x256xf32>"]),
                  args.repeat)
    solve = median_seconds(lambda: oracles.evaluate(
        "triangular_solve", [a, b], {"left_side": True, "lower": True, "unit_diagonal": False,
                                     "transpose_a": "NO_TRANSPOSE"},
        result_types=["tensor<64x256x8xf32>"]), args.repeat)
    ratio = ora / ref
    out = {"cholesky_64x256x256_f32": {"oracle_s": ora, "numpy_f64_s": ref, "ratio": ratio,
                                       "target": TARGETS["cholesky_64x256x256_f32"],
                                       "met": ratio <= TARGETS["cholesky_64x256x256_f32"]},
           "triangular_solve_64x256x256_8rhs_f32": {"oracle_s": solve}}
    print(f"cholesky 64x256x256 f32: oracle {ora * 1e3:.1f} ms, numpy float64 "
          f"{ref * 1e3:.1f} ms, ratio {ratio:.2f} (target <= 3)")
    print(f"triangular_solve 64x256x256, 8 right-hand sides, f32: oracle {solve * 1e3:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0 if out["cholesky_64x256x256_f32"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
