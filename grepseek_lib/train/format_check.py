"""Does a trained policy follow the protocol? The format pass rate of full agent episodes on held-out questions.

Runs the real agent loop (agent.loop.run_batch, greedy) with the real shell tool and scores every episode with
the same strict `format_gate` the reward uses. Held out = evaluation benchmarks, never the training splits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.backends import make_batch_backend
from grepseek_lib.agent.evidence import (
    common_shapes,
    evidence_cut_by_cap,
    summarize_search,
    trajectory_report,
)
from grepseek_lib.agent.loop import episode_progress, even_batches, run_batch
from grepseek_lib.agent.trajectory import Trajectory, append_jsonl, load_jsonl
from grepseek_lib.data.formats import load_benchmark
from grepseek_lib.errors import UserError
from grepseek_lib.shell.open import open_tool, resolve_corpus
from grepseek_lib.train.reward import reward_parts

DEFAULT_BENCHMARKS = ("nq", "hotpotqa")
EPISODES_FILE = "format_check_episodes.jsonl"
RUN_FILE = "format_check_run.json"


def held_out_questions(benchmarks: Sequence[str], limit: int, benchmarks_dir: Path | None = None) -> list[dict]:
    """The first `limit` questions, taken round-robin over `benchmarks` (evaluation sets only)."""
    leaked = sorted(set(benchmarks) & set(config.TRAIN_SPLITS))
    if leaked:
        raise UserError(f"{leaked} are training splits; format-check needs held-out benchmarks")
    folder = Path(benchmarks_dir) if benchmarks_dir else config.benchmarks_dir()
    per_benchmark = [[{**r, "id": f"{name}:{r['id']}"} for r in load_benchmark(folder / f"{name}.jsonl")]
                     for name in benchmarks]
    items: list[dict] = []
    for index in range(max((len(rows) for rows in per_benchmark), default=0)):
        for rows in per_benchmark:
            if index < len(rows) and len(items) < limit:
                items.append(rows[index])
    return items


def search_habits(trajectories: Sequence[Any], max_tool_calls: int = config.MAX_TOOL_CALLS) -> dict[str, int]:
    """Episodes that ran some command more than once (a loop: the same command prints the same output) and
    episodes that spent every tool call: the two habits that separate a searcher from a stuck policy."""
    return {"repeated_command_episodes": sum(trajectory_report(t)["repeated_command"] for t in trajectories),
            "all_calls_spent_episodes": sum(t.tool_calls >= max_tool_calls for t in trajectories)}


def by_benchmark(trajectories: Sequence[Any], parts: Sequence[dict]) -> dict[str, dict[str, float]]:
    """Format pass, F1 and the search rates per benchmark (episode ids are `benchmark:id`)."""
    groups: dict[str, list[int]] = {}
    for index, trajectory in enumerate(trajectories):
        groups.setdefault(str(trajectory.id).split(":", 1)[0], []).append(index)
    table = {}
    for name, indices in groups.items():
        n = len(indices)
        table[name] = {"episodes": n, "format_pass_rate": sum(parts[i]["format_ok"] for i in indices) / n,
                       "mean_f1": sum(parts[i]["f1"] for i in indices) / n,
                       **summarize_search([trajectory_report(trajectories[i]) for i in indices])}
    return table


def format_check(model: str, *, limit: int = 50, benchmarks: Sequence[str] = DEFAULT_BENCHMARKS,
                 corpus: Path | None = None, shards: Path | None = None, batch_size: int = 8,
                 max_new_tokens: int = 512, benchmarks_dir: Path | None = None,
                 out: Path | None = None, max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS,
                 redraws: int = 0) -> dict[str, Any]:
    """Run `limit` greedy episodes; returns the pass rate and its parts. With `out`, episodes are appended
    there a batch at a time and a rerun with the same settings resumes after the last finished batch.
    `max_obs_tokens` should be the cap the policy was trained under (the prompt states it, the tool cuts there).
    `redraws` > 0 draws a proposed repeat again (`run_batch`)."""
    corpus, shards = resolve_corpus(corpus, shards)
    items = held_out_questions(benchmarks, limit, benchmarks_dir)
    out = Path(out) if out is not None else None
    run = {"model": str(model), "corpus": str(Path(corpus).resolve()), "max_new_tokens": max_new_tokens,
           "max_obs_tokens": max_obs_tokens, **({"redraws": redraws} if redraws else {})}
    finished = _resume(out, run) if out is not None else {}
    todo = [item for item in items if item["id"] not in finished]
    start = time.time()
    if todo:
        backend = make_batch_backend("hf", model, batch_size)
        tool = open_tool(corpus, shards, tokenizer=backend.tokenizer, max_obs_tokens=max_obs_tokens)
        with episode_progress(len(todo), "format-check") as on_turn:
            for batch in even_batches(todo, batch_size):
                done = run_batch(batch, backend, tool, max_new_tokens=max_new_tokens, temperature=0.0,
                                 redraws=redraws, on_turn=on_turn)
                if out is not None:
                    append_jsonl(done, out / EPISODES_FILE)
                finished.update({t.id: t for t in done})
    trajectories = [finished[item["id"]] for item in items]
    parts = [reward_parts(t.assistant_texts(), t.golds) for t in trajectories]
    n = max(len(parts), 1)
    reasons: dict[str, int] = {}
    for p in parts:
        if not p["format_ok"]:
            key = p["reason"].split(": ", 1)[-1]
            reasons[key] = reasons.get(key, 0) + 1
    result = {"model": str(model), "episodes": len(parts),
              "format_pass_rate": sum(p["format_ok"] for p in parts) / n,
              "answer_rate": sum(p["answered"] for p in parts) / n,
              "mean_tool_calls": sum(p["n_tool_calls"] for p in parts) / n,
              "mean_f1": sum(p["f1"] for p in parts) / n,
              "mean_reward": sum(p["reward"] for p in parts) / n,
              "failures": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
              **search_habits(trajectories),
              **summarize_search([trajectory_report(t) for t in trajectories]),
              "by_benchmark": by_benchmark(trajectories, parts),
              "evidence_cut_by_cap_episodes": _cut_by_cap(trajectories, corpus, shards),
              "episode_shapes": common_shapes(trajectories),
              "wall_s": round(time.time() - start, 1)}
    if out is not None:
        (out / "format_check.json").write_text(json.dumps(result, indent=2))
    return result


def _cut_by_cap(trajectories: Sequence[Trajectory], corpus: Path, shards: Path | None) -> int:
    """Episodes whose evidence only a larger observation cap would have shown (their cut outputs run again
    in full): how much raising `max_obs_tokens` could add to evidence recall."""
    tool = open_tool(corpus, shards)

    def rerun(command: str) -> str:
        return tool.run(command).stdout.decode("utf-8", errors="replace")

    return sum(evidence_cut_by_cap(t, rerun) for t in trajectories)


def _resume(out: Path, run: dict[str, Any]) -> dict[str, Trajectory]:
    """Episodes already in `out` by id; refuses a folder holding another run's episodes."""
    out.mkdir(parents=True, exist_ok=True)
    recorded = out / RUN_FILE
    episodes = out / EPISODES_FILE
    if recorded.is_file() and _read_json(recorded) != run:
        raise UserError(f"{out} holds a format-check of other settings ({recorded}); give another --out "
                        "or delete that folder")
    recorded.write_text(json.dumps(run, indent=2), encoding="utf-8")
    return {t.id: t for t in load_jsonl(episodes)} if episodes.is_file() else {}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # unreadable: not this run's record
