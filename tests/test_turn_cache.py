"""Key/value reuse across turns (agent/turn_cache.py): the HF backend must pick the same tokens with it as
without it, over real multi-turn episodes, while reading only the new part of each prompt."""

from __future__ import annotations

import pytest

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.backends import DEFAULT_STOPS, HFBackend
from grepseek_lib.agent.loop import run_batch
from grepseek_lib.agent.prompt import initial_messages
from grepseek_lib.agent.turn_cache import Entry, TurnCache, best_match, common_prefix, shared_prefix
from grepseek_lib.shell.tool import ShellTool

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_thread")

STOPS = list(DEFAULT_STOPS)
QUESTIONS = ["Who wrote Hamlet?", "Which river flows through Grenoble and which mountains surround the city?",
             "When did the Eiffel Tower open?"]

#: With the tiny model, constrained, one of these (the Mona Lisa) runs tool calls for several turns.
EPISODES = [*QUESTIONS, "Who painted the Mona Lisa?", "What is the capital of France?", "Who was the brother of Moses?"]


def _entry(ids: tuple[int, ...], heads: int = 2, dim: int = 4) -> Entry:
    return Entry(ids, [(torch.zeros(heads, len(ids), dim), torch.zeros(heads, len(ids), dim))])


def test_common_prefix_and_best_match_leave_one_id_to_read():
    assert common_prefix((1, 2, 3, 4), (1, 2, 9)) == 2
    assert common_prefix((), (1,)) == 0 and common_prefix((5, 6), (5, 6)) == 2
    assert common_prefix(tuple(range(1000)), tuple(range(999)) + (7,)) == 999
    entries = [_entry((1, 2)), _entry((1, 2, 3, 4, 5)), _entry((9, 9, 9, 9))]
    best, keep = best_match([1, 2, 3, 4, 5], entries)
    assert best is entries[1] and keep == 4  # the whole prompt is cached: the last id is read again
    best, keep = best_match([1, 2, 3, 7], entries)
    assert best is entries[1] and keep == 3
    assert best_match([4, 4], entries) == (None, 0)


def test_the_turn_cache_keeps_only_what_fits_its_budget_and_installs_on_commit():
    cache = TurnCache(budget_mb=(2 * 2 * 100 * 4 * 4 * 2) / 2**20)  # room for two 100-id entries of this shape
    for start in range(3):
        cache.add(_entry(tuple(range(start, start + 100))))
    assert cache.entries == [] and len(cache._pending) == 2
    cache.commit()
    assert [e.ids[0] for e in cache.entries] == [0, 1]
    cache.commit()
    assert cache.entries == []


def _continue(conv: list[dict], text: str, turn: int) -> list[dict]:
    return conv + [{"role": "assistant", "content": text},
                   {"role": "tool", "content": f'{{"stdout": "line {turn} of the output\\n", "exit_code": 0}}'}]


def test_shared_prefix_leaves_every_prompt_one_id_to_read():
    assert shared_prefix([[1, 2, 3, 4], [1, 2, 3, 9], [1, 2, 7]]) == 2
    assert shared_prefix([[1, 2, 3], [1, 2, 3]]) == 2  # identical prompts: the last id is read by each row
    assert shared_prefix([[1, 2, 3]]) == 0 and shared_prefix([[5], [6]]) == 0


def test_generate_ids_computes_a_shared_prompt_once_and_samples_the_same_tokens(tiny):
    """G rollouts of one question (and rows of another under the same system prompt) in one chunk: the shared
    prefix is read once, at batch 1, and greedy ids equal each prompt decoded alone without any reuse."""
    tok = HFBackend(str(tiny), device="cpu").tokenizer
    prompts = [tok(tok.apply_chat_template(initial_messages(q, 1000), tokenize=False, add_generation_prompt=True),
                   add_special_tokens=False)["input_ids"] for q in (QUESTIONS[0], QUESTIONS[0], QUESTIONS[1])]
    fresh = HFBackend(str(tiny), device="cpu", batch_size=1, reuse_turns=False, prefix_cache=False)
    fresh.turns = TurnCache()  # generate_ids needs the lean loop; a fresh cache per prompt reuses nothing
    want = []
    for p in prompts:
        fresh.turns.clear()
        want += fresh.generate_ids([p], max_new_tokens=16, temperature=0.0)
    assert fresh.reused_tokens == 0
    batched = HFBackend(str(tiny), device="cpu", batch_size=8, prefix_cache=False, reuse_turns=True)
    got = batched.generate_ids(prompts, max_new_tokens=16, temperature=0.0)
    assert got == want and any(len(ids) > 2 for ids in got)
    assert batched.reused_tokens == 3 * shared_prefix(prompts) and shared_prefix(prompts) > 100


@pytest.mark.parametrize("constrain", [True, False])
def test_turn_reuse_picks_the_tokens_a_fresh_read_picks(tiny, constrain):
    """Three episodes of three turns, batched with padding, float32 greedy: every turn's text with reuse equals
    the text without it; from the second turn on, the previous prompt is read from the kept cache."""
    fresh = HFBackend(str(tiny), device="cpu", batch_size=3, constrain=constrain, reuse_turns=False)
    reuse = HFBackend(str(tiny), device="cpu", batch_size=3, constrain=constrain)
    assert reuse.turns is not None and fresh.turns is None
    convs = [initial_messages(q, 1000) for q in QUESTIONS]
    previous: list[int] = []
    for turn in range(3):
        before = reuse.reused_tokens
        want = fresh.generate(convs, max_new_tokens=48, temperature=0.0, stop=STOPS)
        got = reuse.generate(convs, max_new_tokens=48, temperature=0.0, stop=STOPS)
        assert [(g.text, g.completion_tokens, g.finish_reason, g.prompt_tokens) for g in got] == \
            [(g.text, g.completion_tokens, g.finish_reason, g.prompt_tokens) for g in want]
        if turn:
            assert reuse.reused_tokens - before >= sum(previous), "the previous prompts were read again"
        previous = [g.prompt_tokens for g in got]
        convs = [_continue(c, g.text, turn) for c, g in zip(convs, got, strict=True)]


def test_a_batch_mixing_continued_new_and_reordered_conversations(tiny):
    """Rows start from different kept caches (a previous turn, the system prompt, nothing) in one batch."""
    fresh = HFBackend(str(tiny), device="cpu", batch_size=4, reuse_turns=False, prefix_cache=False)
    reuse = HFBackend(str(tiny), device="cpu", batch_size=4)
    first = [initial_messages(q, 1000) for q in QUESTIONS[:2]]
    gens = reuse.generate(first, max_new_tokens=32, temperature=0.0, stop=STOPS)
    convs = [_continue(first[1], gens[1].text, 0), initial_messages("Who painted the Mona Lisa?", 1000),
             [{"role": "user", "content": "no system prompt here"}], _continue(first[0], gens[0].text, 0)]
    want = fresh.generate(convs, max_new_tokens=32, temperature=0.0, stop=STOPS)
    got = reuse.generate(convs, max_new_tokens=32, temperature=0.0, stop=STOPS)
    assert [g.text for g in got] == [g.text for g in want]


def test_episodes_with_real_tool_calls_are_the_same_with_and_without_reuse(tiny, miniwiki):
    """The agent loop over the real shell tool (constrained decoding makes the tiny model call it)."""
    tool = ShellTool(miniwiki / "corpus.jsonl", timeout=10, max_obs_tokens=128)
    runs = []
    for reuse in (False, True):
        backend = HFBackend(str(tiny), device="cpu", batch_size=4, constrain=True, reuse_turns=reuse)
        trajs = run_batch(EPISODES, backend, tool, max_tool_calls=3, max_new_tokens=128)
        runs.append([[(t.text, t.observation_text) for t in traj.turns] for traj in trajs])
        if reuse:
            assert backend.reused_tokens > 0
    assert runs[0] == runs[1]
    assert sum(len(turns) for turns in runs[1]) > len(EPISODES)  # several turns, so later ones started from kept caches


def test_the_next_turns_prompt_starts_from_the_kept_cache(tiny):
    """A reply re-rendered into the conversation starts where the cached ids left off: the kept cache covers
    the previous prompt and (most of) the reply."""
    reuse = HFBackend(str(tiny), device="cpu", batch_size=1)
    conv = initial_messages(QUESTIONS[0], 1000)
    reuse.generate([conv], max_new_tokens=8, temperature=0.0, stop=STOPS)
    prompt = reuse.tokenizer(reuse.render(conv), add_special_tokens=False)["input_ids"]
    nxt = reuse.tokenizer(reuse.render(_continue(conv, render_turn("x", command="ls"), 0)),
                          add_special_tokens=False)["input_ids"]
    _, keep = best_match(nxt, reuse.turns.entries)
    assert keep >= len(prompt)
