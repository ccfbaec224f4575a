"""The RL reward: token-F1 of the episode's answer (best over gold answers) times the strict format gate.

Built only from `agent.actions` (format gate, FIRST `<answer>` block) and `eval.metrics.f1`, so the reward
pays for exactly what evaluation scores.

The trl adapter (`TrlShellReward`) has trl 1.16's `reward_funcs` signature
`f(prompts, completions, completion_ids, **dataset_columns) -> list[float]`. In the multi-turn tool loop
trl hands `completions` as parsed message dicts (`reasoning_content` / `content` / structured `tool_calls`),
which loses the model's raw text (spacing, key order, text between blocks) that the gate must judge. So the
adapter decodes `completion_ids` (the model's tokens plus the tool-response tokens trl spliced in) with
special tokens kept and cuts it back into raw assistant turns at the template's turn markers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.actions import first_answer, format_gate, parse_action
from grepseek_lib.agent.chat_template import IM_END, IM_START
from grepseek_lib.eval.metrics import f1
from grepseek_lib.train.distributed import rank

#: The header our chat template writes before every assistant turn (the generation prompt).
ASSISTANT_HEADER = f"{IM_START}assistant\n"


def assistant_turns(completion: str | Sequence[str] | Sequence[dict]) -> list[str]:
    """The raw assistant texts of an episode, from a list of turn strings or chat messages.

    A single string is ONE turn. Messages are our chat format (assistant content is the raw text);
    tool / user / system messages are skipped.
    """
    if isinstance(completion, str):
        return [completion]
    turns: list[str] = []
    for item in completion:
        if isinstance(item, str):
            turns.append(item)
        elif isinstance(item, dict) and item.get("role") == "assistant":
            content = item.get("content")
            turns.append(content if isinstance(content, str) else "")
    return turns


def split_decoded_turns(text: str) -> list[str]:
    """Cut a decoded multi-turn completion (special tokens kept) into raw assistant turns.

    The completion starts inside the first assistant turn; every later turn follows our template's
    `<|im_start|>assistant\\n` header; a turn ends at its `<|im_end|>` (absent when generation was cut).
    Tool observations cannot fake a header: they are JSON, whose strings never hold a raw newline.
    """
    pieces = text.split(ASSISTANT_HEADER)
    return [piece.split(IM_END, 1)[0] for piece in pieces]


def reward_parts(completion: str | Sequence[str] | Sequence[dict], golds: str | Sequence[str], *,
                 max_tool_calls: int = config.MAX_TOOL_CALLS) -> dict[str, Any]:
    """Everything the reward is made of, for logging: format_ok, reason, n_tool_calls, answered, f1, reward."""
    turns = assistant_turns(completion)
    ok, reason = format_gate(turns, max_tool_calls=max_tool_calls)
    answer = first_answer(turns)
    score = f1(answer, list(golds) if not isinstance(golds, str) else golds) if answer is not None else 0.0
    n_tool_calls = sum(parse_action(turn).kind == "tool" for turn in turns)
    return {"format_ok": bool(ok), "reason": reason, "n_tool_calls": n_tool_calls,
            "answered": answer is not None, "answer": answer, "f1": float(score),
            "reward": float(score) if ok else 0.0}


def reward(completion: str | Sequence[str] | Sequence[dict], golds: str | Sequence[str], *,
           max_tool_calls: int = config.MAX_TOOL_CALLS) -> float:
    """Token-F1 (best over golds, first `<answer>` block) x format gate (0 or 1)."""
    return reward_parts(completion, golds, max_tool_calls=max_tool_calls)["reward"]


def summarize_parts(parts: Sequence[dict]) -> dict[str, float]:
    """Batch means of the reward parts (the per-step figures that get plotted)."""
    n = max(len(parts), 1)
    return {"reward": sum(p["reward"] for p in parts) / n,
            "format_pass_rate": sum(p["format_ok"] for p in parts) / n,
            "answer_rate": sum(p["answered"] for p in parts) / n,
            "tool_calls": sum(p["n_tool_calls"] for p in parts) / n,
            "f1": sum(p["f1"] for p in parts) / n}


class TrlShellReward:
    """trl `reward_funcs` adapter: decodes each rollout's ids back into raw turns and scores them.

    Needs the dataset column `golds`. Each call logs the batch means through trl's `log_metric`
    (they land in trl's logs as `reward_parts/...`) and appends one JSON line per call to `log_path`.
    """

    __name__ = "f1_x_format"  # trl names the reward column after the function

    def __init__(self, tokenizer: Any, *, max_tool_calls: int = config.MAX_TOOL_CALLS,
                 log_path: Path | None = None):
        self.tokenizer = tokenizer
        self.max_tool_calls = max_tool_calls
        self.log_path = Path(log_path) if log_path else None

    def turns_of(self, completion_ids: Sequence[int]) -> list[str]:
        return split_decoded_turns(self.tokenizer.decode(list(completion_ids), skip_special_tokens=False))

    def __call__(self, prompts: list, completions: list, completion_ids: list[list[int]], golds: list,
                 trainer_state: Any = None, log_metric: Callable[[str, float], None] | None = None,
                 **columns: Any) -> list[float]:
        parts = [reward_parts(self.turns_of(ids), g, max_tool_calls=self.max_tool_calls)
                 for ids, g in zip(completion_ids, golds, strict=True)]
        summary = summarize_parts(parts)
        if log_metric is not None:
            for key, value in summary.items():
                log_metric(f"reward_parts/{key}", value)
        if self.log_path is not None:
            step = int(getattr(trainer_state, "global_step", 0) or 0)
            record = {"step": step + 1, "rank": rank(), "n": len(parts), **summary,
                      "reasons": _top_reasons(parts), "rewards": _by_question(parts, columns.get("id"))}
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
        return [p["reward"] for p in parts]


def _by_question(parts: Sequence[dict], ids: Sequence[str] | None) -> dict[str, list[float]]:
    """Each question's rollout rewards (its group), so a trend can be read per question, not only per step."""
    groups: dict[str, list[float]] = {}
    for k, p in enumerate(parts):
        groups.setdefault(str(ids[k]) if ids else "?", []).append(round(p["reward"], 4))
    return groups


def _top_reasons(parts: Sequence[dict], k: int = 3) -> dict[str, int]:
    """The most common gate failures of a batch (turn numbers stripped), to see what the policy gets wrong."""
    counts: dict[str, int] = {}
    for p in parts:
        if not p["format_ok"]:
            reason = p["reason"].split(": ", 1)[-1]
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:k])
