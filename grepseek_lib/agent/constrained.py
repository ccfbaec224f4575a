"""Protocol-constrained decoding: every assistant turn comes out as `<think>..</think>` + ONE valid action.

WHY: a small instruct model (SmolLM2-135M) never opens a turn with `<think>` or an action on its own, so
every episode died on format errors before it searched anything. Instead of forking the protocol, the
backend masks the logits so that only protocol text can be written. The output is ordinary protocol text:
the parser, the format gate, the reward and the SFT data stay exactly as they are.

The grammar is taken from `actions.render_turn` (the canonical renderer), never retyped:

    <think> FREE_THINK </think>\\n ( <tool_call>{"name": "shell", "arguments": {"command": " FREE_COMMAND "}}</tool_call>
                                  | <answer> FREE_ANSWER </answer> ) EOS

Literal pieces may be written with any tokens whose text continues the literal (the model keeps its own
tokenization where it can). Free pieces allow any token whose text cannot break the structure:
- think / answer: no `<` (so no tag can start), answer on one line;
- command: a token must continue a valid JSON string (an escape may be split across tokens: a token
  ending in a lone backslash must be completed by the next one, and the closer cannot start meanwhile)
  and hold no `<`, so the command is always strict JSON and never contains a tag;
each free piece must start with a token that has visible text, and is closed by a token that begins its
closing literal; past its token cap (or when the turn's token budget only just fits the rest) the closer
is forced. EOS is allowed only after the action closed.

HFBackend applies it as a transformers LogitsProcessor (batched, left padding: only generated tokens are
read). OpenAI-compatible vLLM servers and the vLLM engine get the same grammar as a regular expression
(`turn_regex`); character caps there stand in for token caps.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from grepseek_lib.agent.actions import render_turn
from grepseek_lib.agent.prompt import budget_noted

#: Token caps of the free pieces: long enough for a useful thought, command and short answer, short
#: enough that a rambling model still reaches its action inside the turn budget.
DEFAULT_CAPS = {"think": 120, "command": 80, "answer": 24}
#: Character caps for the regex form (servers constrain characters, not tokens).
REGEX_CHAR_CAPS = {"think": 600, "command": 400, "answer": 120}

_THINK_MARK, _COMMAND_MARK, _ANSWER_MARK = "THINKMARK", "COMMANDMARK", "ANSWERMARK"


@dataclass(frozen=True)
class Pieces:
    """The fixed text around the three free pieces of a turn, cut out of the canonical renderer."""

    think_open: str
    think_close: str
    call_open: str
    call_close: str
    answer_open: str
    answer_close: str


def protocol_pieces() -> Pieces:
    """Split `render_turn` output at marker words: the literals of the grammar, defined once in actions.py."""
    think_open, call_side = render_turn(_THINK_MARK, command=_COMMAND_MARK).split(_THINK_MARK)
    call_head, call_close = call_side.split(_COMMAND_MARK)
    answer_head, answer_close = render_turn(_THINK_MARK, answer=_ANSWER_MARK).split(_THINK_MARK)[1].split(_ANSWER_MARK)
    # Both heads start with the think closer ("</think>\n"); the action tags start where they differ.
    shared = _common_prefix(call_head, answer_head)
    if shared.rfind("<") > shared.rfind(">"):  # the shared "<" belongs to the action tags
        shared = shared[: shared.rfind("<")]
    return Pieces(think_open=think_open, think_close=shared, call_open=call_head[len(shared):],
                  call_close=call_close, answer_open=answer_head[len(shared):], answer_close=answer_close)


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def turn_regex(caps: dict[str, int] | None = None, *, answer_only: bool = False) -> str:
    """The grammar as a regular expression (vLLM structured outputs), with character caps per piece.

    Each free piece holds at least one visible character, as the token-level grammar demands.
    """
    caps = {**REGEX_CHAR_CAPS, **(caps or {})}
    p = protocol_pieces()

    def free(char: str, visible: str, cap: int) -> str:
        half = max(0, cap // 2 - 1)
        return f"{char}{{0,{half}}}{visible}{char}{{0,{half}}}"

    json_char = r'(?:[^"\\<\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
    json_visible = r'(?:[^"\\<\x00-\x20]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
    call = (_regex_literal(p.call_open) + free(json_char, json_visible, caps["command"])
            + _regex_literal(p.call_close))
    ans = _regex_literal(p.answer_open) + free(r"[^<\n]", r"[^<\s]", caps["answer"]) + _regex_literal(p.answer_close)
    action = ans if answer_only else f"(?:{call}|{ans})"
    return (_regex_literal(p.think_open) + free("[^<]", r"[^<\s]", caps["think"]) + _regex_literal(p.think_close)
            + action)


def _regex_literal(text: str) -> str:
    """Escape only regex metacharacters (and newline as \\n): portable to xgrammar / outlines regexes."""
    return "".join("\\n" if ch == "\n" else ("\\" + ch if ch in ".^$*+?{}[]\\|()" else ch) for ch in text)


def wants_answer_only(conversation: list[dict]) -> bool:
    """True when the last message carries the loop's budget note: the protocol then allows only an answer."""
    return bool(conversation) and budget_noted(conversation[-1])


# ----- token tables ---------------------------------------------------------------------------------------

_FREE_KINDS = ("think", "command", "answer")


#: Control characters other than newline and tab: never useful in a thought or an answer.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _command_step(text: str, escape_open: bool) -> tuple[bool, bool, bool]:
    """(allowed, carries visible content, leaves a backslash escape open) for one token of the command's
    JSON string, written after a token that left an escape open (`escape_open`) or not.

    Tokens may split an escape: SmolLM2 writes the JSON text `\\\\\\"` as `\\\\` + `\\` + `"`, so a token
    ending in an odd run of backslashes opens an escape that the next token must complete.
    """
    if not text or "<" in text or _CONTROL.search(text) or "\ufffd" in text:  # \ufffd: a partial UTF-8 byte
        return False, False, False
    joined = ("\\" if escape_open else "") + text
    opens = (len(joined) - len(joined.rstrip("\\"))) % 2 == 1
    try:
        value = json.loads('"' + (joined[:-1] if opens else joined) + '"')
    except ValueError:
        return False, False, False
    return True, bool(value.strip()), opens


def _free_ok(kind: str, text: str) -> tuple[bool, bool]:
    """(allowed in this free piece, carries visible content) for one token's text."""
    if kind == "command":
        return _command_step(text, False)[:2]
    if not text or "<" in text or _CONTROL.search(text):
        return False, False
    if kind == "answer" and ("\n" in text or "\r" in text):
        return False, False
    return True, bool(text.strip())


class TokenTables:
    """Per tokenizer: every token's text and the boolean vocab masks of each grammar state (cached)."""

    def __init__(self, tokenizer: Any, vocab_size: int):
        import torch

        self.vocab_size = vocab_size
        n = min(len(tokenizer), vocab_size)
        texts = tokenizer.batch_decode([[i] for i in range(n)], skip_special_tokens=False,
                                       clean_up_tokenization_spaces=False)
        special = set(tokenizer.all_special_ids)
        for index, added in getattr(tokenizer, "added_tokens_decoder", {}).items():
            if getattr(added, "special", False):
                special.add(int(index))
        self.texts: list[str | None] = [None if i in special else t for i, t in enumerate(texts)]
        self.texts += [None] * (vocab_size - n)
        self.eos_id = tokenizer.eos_token_id
        self.by_text: dict[str, list[int]] = {}
        for i, text in enumerate(self.texts):
            if text:
                self.by_text.setdefault(text, []).append(i)
        self.free: dict[str, Any] = {}
        self.content: dict[str, Any] = {}
        for kind in _FREE_KINDS:
            ok, visible = zip(*(_free_ok(kind, t or "") for t in self.texts), strict=True)
            self.free[kind] = torch.tensor(ok, dtype=torch.bool)
            self.content[kind] = torch.tensor([a and b for a, b in zip(ok, visible, strict=True)], dtype=torch.bool)
        clean = [_command_step(t or "", False) for t in self.texts]
        pending = [_command_step(t or "", True) for t in self.texts]
        #: Per token: does the command's JSON string end inside an escape after it (from a clean / open state)?
        self.opens_escape = {False: [c[2] for c in clean], True: [p[2] for p in pending]}
        #: After a token that left an escape open: tokens that may follow, and those that also complete it.
        self.escape_free = torch.tensor([p[0] for p in pending], dtype=torch.bool)
        self.escape_done = torch.tensor([p[0] and not p[2] for p in pending], dtype=torch.bool)
        self.eos_only = torch.zeros(vocab_size, dtype=torch.bool)
        self.eos_only[self.eos_id] = True
        self._prefix: dict[tuple[tuple[str, ...], str], Any] = {}

    def continuing(self, literals: tuple[str, ...], matched: str) -> Any:
        """Tokens whose text continues `matched` along one of `literals` (may finish the literal)."""
        key = (literals, matched)
        if key not in self._prefix:
            import torch

            mask = torch.zeros(self.vocab_size, dtype=torch.bool)
            for literal in literals:
                if not literal.startswith(matched):
                    continue
                rest = literal[len(matched):]
                for k in range(1, len(rest) + 1):
                    for i in self.by_text.get(rest[:k], ()):
                        mask[i] = True
            if not mask.any():
                raise ValueError(f"the tokenizer cannot write {literals!r} after {matched!r}")
            self._prefix[key] = mask
        return self._prefix[key]


#: (tokenizer id, vocab size) -> (tokenizer, tables); holding the tokenizer keeps its id from being reused.
_TABLES: dict[tuple[int, int], tuple[Any, TokenTables]] = {}


def token_tables(tokenizer: Any, vocab_size: int) -> TokenTables:
    """Tables are built once per (tokenizer, vocab size) in a process (about a second for 50k tokens)."""
    key = (id(tokenizer), vocab_size)
    if key not in _TABLES or _TABLES[key][0] is not tokenizer:
        _TABLES[key] = (tokenizer, TokenTables(tokenizer, vocab_size))
    return _TABLES[key][1]


# ----- the state machine ----------------------------------------------------------------------------------

@dataclass
class _Row:
    """Where one generated turn stands in the grammar.

    States: "literal" (writing one of `choices`, `matched` so far), a free piece ("think", "command",
    "answer"), or "done" (only EOS).
    """

    state: str = "literal"
    choices: tuple[str, ...] = ()
    matched: str = ""
    free_tokens: int = 0
    has_content: bool = False
    escape_open: bool = False  # the command's last token ended inside a backslash escape
    generated: int = 0


class ProtocolGrammar:
    """The turn grammar: `start` a row, ask which tokens are `allowed`, `step` it by the token written."""

    def __init__(self, caps: dict[str, int] | None = None):
        self.caps = {**DEFAULT_CAPS, **(caps or {})}
        self.pieces = p = protocol_pieces()
        self.closer = {"think": p.think_close, "command": p.call_close, "answer": p.answer_close}
        #: Which state follows each literal once it is complete.
        self.after = {p.think_open: "think", p.think_close: "action", p.call_open: "command",
                      p.answer_open: "answer", p.call_close: "done", p.answer_close: "done"}
        #: Worst-case tokens from the start of a piece's closer to EOS (every token writes >= 1 character).
        act = max(len(p.call_open) + 1 + len(p.call_close), len(p.answer_open) + 1 + len(p.answer_close))
        #: The command reserves one more token: an escape left open must be completed before the closer.
        self.tail_need = {"think": len(p.think_close) + act + 1, "command": len(p.call_close) + 2,
                          "answer": len(p.answer_close) + 1}

    def start(self) -> _Row:
        return _Row(choices=(self.pieces.think_open,))

    def allowed(self, row: _Row, tables: TokenTables, remaining: int) -> Any:
        """Boolean vocab mask for the next token of `row`; `remaining` counts this token."""
        if row.state == "done":
            return tables.eos_only
        if row.state == "literal":
            return tables.continuing(row.choices, row.matched)
        kind = row.state
        spent = row.free_tokens >= self.caps[kind] or remaining - 1 < self.tail_need[kind]
        if row.escape_open:  # the next token completes the escape; the closer cannot start here
            return tables.escape_done if spent else tables.escape_free
        close = tables.continuing((self.closer[kind],), "")
        if not row.has_content:
            return tables.content[kind]
        if spent:
            return close
        return tables.free[kind] | close

    def step(self, row: _Row, token: int, tables: TokenTables, *, answer_only: bool = False) -> None:
        """Advance `row` by the token just written (an unexpected token, e.g. padding, ends the row)."""
        row.generated += 1
        if row.state == "done":
            return
        text = tables.texts[token] if 0 <= token < len(tables.texts) else None
        if not text:
            row.state = "done"
            return
        if row.state == "literal":
            self._write_literal(row, row.choices, row.matched + text, answer_only)
        elif not row.escape_open and self.closer[row.state].startswith(text):
            self._write_literal(row, (self.closer[row.state],), text, answer_only)
        else:
            row.free_tokens += 1
            row.has_content = row.has_content or bool(tables.content[row.state][token])
            if row.state == "command":
                row.escape_open = tables.opens_escape[row.escape_open][token]

    def _write_literal(self, row: _Row, choices: tuple[str, ...], matched: str, answer_only: bool) -> None:
        done = [c for c in choices if c == matched]
        if not done:
            live = tuple(c for c in choices if c.startswith(matched))
            row.state, row.choices, row.matched = ("literal", live, matched) if live else ("done", (), "")
            return
        following = self.after[done[0]]
        row.choices, row.matched, row.free_tokens, row.has_content = (), "", 0, False
        if following == "action":
            p = self.pieces
            row.state, row.choices = "literal", (p.answer_open,) if answer_only else (p.call_open, p.answer_open)
        else:
            row.state = following


class ProtocolLogitsProcessor:
    """transformers LogitsProcessor: masks each row's scores to the protocol grammar.

    Build one per `generate` call. Rows are read from the first generated position on, so left padding and
    prompts of different lengths need nothing special; rows already finished see only EOS (replaced by
    padding by transformers anyway).
    """

    def __init__(self, tokenizer: Any, batch_size: int, max_new_tokens: int, *,
                 answer_only: list[bool] | None = None, caps: dict[str, int] | None = None):
        self.tokenizer = tokenizer
        self.grammar = ProtocolGrammar(caps)
        self.rows = [self.grammar.start() for _ in range(batch_size)]
        self.answer_only = list(answer_only or [False] * batch_size)
        self.max_new_tokens = max_new_tokens
        self.prompt_len: int | None = None
        self.tables: TokenTables | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.tables is None:
            self.tables = token_tables(self.tokenizer, scores.shape[-1])
        tables = self.tables
        if self.prompt_len is None:
            self.prompt_len = input_ids.shape[1]
        elif input_ids.shape[1] > self.prompt_len:
            for row, token, answer_only in zip(self.rows, input_ids[:, -1].tolist(), self.answer_only, strict=True):
                self.grammar.step(row, token, tables, answer_only=answer_only)
        masks = [self.grammar.allowed(row, tables, self.max_new_tokens - row.generated) for row in self.rows]
        allowed = torch.stack(masks).to(scores.device)
        return scores.masked_fill(~allowed, float("-inf"))
