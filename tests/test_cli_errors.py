"""Bad input to the real `grepseek` entry point: one line `grepseek: error: ...`, exit 2, no traceback, before any
heavy work, and nothing left behind that a correct run would trip over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grepseek_lib.cli import main
from grepseek_lib.data.formats import corpus_line
from grepseek_lib.eval import cli as eval_cli
from grepseek_lib.eval.runner import read_records

GREPSEEK = Path(sys.executable).with_name("grepseek")


@pytest.fixture()
def world(tmp_path, monkeypatch) -> dict[str, str]:
    """A corpus, FlashRAG files, bad config files and a plain file, named by the placeholders of CASES."""
    monkeypatch.setenv("GREPSEEK_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("GREPSEEK_RUNS", str(tmp_path / "runs"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(corpus_line("1", "Paris", "Paris is the capital of France.") + "\n")
    for folder in ("fr/nq", "other/nq"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "test.jsonl").write_text(json.dumps({"question": "capital of France?",
                                                                  "golden_answers": ["Paris"]}) + "\n")
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "file").write_text("x")
    configs = {"rate": "sft:\n  learning_rate: fast\n", "sft5": "sft: 5\n", "len0": "sft:\n  max_length: 0\n",
               "unknown": "grpo:\n  no_such_thing: 1\n", "vllm": "grpo:\n  use_vllm: maybe\n",
               "broken": "sft: [1\n", "top": "epochs: 3\n", "model": "model: 7\n", "ratio": "sft:\n  warmup_ratio: 2\n"}
    for name, text in configs.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    return {"tmp": str(tmp_path), "corpus": str(corpus), "file": str(tmp_path / "file"),
            "out": str(tmp_path / "out"), "fr": str(tmp_path / "fr"), "other": str(tmp_path / "other")}


EVAL = "eval --corpus {corpus} --out {out} --benchmarks {fr}/nq/test.jsonl"
SFT = "train sft --data {corpus} --out {out} --model tiny"
#: (argument line, words the error line must contain); {placeholders} come from the `world` fixture.
CASES = [
    (EVAL + " --out {file}", "is a file"),
    (EVAL + " --out {file}/sub", "inside"),
    (EVAL + " --out /proc/grepseek", "cannot write"),
    (EVAL + " --limit 0", "--limit"),
    (EVAL + " --limit -4", "--limit"),
    (EVAL + " --batch-size 0", "--batch-size"),
    (EVAL + " --max-new-tokens 0", "--max-new-tokens"),
    (EVAL + " --max-obs-tokens -1", "--max-obs-tokens"),
    (EVAL + " --timeout nan", "--timeout"),
    (EVAL + " --temperature=-1", "--temperature"),
    (EVAL + " --model smolm2", "did you mean 'smollm2'"),
    (EVAL + " --model tinny", "did you mean 'tiny'"),
    (EVAL + " --model ./no/such/folder", "model folder not found"),
    (EVAL + " --model {tmp}", "no config.json"),
    (EVAL + " --model {file}", "is a file"),
    (EVAL + " --model grepseek-test/no-such-model-xyz", "grepseek-test/no-such-model-xyz"),
    (EVAL + " --base-url http://localhost:1", "--backend openai"),
    ("eval --corpus {corpus} --out {out} --benchmarks ,", "--benchmarks is empty"),
    ("eval --corpus {corpus} --out {out} --benchmarks {tmp}/empty.jsonl", "holds no questions"),
    ("eval --corpus {corpus} --out {out} --benchmarks nope_bench", "nope_bench"),
    ("eval --corpus {corpus} --out {out} --benchmarks {fr}/nq/test.jsonl,{other}/nq/test.jsonl", "both be named"),
    (EVAL + " --corpus {tmp}/missing.jsonl", "no corpus"),
    ("ask  --corpus {corpus} --model smolm2 question", "did you mean"),
    ("ask --corpus {corpus} --max-obs-tokens 0 question", "--max-obs-tokens"),
    ("data build --out {file}", "is a file"),
    ("data build --out /proc/grepseek", "cannot write"),
    ("data build --out {out} --card /proc/grepseek/README.md", "--card"),
    ("data build --out {out} --raw {tmp}/no_raw", "no_raw"),
    ("data build --out {out} --corpus-from {tmp}/missing.jsonl", "--corpus-from"),
    ("data scale --corpus {corpus} --size-mb 0", "--size-mb"),
    ("data scale --corpus {corpus} --size-mb inf", "--size-mb"),
    ("data scale --corpus {corpus} --size-mb 1 --out /proc/grepseek.jsonl", "cannot write"),
    ("data scale --corpus {corpus} --size-mb 1 --out {tmp}", "is a folder"),
    ("data scale --corpus {tmp}/missing.jsonl --size-mb 1", "does not exist"),
    (SFT + " --config {tmp}/rate.yaml", "sft.learning_rate must be a number, got 'fast'"),
    (SFT + " --config {tmp}/sft5.yaml", "sft must be a mapping"),
    (SFT + " --config {tmp}/len0.yaml", "sft.max_length must be positive"),
    (SFT + " --config {tmp}/unknown.yaml", "no_such_thing"),
    (SFT + " --config {tmp}/vllm.yaml", "grpo.use_vllm"),
    (SFT + " --config {tmp}/broken.yaml", "cannot read config"),
    (SFT + " --config {tmp}/top.yaml", "epochs"),
    (SFT + " --config {tmp}/model.yaml", "model must be a non-empty string"),
    (SFT + " --config {tmp}/ratio.yaml", "sft.warmup_ratio"),
    (SFT + " --config {tmp}/missing.yaml", "--config"),
    (SFT + " --out /proc/grepseek", "cannot write"),
    (SFT + " --out {file}", "is a file"),
    (SFT + " --max-steps 0", "--max-steps"),
    (SFT + " --lr=-1", "--lr"),
    (SFT + " --model smolm2", "did you mean"),
    ("train sft --data {tmp}/missing.jsonl --out {out} --model tiny", "--data"),
    ("train grpo --model tiny --out {file}", "is a file"),
    ("train grpo --model tiny --out {out} --corpus {tmp}/missing.jsonl", "--corpus"),
    ("train grpo --model tiny --out {out} --corpus {corpus} --shards {tmp}/none", "--shards"),
    ("train grpo --model tiny --out {out} --num-generations 0", "--num-generations"),
    ("train grpo --model tiny --out {out} --probe-candidates=-1", "--probe-candidates"),
    ("train format-check --model tiny --limit 0", "--limit"),
    ("train format-check --model tiny --benchmarks ,", "--benchmarks"),
    ("train format-check --model tiny --max-obs-tokens 0", "--max-obs-tokens"),
    ("train format-check --model tiny --max-new-tokens=-1", "--max-new-tokens"),
    ("train format-check --model smolm2", "did you mean"),
    ("train format-check --model tiny --out /proc/grepseek", "cannot write"),
    ("coldstart --out /proc/grepseek", "cannot write"),
    ("coldstart --out {out} --limit 0", "--limit"),
    ("coldstart --out {out} --probe-rate 2", "--probe-rate"),
    ("coldstart --out {out} --dev-percent 101", "--dev-percent"),
    ("coldstart --out {out} --max-hops 0", "--max-hops"),
    ("coldstart --out {out} --tokenizer smolm2", "--tokenizer"),
    ("coldstart --out {out} --model teacher", "--teacher openai"),
    ("bench engine --corpus {corpus} --shards 2 --repeats 0", "--repeats"),
    ("bench engine --corpus {corpus} --shards 2 --out /proc/grepseek", "cannot write"),
    ("pipeline --out /proc/grepseek", "cannot write"),
]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """`grepseek ARGV` in this process: (exit code, stdout, stderr); argparse's own errors exit 2 too."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, err: str, words: str = "") -> str:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("grepseek: error: "), err
    assert "Traceback" not in err and words in lines[0]
    return lines[0]


@pytest.mark.parametrize(("line", "words"), CASES, ids=[c[0].split(" --")[0] + " | " + c[1] for c in CASES])
def test_bad_input_is_one_line(line, words, world, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a hub id then fails on the cache, whatever the network
    began = time.perf_counter()
    code, _, err = run([part.format(**world) for part in line.split()], capsys)
    assert_one_line_error(code, err, words)
    assert time.perf_counter() - began < 10  # refused before any model load or corpus pass
    assert not Path(world["out"]).exists()  # nothing half-made


def test_a_read_only_out_folder(world, capsys, tmp_path, monkeypatch):
    """As root a chmod-ed folder stays writable, so the folder's refusal is played by the probe file's creation."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if Path(dir) == locked:
            raise PermissionError(13, "Permission denied", str(locked))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    for argv in (["eval", "--corpus", world["corpus"], "--out", str(locked / "run")],
                 ["data", "build", "--out", str(locked)],
                 ["data", "scale", "--corpus", world["corpus"], "--size-mb", "1", "--out", str(locked / "x.jsonl")],
                 ["train", "grpo", "--model", "tiny", "--out", str(locked / "grpo")]):
        line = assert_one_line_error(*run(argv, capsys)[::2])
        assert f"cannot write in {locked} (Permission denied)" in line
    assert list(locked.iterdir()) == []


def test_the_installed_command_fails_fast_on_a_model_typo(world, tmp_path):
    """The real console script, without HF_HUB_OFFLINE: a typo never reaches the network (it used to take 49 s)."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    began = time.perf_counter()
    proc = subprocess.run([str(GREPSEEK), "eval", "--model", "smolm2", "--corpus", world["corpus"], "--out",
                           world["out"]], capture_output=True, text=True, env=env, timeout=60)
    assert time.perf_counter() - began < 10
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "grepseek: error: unknown --model 'smolm2': choose smollm2, tiny, a model folder or a Hugging Face id "
        "such as HuggingFaceTB/SmolLM2-135M-Instruct; did you mean 'smollm2'?"]
    assert not Path(world["out"]).exists()


def test_a_hub_id_without_network_or_cache_fails_in_seconds(world, capsys, monkeypatch):
    """Online mode: one quick hub query, not 50 s of retries; no DNS (this machine) and no such repo (a machine
    with network) both end in one line naming the model."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    began = time.perf_counter()
    code, _, err = run(["eval", "--model", "grepseek-test/no-such-model", "--corpus", world["corpus"],
                        "--out", world["out"]], capsys)
    assert_one_line_error(code, err, "grepseek-test/no-such-model")
    assert time.perf_counter() - began < 10


def test_a_refused_eval_leaves_out_usable(world, tiny, capsys, one_thread):
    """Refusals before and after a real run: the folder still resumes, and the records are untouched."""
    ok = ["eval", "--model", str(tiny), "--corpus", world["corpus"], "--out", world["out"], "--benchmarks",
          f"{world['fr']}/nq/test.jsonl", "--limit", "1", "--max-new-tokens", "8", "--max-tool-calls", "1"]
    assert_one_line_error(*run([*ok, "--limit", "0"], capsys)[::2])
    assert_one_line_error(*run([*ok, "--benchmarks", f"{world['tmp']}/empty.jsonl"], capsys)[::2])
    code, out, _ = run(ok, capsys)
    assert code == 0 and "| nq | 1 |" in out
    records = read_records(Path(world["out"]))
    line = assert_one_line_error(*run([*ok, "--max-new-tokens", "16"], capsys)[::2])
    assert "max_new_tokens 8 -> 16" in line and "new --out" in line
    other = Path(world["tmp"]) / "other.jsonl"
    other.write_text(corpus_line("9", "Rome", "Rome is the capital of Italy.") + "\n")
    assert "corpus_sha256" in assert_one_line_error(*run([*ok, "--corpus", str(other)], capsys)[::2])
    assert read_records(Path(world["out"])) == records
    code, out, _ = run(ok, capsys)  # the same settings resume: nothing left to ask
    assert code == 0 and read_records(Path(world["out"])) == records


class Reached(Exception):
    """Raised by the stubbed evaluation: every check passed."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(-3, 3), batch=st.integers(-2, 2), tokens=st.integers(-2, 2),
       timeout=st.floats(allow_nan=True, allow_infinity=True), temperature=st.floats(-2, 2))
def test_eval_numbers_are_checked_before_anything_runs(world, capsys, monkeypatch, limit, batch, tokens, timeout,
                                                       temperature):
    def stub(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(eval_cli, "evaluate", stub)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        argv = ["eval", "--corpus", world["corpus"], "--benchmarks", f"{world['fr']}/nq/test.jsonl", "--out",
                str(out), f"--limit={limit}", f"--batch-size={batch}", f"--max-new-tokens={tokens}",
                f"--timeout={timeout!r}", f"--temperature={temperature!r}"]
        valid = limit > 0 and batch > 0 and tokens > 0 and 0 < timeout < float("inf") and temperature >= 0
        if valid:
            with pytest.raises(Reached):
                main(argv)
            assert (out / "settings.json").is_file()
        else:
            assert_one_line_error(*run(argv, capsys)[::2])
            assert not out.exists()
