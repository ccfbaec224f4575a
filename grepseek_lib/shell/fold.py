"""Case classes and words: how the index names text so that every case-insensitive match is found.

The index stores *folded words*: maximal runs of word characters, each character replaced by one
representative of its case class. A class joins every character with its single-character
lower/upper case mappings (closed transitively), so it contains rg's Unicode simple case folding
(k, K and U+212A KELVIN SIGN; s, S and U+017F LONG S) and grep's ASCII-only folding under LC_ALL=C.
Bigger classes only add candidates, never lose a match: one index serves case-sensitive and
case-insensitive searches alike.

Words are cut with one predicate on both sides (text at build time, pattern literals at query time):
ASCII letters, digits and `_`, and every non-ASCII character (in bytes: every byte >= 0x80, which
is what lets the build cut words with numpy; invalid UTF-8 decodes to surrogates, also non-ASCII).
The predicate is the same for every member of a case class (no class mixes an ASCII non-letter
with anything else). A literal that occurs
in a line therefore yields the same words there, except at its two ends, where the text's word may
extend further (a prefix or suffix of the literal's first/last word, see Term).

The table takes seconds to compute over all of Unicode, so it is computed once per build and stored
in the index (fold.json): queries fold with exactly the table the text was folded with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: Term kinds: which text words may hold the literal's word.
EXACT = "exact"  #: the whole word (a word inside the literal)
PREFIX = "prefix"  #: words that start with it (the literal's last word)
SUFFIX = "suffix"  #: words that end with it (the literal's first word)
CONTAINS = "contains"  #: words that contain it (a literal that is one partial word)


@dataclass(frozen=True)
class Term:
    """One folded word a matching line must hold, and how it may sit inside a text word."""

    kind: str
    key: bytes


@lru_cache(maxsize=1)
def compute_table() -> dict[int, str]:
    """Code point -> class representative (the smallest member) for every member of a non-trivial class.

    Cached: the table depends only on this Python's Unicode database (callers must not mutate it).
    """
    parent: dict[str, str] = {}

    def find(c: str) -> str:
        while parent.get(c, c) != c:
            c = parent[c]
        return c

    for cp in range(0x110000):
        c = chr(cp)
        for mapped in (c.lower(), c.upper()):
            if len(mapped) == 1 and mapped != c:
                a, b = find(c), find(mapped)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return {ord(c): find(c) for c in parent if find(c) != c}


#: A word: ASCII letters, digits, `_` and every non-ASCII character (surrogates included).
WORD = re.compile("[0-9A-Za-z_\u0080-\U0010ffff]+")
_ASCII_RUNS = re.compile("[0-9A-Za-z_]{2,}")


class Folder:
    """Folds and cuts text into words with one stored table (see the module docstring)."""

    def __init__(self, table: dict[int, str]) -> None:
        self.table = table

    def fold(self, word: str) -> str:
        return word.upper() if word.isascii() else word.translate(self.table)

    def literal_terms(self, literal: str, unicode_case: bool = False) -> list[Term]:
        """The words a line holding `literal` (in any case of its classes) must hold; [] when none.

        `unicode_case`: the search may fold case the Unicode way (rg -i, -S, `(?i)`). rg's case tables may
        be newer than this Python's (ripgrep 15 joins U+019B with U+A7DC, unknown to Unicode 14) or join
        characters that have no lower/upper mapping (U+0390 with U+1FD3), so a word with a non-ASCII
        character only names its ASCII runs, which every matching text word holds (ASCII letters' classes
        are stable); a run shorter than two characters is left out."""
        terms = []
        for match in WORD.finditer(literal):
            word = match.group()
            if unicode_case and not word.isascii():
                terms.extend(Term(CONTAINS, run.upper().encode()) for run in _ASCII_RUNS.findall(word))
                continue
            at_start, at_end = match.start() == 0, match.end() == len(literal)
            kind = CONTAINS if at_start and at_end else SUFFIX if at_start else PREFIX if at_end else EXACT
            terms.append(Term(kind, self.fold(word).encode("utf-8")))
        return terms
