"""`grepseek train sft|grpo` under a real `accelerate launch` of 2 processes on this CPU (gloo): SFT for 2 steps,
SFT resumed to step 3, one GRPO step. The ranks get different data, losses are finite, checkpoints resume,
and the final folders are written once, by rank 0.

accelerate's `--cpu` flag starts ONE process unless an mpirun hostfile is given; `--multi_gpu` on a machine
without GPUs starts N processes through torchrun and accelerate picks the CPU backend (MULTI_CPU). The three
commands run in one launched process group (tests/launched_commands.py) so the processes start once.
deepspeed is not installed: configs/accelerate/deepspeed_zero3.yaml is documented, not tested."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grepseek_lib import config
from grepseek_lib.data.formats import corpus_line

ACCELERATE = Path(sys.executable).with_name("accelerate")
FACTS = [("Aaron", "Aaron is the brother of Moses and a high priest.", "Who is the brother of Moses?"),
         ("Paris", "Paris is the capital of France, on the Seine.", "What is the capital of France?"),
         ("Beatles", "The Beatles were formed in Liverpool in 1960.", "Where were the Beatles formed?"),
         ("Everest", "Mount Everest is the highest mountain.", "What is the highest mountain?")]
#: Files of a final model folder written from Python (the weights and tokenizer.json are written by Rust code).
FINAL_FILES = {"config.json", "generation_config.json", "chat_template.jinja", "train_summary.json"}


def free_port() -> int:
    """Other test runs on this machine may hold accelerate's default port 29500."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def lay_out(root: Path) -> None:
    rows = [{"id": f"q{k}", "messages": [
        {"role": "system", "content": "You answer questions."},
        {"role": "user", "content": f"Question {k}: what is item {k}?"},
        {"role": "assistant", "content": f"<think>Item {k}.</think>\n<answer>item {k}</answer>"}]} for k in range(8)]
    (root / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "corpus.jsonl").write_text("".join(corpus_line(k + 1, t, x) + "\n" for k, (t, x, _) in enumerate(FACTS)))
    (root / "bench").mkdir()
    (root / "bench" / "toy_train.jsonl").write_text("".join(
        json.dumps({"id": f"t{k}", "question": q, "golden_answers": [t]}) + "\n" for k, (t, _, q) in enumerate(FACTS)))
    train = {"base": "cpu", "sft": {"max_length": 1024, "save_steps": 1},
             "grpo": {"questions_per_step": 2, "num_generations": 2, "per_device_train_batch_size": 1,
                      "max_questions": 2, "probe_candidates": 0, "max_completion_length": 192,
                      "max_turn_tokens": 24, "max_obs_tokens": 64, "save_steps": 1}}
    (root / "train.yaml").write_text(yaml.safe_dump(train))


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_sft_resume_and_grpo_under_accelerate_launch_with_two_processes(tiny, tmp_path):
    lay_out(tmp_path)
    common = f"--config {tmp_path / 'train.yaml'}"
    sft = f"train sft --data {tmp_path / 'sft.jsonl'} --model {tiny} --out {tmp_path / 'sft'} {common}"
    grpo = (f"train grpo --model {tmp_path / 'sft'} --out {tmp_path / 'grpo'} {common} --corpus "
            f"{tmp_path / 'corpus.jsonl'} --benchmarks-dir {tmp_path / 'bench'} --train-splits toy_train --max-steps 1")
    cmd = [str(ACCELERATE), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
           str(config.REPO_ROOT / "tests" / "launched_commands.py"),
           f"{sft} --max-steps 2", f"{sft} --max-steps 3 --resume", grpo]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GREPSEEK_DATA": str(tmp_path / "data"),
           "WRITE_LOG": str(tmp_path / "writes")}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    # both ranks ran each command; the final folders were written by rank 0 alone, every time
    assert done.stdout.count('"processes": 2') == 6
    sft_out, grpo_out = tmp_path / "sft", tmp_path / "grpo"
    writes = {r: (tmp_path / f"writes-rank{r}.txt").read_text().splitlines() for r in (0, 1)}
    finals = {r: [Path(p) for p in w if Path(p).parent in (sft_out, grpo_out)
                  and not Path(p).name.startswith(".grepseek-probe")] for r, w in writes.items()}
    # each rank logs its own rollouts: their rewards, and each one decoded turn by turn (the rank in its meta)
    assert [p.name for p in finals[1]] == ["reward_parts.jsonl", "rollouts.jsonl"]
    rollouts = [json.loads(line) for line in (grpo_out / "rollouts.jsonl").read_text().splitlines()]
    assert {r["meta"]["rank"] for r in rollouts} == {0, 1} and all(r["turns"] for r in rollouts)
    assert sorted(p.name for p in finals[0] if p.parent == sft_out and p.name in FINAL_FILES) == \
        sorted([*FINAL_FILES] * 2)  # the run and its resumed run
    assert {p.name for p in finals[0] if p.parent == grpo_out} >= FINAL_FILES | {"questions.json"}
    summary = json.loads((sft_out / "train_summary.json").read_text())
    assert summary["steps"] == 3 and summary["resumed_from"].endswith("checkpoint-2")
    assert {p.name for p in (sft_out / "checkpoints").glob("checkpoint-*")} == {"checkpoint-2", "checkpoint-3"}
    assert (sft_out / "model.safetensors").is_file() and (grpo_out / "model.safetensors").is_file()
    # the sampler split the 8 examples over the ranks: 4 steps an epoch, each of 2 different examples
    logged = {r["step"]: r for r in jsonl(sft_out / "metrics.jsonl") if "loss" in r}
    assert sorted(logged) == [1, 2, 3] and logged[2]["epoch"] == pytest.approx(0.5)
    assert all(math.isfinite(r["loss"]) for r in logged.values())
    # GRPO: each rank rolled out its own question (a group of G=2), and the step's loss is finite
    parts = jsonl(grpo_out / "reward_parts.jsonl")
    assert sorted(p["rank"] for p in parts) == [0, 1] and all(p["step"] == 1 for p in parts)
    assert not set(parts[0]["rewards"]) & set(parts[1]["rewards"])
    assert all(math.isfinite(r["loss"]) for r in jsonl(grpo_out / "metrics.jsonl") if "loss" in r)
    questions = json.loads((grpo_out / "questions.json").read_text())
    assert {f"toy_train:{q}" for q in ("t0", "t1", "t2", "t3")} >= {q["id"] for q in questions}
