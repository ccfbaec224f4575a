"""Single-hop training questions read off the annotated decompositions of multi-hop ones.

The training splits are multi-hop only, so every cold-start trajectory that reads a passage holding an
entity goes on to search that entity: the SFT model then searches on after a single-hop question's first
read already printed the answer (PopQA, "What is X's occupation?"). A MuSiQue decomposition's last hop,
with the earlier answers written in ("Who was the first president of #1?" -> "... of American Psychological
Association?"), is such a question, answered by one annotated passage.
"""

from __future__ import annotations

import re

from grepseek_lib.coldstart.roles import Item

_REF = re.compile(r"#(\d+)")


def with_answers(text: str, answers: list[str]) -> str:
    """A decomposition step with its references to earlier steps (#1, #2) replaced by their answers; a
    reference to no step stays as written."""
    return _REF.sub(lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers) else m.group(),
                    text)


def references(text: str) -> list[int]:
    """The step numbers (1-based) a decomposition step refers to."""
    return [int(n) for n in _REF.findall(text)]


def last_hop_item(item: Item) -> Item | None:
    """The last hop of `item`'s decomposition as a question of its own (id `<id>#last`), or None when there is
    none, it is not written as a question (MuSiQue's "X >> performer"), or its passage is not annotated."""
    hops = item.metadata.get("question_decomposition") or []
    titles = item.metadata.get("support_titles") or []
    gold = item.metadata.get("gold_passages") or {}
    if len(hops) < 2 or len(titles) < len(hops) or not item.golds:
        return None
    answers = [str(h.get("answer", "")) for h in hops]
    text = str(hops[-1].get("question", ""))
    refs = references(text)
    if ">>" in text or not refs or any(not 0 < n < len(hops) or not answers[n - 1].strip() for n in refs):
        return None
    question = " ".join(with_answers(text, answers).split()).replace(" ?", "?")
    title = titles[len(hops) - 1]
    if title not in gold:
        return None
    meta = {"source": item.metadata.get("source", item.source), "derived_from": item.id,
            "gold_passages": {title: gold[title]}, "s_wiki_title": title}
    return Item(f"{item.id}#last", question, list(item.golds), item.source, meta)


def with_single_hops(items: list[Item]) -> list[Item]:
    """`items`, each multi-hop one followed by its last hop as a single-hop question where it has one."""
    out: list[Item] = []
    for item in items:
        out.append(item)
        single = last_hop_item(item)
        if single is not None:
            out.append(single)
    return out
