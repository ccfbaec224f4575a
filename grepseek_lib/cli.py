"""The `grepseek` command: a thin dispatcher; each package registers its own sub-commands.

A mistake a user can fix (UserError) ends as one line `grepseek: error: ...` and exit 2, like argparse's own.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from grepseek_lib.errors import UserError

#: Modules exposing `register(subparsers)`; each sub-command sets `func(args) -> int`.
COMMAND_MODULES = (
    "grepseek_lib.data.cli",
    "grepseek_lib.shell.cli",
    "grepseek_lib.agent.cli",
    "grepseek_lib.eval.cli",
    "grepseek_lib.coldstart.cli",
    "grepseek_lib.train.cli",
    "grepseek_lib.bench.cli",
    "grepseek_lib.pipeline",
)


DESCRIPTION = """\
GrepSeek: a search agent that answers questions by running read-only shell pipelines (rg, grep, ...)
over a raw text corpus, and the recipe that trains and evaluates it.

Start with `grepseek data build` (the mini-wiki corpus and benchmarks), then `grepseek ask "QUESTION"`
and `grepseek eval --limit 5`. `grepseek COMMAND --help` explains each command."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grepseek", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that stage is not built yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"grepseek: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grepseek: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
