"""scripts/gpu_check.py (the GPU check, `make gpu-check`): its CPU dry path, the tiny model through cold start,
SFT, GRPO and a 2-question eval, end to end. The CUDA run itself needs a GPU (none is lent to the tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grepseek_lib import config

SCRIPT = config.REPO_ROOT / "scripts" / "gpu_check.py"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dry_path_on_cpu_reports_every_figure_beside_the_cpu_ones(miniwiki, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GREPSEEK_DATA": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--data", str(miniwiki),
                           "--out", str(tmp_path / "out"), "--site", str(tmp_path / "no-site")],
                          env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    figures = result["figures"]
    assert figures["sft_steps"] == 2 and figures["grpo_steps"] == 1 and figures["eval_questions"] == 2
    for key in ("sft_s_per_step", "sft_tokens_per_s", "grpo_s_per_step", "eval_s_per_question"):
        assert figures[key] > 0, key
    lines = done.stdout.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("gpu_check on cpu (tiny)")):]
    assert any(line.split()[:1] == ["grpo_s_per_step"] and line.split()[-1] == "292.0" for line in table)


def test_asking_for_cuda_without_a_gpu_is_one_clear_line(miniwiki, tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(SCRIPT), "--data", str(miniwiki), "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        "gpu_check: no CUDA device visible (use --device cpu for the dry path)"]
