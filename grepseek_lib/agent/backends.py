"""Policy backends: the next assistant turn for a batch of conversations, from transformers, an HTTP API or vLLM.

Every backend returns the text *including* the stop string that ended it (`</tool_call>`, `</answer>`), because
the action parser needs the closing tag; OpenAI-style servers drop it, so the HTTP client puts it back.
"""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grepseek_lib.agent.chat_template import CHAT_TEMPLATE, install_chat_template, tool_messages_as_user
from grepseek_lib.agent.constrained import turn_regex, wants_answer_only
from grepseek_lib.agent.generation import DEFAULT_STOPS, Backend, Generation, cut_at_stop, restore_stop
from grepseek_lib.agent.hf_backend import HFBackend
from grepseek_lib.agent.models import load_tokenizer, resolve_model
from grepseek_lib.errors import UserError

#: Re-exported: callers import the backend types and helpers from here.
__all__ = ["BACKENDS", "DEFAULT_STOPS", "Backend", "Generation", "HFBackend", "OpenAIBackend", "VLLMBackend",
           "batch_options", "cut_at_stop", "make_backend", "make_batch_backend", "restore_stop"]


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


        if model in ("smollm2", "tiny") or Path(model).expanduser().is_dir():
            return load_tokenizer(model)
        return install_chat_template(AutoTokenizer.from_pretrained(model, local_files_only=True))
    except (OSError, ValueError, UserError):
        return False


BACKENDS = {"hf": HFBackend, "openai": OpenAIBackend, "vllm": VLLMBackend}


#: The constructor keyword through which a backend takes many conversations at once (vllm takes any batch).
_BATCH_KEYWORD = {"hf": "batch_size", "openai": "concurrency"}


def batch_options(kind: str, batch_size: int) -> dict[str, int]:
    """The keyword that makes backend `kind` decode (hf) or request (openai) a caller's batch together, not in
    chunks of its own default: lockstep episodes wait for the slowest chunk."""
    key = _BATCH_KEYWORD.get(kind)
    return {key: max(1, int(batch_size))} if key else {}


def make_batch_backend(kind: str, model: str | None, batch_size: int, options: dict | None = None) -> Backend:
    """`make_backend` sized for batches of `batch_size`; an explicit option in `options` wins."""
    return make_backend(kind, model, **{**batch_options(kind, batch_size), **(options or {})})


def make_backend(kind: str, model: str | None = None, **kw: Any) -> Backend:
    """Build a backend by name: hf (default), openai or vllm; extra keywords go to its constructor."""
    try:
        cls = BACKENDS[kind]
    except KeyError:
        raise UserError(f"unknown backend {kind!r}: choose one of {', '.join(BACKENDS)}") from None
    if model is not None:
        kw["model"] = model
    return cls(**kw)
