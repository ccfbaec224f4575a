"""SFT and GRPO with trl on the tiny offline model: masking, a few real steps, checkpoints, resume, saving."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.prompt import initial_messages
from grepseek_lib.errors import UserError
from grepseek_lib.shell.tool import ShellTool, observation_text
from grepseek_lib.train.configs import GRPOSettings, SFTSettings, load_config

CORPUS_LINES = [
    {"id": "1", "contents": '"Aaron"\nAaron is a prophet and the brother of Moses.'},
    {"id": "2", "contents": '"Paris"\nParis is the capital of France, on the Seine.'},
    {"id": "3", "contents": '"Everest"\nMount Everest is the highest mountain on Earth.'},
]
QUESTIONS = [
    ("Who was the brother of Moses?", "Moses", "Aaron"),
    ("What river flows through Paris?", "Paris", "Seine"),
    ("What is the highest mountain on Earth?", "Everest", "Mount Everest"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A corpus, its training questions, cold-start style chat rows made by the agent's own functions, a tiny model."""
    from grepseek_lib.agent.models import build_tiny_model

    root = tmp_path_factory.mktemp("train")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(line) + "\n" for line in CORPUS_LINES))
    bench = root / "benchmarks"
    bench.mkdir()
    records = [{"id": str(i), "question": q, "golden_answers": [a], "metadata": {}}
               for i, (q, _, a) in enumerate(QUESTIONS)]
    for split in ("hotpotqa_train", "nq"):
        (bench / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    tool = ShellTool(corpus, timeout=10)
    rows = []
    for i, (question, word, answer) in enumerate(QUESTIONS):
        command = f"rg -F '{word}' corpus.jsonl | head -n 2"
        messages = initial_messages(question, len(CORPUS_LINES))
        messages += [{"role": "assistant", "content": render_turn(f"Search for {word}.", command=command)},
                     {"role": "tool", "content": observation_text(tool(command))},
                     {"role": "assistant", "content": render_turn("The passage says it.", answer=answer)}]
        rows.append({"id": str(i), "source": "hotpotqa_train", "golds": [answer], "messages": messages})
    data = root / "sft.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = build_tiny_model(root / "tiny")
    return {"root": root, "corpus": corpus, "bench": bench, "data": data, "rows": rows, "model": str(model)}


def _sft_settings(**kw) -> SFTSettings:
    return dataclasses.replace(SFTSettings(), learning_rate=1e-3, per_device_train_batch_size=1,
                               gradient_accumulation_steps=1, max_length=4096, save_steps=1, **kw)


def test_sft_trains_only_assistant_tokens(world, tmp_path):
    from grepseek_lib.train.sft import build_trainer, load_chat_rows

    rows = load_chat_rows(world["data"])
    trainer, tokenizer = build_trainer(rows, world["model"], tmp_path, _sft_settings())
    example = trainer.train_dataset[0]
    messages = next(r for r in world["rows"] if tokenizer.apply_chat_template(
        r["messages"], tokenize=True, return_dict=False) == example["input_ids"])["messages"]
    decoded = check_masks(trainer, tokenizer, 0)
    expected = "".join(m["content"] + "<|im_end|>" for m in messages if m["role"] == "assistant")
    assert decoded["trained"] == expected  # every assistant token, its end-of-turn, nothing else
    assert messages[0]["content"] in decoded["masked"]  # system prompt
    assert "Query: " in decoded["masked"] and "<tool_response>" in decoded["masked"]
    assert messages[3]["content"] in decoded["masked"]  # the tool observation
    assert "Query:" not in decoded["trained"] and "exit_code" not in decoded["trained"]


def test_a_no_loss_turn_is_shown_but_not_trained(world, tmp_path):
    """A replayed repeat (cold start's refused mistake) sits in the context but carries no labels; the turn
    after it is trained; the row keeps one schema; `no_loss` anywhere but an assistant turn is an error."""
    from grepseek_lib.train.sft import build_trainer, load_chat_rows

    row = dict(world["rows"][0])
    call, observation, answer = row["messages"][-3:]
    repeat = {"role": "assistant", "content": call["content"].replace("Search for", "Search again for"),
              "no_loss": True}
    row["messages"] = [*row["messages"][:-1], repeat, {"role": "tool", "content": "refused"}, answer]
    data = tmp_path / "repeat.jsonl"
    data.write_text(json.dumps(row) + "\n" + json.dumps(world["rows"][1]) + "\n")
    rows = load_chat_rows(data)
    assert [m["no_loss"] for m in rows[0]["messages"]].count(True) == 1
    assert not any(m["no_loss"] for m in rows[1]["messages"])
    trainer, tokenizer = build_trainer(rows, world["model"], tmp_path / "out", _sft_settings())
    index = next(i for i, r in enumerate(trainer.train_dataset) if "Search again" in tokenizer.decode(r["input_ids"]))
    decoded = check_masks(trainer, tokenizer, index)
    assert "Search again" not in decoded["trained"] and "Search again" in decoded["masked"]
    assert decoded["trained"] == call["content"] + "<|im_end|>" + answer["content"] + "<|im_end|>"
    bad = dict(row, messages=[*row["messages"][:-1], {"role": "tool", "content": "x", "no_loss": True}, answer])
    data.write_text(json.dumps(bad) + "\n")
    with pytest.raises(UserError, match="no_loss"):
        load_chat_rows(data)


def test_sft_steps_save_and_resume(world, tmp_path):
    from grepseek_lib.agent.models import load_model_and_tokenizer
    from grepseek_lib.train.sft import run_sft

    out = tmp_path / "sft"
    summary = run_sft(world["data"], world["model"], out, _sft_settings(), max_steps=2)
    assert summary["steps"] == 2 and (out / "checkpoints" / "checkpoint-2").is_dir()
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in m for m in metrics)
    resumed = run_sft(world["data"], world["model"], out, _sft_settings(), max_steps=3, resume=True)
    assert resumed["resumed_from"].endswith("checkpoint-2") and resumed["steps"] == 3
    model, tokenizer = load_model_and_tokenizer(str(out), device="cpu")  # a plain HF folder
    assert tokenizer.eos_token == "<|im_end|>" and "generation" in tokenizer.chat_template


def test_a_resume_with_other_settings_starts_afresh_and_clears_the_old_steps(world, tmp_path, capsys):
    """Checkpoints belong to one run (model, data, settings): another run in the same OUT never continues
    them, and its fresh start removes them so the trainer's rotation cannot mix old and new steps."""
    from grepseek_lib.train.sft import run_sft

    out = tmp_path / "sft"
    run_sft(world["data"], world["model"], out, _sft_settings(), max_steps=2)
    other = run_sft(world["data"], world["model"], out, dataclasses.replace(_sft_settings(), learning_rate=5e-4), max_steps=1, resume=True)
    assert other["resumed_from"] is None and "another run's steps" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1"]
    again = run_sft(world["data"], world["model"], out, dataclasses.replace(_sft_settings(), learning_rate=5e-4), max_steps=2, resume=True)
    assert again["resumed_from"].endswith("checkpoint-1") and again["steps"] == 2
    fresh = run_sft(world["data"], world["model"], out, dataclasses.replace(_sft_settings(), learning_rate=5e-4), max_steps=1)
    assert fresh["resumed_from"] is None and sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1"]


def test_sft_lora_merges_into_plain_model(world, tmp_path):
    from grepseek_lib.train.sft import run_sft

    out = tmp_path / "lora"
    run_sft(world["data"], world["model"], out, _sft_settings(lora_r=4, lora_alpha=8), lora=True, max_steps=1)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "qwen3" and not (out / "adapter_config.json").exists()


def test_sft_rejects_bad_data(tmp_path):
    from grepseek_lib.train.sft import load_chat_rows

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n")
    with pytest.raises(UserError, match="answer turn"):
        load_chat_rows(bad)
    with pytest.raises(UserError, match="not found"):
        load_chat_rows(tmp_path / "missing.jsonl")


def _grpo_settings(**kw) -> GRPOSettings:
    base = dict(num_generations=2, questions_per_step=2, per_device_train_batch_size=2, max_steps=1,
                learning_rate=1e-4, max_completion_length=160, max_turn_tokens=24, max_obs_tokens=64,
                tool_timeout_s=10, gradient_checkpointing=False, use_vllm=False,
                train_splits=("hotpotqa_train",))
    return dataclasses.replace(GRPOSettings(), **{**base, **kw})


def _train_scripted(trainer, tokenizer, monkeypatch, reply) -> dict:
    """Run `trainer.train()` with trl's tool loop intact but each turn's text from `reply(tool calls so far)`
    instead of sampling; returns the tool mask and completion ids of the last rollout batch."""
    def scripted(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        # count tool responses after the question only (the system prompt shows an example)
        texts = [reply(tokenizer.decode(ids).rsplit("Query:", 1)[-1].count("<tool_response>")) for ids in prompt_ids]
        return [tokenizer.encode(t + "<|im_end|>", add_special_tokens=False) for t in texts], None

    captured = {}
    real_loop = trainer._tool_call_loop

    def spy(*args):
        result = real_loop(*args)
        captured["mask"], captured["ids"] = result[0], result[2]
        return result

    monkeypatch.setattr(trainer, "_generate_single_turn", scripted)
    monkeypatch.setattr(trainer, "_tool_call_loop", spy)
    trainer.train()
    return captured


def test_grpo_multi_turn_tool_loop_masks_observations(world, tmp_path, monkeypatch):
    """trl's own tool loop, our shell tool and reward, with scripted turns in place of sampling."""
    from grepseek_lib.train import grpo

    settings = _grpo_settings()
    questions = grpo.load_questions(settings.train_splits, world["bench"])
    trainer, tokenizer = grpo.build_trainer(world["model"], tmp_path / "g", settings, corpus=world["corpus"],
                                            questions=questions)
    with pytest.raises(UserError, match="questions_per_step=2"):  # one question cannot fill a step of two
        grpo.build_trainer(world["model"], tmp_path / "g1", settings, corpus=world["corpus"], questions=questions[:1])
    call = render_turn("Search.", command="rg -F 'Moses' corpus.jsonl | head -n 1")
    answers = iter(["Aaron", "Paris"] * 8)
    captured = _train_scripted(trainer, tokenizer, monkeypatch, lambda calls: render_turn(
        "Done.", answer=next(answers)) if calls else call)
    mask, ids = captured["mask"][0], captured["ids"][0]
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    hidden = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    assert trained.startswith(call + "<|im_end|>") and trained.count("<|im_end|>") == 2
    assert "<tool_response>" in hidden and "brother of Moses" in hidden and "exit_code" in hidden
    assert "<tool_response>" not in trained
    parts = grpo.read_reward_parts(tmp_path / "g" / grpo.REWARD_PARTS_FILE)
    assert parts[0]["format_pass_rate"] == 1.0 and parts[0]["tool_calls"] == 1.0
    assert 0.0 < parts[0]["reward"] < 1.0  # some rollouts answered right, some wrong
    groups = parts[0]["rewards"]  # each question's group, keyed by its id
    assert set(groups) <= {q["id"] for q in questions} and [len(g) for g in groups.values()] == [2] * len(groups)


def test_grpo_rollout_gets_the_loops_budget_note_on_its_last_call(world, tmp_path, monkeypatch):
    """Rollouts that spend the budget see the same note as the agent loop, once, and may then answer."""
    from grepseek_lib.agent.prompt import budget_message
    from grepseek_lib.train import grpo

    settings = _grpo_settings(max_tool_calls=2, max_completion_length=600, max_obs_tokens=32)
    questions = grpo.load_questions(settings.train_splits, world["bench"])
    trainer, tokenizer = grpo.build_trainer(world["model"], tmp_path / "g", settings, corpus=world["corpus"],
                                            questions=questions)
    call = render_turn("Search.", command="rg -F 'Moses' corpus.jsonl | head -n 1")
    captured = _train_scripted(trainer, tokenizer, monkeypatch,
                               lambda calls: render_turn("Done.", answer="Aaron") if calls >= 2 else call)
    for mask, ids in zip(captured["mask"], captured["ids"], strict=True):
        hidden = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
        trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
        assert hidden.count("<tool_response>") == 2 and hidden.count(budget_message(2)) == 1
        assert hidden.index(budget_message(2)) > hidden.rindex("<tool_response>")  # on the last call only
        assert trained.endswith("<answer>Aaron</answer><|im_end|>")
    parts = grpo.read_reward_parts(tmp_path / "g" / grpo.REWARD_PARTS_FILE)
    assert parts[0]["tool_calls"] == 2.0 and parts[0]["answer_rate"] == 1.0


def test_shell_environment_counts_calls_per_rollout(world):
    from grepseek_lib.agent.prompt import budget_message
    from grepseek_lib.train.grpo import ShellEnvironment

    env = ShellEnvironment(ShellTool(world["corpus"], timeout=10), max_tool_calls=2)
    first, second = env.shell("wc -l corpus.jsonl"), env.shell("rg -c -F Paris corpus.jsonl")
    assert budget_message(2) not in first and second.endswith("\n\n" + budget_message(2))
    assert json.loads(second.split("\n\n")[0])["stdout"] == "1\n"
    env.reset(prompt=[], golds=["x"], id="0")
    assert budget_message(2) not in env.shell("wc -l corpus.jsonl")  # a new rollout starts from zero
    repeat = json.loads(env.shell(" wc -l corpus.jsonl").split("\n\n")[0])  # the same call again
    assert repeat["exit_code"] == 126 and repeat["stdout"] == "" and "tool call 1" in repeat["stderr"]


def test_grpo_real_steps_checkpoint_resume_and_save(world, tmp_path):
    from grepseek_lib.agent.models import load_model_and_tokenizer
    from grepseek_lib.train import grpo

    out = tmp_path / "grpo"
    kw = dict(corpus=world["corpus"], benchmarks_dir=world["bench"])
    summary = grpo.run_grpo(world["model"], out, _grpo_settings(), max_steps=1, **kw)
    assert summary["steps"] == 1 and (out / "checkpoints" / "checkpoint-1").is_dir()
    resumed = grpo.run_grpo(world["model"], out, _grpo_settings(), max_steps=2, resume=True, **kw)
    assert resumed["resumed_from"].endswith("checkpoint-1") and resumed["steps"] == 2
    assert [p["step"] for p in grpo.read_reward_parts(out / grpo.REWARD_PARTS_FILE)] == [1, 2]
    load_model_and_tokenizer(str(out), device="cpu")
    again = grpo.run_grpo(world["model"], out, _grpo_settings(), max_steps=2, resume=True, **kw)
    assert again["steps"] == 2  # a finished run resumed: no extra step
    assert [p["step"] for p in grpo.read_reward_parts(out / grpo.REWARD_PARTS_FILE)] == [1, 2]


def test_informative_questions_put_reward_spread_first():
    from grepseek_lib.train.grpo import informative_questions

    probed = [{"id": "flat0", "probe_rewards": [0.0, 0.0]}, {"id": "flat1", "probe_rewards": [1.0, 1.0]},
              {"id": "some", "probe_rewards": [0.0, 0.4]}, {"id": "wide", "probe_rewards": [1.0, 0.0]}]
    assert [q["id"] for q in informative_questions(probed, 3)] == ["wide", "some", "flat1"]


def test_grpo_probe_chooses_and_a_resume_keeps_the_questions(world, tmp_path, monkeypatch, capsys):
    from grepseek_lib.train import grpo

    settings = dataclasses.replace(_grpo_settings(), probe_candidates=3, probe_samples=2, max_questions=2)
    seen = []

    def fake_probe(model_name, questions, settings, **kw):  # the real probe runs below with the tiny model
        seen.append([q["id"] for q in questions])
        return [{**q, "probe_rewards": [0.0, 0.0] if k != 1 else [0.0, 0.5]} for k, q in enumerate(questions)]

    kw = dict(corpus=world["corpus"], shards=None, benchmarks_dir=world["bench"])
    real = grpo.probe_questions(world["model"], grpo.load_questions(("hotpotqa_train",), world["bench"])[:1],
                                dataclasses.replace(settings, max_turn_tokens=16), corpus=world["corpus"])
    assert len(real) == 1 and len(real[0]["probe_rewards"]) == 2
    from grepseek_lib.train.plumbing import load_trainable

    model, tokenizer, _ = load_trainable(world["model"])  # the trainer's own model: probed, left in train mode
    again = grpo.probe_questions((model, tokenizer), [real[0]], dataclasses.replace(settings, max_turn_tokens=16),
                                 corpus=world["corpus"])
    assert len(again[0]["probe_rewards"]) == 2 and model.training
    monkeypatch.setattr(grpo, "probe_questions", fake_probe)
    chosen = grpo.choose_questions(world["model"], tmp_path, settings, resume=False, **kw)
    assert len(seen[0]) == 3 and len(chosen) == 2 and chosen[0]["id"] == seen[0][1]
    assert json.loads((tmp_path / grpo.QUESTIONS_FILE).read_text()) == chosen
    assert grpo.choose_questions(world["model"], tmp_path, settings, resume=True, **kw) == chosen
    assert len(seen) == 1  # resumed: no second probe
    plain = grpo.choose_questions(world["model"], tmp_path, dataclasses.replace(settings, probe_candidates=0),
                                  resume=False, **kw)
    assert len(plain) == 2 and "probe_rewards" not in plain[0]
    (tmp_path / grpo.QUESTIONS_FILE).unlink()  # a run from before the choice was saved: probed again, and said
    assert grpo.choose_questions(world["model"], tmp_path, settings, resume=True, **kw) == chosen
    said = capsys.readouterr()
    assert len(seen) == 2 and "probing again" in said.out and "probe: 100%" in said.err  # the probe's bar


@pytest.mark.parametrize(("splitting", "rounds"), [({2, 5}, 1), ({2, 11}, 2), ({12}, 3), (set(), 3)])
def test_the_probe_goes_on_in_rounds_until_enough_questions_split(monkeypatch, capsys, splitting, rounds):
    from grepseek_lib.train import grpo

    seen = []

    def fake_probe(policy, questions, settings, **kw):
        seen.append([q["id"] for q in questions])
        return [{**q, "probe_rewards": [0.0, 0.5] if q["id"] in splitting else [0.0, 0.0]} for q in questions]

    monkeypatch.setattr(grpo, "probe_questions", fake_probe)
    candidates = [{"id": k} for k in range(20)]
    probed = grpo.probe_in_rounds("policy", candidates, _grpo_settings(), 2)
    assert len(seen) == rounds and [len(r) for r in seen] == [8, 8, 4][:rounds]
    assert [q["id"] for q in probed] == list(range(len(probed)))
    assert [q["id"] for q in grpo.informative_questions(probed, 2)][:len(splitting)] == sorted(splitting)
    assert f"{len(splitting)} of {len(probed)} questions have differing rewards" in capsys.readouterr().out


def test_grpo_skips_the_pass_when_every_advantage_is_zero(monkeypatch):
    from collections import defaultdict

    import torch
    from trl import GRPOTrainer

    from grepseek_lib.train.grpo import skipping_trainer_class

    cls = skipping_trainer_class()
    trainer = object.__new__(cls)  # only the attributes compute_loss reads
    trainer.beta, trainer._metrics = 0.0, {"train": defaultdict(list)}
    monkeypatch.setattr(GRPOTrainer, "compute_loss", lambda self, model, inputs, **kw: torch.tensor(7.0))
    model = torch.nn.Linear(3, 2)
    loss = trainer.compute_loss(model, {"advantages": torch.zeros(4)})
    loss.backward()
    assert float(loss) == 0.0 and all(float(p.grad.abs().sum()) == 0.0 for p in model.parameters())
    assert float(trainer.compute_loss(model, {"advantages": torch.tensor([0.0, 0.5, -0.5, 0.0])})) == 7.0
    trainer.beta = 0.04  # with a KL term a zero advantage still has a gradient: never skipped
    assert float(trainer.compute_loss(model, {"advantages": torch.zeros(4)})) == 7.0
    assert trainer.skipped_micro_batches == 1 and trainer._metrics["train"]["skipped_fraction"] == [1.0, 0.0, 0.0]
    trainer.beta, trainer.skip_zero_advantages = 0.0, False  # benchmarks time every path's update
    assert float(trainer.compute_loss(model, {"advantages": torch.zeros(4)})) == 7.0


def test_configs():
    cpu, gpu = load_config("cpu"), load_config("gpu")
    assert cpu.model == "smollm2" and cpu.grpo.use_vllm is False and cpu.grpo.temperature == 0.7
    assert (cpu.grpo.questions_per_step, cpu.grpo.max_questions) == (2, 2)  # every step sees the whole pool
    assert (gpu.grpo.num_generations, gpu.grpo.questions_per_step, gpu.grpo.max_steps) == (5, 256, 200)
    assert (gpu.grpo.learning_rate, gpu.grpo.beta, gpu.grpo.epsilon, gpu.grpo.temperature) == (5e-6, 0.0, 0.2, 1.0)
    assert gpu.grpo.tool_timeout_s == 180.0 and gpu.sft.num_train_epochs == 1 and gpu.sft.learning_rate == 5e-6
    assert gpu.grpo.rollouts_per_step == gpu.grpo.gradient_accumulation_steps * gpu.grpo.per_device_train_batch_size


def test_config_file_overrides(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("base: cpu\nsft:\n  learning_rate: 0.001\ngrpo:\n  max_steps: 3\n")
    cfg = load_config(path)
    assert cfg.sft.learning_rate == 0.001 and cfg.grpo.max_steps == 3 and cfg.name == "mine"
    path.write_text("grpo:\n  no_such_thing: 1\n")
    with pytest.raises(UserError, match="no_such_thing"):
        load_config(path)
    with pytest.raises(UserError):
        load_config(Path(tmp_path / "missing.yaml"))


def test_config_files_are_checked_whole(tmp_path):
    """Types and ranges fail at load, naming the key; YAML's `1e-4` (a string to PyYAML) and ints are fine numbers."""
    path = tmp_path / "mine.yaml"
    path.write_text("base: gpu\nsft:\n  learning_rate: 1e-4\n  num_train_epochs: 2\n"
                    "grpo:\n  train_splits: [hotpotqa_train]\n  max_questions: null\n")
    cfg = load_config(path)
    assert cfg.sft.learning_rate == 1e-4 and cfg.sft.num_train_epochs == 2.0
    assert isinstance(cfg.sft.num_train_epochs, float) and cfg.grpo.train_splits == ("hotpotqa_train",)
    bad = {"sft:\n  max_length: 2.5\n": "sft.max_length must be an integer, got 2.5",
           "sft:\n  lora: 1\n": "sft.lora must be true/false",
           "grpo:\n  max_questions: -1\n": "grpo.max_questions must be positive",
           "grpo:\n  beta: -0.1\n": "grpo.beta must be 0 or more",
           "grpo:\n  train_splits: hotpotqa_train\n": "grpo.train_splits must be a list of strings",
           "grpo:\n  scale_rewards: always\n": "grpo.scale_rewards must be one of",
           "sft:\n  precision: fp16\n": "sft.precision must be one of ['auto', 'float32', 'bf16']",
           "grpo:\n  precision: 16\n": "grpo.precision must be a string",
           "sft:\n  learning_rate: .nan\n": "sft.learning_rate must be a finite number",
           "grpo:\n  questions_per_step: 3\n  per_device_train_batch_size: 5\n": "must divide"}
    for text, message in bad.items():
        path.write_text(text)
        with pytest.raises(UserError, match=re.escape(message)):
            load_config(path)


def test_search_habits_count_loops_and_spent_budgets():
    from grepseek_lib.agent.actions import parse_action
    from grepseek_lib.agent.trajectory import Trajectory, Turn
    from grepseek_lib.train.format_check import search_habits

    def episode(*commands: str) -> Trajectory:
        turns = [Turn(text=c, action=parse_action(render_turn("Search.", command=c))) for c in commands]
        for turn in turns:
            turn.observation = {"stdout": ""}
        return Trajectory(question="q", turns=turns)

    loop = episode("rg -F 'a' corpus.jsonl | wc -l", "rg -F 'b' corpus.jsonl", "rg -F 'a' corpus.jsonl | wc -l")
    spent = episode(*(f"rg -F '{w}' corpus.jsonl" for w in "abcde"))
    assert search_habits([loop, spent, episode("rg x corpus.jsonl")]) == {
        "repeated_command_episodes": 1, "all_calls_spent_episodes": 1}


def test_format_check_runs_agent_episodes(world, tmp_path, capsys):
    from grepseek_lib.agent.trajectory import load_jsonl
    from grepseek_lib.train.format_check import format_check

    result = format_check(world["model"], limit=2, benchmarks=["nq"], corpus=world["corpus"],
                          benchmarks_dir=world["bench"], max_new_tokens=16, out=tmp_path, max_obs_tokens=64)
    assert result["episodes"] == 2 and 0.0 <= result["format_pass_rate"] <= 1.0
    episodes = load_jsonl(tmp_path / "format_check_episodes.jsonl")
    assert all("past about 64 tokens" in e.messages[0]["content"] for e in episodes)  # the prompt states the cap
    assert (tmp_path / "format_check_episodes.jsonl").is_file()
    assert 0 <= result["repeated_command_episodes"] <= 2 and 0 <= result["all_calls_spent_episodes"] <= 2
    assert 0 <= result["evidence_cut_by_cap_episodes"] <= 2
    assert "format-check: 100%" in capsys.readouterr().err  # a bar of finished episodes
    with pytest.raises(UserError, match="training splits"):
        format_check(world["model"], limit=1, benchmarks=["hotpotqa_train"], corpus=world["corpus"],
                     benchmarks_dir=world["bench"])


def test_format_check_resumes_after_the_last_finished_batch(world, tmp_path, monkeypatch):
    from grepseek_lib.train import format_check as fc

    args = dict(limit=2, benchmarks=["nq"], corpus=world["corpus"], benchmarks_dir=world["bench"],
                max_new_tokens=16, batch_size=1, out=tmp_path)
    first = fc.format_check(world["model"], **args)
    lines = (tmp_path / fc.EPISODES_FILE).read_text().splitlines()
    assert len(lines) == 2  # appended a batch at a time
    (tmp_path / fc.EPISODES_FILE).write_text(lines[0] + "\n")  # as if killed during the second batch
    ran = []
    real = fc.run_batch
    monkeypatch.setattr(fc, "run_batch", lambda items, *a, **k: ran.append(len(items)) or real(items, *a, **k))
    again = fc.format_check(world["model"], **args)
    assert ran == [1] and again["episodes"] == 2
    assert again["format_pass_rate"] == first["format_pass_rate"] and again["mean_f1"] == first["mean_f1"]
    ran.clear()
    assert fc.format_check(world["model"], **args)["episodes"] == 2 and ran == []  # all done: nothing runs
    with pytest.raises(UserError, match="other settings"):
        fc.format_check(world["model"], **{**args, "max_new_tokens": 8})
    with pytest.raises(UserError, match="other settings"):  # another observation cap is another check
        fc.format_check(world["model"], **{**args, "max_obs_tokens": 64})
    (tmp_path / fc.RUN_FILE).write_text("{broken")
    with pytest.raises(UserError, match="other settings"):
        fc.format_check(world["model"], **args)


def test_precision_settings_pick_bf16_only_where_it_is_native(monkeypatch):
    """auto: bf16 autocast on a CPU with native bf16, float32 where it would be emulated; forced values win."""
    from grepseek_lib.agent import precision
    from grepseek_lib.train.plumbing import precision_flags

    assert load_config("cpu").sft.precision == "auto" and load_config("gpu").grpo.precision == "auto"
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    for native, want in ((True, True), (False, False)):
        monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda native=native: native)
        assert precision_flags("auto") == {"bf16": want, "fp16": False, "use_cpu": True}
    assert precision_flags("bf16")["bf16"] and not precision_flags("float32")["bf16"]
    with pytest.raises(UserError, match="precision"):
        precision_flags("half")


def test_bf16_sft_trains_like_float32(world, tmp_path):
    """Autocast over float32 master weights: the same examples give nearly the same losses, weights stay float32."""
    from grepseek_lib.train.sft import build_trainer, load_chat_rows

    losses = {}
    for name in ("float32", "bf16"):
        trainer, _ = build_trainer(load_chat_rows(world["data"]), world["model"], tmp_path / name,
                                   _sft_settings(precision=name), max_steps=3)
        trainer.train()
        losses[name] = [r["loss"] for r in trainer.state.log_history if "loss" in r]
        assert next(trainer.model.parameters()).dtype.is_floating_point
        assert str(next(trainer.model.parameters()).dtype) == "torch.float32"
    assert trainer.args.bf16 and len(losses["bf16"]) == 3
    assert max(abs(a - b) for a, b in zip(losses["float32"], losses["bf16"], strict=True)) < 0.05
    assert losses["float32"] != losses["bf16"]  # autocast really ran in bf16


def check_masks(trainer, tokenizer, index: int = 0) -> dict[str, str]:
    """Decode one prepared example: the trained text (labels != -100) and the masked text, to verify masking."""
    row = trainer.train_dataset[index]
    ids, labels = row["input_ids"], row["labels"]
    trained = [t for t, lab in zip(ids, labels, strict=True) if lab != -100]
    masked = [t for t, lab in zip(ids, labels, strict=True) if lab == -100]
    return {"trained": tokenizer.decode(trained), "masked": tokenizer.decode(masked)}


def test_grpo_lean_rollout_turns_sample_what_trls_generate_samples(world, tmp_path):
    """train/grpo_rollouts.py: the same seed gives the same sampled turns on the lean loop (with the second turn
    read from the first turn's kept cache) as on trl's own `model.generate`; an optimizer step drops the caches."""
    torch = pytest.importorskip("torch")
    from grepseek_lib.train import grpo

    settings = _grpo_settings(temperature=1.0, max_turn_tokens=24, precision="float32")
    questions = grpo.load_questions(settings.train_splits, world["bench"])
    trainer, tokenizer = grpo.build_trainer(world["model"], tmp_path / "g", settings, corpus=world["corpus"],
                                            questions=questions)
    assert trainer.lean_rollouts and trainer._lean_applies(None, {})
    prompts = [tokenizer(tokenizer.apply_chat_template(initial_messages(q, 3), tokenize=False,
                                                       add_generation_prompt=True), add_special_tokens=False)
               ["input_ids"] for q, _, _ in QUESTIONS for _ in range(2)]
    suffix = tokenizer("\n<|im_start|>user\n<tool_response>\nnothing\n</tool_response><|im_end|>\n"
                       "<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    turns = {}
    for lean in (False, True):
        trainer.lean_rollouts, trainer._rollout_backend = lean, None
        torch.manual_seed(7)
        first, _ = trainer._generate_single_turn(prompts, None, {}, 2)
        second, _ = trainer._generate_single_turn([p + c + suffix for p, c in zip(prompts, first, strict=True)],
                                                  None, {}, 1)
        turns[lean] = (first, second)
    assert turns[True] == turns[False]
    assert any(len(c) > 4 for c in turns[True][0])  # sampled turns of some length, not empty ones
    step, _, backend = trainer._rollout_backend
    assert backend.model is trainer.model  # float32 training samples from the policy itself
    assert backend.reused_tokens >= sum(len(p) for p in prompts)  # turn 2 started from turn 1's caches
    trainer.state.global_step = step + 1  # the weights changed: the next turn starts from no cache
    trainer._generate_single_turn(prompts[:1], None, {}, 1)
    assert trainer._rollout_backend[2] is not backend and trainer._rollout_backend[2].reused_tokens == 0


def test_grpo_rollouts_under_cpu_autocast_decode_on_a_bf16_copy_refreshed_each_step(world, tmp_path):
    """plumbing.sampling_copy: with bf16 autocast over float32 weights, rollouts (and the probe) sample from a
    bf16 copy holding the policy's current weights; the copy is refreshed in place once the optimizer stepped."""
    torch = pytest.importorskip("torch")
    from grepseek_lib.train import grpo
    from grepseek_lib.train.plumbing import sampling_copy

    settings = _grpo_settings(temperature=1.0, max_turn_tokens=8, precision="bf16")
    questions = grpo.load_questions(settings.train_splits, world["bench"])
    trainer, tokenizer = grpo.build_trainer(world["model"], tmp_path / "g", settings, corpus=world["corpus"],
                                            questions=questions)
    policy = trainer.model
    assert trainer.args.bf16 and policy.dtype == torch.float32
    prompt = tokenizer(tokenizer.apply_chat_template(initial_messages(QUESTIONS[0][0], 3), tokenize=False,
                                                     add_generation_prompt=True), add_special_tokens=False)["input_ids"]

    def copy_matches_policy(copy) -> bool:
        theirs = {k: v.to(torch.bfloat16) for k, v in policy.state_dict().items()}
        return all(torch.equal(v, theirs[k]) for k, v in copy.state_dict().items())

    trainer._generate_single_turn([prompt, prompt], None, {}, 2)
    copy = trainer._rollout_backend[2].model
    assert copy is not policy and copy.dtype == torch.bfloat16 and not copy.training and copy_matches_policy(copy)
    with torch.no_grad():
        next(policy.parameters()).add_(0.5)  # as an optimizer step would
    assert not copy_matches_policy(copy)
    trainer.state.global_step += 1
    trainer._generate_single_turn([prompt], None, {}, 1)
    assert trainer._rollout_backend[2].model is copy and copy_matches_policy(copy)
    assert sampling_copy(policy, False) is policy  # float32 training: the policy itself


def test_reward_trend_says_how_many_rollouts_each_side_stands_on():
    from grepseek_lib.train.grpo import reward_trend

    steps = [{"reward": r, "n": 8} for r in (0.1, 0.2, 0.3, 0.4)]
    trend = reward_trend(steps)
    assert trend["trend_window"] == 2 and trend["rollouts_first"] == trend["rollouts_last"] == 16
    assert trend["reward_first"] == pytest.approx(0.15) and trend["reward_last"] == pytest.approx(0.35)
    odd = reward_trend([{"reward": r, "n": 8} for r in (0.1, 0.9, 0.3)])
    assert odd["trend_window"] == 1 and odd["reward_first"] == pytest.approx(0.1) and odd["reward_last"] == 0.3
    assert "f1_first" not in trend
    parts = reward_trend([{"reward": r - 0.5, "f1": r, "n": 8} for r in (0.1, 0.2, 0.3, 0.4)])
    assert parts["f1_first"] == pytest.approx(0.15) and parts["f1_last"] == pytest.approx(0.35)
    assert parts["reward_first"] == pytest.approx(-0.35)
    assert reward_trend([]) == {}
