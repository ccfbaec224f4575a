"""Replay the shell commands the agent really ran (eval trajectories): sequential, sharded, indexed and both.

A synthetic benchmark says what the engine CAN do; replaying the agent's own commands says what it
buys on the workload that matters. Every command runs in every mode, alternating modes within a
repeat so that page-cache warmth favours none; outputs are compared byte for byte across modes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.actions import parse_action
from grepseek_lib.agent.trajectory import load_jsonl
from grepseek_lib.progress import progress_bar
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.types import Refused


def commands_from_trajectories(paths: Iterable[Path]) -> list[str]:
    """Distinct tool commands of eval trajectory files (agent/trajectory.py JSONL), first-seen order."""
    seen: dict[str, None] = {}
    for path in paths:
        if Path(path).is_file():
            for traj in load_jsonl(Path(path)):
                for turn in traj.turns:
                    if turn.action.kind == "tool" and turn.action.command:
                        seen.setdefault(turn.action.command, None)
    return list(seen)


def commands_from_chat(paths: Iterable[Path]) -> list[str]:
    """Distinct tool commands of chat datasets (cold-start train.jsonl): what the policy was taught to run."""
    seen: dict[str, None] = {}
    for path in paths:
        if not Path(path).is_file():
            continue
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            try:
                messages = json.loads(line).get("messages") or []
            except (ValueError, AttributeError):
                continue
            for message in messages:
                if message.get("role") == "assistant":
                    action = parse_action(message.get("content", ""))
                    if action.kind == "tool" and action.command:
                        seen.setdefault(action.command, None)
    return list(seen)


def collect_commands(trajectory_files: Iterable[Path], chat_files: Iterable[Path] = (), limit: int | None = None):
    """Commands to replay, as a frame (command, source): the eval agents' own first, then, when they ran
    fewer than `limit` (an untrained policy often runs none), the cold-start commands as a labelled top-up."""
    import pandas as pd

    rows = [{"command": c, "source": "eval"} for c in commands_from_trajectories(trajectory_files)]
    known = {r["command"] for r in rows}
    rows += [{"command": c, "source": "coldstart"} for c in commands_from_chat(chat_files) if c not in known]
    frame = pd.DataFrame(rows, columns=["command", "source"])
    return frame if limit is None else frame.head(limit)


def replay_engines(corpus: Path, shards: Path | None, index: Path | None,
                   index_fraction: float | None = None) -> dict[str, Engine]:
    """One engine per mode the inputs allow: the index alone and in front of the shards, so its gain is
    seen apart from the shards'. `min_shard_bytes=0` measures sharding itself on a small corpus;
    `index_fraction` as Engine's (1.0: the index wherever it is exact, even where a scan is faster)."""
    corpus = Path(corpus)
    engines = {"sequential": Engine(corpus)}
    if shards is not None:
        engines["sharded"] = Engine(corpus, shards_dir=Path(shards), min_shard_bytes=0)
    if index is not None:
        engines["indexed"] = Engine(corpus, index=Path(index), index_fraction=index_fraction)
        if shards is not None:
            engines["indexed_sharded"] = Engine(corpus, shards_dir=Path(shards), min_shard_bytes=0,
                                                index=Path(index), index_fraction=index_fraction)
    return engines


def replay(
    commands: Sequence[str],
    corpus: Path,
    shards: Path | None,
    *,
    index: Path | None = None,
    index_fraction: float | None = None,
    repeats: int = 1,
    timeout: float = config.DEFAULT_TIMEOUT_S,
    max_output_bytes: int | None = config.DEFAULT_MAX_OUTPUT_BYTES,
    progress: bool = True,
):
    """One row per (command, mode, repeat): seconds, exit code, output size, the sharded plan's strategy,
    the index's choice, and whether the output equals the sequential run's. Modes: sequential, sharded
    (with `shards`), indexed and indexed_sharded (with `index`). Refused commands (the agent's hostile or
    broken ones) are kept as one row flagged `refused`."""
    import pandas as pd  # heavy: loaded only when replaying

    engines = replay_engines(corpus, shards, index, index_fraction)
    rows: list[dict[str, Any]] = []
    try:
        for position, command in enumerate(progress_bar(commands, desc="replay", unit="cmd", disable=not progress)):
            try:
                pipeline = parse_command(command)
            except Refused:
                rows.append({"command": command, "mode": "refused", "repeat": 0, "seconds": 0.0,
                             "exit_code": None, "stdout_bytes": 0, "same_as_sequential": None, "refused": True})
                continue
            rows += _replay_command(engines, command, pipeline, position, repeats, timeout, max_output_bytes)
    finally:
        for engine in engines.values():
            close = getattr(engine, "close", None)  # a Ray executor holds actors
            if close is not None:
                close()
    return pd.DataFrame(rows)


def _replay_command(engines: dict[str, Engine], command: str, pipeline: Any, position: int, repeats: int,
                    timeout: float, max_output_bytes: int | None) -> list[dict[str, Any]]:
    """Every mode `repeats` times, the order alternating so that page-cache warmth favours none."""
    strategy = engines["sharded"].plan(pipeline).strategy if "sharded" in engines else "sequential"
    index_engine = engines.get("indexed")
    index_strategy = index_engine.strategy(pipeline) if index_engine is not None else None
    rows: list[dict[str, Any]] = []
    for repeat in range(repeats):
        order = list(engines) if (position + repeat) % 2 == 0 else list(reversed(engines))
        outputs = {}
        for mode in order:
            began = time.perf_counter()
            result = engines[mode].run(pipeline, timeout=timeout, max_output_bytes=max_output_bytes)
            seconds = time.perf_counter() - began
            outputs[mode] = (result.stdout, result.stderr, result.exit_code)
            rows.append({"command": command, "mode": mode, "repeat": repeat, "seconds": seconds,
                         "exit_code": result.exit_code, "stdout_bytes": len(result.stdout),
                         "timed_out": result.timed_out, "refused": False, "strategy": strategy,
                         "index_strategy": index_strategy})
        for row in rows[-len(order):]:
            row["same_as_sequential"] = outputs[row["mode"]] == outputs["sequential"]
    return rows


def latency_summary(replayed: Any):
    """Per mode: commands, mean, median, p90, p99, max seconds, and speed-up of the median and mean
    over sequential; refused commands are left out (they never reach a mode)."""
    import pandas as pd

    timed = replayed[~replayed["refused"].astype(bool)] if len(replayed) else replayed
    if len(timed) == 0:
        return pd.DataFrame(columns=["mode", "commands", "mean_s", "median_s", "p90_s", "p99_s", "max_s"])
    per_command = timed.groupby(["mode", "command"], sort=False)["seconds"].median().reset_index()
    rows = []
    for mode, group in per_command.groupby("mode", sort=False):
        s = group["seconds"]
        rows.append({"mode": mode, "commands": len(s), "mean_s": s.mean(), "median_s": s.median(),
                     "p90_s": s.quantile(0.9), "p99_s": s.quantile(0.99), "max_s": s.max()})
    table = pd.DataFrame(rows)
    base = table.set_index("mode").loc["sequential"] if "sequential" in set(table["mode"]) else None
    if base is not None:
        table["median_speedup"] = base["median_s"] / table["median_s"].where(table["median_s"] > 0)
        table["mean_speedup"] = base["mean_s"] / table["mean_s"].where(table["mean_s"] > 0)
    mismatches = timed[timed["same_as_sequential"] == False]  # noqa: E712 (a pandas mask, not a bool)
    table["output_mismatches"] = [int((mismatches["mode"] == m).sum()) for m in table["mode"]]
    return table
