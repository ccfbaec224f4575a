"""Filters over the episode frame, and the same question seen by two systems.

Every filter is a keyword of `select`: None keeps everything, a value or a list of values keeps the
matching episodes, so a notebook cell reads like the question it asks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

#: Columns matched by equality (a value or a list of values) in `select`.
EQUALITY_FILTERS = ("run", "system", "source", "benchmark", "outcome", "f1_bucket", "stop_reason")


def _as_set(value: Any) -> set:
    if isinstance(value, str) or not isinstance(value, Iterable):
        return {value}
    return set(value)


def select(episodes: pd.DataFrame, *, em: float | None = None, f1_min: float | None = None,
           f1_max: float | None = None, tool_calls: int | tuple[int, int] | None = None,
           program: str | Iterable[str] | None = None, repeated: bool | None = None,
           **equal: Any) -> pd.DataFrame:
    """Episodes matching every given filter.

    equal: run, system, source, benchmark, outcome (correct / partial / wrong), f1_bucket, stop_reason
    (answered / format error / budget / context); em: 1.0 or 0.0; f1_min / f1_max: inclusive bounds;
    tool_calls: a count or an inclusive (low, high) range; program: episodes whose commands used it (any
    of several); repeated: True for episodes that ran a command twice, False for those that never did.
    """
    unknown = set(equal) - set(EQUALITY_FILTERS)
    if unknown:
        raise ValueError(f"unknown filter(s) {sorted(unknown)}; known: {', '.join(EQUALITY_FILTERS)}")
    keep = pd.Series(True, index=episodes.index)
    for column, value in equal.items():
        if value is not None:
            keep &= episodes[column].isin(_as_set(value))
    if em is not None:
        keep &= episodes["em"] == em
    if f1_min is not None:
        keep &= episodes["f1"] >= f1_min
    if f1_max is not None:
        keep &= episodes["f1"] <= f1_max
    if tool_calls is not None:
        low, high = tool_calls if isinstance(tool_calls, tuple) else (tool_calls, tool_calls)
        keep &= episodes["tool_calls"].between(low, high)
    if program is not None:
        wanted = _as_set(program)
        keep &= episodes["programs"].map(lambda used: bool(wanted & set(used)))
    if repeated is not None:
        keep &= (episodes["repeated_commands"] > 0) == repeated
    return episodes[keep]


def versus(episodes: pd.DataFrame, right: str, wrong: str, *, metric: str = "em") -> pd.DataFrame:
    """Questions that system `right` got right (metric 1) and system `wrong` did not, one row each, both
    answers side by side: e.g. versus(frame, right="sft", wrong="grpo") for what GRPO unlearned."""
    keys = ["run", "benchmark", "id"]
    columns = [*keys, "question", "golds", "answer", "em", "f1", "stop_reason", "tool_calls", "episode"]
    a = episodes[episodes["system"] == right][columns]
    b = episodes[episodes["system"] == wrong][[c for c in columns if c not in ("question", "golds")]]
    pairs = a.merge(b, on=keys, suffixes=(f"_{right}", f"_{wrong}"))
    return pairs[(pairs[f"{metric}_{right}"] >= 1) & (pairs[f"{metric}_{wrong}"] < 1)].reset_index(drop=True)


def counts(episodes: pd.DataFrame, by: str | list[str] = "system") -> pd.DataFrame:
    """Episodes per group and outcome (correct / partial / wrong / n/a), for a first look at a run."""
    table = episodes.groupby(by)["outcome"].value_counts().unstack(fill_value=0)
    return table.reset_index()
