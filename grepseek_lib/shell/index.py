"""The word index of a corpus (built by index_build.py): which blocks may hold a line with given words.

Files in the index folder: index.json (manifest: the corpus it was built from, as shard manifests
record it, and the shape), blocks.npy (offset, length, first line, lines of each line-aligned block),
vocab.bin (sorted folded words, one per line) with vocab_off.npy and vocab_sa.npy (its suffix array),
postings.bin (ascending block ids per word, uint32) with post_start.npy / post_len.npy (where each
word's ids are), fold.json (the case classes the words were folded with).
Everything is memory-mapped: opening an index reads a few KB whatever the corpus size.

A lookup only ever returns a superset of the blocks holding a matching line: a word is looked up
whole (EXACT, PREFIX by binary search in the vocabulary) or inside words (SUFFIX, CONTAINS by binary
search in the vocabulary's suffix array); a term matching too many words is dropped (every block
stays a candidate).
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from grepseek_lib.errors import UserError
from grepseek_lib.shell.fold import CONTAINS, EXACT, PREFIX, SUFFIX, Folder, Term
from grepseek_lib.shell.shards import SourceRecord, check_source

MANIFEST = "index.json"
BLOCKS = "blocks.npy"
VOCAB = "vocab.bin"
VOCAB_OFF = "vocab_off.npy"
VOCAB_SA = "vocab_sa.npy"
POSTINGS = "postings.bin"
POST_START = "post_start.npy"
POST_LEN = "post_len.npy"
FOLD = "fold.json"
#: 3: a non-ASCII word folding to an ASCII one shares its postings (version 2 indexes could lose them).
VERSION = 3
#: A term matching more vocabulary words than this is not worth its union: it is dropped.
MAX_TERM_WORDS = 20_000
#: Candidates this few are read rather than narrowed further (another term could save a few copies).
FEW_BLOCKS = 16
#: A later term narrows the candidates only when its postings hold at most this many entries per
#: candidate block (marking an entry costs ~10 ns, copying a block ~3 us).
NARROW_RATIO = 300


@dataclass(frozen=True)
class IndexManifest(SourceRecord):
    """The corpus as it was when indexed, and the index's shape."""

    block_bytes: int
    blocks: int
    words: int
    postings: int
    build_s: float


def default_index_dir(corpus: Path) -> Path:
    """`<dir>/index` for a `corpus.jsonl`, else `<dir>/<stem>.index` (as shards are placed)."""
    corpus = Path(corpus)
    return corpus.parent / ("index" if corpus.name == "corpus.jsonl" else f"{corpus.stem}.index")


def find_index(corpus: Path, shards_dir: str | Path | None, index: str | Path | bool | None) -> Path | None:
    """The index folder to use: `index` itself, none for False, or for None the first folder holding
    an index.json among `<corpus dir>/index` (or `<stem>.index`) and `index/` beside the shard folder
    (True means the same search)."""
    if index is False:
        return None
    if index is not None and index is not True:
        return Path(index).expanduser()
    places = [default_index_dir(corpus)]
    if shards_dir is not None:
        places.append(Path(shards_dir).expanduser().parent / "index")
    return next((place for place in places if (place / MANIFEST).is_file()), None)


def write_manifest(manifest: IndexManifest) -> None:
    data = {k: v for k, v in asdict(manifest).items() if k != "directory"}
    path = manifest.directory / MANIFEST
    tmp = path.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps({"version": VERSION, **data}, indent=1) + "\n")
    os.replace(tmp, path)


def read_manifest(directory: Path) -> IndexManifest:
    path = directory / MANIFEST
    if not path.is_file():
        raise UserError(f"no index in {directory}; build one with `grepseek index --corpus FILE --out {directory}`")
    try:
        data = json.loads(path.read_bytes())
        if data.pop("version") != VERSION:
            raise ValueError("unknown index version")
        return IndexManifest(directory=directory, **data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path} is not a valid index manifest ({exc}); rebuild with `grepseek index`") from None


def load_index(directory: str | Path, corpus: str | Path) -> WordIndex:
    """The index in `directory`, refused (UserError with the rebuild command) when `corpus` changed."""
    directory = Path(directory).expanduser()
    manifest = read_manifest(directory)
    source = Path(corpus).expanduser().resolve()
    rebuild = f"rebuild with `grepseek index --corpus {source} --out {directory}`"
    new_mtime = check_source(source, manifest, f"index in {directory}", "indexed", rebuild)
    if new_mtime is not None:
        manifest = IndexManifest(**{**manifest.__dict__, "mtime_ns": new_mtime})
        try:
            write_manifest(manifest)
        except OSError:
            pass  # a read-only folder just hashes again next time
    return WordIndex(manifest)


class WordIndex:
    """Memory-mapped lookups: terms -> candidate block ids."""

    def __init__(self, manifest: IndexManifest) -> None:
        d = manifest.directory
        self.manifest = manifest
        self.blocks = np.load(d / BLOCKS, mmap_mode="r")
        self.offsets = np.asarray(self.blocks[:, 0]) if len(self.blocks) else np.zeros(0, np.int64)
        self.lengths = np.asarray(self.blocks[:, 1]) if len(self.blocks) else np.zeros(0, np.int64)
        self.first_lines = np.asarray(self.blocks[:, 2]) if len(self.blocks) else np.zeros(0, np.int64)
        self.line_counts = np.asarray(self.blocks[:, 3]) if len(self.blocks) else np.zeros(0, np.int64)
        self.vocab_off = _mapped(d / VOCAB_OFF)
        self.post_start = _mapped(d / POST_START)
        self.post_len = _mapped(d / POST_LEN)
        self.vocab = _map(d / VOCAB)
        self.suffixes = _mapped(d / VOCAB_SA)
        postings = d / POSTINGS
        self.postings = (np.asarray(np.memmap(postings, dtype=np.uint32, mode="r")) if postings.stat().st_size
                         else np.zeros(0, np.uint32))
        self.folder = Folder({int(k): v for k, v in json.loads((d / FOLD).read_text()).items()})
        self.nwords = len(self.vocab_off) - 1

    def _word(self, i: int) -> bytes:
        return self.vocab[int(self.vocab_off[i]):int(self.vocab_off[i + 1]) - 1]

    def _lower_bound(self, key: bytes) -> int:
        return bisect.bisect_left(range(self.nwords), key, key=self._word)

    def word_ids(self, term: Term) -> range | np.ndarray | None:
        """Ids of the vocabulary words that may hold `term`; None when there are too many to be useful."""
        key = term.key
        if term.kind in (EXACT, PREFIX):
            lo = self._lower_bound(key)
            if term.kind == EXACT:
                return range(lo, lo + 1) if lo < self.nwords and self._word(lo) == key else range(0)
            hi = self._lower_bound(key[:-1] + bytes([key[-1] + 1]))
            return range(lo, hi) if hi - lo <= MAX_TERM_WORDS else None
        assert term.kind in (SUFFIX, CONTAINS)
        lo, hi = self._suffix_range(key + b"\n" if term.kind == SUFFIX else key)
        if hi - lo > MAX_TERM_WORDS:
            return None
        hits = np.asarray(self.suffixes[lo:hi], dtype=np.uint64)
        return np.unique(np.searchsorted(self.vocab_off, hits, side="right") - 1)

    def _suffix_range(self, needle: bytes) -> tuple[int, int]:
        """The suffix-array slice of every occurrence of `needle` in the vocabulary text (each word ends
        in a newline, which no key holds, so an occurrence never spans two words)."""
        def head(rank: int) -> bytes:
            start = int(self.suffixes[rank])
            return self.vocab[start:start + len(needle)]

        ranks = range(len(self.suffixes))
        return bisect.bisect_left(ranks, needle, key=head), bisect.bisect_right(ranks, needle, key=head)

    def _posting(self, i: int) -> np.ndarray:
        start = int(self.post_start[i])
        return self.postings[start:start + int(self.post_len[i])]

    def term_blocks(self, term: Term) -> np.ndarray | None:
        """Ascending ids of the blocks whose words may hold `term`; None: every block."""
        ids = self.word_ids(term)
        if ids is None:
            return None
        return self._union(ids) if len(ids) else np.zeros(0, np.uint32)

    def _union(self, ids: range | np.ndarray) -> np.ndarray:
        if len(ids) == 1:
            return np.asarray(self._posting(int(ids[0])))
        return np.flatnonzero(self._mask(ids)).astype(np.uint32)

    def _mask(self, ids: range | np.ndarray) -> np.ndarray:
        """A flag per block: does some word of `ids` occur in it (one gather over all their postings)."""
        starts = np.asarray(self.post_start[_rows(ids)], dtype=np.int64)
        lengths = np.asarray(self.post_len[_rows(ids)], dtype=np.int64)
        where = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        mask = np.zeros(len(self.offsets), dtype=bool)
        mask[self.postings[where]] = True
        return mask

    def _narrow(self, blocks: np.ndarray, ids: range | np.ndarray, entries: int) -> np.ndarray:
        """The part of `blocks` where some word of `ids` occurs; all of `blocks` when finding that would cost
        more than reading them (NARROW_RATIO posting entries per block)."""
        if len(ids) * len(blocks) <= entries:  # a binary search per block and word is the cheaper way
            keep = np.zeros(len(blocks), dtype=bool)
            for i in ids:
                posting = self._posting(int(i))
                if len(posting):
                    at = np.minimum(np.searchsorted(posting, blocks), len(posting) - 1)
                    keep |= posting[at] == blocks
            return blocks[keep]
        if entries <= NARROW_RATIO * len(blocks):
            return blocks[self._mask(ids)[blocks]]
        return blocks

    def surely_candidates(self, alternatives: list[list[Term]]) -> np.ndarray:
        """Blocks that are certainly candidates, from one posting list (no unions, no scans).

        An alternative of one EXACT, PREFIX or CONTAINS term holds every block of each word that
        starts with the key (such a word also contains it); the largest such posting is returned, so
        an unselective word (`the`, `Paris`) is turned away in microseconds.
        """
        best = np.zeros(0, np.uint32)
        for terms in alternatives:
            if len(terms) != 1 or terms[0].kind == SUFFIX:
                continue
            key = terms[0].key
            lo = self._lower_bound(key)
            if terms[0].kind == EXACT:
                hi = lo + 1 if lo < self.nwords and self._word(lo) == key else lo
            else:
                hi = min(self._lower_bound(key[:-1] + bytes([key[-1] + 1])), lo + MAX_TERM_WORDS)
            if hi > lo:
                top = lo + int(np.argmax(self.post_len[lo:hi]))
                if self.post_len[top] > len(best):
                    best = np.asarray(self._posting(top))
        return best

    def candidates(self, alternatives: list[list[Term]]) -> np.ndarray | None:
        """Blocks that may hold a line matching any alternative (all terms of one); None: every block.

        An alternative starts from its term with the fewest posting entries and is narrowed by the
        others, smallest first, until FEW_BLOCKS remain; a term matching too many words is skipped
        (it could only remove blocks).
        """
        found: list[np.ndarray] = []
        for terms in alternatives:
            looked = []
            for term in terms:
                ids = self.word_ids(term)
                if ids is not None:
                    looked.append((int(np.sum(self.post_len[_rows(ids)])), ids))
            if not looked:
                return None
            looked.sort(key=lambda pair: pair[0])
            blocks = self._union(looked[0][1])
            for entries, ids in looked[1:]:
                if len(blocks) <= FEW_BLOCKS:
                    break
                blocks = self._narrow(blocks, ids, entries)
            found.append(blocks)
        return np.unique(np.concatenate(found)) if found else None


def _rows(ids: range | np.ndarray) -> slice | np.ndarray:
    """Word ids as an index into the per-word arrays (a range as a slice: a view, no gather)."""
    return slice(ids.start, ids.stop) if isinstance(ids, range) else ids


def _mapped(path: Path) -> np.ndarray:
    """A memory-mapped .npy as a plain ndarray view: the same pages, without np.memmap's per-item overhead
    (a lookup's binary search indexes it one element at a time)."""
    return np.asarray(np.load(path, mmap_mode="r"))


def _map(path: Path) -> bytes | mmap.mmap:
    """A read-only map of a file (an empty file maps to b"")."""
    if path.stat().st_size == 0:
        return b""
    with open(path, "rb") as handle:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
