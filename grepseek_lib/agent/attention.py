"""Attention in float32 for a model whose weights are bf16 on a CPU.

torch's CPU flash-attention kernel is several times slower in bf16 than in float32 when few queries read a
long key/value history, which is every decode step: with bf16 weights the attention took about as long as
all the matmuls together (docs/PERFORMANCE.md). Reading queries, keys and values in float32 and handing the
output back in bf16 keeps the weights' speed-up and the kernel's; the attention itself is then computed more
precisely than in bf16, never less.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

#: The name the function is registered under in transformers' attention registry.
NAME = "grepseek_float32_sdpa"


def float32_sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any
                 ) -> tuple[Any, Any]:
    """transformers' SDPA attention with its inputs in float32 and its output in the query's dtype."""
    if query.dtype == torch.float32:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask,
                                          **kwargs)
    return out.to(query.dtype), weights


def use_float32_attention(model: Any) -> bool:
    """Switch a bf16 model on a CPU from SDPA to `float32_sdpa`; True when it was switched.

    Only for models the backend loaded for inference: a training model under autocast keeps its own attention.
    """
    if (getattr(model, "dtype", None) != torch.bfloat16 or not str(model.device).startswith("cpu")
            or getattr(model.config, "_attn_implementation", None) != "sdpa"):
        return False
    AttentionInterface.register(NAME, float32_sdpa)  # idempotent
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])  # the masks SDPA reads
    model.set_attn_implementation(NAME)
    return True
