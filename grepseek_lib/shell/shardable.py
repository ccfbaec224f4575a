"""How each stage behaves when the corpus is split into shards: line-local, reducing, or safe after a merge.

Options are read from the policy's own parse of each stage (Stage.args), so a flag hidden in a cluster
or after an operand is seen exactly as the program sees it; every flag not listed here is "unknown"
and makes the plan sequential.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grepseek_lib.shell.sed_awk import is_plain_substitution
from grepseek_lib.shell.specs import stage_args
from grepseek_lib.shell.types import ParsedArgs, Refused, Stage

#: How the corpus may be named by the stage that reads it.
CORPUS_OPERANDS = ("corpus.jsonl", "./corpus.jsonl")


class Unsupported(Exception):
    """A stage this planner does not handle exactly; the message is the reason."""


def _args(stage: Stage) -> ParsedArgs:
    """The stage's parsed argv; a hand-built stage the policy would refuse is Unsupported."""
    try:
        return stage_args(stage)
    except Refused as exc:
        raise Unsupported(str(exc)) from None

@dataclass
class Search:
    """What one rg/grep stage does, as far as merging cares."""

    program: str
    operands: list[str]
    line: bool | None = None
    column: bool = False
    byte: bool = False
    with_filename: bool | None = None
    count: bool = False
    max_count: int | None = None
    only_matching: bool = False
    invert: bool = False
    replacement_has_newline: bool = False


_RG_LOCAL = frozenset(
    "-i --ignore-case -S --smart-case -s --case-sensitive -F --fixed-strings -w --word-regexp -x "
    "--line-regexp -a --text --regexp --no-heading --trim -M --max-columns --max-columns-preview "
    "--no-config --line-buffered --block-buffered --mmap --no-mmap --no-messages --no-ignore --hidden".split())
_GREP_LOCAL = frozenset(
    "-E --extended-regexp -F --fixed-strings -G --basic-regexp -i -y --ignore-case --no-ignore-case -w "
    "--word-regexp -x --line-regexp -a --text -s --no-messages --regexp -U --binary --line-buffered -I".split())
_NAMES = {
    "line_on": {"-n", "--line-number"},
    "line_off": {"-N", "--no-line-number"},
    "byte": {"-b", "--byte-offset"},
    "fname_on": {"-H", "--with-filename"},
    "count": {"-c", "--count", "--count-matches"},
    "max": {"-m", "--max-count"},
    "only": {"-o", "--only-matching"},
    "invert": {"-v", "--invert-match"},
}


def parse_search(stage: Stage) -> Search:
    program = stage.program
    parsed = _args(stage)
    info = Search(program=program, operands=list(parsed.operands))
    local = _RG_LOCAL if program == "rg" else _GREP_LOCAL
    fname_off = {"-I", "--no-filename"} if program == "rg" else {"-h", "--no-filename"}
    for name, value in parsed.options:
        if name in local:
            continue
        if name in _NAMES["line_on"]:
            info.line = True
        elif program == "rg" and name in _NAMES["line_off"]:
            info.line = False
        elif name in _NAMES["byte"]:
            info.byte = True
        elif program == "rg" and name == "--column":
            info.column = True
        elif name in _NAMES["fname_on"]:
            info.with_filename = True
        elif name in fname_off:
            info.with_filename = False
        elif name in _NAMES["count"]:
            info.count = True
        elif name in _NAMES["max"]:
            if not re.fullmatch(r"\d+", value or ""):
                raise Unsupported(f"{program} {name} {value!r} is not a plain count")
            info.max_count = int(value)
        elif name in _NAMES["only"]:
            info.only_matching = True
        elif name in _NAMES["invert"]:
            info.invert = True
        elif program == "rg" and name in ("-r", "--replace"):
            info.replacement_has_newline = info.replacement_has_newline or "\n" in (value or "")
        elif name in ("--color", "--colour") and (value or "never") in ("never", "auto"):
            continue
        else:
            raise Unsupported(f"{program} {name} is not handled shard by shard")
    if not parsed.has("--regexp", "--file"):
        if not info.operands:
            raise Unsupported(f"{program} without a pattern")
        info.operands = info.operands[1:]
    if info.column and info.line is False:
        raise Unsupported("rg --column with -N")
    return info


def is_corpus_source(operands: list[str]) -> bool:
    return len(operands) == 1 and operands[0] in CORPUS_OPERANDS


def _plain_count(value: str | None) -> int:
    if value is None or not re.fullmatch(r"\d+", value):
        raise Unsupported(f"count {value!r} is not a plain number")
    return int(value)


def parse_head(stage: Stage) -> tuple[str, int, list[str]]:
    """("lines"|"bytes", N, operands) of a head stage."""
    parsed = _args(stage)
    unit, count = "lines", 10
    for name, value in parsed.options:
        if name in ("-n", "--lines"):
            unit, count = "lines", _plain_count(value)
        elif name in ("-c", "--bytes"):
            unit, count = "bytes", _plain_count(value)
        elif name == "-NUM":
            unit, count = "lines", _plain_count(value)
        else:
            raise Unsupported(f"head {name}")
    return unit, count, list(parsed.operands)


_WC_FLAGS = {"-l": "-l", "--lines": "-l", "-c": "-c", "--bytes": "-c", "-w": "-w", "--words": "-w"}


def parse_wc(stage: Stage) -> list[str]:
    """Operands of a wc that prints exactly one sum-able count."""
    parsed = _args(stage)
    kinds = set()
    for name, _ in parsed.options:
        if name not in _WC_FLAGS:
            raise Unsupported(f"wc {name}")
        kinds.add(_WC_FLAGS[name])
    if len(kinds) != 1:
        raise Unsupported("wc must print exactly one of -l, -c, -w")
    return list(parsed.operands)


_SORT_ORDER = frozenset(
    "-b -d -f -g -h -i -M -n -r -V -s -u -k -t --ignore-leading-blanks --dictionary-order --ignore-case "
    "--general-numeric-sort --human-numeric-sort --ignore-nonprinting --month-sort --numeric-sort --reverse "
    "--version-sort --stable --unique --key --field-separator".split())


def parse_sort(stage: Stage) -> tuple[list[str], list[str], bool]:
    """(option words to reuse with `sort -m`, operands, stable) of a sort with a deterministic order."""
    parsed = _args(stage)
    words: list[str] = []
    stable = False
    for name, value in parsed.options:
        if name not in _SORT_ORDER:
            raise Unsupported(f"sort {name} is not merged shard by shard")
        stable = stable or name in ("-s", "--stable")
        if name.startswith("--"):
            words.append(name if value is None else f"{name}={value}")
        else:
            words.append(name if value is None else f"{name}{value}")
            if value == "" and name in ("-k", "-t"):
                raise Unsupported(f"sort {name} with an empty value")
    return words, list(parsed.operands), stable


def line_local_reason(stage: Stage, source: bool) -> str | None:
    """None when `stage` is line-local (reading the corpus when `source`, else stdin), else why not."""
    program = stage.program
    try:
        if program in ("rg", "grep"):
            info = parse_search(stage)
            ok_operands = is_corpus_source(info.operands) if source else not info.operands
            if not ok_operands:
                return f"{program} does not read exactly {'corpus.jsonl' if source else 'stdin'}"
            if info.line or info.byte or info.column or info.count or info.max_count is not None:
                return f"{program} numbers, counts or stops"
            return None
        if program not in ("cat", "cut", "sed", "tr"):
            return f"{program} is not line-local"
        parsed = _args(stage)
    except Unsupported as exc:
        return str(exc)
    operands = list(parsed.operands)
    names = [name for name, _ in parsed.options]
    if program == "cat":
        if names:
            return "cat with options"
    elif program == "cut":
        if any(n in ("-z", "--zero-terminated", "--help", "--version") for n in names):
            return "cut -z"
    elif program == "sed":
        allowed = {"-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-u", "--unbuffered",
                   "--sandbox", "--expression"}
        if any(n not in allowed for n in names):
            return "sed option not line-local"
        scripts = parsed.values("--expression")
        if not scripts:
            if not operands:
                return "sed without a script"
            scripts, operands = [operands[0]], operands[1:]
        if not all(is_plain_substitution(s) for s in scripts):
            return "sed script is not a single s/// without address"
    elif program == "tr":
        return _tr_reason(names, operands)
    if source:
        return None if is_corpus_source(operands) else f"{program} does not read exactly corpus.jsonl"
    return None if operands in ([], ["-"]) else f"{program} reads a file"


_TR_CLASSES = ("[:upper:]", "[:lower:]", "[:alpha:]", "[:digit:]", "[:alnum:]", "[:punct:]", "[:blank:]")


def _tr_set_is_simple(text: str, allow_newline: bool) -> bool:
    """Printable ASCII (no backslash, no '[' except a listed class); `\\n`/`\\t` only where allowed."""
    i = 0
    while i < len(text):
        if text.startswith(_TR_CLASSES, i):
            i = text.index(":]", i) + 2
            continue
        c = text[i]
        if allow_newline and text.startswith(("\\n", "\\t"), i):
            i += 2
            continue
        if not (" " <= c <= "~") or c in "\\[":
            return False
        i += 1
    return True


def _tr_reason(names: list[str], operands: list[str]) -> str | None:
    """tr is line-local when it never touches or squeezes newline and never makes NUL."""
    if names == [] and len(operands) == 2:
        ok = _tr_set_is_simple(operands[0], False) and _tr_set_is_simple(operands[1], True)
    elif names in (["-d"], ["--delete"]) and len(operands) == 1:
        ok = _tr_set_is_simple(operands[0], False)
    else:
        return "tr form not handled shard by shard"
    return None if ok else "tr set may touch newlines"


# --------------------------------------------------------------------------------------------------
# Post stages: run once on the merged bytes. They must not be able to see that the folder holds
# the merged stream instead of the corpus.
# --------------------------------------------------------------------------------------------------

_POST_PROGRAMS = frozenset("rg grep sed awk head tail cat wc sort cut uniq tr".split())
_GREP_RECURSIVE = frozenset("-r -R --recursive --dereference-recursive -d --directories --include --exclude "
                            "--exclude-dir --exclude-from".split())


def post_reason(stage: Stage) -> str | None:
    """None when `stage` may run on a stream that stands for the corpus output (it reads no path), else why not."""
    if stage.program not in _POST_PROGRAMS:
        return f"{stage.program} looks at the folder"
    for word in stage.argv[1:]:
        if "corpus.jsonl" in word or re.fullmatch(r"[./]+", word) or word.startswith(("./", "../")):
            return f"{stage.program} names a path ({word!r})"
    if stage.program in ("rg", "grep"):
        try:
            parsed = stage_args(stage)
        except Refused as exc:
            return str(exc)
        if parsed.has(*_GREP_RECURSIVE) or parsed.has("--files", "--file"):
            return f"{stage.program} may read files or the folder"
        operands = parsed.operands if parsed.has("--regexp") else parsed.operands[1:]
        if operands:
            return f"{stage.program} reads a file"
