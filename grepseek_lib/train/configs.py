"""Training settings: a CPU config that runs in minutes and a GPU config that mirrors the paper.

`cpu`: SmolLM2-135M on the mini-wiki's training questions, full fine-tune: SFT one epoch over every
cold-start trajectory (batch 1, lr 1e-4 constant, max_length 6,144 keeps all of them; longer ones are dropped,
never cut); GRPO with G=4 rollouts of each of 2 probe-chosen questions a step, 10 steps, lr 3e-5, temperature
0.7, 3,072 completion tokens, one rollout a micro-batch, reward F1 x format less 0.5 for a repeated
command plus 0.5 when a tool output printed a gold answer. `gpu`: the paper's recipe (PAPER.md, stage 2) for a
Qwen3.5-9B-class model. Why each CPU number is what it is, with the measurements behind it:
docs/PERFORMANCE.md ("Why the CPU config is what it is").

A YAML (or JSON) file may override either: `base: cpu|gpu` plus `model:`, `sft: {...}`, `grpo: {...}`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.errors import UserError


@dataclass
class RunSettings:
    """What both stages share: checkpoints, logging, LoRA, seed."""

    save_steps: int = 1
    save_total_limit: int = 2
    logging_steps: int = 1
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    gradient_checkpointing: bool = False
    seed: int = 0
    #: Training arithmetic: "auto" = bfloat16 autocast (float32 master weights) where the device has fast
    #: bf16 (CUDA with bf16, or a CPU with AVX512-BF16 / AMX), else float32; "float32" / "bf16" force one.
    precision: str = "auto"


@dataclass
class SFTSettings(RunSettings):
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


@dataclass
class GRPOSettings(RunSettings):
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
    #: Subtracted from the reward of a rollout that sends a command it already sent (train/reward.py;
    #: 0: the paper's F1 x format reward).
    repeat_penalty: float = 0.0
    #: Added to the reward of a well-formed rollout whose tool output printed a gold answer (0: the paper's).
    evidence_bonus: float = 0.0
    #: Whole multi-turn completion (model tokens + tool observations) in tokens.
    max_completion_length: int = 8192
    #: One generated turn in tokens (the agent loop's default cap).
    max_turn_tokens: int = 512
    max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS
    tool_timeout_s: float = config.RL_TIMEOUT_S
    #: Rollouts scored per forward/backward micro-batch; questions_per_step * G must be a multiple of it.
    per_device_train_batch_size: int = 8
    max_questions: int | None = None
    #: Before training, sample `probe_samples` agent episodes of the starting policy on up to this many
    #: candidate questions (grpo.PROBE_ROUND at a time, until `max_questions` have differing rewards) and
    #: train on the `max_questions` whose rewards differ most (0: no probe, the first ones).
    #: A group whose rollouts all get the same reward has zero advantage and teaches nothing.
    probe_candidates: int = 0
    probe_samples: int = 2
    train_splits: tuple[str, ...] = config.TRAIN_SPLITS
    gradient_checkpointing: bool = True
    #: "auto": trl's vLLM generation only when CUDA and the vllm package are both present.
    use_vllm: str | bool = "auto"
    #: Rollout turns on the HF backend's lean loop with key/value reuse across turns, where that is exact
    #: (train/grpo_rollouts.py); False: trl's own `model.generate` for every turn.
    lean_rollouts: bool = True

    @property
    def rollouts_per_step(self) -> int:
        return self.questions_per_step * self.num_generations

    @property
    def gradient_accumulation_steps(self) -> int:
        return self.accumulation_for(1)

    def accumulation_for(self, world_size: int) -> int:
        """Micro-batches per rank and step, so that all `world_size` ranks together score one step's rollouts."""
        per_pass = self.per_device_train_batch_size * world_size
        if self.rollouts_per_step % per_pass:
            raise UserError(f"grpo.per_device_train_batch_size ({self.per_device_train_batch_size}) x {world_size} "
                            f"process(es) must divide questions_per_step x num_generations ({self.rollouts_per_step})")
        return self.rollouts_per_step // per_pass


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
                        per_device_train_batch_size=1, gradient_accumulation_steps=1, max_length=6144,
                        max_examples=None, save_steps=10),
        #: lr 3e-5 with a repeat penalty and an evidence bonus of 0.5: the recipe of #21's GRPO rounds, which
        #: raised held-out F1 without the repeat collapse lr 3e-5 alone caused (docs/RESULTS.md).
        grpo=GRPOSettings(num_generations=4, questions_per_step=2, max_steps=10, learning_rate=3e-5,
                          repeat_penalty=0.5, evidence_bonus=0.5,
                          max_completion_length=3072, max_turn_tokens=256, per_device_train_batch_size=1,
                          max_questions=2, probe_candidates=16, probe_samples=2, temperature=0.7,
                          gradient_checkpointing=False, use_vllm=False),
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


#: Settings that must be > 0, >= 0, or within [0, 1]; checked when a config file is loaded.
_POSITIVE = frozenset({
    "learning_rate", "num_train_epochs", "per_device_train_batch_size", "gradient_accumulation_steps", "max_length",
    "max_examples", "save_steps", "save_total_limit", "logging_steps", "lora_r", "lora_alpha", "num_generations",
    "questions_per_step", "max_steps", "temperature", "max_completion_length", "max_turn_tokens", "max_obs_tokens",
    "tool_timeout_s", "max_questions", "probe_samples"})
_NON_NEGATIVE = frozenset({"weight_decay", "beta", "epsilon", "max_tool_calls", "probe_candidates", "seed",
                           "repeat_penalty", "evidence_bonus"})
_FRACTION = frozenset({"warmup_ratio", "lora_dropout"})
#: Settings with a fixed set of values (trl rejects others, but only after the model loaded).
_CHOICES: dict[str, tuple[Any, ...]] = {
    "use_vllm": ("auto", True, False),
    "scale_rewards": ("group", "batch", "none"),
    "precision": ("auto", "float32", "bf16"),
}


def _type_name(hint: Any) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        return "a list of strings"
    if args:
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(hint, str(hint))


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _coerce(value: Any, hint: Any) -> Any:
    """`value` as type `hint` (an int is a fine float, a list a fine tuple); raises TypeError if it is not."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(value)
    elif args:  # a union such as `int | None`
        for option in args:
            if value is None and option is type(None):
                return None
            if option is not type(None):
                try:
                    return _coerce(value, option)
                except TypeError:
                    continue
    elif hint is bool and isinstance(value, bool):
        return value
    elif hint in (int, float) and isinstance(value, int | float) and not isinstance(value, bool):
        if hint is float or isinstance(value, int):
            return hint(value)
    elif hint is float and isinstance(value, str) and _is_number(value):  # PyYAML reads `1e-4` as a string
        return float(value)
    elif hint is str and isinstance(value, str):
        return value
    raise TypeError(hint)


def _check_value(where: str, key: str, value: Any) -> None:
    if key in _CHOICES and value not in _CHOICES[key]:
        raise UserError(f"{where}.{key} must be one of {list(_CHOICES[key])}, got {value!r}")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return
    if not math.isfinite(value):
        raise UserError(f"{where}.{key} must be a finite number, got {value!r}")
    if key in _POSITIVE and value <= 0:
        raise UserError(f"{where}.{key} must be positive, got {value!r}")
    if key in _NON_NEGATIVE and value < 0:
        raise UserError(f"{where}.{key} must be 0 or more, got {value!r}")
    if key in _FRACTION and not 0 <= value < 1:
        raise UserError(f"{where}.{key} must be in [0, 1), got {value!r}")


def _merge(settings: Any, overrides: Any, where: str) -> Any:
    """`settings` with a config file's overrides, each checked for name, type and range (naming the key)."""
    overrides = {} if overrides is None else overrides  # `sft:` with nothing under it
    if not isinstance(overrides, dict):
        raise UserError(f"{where} must be a mapping of settings (key: value), got {overrides!r}")
    hints = typing.get_type_hints(type(settings))
    known = {f.name for f in dataclasses.fields(settings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise UserError(f"{where} has unknown setting(s) {unknown}; known: {sorted(known)}")
    values = {}
    for key, value in overrides.items():
        try:
            values[key] = _coerce(value, hints[key])
        except TypeError:
            raise UserError(f"{where}.{key} must be {_type_name(hints[key])}, got {value!r}") from None
        _check_value(where, key, values[key])
    if "train_splits" in values and not values["train_splits"]:
        raise UserError(f"{where}.train_splits is empty; name at least one training split")
    return dataclasses.replace(settings, **values)


def _read_mapping(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # a user's file: one line naming it
        reason = " ".join(str(exc).split())
        raise UserError(f"cannot read config {path}: {reason}") from None
    if not isinstance(data, dict):
        raise UserError(f"config {path} must be a mapping with base / model / sft / grpo")
    return data


def load_config(spec: str | Path | None = "cpu") -> TrainConfig:
    """`cpu`, `gpu`, or a YAML/JSON file (`base:` one of those, then overrides), checked whole before use."""
    spec = "cpu" if spec in (None, "") else str(spec)
    if spec in CONFIGS:
        return CONFIGS[spec]()
    path = Path(spec)
    if not path.is_file():
        raise UserError(f"--config must be cpu, gpu or an existing YAML/JSON file, got {spec!r}")
    data = _read_mapping(path)
    base = data.pop("base", "cpu")
    if base not in CONFIGS:
        raise UserError(f"config {path}: base must be one of {sorted(CONFIGS)}, got {base!r}")
    cfg = CONFIGS[base]()
    unknown = sorted(set(data) - {"model", "name", "sft", "grpo"})
    if unknown:
        raise UserError(f"config {path}: unknown key(s) {unknown}; known: base, model, name, sft, grpo")
    for key in ("model", "name"):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            raise UserError(f"config {path}: {key} must be a non-empty string, got {data[key]!r}")
    cfg.name = data.get("name", path.stem)
    cfg.model = data.get("model", cfg.model)
    cfg.sft = _merge(cfg.sft, data.get("sft", {}), f"config {path}: sft")
    cfg.grpo = _merge(cfg.grpo, data.get("grpo", {}), f"config {path}: grpo")
    cfg.grpo.gradient_accumulation_steps  # noqa: B018 -- a batch that does not divide fails here, not in trl
    return cfg
