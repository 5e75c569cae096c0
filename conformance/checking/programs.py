"""Checking programs (issue 19): exactly against the program oracle, metamorphically
where ops without one exact answer are involved, and minimising what diverges.

:func:`check_program` judges one program on one backend for a batch of cases:

1. **exact**: the whole program compiled once (``Backend.compile_program``); every result
   element that depends only on ops with bit-exact verdicts (``exact``/``bits``) must
   equal the program oracle's (conformance.oracles.programs) bit for bit (any NaN equals
   any NaN, +0 and -0 differ), except elements an implementation-defined rule reaches.
   An element that differs from the oracle but equals the FTZ/DAZ evaluation of the same
   program is ``subnormal_flush``.
2. **metamorphic**, where the program holds an op with an ``ulp``, ``rel_eps`` or
   ``bound`` verdict, or elements an implementation-defined rule leaves open (which step
   1 skips: a float convert's rounding, an integer division by zero): the program
   returning every value (``Program.exposed``) runs on the backend; each operation that
   is not exact, reads such a value or has such elements is judged by its own
   verdict (conformance.checking.verdicts.judge) against the oracle on the values the backend
   itself gave its operands; an element that fails there but equals what the same backend
   gives running that op alone on those operands (its single-op executable) passes: that
   is the op's own conformance, which single-op runs judge. What is left is a change the
   whole-program compile made beyond what the op's verdict allows.
3. **attribution**: for a divergence of step 1 the backend also runs the program op by
   op on its own intermediate values (backends.programs.op_by_op); where that gives the
   same wrong value the divergence is the ops' own (``fusion: False``), otherwise the
   program's compile caused it (``fusion: True``): what no single-op run shows.

:func:`minimize` shrinks a diverging program: one case, then repeatedly drop a result or
replace an operation's result by a new argument holding the oracle's value, or return an
earlier value instead, keeping a change while the program still diverges with the same
class; then its shapes (a program of element-wise ops alone, every value of one shape:
the one diverging element, as rank 0, else one element per axis) and its values (blocks
of argument elements set to zero, halving the block, within a budget of backend runs).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from conformance import oracles
from conformance.backends.base import Backend, Unsupported
from conformance.backends.programs import compile_program, op_by_op, run_batch
from conformance.checking.checker import error_text, failure_class
from conformance.checking.compare import ELEMENT_CLASSES, PASS, SUBNORMAL_FLUSH, classify, worst
from conformance.core.numerics import flush_subnormals, same_bits_or_nan
from conformance.core.program import Program
from conformance.core.types import type_of
from conformance.oracles.programs import ProgramValues, evaluate_program, exact_op
from conformance.specs import Accuracy, load_spec
from conformance.checking.verdicts import Judgement, judge
from conformance.checking.verdicts.control_flow import NoBound

EXACT = Accuracy("exact")


@dataclasses.dataclass
class Finding:
    """Where a program diverges: one value's elements of one class."""

    value: str
    op: str
    check: str                 # exact | metamorphic
    cls: str
    elements: int
    case: int                  # the first diverging case
    index: tuple[int, ...]     # its first diverging element
    expected: Any = None
    actual: Any = None
    fusion: bool | None = None
    #: the value where the divergence starts (the first operation, in the result's
    #: cone, whose value the backend's own whole-program run gets wrong on its own
    #: operands; ``op`` is that operation's): None when not localised
    at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in dataclasses.asdict(self).items()}


@dataclasses.dataclass
class ProgramVerdict:
    outcome: str               # pass, an element class, type, backend_error, crash, unsupported
    findings: list[Finding] = dataclasses.field(default_factory=list)
    message: str | None = None
    checks: tuple[str, ...] = ()

    @property
    def diverges(self) -> bool:
        return self.outcome not in ("pass", "unsupported")

    @property
    def fusion(self) -> bool | None:
        flags = [f.fusion for f in self.findings if f.fusion is not None]
        return any(flags) if flags else None

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "message": self.message, "checks": list(self.checks),
                "fusion": self.fusion, "findings": [f.to_json() for f in self.findings]}


def _scalar(x) -> Any:
    """One element as the literal format writes it (JSON: nan, inf, -0.0 as strings)."""
    from conformance.core.literals import to_literal
    try:
        return to_literal(np.asarray(x))
    except Exception:  # noqa: BLE001 - a dtype the literal format lacks: its text
        return str(np.asarray(x))


def finding_of(value, op, check, cls_array, expected, actual) -> Finding | None:
    """The finding of one value's element classes (its first diverging element and the
    worst class), or None where every element passes."""
    bad = cls_array != PASS
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    cls = ELEMENT_CLASSES[int(cls_array[bad].max())]
    return Finding(value, op, check, cls, int(bad.sum()), idx[0], idx[1:],
                   _scalar(expected[idx]), _scalar(actual[idx]))


def _exact_classes(actual, expected, flushed, skip) -> np.ndarray:
    cls, _ = classify(actual, expected, EXACT)
    cls = np.asarray(cls).copy()
    cls[skip] = PASS
    flush = (cls != PASS) & same_bits_or_nan(actual, flushed)
    cls[flush] = SUBNORMAL_FLUSH
    return cls


def check_program(backend: Backend, program: Program, inputs: Sequence[np.ndarray],
                  batch: int | None = None, oracle: ProgramValues | None = None,
                  flushed: ProgramValues | None = None,
                  metamorphic: bool = True) -> ProgramVerdict:
    """Judge ``program`` on ``backend`` for the batched ``inputs`` (module docstring)."""
    inputs = [np.asarray(x) for x in inputs]
    if batch is None:
        batch = inputs[0].shape[0] if inputs else 1
    with np.errstate(all="ignore"):
        oracle = oracle or evaluate_program(program, inputs, batch=batch)
        flushed = flushed or evaluate_program(program, inputs, flush=True, batch=batch)
        try:
            exe = compile_program(backend, program)
            actual = run_batch(exe, inputs, batch)
        except Unsupported as e:
            return ProgramVerdict("unsupported", message=_unsupported_op(backend, program, e))
        except Exception as e:  # noqa: BLE001 - the backend's failure is the finding
            cls = failure_class(e)
            return ProgramVerdict(cls, _failing_ops(backend, program, cls, oracle),
                                  error_text(e))
        want = [(batch,) + t.shape for t in program.result_types]
        got = [type_of(a) for a in actual]
        if len(actual) != len(want) or any(
                g.shape != w or g.element_type != t.held_as().element_type
                for g, w, t in zip(got, want, program.result_types)):
            return ProgramVerdict("type", message=f"results are ({', '.join(map(str, got))}); "
                                  f"expected {len(want)} of the program's result types")
        producer = program.producer()
        findings: list[Finding] = []
        for r, a in zip(program.results, actual):
            skip = oracle.masked[r] | oracle.inexact[r] | flushed.masked[r]
            cls = _exact_classes(a, oracle.values[r], flushed.values[r], skip)
            op = program.operations[producer[r][0]].op if r in producer else "argument"
            f = finding_of(r, op, "exact", cls, oracle.values[r], a)
            if f is not None:
                findings.append(f)
        checks = ["exact"]
        if findings:
            obo = _attribute(backend, program, inputs, actual, findings)
            _localise(backend, program, inputs, batch, findings, oracle, flushed, obo)
        if metamorphic and (any(not exact_op(o.signature) for o in program.operations)
                            or any(m.any() for m in oracle.masked.values())):
            checks.append("metamorphic")
            try:
                findings += _metamorphic(backend, program, inputs, batch, oracle)
            except Unsupported as e:
                return ProgramVerdict("unsupported", findings, str(e), tuple(checks))
            except Exception as e:  # noqa: BLE001
                return ProgramVerdict(failure_class(e), findings, error_text(e), tuple(checks))
    outcome = worst([f.cls for f in findings]) if findings else "pass"
    return ProgramVerdict(outcome, findings, None, tuple(checks))


def _failing_ops(backend, program: Program, cls: str, oracle: ProgramValues
                 ) -> list[Finding]:
    """A program the backend fails to compile or run: the ops it fails on alone (their
    single-op executables compiled and run on the oracle's operand values, first case;
    ``fusion: False``, the op's own failure, which
    single-op runs show). None failing alone: one finding without an op, ``fusion:
    True`` (only the whole program fails)."""
    out = []
    for o in program.operations:
        if not o.signature.input_types:
            continue
        try:
            backend.executable(o.signature)([oracle.values[v][0] for v in o.operands])
        except Unsupported:
            continue
        except Exception as e:  # noqa: BLE001 - this op fails alone
            at = o.results[0] if o.results else o.name      # (a token's op: no value)
            out.append(Finding(at, o.op, "compile", failure_class(e), 0, 0, (),
                               None, error_text(e)[:300], fusion=False, at=at))
    return out or [Finding("", "", "compile", cls, 0, 0, (), fusion=True)]


def _unsupported_op(backend, program: Program, error: Unsupported) -> str:
    """The reason a program is unsupported, naming the op: the first operation whose own
    single-op executable the backend refuses too (``multiply i1: ...``); else the program
    path's reason as it is."""
    for o in program.operations:
        if not o.signature.input_types:
            continue
        try:
            backend.executable(o.signature)
        except Unsupported as e:
            from conformance.generators.programs import type_key
            return f"{o.op} {type_key(o.signature)}: {e}"
        except Exception:  # noqa: BLE001 - another failure is not the reason asked for
            continue
    return str(error)


def _localise(backend, program: Program, inputs, batch: int, findings, oracle, flushed,
              obo: dict | None = None) -> None:
    """Move each exact finding to the operation where it starts: for the operations of
    the result's cone in program order, the program cut to return that operation's value
    alone runs on the backend; the first whose value shows the finding's class against
    the oracle (masked and inexact elements aside) is the op at fault (``at``). Cut
    programs compile as the whole did up to there, so a fusion shows where it happens
    (returning every value at once would change what the compiler fuses). None showing
    it: the result's op stays. A localised finding's ``fusion`` is then that value's:
    whether the op-by-op run (``obo``) differs from the cut program there."""
    producer = program.producer()
    by_name = dict(zip(program.argument_names, inputs))
    seen: dict[str, set] = {}
    cut: dict[str, np.ndarray] = {}

    def classes(r: str) -> set:
        if r not in seen:
            try:
                sub = program.with_results([r]).pruned()
                xs = [by_name[n] for n in sub.argument_names]
                (a,) = run_batch(compile_program(backend, sub), xs, batch)
                cut[r] = np.asarray(a)
                skip = oracle.masked[r] | oracle.inexact[r] | flushed.masked[r]
                cls = _exact_classes(np.asarray(a), oracle.values[r], flushed.values[r], skip)
                seen[r] = {ELEMENT_CLASSES[int(c)] for c in np.unique(cls) if c != PASS}
            except Exception:  # noqa: BLE001 - a cut the backend cannot run: unknown
                seen[r] = set()
        return seen[r]

    for f in findings:
        if f.check != "exact" or f.value not in producer:
            continue
        cone = set(program.with_results([f.value]).pruned().producer())
        for o in program.operations:
            if not o.signature.input_types:
                continue
            hit = next((r for r in o.results if r in cone and f.cls in classes(r)), None)
            if hit is not None:
                f.at, f.op = hit, o.op
                if obo is not None and hit in obo and hit in cut:
                    f.fusion = not bool(same_bits_or_nan(obo[hit], cut[hit]).all())
                break


def _attribute(backend, program, inputs, actual, findings) -> dict | None:
    """Does the backend run op by op give the same wrong values? (module docstring, 3)
    Returns every value of the op-by-op run (stacked cases), None where it cannot run."""
    try:
        run = op_by_op(backend, program)
        per_case = [run([x[b] for x in inputs]) for b in range(len(actual[0]))]
        values = {k: np.stack([c[k] for c in per_case]) for k in per_case[0]}
    except Exception:  # noqa: BLE001 - an op the backend cannot run alone: unknown
        return None
    for f in findings:
        i = program.results.index(f.value)
        f.fusion = not bool(same_bits_or_nan(values[f.value], np.asarray(actual[i])).all())
    return values


def judge_operation(o, xs: Sequence[np.ndarray], got: Sequence[np.ndarray]):
    """One operation's results ``got`` (stacked cases) on its operands ``xs``, judged by
    its op's own verdict against the oracle on those operands: the verdict
    (conformance.checking.verdicts) and the oracle's values."""
    sig = o.signature
    spec = load_spec(sig.op)
    expected = list(oracles.evaluate_batch(sig, xs, spec))
    masks = oracles.implementation_defined(sig, xs, spec, expected)
    verdict = judge(Judgement(sig, spec, spec.signature_accuracy(sig), xs, expected, got,
                              masks, lambda ys: oracles.evaluate_batch(sig, ys, spec),
                              rules_on=lambda ys, zs: oracles.implementation_defined(
                                  sig, ys, spec, zs)))
    return verdict, expected


def _metamorphic(backend, program, inputs, batch, oracle) -> list[Finding]:
    exposed = program.exposed()
    values = run_batch(compile_program(backend, exposed), inputs, batch)
    env = {n: x for n, x in zip(program.argument_names, inputs)}
    env.update(zip(exposed.results, values))
    out: list[Finding] = []
    for o in program.operations:
        sig = o.signature
        if not sig.input_types:
            continue
        tainted = any(oracle.inexact[v].any() or oracle.masked[v].any() for v in o.operands) \
            or any(oracle.masked[r].any() for r in o.results)
        if exact_op(sig) and not tainted:
            continue                        # judged exactly on the final results
        xs = [env[v] for v in o.operands]
        got = [env[r] for r in o.results]
        try:
            verdict, expected = judge_operation(o, xs, got)
        except NoBound:         # a loop of inexact ops (a module's RNN): no bound to judge
            continue
        if verdict.type_message is not None:
            out.append(Finding(o.name, o.op, "metamorphic", "type", 0, 0, (),
                               verdict.type_message))
            continue
        if not verdict.diverging_cases().size:
            continue
        alone = run_batch(lambda ys: backend.executable(sig)(ys), xs, batch)
        for r, cls, e, a, s in zip(o.results, verdict.element_classes, expected, got, alone):
            cls = np.asarray(cls).copy()
            cls[same_bits_or_nan(np.asarray(s), np.asarray(a))] = PASS
            f = finding_of(r, o.op, "metamorphic", cls, e, a)
            if f is not None:
                f.fusion = True
                out.append(f)
    return out


# ---------------------------------------------------------------------------------------
# Minimising
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Minimized:
    program: Program
    inputs: list[np.ndarray]        # batched, batch 1
    verdict: ProgramVerdict
    steps: int
    shrunk: list[str] = dataclasses.field(default_factory=list)   # shape / values moves kept


def minimize(backend: Backend, program: Program, inputs: Sequence[np.ndarray],
             verdict: ProgramVerdict, max_checks: int = 200) -> Minimized:
    """The smallest program found that still diverges with ``verdict``'s class."""
    target = verdict.outcome
    inputs = [np.asarray(x) for x in inputs]
    case = verdict.findings[0].case if verdict.findings else 0
    cur_p, cur_x = program, [x[case:case + 1] for x in inputs]
    cur_v = check_program(backend, cur_p, cur_x, batch=1)
    if cur_v.outcome != target:             # the one case alone does not show it
        cur_x = inputs
        cur_v = verdict
    checks, steps = 0, 0
    changed = True
    while changed and checks < max_checks:
        changed = False
        for cand_p, cand_x in _candidates(cur_p, cur_x):
            checks += 1
            v = check_program(backend, cand_p, cand_x,
                              batch=cand_x[0].shape[0] if cand_x else cur_x[0].shape[0]
                              if cur_x else 1)
            if v.outcome == target:
                cur_p, cur_x, cur_v = cand_p, cand_x, v
                steps += 1
                changed = True
                break
            if checks >= max_checks:
                break
    shrunk: list[str] = []

    def still(p, x):
        v = check_program(backend, p, x, batch=x[0].shape[0] if x else 1)
        return v if v.outcome == target else None

    if cur_x and cur_x[0].shape[0] == 1 and cur_v.findings:
        for cand_p, cand_x, what in _smaller_shapes(cur_p, cur_x, cur_v.findings[0]):
            v = still(cand_p, cand_x)
            if v is not None:
                cur_p, cur_x, cur_v = cand_p, cand_x, v
                shrunk.append(what)
                steps += 1
                break
        x, zeroed = _simpler_values(cur_p, cur_x, lambda x: still(cur_p, x) is not None,
                                    budget=max(0, min(24, max_checks - checks)))
        if zeroed:
            cur_x = x
            cur_v = check_program(backend, cur_p, cur_x, batch=1)
            shrunk.append(f"values: {zeroed} argument element(s) set to zero")
            steps += 1
    return Minimized(cur_p, cur_x, cur_v, steps, shrunk)


def _elementwise_only(program: Program) -> tuple[int, ...] | None:
    """The one shape every value of a program of element-wise ops (and constants) has,
    or None when the program holds another op or values of several shapes."""
    shapes = set()
    for o in program.operations:
        sig = o.signature
        if sig.input_types and not load_spec(sig.op).elementwise:
            return None
        if sig.has_tuples:
            return None
        shapes |= {t.shape for t in sig.input_types + sig.result_types}
    shapes |= {t.shape for t in program.argument_types}
    return shapes.pop() if len(shapes) == 1 else None


def reshaped(program: Program, inputs: list[np.ndarray], index: tuple[int, ...],
             keep_axes: bool) -> tuple[Program, list[np.ndarray]]:
    """An element-wise program cut to the element ``index`` of its one shape: rank 0, or
    shape (1, ..., 1) with ``keep_axes``; constants and arguments cut alike."""
    from conformance.core.dense import dense_text
    from conformance.core.types import TensorType

    sel = tuple(slice(i, i + 1) for i in index) if keep_axes else tuple(index)

    def small(t):
        return TensorType((1,) * len(index) if keep_axes else (), t.element_type)

    ops = []
    for o in program.operations:
        sig = o.signature
        attrs = None
        if not sig.input_types:          # a constant: its value at the index
            (value,) = oracles.evaluate(sig.op, [], sig.attributes,
                                        result_types=sig.result_types)
            attrs = {**sig.attributes, "value": dense_text(np.asarray(value)[sel])}
        new = dataclasses.replace(
            sig, input_types=tuple(small(t) for t in sig.input_types),
            result_types=tuple(small(t) for t in sig.result_types),
            attribute_items=sig.attribute_items if attrs is None else
            type(sig).make(sig.op, [], [], attrs).attribute_items)
        ops.append(dataclasses.replace(o, signature=new))
    args = tuple((n, small(t)) for n, t in program.arguments)
    xs = [np.ascontiguousarray(x[(slice(None),) + sel]) for x in inputs]
    return Program(args, tuple(ops), program.results), xs


def _smaller_shapes(program: Program, inputs: list[np.ndarray], finding: Finding):
    """Candidates of fewer elements: see :func:`reshaped` (element-wise programs only)."""
    shape = _elementwise_only(program)
    if not shape or len(finding.index) != len(shape):
        return
    idx = tuple(int(i) for i in finding.index)
    for keep in (False, True):
        try:
            p, x = reshaped(program, inputs, idx, keep)
        except Exception:  # noqa: BLE001 - a constant that cannot be cut: no candidate
            continue
        if not p.problems():
            yield p, x, f"shape {list(shape)} -> {[1] * len(shape) if keep else []} " \
                        f"(element {list(idx)})"


def _simpler_values(program: Program, inputs: list[np.ndarray], diverges, budget: int
                    ) -> tuple[list[np.ndarray], int]:
    """``inputs`` with as many elements zeroed as ``budget`` checks show irrelevant (the
    divergence's class must stay); returns them and how many elements were zeroed."""
    xs = [np.array(x, copy=True) for x in inputs]
    zeroed = 0
    for i, x in enumerate(xs):
        n = x.size
        chunk = max(n // 2, 1)
        while budget > 0:
            for start in range(0, n, chunk):
                flat = xs[i].reshape(-1)
                block = flat[start:start + chunk]
                if budget <= 0 or not np.asarray(block).view(np.uint8).any():
                    continue
                trial = flat.copy()
                trial[start:start + chunk] = np.zeros((), x.dtype)
                cand = xs[:i] + [trial.reshape(x.shape)] + xs[i + 1:]
                budget -= 1
                if diverges(cand):
                    zeroed += int(np.count_nonzero(np.asarray(block).view(np.uint8)
                                                   .reshape(block.size, -1).any(axis=1)))
                    xs = cand
            if chunk == 1:
                break
            chunk = max(chunk // 2, 1)
    return xs, zeroed


def _candidates(program: Program, inputs: list[np.ndarray]):
    """Smaller programs: an earlier value made the only result; a result dropped; an
    operation's result made an argument (holding the oracle's value)."""
    names = program.argument_names
    by_name = dict(zip(names, inputs))
    batch = inputs[0].shape[0] if inputs else 1

    def keep(p: Program, extra: dict[str, np.ndarray] | None = None):
        pool = {**by_name, **(extra or {})}
        return p, [pool[n] for n in p.argument_names]

    for o in program.operations:                # an earlier value as the only result
        for r in o.results:
            if (r,) != program.results and o.signature.input_types:
                yield keep(program.with_results([r]).pruned())
    if len(program.results) > 1:
        for i in range(len(program.results)):
            p = program.with_results(program.results[:i] + program.results[i + 1:]).pruned()
            yield keep(p)
    if len(program.operations) > 1:
        oracle = evaluate_program(program, inputs, batch=batch)
        for o in program.operations:
            if len(o.results) != 1 or not o.signature.input_types:
                continue
            p = program.cut_at(o.name)
            if p.operations:
                yield keep(p, {o.name: oracle.values[o.name]})


__all__ = ["check_program", "ProgramVerdict", "Finding", "minimize", "Minimized",
           "judge_operation", "finding_of"]
