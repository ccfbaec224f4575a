"""No silent wrong answers: sort over tens of MB is exact, and a stage killed by a limit is reported.

`sort` spills sorted runs to temporary files once a pipe brings more than a few MB; with a file-size
limit of 0 it died of SIGXFSZ in the middle of the chain and the agent read "no results". These tests
sort a corpus of tens of MB, sequentially and through the sharded engine, against `bash -c`.
"""

from __future__ import annotations

import random
import resource
import shutil
from pathlib import Path

import pytest
from test_shell_helpers import bash, write_corpus

from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.folder import run_folder
from grepseek_lib.shell.limits import Limits, stage_settings
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import run_pipeline
from grepseek_lib.shell.shards import build_shards

#: Bigger than sort's in-memory buffer for a pipe, also per shard when cut in two.
BIG_BYTES = 32 << 20

SORTS = [
    "rg -o -w '[A-Z][a-z]+' corpus.jsonl | sort | uniq -c | sort -rn | head -n 5",
    "cat corpus.jsonl | sort | head -n 3",
    "cat corpus.jsonl | sort | tail -n 2",
    "rg -i the corpus.jsonl | sort -u | tail -n 3",
    "sort -u corpus.jsonl | wc -l",
    "sort -r corpus.jsonl | head -n 2",
    "sort -t'\"' -k4 corpus.jsonl | tail -n 2",
    "cat corpus.jsonl | sort -k2 | head -n 2",
]


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(corpus of ~32 MB, a 2-shard folder, the reference folder where bash runs)."""
    ref = tmp_path_factory.mktemp("bigref")
    small = write_corpus(tmp_path_factory.mktemp("seed") / "seed.jsonl", n=2000)
    lines = small.read_bytes().splitlines(keepends=True)
    rng = random.Random(3)
    corpus = ref / "corpus.jsonl"
    size = 0
    with corpus.open("wb") as handle:
        while size < BIG_BYTES:
            block = b"".join(line.replace(b'{"id": "', b'{"id": "%d-' % rng.randrange(10**6), 1) for line in lines)
            handle.write(block)
            size += len(block)
    shards = build_shards(corpus, 2, tmp_path_factory.mktemp("bigshards")).directory
    return corpus, shards, ref


@pytest.mark.parametrize("command", SORTS)
def test_big_sorts_match_bash_sequential_and_sharded(command, big):
    corpus, shards, ref = big
    expected = bash(command, ref, timeout=120)
    assert expected.returncode == 0 and expected.stdout and not expected.stderr  # the reference itself is sane
    ours = run_pipeline(parse_command(command), corpus, timeout=120, max_output_bytes=None)
    assert (ours.stdout, ours.stderr, ours.exit_code) == (expected.stdout, expected.stderr, expected.returncode)
    sharded = Engine(corpus, shards).run(command, timeout=120)
    assert (sharded.stdout, sharded.stderr, sharded.exit_code) == (expected.stdout, expected.stderr,
                                                                   expected.returncode)


def test_a_sixteen_stage_chain_works_at_its_memory_share(big):
    corpus, _, ref = big
    command = "rg -o -w '[A-Z][a-z]+' corpus.jsonl | sort | " + " | ".join(["cat"] * 11) + " | uniq -c | sort -rn | head -n 3"
    assert len(parse_command(command).stages) == 16
    expected = bash(command, ref, timeout=120)
    ours = run_pipeline(parse_command(command), corpus, timeout=120, max_output_bytes=None,
                        limits=Limits(chain_memory_bytes=2 << 30))  # 128 MiB a stage, smaller than usual
    assert (ours.stdout, ours.stderr, ours.exit_code) == (expected.stdout, expected.stderr, expected.returncode)


def _spilling_corpus(tmp_path: Path) -> Path:
    """~12 MB: from a pipe, sort keeps about 6 MB in memory and spills the rest to its scratch folder."""
    corpus = write_corpus(tmp_path / "c.jsonl", n=20000)
    corpus.write_bytes(corpus.read_bytes() * 3)
    return corpus


TINY_SCRATCH = Limits(sort_scratch_bytes=64 << 10)


def test_a_killed_middle_stage_is_reported_with_bashs_status(tmp_path):
    corpus = _spilling_corpus(tmp_path)
    result = run_pipeline(parse_command("cat corpus.jsonl | sort | wc -l"), corpus, timeout=60,
                          max_output_bytes=None, limits=TINY_SCRATCH)
    assert result.exit_code == 0  # bash: the status of the last stage (wc), whatever happened before it
    note = result.stderr.decode()
    assert note.startswith("note: stage 2 (sort) was killed by SIGXFSZ (file size limit); the stages after it")
    assert note.count("\n") == 1 and "64 KiB" in note


def test_a_killed_last_stage_exits_128_plus_the_signal(tmp_path):
    corpus = _spilling_corpus(tmp_path)
    result = run_pipeline(parse_command("cat corpus.jsonl | sort"), corpus, timeout=60, max_output_bytes=None,
                          limits=TINY_SCRATCH)
    assert result.exit_code == 128 + 25  # SIGXFSZ, as bash reports a last stage killed by it
    assert result.stderr.decode().startswith("note: stage 2 (sort) was killed by SIGXFSZ (file size limit); its ")


def test_a_shard_with_a_killed_stage_is_never_trusted(big):
    corpus, shards, ref = big
    command = "cat corpus.jsonl | sort | head -n 3"
    engine = Engine(corpus, shards)
    engine.shard_limits = TINY_SCRATCH  # every shard's sort dies: the engine must answer with one real run
    result = engine.run(command, timeout=120)
    expected = bash(command, ref, timeout=120)
    assert (result.stdout, result.stderr, result.exit_code) == (expected.stdout, expected.stderr, expected.returncode)


@pytest.mark.parametrize("command", ["cat corpus.jsonl | sort | head -n 1", "cat corpus.jsonl | head -c 10",
                                     "rg -o '[a-z]+' corpus.jsonl | sort -r | uniq | head -n 2"])
def test_a_stage_cut_off_by_head_is_normal_and_not_reported(command, tmp_path):
    corpus = _spilling_corpus(tmp_path)
    ref = tmp_path / "ref"
    ref.mkdir()
    shutil.copyfile(corpus, ref / "corpus.jsonl")
    ours = run_pipeline(parse_command(command), corpus, timeout=60, max_output_bytes=None)
    expected = bash(command, ref)
    assert (ours.stdout, ours.stderr, ours.exit_code) == (expected.stdout, expected.stderr, expected.returncode)
    assert ours.stderr == b""


def test_sorts_scratch_folder_is_outside_the_working_folder(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", n=20)
    with run_folder(corpus) as folder:
        assert sorted(p.name for p in folder.work.iterdir()) == ["corpus.jsonl"]
        assert folder.scratch.is_dir() and folder.scratch.parent == folder.root == folder.work.parent
        root = folder.root
    assert not root.exists()
    ref = tmp_path / "ref"
    ref.mkdir()
    shutil.copyfile(corpus, ref / "corpus.jsonl")
    for command in ("ls -a", "find .", "find . -type d", "cat corpus.jsonl | sort | find . | sort"):
        ours = run_pipeline(parse_command(command), corpus, timeout=30, max_output_bytes=None)
        expected = bash(command, ref)
        assert (ours.stdout, ours.stderr, ours.exit_code) == (expected.stdout, expected.stderr, expected.returncode)


def test_the_chain_shares_one_memory_budget():
    limits = Limits(chain_memory_bytes=8 << 30)
    for stages in (1, 2, 5, 16):
        shares = [dict(stage_settings("rg", stages, 60, limits, 1000)) for _ in range(stages)]
        total = sum(share[resource.RLIMIT_AS][0] for share in shares)
        assert total <= 8 << 30 and total > (8 << 30) - stages
    sort = dict(stage_settings("sort", 3, 60, limits, 10 << 30))
    other = dict(stage_settings("uniq", 3, 60, limits, 10 << 30))
    fsize = resource.RLIMIT_FSIZE
    assert sort[fsize][0] == 40 << 30 and other[fsize][0] == 0  # sort's scratch (4 x corpus); no file elsewhere
    assert Limits(chain_memory_bytes=8 << 30).share(4).chain_memory_bytes == 2 << 30
