"""A tiny policy whose replies are known in advance: tests of backends, the loop and trainers check exact
behaviour (stop strings, tool calls, answers) with it. Test-only, so it lives with the tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from grepseek_lib.agent.models import MARKER, build_once


def teach_tiny_model(base: Path, out_dir: Path, examples: list[tuple[list[dict], str]], steps: int = 150,
                     lr: float = 1e-2, seed: int = 0) -> Path:
    """Fine-tune a tiny model until it answers each conversation with the given reply (greedy).

    A real policy whose output is known in advance, so tests of backends, the agent loop and trainers can
    check exact behaviour (stop strings, tool calls, answers) without a large model.
    """
    examples = [(list(conv), str(reply)) for conv, reply in examples]
    base_key = json.loads((Path(base) / MARKER).read_text())["key"]
    digest = hashlib.sha256(json.dumps(examples, sort_keys=True).encode()).hexdigest()
    key = {"kind": "taught", "base": base_key, "examples": digest, "steps": steps, "lr": lr, "seed": seed}

    def build(tmp: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        rows = []
        for conv, reply in examples:
            full = tokenizer.apply_chat_template(conv + [{"role": "assistant", "content": reply}], tokenize=True,
                                                 return_dict=True, return_assistant_tokens_mask=True)
            ids, mask = full["input_ids"], full["assistant_masks"]
            rows.append((ids, [i if m else -100 for i, m in zip(ids, mask, strict=True)]))
        width = max(len(ids) for ids, _ in rows)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in rows])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
        attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows])
        torch.manual_seed(seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        model.train()
        for _ in range(steps):
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    return build_once(Path(out_dir), key, build)
