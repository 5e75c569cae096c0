"""The collectives that stablehlo-spec-2026-08 adds (issue 30): collective_broadcast and
collective_reduce.

The spec's examples through the oracle; planted backends that must fail (the source is
the group's last process, a process in no group keeps its own value, the dynamic root is
ignored, the reduced value kept at every process) and ones that must pass (an independent
simulation, another legal reduction order); generated signatures valid and every
constraint broken alone; what jaxlib 0.10.2 holds (collective_broadcast: one operand, no
dynamic root; collective_reduce: nothing; mlir.jaxlib_lacks) and what each backend says,
measured."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conformance import oracles
from conformance.backends import Unsupported, get_backend
from conformance.checking.checker import check_case
from conformance.checking.golden import examples
from conformance.core.case import Signature
from conformance.core.types import TensorType
from conformance.generators import invalid
from conformance.backends.vendor import module_text
from conformance.generators.signatures import canonical, signatures
from conformance.oracles import collectives as co
from conformance.specs import load_spec
from conformance.specs.validity import violations

from planted_collectives import GridOracle
from test_collectives import classes, failing  # noqa: E402  (judged as the other collectives)

OP = "collective_broadcast"


def _sig(grid, operands, groups, channel_id=0, dyn=False):
    results = operands[:-1] if dyn else operands
    sig = Signature.make(OP, operands, results, {"replica_groups": groups,
                                                 "channel_id": channel_id,
                                                 "has_dynamic_root": dyn},
                         num_replicas=grid[0], num_partitions=grid[1])
    assert not violations(sig), violations(sig)
    return sig


# -- the oracle --------------------------------------------------------------------------

REDUCE = "collective_reduce"
EXAMPLES = [ex for op in (OP, REDUCE) for ex in examples(load_spec(op))]


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: f"{e.spec.name}: {e.name}")
def test_the_examples_are_what_the_oracle_computes(ex):
    sig = ex.case.signature
    attrs = {**sig.attributes, "num_replicas": sig.num_replicas,
             "num_partitions": sig.num_partitions}
    n = sig.num_replicas * sig.num_partitions            # results carry a process axis
    out = oracles.evaluate(sig.op, list(ex.case.inputs), attrs,
                           result_types=[TensorType((n,) + t.shape, t.element_type).mlir()
                                         for t in sig.result_types], regions=sig.regions)
    out = out if isinstance(out, tuple) else (out,)
    assert len(out) == len(ex.expected)
    for got, want in zip(out, ex.expected):
        np.testing.assert_array_equal(got, want)


def test_a_process_reads_its_source_from_its_own_root_operand():
    """has_dynamic_root: results[j]'s source is process_groups[i, root[j]], the root
    being the receiving process's own value of the last operand."""
    x = np.array([10, 20, 30, 40], np.int32)
    roots = np.array([[1], [0], [0], [1]], np.int32)      # each process its own root
    (out,) = oracles.evaluate(OP, [x, roots], {"replica_groups": [[0, 1], [2, 3]],
                                             "channel_id": 0, "has_dynamic_root": True,
                                             "num_replicas": 4, "num_partitions": 1},
                           result_types=["tensor<4xsi32>"])
    assert np.asarray(out).tolist() == [20, 10, 30, 40]


def test_cross_partition_groups_and_processes_in_no_group():
    x = np.arange(6, dtype=np.float32)                     # (r, p) at r * 3 + p
    (out,) = oracles.evaluate(OP, [x], {"replica_groups": [[2, 1]], "channel_id": 1,
                                     "has_dynamic_root": False, "num_replicas": 2,
                                     "num_partitions": 3},
                           result_types=["tensor<6xf32>"])
    assert np.asarray(out).tolist() == [0, 2, 2, 0, 5, 5]


# -- planted backends --------------------------------------------------------------------

class FromLastProcess(GridOracle):
    """Broadcasts from the group's last process instead of its first."""
    name = "from-last"

    def change(self, sig):
        a = sig.attributes
        return Signature.make(sig.op, sig.input_types, sig.result_types,
                              {**a, "replica_groups": [g[::-1] for g in a["replica_groups"]]},
                              regions=sig.regions, num_replicas=sig.num_replicas,
                              num_partitions=sig.num_partitions)


class KeepsOwnValueOutsideGroups(GridOracle):
    """A process in no group keeps its operand instead of getting zeros."""
    name = "keeps-own"

    def compile(self, sig):
        inner = super().compile(sig)
        attrs = {**sig.attributes, "num_replicas": sig.num_replicas,
                 "num_partitions": sig.num_partitions}
        n = sig.num_replicas * sig.num_partitions
        inside = {q for g in co.process_groups(co.strategy(attrs), attrs["replica_groups"],
                                               sig.num_replicas, sig.num_partitions)
                  for q in (r * sig.num_partitions + p for r, p in g)}

        def run(inputs):
            out = inner(inputs)
            return [np.stack([o[q] if q in inside else np.asarray(x)[q] for q in range(n)])
                    for o, x in zip(out, inputs)]
        return run


class IgnoresDynamicRoot(GridOracle):
    """Broadcasts from the group's first process whatever the root operand says."""
    name = "ignores-root"

    def compile(self, sig):
        fixed = Signature.make(sig.op, sig.input_types[:-1], sig.result_types,
                               {**sig.attributes, "has_dynamic_root": False},
                               regions=sig.regions, num_replicas=sig.num_replicas,
                               num_partitions=sig.num_partitions)
        inner = super().compile(fixed)
        return lambda inputs: inner(inputs[:-1])


class Loops(GridOracle):
    """An independent simulation, process by process, from the spec's text."""
    name = "loops"

    def compile(self, sig):
        a = sig.attributes
        nr, npart = sig.num_replicas, sig.num_partitions
        dyn = a["has_dynamic_root"]

        def run(inputs):
            data = [np.asarray(x) for x in (inputs[:-1] if dyn else inputs)]
            outs = [np.zeros_like(x) for x in data]
            for g in co.process_groups(co.strategy(a), a["replica_groups"], nr, npart):
                ids = [r * npart + p for r, p in g]
                for q in ids:
                    for j, x in enumerate(data):
                        src = ids[int(inputs[-1][q][j])] if dyn else ids[0]
                        outs[j][q] = x[src]
            return outs
        return run


GROUPS_4X1 = _sig((4, 1), ["tensor<3x2xf32>"], [[2, 1], [0, 3]])
PARTITIONS_2X4 = _sig((2, 4), ["tensor<4xsi16>"], [[3, 0], [2, 1]], channel_id=1)
PARTIAL_8X1 = _sig((8, 1), ["tensor<2xbf16>"], [[5, 2, 7], [0, 6, 1]])
DYNAMIC_4X1 = _sig((4, 1), ["tensor<2xf32>", "tensor<3xui8>", "tensor<2xsi32>"],
                   [[0, 1, 2, 3]], dyn=True)


@pytest.mark.parametrize("sig", [GROUPS_4X1, PARTITIONS_2X4, PARTIAL_8X1],
                         ids=["replicas", "partitions", "partial"])
def test_broadcasting_from_the_wrong_source_fails(sig):
    assert failing(classes(FromLastProcess(), sig)) > 0


def test_a_process_outside_every_group_that_keeps_its_value_fails():
    assert failing(classes(KeepsOwnValueOutsideGroups(), PARTIAL_8X1)) > 0


def test_ignoring_the_dynamic_root_fails():
    assert failing(classes(IgnoresDynamicRoot(), DYNAMIC_4X1)) > 0


@pytest.mark.parametrize("sig", [GROUPS_4X1, PARTITIONS_2X4, PARTIAL_8X1, DYNAMIC_4X1],
                         ids=["replicas", "partitions", "partial", "dynamic-root"])
def test_an_independent_simulation_passes(sig):
    assert set(classes(Loops(), sig)) <= {"pass"}


# -- generated and invalid signatures ------------------------------------------------------

def test_generated_signatures_are_valid_and_span_the_specs_forms():
    seen = set()

    @settings(max_examples=120, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(signatures(OP, profile="quick"))
    def draw(sig):
        assert not violations(sig), (sig.key(), violations(sig))
        a = sig.attributes
        covered = {i for g in a["replica_groups"] for i in g}
        domain = sig.num_partitions if a["channel_id"] > 0 else sig.num_replicas
        seen.add(("dyn", a["has_dynamic_root"]))
        seen.add(("results", len(sig.result_types)))
        seen.add(("channel", a["channel_id"] > 0))
        seen.add(("partial", len(covered) < domain))
    draw()
    assert {("dyn", True), ("dyn", False), ("results", 1), ("results", 2), ("channel", True),
            ("channel", False), ("partial", True), ("partial", False)} <= seen


def test_roots_are_drawn_within_the_group():
    from conformance.generators.values import batch_inputs
    x = batch_inputs(DYNAMIC_4X1, np.random.default_rng(0), 50)
    roots = x[-1]
    assert roots.shape == (50, 4, 2) and roots.min() == 0 and roots.max() == 3


def test_every_constraint_but_the_value_rule_breaks_alone():
    spec = load_spec(OP)
    assert set(invalid.unbreakable(OP)) == {"C6", "I1", "O1"}
    assert invalid.breakable(spec) == ["C1", "C2", "C3", "C4", "C5"]
    for rule in invalid.breakable(spec):
        found = [c for shape in ((2,), ()) for c in
                 invalid.candidates(spec, canonical(spec, {"E": "f32"}, shape), rule)]
        assert found, rule


def test_the_verifier_rejects_what_jaxlib_can_check():
    """jaxlib 0.10.2's verifier rejects duplicate ids (C1) and a result of another type
    (C3), and accepts an id out of range (C2: it does not know the grid's size there)."""
    from conformance.mlir.emitter import verifier_rejects
    spec = load_spec(OP)
    base = canonical(spec, {"E": "f32"}, (2,))
    by_rule = {r: invalid.candidates(spec, base, r) for r in ("C1", "C2", "C3")}
    assert "seen more than once" in verifier_rejects(by_rule["C1"][0])
    printable = [c for c in by_rule["C3"] if len(c.input_types) == len(c.result_types) == 1]
    assert printable and all(verifier_rejects(c) for c in printable)
    beyond = next(c for c in by_rule["C2"] if max(c.attributes["replica_groups"][0]) >= 2)
    assert verifier_rejects(beyond) is None


# -- what jaxlib holds, and the backends ---------------------------------------------------

def test_jaxlib_holds_one_operand_without_a_dynamic_root():
    from conformance.mlir.emitter import parse
    text = module_text(GROUPS_4X1)
    assert "replica_groups = dense<[[2, 1], [0, 3]]> : tensor<2x2xi64>" in text
    assert "has_dynamic_root" not in text       # a unit attribute, as in newer dialects
    parse(text)
    for sig in (DYNAMIC_4X1, _sig((2, 1), ["tensor<f32>", "tensor<2xf32>"], [[0, 1]])):
        with pytest.raises(Unsupported, match="requires a single operand"):
            module_text(sig)


def test_its_module_reads_back_as_the_same_signature():
    """``conformance check`` reads the module (has_dynamic_root, a unit attribute left out
    when false, read back through the spec's mlir.defaults)."""
    from conformance.mlir.reader import read_text
    for sig in (GROUPS_4X1, PARTITIONS_2X4, PARTIAL_8X1):
        read = read_text(module_text(sig), OP)
        assert not read.unjudged, read.unjudged
        assert sig in [o.signature for o in read.program.operations], sig.key()


def test_the_interpreter_declines_it():
    """Measured: jaxlib 0.10.2's eval_module aborts ("collective_broadcast is only
    supported when run via interpreter.run_parallel") even on a 1x1 grid."""
    b = get_backend("interpreter")
    one = _sig((1, 1), ["tensor<2xf32>"], [[0]])
    for sig in (one, GROUPS_4X1):
        with pytest.raises(Unsupported, match="run_parallel|process grid"):
            b.compile(sig)


def test_jax_maps_it_to_pbroadcast_which_cpu_cannot_lower():
    """jax 0.10.2 registers pbroadcast's lowering for GPU only: on CPU the lowering probe
    makes it Unsupported, with jax's message; groups pbroadcast cannot express are
    Unsupported before that."""
    import jax
    if len(jax.devices("cpu")) < 4:
        pytest.skip("jax started before XLA_FLAGS asked for 8 host devices")
    b = get_backend("jax")
    whole = _sig((4, 1), ["tensor<2xf32>"], [[2, 0, 1, 3]])
    with pytest.raises(Unsupported, match="pbroadcast' not found for platform cpu"):
        b.compile(whole)
    with pytest.raises(Unsupported, match="take no replica groups"):
        b.compile(GROUPS_4X1)
    with pytest.raises(Unsupported, match="no dynamic root"):
        b.compile(DYNAMIC_4X1)


def test_xla_cpu_has_no_collective_broadcast():
    """Measured on jaxlib 0.10.2: UNIMPLEMENTED with one partition (Unsupported), the SPMD
    partitioner's RET_CHECK with several (a backend error: xla-cpu.yaml's entries)."""
    from conformance.checking.isolation import IsolatedBackend
    b = IsolatedBackend("xla", timeout=120)
    try:
        outcomes = {ex.name: check_case(b, ex.case) for ex in examples(load_spec(OP))}
    finally:
        b.close()
    assert outcomes["spec example"].cls == "unsupported"
    assert "not supported by XLA:CPU" in outcomes["spec example"].message
    assert outcomes["two groups over the partitions of a 2x4 grid"].cls == "backend_error"
    assert "Side-effect HLO must have sharding" in \
        outcomes["two groups over the partitions of a 2x4 grid"].message
    assert outcomes["two operands with a dynamic root"].cls == "unsupported"


# -- collective_reduce ----------------------------------------------------------------------

ADD = "(f32, f32) -> add(arg0, arg1)"


def _reduce_sig(grid, operands, groups, body=ADD, channel_id=0, dyn=False):
    results = operands[:-1] if dyn else operands
    sig = Signature.make(REDUCE, operands, results, {"replica_groups": groups,
                                                     "channel_id": channel_id,
                                                     "has_dynamic_root": dyn},
                         regions=(body,), num_replicas=grid[0], num_partitions=grid[1])
    assert not violations(sig), violations(sig)
    return sig


SUM_4X1 = _reduce_sig((4, 1), ["tensor<3xf32>", "tensor<2x2xf32>"], [[2, 0, 3, 1]])
MAX_2X4 = _reduce_sig((2, 4), ["tensor<3xsi8>"], [[3, 1], [0, 2]],
                      body="(si8, si8) -> maximum(arg0, arg1)", channel_id=1)
SUM_DYNAMIC = _reduce_sig((4, 1), ["tensor<4xf32>", "tensor<1xsi32>"], [[0, 1], [2, 3]],
                          dyn=True)


class KeepsEverywhere(GridOracle):
    """all_reduce's answer: the reduced value at every process of the group."""
    name = "keeps-everywhere"

    def compile(self, sig):
        a = sig.attributes
        nr, npart = sig.num_replicas, sig.num_partitions
        sources = [Signature.make(sig.op, sig.input_types, sig.result_types,
                                  {**a, "replica_groups": [g[i:] + g[:i] for g in
                                                           a["replica_groups"]]},
                                  regions=sig.regions, num_replicas=nr, num_partitions=npart)
                   for i in range(len(a["replica_groups"][0]))]
        runs = [GridOracle.compile(self, s) for s in sources]

        def run(inputs):
            outs = [r(inputs) for r in runs]       # one per choice of source
            return [sum(o[j] for o in outs) for j in range(len(outs[0]))]
        return run


class SequentialSums(GridOracle):
    """Float sums added last process first, rounding after every addition (another
    legal order), kept at the group's first process."""
    name = "sequential"

    def compile(self, sig):
        a = sig.attributes
        nr, npart = sig.num_replicas, sig.num_partitions

        def run(inputs):
            outs = []
            for x in (np.asarray(v) for v in inputs):
                out = np.zeros_like(x)
                for g in co.process_groups(co.strategy(a), a["replica_groups"], nr, npart):
                    ids = [r * npart + p for r, p in g]
                    acc = x[ids[-1]]
                    with np.errstate(all="ignore"):
                        for s in ids[-2::-1]:
                            acc = (acc.astype(np.float64) + x[s]).astype(x.dtype)
                    out[ids[0]] = acc
                outs.append(out)
            return outs
        return run


@pytest.mark.parametrize("sig", [SUM_4X1, MAX_2X4, SUM_DYNAMIC],
                         ids=["sum", "max-partitions", "dynamic-root"])
def test_keeping_the_reduced_value_everywhere_fails(sig):
    assert failing(classes(KeepsEverywhere(), sig)) > 0


def test_reducing_at_the_wrong_source_fails():
    assert failing(classes(FromLastProcess(), MAX_2X4)) > 0
    assert failing(classes(IgnoresDynamicRoot(), SUM_DYNAMIC)) > 0


def test_another_legal_reduction_order_passes():
    assert set(classes(SequentialSums(), SUM_4X1)) <= {"pass"}


def test_collective_reduce_rules_break_alone():
    spec = load_spec(REDUCE)
    assert set(invalid.unbreakable(REDUCE)) == {"I1", "O1"}
    assert invalid.breakable(spec) == ["C1", "C2", "C3", "C4"]
    for rule in invalid.breakable(spec):
        for shape in ((2,), ()):           # C3 of both forms, with and without a root
            assert invalid.candidates(spec, canonical(spec, {"E": "f32"}, shape), rule), rule


def test_no_mlir_backend_gets_a_collective_reduce_program():
    """jaxlib 0.10.2's dialect has no collective_reduce: no module, so the interpreter
    (and XLA, IREE) declines it as Unsupported with the parser's measured words."""
    b = get_backend("interpreter")
    for sig in (SUM_4X1, _reduce_sig((1, 1), ["tensor<2xf32>"], [[0]])):
        with pytest.raises(Unsupported, match="unregistered operation"):
            b.compile(sig)


def test_jax_reduces_one_group_of_the_whole_axis_at_its_source():
    import jax
    if len(jax.devices("cpu")) < 4:
        pytest.skip("jax started before XLA_FLAGS asked for 8 host devices")
    b = get_backend("jax")
    assert check_case(b, examples(load_spec(REDUCE))[0].case).cls == "pass"
    assert set(classes(b, SUM_4X1)) <= {"pass"}
    with pytest.raises(Unsupported, match="take no replica groups"):
        b.compile(MAX_2X4)
    with pytest.raises(Unsupported, match="no dynamic root"):
        b.compile(SUM_DYNAMIC)


def test_iree_knows_both_ops_but_lowers_neither():
    """Measured with IREE 3.13 (the iree extra; skipped without it): its dialect parses
    collective_broadcast (has_dynamic_root a unit attribute) and collective_reduce, then
    refuses to lower them ("failed to legalize operation ... explicitly marked illegal")."""
    pytest.importorskip("iree.compiler", reason="the iree extra is not installed")
    pytest.importorskip("iree.runtime", reason="the iree extra is not installed")
    b = get_backend("iree")
    out = check_case(b, examples(load_spec(OP))[0].case)
    assert out.cls == "backend_error" and "failed to legalize" in out.message
    # collective_reduce: no program reaches it (jaxlib's dialect lacks the op)
    assert check_case(b, examples(load_spec(REDUCE))[0].case).cls == "unsupported"
