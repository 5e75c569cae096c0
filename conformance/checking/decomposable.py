"""No excuse for a decomposable op (the spec key ``decomposable``: composite).

001 "CompositeCall": "The composite op can be replaced with its decomposition without
changing program semantics." So a backend that says Unsupported for a valid composite
while it compiles every op of the decomposition alone has no excuse: the checker
records a divergence (``backend_error``) instead of ``unsupported``. Where the backend
lacks one of those ops itself, its Unsupported stands (it could not run the
decomposition either). Costs nothing unless a backend refuses such an op.
"""
from __future__ import annotations

from conformance.backends import Backend, Unsupported
from conformance.core import region_program
from conformance.core.case import Signature
from conformance.specs import OpSpec

__all__ = ["no_excuse"]


def no_excuse(spec: OpSpec, sig: Signature, backend: Backend, refusal: Unsupported
              ) -> str | None:
    """The divergence's one-line message where ``refusal`` is no excuse, else None."""
    why = spec.data.get("decomposable")
    if not why or sig.invalid or not sig.regions:
        return None
    ops = []
    for text in sig.regions:
        try:
            ops += [o.signature for o in region_program.parse(text).program.operations]
        except region_program.RegionProgramError:
            return None
    for s in dict.fromkeys(ops):            # (each distinct op signature once)
        try:
            backend.batch_executable(s)
        except Unsupported:
            return None                     # it lacks a piece: the refusal stands
        except Exception:  # noqa: BLE001 - a piece that fails is no excuse either
            return None
    return (f"{sig.op}: the backend said Unsupported ({refusal}) but compiles every op of "
            f"the decomposition alone; {why}")
