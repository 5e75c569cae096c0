"""Region programs for if, case and while (issue 16), drawn from the op specs.

The specs (specs/ops/if.yaml, case.yaml, while.yaml) call these through the expression
language's ``draw('name', ...)`` with a ``seed`` variable, so that a signature is a pure
function of its draws (the same seed gives the same bodies in any process):

- ``cf_types(seed, E, S, n)``: ``n`` value types, the first ``tensor<S x E>``, the others
  of other shapes (rank <= 2) and element types;
- ``cf_branches(seed, n, captures, m)``: ``n`` branch bodies (no block arguments: they read
  the ``captures`` from the enclosing function) returning ``m`` results of the same types
  in every branch (003 "### if" C2, "### case" C3);
- ``cf_while(seed, state)``: ``[cond, body]`` for a loop state whose first two tensors are
  ``tensor<si32>`` counter and bound: cond is ``counter < bound`` (through a small
  program), body adds 1 to the counter, passes the bound on and computes every other
  state tensor anew from the state (same types, other values). Termination is by
  construction: the bound is an operand drawn per case (``while_state_values``).

Bodies are built by the programs generator's :class:`~conformance.generators.programs
.Builder` (spec steps and its rewrite patterns) restricted to ops whose verdict is exact
for the drawn signature (element-wise, data movement, reductions of integers), so that
a branch or loop result has exactly one right answer; a new operand the builder needs becomes a constant,
never a new argument. Each result is a value of its type that the body made, else one
converted or reshaped from one, else a constant.
"""
from __future__ import annotations

import functools

import numpy as np

from conformance.core.case import Signature
from conformance.core.program import Program
from conformance.core import region_program
from conformance.core.types import TensorType, element_type
from conformance.specs import load_spec
from conformance.specs.expressions import draw

from .programs import Builder, Config, InvalidStep, accepted_types

__all__ = ["BODY_OPS", "exact", "branches", "while_regions", "value_types", "while_state_values"]

#: ops bodies may draw (each kept only where its verdict is exact for the signature)
BODY_OPS = ("add", "subtract", "multiply", "maximum", "minimum", "negate", "abs", "and",
            "or", "xor", "not", "select", "compare", "clamp", "reverse", "transpose",
            "reshape", "slice", "concatenate", "broadcast_in_dim", "reduce")

#: element types of the other captured values / results / loop state
OTHER_TYPES = ("f32", "si32", "f16", "ui8", "i1", "f64", "bf16", "si64")

_CONFIG = Config(max_ops=4, max_rank=2, max_side=3, reuse=0.7, constant_share=1.0,
                 ops=BODY_OPS)


def _rng(seed, salt: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, salt, 16])


def exact(sig: Signature) -> bool:
    """Is the op's result exact for this signature: its verdict ``exact`` or ``bits``, or
    ``bound`` on integer and boolean results only (a reduction of integers has one
    answer in every order)?"""
    kind = load_spec(sig.op).signature_accuracy(sig).kind
    return kind in ("exact", "bits") or kind == "bound" and all(
        t.element_type.is_integer or t.element_type.is_boolean for t in sig.result_types)


#: body ops whose second half of operands are init values of a reduction over the named
#: region: drawn as that region's identity, so that the implementation-defined number of
#: init values in the tree (003 "### reduce") changes nothing and the result is checked;
#: a random init (an integer sum's 3) leaves every element open (masked): 12 of 110
#: if/case/call/composite signatures of a quick run checked nothing
_INIT_VALUES = {"reduce": "body"}


def _identities(sig: Signature):
    """The identity of ``sig``'s reduction body, one 0-d array per init value, or None."""
    from .reduction import identity
    names = [r.name for r in load_spec(sig.op).regions]
    region = _INIT_VALUES[sig.op]
    return identity(sig.regions[names.index(region)] if region in names else sig.regions[0])


def _init_identity(hint, t: TensorType):
    """The identity a reduction's init-value operand gets (``hint``: (signature, operand
    index)), or None (another operand, or a body without an identity)."""
    if not hint or not isinstance(hint, tuple) or len(hint) != 2:
        return None
    sig, i = hint
    n = len(getattr(sig, "input_types", ())) // 2
    if getattr(sig, "op", None) not in _INIT_VALUES or i < n or not sig.regions:
        return None
    found = _identities(sig)
    if found is None or i - n >= len(found):
        return None
    value = np.asarray(found[i - n])
    return value if value.dtype == t.element_type.dtype else None


class _BodyBuilder(Builder):
    """A builder whose arguments are fixed: a new operand becomes a constant (a
    reduction's init value: its body's identity)."""

    sealed = False

    def fill(self, t, hint=None, fresh=False):
        ident = _init_identity(hint, t)
        if ident is not None:
            return self.constant(t, np.full(t.shape, ident))
        return super().fill(t, hint, fresh)

    def argument(self, t, hint=None):
        if self.sealed:
            return self.constant(t)
        return super().argument(t, hint)

    def add(self, sig, operands):
        if not exact(sig):
            raise InvalidStep(f"{sig.op}: not exact for {sig.key()}")
        if sig.op in _INIT_VALUES and not self._inits_are_identities(sig, operands):
            raise InvalidStep(f"{sig.op}: an init value that is not its body's identity "
                              f"leaves the result open")
        return super().add(sig, operands)

    def _inits_are_identities(self, sig, operands) -> bool:
        from conformance.oracles import evaluate
        found = _identities(sig)
        n = len(operands) // 2
        if found is None or len(found) != n:
            return False
        made = {r: o for o in self.operations for r in o.results}
        for v, ident in zip(operands[n:], found):
            c = made.get(v)
            if c is None or c.op != "constant":
                return False
            value = evaluate("constant", [], c.signature.attributes,
                             result_types=c.signature.result_types)[0]
            ident = np.asarray(ident)
            if value.dtype != ident.dtype or not np.array_equal(
                    value, np.full(value.shape, ident), equal_nan=True) or \
                    np.any(np.signbit(value) != np.signbit(ident)):
                return False
        return True


def _start(rng: np.random.Generator, arg_types) -> _BodyBuilder:
    b = _BodyBuilder(rng, _CONFIG)
    for t in arg_types:
        b.argument(TensorType(tuple(t.shape), t.element_type))
    b.sealed = True
    return b


def _steps(b: _BodyBuilder, n: int) -> None:
    ops = [o for o in BODY_OPS]
    for _ in range(4 * n):
        if len(b.operations) >= n or not b.order:
            return
        before = b.mark()
        try:
            anchor = b.recent()
            et = b.types[anchor].element_type.name
            usable = [o for o in ops if et in accepted_types(o)]
            if usable:
                b.spec_step(usable[int(b.rng.integers(len(usable)))], anchor, tries=2)
        except InvalidStep:
            b.undo(before)


def _value_of(b: _BodyBuilder, t: TensorType, avoid_args: bool = True) -> str:
    """A value of type ``t`` from what ``b`` holds (module docstring)."""
    rng = b.rng
    made = [v for v in b.order if b.types[v] == t and not v.startswith("arg")]
    args = [v for v in b.order if b.types[v] == t and v.startswith("arg")]
    pool = made or ([] if avoid_args and rng.random() < 0.5 else args)
    if pool:
        return pool[int(rng.integers(len(pool)))]
    for v in reversed(b.order):
        s = b.types[v]
        if s.size != t.size or s.size == 0 and s.shape != t.shape:
            continue
        before = b.mark()
        try:
            x = v
            if s.shape != t.shape:
                (x,) = b.op("reshape", [x], [TensorType(t.shape, s.element_type)])
            if s.element_type != t.element_type:
                (x,) = b.op("convert", [x], [t])
            return x
        except (InvalidStep, ValueError):
            b.undo(before)
    return b.constant(t)


def _program(b: _BodyBuilder, results: list[str], n_args: int) -> Program:
    pruned = Program.make(b.arguments, b.operations, results).pruned()
    return Program(tuple(b.arguments[:n_args]), pruned.operations, tuple(results))


@draw("cf_types")
def value_types(seed, E, S, n) -> list[TensorType]:
    """``n`` value types: the first ``S`` x ``E``, the others drawn (module docstring)."""
    rng = _rng(seed, 1)
    out = [TensorType(tuple(int(d) for d in S), element_type(E))]
    for _ in range(int(n) - 1):
        if rng.random() < 0.4:
            shape = out[0].shape
        else:
            shape = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3))))
        et = E if rng.random() < 0.3 else OTHER_TYPES[int(rng.integers(len(OTHER_TYPES)))]
        out.append(TensorType(shape, element_type(et)))
    return out[:max(0, int(n))]


def tensor_types(ts) -> tuple[TensorType, ...]:
    """``ts`` as a tuple of TensorType (hashable: the key of the cached drawers)."""
    return tuple(TensorType(tuple(t.shape), t.element_type) for t in ts)


@draw("cf_branches")
def branches(seed, n, captures, m) -> list[str]:
    """``n`` branch bodies over ``captures`` returning ``m`` results of one list of types."""
    return list(branch_bodies(int(seed), int(n), tensor_types(captures), int(m)))


@functools.lru_cache(maxsize=1024)
def branch_bodies(seed, n, captures, m) -> tuple[str, ...]:
    """:func:`branches` for an int seed and a tuple of TensorType captures (cached)."""
    rng = _rng(seed, 2)
    captures = list(captures)
    results = []
    for j in range(int(m)):
        if captures and rng.random() < 0.7:
            results.append(captures[int(rng.integers(len(captures)))] if j else captures[0])
        else:
            results.append(value_types(int(rng.integers(1 << 30)), OTHER_TYPES[
                int(rng.integers(len(OTHER_TYPES)))], [2], 1)[0])
    out = []
    for k in range(int(n)):
        b = _start(_rng(seed, 100 + k), captures)
        _steps(b, int(b.rng.integers(1, 5)))
        names = [_value_of(b, t) for t in results]
        out.append(region_program.text(region_program.Body(
            _program(b, names, len(captures)), 0)))
    return tuple(out)


@draw("cf_while")
def while_regions(seed, state) -> list[str]:
    """``[cond, body]`` for ``state`` (counter and bound first; module docstring)."""
    return list(_while_regions(int(seed), tensor_types(state)))


@functools.lru_cache(maxsize=1024)
def _while_regions(seed, state) -> tuple[str, str]:
    state = list(state)
    counter = TensorType((), element_type("si32"))
    if len(state) < 2 or state[0] != counter or state[1] != counter:
        raise ValueError("cf_while: the loop state starts with two tensor<si32> (counter, "
                         "bound)")
    rng = _rng(seed, 3)
    # cond: counter < bound, sometimes through a select or an and with a constant true
    c = _start(rng, state)
    (lt,) = c.op("compare", ["arg0", "arg1"], [TensorType((), element_type("i1"))],
                 {"comparison_direction": "LT", "compare_type": "SIGNED"})
    if rng.random() < 0.5:
        true = c.constant(TensorType((), element_type("i1")), np.array(True))
        (lt,) = c.op("and", [true, lt] if rng.random() < 0.5 else [lt, true])
    cond = _program(c, [lt], len(state))
    # body: counter + 1, the bound passed on, every other tensor computed anew
    b = _start(_rng(seed, 4), state)
    one = b.constant(counter, np.array(1, np.int32))
    (inc,) = b.op("add", ["arg0", one])
    _steps(b, int(rng.integers(1, 6)))
    names = [inc, "arg1"] + [_value_of(b, t) for t in state[2:]]
    body = _program(b, names, len(state))
    return (region_program.text(region_program.Body(cond, len(state))),
            region_program.text(region_program.Body(body, len(state))))


def while_state_values(sig, spec, index, k, et, shape, rng, param) -> np.ndarray:
    """A while loop's operands: the counter (operand 0) starts at ``row % 3``; the bound
    (operand 1) is the counter plus the trip count, by ``row % 4``: 0 trips (the bound
    at or below the counter), exactly 1, or many (2 to 12); the other state tensors get
    the default values."""
    from .values import draw_array
    batch = shape[0]
    rows = np.arange(batch).reshape((batch,) + (1,) * (len(shape) - 1))
    counter = rows % 3                 # the counter of row r starts at r % 3
    if k == 0:
        return np.broadcast_to(counter, shape).astype(np.int32)
    if k == 1:
        kind = rows % 4
        trips = np.where(kind == 0, -rng.integers(0, 3, counter.shape),
                         np.where(kind == 1, 1, rng.integers(2, 13, counter.shape)))
        return np.broadcast_to(counter + trips, shape).astype(np.int32)
    return draw_array(et, shape, rng)
