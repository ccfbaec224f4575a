"""Answer scoring: SQuAD-normalised exact match and token F1, and micro / macro aggregation.

Written once and used by evaluation, the reward and the data builder's answer-coverage check, so a
"correct" answer means the same thing everywhere.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")

#: Names of the two summary rows that `aggregate` appends.
MICRO, MACRO = "micro", "macro"


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop ASCII punctuation, drop a/an/the, fold white space."""
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golds: str | Iterable[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else [g for g in golds if isinstance(g, str)]


def exact_match(prediction: str | None, golds: str | Iterable[str]) -> float:
    """1.0 when the normalised prediction equals some normalised gold answer; an empty prediction is 0."""
    pred = normalize_answer(prediction or "")
    if not pred:
        return 0.0
    return float(any(pred == normalize_answer(g) for g in _golds(golds)))


def _token_f1(pred_tokens: Sequence[str], gold_tokens: Sequence[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str | None, golds: str | Iterable[str]) -> float:
    """Best token-overlap F1 over the gold answers; an empty prediction is 0."""
    pred_tokens = normalize_answer(prediction or "").split()
    if not pred_tokens:
        return 0.0
    scores = [_token_f1(pred_tokens, normalize_answer(g).split()) for g in _golds(golds)]
    return max(scores, default=0.0)


def aggregate(df: pd.DataFrame, by: str = "benchmark", metrics: Sequence[str] = ("em", "f1")) -> pd.DataFrame:
    """Mean of each metric per group, then a `micro` row (over all questions) and a `macro` row
    (mean of the group means, so a 3,000-question benchmark weighs as much as a 125-question one).

    `df` holds one row per question with the column `by` and the metric columns. The result is indexed
    by group (first-appearance order) with a column `n` (questions; for micro / macro, all of them).
    """
    import pandas as pd  # deferred: scoring one answer (the reward, the data build) needs no pandas

    missing = [c for c in (by, *metrics) if c not in df.columns]
    if missing:
        raise KeyError(f"aggregate: missing column(s) {missing}; have {list(df.columns)}")
    columns = ["n", *metrics]
    if df.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name=by))
    grouped = df.groupby(by, sort=False)
    table = grouped[list(metrics)].mean()
    table.insert(0, "n", grouped.size())
    micro = pd.DataFrame([[len(df), *df[list(metrics)].mean()]], columns=columns, index=[MICRO])
    macro = pd.DataFrame([[len(df), *table[list(metrics)].mean()]], columns=columns, index=[MACRO])
    result = pd.concat([table, micro, macro])
    result.index.name = by
    result["n"] = result["n"].astype(int)
    return result
