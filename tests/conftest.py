"""Shared fixtures. `miniwiki`: the real mini-wiki, built once per test session into a temp folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from grepseek_lib import config


@pytest.fixture(scope="session")
def miniwiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with corpus.jsonl, benchmarks/*.jsonl, stats.json and README.md built from the raw data."""
    from grepseek_lib.data.build import build_miniwiki

    raw = config.raw_dir()
    if not raw.is_dir():
        pytest.skip(f"raw data folder {raw} not found (set GREPSEEK_RAW)")
    out = tmp_path_factory.mktemp("miniwiki")
    build_miniwiki(raw, out, verbose=False)
    return out
