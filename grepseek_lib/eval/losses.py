"""Where the agent loses its questions: each episode is put down to one cause, so the next change to the
recipe can target the biggest loss.

Causes are checked in order and the first that applies wins: a right answer (EM) is `correct`; an episode
ended by two format errors in a row is `format_errors`; one that ran some command twice is
`repeated_command` (a loop wastes the budget whatever it answers); one that never answered is `budget`
(the tool budget or the context ran out); one whose tool outputs held a gold answer but answered wrong is
`read_but_wrong`; the rest never printed the answer: `never_found`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grepseek_lib.agent.evidence import common_shapes

CAUSES = ("correct", "format_errors", "repeated_command", "budget", "read_but_wrong", "never_found")


def _flag(record: Mapping[str, Any], key: str) -> bool:
    value = record.get(key)
    return bool(value) and value == value  # NaN (a record from before the key existed) is False


def loss_cause(record: Mapping[str, Any]) -> str:
    """The one cause an eval record (eval.runner's layout) is put down to."""
    if float(record.get("em") or 0.0) >= 1.0:
        return "correct"
    if record.get("stop_reason") == "format_errors":
        return "format_errors"
    if _flag(record, "repeated_command"):
        return "repeated_command"
    if record.get("stop_reason") in ("budget", "context"):
        return "budget"
    if _flag(record, "evidence_found"):
        return "read_but_wrong"
    return "never_found"


def loss_table(frames: Mapping[str, Any], *, by: str | None = None):
    """Share of episodes per cause, one row per agent system (and per `by` value, e.g. "benchmark"), with n.

    `frames` maps system -> per-question records; systems without agent episodes (BM25) are skipped.
    """
    import pandas as pd

    rows = []
    for system, frame in frames.items():
        if "stop_reason" not in frame.columns or frame.empty:
            continue
        groups = frame.groupby(by, sort=False) if by else [(None, frame)]
        for key, group in groups:
            causes = group.apply(lambda r: loss_cause(r.to_dict()), axis=1)
            shares = causes.value_counts(normalize=True)
            row = {"system": system, **({by: key} if by else {}), "n": len(group)}
            rows.append({**row, **{c: float(shares.get(c, 0.0)) for c in CAUSES}})
    columns = ["system", *([by] if by else []), "n", *CAUSES]
    return pd.DataFrame(rows, columns=columns)


def top_cause(table: Any, system: str) -> str:
    """The biggest cause of lost episodes (anything but `correct`) of one system in a `loss_table`."""
    row = table[table["system"] == system].iloc[0]
    return max(CAUSES[1:], key=lambda cause: float(row[cause]))


def shape_table(episodes: Mapping[str, Sequence[Any]], top: int = 5):
    """The `top` most common episode shapes of each system (agent/evidence.episode_shape: "C0 R0 A" is a count
    of 0, an empty read, an answer), with their counts and shares: the moves a policy has learned to repeat."""
    import pandas as pd

    rows = [{"system": system, "shape": shape, "episodes": count, "share": count / max(len(runs), 1)}
            for system, runs in episodes.items() for shape, count in common_shapes(runs, top).items()]
    return pd.DataFrame(rows, columns=["system", "shape", "episodes", "share"])
