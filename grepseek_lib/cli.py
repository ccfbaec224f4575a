"""The `grepseek` command: a thin dispatcher; each package registers its own sub-commands."""

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
    "grepseek_lib.coldstart.cli",
    "grepseek_lib.train.cli",
    "grepseek_lib.bench.cli",
    "grepseek_lib.pipeline",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grepseek", description=__doc__)
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
