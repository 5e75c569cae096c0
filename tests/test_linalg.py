"""cholesky and triangular_solve: the residual verdict fails realistic bugs (a wrong
transpose, a unit diagonal that is read, a factor in the wrong triangle, an f32 solve done
in bf16, a 100-ulp perturbation, a dropped NaN) and passes what the spec allows (another
backward-stable algorithm, other values in the implementation-defined triangle, anything
for a matrix that is not positive definite, which is masked and recorded)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.checking import golden

from conformance import oracles
from conformance.backends import Backend, get_backend
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.numerics import round_to, to_wide
from conformance.core.types import element_type
from conformance.generators import batch_inputs, breakable, candidates, canonical
from conformance.oracles import linalg
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations
from conformance.checking.verdicts import RESIDUALS, Judgement, check_known

OPS = ("cholesky", "triangular_solve")


def chol_sig(et, n, lower, batch=(2,)):
    t = f"tensor<{'x'.join(map(str, (*batch, n, n)))}x{et}>"
    return Signature.make("cholesky", [t], [t], {"lower": lower})


def solve_sig(et, m, k, left, lower, unit, transpose, batch=(2,)):
    a = f"tensor<{'x'.join(map(str, (*batch, m, m)))}x{et}>"
    bs = (*batch, m, k) if left else (*batch, k, m)
    b = f"tensor<{'x'.join(map(str, bs))}x{et}>"
    return Signature.make("triangular_solve", [a, b], [b],
                          {"left_side": left, "lower": lower, "unit_diagonal": unit,
                           "transpose_a": transpose})


CHOL = [chol_sig("f32", 4, True), chol_sig("f32", 5, False), chol_sig("complex<f32>", 3, False),
        chol_sig("f64", 6, True, ()), chol_sig("complex<f64>", 4, True, (1, 2))]
SOLVE = [solve_sig("f32", 4, 2, True, True, False, "NO_TRANSPOSE"),
         solve_sig("f32", 3, 3, False, False, True, "TRANSPOSE"),
         solve_sig("complex<f32>", 4, 2, True, False, False, "ADJOINT"),
         solve_sig("complex<f64>", 3, 1, False, True, True, "ADJOINT", ()),
         solve_sig("f64", 5, 2, True, False, True, "TRANSPOSE", (1, 2))]


class Planted(Backend):
    """The oracle per case, changed by ``fn(sig, inputs, out) -> out`` (None: the oracle)."""

    isolate = False

    def __init__(self, fn=None, name="planted"):
        self.fn, self.name = fn, name
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")

        def run(inputs):
            inputs = [np.asarray(x) for x in inputs]
            (out,) = oracles.evaluate(sig.op, inputs, sig.attributes,
                                      result_types=sig.result_types)
            if self.fn is not None:
                with np.errstate(all="ignore"):
                    out = self.fn(sig, inputs, out)
            return [np.asarray(out)]
        return run


def classes(backend, sig, batches=2):
    spec = load_spec(sig.op)
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    counts: dict[str, int] = {}
    impl: dict[str, dict] = {}
    for b in range(batches):
        v = check.run_batch(b, batch_for(0, "default", spec, sig.input_types[0].element_type.name,
                                         0, b, sig)).results[backend.name].verdict
        for cls, n in v.counts().items():
            counts[cls] = counts.get(cls, 0) + n
        for rule, st in v.impl_defined.items():
            impl.setdefault(rule, []).append(st)
    classes.impl = impl
    return counts


def failing(counts):
    return sum(n for c, n in counts.items() if c != "pass")


def ulps(out, k=100, seed=0):
    """``out`` moved by about ``k`` ulps, with random signs, element by element."""
    rng = np.random.default_rng(seed)
    et = element_type(out.dtype)
    u = linalg.unit_roundoff(et)
    w = to_wide(out)
    delta = lambda: rng.choice([-1.0, 1.0], out.shape) * 2 * k * u   # noqa: E731
    if et.is_complex:
        w = w.real * (1 + delta()) + 1j * w.imag * (1 + delta())
    else:
        w = w * (1 + delta())
    return round_to(w, et)


# ---------------------------------------------------------------------------
# golden examples and the oracle
# ---------------------------------------------------------------------------

EXAMPLES = [ex for op in OPS for ex in golden.examples(load_spec(op))]


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_examples_on_oracle_and_jax(ex):
    assert golden.mismatch(ex, oracles.evaluate_case(ex.case)) is None
    out = get_backend("jax").run(ex.case)
    assert golden.mismatch(ex, out) is None


def test_wrong_example_value_fails():
    ex = golden.examples(load_spec("triangular_solve"))[1]
    bad = [np.array([[1.0, 2.0]], np.float32)]
    assert "got" in golden.mismatch(ex, bad)


def test_oracle_solves_every_mode_against_a_dense_solve():
    rng = np.random.default_rng(1)
    for left in (True, False):
        for lower in (True, False):
            for unit in (True, False):
                for tr in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
                    sig = solve_sig("complex<f64>", 5, 3, left, lower, unit, tr, (2,))
                    a, b = batch_inputs(sig, rng, 1)
                    a, b = a[0], b[0]
                    if not np.isfinite(b).all() or not np.isfinite(
                            np.where(linalg.read_mask(5, lower, unit), a, 0)).all():
                        continue
                    (x,) = oracles.evaluate("triangular_solve", [a, b], sig.attributes,
                                            result_types=sig.result_types)
                    t = np.where(linalg.read_mask(5, lower, unit), a, 0)
                    if unit:
                        t = t + np.eye(5)
                    op = {"NO_TRANSPOSE": t, "TRANSPOSE": np.swapaxes(t, -1, -2),
                          "ADJOINT": np.conj(np.swapaxes(t, -1, -2))}[tr]
                    want = np.linalg.solve(op, b) if left else \
                        np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2),
                                                    np.swapaxes(b, -1, -2)), -1, -2)
                    np.testing.assert_allclose(x, want, rtol=1e-10, atol=1e-10)


def test_generated_matrices_have_the_conditioning_they_were_built_with():
    sig = chol_sig("f64", 8, True, (3,))
    (a,) = batch_inputs(sig, np.random.default_rng(0), 16)
    bad = linalg.not_hpd(a, True)
    kinds = np.arange(16) % 8
    assert bad[kinds == 5].all() and bad[kinds == 7].all()        # on purpose
    assert not bad[(kinds != 5) & (kinds != 7)].any()             # incl. near-singular, graded
    assert (a == np.conj(np.swapaxes(a, -1, -2))).all(axis=(-2, -1))[kinds != 7].all()
    lam = np.linalg.eigvalsh(a[kinds == 4])
    assert (lam.max(-1) / lam.min(-1) > 1e12).all()                # near-singular: kappa ~ 1/(128 (n+1) u)


def test_solve_inputs_hold_garbage_where_the_spec_says_nothing_is_read():
    sig = solve_sig("f32", 4, 2, True, True, True, "NO_TRANSPOSE")
    a, _ = batch_inputs(sig, np.random.default_rng(0), 8)
    diag = np.diagonal(a, axis1=-2, axis2=-1)
    upper = a[..., np.triu(np.ones((4, 4), bool), 1)]
    assert not np.isfinite(diag).all() and (diag == 1).any()
    assert np.isnan(upper).any() and (upper == 0).any()


# ---------------------------------------------------------------------------
# cholesky
# ---------------------------------------------------------------------------

def _factor_in(fn):
    """A cholesky backend computing ``fn(hermitian matrix, lower, dtype) -> factor``."""
    def change(sig, inputs, out):
        lower = bool(sig.attributes["lower"])
        et = sig.result_types[0].element_type
        f = fn(linalg.hermitian_from(to_wide(inputs[0]), lower), lower, et.dtype)
        return round_to(f, et)
    return change


def _crout(h, lower, dtype):
    """An unblocked, column-by-column (Crout) Cholesky computed in the element type's own
    precision (float32 for f32): a different, backward-stable algorithm."""
    a = h.astype(dtype)
    n = a.shape[-1]
    low = np.zeros_like(a)
    for j in range(n):
        s = a[..., j, j] - (low[..., j, :j] * np.conj(low[..., j, :j])).sum(-1)
        d = np.sqrt(s.real).astype(dtype)
        low[..., j, j] = d
        col = a[..., j + 1:, j] - (low[..., j + 1:, :j] * np.conj(low[..., j, None, :j])).sum(-1)
        low[..., j + 1:, j] = col / d[..., None]
    low = to_wide(low)
    return low if lower else np.conj(np.swapaxes(low, -1, -2))


@pytest.mark.parametrize("sig", CHOL, ids=[str(s)[:60] for s in CHOL])
def test_cholesky_another_stable_algorithm_and_other_garbage_pass(sig):
    assert failing(classes(Planted(_factor_in(_crout)), sig)) == 0

    def garbage(sig, inputs, out):
        out = out.copy()
        m = linalg.opposite_triangle(out, bool(sig.attributes["lower"]))
        out[np.broadcast_to(m, out.shape)] = np.nan
        return out
    assert failing(classes(Planted(garbage), sig)) == 0


@pytest.mark.parametrize("sig", CHOL, ids=[str(s)[:60] for s in CHOL])
def test_cholesky_100_ulps_off_fails(sig):
    counts = classes(Planted(lambda s, i, o: ulps(o)), sig)
    assert counts.get("bound", 0) > 0, counts


def test_cholesky_factor_in_the_wrong_triangle_fails():
    for sig in CHOL:
        wrong = Planted(lambda s, i, o: np.conj(np.swapaxes(o, -1, -2)))   # L for U, U for L
        assert failing(classes(wrong, sig)) > 0, sig


def test_cholesky_negative_diagonal_fails_as_value():
    # -L has the same product L·Lᴴ: only the diagonal's sign tells it is no Cholesky factor
    counts = classes(Planted(lambda s, i, o: -o), CHOL[0])
    assert counts.get("value", 0) > 0, counts


def test_not_positive_definite_is_masked_and_what_the_backend_gave_is_recorded():
    sig = chol_sig("f32", 4, True)

    def anything(sig, inputs, out):
        bad = linalg.not_hpd(inputs[0], True)
        return np.where(bad[..., None, None], np.float32(42.0), out).astype(out.dtype)
    assert failing(classes(Planted(anything), sig)) == 0
    st = classes.impl["not_hermitian_positive_definite"]
    assert sum(s["elements"] for s in st) > 0
    assert sum(s["alternatives"].get("finite", 0) for s in st) > 0      # the 42s, recorded
    # the same backend with a NaN for one positive definite matrix fails
    def nan_on_good(sig, inputs, out):
        out = out.copy()
        out[0, 0, 0] = np.nan
        return out
    assert classes(Planted(nan_on_good), sig).get("value", 0) > 0


def test_cholesky_masks_by_matrix_not_by_case():
    sig = chol_sig("f64", 3, True, (2,))
    spec = load_spec("cholesky")
    good = np.array([[4.0, 0, 0], [2, 5, 0], [0, 1, 3]])
    good = good @ good.T
    bad = np.diag([1.0, -1.0, 2.0])
    a = np.stack([np.stack([good, bad])])
    expected = oracles.evaluate_batch(sig, [a], spec)
    masks = oracles.implementation_defined(sig, [a], spec, expected)
    m = masks["not_hermitian_positive_definite"]
    assert m[0, 1].all() and not m[0, 0].any()
    wrong = expected[0].copy()
    wrong[0, 0, 2, 2] *= 1.001
    j = Judgement(sig, spec, spec.signature_accuracy(sig), [a], expected, [wrong], masks)
    res, allowed, _ = RESIDUALS["cholesky"](j)
    assert res[0] > allowed[0]          # the good matrix still judged
    j = Judgement(sig, spec, spec.signature_accuracy(sig), [a], expected, [expected[0]], masks)
    res, allowed, _ = RESIDUALS["cholesky"](j)
    assert res[0] <= allowed[0]


# ---------------------------------------------------------------------------
# triangular_solve
# ---------------------------------------------------------------------------

def _dense_solve(sig, inputs, out, *, full=False, diag=False, transpose=None):
    """A float64 dense solve (numpy.linalg.solve) of op(a): another backward-stable algorithm
    (rounded once), or with a bug: ``full`` reads the whole matrix, ``diag`` reads the
    diagonal under unit_diagonal, ``transpose`` replaces transpose_a."""
    a, b = (to_wide(x) for x in inputs)
    at = sig.attributes
    lower, unit = bool(at["lower"]), bool(at["unit_diagonal"])
    mode = transpose or str(at["transpose_a"])
    t = a if full else np.where(linalg.read_mask(a.shape[-1], lower, unit and not diag), a, 0)
    if unit and not diag and not full:
        t = t + np.eye(a.shape[-1])
    op = {"NO_TRANSPOSE": t, "TRANSPOSE": np.swapaxes(t, -1, -2),
          "ADJOINT": np.conj(np.swapaxes(t, -1, -2))}[mode]
    if not bool(at["left_side"]):
        op, b = np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)
    with np.errstate(all="ignore"):
        try:
            x = np.linalg.solve(op, b)
        except np.linalg.LinAlgError:
            x = np.full(b.shape, np.nan, b.dtype)
    if not bool(at["left_side"]):
        x = np.swapaxes(x, -1, -2)
    return round_to(x, sig.result_types[0].element_type)


def _legal_solve(sig, inputs, out):
    """Dense LU at float64 where every read element is finite; the oracle (NaN pattern)
    elsewhere."""
    at = sig.attributes
    if linalg.solve_reads_non_finite(inputs[0], inputs[1], bool(at["lower"]),
                                     bool(at["unit_diagonal"])).any():
        return out
    return _dense_solve(sig, inputs, out)


def _f32_in_bf16(sig, inputs, out):
    """An f32 solve done in bf16: inputs and result rounded to bf16."""
    et = sig.result_types[0].element_type
    comp = "bf16"
    low = [round_to(to_wide(x), comp if not et.is_complex else comp) if not et.is_complex
           else (round_to(to_wide(x).real, comp).astype(np.float64)
                 + 1j * round_to(to_wide(x).imag, comp).astype(np.float64)) for x in inputs]
    low = [np.asarray(x).astype(inputs[0].dtype) for x in low]
    (x,) = oracles.evaluate(sig.op, low, sig.attributes, result_types=sig.result_types)
    w = to_wide(x)
    w = (round_to(w.real, comp).astype(np.float64) + 1j * round_to(w.imag, comp).astype(
        np.float64)) if et.is_complex else round_to(w, comp).astype(np.float64)
    return round_to(w, et)


@pytest.mark.parametrize("sig", SOLVE, ids=[str(s)[:70] for s in SOLVE])
def test_solve_another_stable_algorithm_passes(sig):
    assert failing(classes(Planted(_legal_solve), sig)) == 0


@pytest.mark.parametrize("sig", SOLVE, ids=[str(s)[:70] for s in SOLVE])
def test_solve_100_ulps_off_fails(sig):
    counts = classes(Planted(lambda s, i, o: ulps(o)), sig)
    assert counts.get("bound", 0) > 0, counts


def test_solve_with_the_wrong_transpose_fails():
    wrong_of = {"NO_TRANSPOSE": "TRANSPOSE", "TRANSPOSE": "NO_TRANSPOSE", "ADJOINT": "TRANSPOSE"}
    for sig in SOLVE:
        mode = wrong_of[sig.attributes["transpose_a"]]
        bug = Planted(lambda s, i, o, mode=mode: _dense_solve(s, i, o, transpose=mode))
        assert failing(classes(bug, sig)) > 0, sig


def test_solve_that_reads_the_unit_diagonal_fails():
    for sig in SOLVE:
        if not sig.attributes["unit_diagonal"]:
            continue
        counts = classes(Planted(lambda s, i, o: _dense_solve(s, i, o, diag=True)), sig)
        assert counts.get("value", 0) + counts.get("bound", 0) > 0, (sig, counts)


def test_solve_that_reads_the_other_triangle_fails():
    counts = classes(Planted(lambda s, i, o: _dense_solve(s, i, o, full=True)), SOLVE[0])
    assert counts.get("value", 0) + counts.get("bound", 0) > 0, counts


@pytest.mark.parametrize("sig", [SOLVE[0], SOLVE[2]], ids=["f32", "complex<f32>"])
def test_f32_solve_done_in_bf16_fails(sig):
    counts = classes(Planted(_f32_in_bf16), sig)
    assert counts.get("bound", 0) > 0, counts


def test_solve_that_drops_a_nan_fails_and_a_wider_spread_passes():
    sig = SOLVE[0]
    at = sig.attributes

    def spread(sig, inputs, out):
        # NaN in every element of a system with a non-finite element read (an inverse of
        # a whole block): allowed beyond the substitution's own elements
        bad = linalg.solve_reads_non_finite(inputs[0], inputs[1], True, False)
        return np.where(bad[..., None, None], np.float32(np.nan), out).astype(out.dtype)

    def drop(sig, inputs, out):
        return np.where(np.isfinite(out), out, np.float32(0)).astype(out.dtype)
    assert failing(classes(Planted(spread), sig, batches=3)) == 0
    assert classes.impl.get("non_finite_input")
    counts = classes(Planted(drop), sig, batches=3)
    assert counts.get("nan", 0) > 0, counts
    assert at["lower"] and not at["unit_diagonal"]


# ---------------------------------------------------------------------------
# specs: invalid cases, verdict registration
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_every_constraint_has_an_invalid_case_that_jax_refuses(op):
    spec = load_spec(op)
    valids = [canonical(spec, spec.type_bindings()[0], shape) for shape in ((), (2,))]
    assert all(violations(v, spec) == [] for v in valids)
    jax = get_backend("jax")
    assert set(breakable(spec)) >= {c.id for c in spec.constraints}
    for c in spec.constraints:
        bad = [m for v in valids for m in candidates(spec, v, c.id)]
        assert bad, c.id
        assert violations(bad[0], spec) == [c.id], (c.id, bad[0].key())
        try:
            fn = jax.compile(bad[0])
            x = batch_inputs(bad[0], np.random.default_rng(0), 1)
            fn([v[0] for v in x])
            ran = True
        except Exception:  # noqa: BLE001 - refused (rejected or unsupported)
            ran = False
        assert not ran, (c.id, bad[0].key())


def test_residual_functions_are_registered_and_named_by_the_specs():
    for op in OPS:
        spec = load_spec(op)
        for et in ("f32", "complex<f64>", "bf16"):
            acc = spec.accuracy(element_type(et))
            check_known(acc, op)
            assert acc.kind == "residual" and acc.options["residual"] == op
            assert acc.options["c"] == 4
