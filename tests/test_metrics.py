"""EM / F1 / aggregation against hand-computed values."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from grepseek_lib.metrics import aggregate, exact_match, f1, normalize_answer


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  An  apple,\tA pear ", "apple pear"),
        ("Theatre of the Absurd", "theatre of absurd"),  # "the" inside a word stays
        ("U.S.A.", "usa"),
        ("Ångström", "ångström"),  # non-ASCII letters are kept, lower-cased
        ("a an the", ""),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_exact_match_best_over_golds() -> None:
    assert exact_match("the Beatles", ["Rolling Stones", "Beatles"]) == 1.0
    assert exact_match("Beatles.", "The Beatles") == 1.0
    assert exact_match("Beatle", ["Beatles"]) == 0.0
    assert exact_match("", ["", "x"]) == 0.0  # empty prediction scores 0
    assert exact_match("the", ["a"]) == 0.0  # normalises to empty
    assert exact_match("x", []) == 0.0


def test_f1_hand_computed() -> None:
    # pred "cat sat on mat" vs gold "the cat sat": common {cat, sat} = 2; P = 2/4, R = 2/2, F1 = 2/3.
    assert f1("cat sat on mat", ["the cat sat"]) == pytest.approx(2 / 3)
    # best over golds: vs "mat" P = 1/4, R = 1 -> 0.4; vs "on the mat" P = 2/4, R = 1 -> 2/3.
    assert f1("cat sat on mat", ["mat", "on the mat"]) == pytest.approx(2 / 3)
    # repeated tokens count as a multiset
    assert f1("x x y", ["x y y"]) == pytest.approx(2 / 3)  # common {x:1, y:1}: P = R = 2/3
    assert f1("Paris", "paris") == 1.0
    assert f1("London", ["Paris"]) == 0.0
    assert f1("", ["Paris"]) == 0.0
    assert f1(None, ["Paris"]) == 0.0
    assert f1("the", ["the"]) == 0.0  # both normalise to nothing: no tokens, no credit


def test_aggregate_micro_and_macro() -> None:
    df = pd.DataFrame(
        {
            "benchmark": ["nq", "nq", "nq", "bamboogle"],
            "em": [1.0, 0.0, 0.0, 1.0],
            "f1": [1.0, 0.5, 0.0, 1.0],
        }
    )
    table = aggregate(df)
    assert list(table.index) == ["nq", "bamboogle", "micro", "macro"]
    assert table.loc["nq", "n"] == 3 and table.loc["bamboogle", "n"] == 1
    assert table.loc["nq", "em"] == pytest.approx(1 / 3)
    assert table.loc["nq", "f1"] == pytest.approx(0.5)
    # micro: over the 4 questions; macro: mean of the two benchmark means.
    assert table.loc["micro", "em"] == pytest.approx(2 / 4)
    assert table.loc["micro", "f1"] == pytest.approx(2.5 / 4)
    assert table.loc["macro", "em"] == pytest.approx((1 / 3 + 1) / 2)
    assert table.loc["macro", "f1"] == pytest.approx((0.5 + 1) / 2)
    assert table.loc["micro", "n"] == 4


def test_aggregate_other_grouping_and_errors() -> None:
    df = pd.DataFrame({"model": ["a", "b"], "f1": [0.2, 0.6]})
    table = aggregate(df, by="model", metrics=("f1",))
    assert table.loc["macro", "f1"] == pytest.approx(0.4)
    assert table.index.name == "model"
    assert aggregate(df.iloc[:0], by="model", metrics=("f1",)).empty
    with pytest.raises(KeyError, match="em"):
        aggregate(df, by="model")
    assert not math.isnan(table.loc["micro", "f1"])
