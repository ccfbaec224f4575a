"""`grepseek data build` (the mini-wiki, or an import of real wiki-18 + FlashRAG) and `grepseek data scale`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grepseek_lib import config
from grepseek_lib.checks import positive, writable_dir, writable_file
from grepseek_lib.data.raw import check_raw_dir
from grepseek_lib.errors import UserError


def _default_card(out: Path) -> Path:
    # The committed card describes the default mini-wiki only; other builds keep theirs next to the data.
    if out.expanduser().resolve() == config.miniwiki_dir().resolve():
        return config.data_dir() / "README.md"
    return out / "README.md"


def _build(args: argparse.Namespace) -> int:
    out = writable_dir(Path(args.out) if args.out else config.miniwiki_dir())
    if args.corpus_from or args.benchmarks_from:
        from grepseek_lib.data.importer import import_benchmarks, import_corpus

        if args.corpus_from and not Path(args.corpus_from).expanduser().is_file():
            raise UserError(f"--corpus-from {args.corpus_from}: no such file (a wiki-18 .jsonl or DPR .tsv)")
        stats: dict = {"mode": "import"}
        if args.corpus_from:
            stats["corpus"] = import_corpus(Path(args.corpus_from), out)
        if args.benchmarks_from:
            stats["benchmarks"] = import_benchmarks(Path(args.benchmarks_from), out)
        (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(stats, indent=2))
        return 0
    from grepseek_lib.data.build import build_miniwiki

    raw = Path(args.raw).expanduser() if args.raw else config.raw_dir()
    check_raw_dir(raw)
    card = writable_file(Path(args.card) if args.card else _default_card(out), "--card")
    build_miniwiki(raw, out, card=card)
    print(f"data card: {card}")
    return 0


def _scale(args: argparse.Namespace) -> int:
    positive("--size-mb", args.size_mb)
    corpus = Path(args.corpus).expanduser() if args.corpus else config.default_corpus()
    if not corpus.is_file():
        raise UserError(f"corpus {corpus} does not exist; run `grepseek data build` or pass --corpus FILE")
    size = f"{args.size_mb:g}".replace(".", "p")
    out = writable_file(Path(args.out) if args.out else corpus.with_name(f"{corpus.stem}_{size}mb.jsonl"))
    from grepseek_lib.data.scale import scale_corpus

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
                       help="import the FlashRAG dataset folder (nq/test.jsonl, hotpotqa/dev.jsonl, ...)")
    build.set_defaults(func=_build)

    scale = sub.add_parser("scale", help="make a larger corpus of about N MB from the mini-wiki, for latency runs")
    scale.add_argument("--size-mb", type=float, required=True, help="target size in MB")
    scale.add_argument("--corpus", help="source corpus (default: $GREPSEEK_CORPUS or data/miniwiki/corpus.jsonl)")
    scale.add_argument("--out", help="output file (default: next to the corpus, <stem>_<N>mb.jsonl)")
    scale.set_defaults(func=_scale)
