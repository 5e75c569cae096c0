"""The package's layers: imports only go downstream and never in a circle (issue 10).

Every module of the installed ``conformance`` package is read with :mod:`ast` (not
imported); every ``import`` and ``from ... import`` counts, also those inside
functions, with relative imports resolved. ``from package import name`` is an import
of the submodule ``package.name`` where there is one, else of ``package`` (an import
never counts as importing the parent packages Python initialises on the way).

Each module gets the layer of the first pattern of :data:`LAYERS` it matches:
``pkg.*`` is the package and everything under it, ``name*`` every module whose name
starts so, anything else one module. A module may import its own layer (when there is
no circle) and the layers below, never one above; a module that no pattern places
fails the test, so that a new module is placed deliberately.
"""
from __future__ import annotations

import ast
import importlib.util
import pkgutil
from pathlib import Path

import pytest

ROOT = "conformance"

#: bottom to top: one row per folder (README "Layout")
LAYERS: list[tuple[str, list[str]]] = [
    ("the vocabulary: conformance/core/", ["conformance", "conformance.core.*"]),
    ("the op specs: specs/", ["conformance.specs.*"]),
    ("what stands on the specs: oracles/, generators/, conformance/mlir/",
     ["conformance.oracles.*", "conformance.generators.*", "conformance.mlir.*"]),
    ("the implementations: backends/", ["conformance.backends.*"]),
    ("the checking layer: conformance/checking/", ["conformance.checking.*"]),
    ("the applications: conformance/apps/, reports/",
     ["conformance.apps.*", "conformance.reports.*", "conformance.__main__"]),
]

# Circles known to exist, each a set of modules; a circle among (some of) them is not
# reported, and an entry whose circle is gone fails test_pending_cycles_are_still_circles.
# Empty: the one circle this was made for, conformance.apps.runner <-> replay <-> repro, was
# removed by the checker rewrite (issue 10).
PENDING_CYCLES: list[frozenset[str]] = []


def _matches(pattern: str, name: str) -> bool:
    if pattern.endswith(".*"):
        return name == pattern[:-2] or name.startswith(pattern[:-1])
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def layer_of(name: str) -> int | None:
    for i, (_, patterns) in enumerate(LAYERS):
        if any(_matches(p, name) for p in patterns):
            return i
    return None


# ---------------------------------------------------------------------------
# Reading the package
# ---------------------------------------------------------------------------

def _package_names() -> set[str]:
    """The packages to walk: ``conformance`` and those the layer table and pyproject name
    (setuptools maps several folders into the namespace, so the package's own folder
    does not show them all)."""
    names = {ROOT}
    for _, patterns in LAYERS:
        names |= {p[:-2] for p in patterns if p.endswith(".*")}
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.exists():
        import tomllib
        data = tomllib.loads(pyproject.read_text())
        names |= set(data.get("tool", {}).get("setuptools", {}).get("packages", []))
    return names


def discover_modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the installed package: name -> (file, is a package)."""
    found: dict[str, tuple[Path, bool]] = {}

    def walk(name: str, locations) -> None:
        for info in pkgutil.iter_modules(list(locations)):
            sub = f"{name}.{info.name}"
            spec = importlib.util.find_spec(sub)
            if spec is None or spec.origin is None:
                continue
            found[sub] = (Path(spec.origin), info.ispkg)
            if info.ispkg:
                walk(sub, spec.submodule_search_locations or [])

    for name in sorted(_package_names()):
        if name in found:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        found[name] = (Path(spec.origin), True)
        walk(name, spec.submodule_search_locations or [])
    return found


def imports_of(name: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The package modules ``name`` imports (anywhere in its source). A name under the
    package that is not a module comes back as is, so that the caller can report it."""
    out: set[str] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            if t == ROOT or t.startswith(ROOT + "."):
                # ``import a.b.c`` of a module that is not known: the longest known prefix
                # (an attribute was named), or the name itself (no such module).
                while t not in known and "." in t and t.rsplit(".", 1)[0] in known \
                        and t.rsplit(".", 1)[0] != ROOT:
                    t = t.rsplit(".", 1)[0]
                if t != name:
                    out.add(t)
    return out


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the package modules it imports, from ``{name: (source, is_package)}``."""
    known = set(sources)
    return {name: imports_of(name, src, pkg, known) for name, (src, pkg) in sources.items()}


def package_graph() -> dict[str, set[str]]:
    modules = discover_modules()
    return import_graph({n: (p.read_text(), pkg) for n, (p, pkg) in modules.items()})


# ---------------------------------------------------------------------------
# Judging a graph
# ---------------------------------------------------------------------------

def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles: every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A concrete path around a component: a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in graph[path[-1]] if w in members)
        back = [w for w in nxt if w in seen]
        if back:
            w = back[0]
            return path[path.index(w):] + [w]
        w = nxt[0]
        path.append(w)
        seen.add(w)


def problems(graph: dict[str, set[str]],
             pending: list[frozenset[str]] = PENDING_CYCLES) -> list[str]:
    """One line per unassigned module, upward import and circle."""
    out = []
    for name in sorted(graph):
        if layer_of(name) is None:
            out.append(f"unassigned module {name}: place it in tests/test_layers.py LAYERS")
    for name in sorted(graph):
        for target in sorted(graph[name]):
            if target not in graph:
                out.append(f"{name} imports {target}, which is not a module of the package")
                continue
            src, dst = layer_of(name), layer_of(target)
            if dst is None:
                if src is not None:
                    out.append(f"unassigned module {target} (imported by {name})")
                continue
            if src is not None and dst > src:
                out.append(f"upward import: {name} (layer {src}, {LAYERS[src][0]}) imports "
                           f"{target} (layer {dst}, {LAYERS[dst][0]})")
    for component in strongly_connected(graph):
        if any(set(component) <= p for p in pending):
            continue
        out.append(f"import circle among {', '.join(component)}: "
                   f"{' -> '.join(_one_cycle(graph, component))}")
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return package_graph()


def test_the_walk_finds_every_layer(graph):
    for name in ["conformance.core.types", "conformance.specs", "conformance.specs.regions",
                 "conformance.oracles.arithmetic", "conformance.backends.jax_ops",
                 "conformance.reports.html", "conformance.apps.cli"]:
        assert name in graph, name
    # imports inside functions count
    assert "conformance.backends.jax_ops" in graph["conformance.backends.jax_backend"]


def test_no_upward_import_no_circle_no_unplaced_module(graph):
    found = problems(graph)
    assert not found, "\n".join(found)


def test_every_module_of_the_table_exists(graph):
    missing = [p for _, patterns in LAYERS for p in patterns
               if not any(_matches(p, name) for name in graph)]
    assert not missing, f"the layer table names modules that do not exist: {missing}"


def test_pending_cycles_are_still_circles(graph):
    """A pending circle that is gone should leave PENDING_CYCLES."""
    circles = strongly_connected(graph)
    for p in PENDING_CYCLES:
        assert any(set(c) & p for c in circles), \
            f"{sorted(p)} no longer import each other in a circle: remove it from PENDING_CYCLES"


# The checker on planted sources (never on the package itself).

def _planted(sources: dict[str, str]) -> dict[str, set[str]]:
    return import_graph({name: (src, False) for name, src in sources.items()})


def test_a_planted_upward_import_is_reported():
    graph = _planted({
        "conformance.core.types": "def f():\n    from conformance.specs import load_spec\n",
        "conformance.specs": "from conformance.core import types\n",
        "conformance.core": "",
    })
    found = problems(graph, pending=[])
    assert any(line.startswith("upward import: conformance.core.types (layer 0")
               and "imports conformance.specs (layer 1" in line for line in found), found


def test_a_planted_circle_is_reported_with_its_modules():
    graph = import_graph({
        "conformance.oracles": ("from . import registry\n", True),
        "conformance.oracles.registry": ("import conformance.oracles.arithmetic\n", False),
        "conformance.oracles.arithmetic": ("from . import registry\n", False),
    })
    assert graph["conformance.oracles.arithmetic"] == {"conformance.oracles.registry"}
    found = problems(graph, pending=[])
    assert found == ["import circle among conformance.oracles.arithmetic, "
                     "conformance.oracles.registry: conformance.oracles.arithmetic -> "
                     "conformance.oracles.registry -> conformance.oracles.arithmetic"], found
    # ... unless it is pending
    assert problems(graph, pending=[frozenset(graph) - {"conformance.oracles"}]) == []


def test_a_planted_unplaced_module_and_a_missing_module_are_reported():
    graph = import_graph({
        "conformance.apps.runner": ("from conformance import gadgets\nimport conformance.nowhere\n",
                               False),
        "conformance.gadgets": ("", False),
    })
    found = problems(graph, pending=[])
    assert "unassigned module conformance.gadgets: place it in tests/test_layers.py LAYERS" \
        in found
    assert "conformance.apps.runner imports conformance.nowhere, which is not a module of the " \
           "package" in found


# Registries, not hubs: a family's module adds to its registry and is loaded by the spec's
# family name on first use; the registry's package never imports it.

HUBS = {"conformance.oracles": "conformance.oracles.{family}",
        "conformance.backends.jax_ops": "conformance.backends.jax_ops_{family}"}


def _families() -> set[str]:
    from conformance.specs import all_specs
    return {s.family for s in all_specs()}


def test_no_hub_imports_its_family_modules(graph):
    for hub, pattern in HUBS.items():
        families = {pattern.format(family=f) for f in _families()} & set(graph)
        assert families, hub
        assert not graph[hub] & families, f"{hub} imports {sorted(graph[hub] & families)}"


def test_every_op_finds_its_oracle_and_jax_mapping_through_its_family():
    from conformance.backends import jax_ops
    from conformance.oracles import oracle_for
    from conformance.specs import all_specs
    for spec in all_specs():
        assert oracle_for(spec.name), spec.name
        jax_ops._load_family(spec.name)
        assert spec.name in jax_ops.BUILDERS or spec.name in jax_ops.DIRECT, spec.name
