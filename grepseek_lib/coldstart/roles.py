"""The two cold-start roles, as protocols, and their teacher-backed implementations.

The Tutor sees the gold answer: it decomposes the question, writes and judges the commands of the
backward chain, extracts bridge entities, and edits the Planner's reasoning to motivate each verified
command. The Planner never sees the answer: it drafts reasoning from the question and the observations
so far, and writes the final answer from the trace. `offline.py` plays both roles from dataset
annotations; `LLMTutor` / `LLMPlanner` ask a teacher behind any agent backend (an OpenAI-compatible
server for the real thing). Teacher output is hostile input: every reply is parsed defensively and a
reply that does not fit becomes a clean rejection, never an exception.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from grepseek_lib.coldstart.verify import locate, observed_text
from grepseek_lib.errors import UserError

# ---------------------------------------------------------------- shared value types


@dataclass
class Item:
    """One training question."""

    id: str
    question: str
    golds: list[str]
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class SubQuestion:
    """One hop of a decomposition. The last hop's answer is the final answer."""

    question: str
    answer: str
    forms: list[str]  # accepted spellings of the answer (aliases)
    ref: int | None = None  # the earlier hop whose answer (the bridge) this hop searches from
    gold_ids: list[str] = field(default_factory=list)  # annotated evidence passages, when known
    gold_titles: list[str] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)  # question strings the command may search for
    keywords: list[str] = field(default_factory=list)  # question words the evidence passage holds
    kind: str = "hop"  # "hop" | "compare" (evidence for one side of a comparison)


@dataclass
class Attempt:
    command: str
    reason: str  # "ok", "leak", or a verify.VERIFY_REASONS entry
    stdout: str = ""


@dataclass
class StepContext:
    """What the Tutor knows while it writes and checks the command of one hop."""

    item: Item
    index: int
    step: SubQuestion
    need: list[str]  # forms the output must hold (the sub-answer, or the bridge the next hop used)
    anchor: str | None  # the bridge to search from (answer of step.ref), None for hops from the question
    rng: random.Random
    attempts: list[Attempt] = field(default_factory=list)


@dataclass
class Observed:
    """One executed command of the assembled trajectory and its payload."""

    command: str
    payload: dict
    probe: bool = False  # a count before reading, not evidence
    dead_end: bool = False  # a replayed search that did not verify: the next search must differ and say why

    @property
    def text(self) -> str:
        return observed_text(self.payload.get("stdout") or "")


class Tutor(Protocol):
    def decompose(self, item: Item) -> list[list[SubQuestion]]:
        """Decompositions in preference order (the chain tries each); [] when it cannot decompose."""

    def propose_command(self, ctx: StepContext) -> str | None:
        """The next command to try for this hop (None: give up), widening after empty output."""

    def judge(self, ctx: StepContext, contents: str, passage_id: str) -> bool:
        """Strict yes/no: does this printed passage answer the hop's sub-question?"""

    def extract_bridge(self, ctx: StepContext, contents: str) -> str | None:
        """The bridge entity (answer of ctx.step.ref) as the verified passage spells it."""

    def edit(self, item: Item, draft: str, command: str, history: list[Observed], step: SubQuestion,
             rng: random.Random) -> str:
        """The Planner's draft, aligned to motivate `command`, naming only facts observed so far."""


class Planner(Protocol):
    def draft(self, item: Item, history: list[Observed], rng: random.Random) -> str:
        """Reasoning before the next command, from the question and observations only."""

    def answer(self, item: Item, history: list[Observed], rng: random.Random) -> tuple[str, str]:
        """(reasoning, short answer) from the trace."""


# ---------------------------------------------------------------- teacher-backed roles

_TAG = re.compile(r"</?[a-z_]+>")
_COMMAND = re.compile(r"<command>(.*?)</command>", re.S)
_MAX_REASONING_CHARS = 1200
_MAX_OBS_CHARS = 3000


def _clean_text(text: str, limit: int = _MAX_REASONING_CHARS) -> str:
    """Teacher prose made safe to embed in a <think> block: no protocol tags, bounded length."""
    return " ".join(_TAG.sub(" ", text or "").split())[:limit].strip()


def _history_text(history: list[Observed]) -> str:
    parts = [f"Command {i + 1}: {h.command}\nOutput:\n{h.text[:_MAX_OBS_CHARS]}" for i, h in enumerate(history)]
    return "\n\n".join(parts) if parts else "(nothing yet)"


def _first_json_list(text: str, tries: int = 8) -> list | None:
    """The first JSON list in a reply (teachers wrap JSON in prose); a few candidate starts, no more."""
    decoder = json.JSONDecoder()
    start = text.find("[")
    for _ in range(tries):
        if start < 0:
            return None
        try:
            value, _end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            start = text.find("[", start + 1)
            continue
        return value if isinstance(value, list) else None
    return None


class TeacherClient:
    """One chat call at a time through an agent backend (`generate(conversations, ...)`)."""

    def __init__(self, backend: Any, *, max_new_tokens: int = 512, temperature: float = 0.0):
        self.backend = backend
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature

    def ask(self, system: str, user: str, *, max_new_tokens: int | None = None) -> str:
        conversation = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        try:
            out = self.backend.generate([conversation], max_new_tokens=max_new_tokens or self.max_new_tokens,
                                        temperature=self.temperature, stop=None)
        except UserError:  # wrong URL, key or model, or a dead server: the user must fix the set-up
            raise
        except Exception as exc:  # a malformed reply rejects this question, not the run
            raise TeacherError(f"teacher call failed: {type(exc).__name__}: {exc}") from exc
        if not out:
            return ""
        first = out[0]
        return first if isinstance(first, str) else str(getattr(first, "text", "") or "")


class TeacherError(Exception):
    """The teacher could not be reached; the question is rejected at the stage that asked."""


_TUTOR_SYSTEM = (
    "You are a tutor preparing worked examples for a search agent. The agent answers questions by "
    "running read-only shell pipelines (rg, grep, head, wc, cut, sort, ...) over corpus.jsonl, a file "
    'with one Wikipedia passage per line: {"id": "1", "contents": "\\"Title\\"\\ntext"}. You know the '
    "gold answer; the agent does not. Follow the requested reply format exactly."
)
_PLANNER_SYSTEM = (
    "You are a search agent answering a question by searching corpus.jsonl (one Wikipedia passage "
    "per line) with shell commands. Think briefly and use only facts from the question and the command "
    "outputs shown to you."
)


class LLMTutor:
    """The Tutor played by a teacher model."""

    def __init__(self, client: TeacherClient, max_hops: int = 3):
        self.client = client
        self.max_hops = max_hops

    def decompose(self, item: Item) -> list[list[SubQuestion]]:
        reply = self.client.ask(_TUTOR_SYSTEM, (
            f"Question: {item.question}\nGold answer: {item.golds[0] if item.golds else ''}\n\n"
            f"Decompose the question into 1 to {self.max_hops} simple sub-questions, in the order a "
            "searcher would answer them; refer to an earlier answer as #1, #2. The last sub-answer is the "
            'gold answer. Reply with only a JSON list: [{"question": "...", "answer": "..."}, ...]'))
        items = _first_json_list(reply)
        if not items or len(items) > self.max_hops:
            return []
        steps: list[SubQuestion] = []
        for index, entry in enumerate(items):
            if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) and entry[k].strip()
                                                      for k in ("question", "answer")):
                return []
            refs = [int(n) - 1 for n in re.findall(r"#(\d)", entry["question"]) if 0 < int(n) <= index]
            last = index == len(items) - 1
            answer = item.golds[0] if last and item.golds else entry["answer"].strip()
            forms = list(dict.fromkeys([answer, *(item.golds if last else [])]))
            steps.append(SubQuestion(entry["question"].strip(), answer, forms, ref=max(refs) if refs else None))
        return [steps]

    def propose_command(self, ctx: StepContext) -> str | None:
        tried = "\n".join(f"- {a.command}  -> {a.reason}" for a in ctx.attempts) or "(none)"
        reply = self.client.ask(_TUTOR_SYSTEM, (
            f"Question: {ctx.item.question}\nSub-question: {ctx.step.question}\n"
            f"Its answer: {ctx.step.answer}\nThe output must contain one of: {json.dumps(ctx.need)}\n"
            + (f"Search from this entity (found earlier): {ctx.anchor}\n" if ctx.anchor else "")
            + f"Earlier attempts:\n{tried}\n\nWrite ONE read-only pipeline over corpus.jsonl that prints a "
            "few passages holding the evidence. Never put the answer itself in a search pattern. End with "
            "| head -n 5. If an attempt printed nothing, widen it (drop -w, add -i, a shorter pattern). "
            "Reply as <command>...</command>."))
        match = _COMMAND.search(reply)
        command = (match.group(1) if match else "").strip().strip("`").strip()
        if not command or "\n" in command or len(command) > 500:
            return None
        return command

    def judge(self, ctx: StepContext, contents: str, passage_id: str) -> bool:
        reply = self.client.ask(_TUTOR_SYSTEM, (
            f"Sub-question: {ctx.step.question}\nExpected answer: {ctx.step.answer}\n"
            f"Passage:\n{contents[:_MAX_OBS_CHARS]}\n\nDoes this passage state the expected answer to the "
            "sub-question? Reply with exactly one word: yes or no."), max_new_tokens=4)
        return reply.strip().lower().rstrip(".") == "yes"

    def extract_bridge(self, ctx: StepContext, contents: str) -> str | None:
        reply = self.client.ask(_TUTOR_SYSTEM, (
            f"Passage:\n{contents[:_MAX_OBS_CHARS]}\n\nThe search used the entity {ctx.anchor!r}. Copy, "
            "exactly as the passage writes it, the name of that entity. Reply with the name only."),
            max_new_tokens=32)
        candidate = _clean_text(reply, 200).strip("\"'")
        return locate(contents, [candidate]) if candidate else None

    def edit(self, item: Item, draft: str, command: str, history: list[Observed], step: SubQuestion,
             rng: random.Random) -> str:
        reply = self.client.ask(_TUTOR_SYSTEM, (
            f"Question: {item.question}\nObservations so far:\n{_history_text(history)}\n\n"
            f"The agent's draft reasoning: {draft}\nThe next command will be: {command}\n\n"
            "Rewrite the reasoning in 1-3 sentences so that it motivates exactly this command. Use only "
            "facts from the question and the observations above; do not mention anything not yet observed, "
            "and do not mention the answer. Reply with the reasoning only."))
        return _clean_text(reply) or draft


class LLMPlanner:
    """The answer-blind Planner played by a teacher model: its prompts never hold the gold answer."""

    def __init__(self, client: TeacherClient):
        self.client = client

    def draft(self, item: Item, history: list[Observed], rng: random.Random) -> str:
        reply = self.client.ask(_PLANNER_SYSTEM, (
            f"Question: {item.question}\nObservations so far:\n{_history_text(history)}\n\n"
            "In 1-3 sentences, say what you know so far and what to search for next."))
        return _clean_text(reply)

    def answer(self, item: Item, history: list[Observed], rng: random.Random) -> tuple[str, str]:
        reply = self.client.ask(_PLANNER_SYSTEM, (
            f"Question: {item.question}\nObservations:\n{_history_text(history)}\n\n"
            "Give one or two sentences of reasoning from these observations, then the short answer "
            "(a name, date, number, yes or no) as <answer>...</answer>."))
        match = re.search(r"<answer>(.*?)</answer>", reply, re.S)
        answer = _clean_text(match.group(1), 200) if match else ""
        think = _clean_text(reply[:match.start()] if match else reply)
        return think, answer
