"""The Tutor and Planner without an LLM: decompositions from dataset annotations, commands a real agent
would type, and seeded reasoning templates that only quote what has been printed.

Annotations used: HotpotQA supporting titles (bridge: the answer passage's title named in the other
passage; comparison: one hop per entity), MuSiQue decompositions (per-hop answers are the bridges),
and for other sets the subject's title (PopQA) or the question's own names. The chain still EXECUTES
and verifies every command, so an annotation the corpus does not back is rejected, not trusted.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

from grepseek_lib.coldstart.derive import references, with_answers
from grepseek_lib.coldstart.roles import Item, Observed, StepContext, SubQuestion
from grepseek_lib.coldstart.searches import (
    BLIND_GUESS_RATE,
    FIRST_SEARCH_WEIGHTS,
    PHRASE_FIRST_RATE,
    STOPWORDS,
    Search,
    blind_guesses,
    change_reason,
    first_searches,
    motivation,
    phrase_before,
)
from grepseek_lib.coldstart.strategies import STRATEGIES
from grepseek_lib.coldstart.verify import (
    command_patterns,
    contains,
    is_yes_no,
    locate,
    output_passages,
    words,
)
from grepseek_lib.data.formats import passage_title_text
from grepseek_lib.shell.types import Refused

_WORD_SPAN = re.compile(r"[^\W_]+(?:[.\-][^\W_]+)*")
#: A sentence ends at . ! ? before a capital, but not after an initial ("E. B. White") or a title ("St.").
_SENTENCE_END = re.compile(r"(?<!\b[A-Z]\.)(?<!\bSt\.)(?<!\bMr\.)(?<!\bDr\.)(?<!\bJr\.)(?<!\bMrs\.)(?<!\bNo\.)"
                           r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
#: Longest quote a thought carries: with 240 one turn in five ran past the 128 tokens a turn may take.
QUOTE_CHARS = 160
#: What the Planner thinks after a search printed nothing: never the same command again.
EMPTY_OUTPUT_DRAFTS = ("That search printed nothing, and the same command would print nothing again, so I change it.",
                       "No line matched: the corpus does not write it that way. I try a different search.",
                       "The output is empty, so that exact pattern is not in the corpus; I search wider.")
#: ... and after a count of 0: reading those lines, or counting them again, would print nothing.
ZERO_COUNT_DRAFTS = ("The count is 0: no line matches, so reading it or counting again is useless. I change the "
                     "search.",
                     "0 lines match. The corpus does not spell it that way; I try a different pattern.",
                     "Nothing matches (count 0), so I widen the search instead of repeating it.")


# ---------------------------------------------------------------- text helpers


def title_forms(title: str) -> list[str]:
    """How a passage's title is written in running text: whole, without "(film)", before a comma."""
    forms = [title, re.sub(r"\s*\([^)]*\)\s*$", "", title), title.split(",")[0]]
    return [f.strip() for f in dict.fromkeys(forms) if f.strip()]


def _informative(tokens: list[str]) -> bool:
    return any(t.lower() not in STOPWORDS for t in tokens)


def question_anchors(question: str, contents: str, titles: list[str], limit: int = 3) -> list[str]:
    """Strings of the question (its own spelling) that the evidence passage also holds: the passage's
    title forms first, then the longest shared runs of words that look like names."""
    anchors = []
    for title in titles:
        for form in title_forms(title):
            span = locate(question, [form])
            if span and _informative(span.split()) and (len(words(span)) > 1 or len(span) >= 4):
                anchors.append(span)
                break
    spans = list(_WORD_SPAN.finditer(question))
    for size in range(min(6, len(spans)), 0, -1):
        for start in range(len(spans) - size + 1):
            run = spans[start:start + size]
            tokens = [m.group() for m in run]
            if tokens[0].lower() in STOPWORDS or tokens[-1].lower() in STOPWORDS or not _informative(tokens):
                continue
            if size == 1 and not (tokens[0][0].isupper() and len(tokens[0]) >= 3 and start > 0):
                continue
            phrase = question[run[0].start():run[-1].end()]
            if contains(contents, phrase) and not any(contains(a, phrase) for a in anchors):
                anchors.append(phrase)
    return anchors[:limit]


def keywords(question: str, contents: str, exclude: list[str], focus: str = "", limit: int = 5) -> list[str]:
    """Question words (no stop words, none of `exclude`'s) that the evidence passage holds: those the
    hop's own sub-question (`focus`) also uses first, then by length, a crude proxy for rarity."""
    banned = {w for text in exclude for w in words(text)}
    focused = set(words(focus))
    found = []
    for word in dict.fromkeys(m.group().lower() for m in re.finditer(r"[^\W\d_]{4,}", question)):
        if word not in STOPWORDS and word not in banned and contains(contents, word):
            found.append(word)
    return sorted(found, key=lambda w: (w not in focused, -len(w), w))[:limit]


def sentences(text: str) -> list[str]:
    """Sentences with double quotes turned single, so a quoted sentence stays one quote in the reasoning."""
    return [s.strip().replace('"', "'") for s in _SENTENCE_END.split(text) if s.strip()]


def sentence_with(text: str, form: str, limit: int = QUOTE_CHARS) -> str | None:
    """The sentence of `text` holding `form`, cut around it when long."""
    for sentence in sentences(text):
        if contains(sentence, form):
            if len(sentence) <= limit:
                return sentence
            at = max(0, sentence.lower().find(form.lower()) - limit // 2)
            return sentence[at:at + limit].strip()
    return None


def best_sentence(text: str, question: str, limit: int = QUOTE_CHARS) -> str | None:
    """The sentence sharing the most content words with the question (what an answer-blind reader quotes)."""
    wanted = {w for w in words(question) if w not in STOPWORDS}
    scored = [(len(wanted & set(words(s))), -i, s) for i, s in enumerate(sentences(text))]
    if not scored:
        return None
    best = max(scored)[2]
    return best if len(best) <= limit else best[:limit].rsplit(" ", 1)[0] + " ..."


def quote_line(title: str, quote: str, rng: random.Random) -> str:
    """A thought's one quote from a printed passage (two quotes a turn ran past the per-turn token cap)."""
    if not title:
        return f"The output says \"{quote}\""
    return rng.choice((f"The passage on {title} says: \"{quote}\"", f"From {title}: \"{quote}\"",
                       f"I found {title}: \"{quote}\""))


def _bodies(observed: Observed) -> list[tuple[str, str]]:
    """(title, text) of each printed passage: quotes come from the text, never the title line."""
    passages = output_passages(observed.payload.get("stdout") or "")
    return [passage_title_text(p["contents"]) for p in passages]


def _title_of(observed: Observed, form: str | None = None) -> str:
    for title, text in _bodies(observed):
        if form is None or contains(f"{title}\n{text}", form):
            return title
    return ""


def _body_text(observed: Observed) -> str:
    return "\n".join(text for _, text in _bodies(observed))


# ---------------------------------------------------------------- commands


class OfflineTutor:
    """The answer-aware Tutor from annotations. `passages` maps corpus id -> contents (the gold ones)."""

    def __init__(self, passages: dict[str, str], max_hops: int = 3, blind_guess_rate: float = BLIND_GUESS_RATE,
                 phrase_first_rate: float = PHRASE_FIRST_RATE):
        self.passages = passages
        self.max_hops = max_hops
        self.blind_guess_rate = blind_guess_rate
        self.phrase_first_rate = phrase_first_rate
        self.known: dict[str, Search] = {}  # every command proposed -> its search (to say what changed)

    # -- decomposition
    def _gold(self, item: Item) -> dict[str, list[str]]:
        gold: dict[str, list[str]] = {}
        for title, ids in (item.metadata.get("gold_passages") or {}).items():
            gold[title] = [str(i) for i in (ids if isinstance(ids, list) else [ids])]
        return gold

    def _contents(self, ids: list[str]) -> str:
        return "\n".join(self.passages.get(i, "") for i in ids)

    def _hop(self, item: Item, question: str, answer: str, forms: list[str], title: str, ids: list[str],
             ref: int | None, exclude: list[str], kind: str = "hop") -> SubQuestion:
        contents = self._contents(ids)
        anchors = [] if ref is not None else question_anchors(item.question, contents, [title])
        kws = keywords(item.question, contents, [*anchors, *exclude, *forms, *item.golds], focus=question)
        if ref is None and not anchors and kws:  # no name to start from: the rarest shared word, as written
            anchors, kws = [locate(item.question, kws[:1]) or kws[0]], kws[1:]
        return SubQuestion(question, answer, forms, ref, ids, [title], anchors, kws, kind)

    def decompose(self, item: Item) -> list[list[SubQuestion]]:
        meta = item.metadata
        if meta.get("question_decomposition"):
            plans = [self._musique(item)]
        elif meta.get("supporting_facts") or meta.get("gold_titles"):
            plans = self._hotpot(item)
        else:
            plans = [self._single(item)]
        return [p for p in plans if p and len(p) <= self.max_hops and all(h.anchors or h.ref is not None
                                                                          for h in p)]

    def _musique(self, item: Item) -> list[SubQuestion]:
        hops = item.metadata["question_decomposition"]
        titles = item.metadata.get("support_titles") or []
        gold = self._gold(item)
        answers = [str(h.get("answer", "")) for h in hops]
        plan = []
        for index, hop in enumerate(hops):
            last = index == len(hops) - 1
            refs = [n - 1 for n in references(hop.get("question", "")) if 0 < n <= index]
            ref = max(refs) if refs else None
            question = with_answers(hop.get("question", ""), answers)
            title = titles[index] if index < len(titles) else ""
            answer = item.golds[0] if last else answers[index]
            forms = list(item.golds) if last else [answer]
            exclude = [answers[r] for r in refs]
            plan.append(self._hop(item, question, answer, forms, title, gold.get(title, []), ref, exclude))
        return plan

    def _hotpot(self, item: Item) -> list[list[SubQuestion]]:
        meta = item.metadata
        titles = meta.get("gold_titles") or list(dict.fromkeys(t for t, _ in meta.get("supporting_facts", [])))
        gold = self._gold(item)
        text = {t: self._contents(gold.get(t, [])) for t in titles}
        golds = item.golds
        if meta.get("type") == "comparison" or any(is_yes_no(g) for g in golds):
            plan = [self._hop(item, f"What does the passage on {t} say?", t, title_forms(t), t, gold.get(t, []),
                              None, [], kind="compare") for t in titles]
            return [plan]
        plans = []
        holders = [t for t in titles if locate(text[t], golds, relaxed=True)]
        holders.sort(key=lambda t: contains(item.question, title_forms(t)[-1]))  # unnamed ones first
        for last in holders:
            for first in (t for t in titles if t != last):
                bridge = locate(text[first], title_forms(last))
                if bridge and not contains(item.question, bridge) and not locate(bridge, golds, relaxed=True):
                    hop1 = self._hop(item, f"Which entity in the passage on {first} leads to the answer?",
                                     bridge, [bridge], first, gold.get(first, []), None, [bridge])
                    hop2 = self._hop(item, item.question, golds[0], list(golds), last, gold.get(last, []), 0,
                                     [bridge])
                    plans.append([hop1, hop2])
            plans.append([self._hop(item, item.question, golds[0], list(golds), last, gold.get(last, []),
                                    None, [])])
        return plans

    def _single(self, item: Item) -> list[SubQuestion]:
        meta = item.metadata
        gold = self._gold(item)
        titles = [t for t in (meta.get("s_wiki_title"), *gold) if t and t in gold] or list(gold)
        for title in dict.fromkeys(titles):
            if locate(self._contents(gold[title]), item.golds, relaxed=True):
                return [self._hop(item, item.question, item.golds[0], list(item.golds), title, gold[title],
                                  None, [])]
        if not item.golds:
            return []
        anchors = question_anchors(item.question, item.question, [meta.get("subj") or ""])
        return [SubQuestion(item.question, item.golds[0], list(item.golds), anchors=anchors[:2])]

    # -- the chain
    def _searches(self, ctx: StepContext) -> list[Search]:
        """Searches in the order the Tutor tries them: often an answer-blind guess from the question
        first (BLIND_GUESS_RATE) or the question's words around the name (PHRASE_FIRST_RATE), then the hop's first strategy drawn from FIRST_SEARCH_WEIGHTS, the other
        strategies, then wider reads and other keywords."""
        step, rng = ctx.step, ctx.rng
        anchors = [ctx.anchor] if ctx.anchor else step.anchors
        kws = step.keywords
        first = rng.choices(STRATEGIES, weights=[FIRST_SEARCH_WEIGHTS[k] for k in STRATEGIES])[0]
        out: list[Search] = []
        guesses = blind_guesses(ctx.item.question, anchors[0]) if anchors and not ctx.anchor else []
        # no draw at rate 0: the random stream (and the data) stay those of the runs before this option
        if guesses and self.blind_guess_rate > 0 and rng.random() < self.blind_guess_rate:
            out.append(Search(rng.choice(guesses[:3]), head=rng.choice((3, 5)), fallback=anchors[0]))
        elif anchors and not ctx.anchor and self.phrase_first_rate > 0 and rng.random() < self.phrase_first_rate:
            phrase = phrase_before(ctx.item.question, anchors[0])
            out += [Search(phrase, head=rng.choice((3, 5)), fallback=anchors[0])] if phrase else []
        for anchor in anchors:
            by_strategy = first_searches(anchor, step.gold_titles, kws, rng)
            out += by_strategy.pop(first, [])
            out += [s for name in STRATEGIES for s in by_strategy.get(name, [])]
            out += [Search(anchor, kws[0], word=True, ignore_case=True, also=kws[1])] if len(kws) > 1 else []
            out += [Search(anchor, ignore_case=True, head=5)]
            out += [Search(anchor, k, ignore_case=True) for k in kws[2:4]]
            out += [Search(anchor, head=8)]  # a common name: read further down
            out += [Search(anchor, kws[1], ignore_case=True, also=k) for k in kws[2:4]] if len(kws) > 1 else []
        if rng.random() < 0.15:
            out = [replace(s, program="grep") if not s.title else s for s in out]
        return list(dict.fromkeys(out))

    def propose_command(self, ctx: StepContext) -> str | None:
        scratch = ctx.__dict__.setdefault("_offline", {})
        if "queue" not in scratch:
            scratch["queue"], scratch["by_command"] = self._searches(ctx), {}
        tried = {a.command for a in ctx.attempts}
        last = ctx.attempts[-1] if ctx.attempts else None
        if last is not None and last.reason == "empty" and last.command in scratch["by_command"]:
            wider = scratch["by_command"][last.command].widen()
            while wider is not None and wider.render() in tried:
                wider = wider.widen()
            if wider is not None:
                scratch["by_command"][wider.render()] = self.known[wider.render()] = wider
                return wider.render()
        for search in scratch["queue"]:
            command = search.render()
            if command not in tried:
                scratch["by_command"][command] = self.known[command] = search
                return command
        return None

    def judge(self, ctx: StepContext, contents: str, passage_id: str) -> bool:
        step = ctx.step
        if step.gold_ids or step.gold_titles:
            title = passage_title_text(contents)[0]
            return passage_id in step.gold_ids or any(words(title) == words(t) for t in step.gold_titles if t)
        anchors = [ctx.anchor] if ctx.anchor else step.anchors
        return any(contains(contents, a) for a in anchors)

    def extract_bridge(self, ctx: StepContext, contents: str) -> str | None:
        return locate(contents, [ctx.anchor]) if ctx.anchor else None

    def edit(self, item: Item, draft: str, command: str, history: list[Observed], step: SubQuestion,
             rng: random.Random) -> str:
        try:
            patterns = command_patterns(command)
        except Exception:  # noqa: BLE001 - an unparsable command keeps the draft; the gate rejects it later
            return draft
        anchor = patterns[0].strip('"').rstrip(" (") if patterns else ""
        parts = [draft]
        if history and not history[-1].probe and anchor and not contains(draft, anchor):
            quote = sentence_with(_body_text(history[-1]), anchor)
            if quote:  # the sentence naming the next entity replaces the draft's quote: one quote a turn
                parts = [quote_line(_title_of(history[-1], anchor), quote, rng)]
                parts.append(rng.choice(("So {a} is the link to follow.", "{a} is the entity to look up next.",
                                         "Next I need the passage about {a}.")).format(a=anchor))
        after = None if command.endswith("| wc -l") else self._search_of(command)  # also reads it did not propose
        if history and history[-1].dead_end and after is not None:
            last, output = history[-1], (history[-1].payload.get("stdout") or "").strip()
            printed = bool(output) and not (last.probe and output == "0")
            parts.append(change_reason(self._search_of(last.command), after, printed, rng))
        parts.append(motivation(command, patterns, rng))
        return " ".join(p for p in parts if p)

    def _search_of(self, command: str) -> Search | None:
        """The search behind a command: the one proposed, or the name another command searched or counted."""
        if command in self.known:
            return self.known[command]
        try:
            patterns = command_patterns(command)
        except Refused:
            return None
        return Search(patterns[0]) if patterns else None


class OfflinePlanner:
    """The Planner from templates. Its drafts quote only printed text; its final answer is the gold answer
    as an observation spells it (offline there is no other way to read an answer from the trace)."""

    def draft(self, item: Item, history: list[Observed], rng: random.Random) -> str:
        if not history:
            return rng.choice(("I need to find where the corpus covers what this question is about.",
                               "Let me start from the names the question gives.",
                               "The question names its subject, so I start by searching for it.",
                               "I have not searched yet; the first step is to find the main entity."))
        last = history[-1]
        if last.probe:
            count = (last.payload.get("stdout") or "").strip().split("\n")[0].strip()
            if count == "0":
                return rng.choice(ZERO_COUNT_DRAFTS)
            lines = "1 line matches" if count == "1" else f"{count} lines match"
            return rng.choice((f"{lines}, few enough to read the top ones.",
                               f"The count is {count}, so reading a handful of lines is cheap."))
        if not (last.payload.get("stdout") or "").strip():
            return rng.choice(EMPTY_OUTPUT_DRAFTS)
        quote = best_sentence(_body_text(last), item.question)
        title = _title_of(last)
        if not quote:
            return "The last search printed nothing useful."
        return quote_line(title, quote, rng)

    def answer(self, item: Item, history: list[Observed], rng: random.Random) -> tuple[str, str]:
        evidence = [h for h in history if not h.probe]
        if any(is_yes_no(g) for g in item.golds):
            yes_no = next(g for g in item.golds if is_yes_no(g)).strip().lower()
            quoted = [(_title_of(h), best_sentence(_body_text(h), item.question)) for h in evidence]
            quotes = [f"{title}: \"{quote}\"" for title, quote in [q for q in quoted if q[1]][-2:]]
            return (" ".join(quotes) + f" Comparing the two, the answer is {yes_no}.", yes_no)
        for observed in reversed(evidence):
            span = locate(_body_text(observed), item.golds, relaxed=True) or locate(observed.text, item.golds,
                                                                                      relaxed=True)
            if span:
                quote = sentence_with(_body_text(observed), span) or best_sentence(_body_text(observed),
                                                                                    item.question) or span
                title = _title_of(observed, span)
                think = rng.choice((f"The passage on {title} says: \"{quote}\" So the answer is {span}.",
                                    f"\"{quote}\" This gives the answer: {span}.",
                                    f"According to the {title} passage, \"{quote}\" The answer is {span}."))
                return think, span
        return "I could not find the answer in the outputs.", ""
