"""HTML pieces of one episode (its answer against the golds, each turn), shared by the static report and
the notebook browser so both show an episode the same way.

Corpus text, model output and commands are hostile input: every value passes through `esc` (html.escape
with quotes), so a passage holding `<script>` or `</details>` is shown as text, never parsed.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd


def text(value: Any) -> str:
    """A cell as text: None / NaN -> "", 2.0 -> "2"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # an exit code or a count in a column that also holds NaN
    return str(value)


def esc(value: Any) -> str:
    return html.escape(text(value), quote=True)


def pre(value: Any, css: str = "") -> str:
    return f'<pre class="{esc(css)}">{esc(value)}</pre>'


def score(value: Any) -> str:
    return "n/a" if text(value) == "" else f"{float(value):.2f}"


def answer_html(episode: Mapping[str, Any]) -> str:
    """The answer next to the golds, with EM / F1 and why the episode stopped."""
    golds = episode.get("golds")
    golds = list(golds) if isinstance(golds, list | tuple) or hasattr(golds, "tolist") else []
    gold_items = "".join(f"<li>{esc(g)}</li>" for g in golds) or "<li><i>none</i></li>"
    return (f'<table class="answer"><tr><th>question</th><td>{esc(episode.get("question"))}</td></tr>'
            f'<tr><th>answer</th><td>{esc(episode.get("answer")) or "<i>none</i>"}</td></tr>'
            f"<tr><th>golds</th><td><ul>{gold_items}</ul></td></tr>"
            f'<tr><th>score</th><td>EM {score(episode.get("em"))} · F1 {score(episode.get("f1"))} · '
            f'{esc(episode.get("outcome"))} · stop: {esc(episode.get("stop_reason"))} · '
            f'{esc(text(episode.get("tool_calls")))} tool calls</td></tr></table>')


def turn_title(turn: Mapping[str, Any]) -> str:
    kind = text(turn.get("kind"))
    head = f'turn {esc(turn.get("turn"))} · {esc(kind)}'
    if kind == "tool":
        return f'{head} · exit {esc(turn.get("exit_code"))} · <code>{esc(turn.get("command"))}</code>'
    if kind == "answer":
        return f'{head} · <b>{esc(turn.get("answer"))}</b>'
    return f'{head} · {esc(turn.get("error"))}'


def turn_body(turn: Mapping[str, Any]) -> str:
    """Thinking, the command, its exit code and flags, stdout in a collapsible block, stderr, the error."""
    parts = []
    redrawn = turn.get("redrawn")
    if isinstance(redrawn, list | tuple) and redrawn:
        listed = "".join(pre(command, "cmd") for command in redrawn)
        parts.append(f"<div><b>drawn again</b> (repeats of an earlier command, never run){listed}</div>")
    if text(turn.get("think")):
        parts.append(f'<div class="think"><b>think</b>{pre(turn.get("think"))}</div>')
    if text(turn.get("command")):
        flags = [f'exit {esc(turn.get("exit_code"))}'] + [k for k in ("timed_out", "truncated") if turn.get(k) is True]
        parts.append(f'<div><b>command</b> ({", ".join(flags)}){pre(turn.get("command"), "cmd")}</div>')
    stdout = text(turn.get("stdout"))
    if stdout:
        lines = stdout.count("\n") + (not stdout.endswith("\n"))
        parts.append(f"<details><summary>stdout ({lines} lines, {len(stdout)} chars)</summary>{pre(stdout)}</details>")
    elif text(turn.get("command")):
        parts.append("<div><i>no stdout</i></div>")
    if text(turn.get("stderr")):
        parts.append(f'<div><b>stderr</b>{pre(turn.get("stderr"), "err")}</div>')
    if text(turn.get("error")):
        parts.append(f'<div><b>format error</b>{pre(turn.get("error"), "err")}</div>')
    if not text(turn.get("command")) and text(turn.get("observation")):
        parts.append(f'<details><summary>shown next</summary>{pre(turn.get("observation"))}</details>')
    if text(turn.get("text")).strip():
        parts.append(f'<details><summary>raw generation</summary>{pre(turn.get("text"))}</details>')
    return "".join(parts)


def turn_html(turn: Mapping[str, Any], *, open_: bool = False) -> str:
    return (f'<details class="turn"{" open" if open_ else ""}><summary>{turn_title(turn)}</summary>'
            f"{turn_body(turn)}</details>")


def episode_title(episode: Mapping[str, Any]) -> str:
    return (f'[{esc(episode.get("system"))}] {esc(episode.get("benchmark"))}/{esc(episode.get("id"))} · '
            f'{esc(episode.get("outcome"))} · F1 {score(episode.get("f1"))} · {esc(episode.get("question"))}')


def episode_html(episode: Mapping[str, Any], turns: pd.DataFrame, *, index: int = 0) -> str:
    """One collapsible block: the answer against the golds, then one collapsible block per turn."""
    body = "".join(turn_html(t) for t in turns.to_dict("records")) or "<p><i>no turns recorded</i></p>"
    return (f'<details class="episode" data-i="{index}"><summary>{episode_title(episode)}</summary>'
            f"{answer_html(episode)}{body}</details>")
