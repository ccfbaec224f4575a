"""Cold start teaches several first searches and says why each search after a failed one differs; the
search report (evidence found, empty first search, repeated command) is computed the same for eval,
format-check and GRPO rollouts."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.chat_template import tool_messages_as_user
from grepseek_lib.agent.evidence import answer_in, readable, search_report, summarize_search
from grepseek_lib.coldstart import offline
from grepseek_lib.coldstart.accept import process_question
from grepseek_lib.coldstart.export import make_record, stats, strategy_report
from grepseek_lib.coldstart.offline import Search, change_reason
from grepseek_lib.coldstart.strategies import count_command, strategy_of
from grepseek_lib.shell.tool import observation_text
from grepseek_lib.train.reward import TrlShellReward, decoded_stdouts, reward_parts
from tests.test_coldstart import HOTPOT_BRIDGE, MUSIQUE, _item, _roles, _write_corpus


@pytest.mark.parametrize(("command", "expected"), [
    ("rg -F '\\\"Hank Snow\\\"' corpus.jsonl | head -n 3", "title"),
    ("rg -F '\\\"Moon Garden (' corpus.jsonl | head -n 5", "title"),
    ("rg -F 'Hank Snow' corpus.jsonl | head -n 5", "text"),
    ("grep -F 'Hank' corpus.jsonl | head -n 5", "text"),
    ("rg -F -i 'moon garden' corpus.jsonl | head -n 3", "phrase"),
    ("rg -Fi 'moon garden' corpus.jsonl", "phrase"),
    ("rg -F -i 'Velmont' corpus.jsonl | head -n 3", "text"),
    ("rg -F -w 'Hank Snow' corpus.jsonl | rg -i -w 'died' | head -n 3", "cooccur"),
    ("wc -l corpus.jsonl", "other"),
    ("rg -F 'x' corpus.jsonl; rm -rf /", "other"),
])
def test_strategy_of_reads_the_command_text(command, expected):
    assert strategy_of(command) == expected


def test_count_command_only_rewrites_a_trailing_head():
    assert count_command("rg -F 'a' corpus.jsonl | head -n 5") == "rg -F 'a' corpus.jsonl | wc -l"
    assert count_command("rg -F 'a' corpus.jsonl") is None


def test_every_widening_step_says_why():
    rng = random.Random(0)
    steps = [Search("Moon Garden", title="exact"), Search("Moon Garden (", title="prefix"),
             Search("Moon Garden", "director", word=True), Search("Moon Garden", "director"),
             Search("Moon Garden", "director", ignore_case=True), Search("Moon Garden", ignore_case=True),
             Search("Garden", ignore_case=True), Search("Arno Pike", ignore_case=True)]
    reasons = [change_reason(a, b, False, rng) for a, b in zip(steps, steps[1:], strict=False)]
    assert reasons[0].startswith("No passage has exactly that title")
    assert "passage text" in reasons[1] and "-w" in reasons[2] and "-i" in reasons[3]
    assert "'director'" in reasons[4] and "fewer words: 'Garden'" in reasons[5]
    assert "another name" in reasons[6] and "'Arno Pike'" in reasons[6]
    assert "from another angle" in change_reason(steps[2], steps[3], True, random.Random(1)) or \
        "do not give" in change_reason(steps[2], steps[3], True, random.Random(1))
    assert change_reason(None, steps[0], False, rng) == ""


def test_first_searches_vary_and_no_trajectory_repeats_a_command(tmp_path):
    from grepseek_lib.shell.tool import ShellTool

    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    tool = ShellTool(corpus, timeout=20)
    tutor, planner = _roles(corpus)
    firsts = Counter()
    for seed in range(24):
        for row in (MUSIQUE, HOTPOT_BRIDGE):
            outcome = process_question(_item(row), tutor, planner, tool, seed=seed, fill_budget_rate=0.0)
            assert outcome.accepted, (seed, row["id"], outcome.stage, outcome.reason)
            commands = [t.command for t in outcome.turns if t.command]
            assert len(set(commands)) == len(commands)
            firsts[strategy_of(commands[0])] += 1
    assert len(firsts) >= 3 and firsts["title"] < sum(firsts.values()) / 2, firsts


def test_a_replayed_dead_end_is_followed_by_a_thought_that_says_what_changed(tmp_path, monkeypatch):
    from grepseek_lib.shell.tool import ShellTool

    monkeypatch.setattr(offline, "FIRST_SEARCH_WEIGHTS", {"text": 0, "phrase": 0, "cooccur": 0, "title": 1})
    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    tutor, planner = _roles(corpus)
    outcome = process_question(_item(HOTPOT_BRIDGE), tutor, planner, ShellTool(corpus, timeout=20),
                               probe_rate=0.0, fill_budget_rate=0.0, detour_rate=1.0)
    calls = [t for t in outcome.turns if t.command]
    assert calls[0].payload["stdout"] == "" and strategy_of(calls[0].command) == "title"
    assert "No passage has exactly that title" in calls[1].think
    record = make_record(_item(HOTPOT_BRIDGE), outcome, 9)
    assert record["first_strategy"] == "title" and record["strategies"][0] == "title"
    report = strategy_report([record])
    assert report["acceptance_by_first_strategy"]["title"] == {"questions": 1, "accepted": 1, "acceptance": 1.0}
    assert report["empty_tool_replies"] == 1 and report["tool_replies"] == len(calls)
    assert stats([record])["all"]["first_call_strategy"] == {"title": 1}


def test_evidence_is_matched_on_decoded_corpus_text():
    line = json.dumps({"id": "7", "contents": "\"Z\u00fcrich\"\nZ\u00fcrich is a city in Switzerland."})
    assert "\\u00fc" in line and "Zürich is a city" in readable(line + "\nplain line")
    assert answer_in(readable(line), ["zurich", "Zürich"]) and not answer_in(readable(line), ["Zur"])
    assert answer_in("The answer is the Eiffel Tower.", "eiffel tower")
    report = search_report(["rg a", "rg b", "rg a"], ["", line, ""], ["Zürich"])
    assert report == {"evidence_found": True, "first_search_empty": True, "repeated_command": True}
    none = search_report([], [], ["x"])
    assert none == {"evidence_found": False, "first_search_empty": None, "repeated_command": False}
    rates = summarize_search([report, none])
    assert rates == {"evidence_recall": 0.5, "first_search_empty_rate": 1.0, "repeated_command_rate": 0.5}


def test_grpo_reward_parts_read_the_tool_outputs_out_of_the_decoded_rollout(tiny):
    from grepseek_lib.agent.models import load_tokenizer

    tokenizer = load_tokenizer(tiny)
    command = "rg -F 'Hank Snow' corpus.jsonl | head -n 1"
    payload = {"command": command, "stdout": json.dumps({"id": "2", "contents": "He died in Tennessee."}) + "\n",
               "stderr": "", "exit_code": 0, "timed_out": False, "truncated": False}
    messages = [{"role": "assistant", "content": render_turn("Look him up.", command)},
                {"role": "tool", "content": observation_text(payload)},
                {"role": "assistant", "content": render_turn("He died in Tennessee.", answer="Tennessee")}]
    text = tokenizer.apply_chat_template(tool_messages_as_user(messages), tokenize=False)
    assert decoded_stdouts(text) == [payload["stdout"]]
    reward = TrlShellReward(tokenizer)
    ids = tokenizer(text.split("<|im_start|>assistant\n", 1)[1], add_special_tokens=False)["input_ids"]
    assert decoded_stdouts(reward.decode(ids)) == [payload["stdout"]]
    parts = reward_parts([m["content"] for m in messages if m["role"] == "assistant"], ["Tennessee"],
                         stdouts=decoded_stdouts(text))
    assert parts["evidence_found"] and not parts["first_search_empty"] and parts["reward"] == 1.0



def test_grpo_rollouts_are_written_turn_by_turn_for_the_inspector(tiny, tmp_path):
    from grepseek_lib.agent.models import load_tokenizer
    from grepseek_lib.agent.trajectory import load_jsonl
    from grepseek_lib.inspector.load import load_grpo_rollouts
    from grepseek_lib.train.reward import ROLLOUTS_FILE

    tokenizer = load_tokenizer(tiny)
    command = "rg -F 'Hank Snow' corpus.jsonl | head -n 1"
    payload = {"command": command, "stdout": "He died in Tennessee.\n", "stderr": "", "exit_code": 0,
               "timed_out": False, "truncated": False}
    messages = [{"role": "assistant", "content": render_turn("Look him up.", command)},
                {"role": "tool", "content": observation_text(payload)},
                {"role": "assistant", "content": render_turn("He died in Tennessee.", answer="Tennessee")}]
    text = tokenizer.apply_chat_template(tool_messages_as_user(messages), tokenize=False)
    ids = tokenizer(text.split("<|im_start|>assistant\n", 1)[1], add_special_tokens=False)["input_ids"]
    reward = TrlShellReward(tokenizer, log_path=tmp_path / "reward_parts.jsonl")
    prompt = [{"role": "system", "content": "s"}, {"role": "user", "content": "Query: Where did he die?"}]
    assert reward([prompt, prompt], [None, None], [ids, ids[:5]], [["Tennessee"], ["Tennessee"]],
                  id=["musique_train:7", "musique_train:7"]) == [1.0, 0.0]
    first, cut = load_jsonl(tmp_path / ROLLOUTS_FILE)
    assert first.question == "Where did he die?" and first.id == "7" and first.meta["benchmark"] == "musique_train"
    assert [t.action.kind for t in first.turns] == ["tool", "answer"] and first.answer == "Tennessee"
    assert first.turns[0].observation["stdout"] == payload["stdout"] and first.meta["reward"] == 1.0
    assert cut.answer is None and cut.meta["rollout"] == 1
    rows, turns = load_grpo_rollouts(tmp_path, "run")
    assert len(rows) == 2 and rows[0]["episode"] != rows[1]["episode"] and len(turns) == 3


def test_format_check_reports_search_rates_per_benchmark():
    from grepseek_lib.agent.actions import parse_action
    from grepseek_lib.agent.trajectory import Trajectory, Turn
    from grepseek_lib.train.format_check import by_benchmark

    def episode(qid: str, *outputs: str) -> Trajectory:
        turns = []
        for k, out in enumerate(outputs):
            command = f"rg -F 'w{k % 2}' corpus.jsonl"
            turns.append(Turn(text=command, action=parse_action(render_turn("Search.", command=command)),
                              observation={"stdout": out}))
        return Trajectory(question="q", id=qid, golds=["Tennessee"], turns=turns)

    episodes = [episode("nq:1", "", "in Tennessee"), episode("nq:2", "x", "y", "z"), episode("popqa:1")]
    parts = [{"format_ok": True, "f1": 1.0}, {"format_ok": False, "f1": 0.0}, {"format_ok": True, "f1": 0.5}]
    table = by_benchmark(episodes, parts)
    assert table["nq"] == {"episodes": 2, "format_pass_rate": 0.5, "mean_f1": 0.5, "evidence_recall": 0.5,
                           "first_search_empty_rate": 0.5, "repeated_command_rate": 0.5,
                           "proposed_repeat_rate": 0.5}
    assert table["popqa"]["evidence_recall"] == 0.0 and table["popqa"]["first_search_empty_rate"] == 0.0


@pytest.mark.parametrize(("question", "avoid", "expected"), [
    ("Who was born earlier, Emma Bull or Virginia Woolf?", "Emma Bull", ["Virginia Woolf"]),
    ("What pantheon is the God of the underworld in ancient Egypt a part of?", "Osiris",
     ["God of the underworld", "Egypt"]),
    ("In what year was the University of Notre Dame founded?", "x", ["University of Notre Dame"]),
    ("If Gallu is a demon Lilu is what?", "Gallu", ["Lilu"]),
    ("What is Henry Feilden's occupation?", "Henry Feilden", []),
    ('Which series is based on the team "Teen Titans"?', "x", ["Teen Titans"]),
])
def test_blind_guesses_read_names_off_the_question_alone(question, avoid, expected):
    from grepseek_lib.coldstart.searches import blind_guesses

    assert blind_guesses(question, avoid) == expected


@pytest.mark.parametrize(("question", "expected"), [
    ("Are both magazines, the Woman's Viewpoint and Pick Me Up, British publications?", ["Pick Me Up", "British"]),
    ("What pantheon is the God of the underworld in ancient Egypt a part of?", ["Egypt"]),
    ("Name the mother of Edward Stafford, who was the daughter of Henry Percy?", ["Edward Stafford", "Henry Percy"]),
    ("This team originally based in Gothais sponsered by Germany's best selling beer?", ["Gothais", "Germany"]),
])
def test_question_names_keep_the_guesses_that_read_as_names(question, expected):
    from grepseek_lib.coldstart.searches import question_names

    assert question_names(question, "Woman's Viewpoint") == expected


def _director_question_calls(corpus, tutor, planner):
    """The tool calls of one accepted trajectory per seed, for a question whose name the corpus writes
    shorter ("Moon Garden"), every dead end replayed."""
    from grepseek_lib.shell.tool import ShellTool

    row = {**HOTPOT_BRIDGE, "question": "In which town was the director of Moon Garden Pictures born?"}
    for seed in range(6):
        outcome = process_question(_item(row), tutor, planner, ShellTool(corpus, timeout=20), seed=seed,
                                   probe_rate=0.0, fill_budget_rate=0.0, detour_rate=1.0)
        assert outcome.accepted, (seed, outcome.stage, outcome.reason)
        yield [t for t in outcome.turns if t.command]


def test_a_blind_guess_that_printed_nothing_is_widened_step_by_step(tmp_path):
    """The agent's first search is a guess read off the question; when it prints nothing the next one adds
    -i, then falls back to the name the passage holds, each thought saying what changed."""

    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    tutor, planner = _roles(corpus)
    tutor.blind_guess_rate = 1.0
    seen_twice = False
    for calls in _director_question_calls(corpus, tutor, planner):
        commands = [t.command for t in calls]
        assert commands[0].split(" ", 1)[1].startswith("-F 'Moon Garden Pictures' ")
        assert calls[0].payload["stdout"] == ""
        assert len(set(commands)) == len(commands)
        if commands[1].split(" ", 1)[1].startswith("-F -i 'Moon Garden Pictures' "):
            seen_twice = True
            assert "-i" in calls[1].think and "fewer words: 'Moon Garden'" in calls[2].think
        else:
            assert "fewer words: 'Moon Garden'" in calls[1].think
    assert seen_twice


def test_the_blind_guess_rate_reaches_the_offline_tutor_and_is_off_by_default():
    from grepseek_lib.coldstart.build import ColdStartSettings, Teacher, make_roles
    from grepseek_lib.coldstart.searches import BLIND_GUESS_RATE

    assert BLIND_GUESS_RATE == 0.0 and ColdStartSettings().blind_guess_rate == 0.0
    tutor, _ = make_roles(Teacher(), {}, ColdStartSettings(blind_guess_rate=0.7, phrase_first_rate=0.4))
    assert tutor.blind_guess_rate == 0.7 and tutor.phrase_first_rate == 0.4


def test_the_question_words_before_a_name_make_a_phrase_that_widens_back_to_it():
    from grepseek_lib.coldstart.searches import phrase_before

    assert phrase_before("If Gallu is a demon Lilu is what?", "Lilu") == "demon Lilu"
    assert phrase_before("Who was the director of Moon Garden Pictures?", "Moon Garden Pictures") == \
        "director of Moon Garden Pictures"
    assert phrase_before("Where was the wife of moon garden pictures born?", "Moon Garden Pictures") == \
        "wife of Moon Garden Pictures"
    assert phrase_before("Moon Garden Pictures made what?", "Moon Garden Pictures") is None
    assert phrase_before("Born in Paris, Moon Garden Pictures did what?", "Moon Garden Pictures") is None
    assert phrase_before("Is it the one of Moon Garden Pictures?", "Moon Garden Pictures") is None
    assert phrase_before("Who founded it?", "Moon Garden Pictures") is None
    assert phrase_before("Are Nolan and Moon Garden Pictures both studios?", "Moon Garden Pictures") is None


def test_a_question_phrase_that_printed_nothing_is_widened_back_to_the_name(tmp_path):

    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    tutor, planner = _roles(corpus)
    tutor.phrase_first_rate = 1.0
    widened = 0
    for calls in _director_question_calls(corpus, tutor, planner):
        commands = [t.command for t in calls]
        assert "'director of Moon Garden'" in commands[0] and calls[0].payload["stdout"] == ""
        assert len(set(commands)) == len(commands)
        widened += any("fewer words: 'Moon Garden'" in t.think for t in calls[1:])
    assert widened


def test_episode_shapes_name_each_move_and_count_the_common_ones():
    from grepseek_lib.agent.actions import parse_action
    from grepseek_lib.agent.evidence import common_shapes, episode_shape
    from grepseek_lib.agent.trajectory import Trajectory, Turn

    def tool(command: str, stdout: str | None) -> Turn:
        payload = None if stdout is None else {"stdout": stdout}
        return Turn(text=command, action=parse_action(render_turn("Search.", command=command)), observation=payload)

    answer = Turn(text="", action=parse_action(render_turn("Done.", answer="Paris")))
    zero = Trajectory(question="q", turns=[tool("rg -F 'x' corpus.jsonl | wc -l", "0\n"),
                                           tool("rg -F 'x' corpus.jsonl | head -n 5", ""), answer])
    found = Trajectory(question="q", turns=[tool("grep -c 'x' corpus.jsonl", "12\n"),
                                            tool("rg -F 'x' corpus.jsonl | head -n 5", "a line\n"),
                                            tool("rg -F 'y' corpus.jsonl", None), answer])
    assert episode_shape(zero) == "C0 R0 A"
    assert episode_shape(found) == "C+ R+ E A"
    bytes_cut = Trajectory(question="q", turns=[tool("rg -F 'x' corpus.jsonl | head -c 200", "0"), answer])
    assert episode_shape(bytes_cut) == "R+ A"  # `head -c` cuts bytes; only a matcher's -c counts
    assert episode_shape(Trajectory(question="q")) == ""
    assert common_shapes([zero, found, zero]) == {"C0 R0 A": 2, "C+ R+ E A": 1}
    assert list(common_shapes([zero, found, zero], top=1)) == ["C0 R0 A"]


def test_repeats_are_told_apart_by_the_output_before_them_and_next_moves_by_search():
    from grepseek_lib.agent.actions import parse_action
    from grepseek_lib.agent.evidence import first_repeat_after, next_moves
    from grepseek_lib.agent.trajectory import Trajectory, Turn

    def tool(command: str, stdout: str) -> Turn:
        return Turn(text=command, action=parse_action(render_turn("Search.", command=command)),
                    observation={"stdout": stdout})

    count, read = "rg -F 'x' corpus.jsonl | wc -l", "rg -F 'x' corpus.jsonl | head -n 3"
    wider = "rg -F -i 'x' corpus.jsonl | head -n 3"
    after_printed = Trajectory(question="q", turns=[tool(read, "a line\n"), tool(read, "")])
    after_empty = Trajectory(question="q", turns=[tool(count, "4\n"), tool(read, ""), tool(count, "")])
    assert first_repeat_after(after_printed) == "printed"
    assert first_repeat_after(after_empty) == "empty"
    assert first_repeat_after(Trajectory(question="q", turns=[tool(read, "a"), tool(wider, "b")])) is None
    moves = next_moves(Trajectory(question="q", turns=[tool(count, "4\n"), tool(read, ""), tool(wider, "b"),
                                                       tool("rg -c 'y' corpus.jsonl", "0\n"), tool(read, "")]))
    assert moves == Counter({("printed something", "count", "same search"): 1,
                             ("printed nothing", "read", "new search"): 1,
                             ("printed something", "read", "new search"): 1,
                             ("printed nothing", "count", "new search"): 1})


def test_evidence_cut_by_cap_needs_a_cut_output_whose_full_text_holds_the_answer():
    from grepseek_lib.agent.actions import parse_action
    from grepseek_lib.agent.evidence import evidence_cut_by_cap
    from grepseek_lib.agent.trajectory import Trajectory, Turn

    full = {"rg -F 'Tennessee' corpus.jsonl": json.dumps({"id": "1", "contents": '"T"\nfar below: Nashville'})}

    def tool(command: str, stdout: str, truncated: bool) -> Turn:
        return Turn(text=command, action=parse_action(render_turn("Search.", command=command)),
                    observation={"stdout": stdout, "truncated": truncated})

    def episode(*turns: Turn) -> Trajectory:
        return Trajectory(question="q", golds=["Nashville"], turns=list(turns))

    def rerun(command: str) -> str:
        return full.get(command, "")

    command = "rg -F 'Tennessee' corpus.jsonl"
    assert evidence_cut_by_cap(episode(tool(command, '{"id": "1", "contents": "\\"T\\"\\nfar', True)), rerun)
    assert not evidence_cut_by_cap(episode(tool(command, "", False)), rerun)  # not cut: the search missed
    assert not evidence_cut_by_cap(episode(tool(command, "Nashville", True)), rerun)  # seen: evidence found
    assert not evidence_cut_by_cap(episode(tool("rg -F 'Ohio' corpus.jsonl", "x", True)), rerun)


def test_a_replayed_repeat_is_a_refused_no_loss_copy_after_a_printed_read(tmp_path):
    """coldstart.export: with the rate at 1 every trajectory that has room in its budget shows, after a call that
    printed a read, the same turn again (no loss) and the loop's refusal; the calls the Tutor ran stay unique."""
    from grepseek_lib import config
    from grepseek_lib.agent.prompt import budget_noted
    from grepseek_lib.coldstart.export import repeat_point
    from grepseek_lib.shell.tool import ShellTool, observation_payload

    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    tool = ShellTool(corpus, timeout=20)
    tutor, planner = _roles(corpus)
    replayed = 0
    for seed in range(6):
        item = _item(HOTPOT_BRIDGE)
        outcome = process_question(item, tutor, planner, tool, seed=seed, fill_budget_rate=0.0)
        assert make_record(item, outcome, 9) == make_record(item, outcome, 9, repeat_recovery_rate=0.0)
        plain = make_record(item, outcome, 9)["messages"]
        messages = make_record(item, outcome, 9, repeat_recovery_rate=1.0)["messages"]
        at = repeat_point(item.id, outcome.turns, 1.0)
        if at is None:
            assert messages == plain
            continue
        replayed += 1
        flagged = [i for i, m in enumerate(messages) if m.get("no_loss")]
        assert len(flagged) == 1 and len(messages) == len(plain) + 2
        i = flagged[0]
        assert messages[i]["content"] == messages[i - 2]["content"] and messages[i - 2]["role"] == "assistant"
        assert observation_payload(messages[i - 1]["content"])["stdout"].strip()  # it followed a printed read
        refusal = observation_payload(messages[i + 1]["content"])
        assert refusal["exit_code"] == 126 and "already tool call" in refusal["stderr"]
        rest = [m for j, m in enumerate(messages) if j not in (i, i + 1)]
        assert [m["role"] for m in rest] == [m["role"] for m in plain]
        assert all(a == b or budget_noted(a) for a, b in zip(rest, plain, strict=True))  # the note may move
        assert sum(m["role"] == "tool" for m in messages) <= config.MAX_TOOL_CALLS
        commands = [t.command for t in outcome.turns if t.command]
        assert len(set(commands)) == len(commands)
    assert replayed >= 3
    assert repeat_point("q", outcome.turns, 0.0) is None
