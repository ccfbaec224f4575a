"""Whether the index path pays for one command: its estimated time against a plain run's.

Both are estimated in seconds from figures measured on the 1.2 GB scaled corpus (docs/INDEX.md):
a plain first stage scans page-cached text at the rate of its program (rg's case-sensitive literal
search skips with memchr; -i and grep compare every byte), the index path costs a fixed part, one
copy call per candidate block, and the copy and scan of the candidate bytes. A plain run reads the
corpus, or with a head (`head`, `-m`) until its N-th line plus what fills the writer's buffer
(STOP_SLACK_LINES more lines). Where that is, the candidate blocks bound only from below: tightly
when every alternative is one bare word (nearly every candidate block holds a match), loosely for a
phrase or a word inside punctuation (a block holding each of its words rarely holds the phrase, or
`"Rex"` as a title), so there, with a head, the index is taken whenever it is cheap (HEAD_RISK_S, or
HEAD_RISK_SHARE of a whole plain run). A head over more than a prefix's candidates runs on growing
prefixes of them (indexed.py): a bare word is costed by its first prefix, a phrase by its worst case
(every prefix, then all), taken when that is no slower than a plain run over the whole corpus.
"""

from __future__ import annotations

import numpy as np

#: Plain scan rates from the page cache, bytes per second (bench engine, 2-core machine).
RG_RATE, RG_FOLD_RATE, GREP_RATE = 24e9, 10e9, 1.5e9
#: A run's process chain (its private folder, spawn to exit), and the index path's (lookups, a reused
#: folder, the same chain): scripts/index_breakdown.py.
PLAIN_S, FIXED_S = 2.5e-3, 2e-3
#: Writing one candidate block (one iovec of a writev from a kept mapping) and each of its bytes (the
#: write and what rg does beyond its scan: line-number rewriting under -n, its output).
PER_BLOCK_S, PER_BYTE_S = 0.5e-6, 0.5e-9
#: rg and grep write through a buffer: a head stops them only some lines after its N-th.
STOP_SLACK_LINES = 16
#: With a phrase and a head, the index is used whenever it costs at most this, or this share of a plain
#: run over the whole corpus (grep reads 1.2 GB in 0.8 s): a plain run that would have stopped early was a
#: few ms, one that reads the corpus for want of matches 10-100x more.
HEAD_RISK_S, HEAD_RISK_SHARE = 10e-3, 0.1


def scan_rate(program: str, folds_case: bool) -> float:
    """Bytes per second a plain first stage of `program` scans."""
    if program == "grep":
        return GREP_RATE
    return RG_FOLD_RATE if folds_case else RG_RATE


def index_seconds(blocks: int, nbytes: int, rate: float) -> float:
    """Estimated time of the index path over `blocks` candidate blocks holding `nbytes`."""
    return FIXED_S + PER_BLOCK_S * blocks + nbytes * (PER_BYTE_S + 1 / rate)


def not_worth(blocks: np.ndarray, nbytes: int, ends: np.ndarray, size: int, rate: float,
              head_lines: int | None, one_word: bool, prefix: tuple[int, int] | None = None,
              extra_s: float = 0.0) -> str | None:
    """Why reading `blocks` (or any superset of them) costs more than a plain run, else None.

    `ends[i]` is where block i ends in the corpus, `head_lines` the N of a head that stops a plain run
    (None: it reads the corpus), `one_word` whether every alternative is a single bare word, `prefix`
    (blocks, bytes) of the first run of a head that runs on growing prefixes (indexed.py), None when it
    runs once, `extra_s` what each run costs beyond one chain (renumbered output's later stages run as a
    second chain). A superset costs at least as much and stops a plain run no later, so the answer holds for it.
    """
    cost = index_seconds(len(blocks), nbytes, rate) + extra_s
    if prefix is not None:
        # a head that does not fill from the prefixes pays two more chains; one that does, the first only
        worst = cost + 2 * FIXED_S + index_seconds(*prefix, rate) + 2 * extra_s
        if not one_word:
            return None if worst <= max(HEAD_RISK_S, PLAIN_S + size / rate) else "a plain scan is as fast"
        cost = index_seconds(*prefix, rate) + extra_s
    if head_lines is not None and not one_word and cost <= max(HEAD_RISK_S, HEAD_RISK_SHARE * size / rate):
        return None
    plain_bytes = size
    if head_lines is not None and len(blocks) > head_lines + STOP_SLACK_LINES:
        plain_bytes = int(ends[blocks[head_lines + STOP_SLACK_LINES - 1]])
    if cost >= PLAIN_S + plain_bytes / rate:
        return "a plain scan is as fast"
    return None
