"""`grepseek coldstart`: verified Tutor/Planner trajectories -> a chat dataset for SFT, with a stats report."""

from __future__ import annotations

import json
import time
from pathlib import Path

from grepseek_lib import config
from grepseek_lib.checks import fraction, model_name, positive, writable_dir
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
    cs.add_argument("--detour-rate", type=float, default=0.5,
                    help="share of hops in the other trajectories that first replay one search that failed "
                         "(printed nothing or missed the evidence), so the agent learns to change course")
    cs.add_argument("--zero-count-rate", type=float, default=0.0,
                    help="share of replayed searches that printed nothing which are replayed as a count "
                         "(`| wc -l` prints 0), so the agent learns that a count of 0 calls for a different search")
    cs.add_argument("--max-hops", type=int, default=3, help="most sub-questions per question, 1-5 (default: 3)")
    cs.set_defaults(func=coldstart_command)


def _roles(args, passages: dict[str, str]):
    from grepseek_lib.coldstart.offline import OfflinePlanner, OfflineTutor
    from grepseek_lib.coldstart.roles import LLMPlanner, LLMTutor, TeacherClient

    if args.teacher == "offline":
        return OfflineTutor(passages, max_hops=args.max_hops), OfflinePlanner()
    from grepseek_lib.agent.backends import make_backend

    kw = {k: v for k, v in (("base_url", args.base_url), ("api_key", args.api_key)) if v is not None}
    client = TeacherClient(make_backend("openai", args.model, **kw), max_new_tokens=args.max_new_tokens)
    return LLMTutor(client, max_hops=args.max_hops), LLMPlanner(client)


def _gold_passages(corpus: Path, items) -> dict[str, str]:
    """Contents of the annotated evidence passages (one streaming pass; the offline Tutor reads them)."""
    from grepseek_lib.data.formats import iter_corpus

    wanted = set()
    for item in items:
        for ids in (item.metadata.get("gold_passages") or {}).values():
            wanted.update(str(i) for i in (ids if isinstance(ids, list) else [ids]))
    found: dict[str, str] = {}
    if wanted:
        for passage in iter_corpus(corpus):
            if passage["id"] in wanted:
                found[passage["id"]] = passage["contents"]
    return found


def _check_args(args) -> Path:
    """Every option, checked before any corpus pass or model load; returns the output folder."""
    positive("--limit", args.limit)
    positive("--max-new-tokens", args.max_new_tokens)
    positive("--timeout", args.timeout)
    positive("--max-obs-tokens", args.max_obs_tokens)
    fraction("--dev-percent", args.dev_percent, 100)
    for flag in ("--probe-rate", "--fill-budget-rate", "--detour-rate", "--zero-count-rate"):
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
    from tqdm import tqdm

    from grepseek_lib.agent.loop import corpus_lines
    from grepseek_lib.coldstart import export as ex
    from grepseek_lib.coldstart.accept import process_question
    from grepseek_lib.coldstart.roles import Item
    from grepseek_lib.data.formats import benchmark_path, load_benchmark
    from grepseek_lib.eval.runner import make_tool, resolve_corpus

    out = _check_args(args)
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    items = [Item(r["id"], r["question"], r["golden_answers"], benchmark_path(name).stem, r["metadata"])
             for name in splits for r in load_benchmark(name, args.limit)]
    corpus, shards = resolve_corpus(args.corpus, args.shards)
    tokenizer = None
    if args.tokenizer:
        from grepseek_lib.train.models import load_tokenizer

        tokenizer = load_tokenizer(args.tokenizer)
    tool = make_tool(corpus, shards, timeout=args.timeout, max_obs_tokens=args.max_obs_tokens,
                     tokenizer=tokenizer)
    n_lines = corpus_lines(tool)
    out.mkdir(parents=True, exist_ok=True)
    records_path = out / ex.RECORDS
    done = ex.load_records(records_path)
    todo = [item for item in items if (item.source, item.id) not in done]
    tutor, planner = _roles(args, _gold_passages(corpus, todo) if args.teacher == "offline" else {})
    began = time.perf_counter()
    bar = tqdm(todo, desc="coldstart", unit="q", dynamic_ncols=True)
    accepted = 0
    for item in bar:
        outcome = process_question(item, tutor, planner, tool, seed=args.seed, probe_rate=args.probe_rate,
                                   fill_budget_rate=args.fill_budget_rate, detour_rate=args.detour_rate,
                                   zero_count_rate=args.zero_count_rate)
        record = ex.make_record(item, outcome, n_lines, max_obs_tokens=tool.max_obs_tokens)
        ex.append_record(records_path, record)
        done[(item.source, item.id)] = record
        accepted += outcome.accepted
        bar.set_postfix(accepted=accepted)
    wall = time.perf_counter() - began
    ordered = [done[(item.source, item.id)] for item in items if (item.source, item.id) in done]
    sizes = ex.export(out, ordered, args.dev_percent)
    report = ex.stats(ordered)
    (out / "stats.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(ex.format_table(report))
    print(f"train {sizes['train']} / dev {sizes['dev']} trajectories in {out}; "
          f"{len(todo)} questions processed in {wall:.1f} s ({len(items) - len(todo)} resumed)")
    return 0
