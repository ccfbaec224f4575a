"""Eval benchmark names stay unique and OUT/settings.json keeps a resume from mixing two different runs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.backends import Generation
from grepseek_lib.data.formats import corpus_line
from grepseek_lib.errors import UserError
from grepseek_lib.eval.identity import SETTINGS, check_and_record, file_sha256, run_identity
from grepseek_lib.eval.runner import benchmark_name, evaluate, plan_benchmarks, read_records
from grepseek_lib.shell.tool import ShellTool


class OneAnswer:
    """Answers every question at once; remembers which questions it was asked."""

    tokenizer = None

    def __init__(self):
        self.asked: list[str] = []

    def generate(self, conversations, *, max_new_tokens, temperature, stop=None):
        self.asked += [messages[1]["content"].removeprefix("Query: ") for messages in conversations]
        return [Generation(render_turn("found", answer="Paris"), 10, 5, 0.0) for _ in conversations]


def write_flashrag(folder: Path, questions: list[str]) -> Path:
    """A FlashRAG test split without ids: the loader numbers them test_0, test_1, ... in every dataset."""
    folder.mkdir(parents=True)
    path = folder / "test.jsonl"
    path.write_text("".join(json.dumps({"question": q, "golden_answers": ["Paris"]}) + "\n" for q in questions))
    return path


@pytest.fixture(autouse=True)
def hash_cache_in_tmp(tmp_path, monkeypatch):
    """The corpus hash cache lives under GREPSEEK_DATA; keep the tests' entries out of the real one."""
    monkeypatch.setenv("GREPSEEK_DATA", str(tmp_path / "data"))


@pytest.fixture()
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text(corpus_line("1", "Paris", "Paris is the capital of France.") + "\n")
    return path


@pytest.mark.parametrize(("source", "name"), [
    ("nq", "nq"), ("hotpotqa_train", "hotpotqa_train"), ("/data/fr/nq/test.jsonl", "nq"),
    ("fr/2wikimultihopqa/dev.jsonl", "2wiki"), ("fr/hotpotqa/train.jsonl", "hotpotqa_train"),
    ("benchmarks/bamboogle.jsonl", "bamboogle"), ("x/mine.jsonl.gz", "mine"),
])
def test_benchmark_names(source, name):
    assert benchmark_name(source) == name


def test_flashrag_layout_keeps_benchmarks_apart(tmp_path, corpus):
    nq = write_flashrag(tmp_path / "fr" / "nq", ["nq one?", "nq two?"])
    tqa = write_flashrag(tmp_path / "fr" / "triviaqa", ["tqa one?"])
    tool, out = ShellTool(corpus, timeout=10), tmp_path / "out"
    table = evaluate(benchmarks=[str(nq)], limit=None, out_dir=out, backend=OneAnswer(), tool=tool, progress=False)
    assert list(table.index) == ["nq", "micro", "macro"]
    later = OneAnswer()  # a second run adds triviaqa: its test_0 is not nq's test_0
    table = evaluate(benchmarks=[str(nq), str(tqa)], limit=None, out_dir=out, backend=later, tool=tool,
                     progress=False)
    assert later.asked == ["tqa one?"]
    assert list(table.index) == ["nq", "triviaqa", "micro", "macro"]
    assert sorted((r["benchmark"], r["id"]) for r in read_records(out)) == [
        ("nq", "test_0"), ("nq", "test_1"), ("triviaqa", "test_0")]


def test_a_repeated_benchmark_runs_once_and_a_clash_is_refused(tmp_path, corpus):
    nq = write_flashrag(tmp_path / "fr" / "nq", ["nq one?"])
    other = write_flashrag(tmp_path / "other" / "nq", ["another nq?"])
    backend, out = OneAnswer(), tmp_path / "out"
    evaluate(benchmarks=[str(nq), str(nq), str(tmp_path / "fr" / ".." / "fr" / "nq" / "test.jsonl")], limit=None,
             out_dir=out, backend=backend, tool=ShellTool(corpus, timeout=10), progress=False)
    assert backend.asked == ["nq one?"] and len(read_records(out)) == 1
    with pytest.raises(UserError, match=r"fr/nq/test.jsonl and .*other/nq/test.jsonl would both be named 'nq'"):
        plan_benchmarks([str(nq), str(other)])


def test_an_empty_benchmark_is_an_error_naming_the_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(UserError, match="empty.jsonl holds no questions"):
        evaluate(benchmarks=[str(empty)], out_dir=tmp_path / "out", backend=OneAnswer(), tool=object(),
                 progress=False)


def test_corpus_hash_is_cached_by_size_and_mtime(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"abc\n")
    assert file_sha256(path) == hashlib.sha256(b"abc\n").hexdigest()
    stat = path.stat()
    path.write_bytes(b"xyz\n")  # same size; the old mtime put back: the cached hash is used, no reread
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_sha256(path) == hashlib.sha256(b"abc\n").hexdigest()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched: hashed again
    assert file_sha256(path) == hashlib.sha256(b"xyz\n").hexdigest()
    assert (tmp_path / "data" / "cache" / "sha256.json").is_file()


def identity_of(corpus: Path, shards: Path | None = None, **overrides) -> dict:
    settings = {"timeout": 60.0, "max_context_tokens": 8192, "max_new_tokens": 512, "max_obs_tokens": 2048,
                "max_output_bytes": 1 << 20, "max_tool_calls": 5, "temperature": 0.0, "model": "smollm2",
                "backend": "hf", "constrained": False}
    return run_identity(corpus, shards, **{**settings, **overrides})


def test_resume_needs_the_same_run(tmp_path, corpus):
    out = tmp_path / "out"
    check_and_record(out, identity_of(corpus))
    recorded = json.loads((out / SETTINGS).read_text())
    assert recorded["corpus_sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert recorded["corpus_bytes"] == corpus.stat().st_size and recorded["index"] is None
    check_and_record(out, identity_of(corpus))  # the same run resumes
    for key, value in [("max_obs_tokens", 256), ("timeout", 5.0), ("max_context_tokens", 4096), ("model", "tiny"),
                       ("max_output_bytes", 1000), ("constrained", True)]:
        with pytest.raises(UserError, match=f"{key} .* -> .*new --out"):
            check_and_record(out, identity_of(corpus, **{key: value}))
    other = tmp_path / "other.jsonl"
    other.write_text(corpus_line("2", "Rome", "Rome is the capital of Italy.") + "\n")
    with pytest.raises(UserError, match="corpus_sha256"):
        check_and_record(out, identity_of(other))
    assert json.loads((out / SETTINGS).read_text()) == recorded  # a refused resume changes nothing


def test_a_moved_corpus_or_new_shards_still_resume(tmp_path, corpus):
    out = tmp_path / "out"
    check_and_record(out, identity_of(corpus))
    moved = tmp_path / "moved.jsonl"
    moved.write_bytes(corpus.read_bytes())
    shards = tmp_path / "shards"
    shards.mkdir()
    check_and_record(out, identity_of(moved, shards))
    assert json.loads((out / SETTINGS).read_text())["shards"] == str(shards.resolve())


def test_settings_from_an_older_grepseek(tmp_path, corpus, capsys):
    """Older runs recorded only model, backend, constrained, temperature and the token / call budgets."""
    out = tmp_path / "out"
    out.mkdir()
    old = {"model": "smollm2", "backend": "hf", "constrained": False, "temperature": 0.0, "max_new_tokens": 512,
           "max_tool_calls": 5}
    (out / SETTINGS).write_text(json.dumps(old))
    with pytest.raises(UserError, match="max_new_tokens 512 -> 64"):  # what it did record still counts
        check_and_record(out, identity_of(corpus, max_new_tokens=64))
    check_and_record(out, identity_of(corpus))  # the rest is taken from this run, with a note
    assert "predates corpus_bytes, corpus_sha256, timeout" in capsys.readouterr().err  # index: informational
    assert json.loads((out / SETTINGS).read_text()) == identity_of(corpus)
    with pytest.raises(UserError, match="timeout"):  # and guards the next resume
        check_and_record(out, identity_of(corpus, timeout=1.0))


def test_a_damaged_settings_file_is_named(tmp_path, corpus):
    out = tmp_path / "out"
    out.mkdir()
    (out / SETTINGS).write_text("{not json")
    with pytest.raises(UserError, match="settings.json is damaged"):
        check_and_record(out, identity_of(corpus))


def test_records_without_settings_are_resumed_with_a_note(tmp_path, corpus, capsys, monkeypatch):
    """A folder `evaluate()` wrote from a notebook has records but no settings.json: say so, then guard it."""
    from grepseek_lib.cli import main
    from grepseek_lib.eval import cli as eval_cli

    nq = write_flashrag(tmp_path / "fr" / "nq", ["nq one?"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "records.jsonl").write_text(json.dumps({"id": "test_0", "benchmark": "nq"}) + "\n")
    monkeypatch.setattr(eval_cli, "evaluate", lambda *a, **k: pytest.fail("nothing should run"))
    argv = ["eval", "--corpus", str(corpus), "--benchmarks", str(nq), "--out", str(out), "--model", "tiny"]
    with pytest.raises(pytest.fail.Exception):
        main(argv)
    assert "holds records but no settings.json" in capsys.readouterr().err
    assert json.loads((out / SETTINGS).read_text())["model"] == "tiny"
    assert main([*argv, "--max-tool-calls", "2"]) == 2
    assert "max_tool_calls 5 -> 2" in capsys.readouterr().err


def test_the_index_beside_the_corpus_is_recorded_but_never_blocks_a_resume(tmp_path):
    from grepseek_lib.eval.identity import differences, run_identity

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "1", "contents": "\\"A\\"\\nb"}\n')
    before = run_identity(corpus, None, timeout=60.0)
    assert before["index"] is None
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "index.json").write_text("{}")
    after = run_identity(corpus, None, timeout=60.0)
    assert after["index"] == str((tmp_path / "index").resolve()) and differences(before, after) == []
