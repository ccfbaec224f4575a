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
# # 01 · Shards
#
# Cut the corpus into line-aligned shards for the parallel engine and check, on a few probe commands, that the sharded engine prints exactly what the single file gives, and how fast.

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (corpus.jsonl, benchmarks/, shards/; built by 00_data)
n_shards = 2  # one per core
probe_commands = [
    'rg -i "capital of" corpus.jsonl | head -n 5',
    'grep -c "river" corpus.jsonl',
    'rg -o "born in [A-Z][a-z]+" corpus.jsonl | sort | uniq -c | sort -rn | head -n 5',
    'rg -i "university" corpus.jsonl | wc -l',
]
latency_repeats = 3

# %%
import pandas as pd

from grepseek_lib import notebook, runfolder
from grepseek_lib.bench import replay
from grepseek_lib.eval import plots
from grepseek_lib.shell.shards import build_shards

STAGE = "01_shard"
run_dir, data_dir = notebook.start(run_dir, data_dir)
corpus = data_dir / "corpus.jsonl"
shards_dir = data_dir / "shards"

# %%
manifest = build_shards(corpus, n_shards, shards_dir)
shards = pd.DataFrame([vars(s) for s in manifest.shards])
runfolder.save_table(shards, run_dir, STAGE, "shards")
shards

# %%
fig = plots.bar_chart(shards.set_index("file")["lines"], title="lines per shard", ylabel="lines")
runfolder.save_figure(fig, run_dir, STAGE, "lines_per_shard")

# %% [markdown]
# ## Probe commands: sequential vs sharded (outputs must be byte-identical)

# %%
probe = replay.replay(probe_commands, corpus, shards_dir, repeats=latency_repeats)
runfolder.save_table(probe, run_dir, STAGE, "probe")
probe

# %%
probe_summary = replay.latency_summary(probe)
runfolder.save_table(probe_summary, run_dir, STAGE, "probe_summary")
probe_summary

# %%
fig = plots.latency_distributions(probe, title="probe commands")
runfolder.save_figure(fig, run_dir, STAGE, "probe_latency")

# %%
runfolder.mark_done(run_dir, STAGE, {
    "shards": len(manifest.shards),
    "probe_mismatches": int(probe_summary["output_mismatches"].sum()),
})
