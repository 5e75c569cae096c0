"""The one timing rule of the oracle speed benchmarks: the median of ``repeat`` runs after
one warm-up (a noisy shared machine makes the mean and the minimum mislead)."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)
