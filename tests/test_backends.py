"""Backends with a real (tiny, taught) model: batched HF generation with stops, and the OpenAI client over HTTP."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from grepseek_lib.agent.backends import (
    DEFAULT_STOPS,
    HFBackend,
    OpenAIBackend,
    cut_at_stop,
    make_backend,
    restore_stop,
)
from grepseek_lib.agent.models import build_tiny_model
from grepseek_lib.agent.serve import ChatHandler, serve_in_thread
from grepseek_lib.errors import UserError
from tests.tiny_policy import teach_tiny_model

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

STOPS = list(DEFAULT_STOPS)
ASK_TOOL = [{"role": "system", "content": "Search corpus.jsonl."},
            {"role": "user", "content": "Query: who was the brother of Moses?"}]
TOOL_REPLY = ('<think>Search for Moses.</think>\n<tool_call>{"name": "shell", "arguments": '
              '{"command": "rg -m 3 Moses corpus.jsonl"}}</tool_call>')
ASK_ANSWER = [{"role": "user", "content": "Query: what is the capital of France, the country on the Seine?"},
              {"role": "assistant", "content": TOOL_REPLY},
              {"role": "tool", "content": '{"stdout": "Paris is the capital of France."}'}]
ANSWER_REPLY = "<think>The passage says Paris.</think>\n<answer>Paris</answer>"
#: What the model was taught to say after each stop tag: generation must never include it.
JUNK = " and then more words"


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def taught(tmp_path_factory):
    """A tiny model taught two exact replies, each running on past its stop tag."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("models")
    base = build_tiny_model(root / "tiny")
    return teach_tiny_model(base, root / "taught", [(ASK_TOOL, TOOL_REPLY + JUNK), (ASK_ANSWER, ANSWER_REPLY + JUNK)])


@pytest.fixture(scope="module")
def hf(taught):
    return HFBackend(str(taught), device="cpu", batch_size=2, prefix_cache=False)  # the batched path


def test_stop_helpers():
    assert cut_at_stop("a</answer>b</tool_call>c", STOPS) == ("a</answer>", True)
    assert cut_at_stop("no stop here", STOPS) == ("no stop here", False)
    assert restore_stop("<think>x</think>\n<tool_call>{}", STOPS) == "<think>x</think>\n<tool_call>{}</tool_call>"
    assert restore_stop("<answer>Paris", STOPS) == "<answer>Paris</answer>"
    assert restore_stop("<tool_call>{}</tool_call> done", STOPS) == "<tool_call>{}</tool_call> done"
    assert restore_stop("plain text", STOPS) == "plain text"


def test_hf_batch_generation_stops_at_the_action(hf):
    convs = [ASK_TOOL, ASK_ANSWER, ASK_TOOL]  # 3 prompts of different lengths, batch size 2
    gens = hf.generate(convs, max_new_tokens=80, temperature=0.0, stop=STOPS)
    assert [g.text for g in gens] == [TOOL_REPLY, ANSWER_REPLY, TOOL_REPLY]
    assert all(g.finish_reason == "stop" for g in gens)
    for conv, gen in zip(convs, gens, strict=True):
        prompt = hf.tokenizer.apply_chat_template(conv, add_generation_prompt=True, return_dict=False)
        assert gen.prompt_tokens == len(prompt)
        assert gen.completion_tokens == len(hf.tokenizer(gen.text, add_special_tokens=False)["input_ids"])
        assert gen.latency_s > 0
    # Left padding does not change what a conversation gets: batched equals one at a time.
    singles = [hf.generate([c], max_new_tokens=80, temperature=0.0, stop=STOPS)[0].text for c in convs]
    assert singles == [g.text for g in gens]


def test_hf_without_stops_runs_to_end_of_turn_or_length(hf):
    full = hf.generate([ASK_ANSWER], max_new_tokens=80, temperature=0.0, stop=None)[0]
    assert full.text == ANSWER_REPLY + JUNK and full.finish_reason == "stop"  # ended by <|im_end|>
    cut = hf.generate([ASK_ANSWER], max_new_tokens=3, temperature=0.0, stop=STOPS)[0]
    assert cut.finish_reason == "length" and cut.completion_tokens == 3 and ANSWER_REPLY.startswith(cut.text)
    sampled = hf.generate([ASK_TOOL, ASK_ANSWER], max_new_tokens=8, temperature=1.0, stop=STOPS)
    assert all(isinstance(g.text, str) and 0 < g.completion_tokens <= 8 for g in sampled)


def test_hf_reseed_makes_sampled_draws_repeat(hf):
    def draws(key: str) -> list[str]:
        hf.reseed(key)
        return [g.text for g in hf.generate([ASK_TOOL, ASK_ANSWER], max_new_tokens=12, temperature=5.0, stop=STOPS)]

    first = draws("q1:2")
    assert draws("q1:2") == first
    assert any(draws(f"q{k}:2") != first for k in range(2, 6))  # another key draws other text


def test_openai_backend_over_real_http_matches_hf(hf):
    with serve_in_thread(hf, model_name="tiny-taught") as url:
        client = OpenAIBackend(base_url=url, model="tiny-taught", concurrency=3, timeout=30, retries=0)
        gens = client.generate([ASK_TOOL, ASK_ANSWER, ASK_TOOL], max_new_tokens=80, temperature=0.0, stop=STOPS)
        assert [g.text for g in gens] == [TOOL_REPLY, ANSWER_REPLY, TOOL_REPLY]  # stop tags restored
        direct = hf.generate([ASK_ANSWER], max_new_tokens=80, temperature=0.0, stop=STOPS)[0]
        # The tool turn went over the wire as a user turn; the model saw exactly the same tokens.
        assert gens[1].prompt_tokens == direct.prompt_tokens
        assert gens[1].completion_tokens == direct.completion_tokens
        no_stop = client.generate([ASK_ANSWER], max_new_tokens=80, temperature=0.0, stop=None)[0]
        assert no_stop.text == ANSWER_REPLY + JUNK
        # Without a model name the client asks the server which one it serves.
        assert OpenAIBackend(base_url=url.removesuffix("/v1"), retries=0).model == "tiny-taught"
        with pytest.raises(UserError, match="404"):
            OpenAIBackend(base_url=url, model="other", retries=3, backoff_s=5).generate(
                [ASK_TOOL], max_new_tokens=4, temperature=0.0)
        bad = httpx.post(url + "/chat/completions", content=b"{not json", timeout=10)
        assert bad.status_code == 400 and "JSON" in bad.json()["error"]["message"]
        bad = httpx.post(url + "/chat/completions", json={"messages": [{"role": "x", "content": "hi"}]}, timeout=10)
        assert bad.status_code == 400


class FlakyHandler(ChatHandler):
    """Answers the first `failures` chat requests badly (503, or too late), then serves normally."""

    lock = threading.Lock()
    seen = 0
    failures = 0
    mode = "503"

    def do_POST(self) -> None:
        with FlakyHandler.lock:
            FlakyHandler.seen += 1
            fail = FlakyHandler.seen <= FlakyHandler.failures
        if fail and FlakyHandler.mode == "503":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_error_json(503, "overloaded, try again", "server_error")
            return
        if fail and FlakyHandler.mode == "slow":
            time.sleep(1.5)
        if fail and FlakyHandler.mode == "garbage":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_json(200, {"choices": "nonsense"})
            return
        super().do_POST()


def flaky(mode: str, failures: int) -> type[FlakyHandler]:
    FlakyHandler.seen, FlakyHandler.failures, FlakyHandler.mode = 0, failures, mode
    return FlakyHandler


def test_openai_backend_retries_on_503(hf):
    with serve_in_thread(hf, model_name="m", handler=flaky("503", 2)) as url:
        client = OpenAIBackend(base_url=url, model="m", retries=3, backoff_s=0.01)
        assert client.generate([ASK_TOOL], max_new_tokens=80, temperature=0.0, stop=STOPS)[0].text == TOOL_REPLY
        assert FlakyHandler.seen == 3
    with serve_in_thread(hf, model_name="m", handler=flaky("503", 5)) as url:
        client = OpenAIBackend(base_url=url, model="m", retries=1, backoff_s=0.01)
        with pytest.raises(UserError, match="after 2 attempts.*HTTP 503"):
            client.generate([ASK_TOOL], max_new_tokens=8, temperature=0.0)


def test_openai_backend_retries_after_timeout(hf):
    with serve_in_thread(hf, model_name="m", handler=flaky("slow", 1)) as url:
        client = OpenAIBackend(base_url=url, model="m", timeout=0.5, retries=2, backoff_s=0.01)
        began = time.perf_counter()
        assert client.generate([ASK_TOOL], max_new_tokens=80, temperature=0.0, stop=STOPS)[0].text == TOOL_REPLY
        assert time.perf_counter() - began >= 0.5
    with serve_in_thread(hf, model_name="m", handler=flaky("slow", 1)) as url:
        client = OpenAIBackend(base_url=url, model="m", timeout=0.5, retries=0)
        with pytest.raises(UserError, match="timed out"):
            client.generate([ASK_TOOL], max_new_tokens=8, temperature=0.0)


def test_openai_backend_rejects_a_malformed_reply(hf):
    with serve_in_thread(hf, model_name="m", handler=flaky("garbage", 1)) as url:
        client = OpenAIBackend(base_url=url, model="m", retries=0)
        with pytest.raises(RuntimeError, match="unexpected chat completion"):
            client.generate([ASK_TOOL], max_new_tokens=8, temperature=0.0)


def test_openai_backend_names_an_unreachable_server():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before use: nothing listens there
    client = OpenAIBackend(base_url=f"http://127.0.0.1:{port}/v1", model="m", retries=1, backoff_s=0.01)
    with pytest.raises(UserError, match=f"127.0.0.1:{port}.*connection failed"):
        client.generate([ASK_TOOL], max_new_tokens=4, temperature=0.0)
    with pytest.raises(UserError, match="http"):
        OpenAIBackend(base_url="localhost:8000", model="m")


def test_openai_settings_from_env(monkeypatch, hf):
    with serve_in_thread(hf, model_name="env-model") as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("GREPSEEK_MODEL", "env-model")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        client = make_backend("openai", None)
        assert (client.base_url, client.model, client.api_key) == (url, "env-model", "sk-test")
        assert client.generate([ASK_TOOL], max_new_tokens=80, temperature=0.0, stop=STOPS)[0].text == TOOL_REPLY


def test_make_backend_choices(taught):
    backend = make_backend("hf", str(taught), device="cpu")
    assert backend.tokenizer.eos_token == "<|im_end|>"
    with pytest.raises(UserError, match="unknown backend"):
        make_backend("llamacpp", "tiny")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(UserError, match="vLLM"):
            make_backend("vllm", str(taught))


def test_server_batches_concurrent_requests(hf):
    calls = []

    class Counting:
        tokenizer = hf.tokenizer

        def generate(self, conversations, **kw):
            calls.append(len(conversations))
            return hf.generate(conversations, **kw)

    with serve_in_thread(Counting(), model_name="m", batch_wait_s=0.5) as url:
        client = OpenAIBackend(base_url=url, model="m", concurrency=4, retries=0)
        gens = client.generate([ASK_TOOL] * 4, max_new_tokens=80, temperature=0.0, stop=STOPS)
    assert [g.text for g in gens] == [TOOL_REPLY] * 4
    assert sum(calls) == 4 and max(calls) > 1, calls
