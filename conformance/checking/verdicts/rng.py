"""``property`` verdicts of the rng ops (registered into conformance.checking.verdicts.PROPERTIES).

The spec fixes no value of ``rng_bit_generator`` or ``rng`` (003: THREE_FRY and PHILOX are
"implementation-defined variants", DEFAULT an implementation-defined algorithm; rng's
values "may or may not be deterministic"), so a value oracle cannot judge them. What it
does promise is checked here, each check with its false-alarm rate: the probability that
a generator with exactly the spec's behaviour fails it, at most ``alpha`` (the spec
entry's ``alpha:``, 1e-6) per batch (``rng_bit_generator``) or per case (``rng``). The
thresholds come from distribution-free tail bounds (Hoeffding, Dvoretzky-Kiefer-Wolfowitz
with Massart's constant) or, where noted, a normal approximation at sample sizes where it
holds; a family of tests shares ``alpha`` by Bonferroni. No check draws random numbers:
each is a function of the case's inputs (its seed and case id reproduce it) and of what
the backend returns. The statistical checks record what they measured (entries
``statistics:NAME`` of the verdict's table: tests, failed, samples, the worst ratio of
statistic to threshold), which the runner keeps apart from the implementation-defined
counts and the report shows per generator and type ("Statistics measured").

rng_bit_generator (results: output_state, output):

- ``rng_deterministic_across_compiles``: a fresh compile of the signature
  (``Judgement.run_fresh``) on the same states gives the same bits. False alarms: none.
- ``rng_state_determines_output``: cases of the batch with the same initial_state (the
  generator plants repeats) give the same bits. False alarms: none.
- ``rng_distinct_states_distinct_outputs``: cases of the batch whose states differ (the
  generator plants states that differ in one word only: the key, a counter word) give
  different outputs of 64 bits or more: an output that ignores part of the state fails.
  False alarms: at most C(batch, 2)·2^-64 per batch.
- ``rng_state_advances``: output_state != initial_state where the output is non-empty (a
  zero-sized output draws nothing; whether it moves the state is recorded). False alarms:
  none for a generator whose state is a counter (a random 64-bit state would repeat with
  probability 2^-64).
- ``rng_states_do_not_repeat``: output_state fed back as initial_state ``CHAIN`` times in
  the same executable (``Judgement.run_on``): no state of a case's chain equals an earlier
  one, and no output of at least 64 bits does. False alarms: at most C(17, 2)·2^-64 per
  case.
- ``rng_uniform_bits``: the chained outputs of the batch's far-apart states
  (:func:`far_apart_states`: every word more than 2^32 from that of every other, so that
  no two streams overlap), pooled (at most
  2^20 elements): per-bit balance at each of the type's w bit positions (Hoeffding:
  |ones - n/2| <= sqrt(n·ln(2w/α₁)/2)), chi-square of the 2^min(w,8) symbol values (bytes,
  or the 4 bits of si4/ui4; when every bin expects 20 or more), lag-1 serial correlation
  of the symbols (|r|·sqrt(n) <= z(α₃/2), n >= 4096); α₁ = α₂ = α₃ = α/3. One verdict for
  every non-empty case of the batch (the generator is judged on the batch's stream).
- ``rng_records_algorithm``: recording only: per algorithm, how many output elements equal
  the oracle's conventional values (XLA's THREE_FRY / PHILOX variants), and which of them
  DEFAULT matched (``default_is_philox``, ``default_is_three_fry``, ``other``).

rng (a, b, shape -> result):

- ``rng_uniform_range``: UNIFORM values lie in [a, b) (a <= x < b; NaN is not). False
  alarms: none. Where a >= b (undefined behaviour, masked by the spec's rule) what the
  backend gave is recorded: ``equal_a``, ``between`` (in [min, max] of a and b), ``nan``,
  ``outside``.
- ``rng_uniform_distribution``: for a case of 64 or more values, the Kolmogorov-Smirnov
  distance of (x - a) / (b - a) to U(0, 1) is at most sqrt(ln(2/α)/(2n)) (DKW) plus q, the
  largest step between neighbouring values of the type in [a, b) over (b - a) (1 / (b - a)
  for integers): any rounding of a continuous uniform to the type, or a discrete uniform
  over the type's values, stays within q.
- ``rng_normal_distribution``: for a case of 64 or more values with b > 0, the same for
  (x - a) / b against N(0, 1), q = φ(0)·2·spacing / b (spacing of the type at |a| + 8b);
  every value finite. b = 0: every value equals a within one spacing of a.
- ``rng_records_repeatability``: recording only: whether running the same executable again
  gives the same values (``repeats`` / ``differs``).

rng_bernoulli (XLA's RngBernoulli, 000: mean -> ui32, B(1, mean)):

- ``rng_bernoulli_values``: every element is 0 or 1, all 0 for mean 0 and all 1 for
  mean 1. False alarms: none. Where the mean is no probability (outside [0, 1], NaN:
  masked) what the backend gave is recorded: ``all_zero``, ``all_one``, ``mixed``,
  ``other``.
- ``rng_bernoulli_mean``: for 0 < mean < 1 and a case of 64 or more elements, the
  number of ones k is within the exact binomial tails of B(n, p') at alpha/2 each side,
  for p' within 2^-23 of mean (a uniform on f32's grid in [0, 1) compared with mean, the
  canonical program, is B(1, p') with |p' - mean| below it): a B(1, mean) sample fails
  with probability at most α.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from conformance.checking.compare import STATISTICS_PREFIX
from conformance.core.types import element_type
from conformance.checking.verdicts import Judgement, property_check

__all__ = ["CHAIN", "bit_patterns", "uniform_bits_test", "ks_uniform", "ks_normal"]

#: how many times rng_states_do_not_repeat feeds output_state back
CHAIN = 16
#: at most this many elements enter the pooled bit statistics
POOL_LIMIT = 1 << 20
#: the largest statistic / threshold ratio recorded (a NaN or infinite value's is infinite)
WORST_CAP = 1e6


def _alpha(j: Judgement) -> float:
    return float(j.accuracy.options.get("alpha", 1e-6))


def _case_bits(x: np.ndarray, batch: int) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(np.uint8).reshape(batch, -1) if x.size else np.zeros((batch, 0), np.uint8)


def _same_bits(a, b, batch: int) -> np.ndarray:
    ok = np.ones(batch, bool)
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return np.zeros(batch, bool)
        if x.size:
            ok &= (_case_bits(x, batch) == _case_bits(y, batch)).all(axis=1)
    return ok


def bit_patterns(x: np.ndarray) -> tuple[np.ndarray, int]:
    """The elements of ``x`` as uint64 bit patterns and their width w (4 for si4/ui4 and
    f4E2M1FN, 6 for the f6 formats)."""
    x = np.asarray(x)
    et = element_type(x.dtype)
    w = et.bits
    if w < 8 and et.is_float:
        # f4E2M1FN, f6E2M3FN, f6E3M2FN: the encoding, stored in the low bits of a byte
        # (their values as integers would be 0..6, 0..28 and say nothing of the bits)
        raw = np.ascontiguousarray(x).view(np.uint8).astype(np.uint64) & \
            np.uint64((1 << w) - 1)
        return raw.reshape(-1), w
    if w < 8:
        raw = np.asarray(x).astype(np.int16).astype(np.uint64) & np.uint64((1 << w) - 1)
        return raw.reshape(-1), w
    u = np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))
    return u.reshape(-1).astype(np.uint64), w


def _nonempty(j: Judgement) -> np.ndarray:
    out = np.asarray(j.actual[-1])
    return np.full(j.batch, out.size > 0, bool)


# ---------------------------------------------------------------------------
# rng_bit_generator
# ---------------------------------------------------------------------------

@property_check("rng_deterministic_across_compiles")
def deterministic_across_compiles(j: Judgement) -> np.ndarray:
    if j.run_fresh is None:
        return np.ones(j.batch, bool)
    again = j.run_fresh(list(j.inputs))
    return _same_bits(j.actual, again, j.batch)


@property_check("rng_state_determines_output")
def state_determines_output(j: Judgement) -> np.ndarray:
    ok = np.ones(j.batch, bool)
    states = _case_bits(np.asarray(j.inputs[0]), j.batch)
    first: dict[bytes, int] = {}
    for c in range(j.batch):
        key = states[c].tobytes()
        if key not in first:
            first[key] = c
            continue
        f = first[key]
        for a in j.actual:
            a = np.asarray(a)
            if a.size and not np.array_equal(_case_bits(a, j.batch)[c],
                                             _case_bits(a, j.batch)[f]):
                ok[c] = ok[f] = False
    return ok


@property_check("rng_distinct_states_distinct_outputs")
def distinct_states_distinct_outputs(j: Judgement) -> np.ndarray:
    ok = np.ones(j.batch, bool)
    out = np.asarray(j.actual[-1])
    if not out.size or element_type(out.dtype).bits * (out.size // j.batch) < 64:
        return ok           # too few bits: distinct states may give equal outputs
    states = _case_bits(np.asarray(j.inputs[0]), j.batch)
    outs = _case_bits(out, j.batch)
    by_output: dict[bytes, tuple[bytes, int]] = {}
    for c in range(j.batch):
        key, state = outs[c].tobytes(), states[c].tobytes()
        if key in by_output and by_output[key][0] != state:
            ok[c] = ok[by_output[key][1]] = False
        by_output.setdefault(key, (state, c))
    return ok


@property_check("rng_state_advances")
def state_advances(j: Judgement):
    init = _case_bits(np.asarray(j.inputs[0]), j.batch)
    new = np.asarray(j.actual[0])
    if new.shape != np.asarray(j.inputs[0]).shape:
        return np.zeros(j.batch, bool)
    moved = (_case_bits(new, j.batch) != init).any(axis=1)
    nonempty = _nonempty(j)
    records = {}
    if not nonempty.all():
        empty = ~nonempty
        records["rng_zero_sized_output_state"] = {
            "elements": int(empty.sum()), "conventional": int((empty & ~moved).sum()),
            "alternatives": {k: v for k, v in (("unchanged", int((empty & ~moved).sum())),
                                               ("advanced", int((empty & moved).sum()))) if v}}
    return moved | ~nonempty, records


def _chain(j: Judgement) -> list[list[np.ndarray]] | None:
    """[(output_state, output) of step k] for k = 0 (the case itself) .. CHAIN, each step
    the same executable on the previous step's output_state; cached on the judgement."""
    cached = j.memo.get("rng_chain")
    if cached is not None or j.run_on is None:
        return cached
    steps = [[np.asarray(a) for a in j.actual]]
    for _ in range(CHAIN):
        steps.append([np.asarray(a) for a in j.run_on([steps[-1][0]])])
    j.memo["rng_chain"] = steps
    return steps


@property_check("rng_states_do_not_repeat")
def states_do_not_repeat(j: Judgement) -> np.ndarray:
    steps = _chain(j)
    if steps is None:
        return np.ones(j.batch, bool)
    ok = np.ones(j.batch, bool)
    states = [_case_bits(np.asarray(j.inputs[0]), j.batch)] + \
        [_case_bits(s[0], j.batch) for s in steps]
    out0 = np.asarray(steps[0][1])
    wide = out0.size and out0.nbytes // j.batch >= 8 and element_type(out0.dtype).bits * \
        (out0.size // j.batch) >= 64
    outs = [_case_bits(s[1], j.batch) for s in steps] if wide else []
    if not out0.size:
        return ok       # nothing drawn: the state may stay (rng_state_advances records it)
    for c in range(j.batch):
        seen: set[bytes] = set()
        for s in states:
            key = s[c].tobytes()
            if key in seen:
                ok[c] = False
            seen.add(key)
        if outs:
            got = [o[c].tobytes() for o in outs]
            if len(set(got)) != len(got):
                ok[c] = False
    return ok


def uniform_bits_test(values: np.ndarray, alpha: float) -> tuple[bool, dict]:
    """Per-bit balance, symbol chi-square and lag-1 serial correlation of ``values`` (an
    array of one integer or float type; its bit patterns): (passes, statistics). The
    three share ``alpha`` (alpha / 3 each); see the module docstring for the bounds."""
    from scipy.stats import chi2, norm
    # (the first POOL_LIMIT elements converted, not all of them)
    bits, w = bit_patterns(np.asarray(values).reshape(-1)[:POOL_LIMIT])
    n = bits.size
    stats: dict = {"elements": int(n), "width": w}
    if n < 64:
        return True, stats
    a = alpha / 3
    ok = True
    planes = np.ascontiguousarray(bits).view(np.uint8).reshape(n, 8)[:, :max(w // 8, 1)]
    ones = np.unpackbits(planes, axis=1, bitorder="little").sum(axis=0, dtype=np.int64)[:w]
    dev = np.abs(ones - n / 2)
    limit = math.sqrt(n * math.log(2 * w / a) / 2)
    stats["max_bit_deviation"] = float(dev.max() / n)
    stats["tests"] = {"per-bit balance": float(dev.max() / limit)}
    if (dev > limit).any():
        ok = False
        stats["biased_bits"] = [int(p) for p in np.nonzero(dev > limit)[0]]
    sym_bits = min(w, 8)
    # the symbols in stream order: each element's bytes, low byte first (or its 4 bits);
    # bytes stay uint8 (8 MB, not 64 MB of int64 for 2^20 64-bit elements)
    symbols = planes.reshape(-1) if w >= 8 else bits.astype(np.int64)
    bins = 1 << sym_bits
    m = symbols.size
    if m >= 20 * bins:
        counts = np.bincount(symbols, minlength=bins)
        expect = m / bins
        x2 = float(((counts - expect) ** 2 / expect).sum())
        crit = float(chi2.isf(a, bins - 1))
        stats["chi_square"] = [x2, crit]
        stats["tests"][f"{bins}-symbol chi-square"] = x2 / crit
        ok &= x2 <= crit
    if m >= 4096:
        s = symbols.astype(np.float64)
        s0, s1 = s[:-1] - s[:-1].mean(), s[1:] - s[1:].mean()
        del s           # (three arrays of m doubles at a time, not five)
        den = math.sqrt(float((s0 * s0).sum() * (s1 * s1).sum()))
        r = float((s0 * s1).sum() / den) if den else 1.0
        z = abs(r) * math.sqrt(m - 1)
        crit = float(norm.isf(a / 2))
        stats["serial_z"] = [z, crit]
        stats["tests"]["lag-1 serial correlation"] = z / crit
        ok &= z <= crit
    return bool(ok), stats


#: states closer than this in some word may share part of a counter-based stream
STATE_GAP = 1 << 32


def far_apart_states(states: np.ndarray) -> list[int]:
    """The cases (rows of ``states``, uint64 words) whose streams the pooled statistics
    may treat as independent: greedily, each state whose every word differs from that word
    of every state taken by more than ``STATE_GAP`` (mod 2^64). Two states of a
    counter-based generator then share neither key nor counter range: a chain advances a
    counter by far less than 2^32. (States one bit apart, or small counters next to each
    other, would repeat a stream shifted by a few elements and fail the chi-square.)"""
    taken: list[int] = []
    for c in range(states.shape[0]):
        s = states[c].astype(np.uint64)
        ok = True
        for t in taken:
            with np.errstate(over="ignore"):
                d = s - states[t].astype(np.uint64)
            gap = np.minimum(d, (~d) + np.uint64(1))
            if (gap <= np.uint64(STATE_GAP)).any():
                ok = False
                break
        if ok:
            taken.append(c)
    return taken


@property_check("rng_uniform_bits")
def uniform_bits(j: Judgement) -> np.ndarray:
    nonempty = _nonempty(j)
    if not nonempty.any():
        return np.ones(j.batch, bool)
    steps = _chain(j) or [[np.asarray(a) for a in j.actual]]
    apart = far_apart_states(np.asarray(j.inputs[0]).reshape(j.batch, -1))
    pool = np.concatenate([np.asarray(s[-1])[apart].reshape(-1) for s in steps])
    ok, stats = uniform_bits_test(pool, _alpha(j))
    alg = j.sig.attributes.get("rng_algorithm", "DEFAULT")
    records = {f"{STATISTICS_PREFIX}{alg} {name}": {
        "tests": 1, "failed": int(ratio > 1), "samples": stats["elements"], "worst": ratio}
        for name, ratio in stats.get("tests", {}).items()}
    return np.full(j.batch, ok, bool) | ~nonempty, records


@property_check("rng_records_algorithm")
def records_algorithm(j: Judgement):
    from conformance.oracles.rng import bits_for
    alg = j.sig.attributes.get("rng_algorithm", "DEFAULT")
    out = np.asarray(j.actual[-1])
    t = j.sig.result_types[-1]
    states = np.asarray(j.inputs[0])
    if out.size == 0 or out.shape[1:] != t.shape:
        return np.ones(j.batch, bool), {}
    same = {"philox": 0, "three_fry": 0}
    elements = conventional = 0
    for c in range(j.batch):
        a = _case_bits(out[c:c + 1], 1)[0]
        for name, variant in (("philox", "PHILOX"), ("three_fry", "THREE_FRY")):
            if alg not in ("DEFAULT", variant):
                continue
            e = np.asarray(bits_for(variant, states[c], t)[1])
            if np.array_equal(_case_bits(e[None], 1)[0], a):
                same[name] += 1
        e = np.asarray(j.expected[-1])[c]
        elements += int(np.asarray(out[c]).size)
        if e.shape == out[c].shape and e.dtype == out.dtype:
            conventional += int(np.count_nonzero(bit_patterns(e)[0] ==
                                                 bit_patterns(out[c])[0]))
    if alg == "DEFAULT":
        alts = {"default_is_philox": same["philox"], "default_is_three_fry": same["three_fry"],
                "other": j.batch - max(same.values())}
    else:
        key = "philox" if alg == "PHILOX" else "three_fry"
        alts = {f"xla_{key}": same[key], "other": j.batch - same[key]}
    return np.ones(j.batch, bool), {f"rng_bit_generator_{alg}": {
        "elements": elements, "conventional": conventional,
        "alternatives": {k: v for k, v in alts.items() if v}}}


# ---------------------------------------------------------------------------
# rng
# ---------------------------------------------------------------------------

def _undefined(j: Judgement, rule: str) -> np.ndarray:
    m = j.masks.get(rule)
    if m is None:
        return np.zeros(j.batch, bool)
    m = np.asarray(m, bool)
    return m.reshape(j.batch, -1).any(axis=1) if m.size else np.zeros(j.batch, bool)


def _params(j: Judgement):
    a = np.asarray(j.inputs[0]).reshape(j.batch)
    b = np.asarray(j.inputs[1]).reshape(j.batch)
    return a, b


def _spacing(et, v: float) -> float:
    """The gap between neighbouring values of float type ``et`` at magnitude ``v``."""
    fi = ml_dtypes.finfo(et.dtype)
    v = min(abs(float(v)), float(fi.max))
    x = np.asarray(v, np.float64).astype(et.dtype)
    up = (np.asarray(x).view(f"u{et.dtype.itemsize}") + 1).view(et.dtype)
    gap = abs(float(up) - float(x))
    return gap if math.isfinite(gap) else float(fi.max) - float(
        np.nextafter(np.asarray(fi.max, et.dtype), np.asarray(0, et.dtype)))


@property_check("rng_uniform_range")
def uniform_range(j: Judgement):
    if j.sig.attributes.get("rng_distribution") != "UNIFORM":
        return np.ones(j.batch, bool)
    x = np.asarray(j.actual[0])
    a, b = _params(j)
    undefined = _undefined(j, "uniform_empty_interval")
    ok = np.ones(j.batch, bool)
    et = element_type(x.dtype)
    records = {"equal_a": 0, "between": 0, "nan": 0, "outside": 0}
    elements = 0
    checked = [0, 0]        # cases, values
    for c in range(j.batch):
        xc = x[c].reshape(-1)
        if not xc.size:
            continue
        if et.is_float:
            xc, ac, bc = xc.astype(np.float64), float(a[c]), float(b[c])
        else:
            ac, bc = a[c], b[c]
        with np.errstate(invalid="ignore"):
            inside = (xc >= ac) & (xc < bc)
        if not undefined[c]:
            ok[c] = bool(np.all(inside))
            checked[0] += 1
            checked[1] += xc.size
            continue
        elements += xc.size
        nan = np.isnan(xc) if et.is_float else np.zeros(xc.shape, bool)
        eq = (xc == ac) & ~nan
        lo, hi = (ac, bc) if not (bc < ac) else (bc, ac)
        with np.errstate(invalid="ignore"):
            between = (xc >= lo) & (xc <= hi) & ~eq & ~nan
        records["equal_a"] += int(eq.sum())
        records["between"] += int(between.sum())
        records["nan"] += int(nan.sum())
        records["outside"] += int((~eq & ~between & ~nan).sum())
    rec = {}
    if checked[0]:
        rec[f"{STATISTICS_PREFIX}UNIFORM values in [a, b)"] = {
            "tests": checked[0], "failed": int((~ok).sum()), "samples": checked[1],
            "worst": 0.0}
    if elements:
        rec["uniform_empty_interval"] = {"elements": elements, "conventional": records["equal_a"],
                                         "alternatives": {k: v for k, v in records.items() if v}}
    return ok, rec


def _dkw(n: int, alpha: float) -> float:
    return math.sqrt(math.log(2 / alpha) / (2 * n))


def ks_uniform(u: np.ndarray) -> float:
    """sup |F_n - F| of the sample u against U(0, 1)."""
    u = np.sort(np.asarray(u, np.float64))
    n = u.size
    f = np.clip(u, 0, 1)
    i = np.arange(1, n + 1)
    return float(max((i / n - f).max(), (f - (i - 1) / n).max()))


def ks_normal(z: np.ndarray) -> float:
    from scipy.special import ndtr
    z = np.sort(np.asarray(z, np.float64))
    n = z.size
    f = ndtr(z)
    i = np.arange(1, n + 1)
    return float(max((i / n - f).max(), (f - (i - 1) / n).max()))


@property_check("rng_uniform_distribution")
def uniform_distribution(j: Judgement) -> np.ndarray:
    if j.sig.attributes.get("rng_distribution") != "UNIFORM":
        return np.ones(j.batch, bool)
    x = np.asarray(j.actual[0])
    et = element_type(x.dtype)
    a, b = _params(j)
    undefined = _undefined(j, "uniform_empty_interval")
    alpha = _alpha(j)
    ok = np.ones(j.batch, bool)
    st = {"tests": 0, "failed": 0, "samples": 0, "worst": 0.0}
    for c in range(j.batch):
        xc = x[c].reshape(-1)
        n = xc.size
        if n < 64 or undefined[c]:
            continue
        if et.is_float:
            ac, bc = float(a[c]), float(b[c])
            width = bc - ac
            if not math.isfinite(width) or width <= 0:
                continue
            u = (xc.astype(np.float64) - ac) / width
            q = _spacing(et, max(abs(ac), abs(bc))) / width
        else:
            ac, bc = int(a[c]), int(b[c])
            width = bc - ac
            if et.bits < 64:
                u = (xc.astype(np.int64) - ac).astype(np.float64) / width
            else:
                u = (np.array([int(v) for v in xc], dtype=object) - ac).astype(np.float64) / width
            q = 1.0 / width
        if not np.isfinite(u).all():
            ok[c] = False
            _tally(st, n, False, np.inf)
            continue
        ratio = ks_uniform(u) / (_dkw(n, alpha) + q)
        ok[c] = ratio <= 1
        _tally(st, n, ok[c], ratio)
    return ok, ({f"{STATISTICS_PREFIX}UNIFORM Kolmogorov-Smirnov": st} if st["tests"] else {})


def _tally(st: dict, n: int, passed: bool, ratio: float) -> None:
    st["tests"] += 1
    st["failed"] += int(not passed)
    st["samples"] += int(n)
    # (capped at WORST_CAP: a non-finite value gives an infinite statistic)
    st["worst"] = max(st["worst"], min(float(ratio), WORST_CAP))


@property_check("rng_normal_distribution")
def normal_distribution(j: Judgement) -> np.ndarray:
    if j.sig.attributes.get("rng_distribution") != "NORMAL":
        return np.ones(j.batch, bool)
    x = np.asarray(j.actual[0])
    et = element_type(x.dtype)
    a, b = _params(j)
    undefined = _undefined(j, "normal_negative_deviation")
    alpha = _alpha(j)
    ok = np.ones(j.batch, bool)
    st = {"tests": 0, "failed": 0, "samples": 0, "worst": 0.0}
    for c in range(j.batch):
        xc = x[c].reshape(-1).astype(np.float64)
        n = xc.size
        if not n or undefined[c]:
            continue
        ac, bc = float(a[c]), float(b[c])
        if not np.isfinite(xc).all():
            ok[c] = False
            _tally(st, n, False, np.inf)
            continue
        if bc == 0:
            ok[c] = bool(np.all(np.abs(xc - ac) <= _spacing(et, ac)))
            continue
        if n < 64:
            continue
        q = 0.3989 * 2 * _spacing(et, abs(ac) + 8 * bc) / bc
        ratio = ks_normal((xc - ac) / bc) / (_dkw(n, alpha) + q)
        ok[c] = ratio <= 1
        _tally(st, n, ok[c], ratio)
    return ok, ({f"{STATISTICS_PREFIX}NORMAL Kolmogorov-Smirnov": st} if st["tests"] else {})


@property_check("rng_records_repeatability")
def records_repeatability(j: Judgement):
    if j.rerun is None:
        return np.ones(j.batch, bool), {}
    same = _same_bits(j.actual, j.rerun(), j.batch)
    return np.ones(j.batch, bool), {"rng_repeatable": {
        "elements": int(j.batch), "conventional": int(same.sum()),
        "alternatives": {k: v for k, v in (("repeats", int(same.sum())),
                                           ("differs", int((~same).sum()))) if v}}}


# ---------------------------------------------------------------------------
# rng_bernoulli (XLA's RngBernoulli: mean -> ui32 result, B(1, mean))
# ---------------------------------------------------------------------------

#: the allowance of rng_bernoulli_mean for a uniform drawn on a grid: |P(u < p) - p| is
#: at most the grid's spacing, 2^-24 for f32 in [0.5, 1) and less below (f32's machine
#: epsilon, twice that, leaves room for a grid of 2^23 values)
BERNOULLI_GRID = 2.0 ** -23


def _bernoulli_means(j: Judgement) -> np.ndarray:
    return np.asarray(j.inputs[0], np.float64).reshape(j.batch)


@property_check("rng_bernoulli_values")
def bernoulli_values(j: Judgement):
    """Every element 0 or 1; all 0 for mean 0 and all 1 for mean 1 (B(1, 0) and B(1, 1)
    are certain). Where the mean is no probability (masked rule
    mean_outside_unit_interval) what the backend gave is recorded instead."""
    x = np.asarray(j.actual[0])
    means = _bernoulli_means(j)
    undefined = _undefined(j, "mean_outside_unit_interval")
    ok = np.ones(j.batch, bool)
    records = {"all_zero": 0, "all_one": 0, "mixed": 0, "other": 0}
    elements = 0
    for c in range(j.batch):
        xc = x[c].reshape(-1).astype(np.int64)
        if not xc.size:
            continue
        binary = bool(np.all((xc == 0) | (xc == 1)))
        if undefined[c]:
            elements += xc.size
            kind = ("other" if not binary else "all_zero" if not xc.any()
                    else "all_one" if xc.all() else "mixed")
            records[kind] += int(xc.size)
            continue
        ok[c] = binary and (means[c] != 0 or not xc.any()) and (means[c] != 1 or xc.all())
    rec = {}
    if elements:
        rec["mean_outside_unit_interval"] = {
            "elements": elements, "conventional": records["all_zero"] + records["all_one"],
            "alternatives": {k: v for k, v in records.items() if v}}
    return ok, rec


@property_check("rng_bernoulli_mean")
def bernoulli_mean(j: Judgement):
    """For 0 < mean < 1 and 64 or more elements, the number of ones k against B(n, p'),
    for every p' within BERNOULLI_GRID of mean (a uniform on f32's grid in [0, 1)
    compared with mean): fails where P(X <= k) < alpha/2 at the largest p' or
    P(X >= k) < alpha/2 at the smallest (the exact binomial tails: a B(1, mean) sample
    fails with probability at most alpha). The recorded ratio is
    log(smaller tail) / log(alpha/2): above 1 fails."""
    from scipy.stats import binom
    x = np.asarray(j.actual[0])
    means = _bernoulli_means(j)
    undefined = _undefined(j, "mean_outside_unit_interval")
    alpha = _alpha(j)
    ok = np.ones(j.batch, bool)
    st = {"tests": 0, "failed": 0, "samples": 0, "worst": 0.0}
    for c in range(j.batch):
        xc = x[c].reshape(-1)
        n = xc.size
        p = means[c]
        if n < 64 or undefined[c] or not 0 < p < 1:
            continue
        k = int(np.count_nonzero(xc.astype(np.int64) == 1))
        low = float(binom.cdf(k, n, min(p + BERNOULLI_GRID, 1.0)))
        high = float(binom.sf(k - 1, n, max(p - BERNOULLI_GRID, 0.0)))
        tail = min(low, high)
        ratio = math.log(tail) / math.log(alpha / 2) if tail > 0 else math.inf
        ok[c] = tail >= alpha / 2
        _tally(st, n, ok[c], max(ratio, 0.0))
    return ok, ({f"{STATISTICS_PREFIX}Bernoulli mean (binomial tails)": st}
                if st["tests"] else {})
