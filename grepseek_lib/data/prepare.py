"""One entry point for the data stage: build the mini-wiki, or import real wiki-18 + FlashRAG data.

`grepseek data build` and notebook 00_data both call `prepare_data`, so the series runs unchanged on
either; the returned stats have the same shape (benchmarks: role / candidates / kept per split).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.data.build import build_miniwiki
from grepseek_lib.data.importer import import_dataset
from grepseek_lib.data.raw import check_raw_dir


def prepare_data(out: Path, *, raw: Path | None = None, corpus_from: str | Path | None = None,
                 benchmarks_from: str | Path | None = None, train_splits: Sequence[str] = (),
                 card: Path | None = None, verbose: bool = True) -> dict[str, Any]:
    """Import when `corpus_from` or `benchmarks_from` is given (named `train_splits` must exist there),
    else build the mini-wiki from `raw`; returns the stats written to out/stats.json."""
    if corpus_from or benchmarks_from:
        return import_dataset(Path(out), _path(corpus_from), _path(benchmarks_from), train_splits)
    raw = config.repo_path(raw, config.raw_dir())
    check_raw_dir(raw)
    return build_miniwiki(raw, Path(out), card=card, verbose=verbose)


def _path(value: str | Path | None) -> Path | None:
    """A source path as a notebook parameter gives it: relative to the repository root, `~` expanded."""
    return config.repo_path(value, Path()) if value else None
