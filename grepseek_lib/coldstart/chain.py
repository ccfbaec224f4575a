"""Backward chain (last hop first, every command executed and verified) and forward assembly.

The chain runs backwards because each hop's search tells the hop before it what it must deliver: the
last hop searches from the bridge entity, the bridge is read off the verified passage in the corpus's
own spelling, and the earlier hop must then print exactly that spelling, without searching for it.
Assembly then replays the verified commands in order, the Planner drafting from what was printed and
the Tutor aligning each draft to the command; the saved payloads are the ones verification saw.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from grepseek_lib import config
from grepseek_lib.coldstart.roles import (
    Attempt,
    Item,
    Observed,
    Planner,
    StepContext,
    SubQuestion,
    TeacherError,
    Tutor,
)
from grepseek_lib.coldstart.searches import Search, question_names
from grepseek_lib.coldstart.strategies import count_command
from grepseek_lib.coldstart.verify import (
    Verdict,
    command_patterns,
    contains,
    leaked,
    output_passages,
    verify_output,
)
from grepseek_lib.shell.types import Refused

#: Attempts per hop (paper: up to 6, widening after empty output).
MAX_ATTEMPTS = 6
#: Share of hops preceded by a count of the matching lines, when the tool budget allows.
PROBE_RATE = 0.25
#: Share of hops whose first dead end is replayed in a short trajectory (when calls are spare), so the
#: agent sees a search fail and answers it with a different one; a policy that never saw this repeats it.
DETOUR_RATE = 0.5
#: Share of those replays that show two failed searches in a row (e.g. a title guess, then its prefix) before
#: the one that verified: widening is a sequence of steps, each said in the thought before it.
WIDEN_TWICE_RATE = 0.5
#: Share of replayed dead ends run as a count (`| wc -l`, which prints 0) instead of a read, so the agent sees
#: a count of 0 answered by a different search. Off by default: at 0.5 the SFT model still repeated commands
#: (35/50 held-out episodes vs 36/50) and passed the format gate less often (36/50 vs 48/50).
ZERO_COUNT_RATE = 0.0
#: Share of first hops that open with a count on another name the question gives which no corpus line holds
#: (a real count of 0), then search the name the Tutor verified. At inference the first name a question
#: gives is often absent from the mini-wiki, and a policy that never saw a count of 0 answered by another
#: name from the question reads the same empty search and answers from nothing.
OTHER_NAME_RATE = 0.0
#: Names read off the question that are tried (each one a count) before giving the opener up.
OTHER_NAME_TRIES = 3
#: What a fill-budget trajectory spends its spare calls on: `counts` (its dead ends, then a count before each
#: hop's read) or `searches` (reads of names from the question the corpus lacks, then its dead ends, then
#: the Tutor's further searches that did not verify; no count). Each count there is followed by the same
#: search, and forty such pairs taught the SFT model to repeat a search it had just read (exp31).
FILL_WITH = ("counts", "searches")

ToolFn = Callable[[str], dict]


@dataclass
class VerifiedHop:
    command: str
    payload: dict
    verdict: Verdict
    attempts: list[Attempt]
    spares: list[str] = field(default_factory=list)  # the Tutor's next searches, run after it verified, not verified


@dataclass
class ChainResult:
    ok: bool
    reason: str = "ok"
    plan: list[SubQuestion] = field(default_factory=list)
    hops: dict[int, VerifiedHop] = field(default_factory=dict)
    commands_run: int = 0
    log: list[tuple[int, str, str]] = field(default_factory=list)  # (hop, command, outcome) of every attempt


@dataclass
class Turn:
    """One assistant turn of the assembled trajectory: reasoning + a command (with its payload) or answer."""

    think: str
    command: str | None = None
    payload: dict | None = None
    probe: bool = False
    answer: str | None = None


def backward_chain(item: Item, plan: list[SubQuestion], tutor: Tutor, tool: ToolFn, rng: random.Random,
                   max_attempts: int = MAX_ATTEMPTS, spares: int = 0) -> ChainResult:
    """Verify one command per hop, last hop first; the first hop that cannot be verified rejects the plan.
    With `spares`, up to that many of the Tutor's next searches per hop are run after it verified and kept
    when they do not verify: dead ends a fill-budget trajectory can spend calls on (`fill_with="searches"`)."""
    need = {i: list(hop.forms) for i, hop in enumerate(plan)}
    result = ChainResult(False, plan=plan)
    for index in reversed(range(len(plan))):
        hop = plan[index]
        anchor = plan[hop.ref].answer if hop.ref is not None else None
        ctx = StepContext(item, index, hop, need[index], anchor, rng)
        verified = _verify_hop(ctx, tutor, tool, max_attempts, result, last=index == len(plan) - 1)
        result.log += [(index + 1, a.command, a.reason) for a in ctx.attempts]
        if verified is None:
            last_reason = ctx.attempts[-1].reason if ctx.attempts else "no_command"
            result.reason = f"hop{index + 1}:{last_reason}"
            return result
        verified.spares = _spare_searches(ctx, tutor, tool, spares, result, last=index == len(plan) - 1)
        result.hops[index] = verified
        if hop.ref is not None:
            bridge = tutor.extract_bridge(ctx, verified.verdict.passage["contents"])
            if not bridge:
                result.reason = f"hop{index + 1}:bridge"
                return result
            need[hop.ref] = [bridge]
            plan[hop.ref].answer = bridge
    result.ok = True
    return result


def _verify_hop(ctx: StepContext, tutor: Tutor, tool: ToolFn, max_attempts: int, result: ChainResult,
                *, last: bool) -> VerifiedHop | None:
    for _ in range(max_attempts):
        command = tutor.propose_command(ctx)
        if not command:
            return None
        tried = _try_command(ctx, command, tutor, tool, result, last=last)
        if tried is not None and tried[1].ok:
            return VerifiedHop(command, tried[0], tried[1], list(ctx.attempts))
    return None


def _spare_searches(ctx: StepContext, tutor: Tutor, tool: ToolFn, limit: int, result: ChainResult, *,
                    last: bool) -> list[str]:
    """The Tutor's next searches for a verified hop (at most `limit` kept, 2 x `limit` tried), each run and
    checked as the chain checks; those that do not verify are real dead ends."""
    kept: list[str] = []
    for _ in range(2 * limit):
        if len(kept) == limit:
            break
        command = tutor.propose_command(ctx)
        if not command:
            break
        tried = _try_command(ctx, command, tutor, tool, result, last=last)
        if tried is not None and not tried[1].ok:
            kept.append(command)
    return kept


def _try_command(ctx: StepContext, command: str, tutor: Tutor, tool: ToolFn, result: ChainResult, *,
                 last: bool) -> tuple[dict, Verdict] | None:
    """Run one proposed command and verify its output, recording the attempt; None when it was refused or
    would leak the answer (never run)."""
    try:
        leak = leaked(command, [*ctx.need, *ctx.item.golds], ctx.item.question)
    except Refused:
        ctx.attempts.append(Attempt(command, "refused"))
        return None
    if leak is not None:
        ctx.attempts.append(Attempt(command, "leak"))
        return None
    payload = tool(command)
    result.commands_run += 1
    verdict = verify_output(payload, ctx.need, lambda contents, pid: tutor.judge(ctx, contents, pid), relaxed=last)
    ctx.attempts.append(Attempt(command, verdict.reason, (payload.get("stdout") or "")[:2000]))
    return payload, verdict


def detours(chain: ChainResult, index: int) -> list[str]:
    """Commands of hop `index` that ran during the chain but did not verify (empty output, no answer form,
    judged off-topic), in the order they were tried: real dead ends a searcher meets before the hit."""
    hop = chain.hops[index]
    return list(dict.fromkeys(a.command for a in hop.attempts
                              if a.reason not in ("ok", "leak", "refused") and a.command != hop.command))


def absent_name_count(question: str, command: str, tool: ToolFn) -> tuple[str, dict] | None:
    """A count (run for real, printing 0) on a name the question gives that no corpus line holds, other than
    the anchor of the verified `command` and not overlapping it; None when the anchor is not written in the
    question (the next thought could not call it another name from the question) or every name is there."""
    found = absent_names(question, command, tool, count=True, limit=1)
    return found[0] if found else None


def absent_names(question: str, command: str, tool: ToolFn, *, count: bool, limit: int) -> list[tuple[str, dict]]:
    """Up to `limit` searches (reads, or counts with `count`) run for real on names the question gives that
    no corpus line holds, as in `absent_name_count`: each prints nothing (a count prints 0)."""
    try:
        patterns = command_patterns(command)
    except Refused:
        return []
    anchor = patterns[0].strip('"').rstrip(" (") if patterns else ""
    if not anchor or not contains(question, anchor) or limit <= 0:
        return []
    names = [n for n in question_names(question, anchor) if not contains(n, anchor) and not contains(anchor, n)]
    found = []
    for name in names[:OTHER_NAME_TRIES]:
        search = Search(name).render()
        search = count_command(search) if count else search
        payload = tool(search)
        if payload.get("exit_code") == 0 and (payload.get("stdout") or "").strip() == ("0" if count else ""):
            found.append((search, payload))
            if len(found) == limit:
                break
    return found


def can_fill_budget(chain: ChainResult, max_tool_calls: int = config.MAX_TOOL_CALLS, *,
                    fill_with: str = "counts") -> bool:
    """Whether the chain may have enough real commands to spend the whole budget: dead ends + a count per hop
    (`counts`), or dead ends + up to OTHER_NAME_TRIES absent names from the question (`searches`, known only
    once they ran: the assembled trajectory is checked for a full budget)."""
    extra = sum(len(detours(chain, i)) for i in chain.hops)
    if fill_with == "counts":
        extra += sum(bool(count_command(chain.hops[i].command)) for i in chain.hops)
    else:
        extra += sum(len(chain.hops[i].spares) for i in chain.hops) + OTHER_NAME_TRIES
    return len(chain.plan) + extra >= max_tool_calls


@dataclass
class _Trace:
    """The trajectory being assembled: each turn's thought is the Planner's draft, edited by the Tutor."""

    item: Item
    tutor: Tutor
    planner: Planner
    rng: random.Random
    turns: list[Turn] = field(default_factory=list)
    history: list[Observed] = field(default_factory=list)

    def add(self, command: str, payload: dict, hop: SubQuestion, *, probe: bool = False,
            dead_end: bool = False) -> None:
        draft = self.planner.draft(self.item, self.history, self.rng)
        think = self.tutor.edit(self.item, draft, command, self.history, hop, self.rng)
        self.turns.append(Turn(think, command, payload, probe=probe))
        self.history.append(Observed(command, payload, probe=probe, dead_end=dead_end))


def assemble(item: Item, chain: ChainResult, tutor: Tutor, planner: Planner, tool: ToolFn, rng: random.Random,
             *, probe_rate: float = PROBE_RATE, detour_rate: float = DETOUR_RATE,
             zero_count_rate: float = ZERO_COUNT_RATE, other_name_rate: float = OTHER_NAME_RATE,
             max_tool_calls: int = config.MAX_TOOL_CALLS, fill_budget: bool = False,
             fill_with: str = "counts") -> list[Turn]:
    """The trajectory in forward order: per hop an optional dead end (`detour_rate`; run as a count of 0
    with `zero_count_rate`; on the first hop, with `other_name_rate`, a count of 0 on another name from the
    question instead) and count (`probe_rate`), then the verified command; then the answer written by the
    Planner from the trace.

    `fill_budget` spends every spare tool call (on what: `fill_with`, see FILL_WITH), each hop replaying its
    dead ends before it reads. Such a trajectory meets the budget message and answers after it, a turn the
    agent must know (a policy that loops on one command reaches it) but that 1-3 call trajectories never show.
    """
    trace = _Trace(item, tutor, planner, rng)
    spare = max_tool_calls - len(chain.plan)
    counts = not fill_budget or fill_with == "counts"
    evidence = (chain.hops[len(chain.plan) - 1].verdict.passage or {}).get("id")
    for index, hop in enumerate(chain.plan):
        if index and evidence and evidence in _printed_ids(trace.history[-1]):
            break  # an earlier hop already printed the answer's evidence: answer now, never search on
        verified = chain.hops[index]
        dead_ends = detours(chain, index)
        if not fill_budget:
            replayed = 0
            if dead_ends and rng.random() < detour_rate:
                replayed = 2 if rng.random() < WIDEN_TWICE_RATE else 1
            dead_ends = dead_ends[:replayed]
        if not counts:  # then the Tutor's other searches, leaving room for the later hops' dead ends
            later = sum(len(detours(chain, j)) for j in range(index + 1, len(chain.plan)))
            others = [c for c in verified.spares if c not in dead_ends and c != verified.command]
            dead_ends += others[:max(0, spare - later - len(dead_ends))]
        if index == 0 and not counts:
            need = spare - sum(len(detours(chain, i)) + len(chain.hops[i].spares) for i in chain.hops)
            for command, payload in absent_names(item.question, verified.command, tool, count=False, limit=need):
                spare -= 1
                trace.add(command, payload, hop, dead_end=True)
        # no draw at rate 0: the random stream (and the data) stay those of the runs before this option
        elif index == 0 and other_name_rate > 0 and spare > 0 and rng.random() < other_name_rate:
            opener = absent_name_count(item.question, verified.command, tool)
            if opener is not None:
                spare, dead_ends = spare - 1, []
                trace.add(*opener, hop, probe=True, dead_end=True)
        spare = _replay_dead_ends(trace, dead_ends, verified, hop, tool, spare, evidence, zero_count_rate)
        probe = count_command(verified.command)
        if counts and probe and spare > 0 and (fill_budget or rng.random() < probe_rate):
            spare -= 1
            trace.add(probe, tool(probe), hop, probe=True)
        trace.add(verified.command, verified.payload, hop)
    think, answer = planner.answer(item, trace.history, rng)
    trace.turns.append(Turn(think, answer=answer))
    return trace.turns


def _replay_dead_ends(trace: _Trace, dead_ends: list[str], verified: VerifiedHop, hop: SubQuestion, tool: ToolFn,
                      spare: int, evidence: str | None, zero_count_rate: float) -> int:
    """Replay a hop's dead ends while calls are spare (one that printed nothing, as a count of 0 with
    `zero_count_rate`); returns the calls left."""
    for command in dead_ends:
        if spare <= 0:
            break
        empty = any(a.command == command and a.reason == "empty" for a in verified.attempts)
        # no draw at rate 0: the random stream (and the data) stay those of the runs before this option
        as_count = zero_count_rate > 0 and trace.rng.random() < zero_count_rate and empty and count_command(command)
        command = as_count or command
        payload = tool(command)
        if evidence and evidence in _printed_ids(Observed(command, payload)):
            continue  # it printed the answer's passage after all: not a dead end to search on from
        spare -= 1
        trace.add(command, payload, hop, probe=bool(as_count), dead_end=True)
    return spare


def _printed_ids(observed: Observed) -> set[str]:
    return {p["id"] for p in output_passages(observed.payload.get("stdout") or "")} - {""}


__all__ = ["FILL_WITH", "ChainResult", "TeacherError", "Turn", "VerifiedHop", "absent_names", "assemble",
           "backward_chain", "can_fill_budget", "detours"]
