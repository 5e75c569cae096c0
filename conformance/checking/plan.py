"""What a run checks, drawn from the seed alone: depths, signature plans, value
batches, invalid-signature plans, and the case id that names one case of them.

Every front-end (the CLI runner, the pytest plugin, ``conformance repro``, replay,
bench/) draws from these functions, so a case id printed by any of them is rebuilt
by :func:`rebuild`. A plan depends on the seed, the depth, the op and the type key
only (never on a run's filters, the process or the order ops run in).

Case ids
--------
::

    SEED:DEPTH:OP:TYPE_KEY:SIGNATURE_INDEX:BATCH:CASE_INDEX
    e.g. 0:quick:add:f32:1:0:17

``SIGNATURE_INDEX`` is the signature's position in the plan of the type binding
``TYPE_KEY`` (:func:`plan_binding`), ``BATCH`` the value batch (:func:`batch_for`)
and ``CASE_INDEX`` the case's row in that batch. It names the case as drawn, before
minimisation (a saved reproducer holds the minimised one).
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import zlib
from typing import Any, Sequence

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

from conformance.core.case import Case, Signature
from conformance.core.types import element_type
from conformance.generators import batch_inputs, candidates, canonical, signatures
from conformance.generators import coverage, draw_cache
from conformance.checking import newer_floats
from conformance.generators.determinism import seed_only
from conformance.specs import OpSpec, UnknownOp, binding_key, custom_calls, load_spec, op_names


@dataclasses.dataclass(frozen=True)
class Depth:
    """How hard a run looks."""

    signatures: int            # signatures per type binding
    batches: int               # value batches per signature
    batch_size: int            # value cases per batch
    invalid_per_rule: int      # invalid signatures per rule of the spec
    shape_profile: str
    max_signatures_per_op: int  # ops with many bindings (convert) get fewer per binding
    # bindings naming the newer float formats: None every one, an int a rotation over
    # the ops of a family with at most this many per format (checking/newer_floats.py)
    newer_float_cap: int | None = None


DEPTHS = {
    "quick": Depth(2, 1, 32, 1, "quick", 60, newer_float_cap=3),
    "default": Depth(4, 3, 64, 1, "default", 160),
    "deep": Depth(16, 8, 256, 3, "deep", 1200),
}


def stable_hash(*parts: Any) -> int:
    """A hash that is the same in every process (Python's ``hash`` of a str is not)."""
    return zlib.crc32("\x1f".join(map(str, parts)).encode())


def select_ops(ops: Sequence[str] | None = None,
               families: Sequence[str] | None = None) -> list[OpSpec]:
    names = list(ops) if ops else op_names()
    specs = [load_spec(n) for n in names]
    if families:
        specs = [s for s in specs if s.family in set(families)]
    return specs


def select_bindings(spec: OpSpec, element_types: Sequence[str] | None,
                    depth: str | None = None) -> list[dict[str, str]]:
    """The type bindings a run at ``depth`` draws (every one without a depth), those
    naming one of ``element_types`` where given."""
    cap = DEPTHS[depth].newer_float_cap if depth else None
    bindings = newer_floats.drawn(spec.name, spec.family, spec.type_bindings(), cap)
    if element_types:
        wanted = {element_type(t).name for t in element_types}
        bindings = [b for b in bindings if wanted & set(b.values())]
    return bindings


def _collect(strategy, n: int, seed: int) -> list:
    """The first ``n`` examples hypothesis generates from ``strategy`` for ``seed``.

    Deterministic for a seed: no example database, generation phase only.
    """
    out: list = []

    @hseed(seed)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), derandomize=False)
    @given(strategy)
    def gather(x):
        out.append(x)

    # no example database: its key (a digest of gather's source, tokenized anew on every
    # call) is not needed; hypothesis's own find() sets the key the same way
    gather._hypothesis_internal_database_key = None
    with seed_only():        # the seed alone decides, never the process's modules
        gather()
    return out[:n]


def signatures_per_binding(spec: OpSpec, depth: Depth) -> int:
    """Signatures planned per type binding: ops with many bindings (convert) get fewer.

    It depends on the op and the depth only, never on the run's filters, so a case id
    names the same case in every run that has it: a ``--types f32`` run draws exactly
    the f32 signatures of the full run. The seed's types' bindings set it, so that
    drawing the newer float formats left every plan as it was.
    """
    n_bindings = len(newer_floats.seed_bindings(spec.type_bindings()))
    return max(1, min(depth.signatures, depth.max_signatures_per_op // max(1, n_bindings)))


def plan_signatures(spec: OpSpec, binding: dict[str, str], n: int, seed: int,
                    profile: str) -> list[Signature]:
    sigs = _collect(signatures(spec, binding, profile), n,
                    stable_hash(seed, spec.name, binding_key(binding)))
    unique: list[Signature] = []
    for s in sigs:
        if s not in unique:
            unique.append(s)
    return unique


def draw_plan(spec: OpSpec, binding: dict[str, str], seed: int,
              depth: str) -> list[Signature]:
    """The signatures checked for one type binding (index = position in the list), drawn.

    Chosen from a pool of hypothesis draws by :func:`conformance.generators.coverage.schedule`:
    a signature for each of the op's signature-level coverage targets (compare
    TOTALORDER, ...), a rich one (no zero-sized input, enough elements for the value
    combinations), then the draws in hypothesis's order, the minimal one first.
    """
    d = DEPTHS[depth]
    return coverage.schedule(
        spec, binding, lambda k: plan_signatures(spec, binding, k, seed, d.shape_profile),
        signatures_per_binding(spec, d))


# (op, type key, seed, depth, custom-call registry generation) -> (the spec drawn for, its plan): a plan is a pure function
# of these (and of the spec object, checked by identity), and drawing one costs tens of
# milliseconds of hypothesis, so the front-ends, repro and replay within one process draw
# each once. Bounded: a long fuzz campaign plans many seeds.
_PLANS: "collections.OrderedDict[tuple, tuple[OpSpec, tuple[Signature, ...]]]" = \
    collections.OrderedDict()
PLANS_HELD = 4096


def plan_binding(spec: OpSpec, binding: dict[str, str], seed: int,
                 depth: str) -> list[Signature]:
    """:func:`draw_plan`, drawn once per process for the same arguments."""
    # the custom-call targets registered in the process feed custom_call's draws
    key = (spec.name, binding_key(binding), seed, depth, custom_calls.generation())
    held = _PLANS.get(key)
    if held is not None and held[0] is spec:
        _PLANS.move_to_end(key)
        return list(held[1])
    if _stock(spec):          # another process may have drawn it (generators/draw_cache.py)
        sigs = draw_cache.cached("plan", spec.name, (binding_key(binding), seed, depth),
                                 lambda: draw_plan(spec, binding, seed, depth))
    else:
        sigs = draw_plan(spec, binding, seed, depth)
    _PLANS[key] = (spec, tuple(sigs))
    while len(_PLANS) > PLANS_HELD:
        _PLANS.popitem(last=False)
    return list(sigs)


def _stock(spec: OpSpec) -> bool:
    """Whether ``spec`` is the shipped spec of its op (a test's or a user's own spec
    object is drawn for, never read from the draw cache)."""
    try:
        return load_spec(spec.name) is spec
    except Exception:  # noqa: BLE001 - a spec with no file of its name
        return False


def binding_for(spec: OpSpec, key: str) -> dict[str, str]:
    """The type binding whose matrix column name is ``key``."""
    held = _BINDINGS.get(id(spec))
    if held is None or held[0] is not spec:     # specs hold dicts: not hashable
        held = _BINDINGS[id(spec)] = (spec, {binding_key(b): b for b in spec.type_bindings()})
    try:
        return dict(held[1][key])
    except KeyError:
        # the bindings may have changed (custom_call's follow its registered targets)
        fresh = {binding_key(b): b for b in spec.type_bindings()}
        if key not in fresh:
            raise KeyError(f"{spec.name} has no type key {key!r}") from None
        _BINDINGS[id(spec)] = (spec, fresh)
        return dict(fresh[key])


_BINDINGS: dict[int, tuple[OpSpec, dict[str, dict[str, str]]]] = {}


def batch_for(seed: int, depth: str, spec: OpSpec, key: str, index: int, batch: int,
              sig: Signature) -> list[np.ndarray]:
    """The stacked inputs of value batch ``batch`` of signature ``index`` of binding
    ``key``: what every front-end feeds the backend, and what :func:`rebuild` redraws.

    The first positions of the batch hold the op's value-class combinations
    systematically (:func:`conformance.generators.coverage.overlay`, from class pools
    drawn once per seed), the rest is random.
    """
    rng = batch_rng(seed, spec.name, key, index, batch)
    stacked = batch_inputs(sig, rng, DEPTHS[depth].batch_size, spec)
    coverage.overlay(spec, sig, binding_for(spec, key), stacked, rng, batch, seed)
    return stacked


def batch_rng(seed: int, op: str, key: str, index: int, batch: int) -> np.random.Generator:
    """The generator of one value batch: ``np.random.default_rng([seed, stable_hash(op,
    key), index, batch])``, built without ``default_rng``'s checks of its argument (a
    fifth of a warm batch's drawing time; the same state, tests/test_warm_draws.py)."""
    # (SeedSequence reads a list of ints as their 32-bit words, low first, concatenated;
    # given those words as a uint32 array it skips its Python-level conversion of each
    # int: half the generator's cost, the same state)
    words = _prefix_words(seed, op, key, index) + _words(batch)
    return _Generator(_PCG64(_SeedSequence(np.array(words, np.uint32))))


_Generator, _PCG64, _SeedSequence = (np.random.Generator, np.random.PCG64,
                                     np.random.SeedSequence)


@functools.lru_cache(maxsize=4096)
def _op_hash(op: str, key: str) -> int:
    return stable_hash(op, key)


@functools.lru_cache(maxsize=4096)
def _prefix_words(seed: int, op: str, key: str, index: int) -> list[int]:
    return _words(seed) + _words(_op_hash(op, key)) + _words(index)


def _words(n: int) -> list[int]:
    """The 32-bit words of a non-negative int, low first (0: one word), as SeedSequence
    splits an int of its entropy."""
    if n < 0:
        raise ValueError(f"seed parts are non-negative, not {n}")
    out = [n & 0xFFFFFFFF]
    n >>= 32
    while n:
        out.append(n & 0xFFFFFFFF)
        n >>= 32
    return out


def coverage_tally(spec: OpSpec, key: str, sig: Signature) -> "coverage.Tally":
    """What the value batches of ``sig`` meet of the op's coverage model (add each batch,
    then ``record()``: the ``coverage`` field of a ``signature`` record)."""
    return coverage.Tally(spec, sig, binding_for(spec, key))


def plan_invalid(spec: OpSpec, rule: str, n: int, seed: int,
                 valid: Sequence[Signature]) -> list[Signature]:
    """``n`` signatures breaking ``rule`` alone, each a single change of a valid one.

    Deterministic: the valid signatures are the unit's own plan plus canonical
    small ones; the changes are picked with a seeded generator. Those of the seed's
    element types only: the newer float formats join no invalid program yet
    (docs/float-formats.md), so every op's invalid programs stayed as they were.
    """
    bindings = newer_floats.seed_bindings(spec.type_bindings())
    step = max(1, len(bindings) // 6)
    pool = [s for s in valid if not any(t.element_type.name in newer_floats.NEWER
                                        for t in s.input_leaves + s.result_leaves)]
    pool += [canonical(spec, b) for b in bindings[::step]]
    rng = np.random.default_rng([seed, stable_hash(spec.name, "invalid", rule)])
    out: list[Signature] = []
    for i in rng.permutation(len(pool)):
        found = candidates(spec, pool[i], rule)
        if found:
            out.append(found[int(rng.integers(len(found)))])
            if len(out) == n:
                break
    return out


def invalid_inputs(seed: int, spec: OpSpec, rule: str, i: int,
                   sig: Signature) -> tuple[np.ndarray, ...]:
    """The one value case an invalid signature is run with."""
    rng = np.random.default_rng([seed, stable_hash(spec.name, rule), i])
    return tuple(x[0] for x in batch_inputs(sig, rng, 1, spec))


# ---------------------------------------------------------------------------
# Case ids
# ---------------------------------------------------------------------------

class CaseIdError(ValueError):
    """A case id that is malformed or names no case (one-line reason naming the id)."""


@dataclasses.dataclass(frozen=True)
class CaseId:
    seed: int
    depth: str
    op: str
    type_key: str
    index: int          # signature index in the binding's plan
    batch: int          # value batch of that signature
    case: int           # row in the batch

    FORMAT = "SEED:DEPTH:OP:TYPE_KEY:SIGNATURE_INDEX:BATCH:CASE_INDEX"

    def __str__(self) -> str:
        return (f"{self.seed}:{self.depth}:{self.op}:{self.type_key}:{self.index}:"
                f"{self.batch}:{self.case}")

    @classmethod
    def parse(cls, text: str) -> "CaseId":
        parts = text.strip().split(":")
        if len(parts) != 7:
            raise CaseIdError(f"case id {text!r}: expected {cls.FORMAT}")
        seed, depth, op, key, index, batch, case = parts
        if depth not in DEPTHS:
            raise CaseIdError(f"case id {text!r}: unknown depth {depth!r}; known: "
                              f"{', '.join(DEPTHS)}")
        try:
            ints = [int(seed), int(index), int(batch), int(case)]
        except ValueError:
            raise CaseIdError(f"case id {text!r}: seed, signature index, batch and case "
                              f"index must be integers ({cls.FORMAT})") from None
        if min(ints) < 0:
            raise CaseIdError(f"case id {text!r}: negative seed or index")
        return cls(ints[0], depth, op, key, ints[1], ints[2], ints[3])


def case_id(seed: int, depth: str, op: str, key: str, index: int, batch: int,
            case: int) -> str:
    return str(CaseId(seed, depth, op, key, index, batch, case))


def rebuild(text: "str | CaseId") -> tuple[Case, OpSpec]:
    """The case an id names, drawn again with the plan every front-end uses;
    returns (case, spec). Raises :class:`CaseIdError`."""
    cid = text if isinstance(text, CaseId) else CaseId.parse(text)
    try:
        spec = load_spec(cid.op)
    except UnknownOp:
        raise CaseIdError(f"case id {str(cid)!r}: unknown op {cid.op!r}") from None
    bindings = {binding_key(b): b for b in spec.type_bindings()}
    if cid.type_key not in bindings:
        raise CaseIdError(f"case id {str(cid)!r}: {cid.op} has no type key "
                          f"{cid.type_key!r} (see `conformance show {cid.op}`)")
    depth = DEPTHS[cid.depth]
    plan = plan_binding(spec, bindings[cid.type_key], cid.seed, cid.depth)
    if cid.index >= len(plan):
        raise CaseIdError(f"case id {str(cid)!r}: signature index {cid.index} out of range "
                          f"({len(plan)} signature(s) planned for {cid.op} {cid.type_key})")
    if cid.batch >= depth.batches:
        raise CaseIdError(f"case id {str(cid)!r}: batch {cid.batch} out of range (depth "
                          f"{cid.depth} runs {depth.batches} batch(es) per signature)")
    if cid.case >= depth.batch_size:
        raise CaseIdError(f"case id {str(cid)!r}: case index {cid.case} out of range "
                          f"(batches of {depth.batch_size} at depth {cid.depth})")
    sig = plan[cid.index]
    stacked = batch_for(cid.seed, cid.depth, spec, cid.type_key, cid.index, cid.batch, sig)
    return Case(sig, tuple(np.array(x[cid.case], order="C") for x in stacked), str(cid)), spec
