"""The spec's own examples are golden tests, on the oracle and on the jax backend."""
import pytest

from conformance.checking import golden

from conformance import oracles
from conformance.backends import get_backend
from conformance.specs import load_spec, op_names

EXAMPLES = [ex for op in op_names() for ex in golden.examples(load_spec(op))]


def test_every_op_has_examples():
    assert {ex.spec.name for ex in EXAMPLES} == set(op_names())


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.id)
def test_example_on_oracle(ex):
    assert golden.mismatch(ex, oracles.evaluate_case(ex.case)) is None


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.id)
def test_example_on_jax(ex):
    from conformance.backends import Unsupported
    try:
        out = get_backend("jax").run(ex.case)
    except Unsupported as e:        # an op jax cannot express (the batch_norm ops)
        pytest.skip(str(e))
    assert golden.mismatch(ex, out) is None


def test_mismatch_reports_values():
    ex = golden.examples(load_spec("add"))[0]
    import numpy as np
    bad = [ex.expected[0] + np.int32(1)]
    assert "got" in golden.mismatch(ex, bad)
