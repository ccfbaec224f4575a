"""Stage-2b: GRPO with multi-turn shell rollouts, using trl's own tool loop.

How trl 1.16's GRPOTrainer runs tools (read from its source) and how we wire it:
- the `shell` tool is a method of a `ShellEnvironment`, one per rollout (`environment_factory`), so the 5th
  observation carries the same budget note as in the agent loop and the cold-start data. After each
  generated turn trl parses the text with `tokenizer.parse_response` (our chat template module installs a
  `response_template` that reads `<tool_call>{json}</tool_call>`), calls `shell(**arguments)`, renders the
  result as a tool message through the chat template (our template: a user turn of `<tool_response>` blocks)
  and generates again, up to `max_tool_calling_iterations` (= our budget of 5 tool calls). A turn with no
  parsable tool call ends the rollout. Token ids are concatenated, never re-rendered, so the policy is
  trained on exactly the tokens it produced.
- Tool-result tokens get `tool_mask = 0` and are left out of the loss; only generated tokens are trained.
- Requirements it checks: the template renders structured `tool_calls` and tool messages
  (`supports_tool_calling`) and is prefix-preserving; `<|im_end|>` is the eos (prefix cut point).
- `reward_funcs` get `prompts, completions, completion_ids` plus dataset columns (`golds`) and `log_metric`;
  completions are parsed message dicts, so `reward.TrlShellReward` re-derives the raw turns from the ids.
- `beta=0.0` loads no reference model (no KL); `epsilon=0.2` is the clip; `num_generations` is G;
  `generation_kwargs={"max_new_tokens": ...}` caps ONE turn while `max_completion_length` caps the episode.
  `use_vllm` only with CUDA + vllm installed; otherwise `model.generate`.
- Checkpoints: `save_steps=1` (an interrupted run loses at most one step); `--resume` picks the last one.

Protocol difference from agent/loop.py, reward-neutral: a malformed action ends the rollout at once (the
loop grants one format-error retry, but the gate pays 0 for any invalid call anyway); a 6th call after the
budget note ends the rollout unanswered (reward 0), as the loop would.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.backends import HFBackend
from grepseek_lib.agent.evidence import ran_calls
from grepseek_lib.agent.loop import corpus_lines, episode_progress, run_batch
from grepseek_lib.agent.prompt import ToolBudget, initial_messages
from grepseek_lib.data.formats import load_benchmark
from grepseek_lib.errors import UserError
from grepseek_lib.shell.open import open_tool, resolve_corpus
from grepseek_lib.train.configs import GRPOSettings
from grepseek_lib.train.devices import vllm_available
from grepseek_lib.train.distributed import rank, shared_state, world_size
from grepseek_lib.train.grpo_rollouts import LeanRollouts
from grepseek_lib.train.plumbing import (
    CHECKPOINTS,
    METRICS_FILE,
    SUMMARY_FILE,
    checkpoint_args,
    file_stamp,
    load_trainable,
    lora_config,
    metrics_logger,
    precision_flags,
    sampling_copy,
    save_final_model,
    start_or_resume,
)
from grepseek_lib.train.reward import TrlShellReward, reward

REWARD_PARTS_FILE = "reward_parts.jsonl"


def load_questions(splits: Sequence[str], benchmarks_dir: Path, *, limit: int | None = None,
                   seed: int = 0) -> list[dict]:
    """Training questions {id, question, golds} from `benchmarks_dir/<split>.jsonl`, shuffled, at most `limit`."""
    items = [{"id": f"{split}:{record['id']}", "question": record["question"], "golds": record["golden_answers"]}
             for split in splits for record in load_benchmark(Path(benchmarks_dir) / f"{split}.jsonl")
             if record["golden_answers"]]
    random.Random(seed).shuffle(items)
    return items[:limit] if limit else items


QUESTIONS_FILE = "questions.json"
#: Candidates are probed this many at a time (one lockstep batch of PROBE_ROUND x probe_samples episodes);
#: probing stops after the round that brings `max_questions` with differing rewards, so a policy that some
#: questions already split costs one round, and one that none split yet gets more candidates.
PROBE_ROUND = 8


def probe_questions(policy: str | tuple[Any, Any], questions: Sequence[dict], settings: GRPOSettings, *,
                    corpus: Path, shards: Path | None = None) -> list[dict]:
    """Each question with the rewards of `settings.probe_samples` sampled agent episodes of the policy (a model
    name, or the `(model, tokenizer)` the trainer will train, so it is loaded once).

    The real agent loop and tool, the GRPO temperature and turn cap, and the reward the trainer uses.
    """
    model, tokenizer = policy if isinstance(policy, tuple) else (policy, None)
    if not isinstance(model, str):  # the trainer's model: sampled as its rollouts will be
        model = sampling_copy(model, precision_flags(settings.precision)["bf16"])
    training = bool(getattr(model, "training", False))
    if training:
        model.eval()
    try:
        backend = HFBackend(model, tokenizer=tokenizer)
        tool = open_tool(corpus, shards, timeout=settings.tool_timeout_s,
                         max_obs_tokens=settings.max_obs_tokens, tokenizer=backend.tokenizer)
        items = [q for q in questions for _ in range(settings.probe_samples)]
        with episode_progress(len(items), "probe") as on_turn:
            episodes = run_batch(items, backend, tool, max_tool_calls=settings.max_tool_calls,
                                 max_new_tokens=settings.max_turn_tokens, temperature=settings.temperature,
                                 on_turn=on_turn)
    finally:
        if training:
            model.train()
    probed = []
    for k, q in enumerate(questions):
        mine = episodes[k * settings.probe_samples:(k + 1) * settings.probe_samples]
        probed.append({**q, "probe_rewards": [reward(e.assistant_texts(), q["golds"], max_tool_calls=settings.max_tool_calls,
                                                     stdouts=[out for _, out in ran_calls(e)], repeat_penalty=settings.repeat_penalty,
                                                     evidence_bonus=settings.evidence_bonus) for e in mine]})
    return probed


def _split(question: dict) -> bool:
    rewards = question["probe_rewards"]
    return max(rewards) > min(rewards)


def probe_in_rounds(policy: str | tuple[Any, Any], candidates: Sequence[dict], settings: GRPOSettings, want: int,
                    **where: Any) -> list[dict]:
    """`probe_questions` over PROBE_ROUND candidates at a time, until `want` of them have differing rewards
    (a group whose rollouts all score alike has zero advantage) or the candidates run out."""
    probed: list[dict] = []
    for start in range(0, len(candidates), PROBE_ROUND):
        probed += probe_questions(policy, candidates[start:start + PROBE_ROUND], settings, **where)
        if sum(map(_split, probed)) >= want:
            break
    print(f"grepseek: probe: {sum(map(_split, probed))} of {len(probed)} questions have differing rewards")
    return probed


def informative_questions(probed: Sequence[dict], k: int) -> list[dict]:
    """The k questions most worth a GRPO group: differing probe rewards first (widest spread), then any
    reward at all, then the rest in their original order."""
    def rank(item: tuple[int, dict]) -> tuple:
        index, q = item
        rewards = q["probe_rewards"]
        return (-(max(rewards) - min(rewards)), -max(rewards), index)

    return [q for _, q in sorted(enumerate(probed), key=rank)[:k]]


def choose_questions(policy: str | tuple[Any, Any], out: Path, settings: GRPOSettings, *, corpus: Path,
                     shards: Path | None, benchmarks_dir: Path | None, resume: bool) -> list[dict]:
    """The training questions, probed with `policy` (see `probe_questions`) when configured; saved to OUT so
    a resumed run trains on the same ones."""
    saved = Path(out) / QUESTIONS_FILE
    if resume and saved.is_file():
        return json.loads(saved.read_text(encoding="utf-8"))
    if resume and settings.probe_candidates > 0:
        print(f"grepseek: {saved} is missing (a run from before it was saved); probing again, so the resumed "
              "run may train on other questions than its checkpoint did")
    pool = load_questions(settings.train_splits, benchmarks_dir or config.benchmarks_dir(), seed=settings.seed)
    if settings.probe_candidates > 0:
        candidates, want = pool[:settings.probe_candidates], settings.max_questions or settings.probe_candidates
        print(f"grepseek: probing up to {len(candidates)} questions x {settings.probe_samples} episodes of the "
              f"policy, {PROBE_ROUND} at a time")
        probed = probe_in_rounds(policy, candidates, settings, want, corpus=corpus, shards=shards)
        chosen = informative_questions(probed, want)
    else:
        chosen = pool[:settings.max_questions] if settings.max_questions else pool
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(chosen, indent=1) + "\n", encoding="utf-8")
    return chosen


def shared_questions(policy: tuple[Any, Any], out: Path, settings: GRPOSettings, **where: Any) -> list[dict]:
    """`choose_questions` on rank 0 (it may probe); the other ranks wait and read its saved choice, so every
    rank of a multi-process run trains on the same pool. `where`: choose_questions' keyword arguments."""
    state = shared_state()
    with state.main_process_first():
        if state.is_main_process:
            return choose_questions(policy, out, settings, **where)
        return json.loads((Path(out) / QUESTIONS_FILE).read_text(encoding="utf-8"))


class ShellEnvironment:
    """One rollout's shell for trl's `environment_factory`: our ShellTool and observation text, and the
    agent loop's budget note on the last allowed call (an instance per rollout, so it can count calls).

    Its one public method is the tool trl exposes; `reset` starts a new rollout.
    """

    def __init__(self, tool: Any, max_tool_calls: int):
        self._tool = tool
        self._budget = ToolBudget(max_tool_calls)

    def reset(self, **_row: Any) -> None:
        self._budget = ToolBudget(self._budget.max_tool_calls)

    def shell(self, command: str) -> str:
        """Run one read-only shell pipeline over corpus.jsonl and return its JSON observation.

        Args:
            command: One pipeline of allowed programs (rg, grep, head, ...) joined with |.
        """
        return self._budget.run(command, self._tool)[1]


def prompt_rows(questions: Sequence[dict], tool: Any, settings: GRPOSettings) -> list[dict]:
    """trl dataset rows: the agent's own initial messages as `prompt` (stating the rollout tool's corpus size
    and observation cap), gold answers as `golds`."""
    n_lines = corpus_lines(tool)
    return [{"prompt": initial_messages(q["question"], n_lines, max_tool_calls=settings.max_tool_calls,
                                        max_obs_tokens=tool.max_obs_tokens),
             "golds": list(q["golds"]), "id": q["id"]} for q in questions]


def want_vllm(setting: str | bool) -> bool:
    """vLLM generation only when asked (or "auto") AND a CUDA device and the vllm package are present."""
    available = vllm_available()
    if setting == "auto":
        return available
    if setting and not available:
        raise UserError("grpo.use_vllm needs a CUDA GPU and the vllm package (pip install -e .[vllm])")
    return bool(setting)


def skipping_trainer_class() -> type:
    """GRPOTrainer that does not run the policy over a micro-batch whose advantages are all zero.

    With beta = 0 (no KL) such a micro-batch has loss and gradient exactly 0: every rollout of a group got
    the same reward, which early in training on a small model is most groups. The forward/backward over
    thousands of tokens is then skipped; a zero loss still flows through every trainable weight, so the
    optimizer sees the same zero gradient it would have computed.
    """
    from trl import GRPOTrainer

    class SkippingGRPOTrainer(LeanRollouts, GRPOTrainer):
        skipped_micro_batches = 0
        skip_zero_advantages = True  # benchmarks turn it off, so every path they time runs its update

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            advantages = inputs.get("advantages") if isinstance(inputs, dict) else None
            skip = self.skip_zero_advantages and not return_outputs and self.beta == 0.0 and advantages is not None and \
                not bool(advantages.ne(0).any())
            self._metrics["train"]["skipped_fraction"].append(float(skip))  # logged as the step's mean
            if skip:
                self.skipped_micro_batches += 1
                return sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)

    return SkippingGRPOTrainer


def grpo_config(out: Path, settings: GRPOSettings, flags: dict, max_steps: int | None = None) -> Any:
    """trl's GRPOConfig from the settings: constant lr, no top-p / top-k, the tool loop's turn and call caps."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out / CHECKPOINTS),
        max_steps=max_steps if max_steps is not None else settings.max_steps,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        num_generations=settings.num_generations,
        per_device_train_batch_size=settings.per_device_train_batch_size,
        gradient_accumulation_steps=settings.accumulation_for(world_size()),
        max_completion_length=settings.max_completion_length,
        generation_kwargs={"max_new_tokens": settings.max_turn_tokens},
        max_tool_calling_iterations=settings.max_tool_calls,
        temperature=settings.temperature,
        top_p=1.0,
        top_k=0,
        beta=settings.beta,
        epsilon=settings.epsilon,
        loss_type=settings.loss_type,
        scale_rewards=settings.scale_rewards,
        use_vllm=want_vllm(settings.use_vllm),
        vllm_mode="colocate",
        log_completions=False,
        remove_unused_columns=False,
        **checkpoint_args(settings, flags),
    )


def build_trainer(model_name: str, out: Path, settings: GRPOSettings, *, corpus: Path,
                  shards: Path | None = None, questions: Sequence[dict], lora: bool = False,
                  max_steps: int | None = None, loaded: tuple[Any, Any, dict] | None = None,
                  compact_head: bool = True) -> tuple[Any, Any]:
    """The GRPOTrainer with the shell tool and the F1 x format reward; returns (trainer, tokenizer).
    `loaded`: what `load_trainable(model_name)` returned, when the caller already loaded it;
    `compact_head=False` keeps trl's own LM head (train/lm_head.py), for benchmarks of the old path."""
    from datasets import Dataset

    from grepseek_lib.train.lm_head import compact_lm_head  # defers torch and trl, as above

    out = Path(out)
    model, tokenizer, flags = loaded or load_trainable(model_name, settings.precision)
    tool = open_tool(corpus, shards, timeout=settings.tool_timeout_s,
                     max_obs_tokens=settings.max_obs_tokens, tokenizer=tokenizer)
    rows = prompt_rows(questions, tool, settings)
    if len(rows) < settings.questions_per_step:  # trl would drop the incomplete batch: no step at all
        raise UserError(f"{len(rows)} training question(s) but a step needs questions_per_step="
                        f"{settings.questions_per_step}; raise max_questions (or probe_candidates) or lower it")
    args = grpo_config(out, settings, flags, max_steps)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental in trl
    reward = TrlShellReward(tokenizer, max_tool_calls=settings.max_tool_calls, log_path=out / REWARD_PARTS_FILE,
                            repeat_penalty=settings.repeat_penalty, evidence_bonus=settings.evidence_bonus)
    trainer = skipping_trainer_class()(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(settings) if lora else None,
        environment_factory=lambda: ShellEnvironment(tool, settings.max_tool_calls),
        callbacks=[metrics_logger(out / METRICS_FILE)],
    )
    trainer.lean_rollouts = settings.lean_rollouts
    if compact_head:
        compact_lm_head(trainer.model, temperature=trainer.temperature, entropy_grad=True)
    return trainer, tokenizer


def run_grpo(model_name: str, out: Path, settings: GRPOSettings, *, corpus: Path | None = None,
             shards: Path | None = None, benchmarks_dir: Path | None = None, lora: bool = False,
             resume: bool = False, max_steps: int | None = None) -> dict[str, Any]:
    """GRPO from `model_name` (usually the SFT folder); OUT becomes a plain HF model folder. Returns a summary."""
    out = Path(out)
    corpus, shards = resolve_corpus(corpus, shards)
    identity = {"stage": "grpo", "model": str(model_name), "corpus": file_stamp(corpus), "lora": lora,
                "settings": {k: v for k, v in vars(settings).items() if k not in ("lean_rollouts", "max_steps")}}
    checkpoint = start_or_resume(out, identity, resume, out / METRICS_FILE)
    if checkpoint is None and rank() == 0:
        (out / REWARD_PARTS_FILE).unlink(missing_ok=True)
    start = time.time()
    loaded = load_trainable(model_name, settings.precision)  # once: the probe samples from the model it trains
    questions = shared_questions(loaded[:2], out, settings, corpus=corpus, shards=shards,
                                 benchmarks_dir=benchmarks_dir, resume=checkpoint is not None)
    trainer, tokenizer = build_trainer(model_name, out, settings, corpus=corpus, shards=shards,
                                       questions=questions, lora=lora, max_steps=max_steps, loaded=loaded)
    trainer.train(resume_from_checkpoint=checkpoint)
    save_final_model(trainer, tokenizer, out)
    steps = read_reward_parts(out / REWARD_PARTS_FILE)
    summary = {"stage": "grpo", "model": model_name, "out": str(out), "questions": len(questions),
               "steps": trainer.state.global_step, "wall_s": round(time.time() - start, 1),
               "lora": lora, "resumed_from": checkpoint, "corpus": str(corpus),
               "shards": str(shards) if shards else None, **reward_trend(steps),
               "probe_rewards": {q["id"]: q["probe_rewards"] for q in questions if "probe_rewards" in q},
               "processes": trainer.accelerator.num_processes,
               "settings": {k: v for k, v in vars(settings).items()}}
    if trainer.is_world_process_zero():
        (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=str))
    return summary


def read_reward_parts(path: Path) -> list[dict]:
    """Per-step reward parts; a step logged twice by a rank (a resumed run) keeps its last record, and the
    records of the ranks of a multi-process run merge into one per step."""
    by_key: dict[tuple[int, int], dict] = {}
    if Path(path).is_file():
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                by_key[(int(record["step"]), int(record.get("rank", 0)))] = record
    steps: dict[int, list[dict]] = {}
    for (step, _), record in sorted(by_key.items()):
        steps.setdefault(step, []).append(record)
    return [merge_ranks(steps[k]) for k in sorted(steps)]


def merge_ranks(records: Sequence[dict]) -> dict:
    """One step's records from several ranks as one: rollout-weighted means, summed reasons, every group."""
    if len(records) == 1:
        return records[0]
    n = sum(r["n"] for r in records)
    merged: dict[str, Any] = {"step": records[0]["step"], "n": n, "ranks": len(records)}
    for key in records[0]:
        if key not in merged and key not in ("rank", "reasons", "rewards") and isinstance(records[0][key], int | float):
            merged[key] = sum(r[key] * r["n"] for r in records) / max(n, 1)
    merged["reasons"], merged["rewards"] = {}, {}
    for record in records:
        for reason, count in record.get("reasons", {}).items():
            merged["reasons"][reason] = merged["reasons"].get(reason, 0) + count
        for qid, rewards in record.get("rewards", {}).items():
            merged["rewards"].setdefault(qid, []).extend(rewards)
    return merged


def reward_trend(steps: Sequence[dict], window: int | None = None) -> dict[str, float | int]:
    """Mean reward over the first and the last `window` steps (default: each half of the run, at least 1;
    an odd middle step is left out), and how many rollouts each mean stands on."""
    if not steps:
        return {}
    window = window or max(1, len(steps) // 2)
    sides = {"first": steps[:window], "last": steps[-window:]}
    keys = ["reward"] + (["f1"] if all("f1" in s for s in steps) else [])  # f1: the answers' own part
    trend: dict[str, float | int] = {"trend_window": window}
    for key in keys:
        trend.update({f"{key}_{side}": sum(s[key] for s in part) / len(part) for side, part in sides.items()})
    trend.update({f"rollouts_{side}": sum(int(s.get("n", 0)) for s in part) for side, part in sides.items()})
    return trend
