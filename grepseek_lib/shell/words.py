"""Split a command into pipeline stages of words exactly as bash would (quote removal).

Anything bash would *expand*, *redirect* or treat as a control operator is refused here, so the words
that reach the per-program checks are exactly the argv bash would pass: nothing is left to expand.
"""

from __future__ import annotations

from grepseek_lib.shell.types import Refused

#: Characters after `$` that make bash expand (variables, positional/special parameters, $( $(( ${ $[).
_DOLLAR_EXPANDS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789{([@*#?$!-")
#: After an unquoted `$`, a quote starts ANSI-C ($'..') or locale ($"..") quoting.
_DOLLAR_EXPANDS_UNQUOTED = _DOLLAR_EXPANDS | {"'", '"'}
_OPERATOR_REASONS = {
    ";": "command lists (`;`) are not allowed; run one pipeline per call",
    "&": "background jobs and `&&` are not allowed; run one pipeline per call",
    "<": "input redirection is not allowed; name corpus.jsonl as a file argument (tr reads only stdin: "
         "cat corpus.jsonl | tr ...)",
    ">": "output redirection is not allowed (nothing may be written; stderr is already returned separately, "
         "so drop 2>/dev/null); pipe into head instead",
    "(": "subshells and grouping are not allowed; quote parentheses that belong to a pattern",
    ")": "subshells and grouping are not allowed; quote parentheses that belong to a pattern",
    "`": "command substitution is not allowed; quote backticks that belong to a pattern with '...'",
}
_GLOB_REASON = "unquoted glob characters (* ? [) are not allowed; put patterns in single quotes"


def split_stages(text: str) -> list[list[str]]:
    """Split `text` into pipeline stages of words, exactly as bash would, or raise Refused."""
    if "\x00" in text:
        raise Refused("NUL bytes are not allowed in a command")
    splitter = _Splitter(text)
    i = 0
    while i < len(text):
        i = splitter.step(i)
    splitter.end_word()
    stages = splitter.stages
    if not stages[-1]:
        if len(stages) == 1:
            raise Refused("empty command; write one pipeline such as: rg -m 5 'Paris' corpus.jsonl")
        raise Refused("the pipeline ends with `|`; add the next program or drop the pipe")
    return stages


class _Splitter:
    """The words read so far; each step reads one unquoted character or one quoted/escaped chunk."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.stages: list[list[str]] = [[]]
        self.word: list[str] | None = None  # None: between words; [] : a word has started (maybe empty, '')

    def end_word(self) -> None:
        if self.word is not None:
            self.stages[-1].append("".join(self.word))
            self.word = None

    def add(self, chunk: str) -> None:
        self.word = (self.word or []) + [chunk]

    def step(self, i: int) -> int:
        """Read what starts at `i`; the index after it."""
        c = self.text[i]
        if c in " \t":
            self.end_word()
            return i + 1
        if c == "\n":
            raise Refused("newlines separate commands; run one pipeline on one line")
        if c == "|":
            return self.pipe(i)
        if c in _OPERATOR_REASONS:
            raise Refused(_OPERATOR_REASONS[c])
        if c == "$":
            return self.dollar(i)
        if c == "\\":
            return self.backslash(i)
        if c == "'":
            end = self.text.find("'", i + 1)
            if end < 0:
                raise Refused("unterminated single quote")
            self.add(self.text[i + 1:end])
            return end + 1
        if c == '"':
            chunk, i = _double_quoted(self.text, i + 1)
            self.add(chunk)
            return i
        _refuse_unquoted(c, starts_word=self.word is None)
        self.add(c)
        return i + 1

    def pipe(self, i: int) -> int:
        if self.text.startswith("||", i):
            raise Refused("`||` is not allowed; run one pipeline per call")
        if self.text.startswith("|&", i):
            raise Refused("`|&` is not allowed; stderr is already returned separately")
        self.end_word()
        if not self.stages[-1]:
            raise Refused("empty pipeline stage; write `prog args | prog args`")
        self.stages.append([])
        return i + 1

    def dollar(self, i: int) -> int:
        nxt = self.text[i + 1] if i + 1 < len(self.text) else ""
        if nxt in _DOLLAR_EXPANDS_UNQUOTED:
            raise Refused("`$` expansion (variables, $(...), $'...') is not allowed; "
                          "put a literal `$` in single quotes")
        self.add("$")
        return i + 1

    def backslash(self, i: int) -> int:
        if i + 1 >= len(self.text):  # a trailing backslash stays literal in bash -c
            self.add("\\")
            return i + 1
        if self.text[i + 1] == "\n":  # line continuation: removed, does not start a word
            return i + 2
        self.add(self.text[i + 1])
        return i + 2


def _refuse_unquoted(c: str, starts_word: bool) -> None:
    """Refuse an unquoted character bash would expand (globs, braces, `~`) or read as a comment."""
    if c in "*?[":
        raise Refused(_GLOB_REASON)
    if c in "{}":
        raise Refused("unquoted braces are not allowed (brace expansion); quote them, e.g. '{print $1}'")
    if c == "~":
        raise Refused("unquoted `~` is not allowed (home-directory expansion); the corpus is corpus.jsonl")
    if c == "#" and starts_word:
        raise Refused("comments (`#` at the start of a word) are not allowed; quote a literal #")


def _double_quoted(text: str, i: int) -> tuple[str, int]:
    """Body of a "..." string starting at i (after the quote); returns (value, index after the quote)."""
    out: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            return "".join(out), i + 1
        if c == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and text[i + 1] in _DOLLAR_EXPANDS:
            raise Refused('`$` expansion inside double quotes is not allowed (bash expands "$(...)" and "$x"); '
                          "use single quotes")
        elif c == "`":
            raise Refused("command substitution (backticks) inside double quotes is not allowed; use single quotes")
        else:
            out.append(c)
            i += 1
    raise Refused("unterminated double quote")
