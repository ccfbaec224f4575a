"""Decode-step time of SmolLM2 on this CPU: the lean loop (agent/decode.py) vs a static cache + torch.compile.

Measures issue #16's "another runtime" idea before building it into HFBackend: a random prompt of
`--prompt-tokens`, `--new-tokens` greedy tokens, `--batch` rows; prints prefill and ms per decode step.
Usage: OMP_NUM_THREADS=2 python scripts/compiled_decode.py --batch 8 --path compiled --attn eager
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import StaticCache

from grepseek_lib.agent.decode import decode, reserved_cache
from grepseek_lib.agent.models import load_model_and_tokenizer, resolve_model


def lean_run(model, ids, new_tokens: int) -> float:
    """Seconds for prefill + `new_tokens` steps of the lean loop."""
    start = time.perf_counter()
    with torch.inference_mode():
        decode(model, ids, torch.ones_like(ids), reserved_cache(model.config.num_hidden_layers,
               ids.shape[1] + new_tokens), max_new_tokens=new_tokens, eos_id=-1, pad_id=0)
    return time.perf_counter() - start


def compiled_run(model, step, cache, ids, new_tokens: int) -> float:
    """Seconds for `new_tokens - 1` compiled decode steps after an uncompiled prefill into the static cache."""
    batch, length = ids.shape
    with torch.no_grad():
        cache.reset()
        logits = model(input_ids=ids, position_ids=torch.arange(length)[None].expand(batch, -1),
                       past_key_values=cache, use_cache=True, cache_position=torch.arange(length),
                       logits_to_keep=1).logits
        token = logits[:, -1].argmax(-1)
        start = time.perf_counter()
        for i in range(new_tokens - 1):
            where = torch.tensor([length + i])
            logits = step(input_ids=token[:, None], position_ids=where[None].expand(batch, -1),
                          past_key_values=cache, use_cache=True, cache_position=where, logits_to_keep=1).logits
            token = logits[:, -1].argmax(-1)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=900)
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--path", choices=("lean", "compiled"), default="lean")
    parser.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa")
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    parser.add_argument("--mode", default=None, help="torch.compile mode, e.g. max-autotune")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if min(args.batch, args.prompt_tokens, args.repeats) < 1 or args.new_tokens < 2:
        parser.error("--batch, --prompt-tokens and --repeats must be >= 1, --new-tokens >= 2 (one decode step)")
    torch.manual_seed(0)
    model, _ = load_model_and_tokenizer(resolve_model("smollm2"), device="cpu", dtype=getattr(torch, args.dtype))
    model.eval()
    model.set_attn_implementation(args.attn)
    ids = torch.randint(100, 40000, (args.batch, args.prompt_tokens))
    steps = args.new_tokens - 1
    if args.path == "lean":
        prefill = lean_run(model, ids, 1)
        for r in range(args.repeats):
            total = lean_run(model, ids, args.new_tokens)
            print(f"lean run {r}: {total:.2f} s, prefill {prefill:.2f} s, "
                  f"{(total - prefill) / steps * 1000:.1f} ms/step")
        return
    import torch._inductor.config as inductor_config

    inductor_config.freezing = True
    cache = StaticCache(config=model.config, max_cache_len=args.prompt_tokens + args.new_tokens)
    step = torch.compile(model, mode=args.mode, dynamic=False)
    for r in range(args.repeats):
        seconds = compiled_run(model, step, cache, ids, args.new_tokens)
        print(f"compiled run {r} ({'with compile' if r == 0 else 'warm'}): {seconds / steps * 1000:.1f} ms/step")


if __name__ == "__main__":
    main()
