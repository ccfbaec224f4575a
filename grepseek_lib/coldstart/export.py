"""Records -> the chat dataset (JSONL + parquet), the train/dev split, and the stats report.

Every processed question appends one line to records.jsonl (accepted or not, with the reason), so a
crash loses at most the question in flight and a rerun skips what is done. The dataset files are
rebuilt from the records in benchmark order, so the same inputs and seed give byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.evidence import is_count
from grepseek_lib.agent.prompt import ToolBudget, initial_messages, repeat_payload
from grepseek_lib.coldstart.accept import STAGES, Outcome
from grepseek_lib.coldstart.roles import Item
from grepseek_lib.coldstart.strategies import STRATEGIES, strategy_of
from grepseek_lib.shell.tool import observation_payload, observation_text

RECORDS = "records.jsonl"
DATASET_FIELDS = ("id", "source", "question", "golds", "n_tool_calls", "messages")


#: Share of trajectories that replay, after a call that printed a passage, the mistake a small policy makes
#: there (the same command again), as a no-loss turn refused by the tool, so the data shows the way on.
REPEAT_RECOVERY_RATE = 0.0


def _bucket(key: str) -> int:
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % 10_000


def repeat_point(item_id: str, turns: list, rate: float, max_tool_calls: int = config.MAX_TOOL_CALLS) -> int | None:
    """The index of the turn after which a refused repeat is replayed, or None: chosen from the question id
    (stable across runs), among calls that printed a read (not a count) and are followed by another turn,
    and only where the budget holds one more call."""
    calls = [i for i, t in enumerate(turns) if t.command is not None]
    if rate <= 0 or len(calls) >= max_tool_calls or _bucket(f"repeat:{item_id}") >= rate * 10_000:
        return None
    printed = [i for i in calls if i + 1 < len(turns) and not is_count(turns[i].command)
               and str((turns[i].payload or {}).get("stdout") or "").strip()]
    return printed[_bucket(f"repeat-at:{item_id}") % len(printed)] if printed else None


def to_messages(item: Item, outcome: Outcome, n_lines: int, max_tool_calls: int = config.MAX_TOOL_CALLS,
                max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS, repeat_at: int | None = None) -> list[dict]:
    """The conversation exactly as the agent sees it at inference: same prompt (stating the observation cap
    the tool cut these payloads at), renderer and payload text, the loop's budget note on the last allowed
    tool call, and after turn `repeat_at` the same turn again, marked `no_loss`, with the loop's refusal."""
    messages = initial_messages(item.question, n_lines, max_tool_calls=max_tool_calls,
                                max_obs_tokens=max_obs_tokens)
    budget = ToolBudget(max_tool_calls)
    for index, turn in enumerate(outcome.turns):
        content = render_turn(turn.think, turn.command, turn.answer)
        messages.append({"role": "assistant", "content": content})
        if turn.command is None:
            continue
        messages.append({"role": "tool", "content": budget.observe(observation_text(turn.payload), turn.command)})
        if index == repeat_at:
            messages.append({"role": "assistant", "content": content, "no_loss": True})
            refused = repeat_payload(turn.command, budget.earlier_call(turn.command))
            messages.append({"role": "tool", "content": budget.observe(observation_text(refused), turn.command)})
    return messages


def make_record(item: Item, outcome: Outcome, n_lines: int, max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS,
                repeat_recovery_rate: float = REPEAT_RECOVERY_RATE) -> dict[str, Any]:
    record = {"id": item.id, "source": item.source, "question": item.question, "golds": list(item.golds),
              "accepted": outcome.accepted, "stage": outcome.stage, "reason": outcome.reason,
              "answer": outcome.answer, "f1": round(outcome.f1, 4), "hops": outcome.hops,
              "n_tool_calls": sum(t.command is not None for t in outcome.turns),
              "commands_run": outcome.commands_run, "plans_tried": outcome.plans_tried,
              "attempts": [list(entry) for entry in outcome.log],
              "first_strategy": first_strategy(outcome.log),
              "strategies": [strategy_of(t.command) for t in outcome.turns
                             if t.command is not None and not is_count(t.command)]}
    if outcome.accepted:
        record["messages"] = to_messages(item, outcome, n_lines, max_obs_tokens=max_obs_tokens,
                                         repeat_at=repeat_point(item.id, outcome.turns, repeat_recovery_rate))
    return record


def first_strategy(log: list[tuple[int, str, str]]) -> str:
    """The strategy of the first command the Tutor tried for the first hop ("none" if it tried none)."""
    first_hop = [command for hop, command, _ in log if hop == 1]
    return strategy_of(first_hop[0]) if first_hop else "none"


def strategy_report(group: list[dict]) -> dict[str, Any]:
    """Acceptance per first-search strategy, and how the accepted trajectories search: the strategy of
    their first call, empty tool replies, and searches that follow an empty or useless one."""
    report: dict[str, Any] = {}
    for name in (*STRATEGIES, "other", "none"):
        tried = [r for r in group if r.get("first_strategy") == name]
        if tried:
            accepted = sum(r["accepted"] for r in tried)
            report[name] = {"questions": len(tried), "accepted": accepted,
                            "acceptance": round(accepted / len(tried), 4)}
    accepted = [r for r in group if r["accepted"]]
    tools = [m for r in accepted for m in r["messages"] if m["role"] == "tool"]
    firsts = Counter((r.get("strategies") or ["none"])[0] for r in accepted)
    return {"acceptance_by_first_strategy": report,
            "first_call_strategy": {k: firsts[k] for k in sorted(firsts)},
            "tool_replies": len(tools),
            "replayed_repeats": sum(any(m.get("no_loss") for m in r["messages"]) for r in accepted),
            "empty_tool_replies": sum(payload is not None and not str(payload.get("stdout") or "").strip()
                                      for payload in map(observation_payload, (m["content"] for m in tools)))}


def load_records(path: Path) -> dict[tuple[str, str], dict]:
    """Records by (source, id). A half-written last line (a killed run) is cut off so appends stay valid."""
    records: dict[tuple[str, str], dict] = {}
    if not path.exists():
        return records
    good_end = 0
    with path.open("rb") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                break
            if not line.endswith(b"\n") or not isinstance(record, dict):
                break
            records[(str(record.get("source")), str(record.get("id")))] = record
            good_end += len(line)
    if good_end != path.stat().st_size:
        with path.open("r+b") as handle:
            handle.truncate(good_end)
    return records


def append_record(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def split_of(question_id: str, dev_percent: float) -> str:
    """train or dev, from a hash of the question id: stable across runs, machines and subsets."""
    return "dev" if _bucket(question_id) < dev_percent * 100 else "train"


def export(out: Path, ordered: list[dict], dev_percent: float) -> dict[str, int]:
    """Write {train,dev}.jsonl and .parquet from the accepted records (in the given order)."""
    import pandas as pd

    rows: dict[str, list[dict]] = {"train": [], "dev": []}
    for record in ordered:
        if record.get("accepted"):
            rows[split_of(record["id"], dev_percent)].append({k: record[k] for k in DATASET_FIELDS})
    for split, items in rows.items():
        tmp = out / f"{split}.jsonl.tmp"
        with tmp.open("w", encoding="utf-8") as handle:
            for row in items:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, out / f"{split}.jsonl")
        frame = pd.DataFrame(items, columns=list(DATASET_FIELDS))
        frame.to_parquet(out / f"{split}.parquet", index=False)
    return {split: len(items) for split, items in rows.items()}


def stats(ordered: list[dict]) -> dict[str, Any]:
    """Acceptance per stage and dataset, tool calls per accepted trajectory, rejection reasons."""
    report: dict[str, Any] = {}
    for source in [*dict.fromkeys(r["source"] for r in ordered), "all"]:
        group = [r for r in ordered if source == "all" or r["source"] == source]
        passed = {stage: sum(STAGES.index(r["stage"]) > i or (r["accepted"] and r["stage"] == stage)
                             for r in group) for i, stage in enumerate(STAGES)}
        accepted = [r for r in group if r["accepted"]]
        calls = Counter(r["n_tool_calls"] for r in accepted)
        report[source] = {
            "questions": len(group), "accepted": len(accepted),
            "acceptance": round(len(accepted) / len(group), 4) if group else 0.0,
            "passed_stage": passed,
            "tool_calls_mean": round(sum(r["n_tool_calls"] for r in accepted) / len(accepted), 3) if accepted else 0.0,
            "tool_calls_hist": {str(k): calls[k] for k in sorted(calls)},
            **strategy_report(group),
            "rejections": dict(Counter(f"{r['stage']}:{r['reason'].split(':')[0] if r['reason'].startswith('teacher') else r['reason']}"
                                       for r in group if not r["accepted"]).most_common()),
        }
    return report


def turn_tokens(ordered: list[dict], tokenizer: Any) -> dict[str, int]:
    """Tokens per assistant turn of the accepted trajectories: the per-turn generation cap
    (`max_new_tokens`) must hold the longest, or the trained agent is cut mid-call."""
    sizes = sorted(len(tokenizer(m["content"])["input_ids"]) for r in ordered if r["accepted"]
                   for m in r["messages"] if m["role"] == "assistant")
    if not sizes:
        return {}
    return {"median": sizes[len(sizes) // 2], "p99": sizes[min(len(sizes) - 1, len(sizes) * 99 // 100)],
            "max": sizes[-1]}


def turn_cap_warning(report: dict[str, Any], max_new_tokens: int) -> str | None:
    """One line when the per-turn cap would cut trajectories the policy is trained on, else None."""
    sizes = report.get("all", {}).get("assistant_turn_tokens") or {}
    if sizes.get("max", 0) <= max_new_tokens:
        return None
    return (f"warning: max_new_tokens {max_new_tokens} is below the longest cold-start turn ({sizes['max']} tokens,"
            f" p99 {sizes['p99']}): the trained agent will be cut mid-call; raise max_new_tokens")


def format_table(report: dict[str, Any]) -> str:
    head = f"{'dataset':<16}{'n':>5}{'accepted':>10}{'rate':>8}{'calls':>7}  " + " ".join(f"{s[:8]:>9}" for s in STAGES)
    lines = [head, "-" * len(head)]
    for source, row in report.items():
        lines.append(f"{source:<16}{row['questions']:>5}{row['accepted']:>10}{row['acceptance']:>8.1%}"
                     f"{row['tool_calls_mean']:>7.2f}  " + " ".join(f"{row['passed_stage'][s]:>9}" for s in STAGES))
    firsts = report.get("all", {}).get("acceptance_by_first_strategy", {})
    if firsts:
        lines.append("first search (accepted/tried): " + ", ".join(f"{k} {v['accepted']}/{v['questions']}"
                                                                  for k, v in firsts.items()))
    top = Counter()
    for source, row in report.items():
        if source != "all":
            top.update(row["rejections"])
    if top:
        lines.append("rejections: " + ", ".join(f"{k} {v}" for k, v in top.most_common(8)))
    sizes = report.get("all", {}).get("assistant_turn_tokens")
    if sizes:
        lines.append("tokens per assistant turn: " + ", ".join(f"{k} {v}" for k, v in sizes.items()))
    return "\n".join(lines)
