"""What kind of search a command is, read off the command text alone (so any teacher's trajectories, and
the agent's own episodes, can be counted per strategy), and the count-first variant of a read.

The cold start teaches several first searches instead of one title lookup: a name in the passage text,
a distinctive phrase of the question matched case-insensitively, two words that must co-occur (a
second filter), and the exact title line. A count (`| wc -l`) sizes a result before it is read.
"""

from __future__ import annotations

import re

from grepseek_lib.coldstart.verify import command_patterns
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.types import Refused

#: The first-search strategies, in the order reports list them.
STRATEGIES = ("text", "phrase", "cooccur", "title")
_HEAD_TAIL = re.compile(r"\| head -n \d+$")
_MATCHERS = ("rg", "grep")


def count_command(command: str) -> str | None:
    """The count-first variant of a reading command (`... | head -n N` -> `... | wc -l`)."""
    if not _HEAD_TAIL.search(command):
        return None
    return _HEAD_TAIL.sub("| wc -l", command)




def strategy_of(command: str) -> str:
    """title (the `\\"Title` line), cooccur (a second rg/grep filter), phrase (case-insensitive,
    several words), text (a name in passage text), or other (no rg/grep search, or refused)."""
    try:
        stages = parse_command(command).stages
        patterns = command_patterns(command, programs=_MATCHERS)
    except Refused:
        return "other"
    matchers = [s for s in stages if s.program in _MATCHERS]
    if not matchers or not patterns:
        return "other"
    if patterns[0].startswith('"'):
        return "title"
    if len(matchers) > 1:
        return "cooccur"
    first = matchers[0].argv[1:]
    ignore_case = any(a in ("-i", "--ignore-case") or (a.startswith("-") and not a.startswith("--")
                                                         and "i" in a[1:]) for a in first)
    return "phrase" if ignore_case and len(patterns[0].split()) > 1 else "text"
