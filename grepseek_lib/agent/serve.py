"""A small OpenAI-compatible server (/v1/chat/completions, /v1/models) in front of any Backend.

For machines without vLLM, and for testing the HTTP client against a real server. Concurrent requests are
gathered into one batch for the backend, so `--backend openai --batch-size N` keeps the model busy.
Run: `python -m grepseek_lib.agent.serve --model tiny --port 8000`.
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from grepseek_lib.agent.backends import Backend, Generation, HFBackend

ROLES = frozenset({"system", "user", "assistant", "tool"})
MAX_BODY_BYTES = 32 << 20
MAX_TOKENS_CAP = 32768


class BadRequest(ValueError):
    """The request breaks the API contract; answered with HTTP 400."""


def parse_request(body: Any, default_max_tokens: int) -> tuple[list[dict], int, float, list[str]]:
    """Validate a chat completion request: (messages, max_tokens, temperature, stop)."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(f"messages[{i}] needs a role among {sorted(ROLES)}")
        if not (m.get("content") is None or isinstance(m.get("content"), str)):
            raise BadRequest(f"messages[{i}].content must be a string")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", default_max_tokens))
    if max_tokens is None:
        max_tokens = default_max_tokens
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 0 < max_tokens <= MAX_TOKENS_CAP:
        raise BadRequest(f"'max_tokens' must be an integer in 1..{MAX_TOKENS_CAP}")
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
        raise BadRequest("'temperature' must be a number in 0..2")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > 8:
        raise BadRequest("'stop' must be a string or a list of at most 8 non-empty strings")
    return messages, max_tokens, float(temperature), stop


class Batcher:
    """One worker thread feeding the backend: requests that arrive together are generated together."""

    def __init__(self, backend: Backend, max_batch: int = 16, wait_s: float = 0.02):
        self.backend, self.max_batch, self.wait_s = backend, max_batch, wait_s
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="grepseek-batcher", daemon=True)
        self._thread.start()

    def submit(self, messages: list[dict], max_tokens: int, temperature: float, stop: list[str]) -> Future:
        future: Future = Future()
        self._queue.put(((max_tokens, temperature, tuple(stop)), messages, future))
        return future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _work(self) -> None:
        while (first := self._queue.get()) is not None:
            batch = [first]
            deadline = time.monotonic() + self.wait_s
            while len(batch) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                try:
                    item = self._queue.get(timeout=left)
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)
                    break
                batch.append(item)
            groups: dict[tuple, list] = {}
            for key, messages, future in batch:
                groups.setdefault(key, []).append((messages, future))
            for (max_tokens, temperature, stop), items in groups.items():
                try:
                    gens = self.backend.generate([m for m, _ in items], max_new_tokens=max_tokens,
                                                 temperature=temperature, stop=list(stop) or None)
                    for (_, future), gen in zip(items, gens, strict=True):
                        future.set_result(gen)
                except Exception as exc:  # the handler turns it into a 500
                    for _, future in items:
                        future.set_exception(exc)


def completion_body(gen: Generation, model: str, stop: list[str]) -> dict:
    """The OpenAI response shape; like OpenAI and vLLM, the matched stop string is not part of the content."""
    text = gen.text
    if gen.finish_reason == "stop":
        for s in stop:
            if text.endswith(s):
                text = text[: -len(s)]
                break
    usage = {"prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
             "total_tokens": (gen.prompt_tokens or 0) + (gen.completion_tokens or 0)}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": gen.finish_reason}],
        "usage": usage,
    }


class ChatHandler(BaseHTTPRequestHandler):
    """Serves one request; `server.batcher`, `server.model_name` and `server.default_max_tokens` are set."""

    protocol_version = "HTTP/1.1"
    server: ChatServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the client reports failures
        pass

    def send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self.send_json(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": self.server.model_name, "object": "model", "owned_by": "grepseek"}]})
        else:
            self.send_error_json(404, f"no route {self.path}")

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_error_json(404, f"no route {self.path}")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY_BYTES:
                raise BadRequest(f"Content-Length must be in 1..{MAX_BODY_BYTES}")
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                raise BadRequest("the body is not valid JSON") from None
            messages, max_tokens, temperature, stop = parse_request(body, self.server.default_max_tokens)
            model = body.get("model")
            if model not in (None, self.server.model_name):
                self.send_error_json(404, f"model {model!r} is not served here; try {self.server.model_name!r}",
                                     "not_found_error")
                return
        except BadRequest as exc:
            self.send_error_json(400, str(exc))
            return
        try:
            gen = self.server.batcher.submit(messages, max_tokens, temperature, stop).result()
        except Exception as exc:
            self.send_error_json(500, f"generation failed: {exc.__class__.__name__}: {exc}", "server_error")
            return
        self.send_json(200, completion_body(gen, self.server.model_name, stop))


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], backend: Backend,
                 model_name: str, default_max_tokens: int = 512, max_batch: int = 16, batch_wait_s: float = 0.02):
        super().__init__(address, handler)
        self.model_name, self.default_max_tokens = model_name, default_max_tokens
        self.batcher = Batcher(backend, max_batch=max_batch, wait_s=batch_wait_s)

    def server_close(self) -> None:
        super().server_close()
        self.batcher.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (its own timeout) is routine; anything else is still reported."""
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@contextmanager
def serve_in_thread(backend: Backend, host: str = "127.0.0.1", port: int = 0, model_name: str = "grepseek",
                    handler: type[BaseHTTPRequestHandler] = ChatHandler, **kw: Any) -> Iterator[str]:
    """Serve `backend` from a background thread; yields the base URL (`http://host:port/v1`)."""
    server = ChatServer((host, port), handler, backend, model_name, **kw)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grepseek_lib.agent.serve", description=__doc__)
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, a model folder or an HF id")
    parser.add_argument("--name", default=None, help="model name clients send (default: --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default=None)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args(argv)
    backend = HFBackend(args.model, device=args.device, batch_size=args.batch_size)
    server = ChatServer((args.host, args.port), ChatHandler, backend, args.name or args.model,
                        max_batch=args.batch_size)
    print(f"serving {args.model} at http://{args.host}:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
