"""The labelled-positions LM head (train/lm_head.py) computes what trl's fused head computes, gradients included."""

from __future__ import annotations

import pytest
import torch
from trl.trainer.utils import add_fused_lm_head

from grepseek_lib.agent.models import load_model_and_tokenizer
from grepseek_lib.train.lm_head import compact_lm_head

FIELDS = ("log_probs", "entropy", "is_top1")


def _pair(tiny, temperature: float):
    models = []
    for compact in (False, True):
        model, tok = load_model_and_tokenizer(str(tiny), device="cpu", dtype="float32")
        add_fused_lm_head(model, temperature=temperature, outputs=FIELDS)
        if compact:
            assert compact_lm_head(model, temperature=temperature, entropy_grad=True)
        models.append(model.train())
    return models, tok


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_compact_head_gives_trls_outputs_and_gradients(tiny, temperature):
    (trl_model, ours), tok = _pair(tiny, temperature)
    ids = torch.tensor([tok("Who was the brother of Moses? Aaron was. " * 4)["input_ids"]] * 2)
    labels = ids.clone()
    labels[0, :20] = -100  # a prompt that is not trained on
    labels[1, :35] = -100
    outs = []
    for model in (trl_model, ours):
        out = model(input_ids=ids, labels=labels, fused_lm_head=True)
        (out.loss + 0.1 * out.entropy.sum()).backward()
        outs.append(out)
    want, got = outs
    assert torch.allclose(got.loss, want.loss, atol=1e-5)
    assert torch.equal(got.label_mask, want.label_mask)
    for field in ("log_probs", "entropy"):
        assert torch.allclose(getattr(got, field), getattr(want, field), atol=1e-4), field
    assert torch.equal(got.is_top1.bool(), want.is_top1.bool())
    for (name, a), b in zip(trl_model.named_parameters(), ours.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-4), name


def test_without_the_fused_flag_the_model_runs_its_own_forward(tiny):
    (_, ours), tok = _pair(tiny, 1.0)
    ids = torch.tensor([tok("Paris is in France")["input_ids"]])
    with torch.no_grad():
        assert ours(input_ids=ids).logits.shape[-1] == ours.config.vocab_size
