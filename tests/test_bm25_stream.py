"""The streaming BM25 index equals the old in-memory one: same arrays, same hits, same scores."""

from __future__ import annotations

import gzip
import json
import random

import bm25s
import numpy as np
import pytest

from grepseek_lib.data.formats import iter_corpus
from grepseek_lib.eval import bm25_index
from grepseek_lib.eval.bm25_index import LAYOUT_FILE, load_or_build_index, retrieve

WORDS = ("river city capital mountain Danube Paris Vienna bridge castle king queen war peace river-bank "
         "1848 école naïve 東京 music film river castle").split()
STOP = "the of and a in is to".split()


def random_passages(n: int = 80, seed: int = 7) -> list[tuple[str, str, str]]:
    """Small vocabulary, repeated words, exact duplicates (ties) and passages with nothing to index."""
    rng = random.Random(seed)
    passages = []
    for i in range(n):
        words = [rng.choice(WORDS + STOP) for _ in range(rng.randint(0, 25))]
        passages.append((f"p{i}", rng.choice(WORDS), " ".join(words)))
    passages += [("dup1", passages[3][1], passages[3][2]), ("dup2", passages[3][1], passages[3][2])]
    passages += [("stop", "The", "the of and a"), ("empty", "", "")]
    return passages


def write_jsonl(path, passages):
    path.write_text("".join(json.dumps({"id": i, "contents": f'"{t}"\n{x}'}) + "\n\n" for i, t, x in passages))
    return path


def write_tsv(path, passages):
    rows = "".join(f'{i}\t"{x}"\t{t}\r\n' for i, t, x in passages)
    data = ("id\ttext\ttitle\n" + rows).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def reference(corpus, questions, k):
    """The pre-streaming baseline, kept as the oracle: every passage in a list, bm25s built in memory."""
    passages = list(iter_corpus(corpus))
    retriever = bm25s.BM25()
    texts = [f"{p['title']} {p['text']}" for p in passages]
    retriever.index(bm25s.tokenize(texts, stopwords="en", return_ids=True, show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(list(questions), stopwords="en", return_ids=False, show_progress=False)
    docs, scores = retriever.retrieve(tokens, k=min(k, len(passages)), show_progress=False)
    hits = [[(passages[int(d)]["id"], passages[int(d)]["text"], float(s)) for d, s in zip(r, sc, strict=True)
             if float(s) > 0] for r, sc in zip(docs, scores, strict=True)]
    return hits, retriever


def questions(seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    asked = [" ".join(rng.choice(WORDS + STOP) for _ in range(rng.randint(1, 6))) for _ in range(40)]
    return asked + ["the of", "zzyzx unknown", "river", "Danube Vienna bridge river river"]


@pytest.mark.parametrize("name", ["corpus.jsonl", "psgs.tsv", "psgs.tsv.gz"])
def test_streamed_index_matches_the_in_memory_one(tmp_path, name):
    writer = write_tsv if ".tsv" in name else write_jsonl
    corpus = writer(tmp_path / name, random_passages())
    index = load_or_build_index(corpus, tmp_path / "idx", batch_passages=7)  # many batches, some tokenless
    asked = questions()
    for k in (1, 3, 10, 500):
        expected, retriever = reference(corpus, asked, k)
        got = [[(p.id, p.text, p.score) for p in hits] for hits in retrieve(index, asked, k=k)]
        assert got == expected  # same ids, same order (ties too), bit-identical scores
    for key in ("data", "indices", "indptr"):
        saved = np.load(tmp_path / "idx" / f"{key}.csc.index.npy")
        assert saved.dtype == retriever.scores[key].dtype and np.array_equal(saved, retriever.scores[key])
    assert json.loads((tmp_path / "idx" / "vocab.index.json").read_text()) == retriever.vocab_dict
    assert index.num_docs == retriever.scores["num_docs"] == len(random_passages())


def test_retrieval_reads_only_the_hits_from_the_corpus(tmp_path, monkeypatch):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", random_passages())
    index = load_or_build_index(corpus, tmp_path / "idx")
    assert not hasattr(index, "passages") and index.lines.dtype == np.uint64
    asked = []
    real = bm25_index.read_corpus_records

    def counting(path, places):
        asked.append(list(places))
        return real(path, places)

    monkeypatch.setattr(bm25_index, "read_corpus_records", counting)
    monkeypatch.setattr(bm25_index, "iter_corpus_records", lambda *_: pytest.fail("retrieval streamed the corpus"))
    hits = retrieve(index, ["river castle", "Paris"], k=3)
    assert len(asked) == 1 and len(asked[0]) == len({p.id for row in hits for p in row}) <= 6


def test_old_layout_and_other_corpus_folders_are_rebuilt_not_misread(tmp_path, capsys):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", random_passages())
    old = tmp_path / "old"
    _, retriever = reference(corpus, ["x"], 1)
    retriever.save(str(old), show_progress=False)  # what the old code cached: bm25s files + ids.json
    (old / "ids.json").write_text(json.dumps([p["id"] for p in iter_corpus(corpus)]))
    (old / "notes.txt").write_text("mine")
    index = load_or_build_index(corpus, old)
    assert "old layout" in capsys.readouterr().err
    assert not (old / "ids.json").exists() and (old / LAYOUT_FILE).is_file() and (old / "notes.txt").is_file()
    assert [n for n in (p.name for p in tmp_path.iterdir()) if n.startswith(".")] == []  # work folder gone
    expected, _ = reference(corpus, ["river castle"], 3)
    assert [[(p.id, p.text, p.score) for p in hits] for hits in retrieve(index, ["river castle"], k=3)] == expected

    other = write_jsonl(tmp_path / "other.jsonl", [("x1", "Nile", "The Nile river in Africa")])
    moved = load_or_build_index(other, old)  # the same folder, another corpus: rebuilt for it
    assert json.loads((old / LAYOUT_FILE).read_text())["passages"] == 1
    assert [p.id for p in retrieve(moved, ["Nile"], k=3)[0]] == ["x1"]


def test_half_built_folder_is_rebuilt(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", random_passages())
    index = load_or_build_index(corpus, tmp_path / "idx")
    (index.path / "lines.u64").write_bytes(b"\0" * 16)  # a table that does not match the layout file
    again = load_or_build_index(corpus, tmp_path / "idx")
    assert again.num_docs == len(random_passages())
