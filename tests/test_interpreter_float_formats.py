"""What the StableHLO reference interpreter (jaxlib 0.10.2's eval_module) does that the
quick run of the nine newer float formats found (docs/float-formats.md, "What the
interpreter gets wrong in them"), pinned on one small module each:

- a promoted reduction computation (the body's type wider than the operands', the
  2026-08 spec's is_promotable: reduce, reduce_window, scatter, select_and_scatter)
  aborts the process ("LLVM ERROR: Expected same type for an SSA register and its
  evaluated value"): the suite records the backend's crash, not an error of its own;
- unsigned start indices of dynamic_slice / dynamic_update_slice read as signed (a ui8
  start of 200 clamps to 0, where the spec clamps it to dim - size): a value failure.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from conformance.checking.checker import check_case
from conformance.checking.isolation import IsolatedBackend
from conformance.core.case import Case, Signature
from conformance.specs.regions import make as make_region

PROMOTED_REDUCE = Signature.make(
    "reduce", ["tensor<4xbf16>", "tensor<bf16>"], ["tensor<f32>"], {"dimensions": [0]},
    regions=(make_region(["f32", "f32"], "add(arg0, arg1)"),))


@pytest.fixture(scope="module")
def isolated(tmp_path_factory):
    # with a stderr log, as a run keeps one: the crash's reason quotes the abort's words
    log = tmp_path_factory.mktemp("interp") / "interpreter.stderr.log"
    b = IsolatedBackend("interpreter", timeout=120, log_path=str(log))
    yield b
    b.close()


def test_a_promoted_reduce_is_the_interpreters_crash_not_the_suites(isolated):
    case = Case(PROMOTED_REDUCE, (np.array([1, 2, 3, 4], ml_dtypes.bfloat16),
                                  np.array(0, ml_dtypes.bfloat16)))
    r = check_case(isolated, case)
    assert r.cls == "crash", (r.cls, r.message)
    assert "Expected same type for an SSA register" in r.message


def test_the_same_reduce_in_the_operands_type_runs(isolated):
    """The program differs only in the promotion: the crash is the promotion's."""
    sig = Signature.make("reduce", ["tensor<4xbf16>", "tensor<bf16>"], ["tensor<bf16>"],
                         {"dimensions": [0]},
                         regions=(make_region(["bf16", "bf16"], "add(arg0, arg1)"),))
    case = Case(sig, (np.array([1, 2, 3, 4], ml_dtypes.bfloat16),
                      np.array(0, ml_dtypes.bfloat16)))
    assert check_case(isolated, case).cls == "pass"


@pytest.mark.parametrize("start, cls", [(5, "pass"), (127, "pass"), (128, "value"),
                                        (200, "value")])
def test_unsigned_start_indices_are_read_as_signed(isolated, start, cls):
    sig = Signature.make("dynamic_slice", ["tensor<8xf32>", "tensor<ui8>"],
                         ["tensor<2xf32>"], {"slice_sizes": [2]})
    case = Case(sig, (np.arange(8, dtype=np.float32), np.array(start, np.uint8)))
    assert check_case(isolated, case).cls == cls
