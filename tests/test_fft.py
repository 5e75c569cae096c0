"""fft: the oracle against the spec's definition, the normwise residual (another algorithm's
rounding passes, planted bugs fail), the IRFFT operands outside rfft's image, the
generators and the invalid cases."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend
from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.generators import invalid
from conformance.generators.signatures import canonical, signatures
from conformance.oracles import fft as fft_oracle
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations

SPEC = load_spec("fft")


def fft_sig(shape, et, fft_type, lengths):
    shape = list(shape)
    L = len(lengths)
    cplx = {"f32": "complex<f32>", "f64": "complex<f64>"}
    real = {v: k for k, v in cplx.items()}
    out = shape[:-1] + [lengths[-1] // 2 + 1 if fft_type == "RFFT" else
                        (lengths[-1] if fft_type == "IRFFT" else shape[-1])]
    ret = cplx[et] if fft_type == "RFFT" else (real[et] if fft_type == "IRFFT" else et)
    t = lambda s, e: f"tensor<{'x'.join(map(str, s))}x{e}>"   # noqa: E731
    sig = Signature.make("fft", [t(shape, et)], [t(out, ret)],
                         {"fft_type": fft_type, "fft_length": list(lengths)})
    assert not violations(sig), violations(sig)
    assert len(lengths) == L
    return sig


C64_FFT = fft_sig((3, 16), "complex<f32>", "FFT", [16])
C64_IFFT_2D = fft_sig((2, 8, 4), "complex<f32>", "IFFT", [8, 4])
C64_FFT_PRIME = fft_sig((2, 13), "complex<f32>", "FFT", [13])
F32_RFFT = fft_sig((4, 12), "f32", "RFFT", [12])
F32_RFFT_2D = fft_sig((2, 4, 8), "f32", "RFFT", [4, 8])
C64_IRFFT_2D = fft_sig((2, 4, 5), "complex<f32>", "IRFFT", [4, 8])
C64_IRFFT_ODD = fft_sig((3, 4), "complex<f32>", "IRFFT", [7])
C128_FFT_3D = fft_sig((2, 3, 4, 5), "complex<f64>", "FFT", [3, 4, 5])
C64_FFT_LARGE = fft_sig((2, 1024), "complex<f32>", "FFT", [1024])
C64_FFT_ONE = fft_sig((4, 1), "complex<f32>", "FFT", [1])
ALL = [C64_FFT, C64_IFFT_2D, C64_FFT_PRIME, F32_RFFT, F32_RFFT_2D, C64_IRFFT_2D,
       C64_IRFFT_ODD, C128_FFT_3D, C64_FFT_LARGE, C64_FFT_ONE]
IDS = ["c64-fft", "c64-ifft-2d", "c64-fft-13", "f32-rfft", "f32-rfft-2d", "c64-irfft-2d",
       "c64-irfft-7", "c128-fft-3d", "c64-fft-1024", "c64-fft-1"]


def _cast(y, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return y.astype(dtype)
    return np.real(y).astype(dtype)


class Planted(Backend):
    """``transform(x, fft_type, lengths, result_dtype)`` on each case's operand."""

    isolate = False

    def __init__(self, transform, name="planted"):
        self.transform, self.name = transform, name
        super().__init__()

    def compile(self, sig):
        if violations(sig):
            raise ValueError(f"invalid program: {violations(sig)}")
        a = sig.attributes
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            (x,) = inputs
            with np.errstate(all="ignore"):
                y = self.transform(np.asarray(x), a["fft_type"], list(a["fft_length"]), dtype)
            return [_cast(np.asarray(y), dtype)]
        return run


def classes(backend, sig, batches=2):
    check = SignatureCheck(SPEC, sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    key = sig.input_types[0].element_type.name
    counts: dict[str, int] = {}
    for b in range(batches):
        v = check.run_batch(b, batch_for(0, "default", SPEC, key, 0, b, sig)) \
            .results[backend.name].verdict
        for cls, n in v.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


def failing(counts):
    return sum(n for c, n in counts.items() if c != "pass")


# -- legal implementations ------------------------------------------------------------

def _scipy_single(x, fft_type, lengths, dtype):
    """pocketfft through scipy.fft in single precision for f32 / complex<f32> (another
    algorithm's rounding: a real-input FFT of half length for RFFT, its own twiddles)."""
    import scipy.fft as sf
    L = len(lengths)
    axes = tuple(range(-L, 0))
    single = np.dtype(dtype) in (np.dtype(np.complex64), np.dtype(np.float32))
    w = x.astype(np.complex64 if x.dtype.kind == "c" and single else
                 np.float32 if single else x.dtype)
    if fft_type == "FFT":
        return sf.fftn(w, axes=axes)
    if fft_type == "IFFT":
        return sf.ifftn(w, axes=axes)
    if fft_type == "RFFT":
        return sf.rfftn(w, s=lengths, axes=axes)
    return sf.irfftn(w, s=lengths, axes=axes)


def _radix2_1d(x: np.ndarray, sign: int) -> np.ndarray:
    """Recursive radix-2 decimation in time along the last axis, in x's own precision
    (complex64 stays complex64), twiddles rounded to it; a naive DFT (exact twiddles,
    sums in x's precision) for odd lengths."""
    n = x.shape[-1]
    if n == 1:
        return x.copy()
    if n % 2:
        j = np.arange(n)
        w = np.exp(sign * 2j * np.pi * np.outer(j, j) / n).astype(x.dtype)
        return x @ w
    even = _radix2_1d(x[..., 0::2], sign)
    odd = _radix2_1d(x[..., 1::2], sign)
    tw = np.exp(sign * 2j * np.pi * np.arange(n // 2) / n).astype(x.dtype)
    t = tw * odd
    return np.concatenate([even + t, even - t], axis=-1)


def _radix2(x, fft_type, lengths, dtype):
    """A hand-written Cooley-Tukey FFT in the element type, axis by axis."""
    L = len(lengths)
    cd = np.complex64 if np.dtype(dtype) in (np.dtype(np.complex64),
                                             np.dtype(np.float32)) else np.complex128
    w = x.astype(cd)
    if fft_type in ("FFT", "RFFT"):
        for ax in range(-1, -L - 1, -1):
            w = np.moveaxis(_radix2_1d(np.moveaxis(w, ax, -1), -1), -1, ax)
        if fft_type == "RFFT":
            w = w[..., :lengths[-1] // 2 + 1]
        return w
    if fft_type == "IRFFT":
        return _scipy_single(x, fft_type, lengths, dtype)
    for ax in range(-1, -L - 1, -1):
        w = np.moveaxis(_radix2_1d(np.moveaxis(w, ax, -1), +1), -1, ax)
    w = w / cd(np.prod([w.shape[a] for a in range(-L, 0)]))
    return np.real(w) if fft_type == "IRFFT" else w


def _more_precise(x, fft_type, lengths, dtype):
    """The transform computed at float64 by a naive DFT (O(n^2), exact twiddles)."""
    L = len(lengths)
    w = x.astype(np.complex128)
    if fft_type == "IRFFT":
        return np.fft.irfftn(w, s=lengths, axes=tuple(range(-L, 0)))
    sign = +1 if fft_type == "IFFT" else -1
    if fft_type == "RFFT":
        w = w.real.astype(np.complex128)
    for ax in range(-1, -L - 1, -1):
        n = w.shape[ax]
        j = np.arange(n)
        m = np.exp(sign * 2j * np.pi * np.outer(j, j) / n)
        w = np.moveaxis(np.moveaxis(w, ax, -1) @ m, -1, ax)
        if fft_type == "IFFT":
            w = w / n
    if fft_type == "RFFT":
        w = w[..., :lengths[-1] // 2 + 1]
    return w


@pytest.mark.parametrize("sig", ALL, ids=IDS)
def test_another_algorithms_rounding_passes(sig):
    assert set(classes(Planted(_scipy_single, "scipy-single"), sig)) <= {"pass"}


@pytest.mark.parametrize("sig", [C64_FFT, C64_IFFT_2D, C64_FFT_PRIME, F32_RFFT, F32_RFFT_2D,
                                 C64_FFT_LARGE], ids=["c64-fft", "c64-ifft-2d", "c64-fft-13",
                                                      "f32-rfft", "f32-rfft-2d",
                                                      "c64-fft-1024"])
def test_a_hand_written_radix2_fft_in_the_element_type_passes(sig):
    assert set(classes(Planted(_radix2, "radix2"), sig)) <= {"pass"}


@pytest.mark.parametrize("sig", [C64_FFT, C64_IRFFT_2D, C128_FFT_3D, F32_RFFT],
                         ids=["c64-fft", "c64-irfft-2d", "c128-fft-3d", "f32-rfft"])
def test_a_more_precise_computation_passes(sig):
    assert set(classes(Planted(_more_precise, "float64-dft"), sig)) <= {"pass"}


# -- planted bugs ---------------------------------------------------------------------

def _oracle(x, fft_type, lengths, dtype):
    return fft_oracle.transform(x, fft_type, lengths)


def _ifft_without_1_over_n(x, fft_type, lengths, dtype):
    y = _oracle(x, fft_type, lengths, dtype)
    if fft_type in ("IFFT", "IRFFT"):
        y = y * np.prod(lengths)
    return y


def _ifft_unitary_norm(x, fft_type, lengths, dtype):
    y = _oracle(x, fft_type, lengths, dtype)
    if fft_type in ("IFFT", "IRFFT"):
        y = y * np.sqrt(np.prod(lengths))
    return y


def _leading_axes(x, fft_type, lengths, dtype):
    """The transform over the first L axes instead of the last L (axis bookkeeping)."""
    L = len(lengths)
    if fft_type in ("FFT", "IFFT"):
        f = np.fft.fftn if fft_type == "FFT" else np.fft.ifftn
        return f(x.astype(np.complex128), axes=tuple(range(L)))
    return _oracle(x, fft_type, lengths, dtype)


def _irfft_c2r_first(x, fft_type, lengths, dtype):
    """IRFFT with the complex-to-real transform applied to the innermost axis FIRST (the
    forward order), then the complex inverse on the outer axes, real part kept."""
    L = len(lengths)
    if fft_type != "IRFFT" or L < 2:
        return _oracle(x, fft_type, lengths, dtype)
    w = np.fft.irfft(x.astype(np.complex128), n=lengths[-1], axis=-1)
    w = np.fft.ifftn(w, axes=tuple(range(-L, -1)))
    return np.real(w)


def _rfft_wrong_half(x, fft_type, lengths, dtype):
    """RFFT keeping the last n/2 + 1 elements of the full spectrum (the mirrored half)."""
    if fft_type != "RFFT":
        return _oracle(x, fft_type, lengths, dtype)
    L = len(lengths)
    full = np.fft.fftn(x.astype(np.complex128), axes=tuple(range(-L, 0)))
    k = lengths[-1] // 2 + 1
    return full[..., lengths[-1] - k:]


def _perturbed_100_ulps(x, fft_type, lengths, dtype):
    """The oracle's answer with every element moved by 100 ulps (relative 100·eps)."""
    y = _oracle(x, fft_type, lengths, dtype)
    eps = float(np.finfo(np.dtype(dtype)).eps) if np.dtype(dtype).kind == "f" else \
        float(np.finfo(np.dtype(dtype)).eps)
    rng = np.random.default_rng(0)
    s = rng.choice([-1.0, 1.0], y.shape)
    return y * (1 + 100 * eps * s)


def _naive_dft_in_f32(x, fft_type, lengths, dtype):
    """An unstable DFT: twiddle angles computed in single precision as f32(2π/n)·(j·k)
    without reducing j·k mod n, and sums in single precision."""
    if fft_type != "FFT":
        return _oracle(x, fft_type, lengths, dtype)
    n = x.shape[-1]
    j = np.arange(n, dtype=np.float32)
    ang = np.float32(-2 * np.pi / n) * np.outer(j, j).astype(np.float32)
    w = (np.cos(ang) + 1j * np.sin(ang)).astype(np.complex64)
    return x.astype(np.complex64) @ w


def _nan_in_one_element(x, fft_type, lengths, dtype):
    y = np.array(_oracle(x, fft_type, lengths, dtype))
    if y.size:
        y.reshape(-1)[y.size // 2] = np.nan
    return y


@pytest.mark.parametrize("bug,sigs", [
    (_ifft_without_1_over_n, [C64_IFFT_2D, C64_IRFFT_2D, C64_IRFFT_ODD]),
    (_ifft_unitary_norm, [C64_IFFT_2D, C64_IRFFT_ODD]),
    (_leading_axes, [C64_FFT, C128_FFT_3D]),
    (_irfft_c2r_first, [C64_IRFFT_2D]),
    (_rfft_wrong_half, [F32_RFFT, F32_RFFT_2D]),
    (_perturbed_100_ulps, [C64_FFT, C64_IFFT_2D, F32_RFFT, C128_FFT_3D]),
    (_naive_dft_in_f32, [C64_FFT_LARGE]),
], ids=["ifft-without-1/n", "ifft-1/sqrt(n)", "leading-axes", "irfft-c2r-first",
        "rfft-wrong-half", "100-ulps", "naive-f32-dft-1024"])
def test_planted_bug_fails(bug, sigs):
    for sig in sigs:
        counts = classes(Planted(bug, bug.__name__), sig)
        assert counts.get("bound", 0) + counts.get("value", 0) > 0, (sig.key(), counts)


def test_a_nan_where_the_exact_result_is_finite_is_a_value_divergence():
    counts = classes(Planted(_nan_in_one_element, "nan"), C64_FFT)
    assert counts.get("value", 0) > 0, counts


def test_length_one_transforms_are_exact():
    """K = 0 for a length-1 transform: the bound is 0, one ulp off fails."""
    def one_ulp(x, fft_type, lengths, dtype):
        y = _oracle(x, fft_type, lengths, dtype).astype(np.complex64)
        return np.where(y != 0, y * np.complex64(1 + 2 ** -23), y)
    assert set(classes(Planted(_oracle, "exact"), C64_FFT_ONE)) <= {"pass"}
    assert failing(classes(Planted(one_ulp, "one-ulp"), C64_FFT_ONE)) > 0


# -- IRFFT outside rfft's image -------------------------------------------------------

def test_irfft_outside_rffts_image_is_masked_and_inside_it_checked():
    """Garbage on the transforms the rule masks passes; garbage elsewhere fails."""
    x_in = np.fft.rfft(np.random.default_rng(1).standard_normal((1, 8))).astype(np.complex64)
    x_out = x_in.copy()
    x_out[0, 4] += 0.5j                       # a non-real Nyquist element (n = 8)
    sig = fft_sig((1, 5), "complex<f32>", "IRFFT", [8])
    masks = oracles.implementation_defined(sig, [np.stack([x_in, x_out])])
    m = masks.get("irfft_not_hermitian")
    assert m is not None and m[1].all() and not m[0].any(), m
    # odd length: element n//2 is not the Nyquist element, the same operand is in the image
    sig7 = fft_sig((1, 5), "complex<f32>", "IRFFT", [9])
    masks7 = oracles.implementation_defined(sig7, [x_out[None]])
    assert "irfft_not_hermitian" not in masks7


def test_generated_irfft_operands_include_ones_outside_the_image():
    sig = fft_sig((2, 5), "complex<f32>", "IRFFT", [8])
    stacked = batch_for(0, "default", SPEC, "complex<f32>", 0, 0, sig)
    masks = oracles.implementation_defined(sig, stacked)
    m = masks["irfft_not_hermitian"].reshape(len(stacked[0]), -1).all(axis=1)
    assert 0 < m.sum() < len(m) // 4


# -- the oracle against the definition --------------------------------------------------

def _dft(x, sign):
    n = x.shape[-1]
    j = np.arange(n)
    return x @ np.exp(sign * 2j * np.pi * np.outer(j, j) / n)


def test_oracle_follows_the_spec_composition():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5)) + 1j * rng.standard_normal((2, 3, 4, 5))
    # FFT, L = 3: innermost first, then -2, then -3
    want = x
    for ax in (-1, -2, -3):
        want = np.moveaxis(_dft(np.moveaxis(want, ax, -1), -1), -1, ax)
    assert np.allclose(fft_oracle.transform(x, "FFT", [3, 4, 5]), want)
    # IFFT inverts it
    assert np.allclose(fft_oracle.transform(want, "IFFT", [3, 4, 5]), x)
    # RFFT: rfft on the innermost (the first n/2 + 1), then fft on the others
    r = x.real
    want = _dft(r.astype(complex), -1)[..., :3]
    want = np.moveaxis(_dft(np.moveaxis(want, -2, -1), -1), -1, -2)
    got = fft_oracle.transform(r, "RFFT", [4, 5])
    assert got.shape == (2, 3, 4, 3) and np.allclose(got, want)
    # IRFFT inverts RFFT (odd and even innermost lengths)
    for n in (5, 6):
        rr = rng.standard_normal((2, 4, n))
        assert np.allclose(fft_oracle.transform(fft_oracle.transform(rr, "RFFT", [4, n]),
                                                "IRFFT", [4, n]), rr)


def test_oracle_results_are_rounded_once_to_the_result_type():
    x = (np.arange(8) * 0.1).astype(np.float32)
    (y,) = oracles.evaluate("fft", [x], {"fft_type": "RFFT", "fft_length": [8]},
                            result_types=["tensor<5xcomplex<f32>>"])
    assert y.dtype == np.complex64 and y.shape == (5,)
    assert np.array_equal(y, np.fft.rfft(x.astype(np.float64)).astype(np.complex64))


# -- generators and invalid cases -------------------------------------------------------

def test_generated_signatures_are_valid_and_cover_every_kind_of_length():
    from hypothesis import HealthCheck, given, settings
    seen = {"fft_types": set(), "lengths": set(), "ranks": set()}

    @settings(max_examples=250, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(signatures("fft"))
    def draw(sig):
        assert not violations(sig), (sig.key(), violations(sig))
        a = sig.attributes
        seen["fft_types"].add(a["fft_type"])
        seen["lengths"].update(a["fft_length"])
        seen["ranks"].add(len(a["fft_length"]))
    draw()
    assert seen["fft_types"] == {"FFT", "IFFT", "RFFT", "IRFFT"}
    assert seen["ranks"] == {1, 2, 3}
    lengths = seen["lengths"]
    assert {1, 2, 4, 8} <= lengths                      # 1 and powers of two
    assert {3, 5, 7, 13} & lengths and 0 in lengths     # primes, and 0 now and then
    assert {6, 12} & lengths                            # other composites


@pytest.mark.parametrize("rule", ["C1", "C2", "C3", "C4", "C5"])
def test_every_constraint_breaks_alone(rule):
    found = []
    for b in SPEC.type_bindings():
        for shape in ((2,), ()):
            found += invalid.candidates(SPEC, canonical(SPEC, b, shape), rule)
    assert found, rule
    for sig in found:
        assert violations(sig, SPEC) == [rule], (sig.key(), violations(sig, SPEC))


def test_the_fft_residual_is_registered_and_named_by_the_spec():
    from conformance.checking.verdicts import RESIDUALS, check_known
    acc = SPEC.signature_accuracy(C64_FFT)
    check_known(acc, "fft")
    assert acc.kind == "residual" and acc.options["residual"] == "fft" and "fft" in RESIDUALS
