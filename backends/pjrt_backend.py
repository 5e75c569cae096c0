"""The pjrt backend: any PJRT C-API plugin (what an accelerator vendor ships) compiling
each case's canonical StableHLO module and running it on the plugin's first device
(issue 22).

``--backend pjrt:PLUGIN`` where PLUGIN is

- a path to the plugin's shared library (``pjrt:/opt/acme/pjrt_plugin_acme.so``): any
  ``.so`` that exports ``GetPjrtApi``; loaded with jaxlib's
  ``load_pjrt_plugin_dynamically`` and its client made with ``make_c_api_client``;
- the name of an installed plugin package: an entry point of the ``xla_plugins`` group
  (OpenXLA's packaging: ``pip install xla-cpu-pjrt`` gives ``pjrt:xla_cpu_pjrt``) or of
  the ``jax_plugins`` group (jax's: ``pjrt:xla_cuda12``), or an importable module
  (``pjrt:xla_plugins.xla_cpu_pjrt``); its library is what the module's
  ``get_library_path()`` returns, else the one ``.so`` in its folder that exports
  ``GetPjrtApi``;
- ``pjrt:jaxlib-cpu``: jaxlib's own CPU client, not through the C API (what is left to
  compare the same code path against when no plugin is installed).

Past loading, everything is the xla backend's (the same compile options, transfers,
error classification: XLA's ``UNIMPLEMENTED`` status is ``Unsupported``, any other
compile error of a valid program a backend error, of an invalid one the right answer),
so a plugin and jaxlib's own CPU client are compared on equal terms. The plugin's name,
library path, platform and platform version are in the run record. A plugin is loaded
once per process (PJRT keeps a process-wide registry of plugins by name); the backend
runs in a child process by default, as xla does.
"""
from __future__ import annotations

import os
import re
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

from . import jaxlib_support
from .base import BackendLoadError
from .xla_backend import XlaBackend

PREFIX = "pjrt:"
#: The name that means jaxlib's own CPU client.
JAXLIB_CPU = "jaxlib-cpu"
#: Entry point groups searched for an installed plugin package, in this order.
GROUPS = ("xla_plugins", "jax_plugins")

_LOCK = threading.Lock()
_CLIENTS: dict[str, Any] = {}          # library path -> its client (one per process)


def exports_pjrt_api(path: "str | os.PathLike") -> bool:
    """Whether the shared library at ``path`` exports ``GetPjrtApi`` (read from its
    dynamic symbol table without loading it; True where that cannot be read)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return False
    return not data.startswith(b"\x7fELF") or b"GetPjrtApi\x00" in data


def locate(plugin: str) -> str:
    """The shared library that ``plugin`` (a path or a package name, see the module
    docstring) names, or :data:`JAXLIB_CPU`; BackendLoadError with one line if none."""
    plugin = plugin.strip()
    if not plugin:
        raise BackendLoadError("backend 'pjrt:': expected pjrt:/path/to/plugin.so or "
                               "pjrt:NAME (an installed PJRT plugin package)")
    if plugin == JAXLIB_CPU:
        return plugin
    where = f"backend {PREFIX + plugin!r}"
    if os.sep in plugin or plugin.endswith(".so"):
        path = Path(plugin).expanduser()
        if not path.is_file():
            raise BackendLoadError(f"{where}: no such file {str(path)!r}")
        if not exports_pjrt_api(path):
            raise BackendLoadError(f"{where}: {str(path)!r} does not export GetPjrtApi "
                                   "(not a PJRT C-API plugin)")
        return str(path.resolve())
    module = _plugin_module(plugin, where)
    get = getattr(module, "get_library_path", None)
    if callable(get):
        return str(Path(get()).resolve())
    folder = Path(getattr(module, "__file__", "") or "").parent
    found = sorted(p for p in folder.glob("*.so") if exports_pjrt_api(p)) if folder.name else []
    if len(found) != 1:
        raise BackendLoadError(f"{where}: module {module.__name__!r} has no "
                               "get_library_path() and "
                               f"{'no' if not found else len(found)} PJRT libraries in "
                               f"{str(folder)!r}")
    return str(found[0].resolve())


def _plugin_module(name: str, where: str):
    import importlib
    for group in GROUPS:
        for ep in metadata.entry_points(group=group):
            if ep.name == name:
                try:
                    return ep.load()
                except Exception as e:  # noqa: BLE001
                    raise BackendLoadError(f"{where}: loading entry point {group}:{name} "
                                           f"failed: {type(e).__name__}: {e}") from None
    if all(part.isidentifier() for part in name.split(".")):
        try:
            return importlib.import_module(name)
        except ImportError:
            pass
    installed = sorted({ep.name for g in GROUPS for ep in metadata.entry_points(group=g)})
    raise BackendLoadError(f"{where}: no PJRT plugin named {name!r} (installed plugin "
                           f"packages: {', '.join(installed) or 'none'}; or give "
                           f"pjrt:/path/to/plugin.so, or pjrt:{JAXLIB_CPU})")


def plugin_name(library: str) -> str:
    """The name a library is registered under in PJRT's process-wide registry."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", Path(library).stem) or "plugin"


def client(lib: jaxlib_support.Jaxlib, library: str, where: str):
    """The C-API client of the plugin at ``library`` (made once per process)."""
    with _LOCK:
        if library in _CLIENTS:
            return _CLIENTS[library]
        name = plugin_name(library)
        try:
            if not lib.pjrt_plugin_loaded(name):
                lib.load_pjrt_plugin_dynamically(name, library)
            lib.initialize_pjrt_plugin(name)
            made = lib.make_c_api_client(name, {})
        except Exception as e:  # noqa: BLE001 - the plugin's refusal is the reason
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise BackendLoadError(f"{where}: loading the plugin failed: {first}") from None
        _CLIENTS[library] = made
        return made


class PjrtBackend(XlaBackend):
    """A PJRT plugin; see the module docstring. ``PjrtBackend(plugin)`` takes what
    follows ``pjrt:`` on the command line."""

    name = "pjrt"
    isolate = True

    def __init__(self, plugin: str) -> None:
        where = f"backend {PREFIX + plugin!r}"
        library = locate(plugin)
        self.library = library
        self.lib = jaxlib_support.load("pjrt", "plugin")
        made = None if library == JAXLIB_CPU else client(self.lib, library, where)
        try:
            self.pjrt = jaxlib_support.Pjrt(self.lib, "cpu", client=made)
        except (RuntimeError, IndexError, ValueError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise BackendLoadError(f"{where}: no device ({first})") from None
        from .base import Backend
        Backend.__init__(self)
        self.platform = self.pjrt.device.platform
        short = JAXLIB_CPU if library == JAXLIB_CPU else plugin_name(library)
        self.name = f"pjrt-{short}"

    def describe(self) -> dict[str, Any]:
        c = self.pjrt.client
        return {"name": self.name, "plugin": self.library, "platform": self.platform,
                "platform_version": getattr(c, "platform_version", None),
                "device": str(self.pjrt.device), "devices": len(c.local_devices()),
                "jax": self.lib.jax_version, "jaxlib": self.lib.jaxlib_version}
