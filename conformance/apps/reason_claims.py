"""What an expectations entry's reason says of its divergence, checked against the records
it waived (issue 32 item 7: two shipped reasons had drifted from the records: power's said
a subnormal base reads as zero, 0 or inf, where every witness was finite and too large;
log1p f64's said "up to ~50 ulp" where the records showed 87-103).

A reason is prose, but the figures in it are claims a run can refute. :func:`claims` reads
two kinds from a reason, clause by clause (clauses end at ``;`` or at a sentence's end):

- **error figures** in the unit its class's verdict measures (``ulp``, ``eps``, or
  ``bound``: a fraction of the bound), the unit the signature records' ``class_errors``
  give: ``87-103 ulp`` (a range), ``up to 50 ulp``, ``at most``, ``worst``, ``within``,
  ``below`` (a maximum), ``at least``, ``more than``, ``over`` (a minimum), ``~`` or
  ``about`` (approximate), or a bare ``7 ULP`` (the size of the divergence, or of an
  example of it where the clause also states a maximum);
- **non-finite witnesses**: a clause that speaks of ``inf``, ``infinity`` or ``NaN`` (as
  written: lower-case ``nan`` is the class's name) says the divergence involves one (an overflow alone does not: an intermediate that overflows
  may still give a finite result).

A clause that names element types (``f64``, ``bf16``, ``complex<f32>``, ``complex``,
``fp8``) before a figure, or right after it (``2 ulp off on f16``), makes the claim about
those types only; a clause naming none speaks of every type of the entry.

:func:`check` compares an entry's claims with the findings it waived in one run (the gate's
``expected`` items, whose ``worst``, ``unit``, ``witnessed`` and ``nonfinite`` come from the
records' ``class_errors``): the records' worst error must not exceed a stated maximum (an
approximate one or a bare figure: not by more than :data:`FACTOR`), and must reach a stated
minimum, a range's lower end or a bare figure within :data:`FACTOR` (checked only where the
run is at a depth the entry was seen at: another depth draws other inputs, whose worst may
lie lower); a clause speaking of inf or NaN needs a witness that involves one.
:func:`check_static` needs no run: a reason whose figures lie outside the entry's own
``looks_like.error_at_most``, or that speaks of inf or NaN where ``looks_like.nonfinite`` is
false, describes what the entry does not waive. Each mismatch is one line naming the file,
the entry, its op, the claim and what the records show. ``conformance expectations check``
prints them (``CLAIM``; ``--strict`` fails on them), and the shipped-gate tests check the
entries each quick jax run used.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import re

#: how far an approximate figure, a bare one or a minimum may lie from the records' worst
#: error (the margin ``expectations update`` gives ``error_at_most`` between seeds)
FACTOR = 2.0

_NUM = r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"
_UNITS = {"ulp": "ulp", "ulps": "ulp", "eps": "eps", "bound": "bound", "bounds": "bound"}
_MAX_WORDS = ("up to", "at most", "worst", "within", "below", "under", "less than",
              "no more than", "<=", "<")
_MIN_WORDS = ("at least", "more than", "over", "above", ">=", ">")
_APPROX_WORDS = ("~", "about", "around", "roughly", "some", "approximately")
_FIGURE = re.compile(
    r"(?:(?<![\w])(?P<word>" + "|".join(re.escape(w) for w in _MAX_WORDS + _MIN_WORDS)
    + r")\s*)?(?P<approx>~|(?:" + "|".join(_APPROX_WORDS[1:]) + r")\s)?\s*"
    r"(?<![\w.])(?P<low>" + _NUM + r")(?:\s*(?:-|–|to)\s*(?P<high>" + _NUM + r"))?\s*"
    r"(?P<unit>ulps?|eps|bounds?)\b", re.IGNORECASE)
_TYPE = re.compile(r"(?<![\w<])(complex<f(?:32|64)>|complex|bf16|f16|f32|f64|fp8|f8E\w+|"
                   r"f4E2M1FN|f6E\w+|[su]i(?:2|4|8|16|32|64)|i1)(?![\w>])")
_NONFINITE = re.compile(r"(?<![\w])(?:[+-]{0,2}(?i:inf|infinity|infinities)|[sq]?NaN|NAN)"
                        r"(?![\w])")
#: a clause ends at ``;`` or at a sentence's end (a period before a space: not 0.41)
_CLAUSE = re.compile(r";|\.(?=\s)")


@dataclasses.dataclass(frozen=True)
class Claim:
    """One thing a reason says its divergence looks like."""

    text: str                        # as written: "87-103 ulp", "inf"
    kind: str                        # "error" or "nonfinite"
    types: tuple[str, ...] = ()      # the element types it is about (none named: all)
    unit: str | None = None          # ulp | eps | bound (error claims)
    low: float | None = None         # the least error it says the divergence shows
    high: float | None = None        # the most
    exact_high: bool = True          # high is a stated maximum (no FACTOR of slack)

    def about(self, type_key: str | None) -> bool:
        """Is this claim about findings of ``type_key`` (``si8->f32``: either side)?"""
        if not self.types or type_key is None:
            return True
        sides = type_key.split("->")
        return any(fnmatch.fnmatchcase(s, p) for s in sides for p in self.types)


def _type_pattern(token: str) -> str:
    if token == "complex":
        return "complex<*>"
    if token == "fp8":
        return "f8*"
    return token


def _types_near(clause: str, start: int, end: int) -> tuple[str, ...]:
    """The element types a figure at [start, end) of ``clause`` is about: those the clause
    names before it, else one named right after it (``2 ulp off on f16``)."""
    before = [m.group(1) for m in _TYPE.finditer(clause[:start])]
    if not before:
        after = clause[end:]
        stop = min([i for i in (after.find("("), after.find(","), 24) if i >= 0])
        before = [m.group(1) for m in _TYPE.finditer(after[:stop])]
    return tuple(dict.fromkeys(_type_pattern(t) for t in before))


def claims(reason: str) -> list[Claim]:
    """The error figures and non-finite mentions of a reason (see the module docstring)."""
    out: list[Claim] = []
    for clause in _CLAUSE.split(reason):
        figures = []
        for m in _FIGURE.finditer(clause):
            word = (m.group("word") or "").lower()
            low, high = float(m.group("low")), m.group("high")
            approx = bool(m.group("approx"))
            figures.append((m, word, low, None if high is None else float(high), approx))
        stated_max = any(w in _MAX_WORDS or h is not None for _, w, _, h, _ in figures)
        for m, word, low, high, approx in figures:
            types = _types_near(clause, m.start(), m.end())
            unit = _UNITS[m.group("unit").lower()]
            text = m.group(0).strip()
            if high is not None:             # a range: both ends stated
                out.append(Claim(text, "error", types, unit, low, high, not approx))
            elif word in _MAX_WORDS:
                out.append(Claim(text, "error", types, unit, None, low, not approx))
            elif word in _MIN_WORDS:
                out.append(Claim(text, "error", types, unit, low, None))
            elif stated_max:                 # an example beside a stated maximum
                out.append(Claim(text, "error", types, unit, low, None))
            else:                            # the divergence's size, about
                out.append(Claim(text, "error", types, unit, low, low, False))
        for m in _NONFINITE.finditer(clause):
            types = _types_near(clause, m.start(), m.end())
            out.append(Claim(m.group(0), "nonfinite", types))
            break                            # one per clause
    return out


def holds_nonfinite(type_key: str | None) -> bool:
    """Can a finding of ``type_key`` (``f32->f4E2M1FN``: either side) involve inf or NaN?
    Not where every side is a type without both (f4E2M1FN, the f6 types, integers): a
    reason of such an entry that speaks of NaN speaks of the exact mathematics (``rsqrt(-2)
    has no real value``), which no witness can show. Unknown names and patterns: yes."""
    if type_key is None:
        return True
    from conformance.core.types import element_type
    for side in type_key.split("->"):
        try:
            et = element_type(side)
        except Exception:  # noqa: BLE001 - a pattern (f8*) or a name this tree lacks
            return True
        if et.is_complex or et.has_inf or et.has_nan:
            return True
    return False


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _where(path: str | None, e) -> str:
    return f"{path or 'expectations'}: expectations[{e.index}] {e.op} {e.where} {e.cls}"


def check(gate, expectations) -> list[str]:
    """The claims of the reasons of the entries ``gate`` used (:func:`claims`) that its
    records refute, one line each (see the module docstring)."""
    by_entry: dict[int, list[dict]] = {}
    for item in gate.expected:
        by_entry.setdefault(item["entry"], []).append(item)
    depths = gate.depths
    out = []
    for e in expectations.entries:
        items = by_entry.get(e.index)
        if not items:
            continue
        judged = bool(depths) and all(e.judged_at(d) for d in depths)
        for c in claims(e.reason):
            mine = [i for i in items if c.about(i.get("element_type"))]
            if not mine:
                continue
            line = _check_one(c, mine, judged)
            if line:
                out.append(f"{_where(expectations.path, e)}: reason says {c.text!r}"
                           f"{' of ' + ', '.join(c.types) if c.types else ''}; {line}")
    return out


def _check_one(c: Claim, items: list[dict], judged: bool) -> str | None:
    """What the findings ``items`` (one entry's, of the claim's types) show against
    claim ``c``, where they refute it; None where they agree or do not measure it."""
    shown = ", ".join(sorted({str(i.get("element_type") or i.get("rule")) for i in items}))
    if c.kind == "nonfinite":
        items = [i for i in items if holds_nonfinite(i.get("element_type"))]
        measured = [i for i in items if i.get("measured") and i.get("witnessed")]
        if measured and len(measured) == len(items) \
                and not any(int(i.get("nonfinite") or 0) for i in measured):
            cases = sum(int(i["witnessed"]) for i in measured)
            return (f"no witness of the records involves inf or NaN ({cases} case(s), "
                    f"{shown})")
        return None
    worsts = [i.get("worst") for i in items
              if i.get("unit") == c.unit and i.get("worst") is not None]
    if not worsts:
        return None
    worst = max(float(w) for w in worsts)
    if c.high is not None and worst > c.high * (1 if c.exact_high else FACTOR):
        return f"the records' worst is {_fmt(worst)} {c.unit} ({shown})"
    if judged and c.low is not None and c.low > worst * FACTOR:
        return f"the records' worst is only {_fmt(worst)} {c.unit} ({shown})"
    return None


#: the classes whose ``error_at_most`` is in each unit (compare.class_errors)
_UNIT_CLASSES = {"ulp": ("accuracy", "value"), "eps": ("accuracy", "value"),
                 "bound": ("bound", "precision", "subnormal_flush")}


def check_static(expectations) -> list[str]:
    """Reasons that contradict their own entry's ``looks_like``, one line each: a figure
    beyond ``error_at_most`` (the entry would not waive what its reason describes), or inf
    or NaN spoken of where ``nonfinite`` is false. Only claims about one of the entry's
    element types count."""
    out = []
    for e in expectations.entries:
        look = dict(e.looks_like)
        if not look:
            continue
        for c in claims(e.reason):
            if not any(c.about(t) for t in e.element_types) and "*" not in e.element_types:
                continue
            line = None
            if c.kind == "nonfinite" and look.get("nonfinite") is False \
                    and any(holds_nonfinite(t) for t in e.element_types
                            if t == "*" or c.about(t)):
                line = "looks_like says no witness involves inf or NaN (nonfinite: false)"
            elif c.kind == "error" and "error_at_most" in look \
                    and e.cls in _UNIT_CLASSES[c.unit]:
                at_most = float(look["error_at_most"])
                least = c.low if c.low is not None else c.high
                if least is not None and least > at_most:
                    line = (f"looks_like.error_at_most is {_fmt(at_most)}: the entry waives "
                            "nothing that large")
            if line:
                out.append(f"{_where(expectations.path, e)}: reason says {c.text!r}"
                           f"{' of ' + ', '.join(c.types) if c.types else ''}; {line}")
    return out

