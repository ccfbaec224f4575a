"""The sharded engine: one pipeline over N shards at once, merged into exactly what one run prints.

The planner (plan.py) decides how a pipeline may be split; this module runs it. Every shard run goes
through the same runner as a sequential run (same policy, limits, environment), with the shard
hard-linked as corpus.jsonl, so `rg -H` prints the logical name. Whatever the shards do that a single
run would not explain (an error message, an odd exit status, a cut-off output) sends the command to
ONE sequential run instead, so the reply is always what that run prints. A timeout in any needed
shard is a timeout of the command, never a partial answer.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from grepseek_lib import config
from grepseek_lib.errors import UserError
from grepseek_lib.shell import plan as planner
from grepseek_lib.shell.index import find_index, load_index
from grepseek_lib.shell.indexed import MAX_FRACTION, IndexPath
from grepseek_lib.shell.limits import DEFAULT_LIMITS
from grepseek_lib.shell.merge import run_post
from grepseek_lib.shell.policy import parse_command, refused_result
from grepseek_lib.shell.runner import EXIT_TRUNCATED, run_pipeline
from grepseek_lib.shell.shard_merge import Fallback, Merger, check_shard
from grepseek_lib.shell.shards import Manifest, load_manifest
from grepseek_lib.shell.types import EXIT_TIMEOUT, Pipeline, Refused, RunResult

#: A post part runs once on the merged output; beyond this many bytes a single run is cheaper.
MAX_INTERMEDIATE_BYTES = 64 << 20
#: A shard's result is awaited until the deadline plus this margin (its own chain is killed by then).
WAIT_MARGIN_S = 10.0
#: A head plan gives shard 0 this long alone: frequent matches finish there without extra processes.
HEAD_GRACE_S = 0.03

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(workers: int) -> ThreadPoolExecutor:
    """One long-lived pool per concurrency level, shared by every Engine and every call."""
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grepseek-shard")
        return pool


@dataclass
class _ShardRun:
    future: Future
    cancel: threading.Event


class Engine:
    """Runs accepted pipelines over a corpus, sharded when `shards_dir` holds a fresh manifest."""

    def __init__(self, corpus: str | Path, shards_dir: str | Path | None = None, *, workers: int | None = None,
                 min_shard_bytes: int | None = None, index: str | Path | bool | None = False,
                 index_fraction: float | None = None, executor: str = "local", ray_address: str | None = None):
        """`min_shard_bytes`: below this average shard size one sequential run is used (config.min_shard_bytes).

        `index`: an index folder (grepseek index), None to use one found beside the corpus or the
        shards (index.find_index), False for none. A stale index raises UserError, as stale shards do.
        `index_fraction`: the index answers when its candidates are at most this part of the corpus
        (default indexed.MAX_FRACTION). `executor`: "local" (a thread pool here) or "ray" (one actor
        per shard, placed by the custom resource grepseek_shard_<i>; `ray_address` of the cluster).
        """
        self.min_shard_bytes = config.min_shard_bytes() if min_shard_bytes is None else min_shard_bytes
        self.corpus = Path(corpus).expanduser()
        if not self.corpus.is_file():
            raise UserError(f"corpus {self.corpus} does not exist; check --corpus")
        self.manifest: Manifest | None = None
        if shards_dir is not None:
            self.manifest = load_manifest(shards_dir, self.corpus)
            stat = self.corpus.stat()
            self._corpus_stat = (stat.st_size, stat.st_mtime_ns)  # as checked against the manifest
        self.index_path: IndexPath | None = None
        index_dir = find_index(self.corpus, shards_dir, index)
        if index_dir is not None:
            self.index_path = IndexPath(load_index(index_dir, self.corpus), self.corpus,
                                        MAX_FRACTION if index_fraction is None else index_fraction)
            stat = self.corpus.stat()
            self._index_stat = (stat.st_size, stat.st_mtime_ns)
        n = len(self.manifest.shards) if self.manifest else 1
        self.workers = max(1, min(n, workers or os.cpu_count() or 1))
        #: Shard chains run `workers` at a time: together they get one chain's memory budget.
        self.shard_limits = DEFAULT_LIMITS.share(self.workers)
        self.remote = None
        if executor == "ray":
            if self.manifest is None:
                raise UserError("--executor ray runs shards: give --shards DIR")
            from grepseek_lib.shell.ray_executor import RayShards  # deferred: ray is heavy

            self.remote = RayShards(self.manifest, ray_address, self.shard_limits)
        elif executor != "local":
            raise UserError(f"unknown executor {executor!r}; use local or ray")

    # ---- public ---------------------------------------------------------------------------------

    def plan(self, pipeline: Pipeline) -> planner.Plan:
        """How `pipeline` will run here (sequential without shards or when the corpus holds NUL bytes)."""
        if self.manifest is None or len(self.manifest.shards) < 2:
            return planner.sequential("no shards")
        if self.manifest.size < self.min_shard_bytes * len(self.manifest.shards):
            return planner.sequential(f"shards smaller than {self.min_shard_bytes / 1e6:g} MB: one run is as fast")
        if self.manifest.has_nul:
            return planner.sequential("the corpus holds NUL bytes (binary detection differs per shard)")
        return planner.plan_pipeline(pipeline)

    def strategy(self, pipeline: Pipeline) -> str:
        """"index" when the index answers `pipeline`, else the plan's strategy (for benchmarks and logs)."""
        if self.index_path is not None and not isinstance(self.index_path.choose(pipeline), str):
            return "index"
        return self.plan(pipeline).strategy

    def run(self, pipeline: Pipeline | str, timeout: float, max_output_bytes: int | None = None, *,
            stdout_sink: BinaryIO | None = None, stderr_sink: BinaryIO | None = None) -> RunResult:
        """Run a pipeline (or command text); same RunResult as one sequential run would give.

        With sinks the output is written there (the RunResult then carries empty bytes), as the runner.
        """
        if isinstance(pipeline, str):
            try:
                pipeline = parse_command(pipeline)
            except Refused as exc:
                return _deliver(refused_result(exc), stdout_sink, stderr_sink)
        began = time.monotonic()
        if self.index_path is not None:
            candidates = self.index_path.choose(pipeline)
            if not isinstance(candidates, str):
                self._check_index_fresh()
                result = self.index_path.run(pipeline, candidates, timeout, max_output_bytes)
                if result is not None:
                    return _deliver(result, stdout_sink, stderr_sink)
                timeout = max(0.001, timeout - (time.monotonic() - began))
        chosen = self.plan(pipeline)
        if chosen.sharded:
            self._check_fresh()
            try:
                result = self._run_sharded(pipeline, chosen, timeout, max_output_bytes)
            except Fallback:
                result = None
            if result is not None:
                return _deliver(result, stdout_sink, stderr_sink)
        return run_pipeline(pipeline, self.corpus, timeout=timeout, max_output_bytes=max_output_bytes,
                            stdout_sink=stdout_sink, stderr_sink=stderr_sink)

    # ---- sharded execution ------------------------------------------------------------------------

    def _check_fresh(self) -> None:
        """A cheap stat per call: shards cut from an older corpus must never answer.

        When the stat changed, the manifest is checked again: a corpus rewritten with the same bytes
        (`grepseek data build` again) passes on its sha256, once; different bytes raise UserError.
        """
        stat = self.corpus.stat()
        assert self.manifest is not None
        if (stat.st_size, stat.st_mtime_ns) != self._corpus_stat:
            self.manifest = load_manifest(self.manifest.directory, self.corpus)
            self._corpus_stat = (stat.st_size, stat.st_mtime_ns)

    def _check_index_fresh(self) -> None:
        """As _check_fresh, for the index: a changed stat loads (and checks) the index again."""
        stat = self.corpus.stat()
        assert self.index_path is not None
        if (stat.st_size, stat.st_mtime_ns) != self._index_stat:
            index = load_index(self.index_path.index.manifest.directory, self.corpus)
            self.index_path = IndexPath(index, self.corpus, self.index_path.max_fraction)
            self._index_stat = (stat.st_size, stat.st_mtime_ns)

    def _run_shard(self, index: int, pipeline: Pipeline, deadline: float, cap: int | None,
                   cancel: threading.Event,
                   on_slow: tuple[float, Callable[[], None]] | None = None) -> RunResult | None:
        if cancel.is_set():
            return None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return RunResult(b"", b"", EXIT_TIMEOUT, timed_out=True)
        assert self.manifest is not None
        return run_pipeline(pipeline, self.manifest.shard_path(index), timeout=remaining, max_output_bytes=cap,
                            limits=self.shard_limits, cancel=cancel, on_slow=on_slow)

    def _run_first(self, pipeline: Pipeline, deadline: float, cap: int | None,
                   start_rest: Callable[[], None]) -> _ShardRun:
        """Shard 0 of a head plan; the other shards start only if it is still busy after HEAD_GRACE_S.

        Locally it runs in this thread (no hand-off): frequent matches end there, as fast as one run.
        """
        if self.remote is not None:
            return self.remote.run_first(pipeline, deadline, cap, HEAD_GRACE_S, start_rest)
        cancel = threading.Event()
        try:
            first = self._run_shard(0, pipeline, deadline, cap, cancel, on_slow=(HEAD_GRACE_S, start_rest))
        except Exception:
            raise Fallback from None
        done: Future = Future()
        done.set_result(first)
        return _ShardRun(done, cancel)

    def _start(self, index: int, pipeline: Pipeline, deadline: float, cap: int | None) -> _ShardRun:
        if self.remote is not None:
            return self.remote.start(index, pipeline, deadline, cap)
        cancel = threading.Event()
        future = shared_pool(self.workers).submit(self._run_shard, index, pipeline, deadline, cap, cancel)
        return _ShardRun(future, cancel)

    def _run_sharded(self, pipeline: Pipeline, chosen: planner.Plan, timeout: float,
                     max_output_bytes: int | None) -> RunResult | None:
        assert self.manifest is not None
        deadline = time.monotonic() + timeout
        shard_pipeline = chosen.shard_pipeline(pipeline.text)
        cap = MAX_INTERMEDIATE_BYTES if chosen.post else max_output_bytes
        n = len(self.manifest.shards)
        runs: list[_ShardRun | None] = [None] * n
        lock = threading.Lock()
        closed = threading.Event()  # set once the answer is known: nothing new may start

        def start(i: int) -> _ShardRun | None:
            with lock:
                if runs[i] is None and not closed.is_set():
                    runs[i] = self._start(i, shard_pipeline, deadline, cap)
                return runs[i]

        try:
            if chosen.strategy == planner.HEAD:
                def start_rest() -> None:
                    for j in range(1, n):
                        start(j)

                first = self._run_first(shard_pipeline, deadline, cap, start_rest)
                with lock:
                    runs[0] = first
            else:
                for i in range(n):
                    start(i)
            merged = self._gather(start, chosen, deadline)
        finally:
            with lock:
                closed.set()
            for run in runs:
                if run is not None:
                    run.cancel.set()
                    run.future.cancel()
        if isinstance(merged, RunResult):
            return merged
        stdout, code = merged
        if chosen.post:
            if len(stdout) > MAX_INTERMEDIATE_BYTES:
                raise Fallback
            return run_post(pipeline, chosen.post, stdout, deadline, max_output_bytes)
        if max_output_bytes is not None and len(stdout) > max_output_bytes:
            return RunResult(stdout[:max_output_bytes], b"", EXIT_TRUNCATED, truncated=True)
        return RunResult(stdout, b"", code)

    def _gather(self, start: Callable[[int], _ShardRun | None], chosen: planner.Plan,
                deadline: float) -> tuple[bytes, int] | RunResult:
        """Await the shards in order, merging each as it comes, starting the later ones as the plan allows.

        The merged (stdout, status), or the RunResult of a timeout: one shard out of time is the command's.
        """
        assert self.manifest is not None
        n = len(self.manifest.shards)
        results: list[RunResult] = []
        merger = Merger(chosen, self.manifest)
        for i in range(n):
            try:
                result = start(i).future.result(timeout=max(0.0, deadline - time.monotonic()) + WAIT_MARGIN_S)
            except TimeoutError:  # a remote shard that never answered: a timeout, as a local one
                return RunResult(b"", b"", EXIT_TIMEOUT, timed_out=True)
            except Exception:  # e.g. no room for the private folder: one run decides what happens
                raise Fallback from None
            if result is None:
                raise Fallback
            if result.timed_out:
                return RunResult(b"", result.stderr, EXIT_TIMEOUT, timed_out=True)
            check_shard(result, chosen)
            results.append(result)
            if merger.add(i, result.stdout):
                break  # a head plan has all the lines it needs: later shards are cancelled
            for j in range(i + 1, n):
                start(j)
        return merger.finish(results, deadline)


def _deliver(result: RunResult, stdout_sink: BinaryIO | None, stderr_sink: BinaryIO | None) -> RunResult:
    """Write a buffered result to sinks the way the runner streams (then the result carries no bytes)."""
    if stdout_sink is None and stderr_sink is None:
        return result
    for data, sink in ((result.stdout, stdout_sink), (result.stderr, stderr_sink)):
        if sink is not None and data:
            try:
                sink.write(data)
            except BrokenPipeError:
                result.truncated = True
    return RunResult(b"" if stdout_sink else result.stdout, b"" if stderr_sink else result.stderr,
                     result.exit_code, timed_out=result.timed_out, truncated=result.truncated)
