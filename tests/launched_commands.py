"""Run several `grepseek` command lines, one after another, inside ONE launched process group.

tests/test_accelerate.py starts this under `accelerate launch` so the processes (and their process group) start
once for SFT, resumed SFT and GRPO: each argument is one command line, run by the same `grepseek` entry point
a user's `accelerate launch -m grepseek_lib.cli ...` runs. Not a test module (no test_ prefix)."""

from __future__ import annotations

import shlex
import sys

from grepseek_lib.cli import main

if __name__ == "__main__":
    for line in sys.argv[1:]:
        code = main(shlex.split(line))
        if code:
            sys.exit(code)
