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
# # 03 · SFT
#
# Fine-tune the base policy on the accepted cold-start trajectories (trl SFTTrainer, loss on assistant tokens only). Settings start from `train/configs.py` (`cpu` or `gpu`); the parameters below override a few of them.

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (corpus.jsonl, benchmarks/, shards/; built by 00_data)
model = "smollm2"  # base policy: tiny (tests), smollm2, a model folder or a Hugging Face id
lora = False  # train LoRA adapters (merged into the saved model): for models above ~4B on one GPU
train_config = "cpu"  # train/configs.py preset or a YAML file
sft_epochs = 1
sft_max_steps = None  # None: whole epochs
sft_max_examples = None  # None: every accepted trajectory
sft_max_length = 4096
seed = 0

# %%
from dataclasses import replace

import pandas as pd

from grepseek_lib import notebook, runfolder
from grepseek_lib.eval import plots
from grepseek_lib.train.configs import load_config
from grepseek_lib.train.plumbing import METRICS_FILE
from grepseek_lib.train.sft import run_sft

STAGE = "03_sft"
run_dir, data_dir = notebook.start(run_dir, data_dir)
out_dir = runfolder.artifacts_dir(run_dir, "models") / "sft"
data = run_dir / "coldstart" / "train.jsonl"
settings = replace(load_config(train_config).sft, num_train_epochs=sft_epochs, max_examples=sft_max_examples,
                   max_length=sft_max_length, seed=seed, lora=lora)
settings

# %%
# An interrupted run continues from its last step when model, data and settings are unchanged.
summary = run_sft(data, model, out_dir, settings, lora=settings.lora, max_steps=sft_max_steps, resume=True)
pd.Series({k: v for k, v in summary.items() if k != "settings"}).to_frame("value")

# %% [markdown]
# ## Loss curve

# %%
log_history = runfolder.save_jsonl_table(out_dir / METRICS_FILE, run_dir, STAGE, "log_history")
log_history.tail()

# %%
fig = plots.training_curves(log_history, ["loss", "learning_rate"], title="SFT")
runfolder.save_figure(fig, run_dir, STAGE, "loss")

# %%
runfolder.mark_done(run_dir, STAGE, {
    "examples": summary["examples"],
    "steps": summary["steps"],
    "train_loss": summary["train_loss"],
    "wall_s": summary["wall_s"],
})
