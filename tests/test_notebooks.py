"""The notebook series and `grepseek pipeline`: structure checks, the runner's reuse / failure contract,
and one papermill smoke run of the WHOLE series with the tiny model (marked slow; part of `make test`)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grepseek_lib import config, pipeline, runfolder
from grepseek_lib.errors import UserError

NOTEBOOKS = config.REPO_ROOT / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))
import _build  # noqa: E402  (the generator script next to the notebooks)

#: Modules a notebook may import: the library, and what shows its results.
ALLOWED_IMPORTS = ("grepseek_lib", "pathlib", "pandas", "dataclasses")


def load(stage: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / f"{stage}.ipynb", as_version=4)


def test_committed_notebooks_match_the_generator():
    assert _build.main(check=True) == 0, "run .venv/bin/python notebooks/_build.py"


@pytest.mark.parametrize("stage", pipeline.STAGES)
def test_notebook_has_one_leading_parameters_cell_and_no_outputs(stage):
    nb = load(stage)
    code = [c for c in nb.cells if c.cell_type == "code"]
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and code[0] is tagged[0]
    assert "run_dir" in tagged[0].source
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)


@pytest.mark.parametrize("stage", pipeline.STAGES)
def test_notebook_only_calls_the_library(stage):
    """No functions, classes or control flow beyond a loop over systems: logic belongs in grepseek_lib."""
    for cell in load(stage).cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            assert not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.While | ast.Try | ast.Lambda), (
                f"{stage}: logic in a notebook cell:\n{cell.source}"
            )
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert all(n.split(".")[0] in ALLOWED_IMPORTS for n in names), f"{stage}: imports {names}"


@pytest.mark.parametrize("stage", pipeline.STAGES)
def test_notebook_saves_a_table_a_figure_and_a_done_marker(stage):
    source = "\n".join(c.source for c in load(stage).cells if c.cell_type == "code")
    assert "runfolder.save_table(" in source and "runfolder.save_figure(" in source
    assert source.rstrip().splitlines()[-1] == "})" and "runfolder.mark_done(" in source


# ---- the runner, on small throwaway notebooks (a real kernel, seconds) ----

def write_notebook(folder: Path, stage: str, body: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('run_dir = "x"\nvalue = 1')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("from grepseek_lib import runfolder"),
                nbformat.v4.new_code_cell(body)]
    nbformat.write(nb, folder / f"{stage}.ipynb")


@pytest.fixture
def toy_series(tmp_path):
    folder = tmp_path / "nbs"
    folder.mkdir()
    write_notebook(folder, "00_a", 'runfolder.mark_done(run_dir, "00_a", {"value": value})')
    write_notebook(folder, "01_b", 'import sys\nrunfolder.mark_done(run_dir, "01_b", {"python": sys.executable})')
    return folder


def run_toy(folder: Path, out: Path, stages, **kw):
    params = {"run_dir": str(out), "value": kw.pop("value", 1), "unused": 3}
    logs: list[str] = []
    pipeline.run_pipeline(params, stages, notebooks_dir=folder, progress=False, log=logs.append, **kw)
    return logs


def test_runner_runs_reuses_and_forces(toy_series, tmp_path):
    out = tmp_path / "run"
    logs = run_toy(toy_series, out, ["00_a", "01_b"])
    assert sum("running" in line for line in logs) == 2 and sum("done in" in line for line in logs) == 2
    marker = runfolder.read_marker(out, "01_b")
    assert marker["summary"]["python"] == sys.executable  # the kernel is this venv's interpreter
    assert (out / "00_a.ipynb").is_file() and (out / "summary.md").is_file()
    assert "| 00_a | value | 1 |" in (out / "summary.md").read_text()
    assert sum("reused" in line for line in run_toy(toy_series, out, ["00_a", "01_b"])) == 2
    # a changed parameter reruns that stage and everything after it
    logs = run_toy(toy_series, out, ["00_a", "01_b"], value=2)
    assert sum("running" in line for line in logs) == 2
    assert runfolder.read_marker(out, "00_a")["summary"]["value"] == 2
    assert sum("running" in line for line in run_toy(toy_series, out, ["01_b"], value=2, force=True)) == 1
    # rerunning an early stage alone drops the later stages' markers (their inputs changed)
    run_toy(toy_series, out, ["00_a"], value=3)
    assert runfolder.read_marker(out, "01_b") is None and runfolder.read_marker(out, "00_a") is not None


def test_failed_stage_names_notebook_and_cell(toy_series, tmp_path):
    write_notebook(toy_series, "02_c", 'raise ValueError("boom at the third cell")')
    out = tmp_path / "run"
    with pytest.raises(pipeline.StageFailed) as failure:
        run_toy(toy_series, out, ["02_c"])
    message = str(failure.value)
    assert str(toy_series / "02_c.ipynb") in message and str(out / "02_c.ipynb") in message
    assert "cell 2 " in message and "ValueError: boom at the third cell" in message
    assert runfolder.read_marker(out, "02_c") is None


def test_a_notebook_without_done_marker_fails(toy_series, tmp_path):
    write_notebook(toy_series, "03_d", "x = 1")
    with pytest.raises(pipeline.StageFailed, match="no done marker"):
        run_toy(toy_series, tmp_path / "run", ["03_d"])


def test_stage_selection():
    assert pipeline.select_stages(None) == list(pipeline.STAGES)
    assert pipeline.select_stages("06,eval") == ["05_eval", "06_latency"]
    assert pipeline.select_stages("01_shard") == ["01_shard"]
    with pytest.raises(UserError, match="unknown stage"):
        pipeline.select_stages("07")


def test_params_file_overrides_and_rejects_unknown_names(tmp_path):
    good = tmp_path / "p.yaml"
    good.write_text("eval_limit: 3\nbenchmarks: [nq]\n")
    params = pipeline.resolve_params("smoke", tmp_path / "run", pipeline.load_params_file(good))
    assert params["eval_limit"] == 3 and params["benchmarks"] == ["nq"] and params["model"] == "tiny"
    assert Path(params["run_dir"]).is_absolute()
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"eval_limt": 3}))
    with pytest.raises(UserError, match="eval_limt"):
        pipeline.resolve_params("smoke", tmp_path / "run", pipeline.load_params_file(bad))
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="mapping"):
        pipeline.load_params_file(tmp_path / "list.json")
    with pytest.raises(UserError, match="not found"):
        pipeline.load_params_file(tmp_path / "missing.yaml")


def test_every_profile_parameter_is_declared_by_some_notebook():
    """A profile key no notebook declares would be silently ignored."""
    import papermill

    declared = set()
    for stage in pipeline.STAGES:
        declared |= set(papermill.inspect_notebook(str(NOTEBOOKS / f"{stage}.ipynb")))
    for name, profile in pipeline.PROFILES.items():
        missing = set(profile) - declared
        assert not missing, f"profile {name}: {sorted(missing)} not declared by any notebook"


# ---- the whole series, tiny model, tiny limits ----

#: (table, figure) each stage must produce; names as the notebooks save them.
EXPECTED = {
    "00_data": ("benchmarks", "questions_per_split"),
    "01_shard": ("shards", "probe_latency"),
    "02_cold_start": ("trajectories", "tool_calls"),
    "03_sft": ("log_history", "loss"),
    "04_grpo": ("log_history", "reward"),
    "05_eval": ("em_f1", "em_f1"),
    "06_latency": ("replay_summary", "replay_latency"),
}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_smoke_run_of_the_whole_series(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "GREPSEEK_DATA": str(tmp_path / "data"), "GREPSEEK_RUNS": str(tmp_path / "runs")}
    cmd = [sys.executable, "-m", "grepseek_lib.cli", "pipeline", "--profile", "smoke", "--out", str(out),
           "--no-progress"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=590)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for stage, (table, figure) in EXPECTED.items():
        assert (out / f"{stage}.ipynb").is_file(), stage
        executed = nbformat.read(out / f"{stage}.ipynb", as_version=4)
        assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code"), stage
        assert (out / "tables" / f"{stage}_{table}.csv").stat().st_size > 0, stage
        assert (out / "figures" / f"{stage}_{figure}.png").stat().st_size > 1000, stage
        assert runfolder.read_marker(out, stage)["python"] == sys.executable, stage
    summary = (out / "summary.md").read_text()
    assert all(stage in summary for stage in pipeline.STAGES)
    eval_table = (out / "tables" / "05_eval_em_f1.csv").read_text()
    assert all(system in eval_table for system in ("bm25", "zero_shot", "sft", "grpo"))
    assert "micro" in eval_table and "macro" in eval_table
    # a second run reuses every stage
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.count("reused") == len(pipeline.STAGES), again.stdout
