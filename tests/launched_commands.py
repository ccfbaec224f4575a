"""Run several `grepseek` command lines, one after another, inside ONE launched process group.

tests/test_accelerate.py starts this under `accelerate launch` so the processes (and their process group) start
once for SFT, resumed SFT and GRPO: each argument is one command line, run by the same `grepseek` entry point
a user's `accelerate launch -m grepseek_lib.cli ...` runs. With WRITE_LOG set, an audit hook (it observes,
changes nothing) lists every file this rank opens for writing in WRITE_LOG-rank<R>.txt, so the test can see
which rank wrote which final file. Not a test module (no test_ prefix)."""

from __future__ import annotations

import os
import shlex
import sys

from grepseek_lib.cli import main

WRITE_MODES = ("w", "a", "x", "+")


def log_writes(path: str) -> None:
    """Append the path of every file opened for writing (Python-level opens) to `path`."""
    log = open(path, "a", buffering=1)  # noqa: SIM115 -- open for the whole process

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], str) and args[0] != path:
            mode = args[1] if isinstance(args[1], str) else ""
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            if any(m in mode for m in WRITE_MODES) or flags & (os.O_WRONLY | os.O_RDWR):
                log.write(os.path.abspath(args[0]) + "\n")

    sys.addaudithook(hook)


if __name__ == "__main__":
    if os.environ.get("WRITE_LOG"):
        log_writes(f"{os.environ['WRITE_LOG']}-rank{os.environ.get('RANK', '0')}.txt")
    for line in sys.argv[1:]:
        code = main(shlex.split(line))
        if code:
            sys.exit(code)
