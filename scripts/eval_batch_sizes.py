"""How the eval's lockstep batch size pays on this machine: the first turn of N held-out agent episodes decoded
as batches of each size, tokens/s and the ratio to the first size (why the default profile evaluates 24 at a
time). Greedy, so every size generates the same tokens.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/eval_batch_sizes.py --sizes 8 16 32 --prompts 32
"""

from __future__ import annotations

import argparse
import time

from grepseek_lib import config
from grepseek_lib.agent.hf_backend import HFBackend
from grepseek_lib.agent.loop import STOP_STRINGS, corpus_lines
from grepseek_lib.agent.prompt import initial_messages
from grepseek_lib.eval.runner import plan_questions
from grepseek_lib.shell.open import open_tool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--max-obs-tokens", type=int, default=256, help="the cap the prompt states (default profile)")
    args = parser.parse_args()
    tool = open_tool(None, None, max_obs_tokens=args.max_obs_tokens)
    per_benchmark = -(-args.prompts // len(config.BENCHMARKS))
    questions = [q for _, q in plan_questions(config.BENCHMARKS, per_benchmark)][: args.prompts]
    conversations = [initial_messages(q["question"], corpus_lines(tool), max_tool_calls=config.MAX_TOOL_CALLS,
                                      max_obs_tokens=tool.max_obs_tokens) for q in questions]
    print("| batch size | prompts | s | tokens | tokens/s | vs first |\n|---:|---:|---:|---:|---:|---:|")
    first = None
    for size in args.sizes:
        backend = HFBackend(args.model, batch_size=size, reuse_turns=False)
        backend.generate(conversations[:2], max_new_tokens=4, temperature=0.0)  # warm-up: the system cache
        began = time.perf_counter()
        gens = backend.generate(conversations, max_new_tokens=args.max_new_tokens, temperature=0.0,
                                stop=list(STOP_STRINGS))
        seconds = time.perf_counter() - began
        tokens = sum(int(g.completion_tokens or 0) for g in gens)
        first = first or tokens / seconds
        print(f"| {size} | {len(conversations)} | {seconds:.1f} | {tokens} | {tokens / seconds:.1f} | "
              f"{tokens / seconds / first:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
