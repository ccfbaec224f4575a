"""The notebooks' figures, one function each, so a notebook cell is a single call.

Every function takes a pandas frame and returns a matplotlib Figure (shown inline by the notebook,
saved by runfolder.save_figure); none of them reads or writes files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Order of the systems in eval figures: baseline first, then the training stages.
SYSTEM_ORDER = ("bm25", "zero_shot", "sft", "grpo")


def _axes(ncols: int = 1, width: float = 6.0, height: float = 3.6):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, list(axes[0])


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def bar_chart(values: Any, *, title: str, xlabel: str = "", ylabel: str = "count"):
    """A bar per index entry of a Series (counts per benchmark, lines per shard, ...)."""
    fig, (ax,) = _axes()
    if len(values):
        ax.bar([str(i) for i in values.index], list(values.values), color="tab:blue")
        ax.tick_params(axis="x", rotation=30)
    else:
        _empty(ax, "data")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    fig.tight_layout()
    return fig


def histogram(values: Sequence[float], *, title: str, xlabel: str, bins: int = 30, log_y: bool = False):
    fig, (ax,) = _axes()
    values = [v for v in values if v is not None]
    if values:
        ax.hist(values, bins=bins, color="tab:blue", alpha=0.8)
        if log_y:
            ax.set_yscale("log")
    else:
        _empty(ax, "values")
    ax.set(title=title, xlabel=xlabel, ylabel="count")
    fig.tight_layout()
    return fig


def training_curves(history: Any, keys: Sequence[str], *, title: str, x: str = "step"):
    """Loss / reward curves from a trainer's log history (one row per logging step), one panel a key."""
    keys = list(keys)
    fig, axes = _axes(ncols=len(keys), width=4.5)
    for ax, key in zip(axes, keys, strict=True):
        present = key in getattr(history, "columns", ()) and history[key].notna().any()
        if present:
            rows = history[history[key].notna()]
            xs = rows[x] if x in rows else range(1, len(rows) + 1)
            ax.plot(list(xs), list(rows[key]), marker="o", ms=3)
        else:
            _empty(ax, key)
        ax.set(title=key, xlabel=x)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def em_f1_by_benchmark(table: Any, *, title: str = "EM / F1 per benchmark"):
    """Grouped bars: benchmark on x, one bar per system; left EM, right F1.

    `table` has columns system, benchmark, em, f1 (micro / macro rows included as benchmarks).
    """
    import numpy as np

    fig, axes = _axes(ncols=2, width=6.5)
    if table is None or len(table) == 0:
        for ax in axes:
            _empty(ax, "results")
        return fig
    benchmarks = list(dict.fromkeys(table["benchmark"]))
    systems = [s for s in SYSTEM_ORDER if s in set(table["system"])]
    systems += [s for s in dict.fromkeys(table["system"]) if s not in systems]
    width = 0.8 / max(len(systems), 1)
    xs = np.arange(len(benchmarks))
    for ax, metric in zip(axes, ("em", "f1"), strict=True):
        for i, system in enumerate(systems):
            rows = table[table["system"] == system].set_index("benchmark")
            heights = [float(rows[metric].get(b, np.nan)) for b in benchmarks]
            ax.bar(xs + i * width - 0.4 + width / 2, heights, width, label=system)
        ax.set_xticks(xs, benchmarks, rotation=30)
        ax.set(title=metric.upper(), ylim=(0, 1))
    axes[1].legend(fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def stacked_shares(table: Any, parts: Sequence[str], *, title: str, label: str = "system"):
    """One horizontal bar per row of `table` (column `label`), split into the shares in columns `parts`."""
    fig, (ax,) = _axes(width=7.5, height=0.6 * max(len(table), 2) + 1.4)
    if table is None or len(table) == 0:
        _empty(ax, "episodes")
        return fig
    names = [str(v) for v in table[label]]
    left = [0.0] * len(table)
    for part in parts:
        widths = [float(v) for v in table[part]]
        ax.barh(names, widths, left=left, label=part)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set(title=title, xlim=(0, 1), xlabel="share of episodes")
    ax.invert_yaxis()
    ax.legend(fontsize="small", ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    fig.tight_layout()
    return fig


def latency_distributions(replay: Any, *, title: str = "search latency per command"):
    """Sequential vs sharded (vs any other mode): per-command seconds, box plot and sorted CDF."""
    import numpy as np

    fig, (box_ax, cdf_ax) = _axes(ncols=2, width=5.5)
    if replay is None or len(replay) == 0:
        _empty(box_ax, "commands")
        _empty(cdf_ax, "commands")
        return fig
    modes = list(dict.fromkeys(replay["mode"]))
    samples = [replay.loc[replay["mode"] == m, "seconds"].to_numpy() for m in modes]
    box_ax.boxplot(samples, showfliers=True)
    box_ax.set_xticks(range(1, len(modes) + 1), modes)
    box_ax.set(ylabel="seconds", title="per command")
    for mode, values in zip(modes, samples, strict=True):
        values = np.sort(values)
        cdf_ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=mode)
    cdf_ax.set(xlabel="seconds", ylabel="fraction of commands", title="CDF")
    if replay["seconds"].max() > 0:
        cdf_ax.set_xscale("symlog", linthresh=1e-3)
    cdf_ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def latency_split(episodes: Any, *, title: str = "end-to-end latency per question", max_questions: int = 40):
    """Stacked bars per question: LLM time vs search (tool) time, from columns llm_s and tool_s."""
    fig, (ax,) = _axes(width=max(6.0, min(max_questions, len(episodes) if episodes is not None else 0) * 0.25))
    if episodes is None or len(episodes) == 0:
        _empty(ax, "episodes")
        return fig
    rows = episodes.head(max_questions)
    xs = range(len(rows))
    ax.bar(xs, rows["llm_s"], label="LLM", color="tab:orange")
    ax.bar(xs, rows["tool_s"], bottom=rows["llm_s"], label="search", color="tab:blue")
    label = rows["system"] if "system" in rows else [""] * len(rows)
    ax.set_xticks(list(xs), [f"{s}:{i}" for s, i in zip(label, rows["id"], strict=True)], rotation=90, fontsize=6)
    ax.set(ylabel="seconds", title=title)
    ax.legend()
    fig.tight_layout()
    return fig
