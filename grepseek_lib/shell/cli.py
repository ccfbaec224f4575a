"""`grepseek run`: one pipeline over the corpus, printed exactly as `bash -c` would print it.

Stdout and stderr are the pipeline's own and the exit status is the last stage's, as `bash -c PIPELINE`
run with LC_ALL=C in a folder holding only the corpus as corpus.jsonl. A refusal exits 126 with one
`refused:` line, a timeout exits 124 with a `timeout:` line. A stage killed by a limit adds one
`note:` line on stderr. Sequential runs stream (memory stays flat on `cat corpus.jsonl`); `--shards`
goes through the parallel engine and, without --corpus, runs over the corpus the shards were cut from.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

from grepseek_lib import config
from grepseek_lib.errors import UserError
from grepseek_lib.shell.index import default_index_dir
from grepseek_lib.shell.index_build import BLOCK_BYTES, build_index
from grepseek_lib.shell.limits import check_max_output_bytes, check_timeout
from grepseek_lib.shell.policy import parse_command, refusal_line
from grepseek_lib.shell.runner import run_pipeline, timeout_line
from grepseek_lib.shell.shards import build_shards, default_shards_dir, read_manifest
from grepseek_lib.shell.signals import terminate_on_signals
from grepseek_lib.shell.tool import load_engine
from grepseek_lib.shell.types import EXIT_REFUSED, EXIT_TIMEOUT, Refused, RunResult


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run one read-only pipeline over the corpus (exactly what bash would print)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    parser.set_defaults(func=run_main)
    register_shard(subparsers)
    register_index(subparsers)


def register_index(subparsers: argparse._SubParsersAction) -> None:
    """`grepseek index`: the word index that lets selective searches read a few blocks (shell/index.py)."""
    parser = subparsers.add_parser(
        "index", help="build the word index of the corpus (selective rg/grep read only candidate blocks)")
    parser.add_argument("--corpus", type=Path, default=None, help="corpus file (default: the mini-wiki corpus, or env GREPSEEK_CORPUS)")
    parser.add_argument("--out", type=Path, default=None,
                        help="index folder (default: index/ next to corpus.jsonl, else <stem>.index/; "
                             "found there automatically by `run`, the agent's tool and the engine)")
    parser.add_argument("--block-kib", type=int, default=BLOCK_BYTES >> 10,
                        help=f"target block size in KiB (default {BLOCK_BYTES >> 10}; smaller blocks: fewer "
                             "candidate bytes per rare word, larger postings)")
    parser.set_defaults(func=index_main)


def index_main(args: argparse.Namespace) -> int:
    corpus = resolve_corpus(args.corpus)
    if args.block_kib < 1:
        raise UserError(f"--block-kib must be at least 1, got {args.block_kib}")
    with terminate_on_signals():
        m = build_index(corpus, args.out or default_index_dir(corpus), block_bytes=args.block_kib << 10)
    size = sum(f.stat().st_size for f in m.directory.iterdir())
    print(f"index of {corpus} ({m.size} bytes, {m.blocks} blocks of ~{m.block_bytes >> 10} KiB, {m.words} words) "
          f"in {m.directory}: {size / 1e6:.1f} MB ({size / max(1, m.size):.1%} of the corpus), built in {m.build_s:g} s")
    return 0


def register_shard(subparsers: argparse._SubParsersAction) -> None:
    """`grepseek shard`: line-aligned shards + manifest for the parallel engine (shell/shards.py)."""
    parser = subparsers.add_parser(
        "shard", help="cut the corpus into N line-aligned shards with a manifest (for `run --shards`)")
    parser.add_argument("--corpus", type=Path, default=None, help="corpus file (default: the mini-wiki corpus, or env GREPSEEK_CORPUS)")
    parser.add_argument("--shards", type=int, required=True, help="number of shards (e.g. the number of cores)")
    parser.add_argument("--out", type=Path, default=None,
                        help="shard folder (default: shards/ next to corpus.jsonl, else <stem>.shards/)")
    parser.set_defaults(func=shard_main)


def shard_main(args: argparse.Namespace) -> int:
    corpus = resolve_corpus(args.corpus)
    with terminate_on_signals():
        manifest = build_shards(corpus, args.shards, args.out or default_shards_dir(corpus))
    lines = sum(s.lines for s in manifest.shards)
    made = len(manifest.shards)
    capped = f" (not {args.shards}: a shard holds whole lines and is never empty)" if made < args.shards else ""
    print(f"{made} shards{capped} of {corpus} ({manifest.size} bytes, {lines} lines, "
          f"sha256 {manifest.sha256[:12]}) in {manifest.directory}")
    return 0


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `grepseek run` (kept separate so other commands can reuse them)."""
    parser.add_argument("--corpus", type=Path, default=None,
                        help="corpus file, seen by the pipeline as corpus.jsonl (default: the mini-wiki corpus, or env "
                             "GREPSEEK_CORPUS; with --shards: the corpus the shards were cut from)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--shards", type=Path, default=None, help="shard folder for the parallel engine")
    mode.add_argument("--sequential", action="store_true", help="one process chain over the whole corpus")
    index = parser.add_mutually_exclusive_group()
    index.add_argument("--index", type=Path, default=None,
                       help="index folder (grepseek index); default: index/ beside the corpus or the shards, if any")
    index.add_argument("--no-index", action="store_true", help="never use an index")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="where shards run: local threads, or one Ray actor per shard (needs --shards)")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster address for --executor ray (default: RAY_ADDRESS, else a local instance)")
    parser.add_argument("--timeout", type=float, default=config.DEFAULT_TIMEOUT_S,
                        help=f"seconds before the whole chain is killed (exit 124), at most {config.MAX_TIMEOUT_S:g}")
    parser.add_argument("--max-output-bytes", type=int, default=None,
                        help="stop after this many stdout bytes, at least 1 (exit 141); default: no cap, streamed")
    parser.add_argument("pipeline", help="the pipeline, e.g. \"rg -m 5 'Eiffel Tower' corpus.jsonl | head\"")


def resolve_corpus(path: Path | None) -> Path:
    corpus = Path(path) if path is not None else config.default_corpus()
    if not corpus.is_file():
        raise UserError(f"corpus not found: {corpus}; build it with `grepseek data build` or pass --corpus FILE")
    return corpus


def run_main(args: argparse.Namespace) -> int:
    if args.sequential and args.index is not None:
        raise UserError("--sequential runs one chain over the whole corpus and reads no index; drop --index, "
                        "or drop --sequential to let the index narrow the search")
    check_timeout(args.timeout)
    check_max_output_bytes(args.max_output_bytes)
    corpus = resolve_corpus(args.corpus if args.corpus is not None or args.shards is None
                            else Path(read_manifest(args.shards).source))
    try:
        pipeline = parse_command(args.pipeline)
    except Refused as exc:
        print(refusal_line(exc), file=sys.stderr)
        return EXIT_REFUSED
    out, err = sys.stdout.buffer, sys.stderr.buffer
    sys.stdout.flush()
    with terminate_on_signals():
        index = False if args.no_index else args.index
        engine = None if args.sequential else load_engine(corpus, args.shards, index, args.executor,
                                                          args.ray_address)
        runner = engine.run if engine is not None else functools.partial(run_pipeline, corpus=corpus)
        result: RunResult = runner(pipeline, timeout=args.timeout, max_output_bytes=args.max_output_bytes,
                                   stdout_sink=out, stderr_sink=err)
    try:
        out.flush()
    except BrokenPipeError:
        result.truncated = True
    if result.truncated and args.max_output_bytes is None:  # our reader went away (`| head`): be quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return result.exit_code
    if result.timed_out:
        print(timeout_line(args.timeout), file=sys.stderr)
        return EXIT_TIMEOUT
    if result.truncated:
        print(f"note: output cut at --max-output-bytes {args.max_output_bytes}; the pipeline was stopped",
              file=sys.stderr)
    return result.exit_code
