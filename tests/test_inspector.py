"""The trajectory inspector on a small hand-made run folder: loader, filters, the SFT-right / GRPO-wrong
list, the static report (hostile corpus text stays text), the browser and the command rerun.
(The same loader on the smoke run's real trajectories: tests/test_notebooks.py.)"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grepseek_lib import config
from grepseek_lib.agent.actions import Action
from grepseek_lib.agent.trajectory import Trajectory, Turn, save_jsonl
from grepseek_lib.eval.runner import make_record
from grepseek_lib.inspector import filters, load, report
from grepseek_lib.inspector.browser import Browser
from grepseek_lib.inspector.rerun import rerun, verdict
from grepseek_lib.shell.tool import ShellTool

HOSTILE = '</details></pre><script>alert("x")</script><img src=x onerror=alert(1)>'
CORPUS = [{"id": "1", "contents": '"Paris"\nParis is the capital of France.'},
          {"id": "2", "contents": f'"Evil"\n{HOSTILE}'}]


def tool_turn(command: str, stdout: str, think: str = "look") -> Turn:
    payload = {"command": command, "stdout": stdout, "stderr": "", "exit_code": 0, "timed_out": False,
               "truncated": False}
    return Turn(text=f"<think>{think}</think>", action=Action("tool", command=command, think=think),
                observation=payload, observation_text=json.dumps(payload))


def answer_turn(answer: str) -> Turn:
    return Turn(text=f"<answer>{answer}</answer>", action=Action("answer", answer=answer, think="so"))


def episode(qid: str, answer: str | None, commands: list[str], benchmark: str = "nq", stop: str = "answer") -> Trajectory:
    turns = [tool_turn(c, HOSTILE if "Evil" in c else "Paris is the capital\n", think=HOSTILE) for c in commands]
    if answer is not None:
        turns.append(answer_turn(answer))
    return Trajectory(question=f"capital? {HOSTILE}", id=qid, golds=["Paris", HOSTILE], turns=turns, answer=answer,
                      stop_reason=stop, meta={"benchmark": benchmark})


def write_system(folder: Path, trajs: list[Trajectory]) -> None:
    save_jsonl(trajs, folder / "trajectories.jsonl")
    (folder / "records.jsonl").write_text("".join(
        json.dumps(make_record(t, t.meta["benchmark"], 1.0)) + "\n" for t in trajs))


@pytest.fixture
def run(tmp_path) -> Path:
    """runs/toy: sft right on q1 and q2, grpo right on q2 only; BM25, cold start and GRPO rollout rewards."""
    out = tmp_path / "toy"
    write_system(out / "eval" / "sft", [
        episode("q1", "Paris", ["rg -F Paris corpus.jsonl | head -n 3"]),
        episode("q2", "Paris", ["rg Evil corpus.jsonl", "rg Evil corpus.jsonl", "wc -l corpus.jsonl"]),
        episode("q3", None, [], benchmark="popqa", stop="format_errors")])
    redrawn = episode("q1", "Lyon", ["rg -F Paris corpus.jsonl | awk '{print $1}'"])
    redrawn.turns[0].redrawn = [f"rg -F '{HOSTILE}' corpus.jsonl"]  # a repeat the loop drew again
    write_system(out / "eval" / "grpo", [
        redrawn,
        episode("q2", "Paris", ["rg Evil corpus.jsonl"]),
        episode("q3", None, ["rg x corpus.jsonl"] * 5, benchmark="popqa", stop="budget")])
    (out / "eval" / "bm25").mkdir(parents=True)
    (out / "eval" / "bm25" / "records.jsonl").write_text(json.dumps(
        {"benchmark": "nq", "id": "q1", "question": "capital?", "golden_answers": ["Paris"], "prediction": "Paris",
         "raw_output": HOSTILE, "retrieved_ids": ["1", "2"], "em": 1.0, "f1": 1.0, "llm_s": 0.1}) + "\n")
    call = '<think>t</think>\n<tool_call>{"name": "shell", "arguments": {"command": "rg Paris corpus.jsonl"}}</tool_call>'
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                {"role": "assistant", "content": call},
                {"role": "tool", "content": json.dumps({"stdout": HOSTILE, "exit_code": 0}) + "\n\nbudget note"},
                {"role": "assistant", "content": "<think>t</think>\n<answer>Paris</answer>"}]
    (out / "coldstart").mkdir()
    (out / "coldstart" / "records.jsonl").write_text(
        json.dumps({"id": "c1", "source": "hotpotqa_train", "question": "q", "golds": ["Paris"], "accepted": True,
                    "stage": "accept", "reason": "ok", "answer": "Paris", "messages": messages}) + "\n"
        + json.dumps({"id": "c2", "source": "hotpotqa_train", "question": "q", "golds": ["x"], "accepted": False,
                      "stage": "chain", "reason": "no path", "answer": ""}) + "\n")
    (out / "models" / "grpo").mkdir(parents=True)
    (out / "models" / "grpo" / "reward_parts.jsonl").write_text(
        json.dumps({"step": 1, "rewards": {"hotpotqa_train:c1": [0.0, 1.0], "hotpotqa_train:c9": [0.5, 0.0]}}) + "\n")
    return out


def test_loader_reads_every_source_into_one_frame(run):
    data = load.load_run(run)
    counts = data.episodes["system"].value_counts().to_dict()
    assert counts == {"sft": 3, "grpo": 3, "bm25": 1, "coldstart": 2, "grpo_rollout": 4}
    assert set(data.episodes["run"]) == {"toy"}
    c1 = data.turns_of("toy/coldstart/hotpotqa_train/c1")
    assert c1["kind"].tolist() == ["tool", "answer"] and c1["stdout"].iloc[0] == HOSTILE  # budget note cut off
    rejected = filters.select(data.episodes, system="coldstart", stop_reason="rejected (chain)")
    assert rejected["id"].tolist() == ["c2"]
    assert sorted(filters.select(data.episodes, system="grpo_rollout")["reward"]) == [0.0, 0.0, 0.5, 1.0]


def test_filters_count_what_the_episodes_did(run):
    episodes = load.load_run(run).episodes
    sft = filters.select(episodes, system="sft")
    assert filters.select(sft, outcome="correct")["id"].tolist() == ["q1", "q2"]
    assert filters.select(sft, stop_reason="format error")["id"].tolist() == ["q3"]
    assert filters.select(episodes, system="grpo", stop_reason="budget")["tool_calls"].tolist() == [5]
    assert filters.select(episodes, system="sft", repeated=True)["id"].tolist() == ["q2"]
    assert filters.select(episodes, system="grpo", repeated=True)["id"].tolist() == ["q3"]
    assert filters.select(episodes, program="awk")["episode"].tolist() == ["toy/grpo/nq/q1"]
    assert len(filters.select(episodes, program=["wc", "awk"])) == 2
    assert filters.select(episodes, system=["sft", "grpo"], tool_calls=(2, 5))["episode"].tolist() == [
        "toy/grpo/popqa/q3", "toy/sft/nq/q2"]
    assert len(filters.select(episodes, benchmark="popqa", em=0.0)) == 2
    assert filters.select(episodes, system="grpo", f1_max=0.0)["id"].tolist() == ["q1", "q3"]
    with pytest.raises(ValueError, match="unknown filter"):
        filters.select(episodes, sytem="sft")


def test_versus_lists_what_sft_got_right_and_grpo_wrong(run):
    pairs = filters.versus(load.load_run(run).episodes, right="sft", wrong="grpo")
    assert pairs[["benchmark", "id", "answer_sft", "answer_grpo"]].values.tolist() == [["nq", "q1", "Paris", "Lyon"]]
    table = filters.counts(load.load_run(run).episodes).set_index("system")
    assert table.loc["sft", "correct"] == 2 and table.loc["grpo", "wrong"] == 2


class Structure(HTMLParser):
    """Counts elements and collects script bodies: what a browser would build from the page."""

    def __init__(self):
        super().__init__()
        self.opened: dict[str, int] = {}
        self.closed: dict[str, int] = {}
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.opened[tag] = self.opened.get(tag, 0) + 1
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self.closed[tag] = self.closed.get(tag, 0) + 1
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def test_report_escapes_hostile_text_and_holds_every_turn(run):
    data = load.load_run(run)
    data.episodes.loc[data.episodes["system"] == "bm25", "benchmark"] = '</script><script>alert("b")</script>'
    path = report.write_report(run, data)
    page = path.read_text()
    assert path == run / "trajectories.html"
    parsed = Structure()
    parsed.feed(page)
    assert parsed.opened["script"] == 2
    assert "img" not in parsed.opened and "alert" not in "".join(parsed.scripts[1:])
    assert parsed.opened["details"] == parsed.closed["details"]  # no `</details>` from the corpus closed a block
    assert page.count('<details class="episode"') == len(data.episodes)
    assert page.count('<details class="turn"') == len(data.turns)
    assert page.count("<b>drawn again</b>") == 1 and data.turns["redrawn"].map(len).sum() == 1
    assert "&lt;/details&gt;&lt;/pre&gt;&lt;script&gt;" in page and "<script>alert" not in page
    index = json.loads(parsed.scripts[0])  # the filter index parses back to the exact values
    assert '</script><script>alert("b")</script>' in {row["benchmark"] for row in index}
    assert "<" not in parsed.scripts[0] and re.search(r"\\u003c/script", parsed.scripts[0])


@pytest.fixture
def tool(tmp_path) -> ShellTool:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(line) + "\n" for line in CORPUS))
    return ShellTool(corpus, max_obs_tokens=config.DEFAULT_MAX_OBS_TOKENS)


def test_rerun_says_whether_the_observation_is_the_same(tool):
    fresh = tool("rg -F Paris corpus.jsonl")
    turn = {"command": "rg -F Paris corpus.jsonl", **{k: fresh[k] for k in ("stdout", "stderr", "timed_out",
                                                                           "truncated")}, "exit_code": 0.0}
    assert rerun(turn, tool)["identical"] and verdict(rerun(turn, tool)) == "identical observation"
    changed = rerun({**turn, "stdout": "something else\n"}, tool)
    assert changed["differs"] == ["stdout"] and verdict(changed) == "differs in: stdout"
    with pytest.raises(ValueError):
        rerun({"command": None}, tool)


def test_browser_steps_through_turns_shows_another_system_and_reruns(run, tool):
    data = load.load_run(run)
    browser = Browser(data, tool)
    browser.filters["system"].value = "sft"
    assert [value for _, value in browser.picker.options] == ["toy/sft/nq/q1", "toy/sft/nq/q2", "toy/sft/popqa/q3"]
    browser.picker.value = "toy/sft/nq/q2"
    assert browser.step.max == 4 and "rg Evil corpus.jsonl" in browser.turn.value
    assert "<script>" not in browser.turn.value + browser.answer.value
    browser.step.value = 3
    assert "wc -l corpus.jsonl" in browser.turn.value
    assert browser.run_again().startswith("differs in: stdout")  # the toy run recorded a made-up stdout
    browser.other.value = "grpo"
    assert "<h4>grpo</h4>" in browser.beside.value and browser.beside.value.count('class="turn"') == 2
    browser.filters["outcome"].value = "n/a"  # no sft episode is unscored
    assert browser.picker.options == () and "no episode matches" in browser.answer.value


def test_a_run_without_trajectories_loads_renders_and_browses(tmp_path):
    """07_trajectories opened before `make run` finished: empty frames, an empty page, a browser that says so."""
    data = load.load_run(tmp_path)
    assert data.episodes.empty and data.turns.empty and "episode" in data.episodes.columns
    assert report.render_report(data, "empty").count("<details") == 0
    assert filters.versus(data.episodes, right="sft", wrong="grpo").empty
    assert "no episode matches" in Browser(data).answer.value
