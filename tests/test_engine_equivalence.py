"""The sharded engine prints exactly what one sequential run prints (and what `bash -c` prints).

Property-based: random pipelines from the planner's grammar (and shapes it must refuse to split), on
corpora with duplicate lines, JSON escapes and raw UTF-8, lines with ':' and digits, no matches,
matches on shard boundaries, a last line without newline, over 1 to 8 shards.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_shell_equivalence import COMMANDS
from test_shell_helpers import bash, write_corpus

from grepseek_lib.shell import plan as planner
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import run_pipeline
from grepseek_lib.shell.shards import build_shards

SHARD_COUNTS = (1, 2, 3, 5, 8)


def _boundary_corpus(path: Path) -> Path:
    """Short lines, many duplicates, `EDGE` on the first and last line of every 8-shard cut, no final newline."""
    lines = []
    for i in range(64):
        word = ("Paris", "paris", "caf\\u00e9", "caf\u00e9", "12:34", "the the", "", "x")[i % 8]
        lines.append(json.dumps({"id": str(i % 9), "contents": f"{word} {i % 5}"}, ensure_ascii=False))
    for k in range(0, 64, 8):
        lines[k] += " EDGE"
        lines[k + 7] += " EDGE"
    path.write_bytes("\n".join(lines).encode("utf-8"))  # no trailing newline
    return path


def _make_world(kind: str, tmp_path_factory):
    """(corpus, reference folder, {n: Engine}) for one corpus kind."""
    folder = tmp_path_factory.mktemp(kind)
    corpus = folder / "corpus.jsonl"
    if kind == "wiki":
        write_corpus(corpus, n=240)
    else:
        _boundary_corpus(corpus)
    shards = tmp_path_factory.mktemp(kind + "-shards")  # not in the folder `bash -c` runs in
    engines = {n: Engine(corpus, build_shards(corpus, n, shards / str(n)).directory) for n in SHARD_COUNTS}
    return corpus, folder, engines


@pytest.fixture(scope="module", params=["wiki", "boundary"])
def world(request, tmp_path_factory):
    return _make_world(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def wiki(tmp_path_factory):
    return _make_world("wiki", tmp_path_factory)


def assert_exact(command: str, corpus: Path, folder: Path, engine: Engine, cap: int | None = None) -> str:
    pipeline = parse_command(command)
    ours = engine.run(pipeline, timeout=30, max_output_bytes=cap)
    one = run_pipeline(pipeline, corpus, timeout=30, max_output_bytes=cap)
    strategy = engine.plan(pipeline).strategy
    assert (ours.stdout, ours.stderr, ours.exit_code, ours.truncated) == \
        (one.stdout, one.stderr, one.exit_code, one.truncated), (command, strategy)
    if cap is None:
        ref = bash(command, folder)
        assert (ours.stdout, ours.exit_code) == (ref.stdout, ref.returncode), (command, strategy)
        if ref.returncode != 127:
            assert ours.stderr == ref.stderr, (command, strategy)
    return strategy


# ---- the grammar ------------------------------------------------------------------------------------

_PATTERN = st.sampled_from(["Paris", "the", "caf", "caf\\\\u00e9", "caf\u00e9", "[0-9]+", "1", "EDGE", "nomatch",
                            "id", "12:3", "^\\{", "x$", "(", "P.r", "e"])
_SEARCH_FLAGS = st.lists(st.sampled_from(["-i", "-F", "-w", "-v", "-o", "-n", "-b", "-H", "-c", "-x", "-m 2",
                                          "-m 7", "--column", "-N", "--count-matches", "-I", "-s"]),
                         max_size=3, unique=True)


def _search(program: str, flags: list[str], pattern: str, source: bool) -> str:
    if program == "grep":
        flags = [f for f in flags if f not in ("--column", "-N", "--count-matches", "-I")]
    words = [program, *flags, shlex.quote(pattern)] + (["corpus.jsonl"] if source else [])
    return " ".join(words)


_FIRST = st.one_of(
    st.builds(_search, st.sampled_from(["rg", "grep"]), _SEARCH_FLAGS, _PATTERN, st.just(True)),
    st.sampled_from(["cat corpus.jsonl", "cut -c1-30 corpus.jsonl", "sed 's/a/A/g' corpus.jsonl",
                     "sort corpus.jsonl", "wc -l corpus.jsonl", "wc -c corpus.jsonl", "head -n 5 corpus.jsonl",
                     "head -c 700 corpus.jsonl", "tail -n 4 corpus.jsonl", "awk '{print $2}' corpus.jsonl"]),
)
_MIDDLE = st.one_of(
    st.builds(_search, st.sampled_from(["rg", "grep"]), st.lists(st.sampled_from(["-i", "-v", "-o", "-F"]),
                                                                   max_size=2, unique=True),
              _PATTERN.filter(lambda p: p != "("), st.just(False)),  # two failing stages interleave stderr
    st.sampled_from(["cut -d: -f1", "cut -c1-20", "tr a-z A-Z", "tr -d e", "sed 's/the/THE/'",
                     "sed -n 's/a/b/p'", "tr ' ' '\\n'", "tr -s ' '", "cat"]),
)
_TAIL = st.one_of(
    st.builds(lambda k: f"head -n {k}", st.integers(0, 30)),
    st.builds(lambda k: f"head -{k}", st.integers(1, 12)),
    st.builds(lambda k: f"head -c {k}", st.integers(0, 400)),
    st.builds(lambda opts, k: f"sort {opts} | head -n {k}".replace("  ", " "),
              st.sampled_from(["", "-r", "-n", "-rn", "-u", "-f", "-t: -k2,2", "-s -k1,3", "-n -u", "-b -r"]),
              st.integers(0, 12)),
    st.builds(lambda opts, k: f"sort {opts} | uniq | head -n {k}".replace("  ", " "),
              st.sampled_from(["", "-r", "-n", "-u", "-f", "-rn"]), st.integers(0, 12)),
    st.sampled_from(["head", "wc -l", "wc -c", "wc -w", "wc", "sort", "uniq -c", "tail -n 3",
                     "sort | uniq -c | sort -rn | head -n 3", "awk '{print $1}'", "sed -n 1p", "sed 3q",
                     "rg -c e", "grep -c e", "rg -m 2 e", "head -n 3 | tr a-z A-Z", "sort -u", "wc -l | head"]),
)
_PIPELINES = st.builds(lambda first, middle, tail: " | ".join([first, *middle, *tail]),
                       _FIRST, st.lists(_MIDDLE, max_size=2), st.lists(_TAIL, max_size=1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=_PIPELINES, n=st.sampled_from(SHARD_COUNTS))
def test_random_pipelines_are_exact(world, command, n):
    corpus, folder, engines = world
    assert_exact(command, corpus, folder, engines[n])


@pytest.mark.parametrize("command", COMMANDS)
def test_shell_suite_commands_are_exact_on_3_shards(wiki, command):
    corpus, folder, engines = wiki
    assert_exact(command, corpus, folder, engines[3])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=_PIPELINES, cap=st.integers(0, 3000))
def test_output_cap_is_exact(world, command, cap):
    corpus, folder, engines = world
    assert_exact(command, corpus, folder, engines[2], cap=cap)


@pytest.mark.parametrize("command", [
    "rg -n EDGE corpus.jsonl", "rg -b -o EDGE corpus.jsonl", "grep -n -b EDGE corpus.jsonl",
    "rg -c EDGE corpus.jsonl", "rg EDGE corpus.jsonl | head -n 9", "rg -n --column -H EDGE corpus.jsonl",
    "rg -o '[0-9]' corpus.jsonl | sort | uniq | head -n 4", "rg -m 3 -n EDGE corpus.jsonl",
])
def test_matches_on_every_shard_boundary(tmp_path, command):
    (tmp_path / "ref").mkdir()
    corpus = _boundary_corpus(tmp_path / "ref" / "corpus.jsonl")
    engine = Engine(corpus, build_shards(corpus, 8, tmp_path / "s").directory)
    strategy = assert_exact(command, corpus, tmp_path / "ref", engine)
    assert strategy != planner.SEQUENTIAL


def test_the_common_shapes_really_run_sharded(world):
    """Guard against a planner that says 'sequential' to everything (which would pass the above)."""
    corpus, folder, engines = world
    expected = {
        "rg -F -i paris corpus.jsonl": planner.CONCAT,
        "rg -F -i paris corpus.jsonl | head -n 5": planner.HEAD,
        "rg -c the corpus.jsonl": planner.SUM,
        "grep -c nomatch corpus.jsonl": planner.SUM,
        "rg e corpus.jsonl | wc -l": planner.SUM,
        "rg -n the corpus.jsonl | head": planner.HEAD,
        "rg -o '[a-z]+' corpus.jsonl | sort -r | head -n 3": planner.SORT_MERGE,
        "rg -o '[a-z]+' corpus.jsonl | sort | uniq | head -n 3": planner.SORT_MERGE,
        "rg -o '[a-z]+' corpus.jsonl | sort | uniq -c | sort -rn | head": planner.CONCAT,
    }
    for command, strategy in expected.items():
        assert engines[2].plan(parse_command(command)).strategy == strategy, command
        assert_exact(command, corpus, folder, engines[2])
