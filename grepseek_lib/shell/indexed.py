"""Run a pipeline on the index's candidate blocks only, printing what one run on the corpus prints.

The candidate blocks are copied (in-kernel, copy_file_range) into a private file that the runner
links as corpus.jsonl, and the real pipeline runs on it with the same arguments, limits (sized for
the whole corpus) and timeout as a sequential run. Without numbering, that is the whole job: the
first stage prints the same bytes, so every later stage sees the same stream. With -n/-b/--column
the first stage runs alone, its numbers are mapped back through the block table, and the later
stages run once on the result (merge.run_post). Anything a run on the corpus would not explain
(a message on stderr, an odd status, output beyond the buffer) returns None: the caller then runs
the pipeline the usual way. Whether the index pays is decided per command (choose): only when the
candidates are a small part of the corpus (MAX_FRACTION) and its estimated time beats a plain
run's (index_cost.py), else today's path is taken unchanged.
"""

from __future__ import annotations

import bisect
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grepseek_lib.shell import index_cost, prefilter
from grepseek_lib.shell.fold import CONTAINS
from grepseek_lib.shell.folder import private_dir
from grepseek_lib.shell.index import WordIndex
from grepseek_lib.shell.merge import renumber, run_post
from grepseek_lib.shell.plan import HEAD, plan_pipeline
from grepseek_lib.shell.runner import EXIT_TRUNCATED, run_pipeline
from grepseek_lib.shell.types import EXIT_TIMEOUT, Pipeline, RunResult

#: The index is used when the candidates are at most this part of the corpus: copying and scanning a
#: candidate costs more than scanning it in place, and today's best path scans on every core, so
#: beyond a few percent the plain (or sharded) scan is as fast (measured in docs/INDEX.md).
MAX_FRACTION = 0.05
#: Output of a candidate run is buffered up to this many bytes; more goes the usual (streaming) way.
MAX_BUFFERED_BYTES = 64 << 20


@dataclass(frozen=True)
class Candidates:
    """The blocks a command needs, and what the command needs done with their output."""

    prefilter: prefilter.Prefilter
    blocks: np.ndarray
    nbytes: int


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
            terms = [term for literal in alt for term in folder.literal_terms(literal)]
            if not terms:
                return "a literal without a word character"
            alternatives.append(terms)
        # a bare word: nearly every block holding it holds a matching line (`"Rex"` is not: the title form)
        one_word = all(len(terms) == 1 and terms[0].kind == CONTAINS for terms in alternatives)
        sure = self.index.surely_candidates(alternatives)
        reason = self._not_worth(pipeline, found, one_word, sure)
        if reason:
            return reason
        blocks = self.index.candidates(alternatives)
        if blocks is None:
            return "every block may match"
        reason = self._not_worth(pipeline, found, one_word, blocks)
        if reason:
            return reason
        nbytes = int(self.index.lengths[blocks].sum()) if len(blocks) else 0
        return Candidates(found, blocks, nbytes)

    def _not_worth(self, pipeline: Pipeline, found: prefilter.Prefilter, one_word: bool,
                   blocks: np.ndarray) -> str | None:
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
        return index_cost.not_worth(blocks, nbytes, self.ends, size, rate, _head_lines(pipeline), one_word)

    def run(self, pipeline: Pipeline, chosen: Candidates, timeout: float,
            max_output_bytes: int | None) -> RunResult | None:
        """What the pipeline prints (see the module docstring); None: run it the usual way instead."""
        deadline = time.monotonic() + timeout
        size = self.index.manifest.size
        with private_dir("cand") as folder:
            path = folder / "corpus.jsonl"
            self._write(path, chosen.blocks)
            spec = chosen.prefilter.renumber
            if spec is None:
                cap = MAX_BUFFERED_BYTES if max_output_bytes is None else max_output_bytes
                result = run_pipeline(pipeline, path, timeout=timeout, max_output_bytes=cap, corpus_bytes=size)
                if result.timed_out:
                    return RunResult(b"", result.stderr, EXIT_TIMEOUT, timed_out=True)
                if result.truncated and max_output_bytes is None:
                    return None
                return result if _clean(result) else None
            first = Pipeline(text=pipeline.text, stages=pipeline.stages[:1])
            result = run_pipeline(first, path, timeout=timeout, max_output_bytes=MAX_BUFFERED_BYTES,
                                  corpus_bytes=size)
        if result.timed_out:
            return RunResult(b"", result.stderr, EXIT_TIMEOUT, timed_out=True)
        if result.truncated or not _clean(result):
            return None
        try:
            out = renumber(result.stdout, spec, *self._maps(chosen.blocks))
        except ValueError:
            return None
        if len(pipeline.stages) > 1:
            return run_post(pipeline, pipeline.stages[1:], out, deadline, max_output_bytes, corpus_bytes=size)
        if max_output_bytes is not None and len(out) > max_output_bytes:
            return RunResult(out[:max_output_bytes], b"", EXIT_TRUNCATED, truncated=True)
        return RunResult(out, b"", result.exit_code)

    def _write(self, path: Path, blocks: np.ndarray) -> None:
        """Copy the blocks into `path`, adjacent blocks as one range."""
        offsets, lengths = self.index.offsets[blocks], self.index.lengths[blocks]
        fd_out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with open(self.corpus, "rb") as src:
                start = end = None
                for off, length in zip(offsets.tolist(), lengths.tolist(), strict=True):
                    if end == off:
                        end += length
                        continue
                    if start is not None:
                        _copy(src.fileno(), fd_out, start, end - start)
                    start, end = off, off + length
                if start is not None:
                    _copy(src.fileno(), fd_out, start, end - start)
        finally:
            os.close(fd_out)

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


def _head_lines(pipeline: Pipeline) -> int | None:
    """N when a plain run of `pipeline` stops after about N lines of its first stage (head, -m), else None.

    Only when every stage between the first and the head keeps every line (cut, tr): after another
    filter (`rg X corpus.jsonl | rg -w Y | head`) the head's N-th line may come much later, or never.
    """
    chosen = plan_pipeline(pipeline)
    if chosen.strategy != HEAD or any(s.program not in ("cut", "tr") for s in chosen.parallel[1:-1]):
        return None
    return max(1, chosen.head_lines or 1)


def _clean(result: RunResult) -> bool:
    """A run one run on the corpus explains: nothing on stderr, a normal status or our own output cap."""
    return not result.stderr and (result.exit_code in (0, 1) or result.truncated)


def _copy(src: int, dst: int, offset: int, count: int) -> None:
    """Append `count` bytes of `src` from `offset` to `dst` (in the kernel when it can)."""
    while count > 0:
        try:
            done = os.copy_file_range(src, dst, count, offset)
        except OSError:
            done = os.write(dst, os.pread(src, min(count, 8 << 20), offset))
        if done <= 0:
            raise OSError("the corpus is shorter than its index says")
        offset += done
        count -= done
