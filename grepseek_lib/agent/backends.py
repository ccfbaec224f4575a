"""Policy backends: the next assistant turn for a batch of conversations, from transformers, an HTTP API or vLLM.

Every backend returns the text *including* the stop string that ended it (`</tool_call>`, `</answer>`), because
the action parser needs the closing tag; OpenAI-style servers drop it, so the HTTP client puts it back.
"""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from grepseek_lib.agent.chat_template import CHAT_TEMPLATE, tool_messages_as_user
from grepseek_lib.agent.constrained import ProtocolLogitsProcessor, turn_regex, wants_answer_only
from grepseek_lib.agent.precision import resolve_precision
from grepseek_lib.errors import UserError

#: Where an assistant turn ends in our protocol; the action is complete at either tag.
DEFAULT_STOPS = ("</tool_call>", "</answer>")


@dataclass
class Generation:
    """One assistant turn. Token counts are None when the server does not report them."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    finish_reason: str = "stop"  # "stop" (eos or stop string) or "length"


class Backend(Protocol):
    #: The policy's tokenizer where known (the shell tool cuts observations with it), else None.
    tokenizer: Any

    def generate(
        self,
        conversations: list[list[dict]],
        *,
        max_new_tokens: int,
        temperature: float,
        stop: list[str] | None = None,
    ) -> list[Generation]: ...


def cut_at_stop(text: str, stop: list[str] | None) -> tuple[str, bool]:
    """Keep text up to and including the earliest stop string; report whether one was found."""
    best = None
    for s in stop or ():
        i = text.find(s) if s else -1
        if i >= 0 and (best is None or i + len(s) < best):
            best = i + len(s)
    return (text, False) if best is None else (text[:best], True)


def restore_stop(text: str, stop: list[str] | None) -> str:
    """Re-append a closing-tag stop string that an OpenAI-style server removed.

    A closing tag `</x>` is restored when the text opens `<x>` after its last `</x>`, i.e. the turn was cut
    exactly at that tag; text that simply ended (eos) is left alone.
    """
    for s in stop or ():
        if s.startswith("</") and s.endswith(">"):
            opener = "<" + s[2:]
            if text.rfind(opener) > text.rfind(s):
                return text + s
    return text


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
            from grepseek_lib.train.models import default_device, load_model_and_tokenizer

            if dtype is None:
                dtype = _load_dtype(precision, str(device or default_device()))
            model, loaded_tokenizer = load_model_and_tokenizer(model, device=device, dtype=dtype)
            tokenizer = tokenizer or loaded_tokenizer
        elif tokenizer is None:
            raise ValueError("HFBackend needs a tokenizer when given a model object")
        elif device is not None:
            model.to(device)
        if isinstance(tokenizer, str):
            from grepseek_lib.train.models import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        self.model, self.tokenizer, self.batch_size = model, tokenizer, max(1, int(batch_size))
        self.constrain = bool(constrain)
        if tokenizer.pad_token_id is None:
            raise UserError("the tokenizer has no pad token; load it through train.models.load_model_and_tokenizer")
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


def _load_dtype(precision: str, device: str) -> str | None:
    """The dtype to load weights in for a precision setting; None keeps the loader's default (float32 on a
    CPU, bf16 on a GPU with bf16), which is what "auto" means off the CPU."""
    if precision == "auto" and not device.startswith("cpu"):
        return None
    return "bfloat16" if resolve_precision(precision, device) == "bf16" else "float32"


class OpenAIBackend:
    """Any OpenAI-compatible /v1/chat/completions endpoint (vLLM, our serve.py, hosted APIs).

    Requests run concurrently; 429, 5xx, timeouts and dropped connections are retried with exponential
    backoff (honouring Retry-After). Tool messages are sent as user turns with the same rendered text.

    `constrain=True` sends the protocol grammar as a regex in vLLM's structured-output request field
    (`structured_outputs`, vLLM >= 0.10.2; `constrain_field="guided_regex"` for older servers). This is a
    vLLM-server extension: other endpoints ignore or reject it.
    """

    RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 concurrency: int = 8, timeout: float = 300.0, retries: int = 4, backoff_s: float = 0.5,
                 tokenizer: Any = None, constrain: bool = False, constrain_field: str = "structured_outputs"):
        import httpx

        if constrain_field not in ("structured_outputs", "guided_regex"):
            raise UserError(f"constrain_field must be structured_outputs or guided_regex, got {constrain_field!r}")
        self.constrain, self.constrain_field = bool(constrain), constrain_field

        base = (base_url or os.environ.get("OPENAI_BASE_URL") or "http://127.0.0.1:8000/v1").rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise UserError(f"OpenAI base URL must start with http:// or https://, got {base!r}")
        if httpx.URL(base).path in ("", "/"):
            base += "/v1"
        self.base_url = base
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.concurrency, self.retries, self.backoff_s = max(1, concurrency), max(0, retries), backoff_s
        self.timeout = timeout
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            headers={"Authorization": f"Bearer {self.api_key}"},
            limits=httpx.Limits(max_connections=self.concurrency),
        )
        self.model = model or os.environ.get("GREPSEEK_MODEL") or self._only_served_model()
        self._tokenizer = tokenizer

    @property
    def tokenizer(self) -> Any:
        """The served model's tokenizer if it is available locally (never downloaded), else None."""
        if self._tokenizer is None:
            self._tokenizer = _local_tokenizer(self.model)
        return self._tokenizer or None

    def close(self) -> None:
        self._client.close()

    def _only_served_model(self) -> str:
        data = self._request("GET", "/models", None)
        ids = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)] if isinstance(data, dict) else []
        if len(ids) != 1 or not isinstance(ids[0], str):
            raise UserError(f"{self.base_url} serves {ids or 'no models'}; name one with --model or GREPSEEK_MODEL")
        return ids[0]

    def _request(self, method: str, path: str, body: dict | None) -> Any:
        import httpx

        url = self.base_url + path
        last = ""
        for attempt in range(self.retries + 1):
            wait = self.backoff_s * (2 ** attempt) * (1 + 0.25 * random.random())
            try:
                resp = self._client.request(method, url, json=body)
            except httpx.TimeoutException:
                last = f"timed out after {self.timeout:g} s"
            except httpx.TransportError as exc:
                last = f"connection failed ({exc.__class__.__name__}: {exc})"
            else:
                if resp.status_code == 200:
                    try:
                        return resp.json()
                    except ValueError:
                        raise RuntimeError(f"{url} returned invalid JSON: {resp.text[:200]!r}") from None
                last = f"HTTP {resp.status_code}: {resp.text[:300]!r}"
                if resp.status_code not in self.RETRY_STATUS:
                    hint = {401: " (check OPENAI_API_KEY)", 403: " (check OPENAI_API_KEY)",
                            404: " (check the base URL and model name)"}.get(resp.status_code, "")
                    raise UserError(f"{method} {url} failed with {last}{hint}")
                retry_after = resp.headers.get("retry-after", "")
                if retry_after.replace(".", "", 1).isdigit():
                    wait = min(float(retry_after), 60.0)
            if attempt < self.retries:
                time.sleep(wait)
        raise UserError(f"{method} {url} failed after {self.retries + 1} attempts: {last}")

    def _one(self, conversation: list[dict], max_new_tokens: int, temperature: float,
             stop: list[str] | None) -> Generation:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": tool_messages_as_user(conversation),
            "max_tokens": max_new_tokens,
            "temperature": temperature,
        }
        if stop:
            body["stop"] = list(stop)
        if self.constrain:
            regex = turn_regex(answer_only=wants_answer_only(conversation))
            body.update({"structured_outputs": {"regex": regex}} if self.constrain_field == "structured_outputs"
                        else {"guided_regex": regex})
        start = time.perf_counter()
        data = self._request("POST", "/chat/completions", body)
        latency = time.perf_counter() - start
        try:
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise RuntimeError(f"unexpected chat completion from {self.base_url}: {str(data)[:300]}") from exc
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        text = restore_stop(content, stop) if finish == "stop" else content
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Generation(text, _int_or_none(usage.get("prompt_tokens")),
                          _int_or_none(usage.get("completion_tokens")), latency, finish)

    def generate(self, conversations: list[list[dict]], *, max_new_tokens: int, temperature: float,
                 stop: list[str] | None = None) -> list[Generation]:
        if len(conversations) <= 1:
            return [self._one(c, max_new_tokens, temperature, stop) for c in conversations]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(conversations))) as pool:
            futures = [pool.submit(self._one, c, max_new_tokens, temperature, stop) for c in conversations]
            return [f.result() for f in futures]


class VLLMBackend:
    """vLLM's offline engine in this process (GPU); imported only when chosen.

    `constrain=True` passes the protocol grammar as a structured-output regex (StructuredOutputsParams, or
    GuidedDecodingParams on vLLM < 0.10.2).
    """

    def __init__(self, model: str = "smollm2", tokenizer: Any = None, dtype: str = "auto",
                 gpu_memory_utilization: float = 0.85, max_model_len: int | None = None, seed: int = 0,
                 engine_kwargs: dict | None = None, constrain: bool = False):
        try:
            from vllm import LLM
        except ImportError as exc:
            raise UserError("the vllm backend needs vLLM: pip install 'grepseek[vllm]' (or use --backend hf)") from exc
        from grepseek_lib.train.models import load_tokenizer, resolve_model

        path = resolve_model(model)
        self.llm = LLM(model=path, tokenizer=path, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization,
                       max_model_len=max_model_len, seed=seed, **(engine_kwargs or {}))
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(path)
        self.constrain = bool(constrain)

    def _params(self, max_new_tokens: int, temperature: float, stop: list[str] | None,
                answer_only: bool) -> Any:
        from vllm import SamplingParams

        kw: dict[str, Any] = {}
        if self.constrain:
            regex = turn_regex(answer_only=answer_only)
            try:
                from vllm.sampling_params import StructuredOutputsParams

                kw["structured_outputs"] = StructuredOutputsParams(regex=regex)
            except ImportError:
                from vllm.sampling_params import GuidedDecodingParams

                kw["guided_decoding"] = GuidedDecodingParams(regex=regex)
        return SamplingParams(max_tokens=max_new_tokens, temperature=temperature, top_p=1.0,
                              stop=list(stop or []) or None, include_stop_str_in_output=True, **kw)

    def generate(self, conversations: list[list[dict]], *, max_new_tokens: int, temperature: float,
                 stop: list[str] | None = None) -> list[Generation]:
        params = [self._params(max_new_tokens, temperature, stop, self.constrain and wants_answer_only(c))
                  for c in conversations]
        start = time.perf_counter()
        outputs = self.llm.chat([tool_messages_as_user(c) for c in conversations], params,
                                chat_template=CHAT_TEMPLATE, add_generation_prompt=True, use_tqdm=False)
        latency = time.perf_counter() - start
        gens = []
        for out in outputs:
            best = out.outputs[0]
            text, _ = cut_at_stop(best.text, stop)
            gens.append(Generation(text, len(out.prompt_token_ids or []), len(best.token_ids), latency,
                                   "length" if best.finish_reason == "length" else "stop"))
        return gens


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _local_tokenizer(model: str) -> Any:
    """Load `model`'s tokenizer from a local folder or the HF cache only; False when unavailable."""
    from pathlib import Path

    try:
        from transformers import AutoTokenizer

        from grepseek_lib.agent.chat_template import install_chat_template

        if model in ("smollm2", "tiny") or Path(model).expanduser().is_dir():
            from grepseek_lib.train.models import load_tokenizer

            return load_tokenizer(model)
        return install_chat_template(AutoTokenizer.from_pretrained(model, local_files_only=True))
    except (OSError, ValueError, UserError):
        return False


BACKENDS = {"hf": HFBackend, "openai": OpenAIBackend, "vllm": VLLMBackend}


def make_backend(kind: str, model: str | None = None, **kw: Any) -> Backend:
    """Build a backend by name: hf (default), openai or vllm; extra keywords go to its constructor."""
    try:
        cls = BACKENDS[kind]
    except KeyError:
        raise UserError(f"unknown backend {kind!r}: choose one of {', '.join(BACKENDS)}") from None
    if model is not None:
        kw["model"] = model
    return cls(**kw)
