"""`grepseek ask` (one question, every step printed) and `grepseek eval` (benchmarks -> EM / F1 tables)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from grepseek_lib import config

BACKENDS = ("hf", "openai", "vllm")
#: Lines and characters of tool output `ask` shows per step (the model sees the whole observation).
_SHOW_LINES, _SHOW_CHARS = 8, 240


def _add_agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2",
                        help="policy: 'smollm2' (default, from its wheel), 'tiny', an HF folder or id")
    parser.add_argument("--backend", choices=BACKENDS, default="hf", help="LLM backend (default: hf)")
    parser.add_argument("--base-url", default=None, help="openai backend: server URL (env OPENAI_BASE_URL)")
    parser.add_argument("--api-key", default=None, help="openai backend: key (env OPENAI_API_KEY)")
    parser.add_argument("--corpus", type=Path, default=None, help="corpus.jsonl (default: the mini-wiki)")
    parser.add_argument("--shards", type=Path, default=None,
                        help="shard folder (default: the mini-wiki's shards when the corpus is the mini-wiki)")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0: greedy)")
    parser.add_argument("--max-new-tokens", type=int, default=512, help="token budget of one assistant turn")
    parser.add_argument("--max-context-tokens", type=int, default=8192, help="episode ends past this length")
    parser.add_argument("--max-tool-calls", type=int, default=config.MAX_TOOL_CALLS)
    parser.add_argument("--timeout", type=float, default=config.DEFAULT_TIMEOUT_S, help="seconds per command")


def _add_constrained_option(parser: argparse.ArgumentParser, *, default: bool, why: str) -> None:
    parser.add_argument("--constrained", action=argparse.BooleanOptionalAction, default=default,
                        help=f"mask the model's tokens to the action protocol (agent/constrained.py); {why}")


def register(subparsers) -> None:
    ask = subparsers.add_parser("ask", help="answer one question with the search agent, showing each step")
    ask.add_argument("question")
    _add_agent_options(ask)
    _add_constrained_option(ask, default=True,
                            why="default on, so a small model's every turn is a valid action")
    ask.set_defaults(func=ask_command)

    ev = subparsers.add_parser("eval", help="run the agent over benchmarks; write records and EM / F1 tables")
    _add_agent_options(ev)
    _add_constrained_option(ev, default=False,
                            why="default off, so the scores measure the model itself; the setting is "
                                "saved in OUT/settings.json")
    ev.add_argument("--benchmarks", default=",".join(config.BENCHMARKS),
                    help="comma-separated names (or FlashRAG .jsonl paths)")
    ev.add_argument("--limit", type=int, default=50, help="questions per benchmark (first N)")
    ev.add_argument("--out", type=Path, default=None, help="output folder (default: runs/eval); reruns resume")
    ev.add_argument("--batch-size", type=int, default=8, help="episodes stepped together (one batched generate)")
    ev.set_defaults(func=eval_command)


def _backend_kwargs(args) -> dict:
    """Constructor keywords of the chosen backend (the URL and key only mean something over HTTP)."""
    from grepseek_lib.errors import UserError

    batch = max(1, getattr(args, "batch_size", 1))
    constrain = {"constrain": bool(getattr(args, "constrained", False))}
    if args.backend == "openai":
        given = (("base_url", args.base_url), ("api_key", args.api_key))
        return {"concurrency": batch, **constrain, **{k: v for k, v in given if v is not None}}
    if args.base_url or args.api_key:
        raise UserError("--base-url / --api-key need --backend openai")
    return {"batch_size": batch, **constrain} if args.backend == "hf" else constrain


def _check_limits(args) -> None:
    from grepseek_lib.errors import UserError

    for name in ("max_new_tokens", "max_context_tokens", "timeout"):
        if getattr(args, name) <= 0:
            raise UserError(f"--{name.replace('_', '-')} must be positive")
    if args.max_tool_calls < 0:
        raise UserError("--max-tool-calls must be >= 0")
    if args.temperature < 0:
        raise UserError("--temperature must be >= 0")


def _clip(text: str, lines: int = _SHOW_LINES, chars: int = _SHOW_CHARS) -> str:
    rows = text.splitlines()
    shown = [row if len(row) <= chars else row[:chars] + " ..." for row in rows[:lines]]
    if len(rows) > lines:
        shown.append(f"... ({len(rows) - lines} more lines)")
    return "\n".join(shown)


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def print_turn(traj, turn, out=sys.stdout) -> None:
    """One step, readably: reasoning, the command and a clipped view of its output (or the error)."""
    step = len(traj.turns)
    action = turn.action
    print(f"[{step}] ({turn.completion_tokens} tokens, {turn.llm_s:.1f} s)", file=out)
    if action.think and action.kind != "invalid":
        print(_indent("think: " + _clip(action.think, 6, 400)), file=out)
    if action.kind == "tool":
        payload = turn.observation or {}
        flags = [f"exit {payload.get('exit_code')}"] + [k for k in ("timed_out", "truncated") if payload.get(k)]
        print(_indent(f"$ {action.command}"), file=out)
        print(_indent(f"[{', '.join(flags)}, {turn.tool_s:.2f} s]"), file=out)
        for stream in ("stdout", "stderr"):
            if payload.get(stream):
                print(_indent(_clip(payload[stream]), "    | " if stream == "stdout" else "    ! "), file=out)
    elif action.kind == "answer":
        print(_indent(f"answer: {action.answer}"), file=out)
    else:
        print(_indent(f"format error: {action.error}"), file=out)
        print(_indent("raw: " + _clip(turn.text, 4)), file=out)
    out.flush()


def ask_command(args) -> int:
    from grepseek_lib.agent.backends import make_backend
    from grepseek_lib.agent.loop import run_episode
    from grepseek_lib.errors import UserError
    from grepseek_lib.eval.runner import make_tool, resolve_corpus

    _check_limits(args)
    if not args.question.strip():
        raise UserError("the question is empty")
    corpus, shards = resolve_corpus(args.corpus, args.shards)
    mode = "constrained" if args.constrained else "unconstrained"
    print(f"loading {args.model} ({args.backend}, {mode} decoding) ...", file=sys.stderr)
    backend = make_backend(args.backend, args.model, **_backend_kwargs(args))
    tool = make_tool(corpus, shards, timeout=args.timeout, max_obs_tokens=config.DEFAULT_MAX_OBS_TOKENS,
                     tokenizer=getattr(backend, "tokenizer", None))
    print(f"Query: {args.question.strip()}")
    began = time.perf_counter()
    traj = run_episode(args.question, backend, tool, max_tool_calls=args.max_tool_calls,
                       max_new_tokens=args.max_new_tokens, max_context_tokens=args.max_context_tokens,
                       temperature=args.temperature, on_turn=print_turn)
    elapsed = time.perf_counter() - began
    print(f"Answer: {traj.answer if traj.answer is not None else '(none)'}")
    print(f"(stop: {traj.stop_reason}; {traj.tool_calls} tool calls; {traj.format_errors} format errors; "
          f"{elapsed:.1f} s: LLM {traj.llm_s:.1f} s, tools {traj.tool_s:.2f} s)")
    return 0


def eval_command(args) -> int:
    from grepseek_lib.errors import UserError
    from grepseek_lib.eval.runner import evaluate, markdown_table

    _check_limits(args)
    benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    if not benchmarks:
        raise UserError("--benchmarks is empty; give names such as nq,hotpotqa")
    if args.limit is not None and args.limit <= 0:
        raise UserError("--limit must be positive")
    out = args.out or config.runs_dir() / "eval"
    _record_settings(out, args)
    table = evaluate(args.model, args.backend, benchmarks, args.limit, out, batch_size=max(1, args.batch_size),
                     corpus=args.corpus, shards=args.shards, temperature=args.temperature,
                     max_new_tokens=args.max_new_tokens, max_context_tokens=args.max_context_tokens,
                     max_tool_calls=args.max_tool_calls, timeout=args.timeout,
                     backend_kwargs=_backend_kwargs(args))
    print(markdown_table(table), end="")
    print(f"records, trajectories and tables in {out}")
    return 0


#: Settings a resumed eval must share with the records already in OUT (else the table mixes two systems).
_RESUME_SETTINGS = ("model", "backend", "constrained", "temperature", "max_new_tokens", "max_tool_calls")


def _record_settings(out: Path, args) -> None:
    """Write OUT/settings.json (model, backend, constrained decoding, ...); refuse to resume with others."""
    import json

    from grepseek_lib.errors import UserError

    settings = {name: getattr(args, name) for name in _RESUME_SETTINGS}
    path = Path(out) / "settings.json"
    if path.exists():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            before = {}
        changed = [f"{k}={before.get(k)!r} -> {v!r}" for k, v in settings.items() if k in before and before[k] != v]
        if changed:
            raise UserError(f"{out} holds results run with other settings ({'; '.join(changed)}): "
                            "use another --out, or the same settings to resume")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
