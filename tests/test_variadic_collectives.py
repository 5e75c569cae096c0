"""all_gather, all_reduce and all_to_all with several operands (stablehlo-spec-2026-08.md,
issue 30): each operand is gathered, reduced or exchanged on its own. The spec's own
two-operand examples are golden; a planted backend that gives every result operand 0's
fails, one that computes each operand on its own in another legal order passes; the
generators draw one to three operands; jax runs them; XLA CPU's measured failures are
pinned (docs/newer-collectives.md, "Several operands")."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conformance import oracles
from conformance.checking.checker import check_case
from conformance.checking.golden import examples
from conformance.core.case import Case, Signature
from conformance.generators import case_inputs
from conformance.generators.signatures import signatures
from conformance.oracles import collectives as co
from conformance.specs import load_spec
from conformance.specs.validity import violations

from planted import verdict_counts
from planted_collectives import GridOracle

OPS = ["all_gather", "all_reduce", "all_to_all"]
RG = {"channel_id": 0, "use_global_device_ids": False}
ADD = {t: f"({t}, {t}) -> add(arg0, arg1)" for t in ("f32", "bf16", "si32")}


def _sig(op, grid, operands, results, regions=(), **attrs):
    sig = Signature.make(op, operands, results, attrs, regions=tuple(regions),
                         num_replicas=grid[0], num_partitions=grid[1])
    assert not violations(sig), violations(sig)
    return sig


SUM2 = _sig("all_reduce", (4, 1), ["tensor<3xbf16>", "tensor<3xbf16>"],
            ["tensor<3xbf16>", "tensor<3xbf16>"], [ADD["bf16"]],
            replica_groups=[[2, 0], [1, 3]], **RG)
SUM3 = _sig("all_reduce", (2, 2), ["tensor<2x2xf32>"] * 3, ["tensor<2x2xf32>"] * 3,
            [ADD["f32"]], replica_groups=[[3, 1, 0, 2]], channel_id=1,
            use_global_device_ids=True)
GATHER2 = _sig("all_gather", (4, 1), ["tensor<2x3xsi32>"] * 2, ["tensor<2x6xsi32>"] * 2,
               all_gather_dim=1, replica_groups=[[1, 0], [3, 2]], **RG)
A2A2 = _sig("all_to_all", (2, 1), ["tensor<4x2xf32>"] * 2, ["tensor<2x4xf32>"] * 2,
            split_dimension=0, concat_dimension=1, split_count=2, replica_groups=[[1, 0]],
            channel_id=0)


def classes(backend, sig, batches=2):
    return verdict_counts(backend, sig, sig.input_types[0].element_type.name, batches)


class FirstOperandsResultForAll(GridOracle):
    """Computes operand 0's result and returns it for every operand (a lowering that
    reads the variadic op as one operand and copies its result)."""
    name = "first-for-all"

    def compile(self, sig):
        inner = super().compile(sig)
        return lambda inputs: [inner(inputs)[0]] * len(sig.result_types)


class EachOnItsOwnOtherOrder(GridOracle):
    """Each operand on its own, as one-operand ops run one after the other, last operand
    first; all_reduce's float sums added last process first, rounded to the element type
    after every addition (another legal schedule)."""
    name = "each-other-order"

    def compile(self, sig):
        n = len(sig.input_types)
        singles = [Signature.make(sig.op, [sig.input_types[j]], [sig.result_types[j]],
                                  sig.attributes, regions=sig.regions,
                                  num_replicas=sig.num_replicas,
                                  num_partitions=sig.num_partitions) for j in range(n)]
        attrs = {**sig.attributes, "num_replicas": sig.num_replicas,
                 "num_partitions": sig.num_partitions}
        members = co.members(attrs)

        def one(j, x):
            if sig.op != "all_reduce":
                return super(EachOnItsOwnOtherOrder, self).compile(singles[j])([x])[0]
            dtype = sig.result_types[j].element_type.dtype
            out = np.empty_like(x)
            with np.errstate(all="ignore"):
                for q, g in enumerate(members):
                    acc = x[g[-1]]
                    for s in g[-2::-1]:
                        acc = (acc.astype(np.float64) + x[s].astype(np.float64)).astype(dtype)
                    out[q] = acc
            return out

        def run(inputs):
            outs = {j: one(j, np.asarray(inputs[j])) for j in reversed(range(n))}
            return [outs[j] for j in range(n)]
        return run


# -- the oracle -------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_the_newer_texts_two_operand_examples_are_golden(op):
    ex = next(e for e in examples(load_spec(op)) if e.name == "spec example (two operands)")
    got = oracles.evaluate_batch(ex.case.signature, [np.asarray(x)[None]
                                                     for x in ex.case.inputs])
    assert len(got) == 2
    for g, want in zip(got, ex.expected):
        np.testing.assert_array_equal(np.asarray(g)[0], np.asarray(want))


def test_each_operand_is_reduced_on_its_own():
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    b = -10 * a
    attrs = {"replica_groups": [[0, 3], [1, 2]], "num_replicas": 4, "num_partitions": 1, **RG}
    ra, rb = oracles.evaluate("all_reduce", [a, b], attrs,
                              result_types=["tensor<4x2xf32>"] * 2, regions=[ADD["f32"]])
    (solo,) = oracles.evaluate("all_reduce", [b], attrs, result_types=["tensor<4x2xf32>"],
                               regions=[ADD["f32"]])
    np.testing.assert_array_equal(rb, solo)
    assert ra[0].tolist() == [6.0, 8.0] and rb[0].tolist() == [-60.0, -80.0]


# -- planted backends -------------------------------------------------------------------

@pytest.mark.parametrize("sig", [SUM2, SUM3, GATHER2, A2A2],
                         ids=["sum-bf16", "sum-f32-flattened", "gather", "all-to-all"])
def test_a_backend_giving_every_result_operand_0s_fails(sig):
    counts = classes(FirstOperandsResultForAll(), sig)
    assert sum(n for c, n in counts.items() if c != "pass") > 0, counts


@pytest.mark.parametrize("sig", [SUM2, SUM3, GATHER2, A2A2],
                         ids=["sum-bf16", "sum-f32-flattened", "gather", "all-to-all"])
def test_each_operand_on_its_own_in_another_legal_order_passes(sig):
    assert set(classes(EachOnItsOwnOtherOrder(), sig)) <= {"pass"}


# -- generated signatures ---------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_one_to_three_operands_are_drawn_valid(op):
    counts = set()

    @settings(max_examples=60, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(signatures(op, profile="quick"))
    def draw(sig):
        assert not violations(sig), (sig.key(), violations(sig))
        assert len(sig.result_types) == len(sig.input_types)
        counts.add(len(sig.input_types))
    draw()
    assert counts == {1, 2, 3}


def test_all_to_alls_new_c8_ties_the_group_size_to_split_count():
    bad = Signature.make("all_to_all", ["tensor<4xf32>"], ["tensor<4xf32>"],
                         {"split_dimension": 0, "concat_dimension": 0, "split_count": 1,
                          "replica_groups": [[0, 1]], "channel_id": 0}, num_replicas=2)
    assert violations(bad) == ["C8"]


# -- backends ---------------------------------------------------------------------------

def test_jax_runs_several_operands_of_other_shapes():
    import jax
    from conformance.backends import get_backend
    if len(jax.devices("cpu")) < 2:
        pytest.skip("jax started before XLA_FLAGS asked for 8 host devices")
    b = get_backend("jax")
    for sig in (
        _sig("all_reduce", (2, 1), ["tensor<4xf32>", "tensor<3x4xf32>"],
             ["tensor<4xf32>", "tensor<3x4xf32>"], [ADD["f32"]], replica_groups=[[0, 1]], **RG),
        _sig("all_gather", (2, 1), ["tensor<2x2xf32>", "tensor<3x3xf32>"],
             ["tensor<2x4xf32>", "tensor<3x6xf32>"], all_gather_dim=1,
             replica_groups=[[0, 1]], **RG),
        _sig("all_to_all", (2, 1), ["tensor<4x1xsi32>", "tensor<4x3xsi32>"],
             ["tensor<2x2xsi32>", "tensor<2x6xsi32>"], split_dimension=0,
             concat_dimension=1, split_count=2, replica_groups=[[0, 1]], channel_id=0)):
        case = Case(sig, case_inputs(sig, np.random.default_rng(0)))
        assert check_case(b, case).cls == "pass", sig.key()


def test_xla_cpu_misreads_several_all_to_all_operands():
    """Measured (jaxlib 0.10.2, XLA CPU): a variadic stablehlo.all_to_all becomes HLO's
    tuple all-to-all, whose operands are the split parts: the spec's two-operand example
    comes back with other result types, three operands with split_count 2 fail XLA's HLO
    verifier ("operand_count() == split_count"); the variadic all_reduce runs on replicas
    but the SPMD partitioner refuses it on partitions ("supports only single-operand
    allreduce"). The spec's all_gather and all_reduce examples pass."""
    from conformance.checking.isolation import IsolatedBackend
    b = IsolatedBackend("xla", timeout=120)
    try:
        got = {op: check_case(b, next(e for e in examples(load_spec(op))
                                      if e.name == "spec example (two operands)").case).cls
               for op in OPS}
        three = Signature.make("all_to_all", ["tensor<4xf32>"] * 3, ["tensor<4xf32>"] * 3,
                               {"split_dimension": 0, "concat_dimension": 0, "split_count": 2,
                                "replica_groups": [[0, 1]], "channel_id": 0}, num_replicas=2)
        parts = Signature.make("all_reduce", ["tensor<4xf32>"] * 2, ["tensor<4xf32>"] * 2,
                               {"replica_groups": [[0]], "channel_id": 1,
                                "use_global_device_ids": False}, regions=(ADD["f32"],),
                               num_replicas=1, num_partitions=2)
        rng = np.random.default_rng(0)
        three_cls = check_case(b, Case(three, case_inputs(three, rng))).cls
        parts_cls = check_case(b, Case(parts, case_inputs(parts, rng))).cls
    finally:
        b.close()
    assert got["all_gather"] == "pass" and got["all_reduce"] == "pass"
    assert got["all_to_all"] == "type"
    assert three_cls == "backend_error" and parts_cls == "backend_error"
