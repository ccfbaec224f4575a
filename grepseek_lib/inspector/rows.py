"""Trajectories -> rows: one per episode (with the columns the filters read) and one per turn.

Both kinds share the key `episode` = "run/system/benchmark/id[#k]". What counts: the stop reason as a
label, the outcome (EM / F1), the programs a command pipes through and how many commands repeat.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from grepseek_lib.agent.trajectory import Trajectory
from grepseek_lib.metrics import exact_match, f1
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.types import Refused

#: Stop reasons as the filters name them (agent.trajectory.STOP_REASONS -> label).
STOP_LABELS = {"answer": "answered", "format_errors": "format error", "budget": "budget", "context": "context"}
#: F1 buckets of the `f1_bucket` column: (upper bound inclusive, label).
F1_BUCKETS = ((0.0, "0"), (0.5, "(0, 0.5]"), (0.999999, "(0.5, 1)"), (1.0, "1"))


@dataclass
class Episodes:
    """The loaded trajectories: `episodes` (one row each) and `turns` (one row per assistant turn)."""

    episodes: pd.DataFrame
    turns: pd.DataFrame

    def turns_of(self, episode: str) -> pd.DataFrame:
        """The turns of one episode, in order."""
        return self.turns[self.turns["episode"] == episode].sort_values("turn")


def programs_of(command: str | None) -> list[str]:
    """The programs of a pipeline ("rg | head" -> ["rg", "head"]); a refused one is split on pipes."""
    if not command:
        return []
    try:
        return [stage.program for stage in parse_command(command).stages]
    except Refused:
        return [part.split()[0] for part in command.split("|") if part.split()]


def f1_bucket(value: float | None) -> str:
    if value is None or pd.isna(value):
        return "n/a"
    return next(label for bound, label in F1_BUCKETS if value <= bound)


def outcome_of(em: float | None, f1_value: float | None) -> str:
    """correct (EM 1), partial (F1 > 0) or wrong; unscored episodes are n/a."""
    if em is None or pd.isna(em):
        return "n/a"
    return "correct" if em >= 1 else "partial" if (f1_value or 0) > 0 else "wrong"


def turn_rows(traj: Trajectory, key: str) -> list[dict[str, Any]]:
    """One row per assistant turn: what it thought, ran (or answered) and what came back."""
    rows = []
    for index, turn in enumerate(traj.turns, start=1):
        payload = turn.observation or {}
        rows.append({"episode": key, "turn": index, "kind": turn.action.kind, "think": turn.action.think,
                     "command": turn.action.command, "answer": turn.action.answer, "error": turn.action.error,
                     "exit_code": payload.get("exit_code"), "stdout": payload.get("stdout"),
                     "stderr": payload.get("stderr"), "timed_out": payload.get("timed_out"),
                     "truncated": payload.get("truncated"), "observation": turn.observation_text,
                     "text": turn.text, "redrawn": list(turn.redrawn), "llm_s": turn.llm_s, "tool_s": turn.tool_s})
    return rows


def episode_row(traj: Trajectory, key: str, base: dict[str, Any]) -> dict[str, Any]:
    """The episode's summary; `base` carries run / system / source / benchmark and any scores already known."""
    commands = [t.action.command for t in traj.turns if t.action.kind == "tool" and t.action.command]
    em = base.get("em", exact_match(traj.answer, traj.golds) if traj.golds else None)
    score = base.get("f1", f1(traj.answer, traj.golds) if traj.golds else None)
    return {"episode": key, "id": str(traj.id), "question": traj.question, "golds": list(traj.golds),
            "answer": traj.answer, "stop_reason": STOP_LABELS.get(traj.stop_reason, traj.stop_reason or "n/a"),
            "turns": len(traj.turns), "tool_calls": traj.tool_calls, "format_errors": traj.format_errors,
            "programs": sorted({p for c in commands for p in programs_of(c)}),
            "repeated_commands": len(commands) - len(set(commands)),
            "llm_s": traj.llm_s, "tool_s": traj.tool_s, **base, "em": em, "f1": score}


def episode_key(run: str, system: str, benchmark: str, qid: str, suffix: str = "") -> str:
    """run/system/benchmark/id, plus a suffix where one question has several episodes (GRPO rollouts)."""
    return f"{run}/{system}/{benchmark}/{qid}" + (f"#{suffix}" if suffix else "")


def from_trajectories(trajs: Iterable[Trajectory], base: dict[str, Any],
                      scores: dict[tuple[str, str], dict] | None = None) -> tuple[list[dict], list[dict]]:
    """Episode and turn rows of trajectories; `scores` (benchmark, id) -> record overrides em / f1."""
    episodes, turns = [], []
    for traj in trajs:
        benchmark = traj.meta.get("benchmark", base.get("benchmark", ""))
        key = episode_key(base["run"], base["system"], benchmark, str(traj.id), traj.meta.get("episode_suffix", ""))
        record = (scores or {}).get((benchmark, str(traj.id)), {})
        known = {k: record[k] for k in ("em", "f1") if k in record}
        episodes.append(episode_row(traj, key, {**base, "benchmark": benchmark, **known}))
        turns.extend(turn_rows(traj, key))
    return episodes, turns
