"""The ``region`` verdict kind: a result computed by a region is judged as the ops the
region calls are judged by their own specs.

``map``'s spec says ``{region: computation}``: its result is the computation applied
element by element, so it is as exact, or as inexact, as the ops it calls:

- a region that returns one of its arguments: ``bits`` (the value moves unchanged);
- one call of an op ``X`` on the arguments: ``X``'s own accuracy entry for the call's
  first operand type (``sine``: its ULP bound; ``add``: exact), by X's verdict kind;
- several calls: ``exact`` where every call's entry is exact (or bits), otherwise the
  ``ulp`` kind with the sum of the calls' ULP bounds (errors of well-conditioned
  compositions add up about so; the generators draw only exact compositions).
"""
from __future__ import annotations

import dataclasses

from conformance.specs import Accuracy, load_spec
from conformance.specs.regions import Arg, Call, parse as parse_region
from conformance.checking.verdicts import VERDICTS, Judgement, check_known, verdict_kind

__all__ = ["region_accuracy", "by_region"]


def _calls(node, out: list) -> list:
    if isinstance(node, Call):
        out.append(node)
        for o in node.operands:
            _calls(o, out)
    return out


def region_accuracy(text: str) -> Accuracy:
    """The accuracy entry a region's results are judged by (see the module's text)."""
    region = parse_region(text)
    calls = [c for n in region.results for c in _calls(n, [])]
    if not calls:
        return Accuracy("bits")
    entries = [load_spec(c.op).accuracy(region.type_of(c.operands[0]) if c.operands
                                        else region.type_of(c)) for c in calls]
    if len(calls) == 1:
        return entries[0]
    if all(e.kind in ("exact", "bits") for e in entries):
        return Accuracy("exact")
    return Accuracy("ulp", float(sum(e.bound for e in entries if e.kind == "ulp")))


@verdict_kind("region")
def by_region(j: Judgement):
    """Judge by the accuracy of the region the entry names (``{region: NAME}``)."""
    names = [r.name for r in j.spec.regions]
    name = j.accuracy.options.get("region", names[0] if names else None)
    text = j.sig.regions[names.index(name)]
    accuracy = region_accuracy(text)
    check_known(accuracy, f"{j.spec.path}: accuracy (from the region {text!r})")
    return VERDICTS[accuracy.kind](dataclasses.replace(j, accuracy=accuracy))
