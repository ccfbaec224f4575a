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
# # 05 · Evaluation
#
# EM / F1 per benchmark, micro and macro, on the SAME questions for: the zero-shot agent, the agent after SFT, after GRPO, and BM25 top-k passages read by the same base model in one shot.

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (corpus.jsonl, benchmarks/, shards/; built by 00_data)
model = "smollm2"  # the base model (zero-shot agent and BM25 reader): smollm2, a folder or a Hugging Face id
backend = "auto"  # auto (vLLM on a CUDA GPU with vllm installed, else hf), hf, vllm, or openai
base_url = None  # openai backend: the server (its `model` serves the zero-shot agent and the BM25 reader)
benchmarks = ["nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle"]
eval_limit = 10  # first N questions per benchmark
bm25_k = 3
max_new_tokens = 224  # tokens per turn (the longest cold-start turn must fit: 02_cold_start checks)
max_tool_calls = 5
max_obs_tokens = 256  # the run's one observation cap: cold start, GRPO and eval cut outputs here
batch_size = 24  # episodes decoded together (hf) or requested at once (openai); evenly split batches

# %%
from grepseek_lib import notebook, runfolder
from grepseek_lib.agent.trajectory import load_jsonl
from grepseek_lib.eval import bm25, compare, losses, plots
from grepseek_lib.eval.runner import evaluate
from grepseek_lib.inspector import filters, load, report
from grepseek_lib.inspector.browser import Browser
from grepseek_lib.inspector.rerun import tool_for_run
from grepseek_lib.train.devices import backend_options, policy_backend

STAGE = "05_eval"
run_dir, data_dir = notebook.start(run_dir, data_dir)
corpus = data_dir / "corpus.jsonl"
shards_dir = data_dir / "shards"
eval_dir = runfolder.artifacts_dir(run_dir, "eval")
models = runfolder.artifacts_dir(run_dir, "models")
kind, options = policy_backend(backend), backend_options(backend, base_url)
agents = {"zero_shot": model, "sft": str(models / "sft"), "grpo": str(models / "grpo")}

# %% [markdown]
# ## The agent at each training stage

# %%
for system, policy in agents.items():
    evaluate(policy, kind, benchmarks=benchmarks, limit=eval_limit, out_dir=eval_dir / system,
             corpus=corpus, shards=shards_dir, benchmarks_dir=data_dir / "benchmarks",
             max_new_tokens=max_new_tokens, max_tool_calls=max_tool_calls, max_obs_tokens=max_obs_tokens,
             batch_size=batch_size, backend_kwargs=options)

# %% [markdown]
# ## BM25 top-k, read in one shot by the base model

# %%
bm25.evaluate_baseline(model, benchmarks, eval_limit, eval_dir / "bm25", corpus=corpus,
                       benchmarks_dir=data_dir / "benchmarks", k=bm25_k, backend_kind=kind, batch_size=batch_size,
                       backend_kwargs=options)

# %% [markdown]
# ## One table, the same questions for every system

# %%
frames = compare.load_system_records({s: eval_dir / s for s in ["bm25", *agents]})
table = compare.comparison_table(frames)
runfolder.save_table(table, run_dir, STAGE, "em_f1")
table

# %%
f1_grid = compare.wide_table(table, "f1")
runfolder.save_table(f1_grid, run_dir, STAGE, "f1_grid")
f1_grid

# %%
fig = plots.em_f1_by_benchmark(table)
runfolder.save_figure(fig, run_dir, STAGE, "em_f1")

# %% [markdown]
# ## What holds the agent back
#
# Each episode put down to one cause (eval/losses.py): a right answer, two format errors in a row, a command
# run twice, no answer within the budget, the answer printed but not given, or searches that never printed it.
# Evidence recall is the share of episodes whose tool outputs held a gold answer (for BM25: its top-k passages);
# format pass is the share that passes the reward's format gate.

# %%
loss_shares = losses.loss_table(compare.common_questions(frames))
runfolder.save_table(loss_shares, run_dir, STAGE, "losses")
fig = plots.stacked_shares(loss_shares, losses.CAUSES, title="where the episodes end")
runfolder.save_figure(fig, run_dir, STAGE, "losses")
loss_shares

# %%
recall = compare.search_table(frames)
runfolder.save_table(recall, run_dir, STAGE, "evidence_recall")
recall

# %% [markdown]
# The most common episode shapes: C0 / C+ a count (`| wc -l`, `-c`) that printed 0 / more, R0 / R+ a read that
# printed nothing / something, E a turn that ran nothing, A the answer. A policy that learned one move repeats it.

# %%
shapes = losses.shape_table({system: load_jsonl(eval_dir / system / "trajectories.jsonl") for system in agents
                             if (eval_dir / system / "trajectories.jsonl").is_file()})
runfolder.save_table(shapes, run_dir, STAGE, "episode_shapes")
shapes

# %% [markdown]
# ## Trajectories: every episode, turn by turn
#
# `trajectories.html` in the run folder shows them without a kernel; the browser below steps through one
# episode and puts another system's episode on the same question beside it.
# [07_trajectories](07_trajectories.ipynb) has the filters and the SFT-right / GRPO-wrong list.

# %%
trajectories = load.load_run(run_dir)
evaluated = filters.select(trajectories.episodes, source=["eval", "bm25"])
report_path = report.write_report(run_dir, trajectories)
filters.counts(evaluated)

# %%
Browser(trajectories, tool_for_run(run_dir, data_dir), episodes=evaluated).widget

# %%
micro = table[table["benchmark"] == "micro"].set_index("system")
runfolder.mark_done(run_dir, STAGE, {
    **{f"{s}_micro_f1": micro.loc[s, "f1"] for s in micro.index},
    **{f"{s}_micro_em": micro.loc[s, "em"] for s in micro.index},
    **{f"{s}_micro_f1_se": micro.loc[s, "f1_se"] for s in micro.index},
    **{f"{s}_evidence_recall": v for s, v in recall[recall["benchmark"] == "micro"].set_index("system")
       ["evidence_found"].items()},
    **{f"{s}_format_pass": v for s, v in recall[recall["benchmark"] == "micro"].set_index("system")
       ["format_pass"].dropna().items()},
    **{f"{s}_top_loss": losses.top_cause(loss_shares, s) for s in loss_shares["system"]},
    "questions": int(micro["n"].max()) if len(micro) else 0,
    "episodes_in_report": len(trajectories.episodes),
})
