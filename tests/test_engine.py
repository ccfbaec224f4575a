"""Planner decisions on hand-built pipelines, and the engine's rules: timeout, cancellation, staleness."""

from __future__ import annotations

import json
import shlex
import threading
import time
from functools import partial

import pytest
from test_shell_helpers import bash, write_corpus

from grepseek_lib.errors import UserError
from grepseek_lib.shell import engine as engine_module
from grepseek_lib.shell import plan as planner
from grepseek_lib.shell import specs
from grepseek_lib.shell.engine import Engine, shared_pool
from grepseek_lib.shell.plan import is_plain_substitution, plan_pipeline
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import run_pipeline
from grepseek_lib.shell.shards import build_shards
from grepseek_lib.shell.types import EXIT_REFUSED, EXIT_TIMEOUT, Pipeline, RunResult, Stage


def hand_built(command: str) -> Pipeline:
    """A Pipeline built without the policy (planning is pure logic over argv)."""
    stages = tuple(Stage(tuple(shlex.split(part))) for part in command.split(" | "))
    return Pipeline(text=command, stages=stages)


def strategy(command: str) -> str:
    return plan_pipeline(hand_built(command)).strategy


# ---- strategies -----------------------------------------------------------------------------------

@pytest.mark.parametrize("command, expected", [
    ("rg Paris corpus.jsonl", planner.CONCAT),
    ("rg -F -i -w paris ./corpus.jsonl", planner.CONCAT),
    ("grep -o -E 'a+' corpus.jsonl | cut -c1-3 | tr a-z A-Z", planner.CONCAT),
    ("rg Paris corpus.jsonl | sed 's/a/b/g' | rg -v x", planner.CONCAT),
    ("rg -F -i paris corpus.jsonl | head -n 5", planner.HEAD),
    ("rg Paris corpus.jsonl | head", planner.HEAD),
    ("rg Paris corpus.jsonl | head -3", planner.HEAD),
    ("rg Paris corpus.jsonl | head -c 100", planner.HEAD),
    ("head -n 4 corpus.jsonl", planner.HEAD),
    ("rg -m 3 Paris corpus.jsonl", planner.HEAD),
    ("grep -m 3 -v Paris corpus.jsonl", planner.HEAD),
    ("rg -c Paris corpus.jsonl", planner.SUM),
    ("rg --count-matches Paris corpus.jsonl", planner.SUM),
    ("grep -c Paris corpus.jsonl", planner.SUM),
    ("rg Paris corpus.jsonl | wc -l", planner.SUM),
    ("wc -l corpus.jsonl", planner.SUM),
    ("rg Paris corpus.jsonl | grep -c x", planner.SUM),
    ("rg -o '[a-z]+' corpus.jsonl | sort -r | head -n 5", planner.SORT_MERGE),
    ("rg -o '[a-z]+' corpus.jsonl | sort -rn | head", planner.SORT_MERGE),
    ("rg -o '[a-z]+' corpus.jsonl | sort -u | head -n 5", planner.SORT_MERGE),
    ("rg -o '[a-z]+' corpus.jsonl | sort | uniq | head -n 5", planner.SORT_MERGE),
    ("sort -t: -k2,2 corpus.jsonl | head -n 2", planner.SORT_MERGE),
    ("rg -n Paris corpus.jsonl", planner.CONCAT),
    ("grep -n -b Paris corpus.jsonl | head -n 3", planner.HEAD),
    ("rg --column -H Paris corpus.jsonl", planner.CONCAT),
    ("rg -o x corpus.jsonl | sort | uniq -c | sort -rn | head", planner.CONCAT),  # + a post part
])
def test_strategy(command, expected):
    assert strategy(command) == expected, plan_pipeline(hand_built(command)).reason


def test_sort_plans_keep_every_option_and_the_post_part():
    plan = plan_pipeline(hand_built("rg -o x corpus.jsonl | sort -r -t: -k2,2n | head -n 4 | tr a b"))
    assert plan.sort_options == ("-r", "-t:", "-k2,2n")  # the -r the original engine dropped
    assert [s.program for s in plan.parallel] == ["rg", "sort", "head"]
    assert [s.program for s in plan.post] == ["tr"]
    plan = plan_pipeline(hand_built("rg -o x corpus.jsonl | sort | uniq | head -n 4"))
    assert plan.merge_uniq and [s.program for s in plan.parallel] == ["rg", "sort", "uniq", "head"]


def test_renumber_fields_follow_the_print_order():
    assert plan_pipeline(hand_built("rg -n -b --column -H x corpus.jsonl")).renumber == \
        planner.Renumber(prefix=b"corpus.jsonl:", fields=("line", "column", "byte"))
    assert plan_pipeline(hand_built("grep -b x corpus.jsonl")).renumber == planner.Renumber(b"", ("byte",))


@pytest.mark.parametrize("command", [
    # the original engine's mistakes: each of these is NOT line-local
    "sed -n 1p corpus.jsonl", "sed 5q corpus.jsonl", "rg -m 2 -o x corpus.jsonl", "rg --context=2 x corpus.jsonl",
    "rg -C 1 x corpus.jsonl", "grep -A 1 x corpus.jsonl", "grep -2 x corpus.jsonl", "rg -U 'a\\nb' corpus.jsonl",
    "rg -P 'a(?=b)' corpus.jsonl", "rg -c -m 2 x corpus.jsonl", "grep -c -m 2 x corpus.jsonl",
    # other shapes that must run once
    "awk '{print $1}' corpus.jsonl", "tail -n 3 corpus.jsonl", "uniq -c corpus.jsonl", "sort corpus.jsonl",
    "cat corpus.jsonl", "cat -n corpus.jsonl | head", "rg -l x corpus.jsonl", "rg -q x corpus.jsonl",
    "rg x", "rg x .", "rg x corpus.jsonl corpus.jsonl", "grep -r x .", "ls", "find . -name x",
    "rg -f corpus.jsonl corpus.jsonl", "rg --json x corpus.jsonl", "rg --vimgrep x corpus.jsonl",
    "rg -z x corpus.jsonl", "rg --null-data x corpus.jsonl", "rg --heading x corpus.jsonl",
    "grep -Z x corpus.jsonl", "grep -T -n x corpus.jsonl", "rg --line-num x corpus.jsonl",
    "rg -m 0 x corpus.jsonl",  "rg --column -N x corpus.jsonl",
    "rg -v x corpus.jsonl", "cut -c1-5 corpus.jsonl", "rg -v x corpus.jsonl | sort -R | head",
    "rg -v x corpus.jsonl | sort | uniq -c",
    "rg x corpus.jsonl | rg y corpus.jsonl", "rg x corpus.jsonl | cat corpus.jsonl",
    "rg x corpus.jsonl | awk '{print FILENAME}' corpus.jsonl", "rg x corpus.jsonl | grep -r y",
    "rg x corpus.jsonl | rg y .", "rg x corpus.jsonl | ls", "head -n 3 corpus.jsonl corpus.jsonl",
    "wc corpus.jsonl", "wc -l -c corpus.jsonl", "wc -m corpus.jsonl", "wc -L corpus.jsonl",
])
def test_fallback_shapes_run_once(command):
    assert strategy(command) == planner.SEQUENTIAL, plan_pipeline(hand_built(command)).reason


@pytest.mark.parametrize("command", [
    "rg -F -i -w paris ./corpus.jsonl", "grep -o -E 'a+' corpus.jsonl | cut -c1-3 | tr a-z A-Z",
    "rg Paris corpus.jsonl | sed 's/a/b/g' | rg -v x", "rg Paris corpus.jsonl | head -3", "grep -c Paris corpus.jsonl",
    "rg -o '[a-z]+' corpus.jsonl | sort | uniq | head -n 5", "grep -n -b Paris corpus.jsonl | head -n 3",
    "rg -o x corpus.jsonl | sort | uniq -c | sort -rn | head", "sed -n 1p corpus.jsonl", "wc -l -c corpus.jsonl",
])
def test_the_planner_reads_the_policys_own_parse(command, monkeypatch):
    """A checked stage carries the parse its check made: the planner plans from it without parsing again,
    and the plan is the one argv alone gives."""
    expected = plan_pipeline(hand_built(command))
    pipeline = parse_command(command)
    assert all(stage.args is not None for stage in pipeline.stages)

    def no_second_parse(*args):
        raise AssertionError("the planner parsed a checked stage again")

    monkeypatch.setattr(specs, "parse_args", no_second_parse)
    assert plan_pipeline(pipeline) == expected


def test_a_replacement_with_a_newline_is_not_renumbered():
    stage = Stage(("rg", "-n", "-r", "a\n5:b", "x", "corpus.jsonl"))
    assert plan_pipeline(Pipeline("", (stage,))).strategy == planner.SEQUENTIAL


@pytest.mark.parametrize("command, local", [
    ("rg x corpus.jsonl | tr a-z A-Z", True), ("rg x corpus.jsonl | tr -d '[:punct:]'", True),
    ("rg x corpus.jsonl | tr ' ' '\\n'", True), ("rg x corpus.jsonl | tr '\\n' ' '", False),
    ("rg x corpus.jsonl | tr -s ' '", False), ("rg x corpus.jsonl | tr -d '\\n'", False),
    ("rg x corpus.jsonl | tr -c a b", False), ("rg x corpus.jsonl | tr '[:space:]' x", False),
    ("rg x corpus.jsonl | tr a '\\000'", False), ("rg x corpus.jsonl | sed -n 's/a/b/p'", True),
    ("rg x corpus.jsonl | sed -E -e 's/a/b/2' -e 's|c|d|gI'", True), ("rg x corpus.jsonl | sed 's/a/b/;q'", False),
    ("rg x corpus.jsonl | sed '1s/a/b/'", False), ("rg x corpus.jsonl | sed 's/a/b/w out'", False),
    ("rg x corpus.jsonl | sed -z 's/a/b/'", False), ("rg x corpus.jsonl | sed 'y/a/b/'", False),
])
def test_only_provably_line_local_middle_stages_are_concatenated(command, local):
    plan = plan_pipeline(hand_built(command))
    assert (plan.strategy == planner.CONCAT and not plan.post) == local, plan


@pytest.mark.parametrize("script, ok", [
    ("s/a/b/", True), ("s/a/b/g", True), ("s|a/b|c|", True), ("s/a\\/b/c/2g", True), ("s/a/b/gw f", False),
    ("s/a/b/e", False), ("s/a/b/M", False), ("1s/a/b/", False), ("s/a/b/;5q", False), ("s/a/b", False),
    ("s/a/b/\n5q", False), ("p", False), ("s\\a\\b\\", False),
])
def test_plain_substitution(script, ok):
    assert is_plain_substitution(script) == ok


# ---- engine rules ---------------------------------------------------------------------------------

@pytest.fixture()
def sharded(tmp_path):
    """(corpus, shard folder, reference folder) with 3 shards."""
    ref = tmp_path / "ref"
    ref.mkdir()
    corpus = write_corpus(ref / "corpus.jsonl", n=120)
    manifest = build_shards(corpus, 3, tmp_path / "shards")
    return corpus, manifest.directory, ref


def test_a_timeout_in_one_shard_times_out_the_command(sharded, monkeypatch):
    corpus, shards, _ = sharded
    real = engine_module.run_pipeline

    def slow_second_shard(pipeline, path, **kwargs):
        if path.name == "shard-001.jsonl":
            return RunResult(b"partial\n", b"", EXIT_TIMEOUT, timed_out=True)
        return real(pipeline, path, **kwargs)

    monkeypatch.setattr(engine_module, "run_pipeline", slow_second_shard)
    for command in ("rg -c the corpus.jsonl", "rg the corpus.jsonl", "rg -o '[a-z]+' corpus.jsonl | sort | head -n 3"):
        result = Engine(corpus, shards).run(parse_command(command), timeout=10)
        assert (result.exit_code, result.timed_out, result.stdout) == (EXIT_TIMEOUT, True, b""), command


def test_a_real_timeout_is_exit_124_without_output(sharded):
    corpus, shards, _ = sharded
    result = Engine(corpus, shards).run(parse_command("rg -c the corpus.jsonl"), timeout=1e-6)
    assert (result.exit_code, result.timed_out, result.stdout) == (EXIT_TIMEOUT, True, b"")


def test_head_cancels_later_shards_once_it_has_its_lines(sharded, monkeypatch):
    corpus, shards, ref = sharded
    real = engine_module.run_pipeline
    calls = []

    def recording(pipeline, path, **kwargs):
        calls.append((path.name, kwargs["cancel"]))
        if path.name != "shard-000.jsonl":
            time.sleep(3.0)  # later shards are slow: the answer must not wait for them
        return real(pipeline, path, **kwargs)

    monkeypatch.setattr(engine_module, "run_pipeline", recording)
    command = "rg the corpus.jsonl | head -n 2"
    start = time.monotonic()
    result = Engine(corpus, shards).run(parse_command(command), timeout=10)
    assert time.monotonic() - start < 2.5  # far below the later shards' 3 s, with room for a loaded machine
    assert result.stdout == bash(command, ref).stdout and result.stdout.count(b"\n") == 2
    assert calls[0][0] == "shard-000.jsonl"
    assert all(cancel.is_set() for name, cancel in calls[1:])


def test_on_slow_fires_only_once_the_grace_has_passed(sharded):
    corpus, _, _ = sharded
    pipeline = parse_command("rg the corpus.jsonl | head -n 2")
    for grace, expected in ((0.0, 1), (3600.0, 0)):
        fired: list[int] = []
        run_pipeline(pipeline, corpus, timeout=10, max_output_bytes=None, on_slow=(grace, partial(fired.append, 1)))
        assert len(fired) == expected, grace


def test_small_shards_run_once_unless_asked(sharded, monkeypatch):
    corpus, shards, ref = sharded
    pipeline = parse_command("rg -c the corpus.jsonl")
    monkeypatch.delenv("GREPSEEK_MIN_SHARD_MB")
    assert Engine(corpus, shards).plan(pipeline).strategy == planner.SEQUENTIAL  # default: 32 MB a shard
    assert Engine(corpus, shards, min_shard_bytes=0).plan(pipeline).strategy == planner.SUM
    monkeypatch.setenv("GREPSEEK_MIN_SHARD_MB", "0")
    assert Engine(corpus, shards).plan(pipeline).strategy == planner.SUM
    monkeypatch.setenv("GREPSEEK_MIN_SHARD_MB", "lots")
    with pytest.raises(UserError, match="GREPSEEK_MIN_SHARD_MB"):
        Engine(corpus, shards)
    result = Engine(corpus, shards, min_shard_bytes=10**9).run(pipeline, timeout=10)
    assert result.stdout == bash("rg -c the corpus.jsonl", ref).stdout


@pytest.mark.parametrize("grace", [0.0, 3600.0])
def test_head_plans_are_exact_whether_or_not_later_shards_start_early(sharded, monkeypatch, grace):
    corpus, shards, ref = sharded
    monkeypatch.setattr(engine_module, "HEAD_GRACE_S", grace)
    engine = Engine(corpus, shards)
    for command in ("rg the corpus.jsonl | head -n 2", "rg -n 'e' corpus.jsonl | head -n 100",
                    "rg -F zzz-none corpus.jsonl | head", "rg -c the corpus.jsonl | head -n 1"):
        result = engine.run(parse_command(command), timeout=10)
        reference = bash(command, ref)
        assert (result.stdout, result.exit_code) == (reference.stdout, reference.returncode), command


def test_errors_print_once_like_one_process(sharded):
    corpus, shards, ref = sharded
    for command in ("rg '(' corpus.jsonl", "grep -E '(' corpus.jsonl | head -n 3", "rg -c '(' corpus.jsonl"):
        result = Engine(corpus, shards).run(parse_command(command), timeout=10)
        reference = bash(command, ref)
        assert (result.stdout, result.stderr, result.exit_code) == \
            (reference.stdout, reference.stderr, reference.returncode)
        first_line = result.stderr.split(b"\n")[0]
        assert first_line and result.stderr.count(first_line) == 1  # one message, not one per shard


def test_zero_counts_and_exit_status(sharded):
    corpus, shards, ref = sharded
    engine = Engine(corpus, shards)
    for command in ("rg -c nomatch corpus.jsonl", "grep -c nomatch corpus.jsonl", "rg nomatch corpus.jsonl | wc -l",
                    "rg nomatch corpus.jsonl", "grep -c -H nomatch corpus.jsonl", "rg -c Paris corpus.jsonl"):
        assert plan_pipeline(parse_command(command)).strategy != planner.SEQUENTIAL
        result = engine.run(parse_command(command), timeout=10)
        reference = bash(command, ref)
        assert (result.stdout, result.exit_code) == (reference.stdout, reference.returncode), command


def test_refused_text_and_a_shared_bounded_pool(sharded):
    corpus, shards, _ = sharded
    engine = Engine(corpus, shards)
    assert engine.run("rg x corpus.jsonl > out", timeout=5).exit_code == EXIT_REFUSED
    assert engine.workers <= 3 and shared_pool(engine.workers) is shared_pool(engine.workers)
    results = []
    threads = [threading.Thread(target=lambda: results.append(engine.run("rg -c the corpus.jsonl", timeout=20)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = run_pipeline(parse_command("rg -c the corpus.jsonl"), corpus, timeout=20, max_output_bytes=None)
    assert all(r.stdout == expected.stdout for r in results) and len(results) == 4


def test_stale_shards_are_refused(sharded):
    corpus, shards, _ = sharded
    engine = Engine(corpus, shards)
    with open(corpus, "a") as handle:
        handle.write(json.dumps({"id": "new", "contents": "added later"}) + "\n")
    with pytest.raises(UserError, match="stale shards"):
        Engine(corpus, shards)
    with pytest.raises(UserError, match="stale shards"):  # an engine made before the change notices too
        engine.run("rg -c added corpus.jsonl", timeout=5)


def test_a_corpus_with_nul_bytes_runs_once(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"a\nb\x00\nc\n" * 50)
    engine = Engine(corpus, build_shards(corpus, 2, tmp_path / "s").directory)
    assert engine.plan(parse_command("rg -c a corpus.jsonl")).strategy == planner.SEQUENTIAL


def test_a_warning_printed_before_the_output_survives_the_output_cap(tmp_path):
    """grep warns about `(?i)` before it prints a line; cutting its output at the cap must not drop that."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("iLONG line\n" * 5000)
    command = "grep -E -s '(?i)LONG' corpus.jsonl"
    warning = bash(command, tmp_path).stderr
    assert warning.startswith(b"grep: warning")
    for _ in range(5):
        result = run_pipeline(parse_command(command), corpus, timeout=20, max_output_bytes=100)
        assert result.truncated and result.stdout == (b"iLONG line\n" * 10)[:100] and result.stderr == warning
