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


# What checks 2 and 3 found in the corpus's real models on IREE (docs/corpus-findings.md),
# each cut to the two ops that show it: every op right alone (check 1 finds nothing), the
# whole module compiled by IREE wrong, and the finding the compile's (fusion), not an op's.

def _whole_module_finding(iree, text: str, source: str, xs):
    from conformance.checking.modules import check_module
    from conformance.mlir.reader import read_text
    v = check_module(iree, read_text(text, source), [np.asarray(x)[None] for x in xs], 1)
    assert not v.op_by_op and set(v.op_outcomes.values()) == {"pass"}, v.op_by_op
    assert v.whole["fusion"] is True, v.whole
    return v


def test_iree_rewrites_a_mask_times_x_into_a_select_and_check_2_finds_it(iree):
    """multiply(convert(i1 mask), x), the mlp's one-hot times its log-softmax: IREE
    gives 0 where the mask is 0 and x is NaN or inf; the spec's IEEE product is NaN."""
    v = _whole_module_finding(iree, """func.func @main(%m: tensor<4xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.convert %m : (tensor<4xi1>) -> tensor<4xf32>
  %1 = stablehlo.multiply %0, %x : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
""", "mask.mlir", [np.array([False, True, False, True]),
                   np.array([np.nan, np.nan, -np.inf, np.inf], np.float32)])
    assert v.outcome == "nan" and v.first["op"] == "multiply" and v.first["check"] == "exact"
    assert v.first["actual"] == 0.0 and v.whole["findings"][0]["elements"] == 2


def test_iree_keeps_a_bf16_chain_in_f32_and_check_2_finds_it(iree):
    """subtract then multiply in bf16 (the layer norm's square of x - mean): IREE squares
    the unrounded difference, the spec its bf16 rounding: 4.34375 for 4.375."""
    bf = ml_dtypes.bfloat16
    v = _whole_module_finding(iree, """func.func @main(%a: tensor<1xbf16>, %b: tensor<1xbf16>) -> tensor<1xbf16> {
  %0 = stablehlo.subtract %a, %b : tensor<1xbf16>
  %1 = stablehlo.multiply %0, %0 : tensor<1xbf16>
  func.return %1 : tensor<1xbf16>
}
""", "square.mlir", [np.array([0.1259765625], bf), np.array([-1.9609375], bf)])
    assert v.outcome == "value" and v.first["op"] == "multiply"
    assert (v.first["expected"], v.first["actual"]) == (4.375, 4.34375)


def test_iree_s_top_k_of_a_total_order_sort_never_picks_nan_and_check_2_finds_it(iree):
    """jax's top_k decomposition (a stable sort with compare GT TOTALORDER, then a slice
    of the first k): compiled whole, IREE's top-k passes over the +NaN the total order
    puts first; the sort alone places it."""
    v = _whole_module_finding(iree, """func.func @main(%x: tensor<6xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %i = stablehlo.iota dim = 0 : tensor<6xi32>
  %s:2 = "stablehlo.sort"(%x, %i) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>, %u: tensor<i32>, %w: tensor<i32>):
    %c = stablehlo.compare GT, %p, %q, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<6xf32>, tensor<6xi32>) -> (tensor<6xf32>, tensor<6xi32>)
  %v = stablehlo.slice %s#0 [0:3] : (tensor<6xf32>) -> tensor<3xf32>
  %k = stablehlo.slice %s#1 [0:3] : (tensor<6xi32>) -> tensor<3xi32>
  func.return %v, %k : tensor<3xf32>, tensor<3xi32>
}
""", "topk.mlir", [np.array([1, np.nan, 2, 3, -np.inf, 4], np.float32)])
    assert v.outcome == "value" and v.first["op"] == "slice"
    found = {f["value"]: (f["expected"], f["actual"]) for f in v.whole["findings"]}
    assert sorted(found.values(), key=str) == sorted([("nan", 4.0), (1, 5)], key=str), found


@pytest.mark.parametrize("et,dtype", [("f8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz),
                                      ("f8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz)])
def test_the_fnuz_types_cross_unchanged(iree, et, dtype):
    """IREE's runtime names both FNUZ types (HalElementType): they cross as raw bits,
    not as an adapter's KeyError recorded as IREE's backend error."""
    x = np.array([1.5, -2.0], dtype)
    sig = Signature.make("convert", [f"tensor<2x{et}>"], [f"tensor<2x{et}>"])
    (out,) = _run(iree, sig, x)
    assert out.dtype == x.dtype and out.tobytes() == x.tobytes()


def test_a_failed_pack_names_its_members_at_fault(iree):
    """issue 33: IREE's diagnostics name the members of a failed pack (an error on a
    member's op line; a type IREE's HAL has no name for, refused at the function's
    signature), so the runner sends those alone instead of halving the pack."""
    from conformance.backends.text_pack import located_members
    from conformance.backends.vendor import module_text
    from conformance.core.packs import PackSignature
    good = [Signature.make("add", ["tensor<4xf32>"] * 2, ["tensor<4xf32>"]),
            Signature.make("add", ["tensor<3xsi32>"] * 2, ["tensor<3xsi32>"])]
    no_hal_type = Signature.make("convert", ["tensor<2x3xi1>"], ["tensor<2x3xf8E3M4>"])
    no_lowering = Signature.make("convert", ["tensor<2x2x3xf8E4M3FN>"],
                                 ["tensor<2x2x3xf16>"])
    for bad, at in ((no_hal_type, 1), (no_lowering, 2)):
        pack = good[:at] + [bad] + good[at:]
        with pytest.raises(Exception) as e:
            iree.compile_pack(pack)
        text = module_text(PackSignature.of(pack))
        assert located_members(pack, str(e.value), text) == [at], str(e.value)
        iree.compile_pack(good)         # the others pack
        with pytest.raises(Exception) as alone:     # and it fails alone, as recorded
            iree.compile(bad)
        assert "pack members" not in str(alone.value)


def test_a_pack_member_iree_refuses_is_named_before_compiling(monkeypatch):
    """Members with a leaf IREE's HAL has no type for (f8E3M4, f4E2M1FN) or an odd count
    of int4 elements (a quantized one's i4 storage too) are named with the pack's fault
    marker, and iree-compile is not run: such a pack fails whole with an error located
    at @main (or a crash), which names no member and would be halved."""
    from conformance.backends.iree_backend import _refused_before
    from conformance.backends.text_pack import marked_members
    from conformance.core.packs import PackSignature

    def sig(t):
        return Signature.make("negate", [t], [t])
    members = [sig("tensor<4xf32>"), sig("tensor<3xsi4>"), sig("tensor<2x2xui4>"),
               sig("tensor<2xf8E3M4>"), sig("tensor<!quant.uniform<i4:f32, 0.5:1>>"),
               sig("tensor<2x!quant.uniform<i8:f32, 0.5:1>>"), sig("tensor<2xf4E2M1FN>")]
    assert _refused_before(members) == [1, 3, 4, 6]
    b = IreeBackend()
    calls = []
    monkeypatch.setattr(b.compiler, "compile_str", lambda *a, **k: calls.append(a))
    with pytest.raises(Exception) as e:
        b.compile(PackSignature.of(members))
    assert marked_members(members, str(e.value)) == [1, 3, 4, 6] and calls == []
