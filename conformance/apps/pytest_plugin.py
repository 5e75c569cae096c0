"""The pytest plugin: run the conformance suite against any backend with pytest.

Installed with the package (entry point ``pytest11: conformance``), so it is active
in every pytest run once the package is installed. A backend vendor runs::

    pytest --pyargs conformance.apps.suite --conformance-backend=my_pkg.backend:MyBackend

Options (group "conformance")::

    --conformance-backend=NAME    jax (default), jax-gpu, numpy, module:Class, or the
                                  name of a ``conformance.backends`` entry point
    --conformance-depth=DEPTH     quick (default), default, deep
    --conformance-ops=a,b         only these ops
    --conformance-families=f,g    only ops of these families (arithmetic, bitwise, ...)
    --conformance-types=f32,si8   only type bindings that use one of these element types
    --conformance-seed=N          generate the cases from this seed: the same seed gives
                                  the same cases (default: random locally, 0 in CI)
    --conformance-repro-dir=DIR   save a reproducer folder for every divergence
    --conformance-expectations=FILE
                                  known divergences (the CLI's expectations file): a test
                                  whose divergences the file lists is an xfail with the
                                  entry's reason; entries that matched nothing are
                                  reported stale at the end of the session
    --conformance-fail-on-stale   with --conformance-expectations: stale entries fail
                                  the session (exit status 1)
    --conformance-profile=P       auto (default: ci when the environment variable CI is
                                  set, else local), local, ci
    --conformance-database=DIR    hypothesis example database of local runs (default:
                                  <rootdir>/.hypothesis/conformance; "none": off)

Hypothesis settings profiles
----------------------------
The suite's hypothesis settings are registered as profiles (``conformance-quick``,
``conformance-default``, ``conformance-deep``, ``conformance-ci``), following
hypothesis' advice for a test suite that runs both on a developer's machine and in CI:

- everywhere: ``deadline=None`` (a first compile is slow, and a deadline would make
  that flaky), no shrinking (the suite minimises a diverging case itself, and every
  shrink step would be a new compile), one bug reported per test;
- local runs (``conformance-<depth>``): random generation, so that every run looks at
  new cases, and a persistent example database
  (``DirectoryBasedExampleDatabase``): a divergence once found is replayed first on
  the next run (phase ``reuse``), until it is fixed;
- CI (``conformance-ci``, with ``--conformance-profile=ci`` or when ``CI`` is set):
  ``derandomize=True`` and ``database=None`` (the same cases on every run, nothing
  read or written between runs), ``print_blob=True``. The suite seeds each test from
  ``--conformance-seed`` (0 by default) and its op, binding or rule.

The op tests (``test_op``) check the signatures and value batches of the CLI's plan
(conformance.checking.plan) through the CLI's checker (conformance.checking.checker): with
``--conformance-seed=N`` exactly those ``conformance run --seed N`` checks at the same
depth (the CI profile's seed is 0), and a failure prints the case id that
``conformance repro ID`` re-runs. A local run without a seed checks a fresh random plan
seed each time, after the (seed, signature) pairs that failed before, which the example
database keeps. The invalid-program tests (``test_invalid``) draw with hypothesis under
the profiles above.

``--conformance-depth`` sets the signatures per type binding (ops with many bindings
get fewer each), the shapes and the value batches. ``--conformance-seed`` on a local
run makes it deterministic too; the database is then not used. The
profiles are registered when pytest starts, so a vendor's own hypothesis tests can use
them as well (``settings.get_profile("conformance-ci")``, or
``--hypothesis-profile=conformance-ci`` for every test of the session; outside pytest,
:func:`register_profiles` registers them). A failing case's message ends with how to
get it again (the seed, or the example database).

Expectations
------------
With ``--conformance-expectations``, each test's divergences are matched against the
file (backend name, op, binding key such as ``f32`` or ``si8->f32``, class; for
``test_invalid`` the rule, for ``test_example`` the rule ``example-<index>``). A test
whose every observed divergence class is expected is an xfail whose reason is the
entry's; a test that also diverges in a class that is not listed fails, naming that
class. A listed divergence that does not occur does not fail its test (use
``--runxfail`` to see expected divergences as failures); instead, the terminal summary
lists the entries that matched nothing although a test that could have matched them
ran to the end ("stale"), with ``--conformance-fail-on-stale`` failing the session.
This works under pytest-xdist: the workers report what each test covered and matched
in the reports' ``user_properties``, and the controller decides what is stale.

The suite (``conformance.apps.suite``) has one test per op and type binding
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

import contextlib
import dataclasses
import tempfile
import types as _pytypes
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

DEPTH_NAMES = ("quick", "default", "deep")
DEFAULT_BACKEND = "jax"
DEFAULT_DEPTH = "quick"
PROFILE_CHOICES = ("auto", "local", "ci")
DEFAULT_DATABASE = ".hypothesis/conformance"
DEFAULT_TIMEOUT = 60.0      # as ``conformance run --timeout``
MAX_TIMEOUT = 604800.0      # a week, as ``conformance run --timeout``

_BACKEND_FIXTURES = ("conformance_backend",)


# ---------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------

def _comma_list(text: str, option: str) -> list[str]:
    """A comma list option, as the CLI reads one: at least one item, no empty ones."""
    from conformance.apps.cli import UsageError, list_option
    try:
        return list_option(text, option)
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "StableHLO op-semantics conformance suite")
    group.addoption("--conformance-backend", action="store", default=None, metavar="NAME",
                    help="backend under test: a short name (jax, jax-gpu, numpy), "
                         "module:Class, or a 'conformance.backends' entry point name "
                         f"(default: {DEFAULT_BACKEND})")
    group.addoption("--conformance-depth", action="store", default=None,
                    choices=DEPTH_NAMES,
                    help=f"how hard to look: {', '.join(DEPTH_NAMES)} "
                         f"(default: {DEFAULT_DEPTH}); sets the hypothesis profile "
                         "conformance-<depth>")
    group.addoption("--conformance-ops", action="store", default=None, metavar="OPS",
                    help="comma-separated op names to test (default: all)")
    group.addoption("--conformance-families", action="store", default=None,
                    metavar="FAMILIES",
                    help="comma-separated op families to test (arithmetic, bitwise, ...)")
    group.addoption("--conformance-types", action="store", default=None, metavar="TYPES",
                    help="comma-separated element types: only type bindings that use one "
                         "of them (e.g. f32,bf16,si8)")
    group.addoption("--conformance-seed", action="store", type=int, default=None,
                    metavar="N",
                    help="generate the cases from this seed: the same seed gives the same "
                         "cases (default: random on local runs, 0 with the ci profile); "
                         "a seeded run does not use the example database")
    group.addoption("--conformance-repro-dir", action="store", default=None, metavar="DIR",
                    help="save a reproducer folder (case.json, repro.py) for every "
                         "divergence found by the suite")
    group.addoption("--conformance-expectations", action="store", default=None,
                    metavar="FILE",
                    help="expectations file (known divergences): tests whose divergences "
                         "it lists xfail with the entry's reason; entries that matched "
                         "nothing are reported stale")
    group.addoption("--conformance-fail-on-stale", action="store_true", default=False,
                    help="with --conformance-expectations: fail the session (exit status "
                         "1) when an entry is stale")
    group.addoption("--conformance-profile", action="store", default="auto",
                    choices=PROFILE_CHOICES,
                    help="hypothesis behaviour: local (random cases, example database), "
                         "ci (derandomized, no database), or auto: ci when the "
                         "environment variable CI is set (default: auto)")
    group.addoption("--conformance-isolate", action="store_true", default=None,
                    dest="conformance_isolate",
                    help="run the backend in a child process, so that a crash or hang costs "
                         "one case and a failed test, never the session (default: as the "
                         "backend asks: xla, interpreter, iree, pjrt and vendor classes "
                         "that do not say isolate = False)")
    group.addoption("--conformance-no-isolate", action="store_false",
                    dest="conformance_isolate",
                    help="run the backend in the pytest process, whatever it asks")
    group.addoption("--conformance-timeout", action="store", type=float, default=None,
                    metavar="SECONDS",
                    help="seconds an isolated backend may take per compile or batch "
                         f"(> 0; default {DEFAULT_TIMEOUT:g}); a backend that hangs "
                         "twice in an op is not run on its other signatures")
    group.addoption("--conformance-database", action="store", default=None, metavar="DIR",
                    help="hypothesis example database of local runs, where failing cases "
                         f"are kept and replayed first next time (default: <rootdir>/"
                         f"{DEFAULT_DATABASE}); 'none' turns it off")


@dataclasses.dataclass(frozen=True)
class Options:
    """The conformance options of a pytest session, validated."""

    backend: str
    backend_explicit: bool
    depth_name: str
    ops: tuple[str, ...] | None
    families: tuple[str, ...] | None
    element_types: tuple[str, ...] | None
    seed: int | None               # None: hypothesis draws at random (local runs)
    repro_dir: Path | None
    profile: str = "local"         # "local" or "ci" (auto resolved)
    database: Path | None = None   # the example database's folder (local runs)
    expectations: Any = dataclasses.field(default=None, compare=False)
    fail_on_stale: bool = False
    isolate: bool | None = None    # None: as the backend asks (conformance.checking.isolation)
    timeout: float = DEFAULT_TIMEOUT

    @property
    def depth(self):
        from conformance.checking.plan import DEPTHS
        return DEPTHS[self.depth_name]

    @property
    def hypothesis_profile(self) -> str:
        """The name of the hypothesis settings profile the suite's tests use."""
        return "conformance-ci" if self.profile == "ci" else f"conformance-{self.depth_name}"

    @property
    def explicit(self) -> bool:
        return (self.backend_explicit or self.ops is not None or self.families is not None
                or self.element_types is not None or self.expectations is not None)


_OPTIONS_KEY = pytest.StashKey[Options]()
_BACKEND_KEY = pytest.StashKey[Any]()
_BUDGET_KEY = pytest.StashKey[Any]()


def in_ci() -> bool:
    """Whether this looks like a CI run: the CI environment variable is set (as
    hypothesis decides for its own built-in ``ci`` profile)."""
    import os
    if "CI" in os.environ:
        return True
    try:  # hypothesis also knows vendor-specific variables (TF_BUILD, GITLAB_CI, ...)
        from hypothesis._settings import is_in_ci
        return bool(is_in_ci())
    except Exception:  # noqa: BLE001 - a private helper; the CI variable is the rule
        return False


def _read_options(config: pytest.Config) -> Options:
    from conformance.specs import load_spec, op_names
    from conformance.core.types import UnknownElementType, element_type

    backend = config.getoption("conformance_backend")
    depth = config.getoption("conformance_depth") or DEFAULT_DEPTH
    ops_text = config.getoption("conformance_ops")
    fam_text = config.getoption("conformance_families")
    types_text = config.getoption("conformance_types")

    ops = None
    if ops_text is not None:
        ops = tuple(_comma_list(ops_text, "--conformance-ops"))
        known = set(op_names())
        bad = [o for o in ops if o not in known]
        if bad:
            raise pytest.UsageError(
                f"--conformance-ops: unknown op{'s' if len(bad) > 1 else ''} "
                f"{', '.join(map(repr, bad))}; known ops: {', '.join(sorted(known))}")
    families = None
    if fam_text is not None:
        families = tuple(_comma_list(fam_text, "--conformance-families"))
        known_f = sorted({load_spec(n).family for n in op_names()})
        bad = [f for f in families if f not in known_f]
        if bad:
            raise pytest.UsageError(
                f"--conformance-families: unknown famil{'ies' if len(bad) > 1 else 'y'} "
                f"{', '.join(map(repr, bad))}; known families: {', '.join(known_f)}")
    element_types = None
    if types_text is not None:
        names = []
        for t in _comma_list(types_text, "--conformance-types"):
            try:
                names.append(element_type(t).name)
            except UnknownElementType as e:
                raise pytest.UsageError(f"--conformance-types: unknown element type {t!r} "
                                        f"({e})") from None
        element_types = tuple(names)
    for option, given in (("--conformance-ops", ops), ("--conformance-families", families),
                          ("--conformance-types", element_types)):
        if given is not None and not given:
            raise pytest.UsageError(f"{option}: empty list")
    _check_selection(ops, families, element_types)
    repro = config.getoption("conformance_repro_dir")
    if repro is not None:
        _check_folder(repro, "--conformance-repro-dir")

    profile = config.getoption("conformance_profile") or "auto"
    if profile == "auto":
        profile = "ci" if in_ci() else "local"
    seed = config.getoption("conformance_seed")
    if seed is not None and seed < 0:
        raise pytest.UsageError(f"--conformance-seed: {seed} is negative; a seed is an integer "
                                ">= 0")
    if seed is None and profile == "ci":
        seed = 0
    db_text = config.getoption("conformance_database")
    if db_text is None:
        database = Path(str(config.rootpath)) / DEFAULT_DATABASE
    elif not db_text.strip():
        raise pytest.UsageError("--conformance-database: empty path ('none' turns the "
                                "database off)")
    elif db_text.strip().lower() == "none":
        database = None
    else:
        database = Path(config.invocation_params.dir) / db_text
        _check_folder(str(database), "--conformance-database")
    if profile == "ci":
        database = None       # derandomized: nothing is read or written between runs

    expectations = None
    exp_text = config.getoption("conformance_expectations")
    if exp_text is not None:
        from conformance.apps.expectations import ExpectationsError, load_expectations
        try:   # relative to the current directory, as pytest's own file options
            expectations = load_expectations(exp_text)
        except ExpectationsError as e:
            raise pytest.UsageError(f"--conformance-expectations: {e}") from None
    elif config.getoption("conformance_fail_on_stale"):
        raise pytest.UsageError("--conformance-fail-on-stale needs --conformance-expectations")
    timeout = config.getoption("conformance_timeout")
    if timeout is not None and not 0 < timeout <= MAX_TIMEOUT:
        raise pytest.UsageError(f"--conformance-timeout: expected a number of seconds > 0 and "
                                f"at most {MAX_TIMEOUT:g}, got {timeout:g}")
    return Options(backend=backend or DEFAULT_BACKEND, backend_explicit=backend is not None,
                   depth_name=depth, ops=ops, families=families,
                   element_types=element_types, seed=seed,
                   repro_dir=Path(repro) if repro else None, profile=profile,
                   database=database, expectations=expectations,
                   fail_on_stale=bool(config.getoption("conformance_fail_on_stale")),
                   isolate=config.getoption("conformance_isolate"),
                   timeout=DEFAULT_TIMEOUT if timeout is None else timeout)


def _check_selection(ops, families, element_types) -> None:
    """Every element type allowed by a selected op, as ``conformance run`` checks it."""
    from conformance.apps.cli import UsageError, select_specs
    try:
        select_specs(ops, families, element_types)
    except UsageError as e:
        text = str(e)
        for cli_name, name in (("--ops", "--conformance-ops"), ("--family",
                               "--conformance-families"), ("--types", "--conformance-types")):
            if text.startswith(cli_name):
                text = name + text[len(cli_name):]
        raise pytest.UsageError(text) from None


def _check_folder(text: str, option: str) -> None:
    """A folder the session can create or write (as the CLI's --out)."""
    from conformance.apps.cli import UsageError, output_dir
    try:
        output_dir(text, option)
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None


def _is_xdist_controller(config: pytest.Config) -> bool:
    return (not hasattr(config, "workerinput")
            and bool(getattr(config.option, "numprocesses", None))
            and getattr(config.option, "dist", "no") != "no")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: the profiles exist before hypothesis' own plugin loads one named by
    # --hypothesis-profile (conformance-ci, ...).
    config.addinivalue_line("markers", "conformance: a test of the StableHLO conformance suite")
    # Running the suite: jax gets 8 host CPU devices for the collectives' grids, before
    # anything starts it (other pytest sessions keep their XLA_FLAGS)
    if config.getoption("conformance_backend", None) is not None or any(
            "conformance.apps.suite" in str(a) for a in config.invocation_params.args):
        from conformance.backends.jaxlib_support import ask_for_host_devices
        ask_for_host_devices()
    options = _read_options(config)
    config.stash[_OPTIONS_KEY] = options
    if options.expectations is not None:
        config.stash[_GATE_KEY] = state = _GateState()
        config.pluginmanager.register(state, "conformance-expectations")
    # Registering imports hypothesis (150 ms): done now only where hypothesis is in use
    # already or one of the profiles is asked for; the suite registers them on first use.
    import sys
    asked = str(config.getoption("hypothesis_profile", None) or "")
    if "hypothesis" in sys.modules or asked.startswith("conformance-"):
        register_profiles(options.database)
    # A backend named on the command line is loaded now, so that a typo is a usage
    # error before anything runs. The default one is loaded only if a test uses it
    # (the plugin is active in every pytest run of an environment that has the package).
    if options.backend_explicit:
        if _is_xdist_controller(config):
            _check_resolvable(options.backend)   # the workers construct it
        else:
            load_backend(config)


def _check_resolvable(name: str) -> None:
    """Usage error if ``name`` cannot name a backend (without constructing it; a
    ``module:Class`` is looked for as ``python -m`` would, the working directory too)."""
    from conformance.backends import BackendLoadError, resolve
    try:
        resolve(name.strip())
    except BackendLoadError as e:
        raise pytest.UsageError(f"--conformance-backend: {e}") from None


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
    from conformance.checking.isolation import prepare_backends
    options = options_of(config)
    try:
        backend = get_backend(options.backend)
        # A backend that crashes or hangs costs a failed test, never the session: as
        # `conformance run` does, it runs in a child process unless it says otherwise.
        # The child's stderr goes to the repro folder, or a folder of its own.
        logs = options.repro_dir or Path(tempfile.mkdtemp(prefix="conformance-backend-"))
        backend = prepare_backends([backend], logs, options.isolate, options.timeout)[0]
    except BackendLoadError as e:
        raise pytest.UsageError(f"--conformance-backend: {e}") from None
    config.stash[_BACKEND_KEY] = backend
    return backend


def hang_budget(config: pytest.Config):
    """The session's timeouts per (backend, op) (conformance.checking.stream.HangBudget):
    after two in an op, the backend is not run on the op's other signatures, invalid
    programs and examples."""
    try:
        return config.stash[_BUDGET_KEY]
    except KeyError:
        from conformance.checking.stream import HangBudget
        budget = config.stash[_BUDGET_KEY] = HangBudget()
        return budget


def pytest_unconfigure(config: pytest.Config) -> None:
    """The isolated backend's child process ends with the session."""
    backend = config.stash.get(_BACKEND_KEY, None)
    close = getattr(backend, "close", None)
    if close is not None:
        close()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if any(set(_BACKEND_FIXTURES) & set(getattr(item, "fixturenames", ())) for item in items):
        load_backend(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    options = options_of(config)
    if not options.explicit:
        return None
    parts = [f"backend={options.backend}", f"depth={options.depth_name}",
             f"profile={options.hypothesis_profile}",
             f"seed={'random' if options.seed is None else options.seed}"]
    if options.ops is not None:
        parts.append(f"ops={','.join(options.ops)}")
    if options.families is not None:
        parts.append(f"families={','.join(options.families)}")
    if options.element_types is not None:
        parts.append(f"types={','.join(options.element_types)}")
    lines = ["conformance: " + " ".join(parts)]
    if options.seed is None and options.database is not None:
        lines.append(f"conformance: example database {options.database}")
    if options.expectations is not None:
        lines.append(f"conformance: expectations {options.expectations.path} "
                     f"({len(options.expectations.entries)} entries)")
    return lines


# ---------------------------------------------------------------------------
# Expectations: what each test covered and matched, gathered where the session ends
# ---------------------------------------------------------------------------

_PROPERTY = "conformance_expectations"


class _GateState:
    """The session's expectation bookkeeping; a plugin object, so that it sees every
    test report, the xdist workers' included (on the controller)."""

    def __init__(self) -> None:
        self.covered: set[int] = set()                 # entry indices
        self.matched: dict[int, list[str]] = {}        # entry index -> node ids
        self.stale: list = []
        self.failed_session = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in getattr(report, "user_properties", ()):
            if name != _PROPERTY or not isinstance(value, dict):
                continue
            self.covered.update(int(i) for i in value.get("covered", ()))
            for i in value.get("matched", ()):
                self.matched.setdefault(int(i), []).append(report.nodeid)


_GATE_KEY = pytest.StashKey[_GateState]()


def _subject(item: pytest.Item) -> tuple[str, str | None, str | None] | None:
    """(op, binding key, rule) of a test of the suite (or of a vendor test that takes
    one of the suite's parameters)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        if isinstance(value, OpBinding):
            return value.op, value.key, None
        if isinstance(value, ExampleRef):
            return value.op, None, f"example-{value.index}"
        if isinstance(value, InvalidRule):
            return value.op, None, value.rule
    return None


def _covers(e, backend: str, info: dict, op: str, element_type: str | None,
            rule: str | None, depth: str | None = None) -> bool:
    """Whether a test of (op, element type or rule) on this backend, at ``depth``, could
    match entry ``e`` (any class): the entry is stale if such a test ran to the end and
    it did not (an entry seen at other depths only is not judged)."""
    return e.covers(backend, info, op, element_type, rule, depth=depth)


def _record_expectations(item: pytest.Item, call: pytest.CallInfo, report) -> None:
    """On the call report: which entries this test covered and which it matched, as a
    user property (so that it reaches the xdist controller with the report)."""
    options = options_of(item.config)
    if options.expectations is None:
        return
    exc = call.excinfo.value if call.excinfo is not None else None
    matched = sorted(set(getattr(exc, "conformance_matched", ()) or ()))
    subject = _subject(item)
    covered: list[int] = []
    backend = item.config.stash.get(_BACKEND_KEY, None)
    # A test that failed stopped at its first unexpected divergence: the entries it did
    # not match are undecided, not stale.
    if subject is not None and backend is not None and not report.failed:
        name, info = _name_and_info(backend)
        covered = [e.index for e in options.expectations.for_backend(name)
                   if _covers(e, name, info, *subject, depth=options.depth_name)]
    if covered or matched:
        report.user_properties.append(
            (_PROPERTY, {"covered": sorted(set(covered) | set(matched)), "matched": matched}))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    config = session.config
    options = options_of(config)
    state = config.stash.get(_GATE_KEY, None)
    if options.expectations is None or state is None or hasattr(config, "workerinput"):
        return
    state.stale = [e for e in options.expectations.entries
                   if e.index in state.covered and e.index not in state.matched]
    if options.fail_on_stale and state.stale and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        state.failed_session = True


def _entry_text(e) -> str:
    return f"{e.op} {e.where} {e.cls}"


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    backend = config.stash.get(_BACKEND_KEY, None)
    if backend is not None and not hasattr(config, "workerinput"):
        try:
            described = backend.describe()
        except Exception as e:  # noqa: BLE001 - a summary line must not break the run
            described = {"name": getattr(backend, "name", "?"), "describe": f"failed: {e}"}
        terminalreporter.write_line(
            "conformance backend: " + ", ".join(f"{k}={v}" for k, v in described.items()))
    options = options_of(config)
    state = config.stash.get(_GATE_KEY, None)
    if options.expectations is None or state is None or hasattr(config, "workerinput"):
        return   # (an xdist worker has seen only its share of the tests)
    exp = options.expectations
    path = exp.path
    tr = terminalreporter
    tr.section("conformance expectations", sep="-")
    for e in exp.entries:
        if e.index in state.matched:
            tests = state.matched[e.index]
            link = f" ({e.link})" if e.link else ""
            tr.write_line(f"EXPECTED  {path}: expectations[{e.index}] {_entry_text(e)}: "
                          f"{e.reason}{link} [{len(tests)} test{'s' if len(tests) != 1 else ''}"
                          f": {', '.join(t.rpartition('::')[2] for t in tests[:3])}"
                          f"{', ...' if len(tests) > 3 else ''}]")
    for e in state.stale:
        tr.write_line(f"STALE     {path}: expectations[{e.index}] {_entry_text(e)}: matched "
                      f"nothing in this session (reason was: {e.reason})",
                      yellow=not options.fail_on_stale, red=options.fail_on_stale)
    n_not = sum(1 for e in exp.entries
                if e.index not in state.matched and e.index not in state.covered)
    tr.write_line(f"{path}: {len(state.matched)} matched, {len(state.stale)} stale, "
                  f"{n_not} not exercised by this session")
    if state.failed_session:
        tr.write_line(f"conformance: {len(state.stale)} stale expectation"
                      f"{'s' if len(state.stale) != 1 else ''} with "
                      f"--conformance-fail-on-stale: the session fails", red=True)


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
    from conformance.checking.plan import select_bindings, select_ops
    specs = select_ops(options.ops, options.families)
    if options.element_types:
        specs = [s for s in specs if select_bindings(s, options.element_types)]
    return specs


def selected_op_bindings(options: Options) -> list[OpBinding]:
    from conformance.checking.plan import select_bindings
    out = []
    for spec in selected_specs(options):
        n = len(spec.type_bindings())
        for b in select_bindings(spec, options.element_types):
            out.append(OpBinding(spec.name, tuple(b.items()), n))
    return out


def selected_examples(options: Options) -> list[ExampleRef]:
    from conformance.checking import golden
    out = []
    for spec in selected_specs(options):
        for ex in golden.examples(spec):
            if options.element_types:
                used = {t.element_type.name for t in
                        ex.case.signature.input_leaves + ex.case.signature.result_leaves}
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
    """A divergence found by the suite; reported as its message alone (no traceback).

    ``conformance_matched``: indices of expectation entries the test matched before it
    failed on a divergence that no entry lists."""

    conformance_matched: tuple[int, ...] = ()


class ExpectedDivergence(pytest.xfail.Exception):
    """Every divergence a test found is listed in the expectations file: an xfail
    whose reason is the entries' (``conformance_matched``: their indices)."""

    def __init__(self, reason: str, matched: Sequence[int]) -> None:
        super().__init__(reason)
        self.conformance_matched = tuple(matched)


_DESCRIBED: dict[int, tuple[Any, str, dict]] = {}


def _name_and_info(backend) -> tuple[str, dict]:
    """The backend's name and describe() (what an entry's ``when`` is matched against)."""
    hit = _DESCRIBED.get(id(backend))
    if hit is not None and hit[0] is backend:
        return hit[1], hit[2]
    name = getattr(backend, "name", str(backend))
    try:
        info = dict(backend.describe())
    except Exception:  # noqa: BLE001 - a backend without describe() still gets gated
        info = {"name": name}
    _DESCRIBED[id(backend)] = (backend, name, info)
    return name, info


class _Gatekeeper:
    """Which of one test's divergence classes the expectations file lists."""

    def __init__(self, backend, options: "Options | None", op: str,
                 element_type: str | None = None, rule: str | None = None) -> None:
        self.expectations = options.expectations if options is not None else None
        self.backend = backend
        self.op, self.element_type, self.rule = op, element_type, rule
        self.seen: dict[str, list] = {}          # class -> [entry, cases]

    def lists(self, cls: str):
        """The entry that expects ``cls`` here, or None (nothing is remembered)."""
        if self.expectations is None:
            return None
        name, info = _name_and_info(self.backend)
        return self.expectations.match(name, info, self.op, cls, self.element_type, self.rule)

    def expected(self, cls: str, cases: int = 1):
        """The entry that expects ``cls`` here (and remember it), or None."""
        if self.expectations is None:
            return None
        name, info = _name_and_info(self.backend)
        e = self.expectations.match(name, info, self.op, cls, self.element_type, self.rule)
        if e is not None:
            seen = self.seen.setdefault(cls, [e, 0])
            seen[1] += cases
        return e

    @property
    def matched(self) -> tuple[int, ...]:
        return tuple(sorted({e.index for e, _ in self.seen.values()}))

    def describe(self) -> str:
        path = self.expectations.path if self.expectations is not None else "?"
        parts = []
        for cls, (e, n) in sorted(self.seen.items()):
            link = f" ({e.link})" if e.link else ""
            parts.append(f"expected {cls} divergence ({n} case{'s' if n != 1 else ''}): "
                         f"{e.reason}{link} [{path}: expectations[{e.index}]]")
        return "; ".join(parts)

    def failure(self, message: str) -> ConformanceFailure:
        path = self.expectations.path if self.expectations is not None else "?"
        for cls, (e, _) in sorted(self.seen.items()):
            message += (f"\n  expected:  {cls} divergence, also seen: {e.reason} "
                        f"[{path}: expectations[{e.index}]]")
        exc = ConformanceFailure(message)
        exc.conformance_matched = self.matched
        return exc

    def finish(self) -> None:
        """xfail with the entries' reasons if any expected divergence was seen."""
        __tracebackhide__ = True
        if self.seen:
            raise ExpectedDivergence(self.describe(), self.matched)


def _rerun_hint(item: pytest.Item) -> str | None:
    options = options_of(item.config)
    if options.seed is not None:
        how = (f"the same options with --conformance-seed={options.seed} "
               f"--conformance-depth={options.depth_name} generate this case again")
        if options.profile == "ci":
            how += " (the ci profile is derandomized)"
    elif options.database is not None:
        how = (f"the example database ({options.database}) replays this case first on "
               f"the next run")
    else:
        return None
    return f"  rerun:     {how}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.excinfo is not None and report.failed \
            and isinstance(call.excinfo.value, ConformanceFailure):
        exc = call.excinfo.value
        text = str(exc)
        # hypothesis notes the failing example's arguments (a long Signature repr);
        # the message already names the signature and the case id.
        # Its @reproduce_failure blob (print_blob, the ci profile) names a decorator for
        # the suite's inner function, which a user cannot add: say how to rerun instead.
        notes = [n for n in getattr(exc, "__notes__", ())
                 if n and not n.startswith(("Failing test case", "Falsifying example"))
                 and "@reproduce_failure" not in n]
        subject = _subject(item)
        rerun = _rerun_hint(item)
        if rerun and subject is not None and not (subject[2] or "").startswith("example-"):
            text += "\n" + rerun      # (hypothesis generated it: not a spec example)
        if notes:
            text += "\n\n" + "\n".join(notes)
        report.longrepr = text
    if call.when == "call":
        _record_expectations(item, call, report)
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
def conformance_hang_budget(pytestconfig: pytest.Config):
    """The session's :class:`~conformance.checking.stream.HangBudget`: a backend that
    hangs twice in an op is not run on the op's other signatures, invalid programs and
    examples."""
    return hang_budget(pytestconfig)


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
    from conformance.core.literals import to_hex, to_literal
    from conformance.core.types import type_of
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
    """Run ``case`` on ``backend`` and judge it (conformance.checking.checker.check_case).

    Raises ConformanceFailure (an AssertionError) on any divergence and calls
    pytest.skip when the backend says Unsupported.
    """
    __tracebackhide__ = True
    from conformance.checking.checker import check_case
    r = check_case(backend, case)
    cls, expected, actual, message = r.cls, r.expected, r.actual, r.message
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
# What the suite's tests do (conformance/apps/suite/test_conformance.py calls these)
# ---------------------------------------------------------------------------

PROFILE_NAMES = tuple(f"conformance-{d}" for d in DEPTH_NAMES) + ("conformance-ci",)
_registered_database: list = []     # the database folder the profiles were registered with


def register_profiles(database: "str | Path | None" = None) -> None:
    """Register the suite's hypothesis settings profiles.

    ``conformance-quick``, ``conformance-default``, ``conformance-deep``: local runs:
    random generation, ``max_examples`` = the depth's signatures per type binding, and
    a persistent :class:`~hypothesis.database.DirectoryBasedExampleDatabase` in
    ``database`` (None: no database) whose failing examples are replayed first.
    ``conformance-ci``: as ``conformance-default``, derandomized, without a database,
    printing the ``@reproduce_failure`` blob. All: ``deadline=None``, no shrinking
    (the suite minimises divergences itself), one bug per test.
    """
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.database import DirectoryBasedExampleDatabase
    from conformance.checking.plan import DEPTHS

    db = DirectoryBasedExampleDatabase(str(database)) if database is not None else None
    common = dict(
        deadline=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                               HealthCheck.data_too_large],
        report_multiple_bugs=False)
    for name in DEPTH_NAMES:
        settings.register_profile(f"conformance-{name}", max_examples=DEPTHS[name].signatures,
                                  derandomize=False, database=db, print_blob=False, **common)
    settings.register_profile("conformance-ci", parent=settings.get_profile("conformance-default"),
                              derandomize=True, database=None, print_blob=True)
    _registered_database[:] = [database]


def _database_namespace():
    """An ExampleDatabase view that prefixes every key: the suite's hypothesis tests are
    one inner function run for many parameters, so hypothesis' own key (a digest of the
    function's source) is the same for all of them."""
    from hypothesis.database import ExampleDatabase

    class Namespaced(ExampleDatabase):
        def __init__(self, db, prefix: bytes) -> None:
            super().__init__()
            self.db, self.prefix = db, prefix

        def __repr__(self) -> str:
            return f"Namespaced({self.db!r}, {self.prefix!r})"

        def fetch(self, key: bytes):
            return self.db.fetch(self.prefix + key)

        def save(self, key: bytes, value: bytes) -> None:
            self.db.save(self.prefix + key, value)

        def delete(self, key: bytes, value: bytes) -> None:
            self.db.delete(self.prefix + key, value)

        def move(self, src: bytes, dest: bytes, value: bytes) -> None:
            self.db.move(self.prefix + src, self.prefix + dest, value)

    return Namespaced


def suite_settings(options: Options, max_examples: int, test_key: str, backend=None):
    """The hypothesis settings of one of the suite's tests: the options' profile, with
    ``max_examples`` and the example database namespaced by backend and test."""
    from hypothesis import settings
    if not _registered_database or _registered_database[0] != options.database:
        register_profiles(options.database)
    base = settings.get_profile(options.hypothesis_profile)
    db = base.database if options.seed is None else None
    if db is not None:
        name = getattr(backend, "name", str(backend))
        db = _database_namespace()(db, f"conformance:{name}:{test_key}:".encode())
    return settings(base, max_examples=max_examples, database=db)


def _with_seed(options: Options, *parts):
    """``@seed`` from --conformance-seed and the test, or nothing (random) on a local
    run without a seed."""
    from hypothesis import seed as hseed
    from conformance.checking.plan import stable_hash
    if options.seed is None:
        return lambda f: f
    return hseed(stable_hash(options.seed, *parts))


class _FailureStore:
    """The (plan seed, signature index) pairs whose check failed on a local run, kept in
    the session's example database (hypothesis' DirectoryBasedExampleDatabase, under a
    key per backend and test) and replayed first by the next run."""

    def __init__(self, options: Options, backend, test_key: str) -> None:
        from hypothesis.database import DirectoryBasedExampleDatabase
        self.db = (DirectoryBasedExampleDatabase(str(options.database))
                   if options.database is not None else None)
        name = getattr(backend, "name", str(backend))
        self.key = f"conformance:{name}:{test_key}".encode()

    def fetch(self) -> list[tuple[int, int]]:
        if self.db is None:
            return []
        out = []
        for value in self.db.fetch(self.key):
            try:
                seed, index = (int(x) for x in value.decode().split(":"))
            except ValueError:
                continue
            out.append((seed, index))
        return sorted(out)

    def forget(self, seed: int, index: int) -> None:
        if self.db is not None:
            self.db.delete(self.key, f"{seed}:{index}".encode())

    @contextlib.contextmanager
    def remember(self, seed: int, index: int):
        """Save the pair when the check inside fails (and re-raise)."""
        try:
            yield
        except ConformanceFailure:
            if self.db is not None:
                self.db.save(self.key, f"{seed}:{index}".encode())
            raise


def _divergence_message(ev, spec, sig, backend, options: Options, key: str) -> str:
    """The text of a failing test: a diverging class no expectation lists (the checker's
    ``Diverged`` event), its case minimised, its case id and how to run it again."""
    from conformance.checking.arbiter import describe as arbiter_line
    d, name, cls = ev.divergence, ev.backend, ev.cls
    verdict = ev.batch.results[name].verdict
    names = verdict.case_class_names()
    diverging = [int(c) for c in verdict.diverging_cases()]
    counts = ", ".join(f"{k}={v}" for k, v in sorted(verdict.counts().items()))
    text = describe_case(d.small, d.small_cls or cls, d.expected, d.actual, d.message,
                         title=f"{spec.name} [{key}] on {name}: {cls} divergence "
                               f"({len(diverging)} of {len(names)} cases in the batch: "
                               f"{counts})")
    extra = [f"  {arbiter_line(d.arbiter)}"] if d.arbiter else []
    extra += [f"  case id:   {d.case.case_id}",
              f"  repro:     conformance repro {d.case.case_id} --backend {backend.locator}"]
    if d.small_cls is None:
        extra.append("  note:      does not diverge when run alone (only in the batched "
                     "executable)")
    elif d.small is not d.case:
        extra.append("  note:      minimised from a case of the batch")
        extra.append(f"  batch case signature: {sig.key()}")
    if options.repro_dir is not None:
        folder = _save_repro(options, backend, spec, sig, key, cls, d.case, d.small,
                             d.small_cls or cls, d.expected, d.actual)
        extra.append(f"  reproducer: python {folder / 'repro.py'}")
    return text + "\n" + "\n".join(extra)


def _save_repro(options: Options, backend, spec, sig, key: str, cls: str, original, small,
                small_cls: str, expected, actual) -> Path:
    from conformance.checking.plan import stable_hash
    from conformance.apps.repro import folder_name, save
    from conformance.checking.verdicts import describe
    from conformance.checking.checker import accuracy_of
    folder = options.repro_dir / folder_name(backend.name, spec.name, key, cls,
                                             stable_hash(original.case_id) % 10 ** 6)
    save(folder, backend.locator, small, small_cls, expected, actual,
         {"original_case_id": original.case_id, "accuracy": describe(accuracy_of(spec, sig))})
    return folder


def _failure_message(ev, spec, sig, backend, options: Options, key: str, what: str) -> str:
    """The text of a test failed by a backend that raised, crashed or hung on a batch
    (the checker's ``BackendFailed`` event), with the case that does it alone."""
    from conformance.checking.checker import error_text
    text = (f"{spec.name} [{key}]: {ev.outcome}: {what} {sig.key()} failed: "
            f"{error_text(ev.error)}")
    if ev.culprit is None:
        return text
    case = ev.culprit.case
    text += (f"\n  culprit:   case {ev.culprit.index} of batch {ev.batch.index} does it alone"
             f"\n  case id:   {case.case_id}"
             f"\n  repro:     conformance repro {case.case_id} --backend {backend.locator}")
    if options.repro_dir is not None:
        folder = _save_repro(options, backend, spec, sig, key, ev.outcome, case, case,
                             ev.outcome, ev.culprit.expected, None)
        text += f"\n  reproducer: python {folder / 'repro.py'}"
    return text


def signature_record(base: dict, ev) -> dict | None:
    """The ``signature`` record(s) ``conformance run`` writes for an event of the
    checker's stream (None for events that have none): what the plugin attaches to a
    test (``conformance_signature`` user properties, in --junitxml)."""
    from conformance.checking import stream
    if isinstance(ev, (stream.NotRun, stream.CompileFailed)):
        return {**base, "backend": ev.backend, "outcome": ev.outcome, "reason": ev.reason,
                "cases": 0, "counts": {}}
    if isinstance(ev, stream.Declined):
        return {**base, "backend": ev.backend, "outcome": "unsupported", "reason": ev.reason,
                "cases": 0, "counts": {}}
    return None


def record_text(rec: dict) -> str:
    """A record as the results file's line has it (JSON)."""
    import json
    from conformance.core.results import json_default
    return json.dumps(rec, default=json_default, separators=(",", ":"))


def run_op_binding(backend, param: OpBinding, options: Options, record=None,
                   budget=None) -> None:
    """The body of ``test_op``: the signatures of one op and type binding, drawn from the
    same plan as ``conformance run`` (conformance.checking.plan), packed and checked by the
    checker's event stream (conformance.checking.stream) as the CLI does: the same
    verdicts, crash bisection and hang budget (``budget``: the session's
    :class:`~conformance.checking.stream.HangBudget`).

    With ``--conformance-seed=N`` the test checks exactly the signatures and values that
    ``conformance run --seed N --depth D`` checks, with the same case ids. Without a seed
    (local runs), hypothesis draws a plan seed and a signature index per example, so the
    example database replays a failing (seed, index) first next time; the case id
    printed names the case either way and ``conformance repro ID`` re-runs it.

    With expectations (``options.expectations``), divergences of a class the file lists
    for this op and binding do not stop the test; it goes on looking for others, and
    ends as an xfail with the entries' reasons (or fails on the first class no entry
    lists). ``record(name, value)`` (pytest's ``record_property``) receives the
    ``signature`` records ``conformance run`` would write (JSON text), as
    ``conformance_signature`` (``--junitxml`` writes them as the test's properties)."""
    __tracebackhide__ = True
    from conformance.checking import plan
    from conformance.checking.checker import accuracy_of
    from conformance.checking import stream
    from conformance.checking.compare import worst
    from conformance.checking.packing import DEFAULT_PACK, UnitPacker
    from conformance.specs import load_spec

    spec = load_spec(param.op)
    depth = options.depth
    key = param.key
    name = getattr(backend, "name", str(backend))
    gate = _Gatekeeper(backend, options, spec.name, element_type=key)
    budget = budget if budget is not None else stream.HangBudget()
    unsupported: list[str] = []
    ran = [0]

    pending: list = [None]      # (failure, cause): the first unexpected event

    def fail(message: str, cls: str, error=None) -> None:
        """Fail the test when the signature ends, unless the expectations list ``cls``."""
        if not gate.expected(cls) and pending[0] is None:
            pending[0] = (gate.failure(message), error)

    def choose(_backend: str, classes, counts) -> list[str]:
        if pending[0] is not None:
            return []
        unexpected = [c for c in classes if gate.lists(c) is None]
        return [worst(unexpected)] if unexpected else []

    def check_planned(seed: int, index: int, sig, packer) -> None:
        __tracebackhide__ = True
        base = {"kind": "signature", "op": spec.name, "family": spec.family, "type_key": key,
                "signature": sig.key(), "index": index}

        def draw(b: int):
            stacked = packer.take_inputs(spec.name, key, index, b)
            return stacked if stacked is not None else \
                plan.batch_for(seed, options.depth_name, spec, key, index, b, sig)

        packer.before(spec.name, key, index)
        events = stream.check_signature(
            spec, sig, [backend], batches=depth.batches, draw=draw, choose=choose,
            budget=budget, accuracy=accuracy_of(spec, sig),
            case_id=lambda b, c: plan.case_id(seed, options.depth_name, spec.name, key,
                                              index, b, c), key=key)
        # The first unexpected event fails the test when the signature's stream ends, so
        # that its records are those `conformance run` writes (and nothing more is
        # minimised meanwhile: ``choose`` asks for nothing once a failure is pending).
        declined = False
        for ev in events:
            rec = signature_record(base, ev)
            if rec is not None and record is not None:
                record("conformance_signature", record_text(rec))
            if isinstance(ev, stream.Declined):
                unsupported.append(ev.reason)
                declined = True
            elif isinstance(ev, (stream.NotRun, stream.CompileFailed)):
                what = "compiling" if isinstance(ev, stream.CompileFailed) else "running"
                fail(f"{spec.name} [{key}]: {ev.outcome}: {what} {sig.key()} failed: "
                     f"{ev.reason}", ev.outcome)
            elif isinstance(ev, stream.OracleFailed):
                raise RuntimeError(f"{spec.name} [{key}]: the oracle failed on "
                                   f"{sig.key()} (a bug of the suite)") from ev.error
            elif isinstance(ev, stream.BatchJudged):
                for cls, n in ev.verdict.counts().items():
                    if cls != "pass":
                        gate.expected(cls, n)
            elif isinstance(ev, stream.BackendFailed):
                if ev.outcome == "unsupported":
                    unsupported.append(str(ev.error))
                    declined = True
                else:
                    fail(_failure_message(ev, spec, sig, backend, options, key, "running"),
                         ev.outcome, ev.error)
            elif isinstance(ev, stream.Diverged):
                if pending[0] is None:
                    pending[0] = (gate.failure(_divergence_message(ev, spec, sig, backend,
                                                                   options, key)), None)
            elif isinstance(ev, stream.SignatureDone) and record is not None:
                for n, t in ev.totals.items():
                    record("conformance_signature",
                           record_text({**base, "backend": n, **t.record(),
                                        "coverage": ev.coverage}))
        if pending[0] is not None:
            failure, cause = pending[0]
            pending[0] = None
            raise failure from cause
        if not declined:
            ran[0] += 1

    def planned(seed: int) -> list:
        return plan.plan_binding(spec, param.binding_dict, seed, options.depth_name)

    def packed(seed: int, sigs) -> "UnitPacker":
        """The binding's signatures in packs, as the runner packs a unit."""
        return UnitPacker([backend], [(key, i, s) for i, s in enumerate(sigs)], DEFAULT_PACK,
                          depth.batches,
                          lambda k, i, b, sig: plan.batch_for(seed, options.depth_name, spec,
                                                              k, i, b, sig),
                          skip=lambda b: budget.exhausted(b.name, spec.name), spec=spec,
                          on_timeout=lambda b: budget.hung(b.name, spec.name))

    def check_all(seed: int, sigs, store=None) -> None:
        packer = packed(seed, sigs)
        try:
            for index, sig in enumerate(sigs):
                if store is None:
                    check_planned(seed, index, sig, packer)
                else:
                    with store.remember(seed, index):
                        check_planned(seed, index, sig, packer)
        finally:
            packer.clear()

    try:
        if options.seed is not None:
            check_all(options.seed, planned(options.seed))
        else:
            # A local run without a seed: a fresh random plan seed, after the (seed, index)
            # pairs that failed before (the example database), so a divergence once found
            # is checked first until it is fixed.
            import random
            store = _FailureStore(options, backend, f"op:{spec.name}:{key}")
            for seed, index in store.fetch():
                sigs = planned(seed)
                if index < len(sigs):
                    packer = packed(seed, [])
                    with store.remember(seed, index):
                        check_planned(seed, index, sigs[index], packer)
                store.forget(seed, index)
            seed = random.SystemRandom().randrange(2 ** 32)
            check_all(seed, planned(seed), store)
    finally:
        clear = getattr(backend, "clear_cache", None)
        if clear is not None:     # as the runner after each unit: memory stays flat
            clear()
    gate.finish()
    if unsupported:
        reason = unsupported[0]
        if not ran[0]:
            pytest.skip(f"unsupported by {name}: {reason}")
        warnings.warn(pytest.PytestWarning(
            f"conformance: {spec.name} [{key}]: {len(unsupported)} signature(s) unsupported "
            f"by {name}, {ran[0]} checked: {reason}"))


def run_example(backend, param: ExampleRef, options: "Options | None" = None,
                budget=None) -> None:
    """The body of ``test_example``: one example of the spec, compared exactly (or with
    the example's own tolerance). With expectations, an entry with ``rule:
    example-<index>`` and class ``fail`` (or ``backend_error``) makes it an xfail. With
    ``budget`` (the session's :class:`~conformance.checking.stream.HangBudget`), a
    timeout counts there, and an example of an op the backend hung in too often is not
    run (it fails as a timeout, as ``conformance run`` records it)."""
    __tracebackhide__ = True
    from conformance.checking import golden
    from conformance.checking.checker import check_example
    from conformance.specs import load_spec

    ex = golden.examples(load_spec(param.op))[param.index]
    name = getattr(backend, "name", str(backend))
    gate = _Gatekeeper(backend, options, param.op, rule=f"example-{param.index}")
    if budget is not None and budget.exhausted(name, param.op):
        outcome, problem, actual = "timeout", budget.not_run_reason(param.op), None
    else:
        outcome, problem, actual = check_example(backend, ex)
        if budget is not None:
            budget.spend(name, param.op, outcome)
    if outcome == "unsupported":
        pytest.skip(f"unsupported by {name}: {problem}")
    if outcome == "pass":
        return
    if gate.expected(outcome):
        gate.finish()
    if actual is None:
        raise gate.failure(f"{param.op} example {param.index} ({ex.name}) on {name}: "
                           f"{outcome}: {problem}\n"
                           f"  signature: {ex.case.signature.key()}")
    raise gate.failure(
        describe_case(ex.case, "example", ex.expected, actual, problem,
                      title=f"{param.op} example {param.index} ({ex.name}) on {name}: "
                            f"differs from the spec"))


def run_invalid_rule(backend, param: InvalidRule, options: Options, budget=None) -> None:
    """The body of ``test_invalid``: programs that break one rule of the spec must be
    rejected (any exception other than Unsupported). With expectations, an entry with
    this ``rule`` and class ``accepted_invalid`` (or crash, timeout) makes it an xfail.
    With ``budget`` (the session's hang budget), a timeout counts there, and no program
    of an op the backend hung in too often is run (a timeout, not run: hypothesis's
    shrinking of a hang costs no more timeouts)."""
    __tracebackhide__ = True
    import numpy as np
    from hypothesis import given, strategies as st
    from hypothesis.errors import Unsatisfiable
    from conformance.core.case import Case
    from conformance.generators import batch_inputs, invalid_signatures
    from conformance.checking.checker import check_invalid
    from conformance.specs import load_spec

    spec = load_spec(param.op)
    depth = options.depth
    name = getattr(backend, "name", str(backend))
    from conformance.specs.validity import checks
    text = next((c.text for c in checks(spec) if c.id == param.rule), param.rule)
    gate = _Gatekeeper(backend, options, spec.name, rule=param.rule)
    unsupported: list[str] = []
    rejected = [0]

    @_with_seed(options, spec.name, "invalid", param.rule)
    @suite_settings(options, depth.invalid_per_rule, f"invalid:{spec.name}:{param.rule}",
                    backend)
    @given(sig=invalid_signatures(spec, param.rule, depth.shape_profile),
           value_seed=st.integers(0, 2 ** 32 - 1))
    def example(sig, value_seed):
        __tracebackhide__ = True
        rng = np.random.default_rng(value_seed)
        inputs = tuple(x[0] for x in batch_inputs(sig, rng, 1, spec))
        if budget is not None and budget.exhausted(name, spec.name):
            outcome, reason = "timeout", budget.not_run_reason(spec.name)
        else:
            outcome, reason = check_invalid(backend, Case(sig, inputs))
            if budget is not None:
                budget.spend(name, spec.name, outcome)
        if outcome == "unsupported":
            unsupported.append(reason or "")
        elif outcome in ("accepted_invalid", "crash", "timeout"):
            if gate.expected(outcome):
                return
            what = ("the backend ran a program that breaks " + param.rule
                    if outcome == "accepted_invalid" else
                    f"the backend's process died on a program that breaks {param.rule}: "
                    f"{reason}")
            raise gate.failure(
                f"{spec.name} {param.rule} on {name}: {outcome}: {what}\n"
                f"  rule:      {param.rule}: {text}\n"
                f"  signature: {sig.key()}")
        else:
            rejected[0] += 1

    from conformance.generators.determinism import seed_only
    try:
        with seed_only():
            example()
    except Unsatisfiable:
        pytest.skip(f"no signature breaking {param.rule} alone could be generated")
    gate.finish()
    if unsupported and not rejected[0]:
        pytest.skip(f"unsupported by {name}: {unsupported[0]}")
