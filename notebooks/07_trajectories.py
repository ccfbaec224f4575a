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
# # 07 · Trajectories
#
# Every episode a run wrote (evaluation of each system, BM25, cold start, GRPO rollout rewards) in one frame,
# filtered, compared across systems and browsed turn by turn. Not a pipeline stage: it reads what the
# stages wrote (`make run`, then open this notebook).

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (the corpus the commands ran on)
right_system = "sft"  # list the questions this system got right ...
wrong_system = "grpo"  # ... and this one got wrong

# %%
from grepseek_lib import notebook
from grepseek_lib.inspector import filters, load, report
from grepseek_lib.inspector.browser import Browser
from grepseek_lib.inspector.rerun import tool_for_run

run_dir, data_dir = notebook.start(run_dir, data_dir)
data = load.load_run(run_dir)
filters.counts(data.episodes)

# %% [markdown]
# ## Filters
#
# `filters.select(episodes, ...)`: run, system, source, benchmark, outcome (correct / partial / wrong),
# f1_bucket, stop_reason (answered / format error / budget / context), em, f1_min / f1_max, tool_calls
# (a count or a range), program (e.g. "awk"), repeated (ran a command twice).

# %%
shown = ["system", "benchmark", "id", "outcome", "f1", "stop_reason", "tool_calls", "programs", "question"]
filters.select(data.episodes, source=["eval", "bm25"], stop_reason=["format error", "budget", "context"])[shown]

# %%
filters.select(data.episodes, program="rg", tool_calls=(2, 5))[shown]

# %%
filters.select(data.episodes, repeated=True)[shown]

# %% [markdown]
# ## Right before, wrong after: questions `right_system` answered (EM 1) and `wrong_system` did not

# %%
regressions = filters.versus(data.episodes, right=right_system, wrong=wrong_system)
regressions

# %% [markdown]
# ## Browse: pick an episode, step through its turns, put another system beside it, rerun a command

# %%
browser = Browser(data, tool_for_run(run_dir, data_dir))
browser.widget

# %% [markdown]
# ## The same episodes as a static page (no kernel needed)

# %%
report.write_report(run_dir, data)
