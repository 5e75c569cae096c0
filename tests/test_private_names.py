"""No module of the package uses another module's private names (issue 28).

Every module of the installed ``conformance`` package (found as tests/test_layers.py
finds them: :func:`test_layers.discover_modules`) is read with :mod:`ast`, not imported.
A *private* name is one that starts with ``_`` and is not a dunder. Reported, with
``file:line``:

- ``from <package module> import _name`` (relative imports resolved);
- ``<package module>._name`` where the left side is a name bound to a package module
  (``import conformance.x as m``, ``from conformance import oracles``, ``from . import
  x``, or a chain ``conformance.oracles.x``), and ``getattr(<that>, "_name")``;
- an import of a private module (``pkg._m``) from outside ``pkg``: a ``_module`` is
  private to its package, so its siblings may import it (``oracles/_kernels.py``).

A module's own private names are its own business. Names of third-party modules (jax's
``jax._src`` shims of the tested jax range, ``os._exit``, ...) are outside the scope: only
names bound to modules of the package are followed.
"""
from __future__ import annotations

import ast

import pytest

from test_layers import ROOT, discover_modules


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _resolve(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    parts = name.split(".") if is_package else name.split(".")[:-1]
    parts = parts[:len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def _in_package(module: str) -> bool:
    return module == ROOT or module.startswith(ROOT + ".")


def _private_module_outside(target: str, importer: str) -> bool:
    """Is ``target`` (or a package above it) a private module whose package does not hold
    ``importer``?"""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if i and _private(part):
            owner = ".".join(parts[:i])
            if not (importer == owner or importer.startswith(owner + ".")):
                return True
    return False


def private_uses(name: str, source: str, is_package: bool, known: set[str],
                 path: str = "<source>") -> list[str]:
    """One ``path:line: ...`` per use in module ``name`` of another package module's
    private names. ``known``: the package's module names."""
    tree = ast.parse(source)
    out: list[str] = []
    bound: dict[str, str] = {}   # local name -> the package module it is bound to

    def report(node: ast.AST, what: str) -> None:
        out.append(f"{path}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not _in_package(a.name):
                    continue
                if _private_module_outside(a.name, name):
                    report(node, f"import {a.name} (a private module of another package)")
                if a.asname:
                    bound[a.asname] = a.name
                else:
                    bound[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node)
            if not _in_package(base):
                continue
            if _private_module_outside(base, name):
                report(node, f"from {base} import ... (a private module of another package)")
            for a in node.names:
                if a.name == "*":
                    continue
                sub = f"{base}.{a.name}"
                if sub in known:                       # a submodule
                    if _private_module_outside(sub, name):
                        report(node, f"from {base} import {a.name} (a private module of "
                                     f"another package)")
                    bound[a.asname or a.name] = sub
                elif _private(a.name) and base != name:
                    report(node, f"from {base} import {a.name}")

    def module_of(expr: ast.expr) -> str | None:
        """The package module an expression names (a bound name, or a chain of submodule
        attributes on one), else None."""
        if isinstance(expr, ast.Name):
            return bound.get(expr.id)
        if isinstance(expr, ast.Attribute):
            left = module_of(expr.value)
            if left is not None and f"{left}.{expr.attr}" in known:
                return f"{left}.{expr.attr}"
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            target = module_of(node.value)
            if target is None or target == name:
                continue
            if f"{target}.{node.attr}" in known:        # a private submodule
                if _private_module_outside(f"{target}.{node.attr}", name):
                    report(node, f"{target}.{node.attr} (a private module of another "
                                 f"package)")
                continue
            report(node, f"{target}.{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            target = module_of(node.args[0])
            if target is not None and target != name:
                report(node, f'{node.func.id}({target}, "{node.args[1].value}")')
    return sorted(set(out), key=lambda line: (int(line.split(":")[1]), line))


def package_private_uses() -> list[str]:
    modules = discover_modules()
    known = set(modules)
    out: list[str] = []
    for name, (path, is_package) in sorted(modules.items()):
        out += private_uses(name, path.read_text(), is_package, known, str(path))
    return out


# ---------------------------------------------------------------------------
# The package
# ---------------------------------------------------------------------------

def test_no_module_uses_another_modules_private_names():
    found = package_private_uses()
    assert not found, ("private names of other modules (make the name public, or move it "
                       "to the module that uses it):\n" + "\n".join(found))


def test_the_walk_reads_the_whole_package():
    modules = discover_modules()
    for name in ["conformance.checking.checker", "conformance.oracles.convolution",
                 "conformance.generators.control_flow", "conformance.backends.jax_ops_call",
                 "conformance.specs", "conformance.reports.html"]:
        assert name in modules, name


# ---------------------------------------------------------------------------
# The checker on planted sources (never on the package itself)
# ---------------------------------------------------------------------------

KNOWN = {"conformance", "conformance.oracles", "conformance.oracles.indexing",
         "conformance.oracles.reduction", "conformance.oracles._kernels",
         "conformance.generators", "conformance.generators.call",
         "conformance.checking.checker"}


def _uses(source: str, name: str = "conformance.oracles.reduction",
          is_package: bool = False) -> list[str]:
    return private_uses(name, source, is_package, KNOWN, "planted.py")


@pytest.mark.parametrize("source, line, what", [
    ("from .indexing import _occurrence\n", 1, "from conformance.oracles.indexing import "
                                                "_occurrence"),
    ("import os\nfrom conformance.oracles.indexing import occurrence, _occurrence as o\n", 2,
     "from conformance.oracles.indexing import _occurrence"),
    ("def f():\n    from ..generators.call import _call_body\n", 2,
     "from conformance.generators.call import _call_body"),
    ("from . import indexing\n\nx = indexing._occurrence\n", 3,
     "conformance.oracles.indexing._occurrence"),
    ("import conformance.oracles.indexing as ix\ny = ix._occurrence([1])\n", 2,
     "conformance.oracles.indexing._occurrence"),
    ("import conformance.oracles.indexing\n\nconformance.oracles.indexing._occurrence\n", 3,
     "conformance.oracles.indexing._occurrence"),
    ("from conformance.checking import checker\ngetattr(checker, '_private')\n", 2,
     'getattr(conformance.checking.checker, "_private")'),
])
def test_a_planted_private_use_is_reported_with_its_line(source, line, what):
    found = _uses(source)
    assert found == [f"planted.py:{line}: {what}"], found


def test_a_private_module_is_private_to_its_package():
    # its siblings may import it ...
    assert _uses("from ._kernels import wrap\nfrom . import _kernels\n") == []
    # ... nobody else
    found = _uses("from conformance.oracles._kernels import wrap\n",
                  name="conformance.generators.call")
    assert found == ["planted.py:1: from conformance.oracles._kernels import ... (a private "
                     "module of another package)"], found
    found = _uses("from conformance.oracles import _kernels\n", name="conformance.checking.checker")
    assert len(found) == 1 and "_kernels" in found[0], found


def test_what_is_not_reported():
    assert _uses(
        "import os\nimport jax\nfrom jax._src import core\n"       # third-party modules
        "os._exit(0)\njax._src.xla_bridge\n"
        "from .indexing import occurrence, __all__\n"              # public names, dunders
        "def _mine():\n    return _mine.__doc__\n"                  # its own private names
        "from . import indexing\nindexing.__name__\n"
        "class C:\n    def f(self):\n        return self._x\n") == []


def test_a_package_relative_import_resolves_from_the_package():
    found = _uses("from .indexing import _occurrence\n", name="conformance.oracles",
                  is_package=True)
    assert found == ["planted.py:1: from conformance.oracles.indexing import _occurrence"]
