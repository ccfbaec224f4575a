"""The index-based baseline: BM25 (bm25s) top-k passages read by the SAME model in one shot.

It answers "how much does direct corpus interaction buy over a classic retrieve-then-read pipeline
with the same reader?". The index is cached under data/ keyed by the corpus bytes, so a rebuilt
corpus never reuses a stale index.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.actions import parse_action
from grepseek_lib.agent.backends import make_backend
from grepseek_lib.agent.evidence import answer_in
from grepseek_lib.data.formats import iter_corpus
from grepseek_lib.errors import UserError
from grepseek_lib.eval.identity import file_sha256
from grepseek_lib.eval.runner import RECORDS, plan_questions, write_tables
from grepseek_lib.metrics import exact_match, f1

#: Passages given to the reader by default (short enough for a 135M model's context).
DEFAULT_TOP_K = 3
#: Words kept of a reader reply that has no <answer> block (one short answer, not an essay).
MAX_FALLBACK_ANSWER_WORDS = 12

READER_SYSTEM_PROMPT = (
    "You answer questions using the passages given. "
    "Reply with the shortest possible answer inside <answer></answer>, nothing else."
)


@dataclass(frozen=True)
class Passage:
    """One corpus line: its id, title and text, plus the BM25 score it was retrieved with."""

    id: str
    title: str
    text: str
    score: float = 0.0


@dataclass
class Bm25Index:
    """A loaded bm25s retriever and the corpus line each of its documents stands for."""

    retriever: Any
    passages: list[Passage]
    path: Path


def read_passages(corpus: Path) -> list[Passage]:
    """Every passage of the corpus (any format data.formats reads), in file order."""
    passages = [Passage(id=p["id"], title=p["title"], text=p["text"]) for p in iter_corpus(corpus)]
    if not passages:
        raise UserError(f"corpus is empty: {corpus}")
    return passages


def corpus_fingerprint(corpus: Path) -> str:
    """Content hash of the corpus: the cache key of its index (hashed once per size and mtime)."""
    return file_sha256(corpus)[:16]


def default_index_dir(corpus: Path) -> Path:
    return config.data_dir() / "bm25" / corpus_fingerprint(corpus)


def _tokenize(texts: Sequence[str], *, as_ids: bool):
    import bm25s

    return bm25s.tokenize(list(texts), stopwords="en", return_ids=as_ids, show_progress=False)


def load_or_build_index(corpus: Path, index_dir: Path | None = None) -> Bm25Index:
    """Load the cached index of this corpus, or build it (title + text of every passage) and cache it."""
    import bm25s

    corpus = Path(corpus)
    passages = read_passages(corpus)
    index_dir = Path(index_dir) if index_dir else default_index_dir(corpus)
    ids_file = index_dir / "ids.json"
    if ids_file.is_file():
        ids = json.loads(ids_file.read_text())
        if ids == [p.id for p in passages]:
            retriever = bm25s.BM25.load(str(index_dir), show_progress=False)
            return Bm25Index(retriever=retriever, passages=passages, path=index_dir)
    retriever = bm25s.BM25()
    retriever.index(_tokenize([f"{p.title} {p.text}" for p in passages], as_ids=True), show_progress=False)
    index_dir.mkdir(parents=True, exist_ok=True)
    retriever.save(str(index_dir), show_progress=False)
    ids_file.write_text(json.dumps([p.id for p in passages]))  # written last: marks a complete index
    return Bm25Index(retriever=retriever, passages=passages, path=index_dir)


def retrieve(index: Bm25Index, questions: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[Passage]]:
    """Top-k passages per question, best first; passages sharing no word with the question are dropped."""
    if k < 1:
        raise UserError(f"top-k must be at least 1, got {k}")
    if not questions:
        return []
    k = min(k, len(index.passages))
    doc_ids, scores = index.retriever.retrieve(_tokenize(questions, as_ids=False), k=k, show_progress=False)
    results = []
    for row_ids, row_scores in zip(doc_ids, scores, strict=True):
        hits = []
        for doc, score in zip(row_ids, row_scores, strict=True):
            if float(score) > 0:
                p = index.passages[int(doc)]
                hits.append(Passage(id=p.id, title=p.title, text=p.text, score=float(score)))
        results.append(hits)
    return results


def reader_messages(question: str, passages: Sequence[Passage]) -> list[dict]:
    """The one-shot prompt: numbered passages, then the question."""
    context = "\n\n".join(f"[{i}] {p.title}\n{p.text}" for i, p in enumerate(passages, 1)) or "(no passages)"
    return [
        {"role": "system", "content": READER_SYSTEM_PROMPT},
        {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {question}"},
    ]


def extract_reader_answer(reply: str) -> str:
    """The first <answer> block (the agent's own answer rule), else the reply's first line, capped.

    The reader was never trained on the tag format, so unlike the agent's reward we do not score a
    missing tag as 0: the baseline would then measure format following, not retrieval.
    """
    action = parse_action(reply)
    if action.kind == "answer":
        return action.answer.strip()
    for line in reply.splitlines():
        line = line.replace("<answer>", " ").replace("</answer>", " ").strip()
        if line:
            return " ".join(line.split()[:MAX_FALLBACK_ANSWER_WORDS])
    return ""


def evaluate_bm25(
    records: Iterable[dict],
    backend: Any,
    index: Bm25Index,
    *,
    k: int = DEFAULT_TOP_K,
    batch_size: int = 4,
    max_new_tokens: int = 32,
) -> list[dict]:
    """Retrieve, read in one shot with `backend` (greedy), score with grepseek_lib.metrics; one row per question.

    `records` are benchmark rows (id, question, golden_answers) with a `benchmark` key added.
    """
    from tqdm.auto import tqdm

    records = list(records)
    rows = []
    for start in tqdm(range(0, len(records), batch_size), desc="bm25 read", unit="batch"):
        batch = records[start : start + batch_size]
        hits = retrieve(index, [r["question"] for r in batch], k=k)
        began = time.perf_counter()
        generations = backend.generate(
            [reader_messages(r["question"], h) for r, h in zip(batch, hits, strict=True)],
            max_new_tokens=max_new_tokens,
            temperature=0.0,
            stop=["</answer>"],
        )
        batch_s = (time.perf_counter() - began) / max(len(batch), 1)
        for record, passages, gen in zip(batch, hits, generations, strict=True):
            reply = gen.text
            answer = extract_reader_answer(reply)
            gold = list(record["golden_answers"])
            rows.append(
                {
                    "benchmark": record.get("benchmark", ""),
                    "id": str(record["id"]),
                    "question": record["question"],
                    "golden_answers": gold,
                    "prediction": answer,
                    "raw_output": reply,
                    "retrieved_ids": [p.id for p in passages],
                    "evidence_found": answer_in("\n".join(f"{p.title}\n{p.text}" for p in passages), gold),
                    "em": float(exact_match(answer, gold)),
                    "f1": float(f1(answer, gold)),
                    "llm_s": float(getattr(gen, "latency_s", None) or batch_s),
                }
            )
    return rows


def evaluate_baseline(
    model: str,
    benchmarks: Sequence[str],
    limit: int | None,
    out_dir: Path,
    *,
    corpus: Path,
    benchmarks_dir: Path | None = None,
    k: int = DEFAULT_TOP_K,
    backend: Any = None,
    backend_kind: str = "hf",
    max_new_tokens: int = 32,
    batch_size: int = 4,
    backend_kwargs: dict | None = None,
):
    """The baseline over the same questions eval.runner.evaluate takes (first `limit` per benchmark).

    Writes out_dir/records.jsonl and the tables in the runner's layout (so comparison code reads both
    alike) and returns the per-benchmark + micro/macro table.
    """
    records = [{**q, "benchmark": name} for name, q in plan_questions(benchmarks, limit, benchmarks_dir)]
    index = load_or_build_index(Path(corpus))
    if backend is None:
        backend = make_backend(backend_kind, model, **(backend_kwargs or {}))
    rows = evaluate_bm25(records, backend, index, k=k, batch_size=batch_size, max_new_tokens=max_new_tokens)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / RECORDS).open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return write_tables(out_dir, metrics=("em", "f1", "evidence_found"))
