"""The library pieces the notebooks stand on: command replay, the cross-system table, plots, the run folder."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from grepseek_lib import runfolder
from grepseek_lib.agent.actions import Action
from grepseek_lib.agent.trajectory import Trajectory, Turn, save_jsonl
from grepseek_lib.bench import replay
from grepseek_lib.eval import compare, plots
from grepseek_lib.shell.index import MANIFEST
from grepseek_lib.shell.index_build import build_index, ensure_index
from grepseek_lib.shell.shards import build_shards

CORPUS_LINES = [
    {"id": str(i), "contents": f'"Title {i}"\n{"river" if i % 3 == 0 else "lake"} number {i} born in Paris'}
    for i in range(1, 61)
]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in CORPUS_LINES))
    return path


@pytest.fixture
def shards(corpus, tmp_path):
    build_shards(corpus, 3, tmp_path / "shards")
    return tmp_path / "shards"


def tool_turn(command: str) -> Turn:
    return Turn(text="", action=Action("tool", command=command), llm_s=0.5, tool_s=0.1)


def test_collect_commands_dedupes_and_tops_up_from_cold_start(tmp_path):
    traj = Trajectory(question="q", id="1", turns=[tool_turn("rg river corpus.jsonl"), tool_turn("rg river corpus.jsonl"),
                                                   Turn(text="", action=Action("answer", answer="x"))])
    save_jsonl([traj], tmp_path / "eval" / "trajectories.jsonl")
    call = '<think>t</think>\n<tool_call>{"name": "shell", "arguments": {"command": "%s"}}</tool_call>'
    chat = {"messages": [{"role": "user", "content": "rg fake corpus.jsonl"},
                         {"role": "assistant", "content": call % "rg river corpus.jsonl"},
                         {"role": "assistant", "content": call % "wc -l corpus.jsonl"}]}
    (tmp_path / "train.jsonl").write_text(json.dumps(chat) + "\n{broken\n")
    frame = replay.collect_commands([tmp_path / "eval" / "trajectories.jsonl", tmp_path / "missing.jsonl"],
                                    [tmp_path / "train.jsonl"])
    assert frame.to_dict("records") == [{"command": "rg river corpus.jsonl", "source": "eval"},
                                        {"command": "wc -l corpus.jsonl", "source": "coldstart"}]
    assert len(replay.collect_commands([], [tmp_path / "train.jsonl"], limit=1)) == 1


def test_replay_times_both_modes_and_outputs_match(corpus, shards):
    commands = ["rg river corpus.jsonl | head -n 3", "grep -c lake corpus.jsonl", "rg -o 'born in [A-Z][a-z]+' corpus.jsonl | sort | uniq -c",
                "rm -rf corpus.jsonl"]
    replayed = replay.replay(commands, corpus, shards, repeats=2, progress=False)
    timed = replayed[~replayed["refused"]]
    assert set(timed["mode"]) == {"sequential", "sharded"} and len(timed) == 3 * 2 * 2
    assert timed["same_as_sequential"].all() and (timed["seconds"] > 0).all()
    assert replayed.loc[replayed["refused"], "command"].tolist() == ["rm -rf corpus.jsonl"]
    counts = timed[timed["command"] == "grep -c lake corpus.jsonl"]["stdout_bytes"].unique()
    assert counts.tolist() == [len(b"40\n")]
    summary = replay.latency_summary(replayed).set_index("mode")
    assert summary.loc["sequential", "commands"] == 3 and summary.loc["sharded", "output_mismatches"] == 0
    assert summary.loc["sequential", "median_speedup"] == pytest.approx(1.0)
    assert summary.loc["sharded", "p90_s"] >= summary.loc["sharded", "median_s"]


def test_replay_with_an_index_adds_two_modes_and_outputs_match(corpus, shards, tmp_path):
    index = build_index(corpus, tmp_path / "index", block_bytes=256).directory  # small blocks: rare words select
    commands = ["rg -F 'Title 42' corpus.jsonl", "rg -n -i 'TITLE 7\"' corpus.jsonl | head -n 2",
                "grep -c river corpus.jsonl", "rg -v lake corpus.jsonl | wc -l"]
    replayed = replay.replay(commands, corpus, shards, index=index, index_fraction=1.0, progress=False)
    assert list(dict.fromkeys(replayed["mode"])) == ["sequential", "sharded", "indexed", "indexed_sharded"]
    assert replayed["same_as_sequential"].all() and len(replayed) == 4 * 4
    chosen = replayed.drop_duplicates("command").set_index("command")["index_strategy"]
    assert chosen["rg -F 'Title 42' corpus.jsonl"] == "index" and chosen["rg -v lake corpus.jsonl | wc -l"] != "index"
    assert replay.latency_summary(replayed).set_index("mode").loc["indexed_sharded", "output_mismatches"] == 0
    without_shards = replay.replay(commands[:1], corpus, None, index=index, progress=False)
    assert set(without_shards["mode"]) == {"sequential", "indexed"} and without_shards["same_as_sequential"].all()
    assert without_shards["index_strategy"].iloc[0] != "index"  # the default rule: a plain scan of 4 KB is faster


def test_ensure_index_builds_once_and_again_when_the_corpus_changes(corpus, tmp_path):
    first = ensure_index(corpus, tmp_path / "ix")
    stamp = (tmp_path / "ix" / MANIFEST).stat().st_mtime_ns
    assert ensure_index(corpus, tmp_path / "ix").sha256 == first.sha256
    assert (tmp_path / "ix" / MANIFEST).stat().st_mtime_ns == stamp  # reused, not rebuilt
    with corpus.open("a") as f:
        f.write(json.dumps({"id": "61", "contents": '"Title 61"\nsea'}) + "\n")
    assert ensure_index(corpus, tmp_path / "ix").sha256 != first.sha256


def test_latency_summary_of_nothing_is_an_empty_table():
    empty = pd.DataFrame(columns=["command", "mode", "seconds", "refused", "same_as_sequential"])
    assert replay.latency_summary(empty).empty


def test_comparison_table_keeps_only_questions_every_system_answered():
    base = [{"benchmark": "nq", "id": "1", "em": 1.0, "f1": 1.0}, {"benchmark": "nq", "id": "2", "em": 0.0, "f1": 0.5},
            {"benchmark": "popqa", "id": "9", "em": 0.0, "f1": 0.0}]
    other = [{"benchmark": "nq", "id": "1", "em": 0.0, "f1": 0.0}, {"benchmark": "popqa", "id": "9", "em": 1.0, "f1": 1.0}]
    frames = {"bm25": compare.records_frame(base, "bm25"), "sft": compare.records_frame(other, "sft")}
    table = compare.comparison_table(frames).set_index(["system", "benchmark"])
    assert table.loc[("bm25", "nq"), "n"] == 1 and table.loc[("bm25", "nq"), "f1"] == 1.0  # id 2 dropped
    assert table.loc[("sft", "micro"), "em"] == 0.5 and table.loc[("sft", "macro"), "f1"] == 0.5
    grid = compare.wide_table(compare.comparison_table(frames), "f1")
    assert list(grid.columns) == ["system", "nq", "popqa", "micro", "macro"]


def test_plots_return_figures_for_data_and_for_nothing(tmp_path):
    table = pd.DataFrame({"system": ["bm25", "sft"], "benchmark": ["nq", "nq"], "em": [0.1, 0.2], "f1": [0.3, 0.4]})
    figures = [
        plots.em_f1_by_benchmark(table), plots.em_f1_by_benchmark(table.iloc[0:0]),
        plots.training_curves(pd.DataFrame({"step": [1, 2], "loss": [2.0, 1.5]}), ["loss", "reward"], title="t"),
        plots.latency_distributions(pd.DataFrame({"mode": ["sequential", "sharded"], "seconds": [0.2, 0.1]})),
        plots.latency_split(pd.DataFrame({"id": ["1"], "llm_s": [1.0], "tool_s": [0.2]})),
        plots.bar_chart(pd.Series({"a": 1}), title="t"), plots.histogram([], title="t", xlabel="x"),
    ]
    for i, fig in enumerate(figures):
        path = runfolder.save_figure(fig, tmp_path, "99_test", f"fig{i}")
        assert path.stat().st_size > 1000


def test_run_folder_tables_and_markers(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, float("nan")], "c": ["x|y", "z"]})
    csv = runfolder.save_table(df, tmp_path, "00_x", "t")
    assert pd.read_csv(csv).shape == (2, 3)
    assert (tmp_path / "tables" / "00_x_t.md").read_text().splitlines()[2] == "| 1 | 0.5 | x\\|y |"
    import numpy as np

    runfolder.mark_done(tmp_path, "00_x", {"n": np.int64(3), "f": np.float32(0.5), "nan": float("nan")})
    marker = runfolder.read_marker(tmp_path, "00_x")
    assert marker["summary"] == {"n": 3, "f": 0.5, "nan": None}
    runfolder.marker_path(tmp_path, "00_x").write_text("{torn")
    assert runfolder.read_marker(tmp_path, "00_x") is None


def test_jsonl_log_becomes_a_saved_table(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1, "loss": 2.5}\n{"step": 2, "loss": 1.5}\n')
    frame = runfolder.save_jsonl_table(log, tmp_path, "03_x", "log_history")
    assert frame["loss"].tolist() == [2.5, 1.5]
    assert pd.read_csv(tmp_path / "tables" / "03_x_log_history.csv")["step"].tolist() == [1, 2]
