"""Run a pipeline on the index's candidate blocks only, printing what one run on the corpus prints.

The candidate blocks are copied (writev from one long-lived mapping of the corpus) into corpus.jsonl
of a private run folder, and the real pipeline runs on it with the same arguments, limits (sized for
the whole corpus) and timeout as a sequential run. Without numbering, that is the whole job: the
first stage prints the same bytes, so every later stage sees the same stream. With -n/-b/--column
the first stage runs alone, its numbers are mapped back through the block table, and the later
stages run once on the result (merge.run_post). Anything a run on the corpus would not explain
(a message on stderr, an odd status, output beyond the buffer) returns None: the caller then runs
the pipeline the usual way. Whether the index pays is decided per command (choose): only when the
candidates are a small part of the corpus (MAX_FRACTION) and its estimated time beats a plain
run's (index_cost.py), else today's path is taken unchanged.

A pipeline that ends in a head over line-local stages (the planner's HEAD strategy, nothing after the
head) runs on the first HEAD_PREFIX_BLOCKS candidate blocks, then on HEAD_GROWTH times as many, then on
all: what the stages print for a prefix of the candidates is a prefix of what they print for all of
them (the rule the shards' head merge rests on), so once the head has its N lines (or bytes) from a
prefix, the blocks after it cannot change the output.
"""

from __future__ import annotations

import bisect
import mmap
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grepseek_lib.config import LOGICAL_CORPUS_NAME
from grepseek_lib.shell import index_cost, prefilter
from grepseek_lib.shell.fold import CONTAINS
from grepseek_lib.shell.folder import RunFolder, empty_run_folder
from grepseek_lib.shell.index import WordIndex
from grepseek_lib.shell.merge import renumber, run_post
from grepseek_lib.shell.plan import HEAD, Plan, plan_pipeline
from grepseek_lib.shell.runner import EXIT_TRUNCATED, run_pipeline
from grepseek_lib.shell.types import EXIT_TIMEOUT, Pipeline, RunResult

#: The index is used when the candidates are at most this part of the corpus: copying and scanning a
#: candidate costs more than scanning it in place, and today's best path scans on every core, so
#: beyond a few percent the plain (or sharded) scan is as fast (measured in docs/INDEX.md).
MAX_FRACTION = 0.05
#: Output of a candidate run is buffered up to this many bytes; more goes the usual (streaming) way.
MAX_BUFFERED_BYTES = 64 << 20
#: A head pipeline's first run reads this many candidate blocks; each next one this many times more.
HEAD_PREFIX_BLOCKS, HEAD_GROWTH = 64, 16
_IOV_MAX = 1024


@dataclass(frozen=True)
class Candidates:
    """The blocks a command needs, and what the command needs done with their output."""

    prefilter: prefilter.Prefilter
    blocks: np.ndarray
    nbytes: int
    #: (unit, N) of the head the pipeline ends in, when it runs on growing prefixes (_head_target).
    head: tuple[str, int] | None = None


class IndexPath:
    """Chooses and runs the candidate path for one corpus and its index."""

    def __init__(self, index: WordIndex, corpus: Path, max_fraction: float = MAX_FRACTION) -> None:
        self.index = index
        self.corpus = corpus
        self.max_fraction = max_fraction
        lengths = index.lengths[:-1]
        #: Every block but the last holds at least this many bytes: len(blocks) bounds the candidates
        #: from below without summing a long posting (an unselective word is turned away in microseconds).
        self.min_block_bytes = int(lengths.min()) if len(lengths) else 0
        self.ends = index.offsets + index.lengths
        self.mapping = CorpusMapping(corpus)

    def choose(self, pipeline: Pipeline) -> Candidates | str:
        """The candidates of `pipeline`, or why the index is not used for it."""
        if self.index.manifest.has_nul:
            return "the corpus holds NUL bytes (binary detection depends on what is read)"
        found = prefilter.analyze(pipeline)
        if isinstance(found, str):
            return found
        folder = self.index.folder
        alternatives = []
        for alt in found.alternatives:
            terms = [term for literal in alt for term in folder.literal_terms(literal, found.unicode_case)]
            if not terms:
                return "a literal without a word the index can look up"
            alternatives.append(terms)
        # a bare word: nearly every block holding it holds a matching line (`"Rex"` is not: the title form;
        # nor is a case-sensitive `WILM`, whose blocks hold `Wilmington`)
        one_word = all(len(terms) == 1 and terms[0].kind == CONTAINS for terms in alternatives) and \
            (found.folds_case or all(_usual_case(literal) for alt in found.alternatives for literal in alt))
        chosen = plan_pipeline(pipeline)
        heads = (_head_lines(chosen), _head_target(pipeline, chosen))
        sure = self.index.surely_candidates(alternatives)
        reason = self._not_worth(pipeline, found, one_word, heads, sure)
        if reason:
            return reason
        blocks = self.index.candidates(alternatives)
        if blocks is None:
            return "every block may match"
        reason = self._not_worth(pipeline, found, one_word, heads, blocks)
        if reason:
            return reason
        nbytes = int(self.index.lengths[blocks].sum()) if len(blocks) else 0
        return Candidates(found, blocks, nbytes, heads[1])

    def _not_worth(self, pipeline: Pipeline, found: prefilter.Prefilter, one_word: bool,
                   heads: tuple[int | None, tuple[str, int] | None], blocks: np.ndarray) -> str | None:
        """Why reading `blocks` (or any superset of them) costs more than a plain run, else None
        (index_cost.py). max_fraction >= 1 means: always, when exact (the tests)."""
        if self.max_fraction >= 1:
            return None
        size = self.index.manifest.size
        if (len(blocks) - 1) * self.min_block_bytes > self.max_fraction * size:
            return f"unselective: candidates are at least {(len(blocks) - 1) * self.min_block_bytes / size:.0%} of the corpus"
        nbytes = int(self.index.lengths[blocks].sum()) if len(blocks) else 0
        if nbytes > self.max_fraction * size:
            return f"unselective: candidates are at least {nbytes / max(1, size):.0%} of the corpus"
        rate = index_cost.scan_rate(pipeline.stages[0].program, found.folds_case)
        head_lines, target = heads
        prefix = None
        if target is not None and len(blocks) > HEAD_PREFIX_BLOCKS:
            first = blocks[:HEAD_PREFIX_BLOCKS]
            prefix = (len(first), int(self.index.lengths[first].sum()))
        extra = index_cost.PLAIN_S if found.renumber is not None and len(pipeline.stages) > 1 else 0.0
        return index_cost.not_worth(blocks, nbytes, self.ends, size, rate, head_lines, one_word, prefix, extra)

    def run(self, pipeline: Pipeline, chosen: Candidates, timeout: float,
            max_output_bytes: int | None) -> RunResult | None:
        """What the pipeline prints (see the module docstring); None: run it the usual way instead.

        A head's growing prefixes share one candidate file: each round appends the blocks it adds.
        """
        deadline = time.monotonic() + timeout
        total = len(chosen.blocks)
        count = HEAD_PREFIX_BLOCKS if chosen.head is not None else total
        with empty_run_folder() as folder:
            fd = os.open(folder.work / LOGICAL_CORPUS_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                written = 0
                while True:
                    count = min(count, total)
                    self._append(fd, chosen.blocks[written:count])
                    written = count
                    result = self._run_blocks(pipeline, chosen, folder, chosen.blocks[:count], deadline,
                                              max_output_bytes)
                    if count == total or result is None or result.timed_out or _fills(result, *chosen.head):
                        return result
                    count *= HEAD_GROWTH
            finally:
                os.close(fd)

    def _run_blocks(self, pipeline: Pipeline, chosen: Candidates, folder: RunFolder, blocks: np.ndarray,
                    deadline: float, max_output_bytes: int | None) -> RunResult | None:
        """The pipeline run on `blocks` (all the candidates, or a prefix of them for a head), which
        `folder` holds as work/corpus.jsonl."""
        timeout = max(0.0, deadline - time.monotonic())
        size = self.index.manifest.size
        path = folder.work / LOGICAL_CORPUS_NAME
        spec = chosen.prefilter.renumber
        if spec is None:
            cap = MAX_BUFFERED_BYTES if max_output_bytes is None else max_output_bytes
            result = run_pipeline(pipeline, path, timeout=timeout, max_output_bytes=cap, corpus_bytes=size,
                                  folder=folder)
            if result.timed_out:
                return RunResult(b"", result.stderr, EXIT_TIMEOUT, timed_out=True)
            if result.truncated and max_output_bytes is None:
                return None
            return result if _clean(result) else None
        first = Pipeline(text=pipeline.text, stages=pipeline.stages[:1])
        result = run_pipeline(first, path, timeout=timeout, max_output_bytes=MAX_BUFFERED_BYTES,
                              corpus_bytes=size, folder=folder)
        if result.timed_out:
            return RunResult(b"", result.stderr, EXIT_TIMEOUT, timed_out=True)
        if result.truncated or not _clean(result):
            return None
        try:
            out = renumber(result.stdout, spec, *self._maps(blocks))
        except ValueError:
            return None
        if len(pipeline.stages) > 1:
            return run_post(pipeline, pipeline.stages[1:], out, deadline, max_output_bytes, corpus_bytes=size)
        if max_output_bytes is not None and len(out) > max_output_bytes:
            return RunResult(out[:max_output_bytes], b"", EXIT_TRUNCATED, truncated=True)
        return RunResult(out, b"", result.exit_code)

    def _append(self, fd: int, blocks: np.ndarray) -> None:
        """Append the blocks to `fd`, adjacent blocks as one range, many ranges a system call."""
        if len(blocks):
            starts, ends = _ranges(self.index.offsets[blocks], self.index.lengths[blocks])
            _write_ranges(self.mapping.view(ends[-1]), fd, starts, ends)

    def _maps(self, blocks: np.ndarray):
        """(line map, byte map) from the candidate file's numbers to the corpus's."""
        lengths = self.index.lengths[blocks].tolist()
        counts = self.index.line_counts[blocks].tolist()
        firsts = self.index.first_lines[blocks].tolist()
        offsets = self.index.offsets[blocks].tolist()
        byte_starts = [0, *np.cumsum(lengths).tolist()][:-1] if lengths else []
        line_starts = [1, *(np.cumsum(counts) + 1).tolist()][:-1] if counts else []

        def line_map(value: int) -> int:
            k = bisect.bisect_right(line_starts, value) - 1
            return firsts[k] + value - line_starts[k]

        def byte_map(value: int) -> int:
            k = bisect.bisect_right(byte_starts, value) - 1
            return offsets[k] + value - byte_starts[k]

        return line_map, byte_map


def _head_lines(chosen: Plan) -> int | None:
    """N when a plain run of the planned pipeline stops after about N lines of its first stage (head, -m), else None.

    Only when every stage between the first and the head keeps every line (cut, tr): after another
    filter (`rg X corpus.jsonl | rg -w Y | head`) the head's N-th line may come much later, or never.
    """
    if chosen.strategy != HEAD or any(s.program not in ("cut", "tr") for s in chosen.parallel[1:-1]):
        return None
    return max(1, chosen.head_lines or 1)


def _head_target(pipeline: Pipeline, chosen: Plan) -> tuple[str, int] | None:
    """(unit, N) when the pipeline ends in a head that the planner's HEAD strategy pushes through every
    stage before it (each prints, for a prefix of its input, a prefix of its output), else None."""
    if len(pipeline.stages) < 2 or pipeline.stages[-1].program != "head":
        return None
    if chosen.strategy != HEAD or chosen.post or len(chosen.parallel) != len(pipeline.stages):
        return None
    if chosen.head_lines is not None:
        return "lines", chosen.head_lines
    return None if chosen.head_bytes is None else ("bytes", chosen.head_bytes)


def _usual_case(literal: str) -> bool:
    """lower case or Capitalized, as most words of running text are (the index folds case away)."""
    return literal[1:] == literal[1:].lower()


def _fills(result: RunResult, unit: str, count: int) -> bool:
    """The head printed all it ever prints: its N lines (or bytes), complete and untruncated."""
    if result.truncated or not _clean(result):
        return False
    return (result.stdout.count(b"\n") if unit == "lines" else len(result.stdout)) >= count


def _clean(result: RunResult) -> bool:
    """A run one run on the corpus explains: nothing on stderr, a normal status or our own output cap."""
    return not result.stderr and (result.exit_code in (0, 1) or result.truncated)


def _ranges(offsets: np.ndarray, lengths: np.ndarray) -> tuple[list[int], list[int]]:
    """(starts, ends) of the byte ranges covering the blocks, adjacent blocks joined."""
    ends = offsets + lengths
    breaks = np.flatnonzero(offsets[1:] != ends[:-1]) + 1
    return offsets[np.r_[0, breaks]].tolist(), ends[np.r_[breaks - 1, len(offsets) - 1]].tolist()


def _write_ranges(view: memoryview, fd_out: int, starts: list[int], ends: list[int]) -> None:
    """Append the [start, end) ranges of `view` to `fd_out`, IOV_MAX at a time.

    One writev per 1024 ranges instead of one copy call per range (~10 us each on an overlay file
    system): a rare name's 78 blocks are one call.
    """
    for first in range(0, len(starts), _IOV_MAX):
        parts = [view[a:b] for a, b in zip(starts[first:first + _IOV_MAX], ends[first:first + _IOV_MAX], strict=True)]
        try:
            _writev_all(fd_out, parts)
        finally:
            for part in parts:
                part.release()


class CorpusMapping:
    """One read-only mapping of the corpus, kept while the file stays the same (device, inode, size,
    mtime): a fresh mapping per command pays a page fault per scattered block, 2.5-4x the copy itself
    (docs/INDEX.md). A mapping another thread still reads from is dropped, never closed under it."""

    def __init__(self, corpus: Path) -> None:
        self.corpus = corpus
        self._key: tuple[int, int, int, int] | None = None
        self._view: memoryview | None = None
        self._lock = threading.Lock()

    def view(self, end: int) -> memoryview:
        """The mapping, checked to hold at least `end` bytes."""
        info = os.stat(self.corpus)
        if end > info.st_size:
            raise OSError("the corpus is shorter than its index says")
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        with self._lock:
            if key != self._key or self._view is None:
                with open(self.corpus, "rb") as src:
                    self._view = memoryview(mmap.mmap(src.fileno(), 0, access=mmap.ACCESS_READ))
                self._key = key
            return self._view


def _writev_all(fd: int, parts: list[memoryview]) -> None:
    """os.writev of every byte of `parts`; a short write (a regular file rarely makes one) is finished part by part."""
    done = os.writev(fd, parts)
    for part in parts:
        if done >= len(part):
            done -= len(part)
            continue
        while done < len(part):
            with part[done:] as rest:
                done += os.write(fd, rest)
        done = 0
