"""Per-program argv checks: refuse the options that run programs, write or read other files, and every
path that leaves the corpus folder. Each check returns the parse it made, so no later reader parses again.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from grepseek_lib.shell.options import RUNS_PROGRAM, WRITES, Spec, names, parse_args, refuse_options
from grepseek_lib.shell.sed_awk import check_awk_assignment, check_awk_program, check_sed_script
from grepseek_lib.shell.specs import (
    AWK,
    AWK_REFUSED,
    CAT,
    CUT,
    GREP,
    HEAD,
    LS,
    RG,
    RG_REFUSED,
    SED,
    SED_REFUSED,
    SORT,
    SORT_REFUSED,
    TAIL,
    TAIL_REFUSED,
    TR,
    UNIQ,
    WC,
    WC_REFUSED,
)
from grepseek_lib.shell.types import ParsedArgs, Refused

#: A program's check: its arguments in, the parse it checked out (None for find), or Refused.
Check = Callable[[list[str]], ParsedArgs | None]

#: More worker threads than this is a thread bomb, not a search (NPROC does not bind root).
MAX_THREADS = 64


def check_path(path: str, what: str = "path") -> None:
    """Refuse a path that leaves the corpus folder (absolute, `..` above it); `-` (stdin) is fine."""
    if path == "-":
        return
    if path == "":
        return  # opens nothing: the program reports "No such file" itself
    if path.startswith("/"):
        raise Refused(f"absolute {what} {path!r} is not allowed; the corpus is corpus.jsonl in the working folder")
    norm = posixpath.normpath(path)
    if norm == ".." or norm.startswith("../"):
        raise Refused(f"{what} {path!r} leaves the corpus folder; the corpus is corpus.jsonl in the working folder")


def _check_grep_like(program: str, args: list[str], spec: Spec, refused: dict[str, str]) -> ParsedArgs:
    parsed = parse_args(program, args, spec)
    refuse_options(program, parsed, refused)
    for value in parsed.values("--file"):
        check_path(value, "pattern file")
    for value in parsed.values("--ignore-file", "--exclude-from"):
        check_path(value, "ignore file")
    operands = parsed.operands
    pattern_given = parsed.has("--regexp", "--file")
    lists_files = program == "rg" and parsed.has("--files", "--type-list", "--pcre2-version", "--version",
                                                 "-V", "--help", "-h", "--generate")
    if operands and not pattern_given and not lists_files:
        operands = operands[1:]  # the first operand is the pattern
    for path in operands:
        check_path(path)
    return parsed


def _check_thread_count(program: str, parsed: ParsedArgs, *option_names: str) -> None:
    for value in parsed.values(*option_names):
        if not value.isdigit() or int(value) > MAX_THREADS:
            raise Refused(f"{program}: at most {MAX_THREADS} threads, got {value!r}")


def _check_rg(args: list[str]) -> ParsedArgs:
    parsed = _check_grep_like("rg", args, RG, RG_REFUSED)
    _check_thread_count("rg", parsed, "-j", "--threads")
    return parsed


def _check_grep(args: list[str]) -> ParsedArgs:
    return _check_grep_like("grep", args, GREP, {})


def _check_files_program(program: str, spec: Spec, refused: dict[str, str] | None = None,
                         max_operands: int | None = None, why_max: str = "") -> Check:
    """The check of a program whose operands are all files it reads (head, cat, sort, ...)."""
    def check(args: list[str]) -> ParsedArgs:
        parsed = parse_args(program, args, spec)
        refuse_options(program, parsed, refused or {})
        if max_operands is not None and len(parsed.operands) > max_operands:
            raise Refused(f"{program}: {why_max}")
        for value in parsed.values("--random-source"):
            check_path(value, "random source")
        if program == "sort":
            _check_thread_count(program, parsed, "--parallel")
        for path in parsed.operands:
            check_path(path)
        return parsed

    return check


def _check_tail(args: list[str]) -> ParsedArgs:
    parsed = parse_args("tail", args, TAIL)
    refuse_options("tail", parsed, TAIL_REFUSED)
    for name, value in parsed.options:
        if name == "-NUM" and "f" in (value or ""):
            raise Refused(f"tail -{value}: {TAIL_REFUSED['--follow']}")
    for path in parsed.operands:
        if re.fullmatch(r"\+\d*[bcl]?f", path):
            raise Refused(f"tail {path}: {TAIL_REFUSED['--follow']}")
        check_path(path)
    return parsed


def _check_tr(args: list[str]) -> ParsedArgs:
    return parse_args("tr", args, TR)  # operands are character sets, never files: tr only reads stdin


def _check_sed(args: list[str]) -> ParsedArgs:
    parsed = parse_args("sed", args, SED)
    refuse_options("sed", parsed, SED_REFUSED)
    scripts = parsed.values("--expression")
    operands = parsed.operands
    if not scripts:
        if not operands:
            return parsed  # sed prints its usage error
        scripts, operands = [operands[0]], operands[1:]
    for script in scripts:
        check_sed_script(script)
    for path in operands:
        check_path(path)
    return parsed


def _check_awk(args: list[str]) -> ParsedArgs:
    parsed = parse_args("awk", args, AWK)
    refuse_options("awk", parsed, AWK_REFUSED)
    for value in parsed.values("-v"):
        check_awk_assignment(value)
    if not parsed.operands:
        return parsed  # awk prints its usage error
    program, rest = parsed.operands[0], parsed.operands[1:]
    check_awk_program(program)
    for operand in rest:
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", operand):
            check_awk_assignment(operand)
        else:
            check_path(operand)
    return parsed


# ---- find ------------------------------------------------------------------------------------------

_FIND_NO_ARG = names(
    "-daystart -depth -d -follow -ignore_readdir_race -noignore_readdir_race -mount -xdev -noleaf -nowarn "
    "-warn -true -false -empty -executable -readable -writable -nouser -nogroup -print -print0 -ls -prune "
    "-quit -not -and -a -or -o ! ( ) , -help --help -version --version")
_FIND_ONE_ARG = names(
    "-maxdepth -mindepth -regextype -amin -atime -cmin -ctime -fstype -gid -group -ilname -iname -inum "
    "-ipath -iregex -iwholename -links -lname -mmin -mtime -name -path -perm -regex -size -type -uid -used "
    "-user -wholename -xtype -context -printf")
_FIND_PATH_ARG = names("-anewer -cnewer -newer -samefile")
_FIND_REFUSED = {
    "-exec": RUNS_PROGRAM, "-execdir": RUNS_PROGRAM, "-ok": RUNS_PROGRAM, "-okdir": RUNS_PROGRAM,
    "-delete": "deletes files, which is not allowed", "-fprint": WRITES, "-fprint0": WRITES,
    "-fprintf": WRITES, "-fls": WRITES,
    "-files0-from": "reads starting points from a file, which is not allowed",
    "-D": "debug output is not allowed",
}


def _check_find(args: list[str]) -> None:
    """find takes an expression, not options: walk it primary by primary."""
    i = 0
    while i < len(args) and (args[i] in ("-H", "-L", "-P", "-D") or re.fullmatch(r"-O\d*", args[i])):
        if args[i] == "-D":
            raise Refused(f"find -D: {_FIND_REFUSED['-D']}")
        i += 1
    while i < len(args) and not (args[i].startswith("-") and args[i] != "-") and args[i] not in ("(", "!", ")", ","):
        check_path(args[i], "starting point")
        i += 1
    while i < len(args):
        primary = args[i]
        i += 1
        if primary in _FIND_REFUSED:
            raise Refused(f"find {primary}: {_FIND_REFUSED[primary]}")
        if primary in _FIND_NO_ARG:
            continue
        if primary in _FIND_ONE_ARG or primary in _FIND_PATH_ARG or re.fullmatch(r"-newer[aBcmt][aBcmt]", primary):
            if i >= len(args):
                return  # find reports the missing argument itself
            if primary in _FIND_PATH_ARG or (primary.startswith("-newer") and not primary.endswith("t")):
                check_path(args[i], "reference file")
            i += 1
            continue
        raise Refused(f"find: {primary!r} is not an allowed expression; use tests such as -name, -type and "
                      "actions -print or -printf")


CHECKS: dict[str, Check] = {
    "rg": _check_rg,
    "grep": _check_grep,
    "find": _check_find,
    "sed": _check_sed,
    "awk": _check_awk,
    "head": _check_files_program("head", HEAD),
    "tail": _check_tail,
    "cat": _check_files_program("cat", CAT),
    "ls": _check_files_program("ls", LS, {"--hyperlink": RG_REFUSED["--hyperlink-format"]}),
    "wc": _check_files_program("wc", WC, WC_REFUSED),
    "sort": _check_files_program("sort", SORT, SORT_REFUSED),
    "cut": _check_files_program("cut", CUT),
    "uniq": _check_files_program("uniq", UNIQ, max_operands=1,
                                 why_max="a second file operand is uniq's OUTPUT file, which would be written; "
                                         "give one input (or none) and read stdout"),
    "tr": _check_tr,
}
