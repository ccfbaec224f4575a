"""Where a policy's repeated commands come from, next to the moves its cold-start data teaches.

For agent episodes (format-check, eval or `ask` trajectories): how many episodes repeat a command and
whether the output just before the first repeat was empty or printed. For cold-start data: what follows
each call (a count or a read that printed or not, then the same search or a new one).

    python scripts/repeat_context.py --episodes runs/exp26/fc60_192/format_check_episodes.jsonl \
        --coldstart runs/exp26/coldstart/train.jsonl
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from grepseek_lib.agent.evidence import first_repeat_after, next_moves
from grepseek_lib.agent.trajectory import load_jsonl
from grepseek_lib.errors import UserError
from grepseek_lib.inspector.load import chat_trajectory
from grepseek_lib.train.sft import load_chat_rows


def episode_table(path: Path) -> str:
    trajectories = load_jsonl(path)
    after = Counter(first_repeat_after(t) for t in trajectories)
    repeating = len(trajectories) - after.pop(None, 0)
    return (f"{path}: {repeating} of {len(trajectories)} episodes repeat a command; the output before the "
            f"first repeat was empty {after['empty']}, printed {after['printed']}")


def coldstart_table(path: Path) -> str:
    moves: Counter = Counter()
    for row in load_chat_rows(path):
        moves += next_moves(chat_trajectory(row["messages"], question="", qid=row["id"], golds=[], meta={}))
    lines = [f"{path}: the call after each call ({sum(moves.values())} pairs)"]
    lines += [f"  after a {kind} that {printed}: {same} {n}" for (printed, kind, same), n in sorted(moves.items())]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=Path, nargs="*", default=[], help="Trajectory JSONL files")
    parser.add_argument("--coldstart", type=Path, nargs="*", default=[], help="cold-start chat JSONL (train.jsonl)")
    args = parser.parse_args()
    if not args.episodes and not args.coldstart:
        parser.error("give --episodes and/or --coldstart")
    for path in [*args.episodes, *args.coldstart]:
        if not path.is_file():
            parser.error(f"not a file: {path}")
    try:
        for path in args.episodes:
            print(episode_table(path))
        for path in args.coldstart:
            print(coldstart_table(path))
    except UserError as exc:
        parser.exit(2, f"error: {exc}\n")


if __name__ == "__main__":
    main()
