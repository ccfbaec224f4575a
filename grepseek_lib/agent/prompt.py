"""The agent's system prompt and the fixed messages of the protocol.

Written once: cold start (SFT data), GRPO rollouts, evaluation and `grepseek ask` all build their
conversations here, so the policy is trained on exactly the text it sees at test time.
"""

from __future__ import annotations

from grepseek_lib import config
from grepseek_lib.shell.policy import ALLOWED_PROGRAMS

_SYSTEM_TEMPLATE = """\
You answer questions by searching a text corpus with shell commands. There is no search engine and no \
index: you read the raw corpus yourself and you may search it several times.

THE CORPUS
The file {corpus} in the current folder holds {n_lines:,} lines. Each line is one Wikipedia passage \
written as a JSON object:
{{"id": "123", "contents": "\\"Title\\"\\npassage text"}}
The contents field is JSON-escaped: the title sits inside \\" and is followed by \\n, and quotes or \
non-ASCII letters inside the text also appear escaped (\\" and \\u00e9). Search for plain words and \
names; they match as written.

THE TOOL
A command is ONE pipeline built only from: {programs}. Stages are joined with |. Not allowed: \
redirection (>, <), chaining (;, &&, ||), $(...) or backticks, writing files, any other program.
The reply is JSON with the command, stdout, stderr, exit_code, timed_out and truncated. Output longer \
than about {max_obs_tokens} tokens is cut, so keep it small:
- count before you read: rg -c -F 'Ada Lovelace' {corpus}   or   ... | wc -l
- read only a few lines: end with | head -n 3
- -F matches text literally, -i ignores case, -w matches whole words
- narrow a search with a second filter: rg -F 'Lovelace' {corpus} | rg -F -w 'Babbage' | head -n 3
- long lines can be shortened: ... | cut -c 1-500

HOW TO REPLY
Every reply starts with short reasoning in <think>...</think>, followed by exactly ONE action:
a search
<tool_call>{{"name": "shell", "arguments": {{"command": "rg -F -i 'ada lovelace' {corpus} | head -n 3"}}}}\
</tool_call>
or the final answer
<answer>short answer</answer>
The tool reply comes in the next message. You may make at most {max_tool_calls} tool calls; after that you \
must answer. The answer is a short span (a name, a date, a number, yes or no), not a sentence. Write \
nothing after </answer>."""


def system_prompt(n_lines: int, *, max_tool_calls: int = config.MAX_TOOL_CALLS,
                  max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS) -> str:
    """The system prompt for a corpus of `n_lines` lines (the real count: it tells the agent the scale)."""
    return _SYSTEM_TEMPLATE.format(corpus=config.LOGICAL_CORPUS_NAME, n_lines=int(n_lines),
                                   programs=", ".join(ALLOWED_PROGRAMS), max_obs_tokens=max_obs_tokens,
                                   max_tool_calls=max_tool_calls)


def user_message(question: str) -> str:
    return f"Query: {question.strip()}"


def initial_messages(question: str, n_lines: int, **prompt_kw) -> list[dict]:
    """System prompt + `Query: <question>`: the start of every episode."""
    return [{"role": "system", "content": system_prompt(n_lines, **prompt_kw)},
            {"role": "user", "content": user_message(question)}]


def format_error_message(error: str) -> str:
    """The observation sent after a malformed action (one chance to fix it; a second ends the episode)."""
    return (f"format error: {error}. Reply with <think>your reasoning</think> followed by exactly one "
            '<tool_call>{"name": "shell", "arguments": {"command": "..."}}</tool_call> '
            "or <answer>short answer</answer>.")


def budget_message(max_tool_calls: int) -> str:
    """Sent once the tool budget is spent: the next reply must be the answer."""
    return (f"You have used all {max_tool_calls} tool calls. Reply now with <think>...</think> and "
            "<answer>short answer</answer>, using what you have found.")
