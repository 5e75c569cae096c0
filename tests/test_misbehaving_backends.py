"""A segfaulting, a hanging and a lying (wrong-shape) vendor backend cost the same
bounded time and give the same records through `conformance run` and through the pytest
plugin: both read the checker's one event stream (conformance.checking.stream).

Both routes run as a vendor runs them, in subprocesses, on a vendor class that says
nothing about isolation (so both run it in a child process). The plugin's test attaches
the ``signature`` records `conformance run` writes to its report (``--junitxml``
properties); a test stops at its first failure, so its records are those of the
signatures it checked, each equal to the run's record of that signature.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

VENDOR = '''
import ctypes
import time

import numpy as np
from conformance.backends.numpy_backend import NumpyBackend


def _abs(sig, types=("f32",)):
    return sig.op == "abs" and sig.input_types[0].element_type.name in types


class _Vendor(NumpyBackend):
    isolate = None          # a vendor class that says nothing: isolated by default

    def bug(self, sig):
        return False

    def wrap(self, out, inputs):
        return out

    def compile(self, sig):
        fn = super().compile(sig)
        return (lambda xs: self.wrap(fn(xs), xs)) if self.bug(sig) else fn

    def compile_batch(self, sig):
        fn = super().compile_batch(sig)
        return (lambda xs: self.wrap(fn(xs), xs)) if self.bug(sig) else fn


class Segfaults(_Vendor):
    """A real segfault (a read of address 0) when f32 abs meets a -0.0."""
    name = "segfaults"

    def bug(self, sig):
        return _abs(sig)

    def wrap(self, out, inputs):
        x = np.asarray(inputs[0])
        if ((x == 0) & np.signbit(x)).any():
            ctypes.string_at(0)
        return out


class Hangs(_Vendor):
    """Never returns when a float abs meets a NaN."""
    name = "hangs"

    def bug(self, sig):
        return _abs(sig, ("f16", "f32", "bf16"))

    def wrap(self, out, inputs):
        if np.isnan(np.asarray(inputs[0], np.float64)).any():
            time.sleep(3600)
        return out


class WrongShape(_Vendor):
    """Returns f32 abs with an extra unit dimension."""
    name = "wrong-shape"

    def bug(self, sig):
        return _abs(sig)

    def wrap(self, out, inputs):
        return [np.asarray(r)[..., None] for r in out]


class _WholeModules:
    """Runs a whole module op by op through its own single-op executables: a module
    that holds the op it misbehaves on misbehaves as a whole too."""

    def compile_program(self, program):
        from conformance.backends.programs import op_by_op
        run = op_by_op(self, program)
        return lambda xs: [run(xs)[r] for r in program.results]


class SegfaultsInModules(_WholeModules, Segfaults):
    name = "segfaults-modules"

'''

TIMEOUT = "2"


@pytest.fixture()
def vendor_dir(tmp_path):
    (tmp_path / "misbehaving.py").write_text(VENDOR)
    return tmp_path


def _env(folder: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env.get("PYTHONPATH", "")])
    env.pop("CI", None)
    return env


def _norm(rec: dict) -> dict:
    """A record without what names the process's own paths (the stderr log's)."""
    text = json.dumps(rec, sort_keys=True)
    return json.loads(re.sub(r" \(stderr log: [^)]*\)", "", text))


def run_route(folder: Path, cls: str, types: str) -> tuple[int, list[dict]]:
    out = folder / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--backend", f"misbehaving:{cls}",
         "--ops", "abs", "--types", types, "--depth", "quick", "--seed", "0",
         "--timeout", TIMEOUT, "--no-invalid", "--no-examples", "--no-probes",
         "--no-progress", "--out", str(out)],
        cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert recs[-1]["kind"] == "end"
    return proc.returncode, recs


def plugin_route(folder: Path, cls: str, types: str) -> tuple[subprocess.CompletedProcess,
                                                              dict[str, list[dict]]]:
    xml = folder / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "conformance.apps.suite", "-k", "test_op",
         "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--conformance-backend=misbehaving:{cls}", "--conformance-ops=abs",
         f"--conformance-types={types}", "--conformance-depth=quick",
         "--conformance-seed=0", f"--conformance-timeout={TIMEOUT}",
         f"--conformance-repro-dir={folder / 'repros'}", f"--junitxml={xml}"],
        cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=600)
    records: dict[str, list[dict]] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        records[case.get("name")] = [
            json.loads(p.get("value")) for p in case.iter("property")
            if p.get("name") == "conformance_signature"]
    return proc, records


def _signature_records(recs):
    return {(r["type_key"], r["index"]): _norm(r) for r in recs if r["kind"] == "signature"}


def test_a_segfaulting_backend_fails_one_test_and_its_records_are_the_runs(vendor_dir):
    code, recs = run_route(vendor_dir, "Segfaults", "f32")
    assert code == 1
    proc, tests = plugin_route(vendor_dir, "Segfaults", "f32")
    # The session survives the segfault: a failed test and a summary, not exit 139.
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\b1 failed\b", proc.stdout), proc.stdout[-3000:]
    run_sigs = _signature_records(recs)
    crashed = [k for k, r in run_sigs.items() if r["outcome"] == "crash"]
    assert crashed
    plugin_sigs = [_norm(r) for r in tests["test_op[abs-f32]"]]
    assert plugin_sigs and plugin_sigs[-1]["outcome"] == "crash"
    for r in plugin_sigs:
        assert r == run_sigs[(r["type_key"], r["index"])]
    # The crash bisection found the same case on both routes.
    culprit = next(r for r in recs if r["kind"] == "divergence" and r["class"] == "crash")
    assert f"case id:   {culprit['case_id']}" in proc.stdout
    assert "culprit:" in proc.stdout and "reproducer: python" in proc.stdout


def test_a_wrong_shape_backend_gives_the_same_type_record_on_both_routes(vendor_dir):
    code, recs = run_route(vendor_dir, "WrongShape", "f32")
    assert code == 1
    proc, tests = plugin_route(vendor_dir, "WrongShape", "f32")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_sigs = _signature_records(recs)
    plugin_sigs = [_norm(r) for r in tests["test_op[abs-f32]"]]
    assert plugin_sigs and all(r["outcome"] == "type" for r in plugin_sigs)
    for r in plugin_sigs:
        assert r == run_sigs[(r["type_key"], r["index"])]
    assert "type divergence" in proc.stdout


def test_a_hanging_backend_costs_the_same_bounded_timeouts_on_both_routes(vendor_dir):
    """Two timeouts per op, then the op's other signatures are not run: in one run, and
    across the tests of one pytest session."""
    from conformance.checking.stream import MAX_HANGS_PER_OP
    code, recs = run_route(vendor_dir, "Hangs", "f16,f32,bf16")
    assert code == 1
    sigs = [r for r in recs if r["kind"] == "signature"]
    hung = [r for r in sigs if r["outcome"] == "timeout" and r["cases"]]
    not_run = [r for r in sigs if r["outcome"] == "timeout" and not r["cases"]]
    assert len(hung) == MAX_HANGS_PER_OP
    assert not_run and all("not run: the backend hung" in r["reason"] for r in not_run)

    proc, tests = plugin_route(vendor_dir, "Hangs", "f16,f32,bf16")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\b3 failed\b", proc.stdout), proc.stdout[-3000:]
    plugin = [_norm(r) for name in sorted(tests) for r in tests[name]]
    p_hung = [r for r in plugin if r["outcome"] == "timeout" and r["cases"]]
    p_not_run = [r for r in plugin if r["outcome"] == "timeout" and not r["cases"]]
    assert len(p_hung) == MAX_HANGS_PER_OP          # the session's budget, across tests
    assert p_not_run and all("not run: the backend hung" in r["reason"] for r in p_not_run)
    # The first hang is the same signature with the same record on both routes.
    first = _norm(hung[0])
    assert first in plugin


# ---------------------------------------------------------------------------------------
# The module route: `conformance check` (issue 29)
# ---------------------------------------------------------------------------------------

MODULE = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %x : tensor<4xf32>
  %1 = stablehlo.abs %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
"""


def check_route(folder: Path, cls: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    import numpy as np
    (folder / "model.mlir").write_text(MODULE)
    np.savez(folder / "args.npz", arg0=np.array([0.0, 1.0, np.nan, -2.0], np.float32))
    out = folder / "check"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance", "check", str(folder / "model.mlir"),
         "--backend", f"misbehaving:{cls}", "--inputs", str(folder / "args.npz"),
         "--timeout", TIMEOUT, "--out", str(out)],
        cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=600)
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return proc, recs


@pytest.mark.parametrize("cls, outcome", [("Segfaults", "crash"), ("Hangs", "timeout"),
                                          ("WrongShape", "type")])
def test_a_misbehaving_backend_is_a_finding_of_the_module_op_not_the_end_of_the_check(
        vendor_dir, cls, outcome):
    # negate(0.0) = -0.0 reaches abs: the segfault; the NaN: the hang
    proc, recs = check_route(vendor_dir, cls)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    head, rec, end = recs
    assert end["kind"] == "end" and rec["kind"] == "module"
    assert rec["outcome"] == outcome
    assert rec["first"]["op"] == "abs" and rec["first"]["location"] == "model.mlir:3:8"
    assert rec["op_outcomes"]["v0"] == "pass"          # negate, before it, passed
    assert "first diverging op: abs at model.mlir:3:8" in proc.stdout


@pytest.mark.parametrize("cls, outcome", [("Segfaults", "crash"), ("WrongShape", "type")])
def test_a_misbehaving_backend_fails_the_modules_test_not_the_pytest_session(
        vendor_dir, cls, outcome):
    """The plugin's module route (--conformance-modules): the vendor class runs isolated,
    a segfault or a wrong shape at abs fails that module's test, the session goes on."""
    (vendor_dir / "mods").mkdir()
    # 64 elements a case: the drawn values (special values mixed in) hold a zero, and
    # abs meets it with either sign (of the argument, and of its negation)
    (vendor_dir / "mods" / "model.mlir").write_text(
        MODULE.replace("4xf32", "64xf32").replace(
            "  func.return %1", "  %2 = stablehlo.abs %x : tensor<64xf32>\n"
            "  %3 = stablehlo.add %1, %2 : tensor<64xf32>\n  func.return %3"))
    xml = vendor_dir / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "conformance.apps.suite", "-k",
         "test_module", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--conformance-backend=misbehaving:{cls}",
         f"--conformance-modules={vendor_dir / 'mods'}", "--conformance-seed=0",
         # (the op filters only make collection short: modules are not filtered by op)
         "--conformance-ops=abs", "--conformance-types=f32",
         f"--conformance-timeout={TIMEOUT}", f"--junitxml={xml}"],
        cwd=vendor_dir, env=_env(vendor_dir), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\b1 failed\b", proc.stdout), proc.stdout[-3000:]
    (prop,) = [p for p in ET.parse(xml).getroot().iter("property")
               if p.get("name") == "conformance_module"]
    rec = json.loads(prop.get("value"))
    assert rec["outcome"] == outcome and rec["first"]["op"] == "abs"
    assert re.search(r"abs at model\.mlir:[34]:8", proc.stdout), proc.stdout[-3000:]


# A crash or hang in the middle of a module, through both routes. The segfaulting vendor
# class runs whole modules too (checks 2 and 3), op by op, so the whole module crashes at
# the same abs; the ops after abs must still be judged, the next module still checked.
MID_MODULE = """func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %0 = stablehlo.negate %x : tensor<64xf32>
  %1 = stablehlo.abs %0 : tensor<64xf32>
  %2 = stablehlo.multiply %1, %x : tensor<64xf32>
  %3 = stablehlo.add %2, %0 : tensor<64xf32>
  func.return %3 : tensor<64xf32>
}
"""

NEXT_MODULE = """func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.negate %x : tensor<8xf32>
  func.return %0 : tensor<8xf32>
}
"""


def _module_record(rec: dict) -> dict:
    """A module record without what differs between two processes of one check: the
    seconds, the stderr log's path, the CLI's reproducer folder (the plugin writes none)."""
    rec = _norm(rec)
    rec.pop("seconds")
    rec.pop("repro", None)
    return rec


@pytest.mark.parametrize("cls, outcome, whole", [
    ("SegfaultsInModules", "crash", "crash"),
    # (Hangs has no program path: hanging in the whole module too would cost two more
    # timeouts a route, in its run and in finding the op that hangs alone)
    ("Hangs", "timeout", "unsupported")])
def test_a_crash_or_hang_mid_module_gives_the_plugin_the_records_of_the_check_command(
        vendor_dir, cls, outcome, whole):
    """`pytest -k test_module --conformance-modules=DIR` and `conformance check DIR`
    on a vendor class that segfaults (hangs) at the second of four ops (the segfaulting
    one in the whole module too): on both routes that op's finding is a crash
    (timeout), the two ops after it are judged and pass, the next module is checked and
    passes, and the plugin's records are the command's (same seed, same drawn values)."""
    (vendor_dir / "mods").mkdir()
    (vendor_dir / "mods" / "a_model.mlir").write_text(MID_MODULE)
    (vendor_dir / "mods" / "b_model.mlir").write_text(NEXT_MODULE)
    check = subprocess.run(
        [sys.executable, "-m", "conformance", "check", "mods", "--backend",
         f"misbehaving:{cls}", "--seed", "0", "--depth", "quick", "--timeout", TIMEOUT,
         "--out", "check"],
        cwd=vendor_dir, env=_env(vendor_dir), capture_output=True, text=True, timeout=600)
    assert check.returncode == 1, check.stdout[-3000:] + check.stderr[-3000:]
    recs = [json.loads(line) for line in
            (vendor_dir / "check" / "results.jsonl").read_text().splitlines()]
    assert recs[-1]["kind"] == "end"
    by_cli = {r["id"]: r for r in recs if r["kind"] == "module"}

    xml = vendor_dir / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "conformance.apps.suite", "-k",
         "test_module", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--conformance-backend=misbehaving:{cls}", "--conformance-modules=mods",
         # (the op filters only make collection short: modules are not filtered by op)
         "--conformance-ops=abs", "--conformance-types=f32", "--conformance-seed=0",
         "--conformance-depth=quick", f"--conformance-timeout={TIMEOUT}",
         f"--junitxml={xml}"],
        cwd=vendor_dir, env=_env(vendor_dir), capture_output=True, text=True, timeout=600)
    # the session survives: one failed test, the next module's test passed
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\b1 failed, 1 passed\b", proc.stdout), proc.stdout[-3000:]
    assert "first diverging op: abs at a_model.mlir:3:8" in proc.stdout
    by_plugin = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        (prop,) = [p for p in case.iter("property") if p.get("name") == "conformance_module"]
        by_plugin[case.get("name")] = json.loads(prop.get("value"))
    a, b = by_plugin["test_module[a_model.mlir]"], by_plugin["test_module[b_model.mlir]"]
    assert a["outcome"] == outcome and a["first"]["op"] == "abs"
    assert a["first"]["check"] == "op_by_op" and a["first"]["class"] == outcome
    # abs is the finding; negate before it and multiply, add after it were judged
    assert a["op_outcomes"] == {"v0": "pass", "v1": outcome, "v2": "pass", "v3": "pass"}
    assert a["judged_ops"] == 3 and [f["op"] for f in a["op_by_op"]] == ["abs"]
    assert a["whole"]["outcome"] == whole        # the whole module failed there too
    assert b["outcome"] == "pass" and b["op_outcomes"] == {"v0": "pass"}
    # nothing is lost: the plugin's records are the command's
    assert _module_record(a) == _module_record(by_cli["mods/a_model.mlir"])
    assert _module_record(b) == _module_record(by_cli["mods/b_model.mlir"])
