"""Campaign mode (``conformance fuzz``): draw new seeds for as long as asked, keep one
reproducer per distinct divergence.

A campaign is a sequence of *draws*. Draw ``k`` runs one op (the selected ops in name
order, round robin) as a unit of the ordinary runner with the seed of round
``k // len(ops)``: ``draw_seed(campaign_seed, round)``, a function of the campaign seed
and the round only, so the same campaign seed draws the same cases in every process,
on every restart. The case ids the runner prints are ordinary case ids (the draw's
seed is their seed): ``conformance repro CASE_ID`` rebuilds each.

What a campaign keeps (in its folder, ``--out``):

- ``corpus/index.jsonl``: one line per distinct divergence, keyed by (backend, op,
  type key or rule, class, signature shape; :func:`divergence_key`), appended (and
  fsynced) when first found, with the case id, the signature and the reproducer folder
  ``corpus/<backend>/<op>/<type>-<class>-<shape>/`` (``case.json``, ``repro.py``). It
  is read back on every start: a divergence found by an earlier campaign in the folder
  (any seed, any options) is *known*, not new.
- ``campaign.json``: the campaign's options and where it stands (``next_draw``, the
  lowest draw not done, ``done_above``, the draws done above it; the draws, cases and
  time so far), replaced atomically after every draw.
- ``log.jsonl``: one line per finished draw (seed, op, cases, the keys it met: new and
  known); a few hundred bytes per draw, never one per case.

The lines of both files are declared in conformance.core.results (:class:`CorpusEntry`,
:class:`DrawLog`), and ``campaign.json`` carries the results ``format``: a campaign folder
of a format this version does not know, or a corpus line without a required field, is
refused with one line naming the file and line (ResultsFormatError). The runner's records
of a draw are checked against the results schema as they arrive, as a results file's are.

Stopping: SIGINT or SIGTERM (once) lets the draw under way stop at its next record;
what it found up to then is already in the corpus, the draw itself is not counted
done, and the state says which draw comes next. Records produced after the signal
are not added to the corpus (a child process of an isolated backend that got the
terminal's SIGINT dies: that is not the backend's crash). A second signal stops at
once (the corpus and state are consistent after every line anyway). Running the same
command again resumes at the next draw; ``--fresh`` starts the draws again from 0 and
keeps the corpus.

On workers (``--jobs N``, ``--cluster``; conformance.apps.fuzz_executor) about two draws per
worker are in flight and each is applied whole as it arrives, in any order (hence
``done_above``); a stop cancels the draws in flight, which are not done and run again
on resume. A draw whose unit raised is logged as ``failed`` and counted done; one lost
with its worker runs again (twice in a session, then on resume). See docs/scale.md.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from conformance.core.results import (FORMAT_VERSION, CorpusEntry, DrawLog, ResultsFormatError,
                                      check_record, format_problem, known_format,
                                      read_declared)
from conformance.checking.packing import DEFAULT_PACK
from conformance.checking.plan import stable_hash
from conformance.apps.repro import slug

#: Outcomes of an ``invalid`` record that are divergences (as conformance.apps.expectations).
INVALID_DIVERGENCES = ("accepted_invalid", "crash", "timeout")

#: Outcomes of a compile that failed on a valid signature (no cases ran).
COMPILE_DIVERGENCES = ("crash", "timeout", "backend_error", "type")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)?")
_UNIT = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, None: 1.0}


def parse_duration(text: str) -> float:
    """Seconds in ``30s``, ``90m``, ``8h``, ``1h30m``, ``2d`` or a plain number of
    seconds; ValueError for anything else (or for 0)."""
    t = text.strip().lower().replace(" ", "")
    if not t:
        raise ValueError("empty duration")
    total, pos = 0.0, 0
    for m in _DURATION.finditer(t):
        if m.start() != pos or not m.group(0):
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(t) or not (total > 0) or total == float("inf"):
        raise ValueError(f"expected a duration like 30s, 90m, 8h or 1h30m, got {text!r}")
    return total


def draw_seed(campaign_seed: int, round_: int) -> int:
    """The seed of one round of draws: a function of the campaign seed and the round."""
    return stable_hash("fuzz", campaign_seed, round_)


_TENSOR = re.compile(r"tensor<([^>]*)>")


def shape_class(signature: str | None) -> str:
    """The signature's shape, as divergences are told apart: the rank of every input and
    result (``z`` marks a zero-sized one), e.g. ``r2,r2->r2`` or ``r1z->r0``. Attributes,
    dimension sizes and element types are left out: one bug, one entry."""
    if not signature:
        return "-"
    text = signature.split(" !", 1)[0]
    ins, _, outs = text.partition(" -> ")

    def ranks(part: str) -> str:
        out = []
        for m in _TENSOR.finditer(part):
            dims = m.group(1).split("x")[:-1]
            out.append(f"r{len(dims)}" + ("z" if any(d == "0" for d in dims) else ""))
        return ",".join(out)
    return f"{ranks(ins)}->{ranks(outs)}"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One divergence a record shows, with the key it is deduplicated by."""

    backend: str
    op: str
    where: str              # the type key, or "!RULE" for an invalid program, "example-N"
    cls: str
    shape: str
    case_id: str | None
    signature: str | None
    repro: str | None       # the runner's reproducer folder (relative to its out), if any

    @property
    def key(self) -> str:
        return "|".join((self.backend, self.op, self.where, self.cls, self.shape))


def findings_of(record: dict[str, Any]) -> list[Finding]:
    """The divergences one results record shows (empty for most records).

    ``divergence`` records (a saved, minimised reproducer: keyed by the minimised
    signature's shape when it reproduces alone), ``signature`` records of a compile
    that failed (crash, timeout, backend error), ``invalid`` records of an accepted
    invalid program, a crash or a hang, ``example`` records that did not pass.
    """
    kind = record.get("kind")
    b, op = str(record.get("backend")), str(record.get("op"))
    if kind == "divergence":
        sig = (record.get("minimised_signature") if record.get("reproduces_alone")
               else record.get("signature")) or record.get("signature")
        return [Finding(b, op, str(record.get("type_key")), str(record.get("class")),
                        shape_class(sig), record.get("case_id"), sig, record.get("repro"))]
    if kind == "signature" and not record.get("counts") \
            and record.get("outcome") in COMPILE_DIVERGENCES:
        return [Finding(b, op, str(record.get("type_key")), str(record["outcome"]),
                        shape_class(record.get("signature")), None, record.get("signature"),
                        None)]
    if kind == "invalid" and record.get("outcome") in INVALID_DIVERGENCES:
        return [Finding(b, op, f"!{record.get('rule')}", str(record["outcome"]),
                        shape_class(record.get("signature")), None, record.get("signature"),
                        None)]
    if kind == "example" and record.get("outcome") not in ("pass", "unsupported", None):
        return [Finding(b, op, f"example-{record.get('index', 0)}", str(record["outcome"]),
                        shape_class(record.get("signature")), None, record.get("signature"),
                        None)]
    return []


class Corpus:
    """The campaign folder's ``corpus/``: one entry per distinct divergence key."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.index = self.folder / "index.jsonl"
        self.entries: dict[str, dict[str, Any]] = {}
        if self.index.is_file():
            for r in read_declared(self.index, CorpusEntry):
                self.entries.setdefault(r["key"], r)

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, f: Finding, source_out: Path, draw: int, seed: int,
            record: dict[str, Any]) -> dict[str, Any]:
        """Keep ``f`` (new): copy its reproducer folder, append the index line."""
        self.folder.mkdir(parents=True, exist_ok=True)
        folder = None
        if f.repro and (source_out / f.repro).is_dir():
            name = (f"{slug(f.backend)}/{slug(f.op)}/"
                    f"{slug(f.where)}-{f.cls}-{slug(f.shape.replace('->', '_to_'))}")
            dest = self.folder / name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(source_out / f.repro, dest)
            folder = f"corpus/{name}"
        entry = CorpusEntry(key=f.key, backend=f.backend, op=f.op, where=f.where, cls=f.cls,
                            shape=f.shape, case_id=f.case_id, signature=f.signature,
                            repro=folder, draw=draw, seed=seed, found=time.time(),
                            message=record.get("message") or record.get("reason")).to_dict()
        line = json.dumps(entry, separators=(",", ":"), default=str)
        with open(self.index, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.entries[f.key] = entry
        return entry


class CampaignStopped(BaseException):
    """Raised through the runner (past its ``except Exception``) to stop a draw."""


@dataclasses.dataclass
class CampaignConfig:
    backends: Sequence[str]
    ops: Sequence[str]                 # resolved op names (the selection)
    element_types: Sequence[str] | None = None
    depth: str = "quick"
    seed: int = 0
    out: Path = Path("conformance-fuzz")
    duration: float | None = None      # seconds (None: no time limit)
    cases: int | None = None           # value cases (None: no case budget)
    draws: int | None = None           # stop once draws 0..draws-1 are done (None: no end)
    max_repros: int = 2
    tolerances: dict | None = None
    isolate: bool | None = None
    timeout: float = 60.0
    invalid: bool = True
    fresh: bool = False
    pack: int = DEFAULT_PACK           # RunConfig.pack: the same records whatever it is

    def identity(self) -> dict[str, Any]:
        """What must match for a restart to continue the same draw sequence."""
        return {"seed": self.seed, "depth": self.depth, "backends": list(self.backends),
                "ops": sorted(self.ops), "element_types": sorted(self.element_types)
                if self.element_types else None, "invalid": self.invalid,
                "max_repros": self.max_repros,
                "tolerances": json.loads(json.dumps(self.tolerances, sort_keys=True,
                                                    default=str))}


def draw_unit(config: CampaignConfig, k: int) -> tuple[str, int, int]:
    """(op, round, seed) of draw ``k``."""
    ops = sorted(config.ops)
    r = k // len(ops)
    return ops[k % len(ops)], r, draw_seed(config.seed, r)


def draw_config(config: CampaignConfig, k: int, out: Path):
    """The runner's RunConfig of draw ``k`` (the same here and on a worker): the seed of
    its round, the spec examples in round 0 only, no replay, no progress bar."""
    from conformance.apps.runner import RunConfig
    _, r, seed = draw_unit(config, k)
    return RunConfig(backends=tuple(config.backends), ops=[draw_unit(config, k)[0]],
                     element_types=config.element_types, depth=config.depth, seed=seed,
                     out=Path(out), max_repros=config.max_repros,
                     tolerances=config.tolerances, isolate=config.isolate,
                     timeout=config.timeout, invalid=config.invalid, examples=(r == 0),
                     progress=False, replay=False, pack=config.pack)


class DrawBook:
    """Which draws are done, as ``campaign.json`` keeps it: ``next_draw``, the lowest
    draw not done, and ``done_above``, the draws above it that are done (draws on
    workers finish out of order). A resume runs exactly the draws not done."""

    def __init__(self, next_draw: int = 0, done_above: Sequence[int] = ()) -> None:
        self.next_draw = int(next_draw)
        self.above = {int(k) for k in done_above if int(k) > self.next_draw}
        self._advance()

    def _advance(self) -> None:
        while self.next_draw in self.above:
            self.above.discard(self.next_draw)
            self.next_draw += 1

    def is_done(self, k: int) -> bool:
        return k < self.next_draw or k in self.above

    def mark(self, k: int) -> bool:
        """Draw ``k`` is done (False: it was already)."""
        if self.is_done(k):
            return False
        self.above.add(k)
        self._advance()
        return True

    def todo(self) -> Iterator[int]:
        """The draws not done, in increasing order, without end (each once)."""
        k = self.next_draw
        while True:
            if not self.is_done(k):
                yield k
            k += 1

    def state(self) -> dict[str, Any]:
        return {"next_draw": self.next_draw, "done_above": sorted(self.above)}


class _Sink:
    """The runner's writer during one draw: sends each record's findings to the corpus,
    and stops the draw (CampaignStopped) once asked to (``stoppable``: a draw running
    here; the records of a draw that ran on a worker are applied whole)."""

    def __init__(self, campaign: "Campaign", draw: int, seed: int, work: Path,
                 stoppable: bool = True) -> None:
        self.c, self.draw, self.seed, self.work = campaign, draw, seed, work
        self.stoppable = stoppable
        self.cases = 0
        self.new: list[str] = []
        self.known: list[str] = []
        self.errors: list[str] = []     # the runner's internal_error records (suite bugs)

    def write(self, record: dict[str, Any]) -> None:
        c = self.c
        if self.stoppable and c.signal_name is not None:   # after a signal: not trusted
            raise CampaignStopped()
        check_record(record)            # the schema a results file holds (ValueError)
        if record.get("kind") == "signature":
            self.cases += int(record.get("cases") or 0)
        elif record.get("kind") == "internal_error":
            self.errors.append(f"internal error {record.get('what')}: {record.get('error')}")
        for f in findings_of(record):
            if f.key in c.corpus:
                if f.key not in self.known:
                    self.known.append(f.key)
                continue
            entry = c.corpus.add(f, self.work, self.draw, self.seed, record)
            self.new.append(f.key)
            c.report(entry)
        if self.stoppable and c.past_deadline():
            raise CampaignStopped()


#: Times a draw lost with its worker is run again in the same session (then: on resume).
LOST_RETRIES = 2

#: Seconds the driver waits for a result before it looks at the clock and signals again.
POLL = 0.25


class Campaign:
    """One ``conformance fuzz`` session over a campaign folder."""

    def __init__(self, config: CampaignConfig, backends: Sequence[Any],
                 say: Callable[[str], None] = print) -> None:
        if not config.ops:
            raise ValueError("a campaign needs at least one op")
        self.config = config
        self.backends = list(backends)
        self.out = Path(config.out)
        self.corpus = Corpus(self.out / "corpus")
        self.state_path = self.out / "campaign.json"
        self.log_path = self.out / "log.jsonl"
        self.say = say
        self.signal_name: str | None = None
        self.started = time.monotonic()
        self.session_new: list[dict[str, Any]] = []
        self.session_known: set[str] = set()
        self.session_cases = self.session_draws = 0
        self.failed: list[int] = []            # draws whose unit raised (logged, done)
        self.lost: list[int] = []              # draws lost with their worker (not done)
        self.state = self._load_state()
        self.book = DrawBook(self.state.get("next_draw", 0), self.state.get("done_above", ()))

    # -- state -------------------------------------------------------------------------
    def _load_state(self) -> dict[str, Any]:
        fresh = {"format": FORMAT_VERSION, "identity": self.config.identity(), "next_draw": 0,
                 "done_above": [], "draws": 0, "cases": 0, "elapsed": 0.0, "sessions": 0}
        if self.config.fresh or not self.state_path.is_file():
            return fresh
        try:
            text = self.state_path.read_text()
            old = json.loads(text)
        except (OSError, ValueError):
            return fresh
        fmt = old.get("format", 1) if isinstance(old, dict) else 1
        if not known_format(fmt):
            line = next((i for i, t in enumerate(text.splitlines(), 1) if '"format"' in t), 1)
            raise ResultsFormatError(f"{self.state_path}:{line}: {format_problem(fmt)}")
        if not isinstance(old, dict):
            return fresh
        if old.get("identity") != fresh["identity"]:
            self.say(f"{self.state_path}: another campaign (other options); its corpus is "
                     f"kept, the draws start again from 0")
            return fresh
        self.resumed = True
        return old

    def _save_state(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.state.update(self.book.state())
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        tmp.write_text(json.dumps({"format": FORMAT_VERSION, **self.state,
                                   "corpus": len(self.corpus)}, indent=1))
        os.replace(tmp, self.state_path)

    def _finish_sink(self, k: int, op: str, r: int, seed: int, sink: "_Sink",
                     seconds: float, wall: float | None = None) -> None:
        """Draw ``k`` ran to its end: done, and failed (a suite error) when the runner
        recorded internal errors of the suite in it (its findings are kept all the same)."""
        failed = None
        if sink.errors:
            failed = sink.errors[0] + (f" (and {len(sink.errors) - 1} more)"
                                       if len(sink.errors) > 1 else "")
            if not self.book.is_done(k):
                self.failed.append(k)
                self.say(f"FAILED draw {k} ({op}): {failed} (a suite error: logged in "
                         f"log.jsonl, counted done)")
        self._finish_draw(k, op, r, seed, sink.cases, sink.new, sink.known, seconds,
                          failed=failed, wall=wall)

    def _finish_draw(self, k: int, op: str, r: int, seed: int, cases: int,
                     new: list[str], known: list[str], seconds: float,
                     failed: str | None = None, wall: float | None = None) -> None:
        """Draw ``k`` is done: count it, log it, save the state. ``seconds``: the draw's
        own (on a worker: from its submission to its result); ``wall``: the campaign's
        elapsed time to add, when draws overlap (default ``seconds``)."""
        if not self.book.mark(k):
            return
        self.session_known.update(known)
        self.session_cases += cases
        self.session_draws += 1
        self.state.update(draws=int(self.state["draws"]) + 1,
                          cases=int(self.state["cases"]) + cases,
                          elapsed=float(self.state["elapsed"])
                          + (seconds if wall is None else wall))
        line = DrawLog(draw=k, round=r, seed=seed, op=op, cases=cases, new=new, known=known,
                       seconds=round(seconds, 3))
        if failed is not None:
            line.failed = failed
            self.state["failed"] = int(self.state.get("failed", 0)) + 1
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line.to_dict(), separators=(",", ":")) + "\n")
        self._save_state()

    # -- stopping ----------------------------------------------------------------------
    def past_deadline(self) -> bool:
        d = self.config.duration
        return d is not None and time.monotonic() - self.started >= d

    def _budget_spent(self, cases: int) -> bool:
        return self.config.cases is not None and cases >= self.config.cases

    def _stop_reason(self) -> str | None:
        if self.signal_name is not None:
            return self.signal_name
        if self.past_deadline():
            return "time"
        if self._budget_spent(self.session_cases):
            return "cases"
        return None

    def _on_signal(self, signum, frame) -> None:
        if getattr(self, "_closing", False):    # stopping already: let it finish
            return
        if self.signal_name is not None:       # the second one: stop now
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name

    def report(self, entry: dict[str, Any]) -> None:
        self.session_new.append(entry)
        self.say(f"NEW    {entry['backend']}: {entry['op']} {entry['where']} {entry['class']} "
                 f"{entry['shape']}  {entry['case_id'] or entry['signature'] or ''}"
                 + (f"  {entry['repro']}" if entry.get("repro") else ""))

    # -- the loop ----------------------------------------------------------------------
    def run(self, executor: Any = None) -> dict[str, Any]:
        """The session: the draws one after another here, or (``executor``: a
        ProcessExecutor, a RayExecutor or a conformance.apps.fuzz_executor stream) as tasks
        on its workers, a window of them in flight."""
        self.out.mkdir(parents=True, exist_ok=True)
        work = self.out / ".work"
        if getattr(self, "resumed", False):
            above = len(self.book.above)
            self.say(f"resuming the campaign in {self.out} at draw {self.book.next_draw}"
                     + (f" (and {above} done above it)" if above else "")
                     + f" ({len(self.corpus)} divergence(s) known)")
        old_handlers = {}
        try:
            for s in (signal.SIGINT, signal.SIGTERM):
                old_handlers[s] = signal.signal(s, self._on_signal)
        except ValueError:          # not the main thread: no signal handling
            old_handlers = {}
        self.state["sessions"] = int(self.state.get("sessions", 0)) + 1
        self._save_state()
        if work.exists():
            shutil.rmtree(work)
        stream = None
        try:
            if executor is None:
                stopped_by = self._run_here(work)
            else:
                from conformance.apps.fuzz_executor import stream_for
                stream = stream_for(executor)
                stopped_by = self._run_stream(stream, work)
        finally:
            self._closing = True                # (a few seconds at most: not interrupted)
            if stream is not None and len(stream):
                stream.cancel()
            for s, h in old_handlers.items():
                signal.signal(s, h)
            self._save_state()
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
        return {"stopped_by": stopped_by, "draws": self.session_draws,
                "cases": self.session_cases, "new": self.session_new,
                "known": sorted(self.session_known - {e["key"] for e in self.session_new}),
                "corpus": len(self.corpus), "entries": list(self.corpus.entries.values()),
                "next_draw": self.book.next_draw,
                "done_above": sorted(self.book.above), "failed": list(self.failed),
                "failed_total": int(self.state.get("failed", 0)),
                "lost": sorted(set(self.lost) - {k for k in self.lost
                                                 if self.book.is_done(k)}),
                "elapsed": time.monotonic() - self.started,
                "executor": stream.describe() if stream is not None else None}

    def _run_here(self, work: Path) -> str | None:
        """The draws one after another in this process (a signal stops the draw under
        way at its next record; it is not counted done)."""
        from conformance.apps.runner import Runner, RunConfig, prepare_backends
        from conformance.specs import load_spec
        cfg = self.config
        backends = prepare_backends(RunConfig(out=self.out, isolate=cfg.isolate,
                                              timeout=cfg.timeout), self.backends)
        todo = self.book.todo()
        try:
            while True:
                stopped_by = self._stop_reason()
                if stopped_by is not None:
                    return stopped_by
                k = next(todo)
                if cfg.draws is not None and k >= cfg.draws:
                    return "draws"
                op, r, seed = draw_unit(cfg, k)
                if work.exists():
                    shutil.rmtree(work)
                sink = _Sink(self, k, seed, work)
                runner = Runner(draw_config(cfg, k, work), backends, sink)  # type: ignore
                t0 = time.monotonic()
                try:
                    runner.run_unit(load_spec(op))
                except CampaignStopped:
                    self.session_cases += sink.cases
                    self.state["cases"] = int(self.state["cases"]) + sink.cases
                    self.session_known.update(sink.known)
                    return self.signal_name or "time"
                self._finish_sink(k, op, r, seed, sink, time.monotonic() - t0)
        finally:
            for b in backends:
                close = getattr(b, "close", None)
                if close:
                    close()

    def _run_stream(self, stream, work: Path) -> str | None:
        """The draws as tasks on ``stream``'s workers (conformance.apps.fuzz_executor), about
        two per worker in flight, each applied as it arrives (in any order). Stopping
        (a signal, the time, the case budget) submits no more and cancels the draws in
        flight: they are not done, a resume runs them."""
        from conformance.apps.executors import UnitFailure
        from conformance.apps.fuzz_executor import Lost
        cfg = self.config
        todo = self.book.todo()
        again: list[int] = []                   # lost draws to run again
        tries: dict[int, int] = {}
        inflight: dict[int, tuple[str, int, int, float]] = {}
        no_more = False
        while True:
            stopped_by = self._stop_reason()
            if stopped_by is not None:
                return stopped_by
            while len(inflight) < stream.window and (again or not no_more):
                if again:
                    k = again.pop(0)
                else:
                    k = next(todo)
                    if cfg.draws is not None and k >= cfg.draws:
                        no_more = True
                        break
                op, r, seed = draw_unit(cfg, k)
                stream.submit(k, draw_config(cfg, k, self.out), cfg.backends, op)
                inflight[k] = (op, r, seed, time.monotonic())
            if not inflight:
                return "draws"
            for k, res in stream.wait(POLL):
                if self.signal_name is not None:     # arrived after a signal: not applied
                    break
                op, r, seed, t0 = inflight.pop(k)
                seconds = time.monotonic() - t0
                if isinstance(res, Lost):
                    tries[k] = tries.get(k, 0) + 1
                    again_now = tries[k] <= LOST_RETRIES
                    self.lost.append(k)
                    self.say(f"LOST   draw {k} ({op}): {res.error}; "
                             + ("running it again" if again_now
                                else "not done: a resume runs it again"))
                    if again_now:
                        again.append(k)
                elif isinstance(res, UnitFailure):
                    self.failed.append(k)
                    self.say(f"FAILED draw {k} ({op}): {res.error} (a suite error: logged "
                             f"in log.jsonl, counted done)")
                    self._finish_draw(k, op, r, seed, 0, [], [], seconds, failed=res.error,
                                      wall=self._wall())
                else:
                    self._apply(k, op, r, seed, res, work, seconds)
                stopped_by = self._stop_reason()
                if stopped_by is not None:
                    return stopped_by

    def _wall(self) -> float:
        """Seconds since the last streamed draw was done (or the session started)."""
        now = time.monotonic()
        last, self._last_done = getattr(self, "_last_done", self.started), now
        return now - last

    def _apply(self, k: int, op: str, r: int, seed: int, res, work: Path,
               seconds: float) -> None:
        """A draw that ran on a worker: its reproducer files into a folder of its own,
        its records' findings into the corpus, then the draw is done."""
        folder = work / f"draw-{k}"
        try:
            for rel, data in res.files.items():
                dest = folder / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            sink = _Sink(self, k, seed, folder, stoppable=False)
            for record in res.records:
                sink.write(record)
            self._finish_sink(k, op, r, seed, sink, seconds, wall=self._wall())
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def summary_lines(result: dict[str, Any], out: Path) -> list[str]:
    why = {"time": "the time is up", "cases": "the case budget is spent",
           "draws": "the draws asked for are done",
           None: "done"}.get(result["stopped_by"], f"stopped by {result['stopped_by']}")
    above = result.get("done_above") or []
    ex = result.get("executor")
    where = ""
    if ex:
        where = f" on {ex.get('workers', '?')} {ex['executor']} worker(s)"
    lines = [f"campaign {out}: {result['draws']} draw(s), {result['cases']} cases in "
             f"{result['elapsed']:.1f} s{where} ({why}); next draw {result['next_draw']}"
             + (f" (and {len(above)} done above it)" if above else ""),
             f"divergences: {len(result['new'])} new, {len(result['known'])} known met again; "
             f"corpus: {result['corpus']} distinct ({out / 'corpus' / 'index.jsonl'})"]
    if result.get("failed"):
        lines.append(f"{len(result['failed'])} draw(s) failed with a suite error (counted "
                     f"done; see \"failed\" in {out / 'log.jsonl'}): "
                     + ", ".join(map(str, result["failed"][:10])))
    before = int(result.get("failed_total") or 0) - len(result.get("failed") or ())
    if before > 0:
        lines.append(f"{before} draw(s) of earlier sessions failed with a suite error (see "
                     f"\"failed\" in {out / 'log.jsonl'})")
    if result.get("lost"):
        lines.append(f"{len(result['lost'])} draw(s) lost with their worker, not done (a "
                     f"resume runs them): " + ", ".join(map(str, result["lost"][:10])))
    return lines


def main_loop(config: CampaignConfig, backends, say=None, executor=None) -> dict[str, Any]:
    """Run a campaign (here, or on ``executor``'s workers); returns its summary (see
    :meth:`Campaign.run`)."""
    def _say(line: str) -> None:
        print(line, flush=True)
    c = Campaign(config, backends, say or _say)
    return c.run(executor)


__all__ = ["Campaign", "CampaignConfig", "Corpus", "DrawBook", "Finding", "draw_config",
           "draw_seed", "draw_unit", "findings_of", "parse_duration", "shape_class", "summary_lines", "main_loop"]
