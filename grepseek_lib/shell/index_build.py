"""`grepseek index`: a word index over line-aligned blocks of the corpus, built in one streaming pass.

The corpus is cut into blocks of about BLOCK_BYTES ending at line ends. Every block's distinct
folded words (fold.py) go into an in-memory run; every RUN_BLOCKS blocks the run is written sorted
to disk, and at the end the runs are merged word by word into the index: a sorted vocabulary and,
per word, the ascending ids of the blocks holding it. Memory is bounded by one run (RUN_BLOCKS
blocks of text and their words), not by the corpus; the merge keeps one word per run in memory.
Design and measurements: docs/INDEX.md.
"""

from __future__ import annotations

import hashlib
import heapq
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

#: Target block size: small enough that a rare word's candidates are a few hundred KB, large enough
#: that the postings stay a fraction of the corpus (docs/INDEX.md).
BLOCK_BYTES = 32 << 10
#: Blocks per sorted run (about 128 MB of text at the default block size).
RUN_BLOCKS = 4096
_READ = 8 << 20


def _blocks(corpus: Path, block_bytes: int, digest: hashlib._Hash) -> Iterator[tuple[int, int, bytes]]:
    """(byte offset, first line, bytes) of each block, every block ending at a line end (or EOF)."""
    offset, line = 0, 1
    pending = b""
    with open(corpus, "rb") as src:
        while True:
            chunk = src.read(_READ)
            digest.update(chunk)
            data = pending + chunk
            start = 0
            while len(data) - start >= block_bytes or (not chunk and start < len(data)):
                end = data.find(b"\n", start + block_bytes - 1)
                if end < 0:
                    if chunk:
                        break  # the line goes on in the next chunk
                    end = len(data) - 1
                block = data[start:end + 1]
                yield offset, line, block
                offset += len(block)
                line += block.count(b"\n")
                start = end + 1
            pending = data[start:]
            if not chunk:
                return


class _Runs:
    """Sorted runs of (word -> block ids) written to `folder`, merged at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0
        self.words: dict[bytes, list[int]] = {}

    def add(self, block_id: int, words: set[bytes]) -> None:
        table = self.words
        for word in words:
            found = table.get(word)
            if found is None:
                table[word] = [block_id]
            else:
                found.append(block_id)

    def flush(self) -> None:
        if not self.words:
            return
        keys = sorted(self.words)
        lengths = np.fromiter((len(self.words[k]) for k in keys), dtype=np.int64, count=len(keys))
        postings = np.fromiter((b for k in keys for b in self.words[k]), dtype=np.uint32, count=int(lengths.sum()))
        base = self.folder / f"run-{self.count:04d}"
        _write_words(base, keys)
        np.save(f"{base}.post.npy", postings)
        np.save(f"{base}.len.npy", lengths)
        self.words = {}
        self.count += 1

    def _read(self, i: int) -> Iterator[tuple[bytes, int, np.ndarray]]:
        base = self.folder / f"run-{i:04d}"
        blob = (base.with_suffix(".words")).read_bytes()
        postings = np.load(f"{base}.post.npy", mmap_mode="r")
        lengths = np.load(f"{base}.len.npy")
        pos, at = 0, 0
        for n in lengths:
            end = blob.index(b"\n", pos)
            yield blob[pos:end], i, postings[at:at + n]
            pos, at = end + 1, at + int(n)

    def merge(self, out: Path) -> tuple[int, int]:
        """Write vocab.bin/vocab_off.npy/postings.bin/post_off.npy; (words, postings) written."""
        merged = heapq.merge(*(self._read(i) for i in range(self.count)), key=lambda item: (item[0], item[1]))
        word_offsets, post_offsets = [0], [0]
        with open(out / idx.VOCAB, "wb") as vocab, open(out / idx.POSTINGS, "wb") as post:
            last: bytes | None = None
            parts: list[np.ndarray] = []
            for word, _, blocks in merged:
                if word != last and last is not None:
                    _emit(vocab, post, last, parts, word_offsets, post_offsets)
                    parts = []
                last = word
                parts.append(blocks)
            if last is not None:
                _emit(vocab, post, last, parts, word_offsets, post_offsets)
        np.save(out / idx.VOCAB_OFF, np.asarray(word_offsets, dtype=np.uint64))
        np.save(out / idx.POST_OFF, np.asarray(post_offsets, dtype=np.uint64))
        return len(word_offsets) - 1, post_offsets[-1]


def _write_words(base: Path, keys: list[bytes]) -> None:
    with open(base.with_suffix(".words"), "wb") as handle:
        handle.write(b"\n".join(keys) + b"\n")


def _emit(vocab, post, word: bytes, parts: list[np.ndarray], word_offsets: list[int],
          post_offsets: list[int]) -> None:
    blocks = parts[0] if len(parts) == 1 else np.concatenate(parts)
    vocab.write(word + b"\n")
    post.write(np.ascontiguousarray(blocks, dtype=np.uint32).tobytes())
    word_offsets.append(word_offsets[-1] + len(word) + 1)
    post_offsets.append(post_offsets[-1] + len(blocks))


def build_index(corpus: str | Path, out: str | Path, block_bytes: int = BLOCK_BYTES,
                run_blocks: int = RUN_BLOCKS) -> idx.IndexManifest:
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
        manifest = _build(corpus, tmp, block_bytes, run_blocks)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return idx.IndexManifest(**{**manifest.__dict__, "directory": out})


def _build(corpus: Path, tmp: Path, block_bytes: int, run_blocks: int) -> idx.IndexManifest:
    began = time.monotonic()
    before = corpus.stat()
    table, extras = compute_table()
    folder = Folder(table, extras)
    digest = hashlib.sha256()
    runs = _Runs(tmp)
    rows: list[tuple[int, int, int, int]] = []
    has_nul = False
    for offset, line, block in _blocks(corpus, block_bytes, digest):
        has_nul = has_nul or b"\0" in block
        runs.add(len(rows), folder.block_words(block.decode("utf-8", "surrogateescape")))
        lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        rows.append((offset, len(block), line, lines))
        if len(rows) % run_blocks == 0:
            runs.flush()
    runs.flush()
    after = corpus.stat()
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise UserError(f"corpus {corpus} changed while it was being indexed; run `grepseek index` again")
    words, pairs = runs.merge(tmp)
    for leftover in tmp.glob("run-*"):
        leftover.unlink()
    np.save(tmp / idx.BLOCKS, np.asarray(rows, dtype=np.int64).reshape(-1, 4))
    (tmp / idx.FOLD).write_text(json.dumps({"table": {str(k): v for k, v in table.items()}, "extras": extras}))
    manifest = idx.IndexManifest(
        directory=tmp, source=str(corpus), size=before.st_size, mtime_ns=before.st_mtime_ns,
        sha256=digest.hexdigest(), has_nul=has_nul, block_bytes=block_bytes, blocks=len(rows), words=words,
        postings=pairs, build_s=round(time.monotonic() - began, 1))
    idx.write_manifest(manifest)
    return manifest
