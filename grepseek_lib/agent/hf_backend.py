"""The transformers backend: batched generation with left padding, the shared system prompt's cache, and the
lean decode loop of agent/decode.py."""

from __future__ import annotations

import time
from typing import Any

from grepseek_lib.agent.constrained import ProtocolLogitsProcessor, wants_answer_only
from grepseek_lib.agent.generation import Generation, cut_at_stop
from grepseek_lib.agent.models import default_device, load_model_and_tokenizer, load_tokenizer
from grepseek_lib.agent.precision import resolve_precision
from grepseek_lib.errors import UserError


class _TailStop:
    """Stopping criterion: a row is done once its generated tail contains a stop string.

    Only generated tokens are decoded, so stop tags in the prompt (earlier turns) never trigger it.
    """

    TAIL_TOKENS = 32

    def __init__(self, tokenizer: Any, stop: list[str], prompt_len: int):
        self.tokenizer, self.stop, self.prompt_len = tokenizer, stop, prompt_len

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        start = max(self.prompt_len, input_ids.shape[1] - self.TAIL_TOKENS)
        tails = self.tokenizer.batch_decode(input_ids[:, start:], skip_special_tokens=False)
        done = [any(s in tail for s in self.stop) for tail in tails]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class HFBackend:
    """transformers generation, batched with left padding; greedy when temperature is 0.

    `constrain=True` masks the logits with the protocol grammar (agent/constrained.py): every turn is then
    `<think>..</think>` + one valid action, and only an answer after the loop's budget message.

    `prefix_cache` (default: on CPU): every episode starts with the same ~800-token system prompt, and on
    a CPU reading it again is most of a turn's cost. Its key/value cache is computed once and every batch
    starts from a copy, so only the question and the episode so far are read (same tokens; ~2x faster
    turns measured with SmolLM2). On a GPU the prompt read is cheap, so there the default is off.

    `lean` (default on): decode with agent/decode.py's loop (reserved key/value buffers, no per-token
    `generate` overhead; the same greedy tokens) where the model's layers allow it, else `model.generate`.
    `precision` (when `model` is a name and no `dtype` is given): "auto" loads bf16 weights on a CPU with
    native bf16 (agent/precision.py) and otherwise what it always did (float32 on a CPU, bf16 on a bf16 GPU);
    "float32" / "bf16" force one.
    """

    def __init__(self, model: Any = "smollm2", tokenizer: Any = None, device: str | None = None,
                 batch_size: int = 8, dtype: Any = None, constrain: bool = False, prefix_cache: bool | None = None,
                 lean: bool = True, precision: str = "auto"):
        if isinstance(model, str):
            if dtype is None:
                dtype = load_dtype(precision, str(device or default_device()))
            model, loaded_tokenizer = load_model_and_tokenizer(model, device=device, dtype=dtype)
            tokenizer = tokenizer or loaded_tokenizer
        elif tokenizer is None:
            raise ValueError("HFBackend needs a tokenizer when given a model object")
        elif device is not None:
            model.to(device)
        if isinstance(tokenizer, str):
            tokenizer = load_tokenizer(tokenizer)
        self.model, self.tokenizer, self.batch_size = model, tokenizer, max(1, int(batch_size))
        self.constrain = bool(constrain)
        if tokenizer.pad_token_id is None:
            raise UserError("the tokenizer has no pad token; load it through agent.models.load_model_and_tokenizer")
        self.prefix_cache = (str(model.device).startswith("cpu")) if prefix_cache is None else bool(prefix_cache)
        self.lean = bool(lean)
        self._prefix: tuple[tuple[int, ...], Any] | None = None  # (token ids, their key/value cache)

    def render(self, conversation: list[dict]) -> str:
        """The prompt text the model sees: the conversation plus the opening of the next assistant turn."""
        return self.tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)

    def generate(self, conversations: list[list[dict]], *, max_new_tokens: int, temperature: float,
                 stop: list[str] | None = None) -> list[Generation]:
        prompts = [self.render(c) for c in conversations]
        answer_only = [self.constrain and wants_answer_only(c) for c in conversations]
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        order = sorted(range(len(prompts)), key=lambda i: -len(ids[i]))  # similar lengths pad less
        results: list[Generation | None] = [None] * len(prompts)
        for lo in range(0, len(order), self.batch_size):
            chunk = order[lo: lo + self.batch_size]
            prefix = self._system_cache(conversations[chunk[0]], ids[chunk[0]]) if self.prefix_cache else None
            if prefix is not None and any(tuple(ids[i][: len(prefix[0])]) != prefix[0] for i in chunk):
                prefix = None
            batch = self._generate_batch([ids[i] for i in chunk], max_new_tokens, temperature,
                                         list(stop or []), [answer_only[i] for i in chunk], prefix)
            for i, gen in zip(chunk, batch, strict=True):
                results[i] = gen
        return results  # type: ignore[return-value]

    def _system_cache(self, conversation: list[dict], ids: list[int]) -> tuple[tuple[int, ...], Any] | None:
        """(token ids, key/value cache) of the rendered system message if `ids` starts with it, else None."""
        import torch

        if not conversation or conversation[0].get("role") != "system":
            return None
        if self._prefix is None or tuple(ids[: len(self._prefix[0])]) != self._prefix[0]:
            text = self.tokenizer.apply_chat_template(conversation[:1], tokenize=False)
            head = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            # Keep only what the full prompt tokenizes identically, minus one token at the seam.
            same = next((k for k, (a, b) in enumerate(zip(head, ids, strict=False)) if a != b),
                        min(len(head), len(ids)))
            if same - 1 < 16 or same - 1 >= len(ids):
                return None
            prefix = tuple(ids[: same - 1])
            with torch.inference_mode():
                out = self.model(input_ids=torch.tensor([prefix], device=self.model.device), use_cache=True)
            self._prefix = (prefix, out.cache)
        return self._prefix

    def _inputs(self, ids: list[list[int]], prefix: tuple[tuple[int, ...], Any] | None) -> dict[str, Any]:
        """Padded input tensors (and the cache to start from).

        Without a prefix: left padding. With one: `prefix + pads + rest`, its cache copied for every row;
        the attention mask hides the pads and position ids follow the mask, so each row computes exactly
        what it would alone (the tests compare).
        """
        import copy

        import torch

        pad = self.tokenizer.pad_token_id
        keep = len(prefix[0]) if prefix is not None else 0
        width = max(len(row) - keep for row in ids)
        rows = [row[:keep] + [pad] * (width - len(row) + keep) + row[keep:] for row in ids]
        masks = [[1] * keep + [0] * (width - len(row) + keep) + [1] * (len(row) - keep) for row in ids]
        inputs: dict[str, Any] = {"input_ids": torch.tensor(rows, device=self.model.device),
                                  "attention_mask": torch.tensor(masks, device=self.model.device)}
        if prefix is not None and not self._lean_ok():  # the lean loop copies it into its own buffers
            with torch.inference_mode():
                cache = copy.deepcopy(prefix[1])
                if len(ids) > 1:
                    cache.batch_repeat_interleave(len(ids))
            inputs["cache"] = cache
        return inputs

    def _lean_ok(self) -> bool:
        from grepseek_lib.agent import decode  # defers transformers, as every torch import here

        return self.lean and decode.cache_supported(self.model)

    def _lean(self, enc: dict[str, Any], ids: list[list[int]], prefix: tuple[tuple[int, ...], Any] | None,
              max_new_tokens: int, temperature: float, criteria: Any, processors: Any) -> Any:
        """Prompt + new ids from the lean loop, laid out as `generate` returns them."""
        import torch

        from grepseek_lib.agent import decode

        width = enc["input_ids"].shape[1]
        cache = decode.reserved_cache(self.model.config.get_text_config(decoder=True).num_hidden_layers,
                                      width + max_new_tokens, prefix[1] if prefix is not None else None, len(ids))
        stop = (lambda seq: criteria(seq, None)) if len(criteria) else None
        new = decode.decode(self.model, enc["input_ids"], enc["attention_mask"], cache,
                            max_new_tokens=max_new_tokens, eos_id=self.tokenizer.eos_token_id,
                            pad_id=self.tokenizer.pad_token_id, processors=processors or None,
                            temperature=temperature, stop=stop)
        return torch.cat([enc["input_ids"], new], dim=1)

    def _generate_batch(self, ids: list[list[int]], max_new_tokens: int, temperature: float, stop: list[str],
                        answer_only: list[bool], prefix: tuple[tuple[int, ...], Any] | None = None
                        ) -> list[Generation]:
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        tok = self.tokenizer
        start = time.perf_counter()
        enc = self._inputs(ids, prefix)
        prompt_len = enc["input_ids"].shape[1]
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": float(temperature), "top_p": 1.0, "top_k": 0}
        criteria = StoppingCriteriaList([_TailStop(tok, stop, prompt_len)] if stop else [])
        processors = LogitsProcessorList()
        if self.constrain:
            processors.append(ProtocolLogitsProcessor(tok, len(ids), max_new_tokens, answer_only=answer_only))
        with torch.inference_mode():
            if self._lean_ok():
                out = self._lean(enc, ids, prefix, max_new_tokens, temperature, criteria, processors)
            else:
                out = self.model.generate(
                    **enc, max_new_tokens=max_new_tokens, stopping_criteria=criteria, logits_processor=processors,
                    eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **sampling,
                )
        latency = time.perf_counter() - start
        gens = []
        for row, mask in zip(out[:, prompt_len:].tolist(), enc["attention_mask"].tolist(), strict=True):
            n = len(row)
            if tok.eos_token_id in row:
                n = row.index(tok.eos_token_id) + 1
            else:
                while n and row[n - 1] == tok.pad_token_id:
                    n -= 1
            ended = bool(n) and row[n - 1] == tok.eos_token_id
            # Keep special tokens other than the final eos: some models (Qwen3.5) mark tool calls with them.
            text, hit = cut_at_stop(tok.decode(row[: n - 1] if ended else row[:n]), stop)
            ended = ended or hit
            gens.append(Generation(text, int(sum(mask)), n, latency, "stop" if ended else "length"))
        return gens


def load_dtype(precision: str, device: str) -> str | None:
    """The dtype to load weights in for a precision setting; None keeps the loader's default (float32 on a
    CPU, bf16 on a GPU with bf16), which is what "auto" means off the CPU."""
    if precision == "auto" and not device.startswith("cpu"):
        return None
    return "bfloat16" if resolve_precision(precision, device) == "bf16" else "float32"


def weights_dtype(precision: str = "auto") -> str:
    """What the HF backend loads weights in on this machine, for run records ("loader default" off the CPU
    under "auto": the model config's dtype)."""
    return load_dtype(precision, default_device()) or "loader default"
