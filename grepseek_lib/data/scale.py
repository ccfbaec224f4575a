"""A bigger corpus for engine benchmarks: the mini-wiki repeated with fresh ids, streamed.

Latency only shows at the scale of the real 14 GB wiki-18; repeating the mini-wiki keeps the
text and the line-length distribution real while reaching any size. Copy 0 is the source
verbatim (so gold passage ids still resolve); copy r >= 1 gets ids no other line has.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from grepseek_lib.checks import positive
from grepseek_lib.errors import UserError
from grepseek_lib.pagecache import WRITE_BUFFER
from grepseek_lib.progress import progress_bar

#: How wiki-18 lines start (default json.dumps): the id can be swapped without parsing the line.
_ID_PREFIX = re.compile(rb'^\{"id": "([^"\\]*)"')


def _line_id(line: bytes, lineno: int, corpus: Path) -> bytes:
    match = _ID_PREFIX.match(line)
    if match:
        return match.group(1)
    try:
        obj = json.loads(line)
        return str(obj["id"]).encode()
    except (ValueError, KeyError, TypeError):
        raise UserError(f"{corpus}:{lineno}: not a wiki-18 corpus line with an \"id\"; fix the corpus") from None


def _with_id(line: bytes, new_id: bytes) -> bytes:
    match = _ID_PREFIX.match(line)
    if match:
        return b'{"id": "' + new_id + b'"' + line[match.end():]
    obj = json.loads(line)
    obj["id"] = new_id.decode()
    return json.dumps(obj).encode() + b"\n"


def _id_scheme(corpus: Path) -> tuple[int | None, int]:
    """(stride for numeric ids or None, number of lines): copy r adds r * stride to a numeric id."""
    max_id = -1
    numeric = True
    count = 0
    with open(corpus, "rb") as src:
        for count, line in enumerate(src, 1):
            if not line.strip():
                continue
            pid = _line_id(line, count, corpus)
            if numeric and pid.isdigit():
                max_id = max(max_id, int(pid))
            else:
                numeric = False
    return (max_id + 1 if numeric else None), count


def scale_corpus(corpus: str | Path, size_mb: float, out: str | Path) -> Path:
    """Write `out`: whole lines of `corpus`, repeated with fresh ids, until about `size_mb` MB (10^6 B).

    Numeric ids of copy r become id + r * (max id + 1); other ids get a `-r` suffix. Written
    atomically (a temporary file renamed at the end), one line at a time.
    """
    corpus = Path(corpus).expanduser()
    out = Path(out).expanduser()
    if not corpus.is_file():
        raise UserError(f"corpus {corpus} does not exist; build it with `grepseek data build` or fix --corpus")
    positive("--size-mb", size_mb)  # nan and inf too: the target size is int(size_mb * 10^6)
    if out.resolve() == corpus.resolve():
        raise UserError(f"--out {out} is the source corpus itself; choose another file")
    stride, _ = _id_scheme(corpus)
    if corpus.stat().st_size == 0:
        raise UserError(f"corpus {corpus} is empty; nothing to repeat")
    target = int(size_mb * 1_000_000)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    written = 0
    copy = 0
    with open(tmp, "wb", buffering=WRITE_BUFFER) as dst, \
            progress_bar(total=target, unit="B", unit_scale=True, desc="scale corpus") as bar:
        while written < target:
            with open(corpus, "rb") as src:
                for lineno, line in enumerate(src, 1):
                    if not line.strip():
                        continue
                    if not line.endswith(b"\n"):
                        line += b"\n"
                    if copy:
                        pid = _line_id(line, lineno, corpus)
                        new_id = str(int(pid) + copy * stride).encode() if stride else pid + b"-%d" % copy
                        line = _with_id(line, new_id)
                    dst.write(line)
                    written += len(line)
                    bar.update(len(line))
                    if written >= target:
                        break
            copy += 1
    os.replace(tmp, out)
    return out
