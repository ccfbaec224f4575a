"""One observation cap per run: the number the system prompt states is the cap the tool cuts at, on every
path that builds a prompt (the agent loop behind ask / eval / format-check / the GRPO probe, cold start, and
the GRPO dataset)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.backends import Generation
from grepseek_lib.agent.loop import run_batch
from grepseek_lib.cli import main
from grepseek_lib.eval.runner import evaluate
from grepseek_lib.shell.tool import ShellTool
from grepseek_lib.train.configs import GRPOSettings
from grepseek_lib.train.grpo import prompt_rows
from tests.test_coldstart import MUSIQUE, _write_corpus

_STATED = re.compile(r"output past about (\d+) tokens is cut")


def stated_cap(messages: list[dict]) -> int:
    assert messages[0]["role"] == "system"
    return int(_STATED.search(messages[0]["content"]).group(1))


class _Recorder:
    """Answers at once; keeps every conversation it was asked to continue."""

    tokenizer = None

    def __init__(self) -> None:
        self.seen: list[list[dict]] = []

    def generate(self, conversations, *, max_new_tokens, temperature, stop=None):
        self.seen += conversations
        return [Generation(render_turn("done", answer="x"), 10, 5, 0.0) for _ in conversations]


def test_the_agent_loop_states_the_tools_cap(tmp_path: Path):
    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    for cap in (64, 2048):
        backend = _Recorder()
        run_batch(["q?"], backend, ShellTool(corpus, max_obs_tokens=cap))
        assert stated_cap(backend.seen[0]) == cap


def test_eval_states_the_cap_it_cuts_at(tmp_path: Path):
    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    bench = tmp_path / "nq.jsonl"
    bench.write_text(json.dumps({"id": "1", "question": "q?", "golden_answers": ["x"], "metadata": {}}) + "\n")
    backend = _Recorder()
    evaluate(benchmarks=[str(bench)], limit=1, out_dir=tmp_path / "out", backend=backend, corpus=corpus,
             max_obs_tokens=91, progress=False)
    assert stated_cap(backend.seen[0]) == 91


def test_cold_start_data_states_the_cap_its_payloads_were_cut_at(tmp_path: Path):
    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    split = tmp_path / "musique_train.jsonl"
    split.write_text(json.dumps(MUSIQUE) + "\n")
    out = tmp_path / "cs"
    assert main(["coldstart", "--splits", str(split), "--corpus", str(corpus), "--out", str(out),
                 "--max-obs-tokens", "300", "--dev-percent", "0"]) == 0
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert rows and all(stated_cap(row["messages"]) == 300 for row in rows)
    assert main(["coldstart", "--splits", str(split), "--corpus", str(corpus), "--out", str(tmp_path / "x"),
                 "--max-obs-tokens", "0"]) == 2


def test_grpo_prompts_state_the_rollout_tools_cap(tmp_path: Path):
    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    tool = ShellTool(corpus, max_obs_tokens=123)
    rows = prompt_rows([{"question": "q?", "golds": ["x"], "id": "1"}], tool, GRPOSettings())
    assert stated_cap(rows[0]["prompt"]) == 123
