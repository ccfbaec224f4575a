"""The BM25 baseline: retrieval ranks, the cache follows the corpus bytes, the reader reply is scored."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest

from grepseek_lib.errors import UserError
from grepseek_lib.eval import bm25

PASSAGES = [
    ("1", "Paris", "Paris is the capital and most populous city of France."),
    ("2", "Berlin", "Berlin is the capital and largest city of Germany by population."),
    ("3", "Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    ("4", "Danube", "The Danube is the second-longest river in Europe, flowing through Vienna and Budapest."),
]


def write_corpus(path, passages=PASSAGES):
    with path.open("w") as handle:
        for pid, title, text in passages:
            handle.write(json.dumps({"id": pid, "contents": f'"{title}"\n{text}'}) + "\n")
    return path


@dataclass
class Reply:
    text: str
    latency_s: float = 0.01


class FirstTitleReader:
    """A scripted reader: answers with the title of the first passage in its prompt (or says nothing)."""

    def __init__(self):
        self.prompts = []

    def generate(self, conversations, **options):
        assert options["temperature"] == 0.0 and options["max_new_tokens"] > 0
        replies = []
        for messages in conversations:
            user = messages[-1]["content"]
            self.prompts.append(user)
            match = re.search(r"^\[1\] (.+)$", user, re.M)
            replies.append(Reply(f"<answer>{match.group(1)}</answer> trailing" if match else "I do not know.\nmore"))
        return replies


@pytest.fixture
def index(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    return bm25.load_or_build_index(corpus, tmp_path / "idx")


def test_retrieve_ranks_the_passage_sharing_rare_words_first(index):
    hits = bm25.retrieve(index, ["Which river flows through Vienna and Budapest?", "capital of Germany"], k=2)
    assert [h.id for h in hits[0]][0] == "4"
    assert hits[1][0].id == "2" and hits[1][0].title == "Berlin"
    assert hits[0][0].score >= (hits[0][1].score if len(hits[0]) > 1 else 0)


def test_question_sharing_no_word_gets_no_passage(index):
    assert bm25.retrieve(index, ["zzyzx qwerty"], k=3) == [[]]


def test_k_larger_than_corpus_is_clamped_and_k_zero_is_a_user_error(index):
    assert len(bm25.retrieve(index, ["capital city"], k=50)[0]) <= len(PASSAGES)
    with pytest.raises(UserError):
        bm25.retrieve(index, ["capital"], k=0)


def test_index_is_cached_and_reloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("GREPSEEK_DATA", str(tmp_path / "data"))
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    first = bm25.load_or_build_index(corpus)
    assert first.path.parent == tmp_path / "data" / "bm25"
    assert (first.path / "layout.json").is_file()
    mtime = (first.path / "layout.json").stat().st_mtime_ns
    again = bm25.load_or_build_index(corpus)
    assert again.path == first.path and (first.path / "layout.json").stat().st_mtime_ns == mtime
    assert [h.id for h in bm25.retrieve(again, ["highest mountain"], k=1)[0]] == ["3"]


def test_changed_corpus_gets_its_own_index(tmp_path, monkeypatch):
    monkeypatch.setenv("GREPSEEK_DATA", str(tmp_path / "data"))
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    old = bm25.load_or_build_index(corpus)
    write_corpus(corpus, PASSAGES + [("5", "Nile", "The Nile is a major river in northeastern Africa.")])
    new = bm25.load_or_build_index(corpus)
    assert new.path != old.path
    assert bm25.retrieve(new, ["Nile river Africa"], k=1)[0][0].id == "5"


def test_malformed_or_missing_corpus_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "contents": "\\"A\\"\\ntext"}\nnot json\n')
    with pytest.raises(UserError, match="bad.jsonl:2"):
        bm25.load_or_build_index(bad, tmp_path / "idx")
    assert not (tmp_path / "idx").exists() and list(tmp_path.iterdir()) == [bad]  # no work folder left
    with pytest.raises(UserError, match="does not exist"):
        bm25.load_or_build_index(tmp_path / "missing.jsonl", tmp_path / "idx")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(UserError, match="corpus is empty"):
        bm25.load_or_build_index(empty, tmp_path / "idx")


def test_reader_prompt_numbers_passages_and_ends_with_the_question(index):
    hits = bm25.retrieve(index, ["capital of France"], k=2)[0]
    messages = bm25.reader_messages("What is the capital of France?", hits)
    assert messages[0]["role"] == "system" and "<answer>" in messages[0]["content"]
    user = messages[1]["content"]
    assert user.index("[1] Paris") < user.index("[2] ") < user.index("Question: What is the capital of France?")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("<think>x</think><answer> Paris </answer><answer>Rome</answer>", "Paris"),
        ("\n\nParis is the answer\nsecond line", "Paris is the answer"),
        ("<answer></answer>", ""),
        ("", ""),
        ("one two three four five six seven eight nine ten eleven twelve thirteen", "one two three four five six "
         "seven eight nine ten eleven twelve"),
    ],
)
def test_reader_answer_extraction(reply, expected):
    assert bm25.extract_reader_answer(reply) == expected


def test_evaluate_scores_each_question_with_the_shared_metrics(index):
    records = [
        {"id": "q1", "benchmark": "nq", "question": "Which river flows through Vienna?", "golden_answers": ["Danube"]},
        {"id": "q2", "benchmark": "nq", "question": "capital city of Germany", "golden_answers": ["Paris"]},
        {"id": "q3", "benchmark": "popqa", "question": "zzyzx", "golden_answers": ["Everest"]},
    ]
    reader = FirstTitleReader()
    rows = bm25.evaluate_bm25(records, reader, index, k=2, batch_size=2)
    by_id = {r["id"]: r for r in rows}
    assert by_id["q1"]["prediction"] == "Danube" and by_id["q1"]["em"] == 1.0 and by_id["q1"]["f1"] == 1.0
    assert by_id["q2"]["prediction"] == "Berlin" and by_id["q2"]["em"] == 0.0
    assert by_id["q3"]["retrieved_ids"] == [] and by_id["q3"]["prediction"] == "I do not know."
    assert by_id["q3"]["f1"] == 0.0
    # retrieval recall on the agent's scale: did the top-k passages hold a gold answer?
    assert by_id["q1"]["evidence_found"] and not by_id["q3"]["evidence_found"]
    assert [r["benchmark"] for r in rows] == ["nq", "nq", "popqa"]
    assert len(reader.prompts) == 3 and "(no passages)" in reader.prompts[2]
