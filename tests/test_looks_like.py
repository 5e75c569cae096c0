"""Expectations that name the bug (issue 32 item 3): an entry's ``looks_like`` says what the
known divergence looks like (its worst error, whether it involves inf/NaN), so that another
bug of the same op, element type and class is unexpected; the signature records carry what
it is matched against (``class_errors``)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conformance.apps.expectations import (Expectation, ExpectationsError, error_margin,
                                           gate, load_expectations, looks_of, update)
from conformance.checking.checker import SignatureCheck
from conformance.checking.plan import batch_for
from conformance.checking.stream import BackendTotals
from conformance.core.case import Signature
from conformance.specs import load_spec
from planted import OracleBackend


def entry(**looks):
    return Expectation(op="tanh", cls="accuracy", reason="r", element_types=("f64",),
                       looks_like=tuple(sorted(looks.items())))


def finding(worst=7.0, cases=10, nonfinite=0, measured=True):
    return {"backend": "jax", "op": "tanh", "element_type": "f64", "rule": None,
            "class": "accuracy", "cases": cases, "worst": worst, "witnessed": cases,
            "nonfinite": nonfinite, "measured": measured}


# -- matching, edge by edge ---------------------------------------------------------------

def test_error_at_most_matches_at_the_bound_and_not_just_above():
    e = entry(error_at_most=16)
    assert e.fits(finding(worst=16.0))
    assert e.fits(finding(worst=0.5))
    assert not e.fits(finding(worst=float(np.nextafter(16.0, 17.0))))
    assert not e.fits(finding(worst=17.0))
    # a finding whose records do not carry the measure (older files) does not fit
    assert not e.fits(finding(measured=False))
    assert not e.fits(finding(worst=None))
    # an infinite worst (an inf where a finite value was due) never fits a finite bound
    assert not e.fits(finding(worst=float("inf")))


def test_nonfinite_true_and_false_need_all_or_none_of_the_cases():
    assert entry(nonfinite=False).fits(finding(nonfinite=0))
    assert not entry(nonfinite=False).fits(finding(nonfinite=1))
    assert entry(nonfinite=True).fits(finding(cases=3, nonfinite=3))
    assert not entry(nonfinite=True).fits(finding(cases=3, nonfinite=2))
    assert not entry(nonfinite=True).fits(finding(cases=0, nonfinite=0))
    assert not entry(nonfinite=False).fits(finding(measured=False))
    both = entry(error_at_most=8, nonfinite=False)
    assert both.fits(finding(worst=8.0)) and not both.fits(finding(worst=8.0, nonfinite=1))


def test_an_entry_without_looks_like_matches_as_before():
    e = entry()
    for f in (finding(), finding(worst=1e300), finding(measured=False), None):
        assert e.fits(f)


def test_error_margin_is_the_next_power_of_two_at_or_above_twice_the_worst():
    assert [error_margin(w) for w in (7, 8, 8.5, 1.3, 0.3, 0)] == [16, 16, 32, 4, 1, 0]


def test_looks_like_values_are_checked_when_the_file_is_read(tmp_path):
    p = tmp_path / "e.yaml"
    for bad in ("{error_at_most: -1}", "{error_at_most: many}", "{error_at_most: true}",
                "{error_at_most: .inf}", "{nonfinite: sometimes}"):
        p.write_text("expectations:\n- {op: tanh, element_type: f64, class: accuracy, "
                     f"reason: r, looks_like: {bad}}}\n")
        with pytest.raises(ExpectationsError, match="looks_like"):
            load_expectations(p)
    p.write_text("expectations:\n- {op: tanh, element_type: f64, class: accuracy, reason: r, "
                 "looks_like: {error_at_most: 16, nonfinite: false}}\n")
    (e,) = load_expectations(p).entries
    assert dict(e.looks_like) == {"error_at_most": 16, "nonfinite": False}
    assert "looks_like: {error_at_most: 16, nonfinite: false}" in e.flow()


# -- planted backends: the same class, another bug ------------------------------------------

class TanhOffBy(OracleBackend):
    """The oracle, except that f64 tanh results with |y| > 0.1 of finite inputs are
    ``ulps`` ULPs nearer to
    zero (a shortfall of the kind XLA's f64 tanh has: a few ULPs; or a broken
    polynomial: thousands). With ``at_inf``, only the results of infinite inputs are."""

    name = "planted"

    def __init__(self, ulps: int, at_inf: bool = False) -> None:
        super().__init__()
        self.ulps, self.at_inf = ulps, at_inf

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "tanh" or sig.input_types[0].element_type.name != "f64":
            return inner

        def run(inputs):
            (out,) = inner(inputs)
            out = np.array(out, np.float64)
            x = np.asarray(inputs[0], np.float64)
            hit = np.isinf(x) if self.at_inf else (np.abs(out) > 0.1) & np.isfinite(x)
            bits = out.view(np.int64)
            bits[hit] -= self.ulps               # toward zero, whatever the sign
            return [out]
        return run


def records_of(backend, batches=2):
    """A results stream of tanh f64 signatures run on ``backend``, as the runner writes
    it (the signature records from the checker's totals)."""
    spec = load_spec("tanh")
    out = [{"kind": "run", "seed": 0, "depth": "default", "started": 0.0,
            "backends": [{"name": "jax", "platform": "cpu"}], "ops": ["tanh"],
            "families": None, "element_types": None}]
    for i, shape in enumerate(["tensor<64xf64>", "tensor<f64>"]):
        sig = Signature.make("tanh", [shape], [shape])
        chk = SignatureCheck(spec, sig, [backend])
        chk.compile()
        totals = BackendTotals()
        for b in range(batches):
            stacked = batch_for(0, "default", spec, "f64", i, b, sig)
            totals.add(chk.run_batch(b, stacked).results["planted"].verdict)
        out.append({"kind": "signature", "op": "tanh", "family": "elementwise",
                    "type_key": "f64", "backend": "jax", "signature": sig.key(), "index": i,
                    **totals.record()})
    return out


def classes(g):
    return sorted((i["op"], i["element_type"], i["class"]) for i in g)


def test_a_few_ulps_short_is_waived_by_error_at_most_and_many_ulps_is_unexpected(tmp_path):
    few, many = records_of(TanhOffBy(6)), records_of(TanhOffBy(5000))
    worst = [r["class_errors"]["accuracy"]["worst"] for r in few if r["kind"] == "signature"]
    assert max(worst) == 6.0 and set(worst) <= {6.0}, worst
    p = tmp_path / "e.yaml"
    p.write_text("expectations:\n- {op: tanh, element_type: f64, class: accuracy, reason: "
                 "a few ULPs short, looks_like: {error_at_most: 16}}\n")
    exp = load_expectations(p)
    g = gate(few, exp)
    assert classes(g.expected) == [("tanh", "f64", "accuracy")] and not g.unexpected
    g = gate(many, exp)
    assert classes(g.unexpected) == [("tanh", "f64", "accuracy")] and not g.expected
    assert [e.op for e in g.stale] == ["tanh"]          # the known divergence is gone
    # without looks_like the same entry waives both
    bare = dataclasses.replace(exp, entries=[dataclasses.replace(exp.entries[0],
                                                                 looks_like=())])
    assert not gate(many, bare).unexpected


def test_the_shipped_tanh_entry_waives_xlas_shortfall_not_a_broken_tanh():
    """jax-cpu's f64 tanh entry (XLA stops up to 7 ULPs short of +-1) says so
    (error_at_most); a tanh off by thousands of ULPs, same op, type and class, is new."""
    shipped = load_expectations("jax-cpu")
    (e,) = [e for e in shipped.entries if e.op == "tanh" and e.cls == "accuracy"]
    assert dict(e.looks_like).get("error_at_most") == 16
    assert not gate(records_of(TanhOffBy(7)), shipped).unexpected
    assert classes(gate(records_of(TanhOffBy(5000)), shipped).unexpected) == \
        [("tanh", "f64", "accuracy")]


def test_nonfinite_false_does_not_waive_a_bug_met_only_at_infinite_inputs(tmp_path):
    finite, at_inf = records_of(TanhOffBy(6)), records_of(TanhOffBy(6, at_inf=True))
    ce = [r["class_errors"]["accuracy"] for r in at_inf
          if r["kind"] == "signature" and r.get("class_errors")]
    assert ce and all(d["nonfinite"] == d["cases"] for d in ce), ce
    p = tmp_path / "e.yaml"
    p.write_text("expectations:\n- {op: tanh, element_type: f64, class: accuracy, reason: r, "
                 "looks_like: {error_at_most: 16, nonfinite: false}}\n")
    exp = load_expectations(p)
    # (an elementwise op: a witness's own input and result decide, not an inf beside it
    # in its case)
    assert not gate(finite, exp).unexpected
    assert classes(gate(at_inf, exp).unexpected) == [("tanh", "f64", "accuracy")]


def test_update_writes_looks_like_that_the_same_run_matches(tmp_path):
    """``expectations update`` writes error_at_most (the next power of two at or above
    twice the worst) for a broad class: the run it was written from is waived by it, a
    much worse bug of the same class is not."""
    few = records_of(TanhOffBy(6))
    (e,) = update(few, None)
    assert dict(e.looks_like)["error_at_most"] == 16
    from conformance.apps.expectations import Expectations
    exp = Expectations([e])
    assert not gate(few, exp).unexpected
    assert gate(records_of(TanhOffBy(5000)), exp).unexpected
    # a margin too large to tell bugs apart is not written; no nonfinite for integers
    assert dict(looks_of("accuracy", [finding(worst=2.0 ** 40)])) == {"nonfinite": False}
    assert looks_of("value", [finding(worst=None)]) == ()
    # a class outside the broad ones gets none; a property its common failing tests
    assert looks_of("subnormal_flush", [finding()]) == ()
    prop = {**finding(), "class": "property", "failing": [["a", "b"], ["b"]]}
    assert dict(looks_of("property", [prop]))["failing"] == ("b",)


def test_check_names_broad_class_entries_without_looks_like(tmp_path, capsys):
    import json
    from conformance.apps.cli import main
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records_of(TanhOffBy(6))))
    p = tmp_path / "e.yaml"
    p.write_text("expectations:\n- {op: tanh, element_type: f64, class: accuracy, reason: r}\n"
                 "- {op: tanh, element_type: f32, class: subnormal_flush, reason: r}\n")
    assert main(["expectations", "check", str(results), str(p)]) == 0
    out = capsys.readouterr().out
    assert "LOOKS_LIKE  expectations[0] tanh f64 accuracy: broad class without looks_like" \
        in out and "expectations[1] tanh f32 subnormal_flush: broad" not in out
    assert main(["expectations", "check", str(results), str(p), "--strict"]) == 1
    capsys.readouterr()
    p.write_text("expectations:\n- {op: tanh, element_type: f64, class: accuracy, reason: r, "
                 "looks_like: {error_at_most: 16}}\n")
    assert main(["expectations", "check", str(results), str(p), "--strict"]) == 0
    assert "LOOKS_LIKE" not in capsys.readouterr().out


# -- a bound class: the error as a fraction of the bound ---------------------------------

REDUCE_SUM = Signature.make("reduce", ["tensor<4x16xf32>", "tensor<f32>"], ["tensor<4xf32>"],
                            {"dimensions": [1]}, regions=("(f32, f32) -> add(arg0, arg1)",))


class SumOffBy(OracleBackend):
    """The oracle, except that f32 sums are off by ``rel`` relative to their value (an
    accumulator that loses bits: a few bounds off; or a broken one: thousands)."""

    name = "planted"

    def __init__(self, rel: float) -> None:
        super().__init__()
        self.rel = rel

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "reduce":
            return inner

        def run(inputs):
            (out,) = inner(inputs)
            out = np.asarray(out, np.float32)
            with np.errstate(all="ignore"):
                bumped = (out.astype(np.float64) * (1 + self.rel)).astype(np.float32)
            return [np.where(np.isfinite(out) & (np.abs(out) > 1e-30), bumped, out)]
        return run


def reduce_records(backend, batches=2):
    spec = load_spec("reduce")
    chk = SignatureCheck(spec, REDUCE_SUM, [backend])
    chk.compile()
    totals = BackendTotals()
    for b in range(batches):
        stacked = batch_for(0, "default", spec, "f32", 0, b, REDUCE_SUM)
        totals.add(chk.run_batch(b, stacked).results["planted"].verdict)
    return [{"kind": "run", "seed": 0, "depth": "default", "started": 0.0,
             "backends": [{"name": "jax", "platform": "cpu"}], "ops": ["reduce"],
             "families": None, "element_types": None},
            {"kind": "signature", "op": "reduce", "family": "reduction", "type_key": "f32",
             "backend": "jax", "signature": REDUCE_SUM.key(), "index": 0, **totals.record()}]


def test_a_bound_entry_waives_a_sum_a_few_bounds_off_and_not_one_far_off(tmp_path):
    few, far = reduce_records(SumOffBy(2e-5)), reduce_records(SumOffBy(3e-2))
    ce = few[1]["class_errors"]["bound"]
    assert ce["unit"] == "bound" and 1 < ce["worst"] < 64, ce
    assert far[1]["class_errors"]["bound"]["worst"] > 64 * ce["worst"]
    p = tmp_path / "e.yaml"
    p.write_text("expectations:\n- {op: reduce, element_type: f32, class: bound, reason: r, "
                 f"looks_like: {{error_at_most: {error_margin(ce['worst'])}}}}}\n")
    exp = load_expectations(p)
    # (rows whose every partial sum is exact have a bound of 0: off there is class value,
    # which this entry does not name)
    bound = lambda g: [i for i in classes(g.unexpected) if i[2] == "bound"]  # noqa: E731
    assert not bound(gate(few, exp)) and gate(few, exp).expected
    assert bound(gate(far, exp)) == [("reduce", "f32", "bound")]


def test_program_and_module_entries_are_not_asked_for_a_looks_like(tmp_path):
    """Their findings carry no per-class error (Expectation.fits ignores looks_like for
    them), so an entry for a module's value finding is not counted as lacking one, while
    the same entry for the single op is."""
    import yaml
    from conformance.apps.expectations import without_looks_like
    single = {"op": "add", "element_type": "f32", "class": "value", "reason": "r"}
    counts = []
    for entry in (single, {**single, "program": "module"}):
        p = tmp_path / "e.yaml"
        p.write_text(yaml.safe_dump({"expectations": [entry]}))
        counts.append(len(without_looks_like(load_expectations(p))))
    assert counts == [1, 0]


# -- reasons checked against the records that match them (issue 32 item 7) -------------------

def _file(tmp_path, reason, cls="accuracy", depth="default", looks=""):
    p = tmp_path / "e.yaml"
    p.write_text("expectations:\n- op: tanh\n  element_type: f64\n  class: " + cls + "\n"
                 + (f"  depth: {depth}\n" if depth else "")
                 + (f"  looks_like: {looks}\n" if looks else "")
                 + "  reason: '" + reason.replace("'", "''") + "'\n")
    return load_expectations(p)


def refuted(records, exp):
    from conformance.apps.reason_claims import check
    return check(gate(records, exp), exp)


def test_reason_claims_are_read_with_their_unit_range_and_element_types():
    from conformance.apps.reason_claims import claims
    (c,) = claims("log1p f64 is 87-103 ulp off near x = -0.41 (default run); complex log1p "
                  "loses accuracy.")
    assert (c.kind, c.unit, c.low, c.high, c.types, c.exact_high) == \
        ("error", "ulp", 87.0, 103.0, ("f64",), True)
    assert c.about("f64") and not c.about("complex<f64>")
    (c,) = claims("up to ~50 ulp")
    assert (c.low, c.high, c.exact_high) == (None, 50.0, False)
    (c,) = claims("expm1 is 2 ulp off on f16 (expm1(0.3445) = 0.41089 for 0.41138) and loses "
                  "accuracy for complex arguments")
    assert (c.low, c.high, c.types) == (2.0, 2.0, ("f16",))
    one, worst = claims("1 ULP off, more near the cancellation (worst 6 ULP at quick)")
    assert (one.low, one.high) == (1.0, None) and (worst.low, worst.high) == (None, 6.0)
    (c,) = claims("fp8: the sums land elsewhere (worst 187 bounds)")
    assert (c.unit, c.high) == ("bound", 187.0)
    (n,) = claims("a subnormal base is read as zero (0 or inf); 1.5 gives 2.5")
    assert n.kind == "nonfinite" and n.types == ()
    # an overflow inside the computation says nothing of the result; numbers without a
    # unit are no error figures
    assert claims("|z| overflowing for huge z gives 0; 2.46e62 for 2.06e59") == []


def test_a_reason_claiming_up_to_5_ulp_over_records_at_50_is_refuted(tmp_path):
    fifty = records_of(TanhOffBy(50))
    (line,) = refuted(fifty, _file(tmp_path, "tanh is up to 5 ulp off"))
    assert "expectations[0] tanh f64 accuracy: reason says 'up to 5 ulp'" in line
    assert "the records' worst is 50 ulp (f64)" in line
    assert refuted(fifty, _file(tmp_path, "tanh is up to 64 ulp off")) == []
    # an approximate maximum or a bare figure: off by more than a factor of 2
    assert refuted(fifty, _file(tmp_path, "tanh is up to ~30 ulp off")) == []
    assert refuted(fifty, _file(tmp_path, "tanh is ~20 ulp off"))


def test_a_reason_claiming_87_103_ulp_over_records_at_90_is_not_refuted(tmp_path):
    ninety = records_of(TanhOffBy(90))
    assert refuted(ninety, _file(tmp_path, "f64 tanh is 87-103 ulp off")) == []
    assert refuted(records_of(TanhOffBy(110)), _file(tmp_path, "f64 tanh is 87-103 ulp off"))
    # a range's lower end far above the records: refuted where the run is at a depth the
    # entry was seen at; a run at another depth draws other inputs and is not asked
    twenty = records_of(TanhOffBy(20))
    (line,) = refuted(twenty, _file(tmp_path, "f64 tanh is 87-103 ulp off"))
    assert "the records' worst is only 20 ulp" in line
    assert refuted(twenty, _file(tmp_path, "f64 tanh is 87-103 ulp off", depth="quick")) == []
    # a claim about another element type is not checked against these records
    assert refuted(twenty, _file(tmp_path, "bf16 tanh is 87-103 ulp off")) == []


def test_a_reason_speaking_of_inf_needs_a_witness_involving_one(tmp_path):
    """power's old reason said a subnormal base reads as zero (0 or inf) where every
    witness was finite: refuted by records without a non-finite witness."""
    finite, at_inf = records_of(TanhOffBy(6)), records_of(TanhOffBy(6, at_inf=True))
    reason = "a huge operand is read as zero (0 or inf)"
    (line,) = refuted(finite, _file(tmp_path, reason))
    assert "reason says 'inf'" in line and "no witness of the records involves inf or NaN" \
        in line
    assert refuted(at_inf, _file(tmp_path, reason)) == []


def test_a_nan_in_the_reason_of_a_type_without_nan_speaks_of_the_mathematics():
    """f4E2M1FN holds no inf and no NaN: "rsqrt(-2) has no real value (an IEEE NaN)" in
    its entry's reason is no witness claim (none could show one); in f32 it still is."""
    from conformance.apps.reason_claims import _check_one, claims, holds_nonfinite
    assert not holds_nonfinite("f4E2M1FN") and not holds_nonfinite("si8->f6E3M2FN")
    assert holds_nonfinite("f32->f4E2M1FN") and holds_nonfinite("f8E4M3FNUZ")
    assert holds_nonfinite("complex<f32>") and holds_nonfinite("f8*")
    (c,) = claims("rsqrt(-2) has no real value (an IEEE NaN)")
    finite = {"measured": True, "witnessed": 3, "nonfinite": 0}
    assert _check_one(c, [dict(finite, element_type="f4E2M1FN")], True) is None
    assert _check_one(c, [dict(finite, element_type="f32")], True)


def test_a_reason_contradicting_its_own_looks_like_is_named_without_a_run(tmp_path):
    from conformance.apps.reason_claims import check_static
    exp = _file(tmp_path, "f64 tanh is 87-103 ulp off", looks="{error_at_most: 64}")
    (line,) = check_static(exp)
    assert "reason says '87-103 ulp' of f64; looks_like.error_at_most is 64" in line
    assert check_static(_file(tmp_path, "f64 tanh is 87-103 ulp off",
                              looks="{error_at_most: 256}")) == []
    (line,) = check_static(_file(tmp_path, "NaN for two subnormals",
                                 looks="{nonfinite: false}"))
    assert "nonfinite: false" in line
    p = tmp_path / "f4.yaml"
    p.write_text("expectations:\n- op: rsqrt\n  element_type: f4E2M1FN\n  class: value\n"
                 "  looks_like: {nonfinite: false}\n"
                 "  reason: 'rsqrt(-2) has no real value (an IEEE NaN)'\n")
    assert check_static(load_expectations(p)) == []


def test_the_shipped_reasons_agree_with_their_own_looks_like():
    from conformance.apps.reason_claims import check_static
    bad = [line for name in ("jax-cpu", "xla-cpu", "iree-cpu")
           for line in check_static(load_expectations(name))]
    assert not bad, "\n".join(bad)


def test_check_prints_claim_lines_and_strict_fails_on_them(tmp_path, capsys):
    import json
    from conformance.apps.cli import main
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records_of(TanhOffBy(50))))
    p = tmp_path / "e.yaml"
    p.write_text("expectations:\n- {op: tanh, element_type: f64, class: accuracy, reason: "
                 "'f64 tanh is up to 5 ulp off', looks_like: {error_at_most: 64}}\n")
    assert main(["expectations", "check", str(results), str(p)]) == 0
    out = capsys.readouterr().out
    assert "CLAIM       " in out and "reason says 'up to 5 ulp' of f64" in out
    assert "; 1 reason claim(s) the records refute" in out
    assert main(["expectations", "check", str(results), str(p), "--strict"]) == 1
    capsys.readouterr()
    p.write_text(p.read_text().replace("up to 5 ulp", "up to 50 ulp"))
    assert main(["expectations", "check", str(results), str(p), "--strict"]) == 0
    assert "CLAIM" not in capsys.readouterr().out
