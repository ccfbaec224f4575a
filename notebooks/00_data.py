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
# # 00 · The data
#
# Build the mini-wiki corpus (wiki-18 format) and the seven benchmarks (FlashRAG format) from the raw sources, or, with `import_corpus` / `import_benchmarks`, import a real wiki-18 and a FlashRAG download (eval splits, plus the training splits `nq_train`, `hotpotqa_train` and any named in `train_splits`); then look at what we have.

# %% tags=["parameters"]
run_dir = None  # None: runs/default, the run `make run` writes; relative paths start at the repo root
data_dir = None  # None: data/miniwiki (corpus.jsonl, benchmarks/, shards/; built by 00_data)
raw_dir = None  # None: ../shared/data/raw or $GREPSEEK_RAW (raw QA / Wikipedia sources, SOURCES.md)
import_corpus = None  # a wiki-18 .jsonl (linked) or DPR psgs_w100.tsv to import instead of the mini-wiki
import_benchmarks = None  # the FlashRAG dataset folder (nq/test.jsonl, ..., hotpotqa/train.jsonl) to import
train_splits = ["hotpotqa_train", "musique_train"]  # imports: also these <dataset>_<split> files (must exist)
corpus_sample = 100000  # passages whose length is plotted (the first N: all of the mini-wiki)

# %%
import pandas as pd

from grepseek_lib import notebook, runfolder
from grepseek_lib.data.formats import passage_words
from grepseek_lib.data.prepare import prepare_data
from grepseek_lib.eval import plots

STAGE = "00_data"
run_dir, data_dir = notebook.start(run_dir, data_dir)

# %%
stats = prepare_data(data_dir, raw=raw_dir, corpus_from=import_corpus, benchmarks_from=import_benchmarks,
                     train_splits=train_splits, verbose=False)

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
# ## Corpus: passages and their length (the first `corpus_sample` passages: a 14 GB corpus is never read whole)

# %%
corpus = pd.DataFrame({"words": passage_words(data_dir / "corpus.jsonl", corpus_sample)})
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
