# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
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
coldstart_limit = 60  # questions per split
teacher = "offline"  # offline (annotations, no LLM) or openai (a Tutor/Planner LLM behind the server below)
teacher_base_url = None  # openai teacher: the OpenAI-compatible server, e.g. http://host:8000/v1 (vLLM serve)
teacher_model = None  # openai teacher: the served model name (None: the one the server serves)
max_obs_tokens = 256  # the run's one observation cap: cold start, GRPO and eval cut outputs here
max_new_tokens = 224  # the per-turn cap of GRPO and eval: checked against the longest trajectory turn
phrase_first_rate = 0.5  # offline teacher: share of first searches from the question's words before the name
repeat_recovery_rate = 0.0  # share of trajectories showing a refused repeat (no loss) and the move after it
seed = 0

# %%
import pandas as pd

from grepseek_lib import notebook, runfolder
from grepseek_lib.agent.models import load_tokenizer
from grepseek_lib.coldstart.build import ColdStartSettings, Teacher, build_coldstart
from grepseek_lib.coldstart.export import turn_cap_warning
from grepseek_lib.eval import plots

STAGE = "02_cold_start"
run_dir, data_dir = notebook.start(run_dir, data_dir)
out_dir = runfolder.artifacts_dir(run_dir, "coldstart")
splits = [str(data_dir / "benchmarks" / f"{s}.jsonl") for s in train_splits]

# %%
result = build_coldstart(splits, out_dir, corpus=data_dir / "corpus.jsonl", shards=data_dir / "shards",
                         limit=coldstart_limit, tokenizer=load_tokenizer(model),
                         teacher=Teacher(teacher, base_url=teacher_base_url, model=teacher_model),
                         settings=ColdStartSettings(seed=seed, max_obs_tokens=max_obs_tokens,
                                                    phrase_first_rate=phrase_first_rate,
                                                    repeat_recovery_rate=repeat_recovery_rate))
print(f"{result.processed} questions processed, {result.resumed} resumed, in {result.wall_s:.1f} s")
print("tokens per assistant turn:", result.report["all"].get("assistant_turn_tokens"))
print(turn_cap_warning(result.report, max_new_tokens) or f"every turn fits max_new_tokens {max_new_tokens}")

# %% [markdown]
# ## Acceptance per dataset

# %%
acceptance = pd.read_json(out_dir / "stats.json", orient="index").rename_axis("dataset").reset_index()
acceptance = acceptance[["dataset", "questions", "accepted", "acceptance", "tool_calls_mean", "rejections"]]
runfolder.save_table(acceptance, run_dir, STAGE, "acceptance")
acceptance

# %% [markdown]
# ## First searches: which strategy each question's chain tried first, and how often it was accepted

# %%
strategies = pd.DataFrame(result.report["all"]["acceptance_by_first_strategy"]).T.rename_axis("first_search")
strategies = strategies.reset_index()
runfolder.save_table(strategies, run_dir, STAGE, "first_search_strategies")
strategies

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
