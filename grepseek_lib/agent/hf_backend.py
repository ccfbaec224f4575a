"""The transformers backend: batched generation with left padding, the shared system prompt's cache, and the
lean decode loop of agent/decode.py."""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from typing import Any

from grepseek_lib.agent.constrained import ProtocolLogitsProcessor, wants_answer_only
from grepseek_lib.agent.generation import Generation, cut_at_stop
from grepseek_lib.agent.models import default_device, load_model_and_tokenizer, load_tokenizer
from grepseek_lib.agent.precision import resolve_precision
from grepseek_lib.agent.turn_cache import Entry, TurnCache, best_match, from_cache, shared_prefix, stitched
from grepseek_lib.errors import UserError

#: Shared prompt tokens worth one batch-1 prefill (the system prompt, a chunk's common prefix); below it, each row reads its own.
MIN_SHARED = 16


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

    `reuse_turns` (default: as `prefix_cache`): keep each row's cache after a call and start a later prompt that
    continues it (the next turn of an episode) from there (agent/turn_cache.py; lean loop only, same tokens).
    `lean` (default on): decode with agent/decode.py's loop (reserved key/value buffers, no per-token
    `generate` overhead; the same greedy tokens) where the model's layers allow it, else `model.generate`.
    `precision` (when `model` is a name and no `dtype` is given): "auto" loads bf16 weights on a CPU with
    native bf16 (agent/precision.py) and otherwise what it always did (float32 on a CPU, bf16 on a bf16 GPU);
    "float32" / "bf16" force one. A model it loads in bf16 on a CPU computes attention in float32
    (agent/attention.py: the CPU kernel is several times slower in bf16 at decode).
    """

    def __init__(self, model: Any = "smollm2", tokenizer: Any = None, device: str | None = None,
                 batch_size: int = 8, dtype: Any = None, constrain: bool = False, prefix_cache: bool | None = None,
                 lean: bool = True, precision: str = "auto", reuse_turns: bool | None = None):
        if isinstance(model, str):
            from grepseek_lib.agent.attention import use_float32_attention  # defers transformers

            if dtype is None:
                dtype = load_dtype(precision, str(device or default_device()))
            model, loaded_tokenizer = load_model_and_tokenizer(model, device=device, dtype=dtype)
            tokenizer = tokenizer or loaded_tokenizer
            use_float32_attention(model)
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
        self._prefix_entry: Entry | None = None
        reuse = self.prefix_cache if reuse_turns is None else bool(reuse_turns)
        self.turns = TurnCache() if reuse else None
        #: Prompt tokens read from a kept cache instead of the model, summed over calls (benchmarks, tests).
        self.reused_tokens = 0

    def render(self, conversation: list[dict]) -> str:
        """The prompt text the model sees: the conversation plus the opening of the next assistant turn."""
        return self.tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)

    def reseed(self, key: str) -> None:
        """Seed the sampler from `key`, so sampled draws (the loop's redraws) repeat when a run is resumed."""
        import torch

        torch.manual_seed(zlib.crc32(key.encode("utf-8")))

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
            starts = [self._start(conversations[i], ids[i]) for i in chunk] if self._lean_ok() else None
            batch = self._generate_batch([ids[i] for i in chunk], max_new_tokens, temperature,
                                         list(stop or []), [answer_only[i] for i in chunk], prefix, starts)
            for i, gen in zip(chunk, batch, strict=True):
                results[i] = gen
        if self.turns is not None:
            self.turns.commit()
        return results  # type: ignore[return-value]

    def _start(self, conversation: list[dict], ids: list[int]) -> tuple[Entry | None, int]:
        """Where the lean loop starts a row: the kept cache (a previous turn's or the system prompt's) sharing
        the longest prefix with `ids`, and how many positions of it to reuse."""
        candidates = list(self.turns.entries) if self.turns is not None else []
        if self.prefix_cache and self._system_cache(conversation, ids) is not None:
            if self._prefix_entry is None or self._prefix_entry.ids != self._prefix[0]:
                self._prefix_entry = from_cache(self._prefix[1], self._prefix[0])
            candidates.append(self._prefix_entry)
        return best_match(ids, candidates)

    def _system_cache(self, conversation: list[dict], ids: list[int]) -> tuple[tuple[int, ...], Any] | None:
        """(token ids, key/value cache) of the rendered system message if `ids` starts with it, else None."""

        if not conversation or conversation[0].get("role") != "system":
            return None
        if self._prefix is None or tuple(ids[: len(self._prefix[0])]) != self._prefix[0]:
            text = self.tokenizer.apply_chat_template(conversation[:1], tokenize=False)
            head = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            # Keep only what the full prompt tokenizes identically, minus one token at the seam.
            same = next((k for k, (a, b) in enumerate(zip(head, ids, strict=False)) if a != b),
                        min(len(head), len(ids)))
            if same - 1 < MIN_SHARED or same - 1 >= len(ids):
                return None
            prefix = tuple(ids[: same - 1])
            self._prefix = (prefix, self._prefill(prefix))
        return self._prefix

    def _prefill(self, ids: Sequence[int]) -> Any:
        """The key/value cache of `ids` read at batch 1 (a prefix many rows start from)."""
        import torch

        with torch.inference_mode():
            return self.model(input_ids=torch.tensor([list(ids)], device=self.model.device), use_cache=True).cache

    def _inputs(self, ids: list[list[int]], prefix: tuple[tuple[int, ...], Any] | None,
                keeps: list[int] | None = None) -> dict[str, Any]:
        """Padded input tensors (and, off the lean loop, the cache to start from).

        Row i is laid out `ids[:keep_i] + pads + ids[keep_i:]`, the cached part first (keep: the shared prefix's
        length, or each row's own in `keeps`), then right-aligned rest; the attention mask hides the pads and
        position ids follow the mask, so each row computes exactly what it would alone (the tests compare).
        """
        import copy

        import torch

        pad = self.tokenizer.pad_token_id
        if keeps is None:
            keeps = [len(prefix[0]) if prefix is not None else 0] * len(ids)
        cached = max(keeps)
        width = max(len(row) - keep for row, keep in zip(ids, keeps, strict=True))
        rows, masks = [], []
        for row, keep in zip(ids, keeps, strict=True):
            gap = cached - keep + width - (len(row) - keep)
            rows.append(row[:keep] + [pad] * gap + row[keep:])
            masks.append([1] * keep + [0] * gap + [1] * (len(row) - keep))
        inputs: dict[str, Any] = {"input_ids": torch.tensor(rows, device=self.model.device),
                                  "attention_mask": torch.tensor(masks, device=self.model.device),
                                  "cached": cached}
        if prefix is not None and not self._lean_ok():  # the lean loop builds its own cache
            with torch.inference_mode():
                cache = copy.deepcopy(prefix[1])
                if len(ids) > 1:
                    cache.batch_repeat_interleave(len(ids))
            inputs["cache"] = cache
        return inputs

    def _lean_ok(self) -> bool:
        from grepseek_lib.agent import decode  # defers transformers, as every torch import here

        return self.lean and decode.cache_supported(self.model)

    def _lean(self, enc: dict[str, Any], starts: list[tuple[Entry | None, int]], max_new_tokens: int,
              temperature: float, criteria: Any, processors: Any, more_eos: Sequence[int] = ()) -> tuple[Any, Any]:
        """(prompt + new ids laid out as `generate` returns them, the cache after decoding)."""
        import torch

        from grepseek_lib.agent import decode

        width = enc["input_ids"].shape[1]
        n_layers = self.model.config.get_text_config(decoder=True).num_hidden_layers
        start = stitched(starts, enc["cached"], n_layers) if enc["cached"] else []
        cache = decode.filled_cache(n_layers, width + max_new_tokens, start)
        del start
        stop = (lambda seq: criteria(seq, None)) if len(criteria) else None
        if more_eos:  # the loop stops a row at the tokenizer's eos; these end it too
            extra = torch.tensor(list(more_eos), device=self.model.device)
            stop = _either(stop, lambda seq: torch.isin(seq[:, -1], extra))
        new = decode.decode(self.model, enc["input_ids"], enc["attention_mask"], cache,
                            max_new_tokens=max_new_tokens, eos_id=self.tokenizer.eos_token_id,
                            pad_id=self.tokenizer.pad_token_id, processors=processors or None,
                            temperature=temperature, stop=stop)
        return torch.cat([enc["input_ids"], new], dim=1), cache

    def _keep_turns(self, cache: Any, ids: list[list[int]], keeps: list[int], enc: dict[str, Any],
                    new: list[list[int]], lengths: list[int]) -> None:
        """Keep each row's cache for the next call: its prompt and the generated ids the loop fed back."""
        width = enc["input_ids"].shape[1]
        fed_steps = max(0, len(new[0]) - 1) if new else 0  # the last generated token is never fed
        for row, (prompt, keep, gen, n) in enumerate(zip(ids, keeps, new, lengths, strict=True)):
            fed = min(n, fed_steps)
            positions = [*range(keep), *range(width - (len(prompt) - keep), width), *range(width, width + fed)]
            self.turns.add(from_cache(cache, list(prompt) + gen[:fed], row, positions))

    def generate_ids(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, temperature: float,
                     eos_ids: Sequence[int] = ()) -> list[list[int]]:
        """Generated ids for prompts given as token ids, each through its first eos (`eos_ids` besides the
        tokenizer's), for callers that concatenate ids and never re-render (trl's tool loop). Lean loop only;
        a prompt continuing a kept cache starts from it."""
        if not self._lean_ok():
            raise UserError("generate_ids needs the lean decode loop (lean=True and a plain full-attention model)")
        eos = [self.tokenizer.eos_token_id, *(e for e in eos_ids if e != self.tokenizer.eos_token_id)]
        results: list[list[int]] = []
        for lo in range(0, len(prompts), self.batch_size):
            chunk = [list(p) for p in prompts[lo: lo + self.batch_size]]
            starts = self._chunk_starts(chunk)
            new, lengths, _, _ = self._decode_rows(chunk, max_new_tokens, temperature, [], [False] * len(chunk),
                                                   None, starts, eos)
            results += [row[:n] for row, n in zip(new, lengths, strict=True)]
        if self.turns is not None:
            self.turns.commit()
        return results

    def _chunk_starts(self, chunk: list[list[int]]) -> list[tuple[Entry | None, int]]:
        """Each prompt's kept cache to start from; where the prompts share a longer prefix than those (the first
        turn of a question's G rollouts, or any rows under one system prompt), its keys/values are computed
        once for the chunk rather than once a row."""
        entries = list(self.turns.entries) if self.turns is not None else []
        starts = [best_match(p, entries) for p in chunk]
        shared = shared_prefix(chunk)
        if shared < MIN_SHARED or all(keep >= shared - MIN_SHARED for _, keep in starts):
            return starts
        entry = from_cache(self._prefill(chunk[0][:shared]), chunk[0][:shared])
        return [best_match(p, [*entries, entry]) for p in chunk]

    def _generate_batch(self, ids: list[list[int]], max_new_tokens: int, temperature: float, stop: list[str],
                        answer_only: list[bool], prefix: tuple[tuple[int, ...], Any] | None = None,
                        starts: list[tuple[Entry | None, int]] | None = None) -> list[Generation]:
        tok = self.tokenizer
        new, lengths, prompt_tokens, latency = self._decode_rows(ids, max_new_tokens, temperature, stop,
                                                                 answer_only, prefix, starts)
        gens = []
        for row, n, read in zip(new, lengths, prompt_tokens, strict=True):
            ended = bool(n) and row[n - 1] == tok.eos_token_id
            # Keep special tokens other than the final eos: some models (Qwen3.5) mark tool calls with them.
            text, hit = cut_at_stop(tok.decode(row[: n - 1] if ended else row[:n]), stop)
            ended = ended or hit
            gens.append(Generation(text, read, n, latency, "stop" if ended else "length"))
        return gens

    def _decode_rows(self, ids: list[list[int]], max_new_tokens: int, temperature: float, stop: list[str],
                     answer_only: list[bool], prefix: tuple[tuple[int, ...], Any] | None,
                     starts: list[tuple[Entry | None, int]] | None, eos: Sequence[int] | None = None
                     ) -> tuple[list[list[int]], list[int], list[int], float]:
        """(generated ids per row, how many are its own, prompt tokens per row, seconds) for one batch; the lean
        loop when `starts` is given (and the rows' caches are kept), else `model.generate`."""
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        tok = self.tokenizer
        eos = list(eos or [tok.eos_token_id])
        start = time.perf_counter()
        keeps = [keep for _, keep in starts] if starts is not None else None
        enc = self._inputs(ids, prefix, keeps)
        prompt_len = enc["input_ids"].shape[1]
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": float(temperature), "top_p": 1.0, "top_k": 0}
        criteria = StoppingCriteriaList([_TailStop(tok, stop, prompt_len)] if stop else [])
        processors = LogitsProcessorList()
        if self.constrain:
            processors.append(ProtocolLogitsProcessor(tok, len(ids), max_new_tokens, answer_only=answer_only))
        cache = None
        with torch.inference_mode():
            if starts is not None:
                out, cache = self._lean(enc, starts, max_new_tokens, temperature, criteria, processors, eos[1:])
                self.reused_tokens += sum(keeps)
            else:
                out = self.model.generate(
                    **{k: v for k, v in enc.items() if k != "cached"}, max_new_tokens=max_new_tokens,
                    stopping_criteria=criteria, logits_processor=processors, eos_token_id=eos,
                    pad_token_id=tok.pad_token_id, **sampling)
        latency = time.perf_counter() - start
        new = out[:, prompt_len:].tolist()
        lengths = [_generated_length(row, eos, tok.pad_token_id) for row in new]
        if cache is not None and self.turns is not None:
            self._keep_turns(cache, ids, keeps, enc, new, lengths)
        return new, lengths, [int(sum(mask)) for mask in enc["attention_mask"].tolist()], latency


def _generated_length(row: list[int], eos: Sequence[int], pad: int) -> int:
    """How many of a row's generated ids are its own: through the first eos, else up to the trailing pads."""
    ends = [i for i, token in enumerate(row) if token in eos]
    if ends:
        return ends[0] + 1
    n = len(row)
    while n and row[n - 1] == pad:
        n -= 1
    return n


def _either(first: Any, second: Any) -> Any:
    """Two stop tests as one (the first may be None)."""
    return second if first is None else (lambda seq: first(seq) | second(seq))


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
