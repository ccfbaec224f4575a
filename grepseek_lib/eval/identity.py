"""What an eval run is, recorded in OUT/settings.json, so a resume never mixes two systems in one table.

Records made on another corpus, model or budget are not comparable; a rerun with the same --out resumes only
when every setting that changes answers matches. The corpus is identified by its content (sha256), which is
hashed once and cached by path, size and mtime: a wiki-18 corpus is 14 GB.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.errors import UserError
from grepseek_lib.shell.index import find_index

SETTINGS = "settings.json"
#: Recorded for the reader but not compared on resume: a moved corpus with the same bytes is the same corpus,
#: and shards change speed only (the engine's output equals one sequential pass).
INFORMATIONAL = ("corpus_path", "shards", "index")


def _hash_cache() -> Path:
    return config.data_dir() / "cache" / "sha256.json"


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        cache = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, from the cache when its size and mtime are unchanged (else hashed and cached)."""
    path = Path(path).resolve()
    stat = path.stat()
    stamp = [stat.st_size, stat.st_mtime_ns]
    cache_file = _hash_cache()
    cache = _read_cache(cache_file)
    entry = cache.get(str(path))
    if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    cache = {key: value for key, value in cache.items() if Path(key).exists()}  # forget deleted files
    cache[str(path)] = {"stamp": stamp, "sha256": digest.hexdigest()}
    try:  # a cache we cannot write only costs a rehash next time
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1) + "\n", encoding="utf-8")
        tmp.replace(cache_file)
    except OSError:
        pass
    return digest.hexdigest()


def run_identity(corpus: Path, shards: Path | None, **settings: Any) -> dict[str, Any]:
    """The settings.json record: the corpus (path, bytes, sha256), shards, index, then `settings` as given."""
    corpus = Path(corpus)
    return {"corpus_path": str(corpus.resolve()), "corpus_bytes": corpus.stat().st_size,
            "corpus_sha256": file_sha256(corpus), "shards": str(Path(shards).resolve()) if shards else None,
            "index": str(found.resolve()) if (found := find_index(corpus, shards, None)) else None, **settings}


def read_identity(out_dir: Path) -> dict[str, Any] | None:
    """OUT/settings.json, or None when there is none; a damaged one is an error naming it."""
    path = Path(out_dir) / SETTINGS
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise UserError(f"{path} is damaged; delete it only if the records in {out_dir} match this run's settings")
    return data


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """`key: old -> new` for each compared setting that both records have and that differs."""
    return [f"{key} {_show(before[key])} -> {_show(value)}" for key, value in now.items()
            if key not in INFORMATIONAL and key in before and before[key] != value]


def _show(value: Any) -> str:
    """A value for a one-line message: a sha256 cut to 12 hex digits."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]
    return repr(value)


def check_and_record(out_dir: Path, identity: dict[str, Any]) -> None:
    """Refuse to resume `out_dir` under other settings; then write the (possibly completed) identity.

    A settings.json from an older grepseek lacks some keys: those are taken from this run and noted on stderr,
    since its records were most likely made by the same command.
    """
    out_dir = Path(out_dir)
    before = read_identity(out_dir)
    if before is not None:
        changed = differences(before, identity)
        if changed:
            raise UserError(f"{out_dir} holds results of another setup ({'; '.join(changed)}): use a new --out, "
                            "or the same settings to resume")
        missing = [key for key in identity if key not in before and key not in INFORMATIONAL]
        if missing:
            print(f"grepseek: note: {out_dir / SETTINGS} predates {', '.join(missing)}; recording this run's values",
                  file=sys.stderr)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f"{SETTINGS}.tmp"
    tmp.write_text(json.dumps({**(before or {}), **identity}, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out_dir / SETTINGS)
