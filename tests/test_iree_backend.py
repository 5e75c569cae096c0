"""The iree backend (issue 22): IREE compiles the canonical StableHLO text for llvm-cpu and
its runtime runs it. Needs the optional extra (pip install 'stablehlo-conformance[iree]');
skipped without it, with the reason."""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="the iree extra is not installed")
pytest.importorskip("iree.runtime", reason="the iree extra is not installed")

from conformance.backends import Unsupported, get_backend  # noqa: E402
from conformance.backends.iree_backend import FLAGS, IreeBackend  # noqa: E402
from conformance.core.case import Signature  # noqa: E402


@pytest.fixture(scope="module")
def iree():
    return IreeBackend()


def _run(backend, sig, *xs):
    return backend.compile(sig)([np.asarray(x) for x in xs])


def test_found_by_short_name_and_describes_itself():
    b = get_backend("iree")
    d = b.describe()
    assert d["name"] == "iree" and d["iree-base-compiler"] and d["flags"] == list(FLAGS)
    assert b.isolate is True


@pytest.mark.parametrize("et,dtype,values", [
    ("f32", np.float32, [1.5, -2.0]), ("f64", np.float64, [1e300, 1 + 2.0**-40]),
    ("si64", np.int64, [2**40, -3]), ("ui64", np.uint64, [2**63 + 5, 1]),
    ("bf16", ml_dtypes.bfloat16, [1.0, 3.5]), ("f8E4M3FN", ml_dtypes.float8_e4m3fn, [1.0, 2.0]),
    ("complex<f64>", np.complex128, [1 + 2j, -3j])])
def test_every_width_crosses_unchanged(iree, et, dtype, values):
    """f64 and i64 are not demoted (FLAGS), bf16/fp8/complex cross as raw bits: an
    identity (x + 0 with x's own type's zero) gives the input back bit for bit."""
    x = np.array(values, dtype)
    sig = Signature.make("add", [f"tensor<2x{et}>"] * 2, [f"tensor<2x{et}>"])
    (out,) = _run(iree, sig, x, np.zeros_like(x))
    assert out.dtype == x.dtype and out.shape == (2,)
    assert out.tobytes() == (x + np.zeros_like(x)).tobytes()


def test_rank_0_inputs_and_results_stay_rank_0(iree):
    sig = Signature.make("add", ["tensor<si32>"] * 2, ["tensor<si32>"])
    (out,) = _run(iree, sig, np.array(5, np.int32), np.array(7, np.int32))
    assert out.shape == () and out == 12


@pytest.mark.parametrize("et", ["si4", "ui4"])
def test_int4_crosses_packed_two_per_byte(iree, et):
    """Every 4-bit value goes in and comes back (x + 0) through IREE's packed buffers."""
    dtype = ml_dtypes.int4 if et == "si4" else ml_dtypes.uint4
    lo = -8 if et == "si4" else 0
    x = np.arange(lo, lo + 16).astype(dtype).reshape(4, 4)
    sig = Signature.make("add", [f"tensor<4x4x{et}>"] * 2, [f"tensor<4x4x{et}>"])
    (out,) = _run(iree, sig, x, np.zeros_like(x))
    assert out.dtype == x.dtype and out.shape == (4, 4)
    assert out.astype(np.int8).tolist() == x.astype(np.int8).tolist()
    (out,) = _run(iree, sig, x, np.ones_like(x))          # wraps modulo 16
    assert out.astype(np.int8).tolist() == (x.astype(np.int8) + 1).astype(dtype).astype(
        np.int8).tolist()


def test_int4_of_an_odd_count_is_unsupported_with_the_reason(iree):
    sig = Signature.make("add", ["tensor<3xsi4>"] * 2, ["tensor<3xsi4>"])
    with pytest.raises(Unsupported, match="integral number of total bytes"):
        iree.compile(sig)


def test_an_invalid_program_is_rejected_at_compile_time(iree):
    sig = Signature.make("add", ["tensor<2xf32>", "tensor<2xf64>"], ["tensor<2xf32>"])
    sig = dataclasses.replace(sig, invalid="C1")
    with pytest.raises(Exception) as e:
        iree.compile(sig)
    assert not isinstance(e.value, Unsupported)


def test_close_releases_iree_s_objects_and_the_backend_stays_usable():
    b = IreeBackend()
    sig = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<2xf32>"])
    x = np.array([1.5, -2.0], np.float32)
    assert _run(b, sig, x, x)[0].tolist() == [3.0, -4.0]
    b.executable(sig)
    b.close()
    assert b._config is None and not b._cache
    assert b.executable(sig)([x, x])[0].tolist() == [3.0, -4.0]     # made again
    b.close()


def test_an_in_process_pytest_session_ends_without_nanobind_leak_reports(tmp_path):
    """IREE's runtime is a nanobind extension: every IREE object alive at the
    interpreter's end was reported as a leak (about 130 lines on stderr)."""
    import os
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs",
                        "conformance.apps.suite", "--conformance-backend=iree",
                        "--conformance-no-isolate", "--conformance-ops=add,negate",
                        "--conformance-types=f32", "--conformance-depth=quick", "-q"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"})
    assert "passed" in p.stdout or "failed" in p.stdout, p.stdout + p.stderr
    assert "nanobind" not in p.stdout + p.stderr, (p.stdout + p.stderr)[-3000:]


def test_a_whole_module_runs_on_iree_and_its_fma_contraction_is_the_compiles(iree):
    """`conformance check`'s checks 2 and 3 need a program path: IREE compiles the
    module's canonical text whole (conformance.mlir.program_emit). multiply then add,
    each right alone, come out of the whole module as one fused multiply-add: a
    finding of the whole compile (``fusion``), no op's own."""
    from conformance.checking.modules import check_module
    from conformance.mlir.reader import read_text
    read = read_text("""func.func @main(%a: tensor<2xf32>, %c: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.multiply %a, %a : tensor<2xf32>
  %1 = stablehlo.add %0, %c : tensor<2xf32>
  func.return %1 : tensor<2xf32>
}
""", "fma.mlir")
    # (1 + 2^-12)^2 rounds to 1 + 2^-11 in f32; minus that, 0 when rounded twice, 2^-24
    # when rounded once
    xs = [np.full((2, 2), np.float32(1 + 2 ** -12)), np.full((2, 2), np.float32(-(1 + 2 ** -11)))]
    v = check_module(iree, read, xs, 2)
    assert v.op_outcomes == {"v0": "pass", "v1": "pass"} and not v.op_by_op
    assert v.whole["outcome"] == "value" and v.whole["fusion"] is True
    assert v.first["op"] == "add" and v.first["actual"] == 2.0 ** -24
    # where no rounding is at stake the whole module agrees (and the check ran)
    w = check_module(iree, read, [np.ones((2, 2), np.float32)] * 2, 2)
    assert w.outcome == "pass" and w.whole["outcome"] == "pass" and "exact" in w.whole["checks"]
