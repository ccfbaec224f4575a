"""Real data through every stage: a FlashRAG-style download laid out from the raw files (the real wiki-18
sample, the FlashRAG quickstart NQ questions, HippoRAG's HotpotQA train questions converted to FlashRAG's
format), imported by `grepseek data build`, then the smoke series run on it by `grepseek pipeline`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grepseek_lib import config, runfolder
from grepseek_lib.data.formats import corpus_line, iter_corpus, load_benchmark
from grepseek_lib.data.raw import join_sentences

RAW = config.raw_dir()
#: HotpotQA train questions in the download's train split; of the dev split, OVERLAP are train questions too.
TRAIN, OVERLAP, FRESH = 10, 2, 3
#: Passage ids of the appended HotpotQA paragraphs start here, clear of the sample's ids (0-999).
FIRST_ID = 100_000


def flashrag_record(q: dict) -> dict:
    """An original-format HotpotQA question as FlashRAG writes it (HF's dict-of-lists metadata)."""
    facts, context = q["supporting_facts"], q["context"]
    return {"id": q["_id"], "question": q["question"], "golden_answers": [q["answer"]],
            "metadata": {"type": q["type"], "level": q["level"],
                         "supporting_facts": {"title": [t for t, _ in facts], "sent_id": [s for _, s in facts]},
                         "context": {"title": [t for t, _ in context], "sentences": [s for _, s in context]}}}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def lay_out_download(root: Path) -> tuple[Path, Path]:
    """(wiki-18 corpus file, FlashRAG folder): the real sample plus the paragraphs of the HotpotQA questions
    (a full wiki-18 holds the articles HotpotQA was built from), nq/test, hotpotqa/train and hotpotqa/dev."""
    questions = json.loads((RAW / "hipporag" / "hotpotqa_train.json").read_text(encoding="utf-8"))
    chosen = questions[:TRAIN] + questions[50:50 + FRESH]
    lines = (RAW / "flashrag_quickstart" / "sample_data.jsonl").read_text(encoding="utf-8").splitlines()
    paragraphs = dict.fromkeys((t, join_sentences(s)) for q in chosen for t, s in q["context"])
    lines += [corpus_line(FIRST_ID + k, t, text) for k, (t, text) in enumerate(paragraphs)]
    corpus = root / "downloads" / "wiki-18.jsonl"
    corpus.parent.mkdir(parents=True)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder = root / "downloads" / "flashrag"
    (folder / "nq").mkdir(parents=True)
    (folder / "nq" / "test.jsonl").write_bytes((RAW / "flashrag_quickstart" / "nq_test.jsonl").read_bytes())
    write_jsonl(folder / "hotpotqa" / "train.jsonl", [flashrag_record(q) for q in questions[:TRAIN]])
    dev = questions[:OVERLAP] + questions[50:50 + FRESH]
    write_jsonl(folder / "hotpotqa" / "dev.jsonl", [flashrag_record(q) for q in dev])
    return corpus, folder


def grepseek(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grepseek_lib.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def download(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("flashrag")
    corpus, folder = lay_out_download(root)
    return {"root": root, "corpus": corpus, "folder": folder}


def test_import_takes_training_splits_drops_overlap_and_resolves_gold(download, tmp_path):
    out = tmp_path / "wiki18"
    done = grepseek("data", "build", "--corpus-from", str(download["corpus"]), "--benchmarks-from",
                    str(download["folder"]), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    stats = json.loads((out / "stats.json").read_text())
    bench = stats["benchmarks"]
    assert bench["hotpotqa_train"] == {"role": "train", "candidates": TRAIN, "kept": TRAIN,
                                       "filter": "gold titles -> corpus ids", "dropped_train_overlap": 0,
                                       "gold_resolved": TRAIN}
    assert bench["hotpotqa"]["kept"] == FRESH and bench["hotpotqa"]["dropped_train_overlap"] == OVERLAP
    assert bench["nq"]["kept"] == 17
    assert stats["passages"] == sum(1 for _ in iter_corpus(download["corpus"]))
    titles = {p["id"]: p["title"] for p in iter_corpus(out / "corpus.jsonl")}
    for rec in load_benchmark(out / "benchmarks" / "hotpotqa_train.jsonl"):
        gold = rec["metadata"]["gold_passages"]
        assert set(gold) == set(rec["metadata"]["gold_titles"]) and len(gold) == 2
        for title, ids in gold.items():
            assert all(titles[i] == title for i in ([ids] if isinstance(ids, str) else ids))


def test_a_named_training_split_must_exist(download, tmp_path):
    done = grepseek("data", "build", "--benchmarks-from", str(download["folder"]), "--train-splits",
                    "musique_train", "--out", str(tmp_path / "x"))
    assert done.returncode != 0
    message = done.stderr.strip().splitlines()[-1]
    assert "musique/train.jsonl not found" in message and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_smoke_series_runs_on_the_imported_download(download):
    """00_data imports (no mini-wiki), cold start and GRPO read the imported training split by name."""
    root = download["root"]
    env = {**os.environ, "GREPSEEK_DATA": str(root / "data"), "GREPSEEK_RUNS": str(root / "runs")}
    params = {"data_dir": str(root / "data" / "wiki18"), "import_corpus": str(download["corpus"]),
              "import_benchmarks": str(download["folder"]), "train_splits": ["hotpotqa_train"],
              "coldstart_limit": 4, "latency_commands": 5}
    (root / "params.json").write_text(json.dumps(params))
    out = root / "runs" / "imported"
    done = grepseek("pipeline", "--profile", "smoke", "--params", str(root / "params.json"), "--out", str(out),
                    "--no-progress", env=env, timeout=590)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = runfolder.read_marker(out, "00_data")["summary"]
    assert data["train_questions"] == TRAIN and data["passages"] > 1000
    assert not (root / "data" / "miniwiki").exists()  # nothing was built from the raw folder
    cold = runfolder.read_marker(out, "02_cold_start")["summary"]
    assert cold["questions"] == 4 and cold["accepted"] > 0
    sources = {json.loads(line)["source"] for line in (out / "coldstart" / "records.jsonl").read_text().splitlines()}
    assert sources == {"hotpotqa_train"}
    questions = json.loads((out / "models" / "grpo" / "questions.json").read_text())
    assert questions and all(q["id"].startswith("hotpotqa_train:") for q in questions)
    assert runfolder.read_marker(out, "05_eval")["summary"]["questions"] > 0
    assert runfolder.read_marker(out, "06_latency") is not None
