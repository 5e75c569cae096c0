"""Parallel runs give the cases and verdicts of a serial run with the same seed: the
CLI's ``--jobs N`` and pytest-xdist (``-n N``) on the pytest suite."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from conformance.core.results import read_results

ROOT = Path(__file__).resolve().parents[1]
TIMING = {"started", "elapsed"}
KINDS = {"validity", "signature", "divergence", "invalid", "example", "cross", "unit_done",
         "internal_error"}


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT / "tests")}


def conformance(*args):
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=ROOT,
                          capture_output=True, text=True, env=_env())


def _records(out: Path) -> Counter:
    """The run's records as a multiset, order and timing aside."""
    return Counter(json.dumps({k: v for k, v in r.items() if k not in TIMING}, sort_keys=True)
                   for r in read_results(out / "results.jsonl") if r["kind"] in KINDS)


def test_jobs_2_gives_the_cases_and_verdicts_of_jobs_1(tmp_path):
    args = ["run", "--ops", "add,negate,compare,not,shift_left", "--types", "f32,si8,ui4",
            "--depth", "quick", "--seed", "11", "--no-progress",
            "--backend", "planted:PlantedAddF32,numpy"]
    one = conformance(*args, "--jobs", "1", "--out", str(tmp_path / "one"))
    two = conformance(*args, "--jobs", "2", "--out", str(tmp_path / "two"))
    assert one.returncode == two.returncode == 1, one.stderr + two.stderr
    a, b = _records(tmp_path / "one"), _records(tmp_path / "two")
    kinds = Counter(json.loads(r)["kind"] for r in a.elements())
    assert kinds["divergence"] and kinds["signature"] and kinds["invalid"] and kinds["cross"]
    assert a == b
    assert one.stdout.split(" in ")[0] == two.stdout.split(" in ")[0]      # "checked N cases"
    sa = json.loads((tmp_path / "one" / "summary.json").read_text())
    sb = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert sa["totals"] == sb["totals"]
    # The same reproducers, byte for byte.
    files = sorted(p.relative_to(tmp_path / "one")
                   for p in (tmp_path / "one" / "repros").rglob("case.json"))
    assert files
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes()


def test_a_jaxlib_error_reads_the_same_serial_and_under_jobs_2(tmp_path):
    """Issue 31: jaxlib appends the Python stack that traced the failing op (runner.py
    and cli.py serially, executors.py in a worker) to its error; the records carry the
    backend's message only, so both runs write the same records."""
    # (f8E4M3FN: its quick plan holds a variadic reduce of floats of two precisions, which
    # XLA's verifier refuses; f64's held one until reduce drew promoted bodies)
    args = ["run", "--ops", "reduce", "--types", "f8E4M3FN", "--depth", "quick", "--seed", "0",
            "--no-progress", "--backend", "jax"]
    one = conformance(*args, "--jobs", "1", "--out", str(tmp_path / "one"))
    two = conformance(*args, "--jobs", "2", "--out", str(tmp_path / "two"))
    assert one.returncode == two.returncode == 1, one.stderr + two.stderr
    a, b = _records(tmp_path / "one"), _records(tmp_path / "two")
    reasons = [json.loads(r)["reason"] for r in a if '"backend_error"' in r
               and json.loads(r)["kind"] == "signature"]
    assert reasons and all("mixed precision is disallowed" in r for r in reasons)
    assert a == b


def _outcomes(xml: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = tag
        out[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return out


def test_pytest_xdist_gives_the_outcomes_of_a_serial_session(tmp_path):
    def session(backend, *extra):
        xml = tmp_path / f"{backend.replace(':', '_')}{'-'.join(extra)}.xml"
        subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "conformance.apps.suite",
                        f"--conformance-backend={backend}", "--conformance-ops=add,compare",
                        "--conformance-seed=0",
                        "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *extra],
                       cwd=tmp_path, capture_output=True, text=True, env=_env())
        return _outcomes(xml)

    for backend in ("numpy", "planted:PlantedAddF32"):
        serial, xdist = session(backend), session(backend, "-n", "2")
        assert serial and serial == xdist, backend
        counts = Counter(serial.values())
        if backend == "numpy":
            assert set(counts) == {"passed"}, {k: v for k, v in serial.items() if v != "passed"}
        else:
            assert counts["failure"] >= 1 and counts["passed"] > 10
