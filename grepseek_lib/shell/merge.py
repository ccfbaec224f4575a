"""Merge helpers shared by the sharded engine and the index path: renumbering, prefixes, post stages.

Both run the first stage on part of the corpus (a shard, or the candidate blocks of the index) and
must print what one run on the whole file prints: `rg|grep -n/-b/--column` numbers are mapped back
to the whole file, and the stages that must see the whole stream run once on the merged bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from grepseek_lib.shell.folder import private_dir
from grepseek_lib.shell.plan import Renumber
from grepseek_lib.shell.runner import run_pipeline
from grepseek_lib.shell.types import EXIT_TIMEOUT, Pipeline, RunResult, Stage

Mapping = Callable[[int], int]


def shift(base: int) -> Mapping:
    """The mapping of a contiguous part that starts `base` lines or bytes into the file."""
    return lambda value: value + base


def first_lines(data: bytes, n: int) -> bytes:
    """The first n lines of data (newline-terminated, as head -n counts)."""
    if n <= 0:
        return b""
    pos = -1
    for _ in range(n):
        pos = data.find(b"\n", pos + 1)
        if pos < 0:
            return data
    return data[: pos + 1]


def renumber(out: bytes, spec: Renumber, line_map: Mapping, byte_map: Mapping) -> bytes:
    """Map the line numbers / byte offsets of `rg|grep -n/-b` output from a part back to the whole file.

    ValueError when the output does not have the expected shape (the caller then runs one plain run).
    """
    if not out:
        return out
    lines = out.split(b"\n")
    if lines.pop():
        raise ValueError("rg and grep end every line they print")
    fixed = []
    for line in lines:
        if not line.startswith(spec.prefix):
            raise ValueError("missing file name prefix")
        pos = len(spec.prefix)
        pieces = [spec.prefix]
        for name in spec.fields:
            colon = line.find(b":", pos)
            digits = line[pos:colon]
            if colon < 0 or not digits.isdigit():
                raise ValueError("missing number")
            value = int(digits)
            value = line_map(value) if name == "line" else byte_map(value) if name == "byte" else value
            pieces.append(b"%d:" % value)
            pos = colon + 1
        pieces.append(line[pos:])
        fixed.append(b"".join(pieces))
    fixed.append(b"")
    return b"\n".join(fixed)


def run_post(pipeline: Pipeline, post: tuple[Stage, ...], merged: bytes, deadline: float,
             max_output_bytes: int | None, corpus_bytes: int | None = None) -> RunResult:
    """The stages that must run once, fed the merged bytes exactly as the earlier stages print them."""
    with private_dir("merge") as folder:
        stream = folder / "merged.jsonl"
        stream.write_bytes(merged)
        rest = Pipeline(text=pipeline.text, stages=(Stage(("cat", "corpus.jsonl")), *post))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return RunResult(b"", b"", EXIT_TIMEOUT, timed_out=True)
        # notes number the post stages as in the whole pipeline (the `cat` stands for the stage before)
        result = run_pipeline(rest, stream, timeout=remaining, max_output_bytes=max_output_bytes,
                              first_stage=len(pipeline.stages) - len(post), corpus_bytes=corpus_bytes)
        if result.timed_out:
            return RunResult(b"", result.stderr, EXIT_TIMEOUT, timed_out=True)
        return result
