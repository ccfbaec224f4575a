"""Engine benchmark: typical agent pipelines, one sequential run vs the sharded engine.

The corpus and its shards are first evicted from the page cache and read back (pagecache.settle), so
neither side gains from how its file was written. Each pipeline then runs `repeats` times (at least
FAST_REPEATS when it takes milliseconds) in every mode, modes alternating within a repeat so page-cache
warmth favours none (one untimed warm-up first).
Reported: median latency per mode, the speed-up, whether every sharded output was byte-identical to
the sequential one, and the geometric mean speed-up over the count and filter pipelines (the issue's
goal: >= 1.7x on 2 shards / 2 cores; head pipelines never slower). GNU `parallel --pipepart` is timed
as an outside baseline when installed; its (hand-merged) output is checked too, and is not always exact.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grepseek_lib import pagecache
from grepseek_lib.errors import UserError
from grepseek_lib.progress import progress_bar
from grepseek_lib.shell import plan as planner
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import child_env, run_pipeline
from grepseek_lib.shell.shards import Manifest, build_shards, load_manifest
from grepseek_lib.shell.types import Pipeline, RunResult

#: Output is not capped while benchmarking: the engine must produce every byte.
_TIMEOUT_S = 600.0
_SUM = " | awk '{s+=$1} END {print s+0}'"
#: Pipelines whose sequential run takes under FAST_S seconds are timed at least FAST_REPEATS times.
FAST_S = 0.05
FAST_REPEATS = 31


@dataclass(frozen=True)
class BenchPipeline:
    """One benchmarked command; `block`/`merge` describe the GNU parallel baseline (None: no baseline)."""

    kind: str  #: count | filter | head | sort | fallback
    command: str
    block: str | None = None
    merge: str = ""


#: Typical agent commands (literal and case-insensitive searches, counts, numbered matches, heads).
PIPELINES: tuple[BenchPipeline, ...] = (
    BenchPipeline("count", "rg -c -F 'Paris' corpus.jsonl", "rg -c -F 'Paris'", _SUM),
    BenchPipeline("count", "grep -c -F 'Nobel Prize' corpus.jsonl", "grep -c -F 'Nobel Prize'", _SUM),
    BenchPipeline("count", "rg -F 'river' corpus.jsonl | wc -l", "rg -F 'river' | wc -l", _SUM),
    BenchPipeline("count", "rg -c -i 'einstein' corpus.jsonl", "rg -c -i 'einstein'", _SUM),
    BenchPipeline("filter", "rg -F 'Einstein' corpus.jsonl", "rg -F 'Einstein'"),
    BenchPipeline("filter", "rg -n -F 'Nobel Prize' corpus.jsonl", None),
    BenchPipeline("filter", "grep -F 'Zanzibar' corpus.jsonl", "grep -F 'Zanzibar'"),
    BenchPipeline("head", "rg -F -i 'paris' corpus.jsonl | head -n 5", "rg -F -i 'paris' | head -n 5",
                  " | head -n 5"),
    BenchPipeline("head", "rg -n 'born' corpus.jsonl | head", None),
    BenchPipeline("head", "rg -F 'Zanzibar' corpus.jsonl | head -n 5", "rg -F 'Zanzibar' | head -n 5",
                  " | head -n 5"),
    BenchPipeline("sort", "rg -o '[A-Z][a-z]+ University' corpus.jsonl | sort | uniq | head -n 10",
                  "rg -o '[A-Z][a-z]+ University' | sort | uniq | head -n 10", " | sort | uniq | head -n 10"),
    BenchPipeline("fallback", "rg -o '[A-Z][a-z]+ University' corpus.jsonl | sort | uniq -c | sort -rn | head",
                  "rg -o '[A-Z][a-z]+ University'", " | sort | uniq -c | sort -rn | head"),
    BenchPipeline("fallback", "awk 'length($0) > 3000' corpus.jsonl | wc -l", None),
)

#: Selective agent-like commands (rare names, phrases, -i, -n, head, counts): what the index is for.
SELECTIVE: tuple[BenchPipeline, ...] = tuple(BenchPipeline("selective", c) for c in (
    "rg -F -i 'Henry Feilden' corpus.jsonl | head -n 3",
    "rg -F 'Kilimanjaro' corpus.jsonl",
    "rg -n -F 'Eiffel Tower' corpus.jsonl",
    "grep -c -F 'Marie Curie' corpus.jsonl",
    "rg -F -i 'tolkien' corpus.jsonl | wc -l",
    "rg -w 'Beethoven' corpus.jsonl | head -n 5",
    "grep -i 'mount everest' corpus.jsonl",
    "rg -c 'Apollo 1[0-9]' corpus.jsonl",
    "rg -o -i 'zanzibar [a-z]+' corpus.jsonl | sort | uniq -c",
    "rg -n -e 'Kilimanjaro' -e 'Mount Everest' corpus.jsonl | cut -c1-120",
    "rg -F -i 'Einstein' corpus.jsonl | head -n 3",
    "grep -n -F 'Danube' corpus.jsonl | head -n 5",
))


#: Times GNU parallel on one pipeline: (seconds, stdout), or None for a pipeline with no baseline.
_Baseline = Callable[[BenchPipeline], tuple[float, bytes] | None]


def bench_shards_dir(corpus: Path, n: int) -> Path:
    """Where the benchmark keeps its own shards (next to the corpus, so under data/ for data/ corpora)."""
    return corpus.parent / f"{corpus.stem}.bench-shards{n}"


def ensure_shards(corpus: Path, n: int) -> Manifest:
    """A fresh manifest of n shards for `corpus`, built only when missing or stale."""
    folder = bench_shards_dir(corpus, n)
    try:
        manifest = load_manifest(folder, corpus)
        if len(manifest.shards) == n:
            return manifest
    except UserError:
        pass
    return build_shards(corpus, n, folder)


def _parallel_runner(corpus: Path, n: int) -> _Baseline | None:
    """A function timing GNU parallel --pipepart for a pipeline, or None when it is not installed."""
    exe = shutil.which("parallel")
    if exe is None:
        return None
    env = {**child_env(), "HOME": str(corpus.parent)}

    def run(p: BenchPipeline) -> tuple[float, bytes] | None:
        if p.block is None:
            return None
        command = (f"{shlex.quote(exe)} --will-cite --pipepart -a {shlex.quote(str(corpus))} --block -1 -k "
                   f"-j {n} {shlex.quote(p.block)}{p.merge}")
        start = time.perf_counter()
        done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, timeout=_TIMEOUT_S)
        return time.perf_counter() - start, done.stdout

    return run


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


@dataclass(frozen=True)
class _Setup:
    """What every pipeline is timed against: the corpus, its shards, both engines and the GNU baseline."""

    corpus: Path
    manifest: Manifest
    engine: Engine
    indexed_engine: Engine | None
    baseline: _Baseline | None
    load_start: float


@dataclass
class _Timings:
    """One pipeline's seconds per mode and whether each mode's output matched the sequential reference."""

    times: dict[str, list[float]] = field(
        default_factory=lambda: {m: [] for m in ("sequential", "sharded", "parallel", "alone", "indexed")})
    identical: bool = True
    index_identical: bool = True
    parallel_identical: bool | None = None


def _checked_corpus(corpus: str | Path, shards: int, repeats: int) -> Path:
    """The corpus path, once the arguments can give a fair comparison (a user error otherwise)."""
    corpus = Path(corpus).expanduser()
    if not corpus.is_file():
        raise UserError(f"corpus {corpus} does not exist; build it (`grepseek data build`, `grepseek data scale`)")
    if shards < 2:
        raise UserError(f"--shards must be at least 2 to compare with a sequential run, got {shards}")
    if repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {repeats}")
    return corpus


def _setup(corpus: Path, shards: int, index: Path | None) -> _Setup:
    """Shards, a settled page cache, the engines and the baseline; the machine's load as timing starts."""
    manifest = ensure_shards(corpus, shards)
    # Same page-cache layout for both sides: a file's write history must not decide the race.
    pagecache.settle([corpus, *manifest.paths, *(sorted(Path(index).glob("*")) if index is not None else [])])
    load_start = os.getloadavg()[0]
    engine = Engine(corpus, manifest.directory, min_shard_bytes=0)
    indexed_engine = Engine(corpus, manifest.directory, min_shard_bytes=0, index=index) if index else None
    return _Setup(corpus, manifest, engine, indexed_engine, _parallel_runner(corpus, shards), load_start)


def _modes(setup: _Setup, pipeline: Pipeline, chosen: planner.Plan) -> dict[str, Callable[[], RunResult]]:
    """The timed runs of one pipeline: sequential, sharded, index + shards, and shard 0 alone."""
    def first_shard_alone() -> RunResult:
        """Shard 0's part with the other core idle: what 2 shards would take if cores did not contend."""
        return run_pipeline(chosen.shard_pipeline(pipeline.text), setup.manifest.shard_path(0),
                            timeout=_TIMEOUT_S, max_output_bytes=None)

    return {
        "sequential": lambda: run_pipeline(pipeline, setup.corpus, timeout=_TIMEOUT_S, max_output_bytes=None),
        "sharded": lambda: setup.engine.run(pipeline, timeout=_TIMEOUT_S, max_output_bytes=None),
        "indexed": lambda: setup.indexed_engine.run(pipeline, timeout=_TIMEOUT_S, max_output_bytes=None),
        "alone": first_shard_alone,
    }


def _time_rounds(setup: _Setup, p: BenchPipeline, modes: dict[str, Callable[[], RunResult]],
                 chosen: planner.Plan, rounds: int, reference: RunResult) -> _Timings:
    """`rounds` timings of every mode, their order alternating each round so page-cache warmth favours none."""
    timings = _Timings()
    times = timings.times
    for r in range(rounds):
        order = [("sequential", modes["sequential"]), ("sharded", modes["sharded"])]
        order += [("indexed", modes["indexed"])] if setup.indexed_engine is not None else []
        for mode, fn in order if r % 2 == 0 else order[::-1]:
            seconds, result = _timed(fn)
            times[mode].append(seconds)
            same = (result.stdout, result.stderr, result.exit_code) == \
                (reference.stdout, reference.stderr, reference.exit_code)
            if mode == "sharded":
                timings.identical = timings.identical and same
            elif mode == "indexed":
                timings.index_identical = timings.index_identical and same
        if chosen.strategy in (planner.CONCAT, planner.SUM, planner.SORT_MERGE):
            times["alone"].append(_timed(modes["alone"])[0])
        if setup.baseline is not None:
            measured = setup.baseline(p)
            if measured is not None:
                times["parallel"].append(measured[0])
                timings.parallel_identical = (timings.parallel_identical is not False) and \
                    measured[1] == reference.stdout
    return timings


def _bench_row(setup: _Setup, p: BenchPipeline, repeats: int, fast_repeats: int) -> dict[str, Any]:
    """One pipeline's table row: median seconds per mode, speed-ups and output identity."""
    pipeline = parse_command(p.command)
    chosen = setup.engine.plan(pipeline)
    modes = _modes(setup, pipeline, chosen)
    warm_s, reference = _timed(modes["sequential"])  # warm-up (page cache) and the reference output
    modes["sharded"]()
    # Millisecond pipelines are at the mercy of scheduler noise: time them more often (it is cheap).
    rounds = max(repeats, fast_repeats) if warm_s < FAST_S else repeats
    timings = _time_rounds(setup, p, modes, chosen, rounds, reference)
    seq, par = statistics.median(timings.times["sequential"]), statistics.median(timings.times["sharded"])
    gnu, alone, ix = (_median(timings.times[m]) for m in ("parallel", "alone", "indexed"))
    indexed_engine = setup.indexed_engine
    return {
        "kind": p.kind, "pipeline": p.command, "strategy": chosen.strategy, "shard0_alone_s": alone,
        "index_strategy": indexed_engine.strategy(pipeline) if indexed_engine else None, "indexed_s": ix,
        "index_speedup": seq / ix if ix == ix and ix > 0 else math.nan,
        "index_vs_best": min(seq, par) / ix if ix == ix and ix > 0 else math.nan,
        "index_identical": timings.index_identical if indexed_engine else None,
        "sequential_s": seq, "sharded_s": par, "speedup": seq / par if par > 0 else math.nan,
        "identical": timings.identical, "parallel_s": gnu,
        "parallel_speedup": seq / gnu if gnu == gnu and gnu > 0 else math.nan,
        "parallel_identical": timings.parallel_identical, "output_bytes": len(reference.stdout),
    }


def _summary(frame: Any, setup: _Setup, shards: int, repeats: int, fast_repeats: int) -> dict[str, Any]:
    """The issue's goals (count/filter geomean, slowest head, identity) and the conditions of the run."""
    core = frame[frame.kind.isin(["count", "filter"])]
    heads = frame[frame.kind == "head"]
    return {
        "corpus": str(setup.corpus), "corpus_bytes": setup.manifest.size, "shards": shards,
        "repeats": repeats, "fast_repeats": fast_repeats,
        "geomean_speedup_count_filter": _geomean(core.speedup),
        # Upper bound from shard 0 timed alone: sequential / (one shard's share with the other core idle).
        "geomean_ideal_count_filter": _geomean(core.sequential_s / core.shard0_alone_s),
        "min_speedup_head": float(heads.speedup.min()) if len(heads) else math.nan,
        "all_identical": bool(frame.identical.all()),
        **(_index_summary(frame, setup.indexed_engine) if setup.indexed_engine is not None else {}),
        "gnu_parallel": "installed" if setup.baseline is not None else "not installed: baseline skipped",
        # Other work on the machine steals the cores the shards need: say how busy it was.
        "load_avg_1min_start": round(setup.load_start, 2), "load_avg_1min_end": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "page_cache": "corpus and shards evicted and read back sequentially before timing",
    }


def bench_engine(corpus: str | Path, shards: int, repeats: int = 5, fast_repeats: int = FAST_REPEATS,
                 pipelines: tuple[BenchPipeline, ...] | None = None,
                 index: Path | None = None) -> tuple[Any, dict[str, Any]]:
    """Time every pipeline sequentially and sharded (and with `index`: index + shards, adding the
    selective rows); (per-pipeline DataFrame, summary dict)."""
    import pandas as pd

    corpus = _checked_corpus(corpus, shards, repeats)
    if pipelines is None:
        pipelines = PIPELINES + (SELECTIVE if index is not None else ())
    setup = _setup(corpus, shards, index)
    rows = [_bench_row(setup, p, repeats, fast_repeats)
            for p in progress_bar(pipelines, desc="bench engine", unit="pipeline")]
    frame = pd.DataFrame(rows)
    return frame, _summary(frame, setup, shards, repeats, fast_repeats)


def _index_summary(frame: Any, engine: Any) -> dict[str, Any]:
    """The index's goals: geomean speed-up on selective rows, no slower than today's best elsewhere."""
    selective = frame[frame.kind == "selective"]
    other = frame[frame.kind != "selective"]
    m = engine.index_path.index.manifest
    size = sum(f.stat().st_size for f in m.directory.iterdir())
    return {
        "index": str(m.directory), "index_bytes": size, "index_build_s": m.build_s, "index_blocks": m.blocks,
        "geomean_index_speedup_selective": _geomean(selective.index_speedup),
        "min_index_vs_best_other": float(other.index_vs_best.min()) if len(other) else math.nan,
        "all_index_identical": bool(frame.index_identical.all()),
    }


def _geomean(values: Any) -> float:
    values = [float(v) for v in values if v == v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan
