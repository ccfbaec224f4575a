"""The system prompt's worked example and the format-error message: both must show the exact protocol."""

from __future__ import annotations

import json
import re

from grepseek_lib import config
from grepseek_lib.agent.actions import format_gate, parse_action
from grepseek_lib.agent.prompt import format_error_message, initial_messages, system_prompt
from grepseek_lib.shell.policy import parse_command

_TURN = re.compile(r"^<think>.*?</think>\n<(?:tool_call|answer)>.*?</(?:tool_call|answer)>$", re.M)


def _example(text: str) -> str:
    return text[text.index("EXAMPLE EPISODE"):]


def test_worked_example_passes_the_strict_format_gate_as_a_multi_turn_search():
    example = _example(system_prompt(28_960))
    turns = [m.group(0) for m in _TURN.finditer(example)]
    assert len(turns) == 3  # two searches, then the answer
    assert format_gate(turns) == (True, "ok")
    actions = [parse_action(t) for t in turns]
    assert [a.kind for a in actions] == ["tool", "tool", "answer"]
    for action in actions[:2]:  # every shown command is one the shell accepts
        parse_command(action.command)
        assert config.LOGICAL_CORPUS_NAME in action.command
    assert "| head -n 3" in actions[1].command


def test_worked_example_tool_replies_are_real_payloads_of_their_commands():
    example = _example(system_prompt(10))
    replies = [json.loads(r) for r in re.findall(r"<tool_response>(.*?)</tool_response>", example)]
    commands = [parse_action(t.group(0)).command for t in _TURN.finditer(example)][:2]
    assert [r["command"] for r in replies] == commands
    assert all(set(r) == {"command", "stdout", "stderr", "exit_code", "timed_out", "truncated"} for r in replies)
    passage = json.loads(replies[1]["stdout"])  # the shown line is a corpus line: {"id", "contents"}
    assert set(passage) == {"id", "contents"} and passage["contents"].startswith('"Grenoble"\n')


def test_example_question_is_not_a_benchmark_question(miniwiki):
    files = sorted((miniwiki / "benchmarks").glob("*.jsonl"))
    assert len(files) >= len(config.BENCHMARKS)
    for path in files:
        assert "Grenoble" not in path.read_text(encoding="utf-8")


def test_format_error_message_shows_a_runnable_call_not_a_placeholder():
    message = format_error_message("no <tool_call> or <answer> block after the reasoning")
    assert message.startswith("format error: no <tool_call>")
    assert '"..."' not in message
    call = re.search(r"<tool_call>\{.*?</tool_call>", message).group(0)
    action = parse_action("<think>x</think>" + call)
    assert action.kind == "tool"
    parse_command(action.command)


def test_prompt_stays_short_and_is_the_start_of_every_episode():
    text = system_prompt(28_960)
    assert len(text) < 3000  # about 830 SmolLM2 tokens: it is part of every training example
    assert initial_messages("Who?", 28_960)[0]["content"] == text


def test_tool_budget_notes_the_last_allowed_call_only():
    from grepseek_lib.agent.prompt import ToolBudget, budget_message

    budget = ToolBudget(2)
    assert not budget.spent and budget.observe("a") == "a" and not budget.spent
    assert budget.observe("b") == "b\n\n" + budget_message(2) and budget.spent
    assert ToolBudget(0).spent
