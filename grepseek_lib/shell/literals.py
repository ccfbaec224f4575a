"""Literals every match of a pattern must contain, for rg (Rust regex), grep -E (ERE) and grep (BRE).

required(pattern, syntax) returns alternatives (the pattern matches only lines matching one of them),
each a list of literal strings all of which a matching line contains; None when some alternative
has no provable literal (then the index cannot help). The scan is deliberately conservative: every
construct it does not understand ends the current literal (a shorter literal only adds candidates)
or gives up; it never guesses. Examples: `Henry Feil+den` -> [["Henry Fei", "den"]];
`\\bParis\\b|London` -> [["Paris"], ["London"]]; `[A-Z]+ University` -> [[" University"]].
"""

from __future__ import annotations

from collections.abc import Iterator

FIXED = "fixed"
RUST = "rust"
ERE = "ere"
BRE = "bre"

#: Escapes that match one character class or an empty position and take no argument.
_CLASS_ESCAPES = {RUST: set("bBdDwWsSAzntrfv"), ERE: set("bBwWsS<>`'"), BRE: set("bBwWsS<>`'")}
#: Rust escapes followed by an argument (\x41, \u{...}, \p{L}, \pL).
_ARG_ESCAPES = set("xuUpP")


class _GiveUp(Exception):
    pass


def required(pattern: str, syntax: str) -> list[list[str]] | None:
    """Alternatives of required literals (see the module docstring); None when not provable."""
    if syntax == FIXED:
        return [[pattern]] if pattern else None
    try:
        alternatives = [_runs(alt, syntax) for alt in _split_top(pattern, syntax)]
    except _GiveUp:
        return None
    if any(not runs for runs in alternatives):
        return None
    return alternatives


_STRUCTURE = {"(": "open", ")": "close", "|": "bar"}


def _structure(pattern: str, syntax: str, start: int = 0) -> Iterator[tuple[str, int, int]]:
    """(open|close|bar, position, width) of each group bracket and alternation bar from `start`,
    skipping escaped characters and bracket expressions."""
    i = start
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            if syntax == BRE and pattern[i + 1] in _STRUCTURE:
                yield _STRUCTURE[pattern[i + 1]], i, 2
            i += 2
            continue
        if c == "[":
            i = _class_end(pattern, i, syntax)
            continue
        if syntax != BRE and c in _STRUCTURE:
            yield _STRUCTURE[c], i, 1
        i += 1


def _split_top(pattern: str, syntax: str) -> list[str]:
    """The pattern cut at its top-level alternation bars (`|`, or `\\|` in BRE)."""
    parts, depth, start = [], 0, 0
    for kind, pos, width in _structure(pattern, syntax):
        if kind == "bar" and depth == 0:
            parts.append(pattern[start:pos])
            start = pos + width
        elif kind != "bar":
            depth += 1 if kind == "open" else -1
    if depth != 0:
        raise _GiveUp
    parts.append(pattern[start:])
    return parts


def _class_end(pattern: str, i: int, syntax: str) -> int:
    """Index just past the bracket expression starting at pattern[i] == '['."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    depth = 1
    while j < len(pattern):
        c = pattern[j]
        if syntax == RUST and c == "\\":
            j += 2
            continue
        if c == "[" and j + 1 < len(pattern) and pattern[j + 1] in ":=.":
            close = pattern.find(pattern[j + 1] + "]", j + 2)
            if close < 0:
                raise _GiveUp
            j = close + 2
            continue
        if c == "[" and syntax == RUST:
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise _GiveUp


def _group_end(pattern: str, i: int, syntax: str) -> int:
    """Index just past the group opened at i (`(` or BRE `\\(`)."""
    depth = 0
    for kind, pos, width in _structure(pattern, syntax, i):
        if kind != "bar":
            depth += 1 if kind == "open" else -1
            if depth == 0:
                return pos + width
    raise _GiveUp


def _repeat_end(pattern: str, i: int, close: str) -> int:
    """Index just past a `{m}`, `{m,}`, `{m,n}` or `{,n}` counter whose body starts at i; else give up."""
    end = pattern.find(close, i)
    if end < 0:
        raise _GiveUp
    low, _, high = pattern[i:end].partition(",")
    if not (low.isdigit() or (low == "" and high.isdigit())) or (high and not high.isdigit()):
        raise _GiveUp
    return end + len(close)


def _runs(alt: str, syntax: str) -> list[str]:
    """The literal runs of one alternative (no top-level bar inside)."""
    runs: list[str] = []
    run: list[str] = []

    def cut(drop_last: bool = False) -> None:
        if drop_last and run:
            run.pop()
        if run:
            runs.append("".join(run))
        run.clear()

    i = 0
    while i < len(alt):
        c = alt[i]
        if c == "\\":
            i = _escape(alt, i, syntax, run, cut)
            continue
        if c in "*?+" and (syntax != BRE or c == "*"):
            cut(drop_last=True)
        elif c == "{" and syntax != BRE:
            cut(drop_last=True)
            i = _repeat_end(alt, i + 1, "}")
            continue
        elif c == "[":
            cut()
            i = _class_end(alt, i, syntax)
            continue
        elif c == "(" and syntax != BRE:
            if syntax == RUST and alt.startswith("(?", i) and not _plain_flags(alt, i):
                raise _GiveUp
            cut()
            i = _group_end(alt, i, syntax)
            continue
        elif c in ".^$" or (syntax == BRE and c in "+?{}()|") or (syntax == RUST and c in ")|"):
            cut()
        elif c == "\n":
            raise _GiveUp
        else:
            run.append(c)
        i += 1
    cut()
    return runs


def _plain_flags(alt: str, i: int) -> bool:
    """`(?flags)` or `(?flags:` with flags that keep literals literal (no `x`: verbose mode)."""
    j = i + 2
    while j < len(alt) and alt[j] in "imsRU-":
        j += 1
    return j < len(alt) and alt[j] in ":)"


def _escape(alt: str, i: int, syntax: str, run: list[str], cut) -> int:
    """Handle the escape at alt[i] == '\\'; returns the index after it."""
    if i + 1 >= len(alt):
        raise _GiveUp
    nxt = alt[i + 1]
    if syntax == BRE and nxt in "?+":
        cut(drop_last=True)
        return i + 2
    if syntax == BRE and nxt == "{":
        cut(drop_last=True)
        return _repeat_end(alt, i + 2, "\\}")
    if syntax == BRE and nxt == "(":
        cut()
        return _group_end(alt, i, syntax)
    if nxt.isascii() and not nxt.isalnum() and nxt not in " \n" and not (syntax == BRE and nxt in "|)}"):
        run.append(nxt)
        return i + 2
    if nxt in _CLASS_ESCAPES[syntax] or (syntax != RUST and nxt.isdigit()):
        cut()
        return i + 2
    if syntax == RUST and nxt in _ARG_ESCAPES:
        cut()
        j = i + 2
        if j < len(alt) and alt[j] == "{":
            close = alt.find("}", j)
            if close < 0:
                raise _GiveUp
            return close + 1
        width = {"x": 2, "u": 4, "U": 8}.get(nxt, 1)
        return j + width
    raise _GiveUp
