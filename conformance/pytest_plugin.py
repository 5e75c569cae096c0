"""The pytest plugin: run the conformance suite against any backend with pytest.

Installed with the package (entry point ``pytest11: conformance``), so it is active
in every pytest run once the package is installed. A backend vendor runs::

    pytest --pyargs conformance.suite --conformance-backend=my_pkg.backend:MyBackend

Options (group "conformance")::

    --conformance-backend=NAME    jax (default), jax-gpu, numpy, module:Class, or the
                                  name of a ``conformance.backends`` entry point
    --conformance-depth=DEPTH     quick (default), default, deep
    --conformance-ops=a,b         only these ops
    --conformance-families=f,g    only ops of these families (arithmetic, bitwise, ...)
    --conformance-types=f32,si8   only type bindings that use one of these element types
    --conformance-seed=N          the run's seed (default 0): same seed, same cases
    --conformance-repro-dir=DIR   save a reproducer folder for every divergence

The suite (``conformance.suite``) has one test per op and type binding
(``test_op[add-f32]``, ``test_op[convert-si8->f32]``), one per spec example
(``test_example[add-0]``) and one per rule the invalid-case generator breaks
(``test_invalid[add-C1]``).

Fixtures for a vendor's own tests (available everywhere once the package is installed):

- ``conformance_backend``: the session's Backend instance (``--conformance-backend``);
- ``conformance_oracle``: :func:`conformance.oracles.evaluate`;
- ``conformance_spec``: a function ``op -> OpSpec``;
- ``conformance_strategies``: hypothesis strategies (``signatures``, ``cases``,
  ``invalid_signatures``, ``batch_inputs``);
- ``conformance_check``: ``check(case)`` runs a Case on the session backend, compares
  it with the oracle as the runner does, raises AssertionError naming the class,
  signature, inputs, expected and actual values on a divergence, and skips when the
  backend raises Unsupported. Returns a :class:`CheckResult` when they agree.

Tests may also ask for the parameters the suite itself uses:
``conformance_op_binding`` (one :class:`OpBinding` per selected op and type
binding), ``conformance_example`` (one :class:`ExampleRef` per spec example) and
``conformance_invalid_rule`` (one :class:`InvalidRule` per breakable rule); they
are parametrised from the filter options.
"""
from __future__ import annotations

import dataclasses
import types as _pytypes
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

DEPTH_NAMES = ("quick", "default", "deep")
DEFAULT_BACKEND = "jax"
DEFAULT_DEPTH = "quick"

_BACKEND_FIXTURES = ("conformance_backend",)


# ---------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------

def _comma_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "StableHLO op-semantics conformance suite")
    group.addoption("--conformance-backend", action="store", default=None, metavar="NAME",
                    help="backend under test: a short name (jax, jax-gpu, numpy), "
                         "module:Class, or a 'conformance.backends' entry point name "
                         f"(default: {DEFAULT_BACKEND})")
    group.addoption("--conformance-depth", action="store", default=None,
                    choices=DEPTH_NAMES,
                    help=f"how hard to look: {', '.join(DEPTH_NAMES)} "
                         f"(default: {DEFAULT_DEPTH})")
    group.addoption("--conformance-ops", action="store", default=None, metavar="OPS",
                    help="comma-separated op names to test (default: all)")
    group.addoption("--conformance-families", action="store", default=None,
                    metavar="FAMILIES",
                    help="comma-separated op families to test (arithmetic, bitwise, ...)")
    group.addoption("--conformance-types", action="store", default=None, metavar="TYPES",
                    help="comma-separated element types: only type bindings that use one "
                         "of them (e.g. f32,bf16,si8)")
    group.addoption("--conformance-seed", action="store", type=int, default=0, metavar="N",
                    help="seed of the run: the same seed gives the same cases (default: 0)")
    group.addoption("--conformance-repro-dir", action="store", default=None, metavar="DIR",
                    help="save a reproducer folder (case.json, repro.py) for every "
                         "divergence found by the suite")


@dataclasses.dataclass(frozen=True)
class Options:
    """The conformance options of a pytest session, validated."""

    backend: str
    backend_explicit: bool
    depth_name: str
    ops: tuple[str, ...] | None
    families: tuple[str, ...] | None
    element_types: tuple[str, ...] | None
    seed: int
    repro_dir: Path | None

    @property
    def depth(self):
        from conformance.runner import DEPTHS
        return DEPTHS[self.depth_name]

    @property
    def explicit(self) -> bool:
        return (self.backend_explicit or self.ops is not None or self.families is not None
                or self.element_types is not None)


_OPTIONS_KEY = pytest.StashKey[Options]()
_BACKEND_KEY = pytest.StashKey[Any]()


def _read_options(config: pytest.Config) -> Options:
    from conformance.specs import load_spec, op_names
    from conformance.types import UnknownElementType, element_type

    backend = config.getoption("conformance_backend")
    depth = config.getoption("conformance_depth") or DEFAULT_DEPTH
    ops_text = config.getoption("conformance_ops")
    fam_text = config.getoption("conformance_families")
    types_text = config.getoption("conformance_types")

    ops = None
    if ops_text is not None:
        ops = tuple(_comma_list(ops_text))
        known = set(op_names())
        bad = [o for o in ops if o not in known]
        if bad:
            raise pytest.UsageError(
                f"--conformance-ops: unknown op{'s' if len(bad) > 1 else ''} "
                f"{', '.join(map(repr, bad))}; known ops: {', '.join(sorted(known))}")
    families = None
    if fam_text is not None:
        families = tuple(_comma_list(fam_text))
        known_f = sorted({load_spec(n).family for n in op_names()})
        bad = [f for f in families if f not in known_f]
        if bad:
            raise pytest.UsageError(
                f"--conformance-families: unknown famil{'ies' if len(bad) > 1 else 'y'} "
                f"{', '.join(map(repr, bad))}; known families: {', '.join(known_f)}")
    element_types = None
    if types_text is not None:
        names = []
        for t in _comma_list(types_text):
            try:
                names.append(element_type(t).name)
            except UnknownElementType as e:
                raise pytest.UsageError(f"--conformance-types: unknown element type {t!r} "
                                        f"({e})") from None
        element_types = tuple(names)
    repro = config.getoption("conformance_repro_dir")
    return Options(backend=backend or DEFAULT_BACKEND, backend_explicit=backend is not None,
                   depth_name=depth, ops=ops, families=families,
                   element_types=element_types, seed=config.getoption("conformance_seed"),
                   repro_dir=Path(repro) if repro else None)


def _is_xdist_controller(config: pytest.Config) -> bool:
    return (not hasattr(config, "workerinput")
            and bool(getattr(config.option, "numprocesses", None))
            and getattr(config.option, "dist", "no") != "no")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a test of the StableHLO conformance suite")
    options = _read_options(config)
    config.stash[_OPTIONS_KEY] = options
    # A backend named on the command line is loaded now, so that a typo is a usage
    # error before anything runs. The default one is loaded only if a test uses it
    # (the plugin is active in every pytest run of an environment that has the package).
    if options.backend_explicit:
        if _is_xdist_controller(config):
            _check_resolvable(options.backend)   # the workers construct it
        else:
            load_backend(config)


def _check_resolvable(name: str) -> None:
    """Usage error if ``name`` cannot name a backend (without constructing it)."""
    import importlib
    from conformance.backends import BUILTIN, entry_points
    name = name.strip()
    if name in BUILTIN:
        return
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            mod = importlib.import_module(module)
        except Exception as e:  # noqa: BLE001
            raise pytest.UsageError(f"--conformance-backend: backend {name!r}: cannot import "
                                    f"{module!r}: {type(e).__name__}: {e}") from None
        if not hasattr(mod, attr):
            raise pytest.UsageError(f"--conformance-backend: backend {name!r}: module "
                                    f"{module!r} has no {attr!r}")
        return
    if name not in entry_points():
        known = sorted(set(BUILTIN) | set(entry_points()))
        raise pytest.UsageError(f"--conformance-backend: unknown backend {name!r}; known: "
                                f"{', '.join(known)}, or module:Class")


def options_of(config: pytest.Config) -> Options:
    try:
        return config.stash[_OPTIONS_KEY]
    except KeyError:  # configure has not run (unusual embedding): read them now
        config.stash[_OPTIONS_KEY] = _read_options(config)
        return config.stash[_OPTIONS_KEY]


def load_backend(config: pytest.Config):
    """The session's backend, loaded once; a backend that cannot load is a usage error."""
    try:
        return config.stash[_BACKEND_KEY]
    except KeyError:
        pass
    from conformance.backends import BackendLoadError, get_backend
    name = options_of(config).backend
    try:
        backend = get_backend(name)
    except BackendLoadError as e:
        raise pytest.UsageError(f"--conformance-backend: {e}") from None
    config.stash[_BACKEND_KEY] = backend
    return backend


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if any(set(_BACKEND_FIXTURES) & set(getattr(item, "fixturenames", ())) for item in items):
        load_backend(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    options = options_of(config)
    if not options.explicit:
        return None
    parts = [f"backend={options.backend}", f"depth={options.depth_name}",
             f"seed={options.seed}"]
    if options.ops is not None:
        parts.append(f"ops={','.join(options.ops)}")
    if options.families is not None:
        parts.append(f"families={','.join(options.families)}")
    if options.element_types is not None:
        parts.append(f"types={','.join(options.element_types)}")
    return ["conformance: " + " ".join(parts)]


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    backend = config.stash.get(_BACKEND_KEY, None)
    if backend is None:
        return
    try:
        described = backend.describe()
    except Exception as e:  # noqa: BLE001 - a summary line must not break the run
        described = {"name": getattr(backend, "name", "?"), "describe": f"failed: {e}"}
    terminalreporter.write_line(
        "conformance backend: " + ", ".join(f"{k}={v}" for k, v in described.items()))


# ---------------------------------------------------------------------------
# Selection and parametrisation
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class OpBinding:
    """One matrix cell of the suite: an op and one assignment of its type variables."""

    op: str
    binding: tuple[tuple[str, str], ...]
    n_bindings: int            # all bindings of the op (sets the examples per binding)

    @property
    def binding_dict(self) -> dict[str, str]:
        return dict(self.binding)

    @property
    def key(self) -> str:
        from conformance.specs import binding_key
        return binding_key(self.binding_dict)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.key}"


@dataclasses.dataclass(frozen=True)
class ExampleRef:
    op: str
    index: int

    @property
    def id(self) -> str:
        return f"{self.op}-{self.index}"


@dataclasses.dataclass(frozen=True)
class InvalidRule:
    op: str
    rule: str

    @property
    def id(self) -> str:
        return f"{self.op}-{self.rule}"


def selected_specs(options: Options) -> list:
    from conformance.runner import RunConfig, select_bindings, select_ops
    specs = select_ops(RunConfig(ops=options.ops, families=options.families))
    if options.element_types:
        specs = [s for s in specs if select_bindings(s, options.element_types)]
    return specs


def selected_op_bindings(options: Options) -> list[OpBinding]:
    from conformance.runner import select_bindings
    out = []
    for spec in selected_specs(options):
        n = len(spec.type_bindings())
        for b in select_bindings(spec, options.element_types):
            out.append(OpBinding(spec.name, tuple(b.items()), n))
    return out


def selected_examples(options: Options) -> list[ExampleRef]:
    from conformance import golden
    out = []
    for spec in selected_specs(options):
        for ex in golden.examples(spec):
            if options.element_types:
                used = {t.element_type.name for t in
                        ex.case.signature.input_types + ex.case.signature.result_types}
                if not used & set(options.element_types):
                    continue
            out.append(ExampleRef(spec.name, ex.index))
    return out


def selected_invalid_rules(options: Options) -> list[InvalidRule]:
    from conformance.generators import breakable
    return [InvalidRule(spec.name, rule) for spec in selected_specs(options)
            for rule in breakable(spec)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    wanted = [n for n in ("conformance_op_binding", "conformance_example",
                          "conformance_invalid_rule") if n in names]
    if not wanted:
        return
    options = options_of(metafunc.config)
    for name in wanted:
        if name == "conformance_op_binding":
            params = selected_op_bindings(options)
        elif name == "conformance_example":
            params = selected_examples(options)
        else:
            params = selected_invalid_rules(options)
        metafunc.parametrize(name, params, ids=[p.id for p in params])


# ---------------------------------------------------------------------------
# Failure reporting
# ---------------------------------------------------------------------------

class ConformanceFailure(AssertionError):
    """A divergence found by the suite; reported as its message alone (no traceback)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.excinfo is not None and report.failed \
            and isinstance(call.excinfo.value, ConformanceFailure):
        exc = call.excinfo.value
        text = str(exc)
        # hypothesis notes the failing example's arguments (a long Signature repr);
        # the message already names the signature and the case id.
        notes = [n for n in getattr(exc, "__notes__", ())
                 if n and not n.startswith(("Failing test case", "Falsifying example"))]
        if notes:
            text += "\n\n" + "\n".join(notes)
        report.longrepr = text
    return report


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def conformance_options(pytestconfig: pytest.Config) -> Options:
    """The validated ``--conformance-*`` options of this session."""
    return options_of(pytestconfig)


@pytest.fixture(scope="session")
def conformance_backend(pytestconfig: pytest.Config):
    """The Backend under test (``--conformance-backend``), one instance per session."""
    return load_backend(pytestconfig)


@pytest.fixture(scope="session")
def conformance_oracle() -> Callable:
    """The numpy reference: ``evaluate(op, inputs, attributes, *, result_types=None)``."""
    from conformance.oracles import evaluate
    return evaluate


@pytest.fixture(scope="session")
def conformance_spec() -> Callable:
    """``spec(op) -> OpSpec``: an op's machine-readable spec."""
    from conformance.specs import load_spec
    return load_spec


@pytest.fixture(scope="session")
def conformance_strategies() -> _pytypes.SimpleNamespace:
    """Hypothesis strategies and value generators built from the specs."""
    from conformance import generators as g
    return _pytypes.SimpleNamespace(signatures=g.signatures, cases=g.cases,
                                    invalid_signatures=g.invalid_signatures,
                                    batch_inputs=g.batch_inputs, breakable=g.breakable)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """What ``conformance_check`` found for an agreeing case."""

    cls: str
    expected: list
    actual: list | None
    message: str


def _fmt_array(x) -> str:
    import json
    import numpy as np
    from conformance.literals import to_hex, to_literal
    from conformance.types import type_of
    try:
        x = np.asarray(x)
        t = type_of(x)
        text = json.dumps(to_literal(x))
    except Exception:  # noqa: BLE001 - a backend may return something odd; show it anyway
        text = repr(x)
        return text if len(text) <= 600 else text[:600] + " ..."
    if len(text) > 600:
        text = text[:600] + " ..."
    if (t.element_type.is_float or t.element_type.is_complex) and 0 < x.size <= 8:
        text += f"  (bits {to_hex(x)})"
    return f"{t} {text}"


def describe_case(case, cls: str, expected: Sequence | None, actual: Sequence | None,
                  message: str = "", title: str | None = None) -> str:
    """A readable multi-line account of one case's verdict."""
    lines = [title or f"{case.op}: {cls} divergence",
             f"  class:     {cls}{(' - ' + message) if message else ''}",
             f"  signature: {case.signature.key()}"]
    for i, x in enumerate(case.inputs):
        lines.append(f"  input {i}:   {_fmt_array(x)}")
    for i, e in enumerate(expected or ()):
        lines.append(f"  expected {i}: {_fmt_array(e)}   (oracle)")
    if actual is None:
        lines.append("  actual:    (no result)")
    else:
        for i, a in enumerate(actual):
            lines.append(f"  actual {i}:   {_fmt_array(a)}")
    return "\n".join(lines)


def check(backend, case) -> CheckResult:
    """Run ``case`` on ``backend`` and compare with the oracle (repro.check_case).

    Raises ConformanceFailure (an AssertionError) on any divergence and calls
    pytest.skip when the backend says Unsupported.
    """
    __tracebackhide__ = True
    from conformance.repro import check_case
    cls, expected, actual, message = check_case(backend, case)
    if cls == "unsupported":
        pytest.skip(f"unsupported by {getattr(backend, 'name', backend)}: {message}")
    if cls != "pass":
        raise ConformanceFailure(describe_case(
            case, cls, expected, actual, message,
            title=f"{case.op} on {getattr(backend, 'name', backend)}: {cls} divergence"))
    return CheckResult(cls, expected, actual, message)


@pytest.fixture
def conformance_check(conformance_backend) -> Callable:
    """``check(case)``: run a Case on the session backend and compare with the oracle."""
    def _check(case) -> CheckResult:
        __tracebackhide__ = True
        return check(conformance_backend, case)
    return _check


# ---------------------------------------------------------------------------
# What the suite's tests do (conformance/suite/test_conformance.py calls these)
# ---------------------------------------------------------------------------

def _hypothesis_settings(max_examples: int):
    from hypothesis import HealthCheck, Phase, settings
    # No shrinking: the suite minimises a diverging case itself (fewest elements),
    # and every shrink step would be a new compile on the backend.
    return settings(max_examples=max_examples, deadline=None, database=None,
                    derandomize=True, phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large],
                    print_blob=False, report_multiple_bugs=False)


def signatures_per_binding(options: Options, n_bindings: int) -> int:
    """As the runner: ops with many bindings (convert) get fewer signatures per binding."""
    d = options.depth
    return max(1, min(d.signatures, d.max_signatures_per_op // max(1, n_bindings)))


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:500]


def _divergence_message(backend, spec, sig, stacked, expected, actual, verdict, value_seed,
                        batch_index, options: Options, key: str) -> str:
    import numpy as np
    from conformance.case import Case
    from conformance.compare import worst
    from conformance.minimize import element_mask, minimize
    from conformance.repro import check_case
    from conformance.runner import stable_hash

    names = verdict.case_class_names()
    diverging = [int(c) for c in verdict.diverging_cases()]
    cls = worst([names[c] for c in diverging])
    c = next(i for i in diverging if names[i] == cls)
    case = Case(sig, tuple(np.array(x[c], order="C") for x in stacked),
                f"{options.seed}:{options.depth_name}:{spec.name}:{key}:{value_seed}:"
                f"{batch_index}:{c}")
    counts = ", ".join(f"{k}={v}" for k, v in sorted(verdict.counts().items()))

    def classify(k):
        got, _, _, _ = check_case(backend, k)
        return None if got in ("pass", "unsupported") else got

    if verdict.type_message:
        small, small_cls = case, "type"
    else:
        try:
            small, small_cls = minimize(spec, case, element_mask(verdict.element_classes, c),
                                        classify)
        except Exception:  # noqa: BLE001 - the minimiser must not hide the divergence
            small, small_cls = case, None
    if small_cls is not None:
        got_cls, exp_small, act_small, msg = check_case(backend, small)
        note = "" if small is case else "minimised from a case of the batch"
    else:
        # Only diverges in the batch (or the minimiser failed): show the batch case.
        got_cls, msg = cls, verdict.type_message or ""
        exp_small = [np.asarray(e[c]) for e in expected]
        act_small = [np.asarray(a[c]) for a in actual] if not verdict.type_message else \
            [np.asarray(a) for a in actual]
        note = "does not diverge when run alone (only in the batched executable)"
    name = getattr(backend, "name", str(backend))
    text = describe_case(small, got_cls, exp_small, act_small, msg,
                         title=f"{spec.name} [{key}] on {name}: {cls} divergence "
                               f"({len(diverging)} of {len(names)} cases in the batch: "
                               f"{counts})")
    extra = [f"  case id:   {case.case_id}"]
    if note:
        extra.append(f"  note:      {note}")
    if small is not case:
        extra.append(f"  batch case signature: {sig.key()}")
    if options.repro_dir is not None:
        from conformance.repro import folder_name, save
        folder = options.repro_dir / folder_name(name, spec.name, key, cls,
                                                 stable_hash(case.case_id) % 10 ** 6)
        save(folder, name, small, small_cls or cls, exp_small, act_small,
             {"original_case_id": case.case_id})
        extra.append(f"  reproducer: python {folder / 'repro.py'}")
    return text + "\n" + "\n".join(extra)


def run_op_binding(backend, param: OpBinding, options: Options) -> None:
    """The body of ``test_op``: hypothesis draws signatures of one binding and value
    seeds; each example runs batches of value cases through the backend's batch
    executable and compares them with the oracle."""
    __tracebackhide__ = True
    import numpy as np
    from hypothesis import given, seed as hseed, strategies as st
    from conformance import oracles
    from conformance.backends import Unsupported
    from conformance.compare import PASS, compare_batch
    from conformance.generators import batch_inputs, signatures
    from conformance.runner import stable_hash
    from conformance.specs import load_spec

    spec = load_spec(param.op)
    depth = options.depth
    key = param.key
    unsupported: list[str] = []
    ran = [0]

    @hseed(stable_hash(options.seed, spec.name, key))
    @_hypothesis_settings(signatures_per_binding(options, param.n_bindings))
    @given(sig=signatures(spec, param.binding_dict, depth.shape_profile),
           value_seed=st.integers(0, 2 ** 32 - 1))
    def example(sig, value_seed):
        __tracebackhide__ = True
        try:
            exe = backend.batch_executable(sig)
        except Unsupported as e:
            unsupported.append(str(e))
            return
        except Exception as e:  # noqa: BLE001 - the backend's failure is the finding
            raise ConformanceFailure(f"{spec.name} [{key}]: backend_error: compiling "
                                     f"{sig.key()} failed: {_one_line(e)}") from e
        accuracy = spec.accuracy(sig.input_types[0].element_type)
        for b in range(depth.batches):
            rng = np.random.default_rng([value_seed, b])
            stacked = batch_inputs(sig, rng, depth.batch_size, spec)
            expected = oracles.evaluate_batch(sig, stacked, spec)
            masks = oracles.implementation_defined(sig, stacked, spec, expected)
            try:
                actual = exe(stacked)
            except Unsupported as e:
                unsupported.append(str(e))
                return
            except Exception as e:  # noqa: BLE001
                raise ConformanceFailure(f"{spec.name} [{key}]: backend_error: running "
                                         f"{sig.key()} failed: {_one_line(e)}") from e
            verdict = compare_batch(expected, actual, accuracy, masks, stacked,
                                    lambda xs: oracles.evaluate_batch(sig, xs, spec))
            if (verdict.case_classes != PASS).any():
                raise ConformanceFailure(_divergence_message(
                    backend, spec, sig, stacked, expected, actual, verdict, value_seed, b,
                    options, key))
        ran[0] += 1

    example()
    if unsupported:
        reason = unsupported[0]
        if not ran[0]:
            pytest.skip(f"unsupported by {getattr(backend, 'name', backend)}: {reason}")
        warnings.warn(pytest.PytestWarning(
            f"conformance: {spec.name} [{key}]: {len(unsupported)} signature(s) unsupported "
            f"by {getattr(backend, 'name', backend)}, {ran[0]} checked: {reason}"))


def run_example(backend, param: ExampleRef) -> None:
    """The body of ``test_example``: one example of the spec, compared exactly (or with
    the example's own tolerance)."""
    __tracebackhide__ = True
    import numpy as np
    from conformance import golden
    from conformance.backends import Unsupported
    from conformance.specs import load_spec

    ex = golden.examples(load_spec(param.op))[param.index]
    name = getattr(backend, "name", str(backend))
    try:
        actual = [np.asarray(a) for a in backend.run(ex.case)]
    except Unsupported as e:
        pytest.skip(f"unsupported by {name}: {e}")
    except Exception as e:  # noqa: BLE001
        raise ConformanceFailure(f"{param.op} example {param.index} ({ex.name}) on {name}: "
                                 f"backend_error: {_one_line(e)}\n"
                                 f"  signature: {ex.case.signature.key()}") from e
    problem = golden.mismatch(ex, actual)
    if problem is not None:
        raise ConformanceFailure(
            describe_case(ex.case, "example", ex.expected, actual, problem,
                          title=f"{param.op} example {param.index} ({ex.name}) on {name}: "
                                f"differs from the spec"))


def run_invalid_rule(backend, param: InvalidRule, options: Options) -> None:
    """The body of ``test_invalid``: programs that break one rule of the spec must be
    rejected (any exception other than Unsupported)."""
    __tracebackhide__ = True
    import numpy as np
    from hypothesis import given, seed as hseed, strategies as st
    from hypothesis.errors import Unsatisfiable
    from conformance.case import Case
    from conformance.generators import batch_inputs, invalid_signatures
    from conformance.runner import _run_invalid, stable_hash
    from conformance.specs import load_spec

    spec = load_spec(param.op)
    depth = options.depth
    name = getattr(backend, "name", str(backend))
    from conformance.specs.validity import checks
    text = next((c.text for c in checks(spec) if c.id == param.rule), param.rule)
    unsupported: list[str] = []
    rejected = [0]

    @hseed(stable_hash(options.seed, spec.name, "invalid", param.rule))
    @_hypothesis_settings(depth.invalid_per_rule)
    @given(sig=invalid_signatures(spec, param.rule, depth.shape_profile),
           value_seed=st.integers(0, 2 ** 32 - 1))
    def example(sig, value_seed):
        __tracebackhide__ = True
        rng = np.random.default_rng(value_seed)
        inputs = tuple(x[0] for x in batch_inputs(sig, rng, 1, spec))
        outcome, reason = _run_invalid(backend, Case(sig, inputs))
        if outcome == "unsupported":
            unsupported.append(reason or "")
        elif outcome == "accepted_invalid":
            raise ConformanceFailure(
                f"{spec.name} {param.rule} on {name}: accepted_invalid: the backend ran a "
                f"program that breaks {param.rule}\n"
                f"  rule:      {param.rule}: {text}\n"
                f"  signature: {sig.key()}")
        else:
            rejected[0] += 1

    try:
        example()
    except Unsatisfiable:
        pytest.skip(f"no signature breaking {param.rule} alone could be generated")
    if unsupported and not rejected[0]:
        pytest.skip(f"unsupported by {name}: {unsupported[0]}")
