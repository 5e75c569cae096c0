"""The suite's own tests: jax gets 8 host CPU devices for the collectives' grids (issue 18),
asked for before any test module starts jax (as `conformance run` does when collectives
are selected, and the pytest plugin when the conformance suite runs).

Plans are drawn once for the whole session: the controller points the draw cache
(generators/draw_cache.py) at a fresh folder that its workers and every `conformance`
subprocess of a test inherit, and removes it at the end. A test that must draw anew
(determinism) runs its processes without the variable."""
import os
import shutil
import tempfile

from conformance.backends.jaxlib_support import ask_for_host_devices
from conformance.generators.draw_cache import ENV as PLAN_CACHE

ask_for_host_devices()


def pytest_configure(config):
    if hasattr(config, "workerinput") or os.environ.get(PLAN_CACHE):
        return              # a worker (inherits the controller's), or the user chose one
    config._plan_cache = tempfile.mkdtemp(prefix="conformance-plans-")
    os.environ[PLAN_CACHE] = config._plan_cache


def pytest_unconfigure(config):
    held = getattr(config, "_plan_cache", None)
    if held:
        os.environ.pop(PLAN_CACHE, None)
        shutil.rmtree(held, ignore_errors=True)
