"""Every draw depends on the seed and the plan only, never on the process: a --jobs 2 run
gives the records of a serial one, and hypothesis's constants from the process's local
modules (conformance.generators.determinism) do not leak into the signatures."""
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st
from hypothesis.internal.conjecture import providers

from conformance.checking import plan
from conformance.generators import determinism
from conformance.generators.draw_cache import ENV as PLAN_CACHE
from conformance.specs import all_specs
from type_sampling import sampled  # noqa: E402  (CI time: the newer float formats once)

ROOT = Path(__file__).resolve().parents[1]
TIMING = {"started", "elapsed", "out"}


@pytest.fixture
def local_constants_calls(monkeypatch):
    """Counts hypothesis's look-ups of the constants of the process's local modules."""
    assert determinism.supported(), \
        "hypothesis changed its constants pool internals: update generators/determinism.py"
    calls: list[int] = []
    real = providers._get_local_constants
    monkeypatch.setattr(providers, "_get_local_constants",
                        lambda: calls.append(1) or real())
    return calls


def test_plans_never_consult_the_constants_of_the_process_s_modules(local_constants_calls):
    """Hypothesis answers some draws with constants from the source of the local modules
    loaded in the process (which differ between the CLI's main process and a --jobs
    worker, a checkout and a wheel); plans are drawn without that pool."""
    from conformance.checking.plan import plan_signatures      # what every front-end plans with
    from conformance.specs import load_spec
    for op, binding in (("constant", {"E": "si8"}), ("add", {"E": "f32"}),
                        ("gather", None), ("convert", None)):
        spec = load_spec(op)
        binding = binding or spec.type_bindings()[0]
        for plan_seed in range(4):
            plan_signatures(spec, binding, 40, plan_seed, "default")
    assert local_constants_calls == []


def test_seed_only_draws_the_same_whatever_modules_are_loaded(local_constants_calls,
                                                              tmp_path, monkeypatch):
    def draw() -> list:
        out: list = []

        @seed(7)
        @settings(max_examples=300, database=None, phases=[Phase.generate], deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.integers(0, 2 ** 32 - 1))
        def collect(x):
            out.append(x)

        with determinism.seed_only():
            collect()
        return out

    before = draw()
    assert local_constants_calls == []
    # A new local module full of constants: hypothesis would offer them to later draws.
    (tmp_path / "many_constants_for_hypothesis.py").write_text(
        "VALUES = [\n" + "".join(f"    {100 + (i * 2654435761) % 2 ** 31},\n"
                                 for i in range(1000)) + "]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import many_constants_for_hypothesis  # noqa: F401
    assert draw() == before
    assert local_constants_calls == []
    # The control: outside the block (restored on the way out), hypothesis does look
    # the constants up.
    _plain_draws(300)
    assert local_constants_calls


def _plain_draws(n: int) -> None:
    @seed(7)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2 ** 32 - 1))
    def collect(x):
        pass

    collect()


def _fresh_env(**extra) -> dict:
    """This process's environment without the session's draw cache: these processes
    must draw for themselves what they compare."""
    env = {k: v for k, v in os.environ.items() if k != PLAN_CACHE}
    return {**env, **extra}


def conformance(*args):
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=_fresh_env())


def _records(out: Path) -> Counter:
    """The run's records as a multiset, order, timing and the output folder aside."""
    recs = Counter()
    with open(out / "results.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r["kind"] in ("run", "end"):
                r = {k: v for k, v in r.items() if k not in TIMING}
            recs[json.dumps(r, sort_keys=True)] += 1
    return recs


# The --jobs machinery is the same for every op; what an op's own generators could make
# process-dependent is checked for every op by the plan test below. So the run compares
# cheap ops of many kinds (element-wise, complex, integer, token, region, call, process
# id, precision): the 26 cheapest-of-each-family ops took 4 min loaded in CI.
JOBS_OPS = ("abs,after_all,call,ceil,complex,constant,count_leading_zeros,iota,is_finite,"
            "partition_id,select,reduce_precision,map")


@pytest.mark.parametrize("depth, ops", [
    ("quick", JOBS_OPS),
    ("default", "constant"),     # the draw that used to differ (a constant's value)
])
def test_jobs_2_draws_what_a_serial_run_draws(tmp_path, depth, ops):
    args = ["run", "--backend", "numpy", "--depth", depth, "--seed", "3", "--no-progress",
            "--no-replay", "--ops", ops]
    one = conformance(*args, "--out", str(tmp_path / "one"))
    two = conformance(*args, "--jobs", "2", "--out", str(tmp_path / "two"))
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    a, b = _records(tmp_path / "one"), _records(tmp_path / "two")
    assert sum(a.values()) > 50
    assert a == b, sorted((a - b).elements())[:3] + sorted((b - a).elements())[:3]


def plan_digests() -> dict[str, str]:
    """sha256 of every op's quick plans at seed 0, per op."""
    out = {}
    for spec in all_specs():
        h = hashlib.sha256()
        for b in sampled(spec.type_bindings()):
            for sig in plan.plan_binding(spec, b, 0, "quick"):
                h.update(sig.key().encode() + b"\n")
        out[spec.name] = h.hexdigest()
    return out


PLAN_DIGESTS = ("import json, sys; sys.path.insert(0, 'tests'); "
                "from test_determinism import plan_digests; print(json.dumps(plan_digests()))")


def test_every_op_s_quick_plan_is_the_same_in_a_fresh_process_with_other_string_hashes():
    """Every op's quick plan at seed 0, drawn in a new process whose str hashes (set and
    dict orders of strings) differ from this one's, is this session's plan: what a
    --jobs worker, a cluster worker or a later `conformance repro` draws. (This side
    reads the session's draw cache where another process of the session drew the plan,
    the gate's family runs under CI's order, tests/conftest.py; the new process draws
    every plan itself.)"""
    env = _fresh_env(PYTHONHASHSEED="12345")
    p = subprocess.Popen([sys.executable, "-c", PLAN_DIGESTS], cwd=ROOT, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)   # drawn meanwhile
    here = plan_digests()
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err[-2000:]
    fresh = json.loads(out)
    assert sorted(fresh) == sorted(here)
    assert [op for op in here if fresh[op] != here[op]] == []
