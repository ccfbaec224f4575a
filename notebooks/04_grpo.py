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
# # 04 · GRPO
#
# RL from the SFT checkpoint (trl GRPOTrainer): multi-turn rollouts through the same shell tool, reward = token F1 x format gate (on CPU less `grpo_repeat_penalty` for a repeated command, plus `grpo_evidence_bonus` when a tool output printed a gold answer; the gpu profile keeps the paper's reward), observations masked out of the loss. Settings start from `train/configs.py`; the parameters below override a few.

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (corpus.jsonl, benchmarks/, shards/; built by 00_data)
train_config = "cpu"
train_splits = ["hotpotqa_train", "musique_train"]  # training questions: data_dir/benchmarks/<split>.jsonl
backend = "auto"  # rollout generation: auto (vLLM on a CUDA GPU with vllm installed, else hf), hf or vllm
lora = False  # train LoRA adapters (merged into the saved model)
grpo_steps = 4
grpo_questions = 2  # questions per step
grpo_generations = 4  # rollouts per question (G)
grpo_max_completion = 1536  # tokens per episode
grpo_pool = 2  # training questions, at least grpo_questions (every step sees the whole pool)
grpo_probe_candidates = 16  # most questions probed with the SFT policy, 8 at a time; 0: the first ones
grpo_repeat_penalty = 0.5  # subtracted from a rollout's reward when it sends a command twice (0 and 0: F1 x format)
grpo_evidence_bonus = 0.5  # added to a well-formed rollout's reward when a tool output printed a gold answer
max_new_tokens = 224  # tokens per turn (the longest cold-start turn must fit: 02_cold_start checks)
max_tool_calls = 5
max_obs_tokens = 256  # the run's one observation cap: cold start, GRPO and eval cut outputs here
seed = 0

# %%
from dataclasses import replace

import pandas as pd

from grepseek_lib import notebook, runfolder
from grepseek_lib.eval import plots
from grepseek_lib.train.configs import load_config
from grepseek_lib.train.devices import rollout_vllm
from grepseek_lib.train.grpo import REWARD_PARTS_FILE, read_reward_parts, run_grpo
from grepseek_lib.train.plumbing import METRICS_FILE

STAGE = "04_grpo"
run_dir, data_dir = notebook.start(run_dir, data_dir)
models = runfolder.artifacts_dir(run_dir, "models")
out_dir = models / "grpo"
settings = replace(load_config(train_config).grpo, max_steps=grpo_steps, questions_per_step=grpo_questions,
                   num_generations=grpo_generations,
                   max_completion_length=grpo_max_completion, max_turn_tokens=max_new_tokens,
                   max_tool_calls=max_tool_calls, max_obs_tokens=max_obs_tokens, max_questions=grpo_pool,
                   probe_candidates=grpo_probe_candidates, repeat_penalty=grpo_repeat_penalty,
                   evidence_bonus=grpo_evidence_bonus, seed=seed,
                   train_splits=tuple(train_splits),
                   use_vllm=rollout_vllm(backend), lora=lora)
settings

# %%
summary = run_grpo(str(models / "sft"), out_dir, settings, corpus=data_dir / "corpus.jsonl",
                   shards=data_dir / "shards", benchmarks_dir=data_dir / "benchmarks", lora=settings.lora,
                   resume=True)  # an interrupted run continues from its last step (same model, corpus, settings)
pd.Series({k: v for k, v in summary.items() if k != "settings"}).to_frame("value")

# %% [markdown]
# ## Reward (and its parts) per step

# %%
reward_parts = pd.DataFrame(read_reward_parts(out_dir / REWARD_PARTS_FILE))
runfolder.save_table(reward_parts, run_dir, STAGE, "reward_parts")
reward_parts.tail()

# %%
fig = plots.training_curves(reward_parts, ["reward", "format_pass_rate", "answer_rate", "tool_calls"],
                            title="GRPO rollouts")
runfolder.save_figure(fig, run_dir, STAGE, "reward")

# %% [markdown]
# ## Trainer log (loss, KL-free clip ratios, ...)

# %%
log_history = runfolder.save_jsonl_table(out_dir / METRICS_FILE, run_dir, STAGE, "log_history")
fig = plots.training_curves(log_history, ["loss", "reward"], title="GRPO trainer log")
runfolder.save_figure(fig, run_dir, STAGE, "loss")

# %%
runfolder.mark_done(run_dir, STAGE, {
    "steps": summary["steps"],
    "questions": summary["questions"],
    "reward_first": summary.get("reward_first"),
    "reward_last": summary.get("reward_last"),
    "rollouts_first": summary.get("rollouts_first"),
    "rollouts_last": summary.get("rollouts_last"),
    "f1_first": summary.get("f1_first"),
    "f1_last": summary.get("f1_last"),
    "wall_s": summary["wall_s"],
})
