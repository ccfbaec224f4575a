"""The agent's system prompt and the fixed messages of the protocol.

Written once: cold start (SFT data), GRPO rollouts, evaluation and `grepseek ask` all build their
conversations here, so the policy is trained on exactly the text it sees at test time.

The prompt ends with one worked episode. A small instruct model (SmolLM2-135M) never writes a valid
action from a description alone, but copies a demonstration well; the demonstration is rendered with
the same functions as real turns and tool replies, so it shows the exact format the parser expects.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from grepseek_lib import config
from grepseek_lib.agent.actions import render_tool_call, render_turn
from grepseek_lib.shell.policy import ALLOWED_PROGRAMS, refused_result
from grepseek_lib.shell.tool import make_payload, observation_text
from grepseek_lib.shell.types import RunResult

_SYSTEM_TEMPLATE = """\
You answer questions by searching a text corpus with shell commands: no search engine, you read the raw \
corpus yourself and may search several times.

THE CORPUS
The file {corpus} in the current folder holds {n_lines:,} lines, one Wikipedia passage per line as JSON:
{{"id": "123", "contents": "\\"Title\\"\\npassage text"}}
Quotes and non-ASCII letters in contents are JSON-escaped (\\" and \\u00e9); search for plain words and names.

THE TOOL
A command is ONE pipeline of: {programs}, joined with |. No redirection (>, <), chaining (;, &&, ||), \
$(...), backticks or other programs. The reply is JSON (command, stdout, stderr, exit_code, timed_out, \
truncated); output past about {max_obs_tokens} tokens is cut, so keep it small:
- count before you read: rg -c -F 'Ada Lovelace' {corpus}
- read only a few lines: end with | head -n 3
- -F matches text literally, -i ignores case, -w matches whole words
- narrow with a second filter: ... | rg -F -w 'Babbage' | head -n 3
- shorten long lines: ... | cut -c 1-500

HOW TO REPLY
Every reply is short reasoning in <think>...</think>, then exactly ONE action: a search
{call_example}
or the final answer
<answer>short answer</answer>
The tool reply comes in the next message. At most {max_tool_calls} tool calls, then answer: a short span \
(a name, a date, a number, yes or no), not a sentence, and nothing after </answer>.

EXAMPLE EPISODE
{example}"""

#: The worked episode: (think, command, stdout) steps, then (think, answer). Not from any benchmark.
_EXAMPLE_QUESTION = "Which river flows through Grenoble?"
_EXAMPLE_PASSAGE = {"id": "5120", "contents": '"Grenoble"\nGrenoble is a French city on the river Isère.'}
_EXAMPLE_STEPS = (
    ("Find passages about Grenoble; count them first.", "rg -c -F -w 'Grenoble' {corpus}", "7\n"),
    ("7 lines. Read those that mention a river.",
     "rg -F -w 'Grenoble' {corpus} | rg -F -i 'river' | head -n 3",
     json.dumps(_EXAMPLE_PASSAGE, ensure_ascii=False) + "\n"),
)
_EXAMPLE_ANSWER = ("The passage says Grenoble lies on the river Isère.", "Isère")
#: The call shown where the format is described (and in the format-error message): concrete and runnable.
_CALL_EXAMPLE_COMMAND = "rg -F -i 'ada lovelace' {corpus} | head -n 3"


def _example_episode(corpus: str) -> str:
    """The worked episode, each turn and tool reply rendered exactly as the real conversation shows it."""
    lines = [user_message(_EXAMPLE_QUESTION)]
    for think, command, stdout in _EXAMPLE_STEPS:
        command = command.format(corpus=corpus)
        payload = make_payload(command, RunResult(stdout=stdout.encode("utf-8"), stderr=b"", exit_code=0))
        lines += [render_turn(think, command=command),
                  f"<tool_response>{observation_text(payload)}</tool_response>"]
    lines.append(render_turn(_EXAMPLE_ANSWER[0], answer=_EXAMPLE_ANSWER[1]))
    return "\n".join(lines)


def system_prompt(n_lines: int, *, max_tool_calls: int = config.MAX_TOOL_CALLS,
                  max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS) -> str:
    """The system prompt for a corpus of `n_lines` lines (the real count: it tells the agent the scale)."""
    corpus = config.LOGICAL_CORPUS_NAME
    return _SYSTEM_TEMPLATE.format(corpus=corpus, n_lines=int(n_lines), programs=", ".join(ALLOWED_PROGRAMS),
                                   max_obs_tokens=max_obs_tokens, max_tool_calls=max_tool_calls,
                                   call_example=_call_example(), example=_example_episode(corpus))


def _call_example() -> str:
    """The one concrete call shown in the format description and in the format-error message."""
    return render_tool_call(_CALL_EXAMPLE_COMMAND.format(corpus=config.LOGICAL_CORPUS_NAME))


def user_message(question: str) -> str:
    return f"Query: {question.strip()}"


def initial_messages(question: str, n_lines: int, **prompt_kw) -> list[dict]:
    """System prompt + `Query: <question>`: the start of every episode."""
    return [{"role": "system", "content": system_prompt(n_lines, **prompt_kw)},
            {"role": "user", "content": user_message(question)}]


def format_error_message(error: str) -> str:
    """The observation sent after a malformed action (one chance to fix it; a second ends the episode).

    Its example call is a real, runnable command: a small model copies what it is shown, and a copied
    placeholder such as "..." is refused by the shell.
    """
    return (f"format error: {error}. Reply with <think>your reasoning</think> followed by exactly one "
            f"{_call_example()} or <answer>short answer</answer>.")


def budget_message(max_tool_calls: int) -> str:
    """The note that the tool budget is spent: the next reply must be the answer."""
    return (f"You have used all {max_tool_calls} tool calls. Reply now with <think>...</think> and "
            "<answer>short answer</answer>, using what you have found.")


def with_budget_note(observation: str, max_tool_calls: int) -> str:
    """The last allowed call's tool message: its observation, then the budget note.

    The note rides inside the tool message, not in a turn of its own, so that every runner renders it the
    same way: our loop, the cold-start data, and trl's tool loop in GRPO (which only ever adds tool messages).
    """
    return f"{observation}\n\n{budget_message(max_tool_calls)}"


def repeat_payload(command: str, earlier_call: int) -> dict:
    """The observation of a command the episode already ran: not run again (the corpus is read-only, so it
    would print the same), refused with a reason that says what to change."""
    reason = (f"this exact command was already tool call {earlier_call} and would print the same again; "
              "change the search: fewer words, -i, a shorter phrase, or another name from the question")
    return make_payload(command, refused_result(reason))


@dataclass
class ToolBudget:
    """One episode's tool calls: the observation of the last allowed call carries the budget note, and a
    command run before is refused instead of run again (`repeat_payload`).

    The agent loop, the cold-start export and GRPO's rollout environment each keep one per episode, so the
    note lands on the same call, in the same words, in every conversation the policy sees.
    """

    max_tool_calls: int
    calls: int = 0
    commands: list[str] = field(default_factory=list)

    @property
    def spent(self) -> bool:
        return self.calls >= self.max_tool_calls

    def earlier_call(self, command: str) -> int | None:
        """The 1-based number of an earlier call that ran exactly `command` (outer whitespace aside)."""
        stripped = command.strip()
        return next((i + 1 for i, c in enumerate(self.commands) if c == stripped), None)

    def observe(self, observation: str, command: str | None = None) -> str:
        """Count one call (of `command`, remembered for `earlier_call`); return the text its tool message holds."""
        self.calls += 1
        if command is not None:
            self.commands.append(command.strip())
        return with_budget_note(observation, self.max_tool_calls) if self.calls == self.max_tool_calls else observation

    def run(self, command: str, tool) -> tuple[dict, str]:
        """Run `command` with `tool` unless the episode ran it before; returns (payload, tool message text)."""
        earlier = self.earlier_call(command)
        payload = tool(command) if earlier is None else repeat_payload(command, earlier)
        return payload, self.observe(observation_text(payload), command)


def budget_noted(message: dict) -> bool:
    """True for a tool message that ends with the budget note (a JSON observation never ends that way)."""
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str):
        return False
    match = re.search(r"You have used all (\d+) tool calls\. Reply now", content)
    return match is not None and content.endswith("\n\n" + budget_message(int(match.group(1))))
