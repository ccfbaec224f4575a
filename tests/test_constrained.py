"""Protocol-constrained decoding with a real (tiny, random-weight) model: every turn parses and passes the gate."""

from __future__ import annotations

import json
import re

import pytest

from grepseek_lib.agent.actions import format_gate, parse_action, render_turn
from grepseek_lib.agent.backends import DEFAULT_STOPS, HFBackend, OpenAIBackend
from grepseek_lib.agent.constrained import (
    ProtocolGrammar,
    protocol_pieces,
    token_tables,
    turn_regex,
    wants_answer_only,
)
from grepseek_lib.agent.prompt import budget_message, initial_messages, with_budget_note

torch = pytest.importorskip("torch")

STOPS = list(DEFAULT_STOPS)
QUESTIONS = ["Who wrote Hamlet?", "Which river flows through Grenoble and which mountains surround the city?",
             "When did the Eiffel Tower open?", "Who was the brother of Moses, the prophet of the Exodus story?",
             "What is the capital of France?"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def constrained(tiny):
    return HFBackend(str(tiny), device="cpu", batch_size=4, constrain=True)


@pytest.fixture(scope="module")
def free(tiny):
    return HFBackend(str(tiny), device="cpu", batch_size=4)


def conversations(n: int) -> list[list[dict]]:
    """Prompts of clearly different lengths (short system prompt keeps the tiny model fast)."""
    return [initial_messages(QUESTIONS[i % len(QUESTIONS)], 1000)[1:] for i in range(n)]


def episode_turns(text: str) -> list[str]:
    """A one-turn reply as an episode the gate can judge: a tool call needs a closing answer turn."""
    action = parse_action(text)
    return [text, render_turn("done", answer="x")] if action.kind == "tool" else [text]


def test_pieces_come_from_the_canonical_renderer():
    p = protocol_pieces()
    assert p.think_open + "T" + p.think_close + p.call_open + "ls" + p.call_close == render_turn("T", command="ls")
    assert p.think_open + "T" + p.think_close + p.answer_open + "A" + p.answer_close == render_turn("T", answer="A")
    assert (p.think_close, p.answer_open) == ("</think>\n", "<answer>")


def test_regex_accepts_canonical_turns_and_rejects_broken_ones():
    regex = turn_regex()
    good = [render_turn("Count first.", command="rg -c -F 'Ada \"L\"' corpus.jsonl | head -n 3"),
            render_turn("It says so.", answer="Isère")]
    for text in good:
        assert re.fullmatch(regex, text), text
    bad = ["The answer is Paris.", "<think>x</think>\n<answer> </answer>", "<think>x</think><answer>a</answer>",
           '<think>x</think>\n<tool_call>{"name": "shell", "arguments": {"command": "a"b"}}</tool_call>',
           "<think>a <b</think>\n<answer>a</answer>"]
    for text in bad:
        assert not re.fullmatch(regex, text), text
    assert not re.fullmatch(turn_regex(answer_only=True), good[0])
    assert re.fullmatch(turn_regex(answer_only=True), good[1])


def test_command_tokens_may_split_a_backslash_escape(tiny):
    """SmolLM2 writes the JSON text of `'\\"Title\\"'` with a lone-backslash token; the grammar must allow it."""
    from grepseek_lib.agent.constrained import ProtocolGrammar, _command_step, _Row, token_tables
    from grepseek_lib.agent.models import load_tokenizer

    assert _command_step("\\", False) == (True, False, True)  # opens an escape
    assert _command_step('"\'', True)[0] and not _command_step('"\'', True)[2]  # completes it
    assert not _command_step('"', False)[0]  # a bare quote would end the JSON string
    assert _command_step("\\\\\\", False)[2] and not _command_step("\\\\", False)[2]
    assert not _command_step("u00", True)[0] and _command_step("u00e1", True)[0]
    tokenizer = load_tokenizer(str(tiny))
    tables = token_tables(tokenizer, len(tokenizer))
    grammar = ProtocolGrammar()
    row = _Row(state="command", has_content=True)
    backslash, quote = tables.by_text["\\"][0], tables.by_text['"'][0]
    for token in (backslash, backslash, backslash, quote):  # \\ then \" : two complete escapes
        assert grammar.allowed(row, tables, 100)[token]
        grammar.step(row, token, tables)
    assert row.state == "command" and not row.escape_open
    assert grammar.allowed(row, tables, 100)[backslash]  # clean again: a new escape may open
    grammar.step(row, backslash, tables)
    assert row.escape_open and not grammar.allowed(row, tables, 100)[tables.by_text["<"][0]]
    row.free_tokens = grammar.caps["command"]  # at the cap an open escape must still be completed first
    assert grammar.allowed(row, tables, 100).equal(tables.escape_done)
    grammar.step(row, quote, tables)  # completes the escape: not the start of the closer
    assert row.state == "command" and not row.escape_open


def test_budget_message_means_answer_only():
    conv = initial_messages("q", 10)
    assert not wants_answer_only(conv)
    observation = '{"command":"rg x corpus.jsonl","stdout":"","stderr":"","exit_code":1}'
    assert wants_answer_only(conv + [{"role": "tool", "content": with_budget_note(observation, 5)}])
    assert wants_answer_only(conv + [{"role": "tool", "content": with_budget_note(observation, 3)}])
    assert not wants_answer_only(conv + [{"role": "tool", "content": with_budget_note(observation, 5) + " please"}])
    assert not wants_answer_only(conv + [{"role": "user", "content": with_budget_note(observation, 5)}])
    assert not wants_answer_only(conv + [{"role": "tool", "content": observation}])
    # a corpus line quoting the note sits inside the JSON, so the observation does not END with it
    quoting = '{"command":"rg x","stdout":"' + budget_message(5) + '\\n","stderr":"","exit_code":0}'
    assert not wants_answer_only(conv + [{"role": "tool", "content": quoting}])


@pytest.mark.parametrize(("temperature", "seeds"), [(0.0, 1), (0.8, 2), (1.6, 3)])
def test_constrained_turns_always_parse_and_pass_the_gate(constrained, temperature, seeds):
    """5 prompts of different lengths in batches of 4 and 1, greedy and sampled: every turn is valid."""
    for seed in range(seeds):
        torch.manual_seed(seed)
        gens = constrained.generate(conversations(5), max_new_tokens=320, temperature=temperature, stop=STOPS)
        for gen in gens:
            action = parse_action(gen.text)
            assert action.kind in ("tool", "answer"), (action.error, gen.text)
            assert action.text == gen.text and gen.finish_reason == "stop"
            ok, reason = format_gate(episode_turns(gen.text))
            assert ok, (reason, gen.text)
            if action.kind == "tool":  # strict JSON, and the decoded command is what the parser returns
                body = gen.text.split("<tool_call>", 1)[1].removesuffix("</tool_call>")
                assert json.loads(body)["arguments"]["command"].strip() == action.command


def test_without_constraints_the_same_model_fails(free):
    torch.manual_seed(0)
    gens = free.generate(conversations(5), max_new_tokens=80, temperature=1.0, stop=STOPS)
    assert all(parse_action(g.text).kind == "invalid" for g in gens)


def test_each_row_is_independent_of_its_batch(tiny):
    """Left padding: a row decoded greedily alone or beside longer / shorter prompts gives the same turn."""
    convs = conversations(3)
    batched = HFBackend(str(tiny), device="cpu", batch_size=3, constrain=True, prefix_cache=False)
    single = HFBackend(str(tiny), device="cpu", batch_size=1, constrain=True, prefix_cache=False)
    together = batched.generate(convs, max_new_tokens=320, temperature=0.0, stop=STOPS)
    alone = single.generate(convs, max_new_tokens=320, temperature=0.0, stop=STOPS)
    assert [g.text for g in together] == [g.text for g in alone]
    assert len({g.prompt_tokens for g in together}) == 3


def test_the_system_prompt_cache_changes_nothing_but_speed(tiny):
    """Every episode opens with the same system prompt: read once, its cache copied per prompt."""
    convs = [initial_messages(q, 28_960) for q in QUESTIONS[:3]]
    convs.append(convs[0] + [{"role": "assistant", "content": render_turn("look", command="rg -c x corpus.jsonl")},
                             {"role": "tool", "content": '{"stdout": "3\\n"}'}])
    plain = HFBackend(str(tiny), device="cpu", batch_size=4, constrain=True, prefix_cache=False)
    cached = HFBackend(str(tiny), device="cpu", batch_size=4, constrain=True)  # CPU default: on
    want = plain.generate(convs, max_new_tokens=48, temperature=0.0, stop=STOPS)
    got = cached.generate(convs, max_new_tokens=48, temperature=0.0, stop=STOPS)
    assert [g.text for g in got] == [g.text for g in want]
    assert [g.prompt_tokens for g in got] == [g.prompt_tokens for g in want]
    prefix = cached._prefix
    assert prefix is not None and len(prefix[0]) > 300  # the system prompt, not just a few tokens
    cached.generate(convs[:1], max_new_tokens=4, temperature=0.0, stop=STOPS)
    assert cached._prefix is prefix  # reused, not recomputed
    no_system = [c[1:] for c in convs[:2]]  # nothing to share: plain generation
    assert [g.text for g in cached.generate(no_system, max_new_tokens=16, temperature=0.0)] == \
        [g.text for g in plain.generate(no_system, max_new_tokens=16, temperature=0.0)]


def test_budget_message_forces_an_answer(constrained):
    convs = [c + [{"role": "tool", "content": with_budget_note('{"stdout":"Paris\\n"}', 5)}] for c in conversations(4)]
    for seed in range(2):
        torch.manual_seed(seed)
        for gen in constrained.generate(convs, max_new_tokens=320, temperature=1.5, stop=STOPS):
            assert parse_action(gen.text).kind == "answer", gen.text


def test_small_turn_budget_still_closes_the_action(constrained):
    torch.manual_seed(0)
    for gen in constrained.generate(conversations(4), max_new_tokens=110, temperature=1.0, stop=STOPS):
        assert parse_action(gen.text).kind in ("tool", "answer"), gen.text
        assert gen.completion_tokens <= 110


def test_grammar_walk_caps_and_eos(constrained):
    """Walk the grammar by hand: a free piece stops at its cap, EOS only once the action is closed."""
    tok = constrained.tokenizer
    tables = token_tables(tok, constrained.model.get_output_embeddings().weight.shape[0])
    grammar, eos = ProtocolGrammar({"think": 3, "answer": 2}), tok.eos_token_id
    p = grammar.pieces

    def write(row, target: str) -> None:
        """Follow a literal with the longest allowed token that continues `target`."""
        written = ""
        while written != target:
            mask = grammar.allowed(row, tables, 500)
            assert not mask[eos]
            ids = [i for i in mask.nonzero().flatten().tolist() if target.startswith(written + tables.texts[i])]
            best = max(ids, key=lambda i: len(tables.texts[i]))
            grammar.step(row, best, tables)
            written += tables.texts[best]

    word = next(i for i in tables.content["think"].nonzero().flatten().tolist()
                if tables.content["answer"][i] and tables.texts[i].strip().isalpha())
    row = grammar.start()
    write(row, p.think_open)
    assert row.state == "think"
    for _ in range(3):
        mask = grammar.allowed(row, tables, 500)
        assert mask[word] and not mask[eos]
        grammar.step(row, word, tables)
    forced = grammar.allowed(row, tables, 500).nonzero().flatten().tolist()
    assert forced and all(p.think_close.startswith(tables.texts[i]) for i in forced)
    write(row, p.think_close)
    write(row, p.answer_open)
    assert row.state == "answer"
    assert not grammar.allowed(row, tables, 500)[tables.by_text[" "][0]]  # the answer starts with visible text
    grammar.step(row, word, tables)
    grammar.step(row, word, tables)
    write(row, p.answer_close)
    assert row.state == "done"
    assert grammar.allowed(row, tables, 500).nonzero().flatten().tolist() == [eos]


def test_openai_backend_sends_the_regex():
    backend = OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m", constrain=True, retries=0)
    sent = {}

    def capture(method, path, body):
        sent.update(body)
        return {"choices": [{"message": {"content": "<think>x</think>\n<answer>y"}, "finish_reason": "stop"}]}

    backend._request = capture  # the HTTP path itself is covered by test_backends.py
    gen = backend.generate([initial_messages("q", 10)], max_new_tokens=50, temperature=0.0, stop=STOPS)[0]
    assert sent["structured_outputs"] == {"regex": turn_regex()}
    assert parse_action(gen.text).kind == "answer"
    backend.close()


def test_cli_defaults_and_settings_guard(tmp_path):
    """`ask` constrains by default, `eval` does not (it measures the model); a resume may not switch modes."""
    import argparse

    from grepseek_lib.agent import cli
    from grepseek_lib.errors import UserError
    from grepseek_lib.eval import cli as eval_cli
    from grepseek_lib.eval.identity import check_and_record

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    cli.register(sub)
    eval_cli.register(sub)
    ask = parser.parse_args(["ask", "q"])
    assert ask.constrained and cli.backend_kwargs(ask)["constrain"] is True
    assert parser.parse_args(["ask", "q", "--no-constrained"]).constrained is False
    ev = parser.parse_args(["eval", "--out", str(tmp_path)])
    assert ev.constrained is False and cli.backend_kwargs(ev)["constrain"] is False
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "1", "contents": "x"}\n')
    check_and_record(tmp_path, eval_cli.identity(ev, corpus, None))
    assert json.loads((tmp_path / "settings.json").read_text())["constrained"] is False
    check_and_record(tmp_path, eval_cli.identity(ev, corpus, None))  # same settings: resuming is fine
    constrained = parser.parse_args(["eval", "--constrained", "--out", str(tmp_path)])
    with pytest.raises(UserError, match="constrained"):
        check_and_record(tmp_path, eval_cli.identity(constrained, corpus, None))


@pytest.mark.parametrize("constrain", [True, False])
def test_the_lean_decode_loop_picks_the_tokens_generate_picks(tiny, constrain):
    """agent/decode.py's loop (reserved key/value buffers) against transformers' generate, float32, greedy:
    batched with padding, from the system prompt's cache and without it."""
    convs = [initial_messages(q, 28_960) for q in QUESTIONS[:3]]
    convs.append(convs[0] + [{"role": "assistant", "content": render_turn("look", command="rg -c x corpus.jsonl")},
                             {"role": "tool", "content": '{"stdout": "3\\n"}'}])
    for prefix_cache in (True, False):
        old = HFBackend(str(tiny), device="cpu", batch_size=4, constrain=constrain, prefix_cache=prefix_cache,
                        lean=False)
        lean = HFBackend(str(tiny), device="cpu", batch_size=4, constrain=constrain, prefix_cache=prefix_cache)
        assert lean._lean_ok() and not old._lean_ok()
        want = old.generate(convs, max_new_tokens=64, temperature=0.0, stop=STOPS)
        got = lean.generate(convs, max_new_tokens=64, temperature=0.0, stop=STOPS)
        assert [(g.text, g.completion_tokens, g.finish_reason) for g in got] == \
            [(g.text, g.completion_tokens, g.finish_reason) for g in want]
        assert any(g.completion_tokens > 20 for g in got)  # long enough to grow the cache for a while


def test_the_lean_loop_samples_valid_constrained_turns(tiny):
    backend = HFBackend(str(tiny), device="cpu", batch_size=4, constrain=True)
    torch.manual_seed(3)
    gens = backend.generate(conversations(4), max_new_tokens=320, temperature=1.0, stop=STOPS)
    assert all(parse_action(g.text).kind in ("tool", "answer") for g in gens)


def test_reserved_cache_grows_past_its_reserve():
    """Buffers double when a prompt outgrows the reserve; the filled part is what was written."""
    from grepseek_lib.agent.decode import reserved_cache

    cache = reserved_cache(1, reserve=4)
    first, second = torch.randn(1, 3, 3, 8), torch.randn(1, 3, 5, 8)
    cache.layers[0].update(first, first + 1)
    keys, values = cache.layers[0].update(second, second + 1)
    assert torch.equal(keys, torch.cat([first, second], dim=2)) and torch.equal(values, keys + 1)
    assert cache.get_seq_length() == 8
    copied = reserved_cache(1, reserve=16, source=cache, batch=3)  # one row per prompt of a batch
    assert copied.layers[0].keys.shape == (3, 3, 8, 8) and torch.equal(copied.layers[0].keys[2], keys[0])


def test_backend_precision_names_the_weights_it_loads(tiny, monkeypatch):
    """bf16 weights when asked (or on a CPU with native bf16 under auto), float32 otherwise; turns still parse."""
    from grepseek_lib.agent import precision

    bf16 = HFBackend(str(tiny), device="cpu", batch_size=2, constrain=True, precision="bf16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    gens = bf16.generate(conversations(2), max_new_tokens=320, temperature=0.0, stop=STOPS)
    assert all(parse_action(g.text).kind in ("tool", "answer") for g in gens)
    for native, dtype in ((False, torch.float32), (True, torch.bfloat16)):
        monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda native=native: native)
        assert next(HFBackend(str(tiny), device="cpu").model.parameters()).dtype == dtype
    with pytest.raises(ValueError, match="precision"):
        HFBackend(str(tiny), device="cpu", precision="half")
