"""Line-aligned, byte-balanced shards of one corpus file, and the manifest that ties them to it.

The engine runs a pipeline on every shard and merges the outputs into what ONE run on the whole
file prints, so the shards must be exactly the file cut at line ends, in order, and must still
describe the file as it is now. The manifest records the source's size, mtime and sha256 (hashed
once while streaming) and, per shard, its line count, first line number and byte offset (what
`rg -n` / `grep -b` rewriting needs). A manifest whose source changed is refused, never used; one
whose source was only rewritten with the same bytes is accepted on its sha256.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
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
class SourceRecord:
    """What a manifest (shards or index) in `directory` recorded about the file it was made from."""

    directory: Path
    source: str
    size: int
    mtime_ns: int
    sha256: str
    #: A NUL byte makes rg/grep switch to binary mode at a position that differs per shard (or block).
    has_nul: bool


@dataclass(frozen=True)
class Manifest(SourceRecord):
    """The source file as it was when sharded, and its shards in order."""

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


class _Cuts:
    """Byte positions where shards 1..n-1 would start if lines did not matter, visited without a list.

    After a cut at a line end, every position at or before it is skipped in one step, so the pass
    stays linear in lines whatever N is (a list of N targets popped from the front was quadratic).
    """

    def __init__(self, size: int, n: int) -> None:
        self.size, self.n, self.i = size, n, 1

    def target(self) -> int | None:
        return (self.size * self.i + self.n - 1) // self.n if self.i < self.n else None

    def skip_past(self, cut: int) -> None:
        """Move to the first target beyond `cut`: the smallest i with size*i >= cut*n + 1."""
        self.i = max(self.i + 1, -(-(cut * self.n + 1) // max(1, self.size)))


class _ShardWriter:
    """Writes consecutive shard files (as .tmp until all are done) and counts what went into each."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.records: list[dict] = []
        self._handle = None
        self._open(0)

    def _open(self, offset: int) -> None:
        index = len(self.records)
        self.records.append({"file": shard_name(index), "byte_offset": offset, "newlines": 0,
                             "size": 0, "last_byte": b""})
        self._handle = open(self.out / (shard_name(index) + ".tmp"), "wb", buffering=WRITE_BUFFER)

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
        if self._handle is not None:
            self._handle.close()

    def discard(self) -> None:
        """Remove every .tmp file written so far (a failed build leaves nothing half-written)."""
        self.close()
        for rec in self.records:
            (self.out / (rec["file"] + ".tmp")).unlink(missing_ok=True)


def _prepare_out(out: Path, corpus: Path) -> None:
    """Create `out` or explain in one line why it cannot hold shards (a file, /proc, read-only, ...)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a folder; choose a folder for the shards")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the shard folder {out}: {exc.strerror or exc}") from None
    if out.resolve() == corpus.parent and corpus.name.startswith("shard-"):
        raise UserError(f"--out {out} would overwrite the corpus itself; choose another folder")


def _cut(corpus: Path, size: int, n: int, writer: _ShardWriter) -> tuple[str, bool, int]:
    """Stream `corpus` into the writer, cut after the first newline at or past each target - 1.

    Returns (sha256, has_nul, bytes read). A cut at the end of the file opens no shard, and targets
    inside one line share a cut: no shard is ever empty (unless the corpus is).
    """
    cuts = _Cuts(size, n)
    digest = hashlib.sha256()
    has_nul = False
    pos = 0  # source offset of chunk[0]
    with open(corpus, "rb") as src:
        while chunk := src.read(CHUNK_BYTES):
            digest.update(chunk)
            has_nul = has_nul or b"\0" in chunk
            start = 0
            while (target := cuts.target()) is not None:
                newline = chunk.find(b"\n", max(target - 1 - pos, start))
                if newline < 0:
                    break
                writer.write(chunk[start:newline + 1])
                start = newline + 1
                cuts.skip_past(pos + start)
                if pos + start < size:
                    writer.next_shard(pos + start)
            writer.write(chunk[start:])
            pos += len(chunk)
    return digest.hexdigest(), has_nul, pos


def build_shards(corpus: str | Path, n: int, out: str | Path) -> Manifest:
    """Cut `corpus` into at most `n` line-aligned shards of about equal bytes in `out`, plus a manifest.

    One streaming pass (constant memory, linear in lines) writes the shards and hashes the source.
    Shards hold whole lines and are never empty, so there are at most as many as lines (fewer when a
    line is longer than a shard's share); the manifest lists what was made. On any error nothing new
    is left behind: shards are written as .tmp files and renamed only once all are complete.
    """
    corpus = Path(corpus).expanduser().resolve()
    out = Path(out).expanduser()
    if n < 1:
        raise UserError(f"--shards must be at least 1, got {n}")
    if not corpus.is_file():
        raise UserError(f"corpus {corpus} does not exist (or is not a file); check --corpus")
    _prepare_out(out, corpus)
    before = corpus.stat()
    try:
        writer = _ShardWriter(out)
    except OSError as exc:
        raise UserError(f"cannot write shards to {out}: {exc.strerror or exc}") from None
    try:
        sha256, has_nul, pos = _cut(corpus, before.st_size, n, writer)
        writer.close()
    except OSError as exc:
        writer.discard()
        raise UserError(f"cannot write shards to {out}: {exc.strerror or exc}") from None
    after = corpus.stat()
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns) or pos != before.st_size:
        writer.discard()
        raise UserError(f"corpus {corpus} changed while it was being sharded; run `grepseek shard` again")
    manifest_path = out / MANIFEST_NAME
    manifest_path.unlink(missing_ok=True)  # a crash below must not leave a valid-looking manifest
    shards = _install(out, writer.records)
    manifest = Manifest(directory=out, source=str(corpus), size=before.st_size, mtime_ns=before.st_mtime_ns,
                        sha256=sha256, has_nul=has_nul, shards=tuple(shards))
    _write_manifest(manifest)
    return manifest


def _install(out: Path, records: list[dict]) -> list[ShardInfo]:
    """Rename the .tmp shards into place, describe them, and remove shards of an earlier, larger build."""
    shards = []
    first_line = 1
    for rec in records:
        final = out / rec["file"]
        os.replace(out / (rec["file"] + ".tmp"), final)
        lines = rec["newlines"] + (1 if rec["size"] and rec["last_byte"] != b"\n" else 0)
        shards.append(ShardInfo(file=rec["file"], size=rec["size"], mtime_ns=final.stat().st_mtime_ns,
                                lines=lines, first_line=first_line, byte_offset=rec["byte_offset"]))
        first_line += lines
    kept = {s.file for s in shards}
    for stale in out.glob("shard-*.jsonl"):
        if stale.name not in kept:
            stale.unlink()
    return shards


def _write_manifest(manifest: Manifest) -> None:
    """Write manifest.json atomically (a .tmp file renamed over it)."""
    path = manifest.directory / MANIFEST_NAME
    tmp = path.with_name(MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=1) + "\n")
    os.replace(tmp, path)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


_SHARD_FILE = re.compile(r"shard-[0-9]{3,}\.jsonl")


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a whole number >= 0, got {value!r}")
    return value


def _shard_info(entry: object) -> ShardInfo:
    if not isinstance(entry, dict):
        raise ValueError(f"a shard entry must be an object, got {type(entry).__name__}")
    name = entry["file"]
    if not isinstance(name, str) or not _SHARD_FILE.fullmatch(name):  # never a path out of the folder
        raise ValueError(f"bad shard file name {name!r}")
    numbers = {k: _count(entry[k], k) for k in ("size", "mtime_ns", "lines", "first_line", "byte_offset")}
    return ShardInfo(file=name, **numbers)


def _parse_manifest(directory: Path, data: object) -> Manifest:
    """A Manifest from parsed JSON; ValueError/KeyError/TypeError name what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if data.get("version") != MANIFEST_VERSION:
        raise ValueError(f"unknown manifest version {data.get('version')!r}")
    src = data["source"]
    if not isinstance(src, dict) or not isinstance(data["shards"], list):
        raise ValueError("`source` must be an object and `shards` a list")
    shards = tuple(_shard_info(entry) for entry in data["shards"])
    if not shards:
        raise ValueError("no shards listed")
    return Manifest(directory=directory, source=str(src["path"]), size=_count(src["size"], "size"),
                    mtime_ns=_count(src["mtime_ns"], "mtime_ns"), sha256=str(src["sha256"]),
                    has_nul=bool(src["has_nul"]), shards=shards)


def read_manifest(directory: str | Path) -> Manifest:
    """The manifest in `directory` as written, not yet checked against any corpus; UserError if unreadable."""
    directory = Path(directory).expanduser()
    path = directory / MANIFEST_NAME
    if not path.is_file():
        raise UserError(f"no shard manifest in {directory}; build shards with "
                        f"`grepseek shard --corpus FILE --shards N --out {directory}`")
    try:
        return _parse_manifest(directory, json.loads(path.read_bytes()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{path} is not a valid shard manifest ({reason}); rebuild with `grepseek shard`") from None


def check_source(source: Path, record: SourceRecord, what: str, verb: str, rebuild: str, *,
                 verify: bool = False) -> int | None:
    """Refuse (UserError) a `record` that no longer describes `source`; the new mtime to record, if any.

    Size first (cheap); the sha256 only when the cheap check cannot decide: another path than the
    recorded one, a new mtime (a byte-identical rewrite, e.g. `grepseek data build` run again,
    passes once and the caller records the new mtime), or verify=True.
    """
    if not source.is_file():
        raise UserError(f"corpus {source} of the {what} does not exist; {rebuild}")
    stat = source.stat()
    if stat.st_size != record.size:
        raise UserError(f"stale {what}: corpus {source} changed since it was {verb} (its size differs); {rebuild}")
    same_path = str(source) == record.source
    if verify or not same_path or stat.st_mtime_ns != record.mtime_ns:
        if file_sha256(source) != record.sha256:
            why = (f"corpus {source} changed since it was {verb} (its sha256 differs)" if same_path else
                   f"they were {verb} from {record.source}, whose content differs from {source} (sha256)")
            raise UserError(f"stale {what}: {why}; {rebuild}")
        if same_path and stat.st_mtime_ns != record.mtime_ns:
            return stat.st_mtime_ns
    return None


def load_manifest(directory: str | Path, corpus: str | Path | None = None, *, verify: bool = False) -> Manifest:
    """The manifest in `directory`, checked against the corpus (default: the one it was built from).

    Stale shards are refused: a source whose size changed, a shard file that is missing or changed,
    or a sha256 that differs. The sha256 is computed only when the cheap check cannot decide: another
    path than the recorded one, a new mtime (a byte-identical rewrite, e.g. `grepseek data build` run
    again, passes and the new mtime is recorded so the next call is cheap again), or verify=True.
    """
    manifest = read_manifest(directory)
    directory = manifest.directory
    source = Path(corpus).expanduser().resolve() if corpus is not None else Path(manifest.source)
    rebuild = f"rebuild with `grepseek shard --corpus {source} --shards {len(manifest.shards)} --out {directory}`"
    new_mtime = check_source(source, manifest, f"shards in {directory}", "sharded", rebuild, verify=verify)
    if new_mtime is not None:
        manifest = _record_mtime(manifest, new_mtime)
    _check_shard_files(manifest, rebuild)
    return manifest


def _record_mtime(manifest: Manifest, mtime_ns: int) -> Manifest:
    """The same bytes under a new mtime: record it (best effort; a read-only folder just hashes again)."""
    fresh = dataclasses.replace(manifest, mtime_ns=mtime_ns)
    with contextlib.suppress(OSError):
        _write_manifest(fresh)
    return fresh


def _check_shard_files(manifest: Manifest, rebuild: str) -> None:
    for info in manifest.shards:
        shard = manifest.directory / info.file
        if not shard.is_file():
            raise UserError(f"shard {shard} is missing; {rebuild}")
        shard_stat = shard.stat()
        if shard_stat.st_size != info.size or shard_stat.st_mtime_ns != info.mtime_ns:
            raise UserError(f"shard {shard} changed since it was written; {rebuild}")
    if sum(s.size for s in manifest.shards) != manifest.size:
        raise UserError(f"shards in {manifest.directory} do not add up to the corpus size; {rebuild}")
