"""Which pipelines the index may answer: a first rg/grep stage whose every match holds known literals.

Such a stage prints exactly the same bytes when it reads only the blocks that hold those literals
(a line matches or not on its own, and a block holds whole lines), provided nothing it prints
depends on the lines it does not select: no -v, no context, no multiline, no -f. Counts (-c), -m,
-o, -l, -q, -r and binary-free text behave the same on the candidates, with one exception handled
by running the real program anyway (an empty candidate set still runs it, on an empty file, so
`grep -c` prints 0 and `rg -c` prints nothing, exactly as on the corpus). Line numbers and byte
offsets (-n, -b, --column) are rewritten from block offsets. Every later stage runs unchanged on
the first stage's output, so it must not read any path (shardable.post_reason). Case flags do not matter:
the index folds case more widely than either program (fold.py).

Later filters narrow too (`rg -w Mexico corpus.jsonl | rg -i gila | head`): while every stage before
one prints a subset of its input lines unchanged and chosen line by line (no -o, -r, numbering, -m or
head), each line reaching a later rg/grep is a whole corpus line, so a line that filter selects holds
its literals too, and the blocks lacking them can only feed it lines it drops.
"""

from __future__ import annotations

from dataclasses import dataclass

from grepseek_lib.shell import literals
from grepseek_lib.shell.plan import Renumber
from grepseek_lib.shell.shardable import CORPUS_OPERANDS, post_reason
from grepseek_lib.shell.specs import stage_args
from grepseek_lib.shell.types import ParsedArgs, Pipeline, Refused, Stage

#: Options that do not change which lines match nor let unselected lines reach the output.
_SAFE = {
    "rg": frozenset(
        "-i --ignore-case -S --smart-case -s --case-sensitive -F --fixed-strings -w --word-regexp -x --line-regexp "
        "-a --text --regexp --no-heading --trim -M --max-columns --max-columns-preview --no-config "
        "--line-buffered --block-buffered --mmap --no-mmap --no-messages --no-ignore --hidden -c --count "
        "--count-matches -m --max-count -o --only-matching -r --replace -l --files-with-matches -q --quiet "
        "-n --line-number -N --no-line-number -b --byte-offset --column -H --with-filename -I --no-filename "
        "--color --colour".split()),
    "grep": frozenset(
        "-E --extended-regexp -F --fixed-strings -G --basic-regexp -i -y --ignore-case --no-ignore-case -w "
        "--word-regexp -x --line-regexp -a --text -s --no-messages --regexp -U --binary --line-buffered -I "
        "-c --count -m --max-count -o --only-matching -l --files-with-matches -q --quiet --silent "
        "-n --line-number -b --byte-offset -H --with-filename -h --no-filename --color --colour".split()),
}
_MATCHERS = {"-E": literals.ERE, "--extended-regexp": literals.ERE, "-F": literals.FIXED,
             "--fixed-strings": literals.FIXED, "-G": literals.BRE, "--basic-regexp": literals.BRE}


@dataclass(frozen=True)
class Prefilter:
    """A pipeline the index may answer: the literals its first stage needs, and how to renumber."""

    alternatives: tuple[tuple[str, ...], ...]
    renumber: Renumber | None
    #: The stage compares case-insensitively (-i as the last case option): a slower plain scan.
    folds_case: bool = False
    #: Some rg stage whose literals are used may fold case the Unicode way (-i, -S or `(?` anywhere):
    #: non-ASCII words then name only their ASCII runs (fold.Folder.literal_terms).
    unicode_case: bool = False


def analyze(pipeline: Pipeline) -> Prefilter | str:
    """The Prefilter of `pipeline`, or the reason the index cannot answer it exactly."""
    first = pipeline.stages[0]
    if first.program not in _SAFE:
        return f"{first.program} is not a search the index can narrow"
    try:
        parsed = stage_args(first)
    except Refused as exc:
        return str(exc)
    unsafe = [name for name, _ in parsed.options if name not in _SAFE[first.program]]
    if unsafe:
        return f"{first.program} {unsafe[0]} may print lines the index does not select"
    patterns, operands = _patterns(parsed)
    if patterns is None:
        return f"{first.program} without a pattern"
    if len(operands) != 1 or operands[0] not in CORPUS_OPERANDS:
        return f"{first.program} does not read exactly corpus.jsonl"
    syntax = _syntax(first.program, parsed)
    if syntax is None:
        return "grep with more than one matcher (-E, -F, -G)"
    alternatives = _alternatives(first.program, patterns, syntax)
    if alternatives is None:
        return "a pattern without a literal every match must contain"
    if _keeps_whole_lines(parsed):
        alternatives = _narrow_by_filters(pipeline.stages[1:], alternatives)
    renumber = _renumber(first.program, parsed, operands[0])
    if isinstance(renumber, str):
        return renumber
    for stage in pipeline.stages[1:]:
        reason = post_reason(stage)
        if reason:
            return f"later stage: {reason}"
    return Prefilter(alternatives, renumber, _folds_case(parsed), _may_fold_unicode(pipeline))


def _patterns(parsed: ParsedArgs) -> tuple[list[str] | None, list[str]]:
    """(patterns, file operands) of a search stage; None patterns: it has none."""
    patterns = parsed.values("--regexp")
    operands = list(parsed.operands)
    if not patterns:
        if not operands:
            return None, operands
        patterns, operands = [operands[0]], operands[1:]
    return patterns, operands


#: Options under which a search prints something other than its selected input lines, unchanged, or
#: selects by position (-m): a later filter then sees lines that are not the corpus's, or other ones.
_RESHAPES = frozenset(
    "-o --only-matching -r --replace --trim -M --max-columns --max-columns-preview -n --line-number -b "
    "--byte-offset --column -H --with-filename -c --count --count-matches -l --files-with-matches -q --quiet "
    "--silent -m --max-count --color --colour".split())
#: A later filter's options that make its output depend on the lines it drops (numbers count its input).
_COUNTS_INPUT = frozenset("-n --line-number -b --byte-offset --column".split())
_INVERT = frozenset(("-v", "--invert-match"))
#: At most this many alternatives after AND-ing later filters (each is looked up on its own).
MAX_ALTERNATIVES = 32


def _keeps_whole_lines(parsed: ParsedArgs) -> bool:
    return not any(name in _RESHAPES for name, _ in parsed.options)


def _narrow_by_filters(later: tuple[Stage, ...], alternatives: tuple[tuple[str, ...], ...]
                       ) -> tuple[tuple[str, ...], ...]:
    """`alternatives` AND the literals of the later rg/grep filters that see whole corpus lines (module
    docstring): each filter stage, while every stage before it passed whole lines through by content."""
    for stage in later:
        if stage.program not in _SAFE:
            break
        try:
            parsed = stage_args(stage)
        except Refused:
            break
        patterns, operands = _patterns(parsed)
        if patterns is None or operands not in ([], ["-"]):
            break
        names = {name for name, _ in parsed.options}
        inverted = bool(names & _INVERT)
        if names - _SAFE[stage.program] - _INVERT:
            break
        syntax = _syntax(stage.program, parsed)
        found = None if inverted or syntax is None or names & _COUNTS_INPUT \
            else _alternatives(stage.program, patterns, syntax)
        if found and len(found) * len(alternatives) <= MAX_ALTERNATIVES:
            alternatives = tuple(a + b for a in alternatives for b in found)
        if names & _RESHAPES:
            break
    return alternatives


_IGNORE_CASE = frozenset(("-i", "-y", "--ignore-case"))
_SMART_CASE = frozenset(("-S", "--smart-case"))
_MAY_FOLD = _IGNORE_CASE | _SMART_CASE


def _may_fold_unicode(pipeline: Pipeline) -> bool:
    """Whether any rg stage may compare with Unicode case folding (whatever option comes last): grep under
    LC_ALL=C folds ASCII only."""
    for stage in pipeline.stages:
        if stage.program != "rg":
            continue
        try:
            parsed = stage_args(stage)
        except Refused:
            return True
        patterns, _ = _patterns(parsed)
        if any(name in _MAY_FOLD for name, _ in parsed.options) or any("(?" in p for p in patterns or ()):
            return True
    return False


def _folds_case(parsed: ParsedArgs) -> bool:
    """-i (or -y) is the last case option; smart case counts as sensitive (the faster plain scan)."""
    folding = False
    for name, _ in parsed.options:
        if name in _IGNORE_CASE:
            folding = True
        elif name in _SMART_CASE or name in ("-s", "--case-sensitive", "--no-ignore-case"):
            folding = False
    return folding


def _syntax(program: str, parsed: ParsedArgs) -> str | None:
    kinds = {_MATCHERS[name] for name, _ in parsed.options if name in _MATCHERS}
    if program == "rg":
        return literals.FIXED if literals.FIXED in kinds else literals.RUST
    if len(kinds) > 1:
        return None
    return kinds.pop() if kinds else literals.BRE


def _alternatives(program: str, patterns: list[str], syntax: str) -> tuple[tuple[str, ...], ...] | None:
    """OR over patterns (grep also splits each pattern at newlines) of AND-ed literals."""
    found: list[tuple[str, ...]] = []
    for pattern in patterns:
        if "\n" in pattern and program == "rg":
            return None
        for piece in pattern.split("\n"):
            try:
                piece.encode("utf-8")
            except UnicodeEncodeError:
                return None
            alts = literals.required(piece, syntax)
            if alts is None:
                return None
            found.extend(tuple(alt) for alt in alts)
    return tuple(found)


def _renumber(program: str, parsed: ParsedArgs, operand: str) -> Renumber | None | str:
    """How -n/-b/--column output is rewritten; None when nothing is numbered; a str: not handled."""
    line, column, byte = None, False, False
    fname = False
    for name, value in parsed.options:
        if name in ("-n", "--line-number"):
            line = True
        elif name in ("-N", "--no-line-number"):
            line = False
        elif name in ("-b", "--byte-offset"):
            byte = True
        elif name == "--column":
            column = True
        elif name in ("-H", "--with-filename"):
            fname = True
        elif name in ("-I", "-h", "--no-filename"):
            fname = False
        elif name in ("-r", "--replace") and "\n" in (value or ""):
            return "a replacement with a newline"
    if not (line or byte or column):
        return None
    if parsed.has("-c", "--count", "--count-matches", "-l", "--files-with-matches", "-q", "--quiet", "--silent"):
        return "numbering with -c, -l or -q"
    if column and line is False:
        return "rg --column with -N"
    fields = (("line",) if line or column else ()) + (("column",) if column else ()) + (("byte",) if byte else ())
    return Renumber(prefix=(operand + ":").encode() if fname else b"", fields=fields)

