"""Every op spec says which text of the specification it follows (issue 30).

spec_version sits on the line right after spec_section (so that edits of other lines
merge cleanly); it names the spec_section's own text unless the op follows the newer
StableHLO text somewhere, and then its spec_changes list those rules. The comparison of
the two StableHLO texts, docs/spec-diff-003-vs-2026-08.md, is what tools/spec_diff.py
writes; that is checked where the two texts are at hand (../shared, or the folder
$CONFORMANCE_SHARED names): a fresh clone may not have them.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

from conformance.apps.cli import main
from conformance.specs import all_specs

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "specs" / "ops"
SEED = "003_5ae4585f266cf299.txt"
CURRENT = "stablehlo-spec-2026-08.md"
DOC = ROOT / "docs" / "spec-diff-003-vs-2026-08.md"


def _spec_diff():
    spec = importlib.util.spec_from_file_location("spec_diff", ROOT / "tools" / "spec_diff.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_spec_has_its_version_right_after_spec_section():
    for path in sorted(SPEC_DIR.glob("*.yaml")):
        op, lines = path.stem, path.read_text().splitlines()
        i = next(i for i, line in enumerate(lines) if line.startswith("spec_section:"))
        assert lines[i + 1].startswith("spec_version: "), f"{op}.yaml: no spec_version after spec_section"
        assert sum(line.startswith("spec_version:") for line in lines) == 1, op


def test_the_version_is_the_spec_sections_text_unless_rules_changed():
    newer = []
    for spec in all_specs():
        op, data = spec.name, spec.data
        section, version = data["spec_section"], data["spec_version"]
        changes = data.get("spec_changes")
        if section.startswith(SEED + ","):
            if changes:
                assert version == "stablehlo-2026-08", f"{op}: spec_changes but {version}"
                newer.append(op)
            else:
                assert version == "stablehlo-003-seed", f"{op}: {version} without spec_changes"
        elif section.startswith(CURRENT + ","):     # an op (or form) only the newer text has
            assert version == "stablehlo-2026-08", f"{op}: {version}"
        else:                         # XLA's own ops: the XLA text their section names
            assert version == f"xla-{section[:3]}" and not changes, f"{op}: {version}"
    assert sorted(newer) == ["all_gather", "all_reduce", "all_to_all", "dot_general", "gather",
                             "reduce", "reduce_scatter", "reduce_window", "scatter",
                             "select_and_scatter", "transpose"]


def test_the_loaded_spec_carries_version_and_changes():
    specs = {s.name: s for s in all_specs()}
    assert specs["add"].spec_version == "stablehlo-003-seed" and specs["add"].spec_changes == ()
    assert specs["tan"].spec_version == "xla-001"
    a2a = specs["all_to_all"]
    assert a2a.spec_version == "stablehlo-2026-08"
    assert [c["rule"].split()[0] for c in a2a.spec_changes] == ["C9", "C8", "I1,"]
    c9 = next(c for c in a2a.constraints if c.id == "C9")
    assert "split_dimension != concat_dimension" in c9.text
    assert "dim(replica_groups, 1) = split_count" in next(
        c for c in a2a.constraints if c.id == "C8").text
    dg = specs["dot_general"]
    assert dg.spec_version == "stablehlo-2026-08"
    assert {"C21", "C22", "C23", "C24"} <= {c.id for c in dg.constraints}
    # the newer text's recv rule is not followed: the dialect's verifier keeps the seed's
    assert specs["recv"].spec_version == "stablehlo-003-seed"


def test_list_and_show_print_the_version(capsys):
    assert main(["list", "ops"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("all_to_all "))
    assert "stablehlo-2026-08" in line
    assert main(["show", "all_to_all"]) == 0
    out = capsys.readouterr().out
    assert "(text: stablehlo-2026-08)" in out and "follows the newer text in C9" in out


SEED_ADD = """## Ops

### add

#### Inputs

| Label | Name  | Type   | Constraints |
|-------|-------|--------|-------------|
| (I1)  | `lhs` | tensor | (C1)        |

#### Constraints

* (C1) `lhs` and `result` have the same type.
* (C2) rank(`lhs`) $\\ge$ 1.

### pad

#### Constraints

* (C1) 0 $\\le$ `interior_padding[i]` for all `i` values in `interior_padding`.

## Execution
"""


def _current(add_rule2: str, pad_rule: str, lhs_type: str = "tensor") -> str:
    return f"""## Ops

### add

#### Inputs

| Label | Name  | Type   | Constraints |
|-------|-------|--------|-------------|
| (I1)  | `lhs` | {lhs_type} | (C1)        |

#### Constraints

* If the operation uses non-quantized tensors:
  * (C1) `type(lhs) = type(result)`.
  * (C2) {add_rule2}
* If the operation uses quantized tensors:
  * (C3) `is_quantized(lhs)`.

### pad

#### Constraints

* (C1) {pad_rule}

### tan

## Notation
"""


def test_the_comparison_tells_rewording_quantized_and_changed_rules():
    sd = _spec_diff()
    old = sd.ops_sections(SEED_ADD)
    assert set(old) == {"add", "pad"}
    same = sd.ops_sections(_current("rank(`lhs`) $\\ge$ 1.",
                                    "0 $\\le$ `interior_padding[i]` for all `i` values in "
                                    "`interior_padding`.", "tensor or quantized tensor"))
    d = sd.compare_op(old["add"], same["add"])
    # C1's prose and the newer formula are one rule; only a quantized rule and type were added
    assert d["same"] == 2 and not d["pairs"] and not d["removed"]
    assert sd.classify(d) == "unchanged rules; admits quantized"
    assert sd.classify(sd.compare_op(old["pad"], same["pad"])) == "unchanged"
    # a rule that changed (rank >= 2), and one reworded (pad): both quoted, old and new
    moved = sd.ops_sections(_current("`2 <= rank(lhs)`.", "`0 <= interior_padding`."))
    d = sd.compare_op(old["add"], moved["add"])
    assert sd.classify(d) == "reworded; admits quantized"
    assert [(o[0], n[0]) for o, n in d["pairs"]] == [("C2", "C2")]
    d = sd.compare_op(old["add"], sd.ops_sections(_current("`lhs` is sorted.", "x"))["add"])
    assert d["pairs"] or d["removed"]


def _shared() -> Path | None:
    for base in (os.environ.get("CONFORMANCE_SHARED"), ROOT.parent / "shared"):
        if base and (Path(base) / "seeds" / SEED).exists() and (Path(base) / "spec" / CURRENT).exists():
            return Path(base)
    return None


def test_the_docs_file_is_what_the_tool_writes():
    shared = _shared()
    if shared is None:
        pytest.skip("the two spec texts are not here (../shared or $CONFORMANCE_SHARED): "
                    "a fresh clone checks only the YAML side")
    sd = _spec_diff()
    notes = yaml.safe_load(sd.NOTES.read_text())
    text = sd.report((shared / "seeds" / SEED).read_text(), (shared / "spec" / CURRENT).read_text(),
                     SEED, CURRENT, notes)
    assert DOC.read_text() == text, ("docs/spec-diff-003-vs-2026-08.md is stale: run "
                                     "python tools/spec_diff.py SEED CURRENT --out " + str(DOC))
    assert "| recv | changed" in text and "NOT followed" in text and "- tan: spec file from another source" in text
