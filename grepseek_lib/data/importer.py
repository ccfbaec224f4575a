"""Point the pipeline at a real wiki-18 + FlashRAG download instead of the mini-wiki.

The corpus is linked, never copied (14 GB), after a check of its first lines; a DPR tsv is converted
to wiki-18 jsonl in one streaming pass. FlashRAG benchmark files are copied under our names.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.data.formats import (
    corpus_line,
    is_dpr_tsv,
    iter_corpus,
    load_benchmark,
    write_jsonl,
    write_lines,
)
from grepseek_lib.errors import UserError

#: Lines of a linked corpus parsed up front (a full check would read all 14 GB).
CHECK_LINES = 1000
#: Where each of our benchmarks lives in a FlashRAG dataset download, and its split.
FLASHRAG_FILES = {
    "nq": "nq/test.jsonl", "triviaqa": "triviaqa/test.jsonl", "popqa": "popqa/test.jsonl",
    "hotpotqa": "hotpotqa/dev.jsonl", "2wiki": "2wikimultihopqa/dev.jsonl", "musique": "musique/dev.jsonl",
    "bamboogle": "bamboogle/test.jsonl",
}
assert tuple(FLASHRAG_FILES) == config.BENCHMARKS


def import_corpus(source: Path, out: Path) -> dict[str, Any]:
    """out/corpus.jsonl: a link to a wiki-18 jsonl, or a conversion of a DPR tsv."""
    source = Path(source).expanduser().resolve()
    dest = out / config.LOGICAL_CORPUS_NAME
    if is_dpr_tsv(source):
        from tqdm import tqdm

        passages = tqdm(iter_corpus(source), desc="converting DPR tsv", unit=" passages", mininterval=2)
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


def import_benchmarks(folder: Path, out: Path) -> dict[str, int]:
    """Copy the FlashRAG files that exist to out/benchmarks/<name>.jsonl; returns questions per name."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise UserError(f"--benchmarks-from {folder}: not a folder (expected the FlashRAG dataset folder)")
    counts = {}
    for name, rel in FLASHRAG_FILES.items():
        path = folder / rel
        if not path.is_file():
            continue
        split = Path(rel).stem
        records = load_benchmark(path)
        for rec in records:
            rec["metadata"].setdefault("source", name)
            rec["metadata"].setdefault("dataset_split", split)
        counts[name] = write_jsonl(out / "benchmarks" / f"{name}.jsonl", records)
    if not counts:
        wanted = ", ".join(FLASHRAG_FILES.values())
        raise UserError(f"--benchmarks-from {folder}: none of {wanted} found")
    return counts
