"""Plans and rule searches kept on disk between processes, when asked for.

Drawing an op's plans is hypothesis work (a whole quick sweep is minutes on two cores),
and every process draws them anew: each `conformance` subprocess of a test, each
``--jobs`` worker, each pytest worker. With ``CONFORMANCE_PLAN_CACHE=DIR`` set, what
:func:`cached` computes is pickled under ``DIR`` and read back by any later process.

A draw is a pure function of its key and of the code and libraries that draw it, so
the folder holding the files is named by a digest of both: the source of the packages
that plan (the conformance package, generators, specs), and the versions of Python,
hypothesis, numpy and ml_dtypes. Changing any of them starts an empty folder. Off
(draws as usual) unless the variable is set, and whenever custom-call targets other
than the shipped examples are registered (custom_call's draws follow them). A file that
cannot be read is drawn again; one that cannot be written is skipped.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Callable, TypeVar

ENV = "CONFORMANCE_PLAN_CACHE"
T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def code_digest() -> str:
    """sha256 of every .py/.yaml file that decides a draw, and of the libraries' versions."""
    import hypothesis
    import ml_dtypes
    import numpy

    import conformance
    from conformance import specs
    h = hashlib.sha256()
    for v in (sys.version, hypothesis.__version__, numpy.__version__, ml_dtypes.__version__):
        h.update(v.encode() + b"\0")
    # the whole conformance package (its core, and checking/plan.py, which picks a plan
    # from the draws: more than decides a draw, never less), the generators, the specs
    roots = [Path(conformance.__file__).parent, Path(__file__).parent,      # (generators/)
             Path(specs.__file__).parent]
    files = sorted(p for r in roots for p in r.rglob("*") if p.suffix in (".py", ".yaml"))
    for p in files:
        h.update(str(p.name).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def folder() -> Path | None:
    """Where draws are kept now; None when the cache is off."""
    root = os.environ.get(ENV)
    if not root:
        return None
    from conformance.specs import custom_calls
    if not custom_calls.stock():
        return None
    return Path(root) / code_digest()


def cached(kind: str, op: str, key: tuple, draw: Callable[[], T]) -> T:
    """``draw()``, or what an earlier process drew for (kind, op, key) with this code."""
    where = folder()
    if where is None:
        return draw()
    name = hashlib.sha256(repr((kind, key)).encode()).hexdigest()[:24]
    path = where / op / f"{kind}-{name}.pkl"
    try:
        with open(path, "rb") as f:
            held_key, value = pickle.load(f)
        if held_key == (kind, op, key):
            return value
    except Exception:  # noqa: BLE001 - absent, torn or foreign: drawn again below
        pass
    value = draw()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(((kind, op, key), value), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)        # readers see a whole file or none
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except (OSError, pickle.PicklingError):
        pass
    return value
