"""One check path: the CLI and the pytest plugin reach verdicts through the same
checker (conformance.checking.checker), so a verdict kind registered once is used by both, and
a case id the plugin prints is one `conformance repro` rebuilds.

Runs are subprocesses, as a vendor runs them: the verdict kind is registered by the
vendor's own module when the backend is loaded.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent

KIND_MODULE = '''
"""A vendor module that registers a verdict kind of its own and judges f32 add by it."""
import numpy as np

from conformance.checking import verdicts
from conformance.checking.compare import PASS, PROPERTY, BatchVerdict
from conformance.backends.numpy_backend import NumpyBackend
from conformance.specs import load_spec


@verdict_kind_registered_once
def same_sign(j):
    """Only the sign of each result element is fixed (NaN: any)."""
    classes = []
    for a, e in zip(j.actual, j.expected):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        ok = (np.sign(a) == np.sign(e)) | (np.isnan(a) & np.isnan(e))
        classes.append(np.where(ok, PASS, PROPERTY).astype(np.int8))
    cases = np.max(np.stack([c.reshape(j.batch, -1).max(axis=1) for c in classes]), axis=0)
    return BatchVerdict(cases.astype(np.int8), classes, [None] * len(classes), {})


load_spec("add").data["accuracy"] = {"f32": {"test_same_sign": 0}, "default": "exact"}


def _f32_add(sig):
    return sig.op == "add" and sig.result_types[0].element_type.name == "f32"


class _Changed(NumpyBackend):
    def compile(self, signature):
        fn = super().compile(signature)
        if not _f32_add(signature):
            return fn
        return lambda inputs: [self.change(np.asarray(r)) for r in fn(inputs)]

    def compile_batch(self, signature):
        fn = super().compile_batch(signature)
        if not _f32_add(signature):
            return fn
        return lambda stacked: [self.change(np.asarray(r)) for r in fn(stacked)]


class Negates(_Changed):
    """Violates the kind: every nonzero result has the wrong sign."""
    name = "negates"

    def change(self, r):
        return (-r).astype(r.dtype)


class Doubles(_Changed):
    """Satisfies the kind (same signs) though every value is wrong."""
    name = "doubles"

    def change(self, r):
        return (r * 2).astype(r.dtype)
'''.replace("@verdict_kind_registered_once", '@verdicts.verdict_kind("test_same_sign")')


@pytest.fixture
def vendor_dir(tmp_path: Path) -> Path:
    (tmp_path / "kindmod.py").write_text(KIND_MODULE)
    return tmp_path


def _env(path: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(path), str(TESTS_DIR),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("CI", None)
    return env


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=path,
                          env=_env(path), capture_output=True, text=True, timeout=600)


def _pytest(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "--pyargs", "conformance.apps.suite", "-k", "test_op",
                           "--conformance-ops=add", "--conformance-types=f32",
                           "--conformance-seed=0", *args], cwd=path, env=_env(path),
                          capture_output=True, text=True, timeout=600)


def _cli_classes(path: Path, backend: str) -> tuple[int, set[str]]:
    out = path / f"out-{backend}"
    r = _cli(path, "run", "--backend", f"kindmod:{backend}", "--ops", "add", "--types", "f32",
             "--depth", "quick", "--no-invalid", "--no-examples", "--no-progress",
             "--out", str(out))
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    classes = {c for rec in records if rec.get("kind") == "signature"
               for c, n in rec.get("counts", {}).items() if n and c != "pass"}
    return r.returncode, classes


def test_a_verdict_kind_registered_once_is_used_by_the_cli_and_the_plugin(vendor_dir):
    # The planted backend that breaks the kind fails in both, with the kind's class.
    code, classes = _cli_classes(vendor_dir, "Negates")
    assert code == 1 and classes == {"property"}, (code, classes)
    result = _pytest(vendor_dir, "--conformance-backend=kindmod:Negates")
    assert result.returncode == 1, result.stdout[-2000:]
    assert re.search(r"add \[f32\] on negates: property divergence", result.stdout), \
        result.stdout[-2000:]
    # The backend that differs only in what the kind allows passes in both.
    code, classes = _cli_classes(vendor_dir, "Doubles")
    assert code == 0 and classes == set(), (code, classes)
    result = _pytest(vendor_dir, "--conformance-backend=kindmod:Doubles")
    assert result.returncode == 0, result.stdout[-2000:]


def test_a_plugin_failure_case_id_reruns_with_conformance_repro(tmp_path):
    result = _pytest(tmp_path, "--conformance-backend=planted:PlantedAddF32")
    assert result.returncode == 1, result.stdout[-2000:]
    case_id = re.search(r"case id: +(\S+)", result.stdout).group(1)
    assert re.search(rf"repro: +conformance repro {re.escape(case_id)} --backend "
                     r"planted:PlantedAddF32", result.stdout), result.stdout[-2000:]
    again = _cli(tmp_path, "repro", case_id, "--backend", "planted:PlantedAddF32",
                 "--no-isolate")
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"case id:  {case_id}" in again.stdout
    assert "verdict:  value" in again.stdout, again.stdout
    # The CLI with the same seed and depth draws the same case under the same id.
    out = tmp_path / "cli"
    _cli(tmp_path, "run", "--backend", "planted:PlantedAddF32", "--ops", "add", "--types",
         "f32", "--depth", "quick", "--no-invalid", "--no-examples", "--no-progress",
         "--out", str(out))
    ids = {json.loads(line).get("case_id")
           for line in (out / "results.jsonl").read_text().splitlines()}
    assert case_id in ids
