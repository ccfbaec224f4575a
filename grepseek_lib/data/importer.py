"""Point the pipeline at a real wiki-18 + FlashRAG download instead of the mini-wiki.

The corpus is linked, never copied (14 GB), after a check of its first lines; a DPR tsv is converted
to wiki-18 jsonl in one streaming pass. FlashRAG files are copied under our names: the seven eval
splits, and the training splits cold start and GRPO read (`nq/train.jsonl` + `hotpotqa/train.jsonl`,
the paper's training set, and any other split named). As in the mini-wiki build, an eval question that
is also a training question is dropped, and the training questions' supporting titles are resolved to
corpus passage ids (metadata.gold_passages, what the offline Tutor reads). Everything streams: one pass
over each question file and at most one pass over the corpus, so memory stays flat at wiki-18 size.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.data.formats import (
    corpus_line,
    is_dpr_tsv,
    iter_benchmark,
    iter_corpus,
    write_jsonl,
    write_lines,
)
from grepseek_lib.data.support import question_key
from grepseek_lib.errors import UserError
from grepseek_lib.progress import progress_bar

#: Lines of a linked corpus parsed up front (a full check would read all 14 GB).
CHECK_LINES = 1000
#: Where each of our benchmarks lives in a FlashRAG dataset download, and its split.
FLASHRAG_FILES = {
    "nq": "nq/test.jsonl", "triviaqa": "triviaqa/test.jsonl", "popqa": "popqa/test.jsonl",
    "hotpotqa": "hotpotqa/dev.jsonl", "2wiki": "2wikimultihopqa/dev.jsonl", "musique": "musique/dev.jsonl",
    "bamboogle": "bamboogle/test.jsonl",
}
assert tuple(FLASHRAG_FILES) == config.BENCHMARKS
#: The paper's training set (NQ + HotpotQA train), imported whenever the download has it.
FLASHRAG_TRAIN_FILES = ("nq/train.jsonl", "hotpotqa/train.jsonl")
#: Passages kept per supporting title: wiki-18 cuts an article into 100-word passages, and the Tutor
#: reads the first ones (the lead), where most answers are.
MAX_IDS_PER_TITLE = 20


def import_corpus(source: Path, out: Path) -> dict[str, Any]:
    """out/corpus.jsonl: a link to a wiki-18 jsonl, or a conversion of a DPR tsv."""
    source = Path(source).expanduser().resolve()
    dest = out / config.LOGICAL_CORPUS_NAME
    if is_dpr_tsv(source):
        passages = progress_bar(iter_corpus(source), desc="converting DPR tsv", unit=" passages", mininterval=2)
        count = write_lines(dest, (corpus_line(p["id"], p["title"], p["text"]) for p in passages))
        return {"corpus_from": str(source), "how": "converted from DPR tsv", "passages": count}
    checked = sum(1 for _ in itertools.islice(iter_corpus(source), CHECK_LINES))
    if not checked:
        raise UserError(f"corpus {source} has no passages")
    out.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or dest.exists():
        if dest.resolve() == source:
            return {"corpus_from": str(source), "how": "already linked", "checked_lines": checked}
        dest.unlink()
    os.symlink(source, dest)
    return {"corpus_from": str(source), "how": "linked", "checked_lines": checked}


def split_file(name: str) -> str:
    """A training split name as its FlashRAG file: `hotpotqa_train` -> `hotpotqa/train.jsonl`."""
    dataset, sep, split = name.rpartition("_")
    if not sep or not dataset or not split or "/" in name:
        raise UserError(f"training split {name!r}: expected <dataset>_<split> as in FlashRAG, e.g. hotpotqa_train "
                        "(read from <folder>/hotpotqa/train.jsonl)")
    return f"{dataset}/{split}.jsonl"


def split_name(rel: str) -> str:
    """`hotpotqa/train.jsonl` -> `hotpotqa_train`, the name cold start and GRPO read."""
    path = Path(rel)
    return f"{path.parent.name}_{path.name.removesuffix('.jsonl')}"


def gold_titles(metadata: dict[str, Any]) -> list[str]:
    """Supporting titles of a training question, from the annotations FlashRAG keeps (HotpotQA / 2Wiki
    supporting_facts as a list of pairs or HF's dict of lists, MuSiQue paragraphs, or our own lists)."""
    for key in ("gold_titles", "support_titles"):
        if isinstance(metadata.get(key), list):
            return _unique(metadata[key])
    facts = metadata.get("supporting_facts")
    if isinstance(facts, dict):
        return _unique(facts.get("title") or [])
    if isinstance(facts, list):
        return _unique(f[0] for f in facts if isinstance(f, list | tuple) and f)
    paragraphs = metadata.get("paragraphs")
    if isinstance(paragraphs, list):
        return _unique(p.get("title") for p in paragraphs if isinstance(p, dict) and p.get("is_supporting"))
    return []


def _unique(titles: Iterable[Any]) -> list[str]:
    return list(dict.fromkeys(t for t in titles if isinstance(t, str) and t.strip()))


def titles_to_ids(corpus: Path, wanted: set[str]) -> tuple[dict[str, list[str]], int]:
    """One streaming pass: the first MAX_IDS_PER_TITLE passage ids of each wanted title, and the passage count."""
    ids: dict[str, list[str]] = {}
    count = 0
    for passage in progress_bar(iter_corpus(corpus), desc="gold titles", unit=" passages", mininterval=5):
        count += 1
        title = passage["title"]
        if title in wanted:
            found = ids.setdefault(title, [])
            if len(found) < MAX_IDS_PER_TITLE:
                found.append(passage["id"])
    return ids, count


def count_lines(path: Path) -> int:
    """Passages of a wiki-18 file, counted as newlines in 16 MB blocks (no JSON parsing)."""
    lines = 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            lines += block.count(b"\n")
    return lines


def _copy_split(source: Path, dest: Path, name: str, *, role: str, drop: set[str] | None = None,
                gold: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Stream one FlashRAG file into out/benchmarks/<name>.jsonl; eval drops `drop` keys, train gets gold ids."""
    split = source.name.removesuffix(".jsonl")
    counts = {"candidates": 0, "dropped_train_overlap": 0, "gold_resolved": 0}

    def records() -> Iterable[dict[str, Any]]:
        for rec in iter_benchmark(source):
            counts["candidates"] += 1
            if drop is not None and question_key(rec["question"]) in drop:
                counts["dropped_train_overlap"] += 1
                continue
            meta = rec["metadata"]
            meta.setdefault("source", name.removesuffix(f"_{split}"))
            meta.setdefault("dataset_split", split)
            if gold is not None and "gold_passages" not in meta:
                titles = gold_titles(meta)
                resolved = {t: gold[t][0] if len(gold[t]) == 1 else gold[t] for t in titles if t in gold}
                meta["gold_titles"], meta["gold_passages"] = titles, resolved
            titles = meta.get("gold_titles") or []
            counts["gold_resolved"] += bool(titles) and set(titles) <= set(meta.get("gold_passages") or {})
            yield rec

    kept = write_jsonl(dest / f"{name}.jsonl", records())
    how = "gold titles -> corpus ids" if role == "train" else "train overlap dropped"
    return {"role": role, "candidates": counts["candidates"], "kept": kept, "filter": how,
            "dropped_train_overlap": counts["dropped_train_overlap"],
            **({"gold_resolved": counts["gold_resolved"]} if role == "train" else {})}


def _train_files(folder: Path, train_splits: Sequence[str]) -> dict[str, Path]:
    """The FlashRAG training files to import: the paper's when present, and every named one (must exist)."""
    files = {split_name(rel): folder / rel for rel in FLASHRAG_TRAIN_FILES if (folder / rel).is_file()}
    for name in train_splits:
        path = folder / split_file(name)
        if not path.is_file():
            raise UserError(f"training split {name}: {path} not found in the FlashRAG folder; download it or "
                            "leave the split out of train_splits")
        files[name] = path
    return files


def import_benchmarks(folder: Path, out: Path, train_splits: Sequence[str] = (),
                      corpus: Path | None = None) -> tuple[dict[str, dict[str, Any]], int | None]:
    """Copy the FlashRAG files that exist to out/benchmarks/<name>.jsonl, training splits first.

    Returns the per-split stats and, when gold titles were resolved, the corpus passage count."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise UserError(f"--benchmarks-from {folder}: not a folder (expected the FlashRAG dataset folder)")
    train = _train_files(folder, train_splits)
    evals = {name: folder / rel for name, rel in FLASHRAG_FILES.items() if (folder / rel).is_file()}
    if not evals and not train:
        wanted = ", ".join([*FLASHRAG_FILES.values(), *FLASHRAG_TRAIN_FILES])
        raise UserError(f"--benchmarks-from {folder}: none of {wanted} found")
    keys: set[str] = set()
    wanted_titles: set[str] = set()
    for path in train.values():
        for rec in iter_benchmark(path):
            keys.add(question_key(rec["question"]))
            wanted_titles.update(gold_titles(rec["metadata"]))
    gold, passages = ({}, None)
    if corpus is not None and corpus.is_file() and wanted_titles:
        gold, passages = titles_to_ids(corpus, wanted_titles)
    dest = out / "benchmarks"
    stats = {name: _copy_split(path, dest, name, role="train", gold=gold) for name, path in train.items()}
    stats.update({name: _copy_split(path, dest, name, role="eval", drop=keys) for name, path in evals.items()})
    return stats, passages


def import_dataset(out: Path, corpus_from: Path | None, benchmarks_from: Path | None,
                   train_splits: Sequence[str] = ()) -> dict[str, Any]:
    """The whole import into `out` (corpus link, benchmarks, stats.json); returns the stats."""
    out = Path(out).expanduser()
    if corpus_from is not None and not Path(corpus_from).expanduser().is_file():
        raise UserError(f"--corpus-from {corpus_from}: no such file (a wiki-18 .jsonl or DPR .tsv)")
    stats: dict[str, Any] = {"mode": "import"}
    if corpus_from is not None:
        stats["corpus"] = import_corpus(Path(corpus_from), out)
    corpus = out / config.LOGICAL_CORPUS_NAME
    passages = None
    if benchmarks_from is not None:
        stats["benchmarks"], passages = import_benchmarks(Path(benchmarks_from), out, train_splits, corpus)
    if corpus.is_file():
        stats["passages"] = passages if passages is not None else count_lines(corpus)
        stats["corpus_bytes"] = corpus.stat().st_size
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    return stats
