"""Shards and their manifest, the scaled corpus, and the `grepseek shard` / `run --shards` commands."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grepseek_lib.cli import main
from grepseek_lib.data.scale import scale_corpus
from grepseek_lib.errors import UserError
from grepseek_lib.shell import shards as shards_module
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.shards import MANIFEST_NAME, _Cuts, build_shards, default_shards_dir, load_manifest

_LINES = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30)


@settings(max_examples=80, deadline=None)
@given(lines=_LINES, final_newline=st.booleans(), n=st.integers(1, 8))
def test_shards_are_the_file_cut_at_line_ends(tmp_path_factory, lines, final_newline, n):
    folder = tmp_path_factory.mktemp("s")
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    corpus = folder / "corpus.jsonl"
    corpus.write_bytes(data)
    manifest = build_shards(corpus, n, folder / "shards")
    parts = [p.read_bytes() for p in manifest.paths]
    assert b"".join(parts) == data
    lines_in_data = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    assert 1 <= len(parts) <= min(n, max(1, lines_in_data))  # capped: whole lines, never an empty shard
    assert all(parts) or data == b""
    offset, line = 0, 1
    for i, (info, part) in enumerate(zip(manifest.shards, parts, strict=True)):
        assert (info.byte_offset, info.first_line, info.size) == (offset, line, len(part))
        assert info.lines == part.count(b"\n") + (1 if part and not part.endswith(b"\n") else 0)
        if part and not part.endswith(b"\n"):
            assert not any(parts[i + 1:])  # only the file's last line may lack its newline
        offset += len(part)
        line += info.lines
    assert manifest.sha256 == hashlib.sha256(data).hexdigest()
    assert manifest.has_nul == (b"\0" in data)
    assert load_manifest(folder / "shards", corpus) == manifest


def test_shards_are_byte_balanced_and_the_manifest_is_complete(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"".join(b'{"id": "%04d", "contents": "x"}\n' % i for i in range(4000)))
    manifest = build_shards(corpus, 4, tmp_path / "shards")
    assert len({s.size for s in manifest.shards}) == 1  # equal lines: an exactly equal split
    uneven = tmp_path / "uneven.jsonl"
    uneven.write_bytes(b"".join(b"%s\n" % (b"x" * (i % 97)) for i in range(4000)))
    sizes = [s.size for s in build_shards(uneven, 3, tmp_path / "u").shards]
    assert max(sizes) - min(sizes) < 2 * 97  # within about one line of an equal split
    saved = json.loads((tmp_path / "shards" / MANIFEST_NAME).read_text())
    assert saved["source"]["path"] == str(corpus.resolve()) and saved["source"]["size"] == corpus.stat().st_size
    assert saved["source"]["mtime_ns"] == corpus.stat().st_mtime_ns and len(saved["source"]["sha256"]) == 64
    assert [s["first_line"] for s in saved["shards"]] == [1, 1001, 2001, 3001]
    assert {"lines", "first_line", "byte_offset", "file", "size"} <= set(saved["shards"][0])


def test_rebuilding_with_fewer_shards_removes_the_old_ones(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b"a\nb\nc\nd\n")
    build_shards(corpus, 4, tmp_path / "s")
    build_shards(corpus, 2, tmp_path / "s")
    assert sorted(p.name for p in (tmp_path / "s").glob("shard-*")) == ["shard-000.jsonl", "shard-001.jsonl"]


def test_stale_or_broken_shards_are_refused_with_a_rebuild_hint(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"one\ntwo\nthree\n")
    folder = tmp_path / "shards"
    build_shards(corpus, 2, folder)
    with pytest.raises(UserError, match="no shard manifest"):
        load_manifest(tmp_path / "elsewhere", corpus)
    corpus.write_bytes(b"one\ntwo\nthree\nfour\n")  # grew
    with pytest.raises(UserError, match="stale shards.*grepseek shard --corpus"):
        load_manifest(folder, corpus)
    build_shards(corpus, 2, folder)
    stat = corpus.stat()
    corpus.write_bytes(b"ONE\ntwo\nthree\nfour\n")  # same size, new mtime
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(UserError, match="stale shards"):
        load_manifest(folder, corpus)
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size AND old mtime: only sha256 sees it
    with pytest.raises(UserError, match="stale shards"):
        load_manifest(folder, corpus, verify=True)
    build_shards(corpus, 2, folder)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(corpus.read_bytes())
    assert load_manifest(folder, copy).sha256 == load_manifest(folder).sha256  # same bytes elsewhere: fine
    copy.write_bytes(b"ONE\ntwo\nthree\nfoUr\n")
    with pytest.raises(UserError, match="content differs"):
        load_manifest(folder, copy)
    (folder / "shard-001.jsonl").write_bytes(b"tampered\n")
    with pytest.raises(UserError, match="changed since it was written"):
        load_manifest(folder, corpus)
    with pytest.raises(UserError, match="at least 1"):
        build_shards(corpus, 0, folder)


def test_scale_corpus_repeats_with_fresh_ids(tmp_path):
    source = tmp_path / "corpus.jsonl"
    rows = [{"id": str(i), "contents": f'"T{i}"\ncaf\u00e9 {i}'} for i in range(1, 21)]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = scale_corpus(source, 0.005, tmp_path / "big.jsonl")
    lines = out.read_bytes().splitlines(keepends=True)
    assert out.stat().st_size >= 5000 and out.stat().st_size < 5000 + 200
    assert b"".join(lines[:20]) == source.read_bytes()  # copy 0 verbatim
    parsed = [json.loads(line) for line in lines]
    assert len({p["id"] for p in parsed}) == len(parsed)  # every id fresh
    assert [p["contents"] for p in parsed] == [rows[i % 20]["contents"] for i in range(len(parsed))]
    with pytest.raises(UserError, match="size-mb"):
        scale_corpus(source, 0, tmp_path / "x.jsonl")


def test_shard_and_run_commands(tmp_path, capfd):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "contents": f"Paris {i}"}) + "\n" for i in range(50)))
    assert main(["shard", "--corpus", str(corpus), "--shards", "3"]) == 0
    assert "3 shards" in capfd.readouterr().out
    assert default_shards_dir(corpus) == tmp_path / "shards" and (tmp_path / "shards" / MANIFEST_NAME).is_file()
    assert main(["run", "--corpus", str(corpus), "--shards", str(tmp_path / "shards"),
                 "rg -n 'Paris 4[0-9]' corpus.jsonl | head -n 2"]) == 0
    assert capfd.readouterr().out == ('41:{"id": "40", "contents": "Paris 40"}\n'
                                      '42:{"id": "41", "contents": "Paris 41"}\n')
    assert main(["run", "--corpus", str(corpus), "--shards", str(tmp_path / "shards"), "rg -c Lyon corpus.jsonl"]) == 1
    corpus.write_text("changed\n")
    assert main(["run", "--corpus", str(corpus), "--shards", str(tmp_path / "shards"), "rg -c x corpus.jsonl"]) == 2
    assert "stale shards" in capfd.readouterr().err


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 5000), n=st.integers(1, 300), cut=st.integers(0, 5000))
def test_cut_targets_skip_exactly_past_a_cut(size, n, cut):
    cuts = _Cuts(size, n)
    naive = [(size * i + n - 1) // n for i in range(1, n)]
    assert cuts.target() == (naive[0] if naive else None)
    cuts.skip_past(cut)
    later = [t for t in naive[1:] if t > cut]
    assert cuts.target() == (later[0] if later else None)


def test_far_more_shards_than_lines_are_capped_without_empty_files(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"".join(b'{"id": "%d", "contents": "%s"}\n' % (i, b"x" * (i % 50)) for i in range(3000)))
    manifest = build_shards(corpus, 10**12, tmp_path / "s")  # a list of N targets would never finish
    files = sorted((tmp_path / "s").glob("shard-*"))
    assert 1000 < len(manifest.shards) <= 3000 and len(files) == len(manifest.shards)
    assert all(s.size > 0 and s.lines >= 1 for s in manifest.shards)
    assert b"".join(p.read_bytes() for p in manifest.paths) == corpus.read_bytes()
    assert not list((tmp_path / "s").glob("*.tmp"))
    build_shards(corpus, 2, tmp_path / "s")
    assert len(list((tmp_path / "s").glob("shard-*"))) == 2


def test_shard_command_says_when_it_made_fewer_shards(tmp_path, capfd):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"a\nb\nc\n")
    assert main(["shard", "--corpus", str(corpus), "--shards", "100000", "--out", str(tmp_path / "s")]) == 0
    assert capfd.readouterr().out.startswith("3 shards (not 100000: a shard holds whole lines")


def test_a_byte_identical_rewrite_is_not_stale_and_is_hashed_once(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"".join(b'{"id": "%d", "contents": "Paris %d"}\n' % (i, i) for i in range(60)))
    build_shards(corpus, 3, tmp_path / "s")
    engine = Engine(corpus, tmp_path / "s", min_shard_bytes=0)
    stat = corpus.stat()
    corpus.write_bytes(corpus.read_bytes())  # what `grepseek data build` does to an unchanged corpus
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert engine.run("rg -c Paris corpus.jsonl", timeout=10).stdout == b"60\n"
    assert load_manifest(tmp_path / "s").mtime_ns == corpus.stat().st_mtime_ns  # recorded: no rehash next time

    def no_hashing(path):
        raise AssertionError("hashed again")

    monkeypatch.setattr(shards_module, "file_sha256", no_hashing)
    assert load_manifest(tmp_path / "s", corpus).size == corpus.stat().st_size
    monkeypatch.undo()
    corpus.write_bytes(corpus.read_bytes().replace(b"Paris 7", b"Lyon  7"))  # same size, other bytes
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2 * 10**9))
    with pytest.raises(UserError, match="stale shards.*sha256"):
        engine.run("rg -c Paris corpus.jsonl", timeout=10)
