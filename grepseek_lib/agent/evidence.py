"""Did the search find the answer? Evidence recall and the two search habits that explain a miss.

An episode has found its evidence when some tool output holds a gold answer, compared as the metrics
compare answers (SQuAD normalisation, whole tokens). Corpus lines are JSON with `\\uXXXX` escapes, so each
printed line is decoded before matching: "Zürich" is found whether or not the corpus escaped it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from grepseek_lib.metrics import normalize_answer


def readable(stdout: str) -> str:
    """The printed text as a reader sees it: each corpus line's `contents` decoded, other lines as they are."""
    lines = []
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, ValueError):
            lines.append(line)
            continue
        lines.append(str(record.get("contents", line)) if isinstance(record, dict) else line)
    return "\n".join(lines)


def answer_in(text: str, golds: str | Iterable[str]) -> bool:
    """Whether a normalised gold answer occurs as whole tokens in the normalised text."""
    haystack = f" {normalize_answer(text)} "
    golds = [golds] if isinstance(golds, str) else list(golds)
    return any(f" {gold} " in haystack for gold in (normalize_answer(g) for g in golds) if gold)


def search_report(commands: Sequence[str], stdouts: Sequence[str], golds: str | Iterable[str]) -> dict[str, Any]:
    """One episode's search: evidence found, first search empty (None without a search), a command repeated."""
    return {"evidence_found": any(answer_in(readable(out), golds) for out in stdouts),
            "first_search_empty": (not stdouts[0].strip()) if stdouts else None,
            "repeated_command": repeats_a_command(commands)}


def repeats_a_command(commands: Sequence[str]) -> bool:
    """Whether some command is one the episode already sent (exactly, as the loop's repeat refusal sees it)."""
    return len(set(commands)) < len(commands)


def evidence_cut_by_cap(trajectory: Any, rerun: Callable[[str], str]) -> bool:
    """Whether the episode's evidence was lost to the observation cap rather than to its searches: no
    observation it saw held a gold answer, but the full output (`rerun(command)`) of one it saw cut did."""
    if trajectory_report(trajectory)["evidence_found"]:
        return False
    return any(answer_in(readable(rerun(turn.action.command)), trajectory.golds)
               for turn in trajectory.turns
               if isinstance(turn.observation, dict) and turn.observation.get("truncated") and turn.action.command)


def ran_calls(trajectory: Any) -> list[tuple[str, str]]:
    """(command, stdout) of every tool call that ran (format errors and calls past the budget have no
    payload)."""
    return [(turn.action.command or "", str(turn.observation.get("stdout") or ""))
            for turn in trajectory.turns if isinstance(turn.observation, dict)]


def trajectory_report(trajectory: Any) -> dict[str, Any]:
    """`search_report` of an agent-loop Trajectory (eval records, format-check episodes), plus whether the
    policy proposed a repeat at all (one the loop drew again never ran: `Turn.redrawn`)."""
    ran = ran_calls(trajectory)
    report = search_report([command for command, _ in ran], [stdout for _, stdout in ran], trajectory.golds)
    redrawn = any(getattr(turn, "redrawn", None) for turn in trajectory.turns)
    return {**report, "proposed_repeat": report["repeated_command"] or redrawn}


#: A first stage that counts its matches (`rg -c`, `grep --count`); `head -c N` later in a pipe is no count.
_MATCHER_COUNT = re.compile(r"^\s*(rg|grep)\s[^|]*?(?<=\s)(-c|--count)(\s|$)")


def is_count(command: str) -> bool:
    """A command that ends in a line count (`... | wc -l`): the cold start's count-first step."""
    return command.rstrip().endswith("| wc -l")


def episode_shape(trajectory: Any) -> str:
    """The episode as a string of moves, e.g. "C0 R0 A": C0/C+ a count that printed 0 / more, R0/R+ a read
    that printed nothing / something, E a turn the loop could not run, A the answer. Shapes show which
    move a policy has learned to repeat (a count of 0 followed by a read of the same search, say)."""
    moves = []
    for turn in trajectory.turns:
        if turn.action.kind == "answer":
            moves.append("A")
        elif turn.observation is None:
            moves.append("E")
        else:
            moves.append(tool_move(turn.action.command or "", str(turn.observation.get("stdout") or "")))
    return " ".join(moves)


def tool_move(command: str, stdout: str) -> str:
    """One tool call as a move: C0/C+ a count that printed 0 / more, R0/R+ a read that printed nothing /
    something."""
    out = stdout.strip()
    if is_count(command) or _MATCHER_COUNT.search(command):
        return "C0" if out in ("", "0") else "C+"
    return "R+" if out else "R0"


def common_shapes(trajectories: Iterable[Any], top: int = 8) -> dict[str, int]:
    """The `top` most frequent episode shapes with their counts, most frequent first."""
    return dict(Counter(episode_shape(t) for t in trajectories).most_common(top))


def summarize_search(reports: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Rates over episodes: evidence recall, empty first searches (of episodes that searched), repeats run
    and, for agent-loop reports, repeats proposed (run or drawn again)."""
    n = max(len(reports), 1)
    searched = [r for r in reports if r.get("first_search_empty") is not None]
    rates = {"evidence_recall": sum(bool(r["evidence_found"]) for r in reports) / n,
             "first_search_empty_rate": sum(bool(r["first_search_empty"]) for r in searched) / max(len(searched), 1),
             "repeated_command_rate": sum(bool(r["repeated_command"]) for r in reports) / n}
    if reports and all("proposed_repeat" in r for r in reports):
        rates["proposed_repeat_rate"] = sum(bool(r["proposed_repeat"]) for r in reports) / n
    return rates


def first_repeat_after(trajectory: Any) -> str | None:
    """What the output just before the episode's first repeated command was: "empty", "printed", or None
    when no command repeats. A policy that repeats after an empty output has not learned to widen; one
    that repeats after a printed one has not learned to move on from a passage that lacks the answer."""
    seen: set[str] = set()
    previous = ""
    for command, stdout in ran_calls(trajectory):
        if command in seen:
            return "printed" if previous.strip() else "empty"
        seen.add(command)
        previous = stdout
    return None


def next_moves(trajectory: Any) -> Counter:
    """Each call after the first, as (what the call before printed, count or read, same or new search),
    the search being the pipeline's first stage: the moves cold-start data teaches, e.g. how often a
    count that printed is followed by the same search read."""
    moves: Counter = Counter()
    ran = ran_calls(trajectory)
    for (before, out), (command, _) in zip(ran, ran[1:], strict=False):
        move = tool_move(before, out)
        printed = "printed something" if move.endswith("+") else "printed nothing"
        kind = "count" if move.startswith("C") else "read"
        same = "same search" if before.split("|")[0].strip() == command.split("|")[0].strip() else "new search"
        moves[(printed, kind, same)] += 1
    return moves
