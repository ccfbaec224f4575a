"""Which pipelines can run shard by shard, and the merge rule that makes the result exact.

A plan splits a pipeline into three parts:
  1. a *parallel part*, run on every shard (the shard appears as corpus.jsonl);
  2. a *merge* of the per-shard outputs that provably equals the parallel part's output on the
     whole file:
       - concat: every stage is line-local (its output for a line depends on that line only);
         shards end at line ends, so the outputs concatenate in shard order;
       - head: `head -n N` / `head -c N` / `rg|grep -m N` keep a prefix of that concatenation,
         so each shard is cut to N and the first N of the concatenation kept (later shards are
         cancelled once N lines are in);
       - sum: `wc -l|-c|-w` and `rg|grep -c|--count-matches` count a property of line-aligned
         pieces, so the counts add (the zero case and exit status come from the shards' own output);
       - sort_merge: `sort OPTS | [uniq |] head -n N`: every line of the global first N is among
         its shard's first N (after dedup when uniq follows), and `sort -m OPTS` merges with the
         same collation, then `uniq` and `head -n N` are re-applied;
     plus `rg|grep -n/-b/--column` on the corpus, whose line numbers and byte offsets are
     rewritten with the shard's first line and byte offset from the manifest;
  3. a *post* part: the remaining stages, run once on the merged bytes (they see exactly the
     byte stream they would see in one run). Allowed only after a stage that reduces the data,
     and only when no remaining stage could read a file or the folder.
Anything not covered (context, multiline, -P, -l/-q, awk/tail/uniq -c before any reduction, ...)
is planned as one sequential run. When in doubt, sequential.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grepseek_lib.shell import policy
from grepseek_lib.shell.types import Pipeline, Refused, Stage

SEQUENTIAL = "sequential"
CONCAT = "concat"
HEAD = "head"
SUM = "sum"
SORT_MERGE = "sort_merge"

#: How the corpus may be named by the stage that reads it.
CORPUS_OPERANDS = ("corpus.jsonl", "./corpus.jsonl")


@dataclass(frozen=True)
class Renumber:
    """Numeric fields that prefix each output line of `rg|grep -n/-b/--column` (in print order)."""

    prefix: bytes  #: the file name and ':' printed first with -H, else b""
    fields: tuple[str, ...]  #: each "line", "column" or "byte"


@dataclass(frozen=True)
class Plan:
    strategy: str
    reason: str
    parallel: tuple[Stage, ...] = ()
    #: The last parallel stage is rg/grep: exit 0 when any shard selected a line, 1 when none.
    match_exit: bool = False
    head_lines: int | None = None
    head_bytes: int | None = None
    renumber: Renumber | None = None
    #: sort options (no operands) re-used by `sort -m` in a sort_merge.
    sort_options: tuple[str, ...] = ()
    merge_uniq: bool = False
    post: tuple[Stage, ...] = field(default=())

    @property
    def sharded(self) -> bool:
        return self.strategy != SEQUENTIAL

    def shard_pipeline(self, text: str = "") -> Pipeline:
        return Pipeline(text=text or " | ".join(" ".join(s.argv) for s in self.parallel), stages=self.parallel)


def sequential(reason: str) -> Plan:
    return Plan(strategy=SEQUENTIAL, reason=reason)


# --------------------------------------------------------------------------------------------------
# Stage analysis. Options are split by the policy's own parser, so a flag hidden in a cluster or
# after an operand is seen exactly as the program sees it; every flag not listed here is "unknown"
# and makes the plan sequential.
# --------------------------------------------------------------------------------------------------


class _Unsupported(Exception):
    """A stage this planner does not handle exactly; the message is the reason."""


@dataclass
class _Search:
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


def _parse_search(stage: Stage) -> _Search:
    program = stage.program
    spec = policy.RG if program == "rg" else policy.GREP
    try:
        parsed = policy.parse_args(program, list(stage.argv[1:]), spec)
    except Refused as exc:
        raise _Unsupported(str(exc)) from None
    info = _Search(program=program, operands=list(parsed.operands))
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
                raise _Unsupported(f"{program} {name} {value!r} is not a plain count")
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
            raise _Unsupported(f"{program} {name} is not handled shard by shard")
    if not parsed.has("--regexp", "--file"):
        if not info.operands:
            raise _Unsupported(f"{program} without a pattern")
        info.operands = info.operands[1:]
    if info.column and info.line is False:
        raise _Unsupported("rg --column with -N")
    return info


def _is_corpus_source(operands: list[str]) -> bool:
    return len(operands) == 1 and operands[0] in CORPUS_OPERANDS


def _plain_count(value: str | None) -> int:
    if value is None or not re.fullmatch(r"\d+", value):
        raise _Unsupported(f"count {value!r} is not a plain number")
    return int(value)


def _parse_head(stage: Stage) -> tuple[str, int, list[str]]:
    """("lines"|"bytes", N, operands) of a head stage."""
    try:
        parsed = policy.parse_args("head", list(stage.argv[1:]), policy.HEAD)
    except Refused as exc:
        raise _Unsupported(str(exc)) from None
    unit, count = "lines", 10
    for name, value in parsed.options:
        if name in ("-n", "--lines"):
            unit, count = "lines", _plain_count(value)
        elif name in ("-c", "--bytes"):
            unit, count = "bytes", _plain_count(value)
        elif name == "-NUM":
            unit, count = "lines", _plain_count(value)
        else:
            raise _Unsupported(f"head {name}")
    return unit, count, list(parsed.operands)


_WC_FLAGS = {"-l": "-l", "--lines": "-l", "-c": "-c", "--bytes": "-c", "-w": "-w", "--words": "-w"}


def _parse_wc(stage: Stage) -> list[str]:
    """Operands of a wc that prints exactly one sum-able count."""
    try:
        parsed = policy.parse_args("wc", list(stage.argv[1:]), policy.WC)
    except Refused as exc:
        raise _Unsupported(str(exc)) from None
    kinds = set()
    for name, _ in parsed.options:
        if name not in _WC_FLAGS:
            raise _Unsupported(f"wc {name}")
        kinds.add(_WC_FLAGS[name])
    if len(kinds) != 1:
        raise _Unsupported("wc must print exactly one of -l, -c, -w")
    return list(parsed.operands)


_SORT_ORDER = frozenset(
    "-b -d -f -g -h -i -M -n -r -V -s -u -k -t --ignore-leading-blanks --dictionary-order --ignore-case "
    "--general-numeric-sort --human-numeric-sort --ignore-nonprinting --month-sort --numeric-sort --reverse "
    "--version-sort --stable --unique --key --field-separator".split())


def _parse_sort(stage: Stage) -> tuple[list[str], list[str], bool]:
    """(option words to reuse with `sort -m`, operands, stable) of a sort with a deterministic order."""
    try:
        parsed = policy.parse_args("sort", list(stage.argv[1:]), policy.SORT)
    except Refused as exc:
        raise _Unsupported(str(exc)) from None
    words: list[str] = []
    stable = False
    for name, value in parsed.options:
        if name not in _SORT_ORDER:
            raise _Unsupported(f"sort {name} is not merged shard by shard")
        stable = stable or name in ("-s", "--stable")
        if name.startswith("--"):
            words.append(name if value is None else f"{name}={value}")
        else:
            words.append(name if value is None else f"{name}{value}")
            if value == "" and name in ("-k", "-t"):
                raise _Unsupported(f"sort {name} with an empty value")
    return words, list(parsed.operands), stable


def _line_local_reason(stage: Stage, source: bool) -> str | None:
    """None when `stage` is line-local (reading the corpus when `source`, else stdin), else why not."""
    program = stage.program
    try:
        if program in ("rg", "grep"):
            info = _parse_search(stage)
            ok_operands = _is_corpus_source(info.operands) if source else not info.operands
            if not ok_operands:
                return f"{program} does not read exactly {'corpus.jsonl' if source else 'stdin'}"
            if info.line or info.byte or info.column or info.count or info.max_count is not None:
                return f"{program} numbers, counts or stops"
            return None
        spec = {"cat": policy.CAT, "cut": policy.CUT, "sed": policy.SED, "tr": policy.TR}.get(program)
        if spec is None:
            return f"{program} is not line-local"
        parsed = policy.parse_args(program, list(stage.argv[1:]), spec)
    except (Refused, _Unsupported) as exc:
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
        return None if _is_corpus_source(operands) else f"{program} does not read exactly corpus.jsonl"
    return None if operands in ([], ["-"]) else f"{program} reads a file"


_SED_FLAGS = re.compile(r"[gpiI0-9]*")


def is_plain_substitution(script: str) -> bool:
    """True for exactly one `s<d>re<d>repl<d>flags` with flags in g p i I 0-9 (no address, no w/e/m)."""
    if len(script) < 4 or script[0] != "s" or "\n" in script:
        return False
    delim = script[1]
    if delim in "\\\n":
        return False
    i, seen = 2, 0
    while i < len(script) and seen < 2:
        c = script[i]
        if c == "\\":
            i += 2
            continue
        if c == delim:
            seen += 1
        i += 1
    return seen == 2 and i <= len(script) and _SED_FLAGS.fullmatch(script[i:]) is not None


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
        spec = policy.RG if stage.program == "rg" else policy.GREP
        try:
            parsed = policy.parse_args(stage.program, list(stage.argv[1:]), spec)
        except Refused as exc:
            return str(exc)
        if parsed.has(*_GREP_RECURSIVE) or parsed.has("--files", "--file"):
            return f"{stage.program} may read files or the folder"
        operands = parsed.operands if parsed.has("--regexp") else parsed.operands[1:]
        if operands:
            return f"{stage.program} reads a file"
    return None


# --------------------------------------------------------------------------------------------------
# Planning.
# --------------------------------------------------------------------------------------------------


def plan_pipeline(pipeline: Pipeline) -> Plan:
    """The strategy for `pipeline` (already accepted by the policy); sequential when unsure."""
    try:
        return _plan(pipeline.stages)
    except _Unsupported as exc:
        return sequential(str(exc))


def _with_post(plan: Plan, rest: tuple[Stage, ...], reduces: bool) -> Plan:
    if not rest:
        return plan
    if not reduces:
        return sequential("no stage reduces the data before the stages that must run once")
    for stage in rest:
        reason = post_reason(stage)
        if reason:
            return sequential(f"post stage: {reason}")
    return Plan(**{**plan.__dict__, "post": rest})


def _head_of(stage: Stage | None) -> tuple[str, int] | None:
    """(unit, N) of a head that reads stdin, or None."""
    if stage is None or stage.program != "head":
        return None
    try:
        unit, count, operands = _parse_head(stage)
    except _Unsupported:
        return None
    return (unit, count) if operands in ([], ["-"]) else None


def _head_plan(parallel: tuple[Stage, ...], unit: str, count: int, reason: str, **extra) -> Plan:
    lines, nbytes = (count, None) if unit == "lines" else (None, count)
    return Plan(strategy=HEAD, reason=reason, parallel=parallel, head_lines=lines, head_bytes=nbytes, **extra)


def _plan(stages: tuple[Stage, ...]) -> Plan:
    first = stages[0]
    if first.program in ("rg", "grep"):
        info = _parse_search(first)
        if not _is_corpus_source(info.operands):
            return sequential(f"{first.program} does not read exactly corpus.jsonl")
        if info.line or info.byte or info.column:
            return _plan_renumber(stages, info)
    i = 0  # the longest line-local prefix is stages[:i]
    reduces = False
    while i < len(stages) and _line_local_reason(stages[i], source=(i == 0)) is None:
        if stages[i].program in ("rg", "grep") and not _parse_search(stages[i]).invert:
            reduces = True
        i += 1
    if i == len(stages):
        if not reduces:  # e.g. `cat corpus.jsonl`: all bytes go through one output anyway
            return sequential("no stage filters lines: one run prints as fast")
        return Plan(strategy=CONCAT, reason="line-local stages", parallel=stages,
                    match_exit=stages[-1].program in ("rg", "grep"))
    try:
        plan = _core_plan(stages, i)
        why = f"{stages[i].program} is not handled shard by shard"
    except _Unsupported as exc:
        plan, why = None, str(exc)
    if plan is not None:
        return plan
    if i == 0:
        return sequential(why)
    concat = Plan(strategy=CONCAT, reason="line-local stages, then the rest once", parallel=stages[:i],
                  match_exit=stages[i - 1].program in ("rg", "grep"))
    return _with_post(concat, stages[i:], reduces)


def _reads_input(operands: list[str], source: bool) -> bool:
    """The stage reads the corpus (first stage) or stdin (later stages), nothing else."""
    return _is_corpus_source(operands) if source else operands in ([], ["-"])


def _core_plan(stages: tuple[Stage, ...], i: int) -> Plan | None:
    """A reducing stage at stages[i] after a line-local prefix: head, count, -m or sort|head."""
    core = stages[i]
    source = i == 0
    rest = stages[i + 1:]
    if core.program in ("rg", "grep"):
        info = _parse_search(core)
        if not _reads_input(info.operands, source):
            return None
        if info.count and info.max_count is None and not (info.line or info.byte or info.column):
            plan = Plan(strategy=SUM, reason=f"{core.program} counts add up", parallel=stages[:i + 1])
            return _with_post(plan, rest, True)
        if (info.max_count or 0) > 0 and not (info.count or info.only_matching or info.line or info.byte
                                              or info.column):
            plan = _head_plan(stages[:i + 1], "lines", info.max_count, f"{core.program} -m keeps a prefix",
                              match_exit=True)
            return _with_post(plan, rest, True)
        return None
    if core.program == "head":
        unit, count, operands = _parse_head(core)
        if not _reads_input(operands, source):
            return None
        return _with_post(_head_plan(stages[:i + 1], unit, count, "head keeps a prefix"), rest, True)
    if core.program == "wc":
        if not _reads_input(_parse_wc(core), source):
            return None
        return _with_post(Plan(strategy=SUM, reason="wc counts add up", parallel=stages[:i + 1]), rest, True)
    if core.program == "sort":
        words, operands, stable = _parse_sort(core)
        if not _reads_input(operands, source):
            return None
        nxt = stages[i + 1] if i + 1 < len(stages) else None
        uniq = nxt is not None and nxt.program == "uniq" and len(nxt.argv) == 1
        end = i + (3 if uniq else 2)
        head = _head_of(stages[end - 1] if end - 1 < len(stages) else None)
        if head is None or head[0] != "lines" or (uniq and stable):
            return None  # sort without head, or sort -s | uniq (equal lines need not be adjacent)
        plan = Plan(strategy=SORT_MERGE, reason="per-shard sort|head, then sort -m", parallel=stages[:end],
                    head_lines=head[1], sort_options=tuple(words), merge_uniq=uniq)
        return _with_post(plan, stages[end:], True)
    return None


def _plan_renumber(stages: tuple[Stage, ...], info: _Search) -> Plan:
    if info.count or info.only_matching and info.max_count is not None or info.replacement_has_newline:
        return sequential(f"{info.program} numbering with -c, -o -m or a multi-line replacement")
    fields = []
    if info.line or info.column:
        fields.append("line")
    if info.column:
        fields.append("column")
    if info.byte:
        fields.append("byte")
    prefix = (info.operands[0] + ":").encode() if info.with_filename else b""
    renumber = Renumber(prefix=prefix, fields=tuple(fields))
    reduces = not info.invert
    if info.max_count is not None:
        if info.max_count == 0:
            return sequential(f"{info.program} -m 0")
        plan = _head_plan(stages[:1], "lines", info.max_count, "-m keeps a prefix; numbers rewritten",
                          match_exit=True, renumber=renumber)
        return _with_post(plan, stages[1:], True)
    head = _head_of(stages[1] if len(stages) > 1 else None)
    if head is not None and head[0] == "lines":
        plan = _head_plan(stages[:2], "lines", head[1], "head pushed down; numbers rewritten", renumber=renumber)
        return _with_post(plan, stages[2:], True)
    plan = Plan(strategy=CONCAT, reason="numbers rewritten with shard offsets", parallel=stages[:1],
                match_exit=True, renumber=renumber)
    return _with_post(plan, stages[1:], reduces)
