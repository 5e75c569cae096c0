"""Hypothesis draws that depend on the seed alone, never on the process.

Hypothesis (6.13x and later) answers about one integer, float, string or bytes draw
in twenty with a constant taken from a pool, and half of those pools are the
constants it finds in the source of the *local* modules loaded in the process (every
module in ``sys.modules`` outside site-packages and the standard library, test files
aside). Which modules those are depends on the process, not on the seed: the CLI's
main process has imported ``conformance/apps/cli.py`` and ``reports/``, a ``--jobs``
worker has not; an editable install counts the suite's own modules, an installed
wheel does not; a vendor's backend module counts, and so does whatever an earlier op
imported lazily. So the same seed drew other signatures in a worker than serially (a
constant's tensor value, drawn from a seed in 0..2**32-1, took a constant of
``cli.py``).

Every place that runs hypothesis to *plan* cases (the runner's signature plans, the
pytest plugin's tests) draws inside :func:`seed_only`, which empties that pool for
the block: the global pool, which is part of hypothesis itself, stays, so the same
hypothesis version draws the same cases from the same seed in every process. It
cannot be done inside a strategy: hypothesis draws the first choices of a test case
(its "novel prefix") before any strategy code runs.

It relies on hypothesis internals (``providers._get_local_constants`` and
``providers.CONSTANTS_CACHE``); :func:`supported` says whether they are there, and
``tests/test_determinism.py`` fails when they are not.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

try:      # hypothesis internals; absent in versions without local constants
    from hypothesis.internal.conjecture import providers as _providers
    from hypothesis.internal.constants_ast import Constants as _Constants
except ImportError:  # pragma: no cover - another hypothesis version
    _providers = None
    _Constants = None

_lock = threading.RLock()
_depth = 0
_saved = None


def supported() -> bool:
    """Can :func:`seed_only` empty the pool in this hypothesis version?"""
    return (_providers is not None and _Constants is not None
            and callable(getattr(_providers, "_get_local_constants", None))
            and hasattr(getattr(_providers, "CONSTANTS_CACHE", None), "cache"))


def _no_local_constants():
    return _Constants()


@contextlib.contextmanager
def seed_only() -> Iterator[None]:
    """Within this block, hypothesis draws no constants from the process's local
    modules: what it draws depends on the seed (and the strategy) only.

    Re-entrant. On the way in and out it clears hypothesis's cache of allowed
    constants, so tests outside the block keep their own local constants.
    """
    global _depth, _saved
    if not supported():
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = _providers._get_local_constants
            _providers._get_local_constants = _no_local_constants
            _providers.CONSTANTS_CACHE.cache.clear()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _providers._get_local_constants = _saved
                _saved = None
                _providers.CONSTANTS_CACHE.cache.clear()
