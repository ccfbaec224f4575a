"""A lean decode loop for the HF backend: the same forward calls `model.generate` makes, without its overhead.

On a CPU a 135M model spends most of a decode step outside the arithmetic: `DynamicCache` re-concatenates
every layer's whole key/value history for each new token (a copy that grows with the context), and
`generate` rebuilds its inputs, runs its stopping criteria and decodes tails per step. Here the cache
layers write into buffers reserved ahead (`ReservedLayer`: views of the filled part, the same values and
shapes the attention reads from a concatenated cache) and the loop feeds the model exactly what `generate`
feeds it (positions from the attention mask, `logits_to_keep=1`, the mask dropped when it has no pad), so
greedy tokens are the ones `generate` picks; tests/test_constrained.py compares them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transformers.cache_utils import DynamicCache, DynamicLayer

#: A stop test over the generated ids so far -> one bool a row (True: that row is done).
StopTest = Callable[[Any], Any]


class ReservedLayer(DynamicLayer):
    """A DynamicLayer that appends into a reserved buffer (doubling when full) instead of `torch.cat`."""

    def __init__(self, reserve: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        self.reserve, self.length = int(reserve), 0
        self._k: Any = None
        self._v: Any = None

    def _grow(self, need: int, like: Any) -> None:
        import torch

        size = max(need, self.reserve, 2 * (0 if self._k is None else self._k.shape[-2]))
        shape = (*like.shape[:-2], size, like.shape[-1])
        k = torch.empty(shape, dtype=like.dtype, device=like.device)
        v = torch.empty_like(k)
        if self._k is not None:
            k[..., :self.length, :] = self._k[..., :self.length, :]
            v[..., :self.length, :] = self._v[..., :self.length, :]
        self._k, self._v = k, v

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if self._k is None or end > self._k.shape[-2] or self._k.shape[0] != key_states.shape[0]:
            self._grow(end, key_states)
        self._k[..., self.length:end, :] = key_states
        self._v[..., self.length:end, :] = value_states
        self.length = end
        self.keys, self.values = self._k[..., :end, :], self._v[..., :end, :]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length


def reserved_cache(n_layers: int, reserve: int, source: Any | None = None, batch: int = 1) -> Any:
    """A DynamicCache of `n_layers` ReservedLayers with room for `reserve` positions before the first doubling;
    if `source` (a one-row cache, e.g. the system prompt's) is given, each row starts from a copy of it."""
    layers = []
    for old in source.layers if source is not None else ():
        if type(old) not in (DynamicLayer, ReservedLayer) or old.keys is None:
            raise TypeError("a reserved cache copies plain full-attention layers only")
        layers.append((old.keys.expand(batch, *old.keys.shape[1:]), old.values.expand(batch, *old.values.shape[1:])))
    return filled_cache(n_layers, reserve, layers)


def filled_cache(n_layers: int, reserve: int, layers: list[tuple[Any, Any]]) -> Any:
    """A reserved cache whose layers start from the given (keys, values) [batch, heads, positions, head_dim]."""
    import torch

    cache = DynamicCache()
    cache.layers = [ReservedLayer(reserve) for _ in range(n_layers)]
    with torch.inference_mode():
        for layer, (keys, values) in zip(cache.layers, layers, strict=False):
            layer.update(keys, values)
    return cache


def cache_supported(model: Any) -> bool:
    """Whether every decoder layer is plain full attention (no sliding window, no linear attention)."""
    config = model.config.get_text_config(decoder=True)
    types = getattr(config, "layer_types", None) or ["full_attention"]
    return all(t == "full_attention" for t in types) and not getattr(config, "sliding_window", None)


def _positions(mask: Any) -> Any:
    return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)


def decode(model: Any, input_ids: Any, attention_mask: Any, cache: Any, *, max_new_tokens: int, eos_id: int,
           pad_id: int, processors: Any = None, temperature: float = 0.0, stop: StopTest | None = None) -> Any:
    """Generated ids [batch, <= max_new_tokens] after `input_ids`, whose first `cache.get_seq_length()`
    positions the cache already holds; finished rows are padded with `pad_id`, as `generate` does."""
    import torch

    cached = cache.get_seq_length()
    mask = attention_mask
    positions = _positions(mask)[:, cached:]
    step_ids = input_ids[:, cached:]
    keep_mask = bool((mask == 0).any())
    unfinished = torch.ones(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
    sequence, out = input_ids, []
    for _ in range(max_new_tokens):
        logits = model(input_ids=step_ids, attention_mask=mask if keep_mask else None, position_ids=positions,
                       cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :].to(torch.float32)
        scores = processors(sequence, logits) if processors else logits
        if temperature > 0:
            probs = torch.nn.functional.softmax(scores / temperature, dim=-1)
            token = torch.multinomial(probs, num_samples=1).squeeze(1)
        else:
            token = torch.argmax(scores, dim=-1)
        token = torch.where(unfinished, token, torch.full_like(token, pad_id))
        out.append(token)
        sequence = torch.cat([sequence, token[:, None]], dim=-1)
        unfinished &= token != eos_id
        if stop is not None:
            unfinished &= ~stop(sequence)
        if not bool(unfinished.any()):
            break
        step_ids, positions = token[:, None], positions[:, -1:] + 1
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
    return torch.stack(out, dim=1) if out else input_ids[:, :0]
