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
# # 06 · Latency
#
# Replay the commands the agent really ran during evaluation (topped up with the cold-start commands when an untrained policy ran few): sequential, sharded, with the word index (`grepseek index`) and with both (medians, tails, and every output compared byte for byte with the sequential run), then end-to-end time per question split into LLM time and search time.

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (corpus.jsonl, benchmarks/, shards/; built by 00_data)
latency_commands = 200  # distinct commands replayed (eval first, cold start tops up)
latency_repeats = 3
latency_index = True  # also replay through a word index of the corpus (built once into the run folder)

# %%
import pandas as pd

from grepseek_lib import notebook, runfolder
from grepseek_lib.bench import replay
from grepseek_lib.eval import compare, plots
from grepseek_lib.shell.index_build import ensure_index

STAGE = "06_latency"
run_dir, data_dir = notebook.start(run_dir, data_dir)
corpus = data_dir / "corpus.jsonl"
shards_dir = data_dir / "shards"
eval_dir = run_dir / "eval"
systems = ["zero_shot", "sft", "grpo"]

# %% [markdown]
# ## Replay: the agent's own commands

# %%
commands = replay.collect_commands([eval_dir / s / "trajectories.jsonl" for s in systems],
                                   [run_dir / "coldstart" / "train.jsonl"], limit=latency_commands)
commands["source"].value_counts()

# %%
index_dir = ensure_index(corpus, run_dir / "latency_index").directory if latency_index else None
replayed = replay.replay(list(commands["command"]), corpus, shards_dir, index=index_dir, repeats=latency_repeats)
replayed = replayed.merge(commands, on="command", how="left")
runfolder.save_table(replayed, run_dir, STAGE, "replay")
replayed.head(10)

# %%
summary = replay.latency_summary(replayed)
runfolder.save_table(summary, run_dir, STAGE, "replay_summary")
summary

# %%
fig = plots.latency_distributions(replayed, title="agent commands by engine mode")
runfolder.save_figure(fig, run_dir, STAGE, "replay_latency")

# %% [markdown]
# ## End to end: LLM time vs search time per question

# %%
episodes = pd.concat(compare.load_system_records({s: eval_dir / s for s in systems}).values(),
                     ignore_index=True)
split = episodes.groupby("system")[["llm_s", "tool_s", "total_s"]].describe(percentiles=[0.5, 0.9])
split = split.loc[:, (slice(None), ["mean", "50%", "90%"])]
split.columns = [f"{a}_{b}" for a, b in split.columns]
split = split.reset_index()
runfolder.save_table(split, run_dir, STAGE, "end_to_end")
split

# %%
fig = plots.latency_split(episodes)
runfolder.save_figure(fig, run_dir, STAGE, "end_to_end_split")

# %%
by_mode = summary.set_index("mode")
runfolder.mark_done(run_dir, STAGE, {
    "commands": len(commands),
    "commands_from_eval": int((commands["source"] == "eval").sum()),
    "output_mismatches": int(summary["output_mismatches"].sum()) if len(summary) else 0,
    **{f"{m}_median_s": by_mode.loc[m, "median_s"] for m in by_mode.index},
    **{f"{m}_p90_s": by_mode.loc[m, "p90_s"] for m in by_mode.index},
    "llm_share": float(episodes["llm_s"].sum() / max(episodes["total_s"].sum(), 1e-9)),
})
