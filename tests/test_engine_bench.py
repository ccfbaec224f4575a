"""`grepseek bench engine` on a tiny corpus: every mode runs, outputs are compared, tables are written."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from grepseek_lib.bench.engine import PIPELINES, BenchPipeline, bench_engine, bench_shards_dir
from grepseek_lib.bench.engine_report import write_report
from grepseek_lib.cli import main
from grepseek_lib.errors import UserError


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    words = ["Paris", "river", "Einstein", "Nobel Prize", "Zanzibar", "born", "Harvard University"]
    path.write_text("".join(json.dumps({"id": str(i), "contents": f"{words[i % 7]} {i}"}) + "\n" for i in range(700)))
    return path


def test_bench_engine_table(corpus, tmp_path):
    pipelines = (BenchPipeline("count", "rg -c -F 'Paris' corpus.jsonl", "rg -c -F 'Paris'", " | awk '{s+=$1} END {print s+0}'"),
                 BenchPipeline("filter", "rg -n river corpus.jsonl"),
                 BenchPipeline("head", "rg -F -i 'paris' corpus.jsonl | head -n 5"))
    frame, summary = bench_engine(corpus, 2, repeats=1, fast_repeats=1, pipelines=pipelines)
    assert list(frame.strategy) == ["sum", "concat", "head"] and frame.identical.all()
    assert (frame.sequential_s > 0).all() and (frame.sharded_s > 0).all()
    assert summary["geomean_speedup_count_filter"] > 0 and summary["all_identical"]
    csv_path, md_path = write_report(frame, summary, tmp_path / "out")
    assert len(pd.read_csv(csv_path)) == 3
    text = md_path.read_text()
    assert "| count | `rg -c -F 'Paris' corpus.jsonl` | sum |" in text and "Geometric-mean speed-up" in text
    assert (bench_shards_dir(corpus, 2) / "manifest.json").is_file()


def test_bench_pipelines_cover_the_issue_list():
    kinds = {p.kind for p in PIPELINES}
    assert {"count", "filter", "head", "sort", "fallback"} <= kinds
    commands = " ".join(p.command for p in PIPELINES)
    for shape in ("rg -c", "| head -n 5", "| wc -l", "rg -n", "sort | uniq -c | sort -rn | head", "grep -c"):
        assert shape in commands


def test_bench_cli_and_bad_input(corpus, tmp_path, capsys):
    with pytest.raises(UserError, match="at least 2"):
        bench_engine(corpus, 1)
    with pytest.raises(UserError, match="does not exist"):
        bench_engine(tmp_path / "nope.jsonl", 2)
    assert main(["bench", "engine", "--corpus", str(corpus), "--shards", "2", "--repeats", "1",
                 "--fast-repeats", "1", "--out", str(tmp_path / "cli")]) == 0
    assert "Geometric-mean" in capsys.readouterr().out and (tmp_path / "cli" / "engine_bench.csv").is_file()


def test_settle_keeps_the_bytes_and_names_a_missing_file(tmp_path):
    from grepseek_lib import pagecache

    path = tmp_path / "corpus.jsonl"
    data = b"".join(b'{"id": "%d", "contents": "x"}\n' % i for i in range(50_000))
    path.write_bytes(data)
    pagecache.settle([path])
    assert path.read_bytes() == data
    with pytest.raises(FileNotFoundError, match="missing"):
        pagecache.settle([tmp_path / "missing.jsonl"])
