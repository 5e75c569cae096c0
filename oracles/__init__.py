"""The numpy reference: ``evaluate(op, inputs, attributes) -> tuple of arrays``.

One small module per op family registers its ops in registry.py (the ONNX reference
evaluator's layout); the module is named after the spec's ``family:`` and loaded the
first time one of its ops is evaluated. Every function is plain numpy + ml_dtypes
written from the spec's semantics; none calls a backend. Results are always of the exact result
types: IEEE-exact float ops are computed in float64 and correctly rounded to the
result type (float64 is wide enough for +, -, *, /, sqrt on every narrower type);
integer ops are done on two's-complement bit patterns and wrap to the bit width.

Result types travel as the keyword ``result_types``; where it is omitted they are
inferred from the spec (an op whose result type is a free choice, like convert,
needs it). Where the spec leaves a value implementation-defined, the oracle
returns a conventional value (documented per op) and :func:`implementation_defined`
says which elements the comparator must mask.
"""
from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import numpy as np

from conformance.core.case import Case, Signature
from conformance.core.types import (TensorType, TupleType, element_type, flatten, is_structured,
                                    leaves, type_of, unflatten, value_type)
from conformance.specs import OpSpec, SpecError, import_family_module, load_spec
from conformance.specs import expressions as ex
from conformance.specs.expressions import CONDITIONS, condition

from .registry import (BATCHED, REGISTRY, TYPED, Membership, OracleError, OracleFn,
                       load_family, oracle_for, register)


def _infer_result_types(spec: OpSpec, inputs: Sequence[np.ndarray]) -> list[TensorType]:
    try:
        return spec.result_types_for([type_of(x) for x in inputs])
    except SpecError as e:
        raise OracleError(f"{e}; pass result_types") from None


def evaluate(op: str, inputs: Sequence[np.ndarray], attributes: Mapping[str, Any] | None = None,
             *, result_types: Sequence["TensorType | str"] | None = None,
             input_types: Sequence[Any] | None = None,
             regions: Sequence[str] = ()) -> tuple[np.ndarray, ...]:
    """Evaluate ``op`` on ``inputs`` per the spec; returns one array per result.

    ``regions`` (a signature's region texts, specs/regions.py) reach the oracle
    function in its attributes, under the spec's region names (sort's ``comparator``).

    Tuple types (tuple, get_tuple_element): ``inputs`` are the leaves and
    ``input_types`` (value types) says how they group; the oracle function then gets a
    Python tuple of element values for each tuple-typed input, returns a Python tuple
    for each tuple-typed result (a 1-tuple around it when it is the only result), and
    the results come back as leaves, flattened depth-first.
    """
    fn = oracle_for(op)
    inputs = [np.asarray(x) for x in inputs]
    if result_types is None:
        types = _infer_result_types(load_spec(op), inputs)
    else:
        types = [value_type(t) for t in result_types]
    args: list = inputs
    if input_types is not None and any(is_structured(value_type(t)) for t in input_types):
        args = unflatten(inputs, input_types)
    attrs = dict(attributes or {})
    if regions:
        attrs.update(load_spec(op).region_env(regions))
    with np.errstate(all="ignore"):
        if op in TYPED:
            if input_types is None:
                raise OracleError(f"{op}: the oracle needs the inputs' types (a quantized "
                                  "tensor's parameters); pass input_types")
            out = fn(args, attrs, types, [value_type(t) for t in input_types])
        else:
            out = fn(args, attrs, types)
    out = out if isinstance(out, tuple) else (out,)
    if any(is_structured(t) for t in types):       # tuples and tokens (no data)
        out, types = tuple(flatten(out)), list(leaves(types))
    for i, (x, t) in enumerate(zip(out, types)):
        if x.dtype != t.element_type.dtype or x.shape != t.shape:
            raise OracleError(f"{op}: oracle result {i} is {type_of(x)}, expected {t}")
    return out


def evaluate_case(case: Case) -> tuple[np.ndarray, ...]:
    sig = case.signature
    if sig.num_replicas * sig.num_partitions > 1:       # per-process values (collectives)
        return tuple(x[0] for x in evaluate_batch(sig, [x[None] for x in case.inputs]))
    return evaluate(case.op, case.inputs, case.attributes,
                    result_types=case.signature.result_types,
                    input_types=case.signature.input_types, regions=case.signature.regions)


def broadcast_ready(sig: Signature, stacked: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Stacked inputs ([B] + shape) of an element-wise op, with rank-0 inputs given
    trailing unit axes so that numpy broadcasting pairs them with every element."""
    try:
        shapes = _ready_shapes(sig)
    except TypeError:                       # (a signature that is not hashable)
        shapes = _ready_shapes.__wrapped__(sig)
    if shapes is None:
        return list(stacked)[:len(sig.input_types)]
    return [x if s is None else x.reshape((x.shape[0],) + s)
            for x, s in zip(stacked, shapes)]


@functools.lru_cache(maxsize=4096)
def _ready_shapes(sig: Signature) -> "tuple | None":
    """Per input of ``sig``: the shape after the batch axis :func:`broadcast_ready` gives
    it (None: as it is); None where no input changes (a function of the signature:
    asked twice per batch)."""
    rank = max([t.rank for t in sig.input_types] + [t.rank for t in sig.result_types])
    out = tuple((1,) * (rank - t.rank) + t.shape if t.rank < rank else None
                for t in sig.input_types)
    return out if any(s is not None for s in out) else None


@functools.lru_cache(maxsize=4096)
def _batched_types(sig: Signature, batch: int) -> tuple[TensorType, ...]:
    """The result types of a batch of ``batch`` cases (a type costs microseconds to make;
    every batch asks)."""
    return tuple(TensorType((batch,) + t.shape, t.element_type) for t in sig.result_leaves)


def evaluate_batch(sig: Signature, stacked: Sequence[np.ndarray],
                   spec: OpSpec | None = None) -> tuple[np.ndarray, ...]:
    """Evaluate a batch of cases of one signature: inputs and results carry a leading
    batch axis. Element-wise ops are evaluated in one vectorised call."""
    spec = spec or load_spec(sig.op)
    batch = stacked[0].shape[0] if stacked else 1
    try:
        batched_types = list(_batched_types(sig, batch))
    except TypeError:                       # (a signature that is not hashable)
        batched_types = list(_batched_types.__wrapped__(sig, batch))
    if spec.elementwise:
        return evaluate(sig.op, broadcast_ready(sig, stacked), sig.attributes,
                        result_types=batched_types, regions=sig.regions,
                        input_types=sig.input_types)
    load_family(sig.op)
    if sig.op in BATCHED:         # a family's oracle of a whole batch (registry.BATCHED)
        return tuple(BATCHED[sig.op](sig, list(stacked)))
    attrs, result_types = sig.attributes, sig.result_types
    n = sig.num_replicas * sig.num_partitions
    if n > 1:
        # a grid of n processes (collectives): one value per process on the axis after
        # the batch axis; the oracle gets the grid with the attributes
        attrs = {**attrs, "num_replicas": sig.num_replicas,
                 "num_partitions": sig.num_partitions}
        result_types = tuple(TensorType((n,) + t.shape, t.element_type)
                             for t in sig.result_leaves)
        batched_types = [TensorType((batch,) + t.shape, t.element_type)
                         for t in result_types]
    per_case = [evaluate(sig.op, [x[b] for x in stacked], attrs,
                         result_types=result_types, input_types=sig.input_types,
                         regions=sig.regions)
                for b in range(batch)]
    return tuple(np.stack([c[i] for c in per_case]) if per_case
                 else np.zeros(t.shape, t.element_type.dtype)
                 for i, t in enumerate(batched_types))


class RuleMasks(dict):
    """What :func:`implementation_defined` returns: rule id -> the mask of result
    elements it covers (bool), or its permutation-group labels (integers), as a plain
    dict; and, per rule, what the spec still allows there (its ``allowed:``), evaluated
    on demand with the same names the rule's ``when:`` saw:

    - :meth:`allowed` -> ``'any'`` (masked), ``'permutation'`` or ``'set'``;
    - :meth:`alternatives` -> name -> list of alternatives, each a list of one array per
      result, of the batched results' shapes;
    - :meth:`tests` -> name -> :class:`Membership`, alternatives given by a test of the
      backend's values (:meth:`member` applies them), where the set has no finite list;
    - :meth:`anywhere` -> a mask of elements where a ``set`` rule bounds nothing (its
      ``any:`` entry), or None;
    - :meth:`for_result` -> the mask of one result: a ``per_result`` rule's own mask
      for it (the dict holds their union, for callers that look at every result).

    The one type of masks everywhere (verdicts.Judgement.masks, compare.compare_batch,
    the verdict kinds): :meth:`of` makes one of a plain ``{rule: mask}`` (rules the spec
    does not describe: each allows ``any``) or of None (no rules).
    """

    def __init__(self, *args, rules=None, env=None, results=None, **kw):
        super().__init__(*args, **kw)
        self.rules = {r.id: r for r in (rules or ())}
        self._env = env or {}
        self._shapes = [np.shape(r) for r in results or ()]
        self._dtypes = [np.asarray(r).dtype for r in results or ()]
        self._cache: dict[str, tuple[dict, Any]] = {}
        self.per_result: dict[str, list[np.ndarray]] = {}

    @classmethod
    def of(cls, masks: "Mapping[str, np.ndarray] | None") -> "RuleMasks":
        """``masks`` itself if it is a RuleMasks; else a RuleMasks of the same rule ->
        mask entries and no rule descriptions (every rule allows ``any``)."""
        if isinstance(masks, cls):
            return masks
        if masks is None:
            return cls()
        if not isinstance(masks, Mapping):
            raise TypeError(f"implementation-defined masks are a RuleMasks (or a mapping "
                            f"rule -> mask), not {type(masks).__name__}")
        return cls(masks)

    def for_result(self, rule: str, i: int) -> np.ndarray:
        """Rule ``rule``'s mask over result ``i``'s elements."""
        if rule in self.per_result:
            return self.per_result[rule][i]
        return self[rule]

    def allowed(self, rule: str) -> str:
        r = self.rules.get(rule)
        if r is None or isinstance(r.allowed, str):
            return r.allowed if r is not None else "any"
        return "set"

    def _evaluate(self, rule: str) -> tuple[dict, Any, dict]:
        if rule not in self._cache:
            alts, anywhere, tests = {}, None, {}
            with np.errstate(all="ignore"):
                for name, text in self.rules[rule].alternatives.items():
                    value = ex.evaluate(text, self._env)
                    if isinstance(value, Membership):
                        tests[name] = value
                    elif name == "any" and self.rules[rule].per_result:
                        anywhere = [_to_result_shape(m, shape) for m, shape in
                                    zip(_per_result(value, len(self._shapes),
                                                    f"{rule}.allowed.any"), self._shapes)]
                    elif name == "any":
                        m = np.asarray(value).astype(bool)
                        anywhere = _to_result_shape(m, self._shapes[0]) if m.ndim \
                            else np.broadcast_to(m, self._shapes[0])
                    else:
                        alts[name] = self._candidates(value, f"{rule}.allowed.{name}")
            self._cache[rule] = (alts, anywhere, tests)
        return self._cache[rule]

    def _candidates(self, value, where: str) -> list[list[np.ndarray]]:
        """An ``allowed:`` expression's value as a list of alternatives, each one array per
        result, broadcast to the batched results' shapes (and cast to their types)."""
        n = len(self._shapes)
        if isinstance(value, np.ndarray) or np.isscalar(value):
            cands = [[value]]
        elif value and all(isinstance(v, (list, tuple)) for v in value):
            cands = [list(v) for v in value]      # several alternatives, one list each
        elif n == 1:
            cands = [[v] for v in value]          # several alternatives of one result
        else:
            cands = [list(value)] if len(value) else []   # one alternative, per result
        out = []
        for c in cands:
            if len(c) != n:
                raise OracleError(f"{where}: an alternative has {len(c)} results, "
                                  f"expected {n}")
            out.append([np.broadcast_to(np.asarray(v).astype(dtype, copy=False), shape)
                        for v, shape, dtype in zip(c, self._shapes, self._dtypes)])
        return out

    def alternatives(self, rule: str) -> dict[str, list[list[np.ndarray]]]:
        if self.allowed(rule) != "set":
            return {}
        return self._evaluate(rule)[0]

    def tests(self, rule: str) -> "dict[str, Membership]":
        """A ``set`` rule's alternatives given by a test (:class:`Membership`: a set with
        no finite list of members), by name."""
        if self.allowed(rule) != "set":
            return {}
        return self._evaluate(rule)[2]

    def member(self, rule: str, actual: Sequence[np.ndarray]
               ) -> "dict[str, tuple[list[np.ndarray], list[np.ndarray]]]":
        """Per test of ``rule``: per result, the elements of ``actual`` (batched results)
        that lie in its set, and those that lie outside but that flushing the element's
        own subnormal inputs explains (:class:`Membership`), broadcast to the results'
        shapes."""
        out = {}
        for name, test in self.tests(rule).items():
            masks, flushed = test(actual)
            flushed = flushed or [np.zeros(shape, bool) for shape in self._shapes]
            out[name] = ([np.broadcast_to(m, s) for m, s in zip(masks, self._shapes)],
                         [np.broadcast_to(m, s) for m, s in zip(flushed, self._shapes)])
        return out

    def anywhere(self, rule: str, i: int | None = None) -> np.ndarray | None:
        """Where a ``set`` rule bounds nothing: over result ``i`` (a ``per_result``
        rule's ``any:`` gives one mask per result), or over every result (their union)."""
        if self.allowed(rule) != "set":
            return None
        m = self._evaluate(rule)[1]
        if isinstance(m, list):
            return m[i] if i is not None else np.logical_or.reduce(m)
        return m


def implementation_defined(sig: Signature, stacked: Sequence[np.ndarray],
                           spec: OpSpec | None = None,
                           expected: Sequence[np.ndarray] | None = None) -> RuleMasks:
    """For each implementation-defined rule of the spec that applies, a boolean mask
    over the (batched) result elements it covers. Inputs carry a leading batch axis.

    A rule whose ``when:`` gives integers instead names permutation groups: result
    elements with the same label > 0 may hold the oracle's values in any order among
    themselves, the same order in every result (an unstable sort's equal keys); the
    mask is then that int64 label array, and :func:`conformance.checking.compare.compare_batch`
    compares each group as a multiset instead of masking it.

    The rules' conditions see the inputs' values, the attributes, and the results:
    the oracle's values (``expected``, computed here if not given), so that a rule
    can cover "the result overflows". What each rule still allows at its elements
    (``allowed:``) the returned :class:`RuleMasks` evaluates when the comparator asks.
    """
    spec = spec or load_spec(sig.op)
    if not spec.implementation_defined:
        return RuleMasks()
    load_family(sig.op)     # its family module registers the conditions its rules name
    if expected is None:
        expected = evaluate_batch(sig, stacked, spec)
    batch = stacked[0].shape[0] if stacked else 1
    out_shape = tuple(np.shape(expected[0])) if len(expected) else \
        (batch,) + (sig.result_leaves[0].shape if sig.result_leaves else ())
    # ([batch, processes] + shape on a grid; no result arrays: tokens only)
    env: dict[str, Any] = {a.name: None for a in spec.attributes if a.optional}
    env.update(sig.attributes)
    env["num_replicas"], env["num_partitions"] = sig.num_replicas, sig.num_partitions
    env["signature"] = sig      # its types (a quantized tensor's parameters)
    env.update(spec.region_env(sig.regions))
    ready = broadcast_ready(sig, stacked) if spec.elementwise else list(stacked)
    values = spec.split_inputs(ready)
    for t, x in zip(spec.inputs, values):
        env[t.name] = x
    env["input_values"] = list(ready)       # flat, in order (a shared rule knows no names)
    for t, x in zip(spec.outputs, spec.split_outputs(list(expected))):
        env[t.name] = x
    masks = RuleMasks(rules=spec.implementation_defined, env=env,
                      results=expected)
    with np.errstate(all="ignore"):
        for rule in spec.implementation_defined:
            m = ex.evaluate(rule.when, env)
            if rule.per_result:
                ms = _per_result(m, len(expected), f"{sig.op}: {rule.id}.when")
                if any(x.any() for x in ms):
                    # each result's own shape (batch_norm_training: an operand-shaped
                    # output beside per-feature statistics); the union over the results
                    # of the first one's shape
                    each = [_to_result_shape(x, np.shape(e)) for x, e in zip(ms, expected)]
                    masks.per_result[rule.id] = each
                    same = [x for x in each if x.shape == out_shape]
                    masks[rule.id] = np.logical_or.reduce(same) if same else \
                        np.zeros(out_shape, bool)
                continue
            if np.asarray(m).dtype.kind in "iu":
                # Integer labels instead of booleans: permutation groups (compare_batch
                # compares each group's values as a multiset, not masked).
                m = np.asarray(m)
                if (m > 0).any():
                    masks[rule.id] = np.broadcast_to(np.where(m > 0, m, 0), out_shape)
                continue
            m = np.asarray(m).astype(bool)
            if m.any():
                masks[rule.id] = _to_result_shape(m, out_shape)
    return masks


def _exact_f64(sig: Signature, inputs: Sequence[np.ndarray], result: np.ndarray,
               name: str) -> np.ndarray:
    """The oracle again on the same inputs with every float type widened to f64, which
    holds each value of the narrower formats and is what the oracle computes them in
    before rounding once: the exact result that a narrow result type has rounded."""
    if len(sig.result_types) != 1:
        raise OracleError(f"{sig.op}: {name} is for ops with one result")
    f64 = element_type("f64")

    def wide(t):
        return TensorType(t.shape, f64) if t.element_type.is_float else t
    xs = [np.asarray(x) for x in inputs]
    xs = [x.astype(np.float64) if element_type(x.dtype).is_float else x for x in xs]
    r = np.asarray(result)
    (out,) = evaluate(sig.op, xs, sig.attributes, result_types=[TensorType(r.shape, f64)],
                      input_types=[wide(t) for t in sig.input_types], regions=sig.regions)
    return np.asarray(out)


@condition("exact_nan")
def exact_nan(sig: Signature, inputs: Sequence[np.ndarray], result: np.ndarray) -> np.ndarray:
    """Per (batched) result element of an element-wise op: is its exact value not a real
    number (an IEEE NaN)? A result type without NaN has rounded that NaN to some value
    (ml_dtypes: +0 or -0), so ``result`` cannot tell."""
    return np.isnan(_exact_f64(sig, inputs, result, "exact_nan"))


@condition("exact_infinite")
def exact_infinite(sig: Signature, inputs: Sequence[np.ndarray],
                   result: np.ndarray) -> np.ndarray:
    """Per (batched) result element of an element-wise op: is its exact value an infinity
    (a pole: x/0, log(0), rsqrt(0), power(0, -1))? A result type without infinity has
    rounded it to its largest value, which a finite overflow (exp(3) in f4E2M1FN) also
    gives, so ``result`` cannot tell them apart. (The inputs of these formats are finite,
    and f64 holds every finite result of their values: an f64 infinity is a pole.)"""
    return np.isinf(_exact_f64(sig, inputs, result, "exact_infinite"))



@condition("exact_nonpositive")
def exact_nonpositive(sig: Signature, inputs: Sequence[np.ndarray],
                      result: np.ndarray) -> np.ndarray:
    """Per (batched) result element of an element-wise op: is its exact value zero or
    negative? A result type without zero or sign (f8E8M0FNU) has rounded it to its NaN,
    which ``result`` cannot tell from a NaN operand's. (At f64: a power whose exact value
    is below f64's range reads as zero here, where 2^-127 is a neighbour too.)"""
    # the rule's allowed set is convert's alternative('convert_directed', ...): convert's
    # family module registers it, whichever op's oracle module has been loaded
    import_family_module("convert", "conformance.oracles.{family}")
    out = _exact_f64(sig, inputs, result, "exact_nonpositive")
    with np.errstate(invalid="ignore"):
        return out <= 0


def _per_result(value, n: int, where: str) -> list[np.ndarray]:
    """A ``per_result`` rule's ``when:`` value: one mask per result."""
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise OracleError(f"{where}: a per_result rule gives one mask per result "
                          f"({n}), not {type(value).__name__}")
    return [np.asarray(x).astype(bool) for x in value]


def _to_result_shape(mask: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray:
    if mask.ndim == 0:
        return np.broadcast_to(mask, out_shape)
    if mask.shape == out_shape:
        return mask
    # bitcast_convert: the result has one more or one fewer dimension than the operand.
    if mask.ndim == len(out_shape) - 1:
        return np.broadcast_to(mask[..., None], out_shape)
    if mask.ndim == len(out_shape) + 1:
        return mask.any(axis=-1)
    return np.broadcast_to(mask, out_shape)


__all__ = ["evaluate", "evaluate_case", "evaluate_batch", "implementation_defined", "RuleMasks",
           "register", "condition", "CONDITIONS", "REGISTRY", "OracleError", "OracleFn",
           "oracle_for", "broadcast_ready", "Membership"]
