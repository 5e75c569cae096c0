"""The shipped expectations files work from an installed wheel, outside the checkout:
`load_expectations("jax-cpu")`, `conformance run --expectations jax-cpu` and the pytest
plugin's `--conformance-expectations=jax-cpu`.

Builds a wheel of the working tree (pip, with build isolation: it fetches setuptools),
installs it with --no-deps into a fresh venv that sees this environment's packages
(jax, numpy, ...), and runs from a folder outside the checkout. About 15 s.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ["conformance", "specs", "generators", "oracles", "backends", "reports"]
NETWORK_ERRORS = ("Could not find a version", "NewConnectionError", "Temporary failure in "
                  "name resolution", "No matching distribution", "Network is unreachable")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The venv's bin folder, with the wheel of the working tree installed."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"          # a copy: building writes build/ next to pyproject.toml
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for d in PACKAGE_DIRS:
        shutil.copytree(ROOT / d, src / d, ignore=ignore, symlinks=False)
    whl = base / "whl"
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q",
                        "-w", str(whl)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        if any(e in p.stderr for e in NETWORK_ERRORS):
            pytest.skip(f"building the wheel needs the package index: {p.stderr[-300:]}")
        raise AssertionError(p.stdout + p.stderr)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=300)
    if sys.prefix != sys.base_prefix:
        # Run from a venv (e.g. one with another jax): --system-site-packages sees the
        # base interpreter's packages, not this environment's, so name them (.pth).
        import site
        purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; "
                                  "print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        Path(purelib, "_outer_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    (wheel,) = whl.glob("*.whl")
    p = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-deps", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return venv / "bin"


@pytest.fixture
def outside(tmp_path) -> Path:
    assert ROOT not in tmp_path.parents
    return tmp_path


def test_shipped_expectations_load_by_name_from_the_wheel(installed, outside):
    script = (
        "import conformance, conformance.apps.expectations as e\n"
        "print(conformance.__file__)\n"
        "print(sorted(e.shipped_expectations()))\n"
        "x = e.load_expectations('jax-cpu')\n"
        "print(len(x.entries), x.backend)\n"
        "try:\n"
        "    e.load_expectations('nosuch')\n"
        "except e.ExpectationsError as err:\n"
        "    print(err)\n")
    p = subprocess.run([str(installed / "python"), "-c", script], cwd=outside,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    where, names, loaded, error = p.stdout.splitlines()
    assert where.startswith(str(installed.parent)), where      # the wheel, not the checkout
    assert "jax-cpu" in names
    n, backend = loaded.split()
    assert int(n) > 10 and backend == "jax"
    assert "'nosuch'" in error and "jax-cpu" in error


def test_cli_and_plugin_take_the_shipped_name(installed, outside):
    p = subprocess.run([str(installed / "conformance"), "run", "--backend", "numpy", "--ops",
                        "abs", "--types", "f32", "--depth", "quick", "--no-progress",
                        "--expectations", "jax-cpu", "--out", str(outside / "out")],
                       cwd=outside, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "gate: 0 unexpected" in p.stdout
    p = subprocess.run([str(installed / "conformance"), "run", "--expectations", "jax-gpu"],
                       cwd=outside, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "shipped: iree-cpu, jax-cpu" in p.stderr, p.stderr
    p = subprocess.run([str(installed / "python"), "-m", "pytest", "--pyargs",
                        "conformance.apps.suite", "--conformance-backend=numpy",
                        "--conformance-ops=abs", "--conformance-types=f32",
                        "--conformance-expectations=jax-cpu", "-q", "-p", "no:cacheprovider"],
                       cwd=outside, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
