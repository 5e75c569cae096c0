"""A failure's reason is the backend's message, never the suite's own call stack (issue
31, item 8): jaxlib appends the Python frames that traced the failing op (runner.py and
cli.py in a serial run, executors.py under --jobs), so the same case reached two ways
gave two reasons and two runs with one seed differed in text."""
import numpy as np

from conformance.backends import get_backend
from conformance.checking.checker import check_case, error_text
from conformance.core.case import Case, Signature

#: XLA's HLO verifier refuses a variadic reduce of f64 and f32 (mixed precision)
MIXED = Signature.make(
    "reduce", ["tensor<2x4xf64>", "tensor<2x4xf32>", "tensor<f64>", "tensor<f32>"],
    ["tensor<2xf64>", "tensor<2xf32>"], {"dimensions": [1]},
    regions=("(f64, f32, f64, f32) -> (add(arg0, arg2), add(arg1, arg3))",))


def test_the_same_failing_case_through_two_call_stacks_gives_the_same_reason():
    case = Case(MIXED, (np.ones((2, 4)), np.ones((2, 4), np.float32), np.float64(0),
                        np.float32(0)))
    backend = get_backend("jax")

    def directly():
        return check_case(backend, case)

    def through(levels):            # another route: deeper, other functions, other lines
        return through(levels - 1) if levels else directly()

    first = directly()
    backend.clear_cache()           # traced again, from another stack
    second = through(3)
    assert first.cls == second.cls == "backend_error"
    assert "mixed precision is disallowed" in first.message     # the backend's message
    assert first.message == second.message
    for name in ("test_stable_reasons.py", "checker.py", "Suspected Python Code Location",
                 "stack_frame_id"):
        assert name not in first.message


def test_only_the_python_frames_go():
    from conformance.checking.checker import without_python_frames
    text = ('INTERNAL: during context [hlo verifier]: bad %reduce.11, metadata={op_name='
            '"jit(run)/reduce" stack_frame_id=6}, but mixed precision is disallowed.\n\t\n\n'
            'Suspected Python Code Location:\n'
            '  /src/backends/jax_ops_reduction.py:51:21 [_reduce.<locals>.run]\n'
            '  /src/conformance/apps/runner.py:363:31 [Runner.run_invalid]\n'
            '\nFailed after pipeline-start')
    assert without_python_frames(text) == (
        'INTERNAL: during context [hlo verifier]: bad %reduce.11, metadata={op_name='
        '"jit(run)/reduce"}, but mixed precision is disallowed.\n\nFailed after pipeline-start')
    located = ('error: loc("jit(f)/reduce"(callsite("f"("/src/conformance/apps/cli.py":5:11) '
               'at "g"("/src/conformance/apps/executors.py":7:4)))): op requires the same '
               'shape; loc("module.mlir":3:9) and loc(unknown) stay')
    assert without_python_frames(located) == (
        'error: loc(unknown): op requires the same shape; loc("module.mlir":3:9) and '
        'loc(unknown) stay')
    plain = "make_buffer(): incompatible function arguments.\n\nInvoked with: (x) loc("
    assert without_python_frames(plain) == plain
    assert error_text(RuntimeError(text)).startswith("RuntimeError: INTERNAL: during context")
