"""What holds the agent back: every episode put down to one cause; evidence recall and standard errors in the
comparison tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from grepseek_lib.eval import compare, losses, plots


def _record(qid: str, **fields) -> dict:
    base = {"benchmark": "nq", "id": qid, "em": 0.0, "f1": 0.0, "stop_reason": "answer",
            "evidence_found": False, "repeated_command": False}
    return {**base, **fields}


AGENT = [
    _record("1", em=1.0, f1=1.0, evidence_found=True, repeated_command=True),  # right answers win over habits
    _record("2", stop_reason="format_errors", repeated_command=True),
    _record("3", repeated_command=True, stop_reason="budget"),
    _record("4", stop_reason="budget"),
    _record("5", evidence_found=True, f1=0.4),
    _record("6", benchmark="popqa"),
    _record("7", benchmark="popqa", evidence_found=float("nan")),  # a record from before the key existed
]


def test_each_episode_has_exactly_one_cause_in_priority_order():
    causes = [losses.loss_cause(r) for r in AGENT]
    assert causes == ["correct", "format_errors", "repeated_command", "budget", "read_but_wrong", "never_found",
                      "never_found"]


def test_loss_table_shares_sum_to_one_and_skip_systems_without_episodes():
    frames = {"bm25": compare.records_frame([{"benchmark": "nq", "id": "1", "em": 0.0, "f1": 0.0}], "bm25"),
              "sft": compare.records_frame(AGENT, "sft")}
    table = losses.loss_table(frames)
    assert table["system"].tolist() == ["sft"] and table.loc[0, "n"] == 7
    assert table.loc[0, "never_found"] == pytest.approx(2 / 7)
    assert table[list(losses.CAUSES)].sum(axis=1).tolist() == pytest.approx([1.0])
    per = losses.loss_table(frames, by="benchmark").set_index("benchmark")
    assert per.loc["popqa", "n"] == 2 and per.loc["popqa", "never_found"] == 1.0
    fig = plots.stacked_shares(table, losses.CAUSES, title="t")
    assert fig.axes and plots.stacked_shares(table.iloc[0:0], losses.CAUSES, title="t").axes


def test_comparison_table_has_the_standard_error_of_f1():
    rows = [{"benchmark": "nq", "id": str(i), "em": 0.0, "f1": f} for i, f in enumerate((0.0, 1.0, 0.5, 0.5))]
    rows += [{"benchmark": "popqa", "id": "p", "em": 0.0, "f1": 1.0}]
    table = compare.comparison_table({"sft": compare.records_frame(rows, "sft")}).set_index("benchmark")
    nq_se = pd.Series([0.0, 1.0, 0.5, 0.5]).std(ddof=1) / 2
    assert table.loc["nq", "f1_se"] == pytest.approx(nq_se)
    assert math.isnan(table.loc["popqa", "f1_se"])  # one question: no spread to measure
    assert table.loc["micro", "f1_se"] == pytest.approx(pd.Series([0.0, 1.0, 0.5, 0.5, 1.0]).std(ddof=1) / 5 ** 0.5)


def test_search_table_reports_evidence_recall_for_agents_and_bm25_alike():
    bm25 = [{"benchmark": "nq", "id": "1", "em": 0.0, "f1": 0.0, "evidence_found": True},
            {"benchmark": "nq", "id": "2", "em": 0.0, "f1": 0.0, "evidence_found": False}]
    agent = [_record("1", evidence_found=True, repeated_command=True), _record("2")]
    frames = {"bm25": compare.records_frame(bm25, "bm25"), "sft": compare.records_frame(agent, "sft")}
    table = compare.search_table(frames).set_index(["system", "benchmark"])
    assert table.loc[("bm25", "micro"), "evidence_found"] == 0.5
    assert math.isnan(table.loc[("bm25", "micro"), "repeated_command"])
    assert table.loc[("sft", "nq"), "repeated_command"] == 0.5
    assert math.isnan(table.loc[("sft", "micro"), "format_pass"])  # records from before the column: NaN, not KeyError


def test_top_cause_is_the_biggest_loss_not_the_correct_share():
    table = losses.loss_table({"sft": compare.records_frame(AGENT + [_record("8", em=1.0)] * 5, "sft")})
    assert table.loc[0, "correct"] > table.loc[0, "never_found"] and losses.top_cause(table, "sft") == "never_found"


def test_the_shape_table_lists_each_systems_most_common_moves():
    from grepseek_lib.agent.actions import parse_action, render_turn
    from grepseek_lib.agent.trajectory import Trajectory, Turn

    def episode(*stdouts: str) -> Trajectory:
        turns = [Turn(text="", action=parse_action(render_turn("Count.", command="rg -F 'x' corpus.jsonl | wc -l")),
                      observation={"stdout": out}) for out in stdouts]
        return Trajectory(question="q", turns=[*turns, Turn(text="", action=parse_action(render_turn("So.", answer="y")))])

    table = losses.shape_table({"sft": [episode("0\n"), episode("0\n"), episode("3\n")], "grpo": []}, top=1)
    assert table.to_dict("records") == [{"system": "sft", "shape": "C0 A", "episodes": 2, "share": pytest.approx(2 / 3)}]
    assert list(losses.shape_table({}).columns) == ["system", "shape", "episodes", "share"]
