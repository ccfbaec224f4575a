"""The index as a file format and a tool: build, freshness, discovery, literals, CLI, ShellTool."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from test_shell_helpers import bash, write_corpus

from grepseek_lib.errors import UserError
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.fold import CONTAINS, EXACT, PREFIX, SUFFIX, Folder, Term, compute_table
from grepseek_lib.shell.index import default_index_dir, find_index, load_index
from grepseek_lib.shell.index_build import build_index
from grepseek_lib.shell.literals import BRE, ERE, RUST, required
from grepseek_lib.shell.tool import ShellTool


@pytest.fixture
def indexed(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", n=60)
    return corpus, build_index(corpus, default_index_dir(corpus), block_bytes=500)


def test_blocks_cover_the_corpus_at_line_ends(indexed):
    corpus, manifest = indexed
    index = load_index(manifest.directory, corpus)
    data = corpus.read_bytes()
    ends = index.offsets + index.lengths
    assert index.offsets[0] == 0 and ends[-1] == len(data) and (index.offsets[1:] == ends[:-1]).all()
    assert all(data[e - 1:e] == b"\n" for e in ends.tolist())
    assert index.first_lines.tolist() == (np.cumsum([0, *index.line_counts.tolist()])[:-1] + 1).tolist()


def test_every_word_of_a_block_finds_the_block(indexed):
    corpus, manifest = indexed
    index = load_index(manifest.directory, corpus)
    data = corpus.read_bytes()
    for block in (0, len(index.offsets) // 2, len(index.offsets) - 1):
        text = data[index.offsets[block]:index.offsets[block] + index.lengths[block]].decode()
        for literal in ("Raw", "caf\u00e9", "quoted", text.split()[3]):
            if literal in text:
                found = index.candidates([index.folder.literal_terms(literal)])
                assert found is None or block in found.tolist(), literal


def test_suffix_and_infix_lookups_find_every_word_a_scan_finds(indexed):
    corpus, manifest = indexed
    index = load_index(manifest.directory, corpus)
    words = bytes(index.vocab).split(b"\n")[:-1]
    assert len(index.suffixes) == len(bytes(index.vocab))
    keys = {w[i:j] for w in words[::7] for i, j in ((0, 2), (1, 4), (len(w) - 3, len(w))) if w[i:j]}
    for key in sorted(keys | {b"E", b"ZZZQ", words[0], words[-1]}):
        for kind, holds in ((SUFFIX, bytes.endswith), (CONTAINS, bytes.__contains__)):
            found = index.word_ids(Term(kind, key))
            expected = [i for i, w in enumerate(words) if holds(w, key)]
            if found is None:
                assert len(expected) > 20_000
            else:
                assert list(found) == expected, (key, kind)


def test_stale_index_is_refused_with_the_rebuild_command(indexed):
    corpus, manifest = indexed
    corpus.write_bytes(corpus.read_bytes())  # same bytes, new mtime: accepted (sha256)
    assert Engine(corpus, index=manifest.directory).index_path is not None
    with open(corpus, "ab") as handle:
        handle.write(b'{"id": "new", "contents": "changed"}\n')
    with pytest.raises(UserError, match="stale index.*grepseek index --corpus"):
        Engine(corpus, index=manifest.directory)
    with pytest.raises(UserError, match="stale index"):
        ShellTool(corpus)  # found beside the corpus, refused all the same


def test_engine_made_before_a_change_notices(indexed):
    corpus, manifest = indexed
    engine = Engine(corpus, index=manifest.directory, index_fraction=1.0)
    os.utime(corpus, ns=(1, 1))
    corpus.write_bytes(corpus.read_bytes().replace(b"Raw", b"RAW"))
    with pytest.raises(UserError, match="stale index"):
        engine.run("rg -F quoted corpus.jsonl", timeout=10)


def test_discovery_beside_the_corpus_and_the_shards(tmp_path, indexed):
    corpus, manifest = indexed
    assert find_index(corpus, None, None) == manifest.directory
    assert find_index(corpus, None, False) is None
    assert find_index(tmp_path / "other.jsonl", tmp_path / "shards", None) == tmp_path / "index"
    (tmp_path / "lonely").mkdir()
    lonely = write_corpus(tmp_path / "lonely" / "c.jsonl", n=3)
    assert ShellTool(lonely).engine is None  # no index, no shards: the plain runner, as before
    assert ShellTool(corpus).engine is not None and ShellTool(corpus, index=False).engine is None


def test_literal_terms_mark_partial_words():
    folder = Folder(compute_table())
    assert folder.literal_terms("Henry Feilden") == [Term(SUFFIX, b"HENRY"), Term(PREFIX, b"FEILDEN")]
    assert folder.literal_terms("a big cat") == [Term(SUFFIX, b"A"), Term(EXACT, b"BIG"), Term(PREFIX, b"CAT")]
    assert folder.literal_terms("\u212aelvin") == [Term(CONTAINS, b"KELVIN")]
    assert folder.literal_terms("\u017fong") == folder.literal_terms("SONG")
    assert folder.literal_terms(".:") == []


@pytest.mark.parametrize(("pattern", "syntax", "expected"), [
    ("Henry Feil+den", RUST, [["Henry Fei", "den"]]),
    ("\\bParis\\b|London", RUST, [["Paris"], ["London"]]),
    ("[A-Z]+ University", RUST, [[" University"]]),
    ("a{2,3}bc", ERE, [["bc"]]),
    ("foo\\(bar\\)*baz", BRE, [["foo", "baz"]]),
    ("x\\|yz", BRE, [["x"], ["yz"]]),
    ("a\\.b", BRE, [["a.b"]]),
    ("(?i)abc", RUST, [["abc"]]),
    ("(?x)abc", RUST, None),
    ("", RUST, None),
    ("ab|", RUST, None),
    ("\\x41bcd", RUST, [["bcd"]]),
    ("(ab", ERE, None),
    ("\\d+ years", RUST, [[" years"]]),
])
def test_required_literals(pattern, syntax, expected):
    assert required(pattern, syntax) == expected


def test_cli_index_and_run_with_index(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", n=40)
    env = {**os.environ, "GREPSEEK_MIN_SHARD_MB": "0"}
    built = subprocess.run([sys.executable, "-m", "grepseek_lib", "index", "--corpus", str(corpus)],
                           capture_output=True, text=True, env=env, timeout=120)
    assert built.returncode == 0 and "index of" in built.stdout, built.stderr
    command = "rg -n -F quoted corpus.jsonl | head -n 2"
    ran = subprocess.run([sys.executable, "-m", "grepseek_lib", "run", "--corpus", str(corpus), command],
                         capture_output=True, env=env, timeout=120)
    ref = bash(command, tmp_path)
    assert (ran.stdout, ran.stderr, ran.returncode) == (ref.stdout, ref.stderr, ref.returncode)
