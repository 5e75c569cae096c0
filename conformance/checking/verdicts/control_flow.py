"""The ``bodies`` verdict kind (if, case, while): results computed by region programs are
judged as the ops in the regions are judged by their own specs.

- every op of every region exact for its signature (``exact``/``bits``, or a reduction of
  integers: conformance.generators.control_flow.exact): ``exact`` — the generators draw
  only such bodies, so a branch or loop result has one right answer;
- ``{bodies: branch}`` (if, case: each result comes from one branch, evaluated once):
  otherwise ``ulp`` with the largest, over the branches, sum of the ULP bounds of the
  branch's ops (errors of well-conditioned compositions add up about so); an op judged
  any other way (a bound, a residual) is refused in one line;
- ``{bodies: exact}`` (while): a loop body's rounding errors compound with the trip
  count, so nothing but exact bodies is judged (a clear one-line error otherwise).
"""
from __future__ import annotations

import dataclasses

from conformance.core import region_program
from conformance.core.case import Signature
from conformance.specs import Accuracy, load_spec
from conformance.checking.verdicts import VERDICTS, Judgement, check_known, verdict_kind

__all__ = ["NoBound", "bodies_accuracy", "by_bodies"]


class NoBound(ValueError):
    """Regions whose ops' errors the suite cannot bound: the op is not judged (a module
    read in holds such loops: an RNN's tanh cell; conformance.checking.modules)."""


def _ops(text: str) -> list[Signature]:
    return [o.signature for o in region_program.parse(text).program.operations]


def bodies_accuracy(sig: Signature, mode: str = "branch") -> Accuracy:
    """The accuracy entry ``sig``'s results are judged by (see the module's text)."""
    from conformance.generators.control_flow import exact
    if all(exact(s) for text in sig.regions for s in _ops(text)):
        return Accuracy("exact")
    if mode != "branch":
        raise NoBound(f"{sig.op}: a region with ops that are not exact has no bound the "
                         "suite can state (errors compound over the iterations); only "
                         "exact bodies are judged")
    worst = 0.0
    for text in sig.regions:
        total = 0.0
        for s in _ops(text):
            if exact(s):
                continue
            a = load_spec(s.op).signature_accuracy(s)
            if a.kind != "ulp":
                raise NoBound(f"{sig.op}: a branch op {s.op} judged by {a.kind!r} has no "
                                 "ULP bound to add up; only exact and ULP-bounded ops are "
                                 "judged in branches")
            total += a.bound
        worst = max(worst, total)
    return Accuracy("ulp", worst)


@verdict_kind("bodies")
def by_bodies(j: Judgement):
    """Judge by the accuracy of the ops in the regions (``{bodies: branch|exact}``)."""
    accuracy = bodies_accuracy(j.sig, str(j.accuracy.options.get("bodies", "branch")))
    check_known(accuracy, f"{j.spec.path}: accuracy (from the regions' ops)")
    return VERDICTS[accuracy.kind](dataclasses.replace(j, accuracy=accuracy))
