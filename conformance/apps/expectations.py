"""Expectations: the divergences a backend is known to have, so that CI fails only on
new ones (WPT's expectation files, WebGPU CTS expectation lists, array-api-tests'
xfails).

A file is YAML::

    backend: jax                      # optional: the backend the file is for
    expectations:
      - op: multiply                  # an op (fnmatch patterns work too: "shift_*")
        element_type: [f32, bf16]     # type keys, one or a list: "f32", "si8->f32"
        class: subnormal_flush        # a divergence class ("*" or a glob works too)
        when: {platform: cpu}         # optional: must match the backend's describe()
        reason: XLA on CPU flushes subnormals to zero (FTZ/DAZ)
        link: https://github.com/openxla/xla/issues/...
      - op: sign
        rule: I1                      # an invalid program the backend runs
        class: accepted_invalid
        reason: jax.lax.sign accepts unsigned integers
      - op: divide
        rule: example-0               # a spec example that fails
        class: fail
        reason: ...

Every entry needs ``op``, ``class`` and ``reason``; ``element_type`` (default ``'*'``)
and ``rule`` take one pattern or a list. ``depth`` (one of quick, default, deep, or a
list) says at which ``--depth`` the divergence was seen (``expectations update`` writes
it): each depth draws other signatures and shapes, so a run at another depth does not
judge the entry (it is "not exercised" there, never stale); it still waives what it
matches. An entry without ``depth`` is judged at every depth. A divergence is *expected* when an entry
matches its backend, op, element type (or rule) and class; the first such entry waives
it. An entry that
matched nothing in a run that exercised what it covers (its backend, op and element
type or rule; ``when`` conditions included) is *stale*: the divergence is gone (or
never was), and the entry should go. Entries for what the run did not exercise
(filtered out by ``--ops``/``--types``, another platform, another depth than the entry's)
are "not exercised".

``looks_like`` says what the known divergence looks like, so that another bug of the same
op, element type and class is not waived: ``failing: [NAME, ...]`` names the statistical
tests of a property verdict (the signature records' ``statistics``) that mark it; every
signature record of the finding must fail one of them (jax-cpu's rng entry: XLA's values
outside [a, b) fail 'UNIFORM values in [a, b)', and Kolmogorov-Smirnov beside it; a skewed
generator fails Kolmogorov-Smirnov alone and is unexpected). ``error_at_most: X`` is the
largest error the known divergence shows, in the unit its class's verdict measures (ULPs
for ``accuracy`` and float ``value`` classes, eps for ``rel_eps`` verdicts, a fraction of
the bound for ``bound``/``precision`` classes: the signature records' ``class_errors``):
a finding whose worst witness is further off (f64 tanh off by thousands of ULPs where the
known shortfall is a few) is not waived. ``nonfinite: true|false`` says whether the
witnesses involve an infinity or NaN (an input, the oracle's result or the backend's):
``false`` waives only findings none of whose cases does, ``true`` only findings all of
whose cases do. A finding must fit every key given; one whose records do not carry what
a key measures (older files) does not fit it. ``expectations update`` writes looks_like
for the broad classes (:data:`BROAD_CLASSES`), and ``expectations check`` names the
entries of those classes without one (``LOOKS_LIKE``; ``--strict`` fails on them).

A reason says what the divergence is, and its figures are claims the records can refute
(:mod:`conformance.apps.reason_claims`): ``87-103 ulp``, ``up to 50 ulp``, ``worst 187
bounds`` against the worst error of the findings the entry waived (their ``class_errors``,
in the class's unit), and a mention of inf or NaN against whether any witness involves
one. ``expectations check`` prints a ``CLAIM`` line for each claim the run's records (or
the entry's own ``looks_like``) refute, ``--strict`` fails on them, and the shipped-gate
tests check the reasons of the entries each quick jax run used: a reason cannot drift
from the records unnoticed (issue 32 item 7: power's said a subnormal base reads as zero,
"0 or inf", where every witness was finite; log1p f64's said "up to ~50 ulp" where the
records showed 87-103).

An entry is *broad* when a pattern in it names more than the run matched: an op glob
that matched one op of those it names, a ``'*'`` element type that matched two of nine
types, a class wildcard that matched one class (:func:`audit`). Such an entry would
waive a new divergence behind an old reason; ``conformance expectations check
--strict`` fails on it and prints the narrow entries to replace it with, and
``conformance expectations update`` writes only narrow entries: an exact op and class,
with the exact element types (or rules) the run saw.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import functools
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from conformance.checking.compare import DIVERGENCES


class ExpectationsError(ValueError):
    """A malformed expectations file: the message names the file and the entry."""


_KEYS = {"op", "element_type", "rule", "class", "when", "reason", "link", "backend", "program",
         "depth", "looks_like"}
#: what an entry's ``looks_like`` may say about the divergence it waives
_LOOKS = {"failing", "error_at_most", "nonfinite"}
#: classes whose entries could waive many different bugs of one op and type: an entry of
#: one of them should say what its divergence looks like (``check`` flags it)
BROAD_CLASSES = ("property", "accuracy", "bound", "value")
_CLASSES = set(DIVERGENCES) | {"fail"}     # "fail": a spec example that fails


def is_pattern(text: str) -> bool:
    """Whether ``text`` is an fnmatch pattern (``*``, ``?``, ``[...]``), not one name."""
    return any(c in text for c in "*?[")


@functools.lru_cache(maxsize=1)
def program_patterns() -> tuple[str, ...]:
    """The program generator's pattern names (``a*b+c``, ``x+0``, ...): names, even
    those with a ``*`` in them."""
    from conformance.generators.programs import PATTERNS
    return tuple(PATTERNS)


def _program_matches(names: tuple[str, ...], patterns: Iterable[str]) -> bool:
    """Does an entry's ``program:`` (``names``) match a finding of a program whose
    operation at fault belongs to ``patterns``? ``'*'`` matches any program finding,
    ``none`` one whose op belongs to no pattern; a pattern name matches itself only
    (``a*b+c`` is a name, not a glob)."""
    patterns = tuple(p for p in patterns if p)
    for n in names:
        if n == "*":
            return True
        if n == "none":
            if not patterns:
                return True
            continue
        if n in program_patterns():
            if n in patterns:
                return True
        elif any(fnmatch.fnmatchcase(p, n) for p in patterns):
            return True
    return False


def _any(value: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _show(items: tuple[str, ...]) -> str:
    return items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"


@dataclasses.dataclass(frozen=True)
class Expectation:
    op: str
    cls: str
    reason: str
    element_types: tuple[str, ...] = ("*",)
    rules: tuple[str, ...] | None = None     # an entry for invalid rules or spec examples
    when: tuple[tuple[str, str], ...] = ()
    link: str | None = None
    backend: str | None = None
    index: int = 0                       # position in the file, for messages
    #: an entry for programs (``conformance programs``): the generator patterns the
    #: operation at fault belongs to (``'*'``: any program); None: a single-op entry
    programs: tuple[str, ...] | None = None
    #: the depths (``--depth``) the divergence was seen at: only a run at one of them
    #: judges whether the entry is stale; None: every run does
    depths: tuple[str, ...] | None = None
    #: what the known divergence looks like (:meth:`fits`): ``failing``, the names of the
    #: statistical tests a property verdict runs (the signature records' ``statistics``)
    #: that mark the known divergence: every signature record of the finding must fail
    #: one of them (others may fail beside it, as its consequence); a divergence of the
    #: same op, type and class whose record fails none of them (another bug: a skewed
    #: generator fails only Kolmogorov-Smirnov) is not waived; ``error_at_most``: the
    #: worst error of the finding's witnesses (records' ``class_errors``) must be at most
    #: this; ``nonfinite``: whether every (true) or no (false) witness involves inf/NaN
    looks_like: tuple[tuple[str, Any], ...] = ()

    def fits(self, item: Mapping[str, Any] | None) -> bool:
        """Does the finding ``item`` (:func:`findings`: its records' ``failing`` sets) look
        like what this entry describes? True without ``looks_like``, or where no finding
        is given (``None``: program and corpus gates)."""
        if not self.looks_like or item is None:
            return True
        look = dict(self.looks_like)
        if "failing" in look:
            marks = set(look["failing"])
            sets = item.get("failing") or [()]
            if not all(marks & set(names) for names in sets):
                return False
        if "error_at_most" in look:
            worst = item.get("worst")
            if worst is None or not item.get("measured", False) \
                    or not float(worst) <= float(look["error_at_most"]):
                return False
        if "nonfinite" in look:
            if not item.get("measured", False):
                return False
            n, cases = int(item.get("nonfinite") or 0), int(item.get("witnessed") or 0)
            if look["nonfinite"] and (not cases or n != cases):
                return False
            if not look["nonfinite"] and n:
                return False
        return True

    @property
    def element_type(self) -> str:
        """The element types as written: ``f32`` or ``[f32, bf16]`` (for messages)."""
        return _show(self.element_types)

    @property
    def rule(self) -> str | None:
        """The rules as written (``I1``, ``[C2, C3]``), None for an element-type entry."""
        return None if self.rules is None else _show(self.rules)

    @property
    def where(self) -> str:
        return self.rule if self.rules is not None else self.element_type

    def matches(self, backend: str, info: Mapping[str, Any], op: str, cls: str,
                element_type: str | None = None, rule: str | None = None,
                patterns: Iterable[str] | None = None) -> bool:
        if self.cls != "*" and not fnmatch.fnmatchcase(cls, self.cls):
            return False
        return self.covers(backend, info, op, element_type, rule, patterns)

    def judged_at(self, depth: str | None) -> bool:
        """Does a run at ``depth`` judge this entry (None: a run of unknown depth does)?"""
        return depth is None or self.depths is None or depth in self.depths

    def covers(self, backend: str, info: Mapping[str, Any], op: str,
               element_type: str | None = None, rule: str | None = None,
               patterns: Iterable[str] | None = None, depth: str | None = None) -> bool:
        """Could this entry match a divergence of this backend, op and element type (or
        rule)? An entry is stale only if a run exercised something it covers.
        ``patterns`` (a program's finding: the patterns its operation belongs to) is
        given for programs only; a program entry covers nothing else. ``depth``: the
        run's; an entry seen at other depths only covers nothing there."""
        if not self.judged_at(depth):
            return False
        if self.programs is not None and (patterns is None
                                          or not _program_matches(self.programs, patterns)):
            return False
        if self.backend and not fnmatch.fnmatchcase(backend, self.backend):
            return False
        if not fnmatch.fnmatchcase(op, self.op):
            return False
        if rule is not None or self.rules is not None:
            if self.rules is None or rule is None or not _any(rule, self.rules):
                return False
        elif element_type is not None and not _any(element_type, self.element_types):
            return False
        return all(fnmatch.fnmatchcase(str(info.get(k, "")), v) for k, v in self.when)

    def is_narrow(self) -> bool:
        """No pattern in op, class, element types or rules: it names what it waives."""
        names = (self.op, self.cls, *(self.rules if self.rules is not None
                                      else self.element_types),
                 *(n for n in self.programs or () if n not in program_patterns()))
        return not any(is_pattern(n) for n in names)

    def flow(self) -> str:
        """The entry on one line, without its reason and link: ``{op: atan2,
        element_type: [bf16, f32], class: nan}``."""
        d = {k: v for k, v in self.to_yaml().items() if k not in ("reason", "link")}
        return yaml.dump(d, Dumper=_Dumper, default_flow_style=True, width=1 << 16,
                         sort_keys=False).strip()

    def to_yaml(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op}
        if self.backend:
            d["backend"] = self.backend
        if self.programs is not None:
            d["program"] = self.programs[0] if len(self.programs) == 1 else _Flow(self.programs)
        if self.rules is not None:
            d["rule"] = self.rules[0] if len(self.rules) == 1 else _Flow(self.rules)
        else:
            d["element_type"] = (self.element_types[0] if len(self.element_types) == 1
                                 else _Flow(self.element_types))
        d["class"] = self.cls
        if self.depths is not None:
            d["depth"] = self.depths[0] if len(self.depths) == 1 else _Flow(self.depths)
        if self.when:
            d["when"] = _FlowMap(self.when)
        if self.looks_like:
            d["looks_like"] = _FlowMap(tuple(
                (k, _Flow(tuple(v)) if isinstance(v, (list, tuple)) else v)
                for k, v in self.looks_like))
        d["reason"] = self.reason
        if self.link:
            d["link"] = self.link
        return d


@dataclasses.dataclass
class Expectations:
    entries: list[Expectation]
    backend: str | None = None
    path: str | None = None
    header: str = ""                     # the file's leading comment lines (kept on update)

    def for_backend(self, backend: str) -> list[Expectation]:
        if self.backend and not fnmatch.fnmatchcase(backend, self.backend):
            return []
        return self.entries

    def match(self, backend: str, info: Mapping[str, Any], op: str, cls: str,
              element_type: str | None = None, rule: str | None = None,
              item: Mapping[str, Any] | None = None) -> Expectation | None:
        """The first entry that matches (and, given the finding ``item``, whose
        ``looks_like`` it fits: :meth:`Expectation.fits`)."""
        for e in self.for_backend(backend):
            if e.matches(backend, info, op, cls, element_type, rule) and e.fits(item):
                return e
        return None


#: Where the maintained expectations files ship (package data of ``conformance.apps``).
SHIPPED_DIR = "expectations_files"


def shipped_expectations() -> dict[str, Any]:
    """The expectations files shipped with the suite, by short name (``jax-cpu``):
    name -> a readable resource (importlib.resources), from a checkout or a wheel."""
    from importlib import resources
    folder = resources.files("conformance.apps").joinpath(SHIPPED_DIR)
    try:
        items = list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):    # pragma: no cover - broken install
        return {}
    return {item.name[:-len(".yaml")]: item for item in sorted(items, key=lambda i: i.name)
            if item.name.endswith(".yaml") and item.is_file()}


def is_shipped_name(text: str) -> bool:
    """``jax-cpu`` names a shipped file; ``./jax-cpu.yaml``, ``dir/x`` or ``x.yaml`` a path."""
    return ("/" not in text and "\\" not in text and not text.endswith((".yaml", ".yml"))
            and text not in (".", ".."))


def resolve_expectations(name: "str | Path") -> "Path | Any":
    """A path as given, or the shipped file a short name names (ExpectationsError, one
    line listing the shipped names, for an unknown one)."""
    if isinstance(name, Path) or not is_shipped_name(str(name)):
        return Path(name)
    shipped = shipped_expectations()
    if str(name) not in shipped:
        raise ExpectationsError(
            f"{name!r}: no shipped expectations file of that name (shipped: "
            f"{', '.join(shipped) or 'none'}); a file of your own is named by its path, "
            "e.g. ./my-backend.yaml")
    return shipped[str(name)]


def load_expectations(path: "str | Path") -> Expectations:
    """Read and check an expectations file (ExpectationsError names file and entry).

    ``path`` is a file's path, or the short name of a shipped file (``jax-cpu``: no
    ``/`` and no ``.yaml``; see :func:`shipped_expectations`).
    """
    source = resolve_expectations(path)
    path = source if isinstance(source, Path) else Path(str(path))
    try:
        text = source.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except OSError as e:
        raise ExpectationsError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ExpectationsError(f"{path}: not a text file (not UTF-8)") from None
    except yaml.YAMLError as e:
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise ExpectationsError(f"{path}: not valid YAML: {problem}") from None
    except RecursionError:
        raise ExpectationsError(f"{path}: not valid YAML: nested too deeply") from None
    if data is None:
        raise ExpectationsError(f"{path}: empty (a file that expects no divergence says "
                                "'expectations: []')")
    if isinstance(data, list):
        data = {"expectations": data}
    if not isinstance(data, dict) or "expectations" not in data \
            or not isinstance(data["expectations"] or [], list):
        raise ExpectationsError(f"{path}: expected a mapping with an 'expectations' list")
    unknown = set(data) - {"backend", "expectations"}
    if unknown:
        raise ExpectationsError(f"{path}: unknown key(s) {sorted(map(str, unknown))}; "
                                "allowed: backend, expectations")
    if not isinstance(data.get("backend") or "", str):
        raise ExpectationsError(f"{path}: 'backend' must be a backend name (a pattern)")
    entries = []
    for i, raw in enumerate(data.get("expectations") or []):
        where = f"{path}: expectations[{i}]"
        if not isinstance(raw, dict):
            raise ExpectationsError(f"{where}: expected a mapping")
        unknown = set(raw) - _KEYS
        if unknown:
            raise ExpectationsError(f"{where}: unknown key(s) {sorted(map(str, unknown))}; allowed: "
                                    f"{sorted(_KEYS)}")
        for key in ("op", "class", "reason"):
            if not raw.get(key):
                raise ExpectationsError(f"{where}: '{key}' is required")
        cls = str(raw["class"])
        if cls != "*" and cls not in _CLASSES:
            raise ExpectationsError(f"{where}: class {cls!r} is not a divergence class; "
                                    f"known: {', '.join(sorted(_CLASSES))}")
        op = str(raw["op"])
        ops = _check_op_pattern(op, where)
        if raw.get("rule") is not None and raw.get("element_type") is not None:
            raise ExpectationsError(f"{where}: give 'element_type' (a divergence of generated "
                                    "cases) or 'rule' (an invalid program or spec example), "
                                    "not both")
        programs = None
        if raw.get("program") is not None:
            if raw.get("rule") is not None:
                raise ExpectationsError(f"{where}: 'program' (a divergence of generated "
                                        "programs) and 'rule' cannot be combined")
            programs = _names(raw["program"], "program", where)
            for n in programs:
                if n not in ("*", "none", MODULE_PATTERN) and \
                        n not in program_patterns() and not any(
                        fnmatch.fnmatchcase(p, n) for p in program_patterns()):
                    raise ExpectationsError(
                        f"{where}: program {n!r} is not a pattern of the program generator; "
                        f"known: {', '.join(program_patterns())} (or 'none': in no pattern; "
                        "'*': any program; 'module': a module of `conformance check`)")
        rules = None
        if raw.get("rule") is not None:
            rules = _names(raw["rule"], "rule", where)
            _check_names(rules, ops, _rules_of, "rule", op, where)
            element_types: tuple[str, ...] = ("*",)
        else:
            element_types = _names(raw.get("element_type", "*"), "element_type", where)
            _check_names(element_types, ops, type_keys, "element type", op, where)
        when = raw.get("when") or {}
        if not isinstance(when, dict):
            raise ExpectationsError(f"{where}: 'when' must be a mapping, e.g. {{platform: cpu}}")
        if not isinstance(raw.get("backend") or "", str):
            raise ExpectationsError(f"{where}: 'backend' must be a backend name (a pattern)")
        depths = None
        if raw.get("depth") is not None:
            from conformance.checking.plan import DEPTHS
            named = _names(raw["depth"], "depth", where)
            unknown = [d for d in named if d not in DEPTHS]
            if unknown:
                raise ExpectationsError(f"{where}: depth {unknown[0]!r} is not a depth; known: "
                                        f"{', '.join(DEPTHS)}")
            depths = _in_depth_order(named)
        looks = raw.get("looks_like") or {}
        if not isinstance(looks, dict) or set(looks) - _LOOKS:
            raise ExpectationsError(f"{where}: 'looks_like' is a mapping of "
                                    f"{', '.join(sorted(_LOOKS))}")
        if "failing" in looks:
            looks["failing"] = _names(looks["failing"], "looks_like.failing", where)
        if "error_at_most" in looks:
            x = looks["error_at_most"]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not x >= 0 \
                    or x == float("inf"):
                raise ExpectationsError(f"{where}: 'looks_like.error_at_most' must be a finite "
                                        "number >= 0 (the largest error the divergence shows, "
                                        "in the unit of its class: ULPs, eps or a fraction of "
                                        "the bound)")
        if "nonfinite" in looks and not isinstance(looks["nonfinite"], bool):
            raise ExpectationsError(f"{where}: 'looks_like.nonfinite' must be true or false "
                                    "(whether the divergence's cases involve inf or NaN)")
        entries.append(Expectation(
            op=op, cls=cls, reason=str(raw["reason"]),
            element_types=element_types, rules=rules,
            when=tuple(sorted((str(k), str(v)) for k, v in when.items())),
            link=raw.get("link"), backend=raw.get("backend"), index=i, programs=programs,
            depths=depths, looks_like=tuple(sorted(looks.items()))))
    return Expectations(entries, data.get("backend"), str(path), _header(text))


def _in_depth_order(depths: Iterable[str]) -> tuple[str, ...]:
    """Depths as ``DEPTHS`` orders them (quick, default, deep), each once."""
    from conformance.checking.plan import DEPTHS
    order = list(DEPTHS)
    return tuple(sorted(set(depths), key=lambda d: (order.index(d) if d in order
                                                    else len(order), d)))


def _header(text: str) -> str:
    """The comment lines a file starts with."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines) + "\n" if lines else ""


def _names(value: Any, key: str, where: str) -> tuple[str, ...]:
    """One name or pattern, or a non-empty list of them."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, (str, int, float)) and str(v).strip()
                            for v in items):
        raise ExpectationsError(f"{where}: '{key}' must be a name or a list of names")
    return tuple(dict.fromkeys(str(v).strip() for v in items))


def _check_op_pattern(pattern: str, where: str) -> list[str]:
    from conformance.specs import op_names
    ops = [op for op in op_names() if fnmatch.fnmatchcase(op, pattern)]
    if not ops:
        raise ExpectationsError(f"{where}: op {pattern!r} matches no op")
    return ops


def _check_names(names: tuple[str, ...], ops: list[str], known, what: str, op: str,
                 where: str) -> None:
    """Each element type (or rule) must name one that some op of the entry has: a typo
    (``complex64``, ``c2``) would otherwise waive nothing, silently."""
    def names_of(o: str) -> tuple[str, ...] | None:
        try:
            return known(o)
        except Exception:  # noqa: BLE001 - a spec that does not load is the run's to report
            return None
    table = [names_of(o) for o in ops]
    if any(t is None for t in table):
        return
    for name in names:
        if not any(_any(k, (name,)) for t in table for k in t):
            raise ExpectationsError(f"{where}: {what} {name!r} matches no {what} of "
                                    f"{op} (see `conformance show {ops[0]}`)")


@functools.lru_cache(maxsize=None)
def type_keys(op: str) -> tuple[str, ...]:
    """The type keys (matrix columns) of an op: ``f32``, ``si8->f32``, ..."""
    from conformance.specs import binding_key, load_spec
    return tuple(binding_key(b) for b in load_spec(op).type_bindings())


@functools.lru_cache(maxsize=None)
def _rules_of(op: str) -> tuple[str, ...]:
    """The rules an invalid case can break (C1, I1, ...) and the spec examples of an op."""
    from conformance.specs import load_spec
    from conformance.specs.validity import checks
    spec = load_spec(op)
    return tuple([c.id for c in checks(spec)]
                 + [f"example-{i}" for i in range(len(spec.data.get("examples") or []))])


# ---------------------------------------------------------------------------
# Applying expectations to a run's records
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class Gate:
    """What a run's divergences are, against an expectations file."""

    unexpected: list[dict]               # one per (backend, op, type/rule, class) finding
    expected: list[dict]                 # ... each with the reason, link and entry index
    stale: list[Expectation]
    not_exercised: list[Expectation]     # entries whose op the run did not cover
    info: dict[str, dict] = dataclasses.field(default_factory=dict)   # backends' describe()
    exercised: set[tuple] = dataclasses.field(default_factory=set)    # see findings()
    #: the depths (of the runs' headers; None: not said) each exercised tuple and each
    #: finding (by :func:`finding_key`) was seen at
    exercised_at: dict[tuple, set] = dataclasses.field(default_factory=dict)
    seen_at: dict[tuple, set] = dataclasses.field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.unexpected

    @property
    def depths(self) -> set:
        """The depths of the runs gated (None among them: a run that did not say)."""
        return {d for ds in self.exercised_at.values() for d in ds}


def finding_key(item: Mapping[str, Any]) -> tuple:
    return (item["backend"], item["op"], item["element_type"], item["rule"], item["class"])


def findings(records: Iterable[dict]) -> tuple[list[dict], dict[str, dict], set[tuple]]:
    """The run's distinct divergences: (backend, op, type_key or rule, class) with counts;
    plus the backends' describe() info and what the run exercised: (backend, op,
    type_key, rule) for every signature, invalid rule and example it ran."""
    items, info, exercised, _, _ = _scan(records)
    return items, info, exercised


def _scan(records: Iterable[dict]):
    """:func:`findings`, and the depths each exercised tuple and each finding was seen
    at (records follow their run's header; several runs' records may follow each other,
    as ``expectations update --also`` reads them)."""
    found: dict[tuple, dict] = {}
    info: dict[str, dict] = {}
    ops: set[tuple] = set()
    ops_at: dict[tuple, set] = {}
    seen_at: dict[tuple, set] = {}
    depth = None

    def exercised(t: tuple) -> None:
        ops.add(t)
        ops_at.setdefault(t, set()).add(depth)

    def add(backend, op, cls, n, element_type=None, rule=None, record=None) -> None:
        _add(found, backend, op, cls, n, element_type, rule)
        seen_at.setdefault((backend, op, element_type, rule, cls), set()).add(depth)
        if record is not None:
            _witness(found[(backend, op, element_type, rule, cls)], record)

    for r in records:
        kind = r.get("kind")
        if kind == "run":
            info = {b.get("name"): b for b in r.get("backends") or [] if isinstance(b, dict)}
            depth = r.get("depth")
        elif kind == "signature":
            exercised((r.get("backend"), r.get("op"), r.get("type_key"), None))
            for cls, n in (r.get("counts") or {}).items():
                if cls in DIVERGENCES and n:
                    add(r["backend"], r["op"], cls, n, element_type=r.get("type_key"),
                        record=r)
            if r.get("outcome") in DIVERGENCES and not r.get("counts"):
                add(r["backend"], r["op"], r["outcome"], 1, element_type=r.get("type_key"))
        elif kind == "invalid":
            exercised((r.get("backend"), r.get("op"), None, r.get("rule")))
            if r.get("outcome") in ("accepted_invalid", "crash", "timeout"):
                add(r["backend"], r["op"], r["outcome"], 1, rule=r.get("rule"))
        elif kind == "example":
            rule = f"example-{r.get('index', 0)}"
            exercised((r.get("backend"), r.get("op"), None, rule))
            if r.get("outcome") not in ("pass", "unsupported"):
                add(r["backend"], r["op"], r.get("outcome"), 1, rule=rule)
    return list(found.values()), info, ops, ops_at, seen_at


def _add(found, backend, op, cls, n, element_type=None, rule=None) -> None:
    key = (backend, op, element_type, rule, cls)
    item = found.setdefault(key, {"backend": backend, "op": op, "element_type": element_type,
                                  "rule": rule, "class": cls, "cases": 0})
    item["cases"] += n


def _witness(item: dict, record: Mapping[str, Any]) -> None:
    """What a finding looks like, from its signature records (``looks_like``): per
    record, the names of the statistical tests that failed in it (``failing``: a list of
    sorted lists, one per record); from the records' ``class_errors`` of the finding's
    class, ``worst`` (the largest error of its witnesses, None where none is measured),
    ``unit``, ``witnessed`` (cases) and ``nonfinite`` (of those, the cases involving inf or
    NaN); ``measured``: every record of the finding carried its class's entry."""
    names = sorted(str(name) for name, st in (record.get("statistics") or {}).items()
                   if isinstance(st, dict) and st.get("failed"))
    if names not in item.setdefault("failing", []):
        item["failing"].append(names)
    ce = record.get("class_errors")
    d = ce.get(item["class"]) if isinstance(ce, Mapping) else None
    if not isinstance(d, Mapping):
        item["measured"] = False
        return
    item.setdefault("measured", True)
    item["witnessed"] = item.get("witnessed", 0) + int(d.get("cases") or 0)
    item["nonfinite"] = item.get("nonfinite", 0) + int(d.get("nonfinite") or 0)
    item.setdefault("unit", d.get("unit"))
    w = d.get("worst")
    try:
        w = None if w is None else float(w)
    except (TypeError, ValueError):
        w = None
    if w is not None and w == w:
        item["worst"] = w if item.get("worst") is None else max(item["worst"], w)
    else:
        item.setdefault("worst", None)


def _split(items: list[dict], match) -> tuple[list[dict], list[dict], set[int]]:
    """(expected, unexpected, indices of the entries used): each finding with the entry
    ``match(item)`` returns (its reason, link and index added), or unexpected."""
    used: set[int] = set()
    expected, unexpected = [], []
    for item in items:
        e = match(item)
        if e is None:
            unexpected.append(item)
        else:
            used.add(e.index)
            expected.append({**item, "reason": e.reason, "link": e.link, "entry": e.index})
    return expected, unexpected, used


def gate(records: Iterable[dict], expectations: Expectations | None) -> Gate:
    """Split a run's divergences into expected and unexpected; find stale entries (only
    among those the run judges: an entry seen at other depths than the run's is not
    exercised by it)."""
    items, info, exercised, exercised_at, seen_at = _scan(records)
    expected, unexpected, used = _split(items, lambda item: expectations.match(
        item["backend"], info.get(item["backend"], {}), item["op"], item["class"],
        item["element_type"], item["rule"], item) if expectations else None)
    stale, not_exercised = [], []
    for e in (expectations.entries if expectations else []):
        if e.index in used:
            continue
        if _exercised(e, info, exercised, at=exercised_at):
            stale.append(e)
        else:
            not_exercised.append(e)
    return Gate(unexpected, expected, stale, not_exercised, info, exercised, exercised_at,
                seen_at)


def corpus_findings(entries: Iterable[dict]) -> list[dict]:
    """The distinct divergences of a fuzz campaign's corpus (its ``corpus/index.jsonl``
    entries, conformance.apps.fuzz): (backend, op, type key or rule, class), as
    :func:`findings` gives them for a run's records, ``cases`` counting the corpus entries
    (signature shapes). An entry's ``where`` is the type key, ``!RULE`` for an invalid
    program or ``example-N`` for a spec example."""
    found: dict[tuple, dict] = {}
    for e in entries:
        where = str(e.get("where"))
        backend, op, cls = e.get("backend"), e.get("op"), e.get("class")
        if where.startswith("!"):
            _add(found, backend, op, cls, 1, rule=where[1:])
        elif where.startswith("example-"):
            _add(found, backend, op, cls, 1, rule=where)
        else:
            _add(found, backend, op, cls, 1, element_type=where)
    return list(found.values())


def corpus_gate(entries: Iterable[dict], expectations: Expectations | None,
                info: Mapping[str, dict] | None = None) -> Gate:
    """:func:`gate` for a fuzz campaign's whole corpus: its divergences split into
    expected and unexpected (``info``: the backends' describe(), for ``when``). A corpus
    says nothing of what was exercised without diverging, so no entry is stale: those
    that matched nothing are ``not_exercised``."""
    info = dict(info or {})
    items = corpus_findings(entries)
    expected, unexpected, used = _split(items, lambda item: expectations.match(
        item["backend"], info.get(item["backend"], {}), item["op"], item["class"],
        item["element_type"], item["rule"]) if expectations else None)
    unused = [e for e in (expectations.entries if expectations else []) if e.index not in used]
    return Gate(unexpected, expected, [], unused, info, set())


def program_findings(records: Iterable[dict], accept: Iterable[str] = ()
                     ) -> tuple[list[dict], dict[str, dict], set[tuple]]:
    """The distinct divergences of ``program`` records (conformance programs): (backend,
    op at fault, its type key, class, fusion, the patterns the op belongs to) with the
    programs that showed it; a program that crashed, timed out or failed as a whole has
    no op at fault (op ``''``: only an entry with ``op: '*'`` names it). Also the
    backends' info and what was exercised: (backend, op, type key, patterns) for every
    operation of every program checked."""
    accept = set(accept)
    found: dict[tuple, dict] = {}
    info: dict[str, dict] = {}
    exercised: set[tuple] = set()
    for r in records:
        kind = r.get("kind")
        if kind == "run":
            info = {b.get("name"): b for b in r.get("backends") or [] if isinstance(b, dict)}
            continue
        if kind != "program" or r.get("outcome") == "unsupported":
            continue
        b = r.get("backend")
        pats = tuple(r.get("patterns") or ())
        for op, key in r.get("exercised") or []:
            exercised.add((b, op, key, pats))
        if r.get("outcome") in ("pass", "unsupported", None):
            continue
        items = [(f.get("op"), f.get("type_key"), f.get("cls"), f.get("fusion"),
                  tuple(f.get("patterns") or ())) for f in r.get("findings") or []]
        if not items:
            items = [("", None, r.get("outcome"), r.get("fusion"), pats)]
        for op, key, cls, fusion, fp in items:
            if cls in accept:
                continue
            k = (b, op, key, cls, fusion, fp)
            item = found.setdefault(k, {"backend": b, "op": op, "element_type": key,
                                        "rule": None, "class": cls, "fusion": fusion,
                                        "patterns": list(fp), "cases": 0, "ids": []})
            if not item["ids"] or item["ids"][-1] != r.get("id"):
                item["cases"] += 1
                item["ids"].append(r.get("id"))
    return list(found.values()), info, exercised


def match_program(expectations: Expectations, item: dict, info: Mapping[str, Any]
                  ) -> Expectation | None:
    """The entry that waives one program finding: a program entry (``program:``) that
    names its op, type key, class and one of its patterns; or, for a finding the same
    backend shows running the op alone (``fusion: false``: the op's own divergence, as
    single-op runs see it), a single-op entry for that op, type key and class. A
    finding the whole-program compile caused (or one not attributed) needs a program
    entry."""
    for e in expectations.for_backend(item["backend"]):
        if e.programs is not None:
            if e.matches(item["backend"], info, item["op"], item["class"],
                         item["element_type"], None, item["patterns"]):
                return e
        elif item.get("fusion") is False and e.rules is None and e.matches(
                item["backend"], info, item["op"], item["class"], item["element_type"]):
            return e
    return None


def program_gate(records: Iterable[dict], expectations: Expectations | None,
                 accept: Iterable[str] = ()) -> Gate:
    """:func:`gate` for the records of ``conformance programs``. Stale: program entries
    that matched nothing while the run checked a program holding their op and type (and
    pattern); single-op entries are never stale here (single-op runs judge them)."""
    items, info, exercised = program_findings(records, accept)
    expected, unexpected, used = _split(items, lambda item: match_program(
        expectations, item, info.get(item["backend"], {})) if expectations else None)
    stale, not_exercised = [], []
    for e in (expectations.entries if expectations else []):
        if e.index in used:
            continue
        if e.programs is not None and any(
                e.covers(b, info.get(b, {}), op, key, None, pats or ("",))
                for b, op, key, pats in exercised):
            stale.append(e)
        else:
            not_exercised.append(e)
    return Gate(unexpected, expected, stale, not_exercised, info,
                {(b, op, key, None) for b, op, key, _ in exercised})


#: the pattern a module's findings carry for program entries (``program: '*'`` names it)
MODULE_PATTERN = "module"


def module_findings(records: Iterable[dict], accept: Iterable[str] = ()
                    ) -> tuple[list[dict], dict[str, dict]]:
    """The distinct divergences of ``module`` records (conformance check), as program
    findings: an op's finding on the backend's own values (check 1) is the op's own
    (``fusion: false``: its single-op entry waives it); a finding of the whole module
    that the op alone does not show needs a program entry (``program: '*'``). A module
    whose check failed without an op (a crash of the whole module) has op ``''``."""
    from conformance.checking.modules import NOT_DIVERGING
    accept = set(accept)
    found: dict[tuple, dict] = {}
    info: dict[str, dict] = {}
    for r in records:
        kind = r.get("kind")
        if kind == "run":
            info = {b.get("name"): b for b in r.get("backends") or [] if isinstance(b, dict)}
            continue
        if kind != "module" or r.get("outcome") in NOT_DIVERGING + (None,):
            continue
        b = r.get("backend")
        items = [(f.get("op"), f.get("type_key"), f.get("cls"), False)
                 for f in r.get("op_by_op") or []]
        whole = r.get("whole") or {}
        items += [(f.get("op"), f.get("type_key"), f.get("cls"), f.get("fusion"))
                  for f in whole.get("findings") or []]
        if not items:
            items = [("", None, r.get("outcome"), None)]
        for op, key, cls, fusion in items:
            if cls in accept:
                continue
            k = (b, op, key, cls, fusion)
            item = found.setdefault(k, {"backend": b, "op": op, "element_type": key,
                                        "rule": None, "class": cls, "fusion": fusion,
                                        "patterns": [MODULE_PATTERN], "cases": 0,
                                        "ids": []})
            if r.get("id") not in item["ids"]:
                item["cases"] += 1
                item["ids"].append(r.get("id"))
    return list(found.values()), info


def module_gate(records: Iterable[dict], expectations: Expectations | None,
                accept: Iterable[str] = ()) -> Gate:
    """:func:`gate` for the records of ``conformance check``: each finding expected by
    :func:`match_program` (the op's own entry, or a program entry), or unexpected. No
    entry is stale here (single-op runs and programs runs judge them)."""
    items, info = module_findings(records, accept)
    expected, unexpected, _ = _split(items, lambda item: match_program(
        expectations, item, info.get(item["backend"], {})) if expectations else None)
    return Gate(unexpected, expected, [], list(expectations.entries if expectations else []),
                info)


def _exercised(e: Expectation, info: Mapping[str, dict], exercised: set[tuple],
               element_type: str | None = None, rule: str | None = None,
               at: Mapping[tuple, set] | None = None) -> bool:
    """Did the run exercise something entry ``e`` covers (only this element type or
    rule, when one is given), at a depth the entry was seen at (``at``: the depths each
    exercised tuple was seen at; without it, any depth)?"""
    for t in exercised:
        b, op, key, r = t
        if element_type is not None and key != element_type:
            continue
        if rule is not None and r != rule:
            continue
        if at is not None and not any(e.judged_at(d) for d in at.get(t, {None})):
            continue
        if e.covers(b, info.get(b, {}), op, key, r):
            return True
    return False


# ---------------------------------------------------------------------------
# Breadth: what each entry matched, and whether it names more than that
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class EntryAudit:
    """What one entry of an expectations file did in a run."""

    entry: Expectation
    status: str                          # used | stale | not_exercised
    matched: list[dict]                  # the findings it waived (gate items)
    broad: list[str] = dataclasses.field(default_factory=list)   # one line per wide pattern
    unused: list[str] = dataclasses.field(default_factory=list)  # listed names, exercised,
    #                                                              that matched nothing
    suggestion: list[Expectation] = dataclasses.field(default_factory=list)

    @property
    def is_broad(self) -> bool:
        return bool(self.broad)

    @property
    def ops(self) -> list[str]:
        return sorted({m["op"] for m in self.matched})

    @property
    def element_types(self) -> list[str]:
        return sorted({m["element_type"] for m in self.matched if m["element_type"]})

    @property
    def rules(self) -> list[str]:
        return sorted({m["rule"] for m in self.matched if m["rule"]})

    @property
    def classes(self) -> list[str]:
        return sorted({m["class"] for m in self.matched})

    @property
    def cases(self) -> int:
        return sum(int(m.get("cases") or 0) for m in self.matched)

    def summary(self) -> str:
        """``matched 2 ops (a, b), 1 element type (f32), 1 class (value), 7 cases``."""
        if not self.matched:
            return {"stale": "matched nothing in this run (stale)",
                    "not_exercised": "not exercised by this run"}.get(self.status, "")
        parts = [_count(self.ops, "op")]
        if self.element_types:
            parts.append(_count(self.element_types, "element type"))
        if self.rules:
            parts.append(_count(self.rules, "rule"))
        parts.append(_count(self.classes, "class", "classes"))
        return "matched " + ", ".join(parts) + f", {self.cases} case(s)"

    def as_dict(self) -> dict[str, Any]:
        """Plain data (summary.json)."""
        e = self.entry
        return {"index": e.index, "op": e.op, "where": e.where, "class": e.cls,
                "status": self.status, "ops": self.ops, "element_types": self.element_types,
                "rules": self.rules, "classes": self.classes, "cases": self.cases,
                "broad": self.broad, "unused": self.unused,
                "suggestion": [_plain(s.to_yaml()) for s in self.suggestion]}


def _plain(v: Any) -> Any:
    """An entry's YAML form as plain JSON data (flow maps as objects, flow lists as
    lists)."""
    if isinstance(v, _FlowMap):
        return {k: _plain(x) for k, x in v}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _count(items: list[str], one: str, many: str | None = None) -> str:
    shown = ", ".join(items[:8]) + (f", ... (+{len(items) - 8})" if len(items) > 8 else "")
    return f"{len(items)} {one if len(items) == 1 else (many or one + 's')} ({shown})"


def audit(g: Gate, expectations: Expectations) -> list[EntryAudit]:
    """For every entry: what it matched in the run ``g`` gated, and whether it is
    broader than that. A pattern is broad when it names something it did not match:
    an op glob naming ops with no match (counted over the ops whose element types or
    rules the entry could match), an element type (or rule) pattern naming type keys
    (rules) of the matched ops that had no match, a class wildcard naming classes with
    no match. A broad entry's suggestion is the narrow entries that waive exactly its
    matches (one per op and class, listing the element types or rules), with its
    reason, link and conditions. Listed exact names the run exercised without a match
    are ``unused`` (a part of the entry is stale)."""
    matched: dict[int, list[dict]] = {}
    for item in g.expected:
        matched.setdefault(item["entry"], []).append(item)
    stale = {e.index for e in g.stale}
    out = []
    for e in expectations.entries:
        items = matched.get(e.index, [])
        status = "used" if items else ("stale" if e.index in stale else "not_exercised")
        a = EntryAudit(e, status, items)
        if items:
            a.broad = _broad(e, items, g)
            a.unused = _unused(e, items, g)
            if a.broad:
                a.suggestion = narrow(items, e)
        out.append(a)
    return out


def _broad(e: Expectation, items: list[dict], g: Gate) -> list[str]:
    from conformance.specs import op_names
    out: list[str] = []
    by_rule = e.rules is not None
    seen: dict[str, set[str]] = {}
    for _, op, key, rule in g.exercised:
        name = rule if by_rule else key
        if name is not None:
            seen.setdefault(op, set()).add(name)

    def names_of(op: str) -> set[str]:
        """What the op's spec has (type keys or rules), and what the run exercised."""
        try:
            known = set(_rules_of(op) if by_rule else type_keys(op))
        except Exception:  # noqa: BLE001 - a spec that does not load: what the run saw
            known = set()
        return known | seen.get(op, set())
    patterns = e.rules if by_rule else e.element_types
    got_ops = {m["op"] for m in items}
    if is_pattern(e.op):
        named = [op for op in op_names() if fnmatch.fnmatchcase(op, e.op)
                 and any(_any(k, patterns) for k in names_of(op))]
        if set(named) - got_ops:
            out.append(f"op {e.op!r} matched {_count(sorted(got_ops), 'op')} of the "
                       f"{len(named)} it names")
    what = "rule" if by_rule else "element type"
    for p in patterns:
        if not is_pattern(p):
            continue
        named = {(op, k) for op in got_ops for k in names_of(op) if fnmatch.fnmatchcase(k, p)}
        got = {(m["op"], m["rule"] if by_rule else m["element_type"]) for m in items}
        got &= named
        if named - got:
            keys = sorted({k for _, k in got})
            of = (f"{len({k for _, k in named})}" if len(got_ops) == 1
                  else f"{len(named)} (op, {what}) pairs")
            out.append(f"{'rule' if by_rule else 'element_type'} {p!r} matched "
                       f"{_count(keys, what)} of the {of} it names"
                       + (f" on {_count(sorted(got_ops), 'op')}" if len(got_ops) > 1 else ""))
    if is_pattern(e.cls):
        possible = sorted(_CLASSES if by_rule else set(DIVERGENCES) - {"accepted_invalid"})
        named_cls = [c for c in possible if fnmatch.fnmatchcase(c, e.cls)]
        got_cls = sorted({m["class"] for m in items})
        if set(named_cls) - set(got_cls):
            out.append(f"class {e.cls!r} matched {_count(got_cls, 'class', 'classes')} of the "
                       f"{len(named_cls)} it names")
    return out


def _unused(e: Expectation, items: list[dict], g: Gate) -> list[str]:
    """Exact element types (rules) the entry lists, that the run exercised for one of
    its ops, and that matched nothing."""
    if len(e.rules if e.rules is not None else e.element_types) < 2:
        return []
    by_rule = e.rules is not None
    got = {m["rule"] if by_rule else m["element_type"] for m in items}
    out = []
    for name in (e.rules if by_rule else e.element_types):
        if is_pattern(name) or name in got:
            continue
        if _exercised(e, g.info, g.exercised, rule=name if by_rule else None,
                      element_type=None if by_rule else name, at=g.exercised_at):
            out.append(name)
    return out


def narrow(items: list[dict], template: Expectation | None = None,
           per_backend: bool = False,
           depths_of: "Callable[[dict], tuple[str, ...] | None] | None" = None
           ) -> list[Expectation]:
    """Narrow entries waiving exactly ``items`` (gate findings): one per op and class
    (and backend, with ``per_backend``; and depths, with ``depths_of(item)``: the depths
    an item was seen at, None where not known), listing the element types or rules
    seen; reason, link, conditions and backend from ``template``."""
    groups: dict[tuple, set[str]] = {}
    members: dict[tuple, list[dict]] = {}
    for m in items:
        by_rule = m.get("rule") is not None
        depths = depths_of(m) if depths_of is not None else None
        key = (m["backend"] if per_backend else None, m["op"], m["class"], by_rule, depths)
        groups.setdefault(key, set()).add(m["rule"] if by_rule else m["element_type"])
        members.setdefault(key, []).append(m)
    out = []
    for (backend, op, cls, by_rule, depths), names in sorted(
            groups.items(), key=lambda kv: (kv[0][1], kv[0][3], kv[0][2], str(kv[0][0]),
                                            _depth_order(kv[0][4]))):
        names_t = tuple(sorted(names, key=_name_order))
        t = template
        out.append(Expectation(
            op=op, cls=cls,
            reason=t.reason if t else "TODO: why this divergence is expected",
            element_types=("*",) if by_rule else names_t, rules=names_t if by_rule else None,
            when=t.when if t else (), link=t.link if t else None,
            backend=backend if per_backend else (t.backend if t else None), depths=depths,
            looks_like=t.looks_like if t and t.looks_like else looks_of(
                cls, members[(backend, op, cls, by_rule, depths)])))
    return out


def error_margin(worst: float) -> float:
    """The ``error_at_most`` written for a worst error seen: the next power of two at or
    above twice it. A run at another seed or depth draws other inputs, whose worst error
    of the same known divergence is a little larger or smaller; a margin of 2x to 4x
    keeps those matched (no churn of the file between seeds), while a different bug of
    the same class, off by orders of magnitude more, is not waived. A power of two keeps
    the written number short and stable under small changes of the worst."""
    import math
    if worst <= 0:
        return 0
    if not math.isfinite(4 * worst):
        return None                 # no finite power of two above it: say nothing
    x = 2.0 ** math.ceil(math.log2(2 * worst))
    return int(x) if x >= 1 else x


#: the largest ``error_at_most`` :func:`looks_of` writes: beyond 2^24 ULPs (or bounds)
#: a divergence has few correct bits left, and a bound that large would waive nearly any
#: other bug of the class too, so the entry says nothing of its error instead
MEANINGFUL_ERROR = 2 ** 24


def looks_of(cls: str, items: list[dict]) -> tuple[tuple[str, Any], ...]:
    """The ``looks_like`` that :func:`update` writes for the findings ``items`` of one
    broad class (:data:`BROAD_CLASSES`; other classes get none): ``error_at_most``
    (:func:`error_margin` of the worst, where every finding measured a finite one and
    the margin is at most :data:`MEANINGFUL_ERROR`),
    ``nonfinite`` where all or none of the witnesses involve inf/NaN (and an error is
    measured: not for integers), and for
    ``property`` the statistical tests every record failed (``failing``)."""
    if cls not in BROAD_CLASSES or not items:
        return ()
    out: dict[str, Any] = {}
    if all(i.get("measured") for i in items):
        worsts = [i.get("worst") for i in items]
        if all(w is not None and w == w and w != float("inf") for w in worsts):
            margin = error_margin(max(worsts))
            if margin is not None and margin <= MEANINGFUL_ERROR:
                out["error_at_most"] = margin
        n = sum(int(i.get("nonfinite") or 0) for i in items)
        cases = sum(int(i.get("witnessed") or 0) for i in items)
        # (only where an error is measured: integers and booleans are never inf or NaN,
        # and saying so would tell nothing of their divergence)
        if cases and n in (0, cases) and any(w is not None for w in worsts):
            out["nonfinite"] = bool(n)
    if cls == "property":
        sets = [set(names) for i in items for names in i.get("failing") or [[]]]
        common = set.intersection(*sets) if sets else set()
        if common:
            out["failing"] = tuple(sorted(common))
    return tuple(sorted(out.items()))


def without_looks_like(expectations: "Expectations") -> list[Expectation]:
    """The entries of a broad class (:data:`BROAD_CLASSES`, or a class pattern naming one)
    that do not say what their divergence looks like: each would waive any other bug of
    its op, element type and class (``expectations check`` names them: ``LOOKS_LIKE``).
    Program and module entries (``program:``) are not asked for one: their findings carry
    no per-class error yet, so :meth:`Expectation.fits` cannot use it."""
    return [e for e in expectations.entries if not e.looks_like and e.rules is None
            and e.programs is None
            and any(fnmatch.fnmatchcase(c, e.cls) for c in BROAD_CLASSES)]


def _depth_order(depths: tuple[str, ...] | None) -> tuple:
    """Entries of one op and class: those seen at every depth given first, then by depth."""
    from conformance.checking.plan import DEPTHS
    order = list(DEPTHS)
    if depths is None:
        return (0,)
    return (1, -len(depths), tuple(order.index(d) if d in order else len(order)
                                   for d in depths))


def _name_order(name: str) -> tuple:
    """Type keys in the suite's type order (i1, si4, ..., f8*, bf16, f16, f32, f64,
    complex), rules as C1 < C2 < C10."""
    from conformance.core.types import ALL_ELEMENT_TYPES
    order = {t.name: i for i, t in enumerate(ALL_ELEMENT_TYPES)}
    parts = name.split("->")
    if all(p in order for p in parts):
        return (0, tuple(order[p] for p in parts), name)
    digits = "".join(c for c in name if c.isdigit())
    return (1, name.rstrip("0123456789"), int(digits) if digits else 0, name)


def update(records: Iterable[dict], old: Expectations | None, backend: str | None = None
           ) -> list[Expectation]:
    """The entries of a file for a run's divergences (of one backend, or all), narrow:
    an exact op and class with the element types (or rules) the run saw. A divergence
    an old entry waived keeps that entry's reason, link, conditions and place in the
    file (one narrow entry per op and class that entry waived); new ones get a
    placeholder reason to fill in, at the end. Old entries the run did not exercise
    are kept as they are; old entries that matched nothing (stale) go, as does what a
    broad entry named but the run did not see.

    Each entry says the depths its divergences were seen at (``depth``: those of the
    runs' headers; one entry per op, class and set of depths). An old entry's depths
    that no run given covered stay with it: what it names and no run matched stays as
    an entry of those depths only (a quick run alone does not drop what a default run
    saw)."""
    records = list(records)
    g = gate(records, old)
    items = [i for i in [*g.expected, *g.unexpected] if not backend or i["backend"] == backend]
    backends = {i["backend"] for i in items}
    per_backend = not backend and len(backends) > 1 and not (old and old.backend)
    by_entry: dict[int | None, list[dict]] = {}
    for item in items:
        by_entry.setdefault(item.get("entry"), []).append(item)
    covered = g.depths

    def uncovered(e: Expectation | None) -> set[str]:
        if e is None or e.depths is None or None in covered:
            return set()
        return set(e.depths) - covered

    def depths_for(e: Expectation | None):
        def depths_of(item: dict) -> tuple[str, ...] | None:
            seen = g.seen_at.get(finding_key(item), {None})
            if None in seen:
                return None          # a run that did not say its depth: judged at any
            return _in_depth_order(seen | uncovered(e))
        return depths_of

    out: list[Expectation] = []
    for e in (old.entries if old else []):
        if e.index in by_entry:
            out += narrow(by_entry[e.index], e, per_backend, depths_for(e))
            rest = uncovered(e)
            if rest:        # what no run matched, at the depths no run covered
                got = {m["rule"] if e.rules is not None else m["element_type"]
                       for m in by_entry[e.index]}
                names = tuple(n for n in (e.rules if e.rules is not None
                                          else e.element_types) if n not in got)
                if names:
                    out.append(dataclasses.replace(
                        e, depths=_in_depth_order(rest),
                        **({"rules": names} if e.rules is not None
                           else {"element_types": names})))
        elif e in g.not_exercised or (backend and not _exercised_by(e, g, backend)):
            out.append(e)
        elif uncovered(e):  # stale at the depths run, kept for the others
            out.append(dataclasses.replace(e, depths=_in_depth_order(uncovered(e))))
    out += narrow(by_entry.get(None, []), None, per_backend, depths_for(None))
    return [dataclasses.replace(e, index=i) for i, e in enumerate(out)]


def program_update(records: Iterable[dict], old: Expectations | None,
                   backend: str | None = None) -> list[Expectation]:
    """:func:`update` for the results of ``conformance programs``: the old entries (stale
    program entries dropped) and a narrow program entry for every unexpected finding:
    one per op at fault, class and patterns (``none``: in no pattern), with the type
    keys seen and a placeholder reason. A program that failed as a whole, with no op at
    fault, gets ``op: '*'``."""
    records = list(records)
    g = program_gate(records, old)
    stale = {e.index for e in g.stale}
    out = [e for e in (old.entries if old else []) if e.index not in stale]
    groups: dict[tuple, set[str]] = {}
    for m in g.unexpected:
        if backend and m["backend"] != backend:
            continue
        key = (m["op"] or "*", m["class"], tuple(m.get("patterns") or ()) or ("none",))
        groups.setdefault(key, set()).add(m["element_type"] or "*")
    for (op, cls, pats), names in sorted(groups.items()):
        out.append(Expectation(op=op, cls=cls, reason="TODO: why this divergence is expected",
                               element_types=tuple(sorted(names, key=_name_order)),
                               programs=pats))
    return [dataclasses.replace(e, index=i) for i, e in enumerate(out)]


def _exercised_by(e: Expectation, g: Gate, backend: str) -> bool:
    return _exercised(e, g.info, {x for x in g.exercised if x[0] == backend},
                      at=g.exercised_at)


class _Flow(tuple):
    """A list written in flow style: ``[f32, bf16]``."""


class _FlowMap(tuple):
    """Pairs written as a flow mapping: ``{platform: cpu}``."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence(
    "tag:yaml.org,2002:seq", list(v), flow_style=True))
_Dumper.add_representer(_FlowMap, lambda d, v: d.represent_mapping(
    "tag:yaml.org,2002:map", dict(v), flow_style=True))

DEFAULT_HEADER = ("# Known divergences: a run fails only on divergences not listed here.\n"
                  "# Written by `conformance expectations update`; reasons are kept on update.\n")


def dump(entries: list[Expectation], backend: str | None = None, header: str | None = None
         ) -> str:
    """The YAML text of an expectations file (each entry's reason on one line; element
    types and rules as flow lists); ``header``: leading comment lines (default: a line
    saying how the file is written)."""
    data: dict[str, Any] = {}
    if backend:
        data["backend"] = backend
    data["expectations"] = [e.to_yaml() for e in entries]
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=1 << 16, allow_unicode=True,
                     default_flow_style=False)
    return (DEFAULT_HEADER if header is None else header) + text
