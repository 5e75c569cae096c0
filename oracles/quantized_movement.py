"""The quantized forms of the data-movement ops (specs/quantized_movement.yaml,
``<op>_quantized``): the plain op's own oracle on the storage values.

These ops move or select elements (``result[i] = operand[j]``, pad's padding value)
without arithmetic, and their rules make the result's element type the operand's (per
axis: the quantization dimension moved as the op says). So a quantized tensor's storage
integers are moved as the storage type's tensor would be: the oracle hands the plain op's
oracle the same arrays with every quantized type replaced by its storage type. Nothing
here names an op: the table says which plain op each form is.
"""
from __future__ import annotations

from conformance.core.types import TensorType

from .registry import TYPED, oracle_for, register_typed


def _storage(t):
    """A tensor type with a quantized element type read as its storage type."""
    et = getattr(t, "element_type", None)
    if et is not None and et.is_quantized:
        return TensorType(t.shape, et.storage)
    return t


def _make(name: str, base: str):
    def oracle(inputs, attrs, types, input_types):
        """``base``'s oracle on the storage values (types read as their storage types)."""
        fn = oracle_for(base)
        results = [_storage(t) for t in types]
        if base in TYPED:
            return fn(inputs, attrs, results, [_storage(t) for t in input_types])
        return fn(inputs, attrs, results)
    oracle.__name__ = oracle.__qualname__ = name
    return oracle


def _register() -> None:
    from conformance.specs import quantized_movement
    for name, base in quantized_movement().items():
        register_typed(name)(_make(name, base))


_register()
