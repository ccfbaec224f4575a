"""`grepseek train sft | grpo | format-check`: the training stages from the command line.

Heavy imports (torch, transformers, trl) happen inside the command functions so `grepseek --help` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from grepseek_lib import config
from grepseek_lib.agent.cli import MODEL_HELP
from grepseek_lib.checks import existing_dir, existing_file, model_name, non_negative, positive, writable_dir
from grepseek_lib.errors import UserError
from grepseek_lib.train.configs import load_config
from grepseek_lib.train.format_check import format_check
from grepseek_lib.train.grpo import run_grpo
from grepseek_lib.train.sft import run_sft


def register(subparsers) -> None:
    train = subparsers.add_parser("train", help="SFT on cold-start trajectories, GRPO with shell rollouts",
                                  description="Train the search agent: `sft` on cold-start trajectories "
                                              "(`grepseek coldstart`), then `grpo` from the SFT folder; "
                                              "`format-check` measures how often a policy keeps the action format.")
    sub = train.add_subparsers(dest="train_command", required=True)

    sft = sub.add_parser("sft", help="supervised fine-tuning on a chat JSONL (assistant tokens only)")
    sft.add_argument("--data", type=Path, required=True, help="cold-start chat JSONL (rows with `messages`)")
    sft.add_argument("--model", default=None, help="base policy (default: the config's model): " + MODEL_HELP)
    sft.add_argument("--out", type=Path, required=True, help="output folder (becomes an HF model folder)")
    _common(sft)
    sft.add_argument("--max-examples", type=int, default=None, help="use at most N trajectories")
    sft.set_defaults(func=sft_command)

    grpo = sub.add_parser("grpo", help="GRPO with multi-turn shell rollouts (reward: F1 x format gate)")
    grpo.add_argument("--model", required=True, help="starting policy, usually the `train sft` output folder")
    grpo.add_argument("--out", type=Path, required=True, help="output folder (becomes an HF model folder)")
    _common(grpo)
    grpo.add_argument("--corpus", type=Path, default=None, help="corpus.jsonl (default: the mini-wiki)")
    grpo.add_argument("--shards", type=Path, default=None, help="shard folder for the parallel engine")
    grpo.add_argument("--benchmarks-dir", type=Path, default=None,
                      help="folder of <split>.jsonl training questions (default: the mini-wiki's benchmarks/; an "
                           "imported dataset's, e.g. data/wiki18/benchmarks)")
    grpo.add_argument("--train-splits", default=None,
                      help="comma-separated training splits (default: the config's, hotpotqa_train,musique_train; "
                           "imported FlashRAG data: nq_train,hotpotqa_train)")
    grpo.add_argument("--questions-per-step", type=int, default=None, help="questions per optimizer step")
    grpo.add_argument("--num-generations", type=int, default=None, help="G, rollouts per question")
    grpo.add_argument("--max-questions", type=int, default=None, help="size of the training question pool")
    grpo.add_argument("--probe-candidates", type=int, default=None,
                      help="probe this many questions with the starting policy and train on those whose "
                           "rewards differ (0: off)")
    grpo.set_defaults(func=grpo_command)

    check = sub.add_parser("format-check", help="format pass rate of agent episodes on held-out questions")
    check.add_argument("--model", required=True, help="policy to check, usually a `train` output folder, or " + MODEL_HELP)
    check.add_argument("--limit", type=int, default=50, help="number of held-out questions")
    check.add_argument("--benchmarks", default="nq,hotpotqa", help="comma-separated held-out benchmarks")
    check.add_argument("--corpus", type=Path, default=None, help="corpus.jsonl (default: the mini-wiki)")
    check.add_argument("--batch-size", type=int, default=8, help="episodes stepped together (default: 8)")
    check.add_argument("--max-new-tokens", type=int, default=512, help="tokens per turn (default: 512)")
    check.add_argument("--max-obs-tokens", type=int, default=config.DEFAULT_MAX_OBS_TOKENS,
                       help="tool output cap in tokens, stated in the prompt: use the one the policy was trained "
                            "with (default: %(default)s; `make run` trains at 256)")
    check.add_argument("--redraw-repeats", type=int, default=0, metavar="N",
                       help="draw a turn that repeats an earlier command again (sampled), up to N times, before "
                            "the tool refuses it (default: 0, off)")
    check.add_argument("--out", type=Path, default=None, help="write episodes (a batch at a time) and the result here; a rerun with "
                       "the same model, corpus and token budget resumes")
    check.set_defaults(func=format_check_command)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="cpu",
                        help="cpu (default: sized for minutes to an hour on a CPU), gpu (the full recipe), or a "
                             "YAML/JSON file: `base: cpu|gpu`, then `model:`, `sft: {...}`, `grpo: {...}` overrides")
    parser.add_argument("--lora", action="store_true", help="train LoRA adapters (merged into the saved model)")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in OUT")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after N optimizer steps")
    parser.add_argument("--lr", type=float, default=None, help="override the config's learning rate")


def _settings(args: argparse.Namespace, stage: str):
    """The config (checked whole) with the command line's overrides, each checked too."""
    cfg = load_config(args.config)
    settings = getattr(cfg, stage)
    overrides = {"learning_rate": args.lr}
    if stage == "sft":
        overrides["max_examples"] = args.max_examples
    else:
        overrides.update(questions_per_step=args.questions_per_step, num_generations=args.num_generations,
                         max_questions=args.max_questions)
    for key, value in overrides.items():
        positive("--lr" if key == "learning_rate" else f"--{key.replace('_', '-')}", value)
    if stage == "grpo" and args.train_splits is not None:
        splits = tuple(s.strip() for s in args.train_splits.split(",") if s.strip())
        if not splits:
            raise UserError("--train-splits is empty; name at least one training split, e.g. hotpotqa_train")
        overrides["train_splits"] = splits
    if stage == "grpo" and args.probe_candidates is not None:
        non_negative("--probe-candidates", args.probe_candidates)
        overrides["probe_candidates"] = args.probe_candidates
    settings = dataclasses.replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    positive("--max-steps", args.max_steps)
    if stage == "grpo":
        settings.gradient_accumulation_steps  # noqa: B018 -- a batch that does not divide fails here
    return cfg, settings


def _corpus(corpus: Path | None, shards: Path | None) -> None:
    """The corpus (and shard folder) a run searches must exist before its model loads."""
    existing_file(corpus or config.default_corpus(), "--corpus", "corpus file (run `grepseek data build`)")
    if shards is not None:
        existing_dir(shards, "--shards", "shard folder (build it with `grepseek shard`)")


def sft_command(args: argparse.Namespace) -> int:
    cfg, settings = _settings(args, "sft")
    existing_file(args.data, "--data", "chat JSONL (make one with `grepseek coldstart`)")
    model_name(args.model or cfg.model)
    writable_dir(args.out)
    summary = run_sft(args.data, args.model or cfg.model, args.out, settings, lora=args.lora or settings.lora,
                      resume=args.resume, max_steps=args.max_steps)
    print(json.dumps({k: v for k, v in summary.items() if k != "settings"}, indent=2, default=str))
    return 0


def grpo_command(args: argparse.Namespace) -> int:
    _, settings = _settings(args, "grpo")
    model_name(args.model)
    writable_dir(args.out)
    _corpus(args.corpus, args.shards)
    if args.benchmarks_dir is not None:
        existing_dir(args.benchmarks_dir, "--benchmarks-dir", "folder of training questions (`grepseek data build`)")
    summary = run_grpo(args.model, args.out, settings, corpus=args.corpus, shards=args.shards,
                       benchmarks_dir=args.benchmarks_dir, lora=args.lora or settings.lora, resume=args.resume,
                       max_steps=args.max_steps)
    print(json.dumps({k: v for k, v in summary.items() if k != "settings"}, indent=2, default=str))
    return 0


def format_check_command(args: argparse.Namespace) -> int:
    positive("--limit", args.limit)
    positive("--batch-size", args.batch_size)
    positive("--max-new-tokens", args.max_new_tokens)
    positive("--max-obs-tokens", args.max_obs_tokens)
    non_negative("--redraw-repeats", args.redraw_repeats)
    benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    if not benchmarks:
        raise UserError("--benchmarks is empty; name held-out benchmarks such as nq,hotpotqa")
    model_name(args.model)
    if args.out is not None:
        writable_dir(args.out)
    _corpus(args.corpus, None)
    result = format_check(args.model, limit=args.limit, benchmarks=benchmarks, corpus=args.corpus,
                          batch_size=args.batch_size, out=args.out, max_new_tokens=args.max_new_tokens,
                          max_obs_tokens=args.max_obs_tokens, redraws=args.redraw_repeats)
    print(json.dumps(result, indent=2))
    return 0
