"""Coherence and acceptance, and the whole pipeline for one question.

A trajectory is kept only if a reader could have produced it: no fact (a bridge or the answer) and no
search word appears before the corpus printed it, no searching once the answer's evidence was printed,
the answer is in the outputs, the turns pass the reward's strict format gate, and token-F1 > 0.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from grepseek_lib import config
from grepseek_lib.agent.actions import format_gate, render_turn
from grepseek_lib.coldstart.chain import (
    DETOUR_RATE,
    MAX_ATTEMPTS,
    OTHER_NAME_RATE,
    PROBE_RATE,
    ZERO_COUNT_RATE,
    ToolFn,
    Turn,
    assemble,
    backward_chain,
    can_fill_budget,
)
from grepseek_lib.coldstart.roles import Item, Planner, TeacherError, Tutor
from grepseek_lib.coldstart.verify import command_patterns, contains, is_yes_no, output_passages, words
from grepseek_lib.metrics import f1
from grepseek_lib.shell.types import Refused

_QUOTED = re.compile(r'"[^"]*"')
#: Pipeline stages in order; a rejection names the stage it happened at.
STAGES = ("decompose", "chain", "assemble", "coherence", "accept")
#: Share of questions whose trajectory spends the whole tool budget when the chain allows it (see
#: `chain.assemble(fill_budget=...)`); the rest keep the shortest verified path.
FILL_BUDGET_RATE = 0.5


@dataclass
class Outcome:
    """What happened to one question (one line of records.jsonl)."""

    accepted: bool
    stage: str  # where it was rejected, or "accept"
    reason: str
    turns: list[Turn] = field(default_factory=list)
    answer: str = ""
    f1: float = 0.0
    hops: int = 0
    commands_run: int = 0
    plans_tried: int = 0
    log: list[tuple[int, str, str]] = field(default_factory=list)  # every chain attempt: (hop, command, outcome)


def coherence(item: Item, turns: list[Turn], facts: list[str], evidence_ids: set[str],
              max_tool_calls: int = config.MAX_TOOL_CALLS) -> str | None:
    """Why the trajectory is not causally consistent, or None.

    `facts` are strings the agent could only know from the corpus (bridges, the answer); `evidence_ids`
    are the passages that verified the last hop: printing one of them before the last search means
    the agent searched on after the answer was known.
    """
    tool_turns = [t for t in turns if t.command is not None]
    if not turns or turns[-1].answer is None or len(tool_turns) != len(turns) - 1:
        return "shape"
    ok, why = format_gate([render_turn(t.think, t.command, t.answer) for t in turns],
                          max_tool_calls=max_tool_calls)
    if not ok:
        return f"format:{why}"
    answer = turns[-1].answer or ""
    hidden = [f for f in dict.fromkeys(facts) if words(f) and not is_yes_no(f) and not contains(item.question, f)]
    seen = item.question
    last_tool = len(tool_turns) - 1
    for index, turn in enumerate(tool_turns):
        try:
            patterns = command_patterns(turn.command, programs=("rg", "grep"))
        except Refused:
            return "refused_command"
        seen_words = set(words(seen))
        if any(w not in seen_words for p in patterns for w in words(p)):
            return "ungrounded_pattern"
        for fact in hidden:
            if (contains(turn.think, fact) or any(contains(p, fact) for p in patterns)) and not contains(seen, fact):
                return "fact_before_observed"
        if answer and not is_yes_no(answer) and not contains(item.question, answer) \
                and contains(_QUOTED.sub(" ", turn.think), answer):
            return "search_after_answer"  # it says the answer (outside a quote of the output), then searches on
        stdout = (turn.payload or {}).get("stdout") or ""
        if index < last_tool and evidence_ids & {p["id"] for p in output_passages(stdout)}:
            return "search_after_answer"
        seen += "\n" + "\n".join(p["contents"] for p in output_passages(stdout))
    final = turns[-1]
    for fact in hidden:
        if contains(final.think, fact) and not contains(seen, fact):
            return "fact_before_observed"
    if not answer.strip():
        return "no_answer"
    if is_yes_no(answer):
        return None if tool_turns else "unsupported_answer"
    return None if contains(seen, answer) else "unsupported_answer"


def process_question(item: Item, tutor: Tutor, planner: Planner, tool: ToolFn, *, seed: int = 0,
                     max_attempts: int = MAX_ATTEMPTS, probe_rate: float = PROBE_RATE,
                     max_tool_calls: int = config.MAX_TOOL_CALLS, fill_budget_rate: float = FILL_BUDGET_RATE,
                     detour_rate: float = DETOUR_RATE, zero_count_rate: float = ZERO_COUNT_RATE,
                     other_name_rate: float = OTHER_NAME_RATE, fill_with: str = "counts") -> Outcome:
    """Decompose, chain, assemble, check, accept: one question, deterministic for a (seed, id).

    With probability `fill_budget_rate` (and when the chain has enough real commands) the trajectory is
    first assembled to spend the whole budget (on what: `fill_with`); if that one is not accepted the short one
    is used."""
    rng = random.Random(f"{seed}:{item.id}")
    try:
        plans = tutor.decompose(item)
    except TeacherError as exc:
        return Outcome(False, "decompose", f"teacher:{exc}"[:200])
    if not plans:
        return Outcome(False, "decompose", "no_decomposition")
    commands_run, reason, log = 0, "", []
    spares = max_tool_calls - 1 if fill_with == "searches" and fill_budget_rate > 0 else 0
    for tried, plan in enumerate(plans, 1):
        try:
            chain = backward_chain(item, plan, tutor, tool, rng, max_attempts, spares=spares)
        except TeacherError as exc:
            return Outcome(False, "chain", f"teacher:{exc}"[:200], commands_run=commands_run, plans_tried=tried)
        commands_run += chain.commands_run
        log += chain.log
        reason = reason or chain.reason
        if chain.ok:
            break
    else:
        return Outcome(False, "chain", reason, commands_run=commands_run, plans_tried=len(plans), log=log)
    facts = [hop.answer for hop in chain.plan[:-1]] + list(item.golds)
    evidence = chain.hops[len(chain.plan) - 1].verdict.passage or {}
    evidence_ids = {evidence.get("id")} - {"", None}
    common = dict(hops=len(chain.plan), commands_run=commands_run, plans_tried=tried, log=log)
    try:
        fill = random.Random(f"{seed}:{item.id}:fill")  # own stream: short paths stay as they were
        if fill.random() < fill_budget_rate and can_fill_budget(chain, max_tool_calls, fill_with=fill_with):
            turns = assemble(item, chain, tutor, planner, tool, fill, max_tool_calls=max_tool_calls,
                             zero_count_rate=zero_count_rate, fill_budget=True, fill_with=fill_with)
            if sum(t.command is not None for t in turns) == max_tool_calls:
                full = _judge(item, turns, facts, evidence_ids, max_tool_calls, common)
                if full.accepted:
                    return full
        turns = assemble(item, chain, tutor, planner, tool, rng, probe_rate=probe_rate, detour_rate=detour_rate,
                         zero_count_rate=zero_count_rate, other_name_rate=other_name_rate,
                         max_tool_calls=max_tool_calls)
    except TeacherError as exc:
        return Outcome(False, "assemble", f"teacher:{exc}"[:200], commands_run=commands_run, plans_tried=tried)
    return _judge(item, turns, facts, evidence_ids, max_tool_calls, common)


def _judge(item: Item, turns: list[Turn], facts: list[str], evidence_ids: set[str], max_tool_calls: int,
           common: dict) -> Outcome:
    """Accept or reject an assembled trajectory: an answer, coherence, then token-F1 > 0."""
    answer = turns[-1].answer or ""
    if not answer.strip():
        return Outcome(False, "assemble", "no_answer", turns=turns, **common)
    why = coherence(item, turns, [*facts, answer], evidence_ids, max_tool_calls)
    if why:
        return Outcome(False, "coherence", why, turns=turns, answer=answer, **common)
    score = f1(answer, item.golds)
    if score <= 0:
        return Outcome(False, "accept", "f1_zero", turns=turns, answer=answer, f1=score, **common)
    return Outcome(True, "accept", "ok", turns=turns, answer=answer, f1=score, **common)
