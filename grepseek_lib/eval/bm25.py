"""The index-based baseline: BM25 (bm25s) top-k passages read by the SAME model in one shot.

It answers "how much does direct corpus interaction buy over a classic retrieve-then-read pipeline
with the same reader?". The index (eval.bm25_index) is cached under data/ keyed by the corpus bytes,
so a rebuilt corpus never reuses a stale index, and it never holds the corpus texts in memory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from grepseek_lib.agent.actions import parse_action
from grepseek_lib.agent.backends import make_batch_backend
from grepseek_lib.agent.evidence import answer_in
from grepseek_lib.agent.loop import even_batches
from grepseek_lib.eval.bm25_index import DEFAULT_TOP_K, Bm25Index, Passage, load_or_build_index, retrieve
from grepseek_lib.eval.runner import RECORDS, plan_questions, write_tables
from grepseek_lib.metrics import exact_match, f1
from grepseek_lib.progress import progress_bar

#: Words kept of a reader reply that has no <answer> block (one short answer, not an essay).
MAX_FALLBACK_ANSWER_WORDS = 12

READER_SYSTEM_PROMPT = (
    "You answer questions using the passages given. "
    "Reply with the shortest possible answer inside <answer></answer>, nothing else."
)


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

    records = list(records)
    rows = []
    for batch in progress_bar(even_batches(records, batch_size), desc="bm25 read", unit="batch"):
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
        backend = make_batch_backend(backend_kind, model, batch_size, backend_kwargs)
    rows = evaluate_bm25(records, backend, index, k=k, batch_size=batch_size, max_new_tokens=max_new_tokens)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / RECORDS).open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return write_tables(out_dir, metrics=("em", "f1", "evidence_found"))
