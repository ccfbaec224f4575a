"""Which questions can the corpus support? Phrase matching over SQuAD-normalised text.

Everything is compared after `normalize_text` (the metric's normalize_answer, possessive 's dropped;
the one that scores answers), as whole-token phrases, so "Paris" does not match "Parisian". Phrase lookup is a dictionary
probe per token position keyed by the phrase's first token, so scanning the ~3M-token mini-wiki for
~100k answer strings takes seconds, not minutes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from grepseek_lib.metrics import normalize_answer

#: Answers the text check cannot test: a yes/no question needs two named entities instead.
YES_NO = frozenset({"yes", "no"})
#: A one-word title counts as "named in the question" only if that word is this rare in the corpus
#: (so "Teutberga" counts, "film" or "water" do not).
MAX_DF_SINGLE_WORD_TITLE = 30
#: A link entity (title or name shared by two passages) counts only if at most this many passages have it.
MAX_DF_LINK = 30
#: Answers found in more passages than this ("1999", "English") only count by the 1-hop rule.
MAX_ANSWER_PASSAGES = 300


_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s\b")


@lru_cache(maxsize=1 << 18)
def normalize_text(text: str) -> str:
    """The metric's SQuAD normalisation after dropping possessive 's, so "Lothair II's" names "Lothair II"."""
    return normalize_answer(_POSSESSIVE.sub("", text))


def question_key(question: str) -> str:
    """What makes two questions the same one (train/eval overlap): the metric's normalised text."""
    return normalize_answer(question)


class PhraseIndex:
    """Finds which of a fixed set of normalised phrases occur in a token sequence."""

    def __init__(self, phrases: Iterable[str]):
        self.phrases = {p for p in phrases if p}
        lengths: dict[str, set[int]] = defaultdict(set)
        seconds: dict[str, set[str]] = defaultdict(set)
        for phrase in self.phrases:
            tokens = phrase.split(" ")
            lengths[tokens[0]].add(len(tokens))
            if len(tokens) > 1:
                seconds[tokens[0]].add(tokens[1])
        self._lengths = {first: sorted(ls) for first, ls in lengths.items()}
        self._seconds = dict(seconds)

    def find(self, tokens: Sequence[str]) -> set[str]:
        found: set[str] = set()
        lengths, seconds, phrases = self._lengths, self._seconds, self.phrases
        n = len(tokens)
        for i, tok in enumerate(tokens):
            ls = lengths.get(tok)
            if ls is None:
                continue
            # multi-word phrases are only tried when the next token can continue one of them
            multi = i + 1 < n and tokens[i + 1] in seconds.get(tok, ())
            for length in ls:
                if length == 1:
                    if tok in phrases:
                        found.add(tok)
                    continue
                if not multi or i + length > n:
                    break
                gram = " ".join(tokens[i : i + length])
                if gram in phrases:
                    found.add(gram)
        return found


@dataclass
class CorpusView:
    """The corpus as normalised token lists, with its titles, for support checks."""

    titles: list[str]
    tokens: list[list[str]]
    by_title: dict[str, list[int]] = field(default_factory=dict)
    specific_titles: set[str] = field(default_factory=set)

    @classmethod
    def build(cls, passages: Sequence[tuple[str, str]]) -> CorpusView:
        titles = [normalize_text(t) for t, _ in passages]
        tokens = [normalize_text(f"{t} {x}").split() for t, x in passages]
        by_title: dict[str, list[int]] = defaultdict(list)
        for pid, title in enumerate(titles):
            if title:
                by_title[title].append(pid)
        doc_freq: dict[str, int] = defaultdict(int)
        for toks in tokens:
            for tok in set(toks):
                doc_freq[tok] += 1
        specific = {norm for (title, _), norm in zip(passages, titles, strict=True)
                    if norm and _is_specific_title(title, norm, doc_freq)}
        return cls(titles, tokens, dict(by_title), specific)


def _is_specific_title(title: str, norm: str, doc_freq: dict[str, int]) -> bool:
    """A name, not a common noun: "Gulf of Mexico" and "Teutberga" count; "Place of birth", "Water" do not.

    Wikipedia titles capitalise only proper nouns after the first word, so a multi-word title is a name
    when a later word starts with a capital or digit; a one-word title when its word is rare.
    """
    if " " not in norm:
        return doc_freq.get(norm, 0) <= MAX_DF_SINGLE_WORD_TITLE
    return any(w[:1].isupper() or w[:1].isdigit() for w in title.split()[1:])


@dataclass
class SupportFinder:
    """Decides, per question, whether the corpus holds evidence for its answer.

    Rule (documented in the data card). T = passages whose (specific) title occurs in the question;
    A = passages containing a gold answer. Each passage has link entities: its own title, the titles it
    mentions and the multi-word capitalised names in its text, each kept only if rare (at most
    MAX_DF_LINK passages), so that links mean something. Supported when
      1-hop: a passage is in both T and A; or
      2-hop: a passage in T and a passage in A share a link entity (a bridge); or
      3-hop (max_hops=3): they are joined through one more passage that shares an entity with each.
    Multi-hop links are not tried for very common answers (over MAX_ANSWER_PASSAGES passages).
    An answer that occurs in the question itself (a comparison, "which came first, X or Y") and a
    yes/no answer need two different titles named in the question instead.
    """

    corpus: CorpusView
    answer_hits: dict[str, list[int]]
    title_index: PhraseIndex
    entities: list[frozenset[str]]
    passages_with: dict[str, list[int]]

    @classmethod
    def build(cls, corpus: CorpusView, answers: Iterable[str], texts: Sequence[str]) -> SupportFinder:
        """`texts`: the passages' original text (capitalisation marks names), same order as `corpus`."""
        index = PhraseIndex(normalize_text(a) for a in answers)
        hits: dict[str, list[int]] = defaultdict(list)
        for pid, toks in enumerate(corpus.tokens):
            for phrase in index.find(toks):
                hits[phrase].append(pid)
        title_index = PhraseIndex(corpus.specific_titles)
        raw_entities: list[set[str]] = []
        df: dict[str, int] = defaultdict(int)
        for pid, toks in enumerate(corpus.tokens):
            ents = title_index.find(toks) | _capitalised_names(texts[pid])
            if corpus.titles[pid] in corpus.specific_titles:
                ents.add(corpus.titles[pid])
            raw_entities.append(ents)
            for e in ents:
                df[e] += 1
        entities = [frozenset(e for e in ents if df[e] <= MAX_DF_LINK) for ents in raw_entities]
        passages_with: dict[str, list[int]] = defaultdict(list)
        for pid, ents in enumerate(entities):
            for e in ents:
                passages_with[e].append(pid)
        return cls(corpus, dict(hits), title_index, entities, dict(passages_with))

    def in_corpus(self, answers: Iterable[str]) -> bool:
        """Does some gold answer occur (as normalised whole tokens) anywhere in the corpus?"""
        return any(normalize_text(a) in self.answer_hits for a in answers)

    def _entities_of(self, pids: Iterable[int]) -> set[str]:
        return set().union(*(self.entities[pid] for pid in pids))

    def supports(self, question: str, answers: Sequence[str], max_hops: int = 2) -> bool:
        q_tokens = normalize_text(question).split()
        named = _as_names(self.title_index.find(q_tokens), question)
        if not named:
            return False
        norm_answers = {normalize_text(a) for a in answers} - {""}
        q_text = f" {' '.join(q_tokens)} "
        if norm_answers & YES_NO or any(f" {a} " in q_text for a in norm_answers) \
                or (" or " in q_text and _answer_names_one(named, norm_answers)):
            return len(named) >= 2
        answer_pids = {pid for a in norm_answers for pid in self.answer_hits.get(a, ())}
        named_pids = {pid for t in named for pid in self.corpus.by_title[t]}
        if named_pids & answer_pids:
            return True
        if not answer_pids or len(answer_pids) > MAX_ANSWER_PASSAGES or max_hops < 2:
            return False
        answer_entities = self._entities_of(answer_pids)
        start = self._entities_of(named_pids)
        if start & answer_entities:
            return True
        if max_hops < 3:
            return False
        middle = {pid for e in start for pid in self.passages_with.get(e, ())}
        return bool(self._entities_of(middle) & answer_entities)

    def passage_has_answer(self, pid: int, answers: Iterable[str]) -> bool:
        tokens = self.corpus.tokens[pid]
        return bool(PhraseIndex(normalize_text(a) for a in answers).find(tokens))


def _answer_names_one(named: set[str], answers: set[str]) -> bool:
    """Whether a gold answer is a fuller form of a multi-word name the question gives ("Adeline Virginia
    Woolf" for "Emma Bull or Virginia Woolf?"); with an "or" in the question, a choice between names, which
    needs both in the corpus (the answer alone says nothing of the other)."""
    return any(" " in t and f" {t} " in f" {a} " for t in named for a in answers)


def _as_names(titles: set[str], question: str) -> set[str]:
    """In a question written in normal case, a one-word title must be capitalised there to be a name
    ("Mammal" the article is not named by "a large hoofed mammal"); all-lower-case NQ cannot tell."""
    if not any(ch.isupper() for ch in question):
        return titles
    capitalised = {normalize_text(w) for w in re.findall(r"[A-Z][\w'-]*", question)}
    return {t for t in titles if " " in t or t in capitalised}


_NAME = re.compile(r"[A-Z][\w'.-]*(?:\s+[A-Z][\w'.-]*)+")


def _capitalised_names(text: str) -> set[str]:
    """Runs of two or more capitalised words ("Natalie Wood"), normalised; a cheap named-entity finder."""
    names = set()
    for match in _NAME.finditer(text):
        name = normalize_text(match.group(0))
        if " " in name:
            names.add(name)
    return names
