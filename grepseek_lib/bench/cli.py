"""`grepseek bench ...`: latency measurements (engine: sequential vs sharded pipelines; train: float32 vs the
faster training / generation path)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grepseek_lib import config
from grepseek_lib.agent.models import load_tokenizer
from grepseek_lib.bench import engine as engine_bench
from grepseek_lib.bench import engine_report
from grepseek_lib.bench import train as train_bench
from grepseek_lib.bench.engine import FAST_REPEATS, FAST_S
from grepseek_lib.checks import existing_file, model_name, non_negative, positive, writable_dir
from grepseek_lib.errors import UserError
from grepseek_lib.shell.open import open_tool, resolve_corpus
from grepseek_lib.train.format_check import held_out_questions
from grepseek_lib.train.grpo import load_questions


def register(subparsers: argparse._SubParsersAction) -> None:
    bench = subparsers.add_parser("bench", help="latency benchmarks")
    kinds = bench.add_subparsers(dest="bench_command", required=True)
    engine = kinds.add_parser("engine", help="sequential vs sharded engine over typical agent pipelines")
    engine.add_argument("--corpus", type=Path, default=None, help="corpus file (default: the mini-wiki corpus)")
    engine.add_argument("--shards", type=int, required=True, help="number of shards (built next to the corpus)")
    engine.add_argument("--repeats", type=int, default=5, help="timed runs per pipeline and mode (median)")
    engine.add_argument("--fast-repeats", type=int, default=FAST_REPEATS,
                        help=f"at least this many runs for pipelines under {FAST_S * 1000:g} ms (noise)")
    engine.add_argument("--index", type=Path, default=None,
                        help="index folder (grepseek index): adds index + shards columns and selective rows")
    engine.add_argument("--replay-chat", type=Path, nargs="*", default=[],
                        help="with --index: also replay the tool commands of these chat files (cold-start train.jsonl)")
    engine.add_argument("--replay-trajectories", type=Path, nargs="*", default=[],
                        help="with --index: also replay the tool commands of these eval trajectory files")
    engine.add_argument("--out", type=Path, default=None,
                        help="folder for engine_bench.md / .csv (default: runs/bench_engine)")
    engine.set_defaults(func=engine_main)
    train = kinds.add_parser("train", help="SFT step and greedy generation: float32 vs the new path, same examples")
    train.add_argument("--model", default="smollm2", help="smollm2 (default), tiny or a model folder")
    train.add_argument("--data", type=Path, default=None,
                       help="cold-start chat JSONL (default: data/coldstart/train.jsonl)")
    train.add_argument("--steps", type=int, default=3, help="SFT steps per run (the loss curves' length)")
    train.add_argument("--repeats", type=int, default=2, help="runs per path, float32 and new alternating")
    train.add_argument("--gen-repeats", type=int, default=None,
                       help="generation runs per path (default: --repeats; generation is cheaper than SFT)")
    train.add_argument("--prompts", type=int, default=1, help="agent prompts decoded together (a batch)")
    train.add_argument("--max-new-tokens", type=int, default=64, help="tokens generated per prompt")
    train.add_argument("--precision", choices=("auto", "float32", "bf16"), default="auto",
                       help="the new path's precision (auto: bf16 only on a CPU with native bf16)")
    train.add_argument("--episodes", type=int, default=4,
                       help="held-out questions for the agent-episode rows, run as one batch (0: skip them)")
    train.add_argument("--episode-benchmarks", default="hotpotqa,musique,popqa",
                       help="comma-separated held-out benchmarks the episode questions come from (round-robin)")
    train.add_argument("--episode-tokens", type=int, default=512, help="token cap of one agent turn")
    train.add_argument("--grpo-rollouts", type=int, default=2,
                       help="rollouts of the one training question in the GRPO-step row (0: skip it)")
    train.add_argument("--corpus", type=Path, default=None, help="corpus.jsonl the episodes search (default: the mini-wiki)")
    train.add_argument("--benchmarks-dir", type=Path, default=None,
                       help="folder of benchmark .jsonl files (default: the mini-wiki's)")
    train.add_argument("--out", type=Path, default=None,
                       help="folder for train_bench.md / .json (default: runs/bench_train)")
    train.set_defaults(func=train_main)


def engine_main(args: argparse.Namespace) -> int:
    corpus = args.corpus or config.default_corpus()  # bench_engine checks it and --shards first
    positive("--repeats", args.repeats)
    non_negative("--fast-repeats", args.fast_repeats)
    out = writable_dir(args.out or config.runs_dir() / "bench_engine")
    frame, summary = engine_bench.bench_engine(corpus, args.shards, repeats=args.repeats,
                                  fast_repeats=args.fast_repeats, index=args.index)
    csv_path, md_path = engine_report.write_report(frame, summary, out)
    print(engine_report.markdown_table(frame, summary))
    print(f"wrote {md_path} and {csv_path}")
    if args.index is not None and (args.replay_chat or args.replay_trajectories):
        print(engine_report.replay_report(corpus, args.shards, args.index, args.replay_trajectories,
                                          args.replay_chat, out))
    return 0


def _episode_setup(args: argparse.Namespace) -> dict | None:
    """Questions, tool and turn cap of the agent-episode rows, or None when --episodes is 0."""
    if not args.episodes:
        return None
    benchmarks = [b.strip() for b in args.episode_benchmarks.split(",") if b.strip()]
    questions = held_out_questions(benchmarks, args.episodes, args.benchmarks_dir)
    if not questions:
        raise UserError(f"no held-out questions in {benchmarks}; check --episode-benchmarks / --benchmarks-dir")
    tool = open_tool(args.corpus, None, tokenizer=load_tokenizer(args.model))
    return {"questions": questions, "tool": tool, "max_new_tokens": args.episode_tokens}


def _grpo_setup(args: argparse.Namespace) -> dict | None:
    """The first training question, the corpus and G for the GRPO-step row, or None when --grpo-rollouts is 0."""
    if not args.grpo_rollouts:
        return None
    folder = args.benchmarks_dir or config.benchmarks_dir()
    questions = load_questions(config.TRAIN_SPLITS, folder, limit=1)
    corpus, _ = resolve_corpus(args.corpus, None)
    return {"questions": questions, "corpus": corpus, "generations": args.grpo_rollouts}


def train_main(args: argparse.Namespace) -> int:
    non_negative("--episodes", args.episodes)
    non_negative("--grpo-rollouts", args.grpo_rollouts)
    for name in ("--steps", "--repeats", "--gen-repeats", "--prompts", "--max-new-tokens", "--episode-tokens"):
        positive(name, getattr(args, name[2:].replace("-", "_")))
    data = existing_file(args.data or config.data_dir() / "coldstart" / "train.jsonl", "--data",
                         "chat JSONL (make one with `grepseek coldstart`)")
    model_name(args.model)
    out = writable_dir(args.out or config.runs_dir() / "bench_train")
    report = train_bench.bench_train(args.model, data, steps=args.steps, repeats=args.repeats, prompts_n=args.prompts,
                                     max_new_tokens=args.max_new_tokens, precision=args.precision,
                                     gen_repeats=args.gen_repeats, episodes=_episode_setup(args),
                                     grpo_setup=_grpo_setup(args))
    print(train_bench.markdown(report), end="")
    print(f"wrote {train_bench.write_report(report, out)}")
    return 0
