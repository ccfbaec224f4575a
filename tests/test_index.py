"""The index as a file format and a tool: build, freshness, discovery, literals, CLI, ShellTool."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from test_shell_helpers import bash, write_corpus

from grepseek_lib.errors import UserError
from grepseek_lib.shell import index as index_module
from grepseek_lib.shell import index_cost
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.fold import CONTAINS, EXACT, PREFIX, SUFFIX, Folder, Term, compute_table
from grepseek_lib.shell.index import default_index_dir, find_index, load_index
from grepseek_lib.shell.index_build import build_index
from grepseek_lib.shell.indexed import IndexPath
from grepseek_lib.shell.literals import BRE, ERE, RUST, required
from grepseek_lib.shell.policy import parse_command
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


@pytest.mark.parametrize("settings", [
    {"FEW_BLOCKS": 0},  # every term narrows (by binary search or by a block mask, whichever is cheaper)
    {"FEW_BLOCKS": 0, "NARROW_RATIO": 0},  # later terms narrow only by binary search
    {"FEW_BLOCKS": 10**9},  # later terms skipped
])
def test_phrase_candidates_hold_every_block_with_the_phrase(indexed, monkeypatch, settings):
    corpus, manifest = indexed
    for name, value in settings.items():
        monkeypatch.setattr(index_module, name, value)
    index = load_index(manifest.directory, corpus)
    data = corpus.read_bytes()
    blocks = [data[o:o + n] for o, n in zip(index.offsets.tolist(), index.lengths.tolist(), strict=True)]
    middle, last = (data.decode().splitlines()[k].split() for k in (30, -2))
    for phrase in ("a|b (paren)", "(paren) $HOME", " ".join(middle[5:8]), " ".join(last[-4:-2]), "caf\u00e9 line"):
        terms = index.folder.literal_terms(phrase)
        assert len(terms) > 1
        found = index.candidates([terms])
        holding = [i for i, text in enumerate(blocks) if phrase.encode() in text]
        assert holding and set(holding) <= set(found.tolist()), phrase
        if settings["FEW_BLOCKS"] == 0:
            assert len(found) < len(blocks)


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
    # Unicode case folding may join characters this Python's tables do not: only the ASCII runs are named
    assert folder.literal_terms("Z\u00fcrich ab", unicode_case=True) == [Term(CONTAINS, b"RICH"), Term(PREFIX, b"AB")]
    assert folder.literal_terms("\u019b", unicode_case=True) == []
    assert folder.literal_terms("Zurich", unicode_case=True) == folder.literal_terms("Zurich")


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


def test_cli_index_block_size(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", n=40)
    out = tmp_path / "small.index"
    built = subprocess.run([sys.executable, "-m", "grepseek_lib", "index", "--corpus", str(corpus), "--out", str(out),
                            "--block-kib", "1"], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0 and "blocks of ~1 KiB" in built.stdout, built.stderr
    assert load_index(out, corpus).manifest.block_bytes == 1024
    bad = subprocess.run([sys.executable, "-m", "grepseek_lib", "index", "--corpus", str(corpus), "--block-kib", "0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--block-kib must be at least 1, got 0" in bad.stderr


def test_each_candidate_block_costs_a_copy(indexed, monkeypatch):
    """With the fixed and per-byte costs at zero, the per-block cost alone turns away a word in many blocks."""
    corpus, manifest = indexed
    path = IndexPath(load_index(manifest.directory, corpus), corpus)
    for name in ("FIXED_S", "PLAIN_S", "PER_BYTE_S"):
        monkeypatch.setattr(index_cost, name, 0.0)
    monkeypatch.setattr(index_cost, "RG_RATE", 1e12)  # the candidates' scan costs nothing either
    rare, common = parse_command("rg -F Raw corpus.jsonl"), parse_command("rg -F quoted corpus.jsonl")
    blocks = {name: path.index.candidates([path.index.folder.literal_terms(name)]) for name in ("Raw", "quoted")}
    assert len(blocks["Raw"]) == 1 and len(blocks["quoted"]) > 2
    monkeypatch.setattr(index_cost, "PER_BLOCK_S", manifest.size / 1e12 / 1.5)  # 1.5 blocks cost a plain scan
    path.max_fraction = 1 - 1e-9  # no fraction cut-off: only the cost model decides
    assert not isinstance(path.choose(rare), str)
    assert path.choose(common) == "a plain scan is as fast"


def test_a_head_after_a_phrase_takes_the_index_when_cheap(indexed, monkeypatch):
    """One word: the candidate blocks say where a plain head stops; a phrase's blocks only bound it loosely."""
    corpus, manifest = indexed
    path = IndexPath(load_index(manifest.directory, corpus), corpus, max_fraction=1 - 1e-9)
    monkeypatch.setattr(index_cost, "STOP_SLACK_LINES", 1)
    monkeypatch.setattr(index_cost, "FIXED_S", index_cost.PLAIN_S)  # the bytes decide, not the chains
    word = parse_command("rg -F quoted corpus.jsonl | head -n 1")
    phrase = parse_command("rg -F '\\\"quoted\\\" a|b' corpus.jsonl | head -n 1")
    assert path.choose(word) == "a plain scan is as fast"  # the first candidate block ends early: a plain run stops
    assert not isinstance(path.choose(phrase), str)
    in_punctuation = parse_command("rg -F '(paren)' corpus.jsonl | head -n 1")  # not a bare word: a loose bound
    assert not isinstance(path.choose(in_punctuation), str)
    monkeypatch.setattr(index_cost, "HEAD_RISK_S", 0.0)
    monkeypatch.setattr(index_cost, "HEAD_RISK_SHARE", 0.0)
    assert path.choose(phrase) == "a plain scan is as fast"
    assert path.choose(in_punctuation) == "a plain scan is as fast"
