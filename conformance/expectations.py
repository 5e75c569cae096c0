"""Expectations: the divergences a backend is known to have, so that CI fails only on
new ones (WPT's expectation files, WebGPU CTS expectation lists, array-api-tests'
xfails).

A file is YAML::

    backend: jax                      # optional: the backend the file is for
    expectations:
      - op: multiply                  # fnmatch patterns: "*", "compare", "shift_*"
        element_type: f32             # the matrix column: "f32", "si8->f32", "complex*"
        class: subnormal_flush        # a divergence class; "*" for any
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

Every entry needs ``op``, ``class`` and ``reason``. A divergence is *expected* when
an entry matches its backend, op, element type (or rule) and class. An entry that
matched nothing in a run that exercised what it covers (its backend, op and element
type or rule; ``when`` conditions included) is *stale*: the divergence is gone (or
never was), and the entry should go. Entries for what the run did not exercise
(filtered out by ``--ops``/``--types``, another platform) are "not exercised".
"""
from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from conformance.compare import DIVERGENCES


class ExpectationsError(ValueError):
    """A malformed expectations file: the message names the file and the entry."""


_KEYS = {"op", "element_type", "rule", "class", "when", "reason", "link", "backend"}
_CLASSES = set(DIVERGENCES) | {"fail"}     # "fail": a spec example that fails


@dataclasses.dataclass(frozen=True)
class Expectation:
    op: str
    cls: str
    reason: str
    element_type: str = "*"
    rule: str | None = None
    when: tuple[tuple[str, str], ...] = ()
    link: str | None = None
    backend: str | None = None
    index: int = 0                       # position in the file, for messages

    def matches(self, backend: str, info: Mapping[str, Any], op: str, cls: str,
                element_type: str | None = None, rule: str | None = None) -> bool:
        if self.cls != "*" and self.cls != cls:
            return False
        return self.covers(backend, info, op, element_type, rule)

    def covers(self, backend: str, info: Mapping[str, Any], op: str,
               element_type: str | None = None, rule: str | None = None) -> bool:
        """Could this entry match a divergence of this backend, op and element type (or
        rule)? An entry is stale only if a run exercised something it covers."""
        if self.backend and not fnmatch.fnmatchcase(backend, self.backend):
            return False
        if not fnmatch.fnmatchcase(op, self.op):
            return False
        if rule is not None or self.rule is not None:
            if self.rule is None or rule is None or not fnmatch.fnmatchcase(rule, self.rule):
                return False
        elif element_type is not None and not fnmatch.fnmatchcase(element_type,
                                                                  self.element_type):
            return False
        return all(fnmatch.fnmatchcase(str(info.get(k, "")), v) for k, v in self.when)

    def to_yaml(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op}
        if self.rule is not None:
            d["rule"] = self.rule
        else:
            d["element_type"] = self.element_type
        d["class"] = self.cls
        if self.when:
            d["when"] = dict(self.when)
        d["reason"] = self.reason
        if self.link:
            d["link"] = self.link
        return d


@dataclasses.dataclass
class Expectations:
    entries: list[Expectation]
    backend: str | None = None
    path: str | None = None

    def for_backend(self, backend: str) -> list[Expectation]:
        if self.backend and not fnmatch.fnmatchcase(backend, self.backend):
            return []
        return self.entries

    def match(self, backend: str, info: Mapping[str, Any], op: str, cls: str,
              element_type: str | None = None, rule: str | None = None) -> Expectation | None:
        for e in self.for_backend(backend):
            if e.matches(backend, info, op, cls, element_type, rule):
                return e
        return None


#: Where the maintained expectations files ship (package data of ``conformance``).
SHIPPED_DIR = "expectations_files"


def shipped_expectations() -> dict[str, Any]:
    """The expectations files shipped with the suite, by short name (``jax-cpu``):
    name -> a readable resource (importlib.resources), from a checkout or a wheel."""
    from importlib import resources
    folder = resources.files("conformance").joinpath(SHIPPED_DIR)
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
        _check_op_pattern(str(raw["op"]), where)
        when = raw.get("when") or {}
        if not isinstance(when, dict):
            raise ExpectationsError(f"{where}: 'when' must be a mapping, e.g. {{platform: cpu}}")
        if not isinstance(raw.get("backend") or "", str):
            raise ExpectationsError(f"{where}: 'backend' must be a backend name (a pattern)")
        entries.append(Expectation(
            op=str(raw["op"]), cls=cls, reason=str(raw["reason"]),
            element_type=str(raw.get("element_type", "*")),
            rule=str(raw["rule"]) if raw.get("rule") is not None else None,
            when=tuple(sorted((str(k), str(v)) for k, v in when.items())),
            link=raw.get("link"), backend=raw.get("backend"), index=i))
    return Expectations(entries, data.get("backend"), str(path))


def _check_op_pattern(pattern: str, where: str) -> None:
    from conformance.specs import op_names
    if not any(fnmatch.fnmatchcase(op, pattern) for op in op_names()):
        raise ExpectationsError(f"{where}: op {pattern!r} matches no op")


# ---------------------------------------------------------------------------
# Applying expectations to a run's records
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class Gate:
    """What a run's divergences are, against an expectations file."""

    unexpected: list[dict]               # one per (backend, op, type/rule, class) finding
    expected: list[dict]
    stale: list[Expectation]
    not_exercised: list[Expectation]     # entries whose op the run did not cover

    @property
    def passed(self) -> bool:
        return not self.unexpected


def findings(records: Iterable[dict]) -> tuple[list[dict], dict[str, dict], set[tuple]]:
    """The run's distinct divergences: (backend, op, type_key or rule, class) with counts;
    plus the backends' describe() info and what the run exercised: (backend, op,
    type_key, rule) for every signature, invalid rule and example it ran."""
    found: dict[tuple, dict] = {}
    info: dict[str, dict] = {}
    ops: set[tuple] = set()
    for r in records:
        kind = r.get("kind")
        if kind == "run":
            info = {b.get("name"): b for b in r.get("backends") or [] if isinstance(b, dict)}
        elif kind == "signature":
            ops.add((r.get("backend"), r.get("op"), r.get("type_key"), None))
            for cls, n in (r.get("counts") or {}).items():
                if cls in DIVERGENCES and n:
                    _add(found, r["backend"], r["op"], cls, n, element_type=r.get("type_key"))
            if r.get("outcome") in DIVERGENCES and not r.get("counts"):
                _add(found, r["backend"], r["op"], r["outcome"], 1,
                     element_type=r.get("type_key"))
        elif kind == "invalid":
            ops.add((r.get("backend"), r.get("op"), None, r.get("rule")))
            if r.get("outcome") in ("accepted_invalid", "crash", "timeout"):
                _add(found, r["backend"], r["op"], r["outcome"], 1, rule=r.get("rule"))
        elif kind == "example":
            rule = f"example-{r.get('index', 0)}"
            ops.add((r.get("backend"), r.get("op"), None, rule))
            if r.get("outcome") not in ("pass", "unsupported"):
                _add(found, r["backend"], r["op"], r.get("outcome"), 1, rule=rule)
    return list(found.values()), info, ops


def _add(found, backend, op, cls, n, element_type=None, rule=None) -> None:
    key = (backend, op, element_type, rule, cls)
    item = found.setdefault(key, {"backend": backend, "op": op, "element_type": element_type,
                                  "rule": rule, "class": cls, "cases": 0})
    item["cases"] += n


def gate(records: Iterable[dict], expectations: Expectations | None) -> Gate:
    """Split a run's divergences into expected and unexpected; find stale entries."""
    items, info, exercised = findings(records)
    used: set[int] = set()
    expected, unexpected = [], []
    for item in items:
        e = expectations.match(item["backend"], info.get(item["backend"], {}), item["op"],
                               item["class"], item["element_type"], item["rule"]) \
            if expectations else None
        if e is None:
            unexpected.append(item)
        else:
            used.add(e.index)
            expected.append({**item, "reason": e.reason, "link": e.link})
    stale, not_exercised = [], []
    for e in (expectations.entries if expectations else []):
        if e.index in used:
            continue
        if any(e.covers(b, info.get(b, {}), op, key, rule) for b, op, key, rule in exercised):
            stale.append(e)
        else:
            not_exercised.append(e)
    return Gate(unexpected, expected, stale, not_exercised)


def update(records: Iterable[dict], old: Expectations | None, backend: str | None = None
           ) -> list[Expectation]:
    """Entries for every divergence of a run (of one backend, or all), keeping the
    reason, link and conditions of old entries that still match; new ones get a
    placeholder reason to fill in."""
    items, info, _ = findings(records)
    out: list[Expectation] = []
    seen: set[tuple] = set()
    for item in sorted(items, key=lambda i: (i["op"], str(i["element_type"] or i["rule"]),
                                             i["class"])):
        if backend and item["backend"] != backend:
            continue
        prior = old.match(item["backend"], info.get(item["backend"], {}), item["op"],
                          item["class"], item["element_type"], item["rule"]) if old else None
        key = (item["op"], item["element_type"], item["rule"], item["class"])
        if key in seen:
            continue
        seen.add(key)
        out.append(Expectation(
            op=item["op"], cls=item["class"],
            reason=prior.reason if prior else "TODO: why this divergence is expected",
            element_type=item["element_type"] or "*", rule=item["rule"],
            when=prior.when if prior else (), link=prior.link if prior else None,
            index=len(out)))
    return out


def dump(entries: list[Expectation], backend: str | None = None) -> str:
    header = ("# Known divergences: a run fails only on divergences not listed here.\n"
              "# Written by `conformance expectations update`; reasons are kept on update.\n")
    data: dict[str, Any] = {}
    if backend:
        data["backend"] = backend
    data["expectations"] = [e.to_yaml() for e in entries]
    return header + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)
