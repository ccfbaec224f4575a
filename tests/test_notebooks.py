"""The notebook series and `grepseek pipeline`: jupytext pairs, structure checks, the runner's reuse / failure
contract, streaming progress, and one papermill smoke run of the WHOLE series with the tiny model (marked slow;
part of `make test`), after which 07_trajectories runs with its kernel in notebooks/ as JupyterLab starts it."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import papermill
import pytest

from grepseek_lib import config, pipeline, profiles, runfolder
from grepseek_lib.errors import UserError
from grepseek_lib.eval import losses
from grepseek_lib.eval.runner import read_records
from grepseek_lib.inspector import filters, load, report
from grepseek_lib.train.configs import GRPOSettings, load_config

NOTEBOOKS = config.REPO_ROOT / "notebooks"
#: Every notebook: the pipeline's stages, then the ones a user opens on a finished run.
ALL_NOTEBOOKS = (*pipeline.STAGES, "07_trajectories")
#: Modules a notebook may import: the library, and what shows its results.
ALLOWED_IMPORTS = ("grepseek_lib", "pathlib", "pandas", "dataclasses")
#: Parameters a notebook resolves itself (None: the library's default folder).
PATH_PARAMS = ("run_dir", "data_dir", "raw_dir")


def read_nb(stage: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / f"{stage}.ipynb", as_version=4)


def cells_of(nb: nbformat.NotebookNode) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source.strip(), list(c.metadata.get("tags", []))) for c in nb.cells]


def test_every_notebook_is_a_jupytext_pair():
    assert sorted(p.stem for p in NOTEBOOKS.glob("[0-9]*.py")) == sorted(ALL_NOTEBOOKS)
    assert sorted(p.stem for p in NOTEBOOKS.glob("[0-9]*.ipynb")) == sorted(ALL_NOTEBOOKS)
    assert 'formats = "ipynb,py:percent"' in (NOTEBOOKS / "jupytext.toml").read_text()


@pytest.mark.parametrize("stage", ALL_NOTEBOOKS)
def test_pair_is_in_sync_and_the_ipynb_holds_no_outputs(stage):
    """The .py is the source: its cells (kind, code, tags) are exactly the .ipynb's; `make notebooks` syncs."""
    source = jupytext.read(NOTEBOOKS / f"{stage}.py")
    paired = read_nb(stage)
    assert cells_of(source) == cells_of(paired), f"{stage}: run `make notebooks`"
    assert paired.metadata["kernelspec"]["name"] == "grepseek"
    code = [c for c in paired.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), f"{stage}: outputs"


@pytest.mark.parametrize("stage", ALL_NOTEBOOKS)
def test_notebook_has_one_leading_parameters_cell(stage):
    code = [c for c in read_nb(stage).cells if c.cell_type == "code"]
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and code[0] is tagged[0]
    assert "run_dir" in tagged[0].source


@pytest.mark.parametrize("stage", ALL_NOTEBOOKS)
def test_path_parameters_default_to_none_and_go_through_the_library(stage):
    """A literal relative path would resolve against the kernel's cwd, which differs between papermill and
    JupyterLab; None lets notebook.start / config.repo_path pick the folder."""
    declared = papermill.inspect_notebook(str(NOTEBOOKS / f"{stage}.ipynb"))
    for name in PATH_PARAMS:
        if name in declared:
            assert declared[name]["default"] == "None", f"{stage}: {name}"
    source = jupytext.read(NOTEBOOKS / f"{stage}.py")
    assert "run_dir, data_dir = notebook.start(run_dir, data_dir)" in source.cells[2].source


@pytest.mark.parametrize("stage", pipeline.STAGES)
def test_parameter_defaults_are_the_default_profile(stage):
    """Run in JupyterLab without papermill, a notebook does what `make run` did (same model, same limits)."""
    declared = papermill.inspect_notebook(str(NOTEBOOKS / f"{stage}.ipynb"))
    profile = profiles.PROFILES["default"]
    for name, spec in declared.items():
        if name in profile and name not in PATH_PARAMS:
            assert ast.literal_eval(spec["default"]) == profile[name], f"{stage}: {name}"


def test_profile_rates_are_the_library_defaults():
    """A notebook run draws cold start as `grepseek coldstart` does unless a profile says otherwise."""
    from grepseek_lib.coldstart.export import REPEAT_RECOVERY_RATE
    from grepseek_lib.coldstart.offline import PHRASE_FIRST_RATE

    assert all(p["phrase_first_rate"] == PHRASE_FIRST_RATE for p in profiles.PROFILES.values())
    assert all(p["repeat_recovery_rate"] == REPEAT_RECOVERY_RATE for p in profiles.PROFILES.values())
    for p in profiles.PROFILES.values():
        grpo = load_config(p["train_config"]).grpo
        assert (p["grpo_repeat_penalty"], p["grpo_evidence_bonus"]) == (grpo.repeat_penalty, grpo.evidence_bonus)
    assert (GRPOSettings.repeat_penalty, GRPOSettings.evidence_bonus) == (0.0, 0.0)  # the paper's reward


def is_one_call_loop(node: ast.For) -> bool:
    """`for system, policy in agents.items(): evaluate(...)`: a loop whose body is one library call."""
    return len(node.body) == 1 and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Call)


@pytest.mark.parametrize("stage", ALL_NOTEBOOKS)
def test_notebook_only_calls_the_library(stage):
    """No functions, classes, branches or loops of logic (one library call per item at most): that belongs
    in grepseek_lib. Checked on the reviewed .py source."""
    for cell in jupytext.read(NOTEBOOKS / f"{stage}.py").cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            banned = ast.FunctionDef | ast.ClassDef | ast.While | ast.Try | ast.Lambda | ast.If | ast.With
            assert not isinstance(node, banned), f"{stage}: logic in a notebook cell:\n{cell.source}"
            assert not isinstance(node, ast.For) or is_one_call_loop(node), f"{stage}: a loop of logic"
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert all(n.split(".")[0] in ALLOWED_IMPORTS for n in names), f"{stage}: imports {names}"


@pytest.mark.parametrize("stage", pipeline.STAGES)
def test_notebook_saves_a_table_a_figure_and_a_done_marker(stage):
    source = "\n".join(c.source for c in read_nb(stage).cells if c.cell_type == "code")
    assert re.search(r"runfolder\.save_(jsonl_)?table\(", source) and "runfolder.save_figure(" in source
    assert source.rstrip().splitlines()[-1] == "})" and "runfolder.mark_done(" in source


def test_eval_notebook_writes_the_trajectory_report():
    source = jupytext.read(NOTEBOOKS / "05_eval.py")
    assert any("report.write_report(run_dir" in c.source for c in source.cells)


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


def test_progress_streams_cell_output_and_text_bars_to_the_terminal(toy_series, tmp_path, capfd):
    """`grepseek pipeline` shows a long stage's own bars (tqdm, the transformers Trainer's) as they run."""
    body = ("from grepseek_lib import notebook\nnotebook.start(run_dir)\nfrom tqdm.auto import tqdm\n"
            "import transformers.trainer\nlist(tqdm(range(3), desc='toy bar'))\n"
            "print('callback', transformers.trainer.DEFAULT_PROGRESS_CALLBACK.__name__)\n"
            'runfolder.mark_done(run_dir, "04_e", {})')
    write_notebook(toy_series, "04_e", body)
    pipeline.run_pipeline({"run_dir": str(tmp_path / "run")}, ["04_e"], notebooks_dir=toy_series,
                          progress=True, log=lambda line: None)
    out, err = capfd.readouterr()
    assert "callback ProgressCallback" in out  # not the notebook widget callback papermill cannot show
    assert "toy bar: 100%" in err and "3/3" in err
    assert os.environ.get("GREPSEEK_PROGRESS") is None  # set for the kernel only


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
    for name, profile in profiles.PROFILES.items():
        missing = set(profile) - declared
        assert not missing, f"profile {name}: {sorted(missing)} not declared by any notebook"


# ---- the whole series, tiny model, tiny limits; then the trajectories on it ----

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
EVAL_SYSTEMS = ("zero_shot", "sft", "grpo", "bm25")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke profile run into <tmp>/runs/default, with GREPSEEK_RUNS / GREPSEEK_DATA pointing at <tmp>,
    so notebooks left at their defaults (run_dir = None) find it as JupyterLab users find runs/default."""
    root = tmp_path_factory.mktemp("smoke")
    env = {**os.environ, "GREPSEEK_DATA": str(root / "data"), "GREPSEEK_RUNS": str(root / "runs")}
    out = root / "runs" / config.DEFAULT_RUN
    cmd = [sys.executable, "-m", "grepseek_lib.cli", "pipeline", "--profile", "smoke", "--out", str(out),
           "--no-progress"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=590)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {"out": out, "env": env, "cmd": cmd}


def check_stage_figures(out, params: dict) -> None:
    """Key values of each stage's done marker: the run did what the profile asked, not only wrote files."""
    figures = {stage: runfolder.read_marker(out, stage)["summary"] for stage in pipeline.STAGES}
    data = figures["00_data"]
    assert data["passages"] > 1000 and data["eval_questions"] > 0 and data["train_questions"] > 0
    assert figures["01_shard"] == {"shards": params["n_shards"], "probe_mismatches": 0}
    cold = figures["02_cold_start"]
    assert 0 < cold["accepted"] <= cold["questions"] == params["coldstart_limit"] * len(params["train_splits"])
    assert 0 < cold["train_examples"] <= cold["accepted"]
    sft = figures["03_sft"]
    assert sft["steps"] == params["sft_max_steps"] and 0 < sft["train_loss"] < 100
    grpo = figures["04_grpo"]
    assert grpo["steps"] == params["grpo_steps"] and grpo["questions"] == params["grpo_questions"]
    low, high = -params["grpo_repeat_penalty"], 1 + params["grpo_evidence_bonus"]
    assert low <= grpo["reward_first"] <= high and low <= grpo["reward_last"] <= high
    assert 0 <= grpo["f1_first"] <= 1 and 0 <= grpo["f1_last"] <= 1
    ev = figures["05_eval"]
    assert ev["questions"] == params["eval_limit"] * len(params["benchmarks"])
    assert all(0 <= ev[f"{s}_micro_f1"] <= 1 and 0 <= ev[f"{s}_evidence_recall"] <= 1 for s in EVAL_SYSTEMS)
    assert {ev[f"{s}_top_loss"] for s in EVAL_SYSTEMS if s != "bm25"} <= set(losses.CAUSES)
    latency = figures["06_latency"]
    assert latency["commands"] > 0 and latency["output_mismatches"] == 0
    assert all(latency[f"{m}_median_s"] > 0 for m in ("sequential", "sharded", "indexed", "indexed_sharded"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_smoke_run_of_the_whole_series(smoke):
    out = smoke["out"]
    for stage, (table, figure) in EXPECTED.items():
        assert (out / f"{stage}.ipynb").is_file(), stage
        executed = nbformat.read(out / f"{stage}.ipynb", as_version=4)
        assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code"), stage
        assert (out / "tables" / f"{stage}_{table}.csv").stat().st_size > 0, stage
        assert (out / "figures" / f"{stage}_{figure}.png").stat().st_size > 1000, stage
        assert runfolder.read_marker(out, stage)["python"] == sys.executable, stage
    summary = (out / "summary.md").read_text()
    assert all(stage in summary for stage in pipeline.STAGES)
    check_stage_figures(out, profiles.PROFILES["smoke"])
    eval_table = (out / "tables" / "05_eval_em_f1.csv").read_text()
    assert all(system in eval_table for system in EVAL_SYSTEMS)
    assert "micro" in eval_table and "macro" in eval_table
    assert (out / report.REPORT_FILE).stat().st_size > 1000  # the eval stage wrote the trajectory report
    # a second run reuses every stage
    again = subprocess.run(smoke["cmd"], env=smoke["env"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.count("reused") == len(pipeline.STAGES), again.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_trajectories_notebook_runs_from_notebooks_folder_with_default_paths(smoke, tmp_path, monkeypatch):
    """As in JupyterLab: kernel started in notebooks/, no parameter given; the browser widget builds in the kernel."""
    for name in ("GREPSEEK_DATA", "GREPSEEK_RUNS"):
        monkeypatch.setenv(name, smoke["env"][name])
    (smoke["out"] / report.REPORT_FILE).unlink()
    executed = tmp_path / "07.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / "07_trajectories.ipynb"), str(executed), cwd=str(NOTEBOOKS),
                               kernel_name=pipeline.ensure_kernel(), progress_bar=False)
    outputs = [o for c in nbformat.read(executed, as_version=4).cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    assert (smoke["out"] / report.REPORT_FILE).is_file()  # found runs/default through GREPSEEK_RUNS


@pytest.mark.slow
def test_loader_and_filters_agree_with_the_records(smoke):
    """Counts per filter on the smoke run's real trajectories, checked against each system's records.jsonl."""
    data = load.load_run(smoke["out"])
    episodes = data.episodes
    stop_labels = {"answer": "answered", "format_errors": "format error", "budget": "budget", "context": "context"}
    for system in EVAL_SYSTEMS:
        records = read_records(smoke["out"] / "eval" / system)
        mine = filters.select(episodes, system=system)
        assert len(mine) == len(records) > 0, system
        assert len(filters.select(episodes, system=system, outcome="correct")) == sum(r["em"] == 1 for r in records)
        assert len(filters.select(episodes, system=system, f1_min=1e-9)) == sum(r["f1"] > 0 for r in records)
        if system == "bm25":
            continue
        for reason, label in stop_labels.items():
            expected = sum(r["stop_reason"] == reason for r in records)
            assert len(filters.select(episodes, system=system, stop_reason=label)) == expected, (system, reason)
        for calls in range(0, 6):
            expected = sum(r["tool_calls"] == calls for r in records)
            assert len(filters.select(episodes, system=system, tool_calls=calls)) == expected
        turns = {(r["benchmark"], str(r["id"])): r["turns"] for r in records}
        for row in mine.to_dict("records"):
            assert len(data.turns_of(row["episode"])) == turns[(row["benchmark"], row["id"])]
    cold = read_records(smoke["out"] / "coldstart")
    assert len(filters.select(episodes, system="coldstart")) == len(cold)
    assert len(filters.select(episodes, system="coldstart", stop_reason="answered")) == sum(r["accepted"] for r in cold)
    wc_users = sum(any('| wc' in m["content"] for m in r.get("messages", []) if m["role"] == "assistant") for r in cold)
    assert len(filters.select(episodes, system="coldstart", program="wc")) == wc_users
    accepted_calls = sum(r["n_tool_calls"] for r in cold if r["accepted"])
    assert (data.turns[data.turns["episode"].str.contains("/coldstart/")]["kind"] == "tool").sum() == accepted_calls
    rollouts = sum(len(v) for line in (smoke["out"] / "models" / "grpo" / "reward_parts.jsonl").read_text().splitlines()
                   for v in json.loads(line)["rewards"].values())
    assert len(filters.select(episodes, system="grpo_rollout")) == rollouts > 0
    grpo_rows = filters.select(episodes, system="grpo_rollout")  # decoded turn by turn from rollouts.jsonl
    assert all(len(data.turns_of(key)) > 0 for key in grpo_rows["episode"])


@pytest.mark.slow
def test_report_of_the_smoke_run_has_every_episode_and_turn(smoke, tmp_path):
    data = load.load_run(smoke["out"])
    page = report.render_report(data, "smoke")
    assert page.count('<details class="episode"') == len(data.episodes)
    assert page.count('<details class="turn"') == len(data.turns) > 0


@pytest.mark.slow
def test_smoke_run_has_one_observation_cap(smoke):
    """Cold-start data and every agent system of the eval state the run's cap, the one the tool cut at."""
    from tests.test_obs_cap import stated_cap

    cap = profiles.PROFILES["smoke"]["max_obs_tokens"]
    rows = [json.loads(line) for line in (smoke["out"] / "coldstart" / "train.jsonl").read_text().splitlines()]
    assert rows and {stated_cap(row["messages"]) for row in rows} == {cap}
    for system in ("zero_shot", "sft", "grpo"):
        lines = (smoke["out"] / "eval" / system / "trajectories.jsonl").read_text().splitlines()
        assert lines and {stated_cap(json.loads(line)["messages"]) for line in lines} == {cap}, system
