"""The offline Tutor's searches: the commands a real agent would type, how each widens after empty output,
and the one sentence that says what a search does or why it differs from the failed one before it.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, replace

from grepseek_lib.coldstart.verify import words

#: How often a hop's first search is each strategy (`strategies.STRATEGIES`). A policy trained on title
#: lookups alone looks every question up as a title, which prints nothing when the wording differs; one
#: trained on many co-occurrence searches pairs the name with a question word ("born", "occupation")
#: that passages rarely hold, so co-occurrence stays a minority (docs/RESULTS.md, exp23 vs exp24).
FIRST_SEARCH_WEIGHTS = {"text": 0.4, "phrase": 0.25, "cooccur": 0.15, "title": 0.2}
#: Share of hops from the question that first try an answer-blind guess: a name or phrase read off the
#: question alone, as the agent at inference must (the verified anchors are strings the evidence passage
#: holds, so the data rarely shows an empty search answered by a wider one). Off by default: at 0.8 the
#: SFT model repeated commands as often and answered worse on held-out questions (docs/RESULTS.md).
BLIND_GUESS_RATE = 0.0
#: Share of hops from the question whose first search is the question's own words just before the name
#: ("a demon Lilu" -> 'demon Lilu'), widened by execution back to the name when it prints nothing: the
#: agent copies such phrases from the question, and dropping words is the widening it must learn.
PHRASE_FIRST_RATE = 0.5
#: Words that carry no search on their own (question words, articles, auxiliaries, prepositions).
STOPWORDS = frozenset(
    "a an the and or but of in on at to for from by with about as into over under after before between "
    "is are was were be been being has have had do does did which what who whom whose when where why how "
    "that this these those it its he she his her they their them there than then also both either neither "
    "same other another one many much more most first last not no yes can could would should may might will "
    "shall if so such name named called known did does often any all each some very well".split()
)
_LINKING = frozenset("of the on de da von van del la le".split())
_QUESTION_WORDS = frozenset("what who whom whose which when where why how is are was were did does do in on "
                            "the a an this that these those if as at by for from of to during after before "
                            "since while with".split())
_TOKEN = re.compile(r"[^\W_]+(?:['.\-][^\W_]+)*\.?")
_QUOTED = re.compile(r'"([^"]{3,80})"')
_CLAUSE_BREAK = re.compile(r'[,;:?!()"]')


@dataclass(frozen=True)
class Search:
    """A search the offline Tutor can write and widen step by step."""

    anchor: str
    keyword: str | None = None
    also: str | None = None  # a second filter word
    title: str | None = None  # "exact" | "prefix": match the passage's title line
    word: bool = False
    ignore_case: bool = False
    head: int = 5
    program: str = "rg"
    fallback: str | None = None  # a blind guess widens to this name once the case is dropped

    @property
    def strategy(self) -> str:
        if self.title:
            return "title"
        if self.keyword or self.also:
            return "cooccur"
        return "phrase" if self.ignore_case and len(self.anchor.split()) > 1 else "text"

    def widen(self) -> Search | None:
        """The next wider search after empty output (drop -w, then case, then the filter, then words)."""
        if self.title == "exact":
            return replace(self, title="prefix")
        if self.title == "prefix":
            return replace(self, title=None, ignore_case=True)
        if self.fallback is not None:
            if not self.ignore_case:
                return replace(self, ignore_case=True)
            return Search(self.fallback, head=self.head, program=self.program)
        if self.word:
            return replace(self, word=False)
        if not self.ignore_case:
            return replace(self, ignore_case=True)
        if self.also:
            return replace(self, also=None)
        if self.keyword:
            return replace(self, keyword=None)
        parts = self.anchor.split()
        if len(parts) > 1:
            return replace(self, anchor=" ".join(parts[1:]) if len(parts) > 2 else parts[-1])
        return None

    def render(self) -> str:
        escaped = _escape(self.anchor)
        if self.title:
            pattern = f'\\"{escaped}\\"' if self.title == "exact" else f'\\"{escaped}'
            return f"{self.program} -F {_quote(pattern)} corpus.jsonl | head -n {self.head}"
        flags = ["-F"] + (["-i"] if self.ignore_case else []) + (["-w"] if self.word else [])
        first = f"{self.program} {' '.join(flags)} {_quote(escaped)} corpus.jsonl"
        for word in (self.keyword, self.also):
            if word:
                first += f" | rg -i -w {_quote(word)}"
        return f"{first} | head -n {self.head}"


def _escape(text: str) -> str:
    """The corpus spelling of a string: non-ASCII as \\uXXXX and quotes as \\" (wiki-18 is json.dumps)."""
    return json.dumps(text)[1:-1]


def _quote(text: str) -> str:
    if "'" not in text:
        return f"'{text}'"
    if not any(c in text for c in '"$`\\'):
        return f'"{text}"'
    return "'" + text.replace("'", "'\"'\"'") + "'"


def first_searches(anchor: str, gold_titles: list[str], kws: list[str],
                    rng: random.Random) -> dict[str, list[Search]]:
    """The candidate first searches for one anchor, by strategy. `title` looks the anchor up as an exact
    title even when no passage is titled so (the guess an agent makes; it usually prints nothing and is
    widened to the title prefix, then to the passage text)."""
    titled = [t for t in gold_titles if t and words(t) == words(anchor)]
    prefixed = [t for t in gold_titles if t and t.startswith(anchor) and t != anchor]
    title = [Search(titled[0] if titled else anchor, title="exact", head=3)]
    if prefixed:
        title.append(Search(anchor + (" (" if prefixed[0].startswith(anchor + " (") else ""), title="prefix"))
    head = rng.choice((3, 5))
    phrase = [Search(anchor, ignore_case=True, head=head)] if len(anchor.split()) > 1 else []
    return {"title": title, "text": [Search(anchor, head=head)], "phrase": phrase,
            "cooccur": [Search(anchor, k, word=True, ignore_case=rng.random() < 0.5, head=head) for k in kws[:2]]}


def blind_guesses(question: str, avoid: str) -> list[str]:
    """What an answer-blind agent would search first, read off the question alone: quoted titles, runs
    of capitalized words (linking words such as "of the" allowed inside), then a capitalized word with
    the words after it; none equal to `avoid` (the anchor the Tutor verified). Longest first."""
    tokens = [(re.sub(r"'s$|\.$", "", m.group()), m.start()) for m in _TOKEN.finditer(question)]
    guesses = [q.strip() for q in _QUOTED.findall(question)]
    run: list[int] = []
    for i, (token, _) in enumerate([*tokens, ("", len(question))]):
        capital = token[:1].isupper() or token[:1].isdigit()
        if capital and not (i == 0 and token.lower() in _QUESTION_WORDS):
            run.append(i)
            continue
        if run and token.lower() in _LINKING and i + 1 < len(tokens) and tokens[i + 1][0][:1].isalnum() \
                and not tokens[i + 1][0][:1].islower():
            run.append(i)
            continue
        if run:
            guesses.append(_span(question, tokens, run[0], run[-1]))
            end = i
            while end < len(tokens) and tokens[end][0].lower() in _LINKING:
                end += 1
            if len(run) == 1 and end < len(tokens) and tokens[end][0].lower() not in STOPWORDS:
                guesses.append(_span(question, tokens, run[0], end))  # "God of the underworld"
        run = []
    keep = [g for g in dict.fromkeys(guesses)
            if len(g) >= 4 and words(g) != words(avoid) and any(w not in _QUESTION_WORDS for w in words(g))]
    return sorted(keep, key=lambda g: -len(g))


def question_names(question: str, avoid: str) -> list[str]:
    """The guesses of `blind_guesses` that read as a name, one clause at a time (a name never spans a
    comma): capitalized words with linking words inside, not opening with a question word or "Name"
    ("Name the mother" is an instruction). Longest first."""
    names = []
    for clause in _CLAUSE_BREAK.split(question):
        for guess in blind_guesses(clause, avoid):
            parts = guess.split()
            if parts[0].lower() in _QUESTION_WORDS | {"name"}:
                continue
            if all(w[:1].isupper() or w[:1].isdigit() or w.lower() in _LINKING for w in parts):
                names.append(guess)
    return sorted(dict.fromkeys(names), key=lambda g: -len(g))


def phrase_before(question: str, anchor: str) -> str | None:
    """`anchor` with the question's words just before it, up to the first that is not a stopword, within
    its clause ("Who wrote a novel about Lilu?" -> 'novel about Lilu'); None when nothing precedes it. Only
    words before: widening drops a phrase's first words, so it leads back to `anchor`."""
    at = question.lower().find(anchor.lower()) if anchor else -1
    if at <= 0:
        return None
    for match in reversed(list(_TOKEN.finditer(question[:at]))[-3:]):
        if _CLAUSE_BREAK.search(question[match.start():at]) or match.group().lower() in ("and", "or", "but"):
            return None  # another clause or another name ("Nolan and Sathish Kalathil")
        if match.group().lower() not in STOPWORDS:
            return question[match.start():at] + anchor
    return None


def _span(question: str, tokens: list[tuple[str, int]], first: int, last: int) -> str:
    return question[tokens[first][1]:tokens[last][1] + len(tokens[last][0])].strip(" ,?")


# ---------------------------------------------------------------- the roles


def change_reason(before: Search | None, after: Search, printed: bool, rng: random.Random) -> str:
    """Why the search after a failed one is different: the one step that widened it, or a new angle."""
    if before is None:
        return ""
    if printed:  # lines came back, but not the ones needed
        return rng.choice(("Those lines do not give what I need, so I change the search.",
                           "That output is about something else; I search from another angle."))
    other_name = f"Nothing matched '{before.anchor}', so I try another name from the question: '{after.anchor}'."
    if not set(words(before.anchor)) & set(words(after.anchor)):  # not a widening: a name of its own
        return other_name
    if before.title == "exact" and after.title == "prefix":
        return "No passage has exactly that title; I match the start of the title line instead."
    if before.title and not after.title:
        return "The title line does not match, so I search the passage text instead."
    if before.word and not after.word:
        return "Matching whole words only was too strict, so I drop -w."
    if not before.ignore_case and after.ignore_case:
        return "The corpus may write it in another case, so I add -i."
    dropped = [w for w in (before.also, before.keyword) if w and w not in (after.also, after.keyword)]
    if dropped:
        return f"Requiring '{dropped[0]}' on the same line was too narrow, so I drop that filter."
    if after.anchor in before.anchor and len(after.anchor) < len(before.anchor):
        return f"The whole phrase does not occur; I search for fewer words: '{after.anchor}'."
    if after.anchor != before.anchor:
        return other_name
    return "That pattern printed nothing; I search differently."


def motivation(command: str, patterns: list[str], rng: random.Random) -> str:
    """One sentence saying what the command does, in words an agent would use before running it."""
    anchor = patterns[0].strip('"').rstrip(" (") if patterns else ""
    filters = " and ".join(f"'{p}'" for p in patterns[1:])
    if command.endswith("wc -l"):
        return rng.choice((f"Before reading, I count the lines that match '{anchor}'.",
                           f"First I check how many lines mention '{anchor}', to see whether reading them is cheap."))
    if '\\"' in command and patterns and patterns[0].endswith('"'):
        return rng.choice((f"I will read the passage titled '{anchor}'.",
                           f"I look up the passage whose title is '{anchor}' and read the first lines.",
                           f"Searching the title line for '{anchor}' should give its article."))
    if '\\"' in command:
        return rng.choice((f"I list the passages whose titles start with '{anchor}'.",
                           f"Several articles may be titled '{anchor}'; I read the first ones."))
    if filters:
        return rng.choice((f"I search for '{anchor}' and keep only lines that also mention {filters}.",
                           f"Lines with '{anchor}' filtered by {filters} should hold the evidence.",
                           f"I grep for '{anchor}' and narrow to lines containing {filters}."))
    return rng.choice((f"I search for '{anchor}' and read the first few matches.",
                       f"Let me read a few lines that mention '{anchor}'."))
