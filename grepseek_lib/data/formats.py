"""Corpus and benchmark file formats: wiki-18 / FlashRAG jsonl, the DPR tsv, FlashRAG datasets.

Everything streams line by line, so a user's 14 GB wiki-18 never sits in memory, and every bad line
is reported with its file and line number instead of a traceback.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from grepseek_lib import config
from grepseek_lib.errors import UserError
from grepseek_lib.pagecache import WRITE_BUFFER

#: Header line of the DPR passage file psgs_w100.tsv.
DPR_HEADER = ("id", "text", "title")
#: Where a corpus record starts and what it holds: (byte offset, line number, passage or JSON object).
CorpusRecord = tuple[int, int, dict[str, Any]]


def make_contents(title: str, text: str) -> str:
    """The wiki-18 `contents` field: the title in double quotes, a newline, the passage text."""
    return f'"{title}"\n{text}'


def passage_title_text(contents: str) -> tuple[str, str]:
    """Split a wiki-18 `contents` back into (title, text); a line without a title gives ("", contents)."""
    head, sep, text = contents.partition("\n")
    if not sep:
        return "", contents
    if len(head) >= 2 and head.startswith('"') and head.endswith('"'):
        head = head[1:-1]
    return head, text


def corpus_line(passage_id: str | int, title: str, text: str) -> str:
    """One corpus line exactly as wiki-18 writes it (default json.dumps: ASCII escapes, ", " / ": ")."""
    return json.dumps({"id": str(passage_id), "contents": make_contents(title, text)})


def _open_binary(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise UserError(f"{what} {path} does not exist (or is not a file); check the path")


def is_dpr_tsv(path: Path) -> bool:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.endswith(".tsv")


def _json_object(path: Path, lineno: int, raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise UserError(f"{path}:{lineno}: corrupt line ({reason}); fix or remove it") from None
    if not isinstance(obj, dict):
        raise UserError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _jsonl_objects(path: Path, handle: IO[bytes], offset: int = 0, lineno: int = 0) -> Iterator[CorpusRecord]:
    """(byte offset, line number, object) of each non-blank line from the handle's position on."""
    for raw in handle:
        lineno += 1
        start, offset = offset, offset + len(raw)
        if raw.strip():
            yield start, lineno, _json_object(path, lineno, raw)


def iter_jsonl(path: Path, what: str = "file") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object is a UserError."""
    path = Path(path)
    _require_file(path, what)
    with _open_binary(path) as handle:
        for _, lineno, obj in _jsonl_objects(path, handle):
            yield lineno, obj


def _passage(pid: Any, title: str, text: str, contents: str | None = None) -> dict[str, str]:
    if contents is None:
        contents = make_contents(title, text)
    return {"id": str(pid), "title": title, "text": text, "contents": contents}


def _wiki18_passage(path: Path, lineno: int, obj: dict[str, Any]) -> dict[str, str]:
    pid = obj.get("id")
    contents = obj.get("contents")
    if pid is None or not isinstance(contents, str):
        if isinstance(obj.get("text"), str):  # the {"id", "title", "text"} variant
            return _passage(pid if pid is not None else lineno, str(obj.get("title", "")), obj["text"])
        raise UserError(
            f"{path}:{lineno}: a corpus line needs \"id\" and \"contents\" "
            f"(wiki-18 format {{\"id\": \"1\", \"contents\": \"\\\"Title\\\"\\ntext\"}})"
        )
    title, text = passage_title_text(contents)
    return _passage(pid, title, text, contents)


def _wiki18_records(path: Path, handle: IO[bytes], offset: int = 0, lineno: int = 0) -> Iterator[CorpusRecord]:
    for start, number, obj in _jsonl_objects(path, handle, offset, lineno):
        yield start, number, _wiki18_passage(path, number, obj)


class _TrackedLines:
    """The decoded lines of a binary handle, counting the bytes and lines handed out.

    csv.reader pulls exactly a record's lines, so the count before each record is where it starts:
    a text-mode file cannot say that (tell() is off while iterating), and the index needs it.
    """

    def __init__(self, path: Path, handle: IO[bytes], offset: int, lineno: int) -> None:
        self.path, self.handle, self.offset, self.lineno = path, handle, offset, lineno

    def __iter__(self) -> Iterator[str]:
        for raw in self.handle:
            self.lineno += 1
            self.offset += len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise UserError(f"{self.path}:{self.lineno}: not UTF-8") from None
            yield line


def _dpr_records(path: Path, handle: IO[bytes], offset: int = 0, lineno: int = 0) -> Iterator[CorpusRecord]:
    csv.field_size_limit(min(sys.maxsize, (1 << 31) - 1))
    lines = _TrackedLines(path, handle, offset, lineno)
    reader = csv.reader(lines, delimiter="\t")
    try:
        while True:
            start, first = lines.offset, lines.lineno + 1
            row = next(reader, None)
            if row is None:
                return
            if lines.lineno == 1 and tuple(c.strip().lower() for c in row) == DPR_HEADER:
                continue
            if not row:
                continue
            if len(row) != 3:
                raise UserError(
                    f"{path}:{lines.lineno}: expected 3 tab-separated fields (id, text, title), got {len(row)}"
                )
            pid, text, title = row
            yield start, first, _passage(pid, title, text)
    except csv.Error as exc:
        raise UserError(f"{path}:{lines.lineno}: corrupt line ({exc})") from None


def _record_reader(path: Path) -> Callable[..., Iterator[CorpusRecord]]:
    return _dpr_records if is_dpr_tsv(path) else _wiki18_records


def iter_corpus_records(path: str | Path) -> Iterator[CorpusRecord]:
    """iter_corpus with where each passage starts: (byte offset, line number, passage).

    The offset counts bytes of the uncompressed stream (of a .gz too); read_corpus_records takes it back.
    """
    path = Path(path)
    _require_file(path, "corpus")
    with _open_binary(path) as handle:
        yield from _record_reader(path)(path, handle)


def iter_corpus(path: str | Path) -> Iterator[dict[str, str]]:
    """Stream a corpus as dicts {id, title, text, contents}.

    Reads wiki-18 / FlashRAG jsonl (`{"id", "contents"}`) and the DPR tsv (`id \\t text \\t title`,
    header line, `.tsv`), either optionally gzipped. One passage at a time; never the whole file.
    """
    path = Path(path)
    _require_file(path, "corpus")
    return (passage for _, _, passage in iter_corpus_records(path))


def read_corpus_records(path: str | Path, places: Sequence[tuple[int, int]]) -> list[dict[str, str]]:
    """The passages starting at these (byte offset, line number) places, parsed as iter_corpus parses them.

    One open, read in file order: a .gz seeks by decompressing, so sorted reads pass over it once.
    A place where no passage starts means the file changed since the places were taken: a UserError.
    """
    path = Path(path)
    _require_file(path, "corpus")
    records = _record_reader(path)
    found: dict[tuple[int, int], dict[str, str]] = {}
    with _open_binary(path) as handle:
        for offset, lineno in sorted(set(places)):
            handle.seek(offset)
            record = next(records(path, handle, offset, lineno - 1), None)
            if record is None or record[0] != offset:
                raise UserError(f"{path}: no passage starts at byte {offset} (line {lineno}); the corpus "
                                "changed since its index was built, so rebuild the index")
            found[offset, lineno] = record[2]
    return [found[place] for place in places]


def benchmark_path(name_or_path: str | Path) -> Path:
    """A benchmark name (`nq`) resolves to config.benchmarks_dir()/nq.jsonl; anything else is a path."""
    text = str(name_or_path)
    if os.sep in text or "/" in text or text.endswith((".jsonl", ".gz")):
        return Path(text).expanduser()
    return config.benchmarks_dir() / f"{text}.jsonl"


def _golden_answers(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    return []


def _benchmark_record(obj: dict[str, Any], path: Path, lineno: int, index: int) -> dict[str, Any]:
    """One FlashRAG line as {id, question, golden_answers, metadata}; a line without a question is an error."""
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise UserError(f"{path}:{lineno}: a benchmark line needs a non-empty \"question\"")
    answers = obj.get("golden_answers", obj.get("answers", obj.get("answer")))
    metadata = obj.get("metadata")
    return {
        "id": str(obj.get("id", f"{path.stem}_{index}")),
        "question": question,
        "golden_answers": _golden_answers(answers),
        "metadata": metadata if isinstance(metadata, dict) else {},
    }


def iter_benchmark(path: Path) -> Iterator[dict[str, Any]]:
    """Stream a FlashRAG dataset jsonl as records (a 90k-question train file never sits in memory whole)."""
    for index, (lineno, obj) in enumerate(iter_jsonl(path, "benchmark")):
        yield _benchmark_record(obj, path, lineno, index)


def load_benchmark(name_or_path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Read a FlashRAG dataset jsonl ({id, question, golden_answers, metadata}); the first `limit` rows."""
    path = benchmark_path(name_or_path)
    if not path.is_file():
        known = ", ".join((*config.BENCHMARKS, *config.TRAIN_SPLITS))
        raise UserError(
            f"benchmark {name_or_path!r}: {path} does not exist; run `grepseek data build` "
            f"(names: {known}) or give the path of a FlashRAG .jsonl file"
        )
    if limit is not None and limit <= 0:
        return []
    return list(itertools.islice(iter_benchmark(path), limit))


def passage_words(path: str | Path, limit: int) -> list[int]:
    """Words per passage of the first `limit` passages: a length profile without reading a 14 GB corpus whole."""
    return [len(p["text"].split()) for p in itertools.islice(iter_corpus(path), limit)]


def write_lines(path: Path, lines: Iterable[str]) -> int:
    """Write lines (each + "\\n") atomically: a crash never leaves a half-written file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with open(tmp, "w", encoding="utf-8", newline="\n", buffering=WRITE_BUFFER) as handle:
        for line in lines:
            handle.write(line)
            handle.write("\n")
            count += 1
    os.replace(tmp, path)
    return count


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """FlashRAG-style jsonl (default json.dumps, like the published datasets)."""
    return write_lines(path, (json.dumps(r) for r in records))
