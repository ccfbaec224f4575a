"""The run folder layout, shared by the notebooks (writers) and the pipeline runner (reader).

runs/NAME/
  00_data.ipynb ...        executed notebooks
  figures/<stage>_<name>.png
  tables/<stage>_<name>.csv (+ .md)
  stages/<stage>.json      done marker: key figures, parameters, interpreter; written last
  summary.csv, summary.md  every stage's key figures in one table
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any


def figures_dir(run_dir: str | Path) -> Path:
    return _ensure(Path(run_dir) / "figures")


def tables_dir(run_dir: str | Path) -> Path:
    return _ensure(Path(run_dir) / "tables")


def stages_dir(run_dir: str | Path) -> Path:
    return _ensure(Path(run_dir) / "stages")


def artifacts_dir(run_dir: str | Path, name: str) -> Path:
    """A stage's heavier outputs (checkpoints, trajectories) that later stages read."""
    return _ensure(Path(run_dir) / name)


def marker_path(run_dir: str | Path, stage: str) -> Path:
    return Path(run_dir) / "stages" / f"{stage}.json"


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_table(df: Any, run_dir: str | Path, stage: str, name: str) -> Path:
    """Write a pandas table as CSV (for machines) and markdown (for the closing note)."""
    base = tables_dir(run_dir) / f"{stage}_{name}"
    df.to_csv(base.with_suffix(".csv"), index=False)
    base.with_suffix(".md").write_text(to_markdown(df) + "\n")
    return base.with_suffix(".csv")


def save_jsonl_table(source: str | Path, run_dir: str | Path, stage: str, name: str) -> Any:
    """Read a JSONL log (a trainer's metrics) into a frame, save it as a table, return it for display."""
    import pandas as pd

    frame = pd.read_json(Path(source), lines=True)
    save_table(frame, run_dir, stage, name)
    return frame


def save_figure(fig: Any, run_dir: str | Path, stage: str, name: str) -> Path:
    path = figures_dir(run_dir) / f"{stage}_{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def mark_done(run_dir: str | Path, stage: str, summary: dict[str, Any], params: dict[str, Any] | None = None) -> Path:
    """The stage's done marker, written as its last act: the runner skips a stage that has one."""
    path = marker_path(run_dir, stage)
    stages_dir(run_dir)
    record = {
        "stage": stage,
        "summary": {k: _plain(v) for k, v in summary.items()},
        "params": params or {},
        "python": sys.executable,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, default=str))
    tmp.replace(path)
    return path


def read_marker(run_dir: str | Path, stage: str) -> dict[str, Any] | None:
    path = marker_path(run_dir, stage)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None  # a torn marker counts as not done


def _plain(value: Any) -> Any:
    """Numpy scalars and friends -> JSON numbers; NaN -> None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def to_markdown(df: Any, floatfmt: str = ".4g") -> str:
    """A GitHub markdown table without the optional `tabulate` dependency."""
    cols = [str(c) for c in df.columns]

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "" if math.isnan(v) else format(v, floatfmt)
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)
