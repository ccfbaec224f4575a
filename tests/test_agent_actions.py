"""The action parser and the format gate: the rules cold start, the reward and evaluation share."""

from __future__ import annotations

import json

import pytest

from grepseek_lib.agent.actions import (
    first_answer,
    format_gate,
    parse_action,
    render_tool_call,
    render_turn,
)

CALL = '<tool_call>{"name": "shell", "arguments": {"command": "rg -F -c \'Paris\' corpus.jsonl"}}</tool_call>'


def test_canonical_tool_call():
    action = parse_action(f"<think>count first</think>\n{CALL}")
    assert action.kind == "tool"
    assert action.command == "rg -F -c 'Paris' corpus.jsonl"
    assert action.think == "count first"
    assert action.error is None


def test_canonical_answer():
    action = parse_action("<think>found it</think>\n<answer> Paris </answer>")
    assert (action.kind, action.answer, action.think) == ("answer", "Paris", "found it")


@pytest.mark.parametrize("text", [
    f"   \n\n<think>\n  x \n</think>\n\n\n{CALL}\n\n  ",  # white space everywhere
    f"```xml\n<think>x</think>\n{CALL}\n```",  # fenced
    f"<think>x</think>\n```json\n{CALL}\n```",
    f"<think>x</think>{CALL}",  # no newline
    f"```<think>x</think>{CALL}```",  # inline fences
])
def test_tolerated_noise(text):
    action = parse_action(text)
    assert action.kind == "tool" and action.command == "rg -F -c 'Paris' corpus.jsonl"
    assert action.think == "x"


def test_backticks_inside_a_command_are_kept():
    action = parse_action('<think>x</think>```\n<tool_call>{"name": "shell", "arguments": '
                          '{"command": "rg -F \'```\' corpus.jsonl"}}</tool_call>\n```')
    assert action.kind == "tool" and action.command == "rg -F '```' corpus.jsonl"


def test_missing_think_block_is_tolerated():
    action = parse_action(CALL)
    assert action.kind == "tool" and action.think == ""
    action = parse_action("I know this.\n<answer>Paris</answer>")
    assert action.kind == "answer" and action.think == "I know this."


def test_missing_opening_think_tag():
    action = parse_action("reasoning here</think>\n<answer>Rome</answer>")
    assert (action.kind, action.answer, action.think) == ("answer", "Rome", "reasoning here")


def test_missing_closing_tag_after_stop_string():
    action = parse_action('<think>a</think><tool_call>{"name": "shell", "arguments": {"command": "ls"}}')
    assert action.kind == "tool" and action.command == "ls"
    assert action.text.endswith("</tool_call>")
    action = parse_action("<think>a</think><answer>Rome")
    assert action.kind == "answer" and action.answer == "Rome" and action.text.endswith("</answer>")


@pytest.mark.parametrize("body", [
    "{'name': 'shell', 'arguments': {'command': 'ls'}}",  # single quotes
    '{"name": "shell", "arguments": {"command": "ls",},}',  # trailing commas
    '{"name": "shell", "arguments": "{\\"command\\": \\"ls\\"}"}',  # OpenAI wire form
])
def test_accepted_json_variants(body):
    action = parse_action(f"<think>t</think><tool_call>{body}</tool_call>")
    assert action.kind == "tool" and action.command == "ls", action.error


@pytest.mark.parametrize("body, reason", [
    ('{"name": "python", "arguments": {"command": "ls"}}', "shell"),
    ('{"name": "shell", "arguments": {"command": ""}}', "command"),
    ('{"name": "shell", "arguments": {"command": 3}}', "command"),
    ('{"name": "shell", "arguments": {"cmd": "ls"}}', "command"),
    ('{"name": "shell"}', "arguments"),
    ('["shell", "ls"]', "object"),
    ("rg -F Paris corpus.jsonl", "JSON"),
    ('{"name": "shell", "arguments": {"command": "ls"}', "JSON"),  # a brace short
    ("{__import__('os').system('touch /tmp/pwned')}", "JSON"),  # never evaluated
    ("{" * 5000, "JSON"),  # deep nesting does not crash the parser
])
def test_invalid_tool_calls(body, reason):
    action = parse_action(f"<think>t</think><tool_call>{body}</tool_call>")
    assert action.kind == "invalid"
    assert reason in action.error


@pytest.mark.parametrize("text", ["", "   ", "Paris", "<think>only thinking</think>", "<answer>   </answer>",
                                  "<think>unclosed", None])
def test_no_action_is_invalid(text):
    action = parse_action(text)
    assert action.kind == "invalid" and action.error


def test_first_action_decides_and_text_is_cut_after_it():
    text = f"<think>t</think>\n{CALL}\n<answer>Paris</answer>"
    action = parse_action(text)
    assert action.kind == "tool"
    assert action.text == f"<think>t</think>\n{CALL}"
    action = parse_action("<think>t</think><answer>Paris</answer> more <answer>Rome</answer>")
    assert action.answer == "Paris"  # the FIRST answer block
    assert action.text == "<think>t</think><answer>Paris</answer>"


def test_tags_inside_think_do_not_count_as_actions():
    action = parse_action("<think>I could <answer>guess</answer> but no</think>\n" + CALL)
    assert action.kind == "tool"


def test_think_after_action_is_not_reasoning():
    action = parse_action("<answer>Paris</answer><think>late</think>")
    assert action.kind == "answer" and action.answer == "Paris" and action.think == ""


def test_render_round_trip():
    command = "rg -F -i 'caf\\u00e9 \"x\"' corpus.jsonl | head -n 3"
    turn = render_turn("look it up", command=command)
    assert turn.startswith("<think>look it up</think>\n<tool_call>")
    assert parse_action(turn).command == command
    assert render_tool_call(command) in turn
    call = json.loads(render_tool_call(command)[len("<tool_call>"):-len("</tool_call>")])
    assert call == {"name": "shell", "arguments": {"command": command}}
    assert parse_action(render_turn("done", answer=" Paris ")).answer == "Paris"
    with pytest.raises(ValueError):
        render_turn("x")
    with pytest.raises(ValueError):
        render_turn("x", command="ls", answer="y")


def _episode(*commands: str, answer: str = "Paris") -> list[str]:
    return [render_turn(f"step {i}", command=c) for i, c in enumerate(commands)] + [render_turn("so", answer=answer)]


def test_gate_accepts_canonical_episodes():
    assert format_gate(_episode()) == (True, "ok")
    assert format_gate(_episode("rg -c -F Paris corpus.jsonl", "rg -F Paris corpus.jsonl | head -n 3"))[0]


@pytest.mark.parametrize("turns, reason", [
    ([], "no assistant turn"),
    (_episode("ls")[:-1], "no answer"),
    (["<think>a</think><answer>Paris</answer>", "<think>b</think><answer>Rome</answer>"], "answer before"),
    (["<think>a</think><answer>Paris</answer> thanks!"], "after </answer>"),
    (["<answer>Paris</answer>"], "exactly one <think>"),
    (["<answer>Paris</answer><think>a</think>"], "wrong order"),
    (["<think>a<think>b</think><answer>P</answer>"], "unbalanced <think>"),
    (["<think>a</think><answer>Paris"], "unbalanced <answer>"),
    (["<think>a</think><answer> </answer>"], "empty answer"),
    ([f"<think>a</think>{CALL}{CALL}", "<think>b</think><answer>P</answer>"], "exactly one action"),
    ([f"<think>a</think>{CALL}<answer>P</answer>"], "exactly one action"),
    (["<think>a</think><tool_call>{'name': 'shell', 'arguments': {'command': 'ls'}}</tool_call>",
      "<think>b</think><answer>P</answer>"], "strict JSON"),
    (['<think>a</think><tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>',
      "<think>b</think><answer>P</answer>"], "shell"),
    (['<think>a</think><tool_call>{"name": "shell", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>',
      "<think>b</think><answer>P</answer>"], "arguments"),
    ([f"<think>a</think>{CALL}<tool_response>fake</tool_response>", "<think>b</think><answer>P</answer>"],
     "tool_response"),
    (["```\n<think>a</think><answer>P</answer>\n```"], "wrong order"),
    (["<think>a</think>\n<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}</tool_call>x",
      "<think>b</think><answer>P</answer>"], "wrong order"),
])
def test_gate_rejects(turns, reason):
    ok, why = format_gate(turns)
    assert not ok
    assert reason in why


def test_gate_tool_call_budget():
    turns = _episode(*["ls"] * 6)
    assert format_gate(turns)[0]
    ok, why = format_gate(turns, max_tool_calls=5)
    assert not ok and "more than 5" in why
    assert format_gate(_episode(*["ls"] * 5), max_tool_calls=5)[0]


def test_first_answer_over_turns():
    assert first_answer(_episode("ls", answer="Paris")) == "Paris"
    assert first_answer(["<think>a</think><answer>X</answer>", "<answer>Y</answer>"]) == "X"
    assert first_answer(_episode("ls")[:-1]) is None
