"""Writes the example modules of `conformance check` (README, "Modules written elsewhere"):
StableHLO exported by jax, as text (.mlir) and as the portable artifact jax.export
serialises (.mlirbc). Run it to make them again: python examples/modules/export_examples.py
"""
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import export

HERE = Path(__file__).parent


def mlp(x, w1, b1, w2):
    """A two-layer perceptron with a softmax: dot_general, add, tanh, reduce, exp, divide."""
    return jax.nn.softmax(jnp.tanh(x @ w1 + b1) @ w2, axis=-1)


def loop(x, n):
    """A fori_loop and a cond: while and case regions that read values from outside."""
    y = jax.lax.fori_loop(0, n, lambda k, v: v * 1.5 + k, x)
    return jax.lax.cond(n > 2, lambda v: v + 1, lambda v: v - 1, y)


def ranking(x):
    """sort (jax's float comparator: NaN and -0 canonicalised, TOTALORDER), argmax and a
    cumulative sum: calls of private functions, a reduce of two operands, reduce_window."""
    return jnp.sort(x, axis=-1), jnp.argmax(x, axis=-1), jnp.cumsum(x, axis=0)


f32 = jnp.float32
EXAMPLES = {
    "mlp": (mlp, [((4, 8), f32), ((8, 16), f32), ((16,), f32), ((16, 3), f32)]),
    "loop": (loop, [((3,), f32), ((), jnp.int32)]),
    "ranking": (ranking, [((5, 6), f32)]),
}

if __name__ == "__main__":
    for name, (fn, args) in EXAMPLES.items():
        exp = export.export(jax.jit(fn))(*[jax.ShapeDtypeStruct(s, d) for s, d in args])
        (HERE / f"{name}.mlir").write_text(exp.mlir_module())
        (HERE / f"{name}.mlirbc").write_bytes(exp.mlir_module_serialized)
        print(f"{name}.mlir, {name}.mlirbc")
