"""Float32 attention under bf16 weights (agent/attention.py): switched only where meant, and it masks as SDPA does."""

from __future__ import annotations

import torch

from grepseek_lib.agent.attention import NAME, use_float32_attention
from grepseek_lib.agent.backends import HFBackend
from grepseek_lib.agent.models import load_model_and_tokenizer


def _last_logits(model, rows: list[list[int]], pad: int) -> torch.Tensor:
    """Left-padded batch -> each row's next-token logits."""
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        return model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1].float()


def test_bf16_cpu_models_switch_and_float32_ones_do_not(tiny):
    bf16, _ = load_model_and_tokenizer(str(tiny), device="cpu", dtype="bfloat16")
    f32, _ = load_model_and_tokenizer(str(tiny), device="cpu", dtype="float32")
    assert use_float32_attention(bf16) and bf16.config._attn_implementation == NAME
    assert not use_float32_attention(f32) and f32.config._attn_implementation == "sdpa"


def test_padded_rows_see_only_their_own_tokens_and_stay_near_float32(tiny):
    """A row padded in a batch gives the logits it gives alone (the pads masked), and the bf16 model with
    float32 attention stays as near the float32 model as bf16 attention does."""
    f32, tok = load_model_and_tokenizer(str(tiny), device="cpu", dtype="float32")
    plain, _ = load_model_and_tokenizer(str(tiny), device="cpu", dtype="bfloat16")
    switched, _ = load_model_and_tokenizer(str(tiny), device="cpu", dtype="bfloat16")
    assert use_float32_attention(switched)
    rows = [tok("Who was the brother of Moses? " * 6)["input_ids"], tok("Paris")["input_ids"]]
    batched = _last_logits(switched, rows, tok.pad_token_id)
    alone = torch.cat([_last_logits(switched, [r], tok.pad_token_id) for r in rows])
    scale = alone.abs().max()
    assert (batched - alone).abs().max() <= 0.05 * scale, "the pads leaked into the attention"
    want = _last_logits(f32, rows, tok.pad_token_id)
    gap_switched = (batched - want).abs().max()
    gap_plain = (_last_logits(plain, rows, tok.pad_token_id) - want).abs().max()
    assert gap_switched <= 1.5 * gap_plain + 1e-3


def test_the_backend_switches_the_bf16_models_it_loads(tiny):
    assert HFBackend(str(tiny), device="cpu", precision="bf16").model.config._attn_implementation == NAME
    assert HFBackend(str(tiny), device="cpu", precision="float32").model.config._attn_implementation == "sdpa"
