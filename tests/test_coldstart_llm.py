"""Cold start with teacher-backed roles, over real local HTTP: a scripted teacher (the protocol works end
to end and the requests are right) and the tiny model (junk replies are rejected cleanly)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from test_coldstart import MUSIQUE, _item, _write_corpus  # noqa: I001 (tests folder module)

from grepseek_lib.coldstart.accept import process_question
from grepseek_lib.coldstart.roles import LLMPlanner, LLMTutor, TeacherClient


def _scripted_reply(system: str, user: str) -> str:
    """A well-behaved teacher for the MUSIQUE fixture, keyed on the prompt it receives."""
    if "Decompose the question" in user:
        return 'Sure: [{"question": "Who performed Hello Love?", "answer": "Hank Snow"}, ' \
               '{"question": "In which state did #1 die?", "answer": "Tennessee"}]'
    if "Write ONE read-only pipeline" in user:
        if "Search from this entity" in user:
            return "<command>rg -F 'Hank Snow' corpus.jsonl | head -n 3</command>"
        return "<command>rg -F -i 'hello love' corpus.jsonl | head -n 3</command>"
    if "Reply with exactly one word" in user:
        return "yes" if ("Hank Snow was" in user or "performed by" in user) else "no"
    if "Copy, exactly as the passage writes it" in user:
        return "Hank Snow"
    if "Rewrite the reasoning" in user:
        command = re.search(r"The next command will be: (.*)", user).group(1)
        return f"<think>I will run {command} to read the relevant passage.</think>"
    if "what to search for next" in user:
        return "I know nothing yet beyond the question."
    if "<answer>" in user:
        return "He died in Madison, Tennessee. <answer>Tennessee</answer>"
    return "?"


class _Server:
    """A real OpenAI-compatible HTTP endpoint recording every request it gets."""

    def __init__(self, reply):
        self.requests: list[tuple[str, str, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, body: dict):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                outer.requests.append(("GET", self.path, {}))
                self._send({"data": [{"id": "teacher"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(("POST", self.path, body))
                msgs = body["messages"]
                self._send({"choices": [{"message": {"role": "assistant",
                                                     "content": reply(msgs[0]["content"], msgs[-1]["content"])},
                                         "finish_reason": "stop"}], "usage": {}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _roles(url: str, model: str | None = None):
    from grepseek_lib.agent.backends import make_backend

    client = TeacherClient(make_backend("openai", model, base_url=url, retries=0))
    return LLMTutor(client), LLMPlanner(client)


def test_teacher_roles_over_http_build_an_accepted_trajectory(tmp_path: Path):
    from grepseek_lib.shell.tool import ShellTool

    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    with _Server(_scripted_reply) as server:
        tutor, planner = _roles(server.url)
        outcome = process_question(_item(MUSIQUE), tutor, planner, ShellTool(corpus, timeout=20), probe_rate=0)
    assert outcome.accepted, (outcome.stage, outcome.reason)
    assert [t.command for t in outcome.turns] == ["rg -F -i 'hello love' corpus.jsonl | head -n 3",
                                                  "rg -F 'Hank Snow' corpus.jsonl | head -n 3", None]
    assert outcome.answer == "Tennessee" and "<think>" not in outcome.turns[0].think
    posts = [body for method, path, body in server.requests if method == "POST"]
    assert server.requests[0][:2] == ("GET", "/v1/models")  # the model was discovered
    assert all(path == "/v1/chat/completions" for method, path, _ in server.requests if method == "POST")
    for body in posts:
        assert body["model"] == "teacher" and body["temperature"] == 0.0 and body["max_tokens"] > 0
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
    planner_prompts = [b["messages"][1]["content"] for b in posts if "search agent answering" in b["messages"][0]["content"]]
    assert planner_prompts and not any("Gold answer" in p or "Its answer" in p for p in planner_prompts)
    assert "Tennessee" not in planner_prompts[0]  # the answer-blind Planner never gets it before it is printed


def test_junk_teacher_replies_are_rejected_cleanly(tmp_path: Path):
    from grepseek_lib.shell.tool import ShellTool

    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    junk = ["", "[", '[{"question": 3}]', "<command>rm -rf /</command>", "[" * 5000, "yes" * 100]
    for text in junk:
        def reply(system, user, text=text):
            if "Decompose" in user and text.startswith("<command>"):
                return '[{"question": "Who performed Hello Love?", "answer": "Hank Snow"}, {"question": "#1 died?", "answer": "x"}]'
            return text

        with _Server(reply) as server:
            tutor, planner = _roles(server.url)
            outcome = process_question(_item(MUSIQUE), tutor, planner, ShellTool(corpus, timeout=20))
        assert not outcome.accepted and outcome.stage in ("decompose", "chain"), (text[:20], outcome)


class _Recording:
    """Wraps the served backend to record the conversations that reached the model over HTTP."""

    def __init__(self, backend):
        self.backend, self.tokenizer, self.seen = backend, backend.tokenizer, []

    def generate(self, conversations, **kw):
        self.seen.extend(conversations)
        return self.backend.generate(conversations, **kw)


def test_tiny_model_teacher_through_the_cli(tmp_path: Path):
    from grepseek_lib.agent.backends import HFBackend
    from grepseek_lib.agent.models import build_tiny_model
    from grepseek_lib.agent.serve import serve_in_thread
    from grepseek_lib.cli import main

    corpus = _write_corpus(tmp_path / "corpus.jsonl")
    model = build_tiny_model(tmp_path / "tiny", corpus=corpus)
    bench = tmp_path / "toy_train.jsonl"
    bench.write_text(json.dumps(MUSIQUE) + "\n", encoding="utf-8")
    backend = _Recording(HFBackend(str(model), device="cpu"))
    with serve_in_thread(backend, model_name="tiny-teacher") as url:
        code = main(["coldstart", "--teacher", "openai", "--base-url", url, "--model", "tiny-teacher", "--max-new-tokens", "48",
                     "--splits", str(bench), "--corpus", str(corpus), "--out", str(tmp_path / "out")])
    assert code == 0
    record = json.loads((tmp_path / "out" / "records.jsonl").read_text())
    assert record["accepted"] is False and record["stage"] in ("decompose", "chain", "assemble", "coherence")
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["all"]["accepted"] == 0
    assert backend.seen, "the teacher was never asked"
    first = backend.seen[0]
    assert [m["role"] for m in first] == ["system", "user"] and MUSIQUE["question"] in first[1]["content"]
