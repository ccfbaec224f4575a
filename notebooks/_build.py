"""Write the numbered notebooks (00_data .. 06_latency) from the cell sources below.

The notebooks are generated, not hand-edited, so they stay small JSON without outputs and a change
shows up as a readable diff here. Run: `.venv/bin/python notebooks/_build.py` (tests check that the
committed .ipynb files match this script).

Every notebook: a `parameters` cell (papermill) with small CPU defaults, then cells that only call
grepseek_lib, show a table / figure, and save them into `run_dir`; the last cell writes the stage's
done marker with its key figures (what `grepseek pipeline` collects into summary.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

#: Defaults shared by all parameter cells (the pipeline overrides them; see pipeline.PROFILES).
PATHS = '''run_dir = "runs/notebook"  # where tables, figures and the done marker go
data_dir = "data/miniwiki"  # corpus.jsonl + benchmarks/ (built by 00_data)
'''

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}

NOTEBOOKS["00_data"] = [
    ("md", "# 00 · The mini-wiki\n\nBuild the corpus (wiki-18 format) and the seven benchmarks "
           "(FlashRAG format) from the raw sources, then look at what we built."),
    ("params", PATHS + 'raw_dir = "../shared/data/raw"  # raw QA / Wikipedia sources (SOURCES.md)\n'),
    ("code", "from pathlib import Path\n\nimport pandas as pd\n\n"
             "from grepseek_lib import runfolder\nfrom grepseek_lib.data.build import build_miniwiki\n"
             "from grepseek_lib.data.formats import iter_corpus\nfrom grepseek_lib.eval import plots\n\n"
             'STAGE = "00_data"'),
    ("code", "stats = build_miniwiki(Path(raw_dir), Path(data_dir), verbose=False)"),
    ("md", "## Benchmarks: candidates, kept (answer supported by the corpus), coverage"),
    ("code", 'benchmarks = pd.DataFrame.from_dict(stats["benchmarks"], orient="index").rename_axis("split").reset_index()\n'
             'runfolder.save_table(benchmarks, run_dir, STAGE, "benchmarks")\nbenchmarks'),
    ("code", 'fig = plots.bar_chart(benchmarks.set_index("split")["kept"], title="questions per split", ylabel="questions")\n'
             'runfolder.save_figure(fig, run_dir, STAGE, "questions_per_split")'),
    ("md", "## Corpus: passages and their length"),
    ("code", 'corpus = pd.DataFrame(iter_corpus(Path(data_dir) / "corpus.jsonl"))\n'
             'corpus["words"] = corpus["text"].str.split().str.len()\n'
             'corpus_summary = corpus["words"].describe().rename("words per passage").to_frame().T\n'
             'runfolder.save_table(corpus_summary.reset_index(names="what"), run_dir, STAGE, "corpus")\ncorpus_summary'),
    ("code", 'fig = plots.histogram(corpus["words"], title="passage length", xlabel="words")\n'
             'runfolder.save_figure(fig, run_dir, STAGE, "passage_words")'),
    ("code", 'runfolder.mark_done(run_dir, STAGE, {\n'
             '    "passages": stats["passages"],\n'
             '    "corpus_mb": round(stats["corpus_bytes"] / 1e6, 2),\n'
             '    "eval_questions": int(benchmarks.loc[benchmarks["role"] == "eval", "kept"].sum()),\n'
             '    "train_questions": int(benchmarks.loc[benchmarks["role"] == "train", "kept"].sum()),\n'
             "})"),
]

NOTEBOOKS["01_shard"] = [
    ("md", "# 01 · Shards\n\nCut the corpus into line-aligned shards for the parallel engine and check, on a few "
           "probe commands, that the sharded engine prints exactly what the single file gives, and how fast."),
    ("params", PATHS + "n_shards = 2  # one per core\n"
               "probe_commands = [\n"
               "    'rg -i \"capital of\" corpus.jsonl | head -n 5',\n"
               "    'grep -c \"river\" corpus.jsonl',\n"
               "    'rg -o \"born in [A-Z][a-z]+\" corpus.jsonl | sort | uniq -c | sort -rn | head -n 5',\n"
               "    'rg -i \"university\" corpus.jsonl | wc -l',\n"
               "]\nlatency_repeats = 1\n"),
    ("code", "from pathlib import Path\n\n"
             "import pandas as pd\n\n"
             "from grepseek_lib import runfolder\nfrom grepseek_lib.bench import replay\n"
             "from grepseek_lib.eval import plots\nfrom grepseek_lib.shell.shards import build_shards\n\n"
             'STAGE = "01_shard"\ncorpus = Path(data_dir) / "corpus.jsonl"\nshards_dir = Path(data_dir) / "shards"'),
    ("code", "manifest = build_shards(corpus, n_shards, shards_dir)\n"
             "shards = pd.DataFrame([vars(s) for s in manifest.shards])\n"
             'runfolder.save_table(shards, run_dir, STAGE, "shards")\nshards'),
    ("code", 'fig = plots.bar_chart(shards.set_index("file")["lines"], title="lines per shard", ylabel="lines")\n'
             'runfolder.save_figure(fig, run_dir, STAGE, "lines_per_shard")'),
    ("md", "## Probe commands: sequential vs sharded (outputs must be byte-identical)"),
    ("code", "probe = replay.replay(probe_commands, corpus, shards_dir, repeats=latency_repeats)\n"
             'runfolder.save_table(probe, run_dir, STAGE, "probe")\nprobe'),
    ("code", "probe_summary = replay.latency_summary(probe)\n"
             'runfolder.save_table(probe_summary, run_dir, STAGE, "probe_summary")\nprobe_summary'),
    ("code", 'fig = plots.latency_distributions(probe, title="probe commands")\n'
             'runfolder.save_figure(fig, run_dir, STAGE, "probe_latency")'),
    ("code", 'runfolder.mark_done(run_dir, STAGE, {\n'
             '    "shards": len(manifest.shards),\n'
             '    "probe_mismatches": int(probe_summary["output_mismatches"].sum()),\n'
             "})"),
]

NOTEBOOKS["02_cold_start"] = [
    ("md", "# 02 · Cold-start trajectories\n\nTutor (sees the answer) and Planner (does not) build verified "
           "trajectories through the SAME shell tool the agent uses; the accepted ones become the SFT data. "
           "The offline teacher plays both roles from dataset annotations, executing and verifying every command; "
           "`teacher = \"openai\"` asks an LLM behind an OpenAI-compatible server instead."),
    ("params", PATHS + 'model = "tiny"  # the policy whose tokenizer cuts observations, as at inference\n'
               'train_splits = ["hotpotqa_train", "musique_train"]\ncoldstart_limit = 6  # questions per split\n'
               'teacher = "offline"\nseed = 0\n'),
    ("code", "from pathlib import Path\n\n"
             "import pandas as pd\n\n"
             "from grepseek_lib import runfolder\nfrom grepseek_lib.cli import main as grepseek\n"
             "from grepseek_lib.eval import plots\n\n"
             'STAGE = "02_cold_start"\nout_dir = runfolder.artifacts_dir(run_dir, "coldstart")\n'
             'splits = ",".join(str(Path(data_dir) / "benchmarks" / f"{s}.jsonl") for s in train_splits)'),
    ("code", 'exit_code = grepseek(["coldstart", "--splits", splits, "--limit", str(coldstart_limit), "--out", str(out_dir),\n'
             '                      "--corpus", str(Path(data_dir) / "corpus.jsonl"), "--shards", str(Path(data_dir) / "shards"),\n'
             '                      "--teacher", teacher, "--tokenizer", model, "--seed", str(seed)])\n'
             'assert exit_code == 0, f"grepseek coldstart exited {exit_code}"'),
    ("md", "## Acceptance per dataset"),
    ("code", 'acceptance = pd.read_json(out_dir / "stats.json", orient="index").rename_axis("dataset").reset_index()\n'
             'acceptance = acceptance[["dataset", "questions", "accepted", "acceptance", "tool_calls_mean", "rejections"]]\n'
             'runfolder.save_table(acceptance, run_dir, STAGE, "acceptance")\nacceptance'),
    ("md", "## Every question: accepted or where it stopped"),
    ("code", 'trajectories = pd.read_json(out_dir / "records.jsonl", lines=True)\n'
             'trajectories = trajectories[["source", "id", "accepted", "stage", "reason", "hops", "n_tool_calls", "f1"]]\n'
             'runfolder.save_table(trajectories, run_dir, STAGE, "trajectories")\ntrajectories.head(20)'),
    ("code", 'accepted = trajectories[trajectories["accepted"]]\n'
             'fig = plots.bar_chart(accepted["n_tool_calls"].value_counts().sort_index(),\n'
             '                      title="tool calls per accepted trajectory", xlabel="tool calls", ylabel="trajectories")\n'
             'runfolder.save_figure(fig, run_dir, STAGE, "tool_calls")'),
    ("code", 'runfolder.mark_done(run_dir, STAGE, {\n'
             '    "questions": len(trajectories),\n'
             '    "accepted": len(accepted),\n'
             '    "acceptance": round(len(accepted) / max(len(trajectories), 1), 4),\n'
             '    "train_examples": len((out_dir / "train.jsonl").read_text().splitlines()),\n'
             "})"),
]

NOTEBOOKS["03_sft"] = [
    ("md", "# 03 · SFT\n\nFine-tune the base policy on the accepted cold-start trajectories (trl SFTTrainer, loss on "
           "assistant tokens only). Settings start from `train/configs.py` (`cpu` or `gpu`); the parameters below "
           "override a few of them."),
    ("params", PATHS + 'model = "tiny"  # base policy: tiny (tests), smollm2, or a model folder\n'
               'train_config = "cpu"  # train/configs.py preset or a YAML file\n'
               "sft_epochs = 1\nsft_max_steps = 2  # None: whole epochs\nsft_max_examples = 300\nsft_max_length = 4096\n"
               "seed = 0\n"),
    ("code", "from dataclasses import replace\nfrom pathlib import Path\n\n"
             "import pandas as pd\n\n"
             "from grepseek_lib import runfolder\nfrom grepseek_lib.eval import plots\n"
             "from grepseek_lib.train.configs import load_config\nfrom grepseek_lib.train.sft import METRICS_FILE, run_sft\n\n"
             'STAGE = "03_sft"\nout_dir = runfolder.artifacts_dir(run_dir, "models") / "sft"\n'
             'data = Path(run_dir) / "coldstart" / "train.jsonl"\n'
             "settings = replace(load_config(train_config).sft, num_train_epochs=sft_epochs, max_examples=sft_max_examples,\n"
             "                   max_length=sft_max_length, seed=seed)\nsettings"),
    ("code", "summary = run_sft(data, model, out_dir, settings, max_steps=sft_max_steps)\n"
             'pd.Series({k: v for k, v in summary.items() if k != "settings"}).to_frame("value")'),
    ("md", "## Loss curve"),
    ("code", 'log_history = pd.read_json(out_dir / METRICS_FILE, lines=True)\n'
             'runfolder.save_table(log_history, run_dir, STAGE, "log_history")\nlog_history.tail()'),
    ("code", 'fig = plots.training_curves(log_history, ["loss", "learning_rate"], title="SFT")\n'
             'runfolder.save_figure(fig, run_dir, STAGE, "loss")'),
    ("code", 'runfolder.mark_done(run_dir, STAGE, {\n'
             '    "examples": summary["examples"],\n'
             '    "steps": summary["steps"],\n'
             '    "train_loss": summary["train_loss"],\n'
             '    "wall_s": summary["wall_s"],\n'
             "})"),
]

NOTEBOOKS["04_grpo"] = [
    ("md", "# 04 · GRPO\n\nRL from the SFT checkpoint (trl GRPOTrainer): multi-turn rollouts through the same shell "
           "tool, reward = token F1 x format gate, observations masked out of the loss. Settings start from "
           "`train/configs.py`; the parameters below override a few."),
    ("params", PATHS + 'train_config = "cpu"\ngrpo_steps = 1\ngrpo_questions = 2  # questions per step\n'
               "grpo_generations = 2  # rollouts per question (G)\ngrpo_max_completion = 512  # tokens per episode\n"
               "grpo_pool = 2  # training questions, at least grpo_questions (every step sees the whole pool)\n"
               "grpo_probe_candidates = 2  # questions probed with the SFT policy; 0 trains on the first ones\n"
               "max_new_tokens = 32  # tokens per turn\nmax_tool_calls = 5\nseed = 0\n"),
    ("code", "from dataclasses import replace\nfrom pathlib import Path\n\n"
             "import pandas as pd\n\n"
             "from grepseek_lib import runfolder\nfrom grepseek_lib.eval import plots\n"
             "from grepseek_lib.train.configs import load_config\n"
             "from grepseek_lib.train.grpo import METRICS_FILE, REWARD_PARTS_FILE, read_reward_parts, run_grpo\n\n"
             'STAGE = "04_grpo"\nmodels = runfolder.artifacts_dir(run_dir, "models")\nout_dir = models / "grpo"\n'
             "settings = replace(load_config(train_config).grpo, max_steps=grpo_steps, questions_per_step=grpo_questions,\n"
             "                   num_generations=grpo_generations, per_device_train_batch_size=grpo_generations,\n"
             "                   max_completion_length=grpo_max_completion, max_turn_tokens=max_new_tokens,\n"
             "                   max_tool_calls=max_tool_calls, max_questions=grpo_pool,\n"
             "                   probe_candidates=grpo_probe_candidates, seed=seed)\n"
             "settings"),
    ("code", 'summary = run_grpo(str(models / "sft"), out_dir, settings, corpus=Path(data_dir) / "corpus.jsonl",\n'
             '                   shards=Path(data_dir) / "shards", benchmarks_dir=Path(data_dir) / "benchmarks")\n'
             'pd.Series({k: v for k, v in summary.items() if k != "settings"}).to_frame("value")'),
    ("md", "## Reward (and its parts) per step"),
    ("code", "reward_parts = pd.DataFrame(read_reward_parts(out_dir / REWARD_PARTS_FILE))\n"
             'runfolder.save_table(reward_parts, run_dir, STAGE, "reward_parts")\nreward_parts.tail()'),
    ("code", 'fig = plots.training_curves(reward_parts, ["reward", "format_pass_rate", "answer_rate", "tool_calls"],\n'
             '                            title="GRPO rollouts")\nrunfolder.save_figure(fig, run_dir, STAGE, "reward")'),
    ("md", "## Trainer log (loss, KL-free clip ratios, ...)"),
    ("code", 'log_history = pd.read_json(out_dir / METRICS_FILE, lines=True)\n'
             'runfolder.save_table(log_history, run_dir, STAGE, "log_history")\nlog_history.tail()'),
    ("code", 'fig = plots.training_curves(log_history, ["loss", "reward"], title="GRPO trainer log")\n'
             'runfolder.save_figure(fig, run_dir, STAGE, "loss")'),
    ("code", 'runfolder.mark_done(run_dir, STAGE, {\n'
             '    "steps": summary["steps"],\n'
             '    "questions": summary["questions"],\n'
             '    "reward_first": summary.get("reward_first"),\n'
             '    "reward_last": summary.get("reward_last"),\n'
             '    "wall_s": summary["wall_s"],\n'
             "})"),
]

NOTEBOOKS["05_eval"] = [
    ("md", "# 05 · Evaluation\n\nEM / F1 per benchmark, micro and macro, on the SAME questions for: the zero-shot "
           "agent, the agent after SFT, after GRPO, and BM25 top-k passages read by the same base model in one shot."),
    ("params", PATHS + 'model = "tiny"  # the base model (zero-shot agent and BM25 reader)\n'
               'benchmarks = ["nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle"]\n'
               "eval_limit = 1  # first N questions per benchmark\nbm25_k = 3\nmax_new_tokens = 32\n"
               "max_tool_calls = 5\nmax_obs_tokens = 256  # observation cap (tokens); match the GRPO config's\nbatch_size = 8\n"),
    ("code", "from pathlib import Path\n\n"
             "from grepseek_lib import runfolder\nfrom grepseek_lib.eval import bm25, compare, plots\n"
             "from grepseek_lib.eval.runner import evaluate\n\n"
             'STAGE = "05_eval"\ncorpus = Path(data_dir) / "corpus.jsonl"\nshards_dir = Path(data_dir) / "shards"\n'
             'eval_dir = runfolder.artifacts_dir(run_dir, "eval")\nmodels = runfolder.artifacts_dir(run_dir, "models")\n'
             'agents = {"zero_shot": model, "sft": str(models / "sft"), "grpo": str(models / "grpo")}'),
    ("md", "## The agent at each training stage"),
    ("code", "for system, policy in agents.items():\n"
             "    evaluate(policy, benchmarks=benchmarks, limit=eval_limit, out_dir=eval_dir / system,\n"
             '             corpus=corpus, shards=shards_dir, benchmarks_dir=Path(data_dir) / "benchmarks",\n'
             "             max_new_tokens=max_new_tokens, max_tool_calls=max_tool_calls, max_obs_tokens=max_obs_tokens,\n"
             "             batch_size=batch_size)"),
    ("md", "## BM25 top-k, read in one shot by the base model"),
    ("code", 'bm25.evaluate_baseline(model, benchmarks, eval_limit, eval_dir / "bm25", corpus=corpus,\n'
             '                       benchmarks_dir=Path(data_dir) / "benchmarks", k=bm25_k)'),
    ("md", "## One table, the same questions for every system"),
    ("code", 'frames = compare.load_system_records({s: eval_dir / s for s in ["bm25", *agents]})\n'
             "table = compare.comparison_table(frames)\n"
             'runfolder.save_table(table, run_dir, STAGE, "em_f1")\ntable'),
    ("code", 'f1_grid = compare.wide_table(table, "f1")\nrunfolder.save_table(f1_grid, run_dir, STAGE, "f1_grid")\nf1_grid'),
    ("code", 'fig = plots.em_f1_by_benchmark(table)\nrunfolder.save_figure(fig, run_dir, STAGE, "em_f1")'),
    ("code", 'micro = table[table["benchmark"] == "micro"].set_index("system")\n'
             'runfolder.mark_done(run_dir, STAGE, {\n'
             '    **{f"{s}_micro_f1": micro.loc[s, "f1"] for s in micro.index},\n'
             '    **{f"{s}_micro_em": micro.loc[s, "em"] for s in micro.index},\n'
             '    "questions": int(micro["n"].max()) if len(micro) else 0,\n'
             "})"),
]

NOTEBOOKS["06_latency"] = [
    ("md", "# 06 · Latency\n\nReplay the commands the agent really ran during evaluation (topped up with the "
           "cold-start commands when an untrained policy ran few): sequential vs sharded (medians and tails), "
           "then end-to-end time per question split into LLM time and search time."),
    ("params", PATHS + "latency_commands = 10  # distinct commands replayed (eval first, cold start tops up)\nlatency_repeats = 1\n"),
    ("code", "from pathlib import Path\n\n"
             "import pandas as pd\n\n"
             "from grepseek_lib import runfolder\nfrom grepseek_lib.bench import replay\n"
             "from grepseek_lib.eval import compare, plots\n\n"
             'STAGE = "06_latency"\ncorpus = Path(data_dir) / "corpus.jsonl"\nshards_dir = Path(data_dir) / "shards"\n'
             'eval_dir = Path(run_dir) / "eval"\nsystems = ["zero_shot", "sft", "grpo"]'),
    ("md", "## Replay: the agent's own commands"),
    ("code", 'commands = replay.collect_commands([eval_dir / s / "trajectories.jsonl" for s in systems],\n'
             '                                   [Path(run_dir) / "coldstart" / "train.jsonl"], limit=latency_commands)\n'
             'commands["source"].value_counts()'),
    ("code", 'replayed = replay.replay(list(commands["command"]), corpus, shards_dir, repeats=latency_repeats)\n'
             'replayed = replayed.merge(commands, on="command", how="left")\n'
             'runfolder.save_table(replayed, run_dir, STAGE, "replay")\nreplayed.head(10)'),
    ("code", "summary = replay.latency_summary(replayed)\n"
             'runfolder.save_table(summary, run_dir, STAGE, "replay_summary")\nsummary'),
    ("code", 'fig = plots.latency_distributions(replayed, title="agent commands, sequential vs sharded")\n'
             'runfolder.save_figure(fig, run_dir, STAGE, "replay_latency")'),
    ("md", "## End to end: LLM time vs search time per question"),
    ("code", "episodes = pd.concat(compare.load_system_records({s: eval_dir / s for s in systems}).values(),\n"
             "                     ignore_index=True)\n"
             'split = episodes.groupby("system")[["llm_s", "tool_s", "total_s"]].describe(percentiles=[0.5, 0.9])\n'
             'split = split.loc[:, (slice(None), ["mean", "50%", "90%"])]\n'
             'split.columns = [f"{a}_{b}" for a, b in split.columns]\n'
             'split = split.reset_index()\nrunfolder.save_table(split, run_dir, STAGE, "end_to_end")\nsplit'),
    ("code", 'fig = plots.latency_split(episodes)\nrunfolder.save_figure(fig, run_dir, STAGE, "end_to_end_split")'),
    ("code", 'by_mode = summary.set_index("mode")\n'
             'runfolder.mark_done(run_dir, STAGE, {\n'
             '    "commands": len(commands),\n'
             '    "commands_from_eval": int((commands["source"] == "eval").sum()),\n'
             '    **{f"{m}_median_s": by_mode.loc[m, "median_s"] for m in by_mode.index},\n'
             '    **{f"{m}_p90_s": by_mode.loc[m, "p90_s"] for m in by_mode.index},\n'
             '    "llm_share": float(episodes["llm_s"].sum() / max(episodes["total_s"].sum(), 1e-9)),\n'
             "})"),
]


def make_notebook(stage: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for index, (kind, source) in enumerate(cells):
        cell_id = f"{stage.replace('_', '-')}-{index:02d}"
        if kind == "md":
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell(source.rstrip("\n"))
            if kind == "params":
                cell.metadata["tags"] = ["parameters"]
        cell["id"] = cell_id
        nb.cells.append(cell)
    return nb


def render(stage: str) -> str:
    return nbformat.writes(make_notebook(stage, NOTEBOOKS[stage])) + "\n"


def main(check: bool = False) -> int:
    stale = []
    for stage in NOTEBOOKS:
        path = HERE / f"{stage}.ipynb"
        text = render(stage)
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    if stale:
        print("stale notebooks (run notebooks/_build.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(check="--check" in sys.argv))
