"""Planted backends for the suite's own mutation score (issue 12, point 5).

Each mutant is the suite's numpy oracle backend (``NumpyBackend``) with ONE realistic
bug of the kind a real compiler ships: a rounding tie broken the wrong way, a lost
zero sign, a NaN not propagated, an index clamped against the wrong bound, a comparator
lowered with the wrong compare, a precision lost on the way. ``bench/bench_mutation.py``
runs the suite on each mutant's ops and counts the mutant *killed* when the gate fails
(``conformance run`` exits 1).

A mutant class declares

- ``ops``: the ops it changes (the benchmark runs only these);
- ``family``: the family of the bug (for the report);
- ``equivalent``: None, or the reason the spec allows the behaviour (an equivalent
  mutant cannot be killed and is left out of the score, but listed);
- ``listed_in``: the shipped expectations file that lists this very bug for jax (a
  mutant that reproduces a known jax divergence passes under that file by design);
- ``witness()``: one hand-picked case on which it differs from the oracle
  (tests/test_mutants.py checks that it does, so that a survivor is the suite's
  weakness, not a no-op mutant);
- ``mutate(sig, inputs, outputs, oracle)``: the bug. ``inputs`` and ``outputs`` are the
  oracle's arrays, with a leading batch axis when the runner runs a batch; ``oracle``
  evaluates the same signature on other inputs in the same mode. Element-wise mutants
  (``elementwise = True``) get their inputs broadcast to the result's shape and work
  in both modes; the others (``batched = False``) are run one case at a time.

Every mutant is named ``jax`` and describes itself as jax on CPU, because
expectations files match by backend name and platform: the benchmark gates the same
results once without expectations and once with the shipped ``jax-cpu`` file, which
shows the divergences that file's entries hide. ``isolate = False`` keeps them in the
runner's process (they abort on nothing), so runs stay fast.

``STATS`` counts, per mutant class and in this process, how many result elements the
bug actually changed (bit for bit) in the cases the suite ran: a survivor with no
change means the suite never met the trigger; one with changes means the suite met
it and judged the change allowed (masked, within a tolerance, waived).
"""
from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from typing import Any, Callable, Sequence

import numpy as np

from conformance import oracles
from conformance.backends import Backend
from conformance.backends.numpy_backend import NumpyBackend
from conformance.core.case import Case, Signature
from conformance.core.numerics import round_to, to_wide
from conformance.core.types import (ElementType, TensorType, element_type, flatten,
                                    unflatten)
from conformance.oracles import broadcast_ready
from conformance.oracles._kernels import U64, sign_extend, unsigned_bits, wrap

#: per mutant class name: calls (executions of an affected signature), changed_calls
#: (those where the bug changed at least one result bit), changed_elements, and
#: signatures (signature key -> result elements changed there).
STATS: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "changed_calls": 0,
                                                       "changed_elements": 0})

Oracle = Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]]


def _bits_differ(a: np.ndarray, b: np.ndarray) -> int:
    """How many elements of ``b`` differ from ``a`` bit for bit (all when the type or
    shape differs)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return max(a.size, b.size, 1)
    if a.size == 0:
        return 0
    n = a.dtype.itemsize
    av = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (n,))
    bv = np.ascontiguousarray(b).view(np.uint8).reshape(b.shape + (n,))
    return int((av != bv).any(axis=-1).sum())


class Mutant(NumpyBackend):
    """The oracle with one planted bug (subclasses)."""

    name = "jax"              # expectations match by backend name (see the module doc)
    isolate = False
    ops: tuple[str, ...] = ()
    family = ""
    equivalent: str | None = None
    #: the shipped expectations file that lists this very divergence for the jax backend
    #: (the mutant reproduces a known bug of jax): under that file it passes by design,
    #: and is left out of that score
    listed_in: str | None = None
    elementwise = False       # inputs broadcast to the result shape, any leading batch
    batched = True            # mutate() works on a batch too (else one case at a time)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "platform": "cpu", "device": "TFRT_CPU_0",
                "mutant": type(self).__name__}

    # -- what a mutant writes ---------------------------------------------------------
    def applies(self, sig: Signature) -> bool:
        """Does the bug touch this signature at all (op already checked)?"""
        return True

    def mutate(self, sig: Signature, inputs: list[np.ndarray], outputs: list[np.ndarray],
               oracle: Oracle) -> list[np.ndarray]:
        raise NotImplementedError

    @classmethod
    def witness(cls) -> Case:
        """A case on which the mutant differs from the oracle."""
        raise NotImplementedError

    # -- plumbing -----------------------------------------------------------------------
    def _affected(self, sig: Signature) -> bool:
        return sig.op in self.ops and not sig.invalid and self.applies(sig)

    def _wrap(self, sig: Signature, inner, batch: bool):
        stats = STATS[type(self).__name__]

        def run(inputs):
            inputs = [np.asarray(x) for x in inputs]
            outs = [np.asarray(o) for o in inner(inputs)]
            args = inputs
            if self.elementwise and inputs:
                args = broadcast_ready(sig, inputs) if batch else inputs
                args = [np.array(a) for a in np.broadcast_arrays(*args)]
            with np.errstate(all="ignore"):
                new = [np.asarray(o) for o in self.mutate(sig, args, [o.copy() for o in outs],
                                                           inner)]
            if self.elementwise:        # computed wide: back to the result's element type
                new = [n.astype(o.dtype) if n.dtype != o.dtype and n.shape == o.shape else n
                       for n, o in zip(new, outs)]
            changed = sum(_bits_differ(o, n) for o, n in zip(outs, new)) \
                + abs(len(outs) - len(new))
            stats["calls"] += 1
            if changed:
                stats["changed_calls"] += 1
                stats["changed_elements"] += changed
                where = stats.setdefault("signatures", {})
                where[sig.key()] = where.get(sig.key(), 0) + changed
            return new
        return run

    def compile(self, signature: Signature):
        exe = super().compile(signature)
        if not self._affected(signature):
            return exe
        return self._wrap(signature, exe, batch=False)

    def compile_batch(self, signature: Signature):
        if not self._affected(signature):
            return super().compile_batch(signature)
        if not self.batched:
            return Backend.compile_batch(self, signature)   # one case at a time
        return self._wrap(signature, super().compile_batch(signature), batch=True)


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------

def et_in(sig: Signature, i: int = 0) -> ElementType:
    return sig.input_leaves[i].element_type


def et_out(sig: Signature, i: int = 0) -> ElementType:
    return sig.result_leaves[i].element_type


def is_float(sig: Signature, i: int = 0) -> bool:
    return et_in(sig, i).is_float


def rt(x, et: ElementType) -> np.ndarray:
    """float64 values correctly rounded to ``et``."""
    return round_to(np.asarray(x, np.float64), et)


def pos_zero(like: np.ndarray) -> np.ndarray:
    return np.zeros_like(like)


def neg_zero_mask(x: np.ndarray) -> np.ndarray:
    return (x == 0) & np.signbit(x.astype(np.float64))


def nan_bits(dtype) -> np.ndarray:
    """The default (positive, quiet) NaN of ``dtype``."""
    return np.array(np.nan, dtype)


def bits_of(x: np.ndarray) -> np.ndarray:
    return unsigned_bits(x)


def from_bits(u: np.ndarray, et: ElementType) -> np.ndarray:
    return wrap(np.asarray(u, U64), et, np.shape(u))


def _evaluate(sig: Signature, inputs, attributes=None, regions=None):
    return list(oracles.evaluate(sig.op, inputs,
                                 sig.attributes if attributes is None else attributes,
                                 result_types=sig.result_types,
                                 input_types=sig.input_types,
                                 regions=sig.regions if regions is None else regions))


def fp(values, name: str) -> np.ndarray:
    return np.array(values, element_type(name).dtype)


# ======================================================================================
# element-wise arithmetic
# ======================================================================================

class NegateDropsNegativeZero(Mutant):
    """negate lowered as ``0 - x``: negate(+0) gives +0 instead of -0 (IEEE negation
    flips the sign bit; subtraction from +0 does not)."""

    ops, family, elementwise = ("negate",), "zero signs", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [np.where(x == 0, pos_zero(r), r)]

    @classmethod
    def witness(cls):
        return Case.make("negate", [fp([0.0], "f32")], ["tensor<1xf32>"])


class MultiplyByZeroFolded(Mutant):
    """An algebraic simplifier folds ``x * 0 -> 0``: the product of -1 and 0 is +0
    (should be -0) and inf * 0 is 0 (should be NaN)."""

    ops, family, elementwise = ("multiply",), "zero signs", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        return [np.where((a == 0) | (b == 0), pos_zero(r), r)]

    @classmethod
    def witness(cls):
        return Case.make("multiply", [fp([-1.0], "f32"), fp([0.0], "f32")], ["tensor<1xf32>"])


class MaximumSelectGreater(Mutant):
    """maximum lowered to x86 ``maxps`` (``a > b ? a : b``): a NaN lhs is dropped
    (returns rhs), and maximum(+0, -0) returns -0."""

    ops, family, elementwise = ("maximum",), "NaN propagation", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = inputs
        return [np.where(a > b, a, b)]

    @classmethod
    def witness(cls):
        return Case.make("maximum", [fp([np.nan], "f32"), fp([1.0], "f32")], ["tensor<1xf32>"])


class MinimumIgnoresNaN(Mutant):
    """minimum lowered to C's ``fmin``: a NaN operand is ignored (minimum(NaN, 1) = 1)
    where the spec propagates NaN."""

    ops, family, elementwise = ("minimum",), "NaN propagation", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        an, bn = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
        return [np.where(an & ~bn, b, np.where(bn & ~an, a, r))]

    @classmethod
    def witness(cls):
        return Case.make("minimum", [fp([np.nan], "f32"), fp([1.0], "f32")], ["tensor<1xf32>"])


class MinimumZeroSignFirstOperand(Mutant):
    """minimum as ``a <= b ? a : b`` on zeros: minimum(+0, -0) returns +0 (the spec's
    IEEE minimum orders -0 below +0)."""

    ops, family, elementwise = ("minimum",), "zero signs", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        return [np.where((a == 0) & (b == 0), a, r)]

    @classmethod
    def witness(cls):
        return Case.make("minimum", [fp([0.0], "f32"), fp([-0.0], "f32")], ["tensor<1xf32>"])


class AddF64InF32(Mutant):
    """f64 add computed in f32 (a backend without native f64 demoting it): precision,
    range and subnormals of f64 lost."""

    ops, family, elementwise = ("add",), "precision loss", True

    def applies(self, sig):
        return et_in(sig).name == "f64"

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = (x.astype(np.float32) for x in inputs)
        return [(a + b).astype(np.float64)]

    @classmethod
    def witness(cls):
        return Case.make("add", [fp([1.0], "f64"), fp([1e-10], "f64")], ["tensor<1xf64>"])


class DivideByReciprocal(Mutant):
    """Fast-math division: ``a / b`` as ``a * (1 / b)``, each rounded to the type (two
    roundings: results one ulp off, and a / inf with a huge a no longer 0)."""

    ops, family, elementwise = ("divide",), "precision loss", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = inputs
        et = et_out(sig)
        recip = rt(1.0 / b.astype(np.float64), et).astype(np.float64)
        return [rt(a.astype(np.float64) * recip, et)]

    @classmethod
    def witness(cls):
        return Case.make("divide", [fp([3.0], "f32"), fp([7.0], "f32")], ["tensor<1xf32>"])


class SubtractFlushesF16Subnormals(Mutant):
    """f16 subtract computed in f32 under flush-to-zero, with the flush applied to the
    f16 result: f16 subnormal results become (signed) zero. XLA on CPU flushes f32 but
    keeps f16 subnormals, so this is a bug for f16 even under the CPU's FTZ."""

    ops, family, elementwise = ("subtract",), "subnormals", True

    def applies(self, sig):
        return et_in(sig).name == "f16"

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        tiny = float(np.finfo(np.float16).tiny)
        r64 = r.astype(np.float64)
        sub = (r64 != 0) & (np.abs(r64) < tiny)
        return [np.where(sub, np.copysign(np.zeros_like(r64), r64).astype(np.float16), r)]

    @classmethod
    def witness(cls):
        return Case.make("subtract", [fp([1e-5], "f16"), fp([0.0], "f16")], ["tensor<1xf16>"])


class AbsKeepsNegativeZero(Mutant):
    """abs as ``x < 0 ? -x : x``: abs(-0) stays -0 (should be +0)."""

    ops, family, elementwise = ("abs",), "zero signs", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [np.where(x == 0, x, r)]

    @classmethod
    def witness(cls):
        return Case.make("abs", [fp([-0.0], "f32")], ["tensor<1xf32>"])


class SignByComparisons(Mutant):
    """sign as ``(x > 0) - (x < 0)``: sign(-0) is +0 and sign(NaN) is 0 (the spec:
    -0 and NaN)."""

    ops, family, elementwise = ("sign",), "NaN propagation", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        x64 = x.astype(np.float64)
        return [rt((x64 > 0).astype(np.float64) - (x64 < 0), et_out(sig))]

    @classmethod
    def witness(cls):
        return Case.make("sign", [fp([np.nan], "f32")], ["tensor<1xf32>"])


class AbsComplexOverflow(Mutant):
    """abs of a complex number as ``sqrt(re*re + im*im)`` in the component type, without
    scaling: overflows to inf for parts above sqrt(max) (1e30 in f32) where the modulus
    is finite."""

    ops, family, elementwise = ("abs",), "precision loss", True

    def applies(self, sig):
        return et_in(sig).is_complex

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        re, im = np.real(x), np.imag(x)
        return [np.sqrt(re * re + im * im)]

    @classmethod
    def witness(cls):
        return Case.make("abs", [np.array([1e30 + 1e30j], np.complex64)], ["tensor<1xf32>"])


class RemainderFloorMod(Mutant):
    """remainder lowered to a floored modulo (Python's ``%``, the sign of the divisor)
    instead of C's truncated ``fmod`` (the sign of the dividend): remainder(-7, 2) = 1
    (should be -1), remainder(-4, 2) = +0 (should be -0)."""

    ops, family, elementwise = ("remainder",), "integer arithmetic", True

    def applies(self, sig):
        return et_in(sig).is_signed or et_in(sig).is_float

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        et = et_out(sig)
        if et.is_float:
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            m = np.mod(a64, b64)
            ok = np.isfinite(a64) & np.isfinite(b64) & (b64 != 0)
            return [np.where(ok, rt(m, et), r)]
        a64, b64 = to_wide(a), to_wide(b)
        ok = b64 != 0
        m = np.mod(a64, np.where(ok, b64, 1))
        return [np.where(ok, m.astype(np.int64).astype(r.dtype), r)]

    @classmethod
    def witness(cls):
        return Case.make("remainder", [fp([-7], "si32"), fp([2], "si32")], ["tensor<1xsi32>"])


class DivideIntFloors(Mutant):
    """Signed integer division rounding toward -inf (Python's ``//``) instead of toward
    zero: divide(-7, 2) = -4 (should be -3)."""

    ops, family, elementwise = ("divide",), "integer arithmetic", True

    def applies(self, sig):
        return et_in(sig).is_signed

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        et = et_out(sig)
        a64, b64 = to_wide(a), to_wide(b)
        ok = (b64 != 0) & ~((a64 == et.int_min) & (b64 == -1))
        q = np.floor_divide(a64, np.where(ok, b64, 1))
        return [np.where(ok, q.astype(r.dtype), r)]

    @classmethod
    def witness(cls):
        return Case.make("divide", [fp([-7], "si32"), fp([2], "si32")], ["tensor<1xsi32>"])


class DivideIntByZeroGivesZero(Mutant):
    """Integer division by zero returns 0 (XLA returns -1, i.e. all bits set)."""

    ops, family, elementwise = ("divide",), "integer arithmetic", True
    equivalent = ("integer division by zero is implementation-defined (spec 'Errors', "
                  "specs/ops/divide.yaml integer_division_overflow): any value is allowed")

    def applies(self, sig):
        return et_in(sig).is_integer

    def mutate(self, sig, inputs, outputs, oracle):
        (_, b), (r,) = inputs, outputs
        return [np.where(b == 0, np.zeros_like(r), r)]

    @classmethod
    def witness(cls):
        return Case.make("divide", [fp([1], "si32"), fp([0], "si32")], ["tensor<1xsi32>"])


class AddIntSaturates(Mutant):
    """Integer add saturating at the type's bounds instead of wrapping around (a DSP
    target's saturating add instruction selected for a plain add)."""

    ops, family, elementwise = ("add",), "saturation", True
    equivalent = ("integer overflow is implementation-defined (spec 'Errors', specs/ops/"
                  "add.yaml integer_overflow): saturating is as allowed as wrapping around")

    def applies(self, sig):
        return et_in(sig).is_integer

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        et = et_out(sig)
        a64, b64 = to_wide(a), to_wide(b)
        if et.bits < 64:
            s = a64.astype(np.int64) + b64.astype(np.int64)
            return [np.clip(s, et.int_min, et.int_max).astype(r.dtype)]
        if et.is_unsigned:
            s = a64 + b64
            return [np.where(s < a64, np.uint64(et.int_max), s)]
        s = r.astype(np.int64)
        up = (a64 > 0) & (b64 > 0) & (s < 0)
        down = (a64 < 0) & (b64 < 0) & (s >= 0)
        return [np.where(up, np.int64(et.int_max), np.where(down, np.int64(et.int_min), s))]

    @classmethod
    def witness(cls):
        return Case.make("add", [fp([127], "si8"), fp([1], "si8")], ["tensor<1xsi8>"])


class AddCanonicalisesNaN(Mutant):
    """add returns the default quiet NaN for every NaN result (a backend whose float
    unit canonicalises NaNs), dropping the operands' payloads and signs."""

    ops, family, elementwise = ("add",), "NaN propagation", True
    equivalent = ("the spec does not fix NaN payloads of arithmetic and the exact "
                  "verdict counts any NaN equal to any NaN")

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        return [np.where(np.isnan(r.astype(np.float64)), nan_bits(r.dtype), r)]

    @classmethod
    def witness(cls):
        nan = np.array([0xFFC00001], np.uint32).view(np.float32)
        return Case.make("add", [nan, fp([1.0], "f32")], ["tensor<1xf32>"])


class PowerViaExpLog(Mutant):
    """Floating-point power as ``exp(y * log(x))``: NaN for a negative base with an
    integral exponent (pow(-2, 3) = NaN, should be -8), pow(0, 0) = NaN (should be 1)."""

    ops, family, elementwise = ("power",), "transcendental", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = (x.astype(np.float64) for x in inputs)
        return [rt(np.exp(b * np.log(a)), et_out(sig))]

    @classmethod
    def witness(cls):
        return Case.make("power", [fp([-2.0], "f32"), fp([3.0], "f32")], ["tensor<1xf32>"])


class PowerIntViaFloat(Mutant):
    """64-bit integer power computed through float64 ``pow`` and converted back: exact
    only up to 2^53 (3^39 comes out wrong in the last digits)."""

    ops, family, elementwise = ("power",), "precision loss", True

    def applies(self, sig):
        return et_in(sig).name in ("si64", "ui64")

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        p = np.power(a64, b64)
        ok = (b >= 0) & np.isfinite(p) & (np.abs(p) < 9.2e18) & (np.abs(p) > 2.0 ** 53)
        return [np.where(ok, np.where(ok, p, 0).astype(r.dtype), r)]

    @classmethod
    def witness(cls):
        return Case.make("power", [fp([3], "si64"), fp([39], "si64")], ["tensor<1xsi64>"])


class ClampMinMaxOrder(Mutant):
    """clamp lowered as ``max(min(x, hi), lo)`` instead of the spec's ``min(max(x, lo),
    hi)``: the two agree unless lo > hi, where the spec gives hi and this gives lo."""

    ops, family, elementwise = ("clamp",), "argument order", True

    def mutate(self, sig, inputs, outputs, oracle):
        lo, x, hi = inputs
        (r,) = outputs
        if et_in(sig, 1).is_complex:
            return [r]
        mn = oracles.evaluate("minimum", [x, hi])[0]
        return [oracles.evaluate("maximum", [mn, lo])[0]]

    @classmethod
    def witness(cls):
        return Case.make("clamp", [fp(2, "si32"), fp([0, 5], "si32"), fp(1, "si32")],
                         ["tensor<2xsi32>"])


class SelectScalarPredInverted(Mutant):
    """select with a rank-0 predicate and tensor branches (the broadcasting path) picks
    on_false where the predicate is true: the scalar predicate's lowering inverted."""

    ops, family, elementwise = ("select",), "select broadcasting", True

    def applies(self, sig):
        return sig.input_types[0].rank == 0 and sig.input_types[1].rank > 0

    def mutate(self, sig, inputs, outputs, oracle):
        p, t, e = inputs
        return [np.where(p, e, t)]

    @classmethod
    def witness(cls):
        return Case.make("select", [np.array(True), fp([1, 2], "si32"), fp([3, 4], "si32")],
                         ["tensor<2xsi32>"])


class MaximumUnsignedAsSigned(Mutant):
    """maximum of unsigned integers selected with a signed compare (``pmaxsb`` for
    ``pmaxub``): maximum(200, 1) in ui8 is 1."""

    ops, family, elementwise = ("maximum",), "comparator orders", True

    def applies(self, sig):
        return et_in(sig).is_unsigned

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = inputs
        et = et_in(sig)
        sa, sb = (sign_extend(bits_of(x), et.bits) for x in (a, b))
        return [np.where(sa >= sb, a, b)]

    @classmethod
    def witness(cls):
        return Case.make("maximum", [fp([200], "ui8"), fp([1], "ui8")], ["tensor<1xui8>"])


# ======================================================================================
# transcendental
# ======================================================================================

class ExpF64InF32(Mutant):
    """f64 exponential evaluated by the f32 routine (a math library without an f64
    kernel): about 7 correct digits instead of 16."""

    ops, family, elementwise = ("exponential",), "precision loss", True

    def applies(self, sig):
        return et_in(sig).name == "f64"

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        return [np.exp(x.astype(np.float32)).astype(np.float64)]

    @classmethod
    def witness(cls):
        return Case.make("exponential", [fp([1.0], "f64")], ["tensor<1xf64>"])


class TanhBf16Intermediate(Mutant):
    """f32 tanh computed with a bf16 intermediate (a mixed-precision pass that demotes
    the activation): 8 bits of mantissa instead of 24."""

    ops, family, elementwise = ("tanh",), "precision loss", True

    def applies(self, sig):
        return et_in(sig).name == "f32"

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        t = rt(np.tanh(x.astype(np.float64)), element_type("bf16"))
        return [t.astype(np.float32)]

    @classmethod
    def witness(cls):
        return Case.make("tanh", [fp([0.3], "f32")], ["tensor<1xf32>"])


class Log1pNaive(Mutant):
    """log_plus_one as ``log(1 + x)`` with ``1 + x`` rounded to the type: all
    precision lost for small x (log_plus_one(1e-8) = 0 in f32)."""

    ops, family, elementwise = ("log_plus_one",), "precision loss", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        et = et_out(sig)
        s = rt(1.0 + x.astype(np.float64), et).astype(np.float64)
        return [rt(np.log(s), et)]

    @classmethod
    def witness(cls):
        return Case.make("log_plus_one", [fp([1e-8], "f32")], ["tensor<1xf32>"])


class Expm1Naive(Mutant):
    """exponential_minus_one as ``exp(x) - 1`` with ``exp(x)`` rounded to the type:
    cancellation for small x (exponential_minus_one(1e-8) = 0 in f32)."""

    ops, family, elementwise = ("exponential_minus_one",), "precision loss", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        et = et_out(sig)
        e = rt(np.exp(x.astype(np.float64)), et).astype(np.float64)
        return [rt(e - 1.0, et)]

    @classmethod
    def witness(cls):
        return Case.make("exponential_minus_one", [fp([1e-8], "f32")], ["tensor<1xf32>"])


class SineF32NaiveRangeReduction(Mutant):
    """f32 sine with a naive range reduction ``x - k * (2*pi rounded to f32)`` in f32:
    the error grows with |x| (sine(1e5) has no correct digit)."""

    ops, family, elementwise = ("sine",), "transcendental", True

    def applies(self, sig):
        return et_in(sig).name == "f32"

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        two_pi = np.float32(2 * np.pi)
        k = np.rint(x / two_pi).astype(np.float32)
        red = (x - k * two_pi).astype(np.float32)
        s = np.sin(red.astype(np.float64)).astype(np.float32)
        return [np.where(np.isfinite(x), s, r)]

    @classmethod
    def witness(cls):
        return Case.make("sine", [fp([1e5], "f32")], ["tensor<1xf32>"])


class LogisticViaTanh(Mutant):
    """logistic as ``0.5 + 0.5 * tanh(0.5 * x)`` in the type: the tail below about
    2^-24 is lost (logistic(-30) = 0 in f32, should be 9.4e-14)."""

    ops, family, elementwise = ("logistic",), "precision loss", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        et = et_out(sig)
        t = rt(np.tanh(0.5 * x.astype(np.float64)), et).astype(np.float64)
        return [rt(0.5 + 0.5 * t, et)]

    @classmethod
    def witness(cls):
        return Case.make("logistic", [fp([-30.0], "f32")], ["tensor<1xf32>"])


class RsqrtApproximate(Mutant):
    """f32 rsqrt as the hardware estimate (x86 ``rsqrtps``) without a Newton step:
    about 12 correct bits (hundreds to thousands of ulps off)."""

    ops, family, elementwise = ("rsqrt",), "precision loss", True

    def applies(self, sig):
        return et_in(sig).name == "f32"

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        ok = np.isfinite(r) & (r != 0) & (np.abs(r) >= np.finfo(np.float32).tiny)
        est = (r.view(np.uint32) & np.uint32(0xFFFFF000)).view(np.float32)
        return [np.where(ok, est, r)]

    @classmethod
    def witness(cls):
        return Case.make("rsqrt", [fp([3.0], "f32")], ["tensor<1xf32>"])


class SqrtNegativeZero(Mutant):
    """sqrt(-0) returns +0 (IEEE: -0), e.g. a sqrt built on ``x <= 0 ? 0 : ...``."""

    ops, family, elementwise = ("sqrt",), "zero signs", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [np.where(x == 0, pos_zero(r), r)]

    @classmethod
    def witness(cls):
        return Case.make("sqrt", [fp([-0.0], "f32")], ["tensor<1xf32>"])


class CbrtViaPow(Mutant):
    """cbrt as ``pow(x, 1/3)``: NaN for every negative x (cbrt(-8) should be -2)."""

    ops, family, elementwise = ("cbrt",), "transcendental", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        return [rt(np.power(x.astype(np.float64), 1.0 / 3.0), et_out(sig))]

    @classmethod
    def witness(cls):
        return Case.make("cbrt", [fp([-8.0], "f32")], ["tensor<1xf32>"])


class Atan2DropsZeroSign(Mutant):
    """atan2 whose quadrant logic tests ``y < 0``: a -0 numerator is taken as +0, so
    atan2(-0, -1) = +pi (should be -pi) and atan2(-0, 1) = +0 (should be -0)."""

    ops, family, elementwise = ("atan2",), "zero signs", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (y, x), (r,) = inputs, outputs
        y64 = np.where(y == 0, 0.0, y.astype(np.float64))
        return [np.where(y == 0, rt(np.arctan2(y64, x.astype(np.float64)), et_out(sig)), r)]

    @classmethod
    def witness(cls):
        return Case.make("atan2", [fp([-0.0], "f32"), fp([-1.0], "f32")], ["tensor<1xf32>"])


class LogNegativeZeroNaN(Mutant):
    """log reads the sign bit before testing for zero: log(-0) is NaN (should be -inf,
    IEEE)."""

    ops, family, elementwise = ("log",), "zero signs", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [np.where(neg_zero_mask(x), nan_bits(r.dtype), r)]

    @classmethod
    def witness(cls):
        return Case.make("log", [fp([-0.0], "f32")], ["tensor<1xf32>"])


class ExpEarlyOverflow(Mutant):
    """f32 exponential with an overflow cut-off constant rounded down (``x > 88.7f``
    returns inf): results between 88.7 and 88.72 that are finite come out inf."""

    ops, family, elementwise = ("exponential",), "saturation", True

    def applies(self, sig):
        return et_in(sig).name == "f32"

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [np.where(x > np.float32(88.7), np.float32(np.inf), r)]

    @classmethod
    def witness(cls):
        return Case.make("exponential", [fp([88.71], "f32")], ["tensor<1xf32>"])


class TanhF64SaturatesAtF32Threshold(Mutant):
    """tanh returning +-1 for |x| > 9 in every type: the f32 kernel's saturation
    threshold copied into the f64 kernel (tanh(9) in f64 is 0.99999996954...)."""

    ops, family, elementwise = ("tanh",), "precision loss", True

    def applies(self, sig):
        return et_in(sig).name == "f64"

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [np.where(np.abs(x) > 9, np.sign(x), r)]

    @classmethod
    def witness(cls):
        return Case.make("tanh", [fp([10.0], "f64")], ["tensor<1xf64>"])


class SqrtClampsNegativeInput(Mutant):
    """sqrt clamping its operand at zero "for safety" (``sqrt(max(x, 0))``): sqrt(-1) is
    0 (should be NaN)."""

    ops, family, elementwise = ("sqrt",), "NaN propagation", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [np.where(x.astype(np.float64) < 0, pos_zero(r), r)]

    @classmethod
    def witness(cls):
        return Case.make("sqrt", [fp([-1.0], "f32")], ["tensor<1xf32>"])


class Atan2ArgumentsSwapped(Mutant):
    """atan2 called with its operands in the other order (``atan2(x, y)``, the order of
    some math libraries' ``atan2(x, y)`` helpers)."""

    ops, family, elementwise = ("atan2",), "argument order", True

    def applies(self, sig):
        return is_float(sig)

    def mutate(self, sig, inputs, outputs, oracle):
        y, x = inputs
        return oracle([x, y])

    @classmethod
    def witness(cls):
        return Case.make("atan2", [fp([1.0], "f32"), fp([2.0], "f32")], ["tensor<1xf32>"])


# ======================================================================================
# rounding
# ======================================================================================

class RoundEvenHalfAway(Mutant):
    """round_nearest_even lowered to C's ``round`` (ties away from zero): 2.5 gives 3
    (should be 2)."""

    ops, family, elementwise = ("round_nearest_even",), "rounding ties", True

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        x64 = x.astype(np.float64)
        t = np.trunc(x64)
        tie = np.abs(x64 - t) == 0.5
        return [np.where(tie, rt(t + np.sign(x64), et_out(sig)), r)]

    @classmethod
    def witness(cls):
        return Case.make("round_nearest_even", [fp([2.5], "f32")], ["tensor<1xf32>"])


class RoundAfzAddHalfFloor(Mutant):
    """round_nearest_afz as ``floor(x + 0.5)`` in the type: -2.5 gives -2 (should be
    -3), the largest float below 0.5 gives 1 (x + 0.5 rounds up), -0.4 gives +0."""

    ops, family, elementwise = ("round_nearest_afz",), "rounding ties", True

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        et = et_out(sig)
        s = rt(x.astype(np.float64) + 0.5, et).astype(np.float64)
        return [rt(np.floor(s), et)]

    @classmethod
    def witness(cls):
        return Case.make("round_nearest_afz", [fp([-2.5], "f32")], ["tensor<1xf32>"])


class CeilDropsNegativeZero(Mutant):
    """ceil as ``trunc(x) + (x > trunc(x))``: results in (-1, 0] come out +0 (-0 + 0),
    where ceil(-0.5) and ceil(-0) are -0."""

    ops, family, elementwise = ("ceil",), "zero signs", True

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        x64 = x.astype(np.float64)
        return [np.where((x64 > -1) & (x64 <= 0), pos_zero(r), r)]

    @classmethod
    def witness(cls):
        return Case.make("ceil", [fp([-0.5], "f32")], ["tensor<1xf32>"])


class FloorViaInt32(Mutant):
    """floor by a round trip through int32 (``(float)(int)x`` corrected for negatives):
    wrong beyond 2^31, for inf and NaN, and floor(-0) gives +0."""

    ops, family, elementwise = ("floor",), "saturation", True

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        x64 = x.astype(np.float64)
        t = x64.astype(np.int32).astype(np.float64)      # out of range: INT_MIN
        return [rt(t - (x64 < t), et_out(sig))]

    @classmethod
    def witness(cls):
        return Case.make("floor", [fp([3e9], "f32")], ["tensor<1xf32>"])


class ReducePrecisionTruncates(Mutant):
    """reduce_precision truncating the mantissa (round toward zero) instead of rounding
    to nearest even: reduce_precision(1.75, e8 m1) = 1.5 (should be 2)."""

    ops, family, elementwise = ("reduce_precision",), "rounding ties", True

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        m = sig.attributes["mantissa_bits"]
        e = sig.attributes["exponent_bits"]
        x64 = x.astype(np.float64)
        bits = x64.view(np.uint64)
        drop = 52 - m
        if drop <= 0:
            return [r]
        trunc = (bits & ~np.uint64((1 << drop) - 1)).view(np.float64)
        emin = 2.0 ** (2 - 2 ** (e - 1)) if e > 1 else np.inf
        r64 = r.astype(np.float64)
        ok = (np.isfinite(x64) & np.isfinite(r64) & (np.abs(r64) > np.abs(x64))
              & (np.abs(x64) >= emin))
        return [np.where(ok, rt(trunc, et_out(sig)), r)]

    @classmethod
    def witness(cls):
        return Case.make("reduce_precision", [fp([1.75], "f32")], ["tensor<1xf32>"],
                         {"exponent_bits": 8, "mantissa_bits": 1})


# ======================================================================================
# conversion
# ======================================================================================

def _convert_case(value, src: str, dst: str) -> Case:
    return Case.make("convert", [fp([value], src)], [f"tensor<1x{dst}>"])


class ConvertFloatToIntRounds(Mutant):
    """float -> integer conversion rounding to nearest (``cvtss2si`` under the default
    MXCSR) instead of truncating toward zero: convert(1.7) = 2 (should be 1)."""

    ops, family, elementwise = ("convert",), "rounding ties", True

    def applies(self, sig):
        return et_in(sig).is_float and et_out(sig).is_integer

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        et = et_out(sig)
        v = np.rint(x.astype(np.float64))
        ok = np.isfinite(v) & (v >= et.int_min) & (v <= et.int_max)
        return [np.where(ok, np.where(ok, v, 0).astype(r.dtype), r)]

    @classmethod
    def witness(cls):
        return _convert_case(1.7, "f32", "si32")


class ConvertU64AsSigned(Mutant):
    """ui64 -> float conversion reading the operand as signed (``cvtsi2sd`` on a
    64-bit unsigned): 2^63 converts to -2^63."""

    ops, family, elementwise = ("convert",), "conversion", True

    def applies(self, sig):
        return et_in(sig).name == "ui64" and (et_out(sig).is_float or et_out(sig).is_complex)

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        return oracle([x.view(np.int64)])

    @classmethod
    def witness(cls):
        return _convert_case(2 ** 63, "ui64", "f32")


class ConvertNaNToBoolFalse(Mutant):
    """float -> i1 conversion as ``x < 0 || x > 0`` (an ordered compare): NaN converts
    to false, where "any non-zero value is true"."""

    ops, family, elementwise = ("convert",), "NaN propagation", True

    def applies(self, sig):
        return et_in(sig).is_float and et_out(sig).is_boolean

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [np.where(np.isnan(x.astype(np.float64)), False, r)]

    @classmethod
    def witness(cls):
        return _convert_case(np.nan, "f32", "i1")


class ConvertBoolSignExtends(Mutant):
    """i1 -> number conversion sign-extending the 1-bit value (LLVM ``sext`` instead of
    ``zext``): true converts to -1 (all ones for unsigned)."""

    ops, family, elementwise = ("convert",), "conversion", True

    def applies(self, sig):
        return et_in(sig).is_boolean and not et_out(sig).is_boolean

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        et = et_out(sig)
        if et.is_integer:
            minus_one = from_bits(np.full(r.shape, 0xFFFFFFFFFFFFFFFF, U64), et)
        else:
            minus_one = np.full(r.shape, -1, r.dtype)
        return [np.where(x, minus_one, r)]

    @classmethod
    def witness(cls):
        return _convert_case(True, "i1", "si32")


class ConvertFloatToUnsignedViaSigned(Mutant):
    """float -> ui32/ui64 conversion through the signed instruction (``cvttss2si``):
    values from 2^(n-1) to 2^n, which fit, give the "integer indefinite" 0x80...0."""

    ops, family, elementwise = ("convert",), "saturation", True

    def applies(self, sig):
        return et_in(sig).is_float and et_out(sig).name in ("ui32", "ui64")

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        et = et_out(sig)
        t = np.trunc(x.astype(np.float64))
        hit = (t >= 2.0 ** (et.bits - 1)) & (t < 2.0 ** et.bits)
        return [np.where(hit, np.array(1 << (et.bits - 1)).astype(r.dtype), r)]

    @classmethod
    def witness(cls):
        return _convert_case(3e9, "f32", "ui32")


class ConvertFloatNarrowingTruncates(Mutant):
    """float -> narrower float conversion rounding toward zero (bf16 by dropping the low
    16 bits of an f32): convert(1 + 2^-8 + 2^-9, bf16) = 1 + 2^-8 (nearest: 1 + 2^-7)."""

    ops, family, elementwise = ("convert",), "rounding ties", True
    equivalent = ("an inexact float -> float conversion is TBD in the spec (#180; specs/ops/"
                  "convert.yaml inexact_to_float): either neighbouring float is allowed")

    def applies(self, sig):
        return et_in(sig).is_float and et_out(sig).is_float

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        et = et_out(sig)
        x64, r64 = x.astype(np.float64), r.astype(np.float64)
        b = bits_of(r)
        magnitude = b & ~U64(et.sign_bit)
        # The next value toward zero is one magnitude step down; E8M0's smallest value
        # (pattern 0) has none, and a type without -0 (FNUZ) steps from its smallest
        # negative value to +0, not to the sign-only pattern (its NaN).
        away = np.isfinite(x64) & (np.abs(r64) > np.abs(x64)) & (magnitude > 0)
        down = np.where(away, b - U64(1), b)
        if not et.has_negative_zero:
            down = np.where(away & (magnitude == 1), U64(0), down)
        return [np.where(away, from_bits(down, et), r)]

    @classmethod
    def witness(cls):
        return _convert_case(1 + 2 ** -8 + 2 ** -9, "f32", "bf16")


class ConvertFloatToIntIndefinite(Mutant):
    """float -> integer conversion of an out-of-range value (NaN and inf included)
    gives the x86 "integer indefinite" (INT_MIN, or 0 for unsigned) instead of
    saturating."""

    ops, family, elementwise = ("convert",), "saturation", True
    equivalent = ("a float -> integer conversion whose truncated value does not fit is TBD "
                  "in the spec (#180; specs/ops/convert.yaml float_to_integer_out_of_range)")

    def applies(self, sig):
        return et_in(sig).is_float and et_out(sig).is_integer

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        et = et_out(sig)
        t = np.trunc(x.astype(np.float64))
        bad = ~(np.isfinite(t) & (t >= et.int_min) & (t <= et.int_max))
        return [np.where(bad, np.array(et.int_min if et.is_signed else 0).astype(r.dtype), r)]

    @classmethod
    def witness(cls):
        return _convert_case(1e10, "f32", "si32")


class ConvertIntNarrowingSaturates(Mutant):
    """integer -> narrower integer conversion saturating instead of wrapping around."""

    ops, family, elementwise = ("convert",), "saturation", True
    equivalent = ("an integer -> integer conversion of a value that does not fit is "
                  "implementation-defined: wrap-around or saturation (specs/ops/convert.yaml "
                  "integer_overflow)")

    def applies(self, sig):
        return et_in(sig).is_integer and et_out(sig).is_integer

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        et = et_out(sig)
        v = to_wide(x)
        if v.dtype == np.uint64:
            return [np.where(v > np.uint64(et.int_max), np.array(et.int_max).astype(r.dtype),
                             r)]
        lo = np.int64(max(et.int_min, -2 ** 63))
        hi = et.int_max
        big = v.astype(np.float64) > hi
        return [np.where(v < lo, np.array(et.int_min).astype(r.dtype),
                         np.where(big, np.array(hi).astype(r.dtype), r))]

    @classmethod
    def witness(cls):
        return _convert_case(300, "si32", "si8")


class BitcastCanonicalisesNaN(Mutant):
    """bitcast_convert from a float type passing the operand through a float register
    that canonicalises NaNs: every NaN's bits become the default NaN (the payload and
    sign of the operand's bits are lost, and the bits are all that bitcast is about)."""

    ops, family, elementwise = ("bitcast_convert",), "NaN payloads", False

    def applies(self, sig):
        return et_in(sig).is_float

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        x = np.where(np.isnan(x.astype(np.float64)), nan_bits(x.dtype), x)
        return oracle([x])

    @classmethod
    def witness(cls):
        nan = np.array([0x7F800001], np.uint32).view(np.float32)
        return Case.make("bitcast_convert", [nan], ["tensor<1xsi32>"])


class BitcastSplitBigEndian(Mutant):
    """bitcast_convert to a narrower type splitting each element most significant part
    first (big-endian) where the oracle splits little-endian."""

    ops, family, elementwise, batched = ("bitcast_convert",), "bit layout", False, False
    equivalent = ("when the bit widths differ, how element bits are split or joined is "
                  "implementation-defined (specs/ops/bitcast_convert.yaml bit_layout)")

    def applies(self, sig):
        return et_in(sig).bits > et_out(sig).bits and sig.result_types[0].rank > 0

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        return [np.ascontiguousarray(r[..., ::-1])]

    @classmethod
    def witness(cls):
        return Case.make("bitcast_convert", [fp(0x01020304, "ui32")], ["tensor<4xui8>"])


# ======================================================================================
# bitwise and shifts
# ======================================================================================

def _shift_case(op, a, b, t="si32"):
    return Case.make(op, [fp([a], t), fp([b], t)], [f"tensor<1x{t}>"])


class ShiftLeftCountModWidth(Mutant):
    """shift_left by the x86 ``shl`` rule: the count taken modulo the bit width, so
    shifting by 32 leaves an si32 unchanged (should be 0)."""

    ops, family, elementwise = ("shift_left",), "shifts", True

    def applies(self, sig):
        return et_in(sig).is_integer

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = inputs
        et = et_out(sig)
        amount = bits_of(b) & U64(et.bits - 1)
        return [from_bits(bits_of(a) << amount, et)]

    @classmethod
    def witness(cls):
        return _shift_case("shift_left", 1, 32)


class ShiftRightArithmeticCountModWidth(Mutant):
    """shift_right_arithmetic by the x86 ``sar`` rule (count modulo the width): -8 >> 32
    gives -8 (should be the sign fill, -1)."""

    ops, family, elementwise = ("shift_right_arithmetic",), "shifts", True

    def applies(self, sig):
        return et_in(sig).is_integer

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = inputs
        et = et_out(sig)
        amount = (bits_of(b) & U64(et.bits - 1)).astype(np.int64)
        v = sign_extend(bits_of(a), et.bits) >> amount
        return [from_bits(v.view(U64), et)]

    @classmethod
    def witness(cls):
        return _shift_case("shift_right_arithmetic", -8, 32)


class ShiftRightLogicalSignExtends(Mutant):
    """shift_right_logical on a signed type lowered to C's ``>>`` on the signed value
    (an arithmetic shift): -128 >>> 1 in si8 gives -64 (should be 64)."""

    ops, family, elementwise = ("shift_right_logical",), "shifts", True

    def applies(self, sig):
        return et_in(sig).is_signed

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        et = et_out(sig)
        amount = bits_of(b)
        ok = amount < U64(et.bits)
        v = sign_extend(bits_of(a), et.bits) >> np.where(ok, amount, 0).astype(np.int64)
        return [np.where(ok, from_bits(v.view(U64), et), r)]

    @classmethod
    def witness(cls):
        return _shift_case("shift_right_logical", -128, 1, "si8")


class ShiftLeftNegativeCountShiftsRight(Mutant):
    """shift_left with a negative count shifting right (the ARM ``vshl`` rule: a
    negative count shifts the other way); the spec reads the count as unsigned, so every
    negative count is past the width and gives 0."""

    ops, family, elementwise = ("shift_left",), "shifts", True

    def applies(self, sig):
        return et_in(sig).is_signed

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        et = et_out(sig)
        n = to_wide(b).astype(np.int64)
        hit = (n < 0) & (n > -et.bits)
        v = bits_of(a) >> np.where(hit, -n, 0).astype(U64)
        return [np.where(hit, from_bits(v, et), r)]

    @classmethod
    def witness(cls):
        return _shift_case("shift_left", 64, -2)


class ShiftRightArithmeticUnsignedZeroFills(Mutant):
    """shift_right_arithmetic on an unsigned type lowered to a logical shift (the type's
    signedness picked the instruction): the top bit is not replicated."""

    ops, family, elementwise = ("shift_right_arithmetic",), "shifts", True

    def applies(self, sig):
        return et_in(sig).is_unsigned

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        et = et_out(sig)
        amount = bits_of(b)
        ok = amount < U64(et.bits)
        v = bits_of(a) >> np.where(ok, amount, U64(0))
        return [np.where(ok, from_bits(v, et), np.zeros_like(r))]

    @classmethod
    def witness(cls):
        return _shift_case("shift_right_arithmetic", 0x80, 1, "ui8")


class PopcntSignExtended(Mutant):
    """popcnt of narrow signed integers counting the bits of the sign-extended 32-bit
    register: popcnt(-1 : si8) = 32 (should be 8)."""

    ops, family, elementwise = ("popcnt",), "bitwise", True

    def applies(self, sig):
        return et_in(sig).is_signed and et_in(sig).bits < 32

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        et = et_out(sig)
        w = sign_extend(bits_of(x), et.bits).view(U64) & U64(0xFFFFFFFF)
        return [from_bits(np.bitwise_count(w).astype(U64), et)]

    @classmethod
    def witness(cls):
        return Case.make("popcnt", [fp([-1], "si8")], ["tensor<1xsi8>"])


class Popcnt64CountsLowHalf(Mutant):
    """popcnt of 64-bit integers with the 32-bit builtin (``__builtin_popcount`` for
    ``popcountll``): only the low 32 bits are counted."""

    ops, family, elementwise = ("popcnt",), "bitwise", True

    def applies(self, sig):
        return et_in(sig).bits == 64

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        w = bits_of(x) & U64(0xFFFFFFFF)
        return [from_bits(np.bitwise_count(w).astype(U64), et_out(sig))]

    @classmethod
    def witness(cls):
        return Case.make("popcnt", [fp([-1], "si64")], ["tensor<1xsi64>"])


class ClzSignExtended(Mutant):
    """count_leading_zeros of narrow integers as ``clz32(sext(x)) - (32 - bits)``: a
    negative operand gives a negative count (clz(-1 : si8) = -24, should be 0)."""

    ops, family, elementwise = ("count_leading_zeros",), "bitwise", True

    def applies(self, sig):
        return et_in(sig).is_signed and et_in(sig).bits < 32

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        et = et_out(sig)
        v = sign_extend(bits_of(x), et.bits)
        neg = v < 0
        return [np.where(neg, from_bits(np.full(r.shape, -(32 - et.bits), np.int64).view(U64),
                                        et), r)]

    @classmethod
    def witness(cls):
        return Case.make("count_leading_zeros", [fp([-1], "si8")], ["tensor<1xsi8>"])


class NotBoolBitwise(Mutant):
    """not on i1 lowered as a bitwise not of the byte (~0x01 = 0xFE, stored as "non-zero
    is true"): not(true) is true."""

    ops, family, elementwise = ("not",), "bitwise", True

    def applies(self, sig):
        return et_in(sig).is_boolean

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        return [np.ones_like(r)]

    @classmethod
    def witness(cls):
        return Case.make("not", [np.array([True])], ["tensor<1xi1>"])


# ======================================================================================
# comparison
# ======================================================================================

_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
               "GT": np.greater, "GE": np.greater_equal}


def _compare_case(a, b, t, direction, ctype):
    return Case.make("compare", [fp([a], t), fp([b], t)], ["tensor<1xi1>"],
                     {"comparison_direction": direction, "compare_type": ctype})


class CompareUnsignedAsSigned(Mutant):
    """compare of unsigned integers lowered with a signed predicate (``icmp slt`` for
    ``ult``): 200 < 1 is true in ui8."""

    ops, family, elementwise = ("compare",), "comparator orders", True

    def applies(self, sig):
        return et_in(sig).is_unsigned

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = inputs
        et = et_in(sig)
        sa, sb = (sign_extend(bits_of(x), et.bits) for x in (a, b))
        return [_DIRECTIONS[sig.attributes["comparison_direction"]](sa, sb)]

    @classmethod
    def witness(cls):
        return _compare_case(200, 1, "ui8", "LT", "UNSIGNED")


class CompareTotalOrderZerosEqual(Mutant):
    """compare with TOTALORDER lowered as a float compare on zeros: -0 and +0 compare
    equal (the total order puts -0 before +0)."""

    ops, family, elementwise = ("compare",), "comparator orders", True

    def applies(self, sig):
        return sig.attributes.get("compare_type") == "TOTALORDER"

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        both = (a == 0) & (b == 0)
        d = sig.attributes["comparison_direction"]
        return [np.where(both, d in ("EQ", "LE", "GE"), r)]

    @classmethod
    def witness(cls):
        return _compare_case(-0.0, 0.0, "f32", "LT", "TOTALORDER")


class CompareTotalOrderNaNUnsigned(Mutant):
    """TOTALORDER compare ignoring the sign of a NaN (every NaN sorts last, as if
    positive): -NaN < 1 is false (the total order puts -NaN first)."""

    ops, family, elementwise = ("compare",), "comparator orders", True

    def applies(self, sig):
        return sig.attributes.get("compare_type") == "TOTALORDER"

    def mutate(self, sig, inputs, outputs, oracle):
        a, b = inputs

        def unsign(x):
            return np.where(np.isnan(x.astype(np.float64)), np.abs(x), x)
        return oracle([unsign(a), unsign(b)])

    @classmethod
    def witness(cls):
        nan = np.array([0xFFC00000], np.uint32).view(np.float32)
        return Case.make("compare", [nan, fp([1.0], "f32")], ["tensor<1xi1>"],
                         {"comparison_direction": "LT", "compare_type": "TOTALORDER"})


class CompareNotEqualOrdered(Mutant):
    """FLOAT NE lowered to the ordered predicate (LLVM ``fcmp one`` instead of ``une``):
    NaN != 1 is false (should be true)."""

    ops, family, elementwise = ("compare",), "NaN propagation", True

    def applies(self, sig):
        return (sig.attributes.get("compare_type") == "FLOAT"
                and sig.attributes.get("comparison_direction") == "NE")

    def mutate(self, sig, inputs, outputs, oracle):
        (a, b), (r,) = inputs, outputs
        nan = np.isnan(a.astype(np.float64)) | np.isnan(b.astype(np.float64))
        return [np.where(nan, False, r)]

    @classmethod
    def witness(cls):
        return _compare_case(np.nan, 1.0, "f32", "NE", "FLOAT")


class IsFiniteNaN(Mutant):
    """is_finite as ``abs(x) != inf``: NaN counts as finite."""

    ops, family, elementwise = ("is_finite",), "NaN propagation", True

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        return [np.abs(x.astype(np.float64)) != np.inf]

    @classmethod
    def witness(cls):
        return Case.make("is_finite", [fp([np.nan], "f32")], ["tensor<1xi1>"])


# ======================================================================================
# data movement
# ======================================================================================

class DynamicSliceNegativeWraps(Mutant):
    """dynamic_slice taking a negative start index Python-style (from the end) before
    clamping: start -1 on a dimension of 4 reads from 3, clamped to 4 - size (the spec
    clamps -1 to 0)."""

    ops, family, batched = ("dynamic_slice",), "index clamping", False

    def mutate(self, sig, inputs, outputs, oracle):
        x, starts = inputs[0], inputs[1:]
        new = []
        for s, d in zip(starts, x.shape):
            w = to_wide(s)
            new.append(w if w.dtype == np.uint64 else np.where(w < 0, w + d, w))
        return oracles.evaluate(sig.op, [x, *new],
                                sig.attributes, result_types=sig.result_types)

    @classmethod
    def witness(cls):
        return Case.make("dynamic_slice", [fp([0, 1, 2, 3], "si32"), fp(-1, "si32")],
                         ["tensor<2xsi32>"], {"slice_sizes": [2]})


class DynamicSliceUnsignedIndexAsSigned(Mutant):
    """dynamic_slice reading an unsigned start index as signed: ui8 200 becomes -56 and
    clamps to 0 (it should clamp to the last valid start)."""

    ops, family, batched = ("dynamic_slice",), "index clamping", False

    def applies(self, sig):
        return any(t.element_type.is_unsigned for t in sig.input_types[1:])

    def mutate(self, sig, inputs, outputs, oracle):
        x, starts = inputs[0], inputs[1:]
        new = [sign_extend(bits_of(s), element_type(s.dtype).bits) for s in starts]
        return oracles.evaluate(sig.op, [x, *[np.asarray(n, np.int64) for n in new]],
                                sig.attributes, result_types=sig.result_types)

    @classmethod
    def witness(cls):
        return Case.make("dynamic_slice", [fp([0, 1, 2, 3], "si32"), fp(200, "ui8")],
                         ["tensor<2xsi32>"], {"slice_sizes": [2]})


class DynamicUpdateSliceClampToDim(Mutant):
    """dynamic_update_slice clamping the start index to [0, dim - 1] instead of
    [0, dim - update size], and then writing only the part of the update that fits."""

    ops, family, batched = ("dynamic_update_slice",), "index clamping", False

    def mutate(self, sig, inputs, outputs, oracle):
        x, upd, starts = inputs[0], inputs[1], inputs[2:]
        (r,) = outputs
        out = x.copy()
        if x.size == 0 or upd.size == 0:
            return [r]
        begin = [int(min(max(int(to_wide(s)), 0), max(d - 1, 0)))
                 for s, d in zip(starts, x.shape)]
        dst = tuple(slice(b, min(b + n, d)) for b, n, d in zip(begin, upd.shape, x.shape))
        src = tuple(slice(0, s.stop - s.start) for s in dst)
        out[dst] = upd[src]
        return [out]

    @classmethod
    def witness(cls):
        return Case.make("dynamic_update_slice",
                         [fp([0, 0, 0, 0], "si32"), fp([1, 1], "si32"), fp(3, "si32")],
                         ["tensor<4xsi32>"])


def _pad_with(x, value, interior_value, lows, highs, interiors, shape):
    """The oracle's pad (interior first, then edges, negative edges cut), with the
    interior padding filled with ``interior_value``."""
    full = [d + max(d - 1, 0) * it + max(lo, 0) + max(hi, 0)
            for d, lo, hi, it in zip(x.shape, lows, highs, interiors)]
    buf = np.full(full, value, dtype=x.dtype)
    core = tuple(slice(max(lo, 0), max(lo, 0) + max(d - 1, 0) * (it + 1) + 1) if d
                 else slice(0, 0) for d, lo, it in zip(x.shape, lows, interiors))
    buf[core] = interior_value
    buf[tuple(slice(max(lo, 0), max(lo, 0) + max(d - 1, 0) * (it + 1) + 1, it + 1) if d
              else slice(0, 0) for d, lo, it in zip(x.shape, lows, interiors))] = x
    cut = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, lo, hi in zip(full, lows, highs))
    return np.ascontiguousarray(buf[cut]).reshape(shape)


class PadNegativeEdgeCutsWrongSide(Mutant):
    """pad cutting a negative edge from the opposite end (negative low padding applied
    at the high end and vice versa): the same shape, shifted contents."""

    ops, family, batched = ("pad",), "stride and padding", False

    def applies(self, sig):
        a = sig.attributes
        return any(lo < 0 or hi < 0 for lo, hi in zip(a["edge_padding_low"],
                                                       a["edge_padding_high"]))

    def mutate(self, sig, inputs, outputs, oracle):
        a = dict(sig.attributes)
        lows, highs = a["edge_padding_low"], a["edge_padding_high"]
        a["edge_padding_low"] = [max(lo, 0) + min(hi, 0) for lo, hi in zip(lows, highs)]
        a["edge_padding_high"] = [max(hi, 0) + min(lo, 0) for lo, hi in zip(lows, highs)]
        return _evaluate(sig, inputs, attributes=a)

    @classmethod
    def witness(cls):
        return Case.make("pad", [fp([1, 2, 3], "si32"), fp(0, "si32")], ["tensor<2xsi32>"],
                         {"edge_padding_low": [-1], "edge_padding_high": [0],
                          "interior_padding": [0]})


class PadInteriorZeroFilled(Mutant):
    """pad filling the interior padding with zeros (a zero-initialised strided buffer)
    and only the edges with padding_value."""

    ops, family, batched = ("pad",), "stride and padding", False

    def applies(self, sig):
        return any(sig.attributes["interior_padding"])

    def mutate(self, sig, inputs, outputs, oracle):
        x, value = inputs
        a = sig.attributes
        zero = np.zeros((), x.dtype)
        return [_pad_with(x, value, zero, a["edge_padding_low"], a["edge_padding_high"],
                          a["interior_padding"], sig.result_types[0].shape)]

    @classmethod
    def witness(cls):
        return Case.make("pad", [fp([1, 2], "si32"), fp(9, "si32")], ["tensor<3xsi32>"],
                         {"edge_padding_low": [0], "edge_padding_high": [0],
                          "interior_padding": [1]})


class PadLowHighSwapped(Mutant):
    """pad with edge_padding_low and edge_padding_high swapped (the attribute order of
    another IR): the same shape, the operand shifted."""

    ops, family, batched = ("pad",), "stride and padding", False

    def mutate(self, sig, inputs, outputs, oracle):
        a = dict(sig.attributes)
        a["edge_padding_low"], a["edge_padding_high"] = a["edge_padding_high"], \
            a["edge_padding_low"]
        return _evaluate(sig, inputs, attributes=a)

    @classmethod
    def witness(cls):
        return Case.make("pad", [fp([1, 2], "si32"), fp(0, "si32")], ["tensor<3xsi32>"],
                         {"edge_padding_low": [1], "edge_padding_high": [0],
                          "interior_padding": [0]})


class SliceStrideIgnored(Mutant):
    """slice dropping the strides (a lowering that only passes start and size): reads a
    contiguous block from the start indices."""

    ops, family, batched = ("slice",), "stride and padding", False

    def applies(self, sig):
        return any(s != 1 for s in sig.attributes["strides"])

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        shape = sig.result_types[0].shape
        starts = sig.attributes["start_indices"]
        return [np.ascontiguousarray(x[tuple(slice(s, s + n) for s, n in zip(starts, shape))])]

    @classmethod
    def witness(cls):
        return Case.make("slice", [fp([0, 1, 2, 3, 4, 5], "si32")], ["tensor<3xsi32>"],
                         {"start_indices": [0], "limit_indices": [6], "strides": [2]})


class ReverseMirroredDimensions(Mutant):
    """reverse numbering dimensions from the other end (minor-to-major layout order
    taken for the logical order): reverses dimension rank - 1 - d."""

    ops, family, batched = ("reverse",), "dimension numbers", False

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        a = {"dimensions": [x.ndim - 1 - d for d in sig.attributes["dimensions"]]}
        return _evaluate(sig, inputs, attributes=a)

    @classmethod
    def witness(cls):
        return Case.make("reverse", [np.arange(6, dtype=np.int32).reshape(2, 3)],
                         ["tensor<2x3xsi32>"], {"dimensions": [0]})


class TransposeInversePermutation(Mutant):
    """transpose applying the inverse permutation (result dimension i taken as operand
    dimension perm^-1[i]): the data laid out in the result's shape."""

    ops, family, batched = ("transpose",), "dimension numbers", False

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        perm = list(sig.attributes["permutation"])
        inv = list(np.argsort(perm))
        return [np.ascontiguousarray(np.transpose(x, inv)).reshape(sig.result_types[0].shape)]

    @classmethod
    def witness(cls):
        return Case.make("transpose", [np.arange(24, dtype=np.int32).reshape(2, 3, 4)],
                         ["tensor<3x4x2xsi32>"], {"permutation": [1, 2, 0]})


class ConcatenateAsAppend(Mutant):
    """concatenate lowered as appending the operands' buffers (right only for dimension
    0, or when every dimension before it is 1)."""

    ops, family, batched = ("concatenate",), "dimension numbers", False

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        flat = np.concatenate([np.ravel(x) for x in inputs]) if inputs else r.ravel()
        return [flat.astype(r.dtype).reshape(r.shape)]

    @classmethod
    def witness(cls):
        return Case.make("concatenate", [fp([[1], [2]], "si32"), fp([[3], [4]], "si32")],
                         ["tensor<2x2xsi32>"], {"dimension": 1})


class IotaLastDimension(Mutant):
    """iota counting along the last dimension whatever iota_dimension says."""

    ops, family, batched = ("iota",), "dimension numbers", False

    def mutate(self, sig, inputs, outputs, oracle):
        shape = sig.result_types[0].shape
        if not shape:
            return outputs
        return _evaluate(sig, inputs, attributes={"iota_dimension": len(shape) - 1})

    @classmethod
    def witness(cls):
        return Case(Signature.make("iota", [], ["tensor<2x3xsi32>"], {"iota_dimension": 0}), ())


class BroadcastInDimIgnoresPermutation(Mutant):
    """broadcast_in_dim returning its operand unchanged when the result shape equals the
    operand's, ignoring a permuting broadcast_dimensions (the bug jax.lax has, which
    expectations/jax-cpu.yaml lists)."""

    ops, family, batched = ("broadcast_in_dim",), "dimension numbers", False
    listed_in = "jax-cpu"

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        return [x.copy()] if x.shape == r.shape else [r]

    @classmethod
    def witness(cls):
        return Case.make("broadcast_in_dim", [fp([[1, 2], [3, 4]], "si32")],
                         ["tensor<2x2xsi32>"], {"broadcast_dimensions": [1, 0]})


class ReshapeColumnMajor(Mutant):
    """reshape in column-major (Fortran) order, a layout mix-up."""

    ops, family, batched = ("reshape",), "dimension numbers", False

    def mutate(self, sig, inputs, outputs, oracle):
        (x,) = inputs
        return [np.ascontiguousarray(np.reshape(x, sig.result_types[0].shape, order="F"))]

    @classmethod
    def witness(cls):
        return Case.make("reshape", [np.arange(6, dtype=np.int32).reshape(2, 3)],
                         ["tensor<3x2xsi32>"])


class GetDimensionSizeFromEnd(Mutant):
    """get_dimension_size counting dimensions from the minor end (a layout's
    minor-to-major order read as the logical order): the size of dimension rank-1-d."""

    ops, family, batched = ("get_dimension_size",), "dimension numbers", False

    def mutate(self, sig, inputs, outputs, oracle):
        (x,), (r,) = inputs, outputs
        d = sig.attributes["dimension"]
        return [np.array(x.shape[x.ndim - 1 - d], r.dtype)]

    @classmethod
    def witness(cls):
        return Case.make("get_dimension_size", [np.zeros((2, 3), np.float32)],
                         ["tensor<si32>"], {"dimension": 0})


# ======================================================================================
# gather / scatter
# ======================================================================================

def _gather_bounds(sig: Signature) -> tuple[int, list[int]]:
    """index_vector_dim of gather's start_indices and, per index component, the largest
    start that keeps the slice in bounds (dim - slice_size)."""
    a = sig.attributes
    op_shape = sig.input_types[0].shape
    return a["index_vector_dim"], [op_shape[d] - a["slice_sizes"][d]
                                   for d in a["start_index_map"]]


def _remap_gather_indices(sig, idx, fn):
    ivd, bounds = _gather_bounds(sig)
    wide = to_wide(idx)
    if wide.dtype == np.uint64:
        wide = np.minimum(wide, np.uint64(2 ** 62)).astype(np.int64)
    if ivd == idx.ndim:
        wide = wide[..., None]
        moved = fn(np.moveaxis(wide, -1, 0), bounds)
        return np.ascontiguousarray(np.moveaxis(moved, 0, -1)[..., 0])
    moved = fn(np.moveaxis(wide, ivd, 0), bounds)
    return np.ascontiguousarray(np.moveaxis(moved, 0, ivd))


class GatherClampOffByOne(Mutant):
    """gather clamping each start index to [0, dim - slice_size - 1] (an off-by-one in
    the clamp bound): the last in-bounds window is read one element early."""

    ops, family, batched = ("gather",), "index clamping", False

    def mutate(self, sig, inputs, outputs, oracle):
        x, idx = inputs

        def fn(comps, bounds):
            out = comps.copy()
            for k, b in enumerate(bounds):
                if b >= 1:
                    out[k] = np.where(comps[k] >= b, b - 1, comps[k])
            return out
        return _evaluate(sig, [x, _remap_gather_indices(sig, idx, fn)])

    @classmethod
    def witness(cls):
        return Case.make("gather", [fp([0, 1, 2, 3], "si32"), fp([2], "si32")],
                         ["tensor<2xsi32>"],
                         {"offset_dims": [0], "collapsed_slice_dims": [],
                          "operand_batching_dims": [], "start_indices_batching_dims": [],
                          "start_index_map": [0],
                          "index_vector_dim": 0, "slice_sizes": [2],
                          "indices_are_sorted": False})


class GatherAssumesSortedStartIndexMap(Mutant):
    """gather reading index component k as operand dimension sorted(start_index_map)[k]
    (a lowering that assumes the map is in increasing order, as it usually is)."""

    ops, family, batched = ("gather",), "index clamping", False

    def applies(self, sig):
        m = list(sig.attributes["start_index_map"])
        return m != sorted(m)

    def mutate(self, sig, inputs, outputs, oracle):
        a = dict(sig.attributes)
        a["start_index_map"] = sorted(a["start_index_map"])
        return _evaluate(sig, inputs, attributes=a)

    @classmethod
    def witness(cls):
        operand = np.arange(9, dtype=np.int32).reshape(3, 3)
        return Case.make("gather", [operand, fp([0, 2], "si32")], ["tensor<1x1xsi32>"],
                         {"offset_dims": [0, 1], "collapsed_slice_dims": [],
                          "operand_batching_dims": [], "start_indices_batching_dims": [],
                          "start_index_map": [1, 0], "index_vector_dim": 0,
                          "slice_sizes": [1, 1], "indices_are_sorted": False})


class GatherOutOfBoundsWraps(Mutant):
    """gather taking an out-of-bounds start index modulo the number of valid starts
    instead of clamping it."""

    ops, family, batched = ("gather",), "index clamping", False
    equivalent = ("an out-of-bounds gather slice is implementation-defined (specs/ops/"
                  "gather.yaml out_of_bounds); the wrapped start still lands in range")

    def mutate(self, sig, inputs, outputs, oracle):
        x, idx = inputs

        def fn(comps, bounds):
            out = comps.copy()
            for k, b in enumerate(bounds):
                if b >= 0:
                    out[k] = np.where((comps[k] < 0) | (comps[k] > b),
                                      np.mod(comps[k], b + 1), comps[k])
            return out
        return _evaluate(sig, [x, _remap_gather_indices(sig, idx, fn)])

    @classmethod
    def witness(cls):
        return Case.make("gather", [fp([0, 1, 2, 3], "si32"), fp([4], "si32")],
                         ["tensor<2xsi32>"],
                         {"offset_dims": [0], "collapsed_slice_dims": [],
                          "operand_batching_dims": [], "start_indices_batching_dims": [],
                          "start_index_map": [0],
                          "index_vector_dim": 0, "slice_sizes": [2],
                          "indices_are_sorted": False})


class ScatterUpdateArgumentsSwapped(Mutant):
    """scatter calling its update computation as f(update, current) instead of
    f(current, update): wrong for every non-commutative update (subtract, replace)."""

    ops, family, batched = ("scatter",), "argument order", False

    def applies(self, sig):
        return bool(sig.regions)

    def mutate(self, sig, inputs, outputs, oracle):
        n = len(sig.result_leaves)

        def swap(m):
            i = int(m.group(1))
            return f"arg{i + n if i < n else i - n}"
        region = sig.regions[0]
        head, arrow, body = region.partition("->")
        return _evaluate(sig, inputs, regions=(head + arrow + re.sub(r"\barg(\d+)\b", swap,
                                                                     body),))

    @classmethod
    def witness(cls):
        sig = Signature.make(
            "scatter", ["tensor<3xsi32>", "tensor<1x1xsi32>", "tensor<1xsi32>"],
            ["tensor<3xsi32>"],
            {"update_window_dims": [], "inserted_window_dims": [0],
             "input_batching_dims": [], "scatter_indices_batching_dims": [],
             "scatter_dims_to_operand_dims": [0], "index_vector_dim": 1,
             "indices_are_sorted": False, "unique_indices": False},
            regions=("(si32, si32) -> subtract(arg0, arg1)",))
        return Case(sig, (fp([10, 20, 30], "si32"), fp([[1]], "si32"), fp([5], "si32")))


# ======================================================================================
# sort
# ======================================================================================

def _sort_ties_reversed(sig, inputs):
    d = sig.attributes["dimension"] % max(sig.input_types[0].rank, 1)
    rev = [np.flip(x, axis=d) if x.ndim else x for x in inputs]
    return _evaluate(sig, rev)


def _sort_case(keys, values, stable, direction="LT", ctype="SIGNED", t="si32"):
    sig = Signature.make("sort", [f"tensor<{len(keys)}x{t}>", f"tensor<{len(keys)}xsi32>"],
                         [f"tensor<{len(keys)}x{t}>", f"tensor<{len(keys)}xsi32>"],
                         {"dimension": 0, "is_stable": stable},
                         regions=(f"({t}, {t}, si32, si32) -> compare(arg0, arg1, "
                                  f"'{direction}', '{ctype}')",))
    return Case(sig, (fp(keys, t), fp(values, "si32")))


class SortStableTiesReversed(Mutant):
    """sort with is_stable = true giving equal keys in reverse input order (an unstable
    algorithm used whatever the flag says)."""

    ops, family, batched = ("sort",), "comparator orders", False

    def applies(self, sig):
        return sig.attributes["is_stable"] and sig.input_types[0].rank > 0

    def mutate(self, sig, inputs, outputs, oracle):
        return _sort_ties_reversed(sig, inputs)

    @classmethod
    def witness(cls):
        return _sort_case([1, 1], [0, 1], True)


class SortUnstableTiesReversed(Mutant):
    """sort with is_stable = false giving equal keys in reverse input order."""

    ops, family, batched = ("sort",), "comparator orders", False
    equivalent = ("with is_stable = false the order of elements the comparator considers "
                  "equal is not specified (specs/ops/sort.yaml order_of_equal_elements)")

    def applies(self, sig):
        return not sig.attributes["is_stable"] and sig.input_types[0].rank > 0

    def mutate(self, sig, inputs, outputs, oracle):
        return _sort_ties_reversed(sig, inputs)

    @classmethod
    def witness(cls):
        return _sort_case([1, 1], [0, 1], False)


class SortOnlyFirstOperandPermuted(Mutant):
    """sort of several operands permuting only the first one and returning the others
    unchanged (the values' permutation forgotten by a keys-only sort kernel)."""

    ops, family, batched = ("sort",), "comparator orders", False

    def applies(self, sig):
        return len(sig.input_types) > 1

    def mutate(self, sig, inputs, outputs, oracle):
        return [outputs[0]] + [np.array(x) for x in inputs[1:]]

    @classmethod
    def witness(cls):
        return _sort_case([2, 1], [0, 1], True)


class SortTotalOrderAsFloat(Mutant):
    """sort whose comparator's TOTALORDER compare is lowered as a FLOAT compare: -0 and
    +0 become equal (kept in input order) and NaNs unordered."""

    ops, family, batched = ("sort",), "comparator orders", False

    def applies(self, sig):
        return bool(sig.regions) and "TOTALORDER" in sig.regions[0]

    def mutate(self, sig, inputs, outputs, oracle):
        return _evaluate(sig, inputs, regions=(sig.regions[0].replace("TOTALORDER", "FLOAT"),))

    @classmethod
    def witness(cls):
        return _sort_case([0.0, -0.0], [0, 1], True, "LT", "TOTALORDER", "f32")


class SortNegativeDimensionAsZero(Mutant):
    """sort with a negative dimension (counted from the end) sorting along dimension 0
    instead."""

    ops, family, batched = ("sort",), "dimension numbers", False

    def applies(self, sig):
        return sig.attributes["dimension"] < 0

    def mutate(self, sig, inputs, outputs, oracle):
        return _evaluate(sig, inputs, attributes={**sig.attributes, "dimension": 0})

    @classmethod
    def witness(cls):
        sig = Signature.make("sort", ["tensor<2x2xsi32>"], ["tensor<2x2xsi32>"],
                             {"dimension": -1, "is_stable": True},
                             regions=("(si32, si32) -> compare(arg0, arg1, 'LT', 'SIGNED')",))
        return Case(sig, (fp([[2, 1], [0, 3]], "si32"),))


# ======================================================================================
# reduction
# ======================================================================================

def _reduce_case(values, init, dims, body, t="f32"):
    n = len(values)
    sig = Signature.make("reduce", [f"tensor<{n}x{t}>", f"tensor<{t}>"],
                         [f"tensor<{t}>" if dims else f"tensor<{n}x{t}>"],
                         {"dimensions": dims}, regions=(f"({t}, {t}) -> {body}",))
    return Case(sig, (fp(values, t), fp(init, t)))


def _reduce_results(sig, op: str) -> list[int]:
    """The results k of a reduce whose body computes ``op(arg k, arg N+k)``."""
    from conformance.specs.expressions import _region_calls
    n = len(sig.result_leaves)
    if not sig.regions:
        return []
    return [k for k, (name, args) in enumerate(_region_calls(sig.regions[0])[:n])
            if name == op and sorted(args) == [k, n + k]]


class ReduceNoDimensionsFoldedAway(Mutant):
    """reduce over no dimensions folded to its operands by a simplifier (a reduction
    over nothing taken for the identity): the init value is never applied (the oracle
    gives body(init, operand))."""

    ops, family, batched = ("reduce",), "reduction", False
    equivalent = ("the spec's schedule intersperses 'an implementation-defined amount of "
                  "init_values' (specs/ops/reduce.yaml init_value_count): with one leaf, "
                  "none at all is allowed")

    def applies(self, sig):
        return not sig.attributes["dimensions"]

    def mutate(self, sig, inputs, outputs, oracle):
        # (converted to the result's type: a body promoted to a wider type, issue 30,
        # returns Ei, and the spec converts the inputs to it first)
        return [np.asarray(x).astype(t.element_type.dtype)
                for x, t in zip(inputs, sig.result_leaves)]

    @classmethod
    def witness(cls):
        return _reduce_case([1.0, 2.0], 10.0, [], "add(arg0, arg1)")


class ReduceAccumulatorStartsAtZero(Mutant):
    """A reduction kernel that initialises its accumulators with zero and never reads
    init_values (right for sums, wrong for products, max/min and every other init)."""

    ops, family, batched = ("reduce",), "reduction", False

    def mutate(self, sig, inputs, outputs, oracle):
        n = len(sig.result_leaves)
        zeros = [np.zeros_like(x) for x in inputs[n:]]
        return _evaluate(sig, list(inputs[:n]) + zeros)

    @classmethod
    def witness(cls):
        return _reduce_case([-1.0, -2.0], -np.inf, [0], "maximum(arg0, arg1)")


class ReduceWindowSumInitNegated(Mutant):
    """reduce_window sums whose init constant is materialised with its sign flipped (a
    sign bug in the constant folding of the init value, which leaves a zero alone): R - e
    instead of R + e. Only the rows whose init value is no identity (not ±0) meet it,
    which the suite masked before issue 32 (item 2)."""

    ops, family, batched = ("reduce_window",), "reduction", False

    def applies(self, sig):
        n = len(sig.result_leaves)
        return any((et_in(sig, k).is_float or et_in(sig, k).is_complex)
                   for k in _reduce_results(sig, "add") if k < n)

    def mutate(self, sig, inputs, outputs, oracle):
        n = len(sig.result_leaves)
        new = list(inputs)
        for k in _reduce_results(sig, "add"):
            if et_in(sig, k).is_float or et_in(sig, k).is_complex:
                e = np.asarray(inputs[n + k])
                new[n + k] = np.where(e == 0, e, -e).astype(e.dtype)    # ±0 kept
        return _evaluate(sig, new)

    @classmethod
    def witness(cls):
        sig = Signature.make("reduce_window", ["tensor<3xf32>", "tensor<f32>"],
                             ["tensor<2xf32>"],
                             {"window_dimensions": [2], "window_strides": [1],
                              "base_dilations": [1], "window_dilations": [1],
                              "padding": "dense<[[0, 0]]> : tensor<1x2xi64>"},
                             regions=("(f32, f32) -> add(arg0, arg1)",))
        return Case(sig, (fp([1.0, 2.0, 3.0], "f32"), fp(10.0, "f32")))


class ReduceSumDemotesToBf16(Mutant):
    """f32 sum reductions whose operand is demoted to bf16 by a mixed-precision pass
    (the accumulator stays f32): every addend loses 16 bits."""

    ops, family, batched = ("reduce",), "precision loss", False

    def applies(self, sig):
        return any(et_in(sig, k).name == "f32" for k in _reduce_results(sig, "add"))

    def mutate(self, sig, inputs, outputs, oracle):
        new = list(inputs)
        for k in _reduce_results(sig, "add"):
            if et_in(sig, k).name == "f32":
                new[k] = rt(new[k].astype(np.float64), element_type("bf16")).astype(np.float32)
        return _evaluate(sig, new)

    @classmethod
    def witness(cls):
        return _reduce_case([1.001, 1.0], 0.0, [0], "add(arg0, arg1)")


class ReduceMaxDropsNaN(Mutant):
    """max reductions built on ``maxps`` trees that drop NaN operands: a NaN among the
    reduced elements does not reach the result (NaN-propagating maximum expected)."""

    ops, family, batched = ("reduce",), "NaN propagation", False

    def applies(self, sig):
        return any(et_in(sig, k).is_float for k in _reduce_results(sig, "maximum"))

    def mutate(self, sig, inputs, outputs, oracle):
        new = list(inputs)
        for k in _reduce_results(sig, "maximum"):
            x = new[k]
            if et_in(sig, k).is_float:
                new[k] = np.where(np.isnan(x.astype(np.float64)), np.array(-np.inf, x.dtype), x)
        return _evaluate(sig, new)

    @classmethod
    def witness(cls):
        return _reduce_case([np.nan, 1.0], -np.inf, [0], "maximum(arg0, arg1)")


# ======================================================================================
# tuples
# ======================================================================================

class GetTupleElementFromEnd(Mutant):
    """get_tuple_element counting the index from the end of the tuple."""

    ops, family, batched = ("get_tuple_element",), "tuples", False

    def mutate(self, sig, inputs, outputs, oracle):
        (tup,) = unflatten(list(inputs), sig.input_types)
        i = sig.attributes["index"]
        return [np.array(x) for x in flatten([tup[len(tup) - 1 - i]])]

    @classmethod
    def witness(cls):
        sig = Signature.make("get_tuple_element", ["tuple<tensor<f32>, tensor<f32>>"],
                             ["tensor<f32>"], {"index": 0})
        return Case(sig, (fp(1.0, "f32"), fp(2.0, "f32")))


class TupleReversed(Mutant):
    """tuple building its elements in reverse order (operands pushed on a stack and
    popped into the tuple)."""

    ops, family, batched = ("tuple",), "tuples", False

    def mutate(self, sig, inputs, outputs, oracle):
        vals = unflatten(list(inputs), sig.input_types)
        return [np.array(x) for x in flatten(list(reversed(vals)))]

    @classmethod
    def witness(cls):
        sig = Signature.make("tuple", ["tensor<f32>", "tensor<f32>"],
                             ["tuple<tensor<f32>, tensor<f32>>"])
        return Case(sig, (fp(1.0, "f32"), fp(2.0, "f32")))


class OptimizationBarrierRotates(Mutant):
    """optimization_barrier returning its operands rotated by one (results wired to the
    wrong operands)."""

    ops, family, batched = ("optimization_barrier",), "tuples", False

    def applies(self, sig):
        return len(sig.input_types) > 1

    def mutate(self, sig, inputs, outputs, oracle):
        return [np.array(x) for x in list(inputs[1:]) + list(inputs[:1])]

    @classmethod
    def witness(cls):
        return Case.make("optimization_barrier", [fp(1.0, "f32"), fp(2.0, "f32")],
                         ["tensor<f32>", "tensor<f32>"])


class ConstantCanonicalisesNaN(Mutant):
    """constant materialising every NaN of its literal as the default quiet NaN (a
    constant folder that goes through a float and loses the payload and sign): constant
    is a copy of its literal, bits included (the suite judges it by ``bits``)."""

    ops, family, elementwise = ("constant",), "NaN payloads", False

    def applies(self, sig):
        return sig.result_types[0].element_type.is_float

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        return [np.where(np.isnan(r.astype(np.float64)), nan_bits(r.dtype), r)]

    @classmethod
    def witness(cls):
        sig = Signature.make("constant", [], ["tensor<f32>"],
                             {"value": "dense<0xFFC00001> : tensor<f32>"})
        return Case(sig, ())


# ======================================================================================
# collectives (the process grid: inputs and results [processes] + shape, one case)
# ======================================================================================

def _with_attributes(sig: Signature, **changes) -> Signature:
    """``sig`` with some attributes replaced (grid, regions and types kept)."""
    items = Signature.make(sig.op, [], [], {**sig.attributes, **changes}).attribute_items
    return dataclasses.replace(sig, attribute_items=items)


def _evaluate_on_grid(sig: Signature, inputs) -> list[np.ndarray]:
    """The oracle on one case of ``sig``, on its process grid (or 1x1)."""
    return list(oracles.evaluate_case(Case(sig, tuple(np.asarray(x) for x in inputs))))


def _groups(sig: Signature) -> list[list[int]]:
    return [list(g) for g in sig.attributes.get("replica_groups", [])]


def _collective_case(op, x, result, attrs, grid, region=None) -> Case:
    sig = Signature.make(op, [TensorType(x.shape[1:], element_type(x.dtype))], [result],
                         attrs, num_replicas=grid[0], num_partitions=grid[1],
                         regions=(region,) if region else ())
    return Case(sig, (x,))


class AllReduceIgnoresReplicaGroups(Mutant):
    """all_reduce reducing over every process of the domain whatever replica_groups say
    (the groups dropped on the way to the runtime, whose default is one group of all)."""

    ops, family, batched = ("all_reduce",), "collectives", False

    def applies(self, sig):
        return len(_groups(sig)) > 1

    def mutate(self, sig, inputs, outputs, oracle):
        everyone = sorted(i for g in _groups(sig) for i in g)
        return _evaluate_on_grid(_with_attributes(sig, replica_groups=[everyone]), inputs)

    @classmethod
    def witness(cls):
        x = fp([1, 2, 3, 4], "si32")
        return _collective_case("all_reduce", x, "tensor<si32>",
                                {"replica_groups": [[0, 1], [2, 3]], "channel_id": 0,
                                 "use_global_device_ids": False}, (4, 1),
                                "(si32, si32) -> add(arg0, arg1)")


class AllGatherReversedGroupOrder(Mutant):
    """all_gather concatenating the group's operands in reverse group order (a ring
    all-gather whose ring runs the other way round)."""

    ops, family, batched = ("all_gather",), "collectives", False

    def applies(self, sig):
        return any(len(g) > 1 for g in _groups(sig))

    def mutate(self, sig, inputs, outputs, oracle):
        rev = [list(reversed(g)) for g in _groups(sig)]
        return _evaluate_on_grid(_with_attributes(sig, replica_groups=rev), inputs)

    @classmethod
    def witness(cls):
        x = fp([[1], [2]], "si32")
        return _collective_case("all_gather", x, "tensor<2xsi32>",
                                {"all_gather_dim": 0, "replica_groups": [[0, 1]],
                                 "channel_id": 0, "use_global_device_ids": False}, (2, 1))


class _GroupsSorted(Mutant):
    """A collective run as if each of its replica groups listed its ids in ascending
    order (a communicator built from the sorted ranks); applies where one does not."""

    family, batched = "collectives", False

    def applies(self, sig):
        return any(g != sorted(g) for g in _groups(sig))

    def mutate(self, sig, inputs, outputs, oracle):
        ordered = [sorted(g) for g in _groups(sig)]
        return _evaluate_on_grid(_with_attributes(sig, replica_groups=ordered), inputs)


class ReduceScatterShardsByAscendingId(_GroupsSorted):
    """reduce_scatter handing out the shards by the processes' ascending ids instead of
    their order in the group: in a group [1, 0], process 1 gets shard 1, not shard 0."""

    ops = ("reduce_scatter",)

    @classmethod
    def witness(cls):
        x = fp([[1, 2], [10, 20]], "si32")
        return _collective_case("reduce_scatter", x, "tensor<1xsi32>",
                                {"scatter_dimension": 0, "replica_groups": [[1, 0]],
                                 "channel_id": 0, "use_global_device_ids": False}, (2, 1),
                                "(si32, si32) -> add(arg0, arg1)")


class AllToAllGroupsInAscendingOrder(_GroupsSorted):
    """all_to_all exchanging within each group as if its ids were listed in ascending
    order (a communicator built from the sorted ranks): in a group [1, 0], process 1
    receives part 1 of each operand, not part 0, and the parts arrive in another order."""

    ops = ("all_to_all",)

    @classmethod
    def witness(cls):
        x = fp([[1, 2], [3, 4]], "si32")
        return _collective_case("all_to_all", x, "tensor<2xsi32>",
                                {"split_dimension": 0, "concat_dimension": 0,
                                 "split_count": 2, "replica_groups": [[1, 0]],
                                 "channel_id": 0}, (2, 1))


class CollectivePermuteSourceTargetSwapped(Mutant):
    """collective_permute reading each source_target_pair as [target, source]: data
    flows backwards along every pair (a send/recv pair wired the wrong way)."""

    ops, family, batched = ("collective_permute",), "collectives", False

    def applies(self, sig):
        pairs = {tuple(p) for p in sig.attributes["source_target_pairs"]}
        return pairs != {(t, s) for s, t in pairs}

    def mutate(self, sig, inputs, outputs, oracle):
        swapped = [[t, s] for s, t in sig.attributes["source_target_pairs"]]
        return _evaluate_on_grid(_with_attributes(sig, source_target_pairs=swapped), inputs)

    @classmethod
    def witness(cls):
        x = fp([1, 2, 3], "si32")
        return _collective_case("collective_permute", x, "tensor<si32>",
                                {"source_target_pairs": [[0, 1], [1, 2]], "channel_id": 0},
                                (3, 1))


class ReplicaIdIsDeviceId(Mutant):
    """replica_id returning the process's flattened device id (replica_id *
    num_partitions + partition_id) instead of its replica id: wrong on every grid with
    several partitions."""

    ops, family, batched = ("replica_id",), "collectives", False

    def applies(self, sig):
        return sig.num_partitions > 1

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        return [np.arange(r.shape[0], dtype=r.dtype).reshape(r.shape)]

    @classmethod
    def witness(cls):
        sig = Signature.make("replica_id", [], ["tensor<ui32>"], num_replicas=2,
                             num_partitions=2)
        return Case(sig, ())


# ======================================================================================
# control flow (if, case, while): regions are region programs
# ======================================================================================

def _region(arguments, operations, results, block: int) -> str:
    from conformance.core import region_program
    from conformance.core.program import Operation
    ops = [Operation(Signature.make(op, ins, outs, attrs), tuple(operands), name)
           for name, op, operands, ins, outs, attrs in operations]
    return region_program.make(arguments, ops, results, block=block)


def _counting_loop(start: int, bound: int) -> Case:
    """while (counter < bound) counter += 1, from ``start``."""
    t = "tensor<si32>"
    args = [("arg0", t), ("arg1", t)]
    cond = _region(args, [("v0", "compare", ["arg0", "arg1"], [t, t], ["tensor<i1>"],
                           {"comparison_direction": "LT", "compare_type": "SIGNED"})],
                   ["v0"], 2)
    body = _region(args, [("v0", "constant", [], [], [t], {"value": "dense<1> : tensor<i32>"}),
                          ("v1", "add", ["arg0", "v0"], [t, t], [t], {})], ["v1", "arg1"], 2)
    sig = Signature.make("while", [t, t], [t, t], regions=(cond, body))
    return Case(sig, (fp(start, "si32"), fp(bound, "si32")))


def _pick(op: str, first: list, t="tensor<si32>", n: int = 2) -> Case:
    """``op`` (if or case) choosing among ``n`` branches; branch k returns captured k."""
    args = [(f"arg{k}", t) for k in range(n)]
    branches = tuple(_region(args, [], [f"arg{k}"], 0) for k in range(n))
    sel = "tensor<i1>" if op == "if" else "tensor<si32>"
    sig = Signature.make(op, [sel] + [t] * n, [t], regions=branches)
    return Case(sig, tuple(first) + tuple(fp(10 * (k + 1), "si32") for k in range(n)))


class IfBranchesSwapped(Mutant):
    """if lowered to an N-way conditional with the predicate converted to the branch
    index (true -> 1), so that pred = true runs false_branch and pred = false
    true_branch."""

    ops, family = ("if",), "control flow"

    def mutate(self, sig, inputs, outputs, oracle):
        return list(oracle([np.logical_not(inputs[0])] + list(inputs[1:])))

    @classmethod
    def witness(cls):
        return _pick("if", [np.array(True)])


class CaseNegativeIndexFirstBranch(Mutant):
    """case clamping its index into [0, N-1] (as jax's lax.switch does): a negative index
    runs branch 0, where the spec runs the last branch (003 "### case")."""

    ops, family = ("case",), "control flow"

    def mutate(self, sig, inputs, outputs, oracle):
        return list(oracle([np.maximum(inputs[0], 0)] + list(inputs[1:])))

    @classmethod
    def witness(cls):
        return _pick("case", [fp(-1, "si32")], n=3)


def _run_body_once(sig: Signature, state) -> list[np.ndarray]:
    """One run of a while's body on the loop state of one case, or of a batch (the
    state then has a leading batch axis)."""
    from conformance.oracles import control_flow
    batched = np.ndim(state[0]) == sig.input_leaves[0].rank + 1
    xs = [np.asarray(x) if batched else np.asarray(x)[None] for x in state]
    values, _ = control_flow.run_body(sig.regions[1], xs)
    out = [np.broadcast_to(np.asarray(v), x.shape).astype(x.dtype) for v, x in zip(values, xs)]
    return out if batched else [o[0] for o in out]


class WhileCondAfterBody(Mutant):
    """while lowered as a do-while (the loop rotated without its guard): the body runs
    once before cond is first evaluated, so a loop that should run 0 trips runs 1."""

    ops, family = ("while",), "control flow"

    def mutate(self, sig, inputs, outputs, oracle):
        return list(oracle(_run_body_once(sig, inputs)))

    @classmethod
    def witness(cls):
        return _counting_loop(5, 3)


class WhileOneTripTooMany(Mutant):
    """while that runs its body once more after cond turns false (an off-by-one in the
    loop test: the exit checked after the increment)."""

    ops, family = ("while",), "control flow"

    def mutate(self, sig, inputs, outputs, oracle):
        return _run_body_once(sig, outputs)

    @classmethod
    def witness(cls):
        return _counting_loop(0, 2)


# ======================================================================================
# call, composite
# ======================================================================================

class CallBindsArgumentsByType(Mutant):
    """call whose inliner binds each callee argument to the first operand of the same
    type (a lookup by type, not by position): a callee reading its second si32 argument
    gets the first."""

    ops, family = ("call",), "call and composite"

    @staticmethod
    def _binding(sig) -> list[int]:
        types = list(sig.input_types)
        return [types.index(t) for t in types]

    def applies(self, sig):
        return self._binding(sig) != list(range(len(sig.input_types)))

    def mutate(self, sig, inputs, outputs, oracle):
        return list(oracle([inputs[j] for j in self._binding(sig)]))

    @classmethod
    def witness(cls):
        t = "tensor<si32>"
        callee = _region([("arg0", t), ("arg1", t)], [], ["arg1"], 2)
        sig = Signature.make("call", [t, t], [t], regions=(callee,))
        return Case(sig, (fp(1, "si32"), fp(2, "si32")))


class CompositeConstantsElided(Mutant):
    """composite whose decomposition went through MLIR text printed with large elements
    attributes elided (``dense_resource<__elided__>``): its constants come back as
    zeros."""

    ops, family, batched = ("composite",), "call and composite", False

    @staticmethod
    def _elided(text: str) -> str:
        from conformance.core import region_program
        from conformance.core.dense import dense_text
        body = region_program.parse(text)
        ops = []
        for o in body.program.operations:
            if o.op == "constant":
                (t,) = o.signature.result_types
                zero = dense_text(np.zeros(t.shape, t.element_type.dtype))
                o = dataclasses.replace(o, signature=_with_attributes(o.signature, value=zero))
            ops.append(o)
        program = dataclasses.replace(body.program, operations=tuple(ops))
        return region_program.text(region_program.Body(program, body.block))

    def applies(self, sig):
        return bool(sig.regions) and '"op":"constant"' in sig.regions[0]

    def mutate(self, sig, inputs, outputs, oracle):
        return _evaluate(sig, inputs, regions=(self._elided(sig.regions[0]),))

    @classmethod
    def witness(cls):
        t = "tensor<2xsi32>"
        decomposition = _region(
            [("arg0", t)], [("v0", "constant", [], [], [t], {"value": "dense<[1, 2]> : "
                                                             "tensor<2xi32>"}),
                            ("v1", "add", ["arg0", "v0"], [t, t], [t], {})], ["v1"], 1)
        sig = Signature.make("composite", [t], [t],
                             {"name": "my_namespace.my_op", "composite_attributes": "{}",
                              "version": 0}, regions=(decomposition,))
        return Case(sig, (fp([5, 6], "si32"),))


class CompositeFusesMultiplyAdd(Mutant):
    """composite whose float decomposition has an add of a multiply's result contracted
    into one fused multiply-add (the product kept exact, one rounding), as XLA on CPU
    does (issue 32 item 1: the erf-like decomposition's ``x*x*(-0.375) + 1.125``), here
    also in bf16 and f16 decompositions, which XLA leaves alone: not the bug jax-cpu
    lists (its f32/f64 entries), so not ``listed_in``. Only a plan holding a float
    decomposition that computes meets it."""

    ops, family, batched = ("composite",), "call and composite", False

    @staticmethod
    def _fused(text: str) -> str | None:
        """The decomposition with every add(multiply(a, b), c) of bf16/f16/f32 values
        computed as convert(add(multiply(a', b'), c')) in f64 (the product exact, the sum
        rounded to f64 and then once more: an FMA but for a double rounding); None
        where there is none."""
        from conformance.core import region_program
        from conformance.core.program import Operation
        body = region_program.parse(text)
        made = {o.name: o for o in body.program.operations}
        out, changed = [], False
        for o in body.program.operations:
            t = o.signature.result_types[0] if o.signature.result_types else None
            m = next((made.get(x) for x in o.operands if made.get(x) is not None
                      and made[x].op == "multiply"), None) if o.op == "add" else None
            if m is None or t.element_type.name not in ("bf16", "f16", "f32"):
                out.append(o)
                continue
            w = TensorType(t.shape, element_type("f64"))
            c = next(x for x in o.operands if x != m.name) if o.operands.count(m.name) == 1 \
                else m.name
            wide = []
            for x in (*m.operands, c):
                wide.append(Operation(Signature.make("convert", [t], [w]), (x,),
                                      f"{o.name}_w{len(wide)}"))
            prod = Operation(Signature.make("multiply", [w, w], [w]),
                             (wide[0].name, wide[1].name), f"{o.name}_p")
            total = Operation(Signature.make("add", [w, w], [w]), (prod.name, wide[2].name),
                              f"{o.name}_s")
            out += [*wide, prod, total,
                    Operation(Signature.make("convert", [w], [t]), (total.name,), o.name)]
            changed = True
        if not changed:
            return None
        program = dataclasses.replace(body.program, operations=tuple(out))
        return region_program.text(region_program.Body(program, body.block))

    def applies(self, sig):
        return bool(sig.regions) and '"op":"multiply"' in sig.regions[0] \
            and self._fused(sig.regions[0]) is not None

    def mutate(self, sig, inputs, outputs, oracle):
        return _evaluate(sig, inputs, regions=(self._fused(sig.regions[0]),))

    @classmethod
    def witness(cls):
        t = "tensor<f32>"
        decomposition = _region(
            [("p0", t)], [("c0", "constant", [], [], [t], {"value": "dense<1.125> : tensor<f32>"}),
                          ("c1", "constant", [], [], [t], {"value": "dense<-0.375> : tensor<f32>"}),
                          ("x2", "multiply", ["p0", "p0"], [t, t], [t], {}),
                          ("t1", "multiply", ["x2", "c1"], [t, t], [t], {}),
                          ("t2", "add", ["t1", "c0"], [t, t], [t], {}),
                          ("t3", "multiply", ["p0", "t2"], [t, t], [t], {})], ["t3"], 1)
        sig = Signature.make("composite", [t], [t],
                             {"name": "my_namespace.my_op", "composite_attributes": "{}",
                              "version": 0}, regions=(decomposition,))
        return Case(sig, (fp(1.597127079963684, "f32"),))


class SelectAndScatterSumInitNegated(Mutant):
    """select_and_scatter whose scatter is a float sum and whose init constant is
    materialised with its sign flipped (a zero left alone): S - e instead of S + k·e.
    Only the rows whose init value is no identity meet it, which the suite masked before
    issue 32 (item 2)."""

    ops, family, batched = ("select_and_scatter",), "reduction", False

    def applies(self, sig):
        from conformance.specs.expressions import _region_calls
        calls = _region_calls(sig.regions[1]) if len(sig.regions) > 1 else []
        return bool(calls) and calls[0][0] == "add" and \
            (et_in(sig, 1).is_float or et_in(sig, 1).is_complex)

    def mutate(self, sig, inputs, outputs, oracle):
        new = list(inputs)
        e = np.asarray(inputs[2])
        new[2] = np.where(e == 0, e, -e).astype(e.dtype)
        return _evaluate(sig, new)

    @classmethod
    def witness(cls):
        t = "tensor<4xf32>"
        sig = Signature.make("select_and_scatter", [t, "tensor<2xf32>", "tensor<f32>"], [t],
                             {"window_dimensions": [2], "window_strides": [2],
                              "padding": "dense<[[0, 0]]> : tensor<1x2xi64>"},
                             regions=("(f32, f32) -> compare(arg0, arg1, 'GE', 'FLOAT')",
                                      "(f32, f32) -> add(arg0, arg1)"))
        return Case(sig, (fp([1.0, 3.0, 2.0, 0.0], "f32"), fp([5.0, 7.0], "f32"),
                          fp(10.0, "f32")))


# ======================================================================================
# XLA's forms: binary ops with broadcast_dimensions, set_dimension_size, rng_bernoulli
# ======================================================================================

def _trailing_dimensions(sig: Signature) -> list[int] | None:
    """Where the lower-rank operand aligned with the trailing dimensions (numpy's
    implicit broadcasting) gives the result's shape but another mapping than
    broadcast_dimensions: those dimensions; else None."""
    lhs, rhs = (t.shape for t in sig.input_types[:2])
    if len(lhs) == len(rhs):
        return None
    low, high = (lhs, rhs) if len(lhs) < len(rhs) else (rhs, lhs)
    trailing = list(range(len(high) - len(low), len(high)))
    if trailing == list(sig.attributes["broadcast_dimensions"]):
        return None
    try:
        shape = np.broadcast_shapes(tuple(low), tuple(high))
    except ValueError:
        return None
    return trailing if tuple(shape) == tuple(sig.result_types[0].shape) else None


class BroadcastDimensionsIgnored(Mutant):
    """XLA's binary ops and compare with broadcast_dimensions lowered with the attribute
    dropped: the lower-rank operand is aligned with the trailing dimensions (numpy's
    implicit broadcasting, chlo's default) instead of the dimensions it names."""

    ops = ("binary_with_broadcast_dimensions", "compare_with_broadcast_dimensions")
    family, batched = "broadcasting", False

    def applies(self, sig):
        return _trailing_dimensions(sig) is not None

    def mutate(self, sig, inputs, outputs, oracle):
        dims = _trailing_dimensions(sig)
        return _evaluate(sig, inputs, attributes={**sig.attributes,
                                                  "broadcast_dimensions": dims})

    @classmethod
    def witness(cls):
        return Case.make("compare_with_broadcast_dimensions",
                         [fp([1, 5], "si32"), fp([[1, 1], [5, 5]], "si32")],
                         ["tensor<2x2xi1>"],
                         {"operation": "compare", "broadcast_dimensions": [0],
                          "comparison_direction": "EQ", "compare_type": "SIGNED"})


def _reversed_dimensions(sig: Signature) -> list[int] | None:
    """broadcast_dimensions reversed, where that gives the result's shape too and
    another mapping; else None."""
    lhs, rhs = (t.shape for t in sig.input_types[:2])
    dims = list(sig.attributes["broadcast_dimensions"])
    if len(lhs) == len(rhs) or dims == dims[::-1]:
        return None
    low, high = (lhs, rhs) if len(lhs) < len(rhs) else (rhs, lhs)
    expanded = [1] * len(high)
    for j, d in enumerate(dims[::-1]):
        expanded[d] = low[j]
    try:
        shape = np.broadcast_shapes(tuple(expanded), tuple(high))
    except ValueError:
        return None
    return dims[::-1] if tuple(shape) == tuple(sig.result_types[0].shape) else None


class BroadcastDimensionsReversed(Mutant):
    """XLA's binary ops and compare with broadcast_dimensions read in reverse (the list
    taken for a minor-to-major layout order): the lower-rank operand's first dimension
    goes where its last should."""

    ops = ("binary_with_broadcast_dimensions", "compare_with_broadcast_dimensions")
    family, batched = "broadcasting", False

    def applies(self, sig):
        return _reversed_dimensions(sig) is not None

    def mutate(self, sig, inputs, outputs, oracle):
        # low dimension j onto high dimension dims[n-1-j]: the lower-rank operand
        # transposed end for end, then broadcast onto dims as they are (increasing)
        lhs, rhs = (np.asarray(x) for x in inputs)
        if lhs.ndim < rhs.ndim:
            lhs = np.ascontiguousarray(lhs.transpose())
        else:
            rhs = np.ascontiguousarray(rhs.transpose())
        return _evaluate(sig, [lhs, rhs])

    @classmethod
    def witness(cls):
        return Case.make("compare_with_broadcast_dimensions",
                         [fp([[1, 2], [3, 4]], "si32"), fp([[[1, 2], [3, 4]]] * 2, "si32")],
                         ["tensor<2x2x2xi1>"],
                         {"operation": "compare", "broadcast_dimensions": [1, 2],
                          "comparison_direction": "EQ", "compare_type": "SIGNED"})


class SetDimensionSizePadsDimensionZero(Mutant):
    """set_dimension_size treating dimension 0 as the dynamic one whatever ``dimension``
    says (a dynamic padder that assumes the batch dimension): elements past ``size``
    along dimension 0 are zeroed, valid elements among them."""

    ops, family, batched = ("set_dimension_size",), "dynamic shapes", False

    def applies(self, sig):
        return sig.attributes["dimension"] != 0

    def mutate(self, sig, inputs, outputs, oracle):
        (r,) = outputs
        size = int(np.asarray(inputs[1]))
        r = r.copy()
        if size >= 0:
            r[size:] = 0
        return [r]

    @classmethod
    def witness(cls):
        return Case.make("set_dimension_size", [fp([[1, 2], [3, 4]], "si32"), fp(1, "si32")],
                         ["tensor<2x2xsi32>"], {"dimension": 1})


class RngBernoulliComplement(Mutant):
    """rng_bernoulli drawing 1 where the uniform is at or above the mean (the compare's
    direction flipped): B(1, 1 - mean) instead of B(1, mean)."""

    ops, family, batched = ("rng_bernoulli",), "random numbers", False

    def mutate(self, sig, inputs, outputs, oracle):
        mean = float(np.asarray(inputs[0]))
        (r,) = outputs
        if not 0.0 <= mean <= 1.0:
            return [r]
        return [(1 - r).astype(r.dtype)]

    @classmethod
    def witness(cls):
        return Case.make("rng_bernoulli", [fp(0.0, "f32")], ["tensor<4xui32>"])


# ======================================================================================
# dot_general with a result of another kind
# ======================================================================================

def _dot_case(lhs, rhs, result: str) -> Case:
    return Case.make("dot_general", [lhs, rhs], [result],
                     {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
                      "lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0],
                      "precision_config": ["DEFAULT", "DEFAULT"]})


class DotGeneralUnsignedAsSigned(Mutant):
    """dot_general of unsigned integers with a float result converting the operands as
    signed (sign extension instead of zero extension): ui16 40000 counts as -25536."""

    ops, family = ("dot_general",), "conversion"

    def applies(self, sig):
        return et_in(sig).name in ("ui8", "ui16", "ui32") and et_out(sig).is_float

    def mutate(self, sig, inputs, outputs, oracle):
        signed = [np.asarray(x).view(np.dtype(f"i{np.asarray(x).dtype.itemsize}"))
                  for x in inputs]
        return list(oracle(signed))

    @classmethod
    def witness(cls):
        return _dot_case(fp([[40000, 1]], "ui16"), fp([[1], [1]], "ui16"), "tensor<1x1xf32>")


class DotGeneralSumWrappedAtOperandType(Mutant):
    """dot_general of si8 operands with a float result accumulating in an si8 register
    (wrapping) and converting the sum at the end: 100 + 100 gives -56."""

    ops, family, batched = ("dot_general",), "integer arithmetic", False
    equivalent = ("the spec's reduce of the element-wise multiply at the operands' type, "
                  "then converted, is the allowed alternative at_operand_type (specs/ops/"
                  "dot_general.yaml integer_result_type)")

    def applies(self, sig):
        return et_in(sig).is_integer and et_out(sig).is_float

    def mutate(self, sig, inputs, outputs, oracle):
        (t,) = sig.result_types
        (wrapped,) = oracles.evaluate(sig.op, inputs, sig.attributes,
                                      result_types=[TensorType(t.shape, et_in(sig))])
        return [rt(to_wide(wrapped).astype(np.float64), t.element_type)]

    @classmethod
    def witness(cls):
        return _dot_case(fp([[100, 100]], "si8"), fp([[1], [1]], "si8"), "tensor<1x1xf32>")


# ======================================================================================

def all_mutants() -> list[type[Mutant]]:
    """Every mutant class of this module, in definition order (not the shared bases,
    whose names start with ``_``)."""
    return [c for c in globals().values()
            if isinstance(c, type) and issubclass(c, Mutant) and c is not Mutant
            and not c.__name__.startswith("_")]


def by_name(name: str) -> type[Mutant]:
    for c in all_mutants():
        if c.__name__ == name:
            return c
    raise KeyError(name)
