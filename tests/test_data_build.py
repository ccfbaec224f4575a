"""The real mini-wiki build (session fixture `miniwiki`): format, counts, coverage, schema, determinism."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from grepseek_lib import config
from grepseek_lib.data import iter_corpus, load_benchmark, passage_title_text
from grepseek_lib.data.build import build_miniwiki, collect_passages
from grepseek_lib.metrics import normalize_answer

ALL_SPLITS = (*config.BENCHMARKS, *config.TRAIN_SPLITS)


@pytest.fixture(scope="module")
def corpus_lines(miniwiki: Path) -> list[str]:
    return (miniwiki / "corpus.jsonl").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def benchmarks(miniwiki: Path) -> dict[str, list[dict]]:
    return {name: load_benchmark(miniwiki / "benchmarks" / f"{name}.jsonl") for name in ALL_SPLITS}


@pytest.fixture(scope="module")
def stats(miniwiki: Path) -> dict:
    return json.loads((miniwiki / "stats.json").read_text())


def test_corpus_is_exact_wiki18_format(corpus_lines: list[str]) -> None:
    assert 27_000 <= len(corpus_lines) <= 31_000
    unquoted = 0
    for n, line in enumerate(corpus_lines, 1):
        obj = json.loads(line)
        assert list(obj) == ["id", "contents"] and obj["id"] == str(n)
        assert line == json.dumps(obj)  # default json.dumps: ASCII escapes, ", " separators
        head, sep, text = obj["contents"].partition("\n")
        assert sep and text.strip() and "\n" not in text
        unquoted += not (head.startswith('"') and head.endswith('"'))
    # only lines of the real wiki-18 sample (kept byte-exact) may lack title quotes
    assert unquoted < 200
    assert all(ord(ch) < 128 for ch in "".join(corpus_lines[:2000]))


def test_sources_are_interleaved_and_deduplicated(corpus_lines: list[str], stats: dict) -> None:
    assert sum(s["kept"] for s in stats["sources"]) == len(corpus_lines) == stats["passages"]
    pairs = [passage_title_text(json.loads(line)["contents"]) for line in corpus_lines]
    assert len(set(pairs)) == len(pairs)
    names = [s["name"] for s in stats["sources"]]
    assert {"wiki18_sample", "kilt_articles", "vital_summaries", "popqa", "2wiki_dev"} <= set(names)
    # interleaved: the first 1,000 lines draw from (nearly) every source, not one block
    corpus, _ = collect_passages(config.raw_dir())
    assert len(set(corpus.sources[:1000])) == len(names)


def test_wiki18_sample_kept_byte_exact(corpus_lines: list[str]) -> None:
    contents = {json.loads(line)["contents"] for line in corpus_lines}
    sample = config.raw_dir() / "flashrag_quickstart" / "sample_data.jsonl"
    assert all(p["contents"] in contents for p in iter_corpus(sample))


def test_benchmark_counts_and_answer_coverage(benchmarks: dict, stats: dict) -> None:
    for name in ALL_SPLITS:
        records = benchmarks[name]
        assert stats["benchmarks"][name]["kept"] == len(records)
        assert len({r["id"] for r in records}) == len(records), name
        assert all(r["golden_answers"] and r["question"] for r in records), name
        assert all(r["metadata"]["dataset_split"] in ("train", "dev", "test") for r in records)
        assert all(r["metadata"]["source"] for r in records)
        if name in config.BENCHMARKS:
            assert len(records) >= 100, name
            if name != "bamboogle":
                assert stats["benchmarks"][name]["coverage"] >= 0.8, name
    assert len(benchmarks["bamboogle"]) == 125
    assert all(r["metadata"]["out_of_corpus"] is True for r in benchmarks["bamboogle"])


def test_coverage_holds_by_plain_substring(corpus_lines: list[str], benchmarks: dict) -> None:
    """An independent check of the 80% rule: a lower-cased gold answer occurs in the corpus text."""
    text = " " + " \n ".join(normalize_answer(json.loads(line)["contents"]) for line in corpus_lines) + " "
    for name in config.BENCHMARKS:
        if name == "bamboogle":
            continue
        sample = random.Random(0).sample(benchmarks[name], 40)
        found = sum(any(f" {normalize_answer(a)} " in text for a in r["golden_answers"][:5])
                    for r in sample)
        assert found / len(sample) >= 0.8, (name, found)


def test_no_question_in_both_train_and_eval(benchmarks: dict) -> None:
    train = {normalize_answer(r["question"]) for n in config.TRAIN_SPLITS for r in benchmarks[n]}
    for name in config.BENCHMARKS:
        assert not train & {normalize_answer(r["question"]) for r in benchmarks[name]}, name
    assert len(benchmarks["hotpotqa_train"]) >= 90 and len(benchmarks["musique_train"]) >= 90


def test_training_metadata_schema(benchmarks: dict, corpus_lines: list[str]) -> None:
    titles = [passage_title_text(json.loads(line)["contents"])[0] for line in corpus_lines]

    def check_gold(gold: dict) -> None:
        assert gold
        for title, ids in gold.items():
            for pid in [ids] if isinstance(ids, str) else ids:
                assert titles[int(pid) - 1] == title

    for r in benchmarks["hotpotqa_train"]:
        m = r["metadata"]
        assert m["type"] in ("bridge", "comparison") and m["level"]
        assert m["gold_titles"] == list(dict.fromkeys(t for t, _ in m["supporting_facts"]))
        assert set(m["gold_passages"]) == set(m["gold_titles"])
        check_gold(m["gold_passages"])
    for r in benchmarks["musique_train"]:
        m = r["metadata"]
        steps = m["question_decomposition"]
        assert len(m["support_titles"]) == len(steps) >= 2
        assert set(steps[0]) >= {"id", "question", "answer", "paragraph_support_idx"}
        assert r["golden_answers"][0] == steps[-1]["answer"] or m["answer_aliases"]
        assert set(m["support_titles"]) <= set(m["gold_passages"])
        check_gold(m["gold_passages"])
    for r in benchmarks["popqa"]:
        m = r["metadata"]
        assert {"subj", "prop", "obj", "s_wiki_title", "s_pop", "gold_passages"} <= set(m)
        assert m["s_wiki_title"] in m["gold_passages"]
        check_gold(m["gold_passages"])
    assert all(r["metadata"]["type"] in ("bridge", "comparison") for r in benchmarks["hotpotqa"])


def test_data_card_carries_build_figures_and_licences(miniwiki: Path, stats: dict) -> None:
    card = (miniwiki / "README.md").read_text(encoding="utf-8")
    assert f"{stats['passages']:,} passages" in card and stats["corpus_sha256"] in card
    for name, b in stats["benchmarks"].items():
        assert f"| `{name}` |" in card and f"{b['kept']:,}" in card
    assert "| HotpotQA | CC BY-SA 4.0 |" in card and "| MuSiQue | CC BY 4.0 |" in card
    assert "--corpus-from" in card and "GREPSEEK_DATA" in card


@pytest.mark.slow
def test_build_is_deterministic(miniwiki: Path, tmp_path: Path) -> None:
    build_miniwiki(config.raw_dir(), tmp_path, verbose=False)
    files = sorted(p.relative_to(miniwiki) for p in miniwiki.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    for rel in files:
        assert (miniwiki / rel).read_bytes() == (tmp_path / rel).read_bytes(), rel


def test_corpus_order_is_deterministic(corpus_lines: list[str]) -> None:
    """Fast half of the determinism check: a fresh read gives the same passages in the same order."""
    corpus, _ = collect_passages(config.raw_dir())
    assert [corpus.line(i) for i in range(len(corpus.passages))] == corpus_lines
