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
# # 00 · The mini-wiki
#
# Build the corpus (wiki-18 format) and the seven benchmarks (FlashRAG format) from the raw sources, then look at what we built.

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (corpus.jsonl, benchmarks/, shards/; built by 00_data)
raw_dir = None  # None: ../shared/data/raw or $GREPSEEK_RAW (raw QA / Wikipedia sources, SOURCES.md)

# %%
import pandas as pd

from grepseek_lib import config, notebook, runfolder
from grepseek_lib.data.build import build_miniwiki
from grepseek_lib.data.formats import iter_corpus
from grepseek_lib.eval import plots

STAGE = "00_data"
run_dir, data_dir = notebook.start(run_dir, data_dir)
raw_dir = config.repo_path(raw_dir, config.raw_dir())

# %%
stats = build_miniwiki(raw_dir, data_dir, verbose=False)

# %% [markdown]
# ## Benchmarks: candidates, kept (answer supported by the corpus), coverage

# %%
benchmarks = pd.DataFrame.from_dict(stats["benchmarks"], orient="index").rename_axis("split").reset_index()
runfolder.save_table(benchmarks, run_dir, STAGE, "benchmarks")
benchmarks

# %%
fig = plots.bar_chart(benchmarks.set_index("split")["kept"], title="questions per split", ylabel="questions")
runfolder.save_figure(fig, run_dir, STAGE, "questions_per_split")

# %% [markdown]
# ## Corpus: passages and their length

# %%
corpus = pd.DataFrame(iter_corpus(data_dir / "corpus.jsonl"))
corpus["words"] = corpus["text"].str.split().str.len()
corpus_summary = corpus["words"].describe().rename("words per passage").to_frame().T
runfolder.save_table(corpus_summary.reset_index(names="what"), run_dir, STAGE, "corpus")
corpus_summary

# %%
fig = plots.histogram(corpus["words"], title="passage length", xlabel="words")
runfolder.save_figure(fig, run_dir, STAGE, "passage_words")

# %%
runfolder.mark_done(run_dir, STAGE, {
    "passages": stats["passages"],
    "corpus_mb": round(stats["corpus_bytes"] / 1e6, 2),
    "eval_questions": int(benchmarks.loc[benchmarks["role"] == "eval", "kept"].sum()),
    "train_questions": int(benchmarks.loc[benchmarks["role"] == "train", "kept"].sum()),
})
