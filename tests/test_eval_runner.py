"""The evaluation runner: scoring, tables with micro / macro rows, resuming, and the `grepseek eval` command."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.backends import Generation
from grepseek_lib.agent.loop import even_batches
from grepseek_lib.cli import main
from grepseek_lib.data.formats import corpus_line
from grepseek_lib.eval.runner import (
    RECORDS,
    RESULTS,
    TABLE_CSV,
    TABLE_MD,
    TRAJECTORIES,
    evaluate,
    read_records,
)
from grepseek_lib.shell.tool import ShellTool

BENCH = {
    "nq": [("n1", "capital of France?", ["Paris"]), ("n2", "river of Paris?", ["Seine"]),
           ("n3", "highest mountain?", ["Mount Everest", "Everest"])],
    "bamboogle": [("b1", "brother of Moses?", ["Aaron"])],
}
#: What the scripted policy answers (one search first for every question).
REPLIES = {"capital of France?": "Paris", "river of Paris?": "the Loire", "highest mountain?": "Everest",
           "brother of Moses?": "Aaron the prophet"}


class AnsweringBackend:
    """Searches once, then answers from REPLIES; counts the conversations it was asked to continue."""

    tokenizer = None

    def __init__(self):
        self.questions: list[str] = []

    def generate(self, conversations, *, max_new_tokens, temperature, stop=None):
        out = []
        for messages in conversations:
            question = messages[1]["content"].removeprefix("Query: ")
            if messages[-1]["role"] == "user":
                self.questions.append(question)
                text = render_turn("search", command="rg -F Paris corpus.jsonl")
            else:
                text = render_turn("found", answer=REPLIES[question])
            out.append(Generation(text, 100, 20, 0.0))
        return out


@pytest.fixture()
def setup(tmp_path):
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    for name, rows in BENCH.items():
        (bench_dir / f"{name}.jsonl").write_text("".join(
            json.dumps({"id": i, "question": q, "golden_answers": g, "metadata": {}}) + "\n" for i, q, g in rows))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(corpus_line("1", "Paris", "Paris is the capital of France.") + "\n")
    return bench_dir, ShellTool(corpus, timeout=10), tmp_path / "out"


def test_scores_tables_and_files(setup):
    bench_dir, tool, out = setup
    backend = AnsweringBackend()
    table = evaluate(benchmarks=["nq", "bamboogle"], limit=None, out_dir=out, backend=backend, tool=tool,
                     benchmarks_dir=bench_dir, batch_size=2, progress=False)
    records = {r["id"]: r for r in read_records(out)}
    assert set(records) == {"n1", "n2", "n3", "b1"}
    assert (records["n1"]["em"], records["n1"]["f1"]) == (1.0, 1.0)
    assert (records["n2"]["em"], records["n2"]["f1"]) == (0.0, 0.0)
    assert records["n3"]["em"] == 1.0  # any gold counts
    assert records["b1"]["em"] == 0.0 and records["b1"]["f1"] == pytest.approx(2 / 3)  # "aaron prophet" vs "aaron"
    r = records["n1"]
    assert r["benchmark"] == "nq" and r["golds"] == ["Paris"] and r["prediction"] == "Paris"
    assert r["tool_calls"] == 1 and r["stop_reason"] == "answer" and r["tool_s"] > 0
    assert r["total_s"] == pytest.approx(r["llm_s"] + r["tool_s"])
    assert list(table.index) == ["nq", "bamboogle", "micro", "macro"]
    assert table.loc["nq", "n"] == 3 and table.loc["micro", "n"] == 4
    assert table.loc["nq", "em"] == pytest.approx(2 / 3)
    assert table.loc["micro", "em"] == pytest.approx(2 / 4)
    assert table.loc["macro", "em"] == pytest.approx((2 / 3 + 0) / 2)
    assert table.loc["micro", "tool_calls"] == 1
    assert all(rec["format_pass"] is True for rec in records.values()) and table.loc["micro", "format_pass"] == 1
    # the search printed the Paris passage: evidence for n1 only; no question repeated a command
    assert [records[i]["evidence_found"] for i in ("n1", "n2", "n3", "b1")] == [True, False, False, False]
    assert table.loc["micro", "evidence_found"] == pytest.approx(1 / 4) and table.loc["micro", "repeated_command"] == 0
    assert len(pd.read_parquet(out / RESULTS)) == 4
    assert pd.read_csv(out / TABLE_CSV, index_col=0).loc["macro", "f1"] == pytest.approx(table.loc["macro", "f1"])
    md = (out / TABLE_MD).read_text()
    assert md.startswith("| benchmark | n | em | f1 |") and "| micro | 4 |" in md
    assert len((out / TRAJECTORIES).read_text().splitlines()) == 4


def test_resume_skips_answered_questions(setup):
    bench_dir, tool, out = setup
    first = AnsweringBackend()
    evaluate(benchmarks=["nq"], limit=2, out_dir=out, backend=first, tool=tool, benchmarks_dir=bench_dir,
             progress=False)
    assert sorted(first.questions) == ["capital of France?", "river of Paris?"]
    with (out / RECORDS).open("a") as handle:
        handle.write('{"id": "n3", "bench')  # killed while writing: this question is not done
    second = AnsweringBackend()
    table = evaluate(benchmarks=["nq", "bamboogle"], limit=3, out_dir=out, backend=second, tool=tool,
                     benchmarks_dir=bench_dir, progress=False)
    assert sorted(second.questions) == ["brother of Moses?", "highest mountain?"]
    assert sorted(r["id"] for r in read_records(out)) == ["b1", "n1", "n2", "n3"]
    assert table.loc["micro", "n"] == 4
    third = AnsweringBackend()
    evaluate(benchmarks=["nq", "bamboogle"], limit=3, out_dir=out, backend=third, tool=tool,
             benchmarks_dir=bench_dir, progress=False)
    assert third.questions == []  # everything answered: nothing runs, not even a model load


def test_cli_eval_with_the_tiny_model(setup, tmp_path, capsys):
    from grepseek_lib.agent.hf_backend import weights_dtype
    from grepseek_lib.agent.models import build_tiny_model

    bench_dir, tool, out = setup
    model = build_tiny_model(tmp_path / "tiny", corpus=tool.corpus)
    code = main(["eval", "--model", str(model), "--benchmarks", f"{bench_dir / 'nq.jsonl'},{bench_dir}/bamboogle.jsonl",
                 "--limit", "1", "--out", str(out), "--corpus", str(tool.corpus), "--max-new-tokens", "16"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| nq | 1 |" in printed and "| bamboogle | 1 |" in printed and "| macro | 2 |" in printed
    assert len(read_records(out)) == 2
    # the index baseline on the same questions, into its own folder; settings.json says which system ran
    base = tmp_path / "bm25"
    args = ["eval", "--system", "bm25", "--k", "1", "--model", str(model), "--benchmarks", str(bench_dir / "nq.jsonl"),
            "--limit", "2", "--out", str(base), "--corpus", str(tool.corpus)]
    assert main(args) == 0
    assert "| nq | 2 |" in capsys.readouterr().out
    records = read_records(base)
    assert [r["id"] for r in records] == ["n1", "n2"] and all(len(r["retrieved_ids"]) == 1 for r in records)
    settings = json.loads((base / "settings.json").read_text())
    assert settings["system"] == "bm25" and settings["hf_dtype"] == weights_dtype() in ("float32", "bfloat16")
    assert "| nq | 2 |" in (base / "table.md").read_text()  # the baseline writes the runner's tables too
    assert main([*args, "--constrained"]) == 2 and "bm25 reader" in capsys.readouterr().err
    assert main([*args[:4], "0", *args[5:]]) == 2 and "--k" in capsys.readouterr().err


def test_cli_user_errors(setup, tmp_path, capsys):
    bench_dir, tool, out = setup
    assert main(["eval", "--benchmarks", "nope", "--out", str(out), "--corpus", str(tool.corpus)]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["ask", "q", "--corpus", str(tmp_path / "missing.jsonl")]) == 2
    assert "no corpus" in capsys.readouterr().err
    assert main(["ask", "q", "--corpus", str(tool.corpus), "--base-url", "http://x"]) == 2
    assert "--backend openai" in capsys.readouterr().err


def test_shards_without_a_corpus_run_over_the_corpus_they_were_cut_from(setup, tmp_path):
    from grepseek_lib.shell.open import resolve_corpus
    from grepseek_lib.shell.shards import build_shards

    _, tool, _ = setup
    shards = tmp_path / "shards"
    build_shards(tool.corpus, 1, shards)
    corpus, found = resolve_corpus(None, shards)
    assert corpus.resolve() == Path(tool.corpus).resolve() and found == shards


def test_ask_saves_its_episode_for_the_inspector(setup, tmp_path, capsys):
    from grepseek_lib.agent.models import build_tiny_model
    from grepseek_lib.inspector.load import load_file

    _, tool, _ = setup
    model = build_tiny_model(tmp_path / "tiny", corpus=tool.corpus)
    saved = tmp_path / "asked.jsonl"
    args = ["ask", "capital of France?", "--model", str(model), "--corpus", str(tool.corpus),
            "--max-new-tokens", "16", "--save", str(saved)]
    assert main(args) == 0 and main(args) == 0
    episodes = load_file(saved)
    assert len(episodes.episodes) == 2 and set(episodes.episodes["system"]) == {"ask"}
    assert episodes.episodes["episode"].nunique() == 2
    assert main([*args[:-1], str(tmp_path)]) == 2 and "--save" in capsys.readouterr().err


@pytest.mark.parametrize(("n", "size", "expected"), [
    (70, 24, [24, 24, 22]), (70, 32, [24, 24, 22]), (70, 8, [8] * 8 + [6]), (65, 32, [22, 22, 21]), (5, 8, [5]),
    (1, 1, [1]), (0, 8, []), (9, 0, [1] * 9)])
def test_even_batches_are_the_fewest_of_at_most_batch_size_and_keep_the_order(n, size, expected):
    batches = even_batches(range(n), size)
    assert [len(b) for b in batches] == expected
    assert [i for b in batches for i in b] == list(range(n))
    assert all(len(b) <= max(1, size) for b in batches)
    assert len(batches) == -(-n // max(1, size))


class TrailingTextBackend(AnsweringBackend):
    """Answers with text after `</answer>`: an answer the loop takes, but the reward's format gate fails."""

    def generate(self, conversations, **kw):
        return [Generation(g.text + " Done." if "<answer>" in g.text else g.text, 100, 20, 0.0)
                for g in super().generate(conversations, **kw)]


def test_format_pass_is_the_reward_gate_on_the_whole_episode(setup):
    bench_dir, tool, out = setup
    table = evaluate(benchmarks=["bamboogle"], limit=None, out_dir=out, backend=TrailingTextBackend(), tool=tool,
                     benchmarks_dir=bench_dir, batch_size=1, progress=False)
    record = read_records(out)[0]
    assert record["format_pass"] is False and table.loc["micro", "format_pass"] == 0


def test_a_batch_backend_takes_the_whole_batch_and_an_explicit_option_wins(monkeypatch):
    from grepseek_lib.agent import backends

    built = []
    monkeypatch.setattr(backends, "make_backend", lambda kind, model, **kw: built.append((kind, kw)))
    backends.make_batch_backend("hf", "smollm2", 24)
    backends.make_batch_backend("hf", "smollm2", 24, {"batch_size": 4})
    backends.make_batch_backend("openai", "m", 24, {"base_url": "http://x"})
    backends.make_batch_backend("vllm", "m", 24, {"constrain": False})
    assert built == [("hf", {"batch_size": 24}), ("hf", {"batch_size": 4}),
                     ("openai", {"concurrency": 24, "base_url": "http://x"}), ("vllm", {"constrain": False})]


class _Built(Exception):
    """Stops an evaluation once it has asked for its backend."""


def _stop_at_backend(kind, model, batch_size, options=None):
    raise _Built(kind, model, batch_size, options)


def test_eval_and_the_bm25_baseline_build_their_backend_for_their_batch(setup, monkeypatch, tmp_path):
    from grepseek_lib.eval import bm25, runner

    bench_dir, tool, out = setup
    monkeypatch.setattr(runner, "make_batch_backend", _stop_at_backend)
    monkeypatch.setattr(bm25, "make_batch_backend", _stop_at_backend)
    with pytest.raises(_Built) as agent:
        evaluate("m", "hf", ["nq"], None, out, tool=tool, benchmarks_dir=bench_dir, batch_size=24,
                 backend_kwargs={"constrain": True}, progress=False)
    with pytest.raises(_Built) as baseline:
        bm25.evaluate_baseline("m", ["nq"], None, tmp_path / "bm25", corpus=tool.corpus, benchmarks_dir=bench_dir,
                               backend_kind="openai", batch_size=12)
    assert agent.value.args == ("hf", "m", 24, {"constrain": True})
    assert baseline.value.args == ("openai", "m", 12, None)
