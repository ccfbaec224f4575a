"""Where the time of an indexed command goes (docs/INDEX.md, "Results on 2026-12-05").

Part 1, process starts: the median time to start and reap `/bin/true`, this environment's `rg`, `grep`,
and `setpriv --pdeathsig KILL -- true` on a tiny file (the floor under any chain), and the runner's whole
plain chain of `rg` on it (its private folder included: index_cost.PLAIN_S). Part 2, for each
selective row of `grepseek bench engine`: the sequential run, the indexed run, and its parts: choosing
the candidate blocks, writing them to a file, and the same pipeline over an empty file (the chain's fixed
cost; with the choice, index_cost.FIXED_S). Medians of `--repeats` runs, in milliseconds.

    .venv/bin/python scripts/index_breakdown.py --corpus data/scaled/corpus-1200mb.jsonl \
        --index data/scaled/corpus-1200mb.index
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from grepseek_lib.bench.engine import SELECTIVE
from grepseek_lib.shell import folder
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import child_env, resolve_program, run_pipeline


def median_ms(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def process_starts(repeats: int) -> None:
    env = child_env()
    with tempfile.TemporaryDirectory() as scratch:
        small = Path(scratch) / "small.jsonl"
        small.write_bytes(b'{"id": "1", "contents": "Kilimanjaro is a mountain"}\n' * 50)
        setpriv = resolve_program("setpriv")
        rows = [["/bin/true"], [str(resolve_program("rg")), "-F", "Kilimanjaro", str(small)],
                [str(resolve_program("grep")), "-F", "Kilimanjaro", str(small)]]
        if setpriv:
            rows.append([setpriv, "--pdeathsig", "KILL", "--", "/bin/true"])
        print("| process | start to reap, ms |\n|---|---:|")
        for argv in rows:
            ms = median_ms(lambda argv=argv: subprocess.run(argv, stdout=subprocess.DEVNULL, env=env), repeats)
            print(f"| `{' '.join(Path(argv[0]).name if i == 0 else a for i, a in enumerate(argv[:3]))}` | {ms:.2f} |")
        plain = parse_command("rg -F Kilimanjaro corpus.jsonl")
        ms = median_ms(lambda: run_pipeline(plain, small, timeout=60, max_output_bytes=None), repeats)
        print(f"| the runner's plain chain, `rg -F Kilimanjaro` (index_cost.PLAIN_S) | {ms:.2f} |")


def selective_rows(corpus: Path, index: Path, repeats: int) -> None:
    engine = Engine(corpus, index=index)
    if engine.index_path is None:
        raise SystemExit(f"no usable index at {index}: build it with `grepseek index --corpus {corpus} --out {index}`")
    print("\n| pipeline | sequential | indexed | choose | write | empty chain | blocks | MB | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in SELECTIVE:
        print(_row(engine, corpus, row.command, repeats))


def _row(engine: Engine, corpus: Path, command: str, repeats: int) -> str:
    """One table row: the timings of `command` and of the parts of its index path."""
    path = engine.index_path
    assert path is not None
    pipeline = parse_command(command)
    shown = "`" + command.replace("|", "\\|") + "`"
    sequential = median_ms(lambda: run_pipeline(pipeline, corpus, timeout=60, max_output_bytes=None), repeats)
    chosen = path.choose(pipeline)
    if isinstance(chosen, str):
        return f"| {shown} | {sequential:.1f} | declined: {chosen} | | | | | | |"

    def write() -> None:
        with folder.empty_run_folder() as made:
            fd = os.open(made.work / "corpus.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                path._append(fd, chosen.blocks)
            finally:
                os.close(fd)

    def empty_chain() -> None:
        with folder.empty_run_folder() as made:
            (made.work / "corpus.jsonl").write_bytes(b"")
            run_pipeline(pipeline, made.work / "corpus.jsonl", timeout=60, max_output_bytes=None, folder=made)

    indexed = median_ms(lambda: engine.run(pipeline, timeout=60), repeats)
    parts = [median_ms(lambda: path.choose(pipeline), repeats), median_ms(write, repeats),
             median_ms(empty_chain, repeats)]
    return (f"| {shown} | {sequential:.1f} | {indexed:.1f} | " + " | ".join(f"{p:.2f}" for p in parts)
            + f" | {len(chosen.blocks)} | {chosen.nbytes / 1e6:.2f} | {sequential / indexed:.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if not args.corpus.is_file():
        raise SystemExit(f"no corpus at {args.corpus}: make one with `grepseek data scale --size-mb 1200`")
    process_starts(max(args.repeats, 51))
    selective_rows(args.corpus, args.index, args.repeats)


if __name__ == "__main__":
    main()
