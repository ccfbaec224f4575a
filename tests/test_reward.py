"""Reward = token-F1 (first <answer>, best over golds) x strict format gate, on hand-made episodes."""

from __future__ import annotations

import json

import pytest

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.train.reward import (
    TrlShellReward,
    assistant_turns,
    reward,
    reward_parts,
    split_decoded_turns,
)

CALL = render_turn("Find the passage about Moses.", command="rg -F 'Moses' corpus.jsonl | head -n 3")
ANSWER = render_turn("The passage names his brother.", answer="Aaron")
GOLDS = ["Aaron", "Aharon"]


def test_correct_episode_gets_full_f1():
    parts = reward_parts([CALL, ANSWER], GOLDS)
    assert parts["format_ok"] and parts["answered"]
    assert parts["n_tool_calls"] == 1
    assert parts["f1"] == pytest.approx(1.0)
    assert reward([CALL, ANSWER], GOLDS) == pytest.approx(1.0)


def test_partial_answer_gets_partial_f1():
    partial = render_turn("Guess.", answer="Aaron the priest")
    # "aaron priest" after SQuAD normalisation: precision 1/2, recall 1
    assert reward([partial], GOLDS) == pytest.approx(2 * 0.5 * 1 / (0.5 + 1))


def test_wrong_order_is_zero():
    swapped = "<answer>Aaron</answer>\n<think>done</think>"
    parts = reward_parts([CALL, swapped], GOLDS)
    assert not parts["format_ok"] and parts["reward"] == 0.0
    assert parts["f1"] == pytest.approx(1.0)  # the answer was right: only the gate zeroes it


def test_text_after_answer_is_zero():
    trailing = ANSWER + "\nI hope this helps!"
    parts = reward_parts([CALL, trailing], GOLDS)
    assert parts["reason"].endswith("text after </answer>")
    assert parts["reward"] == 0.0


def test_invalid_json_tool_call_is_zero():
    bad = "<think>search</think>\n<tool_call>{'name': 'shell', 'arguments': {'command': 'rg x corpus.jsonl'}}</tool_call>"
    assert reward([bad, ANSWER], GOLDS) == 0.0
    broken = '<think>search</think>\n<tool_call>{"name": "shell", "arguments": </tool_call>'
    assert reward([broken, ANSWER], GOLDS) == 0.0


def test_no_answer_is_zero():
    parts = reward_parts([CALL], GOLDS)
    assert not parts["answered"] and parts["reward"] == 0.0


def test_unbalanced_tags_are_zero():
    assert reward(["<think>x\n<answer>Aaron</answer>"], GOLDS) == 0.0


def test_first_answer_block_decides():
    two = "<think>x</think>\n<answer>Moses</answer><answer>Aaron</answer>"
    parts = reward_parts([two], GOLDS)
    assert parts["answer"] == "Moses" and parts["reward"] == 0.0


def test_too_many_tool_calls_is_zero():
    assert reward([CALL] * 6 + [ANSWER], GOLDS) == 0.0
    assert reward([CALL] * 5 + [ANSWER], GOLDS) == pytest.approx(1.0)


def test_messages_and_strings_are_accepted():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "Query: q"},
                {"role": "assistant", "content": CALL}, {"role": "tool", "content": "{}"},
                {"role": "assistant", "content": ANSWER}]
    assert assistant_turns(messages) == [CALL, ANSWER]
    assert reward(messages, "Aaron") == pytest.approx(1.0)


def test_split_decoded_turns_follows_the_template():
    obs = json.dumps({"stdout": "<|im_start|>assistant x\nline", "exit_code": 0})  # newline is escaped
    text = (f"{CALL}<|im_end|>\n<|im_start|>user\n<tool_response>\n{obs}\n</tool_response><|im_end|>\n"
            f"<|im_start|>assistant\n{ANSWER}<|im_end|>")
    assert split_decoded_turns(text) == [CALL, ANSWER]
    assert split_decoded_turns(CALL + "<tool_call>cut by length") == [CALL + "<tool_call>cut by length"]


class _FakeTokenizer:
    """Ids are character codes; enough to drive the adapter without a model."""

    def decode(self, ids, skip_special_tokens=False):
        return "".join(map(chr, ids))


def test_trl_adapter_scores_and_logs(tmp_path):
    text = (f"{CALL}<|im_end|>\n<|im_start|>user\n<tool_response>\n{{}}\n</tool_response><|im_end|>\n"
            f"<|im_start|>assistant\n{ANSWER}<|im_end|>")
    logged = {}
    adapter = TrlShellReward(_FakeTokenizer(), log_path=tmp_path / "parts.jsonl")
    rewards = adapter(prompts=[[], []], completions=[[], []],
                      completion_ids=[[ord(c) for c in text], [ord(c) for c in CALL]],
                      golds=[GOLDS, GOLDS], id=["q1", "q1"], log_metric=lambda k, v: logged.__setitem__(k, v))
    assert rewards == [pytest.approx(1.0), 0.0]
    assert logged["reward_parts/format_pass_rate"] == 0.5
    record = json.loads((tmp_path / "parts.jsonl").read_text())
    assert record["answer_rate"] == 0.5 and record["tool_calls"] == 1.0 and record["rewards"] == {"q1": [1.0, 0.0]}


def test_a_repeated_command_costs_the_repeat_penalty_only_when_set():
    other = render_turn("Widen the search.", command="rg -F -i 'moses' corpus.jsonl | head -n 3")
    repeated, changed = [CALL, CALL, ANSWER], [CALL, other, ANSWER]
    assert reward(repeated, GOLDS) == pytest.approx(1.0)  # off by default: the paper's reward
    assert reward(repeated, GOLDS, repeat_penalty=0.25) == pytest.approx(0.75)
    assert reward(changed, GOLDS, repeat_penalty=0.25) == pytest.approx(1.0)
    wrong = render_turn("Guess.", answer="Miriam")
    assert reward([CALL, CALL, wrong], GOLDS, repeat_penalty=0.25) == pytest.approx(-0.25)  # below a clean miss
    parts = reward_parts(repeated, GOLDS, repeat_penalty=0.25)
    assert parts["repeats"] and not reward_parts(changed, GOLDS)["repeats"]


def test_the_trl_adapter_applies_the_repeat_penalty_and_logs_the_repeat_rate(tmp_path):
    episode = [CALL, CALL, ANSWER]
    text = "<|im_end|>\n<|im_start|>assistant\n".join(episode)
    scorer = TrlShellReward(_FakeTokenizer(), log_path=tmp_path / "parts.jsonl", repeat_penalty=0.5)
    logged: dict[str, float] = {}
    rewards = scorer([[{"role": "user", "content": "Query: q"}]], [None], [[ord(c) for c in text]], [GOLDS],
                     log_metric=logged.__setitem__)
    assert rewards == [pytest.approx(0.5)]
    assert logged["reward_parts/repeat_rate"] == 1.0


def test_the_evidence_bonus_pays_a_well_formed_search_that_printed_a_gold_answer():
    wrong = render_turn("Guess.", answer="Miriam")
    found, empty = ['{"id": "1", "contents": "Moses... his brother Aaron"}'], [""]
    assert reward([CALL, wrong], GOLDS, stdouts=found) == 0.0  # off by default: the paper's reward
    assert reward([CALL, wrong], GOLDS, stdouts=found, evidence_bonus=0.25) == pytest.approx(0.25)
    assert reward([CALL, wrong], GOLDS, stdouts=empty, evidence_bonus=0.25) == 0.0
    assert reward([CALL, ANSWER], GOLDS, stdouts=found, evidence_bonus=0.25) == pytest.approx(1.25)
    malformed = "<answer>Aaron</answer>\n<think>done</think>"
    assert reward([CALL, malformed], GOLDS, stdouts=found, evidence_bonus=0.25) == 0.0  # the gate holds
    with pytest.raises(ValueError, match="stdouts"):
        reward([CALL, wrong], GOLDS, evidence_bonus=0.25)


def test_the_trl_adapter_reads_the_evidence_from_the_tool_responses():
    wrong = render_turn("Guess.", answer="Miriam")
    payload = json.dumps({"stdout": "Moses had a brother, Aaron.\n", "exit_code": 0})
    text = f"{CALL}<|im_end|>\n<|im_start|>user\n<tool_response>\n{payload}\n</tool_response><|im_end|>\n" \
           f"<|im_start|>assistant\n{wrong}"
    scorer = TrlShellReward(_FakeTokenizer(), evidence_bonus=0.5)
    rewards = scorer([[{"role": "user", "content": "Query: q"}]], [None], [[ord(c) for c in text]], [GOLDS])
    assert rewards == [pytest.approx(0.5)]
