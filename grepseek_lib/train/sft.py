"""Stage-2a: supervised fine-tuning on cold-start trajectories with trl's SFTTrainer.

How trl 1.16 is used (read from its source):
- A dataset with a `messages` column is "conversational"; `SFTConfig(assistant_only_loss=True)` renders it
  with `apply_chat_template(..., return_assistant_tokens_mask=True)` and sets labels to -100 outside the
  `{% generation %}...{% endgeneration %}` spans. Our template (agent/chat_template.py) wraps each assistant
  turn's text and its `<|im_end|>` in those markers, so system, user and tool tokens (tool results render as
  a user turn of `<tool_response>` blocks) carry no loss. `trainer.train_dataset[i]["labels"]` shows it.
- `max_length` would CUT long sequences (`truncation_mode`), losing the answer turn; we drop such
  trajectories instead, before the trainer sees them.
- trl configs default `bf16=True`; we set it from `settings.precision` (`plumbing.precision_flags`):
  "auto" is bf16 on CUDA with bf16 and on a CPU with native bf16 (autocast, float32 master weights),
  float32 elsewhere.
- LoRA: `peft_config=LoraConfig(...)` (`plumbing.lora_config`); the final folder is merged
  (`merge_and_unload`) so every backend loads it as a plain model. Checkpoints every `save_steps` under
  OUT/checkpoints; `resume` continues from the last.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grepseek_lib.errors import UserError
from grepseek_lib.train.configs import SFTSettings
from grepseek_lib.train.plumbing import (
    CHECKPOINTS,
    METRICS_FILE,
    SUMMARY_FILE,
    checkpoint_args,
    file_stamp,
    load_trainable,
    lora_config,
    metrics_logger,
    save_final_model,
    start_or_resume,
)


def _clean_message(message: Any, where: str) -> dict[str, Any]:
    """One chat message as {role, content, no_loss} (tool payloads may arrive as objects). Every message
    carries `no_loss` so the dataset has one schema; the template trains no turn that sets it."""
    if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "tool"):
        raise UserError(f"{where}: every message needs a role of system/user/assistant/tool")
    content = message.get("content")
    if isinstance(content, (dict, list)):
        content = json.dumps(content, ensure_ascii=False)
    if not isinstance(content, str):
        raise UserError(f"{where}: message content must be text")
    no_loss = message.get("no_loss", False)
    if not isinstance(no_loss, bool) or (no_loss and message["role"] != "assistant"):
        raise UserError(f"{where}: `no_loss` must be true or false, and true only on an assistant turn")
    return {"role": message["role"], "content": content, "no_loss": no_loss}


def load_chat_rows(path: Path, max_examples: int | None = None) -> list[dict]:
    """Cold-start chat JSONL -> [{id, messages}] with at least one assistant turn; bad lines are errors."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"SFT data not found: {path} (run `grepseek coldstart` or pass --data FILE)")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise UserError(f"{where}: not a JSON line") from None
            messages = record.get("messages") if isinstance(record, dict) else None
            if not isinstance(messages, list) or not messages:
                raise UserError(f"{where}: a row needs a non-empty `messages` list")
            clean = [_clean_message(m, where) for m in messages]
            if clean[-1]["role"] != "assistant":
                raise UserError(f"{where}: a trajectory must end with the assistant's answer turn")
            rows.append({"id": str(record.get("id", number)), "messages": clean})
            if max_examples is not None and len(rows) >= max_examples:
                break
    if not rows:
        raise UserError(f"SFT data {path} holds no trajectories")
    return rows


def drop_overlong(rows: list[dict], tokenizer: Any, max_length: int | None) -> tuple[list[dict], int]:
    """Keep the trajectories whose full rendering fits `max_length` tokens; returns (kept, dropped)."""
    if not max_length:
        return rows, 0
    kept = [r for r in rows
            if len(tokenizer.apply_chat_template(r["messages"], tokenize=True, return_dict=False)) <= max_length]
    return kept, len(rows) - len(kept)


def build_trainer(rows: Iterable[dict], model_name: str, out: Path, settings: SFTSettings, *,
                  lora: bool = False, max_steps: int | None = None, compact_head: bool = True) -> tuple[Any, Any]:
    """The SFTTrainer (and tokenizer) for `rows`; split out of `run_sft` so tests can inspect its dataset.
    `compact_head=False` keeps trl's own LM head (train/lm_head.py), for benchmarks of the old path."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from grepseek_lib.train.lm_head import compact_lm_head  # defers torch and trl, as above

    model, tokenizer, flags = load_trainable(model_name, settings.precision)
    rows = [{"messages": r["messages"]} for r in rows]
    rows, _ = drop_overlong(rows, tokenizer, settings.max_length)
    if not rows:
        raise UserError(f"every trajectory is longer than sft.max_length={settings.max_length} tokens")
    args = SFTConfig(
        output_dir=str(Path(out) / CHECKPOINTS),
        assistant_only_loss=True,
        packing=False,
        max_length=settings.max_length,
        num_train_epochs=settings.num_train_epochs,
        max_steps=max_steps if max_steps is not None else -1,
        learning_rate=settings.learning_rate,
        lr_scheduler_type=settings.lr_scheduler_type,
        warmup_steps=settings.warmup_ratio,  # a float below 1 is a fraction of the steps
        weight_decay=settings.weight_decay,
        per_device_train_batch_size=settings.per_device_train_batch_size,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        disable_tqdm=False,
        dataloader_num_workers=0,
        **checkpoint_args(settings, flags),
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(settings) if lora else None,
        callbacks=[metrics_logger(Path(out) / METRICS_FILE)],
    )
    if compact_head:
        compact_lm_head(trainer.model)
    return trainer, tokenizer


def run_sft(data: Path, model_name: str, out: Path, settings: SFTSettings, *, lora: bool = False,
            resume: bool = False, max_steps: int | None = None) -> dict[str, Any]:
    """Fine-tune `model_name` on the chat JSONL `data`; OUT becomes a plain HF model folder. Returns a summary."""
    out = Path(out)
    identity = {"stage": "sft", "model": str(model_name), "data": file_stamp(Path(data)), "lora": lora,
                "settings": vars(settings)}
    checkpoint = start_or_resume(out, identity, resume, out / METRICS_FILE)
    rows = load_chat_rows(data, settings.max_examples)
    start = time.time()
    trainer, tokenizer = build_trainer(rows, model_name, out, settings, lora=lora, max_steps=max_steps)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    save_final_model(trainer, tokenizer, out)
    summary = {"stage": "sft", "model": model_name, "data": str(data), "out": str(out),
               "examples": len(trainer.train_dataset), "examples_in_file": len(rows),
               "steps": trainer.state.global_step, "train_loss": result.training_loss,
               "wall_s": round(time.time() - start, 1), "lora": lora, "resumed_from": checkpoint,
               "processes": trainer.accelerator.num_processes, "settings": vars(settings)}
    if trainer.is_world_process_zero():
        (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=str))
    return summary
