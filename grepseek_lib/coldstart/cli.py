"""`grepseek coldstart`: verified Tutor/Planner trajectories -> a chat dataset for SFT, with a stats report."""

from __future__ import annotations

from pathlib import Path

from grepseek_lib import config
from grepseek_lib.agent.models import load_tokenizer
from grepseek_lib.checks import fraction, model_name, positive, writable_dir
from grepseek_lib.coldstart.build import ColdStartSettings, Teacher, build_coldstart
from grepseek_lib.coldstart.chain import FILL_WITH, OTHER_NAME_RATE
from grepseek_lib.coldstart.export import REPEAT_RECOVERY_RATE, format_table
from grepseek_lib.coldstart.searches import BLIND_GUESS_RATE, PHRASE_FIRST_RATE
from grepseek_lib.errors import UserError


def register(subparsers) -> None:
    cs = subparsers.add_parser("coldstart", help="build verified cold-start trajectories (chat JSONL + parquet)",
                               description="Build supervised training data: an answer-aware Tutor and an answer-blind "
                                           "Planner search the corpus with the agent's shell tool; trajectories whose "
                                           "every command was run and checked become chat examples for `train sft`.")
    cs.add_argument("--splits", default=",".join(config.TRAIN_SPLITS),
                    help="comma-separated benchmark names or FlashRAG .jsonl paths (default: the training splits)")
    cs.add_argument("--limit", type=int, default=None, help="first N questions of each split")
    cs.add_argument("--out", type=Path, default=None, help="output folder (default: data/coldstart); reruns resume")
    cs.add_argument("--teacher", choices=("offline", "openai"), default="offline",
                    help="offline: annotations + templates, no LLM; openai: a teacher behind an OpenAI-compatible server")
    cs.add_argument("--base-url", default=None, help="teacher server URL (env OPENAI_BASE_URL)")
    cs.add_argument("--model", default=None, help="teacher model name (default: the one the server serves)")
    cs.add_argument("--api-key", default=None, help="teacher key (env OPENAI_API_KEY)")
    cs.add_argument("--max-new-tokens", type=int, default=512, help="token budget of one teacher reply")
    cs.add_argument("--tokenizer", default=None,
                    help="the TARGET policy's tokenizer (name or folder) to cut observations with, as at inference")
    cs.add_argument("--corpus", type=Path, default=None, help="corpus.jsonl (default: the mini-wiki)")
    cs.add_argument("--shards", type=Path, default=None, help="shard folder (default: the mini-wiki's, if built)")
    cs.add_argument("--timeout", type=float, default=config.DEFAULT_TIMEOUT_S, help="seconds per command")
    cs.add_argument("--max-obs-tokens", type=int, default=config.DEFAULT_MAX_OBS_TOKENS,
                    help="observation cap in tokens: tool outputs are cut there and the system prompt says so "
                         "(use the cap the policy will be trained and evaluated with)")
    cs.add_argument("--seed", type=int, default=0, help="seed of the random choices (default: 0)")
    cs.add_argument("--dev-percent", type=float, default=10.0, help="share of question ids held out as dev")
    cs.add_argument("--probe-rate", type=float, default=0.25, help="share of hops that count matches first")
    cs.add_argument("--fill-budget-rate", type=float, default=0.5,
                    help="share of questions whose trajectory spends all tool calls (dead ends replayed, a count "
                         "per hop) when the chain ran enough commands; teaches the turn after the budget message")
    cs.add_argument("--fill-with", choices=FILL_WITH, default="counts",
                    help="what those trajectories spend their spare calls on: a count before each hop's read, or "
                         "searches for names from the question the corpus lacks (no counts) (default: %(default)s)")
    cs.add_argument("--single-hops", action="store_true",
                    help="add each MuSiQue question's last hop (earlier answers written in) as a single-hop question, "
                         "so the data shows answering from the first passage read (the training splits are multi-hop)")
    cs.add_argument("--detour-rate", type=float, default=0.5,
                    help="share of hops in the other trajectories that first replay one search that failed "
                         "(printed nothing or missed the evidence), so the agent learns to change course")
    cs.add_argument("--zero-count-rate", type=float, default=0.0,
                    help="share of replayed searches that printed nothing which are replayed as a count "
                         "(`| wc -l` prints 0), so the agent learns that a count of 0 calls for a different search")
    cs.add_argument("--other-name-rate", type=float, default=OTHER_NAME_RATE,
                    help="share of first hops that open with a count of 0 on a name from the question the corpus "
                         "lacks, then search the name that verified (default: %(default)s)")
    cs.add_argument("--blind-guess-rate", type=float, default=BLIND_GUESS_RATE,
                    help="share of hops from the question that first try a name read off the question alone "
                         "(answer-blind, often printing nothing), widened by execution (default: %(default)s)")
    cs.add_argument("--phrase-first-rate", type=float, default=PHRASE_FIRST_RATE,
                    help="share of hops from the question that first search the question's words just before the "
                         "name, widened by execution back to the name (default: %(default)s)")
    cs.add_argument("--repeat-recovery-rate", type=float, default=REPEAT_RECOVERY_RATE,
                    help="share of trajectories that replay, after a call that printed a passage, the same command "
                         "again as a no-loss turn the tool refuses, then go on (default: %(default)s)")
    cs.add_argument("--max-hops", type=int, default=3, help="most sub-questions per question, 1-5 (default: 3)")
    cs.set_defaults(func=coldstart_command)


def _check_args(args) -> Path:
    """Every option, checked before any corpus pass or model load; returns the output folder."""
    positive("--limit", args.limit)
    positive("--max-new-tokens", args.max_new_tokens)
    positive("--timeout", args.timeout)
    positive("--max-obs-tokens", args.max_obs_tokens)
    fraction("--dev-percent", args.dev_percent, 100)
    for flag in ("--probe-rate", "--fill-budget-rate", "--detour-rate", "--zero-count-rate",
                 "--other-name-rate", "--blind-guess-rate", "--phrase-first-rate",
                 "--repeat-recovery-rate"):
        fraction(flag, getattr(args, flag[2:].replace("-", "_")))
    if not 1 <= args.max_hops <= 5:
        raise UserError(f"--max-hops must be between 1 and 5, got {args.max_hops}")
    if args.teacher == "offline" and (args.base_url or args.model or args.api_key):
        raise UserError("--base-url / --model / --api-key need --teacher openai")
    if not any(s.strip() for s in args.splits.split(",")):
        raise UserError("--splits is empty; name at least one benchmark, e.g. hotpotqa_train")
    if args.tokenizer:
        model_name(args.tokenizer, "--tokenizer")
    return writable_dir(args.out or config.data_dir() / "coldstart")


def coldstart_command(args) -> int:
    out = _check_args(args)
    tokenizer = None
    if args.tokenizer:
        tokenizer = load_tokenizer(args.tokenizer)
    teacher = Teacher(args.teacher, args.base_url, args.model, args.api_key, args.max_new_tokens)
    settings = ColdStartSettings(seed=args.seed, probe_rate=args.probe_rate, fill_budget_rate=args.fill_budget_rate,
                                 fill_with=args.fill_with, single_hops=args.single_hops,
                                 detour_rate=args.detour_rate, zero_count_rate=args.zero_count_rate,
                                 other_name_rate=args.other_name_rate, blind_guess_rate=args.blind_guess_rate,
                                 phrase_first_rate=args.phrase_first_rate,
                                 repeat_recovery_rate=args.repeat_recovery_rate,
                                 max_hops=args.max_hops, dev_percent=args.dev_percent, timeout=args.timeout,
                                 max_obs_tokens=args.max_obs_tokens)
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    result = build_coldstart(splits, out, corpus=args.corpus, shards=args.shards, limit=args.limit,
                             tokenizer=tokenizer, teacher=teacher, settings=settings)
    print(format_table(result.report))
    print(f"train {result.sizes['train']} / dev {result.sizes['dev']} trajectories in {out}; "
          f"{result.processed} questions processed in {result.wall_s:.1f} s ({result.resumed} resumed)")
    return 0
