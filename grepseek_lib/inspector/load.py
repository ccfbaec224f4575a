"""Every kind of trajectory the project writes, read into one `Episodes` (episode frame + turn frame).

A run folder holds: eval/<system>/ (the runner: trajectories.jsonl + records.jsonl; BM25: records.jsonl
only, one retrieval read in one shot), coldstart/records.jsonl (every question; accepted ones carry the
chat `messages` SFT trains on), models/grpo/rollouts.jsonl (every GRPO rollout decoded into turns and tool
payloads, with its step and reward; older runs have only reward_parts.jsonl, a reward per rollout) and
format_check_episodes.jsonl where the format check ran. Any other Trajectory JSONL (agent.trajectory's
format, e.g. a `grepseek ask` episode) loads with `load_file`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from grepseek_lib.agent.actions import Action, parse_action
from grepseek_lib.agent.trajectory import Trajectory, Turn, load_jsonl
from grepseek_lib.eval.runner import RECORDS, TRAJECTORIES, read_records
from grepseek_lib.inspector.rows import Episodes, episode_key, f1_bucket, from_trajectories, outcome_of
from grepseek_lib.shell.tool import observation_payload
from grepseek_lib.train.grpo import REWARD_PARTS_FILE, read_reward_parts
from grepseek_lib.train.reward import ROLLOUTS_FILE

FORMAT_CHECK_FILE = "format_check_episodes.jsonl"
Rows = tuple[list[dict], list[dict]]

EPISODE_COLUMNS = ["episode", "run", "system", "source", "benchmark", "id", "question", "golds", "answer",
                   "em", "f1", "stop_reason", "turns", "tool_calls", "format_errors", "programs",
                   "repeated_commands", "llm_s", "tool_s"]
TURN_COLUMNS = ["episode", "turn", "kind", "think", "command", "answer", "error", "exit_code", "stdout",
                "stderr", "timed_out", "truncated", "observation", "text", "redrawn", "llm_s", "tool_s"]


def load_eval_system(folder: Path, run: str, system: str) -> Rows:
    """One eval.runner output folder (or the BM25 baseline's, which has records only)."""
    folder = Path(folder)
    records = read_records(folder)
    base = {"run": run, "system": system, "source": "eval"}
    if (folder / TRAJECTORIES).is_file():
        scores = {(r.get("benchmark"), str(r.get("id"))): r for r in records}
        return from_trajectories(load_jsonl(folder / TRAJECTORIES), base, scores)
    return from_trajectories((bm25_trajectory(r) for r in records), {**base, "source": "bm25"},
                             {(r.get("benchmark"), str(r.get("id"))): r for r in records})


def bm25_trajectory(record: dict) -> Trajectory:
    """A BM25 row as a one-turn episode: the passages it retrieved, then the reader's reply."""
    retrieved = ", ".join(map(str, record.get("retrieved_ids", [])))
    turn = Turn(text=record.get("raw_output", ""), action=Action("answer", answer=record.get("prediction")),
                observation_text=f"BM25 top-{len(record.get('retrieved_ids', []))} passages: {retrieved}",
                llm_s=float(record.get("llm_s") or 0.0))
    return Trajectory(question=record.get("question", ""), id=str(record.get("id")),
                      golds=list(record.get("golden_answers", [])), turns=[turn], answer=record.get("prediction"),
                      stop_reason="answer", meta={"benchmark": record.get("benchmark", "")})


def chat_trajectory(messages: list[dict], *, question: str, qid: str, golds: list[str], meta: dict) -> Trajectory:
    """A chat conversation (cold-start SFT data) as a trajectory: each assistant message is a turn, the
    tool message after it its observation."""
    turns: list[Turn] = []
    for message in messages:
        if message.get("role") == "assistant":
            turns.append(Turn(text=message.get("content", ""), action=parse_action(message.get("content", ""))))
        elif message.get("role") == "tool" and turns:
            turns[-1].observation_text = message.get("content", "")
            turns[-1].observation = observation_payload(message.get("content", ""))
    answer = next((t.action.answer for t in reversed(turns) if t.action.kind == "answer"), None)
    return Trajectory(question=question, id=qid, golds=golds, turns=turns, answer=answer,
                      stop_reason="answer" if answer is not None else "", meta=meta)


def load_coldstart(folder: Path, run: str) -> Rows:
    """Cold-start records: accepted questions with their turns, rejected ones with the stage that stopped them."""
    episodes, turns = [], []
    for record in read_records(Path(folder)):
        traj = chat_trajectory(record.get("messages", []), question=record.get("question", ""),
                               qid=str(record.get("id")), golds=list(record.get("golds", [])),
                               meta={"benchmark": record.get("source", "")})
        if not record.get("accepted"):
            traj.answer, traj.stop_reason = record.get("answer") or None, f"rejected ({record.get('stage')})"
        base = {"run": run, "system": "coldstart", "source": "coldstart", "reason": record.get("reason")}
        rows = from_trajectories([traj], base)
        episodes += rows[0]
        turns += rows[1]
    return episodes, turns


def load_grpo_rollouts(folder: Path, run: str) -> Rows:
    """GRPO rollouts, turn by turn from rollouts.jsonl (reward-only episodes from reward_parts.jsonl for runs
    made before it was written), and any format-check episodes."""
    folder = Path(folder)
    episodes, turns = [], []
    if (folder / ROLLOUTS_FILE).is_file():
        rollouts = load_jsonl(folder / ROLLOUTS_FILE)
        base = {"run": run, "system": "grpo_rollout", "source": "grpo"}
        for traj in rollouts:
            rows = from_trajectories([traj], {**base, "step": traj.meta.get("step"),
                                              "rollout": traj.meta.get("rollout"), "reward": traj.meta.get("reward")})
            episodes += rows[0]
            turns += rows[1]
    for step in ([] if episodes else read_reward_parts(folder / REWARD_PARTS_FILE)):
        for question, rewards in step.get("rewards", {}).items():
            split, _, qid = question.rpartition(":")
            for k, reward in enumerate(rewards):
                episodes.append({"episode": episode_key(run, "grpo_rollout", split, qid, f"step{step['step']}.{k}"),
                                 "run": run, "system": "grpo_rollout", "source": "grpo", "benchmark": split,
                                 "id": qid, "step": step["step"], "rollout": k, "reward": reward,
                                 "stop_reason": "n/a", "turns": 0, "tool_calls": None, "programs": [],
                                 "repeated_commands": 0})
    if (folder / FORMAT_CHECK_FILE).is_file():
        checked = from_trajectories(load_jsonl(folder / FORMAT_CHECK_FILE),
                                    {"run": run, "system": "format_check", "source": "grpo"})
        episodes += checked[0]
        turns += checked[1]
    return episodes, turns


def load_file(path: Path, run: str = "ask", system: str = "ask") -> Episodes:
    """Any Trajectory JSONL (agent.trajectory.save_jsonl's format), e.g. episodes from `grepseek ask`."""
    return to_episodes([from_trajectories(load_jsonl(Path(path)), {"run": run, "system": system, "source": system})])


def load_run(run_dir: str | Path) -> Episodes:
    """Everything a run folder holds: eval systems, cold start, GRPO rollouts."""
    run_dir = Path(run_dir)
    run = run_dir.name
    parts = []
    eval_dir = run_dir / "eval"
    if eval_dir.is_dir():
        for folder in sorted(p for p in eval_dir.iterdir() if (p / RECORDS).is_file()):
            parts.append(load_eval_system(folder, run, folder.name))
    if (run_dir / "coldstart" / RECORDS).is_file():
        parts.append(load_coldstart(run_dir / "coldstart", run))
    for folder in (run_dir / "models" / "grpo", run_dir / "models" / "sft"):
        parts.append(load_grpo_rollouts(folder, run))
    return to_episodes(parts)


def load_runs(run_dirs: Iterable[str | Path]) -> Episodes:
    """Several run folders in one frame (the `run` column tells them apart)."""
    loaded = [load_run(d) for d in run_dirs]
    return Episodes(pd.concat([x.episodes for x in loaded], ignore_index=True),
                    pd.concat([x.turns for x in loaded], ignore_index=True))


def to_episodes(parts: Iterable[Rows]) -> Episodes:
    """Stack row lists into the two frames, adding the outcome and F1-bucket columns."""
    episodes: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for ep_rows, turn_rows in parts:
        episodes += ep_rows
        turns += turn_rows
    frame = pd.DataFrame(episodes, columns=EPISODE_COLUMNS if not episodes else None)
    frame["outcome"] = [outcome_of(e, f) for e, f in zip(frame.get("em", []), frame.get("f1", []), strict=True)]
    frame["f1_bucket"] = [f1_bucket(v) for v in frame.get("f1", [])]
    return Episodes(frame, pd.DataFrame(turns, columns=TURN_COLUMNS if not turns else None))

