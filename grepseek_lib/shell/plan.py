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

from dataclasses import dataclass, field

from grepseek_lib.shell.sed_awk import is_plain_substitution
from grepseek_lib.shell.shardable import (
    CORPUS_OPERANDS,
    Search,
    Unsupported,
    is_corpus_source,
    line_local_reason,
    parse_head,
    parse_search,
    parse_sort,
    parse_wc,
    post_reason,
)
from grepseek_lib.shell.types import Pipeline, Stage

__all__ = ["CONCAT", "CORPUS_OPERANDS", "HEAD", "SEQUENTIAL", "SORT_MERGE", "SUM", "Plan", "Renumber",
           "is_plain_substitution", "plan_pipeline", "post_reason", "sequential"]

SEQUENTIAL = "sequential"
CONCAT = "concat"
HEAD = "head"
SUM = "sum"
SORT_MERGE = "sort_merge"


@dataclass(frozen=True)
class Renumber:
    """Numeric fields that prefix each output line of `rg|grep -n/-b/--column` (in print order)."""

    prefix: bytes  #: the file name and ':' printed first with -H, else b""
    fields: tuple[str, ...]  #: each "line", "column" or "byte"


@dataclass(frozen=True)
class Plan:
    """How one pipeline runs: the stages run on every shard, the merge rule, and the stages run once after."""

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
    """One plain run; `reason` says why sharding was not exact (shown by benchmarks and logs)."""
    return Plan(strategy=SEQUENTIAL, reason=reason)


# --------------------------------------------------------------------------------------------------
# Planning.
# --------------------------------------------------------------------------------------------------


def plan_pipeline(pipeline: Pipeline) -> Plan:
    """The strategy for `pipeline` (already accepted by the policy); sequential when unsure."""
    try:
        return _plan(pipeline.stages)
    except Unsupported as exc:
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
        unit, count, operands = parse_head(stage)
    except Unsupported:
        return None
    return (unit, count) if operands in ([], ["-"]) else None


def _head_plan(parallel: tuple[Stage, ...], unit: str, count: int, reason: str, **extra) -> Plan:
    lines, nbytes = (count, None) if unit == "lines" else (None, count)
    return Plan(strategy=HEAD, reason=reason, parallel=parallel, head_lines=lines, head_bytes=nbytes, **extra)


def _plan(stages: tuple[Stage, ...]) -> Plan:
    first = stages[0]
    if first.program in ("rg", "grep"):
        info = parse_search(first)
        if not is_corpus_source(info.operands):
            return sequential(f"{first.program} does not read exactly corpus.jsonl")
        if info.line or info.byte or info.column:
            return _plan_renumber(stages, info)
    i = 0  # the longest line-local prefix is stages[:i]
    reduces = False
    while i < len(stages) and line_local_reason(stages[i], source=(i == 0)) is None:
        if stages[i].program in ("rg", "grep") and not parse_search(stages[i]).invert:
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
    except Unsupported as exc:
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
    return is_corpus_source(operands) if source else operands in ([], ["-"])


def _core_plan(stages: tuple[Stage, ...], i: int) -> Plan | None:
    """A reducing stage at stages[i] after a line-local prefix: head, count, -m or sort|head."""
    core = stages[i]
    source = i == 0
    rest = stages[i + 1:]
    if core.program in ("rg", "grep"):
        info = parse_search(core)
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
        unit, count, operands = parse_head(core)
        if not _reads_input(operands, source):
            return None
        return _with_post(_head_plan(stages[:i + 1], unit, count, "head keeps a prefix"), rest, True)
    if core.program == "wc":
        if not _reads_input(parse_wc(core), source):
            return None
        return _with_post(Plan(strategy=SUM, reason="wc counts add up", parallel=stages[:i + 1]), rest, True)
    if core.program == "sort":
        words, operands, stable = parse_sort(core)
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


def _plan_renumber(stages: tuple[Stage, ...], info: Search) -> Plan:
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
