"""The ReAct loop: the model thinks, runs one shell pipeline, reads the result, ... then answers.

Many episodes step in lockstep, so each turn is ONE batched `backend.generate` call (the GPU or the
HTTP server sees a batch, not a queue), and the tool calls of a turn run concurrently.

Protocol (PAPER.md): at most `max_tool_calls` tool calls, then the agent is told to answer; a malformed
action gets one format-error observation and a second one in a row ends the episode; an episode whose
next prompt would not fit `max_context_tokens` ends. Stop reasons: answer, format_errors, budget, context.

A command the episode already ran prints what it printed before, so with `redraws` > 0 such a proposal is
drawn again (sampled) before anything runs; the rejected commands stay on the turn (`Turn.redrawn`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from grepseek_lib import config
from grepseek_lib.agent.actions import Action, parse_action
from grepseek_lib.agent.generation import Generation
from grepseek_lib.agent.prompt import ToolBudget, format_error_message, initial_messages, repeat_payload
from grepseek_lib.agent.trajectory import Trajectory, Turn
from grepseek_lib.progress import progress_bar
from grepseek_lib.shell.tool import observation_text

#: Generation stops after the first action; the parser accepts the text with or without the stop string.
STOP_STRINGS = ("</tool_call>", "</answer>")
#: Two malformed actions in a row end the episode.
MAX_FORMAT_ERRORS_IN_ROW = 2
#: Tokens a chat template adds around one message (role markers), for the context estimate.
_TEMPLATE_TOKENS_PER_MESSAGE = 8
DEFAULT_MAX_NEW_TOKENS = 512
DEFAULT_MAX_CONTEXT_TOKENS = 8192
#: Temperature of the draws that replace a proposed repeat: greedy decoding would write it again.
REDRAW_TEMPERATURE = 0.7


@dataclass
class _Episode:
    traj: Trajectory
    budget: ToolBudget
    errors_in_row: int = 0
    done: bool = False

    @property
    def messages(self) -> list[dict]:
        return self.traj.messages

    def finish(self, reason: str, answer: str | None = None) -> None:
        self.traj.stop_reason, self.traj.answer, self.done = reason, answer, True


def _as_item(item, index: int) -> tuple[str, str, list[str]]:
    """(id, question, golds) from a plain question or a benchmark record."""
    if isinstance(item, str):
        return str(index), item, []
    golds = item.get("golden_answers", item.get("golds", []))
    return str(item.get("id", index)), item["question"], [str(g) for g in golds]


def _token_counter(backend, tool) -> Callable[[str], int]:
    """Count tokens with the policy's tokenizer when one is at hand, else a cautious estimate."""
    tokenizer = getattr(backend, "tokenizer", None) or getattr(tool, "tokenizer", None)
    if tokenizer is not None and hasattr(tokenizer, "encode"):
        return lambda text: len(tokenizer.encode(text, add_special_tokens=False))
    return lambda text: len(text.encode("utf-8")) // 3 + 1


def corpus_lines(tool) -> int:
    """The corpus line count the prompt announces (the tool knows it, or we count once)."""
    n_lines = getattr(tool, "n_lines", None)
    if n_lines is not None:
        return int(n_lines)
    manifest = getattr(getattr(tool, "engine", None), "manifest", None)
    if manifest is not None:  # sharded: the manifest already counted them
        return sum(shard.lines for shard in manifest.shards)
    stat = os.stat(tool.corpus)
    return _count_lines(os.fspath(tool.corpus), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _count_lines(path: str, size: int, mtime_ns: int) -> int:
    """Newlines in a file, counted once per (path, size, mtime): a big corpus is read once per process."""
    count = 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            count += block.count(b"\n")
    return count


def _run_tools(tool, commands: list[str], workers: int) -> list[tuple[dict, float]]:
    """Run a turn's tool calls (concurrently when there are several); returns (payload, seconds) each."""

    def one(command: str) -> tuple[dict, float]:
        start = time.perf_counter()
        payload = tool(command)
        return payload, time.perf_counter() - start

    if len(commands) <= 1 or workers <= 1:
        return [one(c) for c in commands]
    with ThreadPoolExecutor(max_workers=min(workers, len(commands))) as pool:
        return list(pool.map(one, commands))


def _run_new(tool, work: list[tuple[_Episode, Turn]], workers: int) -> list[tuple[dict, float]]:
    """This turn's calls: each command its episode ran before gets `repeat_payload` (0 s), the rest run."""
    earlier = [ep.budget.earlier_call(turn.action.command) for ep, turn in work]
    fresh = iter(_run_tools(tool, [turn.action.command for (_, turn), e in zip(work, earlier, strict=True) if e is None],
                            workers))
    return [next(fresh) if e is None else (repeat_payload(turn.action.command, e), 0.0)
            for (_, turn), e in zip(work, earlier, strict=True)]


@contextmanager
def episode_progress(total: int, desc: str) -> Iterator[Callable[[Trajectory, Turn], None]]:
    """A progress bar of finished episodes; yields the `on_turn` callback for `run_batch` that advances it."""
    ended: set[int] = set()
    with progress_bar(total=total, desc=desc, unit="episode") as bar:
        def on_turn(trajectory: Trajectory, _turn: Turn) -> None:
            if trajectory.stop_reason and id(trajectory) not in ended:
                ended.add(id(trajectory))
                bar.update(1)

        yield on_turn


def _take_turn(ep: _Episode, gen: Generation, redrawn: list) -> Turn | None:
    """Record one generated turn and act on it; the turn when its command is to run, else None."""
    action = parse_action(gen.text)
    turn = Turn(text=gen.text, action=action, prompt_tokens=int(gen.prompt_tokens or 0),
                completion_tokens=int(gen.completion_tokens or 0), llm_s=float(gen.latency_s or 0.0),
                redrawn=redrawn)
    ep.traj.turns.append(turn)
    if action.kind == "answer":
        ep.messages.append({"role": "assistant", "content": action.text})
        ep.finish("answer", action.answer)
    elif ep.budget.spent:
        ep.messages.append({"role": "assistant", "content": action.text or gen.text})
        ep.finish("budget")
    elif action.kind == "invalid":
        ep.messages.append({"role": "assistant", "content": gen.text.strip()})
        ep.errors_in_row += 1
        if ep.errors_in_row >= MAX_FORMAT_ERRORS_IN_ROW:
            ep.finish("format_errors")
        else:
            turn.observation_text = format_error_message(action.error or "malformed action")
            ep.messages.append({"role": "tool", "content": turn.observation_text})
    else:
        ep.messages.append({"role": "assistant", "content": action.text})
        return turn
    return None


def run_batch(items: Sequence, backend, tool, *, max_tool_calls: int = config.MAX_TOOL_CALLS,
              max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
              max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS, temperature: float = 0.0,
              n_lines: int | None = None, tool_workers: int = 4, redraws: int = 0,
              on_turn: Callable[[Trajectory, Turn], None] | None = None) -> list[Trajectory]:
    """Run one episode per item (a question string or a benchmark record) in lockstep; returns them in order.

    `redraws`: how many sampled draws may replace a turn that repeats an earlier command (0: none, the
    tool refuses the repeat). `on_turn(trajectory, turn)` is called after every turn (the CLI prints steps
    live with it).
    """
    n_lines = corpus_lines(tool) if n_lines is None else n_lines
    count_tokens = _token_counter(backend, tool)
    episodes = []
    for index, item in enumerate(items):
        qid, question, golds = _as_item(item, index)
        messages = initial_messages(question, n_lines, max_tool_calls=max_tool_calls,
                                    max_obs_tokens=tool.max_obs_tokens)  # the prompt states the tool's own cut
        episodes.append(_Episode(Trajectory(question=question, id=qid, golds=golds, messages=messages),
                                 ToolBudget(max_tool_calls)))

    while active := [ep for ep in episodes if not ep.done]:
        generations = backend.generate([ep.messages for ep in active], max_new_tokens=max_new_tokens,
                                       temperature=temperature, stop=list(STOP_STRINGS))
        redrawn = _redraw_repeats(backend, active, generations, redraws, max_new_tokens=max_new_tokens)
        tool_work: list[tuple[_Episode, Turn]] = []
        for ep, gen in zip(active, generations, strict=True):
            turn = _take_turn(ep, gen, redrawn.get(id(ep), []))
            if turn is not None:
                tool_work.append((ep, turn))

        for (ep, turn), (payload, seconds) in zip(tool_work, _run_new(tool, tool_work, tool_workers), strict=True):
            turn.observation, turn.tool_s = payload, seconds
            turn.observation_text = ep.budget.observe(observation_text(payload), turn.action.command)
            ep.errors_in_row = 0
            ep.messages.append({"role": "tool", "content": turn.observation_text})

        for ep in active:
            turn = ep.traj.turns[-1]
            if not ep.done and _next_prompt_tokens(ep, turn, count_tokens) + max_new_tokens > max_context_tokens:
                ep.finish("context")
            if on_turn is not None:
                on_turn(ep.traj, turn)
    return [ep.traj for ep in episodes]


def _proposes_repeat(ep: _Episode, action: Action) -> bool:
    """Whether an action is a tool call its episode ran before (and would run, the budget not spent)."""
    return action.kind == "tool" and not ep.budget.spent and ep.budget.earlier_call(action.command) is not None


def _redraw_repeats(backend, active: list[_Episode], generations: list, redraws: int, *,
                    max_new_tokens: int) -> dict[int, list[str]]:
    """Replace, in `generations`, each proposed repeat by a sampled draw that is a new command (the policy
    chose to search, so a sampled answer is no substitute), trying up to `redraws` times (one batched call
    a try); a proposal no draw replaced stays, and the tool refuses it. Returns the rejected repeats (the
    proposal, then any drawn) by episode id."""
    proposed = {i: action for i, (ep, gen) in enumerate(zip(active, generations, strict=True))
                if redraws > 0 and _proposes_repeat(ep, action := parse_action(gen.text))}
    pending = list(proposed)
    rejected = {id(active[i]): [action.command or ""] for i, action in proposed.items()}
    if pending and callable(reseed := getattr(backend, "reseed", None)):  # a resumed run draws the same
        first = active[pending[0]].traj
        reseed(f"{first.id}:{len(first.turns)}")
    for _ in range(redraws):
        if not pending:
            break
        draws = backend.generate([active[i].messages for i in pending], max_new_tokens=max_new_tokens,
                                 temperature=REDRAW_TEMPERATURE, stop=list(STOP_STRINGS))
        still = []
        for i, draw in zip(pending, draws, strict=True):
            action = parse_action(draw.text)
            if action.kind == "tool" and not _proposes_repeat(active[i], action):
                spent = float(generations[i].latency_s or 0.0)  # the replaced generation's time counts too
                generations[i] = dataclasses.replace(draw, latency_s=float(draw.latency_s or 0.0) + spent)
                continue
            still.append(i)
            if action.kind == "tool":
                rejected[id(active[i])].append(action.command or "")
        pending = still
    return rejected


def _next_prompt_tokens(ep: _Episode, turn: Turn, count_tokens: Callable[[str], int]) -> int:
    """Estimate the next prompt's length: the last prompt + its completion + the messages added since."""
    if turn.prompt_tokens:
        added = ep.messages[-2:]
        base = turn.prompt_tokens + turn.completion_tokens
        return base + sum(count_tokens(m["content"]) + _TEMPLATE_TOKENS_PER_MESSAGE for m in added[1:])
    return sum(count_tokens(m["content"]) + _TEMPLATE_TOKENS_PER_MESSAGE for m in ep.messages)


def run_episode(question, backend, tool, **kwargs) -> Trajectory:
    """One episode (a question string or a benchmark record); see `run_batch` for the options."""
    return run_batch([question], backend, tool, **kwargs)[0]


def even_batches(items: Sequence, batch_size: int) -> list[list]:
    """`items` in the fewest batches of at most `batch_size`, sized evenly: episodes run in lockstep, so a
    last batch of 6 after two of 32 would cost nearly a full batch's turns for a few questions."""
    items, batch_size = list(items), max(1, int(batch_size))
    if not items:
        return []
    size = math.ceil(len(items) / math.ceil(len(items) / batch_size))
    return [items[start:start + size] for start in range(0, len(items), size)]
