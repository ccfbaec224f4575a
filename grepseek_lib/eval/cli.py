"""`grepseek eval`: the agent over benchmarks -> per-question records and EM / F1 tables in one folder.

Everything a run needs is checked before the model loads and before OUT is touched, so a refused run leaves
OUT as it was; OUT/settings.json then records what the run is (eval/identity.py) and a rerun resumes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.cli import add_agent_options, add_constrained_option, backend_kwargs, check_agent_args
from grepseek_lib.agent.hf_backend import weights_dtype
from grepseek_lib.checks import positive, writable_dir
from grepseek_lib.errors import UserError
from grepseek_lib.eval.bm25 import DEFAULT_TOP_K, evaluate_baseline
from grepseek_lib.eval.identity import SETTINGS, check_and_record, read_identity, run_identity
from grepseek_lib.eval.runner import (
    RECORDS,
    TABLE_MD,
    evaluate,
    markdown_table,
    plan_questions,
)
from grepseek_lib.shell.open import resolve_corpus


def register(subparsers) -> None:
    ev = subparsers.add_parser(
        "eval", help="run the agent over benchmarks; write records and EM / F1 tables",
        description="Run the search agent over QA benchmarks and score its answers (exact match, F1). "
                    f"OUT gets records.jsonl (one line a question), trajectories.jsonl, {TABLE_MD} / table.csv "
                    f"and {SETTINGS}; rerunning with the same OUT and settings resumes where it stopped.")
    add_agent_options(ev)
    add_constrained_option(ev, default=False,
                           why=f"default off, so the scores measure the model itself; saved in OUT/{SETTINGS}")
    ev.add_argument("--benchmarks", default=",".join(config.BENCHMARKS),
                    help="comma-separated names from `grepseek data build` (default: all seven), or FlashRAG "
                         "files: .../nq/test.jsonl is named nq")
    ev.add_argument("--limit", type=int, default=50, help="questions per benchmark, the first N (default: 50)")
    ev.add_argument("--out", type=Path, default=None,
                    help="output folder (default: runs/eval); a rerun with the same settings resumes")
    ev.add_argument("--batch-size", type=int, default=8, help="episodes stepped together (one batched generate)")
    ev.add_argument("--system", choices=("agent", "bm25"), default="agent",
                    help="agent: the search agent (default); bm25: the index baseline, BM25's top --k passages "
                         "read once by the same model, on the same questions")
    ev.add_argument("--k", type=int, default=DEFAULT_TOP_K, help=f"passages the bm25 baseline reads "
                                                                  f"(default: {DEFAULT_TOP_K})")
    ev.set_defaults(func=eval_command)


def model_identity(model: str) -> str:
    """A model folder by its absolute path (the same folder named two ways is one model); other names as given."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.is_dir() else model.strip()


def identity(args: argparse.Namespace, corpus: Path, shards: Path | None) -> dict[str, Any]:
    """What OUT/settings.json records and a resume must match (eval/identity.py compares it)."""
    return run_identity(corpus, shards, timeout=args.timeout, max_context_tokens=args.max_context_tokens,
                        max_new_tokens=args.max_new_tokens, max_obs_tokens=args.max_obs_tokens,
                        max_output_bytes=config.DEFAULT_MAX_OUTPUT_BYTES, max_tool_calls=args.max_tool_calls,
                        temperature=args.temperature, redraw_repeats=args.redraw_repeats,
                        model=model_identity(args.model), backend=args.backend,
                        constrained=bool(args.constrained), system=args.system,
                        k=args.k if args.system == "bm25" else None,
                        hf_dtype=weights_dtype() if args.backend == "hf" else None)


def eval_command(args: argparse.Namespace) -> int:
    check_agent_args(args)
    positive("--limit", args.limit)
    positive("--batch-size", args.batch_size)
    positive("--k", args.k)
    if args.system == "bm25" and args.constrained:
        raise UserError("--constrained is the agent's protocol grammar; the bm25 reader answers in its own format")
    benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    if not benchmarks:
        raise UserError("--benchmarks is empty; give names such as nq,hotpotqa")
    out = writable_dir(args.out or config.runs_dir() / "eval")
    plan_questions(benchmarks, args.limit)  # a missing, empty or clashing benchmark fails here, not mid-run
    corpus, shards = resolve_corpus(args.corpus, args.shards)
    if read_identity(out) is None and (out / RECORDS).is_file():
        print(f"grepseek: note: {out} holds records but no {SETTINGS} (made by the library or an older grepseek); "
              "resuming them under this run's settings", file=sys.stderr)
    check_and_record(out, identity(args, corpus, shards))
    if args.system == "bm25":
        table = evaluate_baseline(args.model, benchmarks, args.limit, out, corpus=corpus, k=args.k,
                                  backend_kind=args.backend, batch_size=args.batch_size,
                                  backend_kwargs=backend_kwargs(args))
        print(markdown_table(table), end="")
        print(f"records and table in {out}")
        return 0
    table = evaluate(args.model, args.backend, benchmarks, args.limit, out, batch_size=args.batch_size,
                     corpus=corpus, shards=shards, temperature=args.temperature, redraws=args.redraw_repeats,
                     max_new_tokens=args.max_new_tokens, max_context_tokens=args.max_context_tokens,
                     max_tool_calls=args.max_tool_calls, timeout=args.timeout, max_obs_tokens=args.max_obs_tokens,
                     backend_kwargs=backend_kwargs(args))
    print(markdown_table(table), end="")
    print(f"records, trajectories and tables in {out}")
    return 0
