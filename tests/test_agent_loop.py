"""The ReAct loop's mechanics with a scripted policy and the real shell tool over a small corpus."""

from __future__ import annotations

import json

import pytest

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.backends import Generation
from grepseek_lib.agent.evidence import summarize_search, trajectory_report
from grepseek_lib.agent.loop import REDRAW_TEMPERATURE, run_batch, run_episode
from grepseek_lib.agent.prompt import system_prompt
from grepseek_lib.agent.trajectory import STOP_REASONS, load_jsonl, save_jsonl, to_frame
from grepseek_lib.data.formats import corpus_line
from grepseek_lib.errors import UserError
from grepseek_lib.shell.tool import ShellTool, observation_text

PASSAGES = [
    ("1", "Aaron", "Aaron is a prophet, high priest, and the brother of Moses."),
    ("2", "Paris", "Paris is the capital and most populous city of France, on the river Seine."),
    ("3", "Seine", "The Seine is a river in northern France that flows through Paris."),
    ("4", "Mount Everest", "Mount Everest is Earth's highest mountain above sea level."),
]


class ScriptedBackend:
    """Replies from a script per question (the user turn), recording every batch it was asked for.

    Each prompt's token count is its character count, so context limits are exact in tests.
    """

    tokenizer = None

    def __init__(self, scripts: dict[str, list[str]]):
        self.scripts = {q: list(replies) for q, replies in scripts.items()}
        self.batches: list[int] = []
        self.temperatures: list[float] = []
        self.seen: list[list[dict]] = []

    def generate(self, conversations, *, max_new_tokens, temperature, stop=None):
        self.batches.append(len(conversations))
        self.temperatures.append(temperature)
        out = []
        for messages in conversations:
            self.seen.append([dict(m) for m in messages])
            question = messages[1]["content"].removeprefix("Query: ")
            text = self.scripts[question].pop(0)
            prompt = sum(len(m["content"]) for m in messages)
            out.append(Generation(text, prompt, len(text), 0.01))
        return out


@pytest.fixture()
def tool(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(corpus_line(*p) + "\n" for p in PASSAGES), encoding="utf-8")
    return ShellTool(corpus, timeout=10, max_obs_tokens=512)


def call(command: str, think: str = "search") -> str:
    return render_turn(think, command=command)


def answer(text: str, think: str = "found it") -> str:
    return render_turn(think, answer=text)


def test_prompt_names_every_allowed_program_and_the_real_line_count():
    from grepseek_lib.shell.policy import ALLOWED_PROGRAMS

    text = system_prompt(21_015_324)
    assert "21,015,324 lines" in text and "corpus.jsonl" in text
    assert "<tool_call>" in text and "<answer>" in text and "head -n 3" in text
    assert all(f" {p}," in text or f" {p}." in text for p in ALLOWED_PROGRAMS)


def test_multi_turn_search_then_answer(tool):
    q = "Who was the brother of Moses?"
    backend = ScriptedBackend({q: [call("rg -c -F Moses corpus.jsonl"),
                                   call("rg -F Moses corpus.jsonl | head -n 3"), answer("Aaron")]})
    traj = run_episode({"id": "q7", "question": q, "golden_answers": ["Aaron"]}, backend, tool)
    assert (traj.id, traj.golds, traj.answer, traj.stop_reason) == ("q7", ["Aaron"], "Aaron", "answer")
    assert traj.tool_calls == 2 and len(traj.turns) == 3
    first, second, last = traj.turns
    assert first.observation["stdout"] == "1\n" and first.observation["exit_code"] == 0
    assert "brother of Moses" in second.observation["stdout"]
    assert first.tool_s > 0 and last.observation is None
    roles = [m["role"] for m in traj.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert traj.messages[0]["content"] == system_prompt(len(PASSAGES), max_obs_tokens=tool.max_obs_tokens)
    assert traj.messages[1]["content"] == f"Query: {q}"
    assert traj.messages[3]["content"] == observation_text(first.observation)
    # the model saw each observation before its next turn
    assert backend.seen[1][-1] == traj.messages[3]


def test_refused_command_is_an_observation_not_a_crash(tool):
    q = "q"
    backend = ScriptedBackend({q: [call("rm -rf / ; cat corpus.jsonl > x"), answer("none")]})
    traj = run_episode(q, backend, tool)
    assert traj.stop_reason == "answer" and traj.tool_calls == 1
    assert traj.turns[0].observation["exit_code"] == 126


def test_a_command_run_before_is_refused_with_a_reason_and_costs_a_call(tool):
    q, other = "Which river flows through Paris?", "Where is Mount Everest?"
    search = "rg -F 'Seine river' corpus.jsonl | head -n 3"
    backend = ScriptedBackend({q: [call(search), call(search + " "), call("rg -F -i 'Seine' corpus.jsonl"),
                                   answer("Seine")],
                               other: [call("rg -c -F Everest corpus.jsonl"), call(search), answer("Nepal")]})
    traj, elsewhere = run_batch([q, other], backend, tool)
    first, again, wider = (t.observation for t in traj.turns[:3])
    assert first["stdout"] == "" and first["exit_code"] == 0  # head exits 0 on no input
    assert again["exit_code"] == 126 and again["stdout"] == "" and again["command"] == search
    assert again["stderr"].startswith("refused: this exact command was already tool call 1")
    assert "-i" in again["stderr"] and traj.turns[1].tool_s == 0.0
    assert "Seine" in wider["stdout"] and traj.tool_calls == 3
    assert elsewhere.turns[1].observation["stderr"] == ""  # another episode's history does not count


def test_a_proposed_repeat_is_drawn_again_and_the_rejected_commands_are_kept(tool, tmp_path):
    q, other = "Which river flows through Paris?", "Where is Mount Everest?"
    search, wider = "rg -F 'Seine river' corpus.jsonl | head -n 3", "rg -F -i 'seine' corpus.jsonl | head -n 1"
    backend = ScriptedBackend({q: [call(search), call(search), call(search), call(wider), answer("Seine")],
                               other: [call("rg -c -F Everest corpus.jsonl"), answer("Nepal")]})
    traj, elsewhere = run_batch([q, other], backend, tool, redraws=3)
    assert [t.action.command for t in traj.turns[:2]] == [search, wider]
    assert traj.turns[1].redrawn == [search, search] and traj.turns[0].redrawn == []
    assert "Seine" in traj.turns[1].observation["stdout"] and traj.tool_calls == 2
    assert backend.batches == [2, 2, 1, 1, 1] and backend.temperatures[2:4] == [REDRAW_TEMPERATURE] * 2
    assert elsewhere.answer == "Nepal" and all(not t.redrawn for t in elsewhere.turns)
    report = trajectory_report(traj)
    assert report["repeated_command"] is False and report["proposed_repeat"] is True
    assert summarize_search([report, trajectory_report(elsewhere)])["proposed_repeat_rate"] == 0.5
    save_jsonl([traj], tmp_path / "t.jsonl")
    assert load_jsonl(tmp_path / "t.jsonl")[0].turns[1].redrawn == [search, search]


def test_a_repeat_no_draw_replaces_is_refused_and_malformed_or_answer_draws_are_not_taken(tool):
    q = "Which river flows through Paris?"
    search = "rg -F 'Seine river' corpus.jsonl | head -n 3"
    backend = ScriptedBackend({q: [call(search), call(search), "no action here", answer("a sampled guess"),
                                   call(search), answer("Seine")]})
    traj = run_episode(q, backend, tool, redraws=3)
    assert traj.format_errors == 0 and traj.turns[1].redrawn == [search, search]
    assert traj.turns[1].observation["exit_code"] == 126  # kept, and the tool refuses it
    assert trajectory_report(traj)["repeated_command"] is True and traj.answer == "Seine"


def test_without_redraws_a_repeat_costs_no_extra_generation(tool):
    q = "Which river flows through Paris?"
    search = "rg -F 'Seine river' corpus.jsonl | head -n 3"
    backend = ScriptedBackend({q: [call(search), call(search), answer("Seine")]})
    traj = run_episode(q, backend, tool)
    assert backend.batches == [1, 1, 1] and traj.turns[1].redrawn == []
    assert summarize_search([trajectory_report(traj)])["proposed_repeat_rate"] == 1.0


def test_one_malformed_action_gets_a_format_error_observation(tool):
    q = "q"
    backend = ScriptedBackend({q: ["I think it is Paris.", call("rg -c Paris corpus.jsonl"),
                                   "<think>x</think><tool_call>{bad json}</tool_call>", answer("Paris")]})
    traj = run_episode(q, backend, tool)
    assert traj.stop_reason == "answer" and traj.answer == "Paris"
    assert traj.format_errors == 2 and traj.tool_calls == 1  # errors not in a row do not end it
    error_turn = traj.turns[0]
    assert error_turn.action.kind == "invalid" and error_turn.observation is None
    assert error_turn.observation_text.startswith("format error:")
    assert traj.messages[3] == {"role": "tool", "content": error_turn.observation_text}
    assert "JSON" in traj.turns[2].observation_text


def test_two_malformed_actions_in_a_row_end_the_episode(tool):
    q = "q"
    backend = ScriptedBackend({q: ["no tags at all", "<answer></answer>", answer("never reached")]})
    traj = run_episode(q, backend, tool)
    assert traj.stop_reason == "format_errors" and traj.answer is None
    assert len(traj.turns) == 2 and traj.turns[1].observation_text is None
    assert backend.scripts[q] == [answer("never reached")]


def test_budget_after_five_tool_calls(tool):
    q = "q"
    backend = ScriptedBackend({q: [call(f"rg -c -F {w} corpus.jsonl") for w in "abcdef"]})
    traj = run_episode(q, backend, tool, max_tool_calls=5)
    assert traj.stop_reason == "budget" and traj.answer is None
    assert traj.tool_calls == 5 and len(traj.turns) == 6
    assert traj.turns[-1].observation is None  # the sixth call never ran
    from grepseek_lib.agent.prompt import budget_message, budget_noted

    noted = [m for m in traj.messages if budget_noted(m)]
    assert len(noted) == 1 and noted[0]["content"].endswith(budget_message(5))
    assert [m["role"] for m in traj.messages].count("user") == 1  # the note rides in the 5th tool message
    assert backend.seen[-1][-1] == noted[0]  # the model was told before its last turn
    assert traj.turns[4].observation_text == noted[0]["content"]  # and the trajectory records it


def test_answer_after_the_budget_counts(tool):
    q = "q"
    backend = ScriptedBackend({q: [call("ls"), call("wc -l corpus.jsonl"), answer("4")]})
    traj = run_episode(q, backend, tool, max_tool_calls=2)
    assert (traj.stop_reason, traj.answer, traj.tool_calls) == ("answer", "4", 2)


def test_first_answer_block_wins(tool):
    q = "q"
    backend = ScriptedBackend({q: ["<think>t</think><answer>Seine</answer><answer>Loire</answer>"]})
    traj = run_episode(q, backend, tool)
    assert traj.answer == "Seine"
    assert traj.messages[-1]["content"] == "<think>t</think><answer>Seine</answer>"
    assert traj.turns[0].text.endswith("<answer>Loire</answer>")  # the raw text is kept as written


def test_context_limit_ends_the_episode(tool):
    q = "q"
    backend = ScriptedBackend({q: [call("rg -F Paris corpus.jsonl"), answer("Paris")]})
    prompt_chars = len(system_prompt(len(PASSAGES))) + len(f"Query: {q}")
    traj = run_episode(q, backend, tool, max_new_tokens=50, max_context_tokens=prompt_chars + 200)
    assert traj.stop_reason == "context" and traj.tool_calls == 1 and traj.answer is None
    traj = run_episode(q, ScriptedBackend({q: [call("rg -F Paris corpus.jsonl"), answer("Paris")]}), tool,
                       max_new_tokens=50, max_context_tokens=100_000)
    assert traj.stop_reason == "answer"


def test_batch_steps_in_lockstep_and_keeps_order(tool):
    scripts = {"a": [answer("A")],
               "b": [call("rg -c Paris corpus.jsonl"), call("rg -c Seine corpus.jsonl"), answer("B")],
               "c": [call("ls"), answer("C")]}
    backend = ScriptedBackend(scripts)
    trajs = run_batch(["a", "b", "c"], backend, tool)
    assert [t.answer for t in trajs] == ["A", "B", "C"]
    assert [t.id for t in trajs] == ["0", "1", "2"]
    assert backend.batches == [3, 2, 1]  # one generate call per turn, finished episodes drop out
    seen_steps = []
    run_batch(["x"], ScriptedBackend({"x": [answer("X")]}), tool, on_turn=lambda t, turn: seen_steps.append(turn))
    assert len(seen_steps) == 1


def test_trajectories_round_trip_and_frame(tool, tmp_path):
    scripts = {"a": ["junk", call("rg -F -c Everest corpus.jsonl"), answer("Everest")], "b": [answer("B")]}
    trajs = run_batch([{"id": "x1", "question": "a", "golden_answers": ["Everest"]}, "b"],
                      ScriptedBackend(scripts), tool)
    path = tmp_path / "t.jsonl"
    save_jsonl(trajs, path)
    with path.open("a") as handle:
        handle.write('{"question": "half a li')  # a run killed mid-write
    loaded = load_jsonl(path)
    assert [t.to_dict() for t in loaded] == [t.to_dict() for t in trajs]
    assert all(t.stop_reason in STOP_REASONS for t in loaded)
    frame = to_frame(loaded)
    assert list(frame["id"]) == ["x1", "1"] and list(frame["tool_calls"]) == [1, 0]
    assert list(frame["format_errors"]) == [1, 0]
    turns = to_frame(loaded, per="turn")
    assert list(turns["kind"]) == ["invalid", "tool", "answer", "answer"]
    assert turns["exit_code"].iloc[1] == 0
    json.dumps(loaded[0].to_dict())  # plain JSON all the way down


def test_a_file_of_other_rows_is_refused_with_the_line_that_is_not_a_trajectory(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"id": "1", "source": "hotpotqa_train", "messages": []}) + "\n")
    with pytest.raises(UserError, match=r"train\.jsonl:1: not a trajectory line"):
        load_jsonl(path)
    path.write_text(json.dumps({"question": "q", "turns": [{"text": "x"}]}) + "\n")
    with pytest.raises(UserError, match=r":1: not a trajectory line"):
        load_jsonl(path)


def test_tiny_model_through_the_hf_backend(tool, tmp_path):
    from grepseek_lib.agent.backends import make_backend
    from grepseek_lib.agent.models import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "tiny", corpus=tool.corpus)
    backend = make_backend("hf", str(model_dir), device="cpu")
    trajs = run_batch(["Who was the brother of Moses?", "What river flows through Paris?"], backend, tool,
                      max_new_tokens=24, max_context_tokens=4096)
    for traj in trajs:
        assert traj.stop_reason in STOP_REASONS and traj.turns
        assert all(t.prompt_tokens > 0 and 0 < t.completion_tokens <= 24 for t in traj.turns)
        assert traj.stop_reason != "answer" or traj.answer


@pytest.mark.slow
def test_smollm2_end_to_end(tool):
    """The default policy, loaded from its wheel, runs a whole episode through the real tool."""
    from grepseek_lib.agent.backends import make_backend

    backend = make_backend("hf", "smollm2", device="cpu")
    traj = run_episode({"id": "e2e", "question": "Who was the brother of Moses?", "golden_answers": ["Aaron"]},
                       backend, tool, max_new_tokens=48)
    assert traj.stop_reason in STOP_REASONS and traj.turns
    assert traj.messages[:2] == [{"role": "system", "content": system_prompt(len(PASSAGES), max_obs_tokens=tool.max_obs_tokens)},
                                 {"role": "user", "content": "Query: Who was the brother of Moses?"}]
    for turn in traj.turns:
        assert turn.prompt_tokens > 500 and 0 < turn.completion_tokens <= 48 and turn.llm_s > 0
        assert turn.action.kind in ("tool", "answer", "invalid")
        assert (turn.observation is not None) == (turn.action.kind == "tool" and turn.tool_s > 0)
    assert (traj.answer is not None) == (traj.stop_reason == "answer")


def test_episodes_over_a_real_http_server(tool):
    """The OpenAI-compatible client drops nothing the loop needs: stop tags come back, observations go out."""
    from grepseek_lib.agent.backends import OpenAIBackend
    from grepseek_lib.agent.serve import serve_in_thread

    scripts = {"a": [call("rg -F -c Seine corpus.jsonl"), answer("Seine")], "b": ["oops", answer("B")]}
    served = ScriptedBackend(scripts)
    with serve_in_thread(served) as url:
        client = OpenAIBackend(base_url=url, model="grepseek", concurrency=2, retries=0)
        trajs = run_batch(["a", "b"], client, tool)
        client.close()
    assert [(t.answer, t.stop_reason, t.tool_calls, t.format_errors) for t in trajs] == [
        ("Seine", "answer", 1, 0), ("B", "answer", 0, 1)]
    assert trajs[0].turns[0].text == call("rg -F -c Seine corpus.jsonl")  # `</tool_call>` restored
    assert trajs[0].turns[0].observation["stdout"] == "2\n"
    # the server saw the observation (sent as a user turn holding the same <tool_response> text)
    second_turn = [m for m in served.seen if m[1]["content"] == "Query: a"][1]
    assert observation_text(trajs[0].turns[0].observation) in second_turn[-1]["content"]
