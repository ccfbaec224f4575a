"""The BM25 (bm25s) index of a corpus, built and searched without holding the corpus in memory.

wiki-18 is 21M passages, 14 GB: its texts never fit in a Python list. Building streams the corpus
once to tokenize it (token ids spill to a temporary file beside the index), then reads the spilled
ids back batch by batch to fill bm25s's sparse matrix in place, on disk. Retrieval keeps no texts:
each passage is known by where its line starts in the corpus, and only the top-k are read back.

The scores are bm25s's own: the vocabulary is numbered as `bm25s.tokenize` numbers a whole corpus,
each batch is scored by bm25s's scorer, and the files are the ones `BM25.save` writes, so an index
built here equals, array for array, the one `BM25().index(tokenize(all texts))` builds in memory.

What stays in memory while building (the bound): the vocabulary dict (bm25s loads it whole at
query time too), about 28 bytes per distinct token (document frequency, column start and write
cursor, idf), 4 bytes per passage (its token count), and one batch of passages. The spilled token
ids take 4 bytes per token on disk (about 5 GB at wiki-18 size) until the build ends. The matrix
files are memory-mapped while they are filled and when they are searched, so their pages are the
kernel's cache, reclaimable, not the process's own heap.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grepseek_lib import config
from grepseek_lib.data.formats import CorpusRecord, iter_corpus_records, read_corpus_records
from grepseek_lib.errors import UserError
from grepseek_lib.eval.identity import file_sha256
from grepseek_lib.progress import progress_bar

#: Passages given to the reader by default (short enough for a 135M model's context).
DEFAULT_TOP_K = 3
#: Passages tokenized and scored at a time while building (a few MB of text).
BATCH_PASSAGES = 20_000
#: Version of the files in an index folder; an older folder (ids.json, texts in memory) is rebuilt.
LAYOUT = 2
#: Written last by a build: its layout, the corpus it indexes and its passage count.
LAYOUT_FILE = "layout.json"
#: uint64 pairs (byte offset where the passage's line starts, its line number), one per passage.
#: The line number is kept because a wiki-18 line without "id" takes it as its id.
LINES_FILE = "lines.u64"
#: The spilled token ids of the first pass (int32), deleted when the build ends.
TOKENS_FILE = "tokens.i32"
#: What the old layout left in a folder: it marked a complete index of the old kind.
OLD_LAYOUT_FILES = ("ids.json",)
#: A gzipped corpus this big is slow to read back (each read decompresses from the start).
GZIP_WARN_BYTES = 256 << 20


@dataclass(frozen=True)
class Passage:
    """One corpus line: its id, title and text, plus the BM25 score it was retrieved with."""

    id: str
    title: str
    text: str
    score: float = 0.0


@dataclass
class Bm25Index:
    """A loaded (memory-mapped) bm25s retriever and where each of its documents starts in the corpus."""

    retriever: Any
    corpus: Path
    lines: np.ndarray
    path: Path

    @property
    def num_docs(self) -> int:
        return len(self.lines)


def corpus_fingerprint(corpus: Path) -> str:
    """Content hash of the corpus: the cache key of its index (hashed once per size and mtime)."""
    return file_sha256(corpus)[:16]


def default_index_dir(corpus: Path) -> Path:
    return config.data_dir() / "bm25" / corpus_fingerprint(corpus)


def tokenize(texts: Sequence[str], *, as_ids: bool) -> Any:
    """bm25s's tokenizer as the index uses it: lower case, English stopwords dropped, no stemming."""
    import bm25s

    return bm25s.tokenize(list(texts), stopwords="en", return_ids=as_ids, show_progress=False)


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and length of each run of equal values in a sorted array.

    np.unique would do, but numpy 2's hash-based unique takes seconds on a batch's int64 keys
    (measured: 8.8 s against 0.12 s for a sort, on 1.2M keys).
    """
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1]))) if len(values) else values[:0]
    return starts, np.diff(np.append(starts, len(values)))


@dataclass
class _Counts:
    """What the first pass learns: the vocabulary in bm25s's numbering (first seen, first numbered),
    document frequencies, each passage's token count, and (passages, tokens, pairs) per batch."""

    vocab: dict[str, int] = field(default_factory=dict)
    df: np.ndarray = field(default_factory=lambda: np.zeros(1 << 16, dtype=np.int64))
    lengths: list[np.ndarray] = field(default_factory=list)
    batches: list[tuple[int, int, int]] = field(default_factory=list)

    def add_batch(self, texts: list[str]) -> np.ndarray:
        """Number the batch's tokens in the corpus-wide vocabulary; returns its token ids, flat."""
        local = tokenize(texts, as_ids=True)
        vocab = self.vocab  # the batch's own numbering is first-seen too, so new tokens keep that order
        to_global = np.fromiter((vocab.setdefault(t, len(vocab)) for t in local.vocab), np.int64, len(local.vocab))
        lengths = np.fromiter((len(doc) for doc in local.ids), np.int64, len(local.ids))
        flat = np.fromiter(itertools.chain.from_iterable(local.ids), np.int64, int(lengths.sum()))
        ids = to_global[flat]
        keys = np.sort((np.repeat(np.arange(len(lengths)), lengths) << 32) | ids)
        pairs = keys[_runs(keys)[0]]  # each (passage, token) pair once
        if len(vocab) > len(self.df):
            self.df = np.concatenate([self.df, np.zeros(max(len(vocab), 2 * len(self.df)) - len(self.df), np.int64)])
        self.df[: len(vocab)] += np.bincount(pairs & 0xFFFFFFFF, minlength=len(vocab))
        self.lengths.append(lengths.astype(np.uint32))
        self.batches.append((len(lengths), len(ids), len(pairs)))
        return ids.astype(np.int32)


def _batches(records: Iterable[CorpusRecord], size: int) -> Iterator[list[CorpusRecord]]:
    iterator = iter(records)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def _tokenize_pass(corpus: Path, work: Path, batch_passages: int) -> _Counts:
    """Stream the corpus once: spill token ids and line places to `work`, count what scoring needs."""

    counts = _Counts()
    with (
        open(work / TOKENS_FILE, "wb") as tokens,
        open(work / LINES_FILE, "wb") as lines,
        progress_bar(desc="bm25 index: tokenize", unit="passage", unit_scale=True) as bar,
    ):
        for batch in _batches(iter_corpus_records(corpus), batch_passages):
            lines.write(np.array([(offset, lineno) for offset, lineno, _ in batch], dtype=np.uint64).tobytes())
            tokens.write(counts.add_batch([f"{p['title']} {p['text']}" for _, _, p in batch]).tobytes())
            bar.update(len(batch))
    if not counts.batches:
        raise UserError(f"corpus is empty: {corpus}")
    return counts


def _idf(df: np.ndarray, n_docs: int, idf_fn: Any, dtype: str) -> np.ndarray:
    """bm25s's idf array, value by value with its own function (a vectorised log could differ in the last bit)."""
    idf = np.zeros(len(df), dtype=dtype)
    step = 1 << 20
    for start in range(0, len(df), step):
        for i, count in enumerate(df[start : start + step].tolist(), start):
            if count:
                idf[i] = idf_fn(count, N=n_docs)
    return idf


def _scatter(data: np.ndarray, indices: np.ndarray, heads: np.ndarray,
             batch: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Counting-sort one batch's (score, passage, token) triples into their token columns.

    Passages arrive in file order and the sort is stable, so each column's passages stay ascending,
    the order bm25s's own CSC builder leaves them in.
    """
    scores, rows, cols = batch
    order = np.argsort(cols, kind="stable")
    cols = cols[order]
    first, count = _runs(cols)
    tokens = cols[first]
    places = heads[cols] + (np.arange(len(cols)) - np.repeat(first, count))
    data[places] = scores[order]
    indices[places] = rows[order]
    heads[tokens] += count


def _score_pass(counts: _Counts, work: Path) -> dict[str, Any]:
    """Read the spilled ids back a batch at a time and fill bm25s's CSC arrays, memory-mapped in `work`."""
    import bm25s
    from bm25s.scoring import _build_scores_and_indices_for_matrix, _select_idf_scorer

    bm = bm25s.BM25()  # its defaults (lucene, float32): the parameters BM25().index would use
    n_vocab, lengths = len(counts.vocab), np.concatenate(counts.lengths)
    n_docs, df = len(lengths), counts.df[:n_vocab]
    avg_doc_len = lengths.mean()  # float64 mean of exact integers: the value bm25s computes from its lists
    idf = _idf(df, n_docs, _select_idf_scorer(bm.idf_method), bm.dtype)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    if indptr[-1] == 0:
        raise UserError("the corpus has no word BM25 can index (every passage is empty or stopwords)")
    data = np.lib.format.open_memmap(work / "data.csc.index.npy", "w+", bm.dtype, (int(indptr[-1]),))
    indices = np.lib.format.open_memmap(work / "indices.csc.index.npy", "w+", bm.int_dtype, (int(indptr[-1]),))
    heads = indptr[:-1].copy()
    tokens = np.memmap(work / TOKENS_FILE, dtype=np.int32, mode="r")
    doc = tok = 0
    for n_passages, n_tokens, n_pairs in progress_bar(counts.batches, desc="bm25 index: score", unit="batch"):
        ends = np.cumsum(lengths[doc : doc + n_passages], dtype=np.int64)[:-1]
        docs = [ids.tolist() for ids in np.split(np.asarray(tokens[tok : tok + n_tokens]), ends)]
        scores, rows, cols = _build_scores_and_indices_for_matrix(
            corpus_token_ids=docs, idf_array=idf, avg_doc_len=avg_doc_len, doc_frequencies={0: n_pairs},
            k1=bm.k1, b=bm.b, delta=bm.delta, nonoccurrence_array=None, method=bm.method,
            dtype=bm.dtype, int_dtype=bm.int_dtype, show_progress=False,
        )  # doc_frequencies only sizes its output: this batch's distinct (passage, token) pairs
        _scatter(data, indices, heads, (scores, rows.astype(np.int64) + doc, cols))
        doc, tok = doc + n_passages, tok + n_tokens
    data.flush()
    indices.flush()
    del data, indices, tokens
    np.save(work / "indptr.csc.index.npy", indptr)
    return _write_bm25s_meta(bm, counts.vocab, n_vocab, n_docs, work)


def _write_bm25s_meta(bm: Any, vocab: dict[str, int], n_vocab: int, n_docs: int, work: Path) -> dict[str, Any]:
    """vocab.index.json and params.index.json as BM25.save writes them (with index()'s empty token)."""
    import bm25s

    vocab.setdefault("", n_vocab)  # index(create_empty_token=True): "" after the last token
    (work / "vocab.index.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    params = dict(k1=bm.k1, b=bm.b, delta=bm.delta, method=bm.method, idf_method=bm.idf_method, dtype=bm.dtype,
                  int_dtype=bm.int_dtype, num_docs=n_docs, version=bm25s.__version__, backend=bm.backend)
    (work / "params.index.json").write_text(json.dumps(params, indent=4))
    return params


def _read_layout(index_dir: Path) -> dict[str, Any]:
    try:
        layout = json.loads((index_dir / LAYOUT_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return layout if isinstance(layout, dict) else {}


def _is_current(index_dir: Path, fingerprint: str) -> bool:
    """A complete index of this layout, of this corpus, whose line table has one row per passage."""
    layout = _read_layout(index_dir)
    if layout.get("layout") != LAYOUT or layout.get("corpus") != fingerprint:
        return False
    lines = index_dir / LINES_FILE
    return lines.is_file() and lines.stat().st_size == 16 * int(layout.get("passages", -1))


def build_index(corpus: Path, index_dir: Path, *, batch_passages: int = BATCH_PASSAGES) -> None:
    """Build the index of `corpus` in a sibling work folder, then move it into `index_dir`.

    Stale markers go first and the layout file comes last, so a crash never leaves a folder that
    looks complete; only the index's own files are replaced in a folder the user named.
    """
    fingerprint = corpus_fingerprint(corpus)
    work = index_dir.parent / f".{index_dir.name}.building-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        params = _score_pass(_tokenize_pass(corpus, work, batch_passages), work)
        (work / TOKENS_FILE).unlink()
        index_dir.mkdir(parents=True, exist_ok=True)
        for stale in (LAYOUT_FILE, *OLD_LAYOUT_FILES):
            (index_dir / stale).unlink(missing_ok=True)
        for path in work.iterdir():
            os.replace(path, index_dir / path.name)
        layout = {"layout": LAYOUT, "corpus": fingerprint, "passages": params["num_docs"],
                  "bm25s": params["version"]}
        (index_dir / LAYOUT_FILE).write_text(json.dumps(layout, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def load_or_build_index(corpus: Path, index_dir: Path | None = None, *,
                        batch_passages: int = BATCH_PASSAGES) -> Bm25Index:
    """Load the cached index of this corpus (title + text of every passage), or build and cache it.

    The cache follows the corpus bytes: a folder holding another corpus's index, a half-built one,
    or one of the old layout (ids.json, passages read into memory) is rebuilt, never misread.
    """
    import bm25s

    corpus = Path(corpus)
    if not corpus.is_file():
        raise UserError(f"corpus {corpus} does not exist (or is not a file); check the path")
    fingerprint = corpus_fingerprint(corpus)
    index_dir = Path(index_dir) if index_dir else config.data_dir() / "bm25" / fingerprint
    if not _is_current(index_dir, fingerprint):
        if any((index_dir / name).exists() for name in OLD_LAYOUT_FILES):
            print(f"bm25: {index_dir} holds an index of the old layout; rebuilding it", file=sys.stderr)
        build_index(corpus, index_dir, batch_passages=batch_passages)
    if corpus.suffix == ".gz" and corpus.stat().st_size > GZIP_WARN_BYTES:
        print(f"bm25: {corpus} is gzipped: each retrieval decompresses it up to its hits; gunzip it "
              "for a faster baseline", file=sys.stderr)
    lines = np.memmap(index_dir / LINES_FILE, dtype=np.uint64, mode="r").reshape(-1, 2)
    retriever = bm25s.BM25.load(str(index_dir), mmap=True, show_progress=False)
    return Bm25Index(retriever=retriever, corpus=corpus, lines=lines, path=index_dir)


def retrieve(index: Bm25Index, questions: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[Passage]]:
    """Top-k passages per question, best first; passages sharing no word with the question are dropped.

    Only the hits are read from the corpus, by the byte offset of their line.
    """
    if k < 1:
        raise UserError(f"top-k must be at least 1, got {k}")
    if not questions:
        return []
    k = min(k, index.num_docs)
    doc_ids, scores = index.retriever.retrieve(tokenize(questions, as_ids=False), k=k, show_progress=False)
    kept = [
        [(int(doc), float(score)) for doc, score in zip(row_ids, row_scores, strict=True) if float(score) > 0]
        for row_ids, row_scores in zip(doc_ids, scores, strict=True)
    ]
    wanted = sorted({doc for row in kept for doc, _ in row})
    places = [(int(index.lines[doc, 0]), int(index.lines[doc, 1])) for doc in wanted]
    found = dict(zip(wanted, read_corpus_records(index.corpus, places), strict=True))
    return [
        [Passage(id=found[doc]["id"], title=found[doc]["title"], text=found[doc]["text"], score=score)
         for doc, score in row]
        for row in kept
    ]
