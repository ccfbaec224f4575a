"""How the index's block size trades candidate bytes against index size (docs/INDEX.md, "Block size").

For each block size: build the index of the corpus into a scratch folder beside it, then time the
selective rows of `grepseek bench engine` through the index path alone (sequential timed once, first),
with every output checked against the sequential one. Prints one table: build time, peak RSS of the
build, index size, and per size the geometric-mean speed-up and total candidate bytes.

    .venv/bin/python scripts/index_block_sweep.py --corpus data/scaled/corpus-1200mb.jsonl --kib 32 8 4 2
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from grepseek_lib.bench.engine import SELECTIVE
from grepseek_lib.shell.index import load_index
from grepseek_lib.shell.indexed import IndexPath
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import run_pipeline


def median_ms(run, repeats: int) -> tuple[float, bytes]:
    times, out = [], b""
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, out


def build(corpus: Path, kib: int, out: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in GB, index bytes) of one build in a fresh process (so its RSS is its own)."""
    shutil.rmtree(out, ignore_errors=True)
    code = ("import resource, sys; from grepseek_lib.shell.index_build import build_index; "
            "build_index(sys.argv[1], sys.argv[2], block_bytes=int(sys.argv[3]) << 10); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, str(corpus), str(out), str(kib)],
                          capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    return seconds, int(done.stdout.split()[-1]) / 2**20, sum(f.stat().st_size for f in out.iterdir())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--kib", type=int, nargs="+", default=[32, 8, 4, 2])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    pipes = [parse_command(p.command) for p in SELECTIVE]
    plain = [median_ms(lambda p=p: run_pipeline(p, corpus, timeout=120, max_output_bytes=None).stdout,
                       args.repeats) for p in pipes]
    print("| block | blocks | build s | peak RSS GB | index MB | % of corpus | candidate MB (sum) | geomean vs sequential |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kib in args.kib:
        out = corpus.parent / f"{corpus.stem}.sweep{kib}k.index"
        seconds, rss, size = build(corpus, kib, out)
        path = IndexPath(load_index(out, corpus), corpus)
        ratios, candidate = [], 0
        for pipe, (seq_ms, seq_out) in zip(pipes, plain, strict=True):
            chosen = path.choose(pipe)
            if isinstance(chosen, str):
                ms, out_bytes = median_ms(lambda p=pipe: run_pipeline(p, corpus, timeout=120,
                                                                      max_output_bytes=None).stdout, args.repeats)
            else:
                candidate += chosen.nbytes
                ms, out_bytes = median_ms(lambda p=pipe, c=chosen, x=path: x.run(p, c, 120, None).stdout, args.repeats)
            if out_bytes != seq_out:
                raise SystemExit(f"output differs from sequential: {pipe.text}")
            ratios.append(seq_ms / ms)
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        manifest = path.index.manifest
        print(f"| {kib} KiB | {manifest.blocks} | {seconds:.1f} | {rss:.2f} | {size / 1e6:.0f} | "
              f"{size / manifest.size:.1%} | {candidate / 1e6:.1f} | {geomean:.1f}x |", flush=True)
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
