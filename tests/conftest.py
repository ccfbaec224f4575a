"""Shared fixtures. `miniwiki`: the real mini-wiki, built once per test session into a temp folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from grepseek_lib import config


@pytest.fixture(autouse=True, scope="session")
def shard_every_corpus() -> Iterator[None]:
    """Test corpora are tiny: shard them anyway, or the engine would (rightly) run them once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GREPSEEK_MIN_SHARD_MB", "0")
        yield


@pytest.fixture(scope="session")
def miniwiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with corpus.jsonl, benchmarks/*.jsonl, stats.json and README.md built from the raw data."""
    from grepseek_lib.data.build import build_miniwiki

    raw = config.raw_dir()
    if not raw.is_dir():
        message = f"raw data folder {raw} not found (set GREPSEEK_RAW to the folder holding SOURCES.md)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI must test the data build, never skip it
        pytest.skip(message)
    out = tmp_path_factory.mktemp("miniwiki")
    build_miniwiki(raw, out, verbose=False)
    return out


@pytest.fixture
def one_thread():
    """Two shared cores: several torch threads spin against each other and run many times slower."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline tiny model (2-layer Qwen3, BPE tokenizer), built once per test session."""
    torch = pytest.importorskip("torch")
    from grepseek_lib.agent.models import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny")
