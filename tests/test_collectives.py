"""Collectives and the execution model (issue 18): the process groups of 003's four
strategies, the oracle on grids, planted backends that must fail (groups ignored,
collective_permute's pairs swapped, all_to_all's parts concatenated in the wrong order,
all_gather in device order) and ones that must pass (another legal reduction order, an
independent simulation), generated grids and groups, every constraint broken alone, XLA on
several host devices in its isolated child, a hang that costs one timeout case, and jax's
shard_map path on a 1x1 grid."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conformance import oracles
from conformance.checking.checker import SignatureCheck, check_case
from conformance.core.case import Case, Signature
from conformance.generators import invalid
from conformance.generators.signatures import canonical, signatures
from conformance.checking.golden import examples
from conformance.oracles import collectives as co
from conformance.checking.plan import batch_for
from conformance.specs import load_spec
from conformance.specs.validity import violations

from planted_collectives import GridOracle, sum_last_first

OPS = ["all_gather", "all_reduce", "all_to_all", "collective_permute", "reduce_scatter",
       "replica_id", "partition_id"]


# -- the spec's process groups ------------------------------------------------------------

def test_process_groups_are_the_specs_examples():
    """003 "#### cross_replica" ... "#### flattened_ids", their own examples."""
    assert co.process_groups("cross_replica", [[0, 1], [2, 3]], 4, 2) == [
        [(0, 0), (1, 0)], [(0, 1), (1, 1)], [(2, 0), (3, 0)], [(2, 1), (3, 1)]]
    assert co.process_groups("cross_partition", [[0, 1]], 4, 2) == [
        [(0, 0), (0, 1)], [(1, 0), (1, 1)], [(2, 0), (2, 1)], [(3, 0), (3, 1)]]
    assert co.process_groups("cross_replica_and_partition", [[0, 1], [2, 3]], 4, 2) == [
        [(0, 0), (1, 0), (0, 1), (1, 1)], [(2, 0), (3, 0), (2, 1), (3, 1)]]
    assert co.process_groups("flattened_ids", [[0, 1, 2, 3], [4, 5, 6, 7]], 4, 2) == [
        [(0, 0), (0, 1), (1, 0), (1, 1)], [(2, 0), (2, 1), (3, 0), (3, 1)]]


@pytest.mark.parametrize("channel,use_global,kind", [
    (0, False, "cross_replica"), (-1, False, "cross_replica"),
    (1, False, "cross_replica_and_partition"), (5, True, "flattened_ids")])
def test_strategy_follows_channel_id_and_use_global_device_ids(channel, use_global, kind):
    assert co.strategy({"channel_id": channel, "use_global_device_ids": use_global}) == kind
    # ops without use_global_device_ids: cross_replica or cross_partition
    assert co.strategy({"channel_id": channel}) == (
        "cross_replica" if channel <= 0 else "cross_partition")


def test_collective_permute_gives_zeros_to_processes_that_receive_nothing():
    x = np.arange(1, 5, dtype=np.int32).reshape(4, 1) * 10
    (out,) = oracles.evaluate("collective_permute", [x],
                               {"source_target_pairs": [[0, 2], [2, 0], [1, 1]],
                                "channel_id": 0, "num_replicas": 4, "num_partitions": 1},
                              result_types=["tensor<4x1xsi32>"])
    assert out[:, 0].tolist() == [30, 20, 10, 0]


def test_a_one_by_one_grid_has_no_process_axis():
    x = np.array([1.5, -2.0], np.float32)
    (out,) = oracles.evaluate("all_reduce", [x], {"replica_groups": [[0]], "channel_id": 0,
                                                  "use_global_device_ids": False},
                              result_types=["tensor<2xf32>"],
                              regions=["(f32, f32) -> add(arg0, arg1)"])
    assert out.tolist() == [1.5, -2.0]


# -- planted backends ---------------------------------------------------------------------

ADD = {t: f"({t}, {t}) -> add(arg0, arg1)" for t in ("f32", "bf16", "f16")}


def _sig(op, grid, operand, result, regions=(), **attrs):
    sig = Signature.make(op, [operand], [result], attrs, regions=tuple(regions),
                         num_replicas=grid[0], num_partitions=grid[1])
    assert not violations(sig), violations(sig)
    return sig


def classes(backend, sig, batches=2):
    spec = load_spec(sig.op)
    check = SignatureCheck(spec, sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    key = sig.input_types[0].element_type.name if sig.input_types else "ui32"
    counts: dict[str, int] = {}
    for b in range(batches):
        v = check.run_batch(b, batch_for(0, "default", spec, key, 0, b, sig)) \
            .results[backend.name].verdict
        for cls, n in v.counts().items():
            counts[cls] = counts.get(cls, 0) + n
    return counts


def failing(counts):
    return sum(n for c, n in counts.items() if c != "pass")


class IgnoresReplicaGroups(GridOracle):
    """Reduces (gathers, ...) over every process of the axis, whatever the groups say."""
    name = "ignores-groups"

    def change(self, sig):
        a = sig.attributes
        domain = len([i for g in a["replica_groups"] for i in g])
        return Signature.make(sig.op, sig.input_types, sig.result_types,
                              {**a, "replica_groups": [list(range(domain))]},
                              regions=sig.regions, num_replicas=sig.num_replicas,
                              num_partitions=sig.num_partitions)

    def compile(self, sig):
        # the result type of a gather or scatter over everyone differs: reduce only
        assert sig.op in ("all_reduce",)
        return super().compile(sig)


class SwapsSourceAndTarget(GridOracle):
    name = "swaps-pairs"

    def change(self, sig):
        a = sig.attributes
        return Signature.make(sig.op, sig.input_types, sig.result_types,
                              {**a, "source_target_pairs": [[t, s] for s, t in
                                                            a["source_target_pairs"]]},
                              num_replicas=sig.num_replicas,
                              num_partitions=sig.num_partitions)


class ConcatenatesInReverse(GridOracle):
    """all_to_all: receiver j concatenates the parts of the group's senders last first."""
    name = "reverse-concat"

    def change(self, sig):
        a = sig.attributes
        return Signature.make(sig.op, sig.input_types, sig.result_types,
                              {**a, "replica_groups": [g[::-1] for g in a["replica_groups"]]},
                              num_replicas=sig.num_replicas,
                              num_partitions=sig.num_partitions)

    def compile(self, sig):
        inner = super().compile(sig)
        n = sig.num_replicas * sig.num_partitions
        groups = co.group_of({**sig.attributes, "num_replicas": sig.num_replicas,
                              "num_partitions": sig.num_partitions})

        def run(inputs):
            # the reversed group sends receiver j the part j' = g - 1 - j: undo that, so
            # that only the concatenation order is wrong
            out = inner(inputs)[0]
            return [np.stack([out[groups[q][::-1][groups[q].index(q)]] for q in range(n)])]
        return run


class InDeviceOrder(GridOracle):
    """all_gather in device (flattened id) order instead of the group's order."""
    name = "device-order"

    def change(self, sig):
        a = sig.attributes
        return Signature.make(sig.op, sig.input_types, sig.result_types,
                              {**a, "replica_groups": [sorted(g) for g in a["replica_groups"]]},
                              num_replicas=sig.num_replicas,
                              num_partitions=sig.num_partitions)


class SequentialInElementType(GridOracle):
    """all_reduce / reduce_scatter of floats: the group's values added last first, one by
    one, rounding to the element type after every addition (another legal order)."""
    name = "sequential"

    def compile(self, sig):
        inner = super().compile(sig)
        if sig.op != "all_reduce":
            return inner
        attrs = {**sig.attributes, "num_replicas": sig.num_replicas,
                 "num_partitions": sig.num_partitions}
        members = co.members(attrs)
        dtype = sig.result_types[0].element_type.dtype

        def run(inputs):
            return [sum_last_first(np.asarray(inputs[0]), members, dtype)]
        return run


class Loops(GridOracle):
    """An independent simulation of all_gather / all_to_all / collective_permute, process
    by process, written from the spec's text with Python loops."""
    name = "loops"

    def compile(self, sig):
        a = sig.attributes
        nr, npart = sig.num_replicas, sig.num_partitions

        def groups():
            return co.process_groups(co.strategy(a), a["replica_groups"], nr, npart)

        def run(inputs):
            x = np.asarray(inputs[0])
            res = {}
            if sig.op == "collective_permute":
                out = np.zeros_like(x)
                for (sr, sp), (tr, tp) in co.process_groups(co.strategy(a),
                                                            a["source_target_pairs"], nr, npart):
                    out[tr * npart + tp] = x[sr * npart + sp]
                return [out]
            for g in groups():
                ids = [r * npart + p for r, p in g]
                for j, q in enumerate(ids):
                    if sig.op == "all_gather":
                        res[q] = np.concatenate([x[s] for s in ids], axis=a["all_gather_dim"])
                    else:                                   # all_to_all
                        parts = [np.split(x[s], a["split_count"], axis=a["split_dimension"])[j]
                                 for s in ids]
                        res[q] = np.concatenate(parts, axis=a["concat_dimension"])
            return [np.stack([res[q] for q in range(nr * npart)])]
        return run


RG = {"channel_id": 0, "use_global_device_ids": False}
GROUPED = _sig("all_reduce", (4, 1), "tensor<4x4xf32>", "tensor<4x4xf32>", [ADD["f32"]],
               replica_groups=[[0, 2], [3, 1]], **RG)
GROUPED_2X4 = _sig("all_reduce", (2, 4), "tensor<4x4xf32>", "tensor<4x4xf32>", [ADD["f32"]],
                   replica_groups=[[1], [0]], **RG)
PERMUTE = _sig("collective_permute", (4, 1), "tensor<4x4xf32>", "tensor<4x4xf32>",
               source_target_pairs=[[0, 1], [1, 3], [3, 2]], channel_id=0)
PERMUTE_PARTITIONS = _sig("collective_permute", (2, 4), "tensor<3xsi32>", "tensor<3xsi32>",
                          source_target_pairs=[[0, 2], [2, 3], [3, 0], [1, 1]], channel_id=1)
ALL_TO_ALL = _sig("all_to_all", (4, 1), "tensor<8x3xf32>", "tensor<2x12xf32>",
                  split_dimension=0, concat_dimension=1, split_count=4,
                  replica_groups=[[2, 0, 3, 1]], channel_id=0)
ALL_TO_ALL_PARTITIONS = _sig("all_to_all", (1, 2), "tensor<4x2xui8>", "tensor<4x2xui8>",
                             split_dimension=0, concat_dimension=0, split_count=2,
                             replica_groups=[[1, 0]], channel_id=1)
GATHER_SHUFFLED = _sig("all_gather", (4, 2), "tensor<2x3xf32>", "tensor<2x12xf32>",
                       all_gather_dim=1, replica_groups=[[5, 0, 7, 2], [1, 6, 3, 4]],
                       channel_id=1, use_global_device_ids=True)
SUM_BF16 = _sig("all_reduce", (8, 1), "tensor<5xbf16>", "tensor<5xbf16>", [ADD["bf16"]],
                replica_groups=[[7, 6, 5, 4, 3, 2, 1, 0]], **RG)
SUM_F16 = _sig("all_reduce", (2, 2), "tensor<3x2xf16>", "tensor<3x2xf16>", [ADD["f16"]],
               replica_groups=[[3, 0, 1, 2]], channel_id=1, use_global_device_ids=True)


@pytest.mark.parametrize("sig", [GROUPED, GROUPED_2X4], ids=["4x1", "2x4"])
def test_ignoring_replica_groups_fails(sig):
    assert failing(classes(IgnoresReplicaGroups(), sig)) > 0


@pytest.mark.parametrize("sig", [PERMUTE, PERMUTE_PARTITIONS], ids=["replicas", "partitions"])
def test_swapping_source_and_target_fails(sig):
    assert failing(classes(SwapsSourceAndTarget(), sig)) > 0


@pytest.mark.parametrize("sig", [ALL_TO_ALL, ALL_TO_ALL_PARTITIONS], ids=["4x1", "1x2"])
def test_all_to_all_concatenating_in_the_wrong_order_fails(sig):
    assert failing(classes(ConcatenatesInReverse(), sig)) > 0


def test_all_gather_in_device_order_instead_of_group_order_fails():
    assert failing(classes(InDeviceOrder(), GATHER_SHUFFLED)) > 0


@pytest.mark.parametrize("sig", [GROUPED, GROUPED_2X4, SUM_BF16, SUM_F16],
                         ids=["f32-4x1", "f32-2x4", "bf16-8x1", "f16-flattened"])
def test_another_legal_reduction_order_passes(sig):
    assert set(classes(SequentialInElementType(), sig)) <= {"pass"}


@pytest.mark.parametrize("sig", [PERMUTE, PERMUTE_PARTITIONS, ALL_TO_ALL,
                                 ALL_TO_ALL_PARTITIONS, GATHER_SHUFFLED],
                         ids=["permute", "permute-partitions", "all-to-all",
                              "all-to-all-partitions", "gather-flattened"])
def test_an_independent_simulation_passes(sig):
    assert set(classes(Loops(), sig)) <= {"pass"}


# -- generated signatures -----------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_generated_signatures_are_valid_and_span_grids_and_strategies(op):
    seen_grids, seen_modes, seen_sizes = set(), set(), set()

    @settings(max_examples=120, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(signatures(op, profile="quick"))
    def draw(sig):
        assert not violations(sig), (sig.key(), violations(sig))
        seen_grids.add((sig.num_replicas, sig.num_partitions))
        a = sig.attributes
        seen_modes.add((a.get("channel_id", 0) > 0, a.get("use_global_device_ids", False)))
        groups = a.get("replica_groups") or []
        if groups:
            seen_sizes.add(len(groups[0]))
    draw()
    assert {(1, 1), (2, 1), (4, 1), (8, 1), (1, 8), (2, 4), (4, 2)} <= seen_grids
    if op in ("replica_id", "partition_id"):
        return
    modes = {(False, False), (True, False)} | (
        {(True, True)} if op in ("all_gather", "all_reduce", "reduce_scatter") else set())
    assert modes <= seen_modes
    if op != "collective_permute":
        assert {1, 2} <= seen_sizes and max(seen_sizes) >= 4


def test_partial_permutations_are_drawn():
    partial = []

    @settings(max_examples=80, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(signatures("collective_permute", profile="quick"))
    def draw(sig):
        a = sig.attributes
        domain = sig.num_partitions if a["channel_id"] > 0 else sig.num_replicas
        partial.append(len(a["source_target_pairs"]) < domain)
    draw()
    assert any(partial) and not all(partial)


@pytest.mark.parametrize("op", OPS)
def test_every_constraint_breaks_alone(op):
    spec = load_spec(op)
    base = canonical(spec, {"E": "f32"} if spec.type_variables else {}, (4, 4))
    for rule in invalid.breakable(spec):
        found = invalid.candidates(spec, base, rule)
        assert found, f"{op}: no invalid case for {rule}"
        assert all(c.num_replicas * c.num_partitions == base.num_replicas *
                   base.num_partitions for c in found)


def test_invalid_groups_include_duplicates_out_of_range_and_empty():
    spec = load_spec("all_reduce")
    base = canonical(spec, {"E": "f32"}, (4,))
    groups = [c.attributes["replica_groups"] for rule in ("C1", "C2", "C3")
              for c in invalid.candidates(spec, base, rule)]
    assert [] in groups                                     # empty: breaks C2 (size)
    assert any(-1 in g for gs in groups for g in gs)         # out of range: C3
    assert any(len({i for g in gs for i in g}) < sum(map(len, gs)) for gs in groups)  # C1


# -- backends -----------------------------------------------------------------------------

def test_xla_runs_the_golden_examples_on_several_host_devices():
    """The isolated XLA child gets 8 host CPU devices; 003's examples pass there (XLA's
    cross_replica_and_partition order differs from the spec's: replica-major)."""
    from conformance.checking.isolation import IsolatedBackend
    b = IsolatedBackend("xla", timeout=120)
    try:
        outcomes = {(ex.spec.name, ex.name): check_case(b, ex.case).cls
                    for op in OPS for ex in examples(load_spec(op))}
    finally:
        b.close()
    assert outcomes[("all_reduce", "spec example")] == "pass"
    assert outcomes[("all_reduce", "flattened ids over a 2x2 grid")] == "pass"
    assert outcomes[("collective_permute", "a cycle over the partitions of a 2x3 grid")] == \
        "pass"
    assert outcomes[("all_to_all", "spec example")] == "pass"
    assert outcomes[("replica_id", "every process of a 2x2 grid")] == "pass"
    # XLA orders a cross_replica_and_partition group replica-major ([(1,0),(1,1),(0,0),
    # (0,1)] for replica_groups [[1, 0]]); 003 "#### cross_replica_and_partition" takes
    # every partition's replicas in turn ([(1,0),(0,0),(1,1),(0,1)])
    assert outcomes[("all_gather", "cross_replica_and_partition on a 2x2 grid, groups in "
                                   "reverse order")] == "value"


def test_a_collective_that_hangs_costs_one_timeout_case():
    from conformance.checking.isolation import IsolatedBackend
    b = IsolatedBackend("planted_collectives:HangsOnPermute", timeout=2)
    try:
        ex = examples(load_spec("collective_permute"))[0]
        assert check_case(b, ex.case).cls == "timeout"
        ex = examples(load_spec("all_reduce"))[0]          # the next case runs
        assert check_case(b, ex.case).cls == "pass"
    finally:
        b.close()


def test_jax_runs_a_one_by_one_grid_through_shard_map():
    from conformance.backends import get_backend
    jax_backend = get_backend("jax")
    for op, binding in (("all_reduce", {"E": "f32"}), ("all_gather", {"E": "si8"}),
                        ("replica_id", {})):
        sig = dataclasses.replace(canonical(load_spec(op), binding, (3,)),
                                  num_replicas=1, num_partitions=1)
        a = sig.attributes
        if "replica_groups" in a:
            sig = Signature.make(op, sig.input_types, sig.input_types if op == "all_reduce"
                                 else sig.input_types, {**a, "replica_groups": [[0]]},
                                 regions=sig.regions)
        assert not violations(sig), violations(sig)
        rng = np.random.default_rng(0)
        from conformance.generators import case_inputs
        case = Case(sig, case_inputs(sig, rng))
        assert check_case(jax_backend, case).cls == "pass", (op, sig.key())


@pytest.mark.parametrize("grid", [(1, 1), (2, 1)])
def test_the_interpreter_says_why_it_runs_no_collective(grid):
    """jaxlib's eval_module aborts its process on every collective, 1x1 grid included, and
    has no process-grid entry point (run_parallel is not bound): Unsupported, before it runs."""
    from conformance.backends import Unsupported, get_backend
    b = get_backend("interpreter")
    sig = Signature.make("all_reduce", ["tensor<2xf32>"], ["tensor<2xf32>"],
                         {"replica_groups": [list(range(grid[0]))], **RG},
                         regions=(ADD["f32"],), num_replicas=grid[0], num_partitions=grid[1])
    with pytest.raises(Unsupported, match="run_parallel|process grid"):
        b.compile(sig)


def test_jax_runs_grids_of_several_processes_through_shard_map():
    """The suite's tests give jax 8 host CPU devices before jax starts (tests/conftest.py:
    jaxlib_support.ask_for_host_devices); the spec's examples on 2x1, 2x2 and 2x3 grids
    pass there."""
    import jax
    from conformance.backends import get_backend
    if len(jax.devices("cpu")) < 6:
        pytest.skip("jax started before XLA_FLAGS asked for 8 host devices")
    b = get_backend("jax")
    for op, name in (("all_reduce", "spec example"), ("all_gather", "spec example"),
                     ("all_to_all", "spec example"), ("reduce_scatter", "spec example"),
                     ("collective_permute", "a cycle over the partitions of a 2x3 grid"),
                     ("replica_id", "every process of a 2x2 grid"),
                     ("partition_id", "every process of a 2x2 grid")):
        ex = next(e for e in examples(load_spec(op)) if e.name == name)
        assert check_case(b, ex.case).cls == "pass", (op, name)


def test_the_canonical_module_prints_groups_channels_and_the_grid():
    from conformance.mlir.emitter import module_text, parse
    text = module_text(SUM_F16)
    assert "mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32" in text
    assert "replica_groups = dense<[[3, 0, 1, 2]]> : tensor<1x4xi64>" in text
    assert "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>" in text
    assert "use_global_device_ids = unit" in text
    assert "use_global_device_ids" not in module_text(GROUPED)      # false: left out
    parse(text)
    assert "source_target_pairs = dense<[[0, 1], [1, 3], [3, 2]]> : tensor<3x2xi64>" in \
        module_text(PERMUTE)
    empty = Signature.make("all_reduce", ["tensor<2xf32>"], ["tensor<2xf32>"],
                           {"replica_groups": [], **RG}, regions=(ADD["f32"],),
                           num_replicas=2, invalid="C2")
    assert "replica_groups = dense<> : tensor<0x0xi64>" in module_text(empty)


def test_an_invalid_collective_that_crashes_the_verifier_is_verified_in_a_child():
    """jaxlib 0.10.2's StableHLO verifier divides by the group size: all_to_all with an
    empty replica_groups kills the process (SIGFPE); verifier_rejects survives it."""
    from conformance.mlir.emitter import verifier_rejects
    sig = Signature.make("all_to_all", ["tensor<4xf32>"], ["tensor<4xf32>"],
                         {"split_dimension": 0, "concat_dimension": 0, "split_count": 2,
                          "replica_groups": [], "channel_id": 0}, num_replicas=2,
                         invalid="C6")
    assert verifier_rejects(sig)
