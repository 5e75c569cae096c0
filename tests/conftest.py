"""The suite's own tests: jax gets 8 host CPU devices for the collectives' grids (issue 18),
asked for before any test module starts jax (as `conformance run` does when collectives
are selected, and the pytest plugin when the conformance suite runs).

Plans are drawn once for the whole session: the controller points the draw cache
(generators/draw_cache.py) at a fresh folder that its workers and every `conformance`
subprocess of a test inherit, and removes it at the end. A test that must draw anew
(determinism) runs its processes without the variable.

Under ``-n 2`` (``--dist worksteal``, pyproject.toml) each worker starts with one half of
the collection and idle workers steal from the tail of the other's queue: the longest
tests go to the heads of the halves, so they start at once, side by side, instead of
leaving one worker alone with a ten-minute test at the end."""
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


# The longest tests of a loaded CI-like run (`pytest -n 2 --durations=80`), longest first,
# by node id part; they head the two halves of the collection alternately (worksteal
# then balances the rest). The quick jax gate is one test per op family.
_GATE = "test_shipped_expectations.py::test_SHIPPED_GATE_quick_jax_run_exits_0_with_the_shipped_expectations"
LONGEST = (
    "test_determinism.py::test_every_op_s_quick_plan_is_the_same_in_a_fresh_process",
    f"{_GATE}[reduction]",
    f"{_GATE}[conversion]",
    f"{_GATE}[indexing]",
    f"{_GATE}[data_movement]",
    f"{_GATE}[convolution]",
    f"{_GATE}[arithmetic]",
    "test_shipped_expectations.py::test_SHIPPED_GATE_quick_xla_run",
    f"{_GATE}[collectives]",
    "test_packing.py::test_packed_and_unpacked_runs_give_the_same_records[xla]",
    f"{_GATE}[rng]",
    f"{_GATE}[contraction]",
    f"{_GATE}[xla_forms]",
    "test_corpus.py::test_the_corpus_on_jax_and_xla",
    f"{_GATE}[transcendental]",
    "test_misbehaving_backends.py::test_a_hanging_backend_costs_the_same",
    "test_scale.py::test_ray_local_two_workers",
    "test_parallel.py::test_pytest_xdist_gives_the_outcomes",
    "test_coverage.py::test_quick_depth_plans_a_rich_signature",
    "test_misbehaving_backends.py::test_a_segfaulting_backend_fails_one_test",
    "test_fuzz_cluster.py::test_ray_campaign_stops_on_sigterm",
    "test_scale.py::test_ray_worker_killed_mid_run",
)
FIRST_HALF = LONGEST[0::2]
SECOND_HALF = LONGEST[1::2]


def _first_match(item, parts) -> int | None:
    return next((i for i, p in enumerate(parts) if p in item.nodeid), None)


def pytest_collection_modifyitems(config, items):
    """Heads of the two halves: FIRST_HALF, then SECOND_HALF (same order in every
    worker: xdist checks that the workers collected the same list)."""
    first = sorted((i for i in items if _first_match(i, FIRST_HALF) is not None),
                   key=lambda i: _first_match(i, FIRST_HALF))
    second = sorted((i for i in items if _first_match(i, SECOND_HALF) is not None
                     and i not in first), key=lambda i: _first_match(i, SECOND_HALF))
    if not first and not second:
        return
    chosen = {id(i) for i in first + second}
    rest = [i for i in items if id(i) not in chosen]
    k = max(0, len(items) // 2 - len(first))
    items[:] = first + rest[:k] + second + rest[k:]
