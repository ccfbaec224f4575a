"""The one parser of assistant turns, used by cold start, the GRPO reward, evaluation and `grepseek ask`.

Model output is hostile input: nothing here raises on any text, and nothing runs it.

Two levels of strictness, on purpose:
- `parse_action` (what the agent loop DOES with a turn) is lenient where a small model's slips are
  harmless: surrounding white space, Markdown code fences, a missing `<think>` block (or a missing
  opening `<think>`), a missing closing `</tool_call>` / `</answer>` at the very end of the text (a stop
  string may have cut it), and three spellings of the call: strict JSON, a Python-literal dict (single
  quotes, trailing commas), and `"arguments"` given as a JSON-encoded string (the OpenAI wire form).
  The FIRST action block decides; anything after it is ignored (and `Action.text` cuts it off).
  The answer is the first `<answer>` block.
- `format_gate` (what the REWARD pays for) is strict: the canonical format only.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import asdict, dataclass

TOOL_NAME = "shell"
#: Tags of the protocol; `tool_response` belongs to tool messages and must never be written by the model.
_TAGS = ("think", "tool_call", "answer", "tool_response")
#: Longest call body we try to parse (a real call is a few hundred characters).
_MAX_CALL_CHARS = 20_000

#: Markdown fences: a fence line (```xml), or a bare ``` glued to a tag; backticks inside a command stay.
_FENCE = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$|(?<=>)```|```[\w+-]*(?=<)", re.M)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_ACTION_OPEN = re.compile(r"<(tool_call|answer)>")
_ANY_TAG = re.compile(r"</?(?:think|tool_call|answer|tool_response)>")
_GATE_TURN = re.compile(r"<think>(?P<think>.*?)</think>\s*<(?P<kind>tool_call|answer)>(?P<body>.*?)</(?P=kind)>",
                        re.S)


@dataclass(frozen=True)
class Action:
    """One parsed assistant turn. `text` is the turn cut after its first action (what the history keeps)."""

    kind: str  # "tool" | "answer" | "invalid"
    command: str | None = None
    answer: str | None = None
    think: str = ""
    error: str | None = None
    text: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Action:
        return cls(**{k: data.get(k) for k in ("kind", "command", "answer", "error")},
                   think=data.get("think") or "", text=data.get("text") or "")


def _load_call_object(body: str) -> tuple[object, bool]:
    """Parse a call body; returns (object, strict_json). Raises ValueError when no accepted spelling fits."""
    body = body.strip()
    if len(body) > _MAX_CALL_CHARS:
        raise ValueError("tool call is too long")
    try:
        return json.loads(body), True
    except (json.JSONDecodeError, RecursionError):
        pass
    if body.startswith("{"):
        try:  # single quotes / trailing commas; literal_eval evaluates no code
            return ast.literal_eval(body), False
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            pass
    raise ValueError('tool call is not valid JSON: write {"name": "shell", "arguments": {"command": "..."}}')


def _command_of(obj: object, *, allow_string_arguments: bool) -> str:
    """The command of a decoded call object; raises ValueError naming what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("tool call must be a JSON object")
    if obj.get("name") != TOOL_NAME:
        raise ValueError(f'tool call must name the tool "{TOOL_NAME}"')
    arguments = obj.get("arguments")
    if isinstance(arguments, str) and allow_string_arguments:
        try:
            arguments = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            raise ValueError("tool call arguments are not valid JSON") from None
    if not isinstance(arguments, dict):
        raise ValueError('tool call needs "arguments": {"command": "..."}')
    command = arguments.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError('tool call needs a non-empty string "command"')
    return command.strip()


def _strip_fences(text: str) -> str:
    return _FENCE.sub("", text)


def _block(text: str, start: int, tag: str) -> tuple[str, int, bool]:
    """Body of the block whose opening tag ends at `start`: (body, end offset, closed?)."""
    close = f"</{tag}>"
    stop = text.find(close, start)
    if stop < 0:
        return text[start:], len(text), False
    return text[start:stop], stop + len(close), True


def parse_action(text: str) -> Action:
    """Parse one assistant turn into a tool call, an answer or an invalid action (with the reason)."""
    if not isinstance(text, str):
        return Action("invalid", error="empty reply")
    clean = _strip_fences(text).strip()
    think_match = _THINK.search(clean)
    first_open = _ACTION_OPEN.search(clean)
    if think_match and first_open and first_open.start() < think_match.start():
        think_match = None  # a think block AFTER the action is not this turn's reasoning
    if think_match:
        think, search_from = think_match.group(1), think_match.end()
    elif "</think>" in clean and "<think>" not in clean:  # the opening tag was in the prompt or got lost
        search_from = clean.index("</think>") + len("</think>")
        think = clean[: search_from - len("</think>")]
    else:
        think, search_from = None, 0
    opening = _ACTION_OPEN.search(clean, search_from)
    if think is None:
        think = clean[: opening.start() if opening else len(clean)]
    think = _ANY_TAG.sub("", think).strip()
    if opening is None:
        return Action("invalid", think=think, text=text,
                      error="no <tool_call> or <answer> block after the reasoning")
    tag = opening.group(1)
    body, end, closed = _block(clean, opening.end(), tag)
    kept = clean[:end] + ("" if closed else f"</{tag}>")
    if tag == "answer":
        answer = _ANY_TAG.sub("", body).strip()
        if not answer:
            return Action("invalid", think=think, text=text, error="the <answer> block is empty")
        return Action("answer", answer=answer, think=think, text=kept)
    try:
        obj, _ = _load_call_object(body)
        command = _command_of(obj, allow_string_arguments=True)
    except ValueError as exc:
        return Action("invalid", think=think, text=text, error=str(exc))
    return Action("tool", command=command, think=think, text=kept)


def render_tool_call(command: str) -> str:
    """The canonical tool-call block for `command`."""
    call = {"name": TOOL_NAME, "arguments": {"command": command}}
    return f"<tool_call>{json.dumps(call, ensure_ascii=False)}</tool_call>"


def render_turn(think: str, command: str | None = None, answer: str | None = None) -> str:
    """The canonical assistant text (cold start writes SFT data with it): think, then ONE action."""
    if (command is None) == (answer is None):
        raise ValueError("render_turn needs exactly one of command or answer")
    action = render_tool_call(command) if command is not None else f"<answer>{answer.strip()}</answer>"
    return f"<think>{think.strip()}</think>\n{action}"


def _gate_turn(text: str, *, last: bool) -> str | None:
    """Why one assistant turn breaks the canonical format, or None when it is fine."""
    if not isinstance(text, str):
        return "not text"
    counts = {tag: (text.count(f"<{tag}>"), text.count(f"</{tag}>")) for tag in _TAGS}
    for tag, (opened, closed) in counts.items():
        if opened != closed:
            return f"unbalanced <{tag}> tags"
    if counts["tool_response"][0]:
        return "the model wrote a <tool_response> block"
    if counts["think"][0] != 1:
        return "each turn needs exactly one <think> block"
    if counts["tool_call"][0] + counts["answer"][0] != 1:
        return "each turn needs exactly one action"
    stripped = text.strip()
    match = _GATE_TURN.fullmatch(stripped)
    if match is None:
        if stripped.startswith("<think>") and counts["answer"][0] and stripped.split("</answer>", 1)[1].strip():
            return "text after </answer>"
        return "wrong order: the turn must be <think>...</think> then the action, nothing around them"
    kind, body = match.group("kind"), match.group("body")
    if kind == "answer":
        if not last:
            return "an answer before the last turn"
        return None if body.strip() else "empty answer"
    if last:
        return "no answer: the episode ends on a tool call"
    try:
        obj, strict = _load_call_object(body)
        if not strict:
            return "tool call is not strict JSON"
        _command_of(obj, allow_string_arguments=False)
    except ValueError as exc:
        return str(exc)
    return None


def format_gate(assistant_turns: list[str], *, max_tool_calls: int | None = None) -> tuple[bool, str]:
    """Whether a whole episode follows think -> (tool_call -> tool_response -> think)* -> answer.

    Tool responses live in tool messages, so in the assistant texts this means: every turn is
    `<think>..</think>` + one strictly valid shell call, except the last, which is `<think>..</think>` +
    a non-empty `<answer>` with nothing after it. Returns (ok, reason); the reward is F1 x ok.
    """
    if not assistant_turns:
        return False, "no assistant turn"
    if max_tool_calls is not None and len(assistant_turns) - 1 > max_tool_calls:
        return False, f"more than {max_tool_calls} tool calls"
    for index, turn in enumerate(assistant_turns):
        reason = _gate_turn(turn, last=index == len(assistant_turns) - 1)
        if reason:
            return False, f"turn {index + 1}: {reason}"
    return True, "ok"


def first_answer(assistant_turns: list[str]) -> str | None:
    """The episode's answer: the first `<answer>` block over its turns (the rule eval and reward share)."""
    for turn in assistant_turns:
        action = parse_action(turn)
        if action.kind == "answer":
            return action.answer
    return None
