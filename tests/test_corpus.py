"""The corpus of real models (issue 29; conformance/apps/corpus.py) checked on jax and xla
at quick depth and gated by the shipped expectations, as CI runs it.

CI checks one float type of each model (``CI_MODELS``: both types among them), not all
twelve: every model in both types takes about twice as long (each op of a model is
compiled alone by each backend). The whole corpus is checked by hand:

    conformance check --corpus models --backend jax,xla --depth quick --out /tmp/corpus
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conformance.apps import cli
from conformance.core.results import read_results

pytest.importorskip("jax")

#: (model, float type) checked in CI
CI_MODELS = [("mlp", "f32"), ("cnn", "bf16"), ("transformer", "f32"), ("rnn", "f32"),
             ("ranking", "f32"), ("embedding", "bf16")]

#: what the reader cannot judge in the corpus, per model: nothing (jax's top_k, a
#: composite named chlo.top_k that composite's spec does not list, is read as its
#: decomposition; the rnn's while is judged inside, trip by trip)
NOT_JUDGED: dict[str, list[str]] = {}


def _shipped(name: str):
    from conformance.apps.expectations import load_expectations
    return load_expectations(name)


def test_the_corpus_on_jax_and_xla_is_read_judged_and_passes_the_shipped_expectations(
        tmp_path, capsys):
    from conformance.apps.corpus import export_model
    from conformance.apps.expectations import module_gate
    folder = tmp_path / "corpus"
    folder.mkdir()
    files = [export_model(m, t, folder) for m, t in CI_MODELS]
    out = tmp_path / "out"
    code = cli.main(["check", str(folder), "--backend", "jax,xla", "--depth", "quick",
                     "--seed", "0", "--out", str(out), "--no-minimize"])
    captured = capsys.readouterr()
    text = captured.out
    assert code in (0, 1), text[-3000:] + captured.err[-3000:]
    records = list(read_results(out / "results.jsonl"))
    modules = [r for r in records if r.get("kind") == "module"]
    # every model read and checked on both backends
    assert sorted((r["id"], r["backend"]) for r in modules) == sorted(
        (str(f), b) for f in files for b in ("jax", "xla"))
    for r in modules:
        name = Path(r["id"]).name.split("-")[0]
        # check 1 judged ops in every model, and the reader named only what it cannot judge
        assert r["judged_ops"] > 0, r["id"]
        assert [u["op"] for u in r["unjudged"]] == NOT_JUDGED.get(name, []), r["unjudged"]
        assert r["outcome"] not in ("crash", "timeout", "backend_error", "type"), \
            (r["id"], r["backend"], r["message"])
    for backend, shipped in (("jax", "jax-cpu"), ("xla", "xla-cpu")):
        mine = [r for r in records if r.get("kind") != "module" or r["backend"] == backend]
        gate = module_gate(mine, _shipped(shipped))
        assert not gate.unexpected, [
            (i["op"], i["element_type"], i["class"], i["fusion"], i["ids"])
            for i in gate.unexpected]


def test_corpus_models_exports_into_out_and_combines_with_module_paths(
        tmp_path, capsys, monkeypatch):
    """``--corpus models`` (cut to one small model here) with a MODULE path: both
    checked; the exported files kept under DIR/corpus/."""
    from conformance.apps import corpus
    monkeypatch.setitem(corpus.CORPORA, "models", ("ranking",))
    module = Path(__file__).parents[1] / "examples" / "modules" / "mlp.mlir"
    out = tmp_path / "out"
    code = cli.main(["check", str(module), "--corpus", "models", "--backend",
                     "planted_programs:OracleProgram", "--depth", "quick", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text[-3000:]
    assert sorted(p.name for p in (out / "corpus").iterdir()) == [
        "ranking-bf16.mlirbc", "ranking-f32.mlirbc"]
    ids = [r["id"] for r in read_results(out / "results.jsonl") if r.get("kind") == "module"]
    assert ids == [str(module), str(out / "corpus" / "ranking-f32.mlirbc"),
                   str(out / "corpus" / "ranking-bf16.mlirbc")]
    assert "not judged" not in text          # top_k read as its decomposition


def test_an_unknown_corpus_or_nothing_to_check_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["check", "--corpus", "nosuch", "--out", str(out)]) == 2
    assert cli.main(["check", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--corpus" in err[0] and "nosuch" in err[0]
    assert "MODULE" in err[1] and "--corpus" in err[1]
    assert not out.exists()


#: (model, float type) checked on IREE: what its findings are in, in about 20 s
IREE_MODELS = [("ranking", "f32"), ("embedding", "f32")]


def test_the_corpus_on_iree_finds_its_crashes_judges_past_them_and_passes_the_shipped_file(
        tmp_path, capsys):
    """IREE (the ``iree`` extra): the embedding's gather and scatter crash (IREE neither
    clamps gather's start indices nor skips out-of-bounds scatter updates), the ops
    between them are still judged, and the shipped iree-cpu file waives what it finds."""
    pytest.importorskip("iree.compiler")
    pytest.importorskip("iree.runtime")
    from conformance.apps.corpus import export_model
    from conformance.apps.expectations import module_gate
    folder = tmp_path / "corpus"
    folder.mkdir()
    for m, t in IREE_MODELS:
        export_model(m, t, folder)
    out = tmp_path / "out"
    code = cli.main(["check", str(folder), "--backend", "iree", "--depth", "quick",
                     "--seed", "0", "--out", str(out), "--no-minimize"])
    assert code == 1, capsys.readouterr().out[-3000:]
    records = list(read_results(out / "results.jsonl"))
    modules = {Path(r["id"]).name: r for r in records if r.get("kind") == "module"}
    emb = modules["embedding-f32.mlirbc"]
    crashed = [f["op"] for f in emb["op_by_op"] if f["cls"] == "crash"]
    assert crashed == ["gather", "scatter"], emb["op_by_op"]
    assert emb["judged_ops"] == emb["ops"] - 2          # every op but the two crashes
    gate = module_gate(records, _shipped("iree-cpu"))
    assert not gate.unexpected, [(i["op"], i["element_type"], i["class"])
                                 for i in gate.unexpected]
