"""The N-way report (reports/nway.py, issue 22): with four or more backends, per op a
table of who disagrees with whom, the odd one out, and oracle suspects flagged."""
import os
import subprocess
import sys
from pathlib import Path

from conformance.reports.aggregate import CrossCell, OpData
from conformance.reports.nway import nway, odd_one_out, render
from test_counting import OffByOne, Oracle  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
FOUR = ["a", "b", "c", "d"]


def cell(disagree: dict[str, int], compared: dict[str, int] | None = None) -> CrossCell:
    pairs = [f"{x}~{y}" for i, x in enumerate(FOUR) for y in FOUR[i + 1:]]
    c = CrossCell()
    c.add({"backends": FOUR, "cases": 10, "disagreements": disagree,
           "compared": compared if compared is not None else {p: 10 for p in pairs}})
    return c


def test_odd_one_out_and_camps():
    assert odd_one_out(cell({"a~d": 3, "b~d": 3, "c~d": 2})) == "d"
    assert odd_one_out(cell({"a~c": 3, "a~d": 3, "b~c": 3, "b~d": 3})) is None   # two camps
    assert odd_one_out(cell({})) is None
    # d compared with a and b only (c declined): still the odd one out of those compared
    assert odd_one_out(cell({"a~d": 1, "b~d": 1},
                            {"a~b": 5, "a~d": 5, "b~d": 5})) == "d"


def test_table_counts_only_compared_pairs():
    op = OpData("add")
    op.cross["si32"] = cell({"a~d": 3}, {"a~b": 5, "a~d": 5, "b~d": 5, "a~c": 2})
    t = nway(op, FOUR)
    assert t.cell("a", "d") == (3, 5) and t.cell("d", "a") == (3, 5)
    assert t.cell("c", "d") is None and t.peers_disagreeing("a") == 1
    html = render(op, FOUR)
    assert 'data-pair="a~d"' in html and ">3 / 5<" in html and "odd one out" not in html
    two = OpData("add")
    two.cross["si32"] = cell({}, {"a~b": 4})
    assert render(two, FOUR) == ""                     # fewer than three compared


class OracleToo(Oracle):
    name = "oracle-too"


class OracleThree(Oracle):
    name = "oracle-three"


def test_four_backend_run_shows_the_table(tmp_path):
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    names = ["tests.test_counting:Oracle", "tests.test_nway_report:OracleToo",
             "tests.test_nway_report:OracleThree", "tests.test_counting:OffByOne"]
    p = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend",
                        ",".join(names), "--ops", "add", "--types", "si32", "--depth", "quick",
                        "--no-isolate", "--out", str(out), "--no-progress"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert p.returncode in (0, 1), p.stderr
    page = (out / "ops" / "add.html").read_text()
    assert 'id="nway-table"' in page
    assert f"<strong>{OffByOne.name}</strong> is the odd one out" in page
    assert 'data-pair="oracle~oracle-too"' in page
