"""The pjrt backend (issue 22): any PJRT C-API plugin, by path or package name.

The C-API plugin tests use OpenXLA's CPU plugin (``pip install -e '.[pjrt-cpu]'``
installs xla-cpu-pjrt) or the library that ``CONFORMANCE_PJRT_PLUGIN`` names, and skip
without one; ``pjrt:jaxlib-cpu`` (jaxlib's own CPU client through the same backend) and
the one-line load errors always run.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance.backends import BackendLoadError, Unsupported, get_backend, resolve
from conformance.backends.pjrt_backend import JAXLIB_CPU, exports_pjrt_api, locate
from conformance.core.case import Case, Signature
from conformance.core.literals import bit_patterns
from conformance.core.types import ALL_ELEMENT_TYPES, element_type


def _plugin() -> str | None:
    env = os.environ.get("CONFORMANCE_PJRT_PLUGIN")
    if env:
        return env
    try:
        locate("xla_cpu_pjrt")
        return "xla_cpu_pjrt"
    except BackendLoadError:
        return None


PLUGIN = _plugin()
needs_plugin = pytest.mark.skipif(PLUGIN is None, reason="no PJRT C-API plugin installed "
                                  "(pip install -e '.[pjrt-cpu]', or set "
                                  "CONFORMANCE_PJRT_PLUGIN=/path/to/plugin.so)")
SPECS = [f"pjrt:{JAXLIB_CPU}"] + ([f"pjrt:{PLUGIN}"] if PLUGIN else [])


@pytest.fixture(scope="module", params=SPECS)
def backend(request):
    return get_backend(request.param)


def test_add_and_i1_add_is_or(backend):
    s = Signature.make("add", ["tensor<3xi32>"] * 2, ["tensor<3xi32>"])
    a = np.array([1, -2, 2**31 - 1], np.int32)
    out = backend.run(Case(s, (a, np.array([1, 1, 1], np.int32))))
    assert np.array_equal(out[0], [2, -1, -2**31])
    b = Signature.make("add", ["tensor<4xi1>"] * 2, ["tensor<4xi1>"])
    x, y = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
    assert list(backend.run(Case(b, (x, y)))[0]) == [False, True, True, True]


@pytest.mark.parametrize("name", [t.name for t in ALL_ELEMENT_TYPES])
def test_every_element_type_round_trips_bit_exactly(backend, name):
    """negate(negate(x)) would change nothing either; a reshape moves every element of
    every type (0-d inputs included) through the device and back unchanged."""
    et = element_type(name)
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 1 << min(et.component.bits, 62), size=(2, 3) + (
        (2,) if et.is_complex else ()), dtype=np.uint64)
    from conformance.core.literals import from_bit_patterns
    x = from_bit_patterns(raw if not et.is_boolean else raw & np.uint64(1), et)
    s = Signature.make("reshape", [f"tensor<2x3x{et.mlir}>"], [f"tensor<6x{et.mlir}>"])
    if name in ("f6E2M3FN", "f6E3M2FN"):     # jaxlib 0.10.2's CPU client holds no f6 array
        with pytest.raises(Unsupported, match=f"cannot hold {name} arrays"):
            backend.run(Case(s, (x,)))
        return
    out = backend.run(Case(s, (x,)))[0]
    assert out.dtype == et.dtype and np.array_equal(bit_patterns(out),
                                                    bit_patterns(x.reshape(6)))
    zero_d = Signature.make("reshape", [f"tensor<{et.mlir}>"], [f"tensor<1x{et.mlir}>"])
    out = backend.run(Case(zero_d, (x.reshape(-1)[:1].reshape(()),)))[0]
    assert out.shape == (1,) and np.array_equal(bit_patterns(out),
                                                bit_patterns(x.reshape(-1)[:1]))


def test_invalid_program_is_rejected_at_compile_time(backend):
    """An add whose result type differs from its operands' (a constraint the spec
    states) is refused by the plugin's compiler: the right answer for an invalid case."""
    text = """module {
  func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> (tensor<3xf32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<3xf32>
    func.return %0 : tensor<3xf32>
  }
}
"""
    s = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<3xf32>"], invalid="C1")
    with pytest.raises(Exception) as e:
        backend.compile_text(text, s)
    assert not isinstance(e.value, Unsupported)


def test_collectives_beyond_the_devices_are_unsupported(backend):
    # (more processes than any host client has devices: the tests' jax gets 8, issue 18)
    s = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<2xf32>"], num_replicas=64,
                       num_partitions=1)
    with pytest.raises(Unsupported, match="64x1"):
        backend.compile_text("module {}", s)


def test_describe_names_the_plugin(backend):
    d = backend.describe()
    assert d["name"].startswith("pjrt-") and d["plugin"] and d["platform"]


@pytest.mark.parametrize("spec, says", [
    ("pjrt:", "expected pjrt:/path/to/plugin.so"),
    ("pjrt:/nonexistent/pjrt_acme.so", "no such file"),
    ("pjrt:no_such_plugin_pkg", "no PJRT plugin named 'no_such_plugin_pkg'"),
])
def test_bad_plugin_is_a_one_line_load_error(spec, says):
    with pytest.raises(BackendLoadError) as e:
        resolve(spec)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_library_that_is_no_plugin_is_refused(tmp_path):
    import jaxlib
    lib = next(Path(jaxlib.__file__).parent.glob("utils*.so"))
    assert not exports_pjrt_api(lib)
    with pytest.raises(BackendLoadError, match="does not export GetPjrtApi"):
        resolve(f"pjrt:{lib}")


def test_cli_refuses_a_missing_plugin_in_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend",
                        "pjrt:/nonexistent/acme.so", "--ops", "add", "--out",
                        str(tmp_path / "o")], capture_output=True, text=True)
    assert p.returncode == 2 and "no such file" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@needs_plugin
def test_the_plugin_is_a_c_api_client():
    b = get_backend(f"pjrt:{PLUGIN}")
    assert exports_pjrt_api(b.library)
    assert "PJRT C API" in str(b.describe()["platform_version"])


@needs_plugin
def test_conformance_run_against_the_plugin_in_a_child(tmp_path):
    """The vendor's one command: the plugin runs in a child process (the locator is
    sent there), and every outcome is a checked one."""
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend",
                        f"pjrt:{PLUGIN}", "--ops", "add,select", "--types", "si32,f32,i1",
                        "--depth", "quick", "--out", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    header = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert header["backends"][0]["isolated"] is True
    assert header["backends"][0]["plugin"].endswith(".so")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["cases"] > 0 and summary["internal_errors"] == 0
    outcomes = {json.loads(ln).get("outcome") for ln in
                (out / "results.jsonl").read_text().splitlines()[1:]}
    assert "pass" in outcomes and "backend_error" not in outcomes


@needs_plugin
def test_the_pytest_plugin_form_runs_the_plugin(tmp_path):
    """The vendor's other form: the shipped suite under pytest with the plugin."""
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-n", "0", "--pyargs", "conformance.apps.suite",
                        f"--conformance-backend=pjrt:{PLUGIN}", "--conformance-ops=negate",
                        "--conformance-types=si32,f16"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    assert " passed" in p.stdout and "error" not in p.stdout.splitlines()[-1]
