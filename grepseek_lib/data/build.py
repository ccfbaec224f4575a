"""Build the mini-wiki: corpus.jsonl (wiki-18 format) + benchmarks/*.jsonl (FlashRAG format).

Deterministic: the same raw folder gives the same bytes (fixed source order, one seeded shuffle,
sorted-free json.dumps of records built in file order), so the data card's figures are reproducible.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.data import raw as rawsrc
from grepseek_lib.data.card import summary_table, write_card
from grepseek_lib.data.formats import corpus_line, write_jsonl, write_lines
from grepseek_lib.data.support import YES_NO, CorpusView, SupportFinder, normalize_text, question_key
from grepseek_lib.metrics import normalize_answer

#: Seed of the one shuffle that interleaves the sources (and so fixes every passage id).
SEED = 18
CORPUS_NAME = config.LOGICAL_CORPUS_NAME
STATS_NAME = "stats.json"
#: Link hops the support filter may follow (MuSiQue questions chain 2-4 hops; the others 1-2).
MAX_HOPS = {"musique": 3}


@dataclass
class Corpus:
    """Unique passages in corpus order (index i has id str(i + 1)) and where each came from."""

    passages: list[tuple[str, str]]
    sources: list[str]
    #: Lines kept byte-exact (the real wiki-18 sample, whose titles are not always quoted).
    verbatim: dict[tuple[str, str], str] = field(default_factory=dict)
    id_of: dict[tuple[str, str], str] = field(default_factory=dict)
    ids_by_title: dict[str, list[str]] = field(default_factory=dict)

    def line(self, index: int) -> str:
        key = self.passages[index]
        verbatim = self.verbatim.get(key)
        if verbatim is not None:
            return json.dumps({"id": str(index + 1), "contents": verbatim})
        return corpus_line(index + 1, *key)


def collect_passages(raw: Path) -> tuple[Corpus, list[dict[str, Any]]]:
    """Read every passage source, drop duplicates (same title and text), interleave with a seeded shuffle."""
    seen: set[tuple[str, str]] = set()
    unique: list[tuple[str, str]] = []
    origin: list[str] = []
    contents: dict[tuple[str, str], str] = {}
    source_stats = []
    for source in rawsrc.PASSAGE_SOURCES:
        read = kept = 0
        for title, text, *verbatim in source.read(raw):
            if not text.strip():
                continue
            read += 1
            key = (title, text)
            if key in seen:
                continue
            seen.add(key)
            unique.append(key)
            origin.append(source.name)
            if verbatim:
                contents[key] = verbatim[0]
            kept += 1
        source_stats.append({"name": source.name, "description": source.description,
                             "files": list(source.files), "read": read, "kept": kept})
    order = list(range(len(unique)))
    random.Random(SEED).shuffle(order)
    corpus = Corpus([unique[i] for i in order], [origin[i] for i in order], contents)
    for pos, key in enumerate(corpus.passages):
        pid = str(pos + 1)
        corpus.id_of[key] = pid
        corpus.ids_by_title.setdefault(key[0], []).append(pid)
    return corpus, source_stats


def _resolve_gold(rec: dict[str, Any], corpus: Corpus) -> None:
    """Private (title, text) gold paragraphs -> metadata.gold_passages {title: id or [ids]}."""
    gold: dict[str, list[str]] = {}
    for title, text in rec.pop(rawsrc.GOLD_KEY, []):
        pid = corpus.id_of.get((title, text))
        ids = [pid] if pid else corpus.ids_by_title.get(title, [])
        gold.setdefault(title, [])
        gold[title].extend(i for i in ids if i not in gold[title])
    rec["metadata"]["gold_passages"] = {t: ids[0] if len(ids) == 1 else ids for t, ids in gold.items()}


def _gold_supports(rec: dict[str, Any], corpus: Corpus, finder: SupportFinder) -> bool:
    """Sources with gold paragraphs: the answer must be in the paragraph that states it."""
    answers = rec["golden_answers"]
    if {normalize_answer(a) for a in answers} & YES_NO:
        return True
    paragraphs = rec.pop("_support", None) or rec.get(rawsrc.GOLD_KEY, [])
    pids = [int(corpus.id_of[p]) - 1 for p in paragraphs if p in corpus.id_of]
    return any(finder.passage_has_answer(pid, answers) for pid in pids)


def read_candidates(raw: Path) -> dict[str, list[dict[str, Any]]]:
    """Every question of every source, training splits first (they decide what eval must leave out)."""
    readers = {**rawsrc.TRAIN_READERS, **rawsrc.BENCHMARK_READERS}
    return {name: reader(raw) for name, reader in readers.items()}


def select_questions(
    candidates_by_name: dict[str, list[dict[str, Any]]], corpus: Corpus, finder: SupportFinder
) -> tuple[dict, dict]:
    """Keep the questions the corpus supports, and keep train and eval disjoint."""
    outputs: dict[str, list[dict[str, Any]]] = {}
    stats: dict[str, dict[str, Any]] = {}
    train_keys: set[str] = set()
    for name in rawsrc.TRAIN_READERS:
        candidates = candidates_by_name[name]
        kept = [r for r in candidates if _gold_supports(r, corpus, finder)]
        for rec in kept:
            _resolve_gold(rec, corpus)
            train_keys.add(question_key(rec["question"]))
        outputs[name] = kept
        stats[name] = {"role": "train", "candidates": len(candidates), "filter": "gold"}
    for name in rawsrc.BENCHMARK_READERS:
        candidates = candidates_by_name[name]
        fresh, seen, overlap = [], set(), 0
        for rec in candidates:
            key = question_key(rec["question"])
            if key in train_keys:
                overlap += 1
            elif key not in seen:
                seen.add(key)
                fresh.append(rec)
        if name == "bamboogle":
            kept, how = fresh, "none (out of corpus)"
        elif name == "popqa":
            kept, how = [r for r in fresh if _gold_supports(r, corpus, finder)], "gold"
            for rec in kept:
                _resolve_gold(rec, corpus)
        else:
            hops = MAX_HOPS.get(name, 2)
            kept = [r for r in fresh if finder.supports(r["question"], r["golden_answers"], hops)]
            how = f"title+answer, up to {hops} hops"
        outputs[name] = kept
        stats[name] = {"role": "eval", "candidates": len(candidates), "filter": how,
                       "dropped_train_overlap": overlap}
    for name, records in outputs.items():
        for rec in records:
            rec.pop("_support", None)
            rec.pop(rawsrc.GOLD_KEY, None)
        covered = sum(finder.in_corpus(r["golden_answers"]) for r in records)
        stats[name].update(kept=len(records), answer_in_corpus=covered,
                           coverage=round(covered / len(records), 4) if records else 0.0)
    return outputs, stats


def _all_answers(candidates_by_name: dict[str, list[dict[str, Any]]]) -> set[str]:
    answers = {normalize_text(a) for records in candidates_by_name.values()
               for rec in records for a in rec["golden_answers"]}
    return answers - {""}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_miniwiki(raw: Path, out: Path, card: Path | None = None, verbose: bool = True) -> dict[str, Any]:
    """Build corpus + benchmarks + stats.json into `out`, regenerate the data card; return the stats."""
    started = time.perf_counter()
    raw, out = Path(raw).expanduser(), Path(out).expanduser()
    rawsrc.check_raw_dir(raw)
    corpus, source_stats = collect_passages(raw)
    corpus_path = out / CORPUS_NAME
    write_lines(corpus_path, (corpus.line(i) for i in range(len(corpus.passages))))
    view = CorpusView.build(corpus.passages)
    candidates = read_candidates(raw)
    finder = SupportFinder.build(view, _all_answers(candidates), [x for _, x in corpus.passages])
    outputs, bench_stats = select_questions(candidates, corpus, finder)
    for name, records in outputs.items():
        write_jsonl(out / "benchmarks" / f"{name}.jsonl", records)
    stats = {
        "seed": SEED,
        "passages": len(corpus.passages),
        "corpus_bytes": corpus_path.stat().st_size,
        "corpus_sha256": _sha256(corpus_path),
        "sources": source_stats,
        "benchmarks": bench_stats,
    }
    (out / STATS_NAME).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    write_card(stats, raw, card if card is not None else out / "README.md")
    if verbose:
        print(summary_table(stats))
        print(f"wrote {out} in {time.perf_counter() - started:.1f} s")
    return stats
