"""The supported jax/jaxlib range and the version shims of backends/jaxlib_support.py.

CI runs one version (0.10.2, Python 3.11); these tests hold every tried version to its
branches with monkeypatched version strings, so they run on any installed version.
The other versions are run for real by bench/check_jax_version.sh.
"""
import tomllib
from pathlib import Path

import pytest

from conformance.backends import BackendLoadError, jaxlib_support
from conformance.backends.jaxlib_support import Shims, shims, supported, version_tuple

ROOT = Path(__file__).resolve().parents[1]

# Every tried version: its jaxlib extension version (jaxlib/xla_client.py `_version`)
# and the branches it must take. 0.11.0 was not run, only its wheel read.
TRIED = {
    "0.10.2": (467, Shims(result_handler_skip_checks=True)),
    "0.11.0": (477, Shims(result_handler_skip_checks=True)),
    "0.11.2": (495, Shims(result_handler_skip_checks=False)),
    "0.12.0.1": (505, Shims(result_handler_skip_checks=False)),
}


def test_version_tuples():
    assert version_tuple("0.10.2") == (0, 10, 2)
    assert version_tuple("0.12.0.1") == (0, 12, 0, 1)
    assert version_tuple("0.13.0.dev20260101") == (0, 13, 0)
    assert version_tuple("0.12.0rc1") == (0, 12, 0)
    assert version_tuple(None) == version_tuple("") == ()


@pytest.mark.parametrize("version,ok", [
    ("0.10.2", True), ("0.11.0", True), ("0.11.2", True), ("0.12.0", True),
    ("0.12.0.1", True), ("0.10.1", False), ("0.4.30", False), ("0.13.0", False),
    ("0.13.0.dev20260101", False), ("1.0", False), (None, False), ("weird", False)])
def test_supported_range(version, ok):
    assert supported(version) is ok


def test_every_tested_version_is_in_the_range_and_pyproject_declares_it():
    assert all(supported(v) for v in jaxlib_support.TESTED)
    assert jaxlib_support.PINNED == jaxlib_support.MINIMUM == jaxlib_support.TESTED[0]
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for name in ("jax", "jaxlib"):
        assert f"{name}{jaxlib_support.REQUIREMENT}" in [d.replace(" ", "") for d in deps]


@pytest.mark.parametrize("version", sorted(TRIED))
def test_shims_pick_the_branch_of_each_tried_version(version):
    extension, want = TRIED[version]
    assert shims(version, extension) == want
    assert shims(version, None) == want or version == "0.11.0"   # by release: 0.11.2 on


@pytest.mark.parametrize("version", sorted(TRIED))
def test_load_accepts_each_tried_version_and_takes_its_branch(version, monkeypatch):
    import jax
    import jax._src.lib as lib
    import jaxlib
    extension, want = TRIED[version]
    monkeypatch.setattr(jax, "__version__", version)
    monkeypatch.setattr(jaxlib, "__version__", version)
    monkeypatch.setattr(lib, "jaxlib_extension_version", extension)
    monkeypatch.delenv(jaxlib_support.UNPINNED_ENV, raising=False)
    jaxlib_support._reset()
    try:
        loaded = jaxlib_support.load("xla", "pjrt")
        assert (loaded.jax_version, loaded.jaxlib_version) == (version, version)
        assert loaded.shims == want
    finally:
        jaxlib_support._reset()


@pytest.mark.parametrize("version", ["0.10.1", "0.13.0"])
def test_load_refuses_a_version_outside_the_range_unless_told(version, monkeypatch):
    import jaxlib
    monkeypatch.setattr(jaxlib, "__version__", version)
    monkeypatch.delenv(jaxlib_support.UNPINNED_ENV, raising=False)
    jaxlib_support._reset()
    try:
        with pytest.raises(BackendLoadError, match=r"needs jax and jaxlib >=0\.10\.2,<0\.13 "
                                                   r"\(found jax .*, jaxlib " + version):
            jaxlib_support.load("xla", "pjrt")
        jaxlib_support._reset()
        monkeypatch.setenv(jaxlib_support.UNPINNED_ENV, "1")
        assert jaxlib_support.load("xla", "pjrt").jaxlib_version == version
    finally:
        jaxlib_support._reset()


@pytest.mark.parametrize("skip_checks,arity", [(True, 4), (False, 3)])
def test_result_handler_is_called_with_the_branch_arity(skip_checks, arity):
    calls = []

    class Lib:
        shims = Shims(result_handler_skip_checks=skip_checks)

        @staticmethod
        def array_result_handler(*args):
            calls.append(args)
            return "handler"

    pjrt = jaxlib_support.Pjrt.__new__(jaxlib_support.Pjrt)
    pjrt.lib, pjrt.sharding = Lib, "sharding"
    assert pjrt.result_handler("aval") == "handler"
    assert calls == [("aval", "sharding", True, True)[:arity]]


def test_the_installed_version_runs_its_branch_end_to_end():
    """Whatever jaxlib is installed, the xla backend's fast path (the result handlers
    of a second call) works with the branch it was given."""
    import numpy as np
    from conformance.backends import get_backend
    from conformance.core.case import Signature
    xla = get_backend("xla")
    sig = Signature.make("negate", ["tensor<3xf32>"], ["tensor<3xf32>"])
    run = xla.pjrt.loaded(xla.compile_text(_NEGATE, sig))
    x = xla.pjrt.put(np.array([1, -0.0, 2], np.float32))
    for _ in range(3):                          # the 2nd and 3rd calls use the handlers
        (out,) = run([x])
        assert out.tolist() == [-1, 0, -2] and np.signbit(out[1]) == np.False_
    assert run._handlers is not None


_NEGATE = """module {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = "stablehlo.negate"(%arg0) : (tensor<3xf32>) -> tensor<3xf32>
    func.return %0 : tensor<3xf32>
  }
}"""


def test_an_expectation_can_name_a_jaxlib_version():
    """A divergence only one jaxlib has is waived by ``when: {jaxlib: <glob>}`` (every
    jax-based backend's describe() has its jaxlib version), no version feature needed."""
    from conformance.apps.expectations import Expectation
    e = Expectation(op="bitcast_convert", cls="type", element_types=("i1->si4",),
                    reason="XLA treats i1 as 8 bits", when=(("jaxlib", "0.1[01].*"),))
    for version, ok in (("0.10.2", True), ("0.11.2", True), ("0.12.0.1", False)):
        assert e.matches("xla", {"jaxlib": version}, "bitcast_convert", "type",
                         element_type="i1->si4") is ok
