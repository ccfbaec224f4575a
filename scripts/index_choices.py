"""Which replayed commands the index takes, and why it declines the others (docs/INDEX.md, 2026-12-06).

Only the decision (`IndexPath.choose`), no timing: it runs in seconds and can be read while other work
loads the machine. The commands are those `make bench` replays (the cold-start chat data).

    .venv/bin/python scripts/index_choices.py --corpus data/scaled/corpus-1200mb.jsonl \
        --index data/scaled/corpus-1200mb.index --chat data/coldstart/train.jsonl
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from grepseek_lib.bench.replay import commands_from_chat
from grepseek_lib.errors import UserError
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.types import Refused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--chat", type=Path, nargs="+", required=True, help="cold-start chat JSONL file(s)")
    args = parser.parse_args()
    try:
        index_path = Engine(args.corpus, index=args.index).index_path
    except UserError as exc:
        parser.error(str(exc))
    if index_path is None:
        parser.error(f"no index at {args.index}")
    commands = commands_from_chat(args.chat)
    reasons: Counter[str] = Counter()
    declined = []
    for command in commands:
        try:
            chosen = index_path.choose(parse_command(command))
        except Refused as exc:
            reasons[f"refused: {exc}"] += 1
            continue
        if isinstance(chosen, str):
            reasons[chosen.split(":")[0]] += 1
            declined.append((chosen, command))
        else:
            reasons["index"] += 1
    print(f"{len(commands)} distinct commands")
    for reason, count in reasons.most_common():
        print(f"{count:5d}  {reason}")
    for reason, command in declined:
        print(f"declined: {reason[:60]:60s}  {command[:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
