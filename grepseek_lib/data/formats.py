"""Corpus and benchmark file formats: wiki-18 / FlashRAG jsonl, the DPR tsv, FlashRAG datasets.

Everything streams line by line, so a user's 14 GB wiki-18 never sits in memory, and every bad line
is reported with its file and line number instead of a traceback.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from grepseek_lib import config
from grepseek_lib.errors import UserError
from grepseek_lib.pagecache import WRITE_BUFFER

#: Header line of the DPR passage file psgs_w100.tsv.
DPR_HEADER = ("id", "text", "title")


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


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _open_binary(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise UserError(f"{what} {path} does not exist (or is not a file); check the path")


def is_dpr_tsv(path: Path) -> bool:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.endswith(".tsv")


def iter_jsonl(path: Path, what: str = "file") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object is a UserError."""
    path = Path(path)
    _require_file(path, what)
    with _open_binary(path) as handle:
        for lineno, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
                raise UserError(f"{path}:{lineno}: corrupt line ({reason}); fix or remove it") from None
            if not isinstance(obj, dict):
                raise UserError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def _passage(pid: Any, title: str, text: str, contents: str | None = None) -> dict[str, str]:
    if contents is None:
        contents = make_contents(title, text)
    return {"id": str(pid), "title": title, "text": text, "contents": contents}


def _iter_wiki18(path: Path) -> Iterator[dict[str, str]]:
    for lineno, obj in iter_jsonl(path, "corpus"):
        pid = obj.get("id")
        contents = obj.get("contents")
        if pid is None or not isinstance(contents, str):
            if isinstance(obj.get("text"), str):  # the {"id", "title", "text"} variant
                yield _passage(pid if pid is not None else lineno, str(obj.get("title", "")), obj["text"])
                continue
            raise UserError(
                f"{path}:{lineno}: a corpus line needs \"id\" and \"contents\" "
                f"(wiki-18 format {{\"id\": \"1\", \"contents\": \"\\\"Title\\\"\\ntext\"}})"
            )
        title, text = passage_title_text(contents)
        yield _passage(pid, title, text, contents)


def _iter_dpr_tsv(path: Path) -> Iterator[dict[str, str]]:
    csv.field_size_limit(min(sys.maxsize, (1 << 31) - 1))
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter="\t")
        try:
            for row in reader:
                lineno = reader.line_num
                if lineno == 1 and tuple(c.strip().lower() for c in row) == DPR_HEADER:
                    continue
                if not row:
                    continue
                if len(row) != 3:
                    raise UserError(
                        f"{path}:{lineno}: expected 3 tab-separated fields (id, text, title), got {len(row)}"
                    )
                pid, text, title = row
                yield _passage(pid, title, text)
        except csv.Error as exc:
            raise UserError(f"{path}:{reader.line_num}: corrupt line ({exc})") from None
        except UnicodeDecodeError:
            raise UserError(f"{path}: near line {reader.line_num + 1}: not UTF-8") from None


def iter_corpus(path: str | Path) -> Iterator[dict[str, str]]:
    """Stream a corpus as dicts {id, title, text, contents}.

    Reads wiki-18 / FlashRAG jsonl (`{"id", "contents"}`) and the DPR tsv (`id \\t text \\t title`,
    header line, `.tsv`), either optionally gzipped. One passage at a time; never the whole file.
    """
    path = Path(path)
    _require_file(path, "corpus")
    return _iter_dpr_tsv(path) if is_dpr_tsv(path) else _iter_wiki18(path)


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
