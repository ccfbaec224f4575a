"""The one chat template every policy wears, so SFT, GRPO and inference render identical tokens.

It is Qwen3-style ChatML written for our protocol: `<|im_start|>ROLE\\n...<|im_end|>\\n`, tool results as a
user turn of `<tool_response>\\n...\\n</tool_response>` blocks, and assistant text kept verbatim (ours already
holds `<think>..</think>` plus one `<tool_call>{json}</tool_call>` or `<answer>..</answer>`).

What trl 1.16 / transformers 5.24 need from a template (read from their sources):
- SFTTrainer(assistant_only_loss=True) uses the template as-is when it contains `{% generation %}` markers
  (`has_generation_markers`), else it swaps in a patched copy of a *known* template and fails on unknown
  ones. It warns unless the assistant's end-of-turn token falls inside the markers
  (`is_chat_template_stop_token_trained`), so `<|im_end|>` sits inside them and the `\\n` after it outside.
- GRPOTrainer(tools=... / environment_factory=...) requires `supports_tool_calling` (structured `tool_calls`
  with dict arguments and tool messages must all appear in the text) and `is_chat_template_prefix_preserving`
  (a conversation renders as a prefix of itself plus a tool turn; Qwen3's own template breaks this by dropping
  earlier think blocks, ours never rewrites history). It then builds multi-turn ids by concatenation,
  cutting the prefix at the last `eos_token_id`, so `<|im_end|>` must be the tokenizer's eos.
- GRPOTrainer parses completions with `tokenizer.parse_response` when the tokenizer has a
  `response_template`; `trl.add_response_schema` only knows built-in templates by exact text, so
  `install_chat_template` sets our own `RESPONSE_TEMPLATE` (saved in tokenizer_config.json).
- The `tools=` argument of apply_chat_template is ignored on purpose: the system prompt of agent/prompt.py is
  the single description of the shell tool, so every stage sees the same prompt.
"""

from __future__ import annotations

import json
from typing import Any

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"

#: Markers of our protocol. The first three are special tokens (as in Qwen3); the tag pairs are single,
#: non-special tokens in Qwen3 and in the tiny model, so they survive `skip_special_tokens=True`.
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)
TAG_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

CHAT_TEMPLATE = (
    # A message's text: a plain string, or the text parts of a list of content blocks; None means empty.
    "{%- macro text_of(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is none -%}"
    "{%- elif content is mapping -%}{{- content | tojson -}}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part is string -%}{{- part -}}{%- elif part.type == 'text' -%}{{- part.text -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    # Structured calls render exactly as the text form `<tool_call>{"name": ..., "arguments": ...}</tool_call>`.
    "{%- macro call_of(call) -%}"
    "{%- set fn = call.function if call.function is defined else call -%}"
    "{%- set args = fn.arguments if fn.arguments is defined else {} -%}"
    '{{- \'<tool_call>{"name": \' + (fn.name | tojson) + \', "arguments": \' -}}'
    "{{- args if args is string else (args | tojson) -}}"
    "{{- '}</tool_call>' -}}"
    "{%- endmacro -%}"
    "{%- for message in messages -%}"
    "{%- set role = message.role -%}"
    "{%- if role == 'system' or role == 'user' -%}"
    "{{- '<|im_start|>' + role + '\\n' + text_of(message.content) + '<|im_end|>\\n' -}}"
    "{%- elif role == 'assistant' -%}"
    "{%- set ns = namespace(text='') -%}"
    "{%- if message.reasoning_content is defined and message.reasoning_content -%}"
    "{%- set ns.text = '<think>' + message.reasoning_content + '</think>\\n' -%}"
    "{%- endif -%}"
    "{%- set ns.text = ns.text + text_of(message.content) -%}"
    "{%- if message.tool_calls is defined and message.tool_calls -%}"
    "{%- for call in message.tool_calls -%}"
    "{%- if ns.text and not ns.text.endswith('\\n') -%}{%- set ns.text = ns.text + '\\n' -%}{%- endif -%}"
    "{%- set ns.text = ns.text + call_of(call) -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    # A turn marked `no_loss` (a replayed mistake the data shows only to teach the recovery after it) is
    # rendered outside the generation markers, so it carries no loss.
    "{%- if message.no_loss is defined and message.no_loss -%}{{- ns.text + '<|im_end|>' -}}"
    "{%- else -%}{%- generation -%}{{- ns.text + '<|im_end|>' -}}{%- endgeneration -%}{%- endif -%}"
    "{{- '\\n' -}}"
    "{%- elif role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + text_of(message.content) + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- else -%}"
    "{{- raise_exception('unknown chat role: ' + role) -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

#: How transformers' `parse_response` (used by trl's GRPOTrainer) reads a generated assistant turn back into a
#: message: optional reasoning, free text (our `<answer>` block stays in `content`), then tool calls as JSON.
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close_pattern": r"</think>\s*", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def install_chat_template(tokenizer: Any) -> Any:
    """Put our template and response parser on `tokenizer` (in place) and make `<|im_end|>` its eos.

    The eos matters twice: generation stops at the end of a turn, and trl cuts multi-turn prefixes at eos.
    A pad distinct from eos keeps the trained end-of-turn token from being mistaken for padding.
    """
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    vocab = tokenizer.get_vocab()
    if IM_END in vocab:
        tokenizer.eos_token = IM_END
    if END_OF_TEXT in vocab and vocab[END_OF_TEXT] != vocab.get(IM_END):
        if tokenizer.pad_token is None or tokenizer.pad_token == tokenizer.eos_token:
            tokenizer.pad_token = END_OF_TEXT
    elif tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _tool_text(content: Any) -> str:
    """The text the template shows for a tool message's content (a string, a JSON object, or nothing)."""
    if content is None:
        return ""
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False)
    if isinstance(content, str):
        return content
    raise TypeError(f"tool message content must be a string or an object, not {type(content).__name__}")


def tool_messages_as_user(messages: list[dict]) -> list[dict]:
    """Rewrite runs of tool messages as one user message that renders to the very same text.

    OpenAI-style endpoints demand `tool_call_id` on tool messages; our tool turns are plain text, so sending
    them as user turns works with any server and, under our template, gives identical tokens.
    """
    out: list[dict] = []
    for message in messages:
        if message.get("role") != "tool":
            out.append(message)
            continue
        block = f"<tool_response>\n{_tool_text(message.get('content'))}\n</tool_response>"
        previous = out[-1] if out else None
        if previous is not None and previous.get("_from_tool"):
            previous["content"] += "\n" + block
        else:
            out.append({"role": "user", "content": block, "_from_tool": True})
    return [{k: v for k, v in m.items() if k != "_from_tool"} for m in out]
