# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: GrepSeek
#     language: python
#     name: grepseek
# ---

# %% [markdown]
# # 02 · Cold-start trajectories
#
# Tutor (sees the answer) and Planner (does not) build verified trajectories through the SAME shell tool the agent uses; the accepted ones become the SFT data. The offline teacher plays both roles from dataset annotations, executing and verifying every command; `teacher = "openai"` asks an LLM behind an OpenAI-compatible server instead.

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (corpus.jsonl, benchmarks/, shards/; built by 00_data)
model = "smollm2"  # the policy whose tokenizer cuts observations, as at inference
train_splits = ["hotpotqa_train", "musique_train"]
coldstart_limit = 200  # questions per split
teacher = "offline"  # offline (annotations, no LLM) or openai (a Tutor/Planner LLM behind the server below)
teacher_base_url = None  # openai teacher: the OpenAI-compatible server, e.g. http://host:8000/v1 (vLLM serve)
teacher_model = None  # openai teacher: the served model name (None: the one the server serves)
seed = 0

# %%
import pandas as pd

from grepseek_lib import notebook, runfolder
from grepseek_lib.cli import main as grepseek
from grepseek_lib.eval import plots

STAGE = "02_cold_start"
run_dir, data_dir = notebook.start(run_dir, data_dir)
out_dir = runfolder.artifacts_dir(run_dir, "coldstart")
splits = ",".join(str(data_dir / "benchmarks" / f"{s}.jsonl") for s in train_splits)

# %%
exit_code = grepseek(["coldstart", "--splits", splits, "--limit", str(coldstart_limit), "--out", str(out_dir),
                      "--corpus", str(data_dir / "corpus.jsonl"), "--shards", str(data_dir / "shards"),
                      "--teacher", teacher, "--tokenizer", model, "--seed", str(seed),
                      *notebook.cli_options(base_url=teacher_base_url, model=teacher_model)])
assert exit_code == 0, f"grepseek coldstart exited {exit_code}"

# %% [markdown]
# ## Acceptance per dataset

# %%
acceptance = pd.read_json(out_dir / "stats.json", orient="index").rename_axis("dataset").reset_index()
acceptance = acceptance[["dataset", "questions", "accepted", "acceptance", "tool_calls_mean", "rejections"]]
runfolder.save_table(acceptance, run_dir, STAGE, "acceptance")
acceptance

# %% [markdown]
# ## Every question: accepted or where it stopped

# %%
trajectories = pd.read_json(out_dir / "records.jsonl", lines=True)
trajectories = trajectories[["source", "id", "accepted", "stage", "reason", "hops", "n_tool_calls", "f1"]]
runfolder.save_table(trajectories, run_dir, STAGE, "trajectories")
trajectories.head(20)

# %%
accepted = trajectories[trajectories["accepted"]]
fig = plots.bar_chart(accepted["n_tool_calls"].value_counts().sort_index(),
                      title="tool calls per accepted trajectory", xlabel="tool calls", ylabel="trajectories")
runfolder.save_figure(fig, run_dir, STAGE, "tool_calls")

# %%
runfolder.mark_done(run_dir, STAGE, {
    "questions": len(trajectories),
    "accepted": len(accepted),
    "acceptance": round(len(accepted) / max(len(trajectories), 1), 4),
    "train_examples": len((out_dir / "train.jsonl").read_text().splitlines()),
})
