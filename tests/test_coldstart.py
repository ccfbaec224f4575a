"""Cold start, offline roles: every command really runs (real rg) over a small wiki-18 corpus."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from grepseek_lib.agent.actions import format_gate
from grepseek_lib.coldstart.accept import coherence, process_question
from grepseek_lib.coldstart.chain import Turn
from grepseek_lib.coldstart.offline import OfflinePlanner, OfflineTutor, Search
from grepseek_lib.coldstart.roles import Item
from grepseek_lib.coldstart.verify import leaked, locate
from grepseek_lib.data.formats import corpus_line

PASSAGES = [
    ("Hello Love (song)", "\"Hello Love\" is a song written and performed by Hank Snow, released in 1954 on RCA."),
    ("Hank Snow", "Clarence Eugene Hank Snow was a Canadian-born American country music artist. He died in "
                  "Madison, Tennessee, in 1999."),
    ("Snow", "Snow comprises individual ice crystals that grow while suspended in the atmosphere."),
    ("Moon Garden (film)", "Moon Garden is a 2003 drama film directed by Arno Pike and shot in Oregon."),
    ("Moon Garden (album)", "Moon Garden is an album by the band The Greys, released in 2011."),
    ("Arno Pike", "Arno Pike is an American film director. He was born in Velmont in 1950."),
    ("Lake Quill", "Lake Quill is a lake in the municipality of Vik in Norway."),
    ("Lake Varn", "Lake Varn is a lake in Hordaland county, Norway. It is 3 km long."),
    ("Velmont", "Velmont is a small town on the coast. Its harbour dates from 1820."),
]
IDS = {title: str(i + 1) for i, (title, _) in enumerate(PASSAGES)}

MUSIQUE = {
    "id": "2hop__1_2", "question": "In which state did the performer of Hello Love die?",
    "golden_answers": ["Tennessee"],
    "metadata": {"question_decomposition": [
        {"question": "Hello Love >> performer", "answer": "Hank Snow", "paragraph_support_idx": 0},
        {"question": "In which state did #1 die?", "answer": "Tennessee", "paragraph_support_idx": 1}],
        "support_titles": ["Hello Love (song)", "Hank Snow"],
        "gold_passages": {"Hello Love (song)": IDS["Hello Love (song)"], "Hank Snow": IDS["Hank Snow"]}},
}
HOTPOT_BRIDGE = {
    "id": "hp1", "question": "In which town was the director of Moon Garden born?", "golden_answers": ["Velmont"],
    "metadata": {"type": "bridge", "supporting_facts": [["Moon Garden (film)", 0], ["Arno Pike", 1]],
                 "gold_titles": ["Moon Garden (film)", "Arno Pike"],
                 "gold_passages": {"Moon Garden (film)": IDS["Moon Garden (film)"], "Arno Pike": IDS["Arno Pike"]}},
}
HOTPOT_YES_NO = {
    "id": "hp2", "question": "Are Lake Quill and Lake Varn both in Norway?", "golden_answers": ["yes"],
    "metadata": {"type": "comparison", "supporting_facts": [["Lake Quill", 0], ["Lake Varn", 0]],
                 "gold_titles": ["Lake Quill", "Lake Varn"],
                 "gold_passages": {"Lake Quill": IDS["Lake Quill"], "Lake Varn": IDS["Lake Varn"]}},
}


def _item(row: dict, source: str = "test") -> Item:
    return Item(row["id"], row["question"], row["golden_answers"], source, row["metadata"])


def _write_corpus(path: Path, passages=PASSAGES) -> Path:
    path.write_text("".join(corpus_line(IDS[t], t, x) + "\n" for t, x in passages), encoding="utf-8")
    return path


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    return _write_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture()
def tool(corpus: Path):
    from grepseek_lib.shell.tool import ShellTool

    return ShellTool(corpus, timeout=20)


def _roles(corpus: Path):
    passages = {str(json.loads(line)["id"]): json.loads(line)["contents"] for line in corpus.open()}
    return OfflineTutor(passages), OfflinePlanner()


@pytest.mark.parametrize("row", [MUSIQUE, HOTPOT_BRIDGE, HOTPOT_YES_NO], ids=lambda r: r["id"])
def test_offline_pipeline_accepts_and_saves_the_tools_own_payloads(row, corpus, tool):
    from grepseek_lib.shell.tool import observation_text

    tutor, planner = _roles(corpus)
    item = _item(row)
    outcome = process_question(item, tutor, planner, tool, seed=3, probe_rate=0.0)
    assert outcome.accepted, (outcome.stage, outcome.reason)
    assert outcome.answer.lower() == row["golden_answers"][0].lower()
    assert outcome.hops == (1 if row is HOTPOT_YES_NO else 2) or row is HOTPOT_YES_NO
    calls = [t for t in outcome.turns if t.command]
    assert 1 <= len(calls) <= 5
    for turn in calls:  # the saved observation is what the tool prints for that command, now
        assert observation_text(turn.payload) == observation_text(tool(turn.command))
    from grepseek_lib.agent.actions import render_turn

    ok, why = format_gate([render_turn(t.think, t.command, t.answer) for t in outcome.turns])
    assert ok, why


def test_multi_hop_searches_the_bridge_only_after_it_was_printed(corpus, tool):
    tutor, planner = _roles(corpus)
    outcome = process_question(_item(MUSIQUE), tutor, planner, tool, probe_rate=0.0, detour_rate=0.0)
    first, second = [t for t in outcome.turns if t.command]
    assert "Hank Snow" not in first.command and "Hank Snow" in first.payload["stdout"]
    assert "Hank Snow" in second.command and "Tennessee" not in second.command
    assert "Tennessee" not in first.think + second.think


def test_a_chain_whose_commands_miss_the_evidence_is_rejected(tmp_path):
    from grepseek_lib.shell.tool import ShellTool

    # The corpus no longer says where Hank Snow died: no command can verify hop 2.
    damaged = [(t, x.replace("Tennessee", "the South") if t == "Hank Snow" else x) for t, x in PASSAGES]
    path = _write_corpus(tmp_path / "corpus.jsonl", damaged)
    tutor, planner = _roles(path)
    outcome = process_question(_item(MUSIQUE), tutor, planner, ShellTool(path, timeout=20))
    assert not outcome.accepted and outcome.stage == "chain"
    assert outcome.reason.startswith("hop2:") and outcome.reason.split(":")[1] in ("missing_answer", "judge_no")
    assert outcome.commands_run >= 2  # it did execute and widen, up to the attempt cap
    assert outcome.commands_run <= 6


class _BlindTutor(OfflineTutor):
    """Searches the right entity but a keyword that drops the evidence line: output misses the answer."""

    def propose_command(self, ctx):
        return "rg -F 'Snow' corpus.jsonl | rg -w 'ice' | head -n 3"


def test_a_command_printing_the_wrong_passage_is_rejected(corpus, tool):
    tutor, planner = _roles(corpus)
    blind = _BlindTutor(tutor.passages)
    outcome = process_question(_item(MUSIQUE), blind, planner, tool)
    assert not outcome.accepted and outcome.reason == "hop2:missing_answer"


class _LeakyTutor(OfflineTutor):
    def propose_command(self, ctx):
        return "rg -F -i 'tennessee' corpus.jsonl | head -n 3"


def test_leak_rule_rejects_searching_for_the_answer_without_running_it(corpus, tool):
    assert leaked("rg -i 'tennessee' corpus.jsonl | head -n 3", ["Tennessee"], "Where did he die?") == "Tennessee"
    assert leaked("rg -i -w 'hank snow' corpus.jsonl | rg 'Tennessee'", ["Tennessee"], "q") == "Tennessee"
    # the answer may be searched once the question (or an earlier output) holds it
    assert leaked("rg -F 'Lake Varn' corpus.jsonl", ["Lake Varn"], "Is Lake Varn deeper than Lake Quill?") is None
    assert leaked("rg -F 'Hank' corpus.jsonl | head -n 1999", ["1999"], "When?") is None  # option values
    assert leaked("rg -F 'Hank' corpus.jsonl", ["yes"], "q") is None
    tutor, planner = _roles(corpus)
    outcome = process_question(_item(MUSIQUE), _LeakyTutor(tutor.passages), planner, tool)
    assert not outcome.accepted and outcome.reason == "hop2:leak" and outcome.commands_run == 0


def test_widening_after_empty_output(corpus, tool):
    search = Search("Hank snow", "died", word=True)
    seen = []
    while search is not None:
        seen.append(search.render())
        search = search.widen()
    assert seen[0] == "rg -F -w 'Hank snow' corpus.jsonl | rg -i -w 'died' | head -n 5"
    assert "-w 'Hank snow'" not in seen[1] and "-i" in seen[2] and "| rg" not in seen[3] and "'snow'" in seen[4]
    assert not tool(seen[0])["stdout"] and "Tennessee" in tool(seen[2])["stdout"]
    # in the chain: the first attempt is empty, the widened one verifies
    tutor, _ = _roles(corpus)
    from grepseek_lib.coldstart.roles import StepContext

    step = tutor.decompose(_item(MUSIQUE))[0][1]
    ctx = StepContext(_item(MUSIQUE), 1, step, ["Tennessee"], "Hank snow", random.Random(0))
    from grepseek_lib.coldstart.chain import ChainResult, _verify_hop

    ctx.__dict__["_offline"] = {"queue": [Search("Hank snow", "died", word=True)], "by_command": {}}
    hop = _verify_hop(ctx, tutor, tool, 6, ChainResult(False), last=True)
    assert hop is not None and [a.reason for a in hop.attempts][:1] == ["empty"] and hop.attempts[-1].reason == "ok"


class _DetourTutor(OfflineTutor):
    """Tries one real dead end on the last hop (its output lacks the answer) before the offline searches."""

    def propose_command(self, ctx):
        dead_end = "rg -F -w 'Hank Snow' corpus.jsonl | rg -w 'RCA' | head -n 3"
        if ctx.index == 1 and not ctx.attempts:
            return dead_end
        return super().propose_command(ctx)


def test_full_budget_trajectory_replays_dead_ends_counts_and_meets_the_budget_message(corpus, tool):
    from grepseek_lib.agent.prompt import budget_message
    from grepseek_lib.coldstart.export import to_messages

    tutor, planner = _roles(corpus)
    detour = _DetourTutor(tutor.passages)
    short = process_question(_item(MUSIQUE), detour, planner, tool, probe_rate=0.0, fill_budget_rate=0.0,
                             detour_rate=0.0)
    assert short.accepted and sum(t.command is not None for t in short.turns) == 2
    full = process_question(_item(MUSIQUE), detour, planner, tool, probe_rate=0.0, fill_budget_rate=1.0)
    assert full.accepted, (full.stage, full.reason)
    commands = [t.command for t in full.turns if t.command]
    assert len(commands) == 5 and full.answer == "Tennessee"
    assert commands.count("rg -F -w 'Hank Snow' corpus.jsonl | rg -w 'RCA' | head -n 3") == 1
    assert sum(c.endswith("| wc -l") for c in commands) == 2  # a count before each hop's read
    assert commands[-1] == [t.command for t in short.turns if t.command][-1]  # the verified read comes last
    messages = to_messages(_item(MUSIQUE), full, 9)
    assert [m["role"] for m in messages[2:]] == ["assistant", "tool"] * 5 + ["assistant"]
    assert messages[-2]["content"].endswith("\n\n" + budget_message(5))  # the loop's note on the 5th call
    assert "<answer>Tennessee</answer>" in messages[-1]["content"]
    assert sum(budget_message(5) in m["content"] for m in messages) == 1
    assert not any(budget_message(5) in m["content"] for m in to_messages(_item(MUSIQUE), short, 9))
    # without a dead end the chain has only 2 reads + 2 counts: it cannot fill 5 calls and stays short
    plain = process_question(_item(MUSIQUE), tutor, planner, tool, probe_rate=0.0, fill_budget_rate=1.0)
    assert plain.accepted and sum(t.command is not None for t in plain.turns) == 2


@pytest.mark.parametrize("as_count", [False, True])
def test_a_failed_title_guess_is_replayed_and_followed_by_a_different_search(corpus, tool, monkeypatch, as_count):
    from grepseek_lib.coldstart import offline

    monkeypatch.setattr(offline, "FIRST_SEARCH_WEIGHTS", {"text": 0, "phrase": 0, "cooccur": 0, "title": 1})
    tutor, planner = _roles(corpus)
    item = _item(HOTPOT_BRIDGE)
    rates = dict(probe_rate=0.0, fill_budget_rate=0.0, zero_count_rate=float(as_count))
    outcome = process_question(item, tutor, planner, tool, detour_rate=1.0, **rates)
    assert outcome.accepted, (outcome.stage, outcome.reason)
    calls = [t for t in outcome.turns if t.command]
    guess = "rg -F '\\\"Moon Garden\\\"' corpus.jsonl | head -n 3"  # the question's spelling as a title
    if as_count:  # replayed as a count, which prints 0; the next thought says so and changes the search
        assert calls[0].command == guess.replace("head -n 3", "wc -l") and calls[0].payload["stdout"] == "0\n"
        assert calls[1].think.startswith(offline.ZERO_COUNT_DRAFTS)
    else:  # only "Moon Garden (film)" exists
        assert calls[0].command == guess and calls[0].payload["stdout"] == ""
        assert calls[1].think.startswith(offline.EMPTY_OUTPUT_DRAFTS)
    assert calls[1].command not in (guess, calls[0].command)
    assert len({t.command for t in calls}) == len(calls) <= 5  # no command is ever repeated
    from grepseek_lib.agent.actions import render_turn

    assert format_gate([render_turn(t.think, t.command, t.answer) for t in outcome.turns]) == (True, "ok")
    # without the replay the trajectory goes straight to what verified
    short = process_question(item, tutor, planner, tool, detour_rate=0.0, **rates)
    assert guess not in [t.command for t in short.turns] and len(short.turns) == len(outcome.turns) - 1


def test_a_count_of_0_on_a_name_the_corpus_lacks_is_answered_by_another_name_from_the_question(corpus, tool):
    from grepseek_lib.coldstart import offline
    from grepseek_lib.coldstart.chain import absent_name_count

    tutor, planner = _roles(corpus)
    item = _item(dict(HOTPOT_BRIDGE, question="In which town was the director of Moon Garden, a remake of "
                                              "Quorn Zebedee, born?"))
    rates = dict(probe_rate=0.0, fill_budget_rate=0.0, detour_rate=0.0)
    outcome = process_question(item, tutor, planner, tool, other_name_rate=1.0, **rates)
    assert outcome.accepted, (outcome.stage, outcome.reason)
    calls = [t for t in outcome.turns if t.command]
    assert calls[0].command == "rg -F 'Quorn Zebedee' corpus.jsonl | wc -l" and calls[0].payload["stdout"] == "0\n"
    assert calls[1].think.startswith(offline.ZERO_COUNT_DRAFTS)
    assert "another name from the question: 'Moon Garden'" in calls[1].think and "Moon Garden" in calls[1].command
    assert len({t.command for t in calls}) == len(calls)
    # at rate 0 (the default) no count opens the trajectory; a question whose names are all in the corpus
    # (or whose verified search is not a name it writes) gets none at rate 1 either
    short = process_question(item, tutor, planner, tool, **rates)
    assert short.accepted and not short.turns[0].command.endswith("| wc -l")
    plain = process_question(_item(HOTPOT_BRIDGE), tutor, planner, tool, other_name_rate=1.0, **rates)
    assert plain.accepted and not any(t.command and t.command.endswith("| wc -l") for t in plain.turns)
    assert absent_name_count(item.question, "rg -F 'Velmont' corpus.jsonl | head -n 3", tool) is None


def test_full_budget_spent_on_searches_for_names_the_corpus_lacks_has_no_count_and_no_repeat(corpus, tool):
    from grepseek_lib.agent.prompt import budget_message
    from grepseek_lib.coldstart.export import to_messages

    tutor, planner = _roles(corpus)
    item = _item(dict(HOTPOT_BRIDGE, question="In which town was the director of Moon Garden, a remake of "
                                              "Quorn Zebedee by Pell Varrow, born?"))
    rates = dict(probe_rate=0.0, fill_budget_rate=1.0)
    full = process_question(item, tutor, planner, tool, fill_with="searches", **rates)
    assert full.accepted, (full.stage, full.reason)
    calls = [t for t in full.turns if t.command]
    commands = [t.command for t in calls]
    assert len(commands) == 5 and len(set(commands)) == 5 and full.answer == "Velmont"
    assert not any(c.endswith("| wc -l") for c in commands)
    # the names the corpus lacks open it, each printed nothing, each next thought names the change
    assert commands[:2] == ["rg -F 'Quorn Zebedee' corpus.jsonl | head -n 5",
                            "rg -F 'Pell Varrow' corpus.jsonl | head -n 5"]
    assert all(not calls[i].payload["stdout"] for i in range(2))
    assert "another name from the question: 'Pell Varrow'" in calls[1].think
    assert "Nothing matched 'Pell Varrow'" in calls[2].think
    messages = to_messages(item, full, 9)
    assert messages[-2]["content"].endswith("\n\n" + budget_message(5))
    assert "<answer>Velmont</answer>" in messages[-1]["content"]
    # with counts (the default) the same budget is spent on a count before a read of the same search
    counted = process_question(item, tutor, planner, tool, **rates)
    counts = [t.command for t in counted.turns if t.command and t.command.endswith("| wc -l")]
    assert counted.accepted and counts and "Quorn Zebedee" not in str(counted.turns)
    # a question whose names are all in the corpus cannot fill it with searches either
    plain = process_question(_item(HOTPOT_BRIDGE), tutor, planner, tool, fill_with="searches", **rates)
    assert plain.accepted and sum(t.command is not None for t in plain.turns) < 5


class _SpareTutor(OfflineTutor):
    """After the last hop verified, proposes three real searches whose output lacks the answer."""

    DEAD_ENDS = ("rg -F -w 'Hank Snow' corpus.jsonl | rg -w 'RCA' | head -n 3",
                 "rg -F 'Hank' corpus.jsonl | rg -w 'song' | head -n 3",
                 "rg -F -i 'hank snow' corpus.jsonl | rg -w 'released' | head -n 3")

    def propose_command(self, ctx):
        tried = {a.command for a in ctx.attempts}
        if ctx.index == 1 and any(a.reason == "ok" for a in ctx.attempts):
            untried = [c for c in self.DEAD_ENDS if c not in tried]
            if untried:
                return untried[0]
        return super().propose_command(ctx)


def test_full_budget_spent_on_the_tutors_further_searches_that_did_not_verify(corpus, tool):
    tutor, planner = _roles(corpus)
    spare = _SpareTutor(tutor.passages)
    full = process_question(_item(MUSIQUE), spare, planner, tool, probe_rate=0.0, fill_budget_rate=1.0,
                            fill_with="searches")
    assert full.accepted, (full.stage, full.reason)
    commands = [t.command for t in full.turns if t.command]
    assert len(commands) == 5 and len(set(commands)) == 5 and full.answer == "Tennessee"
    assert commands[1:4] == list(_SpareTutor.DEAD_ENDS)  # replayed before the read that verified
    assert commands[4] == "rg -F 'Hank Snow' corpus.jsonl | head -n 3"
    assert not any(c.endswith("| wc -l") for c in commands)
    # with counts the Tutor is never asked for more: no spare search runs, and none is replayed
    counted = process_question(_item(MUSIQUE), spare, planner, tool, probe_rate=0.0, fill_budget_rate=1.0)
    assert counted.commands_run < full.commands_run
    assert not set(_SpareTutor.DEAD_ENDS) & {t.command for t in counted.turns}


def test_fill_with_is_checked():
    from grepseek_lib.coldstart.build import ColdStartSettings
    from grepseek_lib.errors import UserError

    with pytest.raises(UserError, match="fill_with must be one of counts, searches"):
        ColdStartSettings(fill_with="count")


def _payload(tool, command):
    return tool(command)


def test_coherence_rejections(corpus, tool):
    item = _item(MUSIQUE)
    facts = ["Hank Snow", "Tennessee"]
    read1 = "rg -F '\\\"Hello Love' corpus.jsonl | head -n 3"
    read2 = "rg -F 'Hank Snow' corpus.jsonl | head -n 3"
    good = [Turn("Find the song's passage.", read1, _payload(tool, read1)),
            Turn("Hank Snow performed it; read about him.", read2, _payload(tool, read2)),
            Turn("He died in Madison, Tennessee.", answer="Tennessee")]
    evidence = {IDS["Hank Snow"]}
    assert coherence(item, good, facts, evidence) is None
    # a bridge named before any output showed it
    early = [Turn("The performer is Hank Snow, so read the song page.", read1, good[0].payload), *good[1:]]
    assert coherence(item, early, facts, evidence) == "fact_before_observed"
    # a search word the agent could not have had
    jump = [Turn("Read about the singer.", read2, good[1].payload), good[2]]
    assert coherence(item, jump, facts, evidence) == "ungrounded_pattern"
    # searching on after the answer's evidence was printed
    again = "rg -F -i 'hank snow' corpus.jsonl | head -n 2"
    after = [*good[:2], Turn("Let me check again.", again, _payload(tool, again)), good[2]]
    assert coherence(item, after, facts, evidence) == "search_after_answer"
    # an answer the outputs never showed
    wrong = [*good[:2], Turn("So he died in Ohio.", answer="Ohio")]
    assert coherence(item, wrong, facts + ["Ohio"], evidence) in ("fact_before_observed", "unsupported_answer")
    assert coherence(item, [*good[:2], Turn("Done.", answer="Ohio")], facts, evidence) == "unsupported_answer"
    # the reward's format gate: a tool call cannot be the last turn
    assert coherence(item, good[:2], facts, evidence) == "shape"


def test_locate_returns_the_texts_own_spelling():
    assert locate("Built by boeing B-29 crews.", ["Boeing B - 29"]) == "boeing B-29"
    assert locate("x", ["Boeing"]) is None
    assert locate("the Boeing B-29 Superfortress", ["Boeing B-29 Superfortress bomber"], relaxed=True) \
        == "Boeing B-29 Superfortress"


def _bench(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_is_deterministic_resumable_and_loads_in_datasets(corpus, tmp_path):
    from grepseek_lib.cli import main

    bench = _bench(tmp_path / "toy_train.jsonl", [MUSIQUE, HOTPOT_BRIDGE, HOTPOT_YES_NO])
    base = ["coldstart", "--splits", str(bench), "--corpus", str(corpus), "--dev-percent", "0", "--probe-rate", "0.5"]
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--out", str(tmp_path / "b"), "--limit", "1"]) == 0  # a partial run, then resume
    with (tmp_path / "b" / "records.jsonl").open("a") as handle:
        handle.write('{"id": "hp1", "sour')  # a crash mid-write
    assert main([*base, "--out", str(tmp_path / "b")]) == 0
    for name in ("train.jsonl", "stats.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    rows = [json.loads(line) for line in (tmp_path / "a" / "train.jsonl").open()]
    assert [r["id"] for r in rows] == ["2hop__1_2", "hp1", "hp2"]
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
        assert roles[2:-1] == ["assistant", "tool"] * row["n_tool_calls"]
        assert format_gate([m["content"] for m in row["messages"] if m["role"] == "assistant"])[0]
    stats = json.loads((tmp_path / "a" / "stats.json").read_text())
    assert stats["all"]["accepted"] == 3 and stats["toy_train"]["acceptance"] == 1.0
    import datasets

    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "a" / "train.parquet"), split="train")
    assert loaded[0]["messages"][1]["content"].startswith("Query: ")
    assert len(loaded) == 3


def test_cli_bad_input_is_one_line_error(tmp_path, capsys, corpus):
    from grepseek_lib.cli import main

    assert main(["coldstart", "--splits", str(tmp_path / "missing.jsonl"), "--corpus", str(corpus)]) == 2
    assert main(["coldstart", "--limit", "0"]) == 2
    assert "error" in capsys.readouterr().err
    for flag in ("--probe-rate", "--fill-budget-rate", "--detour-rate", "--zero-count-rate", "--blind-guess-rate"):
        assert main(["coldstart", "--corpus", str(corpus), flag, "1.5"]) == 2
        err = capsys.readouterr().err
        assert flag in err and "[0, 1]" in err and len(err.strip().splitlines()) == 1
