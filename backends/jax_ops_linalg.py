"""jax.lax mappings of the linear-algebra ops (registered into jax_ops.BUILDERS).

- ``cholesky``: ``lax.linalg.cholesky(a, symmetrize_input=False)`` reads only the lower
  triangle and returns the lower factor; it has no ``lower`` argument. The spec's
  ``lower = false`` (``U`` upper with ``Uᴴ·U = A``, read from the upper triangle) is
  expressed as ``U = chol(Aᵀ)ᵀ``: ``Aᵀ``'s lower triangle is ``A``'s upper one, and
  ``L·Lᴴ = Aᵀ`` gives ``conj(L)·Lᵀ = A``, so ``U = Lᵀ``. (jax's default
  ``symmetrize_input=True`` would average the two triangles, ``(A + Aᴴ)/2``: another
  computation than the op's; it is turned off.) jax lowers it to LAPACK potrf on CPU (a
  custom call, not stablehlo.cholesky), and fills a matrix it cannot factor with NaN.
- ``triangular_solve``: ``lax.linalg.triangular_solve(a, b, left_side=, lower=,
  transpose_a=, conjugate_a=, unit_diagonal=)`` solves the same ``op(a)·x = b`` /
  ``x·op(a) = b`` as the spec (its ``left_side`` defaults to False: always passed here);
  the spec's ``transpose_a`` maps to jax's two flags: NO_TRANSPOSE (False, False),
  TRANSPOSE (True, False), ADJOINT (True, True). (jax's ``conjugate_a`` without
  ``transpose_a``, conj(a), has no spec equivalent and is never used.)

Both take a batch of matrices with equal batch dimensions, as the spec does, and are
batched over the cases with jax.vmap.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from conformance.core.case import Signature

from .base import Unsupported
from .jax_ops import builder

_TRANSPOSE = {"NO_TRANSPOSE": (False, False), "TRANSPOSE": (True, False),
              "ADJOINT": (True, True)}


def _check_matrices(sig: Signature) -> None:
    for t in sig.input_types:
        if t.rank < 2:
            raise Unsupported(f"{sig.op}: jax.lax.linalg takes batches of matrices; "
                              f"{t} has rank {t.rank}")


@builder("cholesky")
def _cholesky(sig: Signature):
    _check_matrices(sig)
    lower = bool(sig.attributes["lower"])

    def run(a):
        if lower:
            return lax.linalg.cholesky(a, symmetrize_input=False)
        at = jnp.swapaxes(a, -1, -2)
        return jnp.swapaxes(lax.linalg.cholesky(at, symmetrize_input=False), -1, -2)
    return run


@builder("triangular_solve")
def _triangular_solve(sig: Signature):
    _check_matrices(sig)
    a = sig.attributes
    mode = str(a["transpose_a"])
    if mode not in _TRANSPOSE:
        raise Unsupported(f"triangular_solve: transpose_a {mode!r} is not one of "
                          f"{', '.join(_TRANSPOSE)}")
    transpose, conjugate = _TRANSPOSE[mode]
    kwargs = dict(left_side=bool(a["left_side"]), lower=bool(a["lower"]),
                  unit_diagonal=bool(a["unit_diagonal"]), transpose_a=transpose,
                  conjugate_a=conjugate)

    def run(x, y):
        return lax.linalg.triangular_solve(x, y, **kwargs)
    return run
