"""Corpus / benchmark loaders, the raw-folder checks, the support rule and the importer, on small files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from grepseek_lib.cli import main
from grepseek_lib.data import iter_corpus, load_benchmark, make_contents, passage_title_text
from grepseek_lib.data.formats import corpus_line, iter_corpus_records, read_corpus_records
from grepseek_lib.data.importer import import_benchmarks, import_corpus
from grepseek_lib.data.raw import _kilt_article_text, check_raw_dir, split_words
from grepseek_lib.data.support import CorpusView, PhraseIndex, SupportFinder
from grepseek_lib.errors import UserError


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_title_text_round_trip() -> None:
    for title, text in [("Paris", "Paris is a city."), ('He said "hi"', "a\\b"), ("", "no title")]:
        assert passage_title_text(make_contents(title, text)) == (title, text)
    assert passage_title_text("no newline at all") == ("", "no newline at all")
    assert passage_title_text("Unquoted\ntext") == ("Unquoted", "text")


def test_corpus_line_is_wiki18_serialisation() -> None:
    line = corpus_line(7, "Zürich", 'He said "x"')
    assert line == '{"id": "7", "contents": "\\"Z\\u00fcrich\\"\\nHe said \\"x\\""}'


def test_iter_corpus_wiki18_jsonl(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.jsonl", corpus_line(1, "A", "alpha") + "\n\n" + corpus_line(2, "B", "beta") + "\n")
    rows = list(iter_corpus(path))
    assert [r["id"] for r in rows] == ["1", "2"]
    assert rows[1] == {"id": "2", "title": "B", "text": "beta", "contents": '"B"\nbeta'}


def test_iter_corpus_dpr_tsv_and_gzip(tmp_path: Path) -> None:
    tsv = 'id\ttext\ttitle\n1\t"He said ""hi"" there"\tAaron\n2\tplain text\tBob\n'
    rows = list(iter_corpus(_write(tmp_path / "psgs_w100.tsv", tsv)))
    assert rows[0] == {"id": "1", "title": "Aaron", "text": 'He said "hi" there',
                       "contents": '"Aaron"\nHe said "hi" there'}
    gz = tmp_path / "psgs.tsv.gz"
    gz.write_bytes(gzip.compress(tsv.encode()))
    assert list(iter_corpus(gz)) == rows


@pytest.mark.parametrize("name", ["c.jsonl", "c.jsonl.gz", "p.tsv", "p.tsv.gz"])
def test_corpus_records_are_read_back_by_byte_offset(tmp_path: Path, name: str) -> None:
    if ".tsv" in name:  # header, CRLF, a quoted field spanning two lines, a blank line, non-ASCII
        text = 'id\ttext\ttitle\r\n1\t"two\nlines ""q"""\tA\r\n\n2\tZ\u00fcrich text\tB\n3\tlast\tC\n'
    else:  # blank lines, non-ASCII, the {"id", "title", "text"} variant without an id (takes its line)
        text = (corpus_line(1, "A", "alpha") + "\n\n" + json.dumps({"id": "2", "contents": '"Z\u00fcrich"\nb'},
                ensure_ascii=False) + "\n" + json.dumps({"title": "T", "text": "no id"}) + "\n")
    path = tmp_path / name
    data = text.encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    records = list(iter_corpus_records(path))
    assert [r[2] for r in records] == list(iter_corpus(path))
    for offset, _, passage in records:  # the offset is where the record's text starts, uncompressed
        assert data[offset:].decode().lstrip("{").startswith(passage["id"] if ".tsv" in name else "")
    places = [(offset, lineno) for offset, lineno, _ in reversed(records)]
    assert read_corpus_records(path, places) == [r[2] for r in reversed(records)]
    blank = data.index(b"\n\n") + 1  # a place where no record starts: refused, never misread
    with pytest.raises(UserError, match="no passage starts at byte"):
        read_corpus_records(path, [(blank, 2)])
    if ".tsv" not in name:
        assert records[-1][2]["id"] == "4" and records[-1][1] == 4


def test_corpus_line_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.tsv"
    path.write_bytes(b"id\ttext\ttitle\n1\tok\tA\n2\t\xff\tB\n")
    with pytest.raises(UserError, match=r"p\.tsv:3: not UTF-8"):
        list(iter_corpus(path))


def test_corrupt_corpus_line_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.jsonl", corpus_line(1, "A", "a") + "\n" + corpus_line(2, "B", "b") + "\n{oops\n")
    stream = iter_corpus(path)
    assert next(stream)["id"] == "1"  # streams: the bad line is only seen when reached
    with pytest.raises(UserError, match=r"c\.jsonl:3: corrupt line"):
        list(stream)
    bad_tsv = _write(tmp_path / "p.tsv", "id\ttext\ttitle\n1\ttext\tT\n2\tmissing title\n")
    with pytest.raises(UserError, match=r"p\.tsv:3: expected 3 tab-separated fields"):
        list(iter_corpus(bad_tsv))
    no_contents = _write(tmp_path / "d.jsonl", '{"id": "1", "body": "x"}\n')
    with pytest.raises(UserError, match=r"d\.jsonl:1: .*\"contents\""):
        list(iter_corpus(no_contents))
    with pytest.raises(UserError, match="does not exist"):
        list(iter_corpus(tmp_path / "missing.jsonl"))


def test_load_benchmark_by_name_and_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREPSEEK_DATA", str(tmp_path))
    bench = tmp_path / "miniwiki" / "benchmarks"
    bench.mkdir(parents=True)
    rows = [{"id": f"q{i}", "question": f"Q{i}?", "golden_answers": [f"a{i}"], "metadata": {"k": i}}
            for i in range(3)]
    _write(bench / "nq.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    assert load_benchmark("nq") == rows
    assert load_benchmark(str(bench / "nq.jsonl"), limit=2) == rows[:2]
    assert load_benchmark("nq", limit=0) == []
    # a FlashRAG line without metadata and with a bare string answer still loads
    other = _write(tmp_path / "x.jsonl", '{"id": "t0", "question": "Q?", "golden_answers": "A"}\n')
    assert load_benchmark(other) == [{"id": "t0", "question": "Q?", "golden_answers": ["A"], "metadata": {}}]
    with pytest.raises(UserError, match="grepseek data build"):
        load_benchmark("triviaqa")
    _write(bench / "bad.jsonl", json.dumps(rows[0]) + "\n[1, 2]\n")
    with pytest.raises(UserError, match=r"bad\.jsonl:2"):
        load_benchmark("bad")


def test_split_words_and_kilt_cleaning() -> None:
    text = " ".join(f"w{i}" for i in range(250))
    pieces = split_words(text)
    assert [len(p.split()) for p in pieces] == [100, 100, 50]
    assert " ".join(pieces) == text
    paras = ["Ada\n", "Ada was a poet.\n", "Section::::Life.\n", "BULLET::::- First item\n", "More.\n"]
    assert _kilt_article_text(paras) == "Ada Ada was a poet. First item More."


def test_missing_raw_folder_and_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UserError, match=r"GREPSEEK_RAW.*--raw"):
        check_raw_dir(tmp_path / "nope")
    with pytest.raises(UserError, match=r"lacks .*sample_data\.jsonl"):
        check_raw_dir(tmp_path)
    code = main(["data", "build", "--raw", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "GREPSEEK_RAW" in err and "--raw" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
    assert main(["data", "scale", "--size-mb", "0", "--corpus", str(tmp_path / "c.jsonl")]) == 2


def test_phrase_index_matches_whole_tokens_only() -> None:
    index = PhraseIndex(["new york", "york", "paris"])
    assert index.find("i love new york city".split()) == {"new york", "york"}
    assert index.find("parisian yorkshire".split()) == set()


def _toy_finder(passages: list[tuple[str, str]], answers: list[str]) -> SupportFinder:
    return SupportFinder.build(CorpusView.build(passages), answers, [t for _, t in passages])


def test_support_rule_hops_comparisons_and_yes_no() -> None:
    passages = [
        ("Lothair II", "Lothair II was a king. His mother was Ermengarde of Tours."),
        ("Ermengarde of Tours", "Ermengarde of Tours died on 20 March 851."),
        ("Blind Shaft", "Blind Shaft is a 2003 film."),
        ("The Mask of Fu Manchu", "The Mask of Fu Manchu is a 1932 film."),
        ("Some river", "An unrelated passage mentioning 1932."),
    ]
    finder = _toy_finder(passages, ["20 March 851", "1932", "Blind Shaft", "yes", "Nowhere Land"])
    assert finder.supports("When did Lothair II's mother die?", ["20 March 851"])  # 2-hop bridge
    assert not finder.supports("When did Lothair II's mother die?", ["20 March 851"], max_hops=1)
    assert finder.supports("When was The Mask of Fu Manchu released?", ["1932"])  # 1-hop
    assert finder.supports("Which came first, Blind Shaft or The Mask of Fu Manchu?", ["Blind Shaft"])
    assert not finder.supports("Which came first, Blind Shaft or Titanic?", ["Blind Shaft"])  # one title
    assert finder.supports("Are Blind Shaft and The Mask of Fu Manchu both films?", ["yes"])
    assert not finder.supports("Is Blind Shaft a film?", ["yes"])
    assert not finder.supports("Where is Nowhere Land?", ["Nowhere Land"])
    assert not finder.supports("When did Lothair II die?", ["Nowhere Land"])  # answer not in corpus
    assert finder.in_corpus(["nope", "20 march 851"]) and not finder.in_corpus(["Nowhere Land"])
    # a generic title ("Some river": no capitalised later word) never names a question entity
    assert not finder.supports("Which film mentions some river?", ["1932"])
    # the gold answer a fuller form of one compared name: still a choice that needs both in the corpus
    finder = _toy_finder(passages + [("Blind Shaft", "The Blind Shaft film won a Silver Bear.")],
                         ["1932", "The Blind Shaft film"])
    assert not finder.supports("Which came first, Blind Shaft or Titanic?", ["The Blind Shaft film"])
    assert finder.supports("Which came first, Blind Shaft or The Mask of Fu Manchu?", ["The Blind Shaft film"])
    # without an "or" a fuller answer is no comparison: a one-title question keeps the 1-hop rule
    assert finder.supports("What won a Silver Bear, Blind Shaft?", ["The Blind Shaft film"])


def test_import_links_jsonl_converts_tsv_and_copies_benchmarks(tmp_path: Path) -> None:
    wiki = _write(tmp_path / "wiki18.jsonl", corpus_line(1, "A", "alpha") + "\n")
    out = tmp_path / "out"
    info = import_corpus(wiki, out)
    assert info["how"] == "linked" and (out / "corpus.jsonl").resolve() == wiki.resolve()
    assert import_corpus(wiki, out)["how"] == "already linked"
    tsv = _write(tmp_path / "psgs_w100.tsv", "id\ttext\ttitle\n1\talpha\tA\n")
    info = import_corpus(tsv, tmp_path / "out2")
    assert info["passages"] == 1
    assert (tmp_path / "out2" / "corpus.jsonl").read_text() == corpus_line(1, "A", "alpha") + "\n"
    flash = tmp_path / "flashrag"
    (flash / "nq").mkdir(parents=True)
    _write(flash / "nq" / "test.jsonl", '{"id": "test_0", "question": "Q?", "golden_answers": ["A"]}\n')
    stats, passages = import_benchmarks(flash, out)
    assert stats["nq"]["kept"] == 1 and stats["nq"]["role"] == "eval" and passages is None
    rec = load_benchmark(out / "benchmarks" / "nq.jsonl")[0]
    assert rec["metadata"] == {"source": "nq", "dataset_split": "test"}
    with pytest.raises(UserError, match="none of"):
        import_benchmarks(tmp_path, out)
