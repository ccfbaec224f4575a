"""The parameter sets `grepseek pipeline --profile` runs the notebook series with (smoke, default, full, gpu).

Apart from pipeline.py so the run recipes read as data on their own: pipeline.resolve_params adds the paths
and `--params` overrides, and a notebook's own defaults equal `PROFILES["default"]` (tested).
"""

from __future__ import annotations

from typing import Any

from grepseek_lib import config

#: Parameters shared by every profile (paths are filled in at run time).
_COMMON: dict[str, Any] = {
    "benchmarks": list(config.BENCHMARKS),
    "train_splits": list(config.TRAIN_SPLITS),
    "seed": 0,
    "bm25_k": 3,
    "teacher": "offline",
    "train_config": "cpu",
    #: The run's one observation cap (tokens): cold start, GRPO and eval cut tool outputs at it and their
    #: system prompts state it (the paper's 2,048 makes CPU rollouts several times longer).
    "max_obs_tokens": 256,
    #: auto: vLLM on a CUDA GPU with vllm installed, else the transformers backend (train/devices.py).
    "backend": "auto",
    "base_url": None,
    "lora": False,
    "teacher_base_url": None,
    "teacher_model": None,
    #: Share of offline cold-start hops whose first search is the question's own words before the name
    #: (coldstart.offline.PHRASE_FIRST_RATE, tested equal).
    "phrase_first_rate": 0.5,
    #: Share of cold-start trajectories with a refused repeat replayed as a no-loss turn
    #: (coldstart.export.REPEAT_RECOVERY_RATE, tested equal).
    "repeat_recovery_rate": 0.0,
    #: Subtracted from a GRPO rollout's reward when it sends a command twice, and added to a well-formed one's
    #: when its tool output printed a gold answer: the cpu config's (tested equal; gpu: the paper's 0 and 0).
    "grpo_repeat_penalty": 0.5,
    "grpo_evidence_bonus": 0.5,
    #: 00_data imports these instead of building the mini-wiki (set data_dir to another folder too).
    "import_corpus": None,
    "import_benchmarks": None,
}

#: `--profile`: smoke is what the test runs (tiny random model, a handful of questions, ~2 minutes);
#: default is SmolLM2-135M aimed at 45 minutes on an idle 2-core CPU with native bf16 (measured 59 min on
#: 2026-12-02; after eval batching, 53 min in float32 on an AVX2-only CPU and 40 min on an AVX512-BF16 one,
#: then 33 min there with GRPO at lr 1e-5, all on 2026-12-03; GRPO at lr 3e-5 with a repeat penalty and an
#: evidence bonus since 2026-12-07; stage times in docs/RESULTS.md): SFT on every
#: trajectory the cold start accepts from the first 60 training questions of each split, GRPO long enough for a reward trend on 16 rollouts a side (4 steps of 2 questions x 4, chosen by
#: probing up to 16), and
#: 10 questions per benchmark for every system. Raise them through --params for a longer run, or use `full`.
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {
        **_COMMON,
        "benchmarks": ["nq", "hotpotqa"],
        "model": "tiny",
        "n_shards": 2,
        "coldstart_limit": 6,
        "sft_epochs": 1,
        "sft_max_steps": 2,
        "sft_max_examples": 8,
        "sft_max_length": 4096,
        "grpo_steps": 1,
        "grpo_questions": 2,
        "grpo_generations": 2,
        "grpo_max_completion": 512,
        "grpo_probe_candidates": 2,
        "eval_limit": 1,
        "max_new_tokens": 32,
        "max_tool_calls": 1,
        "latency_commands": 10,
        "latency_repeats": 1,
    },
    "default": {
        **_COMMON,
        "model": "smollm2",
        "n_shards": 2,
        "coldstart_limit": 60,
        "sft_epochs": 1,
        "sft_max_steps": None,
        "sft_max_examples": None,
        "sft_max_length": 4096,
        "grpo_steps": 4,
        "grpo_questions": 2,
        "grpo_generations": 4,
        "grpo_pool": 2,
        "grpo_max_completion": 1536,
        #: probed 8 at a time until 2 split (train.grpo.PROBE_ROUND): on 2026-12-03 the first 8 all scored 0
        #: twice and GRPO trained on questions that could give no advantage (docs/RESULTS.md).
        "grpo_probe_candidates": 16,
        "eval_limit": 10,
        #: 70 questions in 3 lockstep batches of ~24 (32 first turns decoded 1.2-1.3x faster than in batches of
        #: 8: scripts/eval_batch_sizes.py).
        "batch_size": 24,
        #: tokens per turn: the longest cold-start turn is 193 (02_cold_start prints it and warns past the
        #: cap); at 128 every format failure of a held-out check was a turn cut mid-call (docs/RESULTS.md).
        "max_new_tokens": 224,
        "max_tool_calls": config.MAX_TOOL_CALLS,
        "latency_commands": 200,
        "latency_repeats": 3,
    },
    #: The README's best CPU figures from one command (a few hours on 2 cores; every stage is reused once done
    #: and eval resumes inside its folder, so an interrupted run continues): SFT on every cold-start
    #: trajectory, GRPO with the CPU config (2 probe-chosen questions x G=4 rollouts, 10 steps), and 30 held-out
    #: questions per benchmark for zero-shot, SFT, GRPO and BM25 alike, at the paper's 2,048-token cap.
    "full": {
        **_COMMON,
        "model": "smollm2",
        "n_shards": 2,
        "coldstart_limit": 200,
        "sft_epochs": 1,
        "sft_max_steps": None,
        "sft_max_examples": None,
        "sft_max_length": 6144,
        "grpo_steps": 10,
        "grpo_questions": 2,
        "grpo_generations": 4,
        "grpo_pool": 2,
        "grpo_max_completion": 3072,
        "grpo_probe_candidates": 16,
        "eval_limit": 30,
        "max_new_tokens": 256,
        "max_tool_calls": config.MAX_TOOL_CALLS,
        "max_obs_tokens": config.DEFAULT_MAX_OBS_TOKENS,
        "latency_commands": 200,
        "latency_repeats": 3,
    },
    #: One GPU (bf16; vLLM for eval and rollouts when installed): a Hugging Face id or a local folder, full
    #: fine-tuning up to ~4B (LoRA above: lora: true), on the mini-wiki unless --params imports real data: the
    #: paper's data and recipe is `--params configs/paper.yaml`; several GPUs: `accelerate launch` the train
    #: commands (README).
    "gpu": {
        **_COMMON,
        "model": "Qwen/Qwen3-4B",
        "train_config": "gpu",
        "grpo_repeat_penalty": 0.0,
        "grpo_evidence_bonus": 0.0,
        "n_shards": 16,
        "coldstart_limit": 1000,
        "sft_epochs": 1,
        "sft_max_steps": None,
        "sft_max_examples": None,
        "sft_max_length": 16384,
        "grpo_steps": 50,
        "grpo_questions": 32,
        "grpo_generations": 5,
        "grpo_pool": None,
        "grpo_max_completion": 8192,
        "grpo_probe_candidates": 0,
        "eval_limit": 500,
        "batch_size": 64,
        "max_new_tokens": 512,
        "max_tool_calls": config.MAX_TOOL_CALLS,
        "max_obs_tokens": config.DEFAULT_MAX_OBS_TOKENS,
        "latency_commands": 200,
        "latency_repeats": 3,
    },
}
