"""The trainers' LM head on a CPU: only the positions that carry a label are projected onto the vocabulary.

trl's fused LM head (`add_fused_lm_head`) scores every position of the sequence on devices without Triton, so
that tile shapes never change (a recompilation concern of accelerators), and folds the vocabulary in float32
chunks. On a CPU an SFT example is mostly system prompt, question and tool output, none of it trained on, so
that head was about half of an SFT step (docs/PERFORMANCE.md). This one projects the labelled positions only,
in float32 outside autocast as trl's CPU path does, and returns trl's own output type with the fields its
trainers read, so loss, log-probabilities, entropy and token accuracy keep their meaning.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch
from trl.trainer.utils import FusedCausalLMOutput


def _plain_logits(config: Any) -> bool:
    """True for models whose logits are hidden @ W (+ b): no softcapping or logit scaling to reproduce."""
    text = config.get_text_config()
    scaled = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")
    return all(getattr(text, name, None) is None for name in scaled)


def _scored(hidden: Any, labels: Any, head: Any, temperature: float, entropy_grad: bool) -> tuple[Any, Any, Any]:
    """(log-probability of each label, entropy, whether the label is the top token) for labelled rows; the
    entropy carries gradients only when `entropy_grad` (GRPO may put it in the loss; SFT only logs it)."""
    with torch.autocast(hidden.device.type, enabled=False):
        weight = head.weight.float()
        logits = hidden.float() @ weight.t()
        if head.bias is not None:
            logits = logits + head.bias.float()
        if temperature != 1.0:
            logits = logits / temperature
        log_probs = logits.log_softmax(-1)
        picked = log_probs.gather(-1, labels[:, None]).squeeze(-1)
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = -(log_probs.exp() * log_probs).sum(-1)
        top1 = logits.detach().argmax(-1) == labels
    return picked, entropy, top1


def compact_lm_head(model: Any, temperature: float = 1.0, entropy_grad: bool = False) -> bool:
    """Route `model(..., fused_lm_head=True)` through the labelled-positions-only head; True when installed.

    `model` is the trainer's model; under PEFT the base model is patched, as trl patches it. Left alone on CUDA
    (trl's Triton kernels already score labelled positions only) and for models with scaled or capped logits.
    """
    model = model.get_base_model() if hasattr(model, "get_base_model") else model
    if model.device.type != "cpu" or not _plain_logits(model.config):
        return False
    trl_forward = model.forward

    @functools.wraps(type(model).forward)  # generate() checks its kwargs against this signature, as trl keeps it
    def forward(self: Any, *args: Any, fused_lm_head: bool = False, labels: Any = None, shift_labels: Any = None,
                num_items_in_batch: Any = None, **kwargs: Any) -> Any:
        if not fused_lm_head or shift_labels is not None or kwargs.get("output_router_logits"):
            return trl_forward(*args, fused_lm_head=fused_lm_head, labels=labels, shift_labels=shift_labels,
                               num_items_in_batch=num_items_in_batch, **kwargs)
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state[:, :-1]
        labels = labels[:, 1:].to(hidden.device)
        mask = labels != -100
        picked, entropy, top1 = _scored(hidden[mask], labels[mask], self.get_output_embeddings(), temperature,
                                       entropy_grad)
        log_probs = picked.new_zeros(mask.shape).masked_scatter(mask, picked)
        denominator = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        return FusedCausalLMOutput(
            loss=-log_probs.sum() / denominator, log_probs=log_probs,
            entropy=entropy.new_zeros(mask.shape).masked_scatter(mask, entropy),
            is_top1=torch.zeros_like(mask).masked_scatter(mask, top1), label_mask=mask)

    model.forward = types.MethodType(forward, model)
    return True
