"""What every policy backend returns and how its text ends: the Generation record and the stop-string helpers.

Every backend returns the text *including* the stop string that ended it (`</tool_call>`, `</answer>`), because
the action parser needs the closing tag; OpenAI-style servers drop it, so the HTTP client puts it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

#: Where an assistant turn ends in our protocol; the action is complete at either tag.
DEFAULT_STOPS = ("</tool_call>", "</answer>")


@dataclass
class Generation:
    """One assistant turn. Token counts are None when the server does not report them."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    finish_reason: str = "stop"  # "stop" (eos or stop string) or "length"


class Backend(Protocol):
    #: The policy's tokenizer where known (the shell tool cuts observations with it), else None.
    tokenizer: Any

    def generate(
        self,
        conversations: list[list[dict]],
        *,
        max_new_tokens: int,
        temperature: float,
        stop: list[str] | None = None,
    ) -> list[Generation]: ...


def cut_at_stop(text: str, stop: list[str] | None) -> tuple[str, bool]:
    """Keep text up to and including the earliest stop string; report whether one was found."""
    best = None
    for s in stop or ():
        i = text.find(s) if s else -1
        if i >= 0 and (best is None or i + len(s) < best):
            best = i + len(s)
    return (text, False) if best is None else (text[:best], True)


def restore_stop(text: str, stop: list[str] | None) -> str:
    """Re-append a closing-tag stop string that an OpenAI-style server removed.

    A closing tag `</x>` is restored when the text opens `<x>` after its last `</x>`, i.e. the turn was cut
    exactly at that tag; text that simply ended (eos) is left alone.
    """
    for s in stop or ():
        if s.startswith("</") and s.endswith(">"):
            opener = "<" + s[2:]
            if text.rfind(opener) > text.rfind(s):
                return text + s
    return text
