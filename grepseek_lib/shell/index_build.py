"""`grepseek index`: a word index over line-aligned blocks of the corpus, built in one streaming pass.

The corpus is cut into blocks of about BLOCK_BYTES ending at line ends. Each read of READ_BYTES is
cut into words with numpy (a byte mask, then a 64-bit polynomial hash of every ASCII-uppercased
word from one prefix sum), so Python never touches a word occurrence: only words holding non-ASCII
characters (folded with the Unicode case classes of fold.py) and the first occurrence of every new
word. The distinct (word hash, block) pairs go to BUCKETS files by hash; at the end each bucket is
sorted on its own into the postings, and the vocabulary (the folded word of every hash) is written
sorted. Memory: one read's arrays plus the vocabulary, never the corpus or all pairs at once.
Two different words with the same 64-bit hash would lose one of them from the vocabulary; at a
million words the chance is about 3e-8 (docs/INDEX.md).
Design and measurements: docs/INDEX.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from grepseek_lib.errors import UserError
from grepseek_lib.shell import index as idx
from grepseek_lib.shell.fold import Folder, compute_table

#: Target block size: a rare word's candidates are a few hundred KB (one hit line per ~4 KiB read),
#: while the postings stay under half the corpus; 2 KiB gains no more (docs/INDEX.md).
BLOCK_BYTES = 4 << 10
#: Bytes read at a time (the blocks of one read are tokenized together).
READ_BYTES = 8 << 20
#: Pairs are spread over this many bucket files by hash (the final sort holds one bucket).
BUCKETS = 16
_MASK = (1 << 64) - 1
_P = 0x100000001B3  # odd: invertible modulo 2**64
_WORD_BYTE = np.zeros(256, dtype=bool)
_WORD_BYTE[[*b"0123456789_", *range(65, 91), *range(97, 123), *range(128, 256)]] = True
_UPPER = np.arange(256, dtype=np.uint8)
_UPPER[97:123] -= 32


def _chunks(corpus: Path, block_bytes: int, digest) -> Iterator[tuple[bytes, list[tuple[int, int, int, int]]]]:
    """(bytes, blocks) per read: whole blocks, each (offset, length, first line, lines), ending at line ends."""
    offset, line = 0, 1
    pending = b""
    with open(corpus, "rb") as src:
        while True:
            chunk = src.read(READ_BYTES)
            digest.update(chunk)
            data = pending + chunk
            start = 0
            blocks = []
            while len(data) - start >= block_bytes or (not chunk and start < len(data)):
                end = data.find(b"\n", start + block_bytes - 1)
                if end < 0:
                    if chunk:
                        break  # the line goes on in the next read
                    end = len(data) - 1
                newlines = data.count(b"\n", start, end + 1)
                lines = newlines + (0 if data[end:end + 1] == b"\n" else 1)
                blocks.append((offset, end + 1 - start, line, lines))
                offset += end + 1 - start
                line += newlines
                start = end + 1
            if blocks:
                yield data[:start], blocks
            pending = data[start:]
            if not chunk:
                return


class _Hasher:
    """64-bit polynomial hashes of the ASCII-uppercased words of a byte string, all at once in numpy."""

    def __init__(self) -> None:
        self.pow = np.ones(1, dtype=np.uint64)
        self.inv = np.ones(1, dtype=np.uint64)

    def _powers(self, n: int) -> None:
        if len(self.pow) > n:
            return
        size = max(n + 1, READ_BYTES + (1 << 20))
        with np.errstate(over="ignore"):
            self.pow = np.ones(size, dtype=np.uint64)
            np.cumprod(np.full(size - 1, _P, dtype=np.uint64), out=self.pow[1:])
            self.inv = np.ones(size, dtype=np.uint64)
            np.cumprod(np.full(size - 1, pow(_P, -1, 1 << 64), dtype=np.uint64), out=self.inv[1:])

    def words(self, data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, hashes, non-ASCII mask) of the words of `data`."""
        a = np.frombuffer(data, dtype=np.uint8)
        w = _WORD_BYTE[a]
        edges = np.diff(np.concatenate(([False], w, [False])).astype(np.int8))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        self._powers(len(a))
        with np.errstate(over="ignore"):
            g = np.zeros(len(a) + 1, dtype=np.uint64)
            np.cumsum(_UPPER[a].astype(np.uint64) * self.inv[:len(a)], out=g[1:])
            hashes = self.pow[ends - 1] * (g[ends] - g[starts]) if len(starts) else np.zeros(0, np.uint64)
        high = np.concatenate(([0], np.cumsum(a >= 128, dtype=np.int64)))
        return starts, ends, hashes, (high[ends] - high[starts]) > 0

    def word(self, folded: bytes) -> int:
        """The hash of one folded word, as `words` hashes it in text: a non-ASCII word that folds to an ASCII
        one (U+212A KELVIN SIGN + `elvin` -> `KELVIN`) must land on that word's hash, or one of the two
        postings is lost (fold classes keep the word predicate, so `folded` is one word)."""
        starts, _, hashes, _ = self.words(folded)
        if len(starts) != 1:
            raise RuntimeError(f"index build: folded word {folded!r} is not one word; please report this")
        return int(hashes[0])


class _Pairs:
    """(word hash, block id) pairs, each once, in bucket files; and the word of every hash."""

    def __init__(self, folder: Path, table: dict[int, str]) -> None:
        self.folder = folder
        self.folder_fold = Folder(table)
        self.hasher = _Hasher()
        self.words: dict[int, bytes] = {}
        self.hash_of: dict[bytes, int] = {}  # folded non-ASCII word -> its hash
        self.files = [open(folder / f"bucket-{b:02d}.bin", "wb") for b in range(BUCKETS)]

    def add(self, data: bytes, first_block: int, block_starts: np.ndarray) -> None:
        starts, ends, hashes, wide = self.hasher.words(data)
        for i in np.flatnonzero(wide).tolist():  # words with non-ASCII characters: Unicode case classes
            word = data[starts[i]:ends[i]].decode("utf-8", "surrogateescape")
            folded = self.folder_fold.fold(word).encode("utf-8", "surrogateescape")
            h = self.hash_of.get(folded)
            if h is None:
                h = self.hash_of[folded] = self.hasher.word(folded)
            hashes[i] = h
            self.words.setdefault(h, folded)
        bounds = np.searchsorted(starts, block_starts).tolist() + [len(starts)]
        per_block = [np.unique(hashes[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        blocks = np.repeat(np.arange(first_block, first_block + len(per_block), dtype=np.uint64),
                           [len(u) for u in per_block])
        hashes_by_block = np.concatenate(per_block) if per_block else np.zeros(0, np.uint64)
        self._learn(data, starts, ends, hashes)
        hashes = hashes_by_block
        bucket = (hashes >> np.uint64(60)) % BUCKETS
        for b in range(BUCKETS):
            sel = bucket == b
            pairs = np.empty((int(sel.sum()), 2), dtype=np.uint64)
            pairs[:, 0], pairs[:, 1] = hashes[sel], blocks[sel]
            self.files[b].write(pairs.tobytes())

    def _learn(self, data: bytes, starts: np.ndarray, ends: np.ndarray, hashes: np.ndarray) -> None:
        """Record the (uppercased) word of every hash not seen before."""
        unique, first = np.unique(hashes, return_index=True)
        words = self.words
        fresh = [(h, i) for h, i in zip(unique.tolist(), first.tolist(), strict=True) if h not in words]
        for h, i in fresh:
            words[h] = data[starts[i]:ends[i]].upper()

    def finish(self, out: Path) -> tuple[int, int]:
        """Write the vocabulary and the postings; (words, postings)."""
        for handle in self.files:
            handle.close()
        vocab = sorted(set(self.words.values()))
        if len(vocab) != len(self.words):  # a word under two hashes would split its postings over two buckets
            raise RuntimeError("index build: a folded word was hashed two ways; please report this")
        ids = {word: i for i, word in enumerate(vocab)}
        keys = np.fromiter(self.words.keys(), dtype=np.uint64, count=len(self.words))
        key_ids = np.fromiter((ids[w] for w in self.words.values()), dtype=np.int64, count=len(self.words))
        order = np.argsort(keys)
        keys, key_ids = keys[order], key_ids[order]
        del ids
        starts = np.zeros(len(vocab), dtype=np.uint64)
        lengths = np.zeros(len(vocab), dtype=np.uint32)
        written = 0
        text = bytearray(b"".join(word + b"\n" for word in vocab))
        (out / idx.VOCAB).write_bytes(text)
        offsets = np.zeros(len(vocab) + 1, dtype=np.uint64)
        np.cumsum([len(w) + 1 for w in vocab], out=offsets[1:])
        np.save(out / idx.VOCAB_OFF, offsets)
        del vocab
        _write_suffix_array(text, out / idx.VOCAB_SA)
        del text
        with open(out / idx.POSTINGS, "wb") as post:
            for b in range(BUCKETS):
                path = self.folder / f"bucket-{b:02d}.bin"
                pairs = np.fromfile(path, dtype=np.uint64).reshape(-1, 2)
                path.unlink()
                word_ids = key_ids[np.searchsorted(keys, pairs[:, 0])]
                blocks = pairs[:, 1].astype(np.uint32)
                del pairs
                order = np.lexsort((blocks, word_ids))
                word_ids, blocks = word_ids[order], blocks[order]
                keep = np.ones(len(blocks), dtype=bool)
                keep[1:] = (word_ids[1:] != word_ids[:-1]) | (blocks[1:] != blocks[:-1])
                word_ids, blocks = word_ids[keep], blocks[keep]
                post.write(blocks.tobytes())
                run_ids, run_starts, run_counts = np.unique(word_ids, return_index=True, return_counts=True)
                starts[run_ids] = run_starts.astype(np.uint64) + np.uint64(written)
                lengths[run_ids] = run_counts
                written += len(blocks)
        np.save(out / idx.POST_START, starts)
        np.save(out / idx.POST_LEN, lengths)
        return len(starts), written


def _write_suffix_array(text: bytearray, path: Path) -> None:
    """The sorted suffixes of the vocabulary text: suffix and infix lookups by binary search, not a scan
    (a bytearray: pydivsufsort takes only writable buffers)."""
    import pydivsufsort  # deferred: only a build needs it

    suffixes = pydivsufsort.divsufsort(np.frombuffer(text, dtype=np.uint8)) if text else np.zeros(0)
    np.save(path, np.asarray(suffixes, dtype=np.int32 if len(text) < 2**31 else np.int64))


def build_index(corpus: str | Path, out: str | Path, block_bytes: int = BLOCK_BYTES) -> idx.IndexManifest:
    """Index `corpus` into `out` (written as `out`.tmp, then renamed: a failed build leaves nothing)."""
    corpus = Path(corpus).expanduser().resolve()
    out = Path(out).expanduser()
    if not corpus.is_file():
        raise UserError(f"corpus {corpus} does not exist (or is not a file); check --corpus")
    if block_bytes < 1:
        raise UserError(f"block size must be at least 1 byte, got {block_bytes}")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
    except OSError as exc:
        raise UserError(f"cannot create the index folder {tmp}: {exc.strerror or exc}") from None
    try:
        manifest = _build(corpus, tmp, block_bytes)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return idx.IndexManifest(**{**manifest.__dict__, "directory": out})


def ensure_index(corpus: str | Path, out: str | Path | None = None) -> idx.IndexManifest:
    """The index of `corpus` in `out` (default: beside the corpus), built only when missing or stale."""
    out = Path(out).expanduser() if out is not None else idx.default_index_dir(Path(corpus))
    try:
        return idx.load_index(out, corpus).manifest
    except UserError:
        return build_index(corpus, out)


def _build(corpus: Path, tmp: Path, block_bytes: int) -> idx.IndexManifest:
    began = time.monotonic()
    before = corpus.stat()
    table = compute_table()
    digest = hashlib.sha256()
    pairs = _Pairs(tmp, table)
    rows: list[tuple[int, int, int, int]] = []
    has_nul = False
    for data, blocks in _chunks(corpus, block_bytes, digest):
        has_nul = has_nul or b"\0" in data
        base = blocks[0][0]
        pairs.add(data, len(rows), np.asarray([b[0] - base for b in blocks], dtype=np.int64))
        rows.extend(blocks)
    after = corpus.stat()
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise UserError(f"corpus {corpus} changed while it was being indexed; run `grepseek index` again")
    words, postings = pairs.finish(tmp)
    np.save(tmp / idx.BLOCKS, np.asarray(rows, dtype=np.int64).reshape(-1, 4))
    (tmp / idx.FOLD).write_text(json.dumps({str(k): v for k, v in table.items()}))
    manifest = idx.IndexManifest(
        directory=tmp, source=str(corpus), size=before.st_size, mtime_ns=before.st_mtime_ns,
        sha256=digest.hexdigest(), has_nul=has_nul, block_bytes=block_bytes, blocks=len(rows), words=words,
        postings=postings, build_s=round(time.monotonic() - began, 1))
    idx.write_manifest(manifest)
    return manifest
