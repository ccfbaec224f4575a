"""Execution-based verification of one chain step, the answer-leak rule, and the text matching they share.

A step counts only if its command, EXECUTED through the shell tool, printed a passage that holds a form
of the sub-answer and a strict judge says it answers the sub-question. Matching works on word tokens
(lower-cased, articles dropped, punctuation as a separator), so "B-29" and "B - 29" are the same form.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.types import EXIT_REFUSED, Refused

_WORD = re.compile(r"[^\W_]+")
_U_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
#: The start of a corpus line, kept when a cut line is not whole JSON (its id and contents still read).
_CUT_LINE = re.compile(r'^\{"id": "([^"]*)", "contents": "(.*?)(?:"\}?)?$', re.DOTALL)
_ARTICLES = frozenset({"a", "an", "the"})
_YES_NO = frozenset({"yes", "no"})
#: rg/grep options whose next argument is a value, not a file; -e / -f values are patterns.
_VALUE_OPTS = frozenset({"-m", "-A", "-B", "-C", "-g", "-t", "-T", "-j", "-M", "--max-count", "--context",
                         "--glob", "--type", "--max-columns", "--after-context", "--before-context"})
_PATTERN_OPTS = frozenset({"-e", "--regexp"})
#: A relaxed form match must cover this share of the form's words: "Boeing B-29 Superfortress" is a form
#: of "Boeing B - 29 Superfortress bomber" (4 of 5), but "Hank Williams" is not one of "Hank Williams, Jr.".
RELAXED_SHARE = 0.75
#: Month abbreviations read as the month ("Dec. 10, 1817" is a form of "December 10, 1817").
_MONTHS = {m[:3]: m for m in ("january", "february", "march", "april", "may", "june", "july", "august",
                              "september", "october", "november", "december")} | {"sept": "september"}


def words(text: str) -> list[str]:
    """Lower-cased word tokens without articles: the unit every match here works on."""
    return [_MONTHS.get(w, w) for w in _WORD.findall(text.lower()) if w not in _ARTICLES]


def is_yes_no(answer: str) -> bool:
    return " ".join(words(answer)) in _YES_NO


def _find_run(haystack: list[str], needle: list[str]) -> int:
    n = len(needle)
    if n == 0:
        return -1
    for start in range(len(haystack) - n + 1):
        if haystack[start:start + n] == needle:
            return start
    return -1


def contains(text: str, form: str) -> bool:
    """Whether `text` holds `form` as a run of whole words."""
    return _find_run(words(text), words(form)) >= 0


def locate(text: str, forms: Iterable[str], *, relaxed: bool = False) -> str | None:
    """The text's OWN spelling of the first form it holds (so a bridge or answer is quoted as observed).

    With `relaxed`, a run of at least RELAXED_SHARE of a multi-word form's words also counts.
    """
    spans = [(m.start(), m.end(), _MONTHS.get(m.group().lower(), m.group().lower())) for m in _WORD.finditer(text)]
    spans = [s for s in spans if s[2] not in _ARTICLES]
    tokens = [s[2] for s in spans]
    needles = [words(form) for form in forms]
    for exact in (True, False) if relaxed else (True,):  # every exact form before any partial one
        for needle in needles:
            if exact:
                sizes = [len(needle)]
            else:
                sizes = list(range(len(needle) - 1, math.ceil(len(needle) * RELAXED_SHARE) - 1, -1))
            for size in sizes:
                for offset in range(len(needle) - size + 1):
                    start = _find_run(tokens, needle[offset:offset + size])
                    if start >= 0:
                        return text[spans[start][0]:spans[start + size - 1][1]]
    return None


def output_passages(stdout: str) -> list[dict]:
    """The printed corpus lines as {id, contents}; a line that is not a whole JSON object (cut, counted)
    is kept as raw text so matching still sees what the agent saw."""
    passages = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("contents"), str):
            passages.append({"id": str(obj.get("id", "")), "contents": obj["contents"]})
        elif cut := _CUT_LINE.match(line):
            passages.append({"id": cut.group(1), "contents": _unescape(cut.group(2))})
        else:
            passages.append({"id": "", "contents": _unescape(line)})
    return passages


def _unescape(text: str) -> str:
    """Undo JSON escapes (\\" \\n \\u00e9) in a raw or cut corpus line or a pattern, as the agent reads them."""
    text = _U_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    return text.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def observed_text(stdout: str) -> str:
    return "\n".join(p["contents"] for p in output_passages(stdout))


def command_patterns(command: str, programs: tuple[str, ...] = ("rg", "grep", "awk", "sed")) -> list[str]:
    """The search strings of a command (rg/grep patterns, awk/sed scripts), unescaped as the corpus
    reads them. Raises Refused when the policy would not run the command."""
    patterns: list[str] = []
    for stage in parse_command(command).stages:
        if stage.program not in programs:
            continue
        args = list(stage.argv[1:])
        if stage.program in ("awk", "sed"):
            patterns += [a for a in args if not a.startswith("-") and a != "corpus.jsonl"][:1]
            continue
        explicit, positional, skip = [], [], False
        for index, arg in enumerate(args):
            if skip:
                skip = False
                continue
            if arg in _PATTERN_OPTS and index + 1 < len(args):
                explicit.append(args[index + 1])
                skip = True
            elif arg.startswith("--regexp="):
                explicit.append(arg.split("=", 1)[1])
            elif arg in _VALUE_OPTS:
                skip = True
            elif arg.startswith("-") and arg != "-":
                continue
            else:
                positional.append(arg)
        patterns += explicit or positional[:1]
    return [_unescape(p.replace("\\b", " ").replace("\\s", " ").replace("\\w", " ")) for p in patterns]


def leaked(command: str, answers: Iterable[str], visible: str) -> str | None:
    """The answer-leak rule: the first answer form the command searches for although `visible` (the
    question and what was observed before) does not hold it; None when the command is clean."""
    pattern_words = [words(p) for p in command_patterns(command)]
    for answer in answers:
        needle = words(answer)
        if not needle or is_yes_no(answer) or _find_run(words(visible), needle) >= 0:
            continue
        if any(_find_run(pw, needle) >= 0 for pw in pattern_words):
            return answer
    return None


@dataclass
class Verdict:
    """The outcome of one executed attempt. `reason` is one of VERIFY_REASONS or "ok"."""

    ok: bool
    reason: str
    passage: dict | None = None  # the verified corpus line {id, contents}
    form: str | None = None  # the passage's own spelling of the sub-answer
    details: dict = field(default_factory=dict)


VERIFY_REASONS = ("refused", "timeout", "error", "empty", "missing_answer", "judge_no")

#: judge(passage_contents, passage_id) -> bool; the strict yes/no check of the role playing the Tutor.
Judge = Callable[[str, str], bool]


def verify_output(payload: dict, forms: list[str], judge: Judge, *, relaxed: bool = False) -> Verdict:
    """Check one executed command: it ran, printed something, a printed passage holds a form of the
    sub-answer, and the judge accepts that passage (the first passage that passes wins)."""
    if payload.get("exit_code") == EXIT_REFUSED:
        return Verdict(False, "refused")
    if payload.get("timed_out"):
        return Verdict(False, "timeout")
    stdout = payload.get("stdout") or ""
    if not stdout.strip():
        return Verdict(False, "empty" if payload.get("exit_code") in (0, 1) else "error")
    holders = []
    for passage in output_passages(stdout):
        form = locate(passage["contents"], forms, relaxed=relaxed)
        if form is not None:
            holders.append((passage, form))
    if not holders:
        return Verdict(False, "missing_answer")
    for passage, form in holders:
        if judge(passage["contents"], passage["id"]):
            return Verdict(True, "ok", passage, form)
    return Verdict(False, "judge_no")


__all__ = ["Refused", "Verdict", "command_patterns", "contains", "is_yes_no", "leaked", "locate",
           "observed_text", "output_passages", "verify_output", "words"]
