"""Backends: the implementations under test, found by name.

``get_backend(spec)`` accepts a short name (``jax``, ``jax-gpu``, ``numpy``, ``xla``,
``xla-gpu``, ``interpreter``), a
``module:Class`` path, or the name of a ``conformance.backends`` entry point that a
vendor's package declares. Anything that cannot be loaded raises
:class:`BackendLoadError` with a one-line reason.
"""
from __future__ import annotations

import importlib
from importlib import metadata
from typing import Callable

from .base import Backend, BackendLoadError, Executable, Unsupported

BUILTIN: dict[str, Callable[[], Backend]] = {
    "jax": lambda: _jax("cpu"),
    "jax-gpu": lambda: _jax("gpu"),
    "numpy": lambda: _numpy(),
    "xla": lambda: _xla("cpu"),
    "xla-gpu": lambda: _xla("gpu"),
    "interpreter": lambda: _interpreter(),
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


def entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def get_backend(spec: "str | Backend") -> Backend:
    """Load a backend by short name, ``module:Class``, or entry point name."""
    if isinstance(spec, Backend):
        return spec
    backend = _load(spec.strip())
    backend._locator = spec.strip()
    return backend


def _load(spec: str) -> Backend:
    if spec in BUILTIN:
        return _instantiate(BUILTIN[spec], repr(spec))
    if ":" in spec:
        module, _, attr = spec.partition(":")
        try:
            mod = importlib.import_module(module)
        except Exception as e:  # noqa: BLE001
            raise BackendLoadError(f"backend {spec!r}: cannot import {module!r}: "
                                   f"{type(e).__name__}: {e}") from None
        try:
            obj = getattr(mod, attr)
        except AttributeError:
            raise BackendLoadError(f"backend {spec!r}: module {module!r} has no {attr!r}") from None
        return _instantiate(obj, repr(spec))
    eps = entry_points()
    if spec in eps:
        try:
            obj = eps[spec].load()
        except Exception as e:  # noqa: BLE001
            raise BackendLoadError(f"backend {spec!r}: loading its entry point failed: "
                                   f"{type(e).__name__}: {e}") from None
        return _instantiate(obj, repr(spec))
    known = sorted(set(BUILTIN) | set(eps))
    raise BackendLoadError(f"unknown backend {spec!r}; known: {', '.join(known)}, "
                           "or module:Class")


def available() -> list[str]:
    return sorted(set(BUILTIN) | set(entry_points()))


__all__ = ["Backend", "Unsupported", "BackendLoadError", "Executable", "get_backend",
           "available", "BUILTIN"]
