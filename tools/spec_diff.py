"""Compare each op's section of two texts of the StableHLO specification (issue 30).

The suite's op specs follow the seed text (shared/seeds/003_5ae4585f266cf299.txt);
the specification has moved on (shared/spec/stablehlo-spec-2026-08.md). This tool
extracts every op's "### op" section of both texts, compares its Constraints list item
by item (labels (C1)..(Cn) dropped, markdown and math notation normalised, so that a
renumbered or reflowed rule counts as unchanged) and its Inputs/Outputs "Type"
columns, and writes a markdown report. Items the normalisation cannot pair exactly are
paired by similarity and quoted old and new; an item, or a type column, that only the
newer text has and that speaks of quantization is counted as admitting quantized
types. Whether a reworded rule changed in substance is a reader's judgement: it is
recorded in ``spec_diff_notes.yaml`` (op -> note) and printed with the op.

Deterministic: the output depends only on the two texts and the notes file.

    python tools/spec_diff.py SEED.txt CURRENT.md [--out docs/spec-diff-003-vs-2026-08.md]
"""
from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTES = Path(__file__).with_name("spec_diff_notes.yaml")
SPEC_DIR = ROOT / "specs" / "ops"
HEADING = re.compile(r"^### ([a-z_0-9]+)\s*$")
LABEL = re.compile(r"^\(C(\d+)\)\s*")
#: words that mark a rule or a type column as being about quantized types
QUANT = re.compile(r"quantiz|storage_type|expressed_type|zero_point|scales?\(|"
                   r"storage_m(in|ax)|baseline_(element_)?type", re.I)
#: words that mark a rule or type column as being about the newer element types
NEW_TYPES = re.compile(r"f4E2M1FN|f6E2M3FN|f6E3M2FN|f8E3M4\b|f8E4M3\b|FNUZ|f8E8M0FNU|"
                       r"TensorFloat32|FloatType", re.I)
#: the condition the newer text puts before the rules of non-quantized tensors: those
#: rules are the seed's, so the condition is not part of them for the comparison
NON_QUANT = re.compile(r"If the operation uses non-quantized tensors:?\s*$")
#: math and markup of the older text and the spelling of the newer one
_MATH = [(r"\$\\le\$", "<="), (r"\$\\lt\$", "<"), (r"\$\\ge\$", ">="), (r"\$\\gt\$", ">"),
         (r"\$=\$", "="), (r"\$\\ne\$", "!="), (r"\$\\in\$", "in"), (r"\$\\notin\$", "not in"),
         (r"\$\\cdot\$", "*"), (r"\$\\times\$", "*"), (r"\$([^$]*)\$", r"\1")]


def ops_sections(text: str) -> dict[str, str]:
    """The "### op" sections of the text's "## Ops" chapter: op name -> section text."""
    sections: dict[str, list[str]] = {}
    in_ops, current = False, None
    for line in text.splitlines():
        if line.startswith("## "):
            in_ops, current = line.strip() == "## Ops", None
            continue
        if not in_ops:
            continue
        m = HEADING.match(line)
        if m:
            current = m.group(1)
            sections[current] = []
        elif line.startswith("### "):
            current = None
        elif current is not None:
            sections[current].append(line)
    return {k: "\n".join(v) for k, v in sections.items()}


def subsection(section: str, name: str) -> str:
    """The text under "#### name" up to the next "####" heading."""
    m = re.search(rf"^#### {name}\s*$(.*?)(?=^#### |\Z)", section, re.M | re.S)
    return m.group(1) if m else ""


def _prose_to_formula(t: str) -> str:
    """The seed's prose "a, b and c have the same type" as the newer text writes it
    ("type(a) = type(b) = type(c)"); likewise element type and shape. baseline_type is
    the newer text's type of a tensor whose quantization is set aside: on the tensors the
    seed has, it is type."""
    m = re.match(r"^(?:all tensors in )?([\w\[\]]+(?:, [\w\[\]]+)*,? and [\w\[\]]+) "
                 r"have the same (type|element type|shape)\.?$", t.strip(), re.I)
    if m:
        names = re.split(r",? and |, ", m.group(1))
        fn = m.group(2).replace(" ", "_")
        t = " = ".join(f"{fn}({n})" for n in names)
    return re.sub(r"baseline_(element_)?type\(", lambda x: (x.group(1) or "") + "type(", t)


def normalise(text: str) -> str:
    """One rule's text, compared modulo markup, math notation, whitespace and case."""
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)    # links -> their text
    for pat, rep in _MATH:
        t = re.sub(pat, rep, t)
    t = t.replace("`", "").replace("*", " * ").replace("\\", "")
    t = _prose_to_formula(t)
    t = re.sub(r"\s+", " ", t).strip().rstrip(".").strip()
    return t.lower()


def constraints(section: str) -> list[tuple[str, str]]:
    """The (label, text) of every "(Cn)" item of the Constraints list, nested items too.

    A condition item without a label ("* If the operation uses quantized tensors:") is
    prefixed to the items under it, so that "under what condition" counts as part of
    the rule."""
    items: list[tuple[str, str, int]] = []     # (label, text, indent)
    conds: list[tuple[int, str]] = []
    current: list | None = None
    for line in subsection(section, "Constraints").splitlines():
        m = re.match(r"^(\s*)\* (.*)$", line)
        if m:
            indent, body = len(m.group(1)), m.group(2)
            conds = [c for c in conds if c[0] < indent]
            lab = LABEL.match(body)
            if not lab and current is not None and indent > current[2]:
                current[1] += " * " + body        # a sub-item of the rule: part of it
                continue
            if lab:
                prefix = " ".join(c[1] for c in conds if not NON_QUANT.match(c[1]))
                current = [f"C{lab.group(1)}", (prefix + " " if prefix else "")
                           + body[lab.end():], indent]
                items.append(current)
            else:
                conds.append((indent, body))
                current = None
        elif line.strip() and current is not None:
            current[1] += " " + line.strip()
        elif line.strip() and conds:
            conds[-1] = (conds[-1][0], conds[-1][1] + " " + line.strip())
    return [(lab, re.sub(r"\s+", " ", txt).strip()) for lab, txt, _ in items]


def type_columns(section: str) -> dict[str, str]:
    """Inputs/Outputs table rows: the value's name -> its Type column."""
    out: dict[str, str] = {}
    for part in ("Inputs", "Outputs"):
        rows = [r for r in subsection(section, part).splitlines() if r.startswith("|")]
        if len(rows) < 2:
            continue
        head = [c.strip().lower() for c in rows[0].strip("|").split("|")]
        if "name" not in head or "type" not in head:
            continue
        for r in rows[2:]:
            cells = [c.strip() for c in r.strip().strip("|").split("|")]
            if len(cells) == len(head):
                out[cells[head.index("name")].strip("`")] = cells[head.index("type")]
    return out


def compare_op(old: str, new: str) -> dict:
    """The changes of one op's section: pairs of rules, added and removed ones, types."""
    oc, nc = constraints(old), constraints(new)
    on = {normalise(t): (lab, t) for lab, t in oc}
    nn = {normalise(t): (lab, t) for lab, t in nc}
    same = [k for k in on if k in nn]
    gone = [k for k in on if k not in nn]
    added = [k for k in nn if k not in on]
    pairs = []
    ratios = sorted(((-difflib.SequenceMatcher(None, g, a).ratio(), on[g][0] != nn[a][0], i, j)
                     for i, g in enumerate(gone) for j, a in enumerate(added)))
    used_old, used_new = set(), set()
    for r, _, i, j in ratios:          # best pairs first; equal labels win ties
        if -r < 0.4 or i in used_old or j in used_new:
            continue
        used_old.add(i)
        used_new.add(j)
        pairs.append((on[gone[i]], nn[added[j]]))
    for i, g in enumerate(gone):       # then a rule of the same label, if still unpaired
        j = next((j for j, a in enumerate(added) if j not in used_new
                  and nn[a][0] == on[g][0] and not _about(nn[a][1])), None)
        if i not in used_old and j is not None:
            used_old.add(i)
            used_new.add(j)
            pairs.append((on[g], nn[added[j]]))
    pairs.sort(key=lambda p: int(p[0][0][1:]))
    gone = [g for i, g in enumerate(gone) if i not in used_old]
    added = [a for j, a in enumerate(added) if j not in used_new]
    ot, nt = type_columns(old), type_columns(new)
    types = [(name, ot.get(name), nt.get(name)) for name in list(ot) + [n for n in nt if n not in ot]
             if ot.get(name) != nt.get(name)]
    return {"same": len(same), "pairs": pairs, "removed": [on[k] for k in gone],
            "added": [nn[k] for k in added], "types": types}


def _about(text: str | None) -> str | None:
    if text and QUANT.search(text):
        return "quantized"
    if text and NEW_TYPES.search(text):
        return "new types"
    return None


def classify(d: dict) -> str:
    """unchanged | reworded (every rule paired) | changed (a rule without a partner).

    "admits quantized"/"admits new types" is added where the only rules or type columns
    the newer text adds speak of them."""
    if not (d["pairs"] or d["removed"] or d["added"] or d["types"]):
        return "unchanged"
    extra = [_about(t) for _, t in d["added"]] + [
        _about(n) if not _about(o) else None for _, o, n in d["types"]]
    kinds = sorted({k for k in extra if k})
    plain_types = [x for x in d["types"] if not (_about(x[2]) and not _about(x[1]))]
    if d["removed"] or not all(extra) or plain_types:
        verdict = "changed"
    elif d["pairs"]:
        verdict = "reworded"
    else:
        verdict = "unchanged rules"
    return verdict + ("; admits " + " and ".join(kinds) if kinds else "")


def spec_files() -> dict[str, str]:
    """op name -> the spec_section of its spec file (specs/ops/*.yaml)."""
    out = {}
    for p in sorted(SPEC_DIR.glob("*.yaml")):
        for line in p.read_text().splitlines():
            if line.startswith("spec_section:"):
                out[p.stem] = line.split(":", 1)[1].strip()
                break
    return out


def report(seed: str, current: str, seed_name: str, current_name: str,
           notes: dict[str, str]) -> str:
    old, new = ops_sections(seed), ops_sections(current)
    files = spec_files()
    seed_file = seed_name
    ours = sorted(op for op, sec in files.items()
                  if sec.startswith(seed_file + ",") and HEADING.match(
                      "### " + sec.split('"### ', 1)[-1].rstrip('"')))
    lines = [f"# Spec diff: {seed_name} vs {current_name}", "",
             "Generated by `tools/spec_diff.py` (do not edit by hand; the notes come from "
             "`tools/spec_diff_notes.yaml`). For every op whose spec file follows a "
             f"\"### op\" section of {seed_name}, the section's Constraints are compared item "
             "by item (labels dropped, markup, math notation, whitespace and case normalised, "
             "so that a renumbered rule counts as unchanged) and its Inputs/Outputs Type "
             "columns cell by cell. A rule or type column only the newer text has that speaks "
             "of quantization (or of the newer float types) counts as admitting them; the "
             "rest is quoted, old and new, with a reader's note on whether the rule changed "
             "in substance.", ""]
    rows, details = [], []
    counts: dict[str, int] = {}
    for op in ours:
        heading = files[op].split('"### ', 1)[1].rstrip('"')
        if heading not in new:
            rows.append((op, "missing in the newer text"))
            continue
        d = compare_op(old[heading], new[heading])
        verdict = classify(d)
        counts[verdict] = counts.get(verdict, 0) + 1
        note = notes.get(op)
        rows.append((op, verdict + (f": {note}" if note else "")))
        if verdict == "unchanged":
            continue
        details += [f"### {op}", "", f"{verdict}; {d['same']} rule(s) unchanged.", ""]
        if note:
            details += [f"Reader's note: {note}", ""]
        for (ol, ot), (nl, nt) in d["pairs"]:
            details += [f"- reworded {ol} -> {nl}" + (f" ({_about(nt)})" if _about(nt) else ""),
                        f"  - was: {ot}", f"  - now: {nt}"]
        for lab, t in d["removed"]:
            details.append(f"- removed {lab}: {t}")
        for lab, t in d["added"]:
            details.append(f"- added {lab}" + (f" ({_about(t)})" if _about(t) else "") + f": {t}")
        for name, ot, nt in d["types"]:
            details.append(f"- type of `{name}`" + (f" ({_about(nt)})" if _about(nt) else "")
                           + f": {ot or '(absent)'} -> {nt or '(absent)'}")
        details.append("")
    lines += ["## Summary", "",
              "unchanged: every rule and type column the same; unchanged rules: only rules or "
              "types that admit quantized (or newer float) types added; reworded: every seed "
              "rule paired with a newer one of other words; changed: some rule or type column "
              "without a partner. A reader's note says where the change is in substance.", ""]
    lines += [f"- {k}: {v} op(s)" for k, v in sorted(counts.items())]
    substance = [(op, n) for op, n in sorted(notes.items()) if "SUBSTANCE" in n]
    lines += ["", "## Rules changed in substance (outside quantized types, batching dimensions, "
              "dot_general's algorithm and variadic collectives)", ""]
    lines += [f"- {op}: {n}" for op, n in substance] or ["- none"]
    lines += ["", "| op | verdict |", "| --- | --- |"]
    lines += [f"| {op} | {v} |" for op, v in rows]
    by_name = {op for op in files}
    new_ops = [op for op in new if op not in old]
    lines += ["", f"## Op headings of {current_name} that {seed_name} lacks", ""]
    for op in new_ops:
        has = ("no spec file" if op not in by_name else
               f"spec file from this text: {files[op]}" if files[op].startswith(current_name)
               else f"spec file from another source: {files[op]}")
        lines.append(f"- {op}: {has}")
    missing = [op for op in old if op not in new]
    lines += ["", f"## Op headings of {seed_name} missing in {current_name}", ""]
    lines += [f"- {op}" for op in missing] or ["- none"]
    lines += ["", "## Changed ops", ""] + details
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seed")
    ap.add_argument("current")
    ap.add_argument("--out", help="write here instead of standard output")
    a = ap.parse_args(argv)
    notes = yaml.safe_load(NOTES.read_text()) if NOTES.exists() else {}
    text = report(Path(a.seed).read_text(), Path(a.current).read_text(),
                  Path(a.seed).name, Path(a.current).name, notes or {})
    if a.out:
        Path(a.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
