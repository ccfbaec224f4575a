"""Single-hop questions from multi-hop decompositions: derived, then taught from one read (real rg)."""

from __future__ import annotations

import copy

from grepseek_lib.coldstart.accept import process_question
from grepseek_lib.coldstart.derive import last_hop_item, with_single_hops
from tests.test_coldstart import HOTPOT_BRIDGE, IDS, MUSIQUE, _item, _roles, corpus, tool  # noqa: F401


def test_the_last_hop_becomes_a_question_with_the_bridge_written_in():
    single = last_hop_item(_item(MUSIQUE))
    assert single is not None and single.id == "2hop__1_2#last"
    assert single.question == "In which state did Hank Snow die?" and single.golds == ["Tennessee"]
    assert single.metadata["gold_passages"] == {"Hank Snow": IDS["Hank Snow"]}
    assert single.metadata["derived_from"] == "2hop__1_2"
    items = with_single_hops([_item(MUSIQUE), _item(HOTPOT_BRIDGE)])
    assert [i.id for i in items] == ["2hop__1_2", "2hop__1_2#last", "hp1"]  # hotpot has no decomposition


def test_no_question_where_the_last_hop_is_not_one():
    for change in ({"question": "Hank Snow >> place of death"}, {"question": "In which state did #3 die?"},
                   {"question": "In which state did he die?"}):
        row = copy.deepcopy(MUSIQUE)
        row["metadata"]["question_decomposition"][1].update(change)
        assert last_hop_item(_item(row)) is None, change
    row = copy.deepcopy(MUSIQUE)
    del row["metadata"]["gold_passages"]["Hank Snow"]
    assert last_hop_item(_item(row)) is None
    row = copy.deepcopy(MUSIQUE)
    row["metadata"]["question_decomposition"] = row["metadata"]["question_decomposition"][1:]
    assert last_hop_item(_item(row)) is None


def test_a_derived_question_is_answered_after_one_read(corpus, tool):  # noqa: F811
    tutor, planner = _roles(corpus)
    outcome = process_question(last_hop_item(_item(MUSIQUE)), tutor, planner, tool, probe_rate=0.0,
                               fill_budget_rate=0.0, detour_rate=0.0)
    assert outcome.accepted, (outcome.stage, outcome.reason)
    calls = [t.command for t in outcome.turns if t.command]
    assert len(calls) == 1 and "Hank Snow" in calls[0] and outcome.answer == "Tennessee"
