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
- ``campaign.json``: the campaign's options and where it stands (the next draw, the
  draws, cases and time so far), replaced atomically after every draw.
- ``log.jsonl``: one line per finished draw (seed, op, cases, the keys it met: new and
  known); a few hundred bytes per draw, never one per case.

Stopping: SIGINT or SIGTERM (once) lets the draw under way stop at its next record;
what it found up to then is already in the corpus, the draw itself is not counted
done, and the state says which draw comes next. Records produced after the signal
are not added to the corpus (a child process of an isolated backend that got the
terminal's SIGINT dies: that is not the backend's crash). A second signal stops at
once (the corpus and state are consistent after every line anyway). Running the same
command again resumes at the next draw; ``--fresh`` starts the draws again from 0 and
keeps the corpus.
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
from typing import Any, Callable, Sequence

from conformance.plan import stable_hash
from conformance.repro import _slug

#: Outcomes of an ``invalid`` record that are divergences (as conformance.expectations).
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
            from conformance.core.results import read_results
            for r in read_results(self.index):
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
            name = (f"{_slug(f.backend)}/{_slug(f.op)}/"
                    f"{_slug(f.where)}-{f.cls}-{_slug(f.shape.replace('->', '_to_'))}")
            dest = self.folder / name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(source_out / f.repro, dest)
            folder = f"corpus/{name}"
        entry = {"key": f.key, "backend": f.backend, "op": f.op, "where": f.where,
                 "class": f.cls, "shape": f.shape, "case_id": f.case_id,
                 "signature": f.signature, "repro": folder, "draw": draw, "seed": seed,
                 "found": time.time(),
                 "message": record.get("message") or record.get("reason")}
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
    max_repros: int = 2
    tolerances: dict | None = None
    isolate: bool | None = None
    timeout: float = 60.0
    invalid: bool = True
    fresh: bool = False

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


class _Sink:
    """The runner's writer during one draw: sends each record's findings to the corpus,
    and stops the draw (CampaignStopped) once asked to."""

    def __init__(self, campaign: "Campaign", draw: int, seed: int, work: Path) -> None:
        self.c, self.draw, self.seed, self.work = campaign, draw, seed, work
        self.cases = 0
        self.new: list[str] = []
        self.known: list[str] = []

    def write(self, record: dict[str, Any]) -> None:
        c = self.c
        if c.signal_name is not None:          # after a signal: nothing more is trusted
            raise CampaignStopped()
        if record.get("kind") == "signature":
            self.cases += int(record.get("cases") or 0)
        for f in findings_of(record):
            if f.key in c.corpus:
                if f.key not in self.known:
                    self.known.append(f.key)
                continue
            entry = c.corpus.add(f, self.work, self.draw, self.seed, record)
            self.new.append(f.key)
            c.report(entry)
        if c.past_deadline():
            raise CampaignStopped()


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
        self.state = self._load_state()

    # -- state -------------------------------------------------------------------------
    def _load_state(self) -> dict[str, Any]:
        fresh = {"identity": self.config.identity(), "next_draw": 0, "draws": 0,
                 "cases": 0, "elapsed": 0.0, "sessions": 0}
        if self.config.fresh or not self.state_path.is_file():
            return fresh
        try:
            old = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return fresh
        if old.get("identity") != fresh["identity"]:
            self.say(f"{self.state_path}: another campaign (other options); its corpus is "
                     f"kept, the draws start again from 0")
            return fresh
        self.resumed = True
        return old

    def _save_state(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        tmp.write_text(json.dumps({**self.state, "corpus": len(self.corpus)}, indent=1))
        os.replace(tmp, self.state_path)

    # -- stopping ----------------------------------------------------------------------
    def past_deadline(self) -> bool:
        d = self.config.duration
        return d is not None and time.monotonic() - self.started >= d

    def _budget_spent(self, cases: int) -> bool:
        return self.config.cases is not None and cases >= self.config.cases

    def _on_signal(self, signum, frame) -> None:
        if self.signal_name is not None:       # the second one: stop now
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name

    def report(self, entry: dict[str, Any]) -> None:
        self.session_new.append(entry)
        self.say(f"NEW    {entry['backend']}: {entry['op']} {entry['where']} {entry['class']} "
                 f"{entry['shape']}  {entry['case_id'] or entry['signature'] or ''}"
                 + (f"  {entry['repro']}" if entry.get("repro") else ""))

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        from conformance.runner import Runner, RunConfig, prepare_backends
        from conformance.specs import load_spec

        self.out.mkdir(parents=True, exist_ok=True)
        work = self.out / ".work"
        cfg = self.config
        if getattr(self, "resumed", False):
            self.say(f"resuming the campaign in {self.out} at draw {self.state['next_draw']} "
                     f"({len(self.corpus)} divergence(s) known)")
        old_handlers = {}
        try:
            for s in (signal.SIGINT, signal.SIGTERM):
                old_handlers[s] = signal.signal(s, self._on_signal)
        except ValueError:          # not the main thread: no signal handling
            old_handlers = {}
        self.state["sessions"] = int(self.state.get("sessions", 0)) + 1
        self._save_state()
        backends = prepare_backends(RunConfig(out=self.out, isolate=cfg.isolate,
                                              timeout=cfg.timeout), self.backends)
        session_cases = session_draws = 0
        stopped_by = None
        try:
            while True:
                if self.signal_name is not None:
                    stopped_by = self.signal_name
                    break
                if self.past_deadline():
                    stopped_by = "time"
                    break
                if self._budget_spent(session_cases):
                    stopped_by = "cases"
                    break
                k = int(self.state["next_draw"])
                op, r, seed = draw_unit(cfg, k)
                if work.exists():
                    shutil.rmtree(work)
                rc = RunConfig(backends=cfg.backends, ops=[op], element_types=cfg.element_types,
                               depth=cfg.depth, seed=seed, out=work, max_repros=cfg.max_repros,
                               tolerances=cfg.tolerances, isolate=cfg.isolate,
                               timeout=cfg.timeout, invalid=cfg.invalid,
                               examples=(r == 0), progress=False, replay=False)
                sink = _Sink(self, k, seed, work)
                runner = Runner(rc, backends, sink)       # type: ignore[arg-type]
                t0 = time.monotonic()
                try:
                    runner.run_unit(load_spec(op))
                except CampaignStopped:
                    session_cases += sink.cases
                    self.state["cases"] = int(self.state["cases"]) + sink.cases
                    self.session_known.update(sink.known)
                    stopped_by = self.signal_name or "time"
                    break
                self.session_known.update(sink.known)
                session_cases += sink.cases
                session_draws += 1
                self.state.update(next_draw=k + 1, draws=int(self.state["draws"]) + 1,
                                  cases=int(self.state["cases"]) + sink.cases,
                                  elapsed=float(self.state["elapsed"])
                                  + time.monotonic() - t0)
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"draw": k, "round": r, "seed": seed, "op": op,
                                         "cases": sink.cases, "new": sink.new,
                                         "known": sink.known,
                                         "seconds": round(time.monotonic() - t0, 3)},
                                        separators=(",", ":")) + "\n")
                self._save_state()
        finally:
            for s, h in old_handlers.items():
                signal.signal(s, h)
            self._save_state()
            for b in backends:
                close = getattr(b, "close", None)
                if close:
                    close()
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
        return {"stopped_by": stopped_by, "draws": session_draws, "cases": session_cases,
                "new": self.session_new,
                "known": sorted(self.session_known - {e["key"] for e in self.session_new}),
                "corpus": len(self.corpus), "next_draw": self.state["next_draw"],
                "elapsed": time.monotonic() - self.started}


def summary_lines(result: dict[str, Any], out: Path) -> list[str]:
    why = {"time": "the time is up", "cases": "the case budget is spent",
           None: "done"}.get(result["stopped_by"], f"stopped by {result['stopped_by']}")
    return [f"campaign {out}: {result['draws']} draw(s), {result['cases']} cases in "
            f"{result['elapsed']:.1f} s ({why}); next draw {result['next_draw']}",
            f"divergences: {len(result['new'])} new, {len(result['known'])} known met again; "
            f"corpus: {result['corpus']} distinct ({out / 'corpus' / 'index.jsonl'})"]


def main_loop(config: CampaignConfig, backends, say=None) -> dict[str, Any]:
    """Run a campaign; returns its summary (see :meth:`Campaign.run`)."""
    def _say(line: str) -> None:
        print(line, flush=True)
    c = Campaign(config, backends, say or _say)
    return c.run()


__all__ = ["Campaign", "CampaignConfig", "Corpus", "Finding", "draw_seed", "draw_unit",
           "findings_of", "parse_duration", "shape_class", "summary_lines", "main_loop"]
