"""Training settings: a CPU config that runs in minutes and a GPU config that mirrors the paper.

`cpu`: SmolLM2-135M on mini-wiki training questions. Batch 1, trajectories up to 1,536 tokens (longer ones
are dropped, never cut), a higher learning rate than the paper's (a 135M model moves too little at 5e-6 in a
few dozen steps), one question x 5 rollouts a GRPO step with a 192-token turn cap. Observations keep the
protocol's 2,048-token cap so the prompt is the one evaluation uses. Measured on 2 shared cores: ~25-30 s per
SFT step at ~1.1k tokens (full fine-tune, float32, OMP_NUM_THREADS=1, which beats 2 threads several-fold
when the cores are contended); GRPO steps take minutes, dominated by generation.

`gpu`: the paper's recipe (PAPER.md, stage 2) for a Qwen3.5-9B-class model: SFT 1 epoch at lr 5e-6,
full fine-tune; GRPO with 5 rollouts x 256 questions a step, 200 steps, lr 5e-6, no KL (beta 0), clip 0.2,
temperature 1.0, 180 s tool timeout, vLLM generation when a GPU and vllm are present. Documented here and
never run in tests.

A YAML (or JSON) file may override either: `base: cpu|gpu` plus `model:`, `sft: {...}`, `grpo: {...}`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.errors import UserError


@dataclass
class SFTSettings:
    learning_rate: float = 5e-6
    num_train_epochs: float = 1.0
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 8
    #: Longest training sequence in tokens; longer trajectories are DROPPED (not cut), so every kept example
    #: still ends with its answer turn.
    max_length: int = 8192
    max_examples: int | None = None
    warmup_ratio: float = 0.03
    lr_scheduler_type: str = "cosine"
    weight_decay: float = 0.0
    save_steps: int = 50
    save_total_limit: int = 2
    logging_steps: int = 1
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    gradient_checkpointing: bool = False
    seed: int = 0


@dataclass
class GRPOSettings:
    num_generations: int = 5  # G, rollouts per question
    questions_per_step: int = 256
    max_steps: int = 200
    learning_rate: float = 5e-6
    beta: float = 0.0  # no KL
    epsilon: float = 0.2  # clip
    temperature: float = 1.0
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    max_tool_calls: int = config.MAX_TOOL_CALLS
    #: Whole multi-turn completion (model tokens + tool observations) in tokens.
    max_completion_length: int = 8192
    #: One generated turn in tokens (the agent loop's default cap).
    max_turn_tokens: int = 512
    max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS
    tool_timeout_s: float = config.RL_TIMEOUT_S
    #: Rollouts scored per forward/backward micro-batch; questions_per_step * G must be a multiple of it.
    per_device_train_batch_size: int = 8
    max_questions: int | None = None
    train_splits: tuple[str, ...] = config.TRAIN_SPLITS
    save_steps: int = 1
    save_total_limit: int = 2
    logging_steps: int = 1
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    gradient_checkpointing: bool = True
    #: "auto": trl's vLLM generation only when CUDA and the vllm package are both present.
    use_vllm: str | bool = "auto"
    seed: int = 0

    @property
    def rollouts_per_step(self) -> int:
        return self.questions_per_step * self.num_generations

    @property
    def gradient_accumulation_steps(self) -> int:
        if self.rollouts_per_step % self.per_device_train_batch_size:
            raise UserError(f"grpo.per_device_train_batch_size ({self.per_device_train_batch_size}) must divide "
                            f"questions_per_step x num_generations ({self.rollouts_per_step})")
        return self.rollouts_per_step // self.per_device_train_batch_size


@dataclass
class TrainConfig:
    name: str
    model: str
    sft: SFTSettings = field(default_factory=SFTSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def cpu_config() -> TrainConfig:
    return TrainConfig(
        name="cpu", model="smollm2",
        sft=SFTSettings(learning_rate=1e-4, lr_scheduler_type="constant", warmup_ratio=0.0,
                        per_device_train_batch_size=1, gradient_accumulation_steps=1, max_length=1536,
                        max_examples=300, save_steps=10),
        grpo=GRPOSettings(num_generations=5, questions_per_step=1, max_steps=12, learning_rate=2e-5,
                          max_completion_length=1024, max_turn_tokens=192, per_device_train_batch_size=5,
                          max_questions=200, gradient_checkpointing=False, use_vllm=False),
    )


def gpu_config() -> TrainConfig:
    return TrainConfig(
        name="gpu", model="Qwen/Qwen3.5-9B",
        sft=SFTSettings(learning_rate=5e-6, num_train_epochs=1.0, per_device_train_batch_size=4,
                        gradient_accumulation_steps=16, max_length=16384, gradient_checkpointing=True),
        grpo=GRPOSettings(num_generations=5, questions_per_step=256, max_steps=200, learning_rate=5e-6,
                          beta=0.0, epsilon=0.2, temperature=1.0, max_completion_length=16384,
                          per_device_train_batch_size=8, gradient_checkpointing=True, use_vllm="auto"),
    )


CONFIGS = {"cpu": cpu_config, "gpu": gpu_config}


def _merge(settings: Any, overrides: dict[str, Any], where: str) -> Any:
    known = {f.name for f in dataclasses.fields(settings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise UserError(f"unknown {where} setting(s) {unknown}; known: {sorted(known)}")
    if "train_splits" in overrides:
        overrides = {**overrides, "train_splits": tuple(overrides["train_splits"])}
    return dataclasses.replace(settings, **overrides)


def load_config(spec: str | Path | None = "cpu") -> TrainConfig:
    """`cpu`, `gpu`, or a YAML/JSON file (`base:` one of those, then overrides)."""
    spec = "cpu" if spec in (None, "") else str(spec)
    if spec in CONFIGS:
        return CONFIGS[spec]()
    path = Path(spec)
    if not path.is_file():
        raise UserError(f"--config must be cpu, gpu or an existing YAML/JSON file, got {spec!r}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # a user's file: one line naming it
        raise UserError(f"cannot read config {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"config {path} must be a mapping with base / model / sft / grpo")
    base = data.pop("base", "cpu")
    if base not in CONFIGS:
        raise UserError(f"config {path}: base must be one of {sorted(CONFIGS)}, got {base!r}")
    cfg = CONFIGS[base]()
    unknown = sorted(set(data) - {"model", "name", "sft", "grpo"})
    if unknown:
        raise UserError(f"config {path}: unknown key(s) {unknown}")
    cfg.name = str(data.get("name", path.stem))
    cfg.model = str(data.get("model", cfg.model))
    cfg.sft = _merge(cfg.sft, data.get("sft") or {}, "sft")
    cfg.grpo = _merge(cfg.grpo, data.get("grpo") or {}, "grpo")
    return cfg
