"""The oracle's speed on fft, against plain numpy (issue 15's target).

- FFT of 2^20 complex64 elements: within 3x of ``numpy.fft.fft`` of the same data as
  complex128 (what the oracle must at least do: it widens to complex128, transforms
  once and rounds once to complex64).

Timed as the median of ``--repeat`` runs (after one warm-up) of
``conformance.oracles.evaluate`` with the case's result type.

    python bench/bench_fft.py              # median of 5
    python bench/bench_fft.py --repeat 9 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from timing import median_seconds  # bench/timing.py (the script's folder is on sys.path)

TARGETS = {"fft_2^20_complex64": 3.0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args(argv)
    from conformance import oracles
    n = 1 << 20
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    wide = x.astype(np.complex128)
    ref = median_seconds(lambda: np.fft.fft(wide), args.repeat)
    ora = median_seconds(lambda: oracles.evaluate("fft", [x], {"fft_type": "FFT", "fft_length": [n]},
                                           result_types=[f"tensor<{n}xcomplex<f32>>"]),
                  args.repeat)
    ratio = ora / ref
    ok = ratio <= TARGETS["fft_2^20_complex64"]
    print(f"fft 2^20 complex64: oracle {ora * 1e3:.1f} ms, numpy.fft on complex128 "
          f"{ref * 1e3:.1f} ms: {ratio:.2f}x (target <= 3x) {'ok' if ok else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"oracle_s": ora, "numpy_s": ref, "ratio": ratio,
                       "target": TARGETS["fft_2^20_complex64"]}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
