"""Backends with planted divergences, for the tests (loaded as planted:Class; tests/
is on sys.path under pytest, and subprocesses get it through PYTHONPATH).

Each implements only ``compile`` (the vendor path) on top of the oracle, so the base
class supplies run() and the batched path.
"""
import numpy as np

from conformance import oracles
from conformance.backends import Backend, Unsupported
from conformance.specs.validity import violations


class OracleBackend(Backend):
    name = "oracle-copy"

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        return lambda inputs: list(oracles.evaluate(sig.op, inputs, sig.attributes,
                                                    result_types=sig.result_types,
                                                    regions=sig.regions))


def first_case(values, types):
    """Batched values (a leading case axis of one) as one case's results of ``types``."""
    return [np.asarray(v[0]).astype(t.element_type.dtype).reshape(t.shape)
            for v, t in zip(values, types)]


def verdict_counts(backend, sig, key, batches=4):
    """Outcome class -> elements over ``batches`` value batches of the default plan
    (seed 0) of ``sig`` with type key ``key``, judged on ``backend`` alone."""
    from conformance.checking.checker import SignatureCheck
    from conformance.checking.plan import batch_for
    from conformance.specs import load_spec
    spec = load_spec(sig.op)
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    counts: dict[str, int] = {}
    for b in range(batches):
        v = check.run_batch(b, batch_for(0, "default", spec, key, 0, b, sig)
                            ).results[backend.name].verdict
        for cls, n in v.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


class _ChangesF32(OracleBackend):
    """The oracle, with the f32 results of one op (``op``) changed by ``change``."""

    op = "add"

    def change(self, out, inputs):
        raise NotImplementedError

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != self.op or sig.input_types[0].element_type.name != "f32":
            return inner

        def run(inputs):
            (out,) = inner(inputs)
            with np.errstate(all="ignore"):
                return [np.asarray(self.change(np.asarray(out, np.float32), inputs),
                                   np.float32)]
        return run


class PlantedAddF32(_ChangesF32):
    """The oracle, except that f32 add results are one ulp high where lhs > 1 (and the
    result is normal)."""

    name = "planted"

    def change(self, out, inputs):
        # (normal results only: a subnormal 1 ulp above 0 would read as a flush)
        bump = ((np.asarray(inputs[0]) > 1) & np.isfinite(out)
                & (np.abs(out) >= np.finfo(np.float32).tiny))
        return np.where(bump, np.nextafter(out, np.float32(np.inf)), out)


class NoSine(OracleBackend):
    name = "nosine"

    def compile(self, sig):
        if sig.op == "sine":
            raise Unsupported("sine is not implemented by this backend")
        return super().compile(sig)


class AcceptsEverything(OracleBackend):
    """Runs invalid programs instead of rejecting them."""

    name = "lenient"

    def compile(self, sig):
        if sig.invalid:
            return lambda inputs: [np.zeros(t.shape, t.element_type.dtype)
                                   for t in sig.result_types]
        return super().compile(sig)


class CrashesOnNegativeZero(OracleBackend):
    """Kills its own process when an f32 negate sees -0.0 (a stand-in for a segfault)."""

    name = "crashy"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "negate" or sig.input_types[0].element_type.name != "f32":
            return inner

        def run(inputs):
            x = np.asarray(inputs[0])
            if ((x == 0) & np.signbit(x)).any():
                import os
                os.abort()
            return inner(inputs)
        return run


class LoudCrashOnNegativeZero(CrashesOnNegativeZero):
    """As CrashesOnNegativeZero, and says so on stderr first (a native crash's last
    words)."""

    name = "loud-crashy"
    isolate = True

    def compile(self, sig):
        inner = super().compile(sig)

        def run(inputs):
            x = np.asarray(inputs[0])
            if sig.op == "negate" and ((x == 0) & np.signbit(x)).any():
                import os
                os.write(2, b"planted: fatal error on -0.0\n")
            return inner(inputs)
        return run


class ChattyOracle(OracleBackend):
    """The oracle, in a child process that writes a warning to stderr and never
    crashes."""

    name = "chatty"
    isolate = True

    def compile(self, sig):
        import os
        os.write(2, b"planted: a harmless warning\n")
        return super().compile(sig)


class HangsOnNaN(OracleBackend):
    """Never returns when an f32 abs sees a NaN."""

    name = "hangs"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "abs" or sig.input_types[0].element_type.name != "f32":
            return inner

        def run(inputs):
            if np.isnan(np.asarray(inputs[0])).any():
                import time
                time.sleep(3600)
            return inner(inputs)
        return run


class HangsOnAbs(OracleBackend):
    """Never returns from any program of abs, valid or invalid (a spec example too);
    each hang is a line in the file $PLANTED_HANG_LOG, where it is set (the child
    process of an isolated backend writes it: the test counts timeouts, not seconds)."""

    name = "hangs-abs"

    def compile(self, sig):
        if sig.op != "abs":
            return super().compile(sig)

        def run(inputs):
            import os
            import time
            log = os.environ.get("PLANTED_HANG_LOG")
            if log:
                with open(log, "a") as f:
                    f.write(f"{sig.key()}\n")
            time.sleep(3600)
        return run


class TimesOutOnReduce(OracleBackend):
    """Every program of reduce (valid or invalid, a spec example, a probe) times out at
    once, as an isolated backend that hangs does (``BackendTimeout``) without the wait,
    when it runs (``when = "compile"``: when it compiles); ``timeouts`` counts them."""

    name = "times-out"
    isolate = False
    when = "run"
    timeouts = 0

    def _timeout(self, sig):
        from conformance.checking.isolation import BackendTimeout
        type(self).timeouts += 1
        raise BackendTimeout(f"no answer after 1 s while running {sig.op}; "
                             "the backend's process was killed")

    def compile(self, sig):
        if sig.op != "reduce":
            return super().compile(sig)
        if self.when == "compile":
            self._timeout(sig)
        return lambda inputs: self._timeout(sig)


class TimesOutCompilingReduce(TimesOutOnReduce):
    name = "times-out-compiling"
    when = "compile"
    timeouts = 0


class TimesOutPackingReduce(TimesOutOnReduce):
    """Packs signatures (conformance.checking.packing), and a pack of reduce times out."""

    name = "times-out-packing"
    timeouts = 0

    def compile_pack(self, signatures):
        return lambda batches: self._timeout(signatures[0])


class NegatesAddF32(_ChangesF32):
    """f32 add returns -(a + b): every nonzero result has the wrong sign."""

    name = "negates-add"

    def change(self, out, inputs):
        return -out


class DoublesAddF32(_ChangesF32):
    """f32 add returns 2·(a + b): wrong value, right sign."""

    name = "doubles-add"

    def change(self, out, inputs):
        return out * np.float32(2)


class TenPercentAddF32(_ChangesF32):
    """f32 add is 10% high: far beyond any evaluation-order error."""

    name = "ten-percent-add"

    def change(self, out, inputs):
        return out * np.float32(1.1)


class NondeterministicAddF32(_ChangesF32):
    """f32 add adds one ulp on every third call (a race in a real backend)."""

    name = "nondeterministic-add"
    calls = 0

    def change(self, out, inputs):
        type(self).calls += 1
        if type(self).calls % 3:
            return out
        return np.where(np.isfinite(out), np.nextafter(out, np.float32(np.inf)), out)


class OneUlpTowardZeroAddF32(_ChangesF32):
    """f32 add rounds toward zero where round-to-nearest was due: one ulp at most, never
    an overflow (what a backend with another summation order may give)."""

    name = "toward-zero-add"

    def change(self, out, inputs):
        return np.where(np.isfinite(out) & (out != 0),
                        np.nextafter(out, np.float32(0)), out)


class SineUlpsOff(_ChangesF32):
    """f32 sine results are off by min(|x|, 1000) ULPs where |x| > 8 (a range reduction
    that loses bits as the argument grows): the worst case is the largest argument."""

    name = "sine-ulps"
    op = "sine"

    def change(self, out, inputs):
        x = np.asarray(inputs[0], np.float32)
        k = np.where(np.isfinite(x) & (np.abs(x) > 8) & np.isfinite(out) & (out != 0),
                     np.minimum(np.abs(x), 1000), 0).astype(np.int32)
        return (out.view(np.int32) + k).view(np.float32)


class MultiLineError(OracleBackend):
    """f32 add fails to compile with a message whose first line says nothing (as
    pybind11's "incompatible function arguments" errors do)."""

    name = "multi-line-error"
    isolate = False

    def compile(self, sig):
        if sig.op == "add" and sig.input_types[0].element_type.name == "f32":
            raise TypeError("make_buffer(): incompatible function arguments. The following "
                            "argument types are supported:\n    1. (x: numpy.ndarray) -> "
                            "Buffer\n\nInvoked with: <bfloat16 scalar>")
        return super().compile(sig)


def one_ulp_up(out: np.ndarray) -> np.ndarray:
    """Every finite normal value of ``out`` (below the type's largest) one ulp further
    from zero, any float type (fp8 and bf16 included: the bits plus one); subnormals,
    zeros, infinities and NaN unchanged (a subnormal moved would read as a flush)."""
    import ml_dtypes
    out = np.asarray(out)
    bits = out.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[out.dtype.itemsize])
    fi = ml_dtypes.finfo(out.dtype)
    with np.errstate(invalid="ignore"):
        w = np.abs(out.astype(np.float64))
    ok = np.isfinite(w) & (w >= float(fi.smallest_normal)) & (w < float(fi.max))
    return np.where(ok, bits + bits.dtype.type(1), bits).view(out.dtype)


def _wider_exponent(sig) -> int | None:
    """The stored mantissa bits of a reduce_precision operand whose ``exponent_bits`` is
    wider than its type's (the value route of oracles/conversion.py), else None."""
    if sig.op != "reduce_precision":
        return None
    import ml_dtypes
    t = sig.input_types[0].element_type
    fi = ml_dtypes.finfo(t.dtype)
    e_src = t.bits - 1 - int(fi.nmant)
    ieee = t.has_sign and t.has_negative_zero and 8 <= t.bits < 64
    if not ieee or int(sig.attributes["exponent_bits"]) <= e_src:
        return None
    return int(fi.nmant)


class ReducePrecisionRoundsSubnormalBits(OracleBackend):
    """XLA's old reading of reduce_precision with an exponent wider than the operand's:
    it rounds the *stored* mantissa bits of a subnormal to ``mantissa_bits`` as if the
    subnormal's quantum were the normal one's (f8E4M3FN 0x03 = 1.5 * 2^-8 with
    exponent_bits 11, mantissa_bits 1 gives 0x04), where the other type holds the value
    as a normal number and the spec's convert-and-back keeps it (issue 32 item 7)."""

    name = "rp-subnormal-bits"

    def compile(self, sig):
        inner = super().compile(sig)
        m_src = _wider_exponent(sig)
        m = int(sig.attributes.get("mantissa_bits", 0)) if m_src is not None else 0
        if m_src is None or m >= m_src:
            return inner
        from conformance.core.literals import bit_patterns, from_bit_patterns
        t = sig.input_types[0].element_type
        shift = m_src - m

        def run(inputs):
            (out,) = inner(inputs)
            x = np.asarray(inputs[0])
            bits = bit_patterns(x)
            exp_field = (bits >> np.uint64(m_src)) & np.uint64((1 << (t.bits - 1 - m_src)) - 1)
            last = (bits >> np.uint64(shift)) & np.uint64(1)
            rounded = (bits + np.uint64((1 << (shift - 1)) - 1) + last) \
                & ~np.uint64((1 << shift) - 1)
            subnormal = (exp_field == 0) & (x != 0)
            old = from_bit_patterns(rounded, t).reshape(x.shape)
            return [np.where(subnormal, old, out).astype(t.dtype)]
        return run


class ReducePrecisionRoundsValues(OracleBackend):
    """reduce_precision with an exponent wider than the operand's computed another way
    than the oracle: the value in float64 (exact for every narrower type), rounded to
    ``mantissa_bits`` with np.frexp and np.rint (ties to even), and converted back with
    ml_dtypes (exact: the result is a value of the operand's type, or past its largest,
    where the conversion gives what the type makes of an overflow). Inf and NaN are the
    oracle's. The spec allows nothing else here, so this must pass."""

    name = "rp-values"

    def compile(self, sig):
        inner = super().compile(sig)
        if _wider_exponent(sig) is None:
            return inner
        t = sig.input_types[0].element_type
        m = int(sig.attributes["mantissa_bits"])

        def run(inputs):
            (out,) = inner(inputs)
            x = np.asarray(inputs[0])
            v = x.astype(np.float64)
            finite = np.isfinite(v)
            mant, ex = np.frexp(np.where(finite, v, 0.0))     # v = mant * 2**ex, |mant| in [0.5, 1)
            r = np.ldexp(np.rint(np.ldexp(mant, m + 1)), ex - m - 1)
            with np.errstate(over="ignore", invalid="ignore"):
                mine = r.astype(t.dtype)
            return [np.where(finite, mine, out).astype(t.dtype).reshape(x.shape)]
        return run


# ---------------------------------------------------------------------------
# Formats without NaN (f4E2M1FN, f6E2M3FN, f6E3M2FN): an element-wise result that is
# not a real number (rsqrt(-2), 0/0, power(-6, -1.5)) has no value there (issue 30)
# ---------------------------------------------------------------------------

NO_NAN_FORMATS = ("f4E2M1FN", "f6E2M3FN", "f6E3M2FN")


def _f32_path(sig, inputs):
    """XLA's path for the narrow formats: the op computed in f32 (every input value
    held exactly), its results not yet converted down."""
    from conformance.core.types import TensorType, element_type
    f32 = element_type("f32")
    xs = [np.asarray(x).astype(np.float32) if element_type(np.asarray(x).dtype).is_float
          else np.asarray(x) for x in inputs]
    return oracles.evaluate(sig.op, xs, sig.attributes, regions=sig.regions,
                            result_types=[TensorType(t.shape, f32) for t in sig.result_types])


def _without_nan(sig) -> bool:
    return (sig.op != "convert" and len(sig.result_types) == 1
            and sig.result_types[0].element_type.name in NO_NAN_FORMATS)


class NoNanFormatsLargestForNaN(OracleBackend):
    """Computes in f32 and converts down saturating, as an MX unit may: a NaN (the op's
    result has no real value) becomes the format's most negative value, -6 in f4E2M1FN,
    where the oracle (ml_dtypes) has a zero. The spec gives these types no value for it
    (TBD #180, as convert's NaN), so this must pass."""

    name = "no-nan-largest"

    def compile(self, sig):
        inner = super().compile(sig)
        if not _without_nan(sig):
            return inner
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            (out,) = inner(inputs)
            (wide,) = _f32_path(sig, inputs)
            lowest = np.array(-float(__import__("ml_dtypes").finfo(dtype).max), np.float64)
            return [np.where(np.isnan(wide), lowest.astype(dtype), out).astype(dtype)]
        return run


class NoNanFormatsPackedNeighbour(OracleBackend):
    """f4E2M1FN packs two elements in a byte; the kernel writes its stand-in for a NaN
    result (+0) as a whole byte, so the element sharing the byte (a real result) is
    zeroed too. The NaN element may be anything; its neighbour must fail."""

    name = "no-nan-packed-neighbour"

    def compile(self, sig):
        inner = super().compile(sig)
        if not _without_nan(sig) or sig.result_types[0].element_type.name != "f4E2M1FN":
            return inner
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            (out,) = inner(inputs)
            (wide,) = _f32_path(sig, inputs)
            nan = np.isnan(wide).reshape(-1)
            pair = nan.copy()
            pair[: len(nan) // 2 * 2] |= nan[: len(nan) // 2 * 2].reshape(-1, 2)[:, ::-1] \
                .reshape(-1)                      # the other nibble of each byte
            flat = np.array(out, copy=True).reshape(-1)
            flat[pair] = np.zeros((), dtype)
            return [flat.reshape(out.shape)]
        return run


class NoNanFormatsPowerByExpLog(OracleBackend):
    """power in the formats without NaN computed as exp(rhs * log(lhs)): every negative
    base has no real logarithm, so power(-2, 2) = 4 comes out as the NaN stand-in (+0)
    as power(-6, -1.5) does. The first is a real number the spec fixes: must fail."""

    name = "no-nan-power-exp-log"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "power" or not _without_nan(sig):
            return inner
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            (out,) = inner(inputs)
            a, b = (np.asarray(x).astype(np.float64) for x in inputs)
            with np.errstate(all="ignore"):
                r = np.exp(b * np.log(a))
            return [np.where(np.isnan(r), np.zeros((), dtype), out).astype(dtype)]
        return run


# Promoted scatter and select_and_scatter computations (stablehlo-spec-2026-08.md
# "### scatter" C23/C25, "### select_and_scatter" C10/C12)
# ---------------------------------------------------------------------------

def _in_operand_type(sig):
    """``sig`` with its (last) region retyped to the operands' types and its results
    of those types: the computation the promotion asks for, run too narrow."""
    from conformance.core.case import Signature
    from conformance.specs.regions import retyped
    n = len(sig.result_types)
    ets = [t.element_type.name for t in sig.input_types[:n]]
    positions = {**dict(enumerate(ets)), **{n + k: t for k, t in enumerate(ets)}}
    regs = list(sig.regions)
    regs[-1] = retyped(regs[-1], positions=positions)
    results = [f"tensor<{'x'.join(map(str, t.shape)) + 'x' if t.shape else ''}{e}>"
               for t, e in zip(sig.result_types, ets)]
    return Signature.make(sig.op, sig.input_types, results, sig.attributes,
                          regions=tuple(regs))


class AccumulatesInOperandType(OracleBackend):
    """The realistic bug of a promoted scatter or select_and_scatter: the computation
    run at the operands' type (every repeated update or scattered source value rounded
    or wrapped to it) and only the results converted to the computation's type Ei."""

    name = "accumulates-in-operand-type"

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        narrow = _in_operand_type(sig)

        def run(inputs):
            out = oracles.evaluate(narrow.op, inputs, narrow.attributes,
                                   result_types=narrow.result_types, regions=narrow.regions)
            return [np.asarray(o).astype(t.element_type.dtype)
                    for o, t in zip(out, sig.result_types)]
        return run


class ScatterReversedSchedule(OracleBackend):
    """scatter with the updates applied in another ``schedule`` (the spec's
    implementation-defined permutation of the update index space): the scatter dimensions
    of the updates that are not batching dimensions reversed, with the matching dimensions
    of the scatter indices, so that each element's repeated updates meet it in reverse
    order; in the computation's types, as the spec says. Every other op: the oracle."""

    name = "scatter-reversed-schedule"

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        base = super().compile(sig)
        if sig.op != "scatter":
            return base
        n = len(sig.result_types)
        a = sig.attributes
        ivd, uwd = a["index_vector_dim"], list(a["update_window_dims"])
        sibd = list(a.get("scatter_indices_batching_dims", ()))
        urank = sig.input_types[n + 1].rank
        scatter_dims = [d for d in range(urank) if d not in uwd]
        index_dims = [d for d in range(sig.input_types[n].rank) if d != ivd]
        flips = [(i, u) for i, u in zip(index_dims, scatter_dims) if i not in sibd]

        def run(inputs):
            inputs = [np.asarray(x) for x in inputs]
            idx, ups = inputs[n], inputs[n + 1:]
            for i, u in flips:
                idx = np.flip(idx, axis=i)
                ups = [np.flip(x, axis=u) for x in ups]
            return base(inputs[:n] + [idx.copy()] + [x.copy() for x in ups])
        return run


# Formats without infinity or NaN (f4E2M1FN, f6E2M3FN, f6E3M2FN; issue 30,
# tests/test_no_inf_formats.py): an infinite exact result (a pole, or an infinity
# converted to them) has no value there (no_infinity_without_inf,
# infinity_to_format_without_inf); a finite result beyond the largest value rounds to it.

def _without_inf(sig) -> bool:
    et = sig.result_types[0].element_type if len(sig.result_types) == 1 else None
    return et is not None and et.name in NO_NAN_FORMATS


def _exact_wide(sig, inputs):
    """The op's value at f64 (every finite value of these formats, and every operand of a
    convert, held exactly; a pole's infinity kept)."""
    from conformance.core.types import TensorType, element_type
    f64 = element_type("f64")
    xs = [np.asarray(x).astype(np.float64) if element_type(np.asarray(x).dtype).is_float
          else np.asarray(x) for x in inputs]
    with np.errstate(all="ignore"):
        (out,) = oracles.evaluate(sig.op, xs, sig.attributes, regions=sig.regions,
                                  result_types=[TensorType(t.shape, f64)
                                                for t in sig.result_types])
    return np.asarray(out)


class NoInfFormatsZeroForInfinity(OracleBackend):
    """The reference interpreter's choice: an infinite result (1/0, log(0), an f32
    infinity converted) becomes +0 in f4E2M1FN and the f6 formats, where the oracle
    saturates to the largest value; finite overflows saturate. The spec gives these
    types no value for an infinity (TBD #180): must pass, recorded."""

    name = "no-inf-zero"

    def compile(self, sig):
        inner = super().compile(sig)
        if not _without_inf(sig):
            return inner
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            (out,) = inner(inputs)
            wide = _exact_wide(sig, inputs)
            return [np.where(np.isinf(wide), np.zeros((), dtype), out).astype(dtype)]
        return run


class NoInfFormatsOverflowToZero(OracleBackend):
    """Converts its wide result down without saturating (APFloat's IEEE conversion) and
    then maps the overflow's infinity to 0 as above: exp(3) = 20.1, 4 * 4 = 16 and
    convert(100.0) give 0 in f4E2M1FN. Those are finite values whose only neighbour is
    the largest value: must fail (the poles beside them pass)."""

    name = "no-inf-overflow-zero"

    def compile(self, sig):
        inner = super().compile(sig)
        if not _without_inf(sig):
            return inner
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            import ml_dtypes
            (out,) = inner(inputs)
            wide = _exact_wide(sig, inputs)
            big = float(ml_dtypes.finfo(dtype).max)
            top = np.array([big], dtype).view(np.uint8)
            below = float((top - np.uint8(1)).view(dtype)[0])   # the largest's neighbour
            overflow = np.abs(wide) >= big + (big - below) / 2
            return [np.where(overflow, np.zeros((), dtype), out).astype(dtype)]
        return run


# f8E8M0FNU (no zero, no sign; tests/test_no_zero_formats.py): an exact result that is
# zero or negative rounds to either neighbour, the oracle's NaN or 2^-127
# (nonpositive_without_zero).

def _e8m0(sig) -> bool:
    return len(sig.result_types) == 1 and \
        sig.result_types[0].element_type.name == "f8E8M0FNU"


class E8M0SmallestForNonpositive(OracleBackend):
    """Rounds a zero or negative result up to the smallest value 2^-127 (0x00), as the
    reference interpreter does for round(0.25); the oracle has its NaN. Must pass."""

    name = "e8m0-smallest"

    def compile(self, sig):
        inner = super().compile(sig)
        if not _e8m0(sig):
            return inner
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            (out,) = inner(inputs)
            wide = _exact_wide(sig, inputs)
            smallest = np.zeros((), np.uint8).view(dtype)
            return [np.where(wide <= 0, smallest, out).astype(dtype)]
        return run


class E8M0DropsSign(OracleBackend):
    """Rounds the magnitude of a negative result (a sign bit it has nowhere to put is
    dropped): 1 - 2 gives 1, negate(2) gives 2. Not a neighbour: must fail."""

    name = "e8m0-drops-sign"

    def compile(self, sig):
        inner = super().compile(sig)
        if not _e8m0(sig):
            return inner
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            (out,) = inner(inputs)
            wide = _exact_wide(sig, inputs)
            return [np.where(wide < 0, np.abs(wide).astype(dtype), out).astype(dtype)]
        return run
