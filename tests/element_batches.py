"""Judging a planted backend on a few hand-picked elements: one signature of an
element-wise op over ``tensor<2xE>``, the two cases stacked per input, one batch through
the suite's own check (tests of formats without NaN, infinity or zero)."""
from __future__ import annotations

import numpy as np

from conformance.checking.checker import SignatureCheck
from conformance.core.case import Signature
from conformance.core.types import element_type
from conformance.specs import load_spec


def stacked_batch(op: str, name: str, cases) -> tuple[Signature, list[np.ndarray]]:
    """``cases``: per case, one value per input (two cases: the tensors' two elements)."""
    dtype = element_type(name).dtype
    per_input = list(zip(*cases))
    stacked = [np.array(v, np.float64).astype(dtype) for v in per_input]
    sig = Signature.make(op, [f"tensor<2x{name}>"] * len(stacked), [f"tensor<2x{name}>"])
    return sig, stacked


def judge(backend, sig: Signature, stacked):
    """The backend's verdict on the batch and its per-element classes."""
    check = SignatureCheck(load_spec(sig.op), sig, [backend])
    check.compile()
    assert not check.failed, check.failed
    v = check.run_batch(0, stacked).results[backend.name].verdict
    return v, v.element_classes[0]


def format_values(name: str) -> np.ndarray:
    """Every value of a format of at most 8 bits, by its encodings."""
    et = element_type(name)
    return np.arange(2 ** et.bits, dtype=np.uint8).view(et.dtype)


def exact_results_over_every_value(formats):
    """For every element-wise op without attributes whose binding is one of ``formats``
    throughout: (op, format, the oracle's f64 result over every tuple of the format's
    values). What tests of the shared rules enumerate to find the ops that can meet
    their case."""
    import itertools

    from conformance import oracles
    from conformance.core.types import TensorType
    from conformance.specs import all_specs
    for spec in all_specs():
        if not spec.elementwise or spec.attributes:
            continue
        for name in formats:
            for b in spec.type_bindings():
                types = [b.get(t.element_type, t.element_type) for t in spec.inputs]
                if types != [name] * len(types) or b.get(spec.outputs[0].element_type) != name:
                    continue
                grid = np.array(list(itertools.product(format_values(name), repeat=len(types))))
                xs = [grid[:, k].astype(np.float64) for k in range(len(types))]
                with np.errstate(all="ignore"):
                    (r,) = oracles.evaluate(spec.name, xs, result_types=[
                        TensorType((len(grid),), element_type("f64"))])
                yield spec.name, name, r
