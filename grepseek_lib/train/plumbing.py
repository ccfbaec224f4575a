"""What SFT and GRPO share around their trl trainers: loading the trainable model with its precision flags,
the LoRA config, step-checkpoint arguments and resuming, the JSONL metrics log and the final model folder.

Kept apart from sft.py and grpo.py so each stage module holds only its own recipe, and both write the same
run-folder layout (file names below) that notebooks, scripts and the inspector read.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from grepseek_lib.agent.chat_template import install_chat_template
from grepseek_lib.agent.models import load_model_and_tokenizer
from grepseek_lib.agent.precision import resolve_precision
from grepseek_lib.errors import UserError
from grepseek_lib.train.configs import RunSettings
from grepseek_lib.train.distributed import full_state_dict

#: Run-folder names under a training OUT folder.
CHECKPOINTS = "checkpoints"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "train_summary.json"
#: What a run's checkpoints belong to (start_or_resume).
IDENTITY_FILE = "run_identity.json"


def precision_flags(precision: str = "auto") -> dict[str, bool]:
    """Trainer precision flags for a `precision` setting (auto / float32 / bf16).

    bf16 means autocast over float32 master weights on a CPU (the optimizer updates float32 weights, so
    small steps are not rounded away) and bf16 weights on CUDA, as before. "auto" picks bf16 only where it is
    native (agent/precision.py); trl's own default (bf16=True) would crawl on a CPU that emulates it.
    """
    import torch

    use_cpu = not torch.cuda.is_available()
    try:
        chosen = resolve_precision(precision, "cpu" if use_cpu else "cuda")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if chosen == "bf16" and not use_cpu and not torch.cuda.is_bf16_supported():
        raise UserError("precision bf16 was asked for but this GPU has no bf16; use precision: float32 or auto")
    return {"bf16": chosen == "bf16", "fp16": False, "use_cpu": use_cpu}


def load_trainable(model_name: str, precision: str = "auto") -> tuple[Any, Any, dict[str, bool]]:
    """Model and tokenizer in training mode plus the trainer's precision flags. Weights are float32 on a CPU
    (the master copy autocast reads) and bf16 only on a CUDA device running bf16."""
    flags = precision_flags(precision)
    bf16_weights = flags["bf16"] and not flags["use_cpu"]
    model, tokenizer = load_model_and_tokenizer(model_name, device="cpu" if flags["use_cpu"] else None,
                                                dtype="bfloat16" if bf16_weights else "float32")
    model.train()
    return model, tokenizer, flags


def sampling_copy(model: Any, bf16: bool, into: Any = None) -> Any:
    """The model to sample episodes from while `model` trains: with `bf16` over float32 weights (CPU autocast)
    a bf16 copy, since autocast would cast every weight again at each decode step, twice the bytes read for
    the same bf16 arithmetic; `into` (an earlier copy) is refreshed in place. Otherwise `model` itself (bf16
    weights already, float32 training, or PEFT, whose adapters a plain copy would not carry)."""
    import torch
    from transformers import PreTrainedModel

    if not bf16 or model.dtype != torch.float32 or not isinstance(model, PreTrainedModel) \
            or getattr(model, "peft_config", None):
        return model
    if into is None:
        into = type(model)._from_config(model.config, dtype=torch.bfloat16,
                                        attn_implementation=model.config._attn_implementation)
        into.to(model.device).eval().requires_grad_(False)
    with torch.no_grad():
        into.load_state_dict(model.state_dict())
    return into


def checkpoint_args(settings: RunSettings, flags: dict[str, bool]) -> dict[str, Any]:
    """Trainer arguments SFT and GRPO share: precision, logging, step checkpoints, seed, no trackers."""
    return dict(activation_checkpointing=settings.gradient_checkpointing, logging_steps=settings.logging_steps,
                save_strategy="steps", save_steps=settings.save_steps, save_total_limit=settings.save_total_limit,
                seed=settings.seed, report_to="none", **flags)


def lora_config(settings: RunSettings) -> Any:
    """LoRA on every linear layer (`--lora`); peft is imported only when a run asks for it."""
    from peft import LoraConfig

    return LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, lora_dropout=settings.lora_dropout,
                      target_modules="all-linear", task_type="CAUSAL_LM")


def last_checkpoint(checkpoints: Path) -> str | None:
    """The newest step checkpoint for `--resume`, or None when the folder holds none yet."""
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(checkpoints)) if Path(checkpoints).is_dir() else None


def file_stamp(path: Path) -> dict[str, Any]:
    """A file's path, size and modification time: enough to tell that a run's input was rewritten."""
    stat = Path(path).stat()
    return {"path": str(Path(path).resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def start_or_resume(out: Path, identity: dict[str, Any], resume: bool, metrics: Path) -> str | None:
    """The checkpoint to resume from, or None to start afresh.

    A checkpoint is resumed only when OUT's recorded identity (stage, model, data, settings) equals this run's:
    a run with other settings would silently continue the wrong one. A fresh start clears OUT's old
    checkpoints and metrics (the trainer's rotation would otherwise mix old and new steps and a later resume
    pick an old one) and records the identity.
    """
    from grepseek_lib.train.distributed import rank

    checkpoints = Path(out) / CHECKPOINTS
    identity = json.loads(json.dumps(identity, default=str))  # tuples, paths: as the file will hold them
    recorded_file = Path(out) / IDENTITY_FILE
    recorded = json.loads(recorded_file.read_text()) if recorded_file.is_file() else None
    checkpoint = last_checkpoint(checkpoints) if resume else None
    if checkpoint is not None and recorded != identity:
        print(f"grepseek: {checkpoints} holds another run's steps (model, data or settings differ); "
              "starting from scratch")
        checkpoint = None
    elif resume and checkpoint is None:
        print(f"grepseek: no checkpoint under {checkpoints}; starting from scratch")
    if checkpoint is None and rank() == 0:
        shutil.rmtree(checkpoints, ignore_errors=True)
        metrics.unlink(missing_ok=True)
        Path(out).mkdir(parents=True, exist_ok=True)
        recorded_file.write_text(json.dumps(identity, indent=1) + "\n")
    return checkpoint


def metrics_logger(path: Path) -> Any:
    """A trainer callback appending every log record (loss, lr, reward, ...) as a JSON line, for plots."""
    from transformers import TrainerCallback

    class JsonlMetrics(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
                   **kwargs: Any) -> None:
            if not logs or not state.is_world_process_zero:
                return
            record = {"step": state.global_step, "epoch": state.epoch, "time": time.time(),
                      **{k: v for k, v in logs.items() if isinstance(v, (int, float, str))}}
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")

    return JsonlMetrics()


def save_final_model(trainer: Any, tokenizer: Any, out: Path) -> None:
    """A plain HF folder with our chat template: merged LoRA, float weights, tokenizer, generation config.
    Under a launcher every rank joins the gather of sharded weights, rank 0 alone writes, all wait for it."""
    state_dict = full_state_dict(trainer)
    if trainer.is_world_process_zero():
        model = trainer.model
        if hasattr(model, "merge_and_unload"):  # a peft model
            model, state_dict = model.merge_and_unload(), None
        model.config.use_cache = True
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(out, state_dict=state_dict)
        install_chat_template(tokenizer).save_pretrained(out)
    trainer.accelerator.wait_for_everyone()
