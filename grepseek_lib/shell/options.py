"""One getopt-like option parser, driven by a per-program table (specs.py).

Each program's argv is split into options and operands the way that program splits it, so an option
that runs a program, writes or reads a file is found wherever it hides (clusters, `--opt=val`, after
operands). An option the table does not know is refused: the policy never guesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grepseek_lib.shell.types import ParsedArgs, Refused

__all__ = ["RUNS_PROGRAM", "WRITES", "ParsedArgs", "Spec", "names", "parse_args", "refuse_options"]

RUNS_PROGRAM = "runs another program, which is not allowed"
WRITES = "writes files, which is not allowed; the tool is read-only"


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


def names(text: str) -> frozenset[str]:
    """A set of option names written as one space-separated string (the tables stay readable)."""
    return frozenset(text.split())


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
            i = _parse_long(program, arg, args, i, spec, options)
        elif arg.startswith("-") and arg != "-":
            i = _parse_short(program, arg, args, i, spec, options)
        else:
            operands.append(arg)
            if not spec.permute:
                operands.extend(args[i:])
                break
    return ParsedArgs(options, operands)


def _parse_long(program: str, arg: str, args: list[str], i: int, spec: Spec,
                options: list[tuple[str, str | None]]) -> int:
    """Read `--name[=value]` (the next word is the value where one is needed); the next index."""
    name, eq, value = arg.partition("=")
    if name in spec.long_valued:
        return _valued(name, value if eq else None, args, i, options)
    elif name in spec.long_optional:
        options.append((name, value if eq else None))
    elif name in spec.long_flags or (spec.negations and name.startswith("--no-") and not eq):
        if eq:
            raise Refused(f"{program}: option {name} takes no value")
        options.append((name, None))
    else:
        raise Refused(f"{program}: unknown option {name}; write long options in full "
                      f"(see `{program} --help`)")
    return i


def _parse_short(program: str, arg: str, args: list[str], i: int, spec: Spec,
                 options: list[tuple[str, str | None]]) -> int:
    """Read a cluster such as `-inC2` or `-5`; the next index."""
    if spec.digits and re.fullmatch(r"-\d+[a-zA-Z]*", arg):
        options.append(("-NUM", arg[1:]))
        return i
    for j in range(1, len(arg)):
        ch = arg[j]
        name = spec.short_to_long.get(ch, "-" + ch)
        if ch in spec.valued:
            return _valued(name, arg[j + 1:] or None, args, i, options)
        if ch in spec.optional:
            options.append((name, arg[j + 1:] or None))
            return i
        if ch in spec.flags or (spec.digits and ch.isdigit()):
            options.append((name, None))
            continue
        raise Refused(f"{program}: unknown option -{ch} (see `{program} --help`)")
    return i


def _valued(name: str, attached: str | None, args: list[str], i: int,
            options: list[tuple[str, str | None]]) -> int:
    """Record an option that takes a value: the attached one, else the next word; the next index."""
    if attached is None:
        if i >= len(args):  # the program reports the missing value itself
            options.append((name, None))
            return i
        attached = args[i]
        i += 1
    options.append((name, attached))
    return i


def refuse_options(program: str, parsed: ParsedArgs, reasons: dict[str, str]) -> None:
    """Refuse the first option of `parsed` that `reasons` names, with its reason."""
    for name, _ in parsed.options:
        if name in reasons:
            raise Refused(f"{program} {name}: {reasons[name]}")
