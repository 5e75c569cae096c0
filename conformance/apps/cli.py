"""The ``conformance`` command: run the suite, render reports, browse the specs.

    conformance run [--backend jax] [--ops add,sine] [--family arithmetic]
                    [--types f32,bf16] [--depth quick|default|deep] [--seed N] [--out DIR]
                    [--jobs N] [--pack N] [--resume | --force] [--no-replay] [--shard K/N]
                    [--cluster ray|auto|ray://HOST:PORT]
    conformance repro CASE_ID [--backend jax] [--save DIR]
    conformance fuzz (--for 8h | --cases N | --draws N) [--backend ...] [--ops ...]
                     [--seed N] [--out DIR] [--fresh] [--jobs N] [--pack N]
                     [--cluster ray|auto|ray://HOST:PORT] [--expectations FILE]
    conformance merge OUT RESULTS.jsonl [RESULTS.jsonl ...] [--expectations FILE] [--force]
    conformance report RESULTS.jsonl [--out DIR] [--expectations FILE]
    conformance expectations check RESULTS.jsonl FILE [--strict] [--fail-on-stale]
    conformance expectations update RESULTS.jsonl FILE [--also RESULTS.jsonl ...]
    conformance list [ops|families|types|backends]
    conformance show OP
    conformance specs validate [FILE ...]

Exit codes: 0 no divergence (with --expectations: none the file does not expect);
1 divergences found (unexpected ones); 2 usage or input error (a bad option value,
unknown op, element type or backend, a missing, unreadable or malformed input file, an
output folder that cannot be written or holds another run's results); 3 internal
error of the suite (also: a run that recorded internal errors and no divergence).

Every option and input file is checked before anything is written, each bad one
reported in one line naming it, so a bad option never truncates an existing results
file. The exit code of ``run`` is decided from the results file the report is
rendered from, by the same count as the report, JUnit XML and ``conformance
expectations check`` (:func:`conformance.apps.expectations.gate`): every divergence class
counts, accepted_invalid, crash, timeout and backend_error included. That of ``fuzz``
from the campaign's whole corpus, whatever session found it
(:func:`conformance.apps.expectations.corpus_gate`).

An output folder of another kind is not written into: ``run``, ``programs`` and
``merge`` refuse one with the results of another run unless ``--force`` (``run`` and
``programs``: or the same options), ``report`` one with another run's results, ``fuzz``
one with a run's results or report, and all of them a fuzz campaign's folder. Where
stderr is not a terminal, ``run``, ``fuzz`` and ``programs`` print a progress line
every 30 s (conformance.apps.heartbeat).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
from pathlib import Path
from typing import Any, Sequence

EXIT_OK, EXIT_DIVERGENCES, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

#: Largest --jobs and --timeout accepted.
MAX_JOBS = 256
MAX_TIMEOUT = 7 * 24 * 3600.0
MAX_SHARDS = 100_000

#: The files ``conformance run`` and ``conformance report`` write in their output folder.
OUTPUT_FILES = ("results.jsonl", "index.html", "summary.json", "junit.xml")

#: The files a fuzz campaign keeps in its folder (conformance.apps.fuzz).
CAMPAIGN_FILES = ("campaign.json", "corpus/index.jsonl", "log.jsonl")

#: Largest ``programs --count``, ``--max-ops`` and ``--batch`` accepted.
MAX_PROGRAMS = 1_000_000
#: Largest ``programs --start``: every program index (start + count - 1) stays an integer
#: that a JSON reader holding numbers as doubles (the report's JavaScript) reads exactly.
MAX_PROGRAM_START = 2 ** 53 - MAX_PROGRAMS
MAX_PROGRAM_OPS = 100
MAX_PROGRAM_BATCH = 4096



class UsageError(Exception):
    """A bad option or input: reported in one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line (no usage block): ``prog: error: ...``."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {' '.join(message.split())} "
                              f"(see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102
        # argparse drops a value of '--' given as --opt=-- and keeps [] as the value.
        for a in (sys.argv[1:] if args is None else args):
            if isinstance(a, str) and a.startswith("--") and a.endswith("=--"):
                self.error(f"argument {a[:-3]}: expected a value, got '--'")
        return super().parse_known_args(args, namespace)

    def _parse_optional(self, arg_string):  # noqa: D102 - argparse's hook
        # A word that starts with '-' and a digit or '.' is a value, not an option (no
        # option looks so): `repro -1:quick:...`, `--for -5m`, `--seed -1` are then
        # judged as values, with the error that names what is wrong with them.
        if len(arg_string) > 1 and arg_string[0] == "-" and (arg_string[1].isdigit()
                                                             or arg_string[1] == "."):
            return None
        return super()._parse_optional(arg_string)


class _Int:
    """An argparse type: an integer in [lo, hi] (hi None: no upper bound)."""

    kind = "int"

    def __init__(self, lo: int, hi: int | None = None) -> None:
        self.lo, self.hi = lo, hi
        self.__name__ = "integer"

    def __call__(self, text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text!r}") from None
        if value < self.lo or (self.hi is not None and value > self.hi):
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text!r}")
        return value

    def describe(self) -> str:
        if self.hi is None:
            return f"an integer >= {self.lo}"
        return f"an integer from {self.lo} to {self.hi}"


class _Seconds:
    """An argparse type: a number of seconds > 0 and at most ``hi``."""

    kind = "seconds"

    def __init__(self, hi: float) -> None:
        self.hi = hi
        self.__name__ = "seconds"

    def __call__(self, text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            value = math.nan
        if not (0 < value <= self.hi):
            raise argparse.ArgumentTypeError(
                f"expected a number of seconds > 0 and at most {self.hi:g}, got {text!r}")
        return value


class _Shard:
    """An argparse type: ``K/N``, 1 <= K <= N <= MAX_SHARDS."""

    kind = "shard"
    __name__ = "shard"

    def __call__(self, text: str) -> tuple[int, int]:
        k, sep, n = text.strip().partition("/")
        try:
            value = (int(k, 10), int(n, 10))
        except ValueError:
            value = (0, 0)
        if not sep or not (1 <= value[0] <= value[1] <= MAX_SHARDS):
            raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N <= {MAX_SHARDS} "
                                             f"(e.g. 1/4), got {text!r}")
        return value


def _kind(action: argparse.Action, kind: str) -> argparse.Action:
    """Tag an option or argument with the kind of value it takes (tests/
    test_cli_bad_input.py draws bad values by kind for every option the parser has)."""
    action.kind = kind      # type: ignore[attr-defined]
    return action


def _csv(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def list_option(text: str | None, option: str, repeats: bool = True) -> list[str] | None:
    """A comma list option: None when absent; at least one item, each once (a repeated
    one is dropped, or with ``repeats=False`` an error)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    if not any(items):
        raise UsageError(f"{option}: empty list")
    if not all(items):
        raise UsageError(f"{option}: empty name in {text!r}")
    once = list(dict.fromkeys(items))
    if not repeats and len(once) != len(items):
        twice = next(i for i in once if items.count(i) > 1)
        raise UsageError(f"{option}: {twice!r} given twice")
    return once


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="conformance",
                description="StableHLO / XLA op-semantics conformance suite")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="run the suite on one or more backends and write the report")
    _kind(r.add_argument("--backend", default="jax", metavar="BACKENDS",
                         help="comma list of backends: jax, jax-gpu (jax.lax), xla, xla-gpu "
                              "(the case's StableHLO compiled by XLA through PJRT), "
                              "interpreter (the StableHLO reference interpreter), numpy (the "
                              "oracle), module:Class (found on sys.path or in the current "
                              "directory), or an entry point name (default: jax, on CPU)"),
          "backends")
    _kind(r.add_argument("--ops", help="comma list of ops, StableHLO or XLA names (default: all)"),
          "ops")
    _kind(r.add_argument("--family", metavar="FAMILIES",
                         help="comma list of op families (see `conformance list families`)"),
          "families")
    _kind(r.add_argument("--types", help="comma list of element types, e.g. f32,bf16,si8; "
                                         "each must be allowed by a selected op"), "types")
    r.add_argument("--depth", choices=["quick", "default", "deep"], default="default")
    r.add_argument("--seed", type=_Int(0), default=0, metavar="N",
                   help="same seed, same cases (an integer >= 0; default 0)")
    _kind(r.add_argument("--out", default="conformance-report", metavar="DIR",
                         help="output folder (default: conformance-report); one that holds "
                              "the results of a run with other options is refused unless "
                              "--resume or --force"), "out_dir")
    r.add_argument("--max-repros", type=_Int(0), default=2, metavar="N",
                   help="reproducers saved per backend, op, element type and class (>= 0)")
    _kind(r.add_argument("--tolerances", metavar="FILE",
                         help="tolerance profile (YAML): per op and element type, accuracy "
                              "bounds that override the spec's, e.g. 'sine: {f32: {ulp: 8}}'"),
          "tolerances")
    _kind(r.add_argument("--expectations", metavar="FILE",
                         help="known divergences (YAML): the run fails only on divergences "
                              "the file does not list; entries that matched nothing are "
                              "reported stale. A shipped file by name: jax-cpu"),
          "expectations")
    r.add_argument("--fail-on-stale", action="store_true",
                   help="with --expectations: also fail when an entry is stale")
    r.add_argument("--no-invalid", action="store_true", help="skip the invalid-program cases")
    r.add_argument("--no-examples", action="store_true", help="skip the spec examples")
    r.add_argument("--no-probes", action="store_true",
                   help="skip the probes of implementation-defined behaviour (accumulation "
                        "precision and order of reduce, dot_general and convolution)")
    r.add_argument("--no-progress", action="store_true",
                   help="no progress bar (nor, where stderr is not a terminal, the progress "
                        "line printed every 30 s: CONFORMANCE_PROGRESS_EVERY=SECONDS)")
    iso = r.add_mutually_exclusive_group()
    iso.add_argument("--isolate", dest="isolate", action="store_true", default=None,
                     help="run every backend in a child process: a crash or hang costs one "
                          "case (default: only backends that ask for it: xla, interpreter)")
    iso.add_argument("--no-isolate", dest="isolate", action="store_false")
    r.add_argument("--timeout", type=_Seconds(MAX_TIMEOUT), default=60.0, metavar="SECONDS",
                   help="seconds an isolated backend may take per compile or batch "
                        "(> 0; default 60)")
    r.add_argument("--jobs", type=_Int(1, MAX_JOBS), default=1, metavar="N",
                   help="worker processes (ops are spread over them; same cases and verdicts)")
    r.add_argument("--pack", type=_Int(0, 256), default=None, metavar="N",
                   help="compile up to N independent signatures of an op as one program on "
                        "backends that can (xla, jax): one compile per pack instead of per "
                        "signature, the same records; a pack that fails is split down to "
                        "the signature at fault; 0 or 1: one compile per signature "
                        "(default 16)")
    r.add_argument("--shard", type=_Shard(), metavar="K/N",
                   help="run only shard K of N of the plan's units (1 <= K <= N; a stable "
                        "hash of each op): N machines split a run, `conformance merge` joins it")
    _kind(r.add_argument("--cluster", metavar="WHERE",
                         help="run the units as Ray tasks: ray (a local Ray instance for the "
                              "run, --jobs workers), auto or ray://HOST:PORT (an existing "
                              "cluster); needs pip install 'stablehlo-conformance[ray]'"),
          "cluster")
    again = r.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue the interrupted run whose results.jsonl is in --out "
                            "(same options): keep the ops it finished, run the others")
    again.add_argument("--force", action="store_true",
                       help="overwrite the results in --out even if they are those of a run "
                            "with other options (without it, such a folder is refused)")
    r.add_argument("--no-replay", action="store_true",
                   help="do not re-run the reproducers already in --out before new cases")

    rp = sub.add_parser("repro", help="re-create one case from its id and run it on a backend")
    _kind(rp.add_argument("case_id", help="SEED:DEPTH:OP:TYPE_KEY:SIGNATURE_INDEX:BATCH:CASE_INDEX, "
                                          "as a run's results and reports name it"), "case_id")
    _kind(rp.add_argument("--backend", default="jax",
                          help="jax, xla, interpreter, numpy, module:Class, ... (default: jax)"),
          "backend")
    _kind(rp.add_argument("--save", metavar="DIR",
                          help="also save the case as a reproducer folder (case.json, repro.py)"),
          "out_dir")
    rp.add_argument("--no-isolate", dest="isolate", action="store_false", default=True,
                    help="run the backend in this process (default: in a child process, so "
                         "that a crash or hang is reported as one)")
    rp.add_argument("--timeout", type=_Seconds(MAX_TIMEOUT), default=60.0, metavar="SECONDS",
                    help="seconds an isolated backend may take (> 0; default 60)")

    rep = sub.add_parser("report", help="render the HTML/JSON/JUnit report of a results file")
    _kind(rep.add_argument("results", help="a results.jsonl written by `conformance run`"),
          "results")
    _kind(rep.add_argument("--out", metavar="DIR",
                           help="output folder (default: the results file's folder)"),
          "out_dir")
    _kind(rep.add_argument("--expectations", metavar="FILE",
                           help="known divergences (YAML, or a shipped file by name: jax-cpu): "
                                "show the CI gate in the report (the exit code stays 0; "
                                "`conformance expectations check` gates)"), "expectations")

    fz = sub.add_parser("fuzz", help="campaign mode: draw new seeds for a time or a case "
                                     "budget, keep one reproducer per distinct divergence")
    _kind(fz.add_argument("--backend", default="jax", metavar="BACKENDS",
                          help="comma list of backends (as for run; default: jax)"), "backends")
    _kind(fz.add_argument("--ops", help="comma list of ops (default: all)"), "ops")
    _kind(fz.add_argument("--family", metavar="FAMILIES", help="comma list of op families"),
          "families")
    _kind(fz.add_argument("--types", help="comma list of element types"), "types")
    fz.add_argument("--depth", choices=["quick", "default", "deep"], default="quick",
                    help="depth of each draw (default: quick: more seeds per hour)")
    fz.add_argument("--seed", type=_Int(0), default=0, metavar="N",
                    help="campaign seed: the sequence of draws is a function of it")
    _kind(fz.add_argument("--for", dest="duration", metavar="DURATION",
                          help="how long: 30s, 90m, 8h, 1h30m (stops at the next record; "
                               "on workers the draws in flight are cancelled)"),
          "duration")
    fz.add_argument("--cases", type=_Int(1), metavar="N",
                    help="value-case budget: no new draw once this session checked N cases")
    _kind(fz.add_argument("--out", default="conformance-fuzz", metavar="DIR",
                          help="campaign folder: corpus/, campaign.json, log.jsonl (default: "
                               "conformance-fuzz); the same command again resumes; a folder "
                               "with the results of a run is refused"), "out_dir")
    fz.add_argument("--max-repros", type=_Int(1), default=2, metavar="N",
                    help="reproducers minimised per backend, op, type and class in one draw")
    _kind(fz.add_argument("--tolerances", metavar="FILE", help="tolerance profile (YAML)"),
          "tolerances")
    _kind(fz.add_argument("--expectations", metavar="FILE",
                          help="known divergences (YAML, or a shipped file by name: jax-cpu): "
                               "exit 1 only on divergences of the campaign's whole corpus "
                               "(every session's, resumed or not) the file does not list; "
                               "without it, on any divergence in the corpus"),
          "expectations")
    fz.add_argument("--no-invalid", action="store_true", help="skip the invalid programs")
    fz_iso = fz.add_mutually_exclusive_group()
    fz_iso.add_argument("--isolate", dest="isolate", action="store_true", default=None,
                        help="run every backend in a child process")
    fz_iso.add_argument("--no-isolate", dest="isolate", action="store_false")
    fz.add_argument("--timeout", type=_Seconds(MAX_TIMEOUT), default=60.0, metavar="SECONDS",
                    help="seconds an isolated backend may take per compile or batch")
    fz.add_argument("--fresh", action="store_true",
                    help="start the draws again from 0 (the corpus is kept)")
    fz.add_argument("--draws", type=_Int(1), metavar="N",
                    help="stop once the campaign's draws 0..N-1 are done (a resume runs "
                         "those not done)")
    fz.add_argument("--jobs", type=_Int(1, MAX_JOBS), default=1, metavar="N",
                    help="run the draws on N worker processes, about 2N in flight (the "
                         "same draws and corpus as one process)")
    fz.add_argument("--pack", type=_Int(0, 256), default=None, metavar="N",
                    help="as for run: compile up to N signatures of a draw as one program "
                         "where a backend can; the same records (default 16)")
    _kind(fz.add_argument("--cluster", metavar="WHERE",
                          help="run the draws as Ray tasks: ray (a local Ray instance, --jobs "
                               "workers), auto or ray://HOST:PORT (an existing cluster)"),
          "cluster")

    mg = sub.add_parser("merge", help="merge the results of several runs (shards, --ops "
                                      "splits, machines) into one results file and report")
    _kind(mg.add_argument("out", metavar="OUT",
                          help="output folder: results.jsonl, the report, the reproducers"),
          "out_dir")
    _kind(mg.add_argument("results", nargs="+", metavar="RESULTS",
                          help="results.jsonl files of runs with the same seed, depth, "
                               "backends and options (filters and --shard may differ)"),
          "results")
    _kind(mg.add_argument("--expectations", metavar="FILE",
                          help="known divergences (YAML): the exit code gates on the merged "
                               "records, as for run"), "expectations")
    mg.add_argument("--force", action="store_true",
                    help="replace the results already in OUT")

    ls = sub.add_parser("list", help="list ops, families, element types or backends")
    ls.add_argument("what", nargs="?", default="ops",
                    choices=["ops", "families", "types", "backends"])

    sh = sub.add_parser("show", help="show one op's spec")
    _kind(sh.add_argument("op"), "op")

    ex = sub.add_parser("expectations", help="check a results file against known divergences, "
                                             "or write the file from a run")
    ex_sub = ex.add_subparsers(dest="expectations_command", required=True,
                               parser_class=_Parser)
    chk = ex_sub.add_parser("check", help="gate a results file: exit 1 on unexpected divergences")
    _kind(chk.add_argument("results"), "results")
    _kind(chk.add_argument("expectations", help="the expectations file, or a shipped one by "
                                                "name (jax-cpu)"), "expectations")
    chk.add_argument("--fail-on-stale", action="store_true",
                     help="also fail on stale entries (and on listed element types or rules "
                          "the run exercised that matched nothing)")
    chk.add_argument("--strict", action="store_true",
                     help="also fail on broad entries: a pattern (op glob, '*' element type, "
                          "class wildcard, ...) naming more than the run matched, or an entry "
                          "of a broad class (property, accuracy, bound, value) without "
                          "looks_like, or an entry whose reason the run's records refute (an "
                          "error figure such as '87-103 ulp', or inf/NaN the witnesses do not "
                          "show: CLAIM lines)")
    upd = ex_sub.add_parser("update", help="write the expectations file from a run's results "
                                           "as narrow entries (exact op, class and element "
                                           "types), keeping the reasons already there")
    _kind(upd.add_argument("results"), "results")
    _kind(upd.add_argument("expectations", help="the file to write (read first if it exists)"),
          "out_file")
    _kind(upd.add_argument("--also", action="append", metavar="RESULTS", dest="more_results",
                           help="the results of another run to take into account too (e.g. "
                                "a quick and a default run: the file gates both); repeatable"),
          "results")
    _kind(upd.add_argument("--backend", help="only this backend's divergences (a backend of "
                                             "the run)"), "run_backend")

    pg = sub.add_parser("programs", help="generate multi-op programs from the specs and check "
                                         "them on backends (issue 19): exit 1 on a divergence")
    _kind(pg.add_argument("--backend", default="jax", metavar="BACKENDS",
                          help="comma list of backends (as for run; default: jax)"), "backends")
    pg.add_argument("--depth", choices=["quick", "default", "deep"], default="default",
                    help="how many programs, how large, how many value cases each: quick "
                         "30/6 ops/4, default 300/8/8, deep 3000/12/16 (--count, --max-ops, "
                         "--batch override)")
    pg.add_argument("--count", type=_Int(1, MAX_PROGRAMS), default=None, metavar="N",
                    help=f"programs (1 to {MAX_PROGRAMS}; default: the depth's)")
    pg.add_argument("--seed", type=_Int(0), default=0, metavar="S",
                    help="same seed, same programs")
    pg.add_argument("--start", type=_Int(0, MAX_PROGRAM_START), default=0, metavar="I",
                    help=f"first program index (0 to {MAX_PROGRAM_START}; default 0)")
    _kind(pg.add_argument("--out", default="conformance-programs", metavar="DIR",
                          help="output folder (default: conformance-programs); one that "
                               "holds the results of another run (a `run`'s, a merge's, a "
                               "programs run with other options) is refused unless --resume "
                               "or --force"), "out_dir")
    pg.add_argument("--max-ops", type=_Int(2, MAX_PROGRAM_OPS), default=None, metavar="N",
                    help=f"operations per program, at most (2 to {MAX_PROGRAM_OPS}; default: "
                         f"the depth's)")
    pg.add_argument("--batch", type=_Int(1, MAX_PROGRAM_BATCH), default=None, metavar="N",
                    help=f"value cases per program (1 to {MAX_PROGRAM_BATCH}; default: the "
                         f"depth's)")
    _kind(pg.add_argument("--ops", help="comma list of ops the programs may draw (default: "
                                        "every covered op)"), "ops")
    _kind(pg.add_argument("--types", help="comma list of the programs' home element types"),
          "types")
    _kind(pg.add_argument("--accept", metavar="CLASSES",
                          help="comma list of divergence classes that do not fail the run "
                               "(e.g. subnormal_flush)"), "classes")
    _kind(pg.add_argument("--expectations", metavar="FILE",
                          help="known divergences (YAML, or a shipped file by name: jax-cpu): "
                               "fail only on program findings it does not list (entries with "
                               "'program: PATTERN' name a generator pattern; a finding the op "
                               "alone shows is waived by the op's own entry)"), "expectations")
    pg_again = pg.add_mutually_exclusive_group()
    pg_again.add_argument("--resume", action="store_true",
                          help="continue the interrupted programs run whose results.jsonl is "
                               "in --out (same options): keep the programs it checked, check "
                               "the rest")
    pg_again.add_argument("--force", action="store_true",
                          help="overwrite the results in --out even if they are those of "
                               "another run (without it, such a folder is refused)")
    pg.add_argument("--no-minimize", action="store_true",
                    help="save diverging programs as drawn")
    pg.add_argument("--timeout", type=_Seconds(MAX_TIMEOUT), default=120.0, metavar="SECONDS",
                    help="seconds an isolated backend may take per program")
    pg_iso = pg.add_mutually_exclusive_group()
    pg_iso.add_argument("--isolate", dest="isolate", action="store_true", default=None,
                        help="run every backend in a child process")
    pg_iso.add_argument("--no-isolate", dest="isolate", action="store_false")
    pg.add_argument("--quiet", action="store_true", help="no line per program")

    ck = sub.add_parser("check", help="read StableHLO modules written elsewhere (a jax "
                                      "export, a test file, a compiler dump) and judge them "
                                      "op by op on backends (issue 29): exit 1 on a "
                                      "divergence")
    _kind(ck.add_argument("modules", nargs="*", metavar="MODULE",
                          help=".mlir or .mlirbc files (VHLO portable artifacts included), "
                               "folders of them, or globs"), "module_paths")
    from conformance.apps.corpus import CORPORA
    ck.add_argument("--corpus", action="append", choices=list(CORPORA), metavar="NAME",
                    help="also check a corpus of real models built with jax at run time "
                         "and exported into DIR/corpus/ (" + ", ".join(
                             f"{k}: {', '.join(v)}" for k, v in CORPORA.items()) +
                         "; each in f32 and bf16); with or without MODULE paths")
    _kind(ck.add_argument("--backend", default="jax", metavar="BACKENDS",
                          help="comma list of backends (as for run; default: jax)"), "backends")
    from conformance.apps.check import DEPTH_BATCH
    ck.add_argument("--depth", choices=list(DEPTH_BATCH), default="default",
                    help="value cases per module: " + ", ".join(
                        f"{k} {v}" for k, v in DEPTH_BATCH.items()) + " (--batch overrides)")
    ck.add_argument("--batch", type=_Int(1, MAX_PROGRAM_BATCH), default=None, metavar="N",
                    help=f"value cases per module (1 to {MAX_PROGRAM_BATCH})")
    ck.add_argument("--seed", type=_Int(0), default=0, metavar="S",
                    help="same seed, same drawn argument values")
    _kind(ck.add_argument("--inputs", metavar="FILE.npz",
                          help="the modules' argument values (arrays arg0, arg1, ... or in "
                               "order; one case each, or with a leading batch axis) instead "
                               "of drawn ones"), "inputs_file")
    _kind(ck.add_argument("--out", default="conformance-check", metavar="DIR",
                          help="output folder (default: conformance-check); one that holds "
                               "the results of another run is refused unless --force"),
          "out_dir")
    ck_again = ck.add_mutually_exclusive_group()
    ck_again.add_argument("--resume", action="store_true",
                          help="continue the interrupted check whose results.jsonl is in "
                               "--out (same options): keep the modules it checked, check "
                               "the rest")
    ck_again.add_argument("--force", action="store_true",
                          help="overwrite the results in --out even if another run wrote "
                               "them")
    _kind(ck.add_argument("--accept", metavar="CLASSES",
                          help="comma list of divergence classes that do not fail the run "
                               "(e.g. subnormal_flush)"), "classes")
    _kind(ck.add_argument("--expectations", metavar="FILE",
                          help="known divergences (YAML, or a shipped file by name: jax-cpu): "
                               "fail only on module findings it does not list (an op's own "
                               "finding by the op's entry; one of the whole module only by "
                               "a program entry, program: '*')"), "expectations")
    ck.add_argument("--timeout", type=_Seconds(MAX_TIMEOUT), default=120.0, metavar="SECONDS",
                    help="seconds an isolated backend may take per compile or run")
    ck.add_argument("--no-minimize", action="store_true",
                    help="save no reproducer of a diverging module")
    ck_iso = ck.add_mutually_exclusive_group()
    ck_iso.add_argument("--isolate", dest="isolate", action="store_true", default=None,
                        help="run every backend in a child process (default: those that "
                             "ask for it: xla, interpreter, vendor classes)")
    ck_iso.add_argument("--no-isolate", dest="isolate", action="store_false")

    sp = sub.add_parser("specs", help="work with the spec files")
    sp_sub = sp.add_subparsers(dest="specs_command", required=True, parser_class=_Parser)
    v = sp_sub.add_parser("validate", help="validate spec files (default: all shipped specs)")
    _kind(v.add_argument("files", nargs="*", metavar="FILE"), "spec_files")
    return p


# ---------------------------------------------------------------------------
# Checking inputs and outputs (before anything is written)
# ---------------------------------------------------------------------------

def output_dir(text: str, option: str) -> Path:
    """A folder that can be created or written: not a file, under a writable folder,
    and none of the files a run or report writes there is a folder."""
    if not text.strip():
        raise UsageError(f"{option}: empty path")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {text}: exists and is not a folder")
    if path.is_symlink() and not path.exists():
        raise UsageError(f"{option} {text}: a broken symbolic link")
    existing = path
    while not existing.exists() and not existing.is_symlink():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} {text}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {text}: {existing} is not writable")
    for name in OUTPUT_FILES + ("repros",):
        inner = path / name
        if name != "repros" and inner.is_dir():
            raise UsageError(f"{option} {text}: {inner} is a folder")
        if name == "repros" and inner.exists() and not inner.is_dir():
            raise UsageError(f"{option} {text}: {inner} is not a folder")
        if inner.exists() and not os.access(inner, os.W_OK):
            raise UsageError(f"{option} {text}: {inner} is not writable")
    return path


def results_command(results: Path) -> str | None:
    """The command that wrote a results file, from its header: ``run``, ``programs`` or
    ``merge`` (None: no such file, or its first line is no run header)."""
    try:
        with open(results, encoding="utf-8") as f:
            head = json.loads(f.readline())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(head, dict) or head.get("kind") != "run":
        return None
    if head.get("command") in ("programs", "check"):
        return head["command"]
    return "merge" if "merged_from" in head else "run"


def not_a_campaign(path: Path, option: str) -> None:
    """A fuzz campaign's folder is not the output folder of a run, a programs run, a merge
    or a report: their files would be mixed into the campaign (UsageError)."""
    if any((path / name).exists() for name in CAMPAIGN_FILES):
        raise UsageError(f"{option} {path}: a fuzz campaign's folder (campaign.json, "
                         f"corpus/); its files are not mixed with a run's: give another "
                         f"folder")


def not_a_results_folder(path: Path, option: str) -> None:
    """``fuzz --out``: a folder with the results or report of a run is not a campaign
    folder (the campaign would be mixed into it; UsageError)."""
    results = path / "results.jsonl"
    what = results_command(results)
    if what is not None:
        raise UsageError(f"{option} {path}: holds the results of `conformance {what}` "
                         f"({results}), not a fuzz campaign: give another folder")
    for name in OUTPUT_FILES + ("programs-summary.json",):
        if (path / name).exists():
            raise UsageError(f"{option} {path}: holds the results or report of a run "
                             f"({path / name}), not a fuzz campaign: give another folder")


def _results(text: str) -> list[dict[str, Any]]:
    """The records of a results file written by ``conformance run`` (UsageError, naming
    the file, for anything else: missing, a folder, binary, empty, not JSON lines, no
    run header)."""
    from conformance.core.results import ResultsFormatError, read_results
    path = Path(text)
    if not path.exists():
        raise UsageError(f"{text}: no such results file")
    if path.is_dir():
        raise UsageError(f"{text}: a folder, not a results file (give its results.jsonl)")
    try:
        records = list(read_results(path))
    except ResultsFormatError as e:      # FILE:LINE: what this version cannot read
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"{text}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{text}: not a results file (not UTF-8 text)") from None
    except (ValueError, RecursionError) as e:
        raise UsageError(f"{text}: not a results file: {e}") from None
    if not records:
        raise UsageError(f"{text}: empty: not a results file of `conformance run`")
    if not all(isinstance(r, dict) and isinstance(r.get("kind"), str) for r in records) \
            or records[0].get("kind") != "run":
        raise UsageError(f"{text}: not a results file of `conformance run` (no run header)")
    return records


def _expectations(text: str, option: str):
    from conformance.apps.expectations import ExpectationsError, load_expectations
    try:
        return load_expectations(text)
    except ExpectationsError as e:
        raise UsageError(f"{option}: {e}") from None


def _tolerances(text: str):
    from conformance.specs import SpecError
    from conformance.checking.tolerances import load_tolerances
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"--tolerances {text}: a folder, not a tolerance profile")
    try:
        return load_tolerances(text)
    except SpecError as e:
        raise UsageError(f"--tolerances: {' '.join(str(e).split())}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--tolerances {text}: not a text file (not UTF-8)") from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        raise UsageError(f"--tolerances {text}: not a tolerance profile: "
                         f"{' '.join(str(e).split())}") from None


def _backend_locators(text: str, option: str) -> list[str]:
    """Backend names or locators, each found (imported, not constructed: that may take
    a while, and a backend that runs in a child process is constructed there)."""
    from conformance.backends import BackendLoadError, resolve
    items = list_option(text, option, repeats=False) or []
    for b in items:
        if ":" in b and not b.startswith("pjrt:"):
            module, _, attr = b.partition(":")
            if not module or not attr or not all(part.isidentifier() for part in
                                                module.split(".") + [attr]):
                raise UsageError(f"{option}: {b!r} is not module:Class (e.g. "
                                 "mypkg.backend:MyBackend)")
        try:
            resolve(b)
        except BackendLoadError as e:
            raise UsageError(f"{option}: {e}") from None
    return items


def _cluster(text: str) -> str:
    """``--cluster``: ray, auto or ray://HOST:PORT, with ray installed."""
    t = text.strip()
    if t not in ("ray", "auto") and not (t.startswith("ray://") and len(t) > len("ray://")
                                         and " " not in t):
        raise UsageError(f"--cluster: expected ray, auto or ray://HOST:PORT, got {text!r}")
    import importlib.util
    if importlib.util.find_spec("ray") is None:
        raise UsageError(f"--cluster {t}: ray is not installed (pip install "
                         f"'stablehlo-conformance[ray]')")
    return t


def select_specs(ops, families, types) -> list:
    """The selected op specs; every name known, every element type allowed by one of
    them (UsageError naming the option)."""
    from conformance.core.types import UnknownElementType, element_type
    from conformance.specs import UnknownOp, all_specs, load_spec, resolve_op
    try:
        names = [resolve_op(o) for o in ops] if ops else None
        specs = [load_spec(n) for n in dict.fromkeys(names)] if names else list(all_specs())
    except UnknownOp as e:
        raise UsageError(f"--ops: {e}") from None
    if families:
        known = sorted({s.family for s in all_specs()})
        for f in families:
            if f not in known:
                raise UsageError(f"--family: unknown family {f!r}; known: {', '.join(known)}")
        specs = [s for s in specs if s.family in set(families)]
        if not specs:
            raise UsageError(f"--family: none of the --ops is in famil"
                             f"{'ies' if len(families) > 1 else 'y'} {', '.join(families)}")
    for t in types or []:
        try:
            name = element_type(t).name
        except UnknownElementType as e:
            raise UsageError(f"--types: {e}") from None
        if not any(name in b.values() for s in specs for b in s.type_bindings()):
            what = (", ".join(s.name for s in specs[:6]) + (" ..." if len(specs) > 6 else ""))
            raise UsageError(f"--types: no selected op allows {name} ({what}); see "
                             f"`conformance show OP` for the element types of an op")
    return specs


def _same_run_or_new(config, locators: list[str], results: Path, force: bool) -> None:
    """An output folder with the results of a run with other options is not overwritten
    without --force (or --resume, which continues only the same run)."""
    if force or not results.exists() or results.stat().st_size == 0:
        return
    from types import SimpleNamespace
    from conformance.apps.runner import ResumeError, load_resume
    stand_ins = [SimpleNamespace(locator=x, name=x) for x in locators]
    try:
        load_resume(config, stand_ins, results)
    except ResumeError as e:
        raise UsageError(f"--out {config.out}: holds the results of another run ({e}); "
                         f"use --force to overwrite them, another --out, or the same "
                         f"options") from None
    except (OSError, UnicodeDecodeError):
        raise UsageError(f"--out {config.out}: {results} cannot be read; use --force to "
                         f"overwrite it") from None


# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------

def _collectives_need_devices(ops: Sequence[str]) -> None:
    """jax in this process runs the collectives' process grids on host CPU devices
    (issue 18): where a collective is selected, ask XLA for them before jax starts."""
    from conformance.specs import UnknownOp, load_spec
    try:
        if any(load_spec(op).family == "collectives" for op in ops):
            from conformance.backends.jaxlib_support import ask_for_host_devices
            ask_for_host_devices()
    except UnknownOp:
        pass                    # (named in its own error later)


def cmd_run(args) -> int:
    from conformance import reports
    from conformance.backends import get_backend
    from conformance.apps.runner import RunConfig, run

    # 1. Option values (numbers are checked by the parser), lists and input files.
    backend_names = _backend_locators(args.backend, "--backend")
    ops = list_option(args.ops, "--ops")
    families = list_option(args.family, "--family")
    types = list_option(args.types, "--types")
    tolerances = _tolerances(args.tolerances) if args.tolerances is not None else None
    expectations = (_expectations(args.expectations, "--expectations")
                    if args.expectations is not None else None)
    specs = select_specs(ops, families, types)
    _collectives_need_devices([s.name for s in specs])
    if ops:
        from conformance.specs import resolve_op
        ops = list(dict.fromkeys(resolve_op(o) for o in ops))
    out = output_dir(args.out, "--out")
    config = RunConfig(backends=backend_names, ops=ops, families=families,
                       element_types=types, depth=args.depth, seed=args.seed, out=out,
                       max_repros=args.max_repros, tolerances=tolerances,
                       invalid=not args.no_invalid, examples=not args.no_examples,
                       probes=not getattr(args, "no_probes", False),
                       progress=not args.no_progress, isolate=args.isolate,
                       timeout=args.timeout, replay=not args.no_replay, shard=args.shard,
                       **({} if args.pack is None else {"pack": args.pack}))
    cluster = _cluster(args.cluster) if args.cluster is not None else None
    results = out / "results.jsonl"
    not_a_campaign(out, "--out")
    if not args.force and results_command(results) == "programs":
        raise UsageError(
            f"--resume: {results}: the results of `conformance programs`, not of `conformance "
            f"run`: continue them with `conformance programs --resume`" if args.resume else
            f"--out {args.out}: holds the results of `conformance programs` ({results}); use "
            f"--force to overwrite them, or another --out")
    if not args.resume:
        _same_run_or_new(config, backend_names, results, args.force)
    # 2. Backends (loading one may take a while: after every cheap check).
    backends = [get_backend(b) for b in backend_names]
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise UsageError(f"--backend: backend names must differ, got {names}")
    resume = None
    if args.resume:
        from conformance.apps.runner import ResumeError, load_resume
        try:
            resume = load_resume(config, backends, results)
        except ResumeError as e:
            raise UsageError(f"--resume: {e}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--resume: {results}: cannot read: {e}") from None
        if resume is not None:
            print(f"resuming {results}: {len(resume.done)} op(s) done", file=sys.stderr)
    # 3. Only now is anything written.
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {args.out}: cannot create the folder: {e.strerror}") from None
    bar = None
    if config.progress:
        from tqdm import tqdm
        bar = tqdm(total=len(specs), unit="op", dynamic_ncols=True, disable=None,
                   initial=len(resume.done) if resume else 0)
    done: set[str] = set()
    from conformance.apps.heartbeat import Heartbeat, ResultsTally
    tally = ResultsTally(results, len(specs))      # a line now and then, in a log

    def progress(label: str) -> None:
        tally.now = None if label.endswith(" done") else label
        if bar is None:
            return
        op = label.split(" ", 1)[0]
        if op not in done:
            if done:
                bar.update(1)
            done.add(op)
        bar.set_postfix_str(label[:40], refresh=False)

    executor = None
    try:
        if cluster is not None or args.jobs > 1:
            from conformance.apps.executors import ProcessExecutor, executor_for
            executor = (executor_for(cluster, args.jobs) if cluster is not None
                        else ProcessExecutor(args.jobs))
        with Heartbeat("conformance run", tally.line, enabled=config.progress):
            summary = run(config, backends, results, progress, jobs=args.jobs, resume=resume,
                          executor=executor)
    finally:
        if executor is not None:
            executor.close()
        if bar is not None:
            bar.update(bar.total - bar.n)
            bar.close()
    replay_diverging = _print_replays(summary.get("replays", []))
    from conformance.checking.stage_clock import stage
    with stage("report"):
        index = reports.render(results, out, expectations=expectations)
    records = _results(str(results))
    _print_totals(records, names, summary.get("elapsed"))
    print(f"results: {results}\nreport:  {index}")
    code = _gate(records, expectations, args.fail_on_stale, verbose=expectations is not None)
    if code == EXIT_OK and expectations is None and replay_diverging:
        code = EXIT_DIVERGENCES
    return code


#: Signature outcomes that are a backend's failure rather than a judged case.
FAILURE_OUTCOMES = ("backend_error", "crash", "timeout", "internal_error")


def _print_totals(records: Sequence[dict], names: Sequence[str], elapsed) -> None:
    """``checked N cases on B in T s: pass ..., value ...`` (valid cases), then the
    signatures a backend failed (compile errors, crashes, hangs), the invalid programs
    and spec examples, from the results records.

    One unit per line, the same as summary.json's: a case is one case judged on one
    backend (N is ``totals.cases``); a backend failure is one signature record (it is in
    ``totals.diverging_signatures``), however many cases it cost."""
    cases: dict[str, int] = {}
    failed: dict[str, int] = {}
    invalid: dict[str, int] = {}
    examples: dict[str, int] = {}
    for r in records:
        kind = r.get("kind")
        if kind == "signature":
            for cls, n in (r.get("counts") or {}).items():
                cases[cls] = cases.get(cls, 0) + int(n)
            if r.get("outcome") in FAILURE_OUTCOMES:
                failed[r["outcome"]] = failed.get(r["outcome"], 0) + 1
        elif kind == "invalid" and r.get("outcome") not in ("not_generated", None):
            invalid[r["outcome"]] = invalid.get(r["outcome"], 0) + 1
        elif kind == "example":
            examples[str(r.get("outcome"))] = examples.get(str(r.get("outcome")), 0) + 1

    def text(counts: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
    took = f" in {elapsed:.1f} s" if isinstance(elapsed, (int, float)) else ""
    print(f"checked {sum(cases.values())} cases on {', '.join(names)}{took}: {text(cases)}")
    if failed:
        print(f"signatures a backend failed: {text(failed)}")
    if invalid or examples:
        print(f"invalid programs: {text(invalid)}; spec examples: {text(examples)}")


def _print_replays(replays) -> int:
    """One line per replayed reproducer that still diverges, and a total; returns how
    many still diverge."""
    if not replays:
        return 0
    still = [r for r in replays if r["class"] not in ("pass", "unsupported")]
    for r in still:
        print(f"REPLAY      {r['backend']}: {r['case_id']} {r['class']} "
              f"(saved as {r['class_before']} on {r['found_on']}: {r['repro']})")
    fixed = sum(1 for r in replays if r["class"] == "pass" and r.get("same_backend"))
    print(f"replayed {len(replays)} saved case run(s) first: {len(still)} still diverge, "
          f"{fixed} fixed (pass on the backend that diverged)")
    return len(still)


def cmd_repro(args) -> int:
    from conformance.apps.replay import CaseIdError, repro
    from conformance.checking.plan import CaseId
    try:
        cid = CaseId.parse(args.case_id)
    except CaseIdError as e:
        raise UsageError(str(e)) from None
    _collectives_need_devices([cid.op])
    _backend_locators(args.backend, "--backend")
    save = output_dir(args.save, "--save") if args.save is not None else None
    try:
        return repro(args.case_id, args.backend, save=save, isolate=args.isolate,
                     timeout=args.timeout)
    except CaseIdError as e:
        raise UsageError(str(e)) from None


def _gate(records: Sequence[dict], expectations, fail_on_stale: bool,
          verbose: bool = True, entries: bool = False, strict: bool = False) -> int:
    """The exit code of a run or check: 1 on divergences the expectations do not list
    (every divergence when there are none), on stale entries with fail_on_stale, on
    broad entries and entries of a broad class without looks_like with
    strict (and on reasons whose figures the records refute:
    conformance.apps.reason_claims); 3 when there is no divergence but the suite recorded
    internal errors. It counts what the report, summary.json and junit.xml count
    (conformance.apps.expectations.gate over the same records). ``entries``: a line per
    entry saying what it matched, and the narrow entries a broad one should be."""
    from conformance.apps import reason_claims
    from conformance.apps.expectations import audit, gate, without_looks_like
    g = gate(records, expectations)
    audits = audit(g, expectations) if expectations is not None else []
    broad = [a for a in audits if a.is_broad]
    partly = [a for a in audits if a.unused]
    # entries of a broad class that do not say what their divergence looks like
    unshaped = without_looks_like(expectations) if entries and expectations is not None \
        else []
    # what the reasons of the entries say of their divergences, against the records
    refuted = (reason_claims.check_static(expectations) + reason_claims.check(g, expectations)
               if entries and expectations is not None else [])

    def where(item):
        return item["rule"] or item["element_type"]
    if entries:
        for a in audits:
            e = a.entry
            print(f"ENTRY       expectations[{e.index}] {e.op} {e.where} {e.cls}: {a.summary()}")
            for line in a.broad:
                print(f"  BROAD     {line}")
            if a.unused:
                print(f"  UNUSED    listed but matched nothing, though the run exercised them: "
                      f"{', '.join(a.unused)}")
            if a.suggestion:
                print(f"  SUGGEST   replace it with {len(a.suggestion)} narrow entr"
                      f"{'y' if len(a.suggestion) == 1 else 'ies'} (with its reason"
                      f"{' and link' if e.link else ''}; `conformance expectations update` "
                      "writes them):")
                for s in a.suggestion:
                    print(f"            - {s.flow()}")
        for e in unshaped:
            print(f"LOOKS_LIKE  expectations[{e.index}] {e.op} {e.where} {e.cls}: broad class "
                  "without looks_like (it waives any other bug of its op, type and class; "
                  "say error_at_most, nonfinite or failing)")
        for line in refuted:
            print(f"CLAIM       {line}")
    if verbose:
        for item in g.unexpected:
            print(f"UNEXPECTED  {item['backend']}: {item['op']} {where(item)} {item['class']} "
                  f"({item['cases']} cases)")
        for e in g.stale:
            print(f"STALE       {expectations.path}: expectations[{e.index}] {e.op} "
                  f"{e.where} {e.cls}: matched nothing in this run")
    if expectations is not None:
        print(f"gate: {len(g.unexpected)} unexpected, {len(g.expected)} expected, "
              f"{len(g.stale)} stale, {len(g.not_exercised)} not exercised by this run; "
              f"{len(broad)} broad entr{'y' if len(broad) == 1 else 'ies'}"
              + (f"; {len(unshaped)} without looks_like; {len(refuted)} reason claim(s) "
                 "the records refute" if entries else "")
              + ("" if entries or not broad else
                 " (`conformance expectations check RESULTS FILE` shows them)"))
    else:
        by_class: dict[str, int] = {}
        for item in g.unexpected:
            by_class[item["class"]] = by_class.get(item["class"], 0) + 1
        print(f"divergences: {len(g.unexpected)} (backend, op, element type or rule, class)"
              + (": " + ", ".join(f"{k} {v}" for k, v in sorted(by_class.items()))
                 if by_class else ""))
    if g.unexpected or (fail_on_stale and (g.stale or partly)) \
            or (strict and (broad or unshaped or refuted)):
        return EXIT_DIVERGENCES
    internal = sum(1 for r in records if r.get("kind") == "internal_error")
    if internal:
        print(f"internal errors of the suite: {internal} (see the report)", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_OK


def cmd_expectations(args) -> int:
    from conformance.apps.expectations import DEFAULT_HEADER, dump, is_shipped_name, update
    records = _results(args.results)
    if args.expectations_command == "check" and records[0].get("command") == "programs":
        from conformance.apps.programs import check_results
        return check_results(records, _expectations(args.expectations, "expectations"),
                             args.fail_on_stale)
    if args.expectations_command == "check":
        return _gate(records, _expectations(args.expectations, "expectations"),
                     args.fail_on_stale, entries=True, strict=args.strict)
    more = [_results(text) for text in args.more_results or []]
    text = args.expectations
    if not text.strip() or is_shipped_name(text):
        raise UsageError(f"expectations file {text!r}: give the path of the file to write, "
                         f"e.g. ./{text or 'mine'}.yaml (shipped files are read-only)")
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"{text}: a folder, not an expectations file")
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK | os.X_OK) \
            or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{text}: cannot be written (no such folder, or not writable)")
    backends = sorted({str(b.get("name")) for rs in [records, *more] for r in rs
                       if r.get("kind") == "run"
                       for b in r.get("backends") or [] if isinstance(b, dict)})
    if args.backend is not None and args.backend not in backends:
        raise UsageError(f"--backend: {args.backend!r} is not a backend of this run "
                         f"({', '.join(backends) or 'none'})")
    old = _expectations(text, "expectations") if path.exists() else None
    if records[0].get("command") == "programs":
        from conformance.apps.expectations import program_update
        entries = program_update([r for rs in [records, *more] for r in rs], old,
                                 args.backend)
    else:
        entries = update([r for rs in [records, *more] for r in rs], old, args.backend)
    path.write_text(dump(entries, args.backend or (old.backend if old else None),
                         header=old.header if old and old.header else DEFAULT_HEADER))
    todo = sum(1 for e in entries if e.reason.startswith("TODO"))
    wide = sum(1 for e in entries if not e.is_narrow())
    print(f"{path}: {len(entries)} expectation(s) ({len(old.entries) if old else 0} before), "
          f"{todo} with a TODO reason to fill in"
          + (f", {wide} broad one(s) kept: the run did not exercise them" if wide else ""))
    return EXIT_OK


def cmd_fuzz(args) -> int:
    """``conformance fuzz``: see conformance.apps.fuzz. The exit code is the gate of the
    campaign's whole corpus (:func:`_corpus_gate`), not of this session's findings: a
    campaign resumed after a crash fails as the uninterrupted one does; with no
    divergence to fail it, a campaign any of whose draws failed with a suite error (the
    unit raised, or the runner recorded an internal error) exits 3, as ``run`` does."""
    from conformance.backends import get_backend
    from conformance.apps.fuzz import CampaignConfig, main_loop, parse_duration, summary_lines
    from conformance.apps.heartbeat import Heartbeat, campaign_status
    backend_names = _backend_locators(args.backend, "--backend")
    duration = None
    if args.duration is not None:
        try:
            duration = parse_duration(args.duration)
        except ValueError as e:
            raise UsageError(f"--for: {e}") from None
    if duration is None and args.cases is None and args.draws is None:
        raise UsageError("--for: give --for DURATION, --cases N or --draws N")
    ops = list_option(args.ops, "--ops")
    families = list_option(args.family, "--family")
    types = list_option(args.types, "--types")
    tolerances = _tolerances(args.tolerances) if args.tolerances is not None else None
    expectations = (_expectations(args.expectations, "--expectations")
                    if args.expectations is not None else None)
    specs = select_specs(ops, families, types)
    _collectives_need_devices([s.name for s in specs])
    out = output_dir(args.out, "--out")
    not_a_results_folder(out, "--out")
    config = CampaignConfig(backends=backend_names, ops=[s.name for s in specs],
                            element_types=types, depth=args.depth, seed=args.seed, out=out,
                            duration=duration, cases=args.cases, max_repros=args.max_repros,
                            tolerances=tolerances, isolate=args.isolate, timeout=args.timeout,
                            invalid=not args.no_invalid, fresh=args.fresh, draws=args.draws,
                            **({} if args.pack is None else {"pack": args.pack}))
    cluster = _cluster(args.cluster) if args.cluster is not None else None
    backends = [get_backend(b) for b in backend_names]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {args.out}: cannot create the folder: {e.strerror}") from None
    executor = None
    try:
        if cluster is not None or args.jobs > 1:
            from conformance.apps.executors import ProcessExecutor, executor_for
            executor = (executor_for(cluster, args.jobs) if cluster is not None
                        else ProcessExecutor(args.jobs))
        with Heartbeat("conformance fuzz", lambda: campaign_status(out / "campaign.json")):
            result = main_loop(config, backends, executor=executor)
    finally:
        if executor is not None:
            executor.close()
    for line in summary_lines(result, out):
        print(line)
    code = _corpus_gate(result["entries"], expectations, backends)
    failed = int(result.get("failed_total") or 0)
    if code == EXIT_OK and failed:      # as run: suite errors and no divergence is never 0
        print(f"internal errors of the suite: {failed} draw(s) of the campaign failed (see "
              f"\"failed\" in {out / 'log.jsonl'})", file=sys.stderr)
        return EXIT_INTERNAL
    return code


def _corpus_gate(entries: Sequence[dict], expectations, backends) -> int:
    """The exit code of a campaign, as a run's is of its results file: 1 when its whole
    corpus (what every session in the folder found, this one or not) holds a divergence
    the expectations do not list (without expectations: any), else 0."""
    from conformance.apps.expectations import corpus_gate
    info = {b.name: b.describe() for b in backends} if expectations is not None else {}
    g = corpus_gate(entries, expectations, info)
    for item in g.unexpected:
        n = item["cases"]
        print(f"UNEXPECTED  {item['backend']}: {item['op']} "
              f"{item['rule'] or item['element_type']} {item['class']} "
              f"({n} corpus entr{'y' if n == 1 else 'ies'})")
    if expectations is not None:
        unused = len(g.not_exercised)
        print(f"gate (the whole corpus): {len(g.unexpected)} unexpected, {len(g.expected)} "
              f"expected; {unused} entr{'y' if unused == 1 else 'ies'} of "
              f"{expectations.path} matched nothing in the corpus")
    else:
        by_class: dict[str, int] = {}
        for item in g.unexpected:
            by_class[item["class"]] = by_class.get(item["class"], 0) + 1
        print(f"gate (the whole corpus): {len(g.unexpected)} unexpected (backend, op, element "
              f"type or rule, class)"
              + (": " + ", ".join(f"{k} {v}" for k, v in sorted(by_class.items()))
                 if by_class else "") + "; no --expectations: every divergence counts")
    return EXIT_DIVERGENCES if g.unexpected else EXIT_OK


def cmd_merge(args) -> int:
    """``conformance merge``: see conformance.apps.merge."""
    from conformance import reports
    from conformance.apps.merge import MergeError, merge_files
    out = output_dir(args.out, "merge out")
    not_a_campaign(out, "merge out")
    paths = [Path(t) for t in args.results]
    records = [_results(t) for t in args.results]            # each one checked first
    del records
    if len({p.resolve() for p in paths}) != len(paths):
        raise UsageError("merge results: a results file given twice")
    target = out / "results.jsonl"
    if target.exists() and not args.force \
            and not any(target.resolve() == p.resolve() for p in paths):
        raise UsageError(f"merge out {args.out}: holds results already ({target}); use --force to "
                         f"replace them, or another folder")
    expectations = (_expectations(args.expectations, "--expectations")
                    if args.expectations is not None else None)
    try:
        merged = merge_files(paths, out)
    except MergeError as e:
        raise UsageError(f"merge results: {e}") from None
    for key, first, other in merged.conflicts:
        print(f"CONFLICT    {' '.join(str(k) for k in key)}: {other} differs from {first} "
              f"(kept {first}'s)")
    print(f"merged {len(paths)} results file(s): {len(merged.records) - 2} records, "
          f"{merged.duplicates} duplicate(s) dropped, {len(merged.conflicts)} conflict(s), "
          f"{merged.unfinished} record(s) of unfinished units left out")
    index = reports.render(target, out, expectations=expectations)
    records = _results(str(target))
    names = [str(b.get("name")) for b in records[0].get("backends") or []
             if isinstance(b, dict)]
    _print_totals(records, names, None)
    print(f"results: {target}\nreport:  {index}")
    code = _gate(records, expectations, False, verbose=expectations is not None)
    return EXIT_DIVERGENCES if code == EXIT_OK and merged.conflicts else code


def cmd_report(args) -> int:
    from conformance import reports
    _results(args.results)
    results = Path(args.results)
    out = output_dir(args.out, "--out") if args.out is not None else results.parent
    if args.out is not None:
        not_a_campaign(out, "--out")
    other = out / "results.jsonl"
    if other.exists() and not os.path.samefile(other, results):
        raise UsageError(f"--out {args.out}: holds the results of another run ({other}); "
                         "its report is not replaced: render into another folder")
    expectations = (_expectations(args.expectations, "--expectations")
                    if args.expectations is not None else None)
    print(reports.render(results, out, expectations=expectations))
    return EXIT_OK


def cmd_list(args) -> int:
    from conformance.specs import all_specs
    if args.what == "ops":
        for s in all_specs():
            print(f"{s.name:24} {s.family:15} {s.spec_version:18} {s.summary}")
    elif args.what == "families":
        fams: dict[str, list[str]] = {}
        for s in all_specs():
            fams.setdefault(s.family, []).append(s.name)
        for f, ops in sorted(fams.items()):
            print(f"{f:15} {', '.join(ops)}")
    elif args.what == "types":
        from conformance.core.types import NEWER_FLOAT_TYPES, SPEC_ELEMENT_TYPES
        for t in SPEC_ELEMENT_TYPES:      # docs/float-formats.md: which depth draws which
            drawn = "  (newer: all ops at default depth, a rotation at quick)" \
                if t.name in NEWER_FLOAT_TYPES else ""
            print(f"{t.name:14} {t.kind:9} {t.bits:4} bits  numpy: {t.dtype.name}{drawn}")
        # the quantized families (!quant.uniform, conformance/core/types.py ("Quantized element types")): the
        # columns of the ops that take quantized tensors; values are storage integers
        from conformance.core.types import FAMILY_LIST
        for f in FAMILY_LIST:
            how = "per axis" if f.per_axis else "per tensor"
            print(f"{f.name:20} quantized {f.bits:4} bits  numpy: {f.dtype.name}  "
                  f"!quant.uniform<{f.storage.mlir.replace('ui', 'u')}:{f.expressed.mlir}"
                  f"{':D' if f.per_axis else ''}, ...> ({how})")
    else:
        from conformance.backends import available
        print("\n".join(available()))
    return EXIT_OK


def cmd_show(args) -> int:
    from conformance.generators import breakable, unbreakable
    from conformance.specs import binding_key, load_spec, resolve_op
    s = load_spec(resolve_op(args.op))
    w = textwrap.TextWrapper(width=96, initial_indent="    ", subsequent_indent="    ")
    print(f"{s.name}  ({s.family}; XLA: {', '.join(s.xla_names) or '-'})")
    print(f"  spec: {s.data['spec_section']}  (text: {s.spec_version})")
    for ch in s.spec_changes:
        print(w.fill(f"follows the newer text in {ch['rule']}: was {ch['was']} now {ch['now']}"))
    print(w.fill(s.summary))
    print("  semantics:")
    for k, v in s.data["semantics"].items():
        print(w.fill(f"{k}: {v}"))
    print("  inputs:")
    for t in s.inputs:
        how = (f"type {t.type}" if t.type else
               f"element type {t.element_type}, shape {' | '.join(t.shape)}")
        print(f"    {t.label or '':4} {t.name}: {t.type_text}  [{how}]")
    for a in s.attributes:
        vals = ", ".join(map(str, a.values)) if a.values else f"range {a.range}"
        if a.kind == "tensor":
            vals = f"element type {a.element_type}, shape {a.shape}"
        print(f"    {a.label or '':4} {a.name}: {a.kind} ({vals})")
    print("  outputs:")
    for t in s.outputs:
        how = f"type {t.type}" if t.type else f"element type {t.element_type}"
        print(f"         {t.name}: {t.type_text}  [{how}]")
    print("  constraints:")
    for c in s.constraints:
        print(w.fill(f"{c.id}: {c.text}"))
        print(f"          check: {c.check}")
    bindings = [binding_key(b) for b in s.type_bindings()]
    print(f"  element types ({len(bindings)}): {', '.join(bindings[:40])}"
          + (" ..." if len(bindings) > 40 else ""))
    print("  accuracy: " + ", ".join(f"{k}: {v}" for k, v in s.data["accuracy"].items()))
    for d in s.implementation_defined:
        print(w.fill(f"implementation-defined {d.id}: {d.text}  [when {d.when}]"))
    print(f"  invalid cases: breaks {', '.join(breakable(s)) or '-'}; not breakable alone: "
          + (", ".join(f"{k} ({v})" for k, v in unbreakable(s.name).items()) or "-"))
    print(f"  examples: {len(s.examples)}")
    return EXIT_OK


def cmd_specs(args) -> int:
    from conformance.specs import SpecError, validate_all
    errors: list[str] = []
    for f in args.files:
        path = Path(f)
        if not path.is_file():
            raise UsageError(f"{f}: {'a folder, not a' if path.is_dir() else 'no such'} "
                             f"spec file")
    for f in args.files or [None]:
        try:
            errors += validate_all([f] if f is not None else None)
        except UnicodeDecodeError:
            errors.append(f"{f}: not a spec file (not UTF-8 text)")
        except SpecError as e:
            errors.append(str(e))
        except Exception as e:  # noqa: BLE001 - a malformed file must not be a traceback
            errors.append(f"{f}: not a valid spec file: {type(e).__name__}: {e}")
    for e in errors:
        print(" ".join(str(e).split()), file=sys.stderr)
    if not errors:
        from conformance.specs import op_names
        n = len(args.files) if args.files else len(op_names())
        print(f"{n} spec file(s) valid")
    return EXIT_USAGE if errors else EXIT_OK


def cmd_programs(args) -> int:
    """``conformance programs``: see conformance.apps.programs. Every option is checked
    before anything is written."""
    from conformance.checking.compare import CASE_OUTCOMES
    from conformance.apps.programs import run
    _backend_locators(args.backend, "--backend")
    ops = list_option(args.ops, "--ops")
    types = list_option(args.types, "--types")
    if ops or types:
        select_specs(ops, None, types)
    accept = list_option(args.accept, "--accept") or []
    unknown = [c for c in accept or [] if c not in CASE_OUTCOMES or c == "pass"]
    if unknown:
        raise UsageError(f"--accept: unknown divergence class {unknown[0]!r}; known: "
                         f"{', '.join(c for c in CASE_OUTCOMES if c != 'pass')}")
    out = output_dir(args.out, "--out")
    not_a_campaign(out, "--out")
    args.expectations_loaded = None
    if args.expectations is not None:
        args.expectations_loaded = _expectations(args.expectations, "--expectations")
    if not args.resume and not args.force:
        _same_programs_or_new(args, out / "results.jsonl")
    if args.resume:
        from conformance.apps.programs import ResumeError, header, load_resume
        from conformance.backends import get_backend
        try:
            load_resume(Path(args.out) / "results.jsonl",
                        header(args, [get_backend(b) for b in _csv_items(args.backend)]))
        except ResumeError as e:
            raise UsageError(str(e)) from None
    return run(args)


def _same_programs_or_new(args, results: Path) -> None:
    """An output folder with the results of another run (a `run`'s, a merge's, a programs
    run with other options) is not overwritten without --force (UsageError)."""
    if not results.exists() or results.stat().st_size == 0:
        return
    what = results_command(results)
    if what != "programs":
        owner = f"`conformance {what}`" if what else "another command (no run header)"
        raise UsageError(f"--out {args.out}: holds the results of {owner} ({results}); use "
                         f"--force to overwrite them, or another --out")
    from types import SimpleNamespace
    from conformance.core.results import ResultsFormatError
    from conformance.apps.programs import ResumeError, header, load_resume
    stand_ins = [SimpleNamespace(locator=x, name=x, describe=dict)
                 for x in _csv_items(args.backend)]
    try:
        load_resume(results, header(args, stand_ins))
    except ResumeError as e:
        raise UsageError(f"--out {args.out}: holds the results of another programs run ({e}); "
                         f"use --force to overwrite them, another --out, or the same "
                         f"options") from None
    except (ResultsFormatError, OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--out {args.out}: {results} cannot be read ({e}); use --force to "
                         f"overwrite it") from None


def _csv_items(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


COMMANDS = {"run": cmd_run, "report": cmd_report, "list": cmd_list, "show": cmd_show,
            "specs": cmd_specs, "expectations": cmd_expectations, "repro": cmd_repro,
            "fuzz": cmd_fuzz, "merge": cmd_merge}

COMMANDS["programs"] = cmd_programs


def cmd_check(args) -> int:
    """``conformance check``: see conformance.apps.check. The options, every module file
    and the inputs file are checked before anything is written."""
    from conformance.checking.compare import CASE_OUTCOMES
    from conformance.apps.check import CheckError, module_paths, read_modules, run
    from conformance.mlir.reader import ReadError
    args.backend_list = _backend_locators(args.backend, "--backend")
    accept = list_option(args.accept, "--accept") or []
    unknown = [c for c in accept if c not in CASE_OUTCOMES or c == "pass"]
    if unknown:
        raise UsageError(f"--accept: unknown divergence class {unknown[0]!r}; known: "
                         f"{', '.join(c for c in CASE_OUTCOMES if c != 'pass')}")
    args.accept_list = accept
    args.expectations_loaded = None
    if args.expectations is not None:
        args.expectations_loaded = _expectations(args.expectations, "--expectations")
    if args.inputs is not None and not Path(args.inputs).is_file():
        raise UsageError(f"--inputs {args.inputs}: no such file")
    out = output_dir(args.out, "--out")
    not_a_campaign(out, "--out")
    results = out / "results.jsonl"
    if not args.force and results.exists() and results.stat().st_size:
        what = results_command(results)
        if what != "check":
            owner = f"`conformance {what}`" if what else "another command (no run header)"
            raise UsageError(f"--out {args.out}: holds the results of {owner} ({results}); "
                             f"use --force to overwrite them, or another --out")
    if not args.modules and not args.corpus:
        raise UsageError("give MODULE paths (files, folders, globs) or --corpus NAME")
    try:
        paths = module_paths(args.modules)
        args.reads = read_modules(paths)
        corpus = None
        if args.corpus:     # exported aside first: nothing is written before every check
            from conformance.apps.check import read_corpus
            corpus = read_corpus(args.corpus, out / "corpus")
            args.reads += corpus.reads
        if args.inputs is not None:
            from conformance.apps.check import inputs_for
            for r in args.reads:
                inputs_for(r.program, args.seed, "", 1, Path(args.inputs))
        args.kept = {}
        if not args.force and results.exists() and results.stat().st_size:
            from conformance.apps.check import DEPTH_BATCH, header, load_resume
            kept = load_resume(results, header(args, args.batch or DEPTH_BATCH[args.depth]))
            args.kept = kept if args.resume else {}
    except ReadError as e:
        raise UsageError(str(e)) from None
    except CheckError as e:
        text = str(e)
        if text.startswith("--resume:") and not args.resume:   # another check's folder
            text = f"--out {args.out}: holds the results of another check" + \
                text[len("--resume: "):].split(" holds another run", 1)[-1]
        raise UsageError(text) from None
    if corpus is not None:
        corpus.keep()
    return run(args)


COMMANDS["check"] = cmd_check


def main(argv: Sequence[str] | None = None) -> int:
    from conformance.backends import BackendLoadError
    from conformance.apps.expectations import ExpectationsError
    from conformance.specs import SpecError, UnknownOp
    from conformance.core.results import ResultsFormatError
    from conformance.core.types import UnknownElementType

    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:          # --help, or a usage error already printed in one line
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    try:
        return COMMANDS[args.command](args)
    except (UsageError, UnknownOp, UnknownElementType, BackendLoadError, SpecError,
            ExpectationsError, ResultsFormatError) as e:
        print(f"conformance: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("conformance: interrupted; the results written so far are kept", file=sys.stderr)
        return 130
    except OSError as e:             # the disk filled up, a folder vanished, ...
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"conformance: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # noqa: BLE001 - report our own bugs in one line, then the trace
        import traceback
        traceback.print_exc()
        print(f"conformance: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
