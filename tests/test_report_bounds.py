"""The error as a fraction of the bound (issue 13's report): the ``bound`` verdict counts
|actual − oracle| / bound per result element type, the runner records it in signature
records (``bound_hist``), the report aggregates it per (op, backend, element type) and
draws it; a backend with a bigger error moves mass to the higher buckets; results files
without it still render."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.results import (BOUND_BUCKET_LABELS, BOUND_FRACTION_EDGES,
                                      bound_histogram, merge_bound_hist, read_results)
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations


class OracleBackend(Backend):
    """The oracle itself (regions included): every result the oracle's own."""

    name = "oracle-copy"
    isolate = False

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        return lambda inputs: oracles.evaluate(sig.op, inputs, sig.attributes,
                                               result_types=sig.result_types,
                                               input_types=sig.input_types,
                                               regions=sig.regions)

SUM = Signature.make("reduce", ["tensor<4x64xf32>", "tensor<f32>"], ["tensor<4xf32>"],
                     {"dimensions": [1]}, regions=("(f32, f32) -> add(arg0, arg1)",))


class UlpsOff(OracleBackend):
    """The oracle's float results moved ``ulps`` units in the last place up (finite,
    non-zero normal results): within the bound of a long sum, but further from the
    oracle than a correctly rounded sum."""

    ulps = 6

    def __init__(self, ulps: int | None = None, name: str | None = None):
        if ulps is not None:
            self.ulps = ulps
        self.name = name or f"ulps-{self.ulps}"
        super().__init__()

    def compile(self, sig):
        inner = super().compile(sig)

        def run(inputs):
            out = []
            for r in inner(inputs):
                r = np.asarray(r)
                if r.dtype.kind == "f":
                    moved = r.copy()
                    for _ in range(self.ulps):
                        moved = np.nextafter(moved, np.asarray(np.inf, r.dtype))
                    ok = np.isfinite(r) & (np.abs(r) >= np.finfo(r.dtype).tiny)
                    r = np.where(ok, moved, r).astype(r.dtype)
                out.append(r)
            return out
        return run


def histograms(backend, sig=SUM, batches=4) -> tuple[dict, dict]:
    spec = load_spec(sig.op)
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    assert not check.failed and not check.unsupported
    total, counts = {}, {}
    for b in range(batches):
        batch = check.run_batch(b, batch_for(0, "default", spec, "f32", 0, b, sig))
        v = batch.results[backend.name].verdict
        merge_bound_hist(total, v.bound_hist)
        for k, n in v.counts().items():
            counts[k] = counts.get(k, 0) + n
    return total, counts


def mean_bucket(h: dict) -> float:
    c = np.asarray(h["counts"], float)
    return float((c * np.arange(len(c))).sum() / c.sum())


def test_buckets_are_log_spaced_fractions_of_the_bound():
    assert len(BOUND_BUCKET_LABELS) == len(BOUND_FRACTION_EDGES) + 2
    diff = np.array([0.0, 2.0 ** -20, 2.0 ** -16, 0.3, 0.5, 1.0, 1.5, 0.0, 1e-30, 5.0])
    bound = np.array([1.0] * 7 + [0.0, 0.0, np.inf])
    h = bound_histogram(diff, bound)
    c = dict(zip(BOUND_BUCKET_LABELS, h["counts"]))
    assert c["0"] == 1 and c["≤2^-16"] == 2 and c["≤2^-1"] == 2 and c["≤1"] == 1 \
        and c[">1"] == 1
    assert sum(h["counts"]) == 7
    assert (h["exact"], h["exact_off"], h["vacuous"], h["max"]) == (2, 1, 1, 1.5)


def test_an_infinite_error_is_recorded_as_a_finite_max():
    # |actual - oracle| of two huge f64 values of opposite signs overflows to inf: the
    # record must stay valid JSON (the run crashed on it: a reduce_scatter mutant that
    # hands out the wrong complex<f64> shards)
    import json
    h = bound_histogram(np.array([np.inf, 0.5]), np.array([1.0, 1.0]))
    assert h["counts"][-1] == 1 and h["max"] == np.finfo(np.float64).max
    json.dumps(h, allow_nan=False)


def test_the_bound_verdict_records_the_fraction_per_element_type():
    h, counts = histograms(OracleBackend())
    assert set(h) == {"f32"}
    f = h["f32"]
    # the oracle itself: its own results, 0 of the bound wherever the bound is > 0
    assert sum(f["counts"]) > 0 and f["counts"][0] == sum(f["counts"]), f
    assert counts == {"pass": sum(counts.values())}


def test_a_bigger_error_moves_mass_to_the_higher_buckets():
    small, c_small = histograms(UlpsOff(1))
    big, c_big = histograms(UlpsOff(24))
    s, b = small["f32"], big["f32"]
    assert sum(s["counts"]) == sum(b["counts"])          # the same checked elements
    assert mean_bucket(b) > mean_bucket(s) + 2, (s, b)
    assert b["max"] > 4 * s["max"]
    # within the bound where the sums are long, beyond it (">1") where they are not
    assert b["counts"][-1] >= s["counts"][-1]
    if b["counts"][-1]:
        assert c_big.get("bound", 0) > 0


def test_masked_and_non_finite_elements_are_not_counted():
    """A NaN leaf makes its result NaN (judged exactly, not against a bound): it is not
    among the checked elements."""
    spec = load_spec("reduce")
    check = SignatureCheck(spec, SUM, [OracleBackend()])
    check.compile()
    x = np.ones((3, 4, 64), np.float32) / 3
    x[0, 1, 5] = np.nan
    x[1, 2, 7] = np.inf
    batch = check.run_batch(0, [x, np.zeros(3, np.float32)])
    h = batch.results["oracle-copy"].verdict.bound_hist["f32"]
    assert sum(h["counts"]) + h["exact"] == 3 * 4 - 2


def test_run_records_it_and_the_report_draws_it(tmp_path):
    from conformance.reports import render
    from conformance.apps.runner import RunConfig, run
    cfg = RunConfig(ops=["reduce"], element_types=["f32"], depth="quick", out=tmp_path,
                    progress=False, invalid=False, examples=False, probes=False)
    run(cfg, [UlpsOff(0, "near"), UlpsOff(24, "far")], tmp_path / "results.jsonl")
    sigs = [r for r in read_results(tmp_path / "results.jsonl") if r["kind"] == "signature"]
    with_hist = [r for r in sigs if r.get("bound_hist")]
    # (keyed by the result's element type: f32, or f64 where the body is promoted to
    # f64, issue 30)
    assert with_hist and all(set(r["bound_hist"]) <= {"f32", "f64"} for r in with_hist)
    assert any("f32" in r["bound_hist"] for r in with_hist)
    assert all(len(h["counts"]) == len(BOUND_BUCKET_LABELS)
               for r in with_hist for h in r["bound_hist"].values())
    # integer/max bodies (exact verdicts on the same op) carry none or only exact counts
    index = render(tmp_path / "results.jsonl", tmp_path / "report")
    page = (tmp_path / "report" / "ops" / "reduce.html").read_text()
    for b in ("near", "far"):
        assert f'<div class="charts bound-hist" data-backend="{b}">' in page
    part = page.split('<div class="charts bound-hist" data-backend="far">')[1].split("</div>")[0]
    assert '<figure data-type="f32"' in part and "<svg" in part and "of the bound" in part
    s = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert s["bound_buckets"] == BOUND_BUCKET_LABELS
    near = s["backends"]["near"]["ops"]["reduce"]["bound_hist"]["f32"]
    far = s["backends"]["far"]["ops"]["reduce"]["bound_hist"]["f32"]
    assert sum(near["counts"]) == sum(far["counts"]) > 0
    assert mean_bucket(far) > mean_bucket(near)
    cells = s["backends"]["far"]["ops"]["reduce"]["type_keys"]
    assert any("bound_hist" in c for c in cells.values())
    assert index.is_file()


def test_results_without_it_still_render(tmp_path):
    from conformance.reports import render
    recs = [{"kind": "signature", "op": "reduce", "family": "reduction", "type_key": "f32",
             "backend": "old", "signature": "reduce(...)", "index": 0, "outcome": "pass",
             "cases": 4, "counts": {"pass": 4}, "ulp_hist": None, "max_error": None,
             "impl_defined": {}, "reason": None},
            # a malformed entry from some other writer is skipped, not an error
            {"kind": "signature", "op": "reduce", "family": "reduction", "type_key": "f16",
             "backend": "old", "signature": "reduce(..f16)", "index": 0, "outcome": "pass",
             "cases": 4, "counts": {"pass": 4}, "bound_hist": {"f16": {"counts": "?"}}}]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    render(path, tmp_path / "report")
    page = (tmp_path / "report" / "ops" / "reduce.html").read_text()
    assert "bound-hist" not in page and "Implementation-defined behaviour" not in page
    s = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert "bound_hist" not in s["backends"]["old"]["ops"]["reduce"]
    assert s["implementation_defined_behaviour"] == []
