"""Where the plan's units run: worker processes on this machine (``--jobs N``) or Ray
tasks (``--cluster ray``, ``ray://ADDRESS``, ``auto``; the optional extra
``pip install 'stablehlo-conformance[ray]'``).

A *unit* is one op of the plan (its type bindings, signatures, invalid programs and
examples, as :meth:`conformance.apps.runner.Runner.run_unit` runs them; every draw in it
depends on the seed and the op only), or, for an op of more than about
``UNIT_SIGNATURES`` signatures, a part of one (``op#k/m``: the k-th range of its type
bindings; the last part also runs the invalid programs, examples and probes): the
driver writes the op's ``unit_done`` when all its parts are in. :func:`run_unit` runs one anywhere and returns
a :class:`UnitResult`: the unit's records in the order the runner wrote them (the
last one its ``unit_done``), its cell totals and the reproducer files it saved (as
bytes, relative to the run's folder: a worker on another machine need not share a
file system with the driver).

An :class:`Executor` turns units into results, yielded in arrival order. The driver
(:func:`drive`) writes each unit's records into the one results file as the unit
arrives, all at once, skipping any record whose identity
(:func:`conformance.apps.merge.record_key`: the case id, for a case) is already in the
file: a unit delivered twice (a worker lost after it finished, a retried task)
records nothing twice. A driver killed mid-run leaves units without ``unit_done``,
which ``--resume`` runs again.

Executors here:

- :class:`InlineExecutor`: the units one after another in this process (tests, and
  the reference for what the others must give).
- :class:`ProcessExecutor`: ``--jobs N`` spawned worker processes.
- :class:`RayExecutor`: one Ray task per unit, ``max_retries`` for a worker process
  that dies (a node lost, a process killed), none for an exception (``retry_exceptions``
  off: the runner turns a backend's errors, crashes and hangs into results; an
  exception out of a unit is a suite bug, recorded as an ``internal_error``).
  Backends that ask for a child process (xla, the interpreter) keep it inside the
  Ray worker, so their crash is a result, never a lost worker.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

#: Task retries for a Ray worker that died (not for exceptions).
RAY_MAX_RETRIES = 3


#: Signatures per unit, about: an op with more is split into parts (ranges of its type
#: bindings, ``op#k/m``) so that workers balance and a big op (convert) is not one
#: worker's long pole. Small enough for 2 workers to share the quick plan evenly, large
#: enough that a part still packs (conformance.checking.packing) and its planning is amortised.
UNIT_SIGNATURES = 32


def units_of(config, specs) -> list[str]:
    """The units of a plan, biggest first: ``op`` or ``op#k/m`` (part k of m, 1-based)."""
    from conformance.checking.plan import DEPTHS, select_bindings, signatures_per_binding
    depth = DEPTHS[config.depth]
    out: list[tuple[int, str]] = []
    for s in specs:
        n = len(select_bindings(s, config.element_types, config.depth))
        sigs = n * signatures_per_binding(s, depth)
        m = max(1, min(n, -(-sigs // UNIT_SIGNATURES)))
        if m == 1:
            out.append((sigs, s.name))
        else:
            out += [(sigs // m, f"{s.name}#{k}/{m}") for k in range(1, m + 1)]
    return [u for _, u in sorted(out, key=lambda x: -x[0])]


def split_unit(unit: str) -> tuple[str, tuple[int, int] | None]:
    """``op#k/m`` -> (op, (k-1, m)); ``op`` -> (op, None)."""
    op, _, part = unit.partition("#")
    if not part:
        return op, None
    k, m = part.split("/")
    return op, (int(k) - 1, int(m))


@dataclasses.dataclass
class UnitResult:
    op: str
    records: list[dict[str, Any]]
    cells: dict[tuple[str, str, str], dict[str, dict[str, int]]]
    files: dict[str, bytes]                   # path relative to the run's folder -> bytes
    worker: str = ""                          # who ran it (pid@host)
    unit: str = ""                            # op, or op#k/m for a part of one


@dataclasses.dataclass
class UnitFailure:
    """A unit that produced no result (the worker raised or was lost for good)."""

    op: str
    error: str
    traceback: str = ""
    unit: str = ""


_BACKENDS: dict[tuple, list] = {}


def _backends(config, locators: tuple[str, ...]) -> list:
    """Backends are built once per worker process and reused across its units."""
    from conformance.backends import get_backend
    from conformance.apps.runner import prepare_backends
    key = (locators, config.isolate, config.timeout, str(config.out))
    if key not in _BACKENDS:
        _BACKENDS[key] = prepare_backends(config, [get_backend(x) for x in locators])
    return _BACKENDS[key]


class _ListWriter:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        import json
        from conformance.core.results import json_default
        # as the results file would hold it (numpy scalars, paths: plain JSON)
        self.records.append(json.loads(json.dumps(record, default=json_default,
                                                  allow_nan=False)))


def run_unit(config, locators: Sequence[str], unit: str) -> UnitResult:
    """One unit (``op`` or ``op#k/m``), in this process; reproducers are saved in a
    private folder and come back as bytes (see the module doc)."""
    import socket
    from conformance.apps.runner import Runner
    from conformance.specs import load_spec
    op, part = split_unit(unit)
    backends = _backends(config, tuple(locators))
    with tempfile.TemporaryDirectory(prefix="conformance-unit-") as tmp:
        unit_config = dataclasses.replace(config, out=Path(tmp))
        writer = _ListWriter()
        runner = Runner(unit_config, backends, writer)       # type: ignore[arg-type]
        runner.run_unit(load_spec(op), part)
        files = {str(p.relative_to(tmp)): p.read_bytes()
                 for p in sorted(Path(tmp).rglob("*")) if p.is_file()}
    cells = {k: {"cases": dict(v.cases), "repros": dict(v.repros)}
             for k, v in runner.cells.items()}
    return UnitResult(op, writer.records, cells, files, f"{os.getpid()}@{socket.gethostname()}",
                      unit)


def run_unit_safely(config, locators, unit) -> "UnitResult | UnitFailure":
    try:
        return run_unit(config, locators, unit)
    except Exception as e:  # noqa: BLE001 - a suite bug costs its unit only
        return UnitFailure(split_unit(unit)[0], f"{type(e).__name__}: {e}",
                           "".join(traceback.format_exception(e, limit=6)), unit)


def worker_unit(config, locators, unit, pin: int) -> "UnitResult | UnitFailure":
    """A unit in a worker process (``--jobs``, Ray): the worker first takes ``pin`` cores
    of its own (conformance.apps.worker_cores; 0: none)."""
    if pin:
        from conformance.apps.worker_cores import claim_cores
        claim_cores(pin)
    return run_unit_safely(config, locators, unit)


class Executor:
    """Runs units; :meth:`map_units` yields their results in arrival order."""

    name = "executor"

    def map_units(self, config, locators: Sequence[str], ops: Sequence[str]
                  ) -> Iterator["UnitResult | UnitFailure"]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name}

    def drive(self, config, locators, specs, writer, runner, progress=None,
              already: Sequence[dict] = ()) -> None:
        """What :func:`conformance.apps.runner.run` calls: :func:`drive` on this executor."""
        drive(self, config, locators, specs, writer, runner, progress, already)


class InlineExecutor(Executor):
    name = "inline"

    def map_units(self, config, locators, ops):
        for op in ops:
            yield run_unit_safely(config, locators, op)


class ProcessExecutor(Executor):
    """``jobs`` spawned worker processes on this machine (jax is not fork-safe)."""

    name = "processes"

    def __init__(self, jobs: int, pin: int | None = None) -> None:
        from conformance.apps.worker_cores import share
        self.jobs = jobs
        self.pin = share(jobs) if pin is None else pin     # cores per worker, 0: unpinned

    def map_units(self, config, locators, ops):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=self.jobs, mp_context=ctx) as pool:
            futures = {pool.submit(worker_unit, config, list(locators), op, self.pin): op
                       for op in ops}
            for fut in as_completed(futures):
                try:
                    yield fut.result()
                except Exception as e:  # noqa: BLE001 - a dead worker costs its unit
                    yield UnitFailure(split_unit(futures[fut])[0],
                                      f"worker process: {type(e).__name__}: {e}",
                                      unit=futures[fut])

    def describe(self):
        return {"executor": self.name, "jobs": self.jobs, "pin_cores": self.pin}


class RayNotInstalled(RuntimeError):
    pass


def _ray():
    try:
        import ray
    except ImportError:
        raise RayNotInstalled("ray is not installed: pip install "
                              "'stablehlo-conformance[ray]'") from None
    return ray


class RayExecutor(Executor):
    """Units as Ray tasks. ``address``: None starts a local Ray instance for the run
    (``num_cpus`` workers; stopped at the end), ``"auto"`` or ``"ray://HOST:PORT"``
    joins an existing cluster (whose workers have this package installed)."""

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 max_retries: int = RAY_MAX_RETRIES, pin: int | None = None) -> None:
        from conformance.apps.worker_cores import share
        self.ray = _ray()
        self.address = address
        self.max_retries = max_retries
        # cores per task: a local instance's share of this machine; on a cluster one,
        # as Ray reserves (num_cpus=1 per task). 0: unpinned.
        if pin is None:
            pin = (share(num_cpus or os.cpu_count() or 1) if address is None
                   else min(share(1), 1))
        self.pin = pin
        self._started = False
        if not self.ray.is_initialized():
            # Workers of a local instance find what the driver finds (module:Class
            # backends in the current folder or on PYTHONPATH).
            path = os.pathsep.join(dict.fromkeys(
                [os.getcwd(), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                if p]]))
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False}
            if address is None:
                kw["num_cpus"] = num_cpus
                kw["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
            self.ray.init(address=address, **kw)
            self._started = True
        self._remote = self.ray.remote(max_retries=max_retries,
                                       retry_exceptions=False)(worker_unit)

    def map_units(self, config, locators, ops):
        ray = self.ray
        config_ref = ray.put(config)
        pending = {self._remote.remote(config_ref, list(locators), op, self.pin): op
                   for op in ops}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                op = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as e:  # noqa: BLE001 - lost for good after the retries
                    yield UnitFailure(split_unit(op)[0], f"ray task lost after "
                                      f"{self.max_retries} retries: {type(e).__name__}: {e}",
                                      unit=op)

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False

    def describe(self):
        return {"executor": self.name, "address": self.address or "local",
                "ray": getattr(self.ray, "__version__", None), "pin_cores": self.pin}


def executor_for(cluster: str | None, jobs: int) -> Executor | None:
    """The executor for ``--cluster`` (None: ``--jobs``, in the runner)."""
    if cluster is None:
        return None
    if cluster == "ray":
        return RayExecutor(None, num_cpus=jobs if jobs > 1 else None)
    if cluster == "auto" or cluster.startswith("ray://"):
        return RayExecutor(cluster)
    raise ValueError(f"unknown cluster {cluster!r}: ray, auto or ray://ADDRESS")


def drive(executor: Executor, config, locators: Sequence[str], specs, writer, runner,
          progress: Callable[[str], None] | None = None, already: Sequence[dict] = ()) -> None:
    """Run ``specs`` on ``executor``; write each unit's records into ``writer`` as it
    arrives (deduplicated by identity, also against the records ``already`` in the
    file), its reproducers under ``config.out``, and add its cell totals to
    ``runner.cells``."""
    from conformance.apps.merge import record_key
    seen = {record_key(r) for r in already}
    done: set[str] = set()
    out = Path(config.out)
    units = units_of(config, specs)
    parts_left = {}                 # op -> parts not yet arrived
    for u in units:
        op, part = split_unit(u)
        parts_left[op] = part[1] if part else 1
    for res in executor.map_units(config, list(locators), units):
        if progress:
            progress(f"{res.unit or res.op} done")
        if isinstance(res, UnitFailure):
            writer.write({"kind": "internal_error", "op": res.op, "type_key": "",
                          "what": f"{executor.name} worker", "error": res.error,
                          "traceback": res.traceback})
            continue
        unit = res.unit or res.op
        if unit in done:            # delivered twice: the first one counts
            continue
        done.add(unit)
        parts_left[res.op] -= 1
        for rel, data in res.files.items():
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        for r in res.records:
            if r.get("kind") == "unit_done" and "part" in r:
                continue            # the op's unit_done once all its parts are in
            key = record_key(r)
            if key in seen:
                continue
            seen.add(key)
            writer.write(r)
        if "#" in unit and parts_left[res.op] == 0:
            writer.write({"kind": "unit_done", "op": res.op})
        for key, cell in res.cells.items():
            target = runner.cells[tuple(key)]
            for cls, n in cell["cases"].items():
                target.cases[cls] += n
            for cls, n in cell["repros"].items():
                target.repros[cls] += n


__all__ = ["Executor", "InlineExecutor", "ProcessExecutor", "RayExecutor", "RayNotInstalled",
           "UnitFailure", "UnitResult", "drive", "executor_for", "run_unit", "units_of",
           "split_unit", "UNIT_SIGNATURES"]
