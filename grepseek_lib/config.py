"""Paths and defaults in one place; every value can be overridden by an env var or an argument."""

from __future__ import annotations

import os
from pathlib import Path

from grepseek_lib.errors import UserError

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Benchmarks of the evaluation, in the paper's order.
BENCHMARKS = ("nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle")
#: Training splits (cold start and RL); the other benchmarks are out of distribution.
TRAIN_SPLITS = ("hotpotqa_train", "musique_train")

#: The name under which the agent always sees the corpus, whatever its physical layout.
LOGICAL_CORPUS_NAME = "corpus.jsonl"

#: Tool limits shared by cold start, RL, evaluation and the CLI (paper: 60 s inference, 180 s RL).
DEFAULT_TIMEOUT_S = 60.0
RL_TIMEOUT_S = 180.0
DEFAULT_MAX_OBS_TOKENS = 2048
#: Bytes read from a pipeline's stdout before it is stopped and marked truncated.
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20
#: Agent budget: at most this many tool calls, then one answer.
MAX_TOOL_CALLS = 5
#: The longest wall timeout a tool call or `grepseek run` accepts (a larger value is a typo, not a search).
MAX_TIMEOUT_S = 3600.0
#: Address space of one whole process chain, split evenly between its stages (shell/limits.py).
CHAIN_MEMORY_BYTES = 8 << 30


def _env_path(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    return Path(value).expanduser() if value else default


def min_shard_bytes() -> int:
    """Average shard size below which the engine runs one sequential pass (env GREPSEEK_MIN_SHARD_MB).

    Default 32 MB: rg scans that much in ~4 ms here, about the cost of starting another process
    chain, so smaller shards cannot pay (measured on mini-wiki: 2 shards made a rare-word head
    pipeline 5.8 -> 10.4 ms). 0 shards every corpus (the exactness tests use tiny corpora).
    """
    value = os.environ.get("GREPSEEK_MIN_SHARD_MB", "").strip()
    try:
        megabytes = float(value) if value else 32.0
    except ValueError:
        raise UserError(f"GREPSEEK_MIN_SHARD_MB must be a number of megabytes, got {value!r}") from None
    return int(megabytes * 1_000_000)


def raw_dir() -> Path:
    """Raw QA / Wikipedia sources (env GREPSEEK_RAW, default ../shared/data/raw next to the repo)."""
    return _env_path("GREPSEEK_RAW", REPO_ROOT.parent / "shared" / "data" / "raw")


def data_dir() -> Path:
    """Everything the pipeline builds (env GREPSEEK_DATA, default data/ in the repo)."""
    return _env_path("GREPSEEK_DATA", REPO_ROOT / "data")


def miniwiki_dir() -> Path:
    return data_dir() / "miniwiki"


def default_corpus() -> Path:
    return _env_path("GREPSEEK_CORPUS", miniwiki_dir() / "corpus.jsonl")


def benchmarks_dir() -> Path:
    return miniwiki_dir() / "benchmarks"


def models_dir() -> Path:
    return _env_path("GREPSEEK_MODELS", data_dir() / "models")


def runs_dir() -> Path:
    return _env_path("GREPSEEK_RUNS", REPO_ROOT / "runs")


#: The run `make run` writes and the notebooks open when their `run_dir` parameter is None.
DEFAULT_RUN = "default"


def default_run_dir() -> Path:
    return runs_dir() / DEFAULT_RUN


def repo_path(value: str | Path | None, default: Path) -> Path:
    """A path parameter made absolute the same way wherever the kernel starts (papermill: the repo root,
    JupyterLab: notebooks/): None -> `default`, `~` expanded, a relative path -> against the repo root."""
    if value is None or str(value).strip() == "":
        return Path(default).expanduser().resolve()
    path = Path(value).expanduser()
    return (path if path.is_absolute() else REPO_ROOT / path).resolve()
