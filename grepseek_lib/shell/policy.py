"""Decide what may run: a bash-exact word splitter plus per-program argv checks.

Model output is hostile input, so nothing here searches the raw text for bad words. The command is
split into words exactly as bash would split it (quotes, backslashes), anything bash would *expand*
or *redirect* is refused, and each stage's argv is parsed the way its program parses it, so that the
options that run programs, write files or read other files are found wherever they hide (clusters,
`--opt=val`, after operands). Every path a program would open must stay inside the corpus folder.
docs/REFUSALS.md lists every refusal and why.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from grepseek_lib.shell.types import EXIT_REFUSED, Pipeline, Refused, RunResult, Stage

ALLOWED_PROGRAMS = ("rg", "grep", "find", "sed", "awk", "head", "tail", "cat", "ls", "wc", "sort", "cut",
                    "uniq", "tr")

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


def refusal_line(reason: str | Refused) -> str:
    """The one stderr line every refusal is reported with (CLI and tool payload alike)."""
    return f"refused: {reason}"


def refused_result(exc: Refused | str) -> RunResult:
    """What a refused command returns: nothing ran, status 126, one `refused:` line on stderr."""
    return RunResult(b"", (refusal_line(exc) + "\n").encode(), EXIT_REFUSED)


# --------------------------------------------------------------------------------------------------
# Words: bash quote removal, refusing every expansion, redirection and control operator.
# --------------------------------------------------------------------------------------------------


def split_stages(text: str) -> list[list[str]]:
    """Split `text` into pipeline stages of words, exactly as bash would, or raise Refused."""
    if "\x00" in text:
        raise Refused("NUL bytes are not allowed in a command")
    stages: list[list[str]] = [[]]
    word: list[str] | None = None  # None: between words; [] : a word has started (maybe empty, '')
    i, n = 0, len(text)

    def end_word() -> None:
        nonlocal word
        if word is not None:
            stages[-1].append("".join(word))
            word = None

    while i < n:
        c = text[i]
        if c in " \t":
            end_word()
            i += 1
        elif c == "\n":
            raise Refused("newlines separate commands; run one pipeline on one line")
        elif c == "|":
            if text.startswith("||", i):
                raise Refused("`||` is not allowed; run one pipeline per call")
            if text.startswith("|&", i):
                raise Refused("`|&` is not allowed; stderr is already returned separately")
            end_word()
            if not stages[-1]:
                raise Refused("empty pipeline stage; write `prog args | prog args`")
            stages.append([])
            i += 1
        elif c in _OPERATOR_REASONS:
            raise Refused(_OPERATOR_REASONS[c])
        elif c == "$":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt in _DOLLAR_EXPANDS_UNQUOTED:
                raise Refused("`$` expansion (variables, $(...), $'...') is not allowed; "
                              "put a literal `$` in single quotes")
            word = (word or []) + ["$"]
            i += 1
        elif c == "\\":
            if i + 1 >= n:  # a trailing backslash stays literal in bash -c
                word = (word or []) + ["\\"]
                i += 1
            elif text[i + 1] == "\n":  # line continuation: removed, does not start a word
                i += 2
            else:
                word = (word or []) + [text[i + 1]]
                i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise Refused("unterminated single quote")
            word = (word or []) + [text[i + 1:end]]
            i = end + 1
        elif c == '"':
            chunk, i = _double_quoted(text, i + 1)
            word = (word or []) + [chunk]
        elif c in "*?[":
            raise Refused(_GLOB_REASON)
        elif c in "{}":
            raise Refused("unquoted braces are not allowed (brace expansion); quote them, e.g. '{print $1}'")
        elif c == "~":
            raise Refused("unquoted `~` is not allowed (home-directory expansion); the corpus is corpus.jsonl")
        elif c == "#" and word is None:
            raise Refused("comments (`#` at the start of a word) are not allowed; quote a literal #")
        else:
            word = (word or []) + [c]
            i += 1
    end_word()
    if not stages[-1]:
        if len(stages) == 1:
            raise Refused("empty command; write one pipeline such as: rg -m 5 'Paris' corpus.jsonl")
        raise Refused("the pipeline ends with `|`; add the next program or drop the pipe")
    return stages


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


# --------------------------------------------------------------------------------------------------
# Paths: every file a program would open must be the corpus folder or something inside it.
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# Options: one getopt-like parser driven by a per-program table.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """How one program parses its options (GNU getopt style unless `permute` is False)."""

    flags: str = ""  #: short options without a value
    valued: str = ""  #: short options with a value (attached or next word)
    optional: str = ""  #: short options with an optional attached value (e.g. sed -i[SUFFIX])
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    long_optional: frozenset[str] = frozenset()  #: --opt or --opt=value only
    short_to_long: dict[str, str] = field(default_factory=dict)  #: canonical names for refusals
    digits: bool = False  #: -NUM (and digits inside clusters) are options, as head -5 or grep -3
    permute: bool = True  #: options may follow operands (GNU); False: the first operand ends options
    negations: bool = False  #: any --no-NAME is a switch (ripgrep)


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass
class ParsedArgs:
    options: list[tuple[str, str | None]]  #: (canonical name such as "--file", value)
    operands: list[str]

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def values(self, *names: str) -> list[str]:
        return [value or "" for name, value in self.options if name in names]


def parse_args(program: str, args: list[str], spec: Spec) -> ParsedArgs:
    """Split args into options and operands the way `program` would; unknown options are refused."""
    options: list[tuple[str, str | None]] = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            operands.extend(args[i:])
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name in spec.long_valued:
                if not eq:
                    if i >= len(args):  # the program reports the missing value itself
                        options.append((name, None))
                        break
                    value = args[i]
                    i += 1
                options.append((name, value))
            elif name in spec.long_optional:
                options.append((name, value if eq else None))
            elif name in spec.long_flags or (spec.negations and name.startswith("--no-") and not eq):
                if eq:
                    raise Refused(f"{program}: option {name} takes no value")
                options.append((name, None))
            else:
                raise Refused(f"{program}: unknown option {name}; write long options in full "
                              f"(see `{program} --help`)")
        elif arg.startswith("-") and arg != "-":
            if spec.digits and re.fullmatch(r"-\d+[a-zA-Z]*", arg):
                options.append(("-NUM", arg[1:]))
                continue
            j = 1
            while j < len(arg):
                ch = arg[j]
                name = spec.short_to_long.get(ch, "-" + ch)
                if ch in spec.valued:
                    value = arg[j + 1:]
                    if not value:
                        if i >= len(args):  # the program reports the missing value itself
                            options.append((name, None))
                            break
                        value = args[i]
                        i += 1
                    options.append((name, value))
                    break
                if ch in spec.optional:
                    options.append((name, arg[j + 1:] or None))
                    break
                if ch in spec.flags or (spec.digits and ch.isdigit()):
                    options.append((name, None))
                    j += 1
                    continue
                raise Refused(f"{program}: unknown option -{ch} (see `{program} --help`)")
        else:
            operands.append(arg)
            if not spec.permute:
                operands.extend(args[i:])
                break
    return ParsedArgs(options, operands)


def _refuse_options(program: str, parsed: ParsedArgs, reasons: dict[str, str]) -> None:
    for name, _ in parsed.options:
        if name in reasons:
            raise Refused(f"{program} {name}: {reasons[name]}")


_RUNS_PROGRAM = "runs another program, which is not allowed"
_WRITES = "writes files, which is not allowed; the tool is read-only"

# ---- ripgrep 15 ----------------------------------------------------------------------------------

RG = Spec(
    flags="szFivxUPSawL.uHIbnNc0lopqhV",
    valued="efEmjgdtTABCMr",
    long_flags=_names(
        "--search-zip --case-sensitive --crlf --fixed-strings --ignore-case --invert-match --line-regexp "
        "--mmap --multiline --multiline-dotall --null-data --pcre2 --smart-case --stop-on-nonmatch --text "
        "--word-regexp --auto-hybrid-regex --binary --follow --glob-case-insensitive --hidden "
        "--ignore-file-case-insensitive --one-file-system --unrestricted --block-buffered --byte-offset "
        "--column --heading --help --include-zero --line-buffered --line-number --max-columns-preview "
        "--null --only-matching --passthru --passthrough --pretty --quiet --trim --vimgrep --with-filename "
        "--sort-files --count --count-matches --files-with-matches --files-without-match --json --debug "
        "--stats --trace --files --pcre2-version --type-list --version --ignore --ignore-dot "
        "--ignore-exclude --ignore-files --ignore-global --ignore-messages --ignore-parent --ignore-vcs "
        "--messages --require-git --unicode --pcre2-unicode --print0 --no-config"),
    long_valued=_names(
        "--regexp --file --pre --pre-glob --dfa-size-limit --encoding --engine --max-count --regex-size-limit "
        "--threads --glob --iglob --ignore-file --max-depth --maxdepth --max-filesize --type --type-not "
        "--type-add --type-clear --after-context --before-context --color --colors --context "
        "--context-separator --field-context-separator --field-match-separator --hostname-bin "
        "--hyperlink-format --max-columns --path-separator --replace --sort --sortr --generate"),
    short_to_long={"e": "--regexp", "f": "--file", "z": "--search-zip"},
    negations=True,
)
RG_REFUSED = {
    "--pre": _RUNS_PROGRAM,
    "--pre-glob": "only applies to --pre, which runs another program",
    "--search-zip": "runs decompression programs, which is not allowed; the corpus is plain text",
    "--hostname-bin": _RUNS_PROGRAM,
    "--hyperlink-format": "hyperlinks print the private folder's absolute path; use plain output",
}

# ---- GNU grep 3 ----------------------------------------------------------------------------------

GREP = Spec(
    flags="EFGPiyvwxcLloqsbHhnTZzUarRIV",
    valued="efmABCdD",
    long_flags=_names(
        "--extended-regexp --fixed-strings --basic-regexp --perl-regexp --ignore-case --no-ignore-case "
        "--invert-match --word-regexp --line-regexp --count --files-without-match --files-with-matches "
        "--only-matching --quiet --silent --no-messages --byte-offset --with-filename --no-filename "
        "--line-number --initial-tab --null --null-data --line-buffered --binary --text --recursive "
        "--dereference-recursive --no-group-separator --help --version"),
    long_valued=_names(
        "--regexp --file --max-count --label --binary-files --directories --devices --include --exclude "
        "--exclude-from --exclude-dir --after-context --before-context --context --group-separator"),
    long_optional=_names("--color --colour"),
    short_to_long={"e": "--regexp", "f": "--file"},
    digits=True,
)

# ---- GNU sed 4 -----------------------------------------------------------------------------------

SED = Spec(
    flags="nErsuz",
    valued="efl",
    optional="i",
    long_flags=_names(
        "--quiet --silent --debug --follow-symlinks --posix --regexp-extended --separate --sandbox "
        "--unbuffered --null-data --help --version"),
    long_valued=_names("--expression --file --line-length"),
    long_optional=_names("--in-place"),
    short_to_long={"e": "--expression", "f": "--file", "i": "--in-place"},
)
SED_REFUSED = {
    "--in-place": _WRITES,
    "--file": "reads a sed script from a file, which is not allowed; pass the script with -e",
}

# ---- awk (mawk; gawk-only options are refused) ---------------------------------------------------

AWK = Spec(valued="Fvf", long_flags=frozenset(), permute=False, short_to_long={"f": "-f"})
AWK_REFUSED = {"-f": "reads an awk program from a file, which is not allowed; pass the program inline"}

# ---- GNU coreutils ---------------------------------------------------------------------------------

SORT = Spec(
    flags="bcCdfghiMmnRrsuVz",
    valued="koStT",
    long_flags=_names(
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort --ignore-nonprinting "
        "--month-sort --human-numeric-sort --numeric-sort --random-sort --reverse --version-sort --debug "
        "--merge --stable --unique --zero-terminated --help --version"),
    long_valued=_names(
        "--sort --random-source --batch-size --compress-program --files0-from --key --output --buffer-size "
        "--field-separator --temporary-directory --parallel"),
    long_optional=_names("--check"),
    short_to_long={"o": "--output", "T": "--temporary-directory"},
)
SORT_REFUSED = {
    "--output": _WRITES + "; the sorted lines are printed to stdout anyway",
    "--temporary-directory": "chooses where sort writes temporary files, which is not allowed",
    "--compress-program": _RUNS_PROGRAM,
    "--files0-from": "reads file names from a file, which is not allowed; name corpus.jsonl directly",
}

UNIQ = Spec(
    flags="cdDiuz",
    valued="fsw",
    long_flags=_names("--count --repeated --ignore-case --unique --zero-terminated --help --version"),
    long_valued=_names("--skip-fields --skip-chars --check-chars"),
    long_optional=_names("--all-repeated --group"),
    digits=True,
)

HEAD = Spec(
    flags="qvz",
    valued="cn",
    long_flags=_names("--quiet --silent --verbose --zero-terminated --help --version"),
    long_valued=_names("--bytes --lines"),
    digits=True,
)

TAIL = Spec(
    flags="fFqvz",
    valued="cns",
    long_flags=_names("--quiet --silent --verbose --zero-terminated --retry --help --version"),
    long_valued=_names("--bytes --lines --max-unchanged-stats --pid --sleep-interval"),
    long_optional=_names("--follow"),
    short_to_long={"f": "--follow", "F": "--follow"},
    digits=True,
)
TAIL_REFUSED = {"--follow": "follows the file forever; use tail -n N", "--retry": "only useful with --follow",
                "--pid": "only useful with --follow"}

CAT = Spec(
    flags="AbeEnstTuv",
    long_flags=_names(
        "--show-all --number-nonblank --show-ends --number --squeeze-blank --show-tabs --show-nonprinting "
        "--help --version"),
)

LS = Spec(
    flags="aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxXZ1",
    valued="ITw",
    long_flags=_names(
        "--all --almost-all --author --escape --ignore-backups --directory --dired --classify --file-type "
        "--no-group --human-readable --si --dereference-command-line "
        "--dereference-command-line-symlink-to-dir --inode --kibibytes --dereference --numeric-uid-gid "
        "--literal --hide-control-chars --show-control-chars --quote-name --reverse --recursive --size "
        "--context --zero --help --version --full-time --group-directories-first"),
    long_valued=_names(
        "--block-size --format --hide --ignore --quoting-style --sort --tabsize --time --time-style --width"),
    long_optional=_names("--color --colour --hyperlink --indicator-style --classify"),
)

WC = Spec(
    flags="cmlLw",
    long_flags=_names("--bytes --chars --lines --max-line-length --words --help --version"),
    long_valued=_names("--files0-from --total"),
)
WC_REFUSED = {"--files0-from": SORT_REFUSED["--files0-from"]}

CUT = Spec(
    flags="nsz",
    valued="bcdf",
    long_flags=_names("--complement --only-delimited --zero-terminated --help --version"),
    long_valued=_names("--bytes --characters --delimiter --fields --output-delimiter"),
)

TR = Spec(
    flags="cCdst",
    long_flags=_names("--complement --delete --squeeze-repeats --truncate-set1 --help --version"),
)


# --------------------------------------------------------------------------------------------------
# Per-program checks.
# --------------------------------------------------------------------------------------------------


def _check_grep_like(program: str, args: list[str], spec: Spec, refused: dict[str, str]) -> None:
    parsed = parse_args(program, args, spec)
    _refuse_options(program, parsed, refused)
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


#: More worker threads than this is a thread bomb, not a search (NPROC does not bind root).
MAX_THREADS = 64


def _check_thread_count(program: str, parsed: ParsedArgs, *names: str) -> None:
    for value in parsed.values(*names):
        if not value.isdigit() or int(value) > MAX_THREADS:
            raise Refused(f"{program}: at most {MAX_THREADS} threads, got {value!r}")


def _check_rg(args: list[str]) -> None:
    _check_grep_like("rg", args, RG, RG_REFUSED)
    _check_thread_count("rg", parse_args("rg", args, RG), "-j", "--threads")


def _check_grep(args: list[str]) -> None:
    _check_grep_like("grep", args, GREP, {})


def _check_files_program(program: str, spec: Spec, refused: dict[str, str] | None = None,
                         max_operands: int | None = None, why_max: str = "") -> Callable[[list[str]], None]:
    def check(args: list[str]) -> None:
        parsed = parse_args(program, args, spec)
        _refuse_options(program, parsed, refused or {})
        if max_operands is not None and len(parsed.operands) > max_operands:
            raise Refused(f"{program}: {why_max}")
        for value in parsed.values("--random-source"):
            check_path(value, "random source")
        if program == "sort":
            _check_thread_count(program, parsed, "--parallel")
        for path in parsed.operands:
            check_path(path)

    return check


def _check_tail(args: list[str]) -> None:
    parsed = parse_args("tail", args, TAIL)
    _refuse_options("tail", parsed, TAIL_REFUSED)
    for name, value in parsed.options:
        if name == "-NUM" and "f" in (value or ""):
            raise Refused(f"tail -{value}: {TAIL_REFUSED['--follow']}")
    for path in parsed.operands:
        if re.fullmatch(r"\+\d*[bcl]?f", path):
            raise Refused(f"tail {path}: {TAIL_REFUSED['--follow']}")
        check_path(path)


def _check_tr(args: list[str]) -> None:
    parse_args("tr", args, TR)  # operands are character sets, never files: tr only reads stdin


def _check_sed(args: list[str]) -> None:
    parsed = parse_args("sed", args, SED)
    _refuse_options("sed", parsed, SED_REFUSED)
    scripts = parsed.values("--expression")
    operands = parsed.operands
    if not scripts:
        if not operands:
            return  # sed prints its usage error
        scripts, operands = [operands[0]], operands[1:]
    for script in scripts:
        check_sed_script(script)
    for path in operands:
        check_path(path)


def _check_awk(args: list[str]) -> None:
    parsed = parse_args("awk", args, AWK)
    _refuse_options("awk", parsed, AWK_REFUSED)
    for value in parsed.values("-v"):
        _check_awk_assignment(value)
    if not parsed.operands:
        return  # awk prints its usage error
    program, rest = parsed.operands[0], parsed.operands[1:]
    check_awk_program(program)
    for operand in rest:
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", operand):
            _check_awk_assignment(operand)
        else:
            check_path(operand)


def _check_awk_assignment(text: str) -> None:
    name = text.partition("=")[0]
    if name in _AWK_REFUSED_NAMES:
        raise Refused(f"awk: assigning {name} is not allowed (it selects the files awk reads)")


# ---- find ------------------------------------------------------------------------------------------

_FIND_NO_ARG = _names(
    "-daystart -depth -d -follow -ignore_readdir_race -noignore_readdir_race -mount -xdev -noleaf -nowarn "
    "-warn -true -false -empty -executable -readable -writable -nouser -nogroup -print -print0 -ls -prune "
    "-quit -not -and -a -or -o ! ( ) , -help --help -version --version")
_FIND_ONE_ARG = _names(
    "-maxdepth -mindepth -regextype -amin -atime -cmin -ctime -fstype -gid -group -ilname -iname -inum "
    "-ipath -iregex -iwholename -links -lname -mmin -mtime -name -path -perm -regex -size -type -uid -used "
    "-user -wholename -xtype -context -printf")
_FIND_PATH_ARG = _names("-anewer -cnewer -newer -samefile")
_FIND_REFUSED = {
    "-exec": _RUNS_PROGRAM, "-execdir": _RUNS_PROGRAM, "-ok": _RUNS_PROGRAM, "-okdir": _RUNS_PROGRAM,
    "-delete": "deletes files, which is not allowed", "-fprint": _WRITES, "-fprint0": _WRITES,
    "-fprintf": _WRITES, "-fls": _WRITES,
    "-files0-from": "reads starting points from a file, which is not allowed",
    "-D": "debug output is not allowed",
}


def _check_find(args: list[str]) -> None:
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


# ---- sed scripts -----------------------------------------------------------------------------------

_SED_SIMPLE = set("=dDgGhHnNpPxzF")
_SED_REFUSED_CMDS = {
    "w": "the sed `w` command writes a file", "W": "the sed `W` command writes a file",
    "r": "the sed `r` command reads another file", "R": "the sed `R` command reads another file",
    "e": "the sed `e` command runs a program",
}


def check_sed_script(script: str) -> None:
    """Walk a GNU sed script command by command; refuse e/w/W/r/R, s///w, s///e and anything unclear."""
    i, n = 0, len(script)

    def delimited(i: int, delim: str) -> int:
        """Index just after the closing `delim` of a regex/replacement starting at i."""
        while i < n:
            c = script[i]
            if c == "\\":
                i += 2
                continue
            if c == delim:
                return i + 1
            if c == "\n" and delim != "\n":
                raise Refused("sed: unterminated expression; keep sed scripts on one line")
            i += 1
        raise Refused("sed: unterminated `s`, `y` or address expression")

    def address(i: int) -> int:
        if i < n and script[i].isdigit():
            while i < n and (script[i].isdigit() or script[i] == "~"):
                i += 1
        elif i < n and script[i] == "$":
            i += 1
        elif i < n and script[i] == "/":
            i = delimited(i + 1, "/")
            while i < n and script[i] in "IM":
                i += 1
        elif i < n and script[i] == "\\" and i + 1 < n:
            i = delimited(i + 2, script[i + 1])
            while i < n and script[i] in "IM":
                i += 1
        return i

    while i < n:
        c = script[i]
        if c in " \t\n;}":
            i += 1
            continue
        if c == "#":
            while i < n and script[i] != "\n":
                i += 1
            continue
        i = address(i)
        while i < n and script[i] in " \t":
            i += 1
        if i < n and script[i] == ",":
            i += 1
            while i < n and script[i] in " \t":
                i += 1
            if i < n and script[i] in "+~":
                i += 1
            i = address(i)
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            return  # an address without a command: sed reports it
        cmd = script[i]
        i += 1
        if cmd in _SED_REFUSED_CMDS:
            raise Refused(f"sed: {_SED_REFUSED_CMDS[cmd]}, which is not allowed")
        if cmd == "{" or cmd in _SED_SIMPLE:
            continue
        if cmd in "qQlL":
            while i < n and script[i] in " \t0123456789":
                i += 1
        elif cmd in "bBtTv:":  # a label: end it early (what follows is walked as commands again)
            while i < n and script[i] in " \t":
                i += 1
            while i < n and (script[i].isalnum() or script[i] in "_.-"):
                i += 1
        elif cmd in "aic":
            while i < n and script[i] != "\n":  # text runs to the end of the line
                i += 2 if script[i] == "\\" else 1
        elif cmd in "sy":
            if i >= n or script[i] in "\n\\":
                raise Refused(f"sed: malformed `{cmd}` command")
            delim = script[i]
            i = delimited(delimited(i + 1, delim), delim)
            if cmd == "s":
                while i < n and script[i] not in ";\n}# \t":
                    flag = script[i]
                    if flag == "w":
                        raise Refused("sed: the s///w flag writes a file, which is not allowed")
                    if flag == "e":
                        raise Refused("sed: the s///e flag runs a program, which is not allowed")
                    if flag not in "gpiImM0123456789":
                        raise Refused(f"sed: unknown s/// flag {flag!r}")
                    i += 1
        else:
            raise Refused(f"sed: command {cmd!r} is not understood by the policy; simplify the script")


# ---- awk programs ----------------------------------------------------------------------------------

_AWK_REFUSED_NAMES = {"system": "awk system() runs a program", "ARGV": "awk ARGV selects the files awk reads",
                      "ARGC": "awk ARGC selects the files awk reads",
                      "ENVIRON": "awk ENVIRON reads the environment (not part of the corpus)"}
_AWK_KEYWORDS = _names("BEGIN END function func if else while for do break continue next nextfile exit "
                       "return delete in getline print printf")
_AWK_TOKEN = re.compile(
    r"""(?P<space>[ \t\r]+|\\\n)|(?P<newline>\n)|(?P<comment>\#[^\n]*)|(?P<string>"(?:[^"\\\n]|\\.)*")"""
    r"""|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"""
    r"""|(?P<op>\|\||&&|>>|>=|<=|==|!=|!~|\+\+|--|\*\*=?|[-+*/%^]=|[-+*/%^<>!~?:,;=(){}\[\]$|&@])""",
    re.S)


def check_awk_program(program: str) -> None:
    """Tokenise an awk program; refuse system(), pipes, print redirection, getline from files, ARGV."""
    i, n = 0, len(program)
    prev = ""  # kind of previous significant token: "operand" or "other"
    depth = 0
    print_depth: int | None = None  # paren depth at which the current print/printf statement started
    saw_getline = saw_less = False
    while i < n:
        if program[i] == "/" and prev == "getline":
            raise Refused("awk: getline followed by `/` is ambiguous; simplify the program")
        if program[i] == "/" and prev != "operand":  # a regex literal, read up to the first unescaped /
            j = i + 1
            while j < n and program[j] != "/":
                if program[j] == "\n":
                    raise Refused("awk: unterminated regex")
                j += 2 if program[j] == "\\" else 1
            if j >= n:
                raise Refused("awk: unterminated regex")
            i, prev = j + 1, "operand"
            continue
        m = _AWK_TOKEN.match(program, i)
        if not m:
            raise Refused(f"awk: cannot read the program near {program[i:i + 10]!r}; simplify it")
        i = m.end()
        kind, text = m.lastgroup, m.group()
        if kind in ("space", "comment"):
            continue
        if kind == "newline":
            if print_depth is not None and depth <= print_depth:
                print_depth = None
            prev = "other"
            continue
        if kind == "string":
            prev = "operand"
            continue
        if kind == "number":
            prev = "operand"
            continue
        if kind == "name":
            if text in _AWK_REFUSED_NAMES:
                raise Refused(f"{_AWK_REFUSED_NAMES[text]}, which is not allowed")
            if text == "getline":
                saw_getline = True
                prev = "getline"
                continue
            if text in ("print", "printf"):
                print_depth = depth
            prev = "other" if text in _AWK_KEYWORDS else "operand"
            continue
        # operators
        if text in ("|", "|&", "&"):
            raise Refused("awk pipes (print | cmd, cmd | getline) run programs, which is not allowed")
        if text == "@":
            raise Refused("awk @-directives (@include, @load) are not allowed")
        if text in (">", ">>") and print_depth is not None and depth == print_depth:
            raise Refused("awk print/printf redirection writes a file, which is not allowed; "
                          "use parentheses for comparisons: print (a > b)")
        if text == "<":
            saw_less = True
        if text in ("(", "["):
            depth += 1
        elif text in (")", "]"):
            depth -= 1
        elif text in (";", "{", "}") and print_depth is not None and depth <= print_depth:
            print_depth = None
        prev = "operand" if text in (")", "]", "$", "++", "--") else "other"
    if saw_getline and saw_less:
        raise Refused("awk getline < file reads another file, which is not allowed")


# --------------------------------------------------------------------------------------------------
# Entry point.
# --------------------------------------------------------------------------------------------------

_CHECKS: dict[str, Callable[[list[str]], None]] = {
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


def check_stage(argv: list[str]) -> Stage:
    """Check one stage's argv (after quote removal) and return it as a Stage."""
    program = argv[0]
    if program not in _CHECKS:
        allowed = " ".join(ALLOWED_PROGRAMS)
        shown = program if len(program) <= 40 else program[:40] + "..."
        raise Refused(f"{shown!r} is not an allowed program; use only: {allowed} (joined by |)")
    _CHECKS[program](list(argv[1:]))
    return Stage(tuple(argv))


#: Bounds on one command: more stages is a process flood, a longer text is not a search.
MAX_STAGES = 16
MAX_COMMAND_CHARS = 32_768


def parse_command(text: str) -> Pipeline:
    """Parse and check a command; return the Pipeline to run or raise Refused with a one-line reason."""
    if not isinstance(text, str):
        raise Refused("the command must be a string")
    if len(text) > MAX_COMMAND_CHARS:
        raise Refused(f"the command is longer than {MAX_COMMAND_CHARS} characters; write a shorter pipeline")
    words = split_stages(text)
    if len(words) > MAX_STAGES:
        raise Refused(f"at most {MAX_STAGES} pipeline stages are allowed, got {len(words)}")
    stages = tuple(check_stage(argv) for argv in words)
    return Pipeline(text=text, stages=stages)


#: Arguments the runner adds to a stage, never changing what an accepted command prints:
#: GNU sed's sandbox rejects e/r/w even if the script walk above ever missed one.
def hardened_argv(stage: Stage) -> list[str]:
    argv = list(stage.argv)
    if stage.program == "sed":
        argv.insert(1, "--sandbox")
    return argv
