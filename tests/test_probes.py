"""Probes of implementation-defined behaviour (conformance/checking/probes.py): planted backends
that sum in bf16, f16, f32, f64 or exactly, in a known order, must be told apart; a
backend whose sums depend on more than precision and order, or that cannot run the
probe, gives ``undetermined``, never a guess."""
from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest

from conformance.checking import probes
from conformance.backends import Backend, Unsupported
from conformance.specs import load_spec
from conformance.specs.validity import violations

ACC = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64}


def _terms(sig, inputs) -> np.ndarray:
    """The terms a sum-form case adds: reduce's operand, dot_general's products."""
    if sig.op == "reduce":
        return np.asarray(inputs[0], np.float64)
    lhs, rhs = (np.asarray(x, np.float64) for x in inputs[:2])
    if sig.op == "convolution":       # NWC lhs [.., 1, n, 1], WIO kernel [.., n, 1, 1]
        lhs, rhs = lhs.reshape(lhs.shape[:-3] + (-1,)), rhs.reshape(rhs.shape[:-3] + (-1,))
    return lhs * rhs


def _fold(x: np.ndarray, dt) -> np.ndarray:
    acc = x[..., 0].astype(dt)
    for i in range(1, x.shape[-1]):
        acc = (acc + x[..., i].astype(dt)).astype(dt)
    return acc


def _pairwise(x: np.ndarray, dt) -> np.ndarray:
    if x.shape[-1] == 1:
        return x[..., 0].astype(dt)
    h = x.shape[-1] // 2
    return (_pairwise(x[..., :h], dt) + _pairwise(x[..., h:], dt)).astype(dt)


def _lanes8(x: np.ndarray, dt) -> np.ndarray:
    """8 strided partial sums, folded in halves (lane i + lane i+4, ...): no tree in
    index order."""
    lanes = [_fold(x[..., i::8], dt) if i < x.shape[-1] else np.zeros(x.shape[:-1], dt)
             for i in range(8)]
    while len(lanes) > 1:
        h = len(lanes) // 2
        lanes = [(lanes[i] + lanes[i + h]).astype(dt) for i in range(h)]
    return lanes[0]


def _exact(x: np.ndarray, dt) -> np.ndarray:
    return np.array([math.fsum(r) for r in x.reshape(-1, x.shape[-1])]).reshape(x.shape[:-1])


ORDERS = {"sequential": _fold, "pairwise": _pairwise, "lanes8": _lanes8}


class SumBackend(Backend):
    """reduce (add body) and dot_general as sums of their terms, accumulated in ``acc``
    (a type name, or ``exact``) in the order ``order``; the result rounded once to the
    result type."""

    isolate = False

    def __init__(self, acc: str, order: str = "sequential", name: str | None = None):
        self.acc, self.order = acc, order
        self.name = name or f"sum-{acc}-{order}"
        super().__init__()

    def sums(self, x: np.ndarray) -> np.ndarray:
        if self.acc == "exact":
            return _exact(x, None)
        return ORDERS[self.order](x, ACC[self.acc]).astype(np.float64)

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        if sig.op not in ("reduce", "dot_general", "convolution"):
            raise Unsupported("sums only")
        out_dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            return [np.asarray(self.sums(_terms(sig, inputs))).astype(out_dtype)]
        return run


class ShuffledSums(SumBackend):
    """Every case summed in its own random order: no precision or order explains the
    sums (the precision rows turn non-monotone, the order rows fit no model)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.rng = np.random.default_rng(7)     # one stream: every case its own order

    def sums(self, x):
        rng = self.rng
        out = np.empty(x.shape[:-1])
        flat, res = x.reshape(-1, x.shape[-1]), out.reshape(-1)
        for r in range(flat.shape[0]):
            res[r] = _fold(flat[r, rng.permutation(flat.shape[1])][None], ACC[self.acc])[0]
        return out


class NoisySums(SumBackend):
    """f32 sums one ulp high: neither δ nor 0 where the probe expects one of them."""

    def sums(self, x):
        s = super().sums(x).astype(np.float32)
        return np.nextafter(s, np.float32(np.inf)).astype(np.float64)


class Refuses(SumBackend):
    def compile(self, sig):
        raise Unsupported("this backend has no reductions")


def probe(backend, op="reduce", t="f32", pc=None, order=True):
    plan = probes.ProbePlan(element_types=(t,), precision_configs=(pc,), order=order)
    (rec,) = probes.probe_backend(backend, op, plan)
    return rec


# ---------------------------------------------------------------------------
# Accumulation precision
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_f32_f64_bf16_and_exact_accumulation_are_told_apart(t):
    found = {acc: probe(SumBackend(acc), t=t, order=False) for acc in
             ("bf16", "f16", "f32", "f64", "exact")}
    assert {a: r["accumulation"] for a, r in found.items()} == {
        "bf16": "bf16", "f16": "f16", "f32": "f32", "f64": "f64", "exact": "wider than f64"}
    assert [found[a]["precision_bits"] for a in ("bf16", "f16", "f32", "f64")] == \
        [8, 11, 24, 53]


def test_accumulation_does_not_depend_on_the_order():
    """Sequential, pairwise (trees in index order) and 8 strided lanes (not), all in f32:
    the precision is f32 (the rows put B, δ and −B 384 apart: in index order, and in one
    lane of any strided evaluation with 2^i up to 128 lanes)."""
    for order in ORDERS:
        assert probe(SumBackend("f32", order), t="bf16", order=False)["accumulation"] == \
            "f32", order


def test_f16_inputs_too_short_for_the_f64_row_say_a_lower_bound():
    """f16 holds j only up to 28: f64 accumulation shows as 'f64 or wider', not f64."""
    assert probe(SumBackend("f32"), t="f16", order=False)["accumulation"] == "f32"
    rec = probe(SumBackend("f64"), t="f16", order=False)
    assert rec["accumulation"] == "f64 or wider" and rec["precision_bits"] is None


def test_dot_general_probe_per_precision_config():
    rec = probe(SumBackend("f32", "lanes8"), op="dot_general", t="bf16", pc="HIGHEST")
    assert rec["precision_config"] == "HIGHEST"
    assert rec["accumulation"] == "f32"
    assert rec["order"] == "strided-8, lanes summed by halves (l[i] + l[i+k/2])"
    assert rec["in_index_order"] is False
    sig = probes.SUM_FORMS["dot_general"].signature("bf16", 7, "DEFAULT")
    assert not violations(sig, load_spec("dot_general"))
    sig = probes.SUM_FORMS["reduce"].signature("f16", 7, None)
    assert not violations(sig, load_spec("reduce"))


def test_convolution_sum_form():
    sig = probes.SUM_FORMS["convolution"].signature("f32", 7, "HIGHEST")
    assert not violations(sig, load_spec("convolution"))
    rec = probe(SumBackend("f64", "pairwise"), op="convolution", t="f32", pc="DEFAULT")
    assert (rec["accumulation"], rec["precision_config"]) == ("f64", "DEFAULT")
    assert rec["in_index_order"] is True


def test_sums_that_depend_on_more_than_precision_are_undetermined():
    rec = probe(ShuffledSums("bf16"), t="f32")
    assert rec["accumulation"] == "undetermined"
    assert rec["precision_bits"] is None


def test_a_value_neither_delta_nor_zero_is_undetermined():
    rec = probe(NoisySums("f32"), t="f32")
    assert rec["accumulation"] == "undetermined" and "neither" in rec["detail"]


def test_a_backend_that_cannot_run_the_probe_says_why():
    rec = probe(Refuses("f32"))
    assert rec["accumulation"] == "undetermined"
    assert "no reductions" in rec["detail"]


def test_decide_precision_brackets_and_refuses_non_monotone_patterns():
    js = list(range(2, 10))
    d = np.array([2.0 ** -j for j in js])
    sums = np.where(np.array(js) <= 7, d, 0.0)
    assert probes.decide_precision(js, sums, d)[0] == (7, 8)
    assert probes.format_of((7, 8)) == ("bf16", 8)
    assert probes.format_of((12, 13)) == ("undetermined", None)   # no format has 12-13 bits
    sums[2] = 0.0                                                  # j=4 lost, j=5 exact
    assert probes.decide_precision(js, sums, d)[0] is None


# ---------------------------------------------------------------------------
# Order
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("order, name, in_order", [
    ("sequential", "sequential", True),
    ("pairwise", "pairwise", True),
    ("lanes8", "strided-8, lanes summed by halves (l[i] + l[i+k/2])", False),
])
def test_orders_are_told_apart(order, name, in_order):
    rec = probe(SumBackend("f32", order), t="f32")
    assert rec["accumulation"] == "f32"
    # powers of two: halving at n//2 and at the largest power of two below n coincide
    assert rec["order"] == name or (order == "pairwise" and rec["order"] == "undetermined"
                                    and "pairwise (power-of-two split)" in rec["order_models"])
    assert rec["in_index_order"] is in_order


def test_order_needs_a_term_lost_at_the_accumulation_precision():
    """f16 spans 28 binades: a term lost against B in f64 does not fit, so the order is
    undetermined (while f32 accumulation leaves room)."""
    assert probe(SumBackend("f64"), t="f16")["order"] == "undetermined"
    assert probe(SumBackend("f32"), t="f16")["order"] == "sequential"


def test_an_order_no_model_fits_is_undetermined():
    rec = probe(ShuffledSums("f32"), t="f32", order=True)
    assert rec.get("order", "undetermined") == "undetermined"


def test_models_agree_with_the_planted_orders_on_their_own_rows():
    """The models predict what the planted evaluators do (independent code)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 64))
    for model, planted in (("sequential", _fold), ("pairwise", _pairwise)):
        np.testing.assert_array_equal(probes.ORDER_MODELS[model][0](x),
                                      planted(x, np.float64))
    np.testing.assert_array_equal(
        probes.ORDER_MODELS["strided-8, lanes summed by halves (l[i] + l[i+k/2])"][0](x),
        _lanes8(x, np.float64))


# ---------------------------------------------------------------------------
# In a run, and in the report
# ---------------------------------------------------------------------------

def test_run_records_probes_and_the_report_shows_them(tmp_path):
    from conformance.core.results import read_results
    from conformance.reports import render
    from conformance.apps.runner import RunConfig, run
    cfg = RunConfig(ops=["reduce"], element_types=["bf16"], depth="quick", out=tmp_path,
                    progress=False, invalid=False, examples=False)
    backends = [SumBackend("f32", name="acc-f32"), SumBackend("bf16", name="acc-bf16")]
    run(cfg, backends, tmp_path / "results.jsonl")
    recs = [r for r in read_results(tmp_path / "results.jsonl") if r["kind"] == "probe"]
    got = {(r["backend"], r["element_type"]): r["accumulation"] for r in recs}
    assert got == {("acc-f32", "bf16"): "f32", ("acc-bf16", "bf16"): "bf16"}
    index = render(tmp_path / "results.jsonl", tmp_path / "report")
    html = index.read_text()
    assert "Implementation-defined behaviour" in html
    assert 'data-backend="acc-f32" data-type="bf16" data-precision-config="" ' \
           'data-accumulation="f32" data-order="sequential"' in html
    page = (tmp_path / "report" / "ops" / "reduce.html").read_text()
    assert 'id="impl-behaviour"' in page and 'data-accumulation="bf16"' in page
    s = json.loads((tmp_path / "report" / "summary.json").read_text())
    rows = {(r["backend"], r["element_type"]): r for r in s["implementation_defined_behaviour"]}
    assert rows[("acc-bf16", "bf16")]["accumulation"] == "bf16"
    assert rows[("acc-f32", "bf16")]["order"] == "sequential"

    cfg.probes = False
    run(cfg, backends, tmp_path / "again.jsonl")
    assert not [r for r in read_results(tmp_path / "again.jsonl") if r["kind"] == "probe"]


# ---------------------------------------------------------------------------
# Operand precision (TF32-like passes) and HIGH
# ---------------------------------------------------------------------------

def _tf32(x: np.ndarray) -> np.ndarray:
    """Round to 11 significand bits (to nearest even) in f32's exponent range: TF32."""
    m, e = np.frexp(np.asarray(x, np.float64))
    return np.ldexp(np.round(m * 2.0 ** 11) / 2.0 ** 11, e)


class RoundsOperands(SumBackend):
    """A contraction that rounds its operands first at some precision_configs (TF32 at
    DEFAULT, bf16 at HIGH: an accelerator's fast passes), then sums the products in f32;
    ``sides`` says which operands it rounds."""

    ROUND = {"tf32": _tf32,
             "bf16": lambda x: np.asarray(x).astype(ml_dtypes.bfloat16).astype(np.float64)}

    def __init__(self, by_config: dict, sides=(0, 1), acc="f32", name=None):
        super().__init__(acc, name=name or f"rounds-{by_config}")
        self.by_config, self.sides = by_config, sides

    def compile(self, sig):
        inner = super().compile(sig)
        how = self.by_config.get((sig.attributes.get("precision_config") or [None])[0])
        if how is None:
            return inner
        rnd = self.ROUND[how]

        def run(inputs):
            xs = [rnd(np.asarray(x, np.float64)).astype(np.asarray(x).dtype)
                  if i in self.sides else x for i, x in enumerate(inputs)]
            return inner(xs)
        return run


@pytest.mark.parametrize("op", ["dot_general", "convolution"])
def test_operands_rounded_first_are_told_per_precision_config(op):
    backend = RoundsOperands({"DEFAULT": "tf32", "HIGH": "bf16"})
    found = {pc: probe(backend, op=op, t="f32", pc=pc, order=False)
             for pc in ("DEFAULT", "HIGH", "HIGHEST")}
    assert {pc: r["operand_precision"] for pc, r in found.items()} == {
        "DEFAULT": "f16/TF32 (rounded)", "HIGH": "bf16 (rounded)", "HIGHEST": "f32 (as given)"}
    assert found["DEFAULT"]["operand_bits"] == [11, 11]
    assert found["DEFAULT"]["operand_rounded"] is True
    assert found["HIGHEST"]["operand_rounded"] is False
    # the accumulation probe's powers of two are unaffected: f32 accumulation throughout
    assert {r["accumulation"] for r in found.values()} == {"f32"}
    assert "Operands: (1 + 2^-j)*1 kept up to j=10" in found["DEFAULT"]["detail"]


def test_one_operand_rounded_and_what_the_accumulation_hides():
    rec = probe(RoundsOperands({"DEFAULT": "tf32"}, sides=(1,)), op="dot_general", t="f32",
                pc="DEFAULT", order=False)
    assert rec["operand_bits"] == [24, 11] and rec["operand_precision"] == "f16/TF32 (rounded)"
    # accumulating in bf16 loses 1 + 2^-8 anyway: the operands' rounding cannot be told
    rec = probe(SumBackend("bf16"), op="dot_general", t="f32", pc="DEFAULT", order=False)
    assert rec["accumulation"] == "bf16"
    assert rec["operand_precision"] == "undetermined" and rec["operand_bits"] == [8, 8]
    # sums one ulp high are no rounding of 1 + 2^-j: undetermined, not "1 bit"
    rec = probe(NoisySums("f32"), op="dot_general", t="f32", pc="DEFAULT", order=False)
    assert rec["operand_precision"] == "undetermined"
    # reduce has no operands to round: no such finding
    assert "operand_precision" not in probe(SumBackend("f32"), t="f32", order=False)


def test_contractions_are_probed_at_high_too():
    for op in ("dot_general", "convolution"):
        assert probes.PROBED[op].precision_configs == ("DEFAULT", "HIGH", "HIGHEST")


def test_the_report_shows_the_operand_precision(tmp_path):
    from conformance.core.results import read_results
    from conformance.reports import render
    from conformance.apps.runner import RunConfig, run
    cfg = RunConfig(ops=["dot_general"], element_types=["f32"], depth="quick", out=tmp_path,
                    progress=False, invalid=False, examples=False)
    run(cfg, [RoundsOperands({"DEFAULT": "tf32"}, name="tf32")], tmp_path / "results.jsonl")
    recs = {r["precision_config"]: r for r in read_results(tmp_path / "results.jsonl")
            if r["kind"] == "probe" and r["element_type"] == "f32"}
    assert recs["DEFAULT"]["operand_precision"] == "f16/TF32 (rounded)"
    assert recs["HIGH"]["operand_precision"] == "f32 (as given)"
    index = render(tmp_path / "results.jsonl", tmp_path / "report")
    html = index.read_text()
    assert 'data-precision-config="DEFAULT"' in html and 'data-precision-config="HIGH"' in html
    assert 'data-operand-precision="f16/TF32 (rounded)"' in html
    assert "(operands rounded)" in html
    s = json.loads((tmp_path / "report" / "summary.json").read_text())
    rows = {(r["element_type"], r["precision_config"]): r
            for r in s["implementation_defined_behaviour"]}
    assert rows[("f32", "DEFAULT")]["operand_bits"] == [11, 11]


class CountingSums(SumBackend):
    """A SumBackend that sums a whole batch at once and records how many rows each
    execution got."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.batches: list[int] = []

    def compile_batch(self, sig):
        self.compile(sig)                       # (refuses what compile refuses)
        out_dtype = sig.result_types[0].element_type.dtype

        def execute(stacked):
            self.batches.append(len(stacked[0]))
            sums = self.sums(_terms(sig, stacked))
            return [np.asarray(sums).reshape((len(stacked[0]),) +
                                             sig.result_types[0].shape).astype(out_dtype)]
        return execute


@pytest.mark.parametrize("op", ["convolution", "dot_general", "reduce"])
def test_probe_rows_go_in_small_batches(op):
    """Every execution gets PROBE_BATCH rows (the last padded), one compile serves them
    all, and the findings are those of the rows run one by one: a batch of all the rows
    at once (468 for f64) made jax's vmap of a convolution a grouped convolution whose
    kernel XLA expands to rows x rows x 1024 (1.8 GB, issue 31)."""
    backend = CountingSums("f32", "sequential")
    rec = probe(backend, op=op, t="f64", pc="HIGHEST" if op != "reduce" else None)
    assert backend.batches and set(backend.batches) == {probes.PROBE_BATCH}
    assert sum(backend.batches) < 2 * 468
    assert len(backend._batch_cache) == 1
    assert (rec["accumulation"], rec["in_index_order"]) == ("f32", True)
