"""Opening the agent's shell tool: which corpus and which shards, decided by one rule everywhere.

`ask`, eval, cold start, format-check, GRPO and the trajectory inspector all open the tool here, so the same
arguments give every stage the same corpus, the same shards and the same limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.errors import UserError
from grepseek_lib.shell.shards import MANIFEST_NAME, default_shards_dir, read_manifest
from grepseek_lib.shell.tool import ShellTool


def resolve_corpus(corpus: Path | str | None = None, shards: Path | str | None = None) -> tuple[Path, Path | None]:
    """(corpus file, shard folder or None).

    No corpus: the one the shards were cut from, else the default corpus (the mini-wiki). No shards: the
    corpus's own shard folder (`shard.default_shards_dir`) when one was built, else none (one sequential pass).
    """
    if corpus is None and shards is not None and Path(shards).is_dir():
        corpus = read_manifest(shards).source
    corpus = Path(corpus).expanduser() if corpus else config.default_corpus()
    if not corpus.is_file():
        raise UserError(f"no corpus at {corpus}: pass --corpus FILE or run `grepseek data build`")
    if shards is None:
        beside = default_shards_dir(corpus)
        return corpus, beside if (beside / MANIFEST_NAME).is_file() else None
    shards = Path(shards).expanduser()
    if not shards.is_dir():
        raise UserError(f"no shard folder at {shards}: build it with `grepseek shard` or drop --shards")
    return corpus, shards


def open_tool(corpus: Path | str | None = None, shards: Path | str | None = None, *,
              timeout: float = config.DEFAULT_TIMEOUT_S, max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS,
              tokenizer: Any = None) -> ShellTool:
    """The shell tool over `resolve_corpus(corpus, shards)`, cutting observations with the policy's tokenizer."""
    corpus, shards = resolve_corpus(corpus, shards)
    return ShellTool(corpus, shards=shards, timeout=timeout, max_obs_tokens=max_obs_tokens, tokenizer=tokenizer)
