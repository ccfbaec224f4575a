"""`grepseek data build` (the mini-wiki, or an import of real wiki-18 + FlashRAG) and `grepseek data scale`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grepseek_lib import config
from grepseek_lib.checks import positive, writable_dir, writable_file
from grepseek_lib.data.prepare import prepare_data
from grepseek_lib.data.raw import check_raw_dir
from grepseek_lib.data.scale import scale_corpus
from grepseek_lib.errors import UserError


def _default_card(out: Path) -> Path:
    # The committed card describes the default mini-wiki only; other builds keep theirs next to the data.
    if out.expanduser().resolve() == config.miniwiki_dir().resolve():
        return config.data_dir() / "README.md"
    return out / "README.md"


def _build(args: argparse.Namespace) -> int:
    out = writable_dir(Path(args.out) if args.out else config.miniwiki_dir())
    splits = [s.strip() for s in (args.train_splits or "").split(",") if s.strip()]
    if args.corpus_from or args.benchmarks_from:
        sources = [Path(s).expanduser().resolve() if s else None for s in (args.corpus_from, args.benchmarks_from)]
        stats = prepare_data(out, corpus_from=sources[0], benchmarks_from=sources[1], train_splits=splits)
        print(json.dumps(stats, indent=2))
        return 0
    if splits:
        raise UserError("--train-splits needs --benchmarks-from (the mini-wiki builds its own training splits)")
    raw = Path(args.raw).expanduser() if args.raw else config.raw_dir()
    check_raw_dir(raw)
    card = writable_file(Path(args.card) if args.card else _default_card(out), "--card")
    prepare_data(out, raw=raw, card=card)
    print(f"data card: {card}")
    return 0


def _scale(args: argparse.Namespace) -> int:
    positive("--size-mb", args.size_mb)
    corpus = Path(args.corpus).expanduser() if args.corpus else config.default_corpus()
    if not corpus.is_file():
        raise UserError(f"corpus {corpus} does not exist; run `grepseek data build` or pass --corpus FILE")
    size = f"{args.size_mb:g}".replace(".", "p")
    out = writable_file(Path(args.out) if args.out else corpus.with_name(f"{corpus.stem}_{size}mb.jsonl"))

    print(scale_corpus(corpus, args.size_mb, out))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="build or import the corpus and benchmarks")
    sub = data.add_subparsers(dest="data_command", required=True)

    build = sub.add_parser(
        "build",
        help="build the mini-wiki (corpus.jsonl + benchmarks/) from the raw folder, or import real data",
        description="Build data/miniwiki from the raw QA / Wikipedia folder; with --corpus-from / "
        "--benchmarks-from, import a real wiki-18 corpus and FlashRAG datasets instead.",
    )
    build.add_argument("--raw", help="raw QA / Wikipedia folder (default: $GREPSEEK_RAW, else shared/data/raw "
                       "beside the repository folder)")
    build.add_argument("--out", help="output folder (default: data/miniwiki under $GREPSEEK_DATA or data/)")
    build.add_argument("--card", help="data card to write (default: data/README.md for the default --out, "
                       "else OUT/README.md)")
    build.add_argument("--corpus-from", metavar="FILE",
                       help="import a wiki-18 jsonl (linked) or DPR psgs_w100.tsv (converted) as the corpus")
    build.add_argument("--benchmarks-from", metavar="DIR",
                       help="import the FlashRAG dataset folder: the eval splits (nq/test.jsonl, hotpotqa/dev.jsonl, "
                       "...) and the training splits nq/train.jsonl + hotpotqa/train.jsonl when present")
    build.add_argument("--train-splits", metavar="NAMES",
                       help="more training splits to import, comma-separated <dataset>_<split> names read from "
                       "DIR/<dataset>/<split>.jsonl (e.g. musique_train); eval questions they hold are dropped")
    build.set_defaults(func=_build)

    scale = sub.add_parser("scale", help="make a larger corpus of about N MB from the mini-wiki, for latency runs")
    scale.add_argument("--size-mb", type=float, required=True, help="target size in MB")
    scale.add_argument("--corpus", help="source corpus (default: $GREPSEEK_CORPUS or data/miniwiki/corpus.jsonl)")
    scale.add_argument("--out", help="output file (default: next to the corpus, <stem>_<N>mb.jsonl)")
    scale.set_defaults(func=_scale)
