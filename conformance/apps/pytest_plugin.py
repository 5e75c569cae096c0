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
    --conformance-isolate, --conformance-no-isolate
                                  run the backend in a child process or not (default:
                                  as the backend asks, as `conformance run` does)
    --conformance-timeout=S       seconds an isolated backend may take per compile or
                                  batch (default 60); two hangs in an op and the op's
                                  other signatures are not run on it (the session's
                                  HangBudget)

This module is the pytest glue (options, hooks, fixtures). The tests' bodies, their
parameters and the vendor API ``check`` are conformance.apps.pytest_suite; the checking
is the checker's event stream (conformance.checking.stream), which the CLI's runner
reads too.

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

import types as _pytypes
from pathlib import Path
from typing import Any, Callable

import pytest

from conformance.apps import backend_logs
from conformance.apps.pytest_suite import (DEFAULT_BACKEND, DEFAULT_DATABASE, DEFAULT_DEPTH,
                                           DEFAULT_TIMEOUT, DEPTH_NAMES, MAX_TIMEOUT,
                                           PROFILE_CHOICES, CheckResult, ConformanceFailure,
                                           ExampleRef, InvalidRule, OpBinding, Options,
                                           backend_name_and_info, check, register_profiles,
                                           selected_examples, selected_invalid_rules,
                                           selected_modules, selected_op_bindings)

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
    group.addoption("--conformance-modules", action="store", default=None, metavar="PATHS",
                    help="comma list of StableHLO module files (.mlir, .mlirbc), folders of "
                         "them or globs: test_module judges each, op by op, on the backend "
                         "(as `conformance check`)")
    group.addoption("--conformance-database", action="store", default=None, metavar="DIR",
                    help="hypothesis example database of local runs, where failing cases "
                         f"are kept and replayed first next time (default: <rootdir>/"
                         f"{DEFAULT_DATABASE}); 'none' turns it off")


_OPTIONS_KEY = pytest.StashKey[Options]()
_BACKEND_KEY = pytest.StashKey[Any]()
_BUDGET_KEY = pytest.StashKey[Any]()
_LOGS_KEY = pytest.StashKey[Path]()              # the session's own backend log folder
_KEPT_LOGS_KEY = pytest.StashKey[list]()         # log folders kept (a crash's stderr)


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
    modules = None
    modules_text = config.getoption("conformance_modules")
    if modules_text is not None:
        from conformance.apps.check import CheckError, module_paths, read_modules
        from conformance.mlir.reader import ReadError
        items = _comma_list(modules_text, "--conformance-modules")
        if not items:
            raise pytest.UsageError("--conformance-modules: empty list")
        try:        # every file must be a module: a usage error, as `conformance check`
            paths = module_paths(items)
            read_modules(paths)
            modules = tuple(str(p) for p in paths)
        except (CheckError, ReadError) as e:
            raise pytest.UsageError(f"--conformance-modules: {e}") from None
    return Options(backend=backend or DEFAULT_BACKEND, backend_explicit=backend is not None,
                   depth_name=depth, ops=ops, families=families,
                   element_types=element_types, seed=seed,
                   repro_dir=Path(repro) if repro else None, profile=profile,
                   database=database, expectations=expectations,
                   fail_on_stale=bool(config.getoption("conformance_fail_on_stale")),
                   isolate=config.getoption("conformance_isolate"),
                   timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
                   modules=modules)


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
    own = None
    try:
        backend = get_backend(options.backend)
        # A backend that crashes or hangs costs a failed test, never the session: as
        # `conformance run` does, it runs in a child process unless it says otherwise.
        # The child's stderr goes to the repro folder, or a folder of the session's own
        # (removed at its end unless it holds a crash's stderr: backend_logs).
        own = None if options.repro_dir else backend_logs.new_folder()
        backend = prepare_backends([backend], options.repro_dir or own, options.isolate,
                                   options.timeout)[0]
    except BackendLoadError as e:
        backend_logs.release(own, keep_output=True)
        raise pytest.UsageError(f"--conformance-backend: {e}") from None
    except BaseException:
        backend_logs.release(own, keep_output=True)
        raise
    config.stash[_BACKEND_KEY] = backend
    if own is not None:
        config.stash[_LOGS_KEY] = own
    return backend


def release_backend(config: pytest.Config) -> None:
    """The session is over: stop the isolated backend's child process, then remove the
    session's own log folder unless it holds a crash's stderr (kept: named in the
    summary; on an xdist worker, sent to the controller)."""
    backend = config.stash.get(_BACKEND_KEY, None)
    close = getattr(backend, "close", None)
    if close is not None:
        close()
    folder = config.stash.get(_LOGS_KEY, None)
    if folder is None:
        return
    del config.stash[_LOGS_KEY]
    kept = backend_logs.release(folder, backend)
    if kept is not None:
        config.stash.setdefault(_KEPT_LOGS_KEY, []).append(str(kept))
        if hasattr(config, "workeroutput"):
            config.workeroutput["conformance_kept_logs"] = [str(kept)]


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
    """The isolated backend's child process ends with the session (at the latest)."""
    release_backend(config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """(xdist, on the controller) a worker's kept log folder, for the summary."""
    kept = getattr(node, "workeroutput", {}).get("conformance_kept_logs")
    if kept:
        node.config.stash.setdefault(_KEPT_LOGS_KEY, []).extend(kept)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    # without --conformance-modules there is no module to judge: test_module is not a
    # test of the session (rather than one skipped for an empty parameter set)
    unused = [i for i in items if "conformance_module" in getattr(i, "fixturenames", ())
              and options_of(config).modules is None]
    if unused:
        items[:] = [i for i in items if i not in unused]
        config.hook.pytest_deselected(items=unused)
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
        name, info = backend_name_and_info(backend)
        covered = [e.index for e in options.expectations.for_backend(name)
                   if _covers(e, name, info, *subject, depth=options.depth_name)]
    if covered or matched:
        report.user_properties.append(
            (_PROPERTY, {"covered": sorted(set(covered) | set(matched)), "matched": matched}))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    config = session.config
    if getattr(config.stash.get(_BACKEND_KEY, None), "log_path", None):
        release_backend(config)     # isolated: its logs are final once its child stopped
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
    kept = config.stash.get(_KEPT_LOGS_KEY, None)
    if kept and not hasattr(config, "workerinput"):
        terminalreporter.write_line(backend_logs.kept_line(kept), yellow=True)
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

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    wanted = [n for n in ("conformance_op_binding", "conformance_example",
                          "conformance_invalid_rule", "conformance_module") if n in names]
    if not wanted:
        return
    options = options_of(metafunc.config)
    for name in wanted:
        if name == "conformance_op_binding":
            params = selected_op_bindings(options)
        elif name == "conformance_example":
            params = selected_examples(options)
        elif name == "conformance_module":
            params = selected_modules(options)
        else:
            params = selected_invalid_rules(options)
        metafunc.parametrize(name, params, ids=[p.id for p in params])


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


@pytest.fixture
def conformance_check(conformance_backend) -> Callable:
    """``check(case)``: run a Case on the session backend and compare with the oracle."""
    def _check(case) -> CheckResult:
        __tracebackhide__ = True
        return check(conformance_backend, case)
    return _check

