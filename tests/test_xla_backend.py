"""The xla backend: canonical StableHLO text compiled through jaxlib's PJRT client.

Covers: the short names, hand-written module text, exact round trips for all 19
element types (special values included), ops the jax backend cannot express
(add on i1), a few ops per family against the oracle (with the known divergences
of XLA CPU written down), rejection of invalid programs, batches, and the
one-line load errors for an incompatible jaxlib.
"""
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from conformance import oracles
from conformance.backends import BackendLoadError, Unsupported, get_backend, jaxlib_support
from conformance.core.case import Case, Signature
from conformance.checking.compare import ELEMENT_CLASSES, PASS, classify
from conformance.core.literals import bit_patterns, from_bit_patterns
from conformance.core.numerics import flush_subnormals
from conformance.specs import load_spec
from conformance.core.types import ALL_ELEMENT_TYPES, ElementType, element_type

ADD_I32 = """module {
  func.func public @main(%arg0: tensor<2xi32>, %arg1: tensor<2xi32>) -> (tensor<2xi32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    func.return %0 : tensor<2xi32>
  }
}
"""


def identity_text(t: str) -> str:
    """A module that returns its argument: pure transfer in and out."""
    return (f"module {{\n  func.func public @main(%arg0: {t}) -> ({t}) {{\n"
            f"    func.return %arg0 : {t}\n  }}\n}}\n")


def special_bits(et: ElementType) -> np.ndarray:
    """Bit patterns worth a round trip: every pattern of 1-, 4- and 8-bit types; for
    wider ones the integer extremes, and for floats +-0, +-inf, quiet and signalling
    NaNs with payloads, the smallest and largest subnormals and normals."""
    c = et.component
    if et.is_boolean:
        return np.array([0, 1], np.uint64)
    if c.bits <= 8:
        return np.arange(1 << c.bits, dtype=np.uint64)
    w = c.bits
    bits = {0, 1, 2, 3, (1 << (w - 1)) - 1, 1 << (w - 1), (1 << (w - 1)) + 1,
            (1 << w) - 1, (1 << w) - 2}
    if c.is_float:
        m = ml_dtypes.finfo(c.dtype).nmant
        inf = ((1 << (w - 1 - m)) - 1) << m
        one = ((1 << (w - 2 - m)) - 1) << m
        for s in (0, 1 << (w - 1)):
            bits |= {s | inf, s | inf | 1, s | inf | (1 << (m - 1)),
                     s | inf | (1 << (m - 1)) | 5, s | inf | ((1 << m) - 1),
                     s | 1, s | ((1 << m) - 1), s | (1 << m), s | (inf - 1), s | one}
    return np.array(sorted(bits), np.uint64)


def special_values(et: ElementType) -> np.ndarray:
    bits = special_bits(et)
    if et.is_complex:
        bits = np.stack([bits, bits[::-1]], axis=-1)      # every special in both parts
    return from_bit_patterns(bits, et)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.array_equal(bit_patterns(a), bit_patterns(b))


def divergences(case: Case, actual) -> list[str]:
    """Elements where ``actual`` differs from the oracle beyond the spec's accuracy."""
    expected = oracles.evaluate_case(case)
    spec = load_spec(case.op)
    out = []
    for a, e in zip(actual, expected):
        assert (a.dtype, a.shape) == (e.dtype, e.shape)
        cls, _ = classify(a, e, spec.accuracy(element_type(e.dtype)))
        for i in np.nonzero(cls.reshape(-1) != PASS)[0]:
            out.append(f"[{i}] {ELEMENT_CLASSES[cls.reshape(-1)[i]]}: got "
                       f"{a.reshape(-1)[i]!r}, want {e.reshape(-1)[i]!r}")
    return out


@pytest.fixture(scope="module")
def xla():
    return get_backend("xla")


def test_short_name_and_description(xla):
    assert xla.name == "xla" and xla.isolate
    info = xla.describe()
    assert jaxlib_support.supported(info["jaxlib"]) and info["platform"] == "cpu"


def test_compiles_hand_written_module_text(xla):
    sig = Signature.make("add", ["tensor<2xsi32>"] * 2, ["tensor<2xsi32>"])
    run = xla.pjrt.loaded(xla.compile_text(ADD_I32, sig))
    out = run([xla.pjrt.put(np.array([1, 2], np.int32)), xla.pjrt.put(np.array([3, 4], np.int32))])
    assert out[0].dtype == np.int32 and out[0].tolist() == [4, 6]


@pytest.mark.parametrize("et", ALL_ELEMENT_TYPES, ids=str)
def test_every_element_type_round_trips_exactly(xla, et):
    x = special_values(et)
    n = x.shape[0]
    sig = Signature.make("convert", [f"tensor<{n}x{et.name}>"], [f"tensor<{n}x{et.name}>"])
    if xla.pjrt.cannot_transfer(et.dtype):       # jaxlib 0.10.2 CPU: the f6 formats
        assert et.name in ("f6E2M3FN", "f6E3M2FN")
        with pytest.raises(Unsupported, match=f"cpu cannot hold {et.name} arrays"):
            xla.run(Case(sig, (x,)))
        return
    transfer = xla.pjrt.loaded(xla.compile_text(identity_text(f"tensor<{n}x{et.mlir}>"), sig))
    assert same_bits(transfer([xla.pjrt.put(x)])[0], x)
    # convert to the same type, through the emitter: still every bit (NaN payloads too)
    (y,) = xla.run(Case(sig, (x,)))
    assert same_bits(y, x)
    # rank 0 and empty tensors
    s = x[:1].reshape(())
    assert same_bits(xla.run(Case.make("convert", [s], [f"tensor<{et.name}>"]))[0], s)
    e = x[:0].reshape(0, 3)
    assert same_bits(xla.run(Case.make("convert", [e], [f"tensor<0x3x{et.name}>"]))[0], e)


def test_add_on_i1_is_logical_or(xla):
    """The spec defines add on i1 as OR; jax.lax.add refuses it, XLA runs it."""
    case = Case.make("add", [np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)],
                     ["tensor<4xi1>"])
    with pytest.raises(Unsupported):
        get_backend("jax").run(case)
    (out,) = xla.run(case)
    assert out.dtype == np.bool_ and out.tolist() == [False, True, True, True]


def _f32():
    return special_values(element_type("f32"))


def _family_cases():
    f = _f32()
    g = f[np.random.default_rng(0).permutation(f.size)]
    bf16 = from_bit_patterns(np.arange(1 << 16, dtype=np.uint64), element_type("bf16"))
    a4, b4 = np.meshgrid(np.arange(16), np.arange(16))
    sx = np.concatenate([np.linspace(-10, 10, 41, dtype=np.float32),
                         np.array([0.0, -0.0, 1e-40, 3.1415927, 1e4, np.inf, np.nan],
                                  np.float32)])
    c = special_values(element_type("complex<f64>"))
    return {
        "add si32 wraps": Case.make("add", [np.array([2**31 - 1, -2**31, 5], np.int32),
                                            np.array([1, -1, -7], np.int32)], ["tensor<3xsi32>"]),
        "add complex<f64>": Case.make("add", [c, c], [f"tensor<{c.shape[0]}xcomplex<f64>>"]),
        **{f"compare TOTALORDER {d}": Case.make(
            "compare", [f, g], [f"tensor<{f.size}xi1>"],
            {"comparison_direction": d, "compare_type": "TOTALORDER"})
           for d in ("EQ", "NE", "LT", "LE", "GT", "GE")},
        "convert bf16->f8E5M2 (all bf16)": Case.make("convert", [bf16], ["tensor<65536xf8E5M2>"]),
        "bitcast_convert f32->4xsi8": Case.make("bitcast_convert", [f],
                                                [f"tensor<{f.size}x4xsi8>"]),
        "reduce_precision e5m2": Case.make("reduce_precision", [f], [f"tensor<{f.size}xf32>"],
                                           {"exponent_bits": 5, "mantissa_bits": 2}),
        "reduce_precision e1m0": Case.make("reduce_precision", [f], [f"tensor<{f.size}xf32>"],
                                           {"exponent_bits": 1, "mantissa_bits": 0}),
        "shift_left ui4 (all pairs)": Case.make(
            "shift_left", [a4.reshape(-1).astype(ml_dtypes.uint4),
                           b4.reshape(-1).astype(ml_dtypes.uint4)], ["tensor<256xui4>"]),
        "sine f32": Case.make("sine", [sx], [f"tensor<{sx.size}xf32>"]),
    }


FAMILY = _family_cases()


#: Where XLA itself departs from the spec (and the oracle).
XLA_KNOWN = {
    # reduce_precision with mantissa_bits = 0: XLA on CPU returns a NaN operand as it is;
    # a type without mantissa bits has no NaN, and the spec's steps give infinity with
    # the NaN's sign (tests/test_oracle_letter.py; expectations jax-cpu).
    "reduce_precision e1m0": "keeps_nan",
}


@pytest.mark.parametrize("name", list(FAMILY))
def test_ops_agree_with_the_oracle(xla, name):
    case = FAMILY[name]
    actual = xla.run(case)
    if name not in XLA_KNOWN:
        assert divergences(case, actual) == []
        return
    assert divergences(case, actual), f"{name}: known divergence gone; update XLA_KNOWN"
    (out,), (want,) = actual, oracles.evaluate_case(case)
    nan = np.isnan(case.inputs[0])
    assert np.isnan(out[nan]).all() and np.isinf(want[nan]).all()
    assert same_bits(out[~nan], want[~nan])


def test_known_divergence_xla_cpu_flushes_subnormals(xla):
    """XLA CPU runs f32/f64/bf16 arithmetic with denormals flushed to zero (FTZ/DAZ):
    x + 0 of a subnormal is +-0, where the spec (IEEE addition) keeps x. The runner
    classifies this as subnormal_flush."""
    f = _f32()
    case = Case.make("add", [f, np.zeros_like(f)], [f"tensor<{f.size}xf32>"])
    (out,) = xla.run(case)
    (want,) = oracles.evaluate_case(case)
    assert not same_bits(out, want)
    assert np.array_equal(out, flush_subnormals(want), equal_nan=True)


def test_known_divergence_bitcast_convert_i1_to_si4_has_the_wrong_shape(xla):
    """XLA treats i1 as 8 bits wide in bitcast_convert: tensor<4xi1> -> tensor<si4>
    comes back as s4[4,2] (a type divergence); the backend returns what XLA gives.
    From jaxlib 0.12 (0.12.0.1 tried; 0.11.2 still as above) the result's layout has
    2 dimensions for a 0-d shape and fetching it fails (a backend error)."""
    import jaxlib
    case = Case.make("bitcast_convert", [np.array([1, 0, 0, 0], bool)], ["tensor<si4>"])
    if jaxlib_support.version_tuple(jaxlib.__version__) >= (0, 12):
        with pytest.raises(RuntimeError, match="Dimensions size is 0, but layout size is 2"):
            xla.run(case)
        return
    (out,) = xla.run(case)
    assert out.shape == (4, 2)
    (batched,) = xla.batch_executable(case.signature)([np.array([[1, 0, 0, 0]] * 2, bool)])
    assert batched.shape == (2, 4, 2)


def test_a_signature_the_emitter_cannot_print_is_unsupported(xla):
    sig = Signature.make("add", ["tensor<2xsi32>"] * 2, ["tensor<2xsi32>"],
                         regions=("return add(arg0, arg1)",))
    with pytest.raises(Unsupported, match="no StableHLO text"):
        xla.executable(sig)


def test_invalid_program_is_rejected(xla):
    sig = Signature.make("add", ["tensor<2xsi32>", "tensor<2xf32>"], ["tensor<2xsi32>"],
                         invalid="C1")
    case = Case(sig, (np.zeros(2, np.int32), np.zeros(2, np.float32)))
    with pytest.raises(Exception) as e:
        xla.run(case)
    assert not isinstance(e.value, Unsupported)
    assert "same element type" in str(e.value) or "INVALID_ARGUMENT" in str(e.value)


def test_batches_run_the_same_executable_per_case(xla):
    sig = Signature.make("shift_left", ["tensor<3xui4>", "tensor<3xui4>"], ["tensor<3xui4>"])
    rng = np.random.default_rng(1)
    stacked = [rng.integers(0, 16, (5, 3)).astype(ml_dtypes.uint4) for _ in range(2)]
    (out,) = xla.batch_executable(sig)(stacked)
    assert out.shape == (5, 3) and out.dtype == ml_dtypes.uint4
    for b in range(5):
        assert same_bits(out[b], xla.run(Case(sig, (stacked[0][b], stacked[1][b])))[0])
    (empty,) = xla.batch_executable(sig)([s[:0] for s in stacked])
    assert empty.shape == (0, 3)
    scalar = Signature.make("negate", ["tensor<bf16>"], ["tensor<bf16>"])
    (neg,) = xla.batch_executable(scalar)([np.array([1, -0.0, 2], ml_dtypes.bfloat16)])
    assert same_bits(neg, np.array([-1, 0.0, -2], ml_dtypes.bfloat16))


def test_wrong_jaxlib_version_is_a_one_line_load_error(monkeypatch):
    import jax
    import jaxlib
    monkeypatch.setattr(jaxlib, "__version__", "0.4.30")
    monkeypatch.delenv(jaxlib_support.UNPINNED_ENV, raising=False)
    jaxlib_support._reset()
    try:
        for name in ("xla", "interpreter"):
            with pytest.raises(BackendLoadError) as e:
                get_backend(name)
            msg = str(e.value)
            assert msg.startswith(f"{name} backend: needs jax and jaxlib "
                                  f"{jaxlib_support.REQUIREMENT} (found jax "
                                  f"{jax.__version__}, jaxlib 0.4.30)"), msg
            assert "\n" not in msg and e.value.__cause__ is None
    finally:
        jaxlib_support._reset()


def test_missing_private_api_is_named_in_one_line(monkeypatch):
    import jaxlib
    from jax._src.lib import xla_client
    monkeypatch.delattr(xla_client, "batched_device_put")
    jaxlib_support._reset()
    try:
        with pytest.raises(BackendLoadError) as e:
            get_backend("xla")
        assert str(e.value) == (f"xla backend: needs jax and jaxlib "
                                f"{jaxlib_support.REQUIREMENT} (found "
                                f"{jaxlib.__version__}): missing "
                                "jax._src.lib.xla_client.batched_device_put")
        assert get_backend("interpreter").name == "interpreter"   # needs none of PJRT
    finally:
        jaxlib_support._reset()


def test_xla_gpu_without_a_gpu_is_a_load_error():
    import jax
    try:
        jax.devices("gpu")
        pytest.skip("a GPU is present")
    except RuntimeError:
        pass
    with pytest.raises(BackendLoadError, match=r"^xla-gpu backend: no gpu device") as e:
        get_backend("xla-gpu")
    assert "\n" not in str(e.value)


def test_known_crash_bitcast_convert_complex_widening_aborts_xla_cpu():
    """XLA CPU aborts the process (CHECK failure in BitcastDtypesExpander, "unhandled
    type"; from jaxlib 0.11.2 on, 0.12.0.1 too, a CHECK failure in shape.cc,
    "primitive_type_invalid") compiling bitcast_convert tensor<2xcomplex<f32>> ->
    tensor<complex<f64>>, a valid program: why XlaBackend.isolate is True."""
    code = ("from conformance.backends import get_backend\n"
            "from conformance.core.case import Signature\n"
            "sig = Signature.make('bitcast_convert', ['tensor<2xcomplex<f32>>'], "
            "['tensor<complex<f64>>'])\n"
            "get_backend('xla').executable(sig)\n"
            "print('compiled')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "compiled" not in p.stdout
    assert "unhandled type" in p.stderr or "primitive_type_invalid" in p.stderr
