"""`grepseek bench train` on the tiny model: both paths run on the same examples, the report is written."""

from __future__ import annotations

import json

import pytest

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.prompt import initial_messages
from grepseek_lib.bench import train as train_bench
from grepseek_lib.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture()
def chats(tmp_path):
    """Cold-start style chat rows: the agent's own prompt, one search, one answer."""
    rows = []
    for i, (question, answer) in enumerate([("Who was the brother of Moses?", "Aaron"),
                                            ("What river flows through Paris?", "Seine")]):
        messages = initial_messages(question, 3) + [
            {"role": "assistant", "content": render_turn("Search.", command=f"rg -F '{answer}' corpus.jsonl")},
            {"role": "tool", "content": json.dumps({"stdout": f"{answer} is the one.", "exit_code": 0})},
            {"role": "assistant", "content": render_turn("It says so.", answer=answer)}]
        rows.append({"id": str(i), "messages": messages})
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_bench_train_on_the_tiny_model(tiny, chats, tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "train", "--model", str(tiny), "--data", str(chats), "--steps", "2", "--repeats", "1",
                 "--prompts", "2", "--max-new-tokens", "8", "--episodes", "0", "--grpo-rollouts", "0",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| SFT step | s/step |" in printed and "| greedy generation | tokens/s |" in printed
    assert "| greedy generation, first batch | tokens/s |" in printed
    report = json.loads((out / "train_bench.json").read_text())
    assert len(report["curves"]["float32"]) == len(report["curves"]["new"]) == 2
    if report["precision"] == "float32":  # this CPU has no native bf16: the same arithmetic, the same curves
        assert report["max_loss_gap"] == 0.0 and report["identical_generations"] == "1/1"
    assert "| 2 | " in (out / "train_bench.md").read_text()


def test_generation_batches_never_ask_a_question_twice():
    """A warm batch that repeated an earlier question would be read from the new path's turn cache."""
    asked = [conv[-1]["content"] for batch in range(4) for conv in train_bench.prompts(8, batch)]
    assert len(asked) == len(set(asked)) == 32


def test_bench_train_refuses_bad_arguments(tiny, tmp_path, capsys):
    assert main(["bench", "train", "--model", str(tiny), "--data", str(tmp_path / "none.jsonl")]) == 2
    assert "--data" in capsys.readouterr().err
    assert main(["bench", "train", "--steps", "0", "--data", str(tmp_path)]) == 2
    assert "--steps" in capsys.readouterr().err
    assert main(["bench", "train", "--episodes", "-1", "--data", str(tmp_path)]) == 2
    assert "--episodes" in capsys.readouterr().err


def test_bench_train_episode_and_grpo_rows(tiny, chats, miniwiki, tmp_path, capsys):
    """The episode rows: the real loop and tool on held-out questions, before / lean / lean + reuse, compared;
    the GRPO rows: one seeded step as GRPO ran before (float32, trl's head and generate), with trl's generate on
    the new precision and head, and on the new path; the last two must agree reward for reward."""
    out = tmp_path / "bench"
    assert main(["bench", "train", "--model", str(tiny), "--data", str(chats), "--steps", "1", "--repeats", "1",
                 "--max-new-tokens", "4", "--episodes", "2", "--episode-benchmarks", "nq,popqa",
                 "--episode-tokens", "24", "--corpus", str(miniwiki / "corpus.jsonl"),
                 "--benchmarks-dir", str(miniwiki / "benchmarks"), "--out", str(out)]) == 0
    rows = {r["task"]: r for r in json.loads((out / "train_bench.json").read_text())["rows"]}
    assert {"agent episode", "agent episode, turn reuse alone", "GRPO step", "GRPO step, lean rollouts alone"} <= set(rows)
    assert "old column: float32, trl's LM head, trl generate" in rows["GRPO step"]["note"]
    assert "same rewards 1/1" in rows["GRPO step, lean rollouts alone"]["note"]
    per_token = rows["GRPO step, per rollout token"]
    assert per_token["unit"] == "ms/token" and per_token["new"] > 0 and " calls" in per_token["note"]
    assert "identical trajectories 1/1" in rows["agent episode, turn reuse alone"]["note"]
    assert main(["bench", "train", "--model", str(tiny), "--data", str(chats), "--episode-benchmarks", "musique_train",
                 "--benchmarks-dir", str(miniwiki / "benchmarks"), "--out", str(out)]) == 2
    assert "training splits" in capsys.readouterr().err
