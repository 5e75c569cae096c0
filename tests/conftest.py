"""The suite's own tests: jax gets 8 host CPU devices for the collectives' grids (issue 18),
asked for before any test module starts jax (as `conformance run` does when collectives
are selected, and the pytest plugin when the conformance suite runs).

Plans are drawn once for the whole session: the controller points the draw cache
(generators/draw_cache.py) at a fresh folder that its workers and every `conformance`
subprocess of a test inherit, and removes it at the end. A test that must draw anew
(determinism) runs its processes without the variable. jax's persistent compilation
cache is pointed at a session folder the same way: a program that several tests compile
(the same signature in the gate, the golden verdicts, a CLI test's subprocess) is
compiled once (issue 33, CI time). It changes no result: the executable is the one XLA
built; the benchmarks that time compiles turn it off themselves.

Under ``-n 2`` (``--dist worksteal``, pyproject.toml) each worker starts with one half of
the collection and idle workers steal from the tail of the other's queue: the longest
tests go to the heads of the halves, so they start at once, side by side, instead of
leaving one worker alone with a ten-minute test at the end."""
import os
import shutil
import sys
import tempfile

from conformance.backends.jaxlib_support import ask_for_host_devices
from conformance.generators.draw_cache import ENV as PLAN_CACHE

ask_for_host_devices()


def _session_folder(config, env: str, prefix: str) -> str | None:
    """A fresh folder named by ``env`` for this session (workers and subprocesses inherit
    the variable), unless this is a worker or the user chose one."""
    if hasattr(config, "workerinput") or os.environ.get(env):
        return None
    folder = tempfile.mkdtemp(prefix=prefix)
    os.environ[env] = folder
    config._session_folders = getattr(config, "_session_folders", []) + [(env, folder)]
    return folder


def pytest_configure(config):
    _session_folder(config, PLAN_CACHE, "conformance-plans-")
    folder = _session_folder(config, "JAX_COMPILATION_CACHE_DIR", "conformance-jax-cache-")
    if folder:
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"   # every program
        if "jax" in sys.modules:        # imported already (no -n): tell its config too
            import jax
            jax.config.update("jax_compilation_cache_dir", folder)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def pytest_unconfigure(config):
    for env, folder in getattr(config, "_session_folders", []):
        os.environ.pop(env, None)
        shutil.rmtree(folder, ignore_errors=True)
        if env == "JAX_COMPILATION_CACHE_DIR":
            os.environ.pop("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", None)


# The longest tests of a loaded CI-like run (`pytest -n 2 --durations=80`, the lead's land4
# run: those of 10 s and more), longest first, by node id part; they head the two halves
# of the collection alternately (worksteal then balances the rest). The quick jax gate is
# one test per op family.
_GATE = "test_shipped_expectations.py::test_SHIPPED_GATE_quick_jax_run_exits_0_with_the_shipped_expectations"
LONGEST = (
    f"{_GATE}[reduction]",
    f"{_GATE}[indexing]",
    "test_misbehaving_backends.py::test_a_hanging_backend_costs_the_same",
    "test_packing.py::test_packed_and_unpacked_runs_give_the_same_records[xla]",
    "test_corpus.py::test_the_corpus_on_jax_and_xla",
    f"{_GATE}[conversion]",
    "test_parallel.py::test_pytest_xdist_gives_the_outcomes",
    f"{_GATE}[arithmetic]",
    "test_scale.py::test_ray_local_two_workers",
    "test_shipped_expectations.py::test_SHIPPED_GATE_quick_xla_run",
    f"{_GATE}[transcendental]",
    "test_determinism.py::test_jobs_2_draws_what_a_serial_run_draws[quick",
    "test_scale.py::test_ray_worker_killed_mid_run",
    f"{_GATE}[collectives]",
    "test_fuzz_cluster.py::test_ray_campaign_stops_on_sigterm",
    "test_isolation.py::test_a_hanging_backend_times_out_and_the_run_finishes",
    "test_misbehaving_backends.py::test_a_segfaulting_backend_fails_one_test",
    "test_pytest_plugin.py::test_expectations_xfail_a_planted_divergence",
    f"{_GATE}[convolution]",
    f"{_GATE}[rng]",
    "test_cli_bad_input.py::test_bad_values_are_one_line_exit_2",
    "test_pytest_plugin.py::test_expectations_under_xdist",
    "test_reports.py::test_cli_gate_end_to_end",
    "test_isolation.py::test_a_hanging_backend_costs_a_bounded_number",
    "test_same_verdicts.py::test_records_match_the_recorded_verdicts",
    "test_control_flow.py::test_a_while_that_never_ends",
    f"{_GATE}[data_movement]",
    "test_host_io.py::test_a_backend_that_hangs_on_infeed",
    "test_isolation.py::test_a_hanging_backend_costs_at_most_the_budget",
    "test_one_check_path.py::test_a_verdict_kind_registered_once",
)
# Then, at the end of the second half's heads (the lighter half, 249 s of the list's 583
# in that run): the gate's other families, and the tests that read every op's quick plan
# from the draw cache, which by then the gate's families have drawn and cached. The
# fresh-process plan test draws every plan in a subprocess without the cache (its check)
# and reads this session's from the cache: at the head it drew them all a second time in
# its worker (88 s CPU; 1.5 s from the cache), beside the gate drawing them a third.
AFTER_THE_GATE = (
    f"{_GATE}[",
    "test_determinism.py::test_every_op_s_quick_plan_is_the_same_in_a_fresh_process",
)
FIRST_HALF = LONGEST[0::2]
SECOND_HALF = LONGEST[1::2] + AFTER_THE_GATE


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
