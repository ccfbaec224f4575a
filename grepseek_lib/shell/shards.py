"""Line-aligned, byte-balanced shards of one corpus file, and the manifest that ties them to it.

The engine runs a pipeline on every shard and merges the outputs into what ONE run on the whole
file prints, so the shards must be exactly the file cut at line ends, in order, and must still
describe the file as it is now. The manifest records the source's size, mtime and sha256 (hashed
once while streaming) and, per shard, its line count, first line number and byte offset (what
`rg -n` / `grep -b` rewriting needs). A manifest whose source changed is refused, never used.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from grepseek_lib.errors import UserError
from grepseek_lib.pagecache import WRITE_BUFFER

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
#: Streaming block size: constant memory whatever the corpus size.
CHUNK_BYTES = 4 << 20


@dataclass(frozen=True)
class ShardInfo:
    """One shard: its file (relative to the manifest) and where it sits in the source."""

    file: str
    size: int
    mtime_ns: int
    lines: int
    first_line: int
    byte_offset: int


@dataclass(frozen=True)
class Manifest:
    """The source file as it was when sharded, and its shards in order."""

    directory: Path
    source: str
    size: int
    mtime_ns: int
    sha256: str
    #: A NUL byte makes rg/grep switch to binary mode at a position that differs per shard.
    has_nul: bool
    shards: tuple[ShardInfo, ...]

    def shard_path(self, index: int) -> Path:
        return self.directory / self.shards[index].file

    @property
    def paths(self) -> list[Path]:
        return [self.shard_path(i) for i in range(len(self.shards))]

    def to_json(self) -> dict:
        return {
            "version": MANIFEST_VERSION,
            "source": {"path": self.source, "size": self.size, "mtime_ns": self.mtime_ns,
                       "sha256": self.sha256, "has_nul": self.has_nul},
            "shards": [asdict(s) for s in self.shards],
        }


def shard_name(index: int) -> str:
    return f"shard-{index:03d}.jsonl"


def default_shards_dir(corpus: Path) -> Path:
    """`<dir>/shards` for a `corpus.jsonl`, else `<dir>/<stem>.shards` (two corpora never collide)."""
    corpus = Path(corpus)
    if corpus.name == "corpus.jsonl":
        return corpus.parent / "shards"
    return corpus.parent / f"{corpus.stem}.shards"


def _cut_targets(size: int, n: int) -> list[int]:
    """Byte positions where shards 1..n-1 would start if lines did not matter."""
    return [(size * i + n - 1) // n for i in range(1, n)]


class _ShardWriter:
    """Writes consecutive shard files and counts what went into each."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.records: list[dict] = []
        self._handle = None
        self._open(0)

    def _open(self, offset: int) -> None:
        index = len(self.records)
        self._handle = open(self.out / (shard_name(index) + ".tmp"), "wb", buffering=WRITE_BUFFER)
        self.records.append({"file": shard_name(index), "byte_offset": offset, "newlines": 0,
                             "size": 0, "last_byte": b""})

    def write(self, data: bytes) -> None:
        if not data:
            return
        self._handle.write(data)
        rec = self.records[-1]
        rec["newlines"] += data.count(b"\n")
        rec["size"] += len(data)
        rec["last_byte"] = data[-1:]

    def next_shard(self, offset: int) -> None:
        self._handle.close()
        self._open(offset)

    def close(self) -> None:
        self._handle.close()


def build_shards(corpus: str | Path, n: int, out: str | Path) -> Manifest:
    """Cut `corpus` into `n` line-aligned shards of about equal bytes in `out`, plus a manifest.

    One streaming pass (constant memory) writes the shards and hashes the source. A line longer
    than a shard's share leaves the following shards empty rather than splitting the line.
    """
    corpus = Path(corpus).expanduser().resolve()
    out = Path(out).expanduser()
    if n < 1:
        raise UserError(f"--shards must be at least 1, got {n}")
    if not corpus.is_file():
        raise UserError(f"corpus {corpus} does not exist (or is not a file); check --corpus")
    out.mkdir(parents=True, exist_ok=True)
    if out.resolve() == corpus.parent and corpus.name.startswith("shard-"):
        raise UserError(f"--out {out} would overwrite the corpus itself; choose another folder")
    manifest_path = out / MANIFEST_NAME
    manifest_path.unlink(missing_ok=True)  # a crash below must not leave a valid-looking manifest
    before = corpus.stat()
    targets = _cut_targets(before.st_size, n)
    digest = hashlib.sha256()
    has_nul = False
    writer = _ShardWriter(out)
    pos = 0  # source offset of chunk[0]
    try:
        with open(corpus, "rb") as src:
            while chunk := src.read(CHUNK_BYTES):
                digest.update(chunk)
                has_nul = has_nul or b"\0" in chunk
                start = 0
                while targets:
                    # the cut goes after the first newline at or beyond target - 1
                    newline = chunk.find(b"\n", max(targets[0] - 1 - pos, start))
                    if newline < 0:
                        break
                    writer.write(chunk[start:newline + 1])
                    start = newline + 1
                    cut = pos + start
                    while targets and targets[0] <= cut:
                        targets.pop(0)
                        writer.next_shard(cut)
                writer.write(chunk[start:])
                pos += len(chunk)
    finally:
        writer.close()
    for _ in targets:  # targets past the last newline: empty shards at the end
        writer.next_shard(pos)
        writer.close()
    after = corpus.stat()
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns) or pos != before.st_size:
        raise UserError(f"corpus {corpus} changed while it was being sharded; run `grepseek shard` again")
    shards = []
    first_line = 1
    for rec in writer.records:
        tmp = out / (rec["file"] + ".tmp")
        final = out / rec["file"]
        os.replace(tmp, final)
        lines = rec["newlines"] + (1 if rec["size"] and rec["last_byte"] != b"\n" else 0)
        shards.append(ShardInfo(file=rec["file"], size=rec["size"], mtime_ns=final.stat().st_mtime_ns,
                                lines=lines, first_line=first_line, byte_offset=rec["byte_offset"]))
        first_line += lines
    for stale in out.glob("shard-*.jsonl"):
        if stale.name not in {s.file for s in shards}:
            stale.unlink()
    manifest = Manifest(directory=out, source=str(corpus), size=before.st_size,
                        mtime_ns=before.st_mtime_ns, sha256=digest.hexdigest(), has_nul=has_nul,
                        shards=tuple(shards))
    tmp = manifest_path.with_name(MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=1) + "\n")
    os.replace(tmp, manifest_path)
    return manifest


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _parse_manifest(directory: Path, data: dict) -> Manifest:
    if data.get("version") != MANIFEST_VERSION:
        raise ValueError(f"unknown manifest version {data.get('version')!r}")
    src = data["source"]
    shards = tuple(ShardInfo(**{k: s[k] for k in ShardInfo.__dataclass_fields__}) for s in data["shards"])
    if not shards:
        raise ValueError("no shards listed")
    return Manifest(directory=directory, source=str(src["path"]), size=int(src["size"]),
                    mtime_ns=int(src["mtime_ns"]), sha256=str(src["sha256"]), has_nul=bool(src["has_nul"]),
                    shards=shards)


def load_manifest(directory: str | Path, corpus: str | Path | None = None, *, verify: bool = False) -> Manifest:
    """The manifest in `directory`, checked against the corpus (default: the one it was built from).

    Stale shards are refused: a source whose size or mtime changed, a shard file that is missing or
    changed, or (for a corpus at another path than the recorded one, or with verify=True) a sha256
    that differs. The message says how to rebuild.
    """
    directory = Path(directory).expanduser()
    path = directory / MANIFEST_NAME
    if not path.is_file():
        raise UserError(f"no shard manifest in {directory}; build shards with "
                        f"`grepseek shard --corpus FILE --shards N --out {directory}`")
    try:
        manifest = _parse_manifest(directory, json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path} is not a valid shard manifest ({exc}); rebuild with `grepseek shard`") from None
    source = Path(corpus).expanduser().resolve() if corpus is not None else Path(manifest.source)
    rebuild = f"rebuild with `grepseek shard --corpus {source} --shards {len(manifest.shards)} --out {directory}`"
    if not source.is_file():
        raise UserError(f"corpus {source} of the shards in {directory} does not exist; {rebuild}")
    stat = source.stat()
    if stat.st_size != manifest.size or (stat.st_mtime_ns != manifest.mtime_ns and str(source) == manifest.source):
        raise UserError(f"stale shards in {directory}: corpus {source} changed since it was sharded "
                        f"(size or modification time differ); {rebuild}")
    if verify or str(source) != manifest.source or stat.st_mtime_ns != manifest.mtime_ns:
        if file_sha256(source) != manifest.sha256:
            raise UserError(f"stale shards in {directory}: they were cut from {manifest.source}, whose "
                            f"content differs from {source} (sha256); {rebuild}")
    for info in manifest.shards:
        shard = directory / info.file
        if not shard.is_file():
            raise UserError(f"shard {shard} is missing; {rebuild}")
        shard_stat = shard.stat()
        if shard_stat.st_size != info.size or shard_stat.st_mtime_ns != info.mtime_ns:
            raise UserError(f"shard {shard} changed since it was written; {rebuild}")
    if sum(s.size for s in manifest.shards) != manifest.size:
        raise UserError(f"shards in {directory} do not add up to the corpus size; {rebuild}")
    return manifest
