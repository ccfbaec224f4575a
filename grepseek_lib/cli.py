"""The `grepseek` command: a thin dispatcher; each package registers its own sub-commands.

A mistake a user can fix (UserError) ends as one line `grepseek: error: ...` and exit 2, like argparse's own.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys

from grepseek_lib.errors import UserError

#: Failures of the machine rather than of grepseek (permissions, a full or read-only disk) that a run meets
#: after its up-front checks passed: one line, not a traceback.
_ENVIRONMENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})

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
        importlib.import_module(name).register(sub)
    return parser


def one_line(text: str) -> str:
    """A message as one line (some wrap a library's multi-line error)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"grepseek: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno not in _ENVIRONMENT_ERRNOS:
            raise
        print(f"grepseek: error: {exc.strerror}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("grepseek: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
