"""`conformance check` (issue 29): a module read in is judged op by op on the backend's
own values (the first diverging op named by its location), as a whole against the
oracle and as a whole against its own ops; planted bugs fail, legal variants pass."""
import json

import numpy as np
import pytest

from conformance.apps import cli
from conformance.checking.modules import check_module
from conformance.core.results import read_results
from conformance.mlir.reader import read_file
from planted_programs import FusesMultiplyAdd, OracleProgram

MODULE = """func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<8xf32>
  %1 = stablehlo.add %0, %b : tensor<8xf32>
  %2 = stablehlo.exponential %1 : tensor<8xf32>
  %3 = stablehlo.tanh %2 : tensor<8xf32>
  func.return %3 : tensor<8xf32>
}
"""


class WrongExponential(OracleProgram):
    """exponential computed through float16: a real bug (thousands of ulps in f32)."""

    name = "wrong-exp"

    def compile(self, signature):
        right = super().compile(signature)
        if signature.op != "exponential":
            return right
        return lambda xs: [np.asarray(np.exp(np.asarray(xs[0], np.float16)), np.float32)]


class ExponentialOneUlpUp(OracleProgram):
    """exponential one ulp above the oracle: what the spec allows an exp without a
    correctly rounded guarantee (within its ulp bound)."""

    name = "exp-ulp"

    def compile(self, signature):
        right = super().compile(signature)
        if signature.op != "exponential":
            return right

        def run(xs):
            (y,) = right(xs)
            y = np.asarray(y)
            return [np.where(np.isfinite(y) & (y != 0), np.nextafter(y, np.float32(np.inf)),
                             y).astype(y.dtype)]
        return run


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "model.mlir"
    path.write_text(MODULE)
    return path


def _inputs(read, batch=4):
    rng = np.random.default_rng(0)
    return [rng.uniform(-2, 2, (batch, *t.shape)).astype(np.float32)
            for _, t in read.program.arguments]


def test_a_wrong_op_is_named_by_its_location_in_the_module(module):
    read = read_file(module)
    v = check_module(WrongExponential(), read, _inputs(read), 4)
    assert v.diverges and v.outcome == "accuracy"        # the ulp verdict's class
    assert v.first["op"] == "exponential" and v.first["check"] == "op_by_op"
    assert v.first["location"] == "model.mlir:4:8"
    assert "stablehlo.exponential" in v.first["text"]
    # the ops before it pass on their own; tanh, fed the wrong exp, is judged on those
    # values and passes: only the exponential is named
    assert {f.op for f in v.op_by_op} == {"exponential"}


def test_an_exponential_within_its_ulp_bound_passes(module):
    read = read_file(module)
    v = check_module(ExponentialOneUlpUp(), read, _inputs(read), 4)
    assert v.outcome == "pass", v.to_json()
    assert v.judged_ops == 4


FMA_MODULE = """func.func @main(%a: tensor<2xf32>, %c: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.multiply %a, %a : tensor<2xf32>
  %1 = stablehlo.add %0, %c : tensor<2xf32>
  func.return %1 : tensor<2xf32>
}
"""


def test_a_contraction_of_the_whole_module_is_found_where_each_op_alone_is_right(tmp_path):
    path = tmp_path / "fma.mlir"
    path.write_text(FMA_MODULE)
    read = read_file(path)
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 in f32; minus that, the
    # separate ops give 0 and one rounding gives 2^-24
    a = np.full((3, 2), np.float32(1 + 2 ** -12))
    c = np.full((3, 2), np.float32(-(1 + 2 ** -11)))
    v = check_module(FusesMultiplyAdd(), read, [a, c], 3)
    assert not v.op_by_op                     # every op alone is the oracle's
    assert v.diverges and v.whole["outcome"] == "value"
    assert v.first["op"] == "add" and v.first["check"] == "exact"
    assert v.first["location"] == "fma.mlir:3:8"
    assert check_module(OracleProgram(), read, [a, c], 3).outcome == "pass"


def test_the_right_backend_passes_every_check(module):
    read = read_file(module)
    v = check_module(OracleProgram(), read, _inputs(read), 4)
    assert v.outcome == "pass" and not v.op_by_op and v.whole["outcome"] == "pass"


# ---------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------

def test_the_command_exits_1_on_a_planted_bug_and_0_on_the_right_backend(module, tmp_path,
                                                                         capsys):
    out = tmp_path / "out"
    code = cli.main(["check", str(module), "--backend", "test_module_check:WrongExponential",
                     "--depth", "quick", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 1
    assert "first diverging op: exponential at model.mlir:4:8" in text
    records = list(read_results(out / "results.jsonl"))
    head, rec, end = records
    assert head["command"] == "check" and head["modules"] == [str(module)]
    # drawn special values: f16 overflows (value) where f32 does not, or is inexact
    assert rec["kind"] == "module" and rec["outcome"] in ("value", "accuracy")
    assert rec["ops"] == 4
    assert rec["first"]["location"] == "model.mlir:4:8" and rec["program"]["operations"]
    assert end["outcomes"] == {rec["outcome"]: 1}
    code = cli.main(["check", str(module), "--backend", "test_module_check:OracleProgram",
                     "--depth", "quick", "--out", str(out), "--force"])
    assert code == 0


def test_inputs_from_a_file_are_the_modules_arguments(module, tmp_path, capsys):
    npz = tmp_path / "args.npz"
    np.savez(npz, arg0=np.zeros(8, np.float32), arg1=np.ones(8, np.float32))
    out = tmp_path / "out"
    code = cli.main(["check", str(module), "--backend", "test_module_check:OracleProgram",
                     "--inputs", str(npz), "--out", str(out)])
    assert code == 0
    head = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert head["inputs"] == str(npz) and head["batch"] == 8


def test_a_folder_is_its_modules_and_another_commands_results_are_kept(module, tmp_path,
                                                                       capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.jsonl").write_text('{"kind": "run", "command": "programs"}\n')
    code = cli.main(["check", str(module.parent), "--backend",
                     "test_module_check:OracleProgram", "--out", str(other)])
    err = capsys.readouterr().err
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    assert (other / "results.jsonl").read_text().startswith('{"kind": "run", "command": "p')


def test_the_report_has_a_page_per_module_with_its_ops_and_the_first_diverging_op(
        module, tmp_path, capsys):
    import xml.etree.ElementTree as ET
    out = tmp_path / "out"
    cli.main(["check", str(module), "--backend",
              "test_module_check:WrongExponential,test_module_check:OracleProgram",
              "--depth", "quick", "--out", str(out)])
    index = (out / "index.html").read_text()
    assert 'id="modules-table"' in index and "model.mlir" in index
    (page,) = (out / "modules").glob("module-0-*.html")
    html = page.read_text()
    # its ops in order, each with its location; the exponential highlighted as the first
    assert html.index('id="op-v0"') < html.index('id="op-v1"') < html.index('id="op-v2"')
    assert 'id="op-v2" class="first-diverging"' in html and "model.mlir:4:8" in html
    assert 'id="first-wrong-exp"' in html and 'id="first-oracle-program"' not in html
    summary = json.loads((out / "summary.json").read_text())["modules"]
    assert summary["backends"]["oracle-program"]["diverging"] == 0
    assert summary["backends"]["wrong-exp"]["diverging"] == 1
    suites = {s.get("name"): s for s in ET.parse(out / "junit.xml").getroot()}
    assert suites["modules.wrong-exp"].get("failures") == "1"
    assert suites["modules.oracle-program"].get("failures") == "0"
    case = suites["modules.wrong-exp"].find("testcase")
    assert "first diverging op: exponential at model.mlir:4:8" in case.find("failure").text


def test_the_pytest_plugin_judges_a_folder_of_modules(module, tmp_path):
    """`pytest --pyargs conformance.apps.suite --conformance-modules=DIR`: a test per
    module, failing on the planted bug with the first diverging op's location."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    (module.parent / "other.mlir").write_text(MODULE.replace("exponential", "negate"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent),
                                         env.get("PYTHONPATH", "")])
    xml = tmp_path / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "conformance.apps.suite", "-k",
         "test_module", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--conformance-backend=test_module_check:WrongExponential",
         f"--conformance-modules={module.parent}", "--conformance-seed=0",
         "--conformance-no-isolate", f"--junitxml={xml}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-3000:]
    assert "1 failed, 1 passed" in out, out[-3000:]
    assert "test_module[model.mlir]" in out and "exponential at model.mlir:4:8" in out
    import xml.etree.ElementTree as ET
    props = [p for p in ET.parse(xml).getroot().iter("property")
             if p.get("name") == "conformance_module"]
    assert {json.loads(p.get("value"))["outcome"] for p in props} >= {"pass"}


LOOP = """func.func @main(%x: tensor<f32>, %n: tensor<i32>) -> tensor<f32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %0:3 = stablehlo.while(%i = %c0, %b = %n, %v = %x) : tensor<i32>, tensor<i32>, tensor<f32>
    cond {
      %lt = stablehlo.compare LT, %i, %b : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %j = stablehlo.add %i, %c1 : tensor<i32>
      %w = stablehlo.negate %v : tensor<f32>
      stablehlo.return %j, %b, %w : tensor<i32>, tensor<i32>, tensor<f32>
    }
  func.return %0#2 : tensor<f32>
}
"""


class NeverRun(OracleProgram):
    """Fails the test if the check runs anything on it."""

    name = "never-run"

    def compile(self, signature):
        raise AssertionError(f"the backend was run on {signature.op}")

    def compile_program(self, program):
        raise AssertionError("the backend was run on the whole module")


def test_a_loops_bound_is_drawn_small_and_a_loop_the_oracle_cannot_finish_is_unjudged(
        tmp_path, monkeypatch):
    from conformance.apps.check import inputs_for, loop_arguments
    path = tmp_path / "loop.mlir"
    path.write_text(LOOP)
    read = read_file(path)
    assert loop_arguments(read.program) == {"arg0", "arg1"}
    inputs, n = inputs_for(read.program, 0, "loop.mlir", 16, None)
    assert n == 16 and inputs[1].min() >= -2 and inputs[1].max() <= 12
    assert check_module(OracleProgram(), read, inputs, n).outcome == "pass"
    # a bound the loop does not reach in the oracle's most trips (100,000; 1,000 here,
    # to be quick): the oracle gives up first, and the backend is never run
    import conformance.oracles.control_flow as control_flow
    monkeypatch.setattr(control_flow, "MAX_TRIPS", 1000)
    endless = [inputs[0][:1], np.array([2 ** 31 - 1], np.int32)]
    v = check_module(NeverRun(), read, endless, 1)
    assert v.outcome == "unjudged" and "oracle" in v.message and not v.diverges


def test_expectations_waive_an_ops_own_finding_by_its_entry_and_a_whole_module_finding_only_by_a_program_entry(
        module, tmp_path, capsys):
    exp = tmp_path / "known.yaml"
    out = tmp_path / "out"
    argv = ["check", str(module), "--backend", "test_module_check:WrongExponential",
            "--depth", "quick", "--out", str(out), "--force", "--expectations", str(exp)]
    exp.write_text("expectations:\n"
                   "- {op: exponential, element_type: f32, class: value, reason: f16 exp}\n"
                   "- {op: exponential, element_type: f32, class: accuracy, reason: f16 exp}\n")
    assert cli.main(argv) == 0, capsys.readouterr().out
    exp.write_text("expectations:\n"
                   "- {op: tanh, element_type: f32, class: value, reason: another op}\n"
                   "- {op: tanh, element_type: f32, class: accuracy, reason: another op}\n")
    assert cli.main(argv) == 1
    assert "UNEXPECTED wrong-exp exponential f32" in capsys.readouterr().out
    # the FMA contraction: the ops alone are right, so the add's entry does not waive it;
    # a program entry does
    fma = tmp_path / "fma.mlir"
    fma.write_text(FMA_MODULE)
    npz = tmp_path / "fma.npz"
    np.savez(npz, arg0=np.full((3, 2), np.float32(1 + 2 ** -12)),
             arg1=np.full((3, 2), np.float32(-(1 + 2 ** -11))))
    argv = ["check", str(fma), "--backend", "planted_programs:FusesMultiplyAdd", "--inputs",
            str(npz), "--out", str(out), "--force", "--expectations", str(exp)]
    exp.write_text("expectations:\n- {op: add, element_type: f32, class: value, reason: x}\n")
    assert cli.main(argv) == 1
    exp.write_text("expectations:\n- {op: add, program: '*', element_type: f32, class: value, "
                   "reason: an FMA contraction}\n")
    assert cli.main(argv) == 0, capsys.readouterr().out


def test_a_diverging_module_leaves_a_minimal_reproducer_that_fails_while_it_diverges(
        module, tmp_path, capsys):
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent),
                                         env.get("PYTHONPATH", "")])
    out = tmp_path / "out"
    # an op's own bug: the op alone, on the backend's own operand values
    assert cli.main(["check", str(module), "--backend", "test_module_check:WrongExponential",
                     "--depth", "quick", "--out", str(out)]) == 1
    rec = list(read_results(out / "results.jsonl"))[1]
    repro = Path(rec["repro"])
    assert (repro / "module.mlir").read_text().count('"stablehlo.') == 1
    assert "exponential" in (repro / "module.mlir").read_text()
    assert "model.mlir:4:8" in (repro / "what.txt").read_text()
    proc = subprocess.run([sys.executable, "repro.py"], cwd=repro, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = subprocess.run([sys.executable, "repro.py", "test_module_check:OracleProgram"],
                          cwd=repro, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # a finding of the whole module only (a contraction): the module minimised around it
    fma = tmp_path / "fma.mlir"
    fma.write_text(FMA_MODULE)
    npz = tmp_path / "fma.npz"
    np.savez(npz, arg0=np.full((3, 2), np.float32(1 + 2 ** -12)),
             arg1=np.full((3, 2), np.float32(-(1 + 2 ** -11))))
    assert cli.main(["check", str(fma), "--backend", "planted_programs:FusesMultiplyAdd",
                     "--inputs", str(npz), "--out", str(out), "--force"]) == 1
    rec = list(read_results(out / "results.jsonl"))[1]
    text = (Path(rec["repro"]) / "module.mlir").read_text()
    assert "stablehlo.multiply" in text and "stablehlo.add" in text
    assert "minimised" in (Path(rec["repro"]) / "what.txt").read_text()


def test_a_minimised_reproducer_whose_arguments_the_minimiser_cut_replays(tmp_path, capsys):
    """The minimiser makes a value an argument (here the negate's, named after it); the
    reproducer's inputs.npz must fit module.mlir read back (its arguments arg0, arg1, ...):
    repro.py and ``--inputs`` replay it, exit 1 on the contracting backend and 0 on a
    right one (with the inputs keyed by the cut value's name, both failed on the lookup)."""
    import os
    from pathlib import Path
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent),
                                         env.get("PYTHONPATH", "")])
    module = tmp_path / "negfma.mlir"
    module.write_text(FMA_MODULE.replace("(%a: tensor<2xf32>", "(%x: tensor<2xf32>").replace(
        "  %0 = stablehlo.multiply", "  %a = stablehlo.negate %x : tensor<2xf32>\n"
        "  %0 = stablehlo.multiply"))
    npz = tmp_path / "negfma.npz"
    np.savez(npz, arg0=np.full((3, 2), np.float32(-(1 + 2 ** -12))),
             arg1=np.full((3, 2), np.float32(-(1 + 2 ** -11))))
    out = tmp_path / "out"
    assert cli.main(["check", str(module), "--backend", "planted_programs:FusesMultiplyAdd",
                     "--inputs", str(npz), "--out", str(out)]) == 1
    rec = list(read_results(out / "results.jsonl"))[1]
    repro = Path(rec["repro"])
    text = (repro / "module.mlir").read_text()
    assert "negate" not in text and "stablehlo.multiply" in text, text     # cut away
    with np.load(repro / "inputs.npz") as data:
        assert data.files == ["arg0", "arg1"]
    _replays_fails_on_the_contraction_only(repro, env, tmp_path, capsys)


def test_a_bf16_module_reproducer_replays_its_inputs_as_bf16(tmp_path, capsys):
    """np.savez writes a bf16 array as raw 2-byte records (``|V2``: an .npz cannot name
    ml_dtypes' types); repro.py and ``--inputs`` read them back as the module's bf16, so
    the planted contraction still exits 1 and a right backend 0 (read as ``|V2``, the
    oracle refused the type and both exited 1, as if diverging)."""
    import os
    from pathlib import Path
    import ml_dtypes
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent),
                                         env.get("PYTHONPATH", "")])
    module = tmp_path / "fma16.mlir"
    module.write_text(FMA_MODULE.replace("f32", "bf16"))
    npz = tmp_path / "fma16.npz"
    # (1 + 2^-7)^2 rounds to 1 + 2^-6 in bf16: 0 rounded twice, 2^-14 rounded once
    np.savez(npz, arg0=np.full((2, 2), 1 + 2 ** -7, ml_dtypes.bfloat16),
             arg1=np.full((2, 2), -(1 + 2 ** -6), ml_dtypes.bfloat16))
    assert np.load(npz)["arg0"].dtype.kind == "V"          # what numpy gives back
    out = tmp_path / "out"
    assert cli.main(["check", str(module), "--backend", "planted_programs:FusesMultiplyAdd",
                     "--inputs", str(npz), "--out", str(out)]) == 1
    repro = Path(list(read_results(out / "results.jsonl"))[1]["repro"])
    _replays_fails_on_the_contraction_only(repro, env, tmp_path, capsys)


def test_a_killed_check_resumes_with_the_same_options_and_refuses_other_ones(
        module, tmp_path, capsys):
    other = tmp_path / "other.mlir"
    other.write_text(MODULE.replace("exponential", "negate"))
    out = tmp_path / "out"
    argv = ["check", str(module), str(other), "--backend",
            "test_module_check:WrongExponential", "--depth", "quick", "--out", str(out)]
    assert cli.main(argv) == 1
    lines = (out / "results.jsonl").read_text().splitlines()
    head, first, second, end = (json.loads(x) for x in lines)
    # killed after the first module: the header and its record are on disk
    (out / "results.jsonl").write_text("\n".join(lines[:2]) + "\n")
    assert cli.main(argv + ["--resume"]) == 1
    again = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in again] == ["run", "module", "module", "end"]
    assert again[0]["resumed"] == 1
    assert again[1] == first                              # kept as it was
    assert again[2]["id"] == second["id"] and again[2]["outcome"] == second["outcome"]
    capsys.readouterr()
    # other options: refused in one line, nothing changed
    before = (out / "results.jsonl").read_text()
    assert cli.main(argv + ["--seed", "7", "--resume"]) == 2
    assert cli.main(argv + ["--seed", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "seed" in err[0] and "--force" in err[1]
    assert (out / "results.jsonl").read_text() == before


# ---------------------------------------------------------------------------------------
# Real models (the corpus, conformance/apps/corpus.py): a planted bug inside a model is
# named by check 1, a planted fusion by check 3 alone, a legal variant passes
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from conformance.apps.corpus import export_model
    d = tmp_path_factory.mktemp("models")
    return {n: read_file(export_model(n, "f32", d)) for n in ("transformer", "cnn")}


def _model_inputs(read, batch=3):
    """Ordinary values (no special values: a model's reductions stay finite)."""
    rng = np.random.default_rng(1)
    return [rng.uniform(-2, 2, (batch, *t.shape)).astype(t.element_type.dtype)
            for _, t in read.program.arguments]


def test_a_wrong_op_inside_a_transformer_is_localised_to_that_op(models):
    read = models["transformer"]
    v = check_module(WrongExponential(), read, _model_inputs(read), 3)
    assert v.diverges and v.first["check"] == "op_by_op"
    assert v.first["op"] == "exponential"
    # the softmax's exp, the first of the model's two (the other is in erf's expansion)
    assert "jit(_transformer)/exp" in v.first["location"], v.first
    assert {f.op for f in v.op_by_op} == {"exponential"}
    assert v.judged_ops == len(read.program.operations) > 150


def test_a_fused_multiply_add_inside_a_cnn_is_the_whole_modules_not_an_ops(models):
    read = models["cnn"]
    xs = _model_inputs(read)
    v = check_module(FusesMultiplyAdd(), read, xs, 3)
    assert not v.op_by_op                       # every op alone is right
    assert v.diverges and v.whole["findings"]
    assert all(f["fusion"] for f in v.whole["findings"])
    assert v.first["op"] == "add" and v.first["check"] in ("exact", "metamorphic")
    assert check_module(OracleProgram(), read, xs, 3).outcome == "pass"


class SequentialSum(OracleProgram):
    """A float reduce(add) summed left to right at its own type, the init value first: a
    tree the spec allows (its in-order traversal is the elements in index order), which
    rounds at every step where the oracle rounds once."""

    name = "sequential-sum"

    def compile(self, signature):
        right = super().compile(signature)
        body = signature.regions[0] if signature.regions else ""
        if signature.op != "reduce" or not body.endswith("add(arg0, arg1)") or \
                len(signature.input_types) != 2:
            return right
        dims = list(signature.attributes["dimensions"])

        def run(xs):
            x, init = np.asarray(xs[0]), np.asarray(xs[1])
            keep = [d for d in range(x.ndim) if d not in dims]
            x = np.transpose(x, keep + dims).reshape([x.shape[d] for d in keep] + [-1])
            acc = np.full(x.shape[:-1], init, x.dtype)
            for i in range(x.shape[-1]):
                acc = (acc + x[..., i]).astype(x.dtype)
            return [acc]
        return run


def test_another_legal_reduction_order_inside_a_cnn_passes(models):
    from conformance.backends.programs import compile_program, run_batch
    read = models["cnn"]
    xs = _model_inputs(read)
    v = check_module(SequentialSum(), read, xs, 3)
    assert v.outcome == "pass", v.to_json()
    # and the order made a difference: other bits than the oracle's somewhere
    mine = run_batch(compile_program(SequentialSum(), read.program), xs, 3)
    right = run_batch(compile_program(OracleProgram(), read.program), xs, 3)
    assert any(not np.array_equal(a, b) for a, b in zip(mine, right))


# ---------------------------------------------------------------------------------------
# Bad modules and inputs: one line naming the file and the place, exit 2, nothing written
# ---------------------------------------------------------------------------------------

BAD_MODULES = {
    "not MLIR": ("bad.mlir", b"this is not MLIR\n", "bad.mlir:1:"),
    "an op MLIR does not know": ("unknown.mlir", MODULE.replace(
        "stablehlo.tanh", "stablehlo.frobnicate").encode(), "unknown.mlir:5:"),
    "a dynamic shape": ("dynamic.mlir", MODULE.replace("tensor<8xf32>", "tensor<?xf32>")
                        .encode(), "@main argument 0: dynamic shape"),
}


@pytest.mark.parametrize("what", list(BAD_MODULES))
def test_a_bad_module_is_one_line_naming_the_file_and_place_exit_2_nothing_written(
        what, tmp_path, capsys):
    name, content, place = BAD_MODULES[what]
    path = tmp_path / name
    path.write_bytes(content)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text('{"kind": "run", "command": "check"}\n')
    code = cli.main(["check", str(path), "--backend", "test_module_check:OracleProgram",
                     "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert str(path) in err[0] and place in err[0], err
    assert sorted(p.name for p in out.iterdir()) == ["results.jsonl"]
    assert (out / "results.jsonl").read_text() == '{"kind": "run", "command": "check"}\n'


@pytest.mark.parametrize("what", ["missing", "wrong shape", "wrong type", "no array"])
def test_bad_inputs_are_one_line_naming_the_file_exit_2_nothing_written(
        what, module, tmp_path, capsys):
    npz = tmp_path / "args.npz"
    if what == "wrong shape":
        np.savez(npz, arg0=np.zeros((2, 3), np.float32), arg1=np.zeros(8, np.float32))
    elif what == "wrong type":
        np.savez(npz, arg0=np.zeros(8, np.int32), arg1=np.zeros(8, np.float32))
    elif what == "no array":
        np.savez(npz, arg0=np.zeros(8, np.float32))
    out = tmp_path / "out"
    code = cli.main(["check", str(module), "--backend", "test_module_check:OracleProgram",
                     "--inputs", str(npz), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(npz) in err[0], err
    assert not out.exists()


TANH_LOOP = """func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<2xf32>
    cond {
      %lt = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %j = stablehlo.add %i, %c1 : tensor<i32>
      %w = stablehlo.tanh %v : tensor<2xf32>
      stablehlo.return %j, %w : tensor<i32>, tensor<2xf32>
    }
  %1 = stablehlo.exponential %0#1 : tensor<2xf32>
  func.return %1 : tensor<2xf32>
}
"""


def test_a_loop_of_inexact_ops_is_named_not_judged_and_the_ops_after_it_are_judged(tmp_path):
    """An RNN's while (tanh in its body): no bound to judge it alone by, so it is not
    judged (named, with why), and the exponential after it is judged on its value."""
    path = tmp_path / "rnn.mlir"
    path.write_text(TANH_LOOP)
    read = read_file(path)
    ops = dict((o.op, o.name) for o in read.program.operations)
    xs = [np.random.default_rng(0).uniform(-2, 2, (3, 2)).astype(np.float32)]
    v = check_module(OracleProgram(), read, xs, 3)
    assert v.outcome == "pass" and v.op_outcomes[ops["while"]] == "unjudged"
    assert "no bound" in v.message and "while at rnn.mlir:5:" in v.message
    assert v.op_outcomes[ops["exponential"]] == "pass"
    # the exponential after the loop is still judged: a wrong one is found there
    w = check_module(WrongExponential(), read, xs, 3)
    assert w.diverges and w.first["op"] == "exponential"
    assert w.first["location"] == "rnn.mlir:14:8"


class WrongTanh(OracleProgram):
    """tanh computed through float16: a real bug (thousands of ulps in f32)."""

    name = "wrong-tanh"

    def compile(self, signature):
        right = super().compile(signature)
        if signature.op != "tanh":
            return right
        return lambda xs: [np.asarray(np.tanh(np.asarray(xs[0], np.float16)), np.float32)]


def test_a_wrong_op_inside_a_loop_of_inexact_ops_is_named_by_judging_the_loop_trip_by_trip(
        tmp_path):
    path = tmp_path / "rnn.mlir"
    path.write_text(TANH_LOOP)
    read = read_file(path)
    xs = [np.random.default_rng(0).uniform(-2, 2, (3, 2)).astype(np.float32)]
    v = check_module(WrongTanh(), read, xs, 3)
    assert v.diverges and v.first["op"] == "tanh" and v.first["check"] == "op_by_op"
    assert v.first["location"] == "rnn.mlir:11:12", v.first
    assert {f.op for f in v.op_by_op} == {"tanh"}
    assert "judged inside, trip by trip" in v.message
    # and on the right backend every op inside passes (also the exp after the loop)
    w = check_module(OracleProgram(), read, xs, 3)
    assert w.outcome == "pass" and set(w.op_outcomes.values()) == {"pass", "unjudged"}


class TanhOneUlpUp(OracleProgram):
    """tanh one ulp away from the oracle (toward +inf): within tanh's ulp bound."""

    name = "tanh-ulp"

    def compile(self, signature):
        right = super().compile(signature)
        if signature.op != "tanh":
            return right

        def run(xs):
            (y,) = right(xs)
            y = np.asarray(y)
            return [np.where(np.abs(y) < 1, np.nextafter(y, np.float32(np.inf)), y)
                    .astype(y.dtype)]
        return run


def test_a_tanh_inside_a_loop_within_its_ulp_bound_passes(tmp_path):
    path = tmp_path / "rnn.mlir"
    path.write_text(TANH_LOOP)
    read = read_file(path)
    xs = [np.random.default_rng(0).uniform(-2, 2, (3, 2)).astype(np.float32)]
    v = check_module(TanhOneUlpUp(), read, xs, 3)
    assert v.outcome == "pass", v.to_json()
    tanh = next(n for n, o in read.origins.items() if o.op == "stablehlo.tanh")
    assert v.op_outcomes[tanh] == "pass"          # judged inside the loop, and passed


def test_a_program_module_entry_waives_a_whole_module_finding_and_only_module_findings(
        tmp_path, capsys):
    """``program: module`` (the corpus's entries in the shipped files): it waives what a
    module shows, and is no pattern of generated programs, so it covers none of theirs."""
    from conformance.apps.expectations import (
        MODULE_PATTERN, load_expectations, match_program)
    fma = tmp_path / "fma.mlir"
    fma.write_text(FMA_MODULE)
    npz = tmp_path / "fma.npz"
    np.savez(npz, arg0=np.full((3, 2), np.float32(1 + 2 ** -12)),
             arg1=np.full((3, 2), np.float32(-(1 + 2 ** -11))))
    exp = tmp_path / "known.yaml"
    exp.write_text("expectations:\n- {op: add, program: module, element_type: f32, "
                   "class: value, reason: an FMA contraction}\n")
    argv = ["check", str(fma), "--backend", "planted_programs:FusesMultiplyAdd", "--inputs",
            str(npz), "--out", str(tmp_path / "out"), "--expectations", str(exp)]
    assert cli.main(argv) == 0, capsys.readouterr().out
    entries = load_expectations(exp)
    item = {"backend": "fma", "op": "add", "element_type": "f32", "class": "value",
            "fusion": True, "patterns": ["a*b+c"]}
    assert match_program(entries, item, {}) is None           # a generated program's
    assert match_program(entries, {**item, "patterns": [MODULE_PATTERN]}, {}) is not None


class FailsOnMultiply(OracleProgram):
    """refuses the multiply (a compile error, as IREE's link error on the bf16 mlp's
    convert), right elsewhere; ``wrong_exp`` adds WrongExponential's bug after it."""

    name = "fails-multiply"
    wrong_exp = False

    def compile(self, signature):
        if signature.op == "multiply":
            raise RuntimeError("iree-lld: error: undefined symbol: __truncsfbf2")
        if signature.op == "exponential" and self.wrong_exp:
            return WrongExponential().compile(signature)
        return super().compile(signature)


def test_an_op_the_backend_fails_on_is_a_finding_and_the_ops_after_it_are_still_judged(
        module):
    """A failing op (the corpus's first IREE finding in the bf16 mlp, its embedding
    gather's crash) used to end check 1: every op after it went unjudged. It is a finding
    of that op, and the ops after it run on the oracle's value of it."""
    read = read_file(module)
    ops = dict((o.op, o.name) for o in read.program.operations)
    v = check_module(FailsOnMultiply(), read, _inputs(read), 4)
    assert v.diverges and v.first["op"] == "multiply"
    assert v.op_outcomes[ops["multiply"]] == "backend_error"
    # the ops after it are judged (on the oracle's product) and pass
    assert [v.op_outcomes[ops[n]] for n in ("add", "exponential", "tanh")] == ["pass"] * 3
    assert {f.op for f in v.op_by_op} == {"multiply"}
    # its reproducer is the failing op alone (every case), not a later finding's op
    assert v.first_operands[0].op == "multiply" and v.first_operands[1][0].shape[0] == 4
    # a wrong op after the failing one is found too
    bad = FailsOnMultiply()
    bad.wrong_exp = True
    w = check_module(bad, read, _inputs(read), 4)
    assert {f.op for f in w.op_by_op} == {"multiply", "exponential"}
    assert w.op_outcomes[ops["exponential"]] == "accuracy"


def test_the_report_highlights_a_first_diverging_op_inside_a_loop_with_its_text(
        tmp_path, capsys):
    """A wrong tanh in an RNN's loop body (judged trip by trip): the module page lists
    the loop's cond and body ops under the while, highlights the tanh as the first
    diverging op (the while as holding it), links the first-op box to its row and shows
    the tanh's own StableHLO text; the right backend's column has no highlight."""
    import html as html_lib
    import re
    path = tmp_path / "rnn.mlir"
    path.write_text(TANH_LOOP)
    out = tmp_path / "out"
    cli.main(["check", str(path), "--backend",
              "test_module_check:WrongTanh,test_module_check:OracleProgram",
              "--depth", "quick", "--out", str(out)])
    (page,) = (out / "modules").glob("module-0-*.html")
    text = page.read_text()
    rows = re.findall(r'<tr id="op-(v\d+)"(?: class="([^"]*)")?>(.*?)</tr>', text, re.S)
    order = [name for name, _, _ in rows]
    classes = {name: set(c.split()) for name, c, _ in rows}
    cells = {name: html_lib.unescape(body) for name, _, body in rows}
    ops = {name: re.findall(r"<td[^>]*><code>(\w*)</code>", body)[1]     # the Op column
           for name, body in cells.items()}
    loop = next(n for n, op in ops.items() if op == "while")
    tanh = next(n for n, op in ops.items() if op == "tanh")
    exp = next(n for n, op in ops.items() if op == "exponential")
    # the loop's ops are rows right after the while, before the op after the loop
    inside = order[order.index(loop) + 1:order.index(exp)]
    assert {ops[n] for n in inside} == {"constant", "compare", "add", "tanh"}
    assert all("in-loop" in classes[n] for n in inside)
    assert "cond" in cells[inside[0]] and "body" in cells[tanh]
    # the highlight: the tanh itself, and the while as holding it; nothing else
    assert [n for n in order if "first-diverging" in classes[n]] == [tanh]
    assert [n for n in order if "holds-first" in classes[n]] == [loop]
    assert "rnn.mlir:11:12" in cells[tanh] and "<strong>first</strong>" in cells[tanh]
    assert '"stablehlo.tanh"(%arg2)' in cells[tanh]          # its own text, in its row
    # the constants cloned into the regions are named where they stand in the module
    assert all(re.search(r"rnn\.mlir:\d+:\d+", cells[n]) for n in inside)
    # the box of the first diverging op: a link to its row, the tanh's text
    box = html_lib.unescape(text[text.index('id="first-wrong-tanh"'):])
    box = box[:box.index("</div>")]
    assert f'href="#op-{tanh}"' in box and "rnn.mlir:11:12" in box
    assert '"stablehlo.tanh"(%arg2)' in box and "stablehlo.while" not in box
    assert 'id="first-oracle-program"' not in text


def _replays_fails_on_the_contraction_only(repro, env, tmp_path, capsys):
    """A module reproducer's repro.py exits 1 on the planted contraction and 0 on the
    oracle, and ``check --inputs`` replays its module and inputs on the oracle."""
    import subprocess
    import sys
    for backend, code in (("planted_programs:FusesMultiplyAdd", 1),
                          ("planted_programs:OracleProgram", 0)):
        proc = subprocess.run([sys.executable, "repro.py", backend], cwd=repro, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    capsys.readouterr()
    assert cli.main(["check", str(repro / "module.mlir"), "--inputs",
                     str(repro / "inputs.npz"), "--backend", "planted_programs:OracleProgram",
                     "--out", str(tmp_path / "again")]) == 0, capsys.readouterr()
