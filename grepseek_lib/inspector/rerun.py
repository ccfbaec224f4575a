"""Run a recorded command again through the agent's own shell tool and say whether the observation is the same.

The tool is built like the evaluation's (shell.open.open_tool: the run's observation cap, the policy's
tokenizer from the run's SFT folder when there is one), so a difference means the corpus, the shards or
the engine changed, not the measuring stick.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.inspector.render import text
from grepseek_lib.shell.open import open_tool
from grepseek_lib.shell.tool import ShellTool

#: Payload fields compared between the recorded and the fresh observation.
COMPARED = ("exit_code", "stdout", "stderr", "timed_out", "truncated")


def tool_for_run(run_dir: str | Path, data_dir: str | Path) -> ShellTool:
    """The shell tool the run's evaluation used: its corpus, shards, observation cap and tokenizer."""
    run_dir, data_dir = Path(run_dir), Path(data_dir)
    params_file = run_dir / "params.json"
    params = json.loads(params_file.read_text()) if params_file.is_file() else {}
    shards = data_dir / "shards"
    return open_tool(data_dir / "corpus.jsonl", shards if shards.is_dir() else None,
                     timeout=config.DEFAULT_TIMEOUT_S,
                     max_obs_tokens=int(params.get("max_obs_tokens", config.DEFAULT_MAX_OBS_TOKENS)),
                     tokenizer=run_tokenizer(run_dir))


def run_tokenizer(run_dir: Path) -> Any:
    """The policy's tokenizer (every system of a run shares the base model's); None when not trained yet."""
    folder = Path(run_dir) / "models" / "sft"
    if not (folder / "tokenizer_config.json").is_file():
        return None
    from transformers import AutoTokenizer  # heavy; only when a run has a model

    return AutoTokenizer.from_pretrained(str(folder))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and text(a) and text(b):
        return float(a) == float(b)
    return text(a) == text(b)


def rerun(turn: Mapping[str, Any], tool: ShellTool | Any) -> dict[str, Any]:
    """{identical, differs (field names), payload (the fresh observation)} for one tool turn."""
    command = text(turn.get("command"))
    if not command:
        raise ValueError("this turn ran no command")
    payload = tool(command)
    differs = [k for k in COMPARED if not _same(turn.get(k), payload.get(k))]
    return {"identical": not differs, "differs": differs, "payload": payload}


def verdict(result: Mapping[str, Any]) -> str:
    """One line for the browser."""
    if result["identical"]:
        return "identical observation"
    return "differs in: " + ", ".join(result["differs"])
