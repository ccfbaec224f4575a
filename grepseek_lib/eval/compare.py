"""One table over systems (BM25 baseline, zero-shot, SFT, GRPO) scored on the same questions.

Each system's per-question records (eval runner's records.jsonl, or BM25 rows) are aggregated with
the ONE metrics.aggregate, then stacked; questions missing from any system are dropped first, so
every number compares the same questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

METRICS = ("em", "f1")


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
    from grepseek_lib.eval.runner import read_records

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
    """Long table: system, benchmark (benchmarks, then micro and macro), n, em, f1."""
    import pandas as pd

    from grepseek_lib.eval.metrics import aggregate

    parts = []
    for system, frame in common_questions(frames).items():
        table = aggregate(frame, by="benchmark", metrics=METRICS).reset_index()
        table.insert(0, "system", system)
        parts.append(table)
    if not parts:
        return pd.DataFrame(columns=["system", "benchmark", "n", *METRICS])
    return pd.concat(parts, ignore_index=True)


def wide_table(table: Any, metric: str = "f1"):
    """system x benchmark grid of one metric (the paper's layout)."""
    wide = table.pivot(index="system", columns="benchmark", values=metric)
    wide = wide.reindex(index=list(dict.fromkeys(table["system"])), columns=list(dict.fromkeys(table["benchmark"])))
    wide.columns.name = None
    return wide.reset_index()
