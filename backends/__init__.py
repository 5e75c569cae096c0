"""Backends: the implementations under test, found by name.

``get_backend(spec)`` accepts a short name (``jax``, ``jax-gpu``, ``numpy``, ``xla``,
``xla-gpu``, ``interpreter``, ``iree``), ``pjrt:/path/to/plugin.so`` or ``pjrt:NAME``
(any PJRT C-API plugin, backends/pjrt_backend.py), a
``module:Class`` path, or the name of a ``conformance.backends`` entry point that a
vendor's package declares. Anything that cannot be loaded raises
:class:`BackendLoadError` with a one-line reason.

A ``module:Class`` module is imported as ``python -m`` would find it: from
``sys.path``, and else from the current working directory (a vendor's
``mypkg/backend.py`` next to where ``conformance run`` or ``pytest`` is started works
without installing it or setting PYTHONPATH). Installed modules come first, so a
folder in the working directory never hides one (:func:`import_module`).
"""
from __future__ import annotations

import importlib
import os
import sys
from importlib import metadata
from typing import Callable

from .base import Backend, BackendLoadError, CannotPack, Executable, NoProgram, Unsupported

BUILTIN: dict[str, Callable[[], Backend]] = {
    "jax": lambda: _jax("cpu"),
    "jax-gpu": lambda: _jax("gpu"),
    "numpy": lambda: _numpy(),
    "xla": lambda: _xla("cpu"),
    "xla-gpu": lambda: _xla("gpu"),
    "interpreter": lambda: _interpreter(),
    "iree": lambda: _iree(),
}
ENTRY_POINT_GROUP = "conformance.backends"


def _jax(platform: str) -> Backend:
    from .jax_backend import JaxBackend
    return JaxBackend(platform)


def _numpy() -> Backend:
    from .numpy_backend import NumpyBackend
    return NumpyBackend()


def _xla(platform: str) -> Backend:
    from .xla_backend import XlaBackend
    return XlaBackend(platform)


def _interpreter() -> Backend:
    from .interpreter_backend import InterpreterBackend
    return InterpreterBackend()


def _iree() -> Backend:
    from .iree_backend import IreeBackend
    return IreeBackend()


def _instantiate(obj, where: str) -> Backend:
    try:
        backend = obj() if isinstance(obj, type) or callable(obj) else obj
    except BackendLoadError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure to construct is a load error
        raise BackendLoadError(f"backend {where}: constructing it failed: "
                               f"{type(e).__name__}: {e}") from None
    if not isinstance(backend, Backend):
        raise BackendLoadError(f"backend {where}: {type(backend).__name__} is not a "
                               "conformance.backends.Backend")
    return backend


def import_module(module: str):
    """Import the module of a ``module:Class`` locator, as ``python -m`` finds modules:
    from ``sys.path`` first, then from the current working directory, which is then
    kept on ``sys.path`` (the module's own imports, and child processes started from
    the same directory, find their siblings the same way)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = module.split(".")[0]
        cwd = os.getcwd()
        if e.name not in (top, module) and not module.startswith(f"{e.name}."):
            raise                       # the module was found; one of its imports was not
        if cwd in sys.path or "" in sys.path or not _in_directory(top, cwd):
            raise
    sys.path.append(cwd)
    importlib.invalidate_caches()
    return importlib.import_module(module)


def _in_directory(top: str, folder: str) -> bool:
    """Is ``top`` a package or module in ``folder``?"""
    base = os.path.join(folder, top)
    return os.path.isdir(base) or os.path.isfile(base + ".py")


def _path_hint(module: str, error: Exception) -> str:
    if not isinstance(error, ModuleNotFoundError):
        return ""
    return (f" (looked in sys.path and in the current directory {os.getcwd()}; start from "
            f"the folder that holds {module.split('.')[0]}/, or add it to PYTHONPATH)")


def entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def get_backend(spec: "str | Backend") -> Backend:
    """Load a backend by short name, ``module:Class``, or entry point name."""
    if isinstance(spec, Backend):
        return spec
    backend = _instantiate(*_resolve(spec.strip()))
    backend._locator = spec.strip()
    return backend


def resolve(spec: str) -> Callable[[], Backend]:
    """What ``spec`` names, found (imported) but not constructed: a check that is cheap
    where constructing is not (BackendLoadError with a one-line reason)."""
    obj, where = _resolve(spec.strip())
    return lambda: _instantiate(obj, where)


def _resolve(spec: str) -> tuple[object, str]:
    if spec in BUILTIN:
        return BUILTIN[spec], repr(spec)
    if spec.startswith("pjrt:"):                  # a PJRT plugin by path or package name
        from .pjrt_backend import PjrtBackend, locate
        plugin = spec[len("pjrt:"):]
        locate(plugin)
        return (lambda: PjrtBackend(plugin)), repr(spec)
    if ":" in spec:
        module, _, attr = spec.partition(":")
        if not module or not attr:
            raise BackendLoadError(f"backend {spec!r}: expected module:Class, e.g. "
                                   "mypkg.backend:MyBackend")
        try:
            mod = import_module(module)
        except Exception as e:  # noqa: BLE001
            raise BackendLoadError(f"backend {spec!r}: cannot import {module!r}: "
                                   f"{type(e).__name__}: {e}{_path_hint(module, e)}") from None
        try:
            obj = getattr(mod, attr)
        except AttributeError:
            raise BackendLoadError(f"backend {spec!r}: module {module!r} has no {attr!r}") from None
        return obj, repr(spec)
    eps = entry_points()
    if spec in eps:
        try:
            obj = eps[spec].load()
        except Exception as e:  # noqa: BLE001
            raise BackendLoadError(f"backend {spec!r}: loading its entry point failed: "
                                   f"{type(e).__name__}: {e}") from None
        return obj, repr(spec)
    known = sorted(set(BUILTIN) | set(eps))
    raise BackendLoadError(f"unknown backend {spec!r}; known: {', '.join(known)}, "
                           "pjrt:PLUGIN, or module:Class")


def available() -> list[str]:
    return sorted(set(BUILTIN) | set(entry_points()))


__all__ = ["Backend", "Unsupported", "CannotPack", "NoProgram", "BackendLoadError", "Executable", "get_backend",
           "available", "BUILTIN", "import_module", "resolve"]
