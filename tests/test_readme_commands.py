"""The README's first steps (issue 31, item 10): its command lines, from "The two commands"
to the end of "Using it" (the case ids included), are what a new user copies, in order,
into a shell on a fresh clone. They must run as written.

Always on (a fraction of a second): the lines are read from the README as a shell reads
them, and checked for what made them fail before: a virtual environment is made first;
pytest is run from that environment after the ``test`` extra installed it; every
``conformance`` line parses with the CLI's own parser; every run writes a folder of its
own (``--out``: only ``--force`` or ``--resume`` reuses one); every file a line reads
exists or is written by an earlier line; no placeholder (``[...]``, ``A|B``) is left.
Over the whole README and docs/, every ``conformance`` line names a real sub-command and
real options of it, and every ``*.md`` file named is in the repository.

Slow (``CONFORMANCE_README_COMMANDS=1``: a fresh venv, pip from the package index or
pip's cache, the default run and the "Using it" runs; the default run alone took 24 min
and the quick run 13 min on the project's 2 cores shared at load 5 to 9): the lines run, in order, in one bash process (so that the venv's activation
holds for the lines after it), in a copy of the working tree, with nothing of this
environment (PATH without this venv, no PYTHONPATH or VIRTUAL_ENV). The one line that
runs the test suite is given ``--collect-only -q`` (it must find pytest, xdist and the
plugin in the new venv and collect every test; running the whole suite from inside the
suite would run this test again; ``.ci/run`` runs that line as written), unless
``CONFORMANCE_README_COMMANDS=all``.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.apps import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIRST = "## The two commands"
AFTER = "### Programs of several ops"
SLOW = os.environ.get("CONFORMANCE_README_COMMANDS")
SHIPPED = ("jax-cpu", "xla-cpu", "iree-cpu")
NETWORK_ERRORS = ("Could not find a version", "NewConnectionError", "Temporary failure in "
                  "name resolution", "No matching distribution", "Network is unreachable")


def command_lines(text: str) -> list[str]:
    """The indented (4-space) command lines of a markdown text, outside fenced blocks;
    lines that are only a comment (a previous line's comment going on) are left out."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("    ") and line.strip() \
                and not line.strip().startswith("#"):
            lines.append(line.strip())
    return lines


def first_steps() -> list[str]:
    text = README.read_text()
    return command_lines(text[text.index(FIRST):text.index(AFTER)])


def words(line: str) -> list[str]:
    """A line's words as the shell reads them, its comment left out."""
    return shlex.split(line, comments=True)


def commands(line: str) -> list[list[str]]:
    """The simple commands of a line (split at ``&&``)."""
    out, cur = [], []
    for w in words(line):
        if w == "&&":
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    return out + [cur]


def option(argv: list[str], name: str) -> str | None:
    for i, w in enumerate(argv):
        if w == name and i + 1 < len(argv):
            return argv[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def parse(argv: list[str]):
    """``conformance ARGS`` parsed by the CLI's parser (an AssertionError with its one
    line when it refuses)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return cli._parser().parse_args(argv)
    except SystemExit:
        raise AssertionError(f"conformance {shlex.join(argv)}: {err.getvalue().strip()}")


# ---------------------------------------------------------------------------------------
# Always on
# ---------------------------------------------------------------------------------------

def test_the_first_steps_are_found():
    steps = first_steps()
    assert len(steps) >= 15, steps
    assert any(c[:2] == ["conformance", "run"] and len(c) == 2
               for line in steps for c in commands(line)), "the default run"


def test_a_virtual_environment_comes_first():
    steps = first_steps()
    first = commands(steps[0])
    assert first[0][1:3] == ["-m", "venv"] and first[1][:2] == [".", ".venv/bin/activate"], \
        steps[0]
    assert all(not line.startswith(("conformance", "python -m pip", "pip"))
               for line in steps[:1])


def test_pytest_is_the_venv_s_and_installed_by_the_test_extra():
    seen_test_extra = False
    for line in first_steps():
        for c in commands(line):
            if c[:4] == ["python", "-m", "pip", "install"] and any(
                    re.fullmatch(r"\.\[(.*,)?test(,.*)?\]", w) for w in c):
                seen_test_extra = True
            if "pytest" in c[:3]:
                assert c[:3] == ["python", "-m", "pytest"], \
                    f"{line}: run the venv's pytest (python -m pytest)"
                assert seen_test_extra, f"{line}: pytest before the test extra installs it"
    assert seen_test_extra


def test_no_placeholders_are_left():
    for line in first_steps():
        for w in words(line):
            assert not re.search(r"^\[|\||\.\.\.", w), f"{line}: placeholder {w!r}"


def test_every_conformance_line_parses():
    for line in first_steps():
        for c in commands(line):
            if c and c[0] == "conformance":
                parse(c[1:])


def test_every_run_writes_a_folder_of_its_own():
    outs: list[str] = []
    for line in first_steps():
        for c in commands(line):
            if c[:2] != ["conformance", "run"]:
                continue
            out = option(c, "--out") or "conformance-report"
            if "--force" in c or "--resume" in c:
                assert out in outs, f"{line}: --force/--resume of a folder no line wrote"
            else:
                assert out not in outs, f"{line}: --out {out} holds an earlier run's results"
                outs.append(out)


def test_every_file_read_exists_or_is_written_earlier():
    written: set[str] = set()
    for line in first_steps():
        for c in commands(line):
            if ">" in c:
                written.add(c[c.index(">") + 1])
            if not c or c[0] != "conformance":
                continue
            args = parse(c[1:])
            read = []
            if args.command == "run":
                read += [v for v in (args.tolerances, args.expectations)
                         if v is not None and v not in SHIPPED]
            elif args.command == "report":
                read.append(args.results)
            for path in read:
                assert path in written or (ROOT / path).exists(), \
                    f"{line}: {path} is neither in the repository nor written before"
            if args.command == "run":
                out = args.out
                written |= {f"{out}/results.jsonl", f"{out}/index.html", out}


def _options_of(parser) -> dict[str, set[str]]:
    import argparse
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = {}
    for name, sub in subs.choices.items():
        opts = {o for a in sub._actions for o in a.option_strings}
        nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        for n in nested:
            for sname, ssub in n.choices.items():
                found[f"{name} {sname}"] = opts | {o for a in ssub._actions
                                                   for o in a.option_strings}
        found[name] = opts
    return found


@pytest.mark.parametrize("doc", ["README.md", "docs/vendor-guide.md", "docs/scale.md",
                                 "bench/README.md"])
def test_every_conformance_line_names_real_options(doc):
    known = _options_of(cli._parser())
    text = (ROOT / doc).read_text()
    checked = 0
    for line in command_lines(text):
        for c in commands(line.replace("[", " ").replace("]", " ")):
            if not c or c[0] != "conformance" or len(c) < 2:
                continue
            sub = f"{c[1]} {c[2]}" if len(c) > 2 and f"{c[1]} {c[2]}" in known else c[1]
            assert sub in known, f"{doc}: {line}: no sub-command {c[1]!r}"
            for w in c[2:]:
                if w.startswith("--"):
                    name = w.split("=", 1)[0]
                    assert name in known[sub], f"{doc}: {line}: {sub} has no option {name}"
            checked += 1
    assert checked or doc != "README.md"


def test_every_markdown_file_named_is_in_the_repository():
    for doc in ["README.md", "docs/vendor-guide.md", "docs/scale.md", "bench/README.md"]:
        for name in re.findall(r"[A-Za-z0-9_./-]+\.md\b", (ROOT / doc).read_text()):
            where = [ROOT / name, (ROOT / doc).parent / name]
            assert any(p.is_file() for p in where), f"{doc} names {name}: not in the repository"


# ---------------------------------------------------------------------------------------
# Slow: the lines run, in order, in a fresh venv
# ---------------------------------------------------------------------------------------

def _clone(dest: Path) -> Path:
    """A copy of the working tree's files (tracked, and untracked ones git does not
    ignore), as a fresh clone has them."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f, follow_symlinks=False)
    return dest


def _script(steps: list[str], full: bool) -> str:
    out = []                                 # (bash runs in the clone: cwd)
    for i, line in enumerate(steps):
        if not full and re.search(r"python -m pytest -n 2\s*$", line.split("#")[0].rstrip()):
            line = line.split("#")[0].rstrip() + " --collect-only -q"
        out += [f"echo '@@@ {i} start'", line, f"echo \"@@@ {i} rc $?\""]
    return "\n".join(out) + "\n"


@pytest.mark.skipif(not SLOW, reason="slow (a fresh venv and the README's runs: 15-40 min); "
                                     "CONFORMANCE_README_COMMANDS=1 runs it")
def test_the_first_steps_run_as_written_in_a_fresh_venv(tmp_path):
    steps = first_steps()
    clone = _clone(tmp_path / "clone")
    script = clone.parent / "first-steps.sh"
    script.write_text(_script(steps, SLOW == "all"))
    bindir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CONFORMANCE_README_COMMANDS",
                        "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p != bindir)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    log = clone.parent / "first-steps.log"
    with open(log, "w") as fh:
        p = subprocess.run(["bash", str(script)], cwd=clone, stdout=fh,
                           stderr=subprocess.STDOUT, env=env, timeout=3 * 3600)
    text = log.read_text()
    if any(e in text for e in NETWORK_ERRORS) and ".venv/bin/conformance" not in text:
        pytest.skip(f"pip needs the package index: {text[-300:]}")
    rcs = {int(i): int(rc) for i, rc in re.findall(r"^@@@ (\d+) rc (\d+)$", text, re.M)}
    assert p.returncode == 0 and len(rcs) == len(steps), text[-3000:]
    for i, line in enumerate(steps):
        part = text.split(f"@@@ {i} start\n", 1)[1].split(f"@@@ {i} rc", 1)[0]
        c = commands(line)[-1]
        runs_suite = c[:2] in (["conformance", "run"], ["conformance", "repro"])
        allowed = (0, 1) if runs_suite and "--expectations" not in c else (0,)
        assert rcs[i] in allowed, f"line {i}: {line}: exit {rcs[i]}\n{part[-3000:]}"
        assert "Traceback" not in part and "internal error" not in part, \
            f"line {i}: {line}\n{part[-3000:]}"
        if c[:2] == ["conformance", "run"]:
            out = option(c, "--out") or "conformance-report"
            assert (clone / out / "index.html").is_file(), f"line {i}: {line}: no report"
    print(f"{len(steps)} lines, exit codes {[rcs[i] for i in range(len(steps))]}; log: {log}")
