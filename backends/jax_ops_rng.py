"""jax.lax mappings of the rng ops (registered into jax_ops.BUILDERS).

- ``rng_bit_generator``: ``lax.rng_bit_generator(key, shape, dtype, algorithm)`` with the
  ui64 state as the key (jax passes a uint64 key straight to stablehlo.rng_bit_generator).
  jax.lax takes only ui8/ui16/ui32/ui64 outputs; a signed or floating-point output of 8, 16,
  32 or 64 bits is the unsigned one's bits (``lax.bitcast_convert_type``), which is what
  "filled with uniform random bits" means; si4/ui4 outputs are Unsupported (jax.lax has no
  4-bit rng_bit_generator and no 4-bit bitcast), and so are 3-word PHILOX states (jax's
  lowering asserts a ui64[2] or ui32[4] key).
- ``rng``: jax's ``lax.rng_uniform(a, b, shape)`` (lowered to stablehlo.rng UNIFORM);
  NORMAL is Unsupported: jax.lax has no stablehlo.rng NORMAL (jax.random.normal is another
  algorithm on rng_bit_generator bits, not this op).

Both run once per case, never under ``jax.vmap``: jax's batching rule of
rng_bit_generator (jax 0.10.2, lax/control_flow/loops.py) draws one block of shape
(batch, *shape) from the FIRST case's key and updates only that key, so a vmapped batch
is not the op applied to each case (every case after the first would get bits that its
own state does not determine and an unchanged state). The functions refuse vmap
(NotImplementedError from a custom_vmap rule), which JaxBackend.compile_batch turns into
its per-case fallback.
"""
from __future__ import annotations

import numpy as np
from jax import custom_batching, lax

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder

_ALGORITHMS = {"DEFAULT": lax.RandomAlgorithm.RNG_DEFAULT,
               "THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY,
               "PHILOX": lax.RandomAlgorithm.RNG_PHILOX}


@builder("rng_bit_generator")
def _rng_bit_generator(sig: Signature):
    out = sig.result_types[-1]
    et = out.element_type
    alg = sig.attributes.get("rng_algorithm")
    if alg not in _ALGORITHMS:
        raise Unsupported(f"rng_bit_generator: jax.lax has no algorithm {alg!r}")
    if et.bits not in (8, 16, 32, 64):
        raise Unsupported(f"rng_bit_generator: jax.lax.rng_bit_generator takes ui8, ui16, "
                          f"ui32 or ui64 outputs (and their bits); not {et.name}")
    if sig.input_types[0].shape != (2,) or sig.input_types[0].element_type.name != "ui64":
        raise Unsupported(f"rng_bit_generator: jax.lax.rng_bit_generator takes a ui64[2] (or "
                          f"ui32[4]) key, not {sig.input_types[0]} (its lowering asserts so)")
    unsigned = np.dtype(f"u{et.bits // 8}")
    shape, algorithm = tuple(out.shape), _ALGORITHMS[alg]

    def run(state):
        new, bits = lax.rng_bit_generator(state, shape, unsigned, algorithm)
        if et.dtype != unsigned:
            bits = lax.bitcast_convert_type(bits, et.dtype)
        return new, bits
    return _per_case(run, "rng_bit_generator")


def _per_case(fn, op: str):
    """``fn`` with a vmap rule that refuses (see the module docstring)."""
    wrapped = custom_batching.custom_vmap(fn)

    @wrapped.def_vmap
    def _refuse(axis_size, in_batched, *args):
        raise NotImplementedError(f"{op} is run once per case: jax's vmap of it is not the "
                                  "op applied to each case")
    return wrapped


_XLA_RNG_TYPES = {"f64", "f32", "f16", "bf16", "si64", "ui64", "si32", "ui32"}


@builder("rng")
def _rng(sig: Signature):
    dist = sig.attributes.get("rng_distribution")
    if dist != "UNIFORM":
        raise Unsupported(f"rng: jax.lax has only rng_uniform (stablehlo.rng UNIFORM); "
                          f"no {dist}")
    et = sig.result_types[0].element_type
    shape_t = sig.input_types[2] if len(sig.input_types) == 3 else None
    if shape_t is None or shape_t.element_type.name != "si64" or \
            shape_t.shape != (sig.result_types[0].rank,):
        raise Unsupported(f"rng: jax's rng_uniform builds the shape operand itself (an si64 "
                          f"constant of the result's shape); it cannot express "
                          f"{shape_t if shape_t is not None else 'no shape operand'}")
    if et.name not in _XLA_RNG_TYPES:
        # XLA's text: "The CPU and GPU backends currently only support F64, F32, F16, BF16,
        # S64, U64, S32 and U32"; on others XLA CPU aborts the process (jaxlib 0.10.2:
        # rng_expander.cc "Check failed: primitive_type == F16 || primitive_type == BF16"
        # for f8E4M3FN), which in the jax backend's process would end the run.
        raise Unsupported(f"rng: XLA's RngUniform on CPU/GPU supports only "
                          f"{', '.join(sorted(_XLA_RNG_TYPES))}; not {et.name}")
    from jax._src.lax.lax import rng_uniform      # PRIVATE: not re-exported everywhere
    shape = tuple(sig.result_types[0].shape)
    return _per_case(lambda a, b, _shape: rng_uniform(a, b, shape), "rng")


@builder("rng_bernoulli")
def _rng_bernoulli(sig: Signature):
    """XLA's RngBernoulli as its canonical decomposition (conformance/core/decompositions.py)
    in lax ops: ``rng_uniform(0, 1, shape) < mean``, converted to ui32 (the same
    stablehlo.rng UNIFORM, compare, convert). jax.random.bernoulli is not it: it takes a
    key and draws with threefry bits, where RngBernoulli takes no state."""
    import jax.numpy as jnp
    out = sig.result_types[0]
    if out.element_type.name != "ui32":
        raise Unsupported(f"rng_bernoulli: RngBernoulli's output is U32; its decomposition "
                          f"(rng, compare, convert) cannot check a {out.element_type.name} "
                          f"output")
    from jax._src.lax.lax import rng_uniform      # PRIVATE: not re-exported everywhere
    shape = tuple(out.shape)
    dtype = out.element_type.dtype

    def run(mean):
        u = rng_uniform(jnp.float32(0), jnp.float32(1), shape)
        return lax.convert_element_type(lax.lt(u, mean), dtype)   # (no type promotion)
    return _per_case(run, "rng_bernoulli")
