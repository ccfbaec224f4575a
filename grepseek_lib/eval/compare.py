"""One table over systems (BM25 baseline, zero-shot, SFT, GRPO) scored on the same questions.

Each system's per-question records (eval runner's records.jsonl, or BM25 rows) are aggregated with
the ONE metrics.aggregate, then stacked; questions missing from any system are dropped first, so
every number compares the same questions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grepseek_lib.eval.runner import read_records
from grepseek_lib.metrics import MACRO, MICRO, aggregate

METRICS = ("em", "f1")
#: The search report's per-question flags (agent.evidence), averaged per benchmark like the metrics.
SEARCH_METRICS = ("evidence_found", "repeated_command", "format_pass")


def records_frame(records: list[dict] | Any, system: str):
    import pandas as pd

    frame = pd.DataFrame(list(records)) if not isinstance(records, pd.DataFrame) else records.copy()
    if frame.empty:
        frame = pd.DataFrame(columns=["benchmark", "id", *METRICS])
    frame["id"] = frame["id"].astype(str)
    frame.insert(0, "system", system)
    return frame


def load_system_records(eval_dirs: Mapping[str, Path]):
    """Per-question frames of systems evaluated by eval.runner (one out_dir each)."""
    return {system: records_frame(read_records(Path(d)), system) for system, d in eval_dirs.items()}


def common_questions(frames: Mapping[str, Any]):
    """Keep only the (benchmark, id) pairs every system answered: one question set for all."""
    keys = None
    for frame in frames.values():
        pairs = set(zip(frame["benchmark"], frame["id"], strict=True))
        keys = pairs if keys is None else keys & pairs
    keys = keys or set()
    return {
        system: frame[[(b, i) in keys for b, i in zip(frame["benchmark"], frame["id"], strict=True)]]
        for system, frame in frames.items()
    }


def comparison_table(frames: Mapping[str, Any]):
    """Long table: system, benchmark (benchmarks, then micro and macro), n, em, f1, f1_se (the standard
    error of the mean F1: with a few questions per benchmark, differences below ~2 of it are noise)."""
    import pandas as pd

    parts = []
    for system, frame in common_questions(frames).items():
        table = aggregate(frame, by="benchmark", metrics=METRICS).reset_index()
        table["f1_se"] = table["benchmark"].map(f1_standard_errors(frame))
        table.insert(0, "system", system)
        parts.append(table)
    if not parts:
        return pd.DataFrame(columns=["system", "benchmark", "n", *METRICS, "f1_se"])
    return pd.concat(parts, ignore_index=True)


def f1_standard_errors(frame: Any) -> dict[str, float]:
    """Standard error of mean F1 per benchmark, over all questions (micro), and of the macro mean."""
    def se(values: Any) -> float:
        values = values.astype(float)
        return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else float("nan")

    per = {name: se(group["f1"]) for name, group in frame.groupby("benchmark", sort=False)}
    errors = {**per, MICRO: se(frame["f1"]) if len(frame) else float("nan")}
    errors[MACRO] = math.sqrt(sum(v * v for v in per.values())) / len(per) if per else float("nan")
    return errors


def search_table(frames: Mapping[str, Any]):
    """Evidence recall, the repeated-command rate and the format pass rate per system and benchmark, on the
    same questions (BM25: whether its top-k passages held a gold answer; it runs no commands)."""
    import pandas as pd

    parts = []
    for system, frame in common_questions(frames).items():
        present = [m for m in SEARCH_METRICS if m in frame.columns]
        if not present or frame.empty:
            continue
        data = frame.assign(**{m: frame[m].astype(float) for m in present})
        table = aggregate(data, by="benchmark", metrics=present).reset_index()
        table.insert(0, "system", system)
        parts.append(table)
    if not parts:
        return pd.DataFrame(columns=["system", "benchmark", "n", *SEARCH_METRICS])
    table = pd.concat(parts, ignore_index=True)
    for metric in SEARCH_METRICS:  # every column, even when no system's records have it (older runs)
        if metric not in table.columns:
            table[metric] = float("nan")
    return table


def wide_table(table: Any, metric: str = "f1"):
    """system x benchmark grid of one metric (the paper's layout)."""
    wide = table.pivot(index="system", columns="benchmark", values=metric)
    wide = wide.reindex(index=list(dict.fromkeys(table["system"])), columns=list(dict.fromkeys(table["benchmark"])))
    wide.columns.name = None
    return wide.reset_index()
