"""The Backend interface: discovery, run-only and compile-only vendors, jax and numpy."""
import numpy as np
import pytest

from conformance import oracles
from conformance.backends import Backend, BackendLoadError, Unsupported, get_backend
from conformance.core.case import Case, Signature


class RunOnly(Backend):
    name = "run-only"

    def run(self, case):
        return oracles.evaluate_case(case)


class CompileOnly(Backend):
    name = "compile-only"
    compiled = 0

    def compile(self, sig):
        CompileOnly.compiled += 1
        return lambda inputs: oracles.evaluate(sig.op, inputs, sig.attributes,
                                               result_types=sig.result_types)


class Neither(Backend):
    name = "neither"


def _case():
    return Case.make("add", [np.array([1, 2], np.int32), np.array([3, 4], np.int32)],
                     ["tensor<2xsi32>"])


def test_short_names_and_module_class():
    assert get_backend("numpy").name == "numpy"
    assert get_backend("jax").name == "jax"
    assert get_backend(f"{__name__}:RunOnly").name == "run-only"


def test_load_errors_are_one_line_and_name_the_backend():
    for spec, text in [("nosuch", "unknown backend 'nosuch'"),
                       ("nosuchmodule:X", "cannot import 'nosuchmodule'"),
                       (f"{__name__}:Missing", "has no 'Missing'"),
                       (f"{__name__}:Neither", "must implement run(case) or compile"),
                       ("numpy:pi", "is not a conformance.backends.Backend")]:
        with pytest.raises(BackendLoadError) as e:
            get_backend(spec)
        assert text in str(e.value) and "\n" not in str(e.value)


def test_entry_point_discovery(monkeypatch):
    from importlib import metadata
    ep = metadata.EntryPoint("vendor", f"{__name__}:RunOnly", "conformance.backends")
    monkeypatch.setattr("conformance.backends.metadata.entry_points",
                        lambda group=None: [ep] if group == "conformance.backends" else [])
    assert get_backend("vendor").name == "run-only"


def test_run_only_backend_gets_compile_and_batches():
    b = RunOnly()
    out = b.run(_case())
    assert out[0].tolist() == [4, 6]
    sig = _case().signature
    stacked = [np.array([[1, 2], [3, 4]], np.int32), np.array([[1, 1], [1, 1]], np.int32)]
    (res,) = b.batch_executable(sig)(stacked)
    assert res.tolist() == [[2, 3], [4, 5]]


def test_compile_only_backend_compiles_each_signature_once():
    b = CompileOnly()
    before = CompileOnly.compiled
    for _ in range(3):
        assert b.run(_case())[0].tolist() == [4, 6]
    assert CompileOnly.compiled == before + 1


def test_numpy_backend_rejects_invalid_programs():
    sig = Signature.make("add", ["tensor<2xsi32>", "tensor<2xf32>"], ["tensor<2xsi32>"],
                         invalid="C1")
    with pytest.raises(ValueError, match="breaks C1"):
        get_backend("numpy").run(Case(sig, (np.zeros(2, np.int32), np.zeros(2, np.float32))))


def test_jax_backend_reports_unsupported_types_with_the_reason():
    jax = get_backend("jax")
    case = Case.make("add", [np.array([True]), np.array([False])], ["tensor<1xi1>"])
    with pytest.raises(Unsupported, match="add"):
        jax.run(case)
    cmp = Case.make("compare", [np.array([1.0], np.float32)] * 2, ["tensor<1xi1>"],
                    {"comparison_direction": "LT", "compare_type": "TOTALORDER"})
    assert jax.run(cmp)[0].tolist() == [False]


def test_jax_backend_runs_every_element_type_of_convert():
    jax = get_backend("jax")
    from conformance.core.types import ALL_ELEMENT_TYPES
    for et in ALL_ELEMENT_TYPES:
        x = np.zeros(3, et.dtype)
        case = Case.make("convert", [x], [f"tensor<3xf32>"])
        if et.name in ("f6E2M3FN", "f6E3M2FN"):    # jaxlib 0.10.2 CPU cannot hold them
            with pytest.raises(Unsupported, match=f"jax on cpu cannot hold {et.name} arrays"):
                jax.run(case)
            continue
        out = jax.run(case)
        assert out[0].dtype == np.float32


def test_jax_backend_batches_with_scalar_broadcast_inputs():
    jax = get_backend("jax")
    sig = Signature.make("clamp", ["tensor<f32>", "tensor<3xf32>", "tensor<f32>"],
                         ["tensor<3xf32>"])
    stacked = [np.array([0.0, 1.0], np.float32), np.array([[-1, 0.5, 2]] * 2, np.float32),
               np.array([1.0, 1.5], np.float32)]
    (out,) = jax.batch_executable(sig)(stacked)
    assert out.tolist() == [[0.0, 0.5, 1.0], [1.0, 1.0, 1.5]]


@pytest.mark.parametrize("op, types, results, attrs", [
    # vmap of these turns the start indices into gather/scatter indices that jax or XLA
    # cannot lower for int4; the op itself runs, so the batch runs case by case.
    ("dynamic_slice", ["tensor<5xsi8>", "tensor<ui4>"], ["tensor<2xsi8>"], {"slice_sizes": [2]}),
    ("dynamic_update_slice", ["tensor<5xsi8>", "tensor<2xsi8>", "tensor<si4>"],
     ["tensor<5xsi8>"], {}),
])
def test_jax_backend_runs_case_by_case_where_vmap_cannot_lower(op, types, results, attrs):
    import ml_dtypes
    jax = get_backend("jax")
    sig = Signature.make(op, types, results, attrs)
    operand = np.arange(10, dtype=np.int8).reshape(2, 5)
    index_type = ml_dtypes.uint4 if "ui4" in types[-1] else ml_dtypes.int4
    index = np.array([4, 1], index_type)
    stacked = [operand] + ([np.full((2, 2), -1, np.int8)] if len(types) == 3 else []) + [index]
    (out,) = jax.batch_executable(sig)(stacked)
    want = [oracles.evaluate(op, [x[b] for x in stacked], attrs, result_types=results)[0]
            for b in range(2)]
    assert out.tolist() == [w.tolist() for w in want]


def test_jax_backend_traces_a_signature_once_to_learn_its_result_types(monkeypatch):
    """What jax.lax infers for a signature is learnt once per process (issue 33: a trace
    per compile was 6% of a fresh signature's time): another backend object compiling
    the same signature does not trace it again and gets the same answer, a refusal
    included; after the cache is emptied it traces again."""
    import jax
    from conformance.backends import jax_backend
    sig = Signature.make("add", ["tensor<3xf32>"] * 2, ["tensor<3xf32>"])
    refused = Signature.make("add", ["tensor<3xi1>"] * 2, ["tensor<3xi1>"])
    jax_backend._INFERRED.clear()
    first = get_backend("jax")
    first.batch_executable(sig)
    with pytest.raises(Unsupported, match="jax.lax refuses add") as was:
        first.batch_executable(refused)
    calls = []
    real = jax.eval_shape
    monkeypatch.setattr(jax, "eval_shape", lambda *a, **k: calls.append(a) or real(*a, **k))
    second = get_backend("jax")
    assert second is not first
    (out,) = second.batch_executable(sig)([np.ones((2, 3), np.float32)] * 2)
    assert out.tolist() == [[2.0] * 3] * 2
    with pytest.raises(Unsupported) as again:
        second.batch_executable(refused)
    assert calls == [] and str(again.value) == str(was.value)
    jax_backend._INFERRED.clear()
    get_backend("jax").batch_executable(sig)
    assert len(calls) == 1
