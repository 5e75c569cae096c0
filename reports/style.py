"""How each outcome looks: colour, short label and a one-line meaning.

One table for the matrix, the legend and every badge, so a class has the same
colour everywhere. Each divergence class has its own hue (red, orange, yellow,
pink, blue, purple, brown, black, maroon, teal) so that a matrix can be read at
a glance; pass is green, unsupported grey, not applicable white.
"""
from __future__ import annotations

from typing import NamedTuple

from conformance.checking.compare import SEVERITY


class Look(NamedTuple):
    background: str
    foreground: str
    abbrev: str
    meaning: str


LOOKS: dict[str, Look] = {
    "pass": Look("#66bb6a", "#000", "ok", "every case agrees with the oracle"),
    "subnormal_flush": Look("#fdd835", "#000", "ftz",
                            "differs only where subnormals are flushed to zero"),
    "precision": Look("#cddc39", "#000", "prec",
                      "beyond the bound under precision_config below HIGHEST (spec #755)"),
    "accuracy": Look("#fb8c00", "#000", "acc", "beyond the op's ULP / error bound"),
    "bound": Look("#ffb74d", "#000", "bnd",
                  "beyond the error bound every order the spec allows keeps"),
    "signed_zero": Look("#f48fb1", "#000", "±0", "+0 where -0 was due, or the reverse"),
    "nan": Look("#1e88e5", "#fff", "nan", "NaN on one side only"),
    "value": Look("#e53935", "#fff", "val", "a different value"),
    "property": Look("#3949ab", "#fff", "prop",
                     "a property the spec asks of the results does not hold"),
    "type": Look("#8e24aa", "#fff", "type", "result of the wrong shape or element type"),
    "accepted_invalid": Look("#6d4c41", "#fff", "inv", "ran a program that breaks a rule"),
    "backend_error": Look("#212121", "#fff", "err", "the backend raised an error"),
    "crash": Look("#880e4f", "#fff", "crash", "the backend process crashed"),
    "timeout": Look("#00897b", "#fff", "t/o", "the backend timed out"),
    "unsupported": Look("#bdbdbd", "#000", "n/s", "the backend says it does not support this"),
    "unjudged": Look("#e0e0e0", "#333", "n/j", "not judged: no bound the suite can state "
                     "(a loop of inexact ops), or the oracle cannot evaluate it"),
    "rejected": Look("#a5d6a7", "#000", "rej", "the invalid program was rejected (correct)"),
    "not_generated": Look("#eeeeee", "#555", "—", "no invalid case breaks this rule alone"),
    "fail": Look("#e53935", "#fff", "fail", "the spec example's result differs"),
    "not_run": Look("#ffffff", "#999", "·", "allowed by the spec, but no result recorded"),
}
_UNKNOWN = Look("#ce93d8", "#000", "?", "an outcome this report does not know")

#: Legend order: pass, then divergences by increasing severity, then the rest.
LEGEND = ["pass"] + sorted((c for c in LOOKS if c in SEVERITY and c not in
                            ("pass", "rejected", "unsupported")),
                           key=lambda c: SEVERITY[c]) + ["unsupported", "not_run"]


def look(outcome: str) -> Look:
    return LOOKS.get(outcome, _UNKNOWN)


def css_class(outcome: str) -> str:
    """The CSS class of an outcome (``o-value``); unknown outcomes share ``o-unknown``."""
    return f"o-{outcome}" if outcome in LOOKS else "o-unknown"


def stylesheet() -> str:
    """CSS rules giving every outcome class its colours."""
    rules = [f".{css_class(name)}{{background:{lk.background};color:{lk.foreground}}}"
             for name, lk in LOOKS.items()]
    rules.append(f".o-unknown{{background:{_UNKNOWN.background};color:{_UNKNOWN.foreground}}}")
    # A cell whose divergences are all expected: thin stripes of its class's colour on
    # white, so that a solid colour always means a new (unexpected) divergence.
    rules += [f".{css_class(name)}.exp{{{expected_background(lk.background)};color:#000}}"
              for name, lk in LOOKS.items()]
    return "\n".join(rules)


def expected_background(colour: str) -> str:
    """The hatched background of an expected divergence of a class drawn in ``colour``."""
    return f"background:repeating-linear-gradient(135deg,{colour} 0 2px,#fff 2px 6px)"
