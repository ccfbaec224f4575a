"""What one episode did, turn by turn: saved as JSONL, loaded back, turned into pandas frames.

Evaluation tables, cold-start inspection and latency plots all read these records, so every number
an analysis needs (tokens, LLM time, tool time, stop reason) is kept per turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grepseek_lib.agent.actions import Action
from grepseek_lib.errors import UserError

#: Why an episode ended.
STOP_REASONS = ("answer", "format_errors", "budget", "context")


@dataclass
class Turn:
    """One assistant turn and what it caused."""

    text: str  # the raw generation, as the model wrote it
    action: Action
    observation: dict | None = None  # the tool payload (tool calls only)
    observation_text: str | None = None  # what the model was shown next (tool result or format error)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_s: float = 0.0
    tool_s: float = 0.0
    redrawn: list[str] = field(default_factory=list)  # repeats the loop drew again before this turn

    def to_dict(self) -> dict:
        data = asdict(self)
        data["action"] = self.action.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Turn:
        return cls(**{**data, "action": Action.from_dict(data["action"])})


@dataclass
class Trajectory:
    """One episode: the question, every turn, the answer (None when there is none) and why it stopped."""

    question: str
    id: str = ""
    golds: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    answer: str | None = None
    stop_reason: str = ""
    messages: list[dict] = field(default_factory=list)  # the whole conversation as the model saw it
    meta: dict = field(default_factory=dict)

    @property
    def tool_calls(self) -> int:
        """Tool calls that ran (a call past the budget is recorded but never executed)."""
        return sum(turn.observation is not None for turn in self.turns)

    @property
    def format_errors(self) -> int:
        return sum(turn.action.kind == "invalid" for turn in self.turns)

    @property
    def llm_s(self) -> float:
        return sum(turn.llm_s for turn in self.turns)

    @property
    def tool_s(self) -> float:
        return sum(turn.tool_s for turn in self.turns)

    def assistant_texts(self) -> list[str]:
        return [turn.text for turn in self.turns]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["turns"] = [turn.to_dict() for turn in self.turns]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Trajectory:
        return cls(**{**data, "turns": [Turn.from_dict(t) for t in data.get("turns", [])]})


def append_jsonl(trajectories: Iterable[Trajectory], path: Path) -> None:
    """Append trajectories to a JSONL file (one line each), creating the folder. One write call, so the
    ranks of a multi-process GRPO run appending to the same file do not interleave their lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(traj.to_dict(), ensure_ascii=False) + "\n" for traj in trajectories)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()


def save_jsonl(trajectories: Iterable[Trajectory], path: Path) -> None:
    """Write trajectories to a fresh JSONL file."""
    path = Path(path)
    if path.exists():
        path.unlink()
    append_jsonl(trajectories, path)


def load_jsonl(path: Path) -> list[Trajectory]:
    """Load trajectories; a half-written last line (a killed run) is skipped, not fatal. A line that is
    JSON but no trajectory (cold-start chat rows, eval records) is an error naming the line."""
    trajectories = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            try:
                trajectories.append(Trajectory.from_dict(data))
            except (TypeError, KeyError, AttributeError) as exc:
                raise UserError(f"{path}:{number}: not a trajectory line ({exc}); expected the JSONL that "
                                "eval, format-check, GRPO rollouts or `grepseek ask` write") from None
    return trajectories


def to_frame(trajectories: Iterable[Trajectory], *, per: str = "episode"):
    """A pandas DataFrame: one row per episode (default) or, with per="turn", one row per turn."""
    import pandas as pd

    if per not in ("episode", "turn"):
        raise ValueError('per must be "episode" or "turn"')
    rows = []
    for traj in trajectories:
        if per == "episode":
            rows.append({"id": traj.id, "question": traj.question, "golds": list(traj.golds),
                         "answer": traj.answer, "stop_reason": traj.stop_reason, "turns": len(traj.turns),
                         "tool_calls": traj.tool_calls, "format_errors": traj.format_errors,
                         "prompt_tokens": sum(t.prompt_tokens for t in traj.turns),
                         "completion_tokens": sum(t.completion_tokens for t in traj.turns),
                         "llm_s": traj.llm_s, "tool_s": traj.tool_s, **traj.meta})
            continue
        for index, turn in enumerate(traj.turns):
            payload = turn.observation or {}
            rows.append({"id": traj.id, "turn": index + 1, "kind": turn.action.kind,
                         "command": turn.action.command, "answer": turn.action.answer,
                         "error": turn.action.error, "exit_code": payload.get("exit_code"),
                         "timed_out": payload.get("timed_out"), "truncated": payload.get("truncated"),
                         "prompt_tokens": turn.prompt_tokens, "completion_tokens": turn.completion_tokens,
                         "redrawn": len(turn.redrawn), "llm_s": turn.llm_s, "tool_s": turn.tool_s})
    return pd.DataFrame(rows)
