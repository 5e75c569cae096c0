"""The op specs: one YAML file per StableHLO op, loaded and validated here.

Each file in ``ops/`` is the machine-readable form of one op's section of the
StableHLO specification. Loading checks it twice: against ``schema.yaml``
(structure) and semantically (every expression parses and names only what the
spec declares, constraint references exist, examples type-check). Any failure is
a :class:`SpecError` whose one-line message names the file, the key and what was
expected.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
from pathlib import Path
from typing import Any, Iterable

import yaml

from conformance.core.types import (ALL_ELEMENT_TYPES, TYPE_CLASSES, ElementType, TensorType,
                                    UnknownElementType, element_type, element_types_of)
from . import expressions as ex
from . import regions
from .mlir import MlirSyntaxError, syntax_of

SPEC_DIR = Path(__file__).parent / "ops"


class SpecError(ValueError):
    """A malformed spec file: the message names the file, the key and the problem."""


class UnknownOp(KeyError):
    """An op name that has no spec file."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str
    label: str | None
    types: tuple[ElementType, ...]    # the spec's "Type" column, expanded
    type_text: str
    element_type: str                 # expression over type variables
    shape: tuple[str, ...]            # one or more alternative shape expressions
    values: str | None                # name of a value distribution (generators)
    variadic: str | None = None       # count expression of a variadic input/output
    type: str | None = None           # value type expression (instead of element_type, shape)
    value_kind: str = "tensor"        # tensor | tuple | value (either)
    boundaries: tuple[str, ...] = ()  # expressions: points where the op's result changes
                                      # regime (overflows, saturates), drawn near on purpose
    host: bool = False                # a host-side queue (infeed's data), not an operand


@dataclasses.dataclass(frozen=True)
class AttributeSpec:
    name: str
    label: str | None
    kind: str                         # enum | integer | boolean
    values: tuple[Any, ...]
    choose: str | None                # expression: legal values given the type variables
    range: tuple[Any, Any] | None     # integer generation range (ints or expressions)
    type_text: str
    value: str | None = None          # computed from the variables instead of drawn
    element_type: str | None = None   # kind tensor: the constant's element type expression
    shape: str | None = None          # kind tensor: its shape expression
    distribution: str | None = None   # kind tensor: value distribution (generators/values.py)
    #: may be left out of a signature, and then reads as None (an optional attribute of the
    #: dialect that is not set: dot_general's algorithm fields)
    optional: bool = False


@dataclasses.dataclass(frozen=True)
class RegionSpec:
    """A region of the op; ``value`` computes its text (specs/regions.py)."""

    name: str
    label: str | None
    type_text: str
    value: str
    #: a variadic number of regions (case's ``branches``): ``value`` gives a list of texts;
    #: only the spec's last region may be variadic (see :meth:`OpSpec.split_regions`)
    variadic: bool = False


@dataclasses.dataclass(frozen=True)
class Variable:
    """A named random draw of signature construction (see schema.yaml "variable")."""

    name: str
    kind: str                         # integer | integers | permutation | subset | booleans | choice
    params: Any


@dataclasses.dataclass(frozen=True)
class Constraint:
    id: str
    text: str
    check: str
    unbreakable: str | None = None


@dataclasses.dataclass(frozen=True)
class ImplementationDefined:
    """A rule of the spec that leaves some result elements open (``when:``), and what it
    still allows there (``allowed:``):

    - ``any``: nothing; the elements are masked (``says:`` tells why the spec bounds
      nothing there);
    - ``permutation``: ``when:`` gives permutation groups (integer labels): each group's
      values may come in any order;
    - a mapping ``name -> expression``: the oracle's (conventional) value or one of the
      named alternatives, bit for bit (any NaN equals any NaN). An expression gives one
      alternative (an array of the result's shape; a list of one array per result for
      ops with several results) or a list of them; the name ``any`` instead gives a
      mask of elements where the spec bounds nothing after all.

    ``per_result``: ``when:`` gives one mask per result (a list), for ops with several
    results whose results the rule leaves open separately (a variadic reduce whose
    arg k and arg k+1 are reduced by different bodies); otherwise its one mask covers
    every result.
    """

    id: str
    text: str
    when: str
    source: str | None = None
    allowed: "str | tuple[tuple[str, str], ...]" = "any"
    says: str | None = None
    per_result: bool = False

    @property
    def alternatives(self) -> dict[str, str]:
        return {} if isinstance(self.allowed, str) else dict(self.allowed)


@dataclasses.dataclass(frozen=True)
class Accuracy:
    """How results of one element type are compared.

    kind: ``exact`` (bit equality, any NaN equals any NaN), ``bits`` (strict bit
    equality), ``ulp`` (distance in units in the last place <= ``bound``) or
    ``rel_eps`` (complex: |actual - expected| <= bound * eps * |expected|).
    """

    kind: str
    bound: float = 0.0
    #: the entry's other keys, for verdict kinds that take more than one number (the
    #: bound function of ``bound``, the checks of ``property``); see conformance.checking.verdicts
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        # compare's bit-equal fast path and every bound assume it (a spec's or a
        # tolerance profile's bound is checked where it is read, with its file named)
        if not self.bound >= 0:
            raise ValueError(f"accuracy {self.kind}: the bound must be >= 0, got {self.bound}")

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.params)


# id(spec) -> (spec, custom-call registry generation, its type bindings): the bindings are a
# pure function of both (the where rules read the registered targets) and every plan asks
# for their count (convert's 900-odd bindings cost milliseconds to enumerate)
_TYPE_BINDINGS: dict[int, tuple] = {}


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """One op's spec, with typed access to the parts the suite uses."""

    name: str
    path: str
    data: dict = dataclasses.field(repr=False, compare=False)
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    attributes: tuple[AttributeSpec, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    implementation_defined: tuple[ImplementationDefined, ...] = ()
    variables: tuple[Variable, ...] = ()
    regions: tuple[RegionSpec, ...] = ()

    @property
    def family(self) -> str:
        return self.data["family"]

    @property
    def summary(self) -> str:
        return self.data["summary"]

    @property
    def elementwise(self) -> bool:
        return bool(self.data.get("elementwise", False))

    @property
    def quantized(self) -> bool:
        """Does a type variable of the op take quantized element types only? Such an op
        (uniform_quantize, add_quantized, ...) is drawn with quantized tensors, which
        no region body and no program chain over plain element types holds."""
        return any(ts and all(t.is_quantized for t in ts)
                   for ts, _ in self.type_variables.values())

    @property
    def moves_values(self) -> bool:
        """Are the results elements of the inputs, picked by comparing them?"""
        return bool(self.data.get("moves_values", False))

    @property
    def xla_names(self) -> tuple[str, ...]:
        return tuple(self.data.get("xla", ()))

    @property
    def spec_version(self) -> str:
        """Which text of the specification the rules follow (schema.yaml: spec_version)."""
        return self.data["spec_version"]

    @property
    def spec_changes(self) -> tuple[dict, ...]:
        """The rules that follow the newer text: ``{rule, was, now}`` each."""
        return tuple(self.data.get("spec_changes", ()))

    @property
    def examples(self) -> list[dict]:
        return self.data["examples"]

    @property
    def type_variables(self) -> dict[str, tuple[tuple[ElementType, ...], str | None]]:
        return {k: (element_types_of(v["types"]), v.get("where"))
                for k, v in self.data.get("type_variables", {}).items()}

    @property
    def shape_variables(self) -> dict[str, dict]:
        return dict(self.data.get("shape_variables", {"S": {}}))

    def split_inputs(self, flat: "list | tuple") -> list:
        """The flat input list of a signature or case, grouped per spec input: a list
        for a variadic input, the item itself otherwise."""
        return _split(self.inputs, list(flat), self.name, "inputs")

    def split_outputs(self, flat: "list | tuple") -> list:
        return _split(self.outputs, list(flat), self.name, "results")

    @property
    def host_transfer(self) -> bool:
        """Whether a case of this op exchanges data with the host (an input or output
        marked ``host: true``: infeed's queue, outfeed's, a send/recv channel's)."""
        return any(t.host for t in self.inputs + self.outputs)

    def split_regions(self, flat: "list | tuple") -> list:
        """A signature's region texts grouped per spec region: the text, or for a
        variadic region (the last) the list of the remaining texts."""
        flat = list(flat)
        if self.regions and self.regions[-1].variadic:
            n = len(self.regions) - 1
            return flat[:n] + [flat[n:]]
        return flat

    def region_env(self, flat: "list | tuple") -> dict:
        """Region name -> text (a list of texts for a variadic region)."""
        return dict(zip((r.name for r in self.regions), self.split_regions(flat)))

    def constraint(self, cid: str) -> Constraint:
        for c in self.constraints:
            if c.id == cid:
                return c
        raise KeyError(f"{self.name} has no constraint {cid}")

    def type_bindings(self) -> list[dict[str, str]]:
        """Every assignment of element types to the type variables that the spec allows.

        These are the "element type" axis of the suite: one matrix cell each (custom_call's
        follow the targets registered in the process, so they are not held).
        """
        from . import custom_calls
        generation = custom_calls.generation()
        held = _TYPE_BINDINGS.get(id(self))
        if held is None or held[0] is not self or held[1] != generation:
            tvars = self.type_variables
            out: list[dict[str, str]] = []
            for combo in itertools.product(*(ts for ts, _ in tvars.values())):
                binding = {k: t.name for k, t in zip(tvars, combo)}
                if all(where is None or ex.evaluate(where, binding)
                       for _, where in tvars.values()):
                    out.append(binding)
            held = _TYPE_BINDINGS[id(self)] = (self, generation, tuple(out))
            while len(_TYPE_BINDINGS) > 1024:
                _TYPE_BINDINGS.pop(next(iter(_TYPE_BINDINGS)))
        return [dict(b) for b in held[2]]

    def result_types_for(self, input_types: Iterable[Any], *,
                         strict: bool = False) -> list[TensorType]:
        """The result types the spec's output rules give for these input types: the type
        and shape variables bound from the inputs (the first input naming a variable binds
        it), then each output's element type and shape expression evaluated. This types a
        region's calls (specs/regions.py) and is the oracle's default.

        ``strict``: the inputs must also fit the spec: every input's element type among
        its allowed ones and the one its expression gives (each type variable stands for
        one type, the variables' ``where`` rules hold), and a shape variable for one shape.

        SpecError where the results depend on more than the input types (a variadic input
        or output, drawn variables, an output type the inputs do not determine: convert's)
        or, strict, where the inputs do not fit.
        """
        input_types = list(input_types)
        if any(t.variadic for t in self.inputs + self.outputs) or self.variables:
            raise SpecError(f"{self.name}: the result types depend on more than the input "
                            "types")
        if strict and len(input_types) != len(self.inputs):
            raise SpecError(f"{self.name} takes {len(self.inputs)} input(s), got "
                            f"{len(input_types)}")
        tvars, svars = self.type_variables, self.shape_variables
        env: dict[str, Any] = {}
        for t, it in zip(self.inputs, input_types):
            if not isinstance(it, TensorType):
                continue
            et = it.element_type
            if t.element_type in tvars:
                bound = env.setdefault(t.element_type, et.name)
                if strict and bound != et.name:
                    raise SpecError(f"{self.name}: {t.name} is {et.name}, but an earlier input "
                                    f"makes {t.element_type} {bound}")
            if len(t.shape) == 1 and t.shape[0] in svars:
                shape = env.setdefault(t.shape[0], list(it.shape))
                if strict and shape != list(it.shape):
                    raise SpecError(f"{self.name}: {t.name} has shape {list(it.shape)}, but an "
                                    f"earlier input makes {t.shape[0]} {shape}")
        try:
            if strict:
                self._check_input_types(input_types, env)
            return [TensorType(tuple(ex.evaluate(t.shape[0], env)),
                               element_type(ex.evaluate(t.element_type, env)))
                    for t in self.outputs]
        except ex.ExpressionError:
            raise SpecError(f"{self.name}: the result types cannot be inferred from the "
                            "input types") from None

    def _check_input_types(self, input_types: list, env: dict[str, Any]) -> None:
        for name, (allowed, where) in self.type_variables.items():
            if name in env and element_type(env[name]) not in allowed:
                raise SpecError(f"{self.name}: {name} cannot be {env[name]} (allowed: "
                                f"{', '.join(t.name for t in allowed)})")
            if name in env and where is not None and not ex.evaluate(where, env):
                raise SpecError(f"{self.name}: {name} = {env[name]} breaks {where!r}")
        for t, it in zip(self.inputs, input_types):
            if not isinstance(it, TensorType):
                raise SpecError(f"{self.name}: {t.name} is {it}, not a tensor")
            et = it.element_type
            if et not in t.types or element_type(ex.evaluate(t.element_type, env)) != et:
                raise SpecError(f"{self.name}: {t.name} cannot be {et.name} here (the spec "
                                f"says {t.element_type}, one of "
                                f"{', '.join(x.name for x in t.types)})")

    def accuracy(self, et: "ElementType | str",
                 overrides: dict[str, Any] | None = None) -> Accuracy:
        """The comparison rule for results of element type ``et`` (by name, then class).

        ``overrides`` (a tolerance profile's entries for this op) take precedence.
        """
        et = element_type(et)
        for table in (overrides or {}, self.data["accuracy"]):
            entry = lookup_accuracy(table, et)
            if entry is not None:
                return parse_accuracy(entry, et, f"{self.path}: accuracy")
        raise SpecError(f"{self.path}: accuracy: no entry covers element type {et.name}")

    def signature_accuracy(self, sig: Any, overrides: dict[str, Any] | None = None) -> Accuracy:
        """The comparison rule for a signature: by its first input's element type, or its
        first result's when it has no inputs (iota, constant)."""
        types = tuple(sig.input_leaves) or tuple(sig.result_leaves)
        if not types:               # tuple() -> tuple<>: no tensor at all, nothing to compare
            return Accuracy("bits")
        return self.accuracy(types[0].element_type, overrides)


def lookup_accuracy(table: dict[str, Any], et: ElementType) -> Any:
    """The entry of an accuracy table for ``et``: by type name, then type class."""
    for key in (et.name, *(c for c, kinds in TYPE_CLASSES.items()
                           if et.kind in kinds and c != "any"), "any", "default"):
        if key in table:
            return table[key]
    return None


def parse_accuracy(entry: Any, et: ElementType, where: str) -> Accuracy:
    """``exact``, ``bits``, ``{ulp: N}``, ``{ulp: {type: N}}`` or ``{rel_eps: N}``."""
    if entry in ("exact", "bits"):
        return Accuracy(entry)
    if isinstance(entry, dict) and "ulp" in entry:
        ulp = entry["ulp"]
        if isinstance(ulp, dict):
            ulp = ulp.get(et.component.name, ulp.get("default"))
            if ulp is None:
                raise SpecError(f"{where}.ulp: no bound for {et.name}")
        return Accuracy("ulp", float(ulp))
    if isinstance(entry, dict) and "rel_eps" in entry:
        return Accuracy("rel_eps", float(entry["rel_eps"]))
    if isinstance(entry, dict) and entry and isinstance(next(iter(entry)), str):
        # Any other verdict kind: {KIND: VALUE, key: value, ...} (conformance.checking.verdicts
        # says which kinds exist, and verdicts.check_known checks the names).
        kind, value = next(iter(entry.items()))
        bound = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else 0.0
        params = tuple((str(k), _frozen(v)) for k, v in entry.items())
        return Accuracy(kind, bound, params)
    raise SpecError(f"{where}: expected exact, bits, {{ulp: N}}, {{rel_eps: N}} or "
                    f"{{KIND: VALUE, ...}}, got {entry!r}")


def _frozen(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


def _split(specs: tuple, flat: list, op: str, what: str) -> list:
    """Variadic groups share one count: len(flat) = fixed + groups * count."""
    groups = sum(1 for t in specs if t.variadic)
    fixed = len(specs) - groups
    if not groups:
        if len(flat) != len(specs):
            raise ValueError(f"{op}: {len(flat)} {what}, expected {len(specs)}")
        return flat
    extra = len(flat) - fixed
    if extra < 0 or extra % groups:
        raise ValueError(f"{op}: {len(flat)} {what} do not split into {fixed} single and "
                         f"{groups} variadic group(s)")
    count = extra // groups
    out, i = [], 0
    for t in specs:
        if t.variadic:
            out.append(flat[i:i + count])
            i += count
        else:
            out.append(flat[i])
            i += 1
    return out


def binding_key(binding: dict[str, str]) -> str:
    """The matrix column name of a type binding: ``f32``, or ``si8->f32`` for convert;
    ``token`` for an op without type variables (after_all: its values are tokens only)."""
    return "->".join(binding.values()) or "token"


# ---------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _schema_validator():
    import jsonschema
    schema = read_yaml((Path(__file__).parent / "schema.yaml").read_text())
    return jsonschema.Draft202012Validator(schema)


def _fail(path: str, key: str, msg: str) -> SpecError:
    return SpecError(f"{path}: {key}: {msg}")


def _key(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _check_expr(path: str, key: str, text: str, allowed: set[str]) -> None:
    try:
        free = ex.names(text)
        funcs = ex.called_functions(text)
    except ex.ExpressionError as e:
        raise _fail(path, key, str(e)) from None
    unknown_fns = funcs - set(ex.FUNCTIONS)
    if unknown_fns:
        raise _fail(path, key, f"unknown function(s) {sorted(unknown_fns)} in {text!r}")
    unknown = free - allowed - {"true", "false", "True", "False"}
    if unknown:
        raise _fail(path, key, f"{text!r} names {sorted(unknown)}; expected only "
                               f"{sorted(allowed)}")


def _expressions_in(params: Any) -> list[str]:
    """The expression strings inside a variable's parameters (ints are literals)."""
    if isinstance(params, str):
        return [params]
    if isinstance(params, dict):
        return [e for v in params.values() for e in _expressions_in(v)]
    if isinstance(params, list):
        return [e for v in params for e in _expressions_in(v)]
    return []


def _types(path: str, key: str, items: list[str]) -> tuple[ElementType, ...]:
    for item in items:
        if item not in TYPE_CLASSES:
            try:
                element_type(item)
            except UnknownElementType as e:
                raise _fail(path, key, str(e)) from None
    return element_types_of(items)


SHARED_RULES = Path(__file__).parent / "shared_rules.yaml"


@functools.lru_cache(maxsize=1)
def shared_rules() -> dict[str, dict]:
    """The implementation-defined rules several ops share (shared_rules.yaml), by id."""
    return {r["id"]: r for r in read_yaml(SHARED_RULES.read_text())["rules"]}


def _with_shared_rules(data: dict, path: str) -> dict:
    """``data`` with each ``- shared: ID`` of its ``implementation_defined:`` replaced by
    that shared rule (a copy), which is then validated against this op's names."""
    rules = data.get("implementation_defined")
    if not isinstance(rules, list) or not any(isinstance(r, dict) and "shared" in r
                                              for r in rules):
        return data
    out = []
    for i, r in enumerate(rules):
        if isinstance(r, dict) and "shared" in r:
            if set(r) != {"shared"}:
                raise _fail(path, f"implementation_defined[{i}]", "a shared rule is named "
                                                                  "alone: '- shared: ID'")
            rule = shared_rules().get(r["shared"])
            if rule is None:
                raise _fail(path, f"implementation_defined[{i}].shared",
                            f"unknown shared rule {r['shared']!r}; known: "
                            f"{sorted(shared_rules())}")
            r = dict(rule)
        out.append(r)
    return {**data, "implementation_defined": out}


def parse_spec(data: Any, path: str) -> OpSpec:
    """Validate one loaded YAML document and build its OpSpec (raises SpecError)."""
    if not isinstance(data, dict):
        raise _fail(path, "(top level)", f"expected a mapping, got {type(data).__name__}")
    data = _with_shared_rules(data, path)
    errors = sorted(_schema_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise _fail(path, _key(e.absolute_path), e.message)

    tvars = data.get("type_variables", {})
    svars = data.get("shape_variables", {"S": {}})
    var_names = set(tvars) | set(svars)
    for name, tv in tvars.items():
        _types(path, f"type_variables.{name}.types", tv["types"])
        if "where" in tv:
            _check_expr(path, f"type_variables.{name}.where", tv["where"], set(tvars))
    variables = []
    for i, v in enumerate(data.get("variables", [])):
        kind = next(k for k in v if k != "name")
        params = v[kind]
        for expr in _expressions_in(params):
            _check_expr(path, f"variables[{i}].{kind}", expr,
                        var_names | {"i", "prev", "k"})
        variables.append(Variable(v["name"], kind, params))
        var_names = var_names | {v["name"]}

    constraint_ids = [c["id"] for c in data["constraints"]]
    if len(set(constraint_ids)) != len(constraint_ids):
        raise _fail(path, "constraints", f"duplicate constraint ids {constraint_ids}")

    def tensor(kind: str, i: int, t: dict) -> TensorSpec:
        key = f"{kind}[{i}]"
        types = _types(path, f"{key}.types", t["types"])
        names = var_names | attr_names | {"k"}
        if kind == "outputs":       # an output's type may name the inputs' types
            names = names | {x["name"] for x in data["inputs"]}
        shapes: tuple[str, ...] = ()
        if "type" in t:
            _check_expr(path, f"{key}.type", t["type"], names)
        else:
            _check_expr(path, f"{key}.element_type", t["element_type"], names)
            shapes = (tuple(t["shape"]["one_of"]) if isinstance(t["shape"], dict)
                      else (t["shape"],))
        for s in shapes:
            _check_expr(path, f"{key}.shape", s, names)
        if "variadic" in t:
            _check_expr(path, f"{key}.variadic", t["variadic"], var_names | attr_names)
        for cid in t.get("constraints", []):
            if cid not in constraint_ids:
                raise _fail(path, f"{key}.constraints", f"{cid} is not a constraint of this op "
                                                        f"(it has {constraint_ids})")
        for j, b in enumerate(t.get("boundaries", [])):
            _check_expr(path, f"{key}.boundaries[{j}]", b, {x["name"] for x in
                                                            data["inputs"] + data["outputs"]})
        return TensorSpec(t["name"], t.get("label"), types, t.get("type_text", ""),
                          t.get("element_type", ""), shapes, t.get("values"), t.get("variadic"),
                          t.get("type"), t.get("value_kind", "tensor"),
                          tuple(t.get("boundaries", ())), bool(t.get("host", False)))

    attr_names = {a["name"] for a in data.get("attributes", [])}
    inputs = tuple(tensor("inputs", i, t) for i, t in enumerate(data["inputs"]))
    outputs = tuple(tensor("outputs", i, t) for i, t in enumerate(data["outputs"]))

    attributes = []
    for i, a in enumerate(data.get("attributes", [])):
        key = f"attributes[{i}]"
        if a["kind"] in ("enum", "enum_list") and not a.get("values"):
            raise _fail(path, f"{key}.values", "an enum attribute needs its values")
        if a["kind"] == "enum_list" and "range" not in a and "value" not in a:
            raise _fail(path, f"{key}.range", "an enum_list attribute needs a length range "
                                              "or a value")
        if a["kind"] == "string_list" and "value" not in a:
            raise _fail(path, f"{key}.value", "a string_list attribute needs a value")
        if a["kind"] == "string" and not a.get("values") and "value" not in a:
            raise _fail(path, f"{key}.values", "a string attribute needs its values or a value")
        if a["kind"] == "float" and not a.get("values") and "value" not in a:
            raise _fail(path, f"{key}.values", "a float attribute needs its values or a value")
        if a["kind"] in ("integer", "integer_list") and "range" not in a and "value" not in a:
            raise _fail(path, f"{key}.range", "an integer attribute needs a generation range "
                                              "or a value")
        if "value" in a:
            _check_expr(path, f"{key}.value", a["value"], var_names)
        if "choose" in a:
            _check_expr(path, f"{key}.choose", a["choose"], var_names)
        for j, bound in enumerate(a.get("range", [])):
            if isinstance(bound, str):
                _check_expr(path, f"{key}.range[{j}]", bound, var_names)
        if a["kind"] == "tensor":
            if "value" not in a and not ("element_type" in a and "shape" in a):
                raise _fail(path, key, "a tensor attribute needs element_type and shape "
                                       "(or a value)")
            for part in ("element_type", "shape"):
                if part in a:
                    _check_expr(path, f"{key}.{part}", a[part], var_names)
        attributes.append(AttributeSpec(
            a["name"], a.get("label"), a["kind"], tuple(a.get("values", ())), a.get("choose"),
            tuple(a["range"]) if "range" in a else None, a.get("type_text", ""),
            a.get("value"), a.get("element_type"), a.get("shape"), a.get("distribution"),
            bool(a.get("optional", False))))

    regions = []
    for i, r in enumerate(data.get("regions", [])):
        _check_expr(path, f"regions[{i}].value", r["value"],
                    var_names | attr_names | {t.name for t in inputs + outputs})
        if r.get("variadic") and i != len(data["regions"]) - 1:
            raise _fail(path, f"regions[{i}].variadic", "only the last region may be variadic")
        regions.append(RegionSpec(r["name"], r.get("label"), r.get("type_text", ""), r["value"],
                                  bool(r.get("variadic", False))))

    value_names = ({t.name for t in inputs + outputs} | {a.name for a in attributes}
                   | {r.name for r in regions})
    if len(value_names) != len(inputs) + len(outputs) + len(attributes) + len(regions):
        raise _fail(path, "inputs", "input, output, attribute and region names must be "
                                    "distinct")
    constraints = []
    for i, c in enumerate(data["constraints"]):
        # (a constraint also sees the signature's process grid: collectives, issue 18)
        _check_expr(path, f"constraints[{i}].check", c["check"],
                    value_names | {"num_replicas", "num_partitions"})
        constraints.append(Constraint(c["id"], c["text"], c["check"], c.get("unbreakable")))

    impl = []
    for i, d in enumerate(data.get("implementation_defined", [])):
        key = f"implementation_defined[{i}]"
        # (a rule also sees the signature: a quantized tensor's parameters live in its
        # type, not in its storage values)
        # (and ``input_values``: the inputs' values in order, for a shared rule that
        # cannot know an op's input names)
        _check_expr(path, f"{key}.when", d["when"], value_names
                    | {"num_replicas", "num_partitions", "signature", "input_values"})
        allowed = d.get("allowed", "any")
        if isinstance(allowed, dict):
            for name, expr in allowed.items():
                if name == "conventional":
                    raise _fail(path, f"{key}.allowed.{name}", "'conventional' is the "
                                                               "oracle's value; name the "
                                                               "alternatives")
                _check_expr(path, f"{key}.allowed.{name}", expr,
                            value_names | {"signature", "input_values"})
            allowed = tuple((str(k), str(v)) for k, v in allowed.items())
        elif allowed == "any" and "allowed" in d and not d.get("says"):
            raise _fail(path, f"{key}.says", "allowed: any needs a says: line (why the "
                                             "spec bounds nothing there)")
        per_result = d.get("per_result", False)
        if not isinstance(per_result, bool):
            raise _fail(path, f"{key}.per_result", "must be true or false")
        impl.append(ImplementationDefined(d["id"], d["text"], d["when"], d.get("source"),
                                          allowed, d.get("says"), per_result))

    coverage = data.get("coverage") or {}
    input_names = [t.name for t in inputs]
    for name, opts in (coverage.get("operands") or {}).items():
        if name not in input_names:
            raise _fail(path, f"coverage.operands.{name}", f"not an input of this op "
                                                           f"(inputs: {input_names})")
        if "type" in opts:
            _check_expr(path, f"coverage.operands.{name}.type", opts["type"], set(tvars))
    if coverage.get("live") is not None:
        _check_expr(path, "coverage.live", coverage["live"], value_names | set(tvars))
    target_names = set()
    for i, t in enumerate(coverage.get("targets") or []):
        key = f"coverage.targets[{i}]"
        if t["name"] in target_names:
            raise _fail(path, f"{key}.name", f"duplicate target name {t['name']!r}")
        target_names.add(t["name"])
        if "types" in t:
            _check_expr(path, f"{key}.types", t["types"], set(tvars))
        if "where" in t:
            _check_expr(path, f"{key}.where", t["where"], value_names | set(tvars))
        for name in t.get("at") or {}:
            if name not in input_names:
                raise _fail(path, f"{key}.at.{name}", f"not an input of this op "
                                                      f"(inputs: {input_names})")

    for key in data["accuracy"]:
        if key not in TYPE_CLASSES and key != "default":
            _types(path, f"accuracy.{key}", [key])

    spec = OpSpec(data["op"], path, data, inputs, outputs, tuple(attributes),
                  tuple(constraints), tuple(impl), tuple(variables), tuple(regions))
    _check_examples(spec)
    _check_mlir(spec)
    return spec


def _check_mlir(spec: OpSpec) -> None:
    """The ``mlir:`` section's format strings may name only the op's attributes."""
    try:
        syntax_of(spec)
    except MlirSyntaxError as e:
        raise SpecError(str(e)) from None      # already names the file and key


def _check_examples(spec: OpSpec) -> None:
    from conformance.core.dense import parse_dense
    from conformance.core.literals import LiteralError, from_value_literal
    in_names = [t.name for t in spec.inputs]
    out_names = [t.name for t in spec.outputs]
    attr_names = {a.name for a in spec.attributes}
    for i, exm in enumerate(spec.examples):
        key = f"examples[{i}]"
        if list(exm["inputs"]) != in_names:
            raise _fail(spec.path, f"{key}.inputs", f"expected inputs {in_names} in that order, "
                                                    f"got {list(exm['inputs'])}")
        if list(exm["expected"]) != out_names:
            raise _fail(spec.path, f"{key}.expected", f"expected outputs {out_names}, "
                                                      f"got {list(exm['expected'])}")
        extra = set(exm.get("attributes", {})) - attr_names
        if extra:
            raise _fail(spec.path, f"{key}.attributes", f"unknown attribute(s) {sorted(extra)}")
        for a in spec.attributes:
            if a.kind == "tensor" and a.name in exm.get("attributes", {}):
                try:
                    parse_dense(exm["attributes"][a.name])
                except (LiteralError, UnknownElementType, ValueError) as e:
                    raise _fail(spec.path, f"{key}.attributes.{a.name}", str(e)) from None
        for part in ("inputs", "expected"):
            for name, t in exm[part].items():
                for j, item in enumerate(t if isinstance(t, list) else [t]):
                    try:
                        # on a grid (collectives): one value per process, in flattened
                        # id order, each of the per-process type
                        grid = exm.get("grid")
                        values = item["value"] if grid else [item["value"]]
                        if grid and len(values) != grid[0] * grid[1]:
                            raise ValueError(f"expected one value per process "
                                             f"({grid[0] * grid[1]}), got {len(values)}")
                        for v in values:
                            from_value_literal(v, item["type"])
                    except (LiteralError, UnknownElementType, ValueError) as e:
                        where = f"{key}.{part}.{name}" + (f"[{j}]" if isinstance(t, list) else "")
                        raise _fail(spec.path, where, str(e)) from None


#: libyaml's loader where PyYAML was built with it (its wheels are): the same documents as
#: the pure-Python SafeLoader, 20x faster; every process that plans a run reads all the specs
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(text: str) -> Any:
    """``yaml.safe_load`` through libyaml where it is there (:data:`_LOADER`)."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader


def load_file(path: "str | Path") -> OpSpec:
    path = Path(path)
    try:
        data = read_yaml(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(parse)"
        raise _fail(str(path), where, f"not valid YAML: {getattr(e, 'problem', e)}") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}") from None
    spec = parse_spec(data, str(path))
    if spec.name != path.stem:
        raise _fail(str(path), "op", f"the op name {spec.name!r} must match the file name")
    return spec


@functools.lru_cache(maxsize=None)
def load_spec(name: str) -> OpSpec:
    """The spec of one op by name; UnknownOp if there is none."""
    path = SPEC_DIR / f"{name}.yaml"
    if not path.exists():
        if name in quantized_forms():
            return _load_quantized_form(name)
        if name in quantized_movement():
            return _load_quantized_movement(name)
        raise UnknownOp(f"unknown op {name!r}; known ops: {', '.join(op_names())}")
    return load_file(path)


# ---------------------------------------------------------------------------
# Quantized forms: `<op>_quantized` made from one table (quantized_forms.yaml)
# ---------------------------------------------------------------------------

QUANTIZED_FORMS = Path(__file__).parent / "quantized_forms.yaml"
_FORM_SUFFIX = "_quantized"


@functools.lru_cache(maxsize=1)
def _quantized_table() -> dict:
    try:
        data = read_yaml(QUANTIZED_FORMS.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SpecError(f"{QUANTIZED_FORMS}: cannot read: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("forms"), dict) \
            or not isinstance(data.get("ops"), dict):
        raise SpecError(f"{QUANTIZED_FORMS}: (top level): expected 'forms' and 'ops' mappings")
    return data


def quantized_forms() -> dict[str, str]:
    """``<op>_quantized`` -> ``<op>``: the ops the table quantized_forms.yaml gives a
    quantized form (semantics ``dequantize_op_quantize(<op>, ...)``)."""
    return {f"{op}{_FORM_SUFFIX}": op for op in _quantized_table()["ops"]}


def _substitute(value: Any, op: str) -> Any:
    if isinstance(value, str):
        return value.replace("$op", op)
    if isinstance(value, list):
        return [_substitute(v, op) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, op) for k, v in value.items()}
    return value


def quantized_form_data(name: str) -> dict:
    """The spec document of quantized form ``name``: the entry's form (unary, binary) with
    ``$op`` replaced, its rows' types (the plain types the spec's Type column names, then
    the form's quantized families; the result row takes the families only), Type-column
    texts, constraints (every tensor reads all of them, as the spec's tables say) and
    examples. SpecError names the table's key on a bad entry."""
    table, base = _quantized_table(), quantized_forms()[name]
    entry, where = table["ops"][base], f"{QUANTIZED_FORMS}: ops.{base}"
    missing = {"form", "plain_types", "type_text", "constraints"} - set(entry or {})
    if missing:
        raise SpecError(f"{where}: missing {', '.join(sorted(missing))}")
    if entry["form"] not in table["forms"]:
        raise SpecError(f"{where}.form: {entry['form']!r} is not one of "
                        f"{', '.join(table['forms'])}")
    data = {"op": name, **_substitute(table["forms"][entry["form"]], base)}
    families = data["type_variables"]["Q"]["types"]
    ids = [c["id"] for c in entry["constraints"]]
    for kind in ("inputs", "outputs"):
        for t in data[kind]:
            if t["name"] not in entry["type_text"]:
                raise SpecError(f"{where}.type_text: no text for {t['name']}")
            t["type_text"] = entry["type_text"][t["name"]]
            t["types"] = list(entry["plain_types"]) + list(families) \
                if kind == "inputs" else list(families)
            t["constraints"] = list(ids)
    data["constraints"] = [dict(c) for c in entry["constraints"]]
    data["examples"] = list(entry.get("examples", []))
    return data


def _load_quantized_form(name: str) -> OpSpec:
    return parse_spec(quantized_form_data(name), f"{QUANTIZED_FORMS}#{name}")


# ---------------------------------------------------------------------------
# Quantized movement: `<op>_quantized` of the data-movement ops, each derived from its
# plain spec file and the overrides of one table (quantized_movement.yaml)
# ---------------------------------------------------------------------------

QUANTIZED_MOVEMENT = Path(__file__).parent / "quantized_movement.yaml"
#: list sections merged item by item (by this key) rather than replaced: an entry changes
#: fields of the plain spec's rows (`inputs`, ...) and replaces or adds constraints;
#: every other key of an entry replaces the plain spec's (`variables` whole: the entry
#: draws what its rows need, in order; a nested list, a YAML alias of a shared group,
#: is spliced in)
_MERGED_BY = {"inputs": "name", "outputs": "name", "attributes": "name", "constraints": "id"}
_UPDATED_ITEMS = {"inputs", "outputs", "attributes"}


@functools.lru_cache(maxsize=1)
def _movement_table() -> dict:
    try:
        data = read_yaml(QUANTIZED_MOVEMENT.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SpecError(f"{QUANTIZED_MOVEMENT}: cannot read: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("defaults"), dict) \
            or not isinstance(data.get("ops"), dict):
        raise SpecError(f"{QUANTIZED_MOVEMENT}: (top level): expected 'defaults' and 'ops' mappings")
    return data


def quantized_movement() -> dict[str, str]:
    """``<op>_quantized`` -> ``<op>``: the data-movement ops the table
    quantized_movement.yaml gives a quantized form (the plain op on storage values)."""
    return {f"{op}{_FORM_SUFFIX}": op for op in _movement_table()["ops"]}


def _merge_rows(base: list, changes: list, key: str, update: bool, where: str) -> list:
    out = [dict(x) for x in base]
    index = {x.get(key): i for i, x in enumerate(out)}
    for c in changes:
        if not isinstance(c, dict) or key not in c:
            raise SpecError(f"{where}: each item needs a {key!r}")
        if c[key] in index:
            i = index[c[key]]
            out[i] = {**out[i], **c} if update else dict(c)
        elif update:
            raise SpecError(f"{where}: the plain spec has no {c[key]!r}")
        else:
            index[c[key]] = len(out)
            out.append(dict(c))
    return out


def quantized_movement_data(name: str) -> dict:
    """The spec document of ``name``: the plain op's spec file, the table's ``defaults``,
    then the op's entry (rows of `inputs`, `outputs`, `attributes` updated field by
    field; `constraints` replaced or appended by id; `variables` replaced whole,
    `more_variables` appended to the plain spec's; every other key replaced).
    SpecError names the table's key on a bad entry."""
    table, base = _movement_table(), quantized_movement()[name]
    entry, where = table["ops"][base], f"{QUANTIZED_MOVEMENT}: ops.{base}"
    if not isinstance(entry, dict):
        raise SpecError(f"{where}: expected a mapping")
    data = read_yaml((SPEC_DIR / f"{base}.yaml").read_text())
    data.update(table["defaults"])
    for k, v in entry.items():
        if k in _MERGED_BY:
            data[k] = _merge_rows(data.get(k, []), v, _MERGED_BY[k], k in _UPDATED_ITEMS,
                                  f"{where}.{k}")
        elif k in ("variables", "more_variables"):
            flat = [x for v_ in v for x in (v_ if isinstance(v_, list) else [v_])]
            data["variables"] = (data.get("variables", []) if k == "more_variables" else []) + flat
        else:
            data[k] = v
    data["op"] = name
    return data


def _load_quantized_movement(name: str) -> OpSpec:
    return parse_spec(quantized_movement_data(name), f"{QUANTIZED_MOVEMENT}#{name}")


def _op_accepts(op: str, t) -> bool:
    """``op_accepts(op, T)`` of the expression language: whether StableHLO op ``op``
    takes element type ``T`` as its first operand's (its spec's Type column), so that
    an XLA form built on that op allows what the op allows. (Defined here, where the
    specs are loaded, and added to the expression functions below.)"""
    name = t.element_type.name if isinstance(t, TensorType) else element_type(t).name
    return any(et.name == name for et in load_spec(op).inputs[0].types)


ex.FUNCTIONS["op_accepts"] = _op_accepts


def resolve_op(name: str) -> str:
    """A StableHLO op name, or an XLA name from an op spec's ``xla:`` list (``Rev`` ->
    ``reverse``, ``Collapse`` -> ``reshape``; case-insensitive); UnknownOp otherwise."""
    if (SPEC_DIR / f"{name}.yaml").exists() or name in quantized_forms() \
            or name in quantized_movement():
        return name
    matches = sorted({s.name for s in all_specs()
                      if name.lower() in (x.lower() for x in s.xla_names)})
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UnknownOp(f"XLA op {name!r} maps onto several ops: {', '.join(matches)}")
    raise UnknownOp(f"unknown op {name!r} (neither a StableHLO op nor an XLA name in a spec's "
                    f"xla list); known ops: {', '.join(op_names())}")


def import_family_module(op: str, module: str) -> None:
    """Import ``module`` (a name with ``{family}`` in it, e.g.
    ``conformance.oracles.{family}``) for ``op``'s spec family, where that module exists:
    the registries that family modules add to (oracles, jax mappings) load them so,
    rather than a hub importing them all. Nothing for an op without a spec."""
    import importlib
    import importlib.util
    try:
        family = load_spec(op).family
    except (UnknownOp, SpecError):
        return
    name = module.format(family=family)
    if importlib.util.find_spec(name) is not None:
        importlib.import_module(name)


def op_names() -> list[str]:
    """Every op: one per spec file, and the quantized forms of quantized_forms.yaml."""
    return sorted([p.stem for p in SPEC_DIR.glob("*.yaml")] + list(quantized_forms())
                  + list(quantized_movement()))


def all_specs() -> list[OpSpec]:
    return [load_spec(n) for n in op_names()]


def validate_all(paths: Iterable["str | Path"] | None = None) -> list[str]:
    """Validate spec files; returns one error line per bad file (empty: all good)."""
    errors = []
    for p in (paths or sorted(SPEC_DIR.glob("*.yaml"))):
        try:
            load_file(p)
        except SpecError as e:
            errors.append(str(e))
    if paths is None:
        try:
            for name in quantized_forms():
                _load_quantized_form(name)
        except SpecError as e:
            errors.append(str(e))
        for name in quantized_movement():
            try:
                _load_quantized_movement(name)
            except SpecError as e:
                errors.append(str(e))
    return errors


# Region texts type their calls by the called ops' specs (regions.py).
regions.use_specs(load_spec, (UnknownOp, SpecError, FileNotFoundError))

__all__ = ["import_family_module", "read_yaml", "OpSpec", "TensorSpec", "AttributeSpec", "Constraint", "ImplementationDefined",
           "Accuracy", "SpecError", "UnknownOp", "load_spec", "load_file", "op_names",
           "all_specs", "validate_all", "quantized_forms", "quantized_form_data",
           "quantized_movement", "quantized_movement_data", "binding_key", "parse_spec", "ALL_ELEMENT_TYPES",
           "TensorType"]
