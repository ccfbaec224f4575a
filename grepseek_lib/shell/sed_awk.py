"""Read sed scripts and awk programs, which are little languages that can run programs and open files.

A sed script is walked command by command and an awk program is tokenised, so `e`, `w`, `r`,
`system()`, pipes and redirection are found wherever they hide. The one sed delimiter scanner here
serves both the policy's walk and the planner's test for a plain `s///`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grepseek_lib.shell.types import Refused

# ---- sed -------------------------------------------------------------------------------------------

_SED_SIMPLE = set("=dDgGhHnNpPxzF")
_SED_REFUSED_CMDS = {
    "w": "the sed `w` command writes a file", "W": "the sed `W` command writes a file",
    "r": "the sed `r` command reads another file", "R": "the sed `R` command reads another file",
    "e": "the sed `e` command runs a program",
}
#: The s/// flags the planner accepts as line-local (no w/e/m).
_PLAIN_S_FLAGS = re.compile(r"[gpiI0-9]*")


def sed_delimited(script: str, i: int, delim: str) -> int:
    """Index just after the closing `delim` of a regex/replacement that starts at i (GNU sed's rules)."""
    n = len(script)
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


def is_plain_substitution(script: str) -> bool:
    """True for exactly one `s<d>re<d>repl<d>flags` with flags in g p i I 0-9 (no address, no w/e/m)."""
    if len(script) < 4 or script[0] != "s" or "\n" in script:
        return False
    delim = script[1]
    if delim in "\\\n":
        return False
    try:
        end = sed_delimited(script, sed_delimited(script, 2, delim), delim)
    except Refused:
        return False
    return _PLAIN_S_FLAGS.fullmatch(script[end:]) is not None


def _skip(script: str, i: int, chars: str) -> int:
    """The first index from i whose character is not in `chars`."""
    while i < len(script) and script[i] in chars:
        i += 1
    return i


def _sed_address(script: str, i: int) -> int:
    """Index after one address (a line number, `$`, /re/ or \\cREc with I/M flags), or i if none."""
    n = len(script)
    if i < n and script[i].isdigit():
        while i < n and (script[i].isdigit() or script[i] == "~"):
            i += 1
        return i
    if i < n and script[i] == "$":
        return i + 1
    if i < n and script[i] == "/":
        return _skip(script, sed_delimited(script, i + 1, "/"), "IM")
    if i < n and script[i] == "\\" and i + 1 < n:
        return _skip(script, sed_delimited(script, i + 2, script[i + 1]), "IM")
    return i


def _sed_addresses(script: str, i: int) -> int:
    """Index of the command after an address or `addr1,[+~]addr2` range and any `!`."""
    i = _skip(script, _sed_address(script, i), " \t")
    if i < len(script) and script[i] == ",":
        i = _skip(script, i + 1, " \t")
        if i < len(script) and script[i] in "+~":
            i += 1
        i = _sed_address(script, i)
    return _skip(script, i, " \t!")


def check_sed_script(script: str) -> None:
    """Walk a GNU sed script command by command; refuse e/w/W/r/R, s///w, s///e and anything unclear."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;}":
            i += 1
            continue
        if c == "#":
            while i < n and script[i] != "\n":
                i += 1
            continue
        i = _sed_addresses(script, i)
        if i >= n:
            return  # an address without a command: sed reports it
        i = _sed_command(script, i)


def _sed_command(script: str, i: int) -> int:
    """Check the command at i and skip its arguments; the index after them."""
    n = len(script)
    cmd = script[i]
    i += 1
    if cmd in _SED_REFUSED_CMDS:
        raise Refused(f"sed: {_SED_REFUSED_CMDS[cmd]}, which is not allowed")
    if cmd == "{" or cmd in _SED_SIMPLE:
        return i
    if cmd in "qQlL":
        return _skip(script, i, " \t0123456789")
    if cmd in "bBtTv:":  # a label: end it early (what follows is walked as commands again)
        i = _skip(script, i, " \t")
        while i < n and (script[i].isalnum() or script[i] in "_.-"):
            i += 1
        return i
    if cmd in "aic":
        while i < n and script[i] != "\n":  # text runs to the end of the line
            i += 2 if script[i] == "\\" else 1
        return i
    if cmd in "sy":
        if i >= n or script[i] in "\n\\":
            raise Refused(f"sed: malformed `{cmd}` command")
        delim = script[i]
        i = sed_delimited(script, sed_delimited(script, i + 1, delim), delim)
        return _check_s_flags(script, i) if cmd == "s" else i
    raise Refused(f"sed: command {cmd!r} is not understood by the policy; simplify the script")


def _check_s_flags(script: str, i: int) -> int:
    """Refuse the s/// flags that write (w) or run (e) and any unknown one; the index after the flags."""
    while i < len(script) and script[i] not in ";\n}# \t":
        flag = script[i]
        if flag == "w":
            raise Refused("sed: the s///w flag writes a file, which is not allowed")
        if flag == "e":
            raise Refused("sed: the s///e flag runs a program, which is not allowed")
        if flag not in "gpiImM0123456789":
            raise Refused(f"sed: unknown s/// flag {flag!r}")
        i += 1
    return i


# ---- awk -------------------------------------------------------------------------------------------

AWK_REFUSED_NAMES = {"system": "awk system() runs a program", "ARGV": "awk ARGV selects the files awk reads",
                     "ARGC": "awk ARGC selects the files awk reads",
                     "ENVIRON": "awk ENVIRON reads the environment (not part of the corpus)"}
_AWK_KEYWORDS = frozenset("BEGIN END function func if else while for do break continue next nextfile exit "
                          "return delete in getline print printf".split())
_AWK_TOKEN = re.compile(
    r"""(?P<space>[ \t\r]+|\\\n)|(?P<newline>\n)|(?P<comment>\#[^\n]*)|(?P<string>"(?:[^"\\\n]|\\.)*")"""
    r"""|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"""
    r"""|(?P<op>\|\||&&|>>|>=|<=|==|!=|!~|\+\+|--|\*\*=?|[-+*/%^]=|[-+*/%^<>!~?:,;=(){}\[\]$|&@])""",
    re.S)


def check_awk_program(program: str) -> None:
    """Tokenise an awk program; refuse system(), pipes, print redirection, getline from files, ARGV."""
    scan = _AwkScan()
    i, n = 0, len(program)
    while i < n:
        if program[i] == "/" and scan.prev == "getline":
            raise Refused("awk: getline followed by `/` is ambiguous; simplify the program")
        if program[i] == "/" and scan.prev != "operand":
            i, scan.prev = _awk_regex_end(program, i), "operand"
            continue
        m = _AWK_TOKEN.match(program, i)
        if not m:
            raise Refused(f"awk: cannot read the program near {program[i:i + 10]!r}; simplify it")
        i = m.end()
        scan.token(m.lastgroup or "", m.group())
    if scan.saw_getline and scan.saw_less:
        raise Refused("awk getline < file reads another file, which is not allowed")


def _awk_regex_end(program: str, i: int) -> int:
    """Index after a regex literal starting at i: up to the first unescaped `/` on the same line."""
    n = len(program)
    j = i + 1
    while j < n and program[j] != "/":
        if program[j] == "\n":
            raise Refused("awk: unterminated regex")
        j += 2 if program[j] == "\\" else 1
    if j >= n:
        raise Refused("awk: unterminated regex")
    return j + 1


@dataclass
class _AwkScan:
    """What the tokeniser needs to remember: is a `/` division or a regex, and is `>` a redirection?"""

    prev: str = ""  #: kind of previous significant token: "operand", "getline" or "other"
    depth: int = 0
    print_depth: int | None = None  #: paren depth at which the current print/printf statement started
    saw_getline: bool = False
    saw_less: bool = False

    def end_print(self) -> None:
        if self.print_depth is not None and self.depth <= self.print_depth:
            self.print_depth = None

    def token(self, kind: str, text: str) -> None:
        if kind in ("space", "comment"):
            return
        if kind == "newline":
            self.end_print()
            self.prev = "other"
        elif kind in ("string", "number"):
            self.prev = "operand"
        elif kind == "name":
            self.name(text)
        else:
            self.operator(text)

    def name(self, text: str) -> None:
        if text in AWK_REFUSED_NAMES:
            raise Refused(f"{AWK_REFUSED_NAMES[text]}, which is not allowed")
        if text == "getline":
            self.saw_getline = True
            self.prev = "getline"
            return
        if text in ("print", "printf"):
            self.print_depth = self.depth
        self.prev = "other" if text in _AWK_KEYWORDS else "operand"

    def operator(self, text: str) -> None:
        if text in ("|", "|&", "&"):
            raise Refused("awk pipes (print | cmd, cmd | getline) run programs, which is not allowed")
        if text == "@":
            raise Refused("awk @-directives (@include, @load) are not allowed")
        if text in (">", ">>") and self.print_depth is not None and self.depth == self.print_depth:
            raise Refused("awk print/printf redirection writes a file, which is not allowed; "
                          "use parentheses for comparisons: print (a > b)")
        if text == "<":
            self.saw_less = True
        if text in ("(", "["):
            self.depth += 1
        elif text in (")", "]"):
            self.depth -= 1
        elif text in (";", "{", "}"):
            self.end_print()
        self.prev = "operand" if text in (")", "]", "$", "++", "--") else "other"


def check_awk_assignment(text: str) -> None:
    """Refuse `-v NAME=...` or a `NAME=...` operand that sets a variable choosing what awk reads."""
    name = text.partition("=")[0]
    if name in AWK_REFUSED_NAMES:
        raise Refused(f"awk: assigning {name} is not allowed (it selects the files awk reads)")
