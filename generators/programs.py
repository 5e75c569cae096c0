"""Programs of several ops (issue 19), drawn from the op specs.

A program is a DAG of 2..N operations in one function (conformance.core.program): each
operation's operands are the function's arguments, constants, or earlier results whose
types fit that op's signature. Two kinds of steps build it:

- a **spec step**: an op is drawn among those whose spec accepts an *anchor* value's
  element type (a recent value, so that chains form); its signature comes from the op's
  own signature builder (``generators.signatures.build``) with the anchor's element type
  bound and the anchor's shape as the first shape variable (a few draws; the one whose
  operands can best be filled with existing values wins); every other operand is an
  existing value of exactly that type (reuse), a new argument, or a constant;
- a **pattern step**: a shape that compilers rewrite (:data:`PATTERNS`): ``a*b+c``,
  ``x-x``, ``x*1``, ``x+0``, select of compares, reshape/transpose there and back, a
  slice of a concatenate, a convert there and back, a broadcast feeding an element-wise
  op, a reduction of an element-wise result, a double negation.

Every operation's signature is checked with ``conformance.specs.validity.violations``
as it is added; one that breaks a rule is never added (the step is dropped and counted
in :class:`Stats`: validity is measured, not assumed). Draws come from a numpy generator
seeded by ``(seed, index)`` only: the same seed gives the same programs in any process.

Argument values (:func:`draw_inputs`): an argument made for an op's operand is drawn as
that op's own input values are (``batch_inputs`` of its signature: the spec's ``values:``
distributions, reduce's identity init values, ...); other arguments by ``draw_array``.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import numpy as np

from conformance.core.case import Signature
from conformance.core.dense import dense_text
from conformance.core.program import Operation, Program
from conformance.core.types import NEWER_FLOAT_TYPES, TensorType, element_type
from conformance.specs import load_spec, op_names
from conformance.specs.validity import violations

from .signatures import Chooser, build
from .values import batch_inputs, draw_array

#: ops beyond the element-wise ones that steps may draw
STRUCTURAL = ("reshape", "transpose", "broadcast_in_dim", "slice", "concatenate", "reverse",
              "reduce")
#: element-wise ops left out: they change shapes (bitcast_convert) or are no stablehlo op
EXCLUDED = ("bitcast_convert",)

#: the programs' home element types and their weights
HOME_TYPES = (("f32", 6), ("f16", 2), ("bf16", 2), ("f64", 2), ("si32", 2), ("si8", 1),
              ("ui32", 1), ("ui8", 1), ("si64", 1), ("i1", 1), ("complex<f32>", 1))


@dataclasses.dataclass(frozen=True)
class Config:
    max_ops: int = 8                   # operations per program (at least 2)
    max_rank: int = 3
    max_side: int = 4
    pattern_share: float = 0.4         # steps that are a rewrite-prone pattern
    reuse: float = 0.5                 # an operand slot takes an existing value
    constant_share: float = 0.15       # a new operand is a constant
    ops: tuple[str, ...] | None = None          # the ops spec steps may draw (default: all)
    types: tuple[str, ...] | None = None        # home element types (default: HOME_TYPES)


@dataclasses.dataclass
class Stats:
    """Validity measured: signatures added, and steps dropped because one broke a rule."""

    added: int = 0
    rejected: int = 0
    reasons: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Drawn:
    """A generated program, the pattern names it holds, and how each argument's values are
    drawn: ``(signature, slot)`` of the op it was made for, or None (draw_array)."""

    program: Program
    patterns: tuple[str, ...]
    hints: tuple[tuple[str, Any], ...] = ()
    #: (pattern, names of the operations it added): which pattern an operation belongs to
    pattern_ops: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def patterns_of(self, value: str) -> tuple[str, ...]:
        """The patterns whose operations made ``value`` (``v3`` or ``v3#1``)."""
        name = value.split("#")[0]
        return tuple(p for p, names in self.pattern_ops if name in names)


class InvalidStep(ValueError):
    """A step whose signature breaks a rule of the op's spec (never added)."""


# ---------------------------------------------------------------------------------------
# Which ops, for which element types
# ---------------------------------------------------------------------------------------

def _stablehlo(spec) -> bool:
    return str(spec.data.get("mlir", {}).get("op", "stablehlo.")).startswith("stablehlo.")


@functools.lru_cache(maxsize=None)
def default_ops() -> tuple[str, ...]:
    """Element-wise stablehlo ops without regions over plain element types, and
    :data:`STRUCTURAL`."""
    out = []
    for name in op_names():
        spec = load_spec(name)
        if (spec.elementwise and not spec.regions and name not in EXCLUDED
                and not spec.quantized and _stablehlo(spec)) or name in STRUCTURAL:
            out.append(name)
    return tuple(out)


def _anchor_variable(spec) -> str | None:
    """The type variable the anchor binds: the first input's whose element type is one
    (select's on_true: E), else the spec's first (reduce's E, which its inputs' element
    type expressions derive from)."""
    tvars = spec.type_variables
    for t in spec.inputs:
        if t.element_type in tvars:
            return t.element_type
    return next(iter(tvars), None) if spec.inputs else None


@functools.lru_cache(maxsize=None)
def accepted_types(op: str) -> frozenset[str]:
    """Element types the op's anchor variable may have."""
    spec = load_spec(op)
    var = _anchor_variable(spec)
    if var is None:
        return frozenset()
    return frozenset(b[var] for b in spec.type_bindings())


class RngChooser(Chooser):
    """Free choices of a signature from a numpy generator; the first shape asked for is
    the anchor's where its rank fits."""

    def __init__(self, rng: np.random.Generator, anchor: Sequence[int] | None,
                 config: Config) -> None:
        self.rng, self.anchor, self.config = rng, anchor, config

    def shape(self, min_rank, max_rank):
        a = self.anchor
        self.anchor = None
        if a is not None and min_rank <= len(a) <= max_rank:
            return list(a)
        rank = int(self.rng.integers(min_rank, max(min_rank, min(max_rank,
                                                                 self.config.max_rank)) + 1))
        return [int(self.rng.integers(1, self.config.max_side + 1)) for _ in range(rank)]

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def integer(self, lo, hi):
        return int(self.rng.integers(lo, hi + 1))

    def permutation(self, n):
        return [int(x) for x in self.rng.permutation(n)]

    def booleans(self, n):
        return [bool(x) for x in self.rng.integers(0, 2, n)]


# ---------------------------------------------------------------------------------------
# Building one program
# ---------------------------------------------------------------------------------------

class Builder:
    def __init__(self, rng: np.random.Generator, config: Config) -> None:
        self.rng, self.config = rng, config
        self.arguments: list[tuple[str, TensorType]] = []
        self.operations: list[Operation] = []
        self.types: dict[str, TensorType] = {}
        self.order: list[str] = []
        self.hints: dict[str, Any] = {}
        self.patterns: list[str] = []
        self.pattern_ops: list[tuple[str, tuple[str, ...]]] = []
        self.stats = Stats()

    # -- taking back a step that failed -------------------------------------------------
    def mark(self) -> tuple[int, int, list[str]]:
        """Where the program stands now, for :meth:`undo`."""
        return len(self.arguments), len(self.operations), list(self.order)

    def undo(self, mark: tuple[int, int, list[str]]) -> None:
        """Back to ``mark``: drop the arguments, operations and values added since."""
        n_args, n_ops, order = mark
        self.arguments[n_args:] = []
        self.operations[n_ops:] = []
        self.order[:] = order
        live = set(order)
        for k in list(self.types):
            if k not in live:
                del self.types[k]

    # -- values -------------------------------------------------------------------------
    def argument(self, t: TensorType, hint: Any = None) -> str:
        name = f"arg{len(self.arguments)}"
        self.arguments.append((name, t))
        self.types[name] = t
        self.order.append(name)
        self.hints[name] = hint
        return name

    def constant(self, t: TensorType, value: np.ndarray | None = None) -> str:
        if value is None:
            value = draw_array(t.element_type, t.shape, self.rng)
        value = np.asarray(value).astype(t.element_type.dtype).reshape(t.shape)
        sig = Signature.make("constant", [], [t], {"value": dense_text(value)})
        return self.add(sig, ())[0]

    def fill(self, t: TensorType, hint: Any = None, fresh: bool = False) -> str:
        """A value of type ``t``: an existing one (reuse), a new argument or a constant."""
        rng, cfg = self.rng, self.config
        have = [v for v in self.order if self.types[v] == t]
        if have and not fresh and rng.random() < cfg.reuse:
            recent = have[-3:]
            return recent[int(rng.integers(len(recent)))]
        if rng.random() < cfg.constant_share and t.element_type.name != "i1" or \
                (rng.random() < cfg.constant_share / 3):
            return self.constant(t)
        return self.argument(t, hint)

    def recent(self) -> str:
        vals = self.order
        if self.rng.random() < 0.7:
            vals = vals[-3:]
        return vals[int(self.rng.integers(len(vals)))]

    # -- operations ---------------------------------------------------------------------
    def add(self, sig: Signature, operands: Sequence[str]) -> tuple[str, ...]:
        broken = violations(sig)
        if broken:
            raise InvalidStep(f"{sig.key()}: breaks {', '.join(broken)}")
        for v, t in zip(operands, sig.input_types):
            if self.types[v] != t:
                raise InvalidStep(f"{sig.op}: operand {v} is {self.types[v]}, not {t}")
        o = Operation(sig, tuple(operands), f"v{len(self.operations)}")
        self.operations.append(o)
        self.stats.added += 1
        for r, t in zip(o.results, sig.result_types):
            self.types[r] = t
            self.order.append(r)
        return o.results

    def op(self, name: str, operands: Sequence[str], result_types: Sequence[Any] | None = None,
           attributes: dict | None = None, regions: Sequence[str] = ()) -> tuple[str, ...]:
        """An operation with hand-made attributes; result types from the spec if not given."""
        types = [self.types[v] for v in operands]
        if result_types is None:
            result_types = load_spec(name).result_types_for(types)
        return self.add(Signature.make(name, types, result_types, attributes,
                                       regions=tuple(regions)), operands)

    def spec_step(self, op: str, anchor: str, fixed: dict[int, str] | None = None,
                  tries: int = 4) -> tuple[str, ...] | None:
        """``op`` drawn by its own signature builder around ``anchor`` (module docstring)."""
        spec = load_spec(op)
        at = self.types[anchor]
        var = _anchor_variable(spec)
        if var is None or at.element_type.name not in accepted_types(op):
            return None
        best = None
        for _ in range(tries):
            chooser = RngChooser(self.rng, at.shape, self.config)
            try:
                sig = build(chooser, spec, self._binding(chooser, spec, var, at))
            except (ValueError, KeyError, IndexError, ZeroDivisionError):
                continue
            if any(not isinstance(t, TensorType) for t in sig.input_types + sig.result_types):
                continue
            if sum(t.size for t in sig.input_types + sig.result_types) > 4096:
                continue
            if fixed and any(i >= len(sig.input_types) or sig.input_types[i] != self.types[v]
                             for i, v in fixed.items()):
                continue
            if at not in sig.input_types:
                continue
            score = sum(any(self.types[v] == t for v in self.order) for t in sig.input_types)
            if best is None or score > best[0]:
                best = (score, sig)
        if best is None:
            return None
        sig = best[1]
        operands: list[str | None] = [None] * len(sig.input_types)
        for i, v in (fixed or {}).items():
            operands[i] = v
        if anchor not in operands:
            operands[next(i for i, t in enumerate(sig.input_types)
                          if t == at and operands[i] is None)] = anchor
        for i, t in enumerate(sig.input_types):
            if operands[i] is None:
                operands[i] = self.fill(t, hint=(sig, i))
        return self.add(sig, operands)

    def _binding(self, chooser, spec, var, at):
        binding = {var: at.element_type.name}
        for name, (domain, where) in spec.type_variables.items():
            if name in binding:
                continue
            from conformance.specs import expressions as ex
            choices = [t.name for t in domain
                       if where is None or ex.evaluate(where, {**binding, name: t.name})]
            binding[name] = chooser.choice(choices)
        return binding

    # -- the whole program ----------------------------------------------------------------
    def finish(self) -> Program:
        used = {v for o in self.operations for v in o.operands}
        made = [r for o in self.operations for r in o.results]
        results = [r for r in made if r not in used]
        extra = [r for r in made if r in used and not self.types[r].size == 0]
        if extra and self.rng.random() < 0.3:
            results.append(extra[int(self.rng.integers(len(extra)))])
        results = results[-4:] if len(results) > 4 else results
        return Program.make(self.arguments, self.operations, results).pruned()


# ---------------------------------------------------------------------------------------
# Patterns: shapes compilers rewrite. Each takes the builder and a home type.
# ---------------------------------------------------------------------------------------

def _is_num(t: TensorType) -> bool:
    return not t.element_type.is_boolean


def _fma(b: Builder, t: TensorType):
    if not _is_num(t):
        return False
    x, y = b.fill(t, fresh=b.rng.random() < 0.5), b.fill(t, fresh=True)
    subtract = b.rng.random() < 0.25
    # c, where it is a new argument, is often -a*b (+a*b for a*b-c) rounded: then the
    # product's rounding error is all that is left, so a fused multiply-add shows
    z = b.fill(t, hint=("product", x, y, 1 if subtract else -1), fresh=b.rng.random() < 0.7)
    (m,) = b.op("multiply", [x, y])
    if subtract:
        b.op("subtract", [m, z])
    else:
        b.op("add", [m, z] if b.rng.random() < 0.5 else [z, m])
    return True


def _x_minus_x(b: Builder, t: TensorType):
    if not _is_num(t):
        return False
    x = b.recent() if b.types[b.order[-1]] == t and b.rng.random() < 0.5 else b.fill(t)
    if b.types[x] != t:
        x = b.fill(t)
    b.op("subtract", [x, x])
    return True


def _x_times_one(b: Builder, t: TensorType):
    x = b.fill(t)
    one = b.constant(t, np.ones(t.shape, t.element_type.dtype))
    b.op("multiply", [x, one] if b.rng.random() < 0.5 else [one, x])
    return True


def _x_plus_zero(b: Builder, t: TensorType):
    if not _is_num(t):
        return False
    x = b.fill(t)
    zero = b.constant(t, np.zeros(t.shape, t.element_type.dtype))
    b.op("add", [x, zero] if b.rng.random() < 0.5 else [zero, x])
    return True


def _select_of_compares(b: Builder, t: TensorType):
    x, y = b.fill(t), b.fill(t, fresh=True)
    (p,) = b.spec_step("compare", x, fixed={0: x, 1: y}) or (None,)
    if p is None:
        return False
    b.op("select", [p, x, y] if b.rng.random() < 0.7 else [p, y, x])
    return True


def _there_and_back(b: Builder, t: TensorType):
    x = b.fill(t)
    if t.rank >= 2 and b.rng.random() < 0.5:
        perm = [int(p) for p in b.rng.permutation(t.rank)]
        (y,) = b.op("transpose", [x], [TensorType(tuple(t.shape[p] for p in perm),
                                                     t.element_type)], {"permutation": perm})
        inv = [int(i) for i in np.argsort(perm)]
        b.op("transpose", [y], [t], {"permutation": inv})
    else:
        (y,) = b.spec_step("reshape", x) or (None,)
        if y is None:
            return False
        b.op("reshape", [y], [t])
    return True


def _slice_of_concatenate(b: Builder, t: TensorType):
    if t.rank == 0:
        return False
    x, y = b.fill(t), b.fill(t, fresh=True)
    d = int(b.rng.integers(t.rank))
    shape = list(t.shape)
    shape[d] *= 2
    (c,) = b.op("concatenate", [x, y], [TensorType(tuple(shape), t.element_type)],
                {"dimension": d})
    starts = [0] * t.rank
    limits = list(shape)
    which = int(b.rng.integers(3))          # the first part, the second, or across
    if which == 0:
        limits[d] = t.shape[d]
    elif which == 1:
        starts[d] = t.shape[d]
    else:
        starts[d] = t.shape[d] // 2
        limits[d] = starts[d] + t.shape[d]
    out = TensorType(tuple(lim - s for s, lim in zip(starts, limits)), t.element_type)
    b.op("slice", [c], [out], {"start_indices": starts, "limit_indices": limits,
                               "strides": [1] * t.rank})
    return True


def _convert_there_and_back(b: Builder, t: TensorType):
    x = b.fill(t)
    # the seed's types: programs draw no newer float format yet (docs/float-formats.md)
    kinds = [r["R"] for r in load_spec("convert").type_bindings()
             if r["E"] == t.element_type.name and r["R"] not in NEWER_FLOAT_TYPES]
    other = kinds[int(b.rng.integers(len(kinds)))]
    if b.rng.random() < 0.5:        # prefer the interesting ones: a float of another width
        floats = [k for k in kinds if element_type(k).is_float and k != t.element_type.name]
        if floats:
            other = floats[int(b.rng.integers(len(floats)))]
    (y,) = b.op("convert", [x], [TensorType(t.shape, element_type(other))])
    b.op("convert", [y], [t])
    return True


def _convert_chain(b: Builder, t: TensorType):
    """convert(convert(x: f64, f32), R), R = f16 or bf16, x drawn next to the midpoints
    of R (:func:`midpoint_values`): each step rounds, so the pair is not convert(x, R)
    (double rounding); a compiler folding the chain into one convert diverges."""
    if t.element_type.name not in ("f64", "f32", "f16", "bf16"):
        return False
    last = ("f16", "bf16")[int(b.rng.integers(2))]
    x = b.fill(TensorType(t.shape, element_type("f64")), hint=("midpoints", last),
               fresh=True)
    (y,) = b.op("convert", [x], [TensorType(t.shape, element_type("f32"))])
    b.op("convert", [y], [TensorType(t.shape, element_type(last))])
    return True


def midpoint_values(target: str, shape: Sequence[int], rng: np.random.Generator
                    ) -> np.ndarray:
    """float64 values a hair (2^-40 relative) above or below a midpoint between two
    neighbours of ``target`` (f16, bf16): float32 holds the midpoint exactly, so x -> f32
    -> target rounds twice (a tie, to even) where x -> target rounds once (away from the
    tie): they differ for about half of the values."""
    import ml_dtypes
    dtype = element_type(target).dtype
    p = int(ml_dtypes.finfo(dtype).nmant) + 1
    r = rng.uniform(-200, 200, shape).astype(dtype).astype(np.float64)
    r = np.where(r == 0, 1.0, r)
    _, e = np.frexp(r)
    half_ulp = np.ldexp(1.0, e - p - 1)
    mid = r + half_ulp * np.sign(r)
    sign = np.where(rng.integers(0, 2, shape) == 1, 1.0, -1.0)
    return (mid * (1 + sign * 2.0 ** -40)).astype(np.float64)


def _broadcast_feeding(b: Builder, t: TensorType):
    if t.rank == 0:
        return False
    keep = sorted(int(d) for d in b.rng.choice(t.rank, int(b.rng.integers(0, t.rank)),
                                                  replace=False))
    small = TensorType(tuple(t.shape[d] for d in keep), t.element_type)
    y = b.fill(small)
    (z,) = b.op("broadcast_in_dim", [y], [t], {"broadcast_dimensions": keep})
    x = b.fill(t)
    return b.spec_step(_binary_for(b, t), z, fixed={0: x, 1: z} if b.rng.random() < 0.5
                       else {0: z, 1: x}) is not None


def _binary_for(b: Builder, t: TensorType) -> str:
    names = [n for n in ("add", "multiply", "subtract", "maximum", "minimum", "and", "or")
             if t.element_type.name in accepted_types(n)]
    return names[int(b.rng.integers(len(names)))]


def _reduce_of_elementwise(b: Builder, t: TensorType):
    if t.rank == 0:
        return False
    x, y = b.fill(t), b.fill(t)
    (e,) = b.spec_step(_binary_for(b, t), x, fixed={0: x, 1: y}) or (None,)
    if e is None:
        return False
    return b.spec_step("reduce", e) is not None


def _double_negation(b: Builder, t: TensorType):
    op = "negate" if t.element_type.name in accepted_types("negate") else "not"
    if t.element_type.name not in accepted_types(op):
        return False
    (y,) = b.op(op, [b.fill(t)])
    b.op(op, [y])
    return True


PATTERNS: dict[str, Callable[[Builder, TensorType], bool]] = {
    "a*b+c": _fma, "x-x": _x_minus_x, "x*1": _x_times_one, "x+0": _x_plus_zero,
    "select_of_compare": _select_of_compares, "there_and_back": _there_and_back,
    "slice_of_concatenate": _slice_of_concatenate, "convert_there_and_back":
    _convert_there_and_back, "convert_chain": _convert_chain,
    "broadcast_feeding": _broadcast_feeding,
    "reduce_of_elementwise": _reduce_of_elementwise, "double_negation": _double_negation,
}


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------

def rng_for(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(index), 19])


def generate(seed: int, index: int, config: Config = Config(),
             stats: Stats | None = None) -> Drawn:
    """Program number ``index`` of ``seed`` (deterministic: numpy draws from these alone)."""
    rng = rng_for(seed, index)
    types = config.types or tuple(n for n, _ in HOME_TYPES)
    weights = np.array([dict(HOME_TYPES).get(n, 1) for n in types], float)
    home = element_type(types[int(rng.choice(len(types), p=weights / weights.sum()))])
    rank = int(rng.integers(0, config.max_rank + 1))
    shape = tuple(int(rng.integers(1, config.max_side + 1)) for _ in range(rank))
    t = TensorType(shape, home)
    b = Builder(rng, config)
    ops = [o for o in (config.ops or default_ops()) if o in default_ops()]
    target = int(rng.integers(2, max(2, config.max_ops) + 1))
    b.argument(t)
    attempts = 0
    while len(b.operations) < target and attempts < 8 * target:
        attempts += 1
        before = b.mark()
        try:
            if rng.random() < config.pattern_share:
                name = list(PATTERNS)[int(rng.integers(len(PATTERNS)))]
                if config.ops and not _pattern_ops_allowed(name, config.ops):
                    continue
                home_t = t if rng.random() < 0.7 else b.types[b.recent()]
                first = len(b.operations)
                if PATTERNS[name](b, home_t):
                    b.patterns.append(name)
                    b.pattern_ops.append((name, tuple(o.name for o in b.operations[first:])))
            else:
                anchor = b.recent()
                et = b.types[anchor].element_type.name
                usable = [o for o in ops if et in accepted_types(o)]
                if usable:
                    b.spec_step(usable[int(rng.integers(len(usable)))], anchor)
        except InvalidStep as e:
            b.stats.rejected += 1
            b.stats.reasons.append(str(e))
            b.undo(before)
    if len(b.operations) == 0:
        b.op("negate" if home.name in accepted_types("negate") else "not", [b.order[0]])
    program = b.finish()
    if stats is not None:
        stats.added += b.stats.added
        stats.rejected += b.stats.rejected
        stats.reasons += b.stats.reasons
    hints = tuple((n, b.hints.get(n)) for n in program.argument_names)
    kept = {o.name for o in program.operations}
    spans = tuple((p, tuple(n for n in names if n in kept)) for p, names in b.pattern_ops)
    return Drawn(program, tuple(b.patterns), hints, tuple((p, n) for p, n in spans if n))


_PATTERN_OPS = {"a*b+c": {"multiply", "add"}, "x-x": {"subtract"}, "x*1": {"multiply"},
                "x+0": {"add"}, "select_of_compare": {"compare", "select"},
                "there_and_back": {"transpose", "reshape"},
                "slice_of_concatenate": {"concatenate", "slice"},
                "convert_there_and_back": {"convert"}, "convert_chain": {"convert"},
                "broadcast_feeding": {"broadcast_in_dim"},
                "reduce_of_elementwise": {"reduce"}, "double_negation": {"negate", "not"}}


def _pattern_ops_allowed(name: str, ops: Sequence[str]) -> bool:
    return bool(_PATTERN_OPS[name] & set(ops))


def type_key(sig) -> str:
    """The type key (matrix column: ``f32``, ``f32->f16``) of an operation's signature,
    as single-op runs and expectations name it."""
    try:
        spec = load_spec(sig.op)
        groups = list(zip(spec.inputs, spec.split_inputs(sig.input_types))) + \
            list(zip(spec.outputs, spec.split_outputs(sig.result_types)))
    except Exception:  # noqa: BLE001 - a signature the spec cannot split: first type
        groups = []
    found: dict[str, str] = {}
    for ts, t in groups:
        t = t[0] if isinstance(t, list) and t else t
        if ts.element_type not in found and hasattr(t, "element_type"):
            found[ts.element_type] = t.element_type.name
    try:
        names = list(spec.type_variables)
    except Exception:  # noqa: BLE001
        names = []
    first = (sig.input_types or sig.result_types)[0]
    first = first.element_type.name if hasattr(first, "element_type") else str(first)
    return "->".join(found.get(n, first) for n in names) or first


def draw_inputs(drawn: Drawn, rng: np.random.Generator, batch: int) -> list[np.ndarray]:
    """Values of the program's arguments for ``batch`` cases: one array per argument,
    shape [batch] + its shape (see the module docstring)."""
    hints = dict(drawn.hints)
    out = []
    drawn_so_far: dict[str, np.ndarray] = {}
    for name, t in drawn.program.arguments:
        hint = hints.get(name)
        if isinstance(hint, tuple) and hint and hint[0] == "midpoints":
            out.append(midpoint_values(hint[1], (batch, *t.shape), rng))
            drawn_so_far[name] = out[-1]
            continue
        if isinstance(hint, tuple) and hint and hint[0] == "product":
            x = draw_array(t.element_type, (batch, *t.shape), rng)
            out.append(product_values(x, drawn_so_far.get(hint[1]),
                                      drawn_so_far.get(hint[2]), hint[3]))
            drawn_so_far[name] = out[-1]
            continue
        if hint is not None and not isinstance(hint, tuple) or \
                isinstance(hint, tuple) and len(hint) == 2 and hasattr(hint[0], "op"):
            sig, slot = hint
            try:
                out.append(np.asarray(batch_inputs(sig, rng, batch)[slot]))
                continue
            except Exception:  # noqa: BLE001 - a signature distribution that cannot
                pass           # serve this slot: the default values
        out.append(draw_array(t.element_type, (batch, *t.shape), rng))
        drawn_so_far[name] = out[-1]
    return out


def product_values(drawn: np.ndarray, a: np.ndarray | None, b: np.ndarray | None,
                   sign: int) -> np.ndarray:
    """``drawn`` with every other case (odd batch rows) replaced by ``sign * a * b``
    rounded to the type (real floats, where a and b are arguments drawn before)."""
    if a is None or b is None or drawn.dtype.kind == "c" or \
            not np.issubdtype(np.asarray(drawn).dtype, np.inexact) and \
            drawn.dtype.kind not in "fV" and "float" not in str(drawn.dtype):
        return drawn
    out = np.array(drawn, copy=True)
    with np.errstate(all="ignore"):
        p = (np.asarray(a, np.float64) * np.asarray(b, np.float64) * sign).astype(out.dtype)
    out[1::2] = p[1::2]
    return out


__all__ = ["Config", "Stats", "Drawn", "generate", "draw_inputs", "default_ops", "PATTERNS",
           "type_key",
           "InvalidStep", "RngChooser"]
