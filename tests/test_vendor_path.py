"""The README's vendor example, verbatim, from a new folder: `mypkg/backend.py` next to
where `conformance run` and `pytest` start, no install and no PYTHONPATH (a
module:Class is imported as `python -m` finds modules: sys.path, then the current
directory)."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def readme_example() -> tuple[str, list[str]]:
    """The example's code and the commands the README runs it with."""
    text = (ROOT / "README.md").read_text()
    start = text.index("A vendor's backend is a small class")
    code = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    after = text[start:][text[start:].index("```", text[start:].index("```python") + 9):]
    after = after[:after.index("\n#")]                   # up to the next heading
    commands = [line.strip() for line in after.splitlines()
                if line.startswith("    ") and "mypkg.backend:MyBackend" in line]
    return code, commands


@pytest.fixture
def vendor_dir(tmp_path) -> Path:
    code, _ = readme_example()
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "backend.py").write_text(code)
    return tmp_path


def run_verbatim(command: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    """A README command as a vendor's shell runs it: the console script from the
    environment's bin folder, no PYTHONPATH."""
    argv = shlex.split(command)
    argv[0] = str(BIN / argv[0])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(argv + list(extra), cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def test_the_readme_has_the_example_and_both_commands():
    code, commands = readme_example()
    assert "class MyBackend(Backend)" in code
    assert [c.split()[0] for c in commands] == ["conformance", "pytest"]


def test_conformance_run_finds_the_vendor_module_in_the_current_directory(vendor_dir):
    (command,) = [c for c in readme_example()[1] if c.startswith("conformance")]
    p = run_verbatim(command, vendor_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "on mine" in p.stdout and "divergences: 0" in p.stdout
    assert (vendor_dir / "conformance-report" / "index.html").is_file()


def test_pytest_plugin_finds_the_vendor_module_in_the_current_directory(vendor_dir):
    (command,) = [c for c in readme_example()[1] if c.startswith("pytest")]
    p = run_verbatim(command, vendor_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"\d+ passed", p.stdout) and "failed" not in p.stdout, p.stdout


def test_pytest_plugin_under_xdist_finds_the_vendor_module(vendor_dir):
    (command,) = [c for c in readme_example()[1] if c.startswith("pytest")]
    p = run_verbatim(command, vendor_dir, "-n", "2", "--conformance-types=f32")
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_missing_module_says_where_it_was_looked_for(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([str(BIN / "conformance"), "run", "--backend", "nopkg.backend:X",
                        "--ops", "abs", "--depth", "quick"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2
    (line,) = p.stderr.strip().splitlines()
    assert "No module named 'nopkg'" in line and str(tmp_path) in line
    assert not (tmp_path / "conformance-report").exists()


def test_an_installed_module_wins_over_a_folder_of_the_same_name(tmp_path, monkeypatch):
    """The working directory is looked in last: a local folder never hides a module on
    sys.path (here: a `json` folder)."""
    from conformance.backends import BackendLoadError, import_module
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "__init__.py").write_text("raise RuntimeError('the local one')\n")
    monkeypatch.chdir(tmp_path)
    assert import_module("json").__name__ == "json"
    with pytest.raises(BackendLoadError, match="no 'NoSuch'"):
        from conformance.backends import get_backend
        get_backend("json:NoSuch")
