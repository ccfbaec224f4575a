"""The shell tool as the agent sees it: one command in, one JSON observation out.

Cold start, RL rollouts, evaluation and `grepseek ask` all call ShellTool / make_payload /
observation_text, so every stage sees the same policy, limits, truncation and format. Stdout is carried
once, cut to the policy model's own tokens with a visible marker the agent can act on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.errors import UserError
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.index import find_index
from grepseek_lib.shell.limits import check_max_output_bytes, check_timeout
from grepseek_lib.shell.policy import parse_command, refused_result
from grepseek_lib.shell.runner import run_pipeline, timeout_line
from grepseek_lib.shell.types import Pipeline, Refused, RunResult

#: Without a tokenizer, a token is taken as this many characters (a typical BPE average on English/JSON).
CHARS_PER_TOKEN = 4
#: stderr shown to the agent is cut to this many characters (tool messages are short; floods are not).
MAX_STDERR_CHARS = 4000
#: Only this many characters per allowed token are tokenized, so a 1 MB output costs little.
_WINDOW_CHARS_PER_TOKEN = 16
#: How much of the corpus's start decides whether it writes non-ASCII text as JSON escapes.
_ESCAPE_SAMPLE_BYTES = 1 << 20


def writes_escapes(corpus: Path) -> bool:
    """Whether the corpus stores non-ASCII letters only as JSON `\\uXXXX` escapes (wiki-18 does): its first
    MiB holds escapes and no byte above 0x7F."""
    with open(corpus, "rb") as handle:
        head = handle.read(_ESCAPE_SAMPLE_BYTES)
    return b"\\u" in head and head.isascii()


def escape_note(command: str, stdout: bytes) -> str | None:
    """For a search that found nothing while its first program names non-ASCII text: the same text as
    the escaped corpus holds it, so the agent can search that instead of concluding the name is absent."""
    if command.isascii() or stdout.strip() not in (b"", b"0"):  # most commands: no second parse, no copy
        return None
    try:
        stage = parse_command(command).stages[0]
    except Refused:
        return None
    words = [arg for arg in stage.argv[1:] if not arg.isascii() and not arg.startswith("-")]
    if not words:
        return None
    escaped = json.dumps(words[0])[1:-1]
    return (f"note: nothing matched '{words[0]}', but the corpus writes non-ASCII letters as JSON escapes: "
            f"search '{escaped}' with -F, or an ASCII word of it")


def load_engine(corpus: Path, shards: Path | str | None, index: Path | str | bool | None = None,
                executor: str = "local", ray_address: str | None = None):
    """The engine when shards are given or an index is found (index.find_index); None means sequential.

    `index`: an index folder, None to use one beside the corpus or the shards if there is one, False
    for none. Without shards and without an index, nothing changes: one sequential run per command.
    `executor="ray"` runs the shards on Ray actors (`ray_address`: the cluster; see engine.Engine).
    """
    if shards is None and find_index(Path(corpus), None, index) is None:
        return None

    return Engine(corpus, shards_dir=None if shards is None else Path(shards), index=index, executor=executor,
                  ray_address=ray_address)


def run_command(command: str, corpus: Path, *, timeout: float, max_output_bytes: int | None,
                engine=None) -> RunResult:
    """Parse, check and run one command; a refusal is a RunResult too (status 126)."""
    try:
        pipeline: Pipeline = parse_command(command)
    except Refused as exc:
        return refused_result(exc)
    if engine is not None:
        return engine.run(pipeline, timeout=timeout, max_output_bytes=max_output_bytes)
    return run_pipeline(pipeline, corpus, timeout=timeout, max_output_bytes=max_output_bytes)


def truncate_to_tokens(text: str, tokenizer: Any, max_tokens: int) -> tuple[str, int | None]:
    """Keep the first `max_tokens` tokens of text; returns (kept, approximate total or None if it all fits).

    With a HF tokenizer the cut falls on a token boundary of that tokenizer; without one, a token
    is CHARS_PER_TOKEN characters.
    """
    if tokenizer is None:
        limit = max_tokens * CHARS_PER_TOKEN
        if len(text) <= limit:
            return text, None
        return text[:limit], math.ceil(len(text) / CHARS_PER_TOKEN)
    window = text[: max_tokens * _WINDOW_CHARS_PER_TOKEN]
    try:
        encoded = tokenizer(window, add_special_tokens=False, return_offsets_mapping=True)
        offsets = encoded["offset_mapping"]
    except (NotImplementedError, TypeError, KeyError, ValueError):  # slow tokenizers have no offsets
        encoded, offsets = tokenizer(window, add_special_tokens=False), None
    ids = encoded["input_ids"]
    if len(ids) <= max_tokens and len(window) == len(text):
        return text, None
    total = max(len(ids), round(len(ids) * len(text) / max(1, len(window))))
    if len(ids) <= max_tokens:
        return window, total
    if offsets is not None:
        return text[: offsets[max_tokens - 1][1]], total
    return tokenizer.decode(ids[:max_tokens]), total


def make_payload(command: str, result: RunResult, tokenizer: Any = None,
                 max_tokens: int = config.DEFAULT_MAX_OBS_TOKENS, timeout: float | None = None) -> dict[str, Any]:
    """The observation of one tool call: {command, stdout, stderr, exit_code, timed_out, truncated}.

    A timed-out result gets the `timeout:` line on stderr (with `timeout` seconds when given).
    """
    stdout = result.stdout.decode("utf-8", errors="replace")
    kept, total = truncate_to_tokens(stdout, tokenizer, max_tokens)
    truncated = result.truncated or total is not None
    if total is not None:
        kept += (f"\n[... output truncated: showing first {max_tokens} of ~{total} tokens; "
                 "narrow the search or pipe into head ...]")
    elif result.truncated and not result.timed_out:
        kept += ("\n[... output truncated: the command printed more than the output limit and was stopped; "
                 "narrow the search or pipe into head ...]")
    stderr = result.stderr.decode("utf-8", errors="replace")
    if len(stderr) > MAX_STDERR_CHARS:
        stderr = stderr[:MAX_STDERR_CHARS] + "\n[... stderr truncated ...]\n"
    if result.timed_out:
        stderr += timeout_line(timeout) + "\n"
    return {
        "command": command,
        "stdout": kept,
        "stderr": stderr,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "truncated": truncated,
    }


def observation_text(payload: dict[str, Any]) -> str:
    """The payload as the compact JSON text placed in the tool turn of the conversation.

    Corpus text is hostile input too: a line holding `<|im_end|>` would tokenize as the chat template's
    control token and forge a turn boundary, so `<|` is written `< |` (the bytes stay readable).
    """
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("<|", "< |")


def observation_payload(text: str) -> dict[str, Any] | None:
    """The payload back from a tool message's text (`observation_text`, maybe followed by the budget note);
    None for text that does not start with one (a format-error message)."""
    try:
        payload, _ = json.JSONDecoder().raw_decode(text.strip())
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


class ShellTool:
    """The agent's shell: `tool(command) -> payload`; sequential, or sharded when `shards` is given, and
    narrowed by the index (`index`: a folder, None to use `<corpus dir>/index/` when it exists, False: none)."""

    def __init__(self, corpus: Path | str, shards: Path | str | None = None,
                 timeout: float = config.DEFAULT_TIMEOUT_S, max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS,
                 tokenizer: Any = None, max_output_bytes: int | None = config.DEFAULT_MAX_OUTPUT_BYTES,
                 index: Path | str | bool | None = None, executor: str = "local", ray_address: str | None = None):
        self.corpus = Path(corpus)
        if not self.corpus.is_file():
            raise UserError(f"corpus not found: {self.corpus}; build it with `grepseek data build` "
                            "or pass the path of a corpus.jsonl")
        self.timeout = check_timeout(timeout, "timeout")
        self.max_obs_tokens = max_obs_tokens
        self.tokenizer = tokenizer
        self.max_output_bytes = check_max_output_bytes(max_output_bytes, "max_output_bytes")
        self.engine = load_engine(self.corpus, shards, index, executor, ray_address)
        self.escaped_corpus = writes_escapes(self.corpus)

    def run(self, command: str) -> RunResult:
        """The raw result (refusals included) for callers that need bytes, e.g. the cold-start verifier."""
        return run_command(command, self.corpus, timeout=self.timeout, max_output_bytes=self.max_output_bytes,
                           engine=self.engine)

    def __call__(self, command: str) -> dict[str, Any]:
        result = self.run(command)
        payload = make_payload(command, result, self.tokenizer, self.max_obs_tokens, self.timeout)
        note = escape_note(command, result.stdout) if self.escaped_corpus and result.exit_code != 126 else None
        if note:
            payload["stderr"] += note + "\n"
        return payload
