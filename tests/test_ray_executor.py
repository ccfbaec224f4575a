"""Shards on Ray actors print exactly what `bash -c` prints: same plans, merges, head cancellation,
timeout rule as the local pool, alone and under the index. One local Ray instance (2 CPUs, shard
resources) serves the whole module."""

from __future__ import annotations

import time

import pytest
import ray
from test_index_equivalence import _trap_corpus
from test_shell_helpers import bash, write_corpus

from grepseek_lib.errors import UserError
from grepseek_lib.shell import plan as planner
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.index_build import build_index
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.ray_executor import shard_resource
from grepseek_lib.shell.shards import build_shards


@pytest.fixture(scope="module")
def ray_instance():
    for attempt in range(2):  # Ray gives its raylet a fixed 30 s to start: a loaded machine may need a second try
        try:
            ray.init(num_cpus=2, resources={shard_resource(i): 1 for i in range(4)}, namespace="grepseek",
                     include_dashboard=False, log_to_driver=False)
            break
        except Exception:
            ray.shutdown()
            if attempt:
                raise
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def world(ray_instance, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray")
    corpus = write_corpus(folder / "corpus.jsonl", n=200)
    side = tmp_path_factory.mktemp("ray-side")
    shards = build_shards(corpus, 3, side / "shards").directory
    engine = Engine(corpus, shards, executor="ray")
    return corpus, folder, engine, shards


COMMANDS = [
    "rg -F -i paris corpus.jsonl", "rg -F -i paris corpus.jsonl | head -n 5", "rg -c the corpus.jsonl",
    "grep -c nomatch corpus.jsonl", "rg e corpus.jsonl | wc -l", "rg -n the corpus.jsonl | head",
    "rg -o '[a-z]+' corpus.jsonl | sort -r | head -n 3", "rg -n -b caf corpus.jsonl", "head -n 3 corpus.jsonl",
    "rg -o '[a-z]+' corpus.jsonl | sort | uniq -c | sort -rn | head", "rg -v e corpus.jsonl | wc -c",
    "rg -m 2 -n e corpus.jsonl", "grep -c '(' corpus.jsonl", "rg '(' corpus.jsonl",
]


def _exact(command, corpus, folder, engine, cap=None):
    ours = engine.run(command, timeout=60, max_output_bytes=cap)
    ref = bash(command, folder)
    assert (ours.stdout, ours.stderr, ours.exit_code) == (ref.stdout, ref.stderr, ref.returncode), command


@pytest.mark.slow
def test_ray_shards_are_exact(world):
    corpus, folder, engine, _ = world
    assert engine.plan(parse_command("rg -c the corpus.jsonl")).strategy == planner.SUM
    for command in COMMANDS:
        _exact(command, corpus, folder, engine)


@pytest.mark.slow
def test_head_cancels_the_later_shards(world):
    corpus, folder, engine, _ = world
    began = time.monotonic()
    result = engine.run("rg e corpus.jsonl | head -n 1", timeout=60)
    assert result.exit_code == 0 and result.stdout.count(b"\n") == 1
    assert time.monotonic() - began < 30
    _exact("rg e corpus.jsonl | head -n 1", corpus, folder, engine)


@pytest.mark.slow
def test_timeout_of_a_shard_is_a_timeout(world):
    corpus, folder, engine, _ = world
    result = engine.run("rg -c '(a|b|c|d|e)+(x|y)+q' corpus.jsonl", timeout=0.001)
    assert result.timed_out and result.exit_code == 124


@pytest.mark.slow
def test_ray_with_the_index_is_exact(ray_instance, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray-traps")
    corpus = _trap_corpus(folder / "corpus.jsonl")
    side = tmp_path_factory.mktemp("ray-traps-side")
    shards = build_shards(corpus, 2, side / "shards").directory
    index = build_index(corpus, side / "index", block_bytes=300).directory
    engine = Engine(corpus, shards, index=index, index_fraction=1.0, executor="ray")
    for command in ["rg -F -i kelvin corpus.jsonl", "rg -n -i 'long s' corpus.jsonl | head -n 1",
                    "rg -c x corpus.jsonl", "rg -v x corpus.jsonl | wc -l", "grep -c -i k corpus.jsonl"]:
        _exact(command, corpus, folder, engine)
    assert engine.strategy(parse_command("rg -F -i kelvin corpus.jsonl")) == "index"


def test_ray_needs_shards(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", n=5)
    with pytest.raises(UserError, match="--shards"):
        Engine(corpus, executor="ray")


def test_shard_worker_runs_cancels_and_checks_its_shard(tmp_path):
    """The actor's body without Ray: a run, a cancel that arrives first, a stale shard file."""
    import threading

    from grepseek_lib.shell.limits import DEFAULT_LIMITS
    from grepseek_lib.shell.ray_executor import ShardWorker

    (tmp_path / "ref").mkdir()
    corpus = write_corpus(tmp_path / "ref" / "corpus.jsonl", n=50)
    stat = corpus.stat()
    worker = ShardWorker(str(corpus), stat.st_size, stat.st_mtime_ns)
    pipeline = parse_command("rg -c the corpus.jsonl")
    result = worker.run(1, pipeline, 30, None, DEFAULT_LIMITS)
    assert result.stdout == bash("rg -c the corpus.jsonl", tmp_path / "ref").stdout
    worker.cancel(2)  # cancelled before it started: never runs
    assert worker.run(2, pipeline, 30, None, DEFAULT_LIMITS) is None
    running = threading.Event()
    worker.events[3] = running  # a run in flight: cancel sets the event its runner polls
    worker.cancel(3)
    assert running.is_set() and 3 not in worker.cancelled
    with pytest.raises(RuntimeError, match="differs from the manifest"):
        ShardWorker(str(corpus), stat.st_size + 1, stat.st_mtime_ns)
