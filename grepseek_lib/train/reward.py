"""The RL reward: token-F1 of the episode's answer (best over gold answers) times the strict format gate,
less `repeat_penalty` when the episode sends a command it already sent, plus `evidence_bonus` when a
well-formed episode's tool output printed a gold answer (both 0 by default: the paper's reward).

Built only from `agent.actions` (format gate, FIRST `<answer>` block) and `metrics.f1`, so the reward
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
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.actions import first_answer, format_gate, parse_action
from grepseek_lib.agent.chat_template import IM_END, IM_START
from grepseek_lib.agent.evidence import repeats_a_command, search_report, summarize_search
from grepseek_lib.agent.trajectory import Trajectory, Turn, append_jsonl
from grepseek_lib.metrics import f1
from grepseek_lib.shell.tool import observation_payload
from grepseek_lib.train.distributed import rank

#: Every rollout of every step, decoded into turns and tool payloads (beside the reward-parts log).
ROLLOUTS_FILE = "rollouts.jsonl"
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


_TOOL_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)


def decoded_payloads(text: str) -> list[dict]:
    """Every tool response's payload in a decoded completion (payload JSON, maybe a budget note after it)."""
    return [p for p in map(observation_payload, _TOOL_RESPONSE.findall(text)) if p is not None]


def decoded_stdouts(text: str) -> list[str]:
    """The stdout of every tool response in a decoded completion."""
    return [str(payload.get("stdout") or "") for payload in decoded_payloads(text)]


def rollout_trajectory(text: str, question: str, qid: str, golds: Sequence[str], parts: dict[str, Any],
                       step: int, rollout: int) -> Trajectory:
    """One decoded GRPO rollout as an agent-loop Trajectory (turns, tool payloads, answer) for the inspector."""
    payloads = iter(decoded_payloads(text))
    turns = []
    for raw in split_decoded_turns(text):
        action = parse_action(raw)
        payload = next(payloads, None) if action.kind == "tool" else None
        turns.append(Turn(text=raw, action=action, observation=payload))
    split, _, plain_id = qid.rpartition(":")
    return Trajectory(question=question, id=plain_id or qid, golds=list(golds), turns=turns, answer=parts["answer"],
                      stop_reason="answer" if parts["answered"] else "budget",
                      meta={"benchmark": split, "step": step, "rollout": rollout, "rank": rank(),
                            "reward": parts["reward"], "episode_suffix": f"step{step}.r{rank()}.{rollout}"})


def _question_of(prompt: Any) -> str:
    """The question of a rollout's prompt (its user turn `Query: ...`)."""
    users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"] \
        if isinstance(prompt, list) else [str(prompt)]
    return (users[0] if users else "").removeprefix("Query: ")


def reward_parts(completion: str | Sequence[str] | Sequence[dict], golds: str | Sequence[str], *,
                 max_tool_calls: int = config.MAX_TOOL_CALLS, stdouts: Sequence[str] | None = None,
                 repeat_penalty: float = 0.0, evidence_bonus: float = 0.0) -> dict[str, Any]:
    """Everything the reward is made of, for logging: format_ok, reason, n_tool_calls, answered, f1, repeats
    (a command sent twice, whether the tool ran it or refused it), reward; given the tool outputs, also the
    search report (evidence found, empty first search, repeated command among those that ran).

    The penalty is what a repeat costs beyond its lost call: a policy that re-sends a command after reading
    a passage that lacks the answer (#21) is paid less than one that changes its search, whatever it answers.
    The bonus pays a search that found the answer even when the reader then misread it, so GRPO does not
    learn to stop searching (fewer calls, fewer repeats) at the cost of evidence; it needs the tool outputs."""
    if evidence_bonus and stdouts is None:
        raise ValueError("evidence_bonus needs the episode's tool outputs (stdouts=)")
    turns = assistant_turns(completion)
    ok, reason = format_gate(turns, max_tool_calls=max_tool_calls)
    answer = first_answer(turns)
    score = f1(answer, list(golds) if not isinstance(golds, str) else golds) if answer is not None else 0.0
    actions = [parse_action(turn) for turn in turns]
    commands = [a.command or "" for a in actions if a.kind == "tool"]
    repeats = repeats_a_command(commands)
    parts = {"format_ok": bool(ok), "reason": reason, "n_tool_calls": len(commands),
             "answered": answer is not None, "answer": answer, "f1": float(score), "repeats": repeats,
             "reward": (float(score) if ok else 0.0) - (repeat_penalty if repeats else 0.0)}
    if stdouts is not None:
        parts.update(search_report(commands[:len(stdouts)], list(stdouts), golds))
        if ok and parts["evidence_found"]:
            parts["reward"] += evidence_bonus
    return parts


def reward(completion: str | Sequence[str] | Sequence[dict], golds: str | Sequence[str], *,
           max_tool_calls: int = config.MAX_TOOL_CALLS, stdouts: Sequence[str] | None = None,
           repeat_penalty: float = 0.0, evidence_bonus: float = 0.0) -> float:
    """Token-F1 (best over golds, first `<answer>` block) x format gate (0 or 1), less the repeat penalty,
    plus the evidence bonus."""
    return reward_parts(completion, golds, max_tool_calls=max_tool_calls, stdouts=stdouts,
                        repeat_penalty=repeat_penalty, evidence_bonus=evidence_bonus)["reward"]


def summarize_parts(parts: Sequence[dict]) -> dict[str, float]:
    """Batch means of the reward parts (the per-step figures that get plotted)."""
    n = max(len(parts), 1)
    summary = {"reward": sum(p["reward"] for p in parts) / n,
               "format_pass_rate": sum(p["format_ok"] for p in parts) / n,
               "answer_rate": sum(p["answered"] for p in parts) / n,
               "tool_calls": sum(p["n_tool_calls"] for p in parts) / n,
               "f1": sum(p["f1"] for p in parts) / n,
               "repeat_rate": sum(bool(p.get("repeats")) for p in parts) / n}
    if parts and all("evidence_found" in p for p in parts):
        summary.update(summarize_search(parts))
    return summary


class TrlShellReward:
    """trl `reward_funcs` adapter: decodes each rollout's ids back into raw turns and scores them.

    Needs the dataset column `golds`. Each call logs the batch means through trl's `log_metric`
    (they land in trl's logs as `reward_parts/...`) and appends one JSON line per call to `log_path`.
    """

    __name__ = "f1_x_format"  # trl names the reward column after the function

    def __init__(self, tokenizer: Any, *, max_tool_calls: int = config.MAX_TOOL_CALLS,
                 log_path: Path | None = None, repeat_penalty: float = 0.0, evidence_bonus: float = 0.0):
        self.tokenizer = tokenizer
        self.max_tool_calls = max_tool_calls
        self.repeat_penalty = repeat_penalty
        self.evidence_bonus = evidence_bonus
        self.log_path = Path(log_path) if log_path else None

    def decode(self, completion_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(completion_ids), skip_special_tokens=False)

    def turns_of(self, completion_ids: Sequence[int]) -> list[str]:
        return split_decoded_turns(self.decode(completion_ids))

    def __call__(self, prompts: list, completions: list, completion_ids: list[list[int]], golds: list,
                 trainer_state: Any = None, log_metric: Callable[[str, float], None] | None = None,
                 **columns: Any) -> list[float]:
        texts = [self.decode(ids) for ids in completion_ids]
        parts = [reward_parts(split_decoded_turns(text), g, max_tool_calls=self.max_tool_calls,
                              stdouts=decoded_stdouts(text), repeat_penalty=self.repeat_penalty,
                              evidence_bonus=self.evidence_bonus)
                 for text, g in zip(texts, golds, strict=True)]
        summary = summarize_parts(parts)
        if log_metric is not None:
            for key, value in summary.items():
                log_metric(f"reward_parts/{key}", value)
        if self.log_path is not None:
            step = int(getattr(trainer_state, "global_step", 0) or 0) + 1
            ids = [str(i) for i in columns.get("id") or ["?"] * len(parts)]
            record = {"step": step, "rank": rank(), "n": len(parts), **summary,
                      "reasons": _top_reasons(parts), "rewards": _by_question(parts, ids)}
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
            rollouts = [rollout_trajectory(text, _question_of(prompt), qid, g, p, step, k)
                        for k, (text, prompt, qid, g, p) in enumerate(zip(texts, prompts, ids, golds, parts,
                                                                          strict=True))]
            append_jsonl(rollouts, self.log_path.with_name(ROLLOUTS_FILE))
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
